#!/usr/bin/env python3
"""MQ benchmark: decoy's AMQP virtual services against a bare lapin responder.

Run by bench/run.sh (which builds decoy and the `mq-load` example in release mode)
against the machine's RabbitMQ. For each scenario it declares the request queues,
serves them with decoy, drives them with `mq-load drive`, then serves them with the
bare responder (`mq-load respond`, no matching, no files, no metrics: the ceiling on
this broker) and drives them the same way. Writes bench/out/mq.json for report.py.

    python3 bench/mq.py [SECONDS] [--rounds N]

The two are measured in turn, `--rounds` times (default 1; the order reversed every
other round: decoy then the bare responder, then the bare responder then decoy), each
measurement on a fresh process, and each figure is the median of its rounds (decoy's
processing p99 and both peak RSS figures too); the ratio is the one of the medians,
each round's own ratio listed beside it and, with each round's figures, under the
row's "rounds" in the JSON. The wrong counts are the sum over the rounds. On a
machine whose cores are shared with the load generator or with other work the
figures drift from run to run: give it several rounds.

Scenarios follow Traffic Parrot's published benchmark (20 queues, 20 XML mappings
with an XPath matcher each, 490-byte messages, 1 receive and 1 send thread per
queue, 5 read and 5 write connections), with a 100 ms fixed delay and without, plus
a plain reply on one queue with an `anything` matcher.
"""
import argparse
import json
import pathlib
import re
import shutil
import signal
import subprocess
import tempfile
import time

import rounds

REPO = pathlib.Path(__file__).resolve().parent.parent
DECOY = REPO / "target" / "release" / "decoy"
LOAD = REPO / "target" / "release" / "examples" / "mq-load"
URL = "amqp://guest:guest@127.0.0.1:5672/%2f"
REPLY = "<quote><symbol>ACME</symbol><account>ACC-000000</account><price>42.00</price></quote>"
# Traffic Parrot's scenario: the reply takes two values from the request by XPath
# (through decoy's bundled response-template plugin); the driver checks that each reply
# carries its own request's account. Same size as REPLY.
TEMPLATED_REPLY = ("<quote><symbol>{{xPath request.body '/quoteRequest/symbol/text()'}}</symbol>"
                   "<account>{{xPath request.body '/quoteRequest/account/text()'}}</account><price>42.00</price></quote>")

SCENARIOS = [
    # name, queues, delay ms, matcher, window per queue
    ("20 queues, XPath, 100 ms delay", 20, 100, {"matchesXPath": "/quoteRequest[symbol='ACME']"}, 50),
    ("20 queues, XPath, no delay", 20, 0, {"matchesXPath": "/quoteRequest[symbol='ACME']"}, 10),
    ("1 queue, anything, no delay", 1, 0, {"anything": "anything"}, 200),
]


def load(*args):
    return [str(LOAD), *args, "--url", URL]


def root_for(base, prefix, queues, delay, matcher, templated):
    root = base / prefix
    (root / "mq-mappings").mkdir(parents=True)
    (root / "mappings").mkdir()
    (root / "mq-connections.json").write_text(json.dumps([{
        "connectionId": "rabbit",
        "connectionData": {"type": "amqp", "uri": URL, "readConnectionsToOpen": 5, "writeConnectionsToOpen": 5,
                           "prefetch": 100, "unmatched": {"reject": True}},
    }]))
    for i in range(queues):
        (root / "mq-mappings" / f"quote-{i:02d}.json").write_text(json.dumps({
            "mappingId": f"00000000-0000-4000-8000-{i:012d}",
            "request": {"destination": {"name": f"{prefix}.req.{i:02d}", "type": "QUEUE"}, "bodyMatcher": matcher},
            "response": ({"text": TEMPLATED_REPLY, "transformers": ["response-template"]} if templated else {"text": REPLY})
            | {"format": "MQFMT_STRING", "fixedDelayMilliseconds": delay},
            "receiveThreads": 1,
            "sendThreads": 1,
        }))
    return root


