#!/usr/bin/env python3
"""AMQP 1.0 benchmark: decoy's `amqp1` virtual services against a bare responder on
the same client library (fe2o3-amqp), through RabbitMQ's rabbitmq_amqp1_0 plugin.

Usage: mq_amqp1.py [SECONDS] [--rounds N] [--debug]

For each scenario it declares the queues (`mq1-load setup`), serves them with
decoy and drives them with `mq1-load drive` (request-reply, a window of requests in
flight per queue, every reply matched to its request by correlation id), then
serves them with the bare responder (`mq1-load respond`: no matching, no files, no
metrics: the ceiling on this broker) and drives them the same way, in the same run.
Prints both side by side with the ratio and writes bench/out/mq_amqp1.json.
`--debug` uses the debug build (target/debug) instead of the release one: its
figures are for comparing the two sides of one run only.

The two are measured in turn, `--rounds` times (default 1; the order reversed every
other round: decoy then the bare responder, then the bare responder then decoy), each
measurement on a fresh process and freshly declared queues, and each figure is the
median of its rounds; the ratio is the one of the medians, each round's own ratio
listed beside it and, with each round's figures, under the row's "rounds" in the
JSON. The wrong counts are the sum over the rounds. On a machine whose cores are
shared with the load generator or with other work the figures drift from run to run:
give it several rounds.
"""
import argparse
import json
import pathlib
import shutil
import signal
import subprocess
import tempfile
import time

import rounds

REPO = pathlib.Path(__file__).resolve().parent.parent
URI = "amqp://guest:guest@127.0.0.1:5672"
REPLY = "<quote><symbol>ACME</symbol><account>ACC-000000</account><price>42.00</price></quote>"

SCENARIOS = [
    # name, queues, matcher, window per queue
    ("1 queue, anything", 1, {"anything": "anything"}, 200),
    ("10 queues, XPath", 10, {"matchesXPath": "/quoteRequest[symbol='ACME']"}, 20),
]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("seconds", nargs="?", type=int, default=10)
    ap.add_argument("--rounds", type=rounds.rounds_arg, default=1)
    ap.add_argument("--debug", action="store_true", help="the debug build, for comparing the two sides of one run")
    a = ap.parse_args()
    profile = "debug" if a.debug else "release"
    seconds = a.seconds
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
            per_round = []
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

                def measure(cmd, stop):
                    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                    try:
                        time.sleep(2)
                        return json.loads(subprocess.run(drive, capture_output=True, text=True, check=True,
                                                         timeout=seconds + 60).stdout.strip().splitlines()[-1])
                    finally:
                        proc.send_signal(stop)
                        proc.wait(30)

                sides = {"decoy": lambda: measure([str(decoy), "serve", "--root-dir", str(root), "--port", "0",
                                                   "--bind-address", "127.0.0.1", "--no-watch"], signal.SIGTERM),
                         "bare": lambda: measure([str(load), "respond", *common], signal.SIGINT)}
                fresh = True
                for rnd in range(a.rounds):
                    order = rounds.order(rnd, ["decoy", "bare"])
                    got = {}
                    for side in order:
                        if not fresh:
                            # What the side before left unanswered (the driver stopped
                            # mid-window) must not reach this one's count.
                            subprocess.run([str(load), "teardown", *common], check=True)
                            subprocess.run([str(load), "setup", *common], check=True)
                        fresh = False
                        got[side] = sides[side]()
                    d, b = got["decoy"], got["bare"]
                    per_round.append({"round": rnd + 1, "order": order, "decoy": d, "bare": b,
                                      "ratio": rounds.ratio(d["tps"], b["tps"])})
                    if a.rounds > 1:
                        print(f"  round {rnd + 1} ({' then '.join(order)}): decoy {d['tps']:8.0f} msg/s p99 "
                              f"{d['p99_ms']:7.2f} ms   bare {b['tps']:8.0f} msg/s p99 {b['p99_ms']:7.2f} ms   "
                              f"ratio {rounds.show(per_round[-1]['ratio'])}   wrong {d['wrong']}/{b['wrong']}",
                              flush=True)
            finally:
                subprocess.run([str(load), "teardown", *common], check=False)
            d = row["decoy"] = rounds.median([r["decoy"] for r in per_round])
            b = row["bare"] = rounds.median([r["bare"] for r in per_round])
            row["ratio"] = rounds.ratio(d["tps"], b["tps"])
            row["rounds"] = per_round
            print(f"{name:20s} decoy {d['tps']:8.0f} msg/s p99 {d['p99_ms']:7.2f} ms   "
                  f"bare fe2o3-amqp {b['tps']:8.0f} msg/s p99 {b['p99_ms']:7.2f} ms   "
                  f"ratio {rounds.show(row['ratio'])}{rounds.listed([r['ratio'] for r in per_round])}   "
                  f"wrong {d['wrong']}/{b['wrong']}", flush=True)
            rows.append(row)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    out = REPO / "bench" / "out" / "mq_amqp1.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"seconds": seconds, "profile": profile, "rounds": a.rounds, "rows": rows}, indent=2))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
