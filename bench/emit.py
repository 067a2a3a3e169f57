#!/usr/bin/env python3
"""Emitted messages: events/s published on HTTP hits, beside plain HTTP answers.

One decoy serves two stubs on the same port: `/plain` answers, `/emit` answers the
same and has a `message` listener that publishes a 60-byte event, templated from the
request, to a RabbitMQ queue. Each is driven for the same time with the same client
(wrk when it is installed, else a keep-alive Python client: then the client, not
decoy, is likely the ceiling). For `/emit` it reports the answers per second and the
events per second the broker confirmed (`decoy_published_messages_total`, read until
it stops growing, so events still waiting when the load stops count, over the time
they took), and checks that a pika consumer received as many. Writes
bench/out/emit.json. Usage (bench/run.sh builds the release binary):

    python3 bench/emit.py [seconds] [path/to/decoy] [--plain-body]

Needs RabbitMQ on 127.0.0.1:5672 (guest/guest) and `pip install pika`.
"""
import http.client
import json
import pathlib
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid

import pika

REPO = pathlib.Path(__file__).resolve().parent.parent
ARGS = [a for a in sys.argv[1:] if not a.startswith("--")]
SECONDS = int(ARGS[0]) if ARGS else 10
DECOY = ARGS[1] if len(ARGS) > 1 else str(REPO / "target" / "release" / "decoy")
URL = "amqp://guest:guest@127.0.0.1:5672/%2f"
QUEUE = f"decoy-bench.events.{uuid.uuid4().hex}"
CONNECTIONS = 32
# The event, templated from the request (`--plain-body`: as written, no template).
BODY = ("{\"event\": \"order.created\", \"id\": \"x\"}" if "--plain-body" in sys.argv
        else "{\"event\": \"order.created\", \"id\": \"{{originalRequest.query.id}}\"}")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_root(root):
    (root / "mappings").mkdir(parents=True)
    (root / "mq-connections.json").write_text(json.dumps([
        {"connectionId": "rabbit", "connectionData": {"type": "amqp", "uri": URL}}]))
    answer = {"status": 200, "body": "ok"}
    (root / "mappings" / "stubs.json").write_text(json.dumps({"mappings": [
        {"request": {"method": "GET", "urlPath": "/plain"}, "response": answer},
        {"request": {"method": "GET", "urlPath": "/emit"}, "response": answer,
         "serveEventListeners": [{"name": "message", "parameters": {
             "connection": "rabbit", "queue": QUEUE,
             "body": BODY}}]},
    ]}))


def metric(port, name):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    c.request("GET", "/__admin/metrics")
    text = c.getresponse().read().decode()
    m = re.search(r"^" + re.escape(name) + r" (\d+)", text, re.M)
    return int(m.group(1)) if m else 0


def drive_wrk(port, path):
    out = subprocess.run(["wrk", "-t2", f"-c{CONNECTIONS}", f"-d{SECONDS}s", f"http://127.0.0.1:{port}{path}"],
                         capture_output=True, text=True, check=True).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    return rps, int(errors.group(1)) if errors else 0


def drive_python(port, path):
    stop = time.monotonic() + SECONDS
    counts = [0] * CONNECTIONS
    errors = [0] * CONNECTIONS

    def one(i):
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        n = 0
        while time.monotonic() < stop:
            c.request("GET", f"{path}?id={i}-{n}")
            r = c.getresponse()
            r.read()
            if r.status != 200:
                errors[i] += 1
            n += 1
        counts[i] = n

    threads = [threading.Thread(target=one, args=(i,)) for i in range(CONNECTIONS)]
    start = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(counts) / (time.monotonic() - start), sum(errors)


def main():
    drive = drive_wrk if shutil.which("wrk") else drive_python
    conn = pika.BlockingConnection(pika.URLParameters(URL))
    ch = conn.channel()
    ch.queue_declare(QUEUE)
    result = {"templated": "--plain-body" not in sys.argv, "seconds": SECONDS, "client": "wrk" if drive is drive_wrk else "python", "connections": CONNECTIONS}
    with tempfile.TemporaryDirectory() as tmp:
        root = pathlib.Path(tmp)
        write_root(root)
        port = free_port()
        server = subprocess.Popen([DECOY, "serve", "--root-dir", str(root), "--port", str(port),
                                   "--bind-address", "127.0.0.1", "--no-watch", "--no-request-journal"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            for _ in range(600):
                if server.poll() is not None:
                    raise SystemExit(f"decoy exited with {server.returncode}")
                try:
                    metric(port, "decoy_published_messages_total")
                    break
                except OSError:
                    time.sleep(0.1)
            # Warm: the publishing connection opens on the first event.
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            c.request("GET", "/emit?id=warm")
            c.getresponse().read()
            while metric(port, 'decoy_published_messages_total{outcome="published"}') < 1:
                time.sleep(0.05)
            rps, errors = drive(port, "/plain")
            result["plain"] = {"rps": round(rps), "errors": errors}
            before = metric(port, 'decoy_published_messages_total{outcome="published"}')
            start = time.monotonic()
            rps, errors = drive(port, "/emit")
            result["emit"] = {"rps": round(rps), "errors": errors}
            # Until the count stops growing: the events still waiting are published.
            last, last_at = -1, time.monotonic()
            while True:
                n = metric(port, 'decoy_published_messages_total{outcome="published"}')
                if n != last:
                    last, last_at = n, time.monotonic()
                elif time.monotonic() - last_at > 1.0:
                    break
                time.sleep(0.1)
            published = last - before
            result["emit"]["events"] = published
            result["emit"]["events_per_s"] = round(published / (last_at - start))
            for outcome in ("failed", "dropped"):
                result["emit"][outcome] = metric(port, f'decoy_published_messages_total{{outcome="{outcome}"}}')
        finally:
            server.terminate()
            server.wait(timeout=30)
    # The consumer's check: every confirmed event is on the queue (the warm-up one too).
    queued = ch.queue_declare(QUEUE, passive=True).method.message_count
    result["emit"]["on_queue"] = queued - 1
    ch.queue_delete(QUEUE)
    conn.close()
    out = REPO / "bench" / "out"
    out.mkdir(parents=True, exist_ok=True)
    (out / "emit.json").write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
