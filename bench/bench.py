#!/usr/bin/env python3
"""Side-by-side HTTP benchmark: decoy vs WireMock 3.13.2 vs nginx, in one run.

Run it through bench/run.sh, which installs wrk and nginx and builds decoy. It
generates the stub roots, starts each server in turn on 127.0.0.1, drives it with
wrk, reads its peak RSS from /proc, and writes its figures as JSON (--json), from
which bench/report.py writes docs/performance.md's tables. All load goes to
127.0.0.1 and every run is bounded by wrk's duration.

Figures from a shared 2-core machine drift between runs; compare the ratios, which
come from one run with the same load generator, stubs and machine state.
"""
import argparse
import json
import os
import pathlib
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parent.parent


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_status(port, path, timeout=1.0):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
            s.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
            data = s.recv(64)
            m = re.match(rb"HTTP/1\.[01] (\d+)", data)
            return int(m.group(1)) if m else None
    except OSError:
        return None


# ---------------------------------------------------------------- stub roots

def stub(i):
    """Stub i of a large set: a realistic mix of exact, regex and template URLs."""
    kind = i % 4
    if kind in (0, 1):
        req = {"method": "GET", "url": f"/api/v1/items/{i}"}
    elif kind == 2:
        req = {"method": "GET", "urlPathPattern": f"/api/v2/res{i}/[0-9]+"}
    else:
        req = {"method": "GET", "urlPathTemplate": f"/api/v3/res{i}/{{id}}"}
    return {"request": req, "response": {"status": 200, "headers": {"Content-Type": "text/plain"}, "body": f"stub {i}"}}


def stub_path(i):
    kind = i % 4
    if kind in (0, 1):
        return f"/api/v1/items/{i}"
    if kind == 2:
        return f"/api/v2/res{i}/42"
    return f"/api/v3/res{i}/42"


def make_root(base, name, stubs):
    root = base / name
    (root / "mappings").mkdir(parents=True)
    (root / "__files").mkdir()
    for i, s in enumerate(stubs):
        (root / "mappings" / f"stub-{i:05d}.json").write_text(json.dumps(s))
    return root


def make_root_one_file(base, name, stubs):
    """A root holding `stubs` in one `{"mappings": [...]}` file, as WireMock's
    recorder's snapshot and many hand-kept roots have them."""
    root = base / name
    (root / "mappings").mkdir(parents=True)
    (root / "__files").mkdir()
    (root / "mappings" / "stubs.json").write_text(json.dumps({"mappings": stubs}, indent=2))
    return root


def lua_spread(base, n):
    """A wrk script sending each request to a random stub of n."""
    paths = [stub_path(i) for i in range(n)]
    script = base / f"spread-{n}.lua"
    body = "paths = {" + ",".join(json.dumps(p) for p in paths) + "}\n"
    # Requests are formatted once in init(), so the load generator (which shares the
    # CPU with the server) does the same little work per request for 10 or 10,000 stubs.
    body += "reqs = {}\n"
    body += "init = function(args)\n  for i, p in ipairs(paths) do reqs[i] = wrk.format('GET', p) end\nend\n"
    body += "math.randomseed(42)\n"
    body += "request = function()\n  return reqs[math.random(#reqs)]\nend\n"
    script.write_text(body)
    return script


# ---------------------------------------------------------------- servers

def cpu_ms(pid):
    """User + system CPU time of a process so far, in ms (10 ms resolution)."""
    try:
        fields = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        ticks = os.sysconf("SC_CLK_TCK")
        return (int(fields[11]) + int(fields[12])) * 1000 / ticks
    except (OSError, ValueError, IndexError):
        return None


