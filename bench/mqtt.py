#!/usr/bin/env python3
"""MQTT benchmark: decoy's MQTT virtual service against a bare rumqttc echo service.

Usage: bench/mqtt.py [SECONDS] [--rounds N] [--debug]

Needs Mosquitto on 127.0.0.1:1883 and the binaries bench/run.sh builds
(`target/release/decoy` and `target/release/examples/mqtt-load`; `--debug` uses the
debug builds instead, for a quick look). For each scenario, side by side in one run:
decoy serves a mapping on `bench-<run>/req/+` (an `anything` matcher, a fixed reply,
MQTT 5 response topic and correlation data) and `mqtt-load drive` keeps a window of
requests in flight; then `mqtt-load respond` (rumqttc, the library decoy uses: no
matching, no files, no metrics, the ceiling on this broker) serves the same topic and
is driven the same way. Prints replies per second, p50/p99 round trip, and decoy's
ratio to the ceiling; every request is counted against its reply. Writes
bench/out/mqtt.json.

The two are measured in turn, `--rounds` times (default 1; the order reversed every
other round: decoy then the echo, then the echo then decoy), each measurement on a
fresh process, and each figure is the median of its rounds; the ratio is the one of
the medians, each round's own ratio listed beside it and, with each round's figures,
under the scenario's "rounds" in the JSON. The unanswered and mismatched counts are
the sum over the rounds. On a machine whose cores are shared with the load generator
or with other work the figures drift from run to run: give it several rounds.
"""
import argparse
import json
import pathlib
import socket
import subprocess
import sys
import tempfile
import time
import uuid

import rounds

REPO = pathlib.Path(__file__).resolve().parent.parent
PROFILE = "debug" if "--debug" in sys.argv else "release"
DECOY = REPO / "target" / PROFILE / "decoy"
LOAD = REPO / "target" / PROFILE / "examples" / "mqtt-load"
HOST, PORT = "127.0.0.1", 1883

SCENARIOS = [
    # name, QoS, window, receive threads
    ("QoS 1, window 100", 1, 100, 2),
    ("QoS 0, window 100", 0, 100, 2),
]


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def drive(topic, qos, window, seconds):
    out = subprocess.run([str(LOAD), "drive", "--host", HOST, "--port", str(PORT), "--topic", topic,
                          "--qos", str(qos), "--window", str(window), "--seconds", str(seconds),
                          "--warmup", "2", "--size", "256"],
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def decoy_root(base, topic, threads):
    root = base / "root"
    (root / "mq-mappings").mkdir(parents=True)
    (root / "mappings").mkdir()
    (root / "mq-connections.json").write_text(json.dumps([{
        "connectionId": "mosquitto",
        "connectionData": {"type": "mqtt", "uri": f"mqtt://{HOST}:{PORT}", "cleanSession": True,
                           "clientId": f"bench-{uuid.uuid4().hex[:8]}", "writeConnectionsToOpen": 2},
    }]))
    (root / "mq-mappings" / "echo.json").write_text(json.dumps({
        "request": {"destination": {"name": f"{topic}/+", "type": "TOPIC"}, "bodyMatcher": {"anything": "anything"}},
        "response": {"text": "{\"ok\": true, \"pad\": \"" + "x" * 230 + "\"}"},
        "receiveThreads": threads, "sendThreads": threads,
    }))
    return root


def wait_ready(topic):
    """Drives one short burst until decoy answers (it subscribes once serving)."""
    for _ in range(30):
        r = drive(topic, 1, 1, 1)
        if r["answered"] > 0:
            return
    sys.exit("decoy never answered")


def measure_decoy(topic, qos, window, threads, seconds):
    with tempfile.TemporaryDirectory() as tmp:
        root = decoy_root(pathlib.Path(tmp), topic, threads)
        proc = subprocess.Popen([str(DECOY), "serve", "--root-dir", str(root), "--port", str(free_port()),
                                 "--bind-address", "127.0.0.1", "--no-request-journal"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_ready(topic)
            return drive(topic, qos, window, seconds)
        finally:
            proc.terminate()
            proc.wait(timeout=20)


def measure_echo(topic, qos, window, seconds):
    echo = subprocess.Popen([str(LOAD), "respond", "--host", HOST, "--port", str(PORT), "--filter", f"{topic}/+"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(1)
        return drive(topic, qos, window, seconds)
    finally:
        echo.terminate()
        echo.wait(timeout=10)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("seconds", nargs="?", type=int, default=10)
    ap.add_argument("--rounds", type=rounds.rounds_arg, default=1)
    ap.add_argument("--debug", action="store_true", help="the debug builds, for a quick look")
    args = ap.parse_args()
    seconds = args.seconds
    for b in (DECOY, LOAD):
        if not b.exists():
            sys.exit(f"{b} is missing: run bench/run.sh (or cargo build -p decoy --features bench --example mqtt-load, with --debug)")
    results = []
    for name, qos, window, threads in SCENARIOS:
        run = uuid.uuid4().hex[:8]
        sides = {"decoy": lambda: measure_decoy(f"bench-{run}/decoy", qos, window, threads, seconds),
                 "echo": lambda: measure_echo(f"bench-{run}/echo", qos, window, seconds)}
        per_round = []
        for rnd in range(args.rounds):
            order = rounds.order(rnd, ["decoy", "echo"])
            got = {side: sides[side]() for side in order}
            d, e = got["decoy"], got["echo"]
            per_round.append({"round": rnd + 1, "order": order, "decoy": d, "echo": e,
                              "ratio": rounds.ratio(d["msgs_per_s"], e["msgs_per_s"])})
            if args.rounds > 1:
                print(f"  round {rnd + 1} ({' then '.join(order)}): decoy {d['msgs_per_s']:.0f} msg/s p99 "
                      f"{d['p99_ms']:.1f} ms | echo {e['msgs_per_s']:.0f} msg/s p99 {e['p99_ms']:.1f} ms | ratio "
                      f"{rounds.show(per_round[-1]['ratio'])}x | unanswered {d['unanswered']}/{e['unanswered']}, "
                      f"mismatched {d['mismatched']}/{e['mismatched']}", flush=True)
        d = rounds.median([r["decoy"] for r in per_round])
        e = rounds.median([r["echo"] for r in per_round])
        ratio = rounds.ratio(d["msgs_per_s"], e["msgs_per_s"])
        ratios = [r["ratio"] for r in per_round]
        results.append({"scenario": name, "decoy": d, "echo": e, "ratio": ratio, "rounds": per_round})
        print(f"{name}: decoy {d['msgs_per_s']:.0f} msg/s p99 {d['p99_ms']:.1f} ms | "
              f"bare rumqttc echo {e['msgs_per_s']:.0f} msg/s p99 {e['p99_ms']:.1f} ms | "
              f"ratio {rounds.show(ratio)}x{rounds.listed(ratios)} | unanswered decoy {d['unanswered']} "
              f"echo {e['unanswered']}, mismatched decoy {d['mismatched']} echo {e['mismatched']}", flush=True)
    out = REPO / "bench" / "out"
    out.mkdir(parents=True, exist_ok=True)
    (out / "mqtt.json").write_text(json.dumps({"profile": PROFILE, "seconds": seconds, "rounds": args.rounds,
                                               "results": results}, indent=2))


if __name__ == "__main__":
    main()
