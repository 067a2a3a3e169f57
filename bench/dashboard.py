#!/usr/bin/env python3
"""Static throughput with one live dashboard open, against none, side by side.

The dashboard's overview is one Server-Sent Events stream
(/__admin/dashboard/events); this opens that stream (as the page does) for the
"open" runs and closes it for the "none" runs, alternating the two so drift of a
shared machine hits both alike. Load: wrk -t2 -c64 on one static stub, as the
static figure in bench/bench.py. Usage:

    cargo build --release -p decoy
    python3 bench/dashboard.py [target/release/decoy] [--rounds 3] [--seconds 10] [--json FILE]

Prints each run, the ratio of the medians (open / none), and the median of each
round's own ratio (the two runs of a round are back to back, so that one is less
sensitive to a machine whose load drifts).
"""
import argparse
import http.client
import json
import os
import re
import statistics
import subprocess
import tempfile
import threading
import time


def start(program, root):
    log = open(os.path.join(root, "decoy.log"), "w+")
    proc = subprocess.Popen([program, "serve", "--root-dir", root, "--port", "0",
                             "--bind-address", "127.0.0.1"], stdout=log, stderr=subprocess.STDOUT)
    deadline = time.time() + 60
    while time.time() < deadline:
        log.seek(0)
        m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", log.read())
        if m:
            return proc, int(m.group(1))
        time.sleep(0.1)
    proc.kill()
    raise SystemExit("decoy did not start")


class Dashboard:
    """One open event stream, read as the page reads it; counts the ticks."""

    def __init__(self, port):
        self.ticks = 0
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        self.conn.request("GET", "/__admin/dashboard/events")
        self.resp = self.conn.getresponse()
        assert self.resp.status == 200, self.resp.status
        self.thread = threading.Thread(target=self.read, daemon=True)
        self.thread.start()

    def read(self):
        try:
            for line in self.resp:
                if line.startswith(b"event: tick"):
                    self.ticks += 1
        except (OSError, ValueError):
            pass

    def close(self):
        self.conn.sock.close()


def wrk(port, seconds):
    out = subprocess.run(["wrk", "-t2", "-c64", f"-d{seconds}s", "--timeout", "5s",
                          f"http://127.0.0.1:{port}/static"],
                         capture_output=True, text=True, check=True).stdout
    return float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("decoy", nargs="?", default="target/release/decoy")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--json", default=None, help="also write the medians here (for bench/report.py)")
    args = ap.parse_args()
    root = tempfile.mkdtemp(prefix="decoy-dashboard-bench-")
    os.makedirs(os.path.join(root, "mappings"))
    with open(os.path.join(root, "mappings", "static.json"), "w") as f:
        json.dump({"request": {"method": "GET", "url": "/static"},
                   "response": {"status": 200, "headers": {"Content-Type": "text/plain"},
                                "body": "hello"}}, f)
    proc, port = start(os.path.abspath(args.decoy), root)
    try:
        wrk(port, 2)  # warm-up
        runs = {"none": [], "open": []}
        for r in range(args.rounds):
            for mode in (["none", "open"] if r % 2 == 0 else ["open", "none"]):
                dash = Dashboard(port) if mode == "open" else None
                rps = wrk(port, args.seconds)
                if dash:
                    time.sleep(1.2)
                    assert dash.ticks >= args.seconds - 1, f"only {dash.ticks} ticks received"
                    ticks = dash.ticks
                    dash.close()
                    print(f"round {r + 1} dashboard {mode}: {rps:,.0f} req/s ({ticks} ticks received)")
                else:
                    print(f"round {r + 1} dashboard {mode}: {rps:,.0f} req/s")
                runs[mode].append(rps)
        none, open_ = statistics.median(runs["none"]), statistics.median(runs["open"])
        pairs = [o / n for o, n in zip(runs["open"], runs["none"])]
        print(f"median: none {none:,.0f} req/s, one dashboard open {open_:,.0f} req/s, "
              f"ratio {open_ / none:.3f}; median of the rounds' ratios {statistics.median(pairs):.3f}")
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"rounds": args.rounds, "seconds": args.seconds, "none_rps": none, "open_rps": open_,
                           "median_round_ratio": statistics.median(pairs), "runs": runs}, f, indent=2)
    finally:
        proc.terminate()
        proc.wait(timeout=10)


if __name__ == "__main__":
    main()
