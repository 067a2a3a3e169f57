#!/usr/bin/env python3
"""Soak test (a benchmark, not a test): decoy under mixed load for a long time.

    python3 bench/soak.py --duration 1800        # 30 minutes, as in docs/reliability.md
    python3 bench/soak.py --duration 120         # a short trial

Builds decoy and the `mq-load` example in release mode (skip with --no-build), writes
a root directory of its own, starts `decoy serve` on it, and for --duration seconds
runs at once:

- HTTP load (--http-rate requests a second over several connections): a static stub,
  a templated one, a delayed one (50 ms), unmatched POSTs with large bodies (256 KiB
  to 1 MiB, --body-kib), and admin calls (mappings, requests, near misses, metrics, problems);
- a reload every second (a mapping file rewritten, its answer checked), and every
  tenth one an MQ mapping rewritten too (the MQ runtime is replaced);
- MQ requests and replies through RabbitMQ (127.0.0.1:5672, guest/guest):
  `mq-load soak`, persistent requests each with its own id, replies counted;
- every minute, RabbitMQ drops decoy's connections (`rabbitmqctl close_connection`
  for each connection of the decoy process, found with `ss`), so decoy reconnects.

Every 10 s it samples decoy's resident memory (VmRSS), open descriptors and
threads. At the end it prints a Markdown table (RSS over time, fds, errors, lost MQ
requests) and writes it with the raw samples to bench/out/soak.md and soak.json.
The run passes when RSS plateaus (the last third's peak within 10% of the middle
third's), errors are 0 and no MQ request is lost.
"""
import argparse
import http.client
import json
import os
import pathlib
import random
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time

REPO = pathlib.Path(__file__).resolve().parent.parent
DECOY = REPO / "target" / "release" / "decoy"
LOAD = REPO / "target" / "release" / "examples" / "mq-load"
URL = "amqp://guest:guest@127.0.0.1:5672/%2f"
OUT = REPO / "bench" / "out"


class Errors:
    """Errors by kind, with the first few messages of each."""

    def __init__(self):
        self.lock = threading.Lock()
        self.counts = {}
        self.examples = {}

    def add(self, kind, message):
        with self.lock:
            self.counts[kind] = self.counts.get(kind, 0) + 1
            ex = self.examples.setdefault(kind, [])
            if len(ex) < 3:
                ex.append(str(message)[:300])

    def total(self):
        with self.lock:
            return sum(self.counts.values())


def write_root(root, prefix, queues):
    (root / "mappings").mkdir(parents=True)
    (root / "__files").mkdir()
    (root / "mq-mappings").mkdir()
    stubs = [
        {"request": {"method": "GET", "url": "/static"}, "response": {"status": 200, "body": "ok"}},
        {"request": {"method": "GET", "urlPathPattern": "/tpl/[0-9]+"},
         "response": {"status": 200, "body": "id={{request.pathSegments.[1]}} q={{request.query.q}}",
                      "transformers": ["response-template"]}},
        {"request": {"method": "GET", "url": "/delayed"},
         "response": {"status": 200, "body": "late", "fixedDelayMilliseconds": 50}},
        # Near misses for the unmatched requests to be scored against.
        {"request": {"method": "POST", "url": "/orders", "bodyPatterns": [{"contains": "<order"}]},
         "response": {"status": 201}},
        {"request": {"method": "POST", "urlPathPattern": "/api/.*",
                     "bodyPatterns": [{"matchesJsonPath": "$.items[0].sku"}]},
         "response": {"status": 200}},
    ]
    (root / "mappings" / "soak.json").write_text(json.dumps({"mappings": stubs}))
    reload_stub(root, 0)
    (root / "mq-connections.json").write_text(json.dumps([{
        "connectionId": "rabbit",
        "connectionData": {"type": "amqp", "uri": URL, "readConnectionsToOpen": 2, "writeConnectionsToOpen": 2,
                           "prefetch": 50, "unmatched": {"queue": f"{prefix}.unmatched"}},
    }]))
    for i in range(queues):
        mq_mapping(root, prefix, i, 0)


def reload_stub(root, n):
    (root / "mappings" / "reload.json").write_text(json.dumps(
        {"request": {"method": "GET", "url": "/reload"}, "response": {"status": 200, "body": f"version {n % 2}"}}))


