#!/usr/bin/env python3
"""AMQP 1.0 benchmark: decoy's `amqp1` virtual services against a bare responder on
the same client library (fe2o3-amqp), through RabbitMQ's rabbitmq_amqp1_0 plugin.

Usage: mq_amqp1.py [SECONDS] [--debug]

For each scenario it declares the queues (`mq1-load setup`), serves them with
decoy and drives them with `mq1-load drive` (request-reply, a window of requests in
flight per queue, every reply matched to its request by correlation id), then
serves them with the bare responder (`mq1-load respond`: no matching, no files, no
metrics: the ceiling on this broker) and drives them the same way, in the same run.
Prints both side by side with the ratio and writes bench/out/mq_amqp1.json.
`--debug` uses the debug build (target/debug) instead of the release one: its
figures are for comparing the two sides of one run only.
"""
import json
import pathlib
import shutil
import signal
import subprocess
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parent.parent
URI = "amqp://guest:guest@127.0.0.1:5672"
REPLY = "<quote><symbol>ACME</symbol><account>ACC-000000</account><price>42.00</price></quote>"

SCENARIOS = [
    # name, queues, matcher, window per queue
    ("1 queue, anything", 1, {"anything": "anything"}, 200),
    ("10 queues, XPath", 10, {"matchesXPath": "/quoteRequest[symbol='ACME']"}, 20),
]


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    profile = "debug" if "--debug" in sys.argv else "release"
    seconds = int(args[0]) if args else 10
    decoy = REPO / "target" / profile / "decoy"
    load = REPO / "target" / profile / "examples" / "mq1-load"
    base = pathlib.Path(tempfile.mkdtemp(prefix="decoy-amqp1-bench-"))
    rows = []
    try:
        for n, (name, queues, matcher, window) in enumerate(SCENARIOS):
            prefix = f"decoy-bench1-{n}"
            common = ["--prefix", prefix, "--queues", str(queues)]
            subprocess.run([str(load), "setup", *common], check=True)
            row = {"scenario": name, "queues": queues, "window": window}
            try:
                root = base / prefix
                (root / "mq-mappings").mkdir(parents=True)
                (root / "mq-connections.json").write_text(json.dumps([{
                    "connectionId": "amqp1",
                    "connectionData": {"type": "amqp1", "uri": URI, "readConnectionsToOpen": 2,
                                       "writeConnectionsToOpen": 2, "prefetch": 100,
                                       "unmatched": {"reject": True}}}]))
                for i in range(queues):
                    (root / "mq-mappings" / f"q{i:02d}.json").write_text(json.dumps({
                        "request": {"destination": f"/amq/queue/{prefix}.req.{i:02d}", "bodyMatcher": matcher},
                        "response": {"text": REPLY}, "receiveThreads": 1, "sendThreads": 1}))
                drive = [str(load), "drive", *common, "--seconds", str(seconds), "--warmup", "3",
                         "--window", str(window)]
                server = subprocess.Popen([str(decoy), "serve", "--root-dir", str(root), "--port", "0",
                                           "--bind-address", "127.0.0.1", "--no-watch"],
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                try:
                    time.sleep(2)
                    row["decoy"] = json.loads(subprocess.run(drive, capture_output=True, text=True, check=True,
                                                             timeout=seconds + 60).stdout.strip().splitlines()[-1])
                finally:
                    server.send_signal(signal.SIGTERM)
                    server.wait(30)
                # What decoy left unanswered (the driver stopped mid-window) must not
                # reach the bare responder's count.
                subprocess.run([str(load), "teardown", *common], check=True)
                subprocess.run([str(load), "setup", *common], check=True)
                bare = subprocess.Popen([str(load), "respond", *common], stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL)
                try:
                    time.sleep(2)
                    row["bare"] = json.loads(subprocess.run(drive, capture_output=True, text=True, check=True,
                                                            timeout=seconds + 60).stdout.strip().splitlines()[-1])
                finally:
                    bare.send_signal(signal.SIGINT)
                    bare.wait(30)
            finally:
                subprocess.run([str(load), "teardown", *common], check=False)
            d, b = row["decoy"], row["bare"]
            row["ratio"] = d["tps"] / b["tps"] if b["tps"] else None
            ratio = f"{row['ratio']:.2f}" if row["ratio"] is not None else "n/a"
            print(f"{name:20s} decoy {d['tps']:8.0f} msg/s p99 {d['p99_ms']:7.2f} ms   "
                  f"bare fe2o3-amqp {b['tps']:8.0f} msg/s p99 {b['p99_ms']:7.2f} ms   "
                  f"ratio {ratio}   wrong {d['wrong']}/{b['wrong']}", flush=True)
            rows.append(row)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    out = REPO / "bench" / "out" / "mq_amqp1.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"seconds": seconds, "profile": profile, "rows": rows}, indent=2))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
