#!/usr/bin/env python3
"""NATS benchmark: decoy's NATS virtual services against a bare async-nats responder.

Core request-reply through the machine's NATS server (127.0.0.1:4222, or the URL
given). For each scenario it serves one subject with decoy and drives it with
`nats-load drive` (requests in flight, each matched to its reply), then serves the
same subject with `nats-load respond` (a hand-written echo service on async-nats, the
client decoy uses: no files, no matching, no metrics: the ceiling) and drives it the
same way, in the same run, and prints both side by side with the ratio. Writes
bench/out/nats.json.

    python3 bench/nats.py [seconds] [--profile release|debug] [--url nats://...]

bench/run.sh builds decoy and the `nats-load` example in release mode; `--profile
debug` uses a debug build (both sides alike, for a quick look only).
"""
import argparse
import json
import pathlib
import socket
import subprocess
import tempfile
import time
import urllib.request
import uuid

REPO = pathlib.Path(__file__).resolve().parent.parent
REPLY = "<quote><symbol>ACME</symbol><account>ACC-000000</account><price>42.00</price></quote>"

SCENARIOS = [
    # name, matcher, window (requests in flight)
    ("1 subject, anything, 200 in flight", {"anything": "anything"}, 200),
    ("1 subject, contains, 50 in flight", {"contains": "xxxx"}, 50),
]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_http(port, proc, seconds=60):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit("decoy exited early")
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/__admin/health", timeout=1)
            return
        except Exception:
            time.sleep(0.1)
    raise SystemExit("decoy did not start")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("seconds", nargs="?", type=int, default=10)
    ap.add_argument("--profile", default="release", choices=["release", "debug"])
    ap.add_argument("--url", default="nats://127.0.0.1:4222")
    a = ap.parse_args()
    target = REPO / "target" / a.profile
    decoy, load = target / "decoy", target / "examples" / "nats-load"

    def drive(subject, window):
        out = subprocess.run([str(load), "drive", "--url", a.url, "--subject", subject, "--seconds", str(a.seconds),
                              "--warmup", "3", "--size", "490", "--window", str(window)],
                             capture_output=True, text=True, check=True).stdout
        return json.loads(out.strip().splitlines()[-1])

    base = pathlib.Path(tempfile.mkdtemp(prefix="decoy-nats-bench-"))
    rows = []
    for n, (name, matcher, window) in enumerate(SCENARIOS):
        subject = f"decoy-bench.{uuid.uuid4().hex}.req"
        root = base / f"s{n}"
        (root / "mq-mappings").mkdir(parents=True)
        (root / "mappings").mkdir()
        (root / "mq-connections.json").write_text(json.dumps([{
            "connectionId": "nats", "connectionData": {"type": "nats", "uri": a.url},
        }]))
        (root / "mq-mappings" / "quote.json").write_text(json.dumps({
            "request": {"destination": subject, "bodyMatcher": matcher},
            "response": {"text": REPLY},
            "receiveThreads": 1, "sendThreads": 1,
        }))
        port = free_port()
        server = subprocess.Popen([str(decoy), "serve", "--root-dir", str(root), "--port", str(port),
                                   "--bind-address", "127.0.0.1", "--no-watch"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_http(port, server)
            time.sleep(1)  # its subscription, made in the background
            through_decoy = drive(subject, window)
        finally:
            server.terminate()
            server.wait(timeout=30)
        bare = subprocess.Popen([str(load), "respond", "--url", a.url, "--subject", subject],
                                stdout=subprocess.PIPE, text=True)
        try:
            bare.stdout.readline()  # "ready"
            ceiling = drive(subject, window)
        finally:
            bare.terminate()
            bare.wait(timeout=30)
        for r in (through_decoy, ceiling):
            assert r["wrong"] == 0, r
        row = {"scenario": name, "window": window, "decoy": through_decoy, "bare": ceiling,
               "ratio_tps": through_decoy["tps"] / ceiling["tps"],
               "ratio_p99": through_decoy["p99_ms"] / max(ceiling["p99_ms"], 1e-9)}
        rows.append(row)
        print(f"{name}: decoy {through_decoy['tps']:.0f} req/s p99 {through_decoy['p99_ms']:.2f} ms | "
              f"bare async-nats {ceiling['tps']:.0f} req/s p99 {ceiling['p99_ms']:.2f} ms | "
              f"throughput {row['ratio_tps']:.2f}x the bare echo, p99 {row['ratio_p99']:.2f}x", flush=True)
    out = REPO / "bench" / "out"
    out.mkdir(parents=True, exist_ok=True)
    (out / "nats.json").write_text(json.dumps({"profile": a.profile, "seconds": a.seconds, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