def mq_mapping(root, prefix, i, n):
    (root / "mq-mappings" / f"soak-{i}.json").write_text(json.dumps({
        "mappingId": f"00000000-0000-4000-8000-{i:012d}",
        "request": {"destination": f"{prefix}.req.{i:02d}", "bodyMatcher": {"contains": "<quoteRequest>"}},
        "response": {"text": f"<quote><price>42.00</price><v>{n % 2}</v></quote>", "fixedDelayMilliseconds": 10},
        "receiveThreads": 2, "sendThreads": 2,
    }))


def start_decoy(root, log):
    proc = subprocess.Popen([str(DECOY), "serve", "--root-dir", str(root), "--port", "0",
                             "--bind-address", "127.0.0.1"],
                            stdout=subprocess.PIPE, stderr=log, text=True)
    deadline = time.time() + 60
    while time.time() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
        if m:
            threading.Thread(target=lambda: [None for _ in proc.stdout], daemon=True).start()
            return proc, int(m.group(1))
    proc.kill()
    sys.exit("decoy did not start (see bench/out/soak-decoy.log)")


def http_worker(port, stop, rate, errors, counts, big_bodies):
    """One connection's share of the HTTP load, at about `rate` requests a second."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    rnd = random.Random()
    gap = 1.0 / rate
    nxt = time.time()
    while not stop.is_set():
        r = rnd.random()
        if r < 0.35:
            kind, method, path, body, want = "static", "GET", "/static", None, (200, b"ok")
        elif r < 0.60:
            n = rnd.randrange(1_000_000)
            kind, method, path, body, want = "templated", "GET", f"/tpl/{n}?q=x{n}", None, (200, f"id={n} q=x{n}".encode())
        elif r < 0.75:
            kind, method, path, body, want = "delayed", "GET", "/delayed", None, (200, b"late")
        elif r < 0.85:
            kind, method, path, body, want = "unmatched", "POST", f"/nowhere/{rnd.randrange(100)}", rnd.choice(big_bodies), (404, None)
        else:
            # Near misses of one request (POST near-misses/request), not of every
            # unmatched request in the journal: that list carries each request's body
            # three times, so with the journal full of 1 MiB bodies one answer is
            # gigabytes (decoy streams it; the client here would have to read it).
            path = rnd.choice(["/__admin/mappings", "/__admin/requests?limit=20", "/__admin/near-misses/request",
                               "/__admin/metrics", "/__admin/problems", "/__admin/health"])
            kind, method, body, want = "admin", "GET", None, (200, None)
            if path == "/__admin/near-misses/request":
                method = "POST"
                body = json.dumps({"url": f"/nowhere/{rnd.randrange(100)}", "method": "POST",
                                   "body": "<orde"}).encode()
        try:
            conn.request(method, path, body=body, headers={"Content-Type": "application/octet-stream"} if body else {})
            resp = conn.getresponse()
            data = resp.read()
            if resp.status != want[0] or (want[1] is not None and data != want[1]):
                errors.add(kind, f"{method} {path}: {resp.status} {data[:120]!r}")
        except Exception as e:  # a dropped or stuck connection is an error, then reconnect
            errors.add(kind, f"{method} {path}: {e!r}")
            conn.close()
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        counts[kind] = counts.get(kind, 0) + 1
        nxt += gap
        delay = nxt - time.time()
        if delay > 0:
            time.sleep(delay)
        else:
            nxt = time.time()
    conn.close()


def reloader(root, prefix, queues, port, stop, errors, counts):
    """Rewrites a mapping every second and checks that it is served; every tenth
    time an MQ mapping too."""
    n = 0
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    while not stop.wait(1.0):
        n += 1
        reload_stub(root, n)
        if n % 10 == 0:
            for i in range(queues):
                mq_mapping(root, prefix, i, n // 10)
        try:
            conn.request("GET", "/reload")
            resp = conn.getresponse()
            data = resp.read()
            if resp.status != 200 or data not in (b"version 0", b"version 1"):
                errors.add("reload", f"GET /reload: {resp.status} {data[:120]!r}")
        except Exception as e:
            errors.add("reload", repr(e))
            conn.close()
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        counts["reloads"] = n


def decoy_connections(pid):
    """RabbitMQ connection names ("127.0.0.1:PORT -> 127.0.0.1:5672") of process `pid`."""
    out = subprocess.run(["ss", "-tnpH", "state", "established", "dport", "= :5672"],
                         capture_output=True, text=True).stdout
    names = set()
    for line in out.splitlines():
        if f"pid={pid}," in line:
            local = line.split()[2]
            names.add(f"{local} -> 127.0.0.1:5672")
    return names


def dropper(pid, stop, errors, counts, every):
    """Every `every` seconds, RabbitMQ closes decoy's connections (only decoy's)."""
    # Half-way between MQ reloads (every 10 s), which replace decoy's connections.
    if stop.wait(5):
        return
    while not stop.wait(every):
        closed = 0
        for _ in range(3):  # connections may be changing (an MQ reload): try again
            mine = decoy_connections(pid)
            listed = subprocess.run(["rabbitmqctl", "list_connections", "-q", "name", "pid"],
                                    capture_output=True, text=True)
            for line in listed.stdout.splitlines():
                parts = line.split("\t")
                if len(parts) == 2 and parts[0] in mine:
                    r = subprocess.run(["rabbitmqctl", "close_connection", parts[1], "soak: connection drop"],
                                       capture_output=True, text=True)
                    closed += r.returncode == 0
            if closed or stop.wait(2):
                break
        if closed == 0:
            errors.add("drop", f"no decoy connection to close (decoy's: {sorted(mine)}; rabbitmqctl "
                               f"list_connections: {listed.returncode} {listed.stdout[-300:]!r} {listed.stderr[-300:]!r})")
        counts["drops"] = counts.get("drops", 0) + 1
        counts["connections closed"] = counts.get("connections closed", 0) + closed


def sample(pid):
    status = pathlib.Path(f"/proc/{pid}/status").read_text()
    rss = int(re.search(r"VmRSS:\s+(\d+) kB", status).group(1)) / 1024
    threads = int(re.search(r"Threads:\s+(\d+)", status).group(1))
    fds = len(os.listdir(f"/proc/{pid}/fd"))
    return rss, fds, threads


def metric(port, name):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request("GET", "/__admin/metrics")
    text = conn.getresponse().read().decode()
    return sum(float(l.split()[-1]) for l in text.splitlines() if l.startswith(name))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--duration", type=int, default=1800, help="seconds of load (default 1800)")
    ap.add_argument("--http-rate", type=int, default=200, help="HTTP requests a second (default 200)")
    ap.add_argument("--http-connections", type=int, default=4)
    ap.add_argument("--mq-rate", type=int, default=50, help="MQ requests a second (default 50)")
    ap.add_argument("--drop-every", type=int, default=60, help="seconds between RabbitMQ connection drops")
    ap.add_argument("--body-kib", type=int, default=1024,
                    help="largest unmatched request body in KiB (default 1024; bodies of 1/4, 1/2 and all of it)")
    ap.add_argument("--no-build", action="store_true")
    a = ap.parse_args()

    if not a.no_build:
        subprocess.run(["cargo", "build", "--release", "-p", "decoy", "--bins", "--features", "bench",
                        "--example", "mq-load"],
                       cwd=REPO, check=True)
    try:
        subprocess.run(["rabbitmqctl", "-q", "status"], capture_output=True, check=True, timeout=60)
    except Exception as e:
        sys.exit(f"skipped: the soak needs RabbitMQ on 127.0.0.1:5672 and rabbitmqctl ({e})")
    OUT.mkdir(parents=True, exist_ok=True)
    prefix = f"decoy-soak-{os.getpid()}"
    queues = 2
    load_args = ["--prefix", prefix, "--queues", str(queues), "--url", URL]
    subprocess.run([str(LOAD), "setup", *load_args], check=True)
    big_bodies = [os.urandom((a.body_kib << 10) * k // 4) for k in (1, 2, 4)]
    with tempfile.TemporaryDirectory(prefix="decoy-soak-") as tmp, open(OUT / "soak-decoy.log", "w") as log:
        root = pathlib.Path(tmp)
        write_root(root, prefix, queues)
        proc, port = start_decoy(root, log)
        stop = threading.Event()
        errors = Errors()
        counts = {}
        mq = subprocess.Popen([str(LOAD), "soak", *load_args, "--seconds", str(a.duration),
                               "--rate", str(a.mq_rate), "--grace", "120"], stdout=subprocess.PIPE, text=True)
        threads = [threading.Thread(target=http_worker, args=(port, stop, a.http_rate / a.http_connections,
                                                              errors, counts.setdefault(f"w{i}", {}), big_bodies))
                   for i in range(a.http_connections)]
        threads.append(threading.Thread(target=reloader, args=(root, prefix, queues, port, stop, errors, counts)))
        threads.append(threading.Thread(target=dropper, args=(proc.pid, stop, errors, counts, a.drop_every)))
        for t in threads:
            t.start()
        samples = []
        t0 = time.time()
        try:
            while time.time() - t0 < a.duration:
                time.sleep(min(10, max(0.1, a.duration - (time.time() - t0))))
                if proc.poll() is not None:
                    errors.add("decoy", f"decoy exited with {proc.returncode}")
                    break
                rss, fds, nthreads = sample(proc.pid)
                http_total = sum(sum(c.values()) for k, c in counts.items() if k.startswith("w"))
                samples.append({"t": round(time.time() - t0), "rss_mib": round(rss, 1), "fds": fds,
                                "threads": nthreads, "http": http_total, "errors": errors.total()})
                print(f"{samples[-1]}", flush=True)
        finally:
            stop.set()
            for t in threads:
                t.join()
        mq_out = mq.communicate()[0].strip().splitlines()
        mq_result = json.loads(mq_out[-1]) if mq_out else {"sent": 0, "answered": 0, "lost": -1}
        panics = metric(port, "decoy_mq_panics_total") if proc.poll() is None else -1
        proc.send_signal(signal.SIGTERM)
        try:
            code = proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            code = "killed after 30 s"
        if code != 0:
            errors.add("decoy", f"exit status after SIGTERM: {code}")
        if panics:
            errors.add("decoy", f"decoy_mq_panics_total = {panics}")
    subprocess.run([str(LOAD), "teardown", *load_args], check=False)
    subprocess.run(["rabbitmqctl", "delete_queue", f"{prefix}.unmatched"], capture_output=True)

    report(a, samples, errors, counts, mq_result)


def report(a, samples, errors, counts, mq):
    third = max(1, len(samples) // 3)
    middle = max((s["rss_mib"] for s in samples[third:2 * third]), default=0)
    last = max((s["rss_mib"] for s in samples[2 * third:]), default=0)
    plateau = middle > 0 and last <= middle * 1.10
    http = {}
    for k, c in counts.items():
        if k.startswith("w"):
            for kind, n in c.items():
                http[kind] = http.get(kind, 0) + n
    lines = [f"Soak of {a.duration} s: {sum(http.values())} HTTP requests "
             f"({', '.join(f'{k} {v}' for k, v in sorted(http.items()))}), "
             f"{counts.get('reloads', 0)} reloads, {counts.get('drops', 0)} RabbitMQ connection drops "
             f"({counts.get('connections closed', 0)} connections closed), "
             f"{mq.get('sent')} MQ requests sent, {mq.get('answered')} answered, {mq.get('duplicates')} answered twice.",
             "",
             "| time (s) | RSS (MiB) | open fds | threads | HTTP requests | errors |",
             "|---:|---:|---:|---:|---:|---:|"]
    step = max(1, len(samples) // 20)
    shown = samples[::step] + ([samples[-1]] if samples and (len(samples) - 1) % step else [])
    for s in shown:
        lines.append(f"| {s['t']} | {s['rss_mib']} | {s['fds']} | {s['threads']} | {s['http']} | {s['errors']} |")
    lines += ["",
              f"- RSS plateau: {'yes' if plateau else 'NO'} (peak {middle} MiB in the middle third, {last} MiB in the last)",
              f"- errors: {errors.total()}" + (f" {errors.counts}, e.g. {errors.examples}" if errors.total() else ""),
              f"- lost MQ requests: {mq.get('lost')} (the driver's publish errors: {mq.get('publish_errors')}, "
              f"its reconnects: {mq.get('driver_reconnects')})"]
    text = "\n".join(lines)
    print("\n" + text)
    (OUT / "soak.md").write_text(text + "\n")
    (OUT / "soak.json").write_text(json.dumps({"samples": samples, "errors": errors.counts,
                                               "examples": errors.examples, "mq": mq, "counts": counts}, indent=1))
    ok = plateau and errors.total() == 0 and mq.get("lost") == 0
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
