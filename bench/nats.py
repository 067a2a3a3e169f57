#!/usr/bin/env python3
"""NATS benchmark: decoy's NATS virtual services against a bare async-nats responder.

Core request-reply through the machine's NATS server (127.0.0.1:4222, or the URL
given). For each scenario it serves one subject with decoy and drives it with
`nats-load drive` (requests in flight, each matched to its reply), then serves the
same subject with `nats-load respond` (a hand-written echo service on async-nats, the
client decoy uses: no files, no matching, no metrics: the ceiling) and drives it the
same way, in the same run, and prints both side by side with the ratio. Writes
bench/out/nats.json.

    python3 bench/nats.py [seconds] [--rounds N] [--profile release|debug] [--url nats://...]

bench/run.sh builds decoy and the `nats-load` example in release mode; `--profile
debug` uses a debug build (both sides alike, for a quick look only).

The two are measured in turn, `--rounds` times (default 1; the order reversed every
other round: decoy then the bare echo, then the bare echo then decoy), each
measurement on a fresh process, and each figure is the median of its rounds; the
ratios (throughput and p99) are the ones of the medians, each round's own listed
beside them and, with each round's figures, under the row's "rounds" in the JSON.
Every round must have no wrong reply. On a machine whose cores are shared with the
load generator or with other work the figures drift from run to run: give it several
rounds.
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

import rounds

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
    ap.add_argument("--rounds", type=rounds.rounds_arg, default=1)
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

        def measure_decoy():
            port = free_port()
            server = subprocess.Popen([str(decoy), "serve", "--root-dir", str(root), "--port", str(port),
                                       "--bind-address", "127.0.0.1", "--no-watch"],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                wait_http(port, server)
                time.sleep(1)  # its subscription, made in the background
                return drive(subject, window)
            finally:
                server.terminate()
                server.wait(timeout=30)

        def measure_bare():
            bare = subprocess.Popen([str(load), "respond", "--url", a.url, "--subject", subject],
                                    stdout=subprocess.PIPE, text=True)
            try:
                bare.stdout.readline()  # "ready"
                return drive(subject, window)
            finally:
                bare.terminate()
                bare.wait(timeout=30)

        sides = {"decoy": measure_decoy, "bare": measure_bare}
        per_round = []
        for rnd in range(a.rounds):
            order = rounds.order(rnd, ["decoy", "bare"])
            got = {side: sides[side]() for side in order}
            through_decoy, ceiling = got["decoy"], got["bare"]
            for r in (through_decoy, ceiling):
                assert r["wrong"] == 0, r
            per_round.append({"round": rnd + 1, "order": order, "decoy": through_decoy, "bare": ceiling,
                              "ratio_tps": rounds.ratio(through_decoy["tps"], ceiling["tps"]),
                              "ratio_p99": through_decoy["p99_ms"] / max(ceiling["p99_ms"], 1e-9)})
            if a.rounds > 1:
                print(f"  round {rnd + 1} ({' then '.join(order)}): decoy {through_decoy['tps']:.0f} req/s p99 "
                      f"{through_decoy['p99_ms']:.2f} ms | bare {ceiling['tps']:.0f} req/s p99 "
                      f"{ceiling['p99_ms']:.2f} ms | throughput {rounds.show(per_round[-1]['ratio_tps'])}x, "
                      f"p99 {rounds.show(per_round[-1]['ratio_p99'])}x", flush=True)
        through_decoy = rounds.median([r["decoy"] for r in per_round])
        ceiling = rounds.median([r["bare"] for r in per_round])
        row = {"scenario": name, "window": window, "decoy": through_decoy, "bare": ceiling,
               "ratio_tps": rounds.ratio(through_decoy["tps"], ceiling["tps"]),
               "ratio_p99": through_decoy["p99_ms"] / max(ceiling["p99_ms"], 1e-9), "rounds": per_round}
        rows.append(row)
        print(f"{name}: decoy {through_decoy['tps']:.0f} req/s p99 {through_decoy['p99_ms']:.2f} ms | "
              f"bare async-nats {ceiling['tps']:.0f} req/s p99 {ceiling['p99_ms']:.2f} ms | "
              f"throughput {rounds.show(row['ratio_tps'])}x the bare echo"
              f"{rounds.listed([r['ratio_tps'] for r in per_round])}, "
              f"p99 {rounds.show(row['ratio_p99'])}x{rounds.listed([r['ratio_p99'] for r in per_round])}", flush=True)
    out = REPO / "bench" / "out"
    out.mkdir(parents=True, exist_ok=True)
    (out / "nats.json").write_text(json.dumps({"profile": a.profile, "seconds": a.seconds, "rounds": a.rounds,
                                               "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
