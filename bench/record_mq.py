#!/usr/bin/env python3
"""Recording overhead: messages/s through `decoy record-mq` against the back end alone.

On the machine's RabbitMQ, in one run, side by side: the bare lapin responder of
`mq-load respond` is the real back end on `real.req.NN`; `mq-load drive` drives it
directly (the back end alone), then drives `rec.req.NN`, where `decoy record-mq`
listens and forwards each request to `real.req.NN` (one route per queue), pairs the
reply and passes it back (through recording). Prints and writes
bench/out/record_mq.json. Usage:

    bench/record_mq.py [--profile release|debug] [--queues 1] [--seconds 10] [--window 50]

`cargo build --release -p decoy --features bench --example mq-load` (or without
`--release` and `--profile debug`) first. Debug figures, or figures taken while
something else runs, are not comparable with the other benchmarks.
"""
import argparse
import json
import pathlib
import shutil
import signal
import subprocess
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parent.parent
URL = "amqp://guest:guest@127.0.0.1:5672/%2f"

ap = argparse.ArgumentParser()
ap.add_argument("--profile", default="release")
ap.add_argument("--queues", type=int, default=1)
ap.add_argument("--seconds", type=int, default=10)
ap.add_argument("--window", type=int, default=50)
args = ap.parse_args()
DECOY = REPO / "target" / args.profile / "decoy"
LOAD = REPO / "target" / args.profile / "examples" / "mq-load"


def load(*a):
    return [str(LOAD), *a, "--url", URL]


def drive(prefix):
    out = subprocess.run(load("drive", "--prefix", prefix, "--queues", str(args.queues),
                              "--seconds", str(args.seconds), "--warmup", "3", "--size", "490",
                              "--window", str(args.window)),
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def wait_for(p, text):
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        line = p.stdout.readline()
        if not line:
            raise RuntimeError(f"{p.args[0]} ended before saying {text!r}")
        if text in line:
            return
    raise RuntimeError(f"{p.args[0]} did not say {text!r}")


results = {}
for prefix in ("real", "rec"):
    subprocess.run(load("setup", "--prefix", prefix, "--queues", str(args.queues)), check=True)
responder = subprocess.Popen(load("respond", "--prefix", "real", "--queues", str(args.queues)),
                             stdout=subprocess.PIPE, text=True)
try:
    wait_for(responder, "ready")
    results["back end alone"] = drive("real")
    root = pathlib.Path(tempfile.mkdtemp(prefix="decoy-record-bench-"))
    (root / "mq-connections.json").write_text(json.dumps([{
        "connectionId": "rabbit",
        "connectionData": {"type": "amqp", "uri": URL, "prefetch": 100},
    }]))
    routes = root.parent / f"{root.name}-routes.json"
    routes.write_text(json.dumps({"routes": [
        {"listen": f"rec.req.{i:02d}", "forward": f"real.req.{i:02d}"} for i in range(args.queues)]}))
    rec = subprocess.Popen([str(DECOY), "record-mq", "--root-dir", str(root), "--routes", str(routes)],
                           stdout=subprocess.PIPE, text=True)
    try:
        wait_for(rec, "recording")
        results["through decoy record-mq"] = drive("rec")
    finally:
        rec.send_signal(signal.SIGINT)
        out, _ = rec.communicate(timeout=120)
    results["summary"] = out.strip().splitlines()[-1] if out.strip() else ""
    shutil.rmtree(root)
    routes.unlink()
finally:
    responder.terminate()
    responder.wait(timeout=30)
    for prefix in ("real", "rec"):
        subprocess.run(load("teardown", "--prefix", prefix, "--queues", str(args.queues)))

print(json.dumps(results, indent=2))
alone = results["back end alone"]["tps"]
through = results["through decoy record-mq"]["tps"]
print(f"{args.profile} build, {args.queues} queue(s), window {args.window}: back end alone {alone:.0f} msg/s, "
      f"through the recorder {through:.0f} msg/s ({through / alone:.0%})")
out_dir = REPO / "bench" / "out"
out_dir.mkdir(exist_ok=True)
(out_dir / "record_mq.json").write_text(json.dumps({"profile": args.profile, "queues": args.queues,
                                                     "window": args.window, **results}, indent=2))
