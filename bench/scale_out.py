#!/usr/bin/env python3
"""The cost of shared state (`decoy serve --state redis://...`), measured.

    python3 bench/scale_out.py [--decoy target/release/decoy] [--duration 5] [--rounds 3] [--json FILE]

Scenarios, each run round by round in turn (A, B, A, B, ...) so a busy machine's
drift hits both alike; medians and ratios are printed:

- static: one stub, one instance, without --state (A) and with it (B): a static
  stub never touches Redis, so B/A should be ~1 (target >= 0.95);
- scenario: a scenario stub that moves its scenario on every request (a two-state
  cycle), in process (A) and through Redis (B): throughput ratio and p99;
- haproxy: one instance behind HAProxy (A) and three behind it round-robin (B), all
  with --state, on the static and the scenario stub. On a 2-core machine shared with
  the load generator this shows the overhead of more processes, not scaling;
- redis cost: Redis's own time per scenario request (INFO commandstats, the Lua
  script's usec_per_call), which bounds what one Redis serves (1e6 / usec per
  second, single-threaded) however many instances share it.

Needs wrk, redis-server and haproxy (Debian packages). All load is on 127.0.0.1 and
bounded by wrk's duration.
"""
import argparse
import json
import pathlib
import socket
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import bench  # noqa: E402  (the shared helpers: free ports, wrk, servers)


def redis_cli(port, *args):
    """One command over RESP; returns the raw reply text."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        parts = [f"*{len(args)}\r\n"] + [f"${len(a.encode())}\r\n{a}\r\n" for a in args]
        s.sendall("".join(parts).encode())
        data = b""
        s.settimeout(1)
        while True:
            try:
                chunk = s.recv(65536)
            except socket.timeout:
                break
            if not chunk:
                break
            data += chunk
            if data.endswith(b"\r\n") and (data[:1] != b"$" or data.count(b"\r\n") >= 2):
                break
        return data.decode(errors="replace")


def start_redis(port):
    proc = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(200):
        try:
            if "PONG" in redis_cli(port, "PING"):
                return proc
        except OSError:
            pass
        time.sleep(0.05)
    raise SystemExit("redis-server did not start")


def start_haproxy(base, port, backends):
    cfg = base / f"haproxy-{port}.cfg"
    lines = ["global", "  maxconn 4096", "defaults", "  mode http", "  timeout connect 5s",
             "  timeout client 30s", "  timeout server 30s", "frontend lb", f"  bind 127.0.0.1:{port}",
             "  default_backend decoys", "backend decoys", "  balance roundrobin"]
    lines += [f"  server d{i} 127.0.0.1:{b}" for i, b in enumerate(backends)]
    cfg.write_text("\n".join(lines) + "\n")
    proc = subprocess.Popen(["haproxy", "-db", "-f", str(cfg)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(200):
        if bench.http_status(port, "/static") is not None:
            return proc
        time.sleep(0.05)
    raise SystemExit("haproxy did not start")


def make_root(base):
    root = base / "root"
    (root / "mappings").mkdir(parents=True)
    (root / "__files").mkdir()
    (root / "mappings" / "static.json").write_text(json.dumps(
        {"request": {"method": "GET", "url": "/static"}, "response": {"status": 200, "body": "static"}}))
    cycle = [
        {"scenarioName": "bench", "requiredScenarioState": "Started", "newScenarioState": "other",
         "request": {"method": "GET", "url": "/scenario"}, "response": {"status": 200, "body": "a"}},
        {"scenarioName": "bench", "requiredScenarioState": "other", "newScenarioState": "Started",
         "request": {"method": "GET", "url": "/scenario"}, "response": {"status": 200, "body": "b"}},
    ]
    (root / "mappings" / "scenario.json").write_text(json.dumps({"mappings": cycle}))
    return root


def run(args):
    base = pathlib.Path(tempfile.mkdtemp(prefix="decoy-scale-bench-"))
    root = make_root(base)
    redis_port = bench.free_port()
    redis = start_redis(redis_port)
    state = ["--state", f"redis://127.0.0.1:{redis_port}/0", "--no-watch"]
    d = args.duration
    results = {"duration_s": d, "rounds": args.rounds}
    servers = []

    def decoy(*extra):
        s = bench.decoy(root, bench.free_port(), *extra, exe=args.decoy).start()
        servers.append(s)
        return s

    try:
        plain = decoy("--no-watch")
        shared = decoy(*state)
        # Three more sharing instances and two HAProxies: one backend, three backends.
        trio = [shared] + [decoy(*state) for _ in range(2)]
        lb1_port, lb3_port = bench.free_port(), bench.free_port()
        lb1 = start_haproxy(base, lb1_port, [shared.port])
        lb3 = start_haproxy(base, lb3_port, [s.port for s in trio])
        rows = {k: [] for k in ["static-a", "static-b", "scenario-a", "scenario-b",
                                "lb1-static", "lb3-static", "lb1-scenario", "lb3-scenario"]}
        for r in range(args.rounds):
            rows["static-a"].append(bench.wrk(plain.port, "/static", duration=d, connections=32))
            rows["static-b"].append(bench.wrk(shared.port, "/static", duration=d, connections=32))
            rows["scenario-a"].append(bench.wrk(plain.port, "/scenario", duration=d, connections=32))
            rows["scenario-b"].append(bench.wrk(shared.port, "/scenario", duration=d, connections=32))
            rows["lb1-static"].append(bench.wrk(lb1_port, "/static", duration=d, connections=32))
            rows["lb3-static"].append(bench.wrk(lb3_port, "/static", duration=d, connections=32))
            rows["lb1-scenario"].append(bench.wrk(lb1_port, "/scenario", duration=d, connections=32))
            rows["lb3-scenario"].append(bench.wrk(lb3_port, "/scenario", duration=d, connections=32))
            print(f"round {r + 1}/{args.rounds}: " + ", ".join(f"{k} {v[-1]['rps']:.0f}" for k, v in rows.items()),
                  flush=True)
        for k, v in rows.items():
            results[k] = {"rps": statistics.median(x["rps"] for x in v),
                          "p99_ms": statistics.median(x["p99_ms"] for x in v),
                          "errors": sum(x["errors"] for x in v)}
        ratio = lambda a, b: results[b]["rps"] / results[a]["rps"]
        results["static_ratio"] = ratio("static-a", "static-b")
        results["scenario_ratio"] = ratio("scenario-a", "scenario-b")
        results["lb_static_ratio"] = ratio("lb1-static", "lb3-static")
        results["lb_scenario_ratio"] = ratio("lb1-scenario", "lb3-scenario")
        stats = redis_cli(redis_port, "INFO", "commandstats")
        for line in stats.splitlines():
            if line.startswith(("cmdstat_evalsha:", "cmdstat_eval:")):
                fields = dict(kv.split("=") for kv in line.split(":", 1)[1].split(","))
                results.setdefault("redis", {})[line.split(":")[0][8:]] = {
                    "calls": int(fields["calls"]), "usec_per_call": float(fields["usec_per_call"])}
        lb1.terminate()
        lb3.terminate()
    finally:
        for s in servers:
            s.stop()
        redis.terminate()
    return results


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--decoy", default=str(bench.REPO / "target" / "release" / "decoy"))
    ap.add_argument("--duration", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    r = run(args)
    print(json.dumps(r, indent=2))
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(r, indent=2))


if __name__ == "__main__":
    main()
