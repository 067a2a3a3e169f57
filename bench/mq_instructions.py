#!/usr/bin/env python3
"""Instructions per request-reply: decoy against the bare echo service, per transport.

Usage: bench/mq_instructions.py [nats] [mqtt] [amqp1] [--seconds S] [--debug]

Wall-clock throughput on a machine others use is noise; the instructions a server
executes per message are not. For each transport this runs the responder under
Valgrind's callgrind (instrumentation off while it starts), drives it natively with
the same driver as the throughput benchmarks (`nats-load`, `mqtt-load`, `mq1-load`)
for S seconds with instrumentation on, and divides the responder's instruction count
by the replies the driver counted. decoy first, then the bare echo on the same client
library; the ratio of the two is the cost decoy adds. The callgrind files are kept in
bench/out/callgrind/ (`callgrind_annotate FILE | head -60` shows where the
instructions go). Needs valgrind and the brokers of the other MQ benchmarks; uses
the binaries bench/run.sh builds (target/release, or target/debug with --debug).
"""
import argparse
import json
import pathlib
import re
import signal
import socket
import subprocess
import tempfile
import time
import uuid

REPO = pathlib.Path(__file__).resolve().parent.parent
OUT = REPO / "bench" / "out" / "callgrind"
REPLY = "<quote><symbol>ACME</symbol><account>ACC-000000</account><price>42.00</price></quote>"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def callgrind(cmd, name):
    OUT.mkdir(parents=True, exist_ok=True)
    out = OUT / f"{name}.out"
    # Instrumented from the start: `callgrind_control -i on` did not reach decoy's
    # threads parked in epoll, so the start-up is counted and then subtracted (a
    # second run that only starts and answers the readiness probe).
    proc = subprocess.Popen(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", *cmd],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return proc, out


def run_once(cmd, name, ready, drive):
    proc, out = callgrind(cmd, name)
    result = None
    try:
        ready()
        if drive is not None:
            result = drive()
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(120)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return total_ir(out), result


def total_ir(path):
    text = path.read_text(errors="replace") if path.exists() else ""
    # A dump's `summary:` line can be 0; its `totals:` line is the count.
    counts = [int(x) for x in re.findall(r"^(?:summary|totals):\s+(\d+)", text, re.M)]
    return max(counts, default=0)


def measure(cmd, name, ready, drive, count):
    """Instructions per reply of the responder `cmd`, driven by `drive()`: a run that
    starts, answers the probe and stops, subtracted from one that is also driven."""
    idle, _ = run_once(cmd, f"{name}-idle", ready, None)
    busy, result = run_once(cmd, name, ready, drive)
    n = count(result)
    ir = busy - idle
    return {"instructions": ir, "startup": idle, "replies": n, "per_reply": ir / n if n else float("nan")}


def decoy_serve(decoy, root):
    return [str(decoy), "serve", "--root-dir", str(root), "--port", str(free_port()),
            "--bind-address", "127.0.0.1", "--no-watch", "--no-request-journal"]


def nats(t, seconds, tmp):
    load = t / "examples" / "nats-load"
    url = "nats://127.0.0.1:4222"
    rows = {}
    for side in ("decoy", "bare"):
        subject = f"decoy-bench.{uuid.uuid4().hex}.req"

        def drive(subject=subject):
            out = subprocess.run([str(load), "drive", "--url", url, "--subject", subject, "--seconds",
                                  str(seconds), "--warmup", "0", "--size", "490", "--window", "200"],
                                 capture_output=True, text=True, check=True).stdout
            return json.loads(out.strip().splitlines()[-1])

        def ready(subject=subject):
            deadline = time.monotonic() + 180
            while time.monotonic() < deadline:
                r = subprocess.run([str(load), "drive", "--url", url, "--subject", subject, "--seconds", "1",
                                    "--warmup", "0", "--size", "16", "--window", "1"],
                                   capture_output=True, text=True)
                if r.returncode == 0 and json.loads(r.stdout.strip().splitlines()[-1])["replies"] > 0:
                    return
                time.sleep(0.5)
            raise SystemExit(f"the {side} responder never answered")

        if side == "decoy":
            root = tmp / "nats"
            (root / "mq-mappings").mkdir(parents=True)
            (root / "mappings").mkdir()
            (root / "mq-connections.json").write_text(json.dumps([{
                "connectionId": "nats", "connectionData": {"type": "nats", "uri": url}}]))
            (root / "mq-mappings" / "quote.json").write_text(json.dumps({
                "request": {"destination": subject, "bodyMatcher": {"anything": "anything"}},
                "response": {"text": REPLY}, "receiveThreads": 1, "sendThreads": 1}))
            cmd = decoy_serve(t / "decoy", root)
        else:
            cmd = [str(load), "respond", "--url", url, "--subject", subject]
        rows[side] = measure(cmd, f"nats-{side}", ready, drive, lambda r: r["replies"])
    return rows


def mqtt(t, seconds, tmp):
    load = t / "examples" / "mqtt-load"
    rows = {}
    for side in ("decoy", "bare"):
        topic = f"bench-{uuid.uuid4().hex[:8]}/{side}"

        def drive(topic=topic, secs=seconds, window=100):
            out = subprocess.run([str(load), "drive", "--host", "127.0.0.1", "--port", "1883", "--topic", topic,
                                  "--qos", "1", "--window", str(window), "--seconds", str(secs), "--warmup", "0",
                                  "--size", "256"], capture_output=True, text=True, check=True).stdout
            return json.loads(out.strip().splitlines()[-1])

        def ready(topic=topic):
            deadline = time.monotonic() + 180
            while time.monotonic() < deadline:
                if drive(topic, 1, 1)["answered"] > 0:
                    return
            raise SystemExit(f"the {side} responder never answered")

        if side == "decoy":
            root = tmp / "mqtt"
            (root / "mq-mappings").mkdir(parents=True)
            (root / "mappings").mkdir()
            (root / "mq-connections.json").write_text(json.dumps([{
                "connectionId": "mosquitto",
                "connectionData": {"type": "mqtt", "uri": "mqtt://127.0.0.1:1883", "cleanSession": True,
                                   "clientId": f"bench-{uuid.uuid4().hex[:8]}", "writeConnectionsToOpen": 2}}]))
            (root / "mq-mappings" / "echo.json").write_text(json.dumps({
                "request": {"destination": {"name": f"{topic}/+", "type": "TOPIC"},
                            "bodyMatcher": {"anything": "anything"}},
                "response": {"text": "{\"ok\": true, \"pad\": \"" + "x" * 230 + "\"}"},
                "receiveThreads": 2, "sendThreads": 2}))
            cmd = decoy_serve(t / "decoy", root)
        else:
            cmd = [str(load), "respond", "--host", "127.0.0.1", "--port", "1883", "--filter", f"{topic}/+"]
        rows[side] = measure(cmd, f"mqtt-{side}", ready, drive, lambda r: r["answered"])
    return rows


def amqp1(t, seconds, tmp):
    load = t / "examples" / "mq1-load"
    rows = {}
    for side in ("decoy", "bare"):
        prefix = f"decoy-instr-{uuid.uuid4().hex[:8]}"
        common = ["--prefix", prefix, "--queues", "1"]
        subprocess.run([str(load), "setup", *common], check=True, stdout=subprocess.DEVNULL)

        def drive(common=common, secs=seconds, window=200):
            out = subprocess.run([str(load), "drive", *common, "--seconds", str(secs), "--warmup", "0",
                                  "--window", str(window)], capture_output=True, text=True, check=True,
                                 timeout=secs + 120).stdout
            return json.loads(out.strip().splitlines()[-1])

        def ready(common=common):
            deadline = time.monotonic() + 180
            while time.monotonic() < deadline:
                if drive(common, 1, 1)["replies"] > 0:
                    return
            raise SystemExit(f"the {side} responder never answered")

        if side == "decoy":
            root = tmp / "amqp1"
            (root / "mq-mappings").mkdir(parents=True)
            (root / "mappings").mkdir()
            (root / "mq-connections.json").write_text(json.dumps([{
                "connectionId": "amqp1",
                "connectionData": {"type": "amqp1", "uri": "amqp://guest:guest@127.0.0.1:5672",
                                   "readConnectionsToOpen": 2, "writeConnectionsToOpen": 2, "prefetch": 100,
                                   "unmatched": {"reject": True}}}]))
            (root / "mq-mappings" / "q00.json").write_text(json.dumps({
                "request": {"destination": f"/amq/queue/{prefix}.req.00", "bodyMatcher": {"anything": "anything"}},
                "response": {"text": REPLY}, "receiveThreads": 1, "sendThreads": 1}))
            cmd = decoy_serve(t / "decoy", root)
        else:
            cmd = [str(load), "respond", *common]
        try:
            rows[side] = measure(cmd, f"amqp1-{side}", ready, drive, lambda r: r["replies"])
        finally:
            subprocess.run([str(load), "teardown", *common], check=False, stdout=subprocess.DEVNULL)
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("transports", nargs="*", default=["nats", "mqtt", "amqp1"])
    ap.add_argument("--seconds", type=int, default=20)
    ap.add_argument("--debug", action="store_true")
    a = ap.parse_args()
    t = REPO / "target" / ("debug" if a.debug else "release")
    runs = {"nats": nats, "mqtt": mqtt, "amqp1": amqp1}
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in a.transports:
            results[name] = runs[name](t, a.seconds, pathlib.Path(tmp))
    print(f"{'transport':10s} {'decoy instr/reply':>18s} {'bare instr/reply':>17s} {'decoy/bare':>10s}  replies counted")
    for name, r in results.items():
        d, b = r["decoy"], r["bare"]
        ratio = d["per_reply"] / b["per_reply"] if b["per_reply"] else float("nan")
        print(f"{name:10s} {d['per_reply']:18.0f} {b['per_reply']:17.0f} {ratio:10.2f}  "
              f"{d['replies']} / {b['replies']}")
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "summary.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