def drive(prefix, queues, window, seconds, expect_account=False):
    out = subprocess.run(load("drive", "--prefix", prefix, "--queues", str(queues), "--seconds", str(seconds),
                              "--warmup", "3", "--size", "490", "--window", str(window),
                              *(["--expect-account"] if expect_account else [])),
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def processing_p99(metrics_text):
    """The upper bound of the bucket holding the 99th percentile of decoy's own
    processing time (request read to reply confirmed, delays excluded)."""
    buckets = [(float(le), int(n)) for le, n in
               re.findall(r'decoy_processing_seconds_bucket\{transport="amqp",le="([0-9.]+)"\} (\d+)', metrics_text)]
    total = re.search(r'decoy_processing_seconds_count\{transport="amqp"\} (\d+)', metrics_text)
    if not buckets or not total or int(total.group(1)) == 0:
        return None
    need = 0.99 * int(total.group(1))
    for le, n in buckets:
        if n >= need:
            return le * 1000
    return None


def metrics(port):
    import urllib.request
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/__admin/metrics", timeout=5) as r:
        return r.read().decode()


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def measure_decoy(root, prefix, queues, window, seconds, templated):
    port = free_port()
    server = subprocess.Popen([str(DECOY), "serve", "--root-dir", str(root), "--port", str(port),
                               "--bind-address", "127.0.0.1", "--no-watch"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(1.5)
        result = drive(prefix, queues, window, seconds, expect_account=templated)
        result["processing_p99_ms"] = processing_p99(metrics(port))
        result["rss_mib"] = rss(server.pid)
        return result
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(30)


def measure_bare(prefix, queues, delay, window, seconds):
    responder = subprocess.Popen(load("respond", "--prefix", prefix, "--queues", str(queues),
                                      "--delay-ms", str(delay)),
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(1.5)
        result = drive(prefix, queues, window, seconds)
        result["rss_mib"] = rss(responder.pid)
        return result
    finally:
        responder.send_signal(signal.SIGINT)
        responder.wait(30)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("seconds", nargs="?", type=int, default=10)
    ap.add_argument("--rounds", type=rounds.rounds_arg, default=1)
    args = ap.parse_args()
    seconds = args.seconds
    base = pathlib.Path(tempfile.mkdtemp(prefix="decoy-mq-bench-"))
    results = []
    try:
        for n, (name, queues, delay, matcher, window) in enumerate(SCENARIOS):
            prefix = f"decoy-bench-{n}"
            row = {"scenario": name, "queues": queues, "delay_ms": delay, "window": window}
            subprocess.run(load("setup", "--prefix", prefix, "--queues", str(queues)), check=True)
            per_round = []
            try:
                templated = "matchesXPath" in matcher
                row["templated"] = templated
                root = root_for(base, prefix, queues, delay, matcher, templated)
                sides = {"decoy": lambda: measure_decoy(root, prefix, queues, window, seconds, templated),
                         "bare": lambda: measure_bare(prefix, queues, delay, window, seconds)}
                for rnd in range(args.rounds):
                    order = rounds.order(rnd, ["decoy", "bare"])
                    got = {side: sides[side]() for side in order}
                    d, b = got["decoy"], got["bare"]
                    per_round.append({"round": rnd + 1, "order": order, "decoy": d, "bare": b,
                                      "ratio": rounds.ratio(d["tps"], b["tps"])})
                    if args.rounds > 1:
                        print(f"  round {rnd + 1} ({' then '.join(order)}): decoy {d['tps']:8.0f} t/s p99 "
                              f"{d['p99_ms']:7.2f} ms  bare {b['tps']:8.0f} t/s p99 {b['p99_ms']:7.2f} ms  "
                              f"ratio {rounds.show(per_round[-1]['ratio'])}  wrong {d['wrong']}/{b['wrong']}",
                              flush=True)
            finally:
                subprocess.run(load("teardown", "--prefix", prefix, "--queues", str(queues)), check=False)
            d = row["decoy"] = rounds.median([r["decoy"] for r in per_round])
            b = row["bare"] = rounds.median([r["bare"] for r in per_round])
            row["ratio"] = rounds.ratio(d["tps"], b["tps"])
            row["rounds"] = per_round
            print(f"{name:34s} decoy {d['tps']:8.0f} t/s p99 {d['p99_ms']:7.2f} ms (processing p99 ≤ "
                  f"{d['processing_p99_ms']} ms)  bare {b['tps']:8.0f} t/s p99 {b['p99_ms']:7.2f} ms  "
                  f"ratio {rounds.show(row['ratio'])}{rounds.listed([r['ratio'] for r in per_round])}  "
                  f"wrong {d['wrong']}/{b['wrong']}", flush=True)
            results.append(row)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    out = REPO / "bench" / "out" / "mq.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"seconds": seconds, "rounds": args.rounds, "rows": results}, indent=2))
    print(f"wrote {out}")


def rss(pid):
    try:
        status = pathlib.Path(f"/proc/{pid}/status").read_text()
        return int(re.search(r"VmHWM:\s+(\d+) kB", status).group(1)) / 1024
    except (OSError, AttributeError):
        return None


if __name__ == "__main__":
    main()