class Server:
    def __init__(self, name, cmd, port, probe, cwd=None):
        self.name, self.cmd, self.port, self.probe, self.cwd = name, cmd, port, probe, cwd
        self.proc = None
        self.first_answer_ms = None
        # CPU time (user + system, all threads, including finished ones) the server
        # had used when it first answered: less sensitive than wall time to what else
        # the machine is doing. Linux only; None elsewhere.
        self.first_answer_cpu_ms = None

    def start(self, timeout=120):
        t0 = time.monotonic()
        self.proc = subprocess.Popen(self.cmd, cwd=self.cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        while time.monotonic() - t0 < timeout:
            if http_status(self.port, self.probe, timeout=0.5) is not None:
                self.first_answer_ms = (time.monotonic() - t0) * 1000
                self.first_answer_cpu_ms = cpu_ms(self.proc.pid)
                return self
            if self.proc.poll() is not None:
                raise SystemExit(f"{self.name} exited during start: {self.cmd}")
            time.sleep(0.002)
        raise SystemExit(f"{self.name} did not answer within {timeout}s")

    def rss_mib(self):
        """Peak resident memory of the server process and its children."""
        try:
            status = pathlib.Path(f"/proc/{self.proc.pid}/status").read_text()
            kb = int(re.search(r"VmHWM:\s+(\d+) kB", status).group(1))
            return kb / 1024
        except (OSError, AttributeError):
            return None

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def decoy(root, port, *extra, exe=None):
    exe = exe or str(REPO / "target" / "release" / "decoy")
    return Server("decoy", [exe, "serve", "--root-dir", str(root), "--port", str(port), "--bind-address", "127.0.0.1", *extra],
                  port, "/__probe")


def http_get_body(port, path, timeout=1.0):
    """(status, body) of one GET on a fresh connection."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    m = re.match(rb"HTTP/1\.[01] (\d+)", head)
    return (int(m.group(1)) if m else None), body.decode(errors="replace")


def write_atomically(path, text):
    """As editors do: a temporary file renamed over the original."""
    tmp = path.with_name(path.name + ".tmp~")
    tmp.write_text(text)
    os.replace(tmp, path)


def churn_stub(n):
    return json.dumps({"request": {"method": "GET", "url": "/churn"},
                       "response": {"status": 200, "headers": {"Content-Type": "text/plain"}, "body": f"churn-{n}"}})


def reload_latency(root, port, rounds=20, exe=None):
    """File written (renamed into place) to the new answer served, in ms, `rounds` times."""
    live = root / "mappings" / "churn.json"
    server = decoy(root, port, exe=exe).start()
    times = []
    try:
        for i in range(1, rounds + 1):
            time.sleep(0.15)  # let the previous burst settle, as separate edits would
            t0 = time.monotonic()
            write_atomically(live, churn_stub(1000 + i))
            while time.monotonic() - t0 < 5:
                if http_get_body(port, "/churn")[1] == f"churn-{1000 + i}":
                    break
            times.append((time.monotonic() - t0) * 1000)
    finally:
        server.stop()
    times.sort()
    return {"median_ms": times[len(times) // 2], "p95_ms": times[int(len(times) * 0.95) - 1], "max_ms": times[-1],
            "all_ms": times}


CHECKING_SCRIPT = r"""
-- Alternates /static and /churn and counts answers that are neither "hello" nor
-- "churn-<n>" with status 200 (a failed or wrong answer during a reload).
bad = 0
local threads = {}
function setup(thread) table.insert(threads, thread) end
function init(args)
  reqs = { wrk.format("GET", "/static"), wrk.format("GET", "/churn") }
  n = 0
end
function request() n = n + 1; return reqs[(n % 2) + 1] end
function response(status, headers, body)
  if status ~= 200 or not (body == "hello" or string.match(body, "^churn%-%d+$")) then bad = bad + 1 end
end
function done(summary, latency, requests)
  local total = 0
  for _, t in ipairs(threads) do total = total + t:get("bad") end
  io.write(string.format("BAD %d\n", total))
end
"""


def wiremock(jar, root, port):
    cmd = ["java", "-jar", jar, "--port", str(port), "--bind-address", "127.0.0.1", "--root-dir", str(root),
           "--no-request-journal", "--disable-request-logging", "--async-response-enabled=true", "--disable-banner"]
    return Server("WireMock", cmd, port, "/__admin/health")


def nginx(base, port, workers="auto"):
    """nginx answering a static 200 "hello" (`workers`: its worker processes)."""
    conf = base / f"nginx-{port}.conf"
    conf.write_text(f"""
worker_processes {workers};
daemon off;
pid {base}/nginx.pid;
error_log {base}/nginx-error.log;
events {{ worker_connections 4096; }}
http {{
  access_log off;
  keepalive_requests 1000000;
  server {{
    listen 127.0.0.1:{port};
    location / {{ default_type text/plain; return 200 "hello"; }}
  }}
}}
""")
    return Server("nginx", ["nginx", "-c", str(conf), "-p", str(base)], port, "/")


# ---------------------------------------------------------------- load

def warm_up(port, seconds=8, tolerance=0.05, most=10, **load):
    """Load until a JVM's JIT has settled: rounds of `seconds` until two in a row are
    within `tolerance` of each other (at most `most` rounds). A fixed 15 s was not
    enough on every machine: WireMock's rate still rose by 10-25% a round after 30 s.
    Returns each round's rate."""
    rates = []
    for _ in range(most):
        rates.append(wrk(port, duration=seconds, **load)["rps"])
        if len(rates) >= 2 and abs(rates[-1] - rates[-2]) <= tolerance * rates[-2]:
            break
    return rates


# A wrk script printing the percentiles `--latency` leaves out (p99.9), one
# "PCT <percentile> <microseconds>" line each.
PERCENTILES_SCRIPT = r"""
function done(summary, latency, requests)
  for _, p in ipairs({50, 90, 99, 99.9, 99.99}) do
    io.write(string.format("PCT %g %d\n", p, latency:percentile(p)))
  end
end
"""


def wrk(port, path="/", connections=64, duration=10, script=None, threads=2, timeout="5s"):
    """wrk's req/s, p99 (ms) and errors; with PERCENTILES_SCRIPT as the script, also
    "pcts": {percentile: ms}."""
    cmd = ["wrk", f"-t{threads}", f"-c{connections}", f"-d{duration}s", "--latency", "--timeout", timeout]
    if script:
        cmd += ["-s", str(script)]
    cmd.append(f"http://127.0.0.1:{port}{path}")
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    bad = re.search(r"^BAD (\d+)", out, re.M)
    p99 = parse_latency(re.search(r"99%\s+([\d.]+\w+)", out).group(1))
    errors = 0
    m = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    if m:
        errors += int(m.group(1))
    m = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    if m:
        errors += sum(int(x) for x in m.groups())
    if bad:
        errors += int(bad.group(1))
    result = {"rps": rps, "p99_ms": p99, "errors": errors}
    pcts = {float(p): int(us) / 1000 for p, us in re.findall(r"^PCT ([\d.]+) (\d+)$", out, re.M)}
    if pcts:
        result["pcts"] = pcts
    return result


def parse_latency(text):
    m = re.match(r"([\d.]+)(us|ms|s)", text)
    value, unit = float(m.group(1)), m.group(2)
    return value / 1000 if unit == "us" else value * 1000 if unit == "s" else value


# ---------------------------------------------------------------- scenarios

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--wiremock-jar", required=True)
    ap.add_argument("--duration", type=int, default=10)
    ap.add_argument("--json", default=str(REPO / "bench" / "out" / "last-run.json"),
                    help="where to write the figures (bench/report.py reads them)")
    ap.add_argument("--baseline-exe", default=None,
                    help="an older decoy build (before the journal and metrics) to measure their cost against")
    args = ap.parse_args()
    d = args.duration

    base = pathlib.Path(tempfile.mkdtemp(prefix="decoy-bench-"))
    probe = {"request": {"urlPath": "/__probe"}, "response": {"status": 200}}
    static = {"request": {"method": "GET", "url": "/static"}, "response": {"status": 200, "headers": {"Content-Type": "text/plain"}, "body": "hello"}}
    delayed = {"request": {"method": "GET", "url": "/delayed"}, "response": {"status": 200, "body": "hello", "fixedDelayMilliseconds": 100}}
    roots = {
        "static": make_root(base, "static", [static, probe]),
        "delay": make_root(base, "delay", [delayed, probe]),
    }
    for n in (10, 1000, 10000):
        roots[f"stubs-{n}"] = make_root(base, f"stubs-{n}", [stub(i) for i in range(n)] + [probe])
    scripts = {n: lua_spread(base, n) for n in (10, 1000, 10000)}
    roots["churn"] = make_root(base, "churn", [static, probe])
    (roots["churn"] / "mappings" / "churn.json").write_text(churn_stub(0))
    roots["churn-10000"] = make_root(base, "churn-10000", [stub(i) for i in range(10000)] + [probe])
    (roots["churn-10000"] / "mappings" / "churn.json").write_text(churn_stub(0))
    checking = base / "checking.lua"
    checking.write_text(CHECKING_SCRIPT)

    results = {}

    def run(label, server, warmup, **load):
        """warmup: seconds of load first, or "settle" (rounds until the rate settles)."""
        try:
            server.start()
            settled = None
            if warmup == "settle":
                settled = warm_up(server.port, **load)
            elif warmup:
                wrk(server.port, duration=warmup, **{k: v for k, v in load.items() if k != "duration"})
            r = wrk(server.port, duration=d, **load)
            r["rss_mib"] = server.rss_mib()
            r["first_answer_ms"] = server.first_answer_ms
            if settled:
                r["warm_up_rps"] = settled
            results[label] = r
            print(f"{label:32s} {r['rps']:10.0f} req/s  p99 {r['p99_ms']:8.2f} ms  rss {r['rss_mib'] or 0:7.1f} MiB  "
                  f"errors {r['errors']}  first answer {r['first_answer_ms']:.0f} ms", flush=True)
        finally:
            server.stop()

    jar = args.wiremock_jar
    # The JVM needs a long warm-up to reach its steady state (on a fast machine its rate
    # still rose by a fifth a round after 40 s), so WireMock is loaded until its rate
    # settles; decoy and nginx need none, but get a short one.
    run("static/nginx", nginx(base, free_port()), 3, path="/")
    run("static/decoy", decoy(roots["static"], free_port()), 3, path="/static")
    run("static/wiremock", wiremock(jar, roots["static"], free_port()), "settle", path="/static")
    # What the request journal and metrics cost on the hot path: the same stub with the
    # journal on (the default, measured above as static/decoy), off, and (when given)
    # a build from before either existed. Small differences drown in this machine's
    # noise, so the three are run in turn, three rounds, and the medians compared.
    variants = [("static/decoy", ()), ("static/decoy-nojournal", ("--no-request-journal",))]
    if args.baseline_exe:
        variants.append(("static/decoy-baseline", ()))
    rounds = {label: [] for label, _ in variants}
    for _ in range(3):
        for label, extra in variants:
            exe = args.baseline_exe if label.endswith("baseline") else None
            server = decoy(roots["static"], free_port(), *extra, exe=exe)
            try:
                server.start()
                wrk(server.port, path="/static", duration=2)
                r = wrk(server.port, path="/static", duration=d)
                r["rss_mib"] = server.rss_mib()
                rounds[label].append(r)
            finally:
                server.stop()
    for label, runs in rounds.items():
        runs.sort(key=lambda r: r["rps"])
        results[f"{label}/ab-median"] = dict(runs[len(runs) // 2], all_rps=[r["rps"] for r in runs])
        print(f"{label:32s} rounds {[round(r['rps']) for r in runs]}", flush=True)

    # Hot reload: latency from a file renamed into place to its new answer, and
    # throughput while that file is rewritten 10 times a second, with every answer
    # checked (wrong or failed answers are counted as errors). Without and with
    # rewrites in turn, two rounds each, medians compared.
    for key in ("churn", "churn-10000"):
        results[f"reload-latency/{key}"] = r = reload_latency(roots[key], free_port())
        print(f"reload latency ({key}): median {r['median_ms']:.0f} ms, p95 {r['p95_ms']:.0f} ms, max {r['max_ms']:.0f} ms",
              flush=True)
    import threading
    churn = {"churn-still/decoy": [], "churn-rewriting/decoy": []}
    for _ in range(2):
        for label in churn:
            live = roots["churn"] / "mappings" / "churn.json"
            live.write_text(churn_stub(0))
            stop_writing = [False]
            rewrites = [0]

            def rewrite():
                i = 0
                while not stop_writing[0]:
                    i += 1
                    write_atomically(live, churn_stub(i))
                    time.sleep(0.1)
                rewrites[0] = i

            writer = threading.Thread(target=rewrite)
            server = decoy(roots["churn"], free_port())
            try:
                server.start()
                wrk(server.port, duration=2, script=checking)
                if label == "churn-rewriting/decoy":
                    writer.start()
                before = http_get_body(server.port, "/__admin/metrics")[1]
                r = wrk(server.port, duration=d, script=checking)
                stop_writing[0] = True
                if writer.is_alive():
                    writer.join()
                after = http_get_body(server.port, "/__admin/metrics")[1]
                swaps = [int(m.group(1)) for m in (re.search(r"^decoy_mapping_set_swaps_total (\d+)", t, re.M)
                                                   for t in (before, after)) if m]
                r["swaps"] = swaps[1] - swaps[0] if len(swaps) == 2 else None
                r["rewrites"] = rewrites[0]
                r["rss_mib"] = server.rss_mib()
                churn[label].append(r)
                print(f"{label:32s} {r['rps']:10.0f} req/s  p99 {r['p99_ms']:8.2f} ms  errors {r['errors']}  "
                      f"rewrites {r['rewrites']}  swaps {r['swaps']}", flush=True)
            finally:
                stop_writing[0] = True
                server.stop()
    for label, runs in churn.items():
        runs.sort(key=lambda r: r["rps"])
        # Errors from every round count, not only the median one's.
        results[label] = dict(runs[len(runs) // 2], errors=sum(r["errors"] for r in runs),
                              all_rps=[r["rps"] for r in runs])
    for n in (10, 1000, 10000):
        run(f"stubs-{n}/decoy", decoy(roots[f"stubs-{n}"], free_port()), 3, script=scripts[n])
        run(f"stubs-{n}/wiremock", wiremock(jar, roots[f"stubs-{n}"], free_port()), "settle", script=scripts[n])
    # Same 10,000 stubs, requests to only 10 of them: separates the cost of selecting
    # among many stubs (the index) from the cost of touching many stubs' memory.
    run("stubs-10000-hot10/decoy", decoy(roots["stubs-10000"], free_port()), 3, script=scripts[10])
    run("delay-100ms/decoy", decoy(roots["delay"], free_port()), 3, path="/delayed", connections=1000)
    run("delay-100ms/wiremock", wiremock(jar, roots["delay"], free_port()), 10, path="/delayed", connections=1000)

    # Start-up: spawn to first answer, 10,000 stubs, a few times each (median).
    for name, mk in (("decoy", lambda p: decoy(roots["stubs-10000"], p)), ("wiremock", lambda p: wiremock(jar, roots["stubs-10000"], p))):
        times = []
        for _ in range(5 if name == "decoy" else 2):
            s = mk(free_port())
            try:
                s.start()
                times.append(s.first_answer_ms)
            finally:
                s.stop()
        times.sort()
        results[f"startup-10000/{name}"] = {"first_answer_ms": times[len(times) // 2], "all_ms": times}
        print(f"startup with 10,000 stubs, {name}: {times} ms", flush=True)

    pathlib.Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    pathlib.Path(args.json).write_text(json.dumps(results, indent=2))
    print(f"wrote {args.json}; `python3 bench/report.py` puts it in docs/performance.md")
    shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    sys.path.insert(0, str(pathlib.Path(__file__).parent))
    main()
