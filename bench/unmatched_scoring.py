#!/usr/bin/env python3
"""A static stub's latency while unmatched requests meet backtracking patterns.

    python3 bench/unmatched_scoring.py --exe DECOY [--exe OTHER_DECOY ...] [--duration 10]

Issue 13, item 10: every unmatched request scores stubs for its "not matched"
report, and stubs whose body patterns backtrack (look-around with a backreference)
cost tens of milliseconds per evaluation, on the worker threads that also serve
everyone else. The root here has 20 such stubs (`POST /api/N`, body `matches` a
catastrophic pattern) and a static `GET /static`. Four client threads send
unmatched requests (`POST /nope`, a body that makes the patterns backtrack), each
at most 7 a second; meanwhile `wrk -t1 -c1` measures `GET /static`. Printed per
build: the static stub's p50 and p99, its requests/s, and how many unmatched
requests were answered (with their p50).

A benchmark, not a test: figures depend on the machine and its load.
"""
import argparse
import json
import pathlib
import re
import statistics
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import bench  # noqa: E402  (shared helpers: roots, servers, wrk's latency format)

PATTERN = "(?s)(?=.*x)(a|a)*\\1y"
UNMATCHED_BODY = "a" * 40 + "x"


def make_root(base):
    stubs = [
        {"request": {"method": "POST", "urlPath": f"/api/{i}", "bodyPatterns": [{"matches": PATTERN}]},
         "response": {"status": 200}}
        for i in range(20)
    ]
    stubs.append({"request": {"method": "GET", "url": "/static"},
                  "response": {"status": 200, "body": "hello"}})
    stubs.append({"request": {"urlPath": "/__probe"}, "response": {"status": 200}})
    return bench.make_root(base, "lookaround", stubs)


def unmatched_client(port, stop, rate, latencies):
    url = f"http://127.0.0.1:{port}/nope"
    while not stop.is_set():
        t0 = time.monotonic()
        req = urllib.request.Request(url, data=UNMATCHED_BODY.encode(), method="POST")
        try:
            urllib.request.urlopen(req, timeout=30).read()
        except urllib.error.HTTPError as e:
            e.read()  # the 404 report is the expected answer
        except OSError:
            pass
        took = time.monotonic() - t0
        latencies.append(took * 1000)
        time.sleep(max(0.0, 1.0 / rate - took))


def static_latency(port, duration):
    cmd = ["wrk", "-t1", "-c1", f"-d{duration}s", "--latency", "--timeout", "10s",
           f"http://127.0.0.1:{port}/static"]
    import subprocess
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    p50 = bench.parse_latency(re.search(r"50%\s+([\d.]+\w+)", out).group(1))
    p99 = bench.parse_latency(re.search(r"99%\s+([\d.]+\w+)", out).group(1))
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    return p50, p99, rps


def measure(exe, root, duration, clients, rate):
    server = bench.decoy(root, bench.free_port(), exe=exe)
    server.start()
    try:
        stop = threading.Event()
        latencies = []
        threads = [threading.Thread(target=unmatched_client, args=(server.port, stop, rate, latencies))
                   for _ in range(clients)]
        for t in threads:
            t.start()
        time.sleep(1)
        p50, p99, rps = static_latency(server.port, duration)
        stop.set()
        for t in threads:
            t.join()
        alive = bench.http_status(server.port, "/static", timeout=5) == 200
        return {"static_p50_ms": p50, "static_p99_ms": p99, "static_rps": rps,
                "unmatched_answered": len(latencies),
                "unmatched_p50_ms": statistics.median(latencies) if latencies else None,
                "alive_after": alive}
    finally:
        server.stop()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--exe", action="append", required=True, help="a decoy binary (repeat to compare)")
    ap.add_argument("--duration", type=int, default=10)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--rate", type=float, default=7.0, help="unmatched requests per second per client")
    args = ap.parse_args()
    root = make_root(pathlib.Path(tempfile.mkdtemp(prefix="decoy-unmatched-")))
    for exe in args.exe:
        r = measure(exe, root, args.duration, args.clients, args.rate)
        print(json.dumps({"exe": exe, **r}))


if __name__ == "__main__":
    main()
