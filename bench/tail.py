#!/usr/bin/env python3
"""Tail latency of one static stub: nginx, decoy in each thread layout, WireMock 3.13.2.

    python3 bench/tail.py [--wiremock-jar JAR] [--connections 32,256] [--layouts reuseport,dealt,shared]
                          [--threads N] [--duration 10] [--rounds 1] [--rate-fraction 0.5] [--json FILE]
                          [--exe [LABEL=]PATH ...]

Run it through bench/run.sh (which installs wrk and nginx, builds decoy and the
fixed-rate driver, and fetches WireMock's jar), or after

    cargo build --release -p decoy --bins --features bench --example fixed-rate --example bare-http

Every server answers GET with a static 200 "hello": nginx with one worker process
(the ceiling), hyper alone on one thread (the `bare-http` example: decoy's HTTP library
with nothing of decoy's, the floor of what decoy's own work can reach; skipped, said
so, when it is not built), decoy for each `--thread-layout`, WireMock (skipped, said
so, without `--wiremock-jar`). For each connection count, each server is measured two ways:

- closed loop: `wrk -t1 -cN --latency` for --duration seconds: the most it answers,
  and the percentiles of that (p50, p99, p99.9; wrk waits for an answer before it
  sends the next request on a connection, so these flatter a server that stalls);
- open loop at a fixed rate (the `fixed-rate` example, wrk2's method, free of
  coordinated omission): the same rate for every server, `--rate-fraction` of what
  nginx answered closed-loop at that connection count, and the percentiles of that.
  A server slower than the rate shows it in its percentiles and its achieved rate.

Servers are measured in turn, `--rounds` times (the order reversed every other
round), and each figure is the median of its rounds; ratios are to nginx's figure of
the same run. `--exe` given more than once measures each decoy binary in the same run
(an A/B of two builds, each named by its LABEL or its file name), so that their ratios
share one nginx. On a machine whose cores are shared with the load generator or with
other work the absolute figures drift from run to run; compare the ratios.
"""
import argparse
import json
import pathlib
import platform
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import bench  # noqa: E402  (the shared helpers: roots, servers, wrk)

REPO = bench.REPO
STATIC = {"request": {"method": "GET", "url": "/static"},
          "response": {"status": 200, "headers": {"Content-Type": "text/plain"}, "body": "hello"}}
DELAYED = {"request": {"method": "GET", "url": "/delayed"},
           "response": {"status": 200, "body": "hello", "fixedDelayMilliseconds": 100}}
PROBE = {"request": {"urlPath": "/__probe"}, "response": {"status": 200}}


