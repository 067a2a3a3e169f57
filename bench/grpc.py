#!/usr/bin/env python3
"""gRPC benchmark: decoy's gRPC virtual services against a plain tonic server.

The same driver (`grpc-load drive`, a tonic client keeping calls in flight over a few
HTTP/2 connections) calls, in one run, side by side:

- the plain tonic server (`grpc-load serve`: the service written as tonic-build
  writes one, answering from code: the ceiling);
- decoy serving a root `grpc-load root` wrote: the same `.proto`, a static `Say`
  stub, a templated one (`response-template` reading the request message), and a
  `Count` server stream of 100 messages; and the static stub among 1,000 more methods
  with a stub each.

Reports unary calls/s and p99 (static, templated, 1,000 methods) and messages/s of
the server stream, with the ratios the targets are stated in (static unary >= 0.7x
tonic's calls/s, p99 <= 2x tonic's; 1,000 methods <= 10% slower than one). Writes
bench/out/grpc.json.

    python3 bench/grpc.py [seconds] [--profile release|debug]

bench/run.sh builds decoy and the `grpc-load` example in release mode; `--profile
debug` uses a debug build (both sides alike, for a quick look only, not quotable).
"""
import argparse
import json
import os
import pathlib
import socket
import subprocess
import tempfile
import time
import urllib.request

REPO = pathlib.Path(__file__).resolve().parent.parent


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, proc, seconds=60):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit("a server exited early")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"nothing listens on {port}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("seconds", nargs="?", type=int, default=10)
    ap.add_argument("--profile", default="release", choices=["release", "debug"])
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--connections", type=int, default=4)
    ap.add_argument("--threads", type=int, default=0,
                    help="decoy's --container-threads (0: its default, one per core)")
    args = ap.parse_args()
    target = REPO / "target" / args.profile
    load = str(target / "examples" / "grpc-load")
    decoy = str(target / "decoy")
    for exe in (load, decoy):
        if not os.path.exists(exe):
            raise SystemExit(f"{exe} is missing: cargo build --{args.profile} -p decoy --bins "
                             "--features bench --example grpc-load")

    def drive(port, call):
        out = subprocess.run(
            [load, "drive", "--addr", f"127.0.0.1:{port}", "--call", call,
             "--seconds", str(args.seconds), "--warmup", "2",
             "--concurrency", str(args.concurrency), "--connections", str(args.connections)],
            check=True, capture_output=True, text=True).stdout
        r = json.loads(out.strip().splitlines()[-1])
        if r["wrong"]:
            raise SystemExit(f"{r['wrong']} wrong answers from port {port} ({call})")
        return r

    results = {}
    # The ceiling.
    port = free_port()
    tonic = subprocess.Popen([load, "serve", "--port", str(port)], stdout=subprocess.DEVNULL)
    try:
        wait_port(port, tonic)
        results["tonic unary"] = drive(port, "say")
        results["tonic server stream"] = drive(port, "count")
    finally:
        tonic.terminate()
        tonic.wait()

    def decoy_run(stub, methods, calls):
        with tempfile.TemporaryDirectory() as root:
            subprocess.run([load, "root", "--dir", root, "--stub", stub,
                            "--methods", str(methods), "--stream", "100"], check=True)
            port = free_port()
            cmd = [decoy, "serve", "--root-dir", root, "--port", str(port), "--no-request-journal"]
            if args.threads:
                cmd += ["--container-threads", str(args.threads)]
            proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                wait_port(port, proc)
                urllib.request.urlopen(f"http://127.0.0.1:{port}/__admin/health", timeout=5)
                return [drive(port, c) for c in calls]
            finally:
                proc.terminate()
                proc.wait()

    results["decoy static unary"], results["decoy server stream"] = decoy_run(
        "static", 0, ["say", "count"])
    (results["decoy templated unary"],) = decoy_run("templated", 0, ["say"])
    (results["decoy static unary, 1,000 methods"],) = decoy_run("static", 1000, ["say"])

    t = results["tonic unary"]
    s = results["decoy static unary"]
    m = results["decoy static unary, 1,000 methods"]
    ratios = {
        "static unary calls/s vs tonic (target >= 0.7)": s["calls_per_s"] / t["calls_per_s"],
        "static unary p99 vs tonic (target <= 2)": s["p99_ms"] / max(t["p99_ms"], 1e-9),
        "templated unary calls/s vs tonic": results["decoy templated unary"]["calls_per_s"] / t["calls_per_s"],
        "server stream messages/s vs tonic": results["decoy server stream"]["messages_per_s"]
        / results["tonic server stream"]["messages_per_s"],
        "1,000 methods cost vs one (target <= 0.10)": 1 - m["calls_per_s"] / s["calls_per_s"],
    }
    print(f"{'scenario':36} {'calls/s':>10} {'msgs/s':>11} {'p50 ms':>8} {'p99 ms':>8}")
    for name, r in results.items():
        print(f"{name:36} {r['calls_per_s']:10.0f} {r['messages_per_s']:11.0f} "
              f"{r['p50_ms']:8.2f} {r['p99_ms']:8.2f}")
    for name, v in ratios.items():
        print(f"{name}: {v:.2f}")
    out = REPO / "bench" / "out"
    out.mkdir(parents=True, exist_ok=True)
    (out / "grpc.json").write_text(json.dumps({
        "profile": args.profile, "seconds": args.seconds, "concurrency": args.concurrency,
        "connections": args.connections, "loadavg": os.getloadavg(),
        "results": results, "ratios": ratios}, indent=2) + "\n")


if __name__ == "__main__":
    main()