def fixed_rate(exe, port, path, rate, connections, seconds, warmup=2):
    """The fixed-rate driver's figures (see host/examples/fixed-rate.rs)."""
    cmd = [exe, "--url", f"http://127.0.0.1:{port}{path}", "--rate", str(int(rate)),
           "--connections", str(connections), "--seconds", str(seconds), "--warmup", str(warmup)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=seconds + warmup + 60).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--wiremock-jar", default=None)
    ap.add_argument("--connections", default="32,256")
    ap.add_argument("--layouts", default="reuseport,dealt,shared",
                    help="decoy variants, each a --thread-layout with an optional :N for its "
                         "--container-threads (e.g. reuseport,reuseport:2,shared)")
    ap.add_argument("--threads", type=int, default=None, help="decoy's --container-threads (default: one per core)")
    ap.add_argument("--duration", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--rate-fraction", type=float, default=0.5,
                    help="the fixed rate, as a fraction of nginx's closed-loop req/s at that connection count")
    ap.add_argument("--exe", action="append", default=None,
                    help="decoy binary, [LABEL=]PATH; more than once: each is measured in the same run "
                         "(default: target/release/decoy)")
    ap.add_argument("--driver", default=str(REPO / "target" / "release" / "examples" / "fixed-rate"))
    ap.add_argument("--bare", default=str(REPO / "target" / "release" / "examples" / "bare-http"),
                    help="the hyper-alone server (host/examples/bare-http.rs)")
    ap.add_argument("--json", default=None, help="also write every sample here")
    ap.add_argument("--delay-connections", type=int, default=1000,
                    help="the delayed case: every answer 100 ms late, this many connections (0: skip it)")
    ap.add_argument("--delay-rate", type=float, default=9000,
                    help="the delayed case's fixed rate, req/s (at most connections / 0.1 s)")
    args = ap.parse_args()
    conns = [int(c) for c in args.connections.split(",")]
    exes = []  # (label, path); the label only names the servers when there is more than one
    for given in args.exe or [str(REPO / "target" / "release" / "decoy")]:
        label, sep, path = given.partition("=")
        exes.append((label, path) if sep else (pathlib.Path(given).name, given))
    for exe in [path for _, path in exes] + [args.driver]:
        if not pathlib.Path(exe).exists():
            sys.exit(f"{exe} is missing: cargo build --release -p decoy --bins --features bench --example fixed-rate")

    base = pathlib.Path(tempfile.mkdtemp(prefix="decoy-tail-"))
    root = bench.make_root(base, "static", [STATIC, DELAYED, PROBE])
    servers = [("nginx", lambda p: bench.nginx(base, p, workers=1), "/")]
    if pathlib.Path(args.bare).exists():
        servers.append(("hyper-alone", lambda p: bench.Server("hyper alone", [args.bare, "--port", str(p)], p, "/"),
                        "/static"))
    else:
        print(f"hyper alone skipped: {args.bare} is missing (--example bare-http)", flush=True)
    for label, exe in exes:
        for variant in args.layouts.split(","):
            layout, _, n = variant.partition(":")
            n = n or (str(args.threads) if args.threads else "")
            threads = ["--container-threads", n] if n else []
            servers.append((f"decoy-{layout}" + (f"-{n}t" if n else "") + (f"-{label}" if len(exes) > 1 else ""),
                            lambda p, layout=layout, threads=threads, exe=exe:
                                bench.decoy(root, p, "--thread-layout", layout, *threads, exe=exe),
                            "/static"))
    if args.wiremock_jar:
        servers.append(("wiremock", lambda p: bench.wiremock(args.wiremock_jar, root, p), "/static"))
    else:
        print("WireMock skipped: no --wiremock-jar (bench/run.sh fetches it)", flush=True)

    # samples[server][conns] = list of {"wrk": ..., "fixed": ...}
    samples = {name: {c: [] for c in conns} for name, _, _ in servers}
    rates = {c: [] for c in conns}
    for rnd in range(args.rounds):
        order = servers if rnd % 2 == 0 else list(reversed(servers))
        # nginx first in every round: its closed-loop rate sets the round's fixed rate.
        order = [s for s in order if s[0] == "nginx"] + [s for s in order if s[0] != "nginx"]
        rate = {}
        for name, make, path in order:
            server = make(bench.free_port())
            try:
                server.start()
                if name == "wiremock":
                    bench.warm_up(server.port, path=path, threads=1, connections=max(conns))
                else:
                    bench.wrk(server.port, path=path, threads=1, connections=max(conns), duration=2)
                for c in conns:
                    w = bench.wrk(server.port, path=path, threads=1, connections=c, duration=args.duration,
                                  script=pcts_script(base))
                    if name == "nginx":
                        rate[c] = w["rps"] * args.rate_fraction
                        rates[c].append(rate[c])
                    f = fixed_rate(args.driver, server.port, path, rate[c], c, args.duration)
                    samples[name][c].append({"wrk": w, "fixed": f})
                    print(f"round {rnd + 1} {name:16s} c={c:<4d} wrk {w['rps']:9.0f} req/s p50 {w['pcts'][50.0]:6.2f} "
                          f"p99 {w['pcts'][99.0]:7.2f} p99.9 {w['pcts'][99.9]:7.2f} ms | at {f['rate']:.0f}/s: "
                          f"p50 {f['p50_ms']:6.2f} p99 {f['p99_ms']:7.2f} p99.9 {f['p999_ms']:7.2f} ms "
                          f"(achieved {f['achieved']:.0f}/s, errors {w['errors'] + f['errors']}, unsent {f['unsent']})",
                          flush=True)
            finally:
                server.stop()

    # The delayed case: decoy in the first variant given (its default layout unless
    # told otherwise) and WireMock; nginx cannot delay an answer. A server can answer
    # at most connections / 0.1 s.
    delay_case = f"delay-100ms-{args.delay_connections}"
    delayed = {}
    if args.delay_connections:
        # (Neither nginx nor hyper alone can delay an answer.)
        decoys = [s for s in servers if s[0].startswith("decoy")]
        for name, make, _ in decoys[:1] + [s for s in servers if s[0] == "wiremock"]:
            runs = []
            for rnd in range(args.rounds):
                server = make(bench.free_port())
                try:
                    server.start()
                    bench.wrk(server.port, path="/delayed", threads=1, connections=args.delay_connections, duration=3)
                    w = bench.wrk(server.port, path="/delayed", threads=1, connections=args.delay_connections,
                                  duration=args.duration, script=pcts_script(base))
                    f = fixed_rate(args.driver, server.port, "/delayed", args.delay_rate, args.delay_connections,
                                   args.duration)
                    runs.append({"wrk": w, "fixed": f})
                    print(f"round {rnd + 1} {name:16s} {delay_case}: wrk {w['rps']:9.0f} req/s p50 "
                          f"{w['pcts'][50.0]:6.2f} p99 {w['pcts'][99.0]:7.2f} ms (errors {w['errors']}) | at "
                          f"{f['rate']:.0f}/s: p99 {f['p99_ms']:7.2f} ms (achieved {f['achieved']:.0f}/s, "
                          f"errors {f['errors']}, unsent {f['unsent']})", flush=True)
                finally:
                    server.stop()
            delayed[name] = runs

    med = lambda xs: statistics.median(xs) if xs else float("nan")
    table = {}
    for name, _, _ in servers:
        for c in conns:
            runs = samples[name][c]
            table[(name, c)] = {
                "rps": med([r["wrk"]["rps"] for r in runs]),
                "p50": med([r["wrk"]["pcts"][50.0] for r in runs]),
                "p99": med([r["wrk"]["pcts"][99.0] for r in runs]),
                "p999": med([r["wrk"]["pcts"][99.9] for r in runs]),
                "f_rate": med([r["fixed"]["rate"] for r in runs]),
                "f_achieved": med([r["fixed"]["achieved"] for r in runs]),
                "f_p50": med([r["fixed"]["p50_ms"] for r in runs]),
                "f_p99": med([r["fixed"]["p99_ms"] for r in runs]),
                "f_p999": med([r["fixed"]["p999_ms"] for r in runs]),
            }
    for name, runs in delayed.items():
        table[(name, delay_case)] = {
            "rps": med([r["wrk"]["rps"] for r in runs]),
            "p50": med([r["wrk"]["pcts"][50.0] for r in runs]),
            "p99": med([r["wrk"]["pcts"][99.0] for r in runs]),
            "p999": med([r["wrk"]["pcts"][99.9] for r in runs]),
            "errors": med([r["wrk"]["errors"] for r in runs]),
            "f_rate": med([r["fixed"]["rate"] for r in runs]),
            "f_achieved": med([r["fixed"]["achieved"] for r in runs]),
            "f_p50": med([r["fixed"]["p50_ms"] for r in runs]),
            "f_p99": med([r["fixed"]["p99_ms"] for r in runs]),
            "f_p999": med([r["fixed"]["p999_ms"] for r in runs]),
        }
    print()
    print(f"machine: {platform.node()}, {platform.processor() or platform.machine()}, "
          f"{len(__import__('os').sched_getaffinity(0))} cores; {args.rounds} round(s), medians; "
          f"ratios to nginx (1 worker) of the same run")
    for c in conns:
        print()
        print(f"### {c} connections")
        print()
        print("| server | req/s (wrk) | × nginx | p50 | p99 | × nginx | p99.9 | × nginx "
              f"| fixed rate | p50 | p99 | × nginx | p99.9 | × nginx |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        n = table[("nginx", c)]
        x = lambda a, b: f"{a / b:.2f}×" if b else "n/a"
        for name, _, _ in servers:
            t = table[(name, c)]
            print(f"| {name} | {t['rps']:,.0f} | {x(t['rps'], n['rps'])} | {t['p50']:.2f} ms | {t['p99']:.2f} ms "
                  f"| {x(t['p99'], n['p99'])} | {t['p999']:.2f} ms | {x(t['p999'], n['p999'])} "
                  f"| {t['f_rate']:,.0f}/s (got {t['f_achieved']:,.0f}) | {t['f_p50']:.2f} ms | {t['f_p99']:.2f} ms "
                  f"| {x(t['f_p99'], n['f_p99'])} | {t['f_p999']:.2f} ms | {x(t['f_p999'], n['f_p999'])} |")
    if delayed:
        print()
        print(f"### every answer 100 ms late, {args.delay_connections} connections "
              f"(at most {args.delay_connections * 10:,} req/s)")
        print()
        print("| server | req/s (wrk) | p50 | p99 | p99.9 | fixed rate | p99 | p99.9 |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|")
        for name in delayed:
            t = table[(name, delay_case)]
            print(f"| {name} | {t['rps']:,.0f} | {t['p50']:.2f} ms | {t['p99']:.2f} ms | {t['p999']:.2f} ms "
                  f"| {t['f_rate']:,.0f}/s (got {t['f_achieved']:,.0f}) | {t['f_p99']:.2f} ms | {t['f_p999']:.2f} ms |")
    if args.json:
        for name, runs in delayed.items():
            samples[name][delay_case] = runs
        pathlib.Path(args.json).write_text(json.dumps(
            {"samples": {name: {str(c): v for c, v in by.items()} for name, by in samples.items()},
             "rates": {str(c): v for c, v in rates.items()},
             "medians": {f"{name}/{c}": t for (name, c), t in table.items()}}, indent=2))


def pcts_script(base):
    script = base / "percentiles.lua"
    if not script.exists():
        script.write_text(bench.PERCENTILES_SCRIPT)
    return script


if __name__ == "__main__":
    main()
