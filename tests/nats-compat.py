#!/usr/bin/env python3
"""decoy's NATS virtual services driven by a third-party client: PyPI `nats-py`.

Starts decoy with a NATS connection and three mappings (core request-reply on a
wildcard subject with header matching and templated replies, a JetStream durable
consumer, a fixed reply subject), then acts as the system under test would with
nats-py: `nc.request()` with headers, many at once, each counted against its own
reply; `js.publish()` into a stream with a `reply-to` header; an unmatched request;
a payload that is not UTF-8. Everything lives under a subject prefix and a stream of
its own, deleted at the end. Usage:

    tests/nats-compat.py path/to/decoy [nats://127.0.0.1:4222]

Exits non-zero when a check fails.
"""
import asyncio
import json
import pathlib
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid

import nats
from nats.errors import NoRespondersError, TimeoutError as NatsTimeout

DECOY = sys.argv[1]
URL = sys.argv[2] if len(sys.argv) > 2 else "nats://127.0.0.1:4222"
PREFIX = f"decoy-compat.{uuid.uuid4().hex}"
STREAM = f"DECOYCOMPAT_{uuid.uuid4().hex}"
checks = 0


def check(cond, what):
    global checks
    if not cond:
        raise AssertionError(what)
    checks += 1
    print(f"ok: {what}")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_root(root):
    (root / "mq-mappings").mkdir(parents=True)
    (root / "mappings").mkdir()
    (root / "mq-connections.json").write_text(json.dumps([{
        "connectionId": "nats",
        "connectionData": {"type": "nats", "uri": URL, "unmatched": {"queue": f"{PREFIX}.unmatched"}},
    }]))
    (root / "mq-mappings" / "quote.json").write_text(json.dumps({
        "mappingId": "quote",
        "request": {"destination": {"name": f"{PREFIX}.quote.*", "type": "TOPIC"},
                    "bodyMatcher": {"matchesJsonPath": "$[?(@.symbol == 'ACME')]"},
                    "headers": {"channel": {"equalTo": "web"}}},
        "response": {"text": '{"id": {{jsonPath request.body \'$.id\'}}, "price": 42}',
                     "properties": {"served-by": "decoy"},
                     "transformers": ["response-template"]},
        "receiveThreads": 2,
    }))
    (root / "mq-mappings" / "stored.json").write_text(json.dumps({
        "mappingId": "stored",
        "request": {"destination": f"{PREFIX}.js.orders",
                    "jetstream": {"stream": STREAM, "durable": "decoy-compat"}},
        "response": {"text": "confirmed {{jsonPath request.body '$.id'}}",
                     "transformers": ["response-template"]},
    }))


async def served(nc, subject, payload, headers, wait=30):
    deadline = time.monotonic() + wait
    while True:
        try:
            return await nc.request(subject, payload, timeout=2, headers=headers)
        except (NoRespondersError, NatsTimeout):
            if time.monotonic() > deadline:
                raise AssertionError(f"decoy never answered on {subject}")
            await asyncio.sleep(0.1)


async def scenario(http_port):
    nc = await nats.connect(URL, connect_timeout=5)
    js = nc.jetstream()
    await js.add_stream(name=STREAM, subjects=[f"{PREFIX}.js.>"])
    try:
        web = {"channel": "web"}
        first = await served(nc, f"{PREFIX}.quote.warmup", b'{"id": 0, "symbol": "ACME"}', web)
        check(json.loads(first.data) == {"id": 0, "price": 42}, "a core request gets its templated reply")
        check(first.headers and first.headers.get("served-by") == "decoy", "the reply carries the mapping's header")

        async def one(i):
            r = await nc.request(f"{PREFIX}.quote.{i % 5}", json.dumps({"id": i, "symbol": "ACME"}).encode(),
                                 timeout=20, headers=web)
            return i, json.loads(r.data)["id"]

        pairs = await asyncio.gather(*(one(i) for i in range(1, 501)))
        check(all(i == got for i, got in pairs) and len(pairs) == 500,
              "500 concurrent requests, each answered with its own id")

        lost = await nc.subscribe(f"{PREFIX}.unmatched")
        await nc.flush()
        try:
            await nc.request(f"{PREFIX}.quote.x", b'{"id": 1, "symbol": "ACME"}', timeout=1,
                             headers={"channel": "batch"})
            check(False, "an unmatched request gets no reply")
        except NatsTimeout:
            check(True, "an unmatched request gets no reply")
        moved = await lost.next_msg(timeout=10)
        check(moved.headers.get("channel") == "batch" and moved.reply, "it is moved to the unmatched subject with its reply subject")
        await nc.publish(f"{PREFIX}.quote.y", b"\xff\xfe\x00{", headers=web)
        moved = await lost.next_msg(timeout=10)
        check(moved.data == b"\xff\xfe\x00{", "a payload that is not UTF-8 is moved too, unchanged")

        replies = await nc.subscribe(f"{PREFIX}.replies")
        await nc.flush()
        for i in range(1, 101):
            ack = await js.publish(f"{PREFIX}.js.orders", json.dumps({"id": i}).encode(),
                                   headers={"reply-to": f"{PREFIX}.replies", "Nats-Msg-Id": f"m-{i}"})
            assert ack.stream == STREAM
        seen = {}
        deadline = time.monotonic() + 30
        while len(seen) < 100 and time.monotonic() < deadline:
            m = await replies.next_msg(timeout=30)
            text = m.data.decode()
            seen[int(text.split()[1])] = m.headers.get("Correlation-Id") if m.headers else None
        check(sorted(seen) == list(range(1, 101)), "100 JetStream requests, each answered on its reply-to subject")
        check(all(seen[i] == f"m-{i}" for i in seen), "each reply's Correlation-Id is its request's Nats-Msg-Id")
        deadline = time.monotonic() + 20
        while True:
            info = await js.consumer_info(STREAM, "decoy-compat")
            if info.num_ack_pending == 0 and info.num_pending == 0:
                break
            if time.monotonic() > deadline:
                raise AssertionError(f"requests left unacknowledged: {info}")
            await asyncio.sleep(0.1)
        check(True, "decoy's durable consumer acknowledged every request")

        with urllib.request.urlopen(f"http://127.0.0.1:{http_port}/__admin/metrics", timeout=5) as r:
            metrics = r.read().decode()
        matched = [l for l in metrics.splitlines()
                   if l.startswith('decoy_requests_total{transport="nats",outcome="matched"}')]
        check(matched and int(matched[0].split()[-1]) >= 601, "metrics count them under transport nats")
    finally:
        try:
            await js.delete_stream(STREAM)
        finally:
            await nc.drain()


def main():
    root = pathlib.Path(tempfile.mkdtemp(prefix="decoy-nats-compat-"))
    write_root(root)
    port = free_port()
    log = open(root / "decoy.log", "w")
    server = subprocess.Popen([DECOY, "serve", "--root-dir", str(root), "--port", str(port),
                               "--bind-address", "127.0.0.1", "--no-watch"], stdout=log, stderr=subprocess.STDOUT)
    try:
        asyncio.run(asyncio.wait_for(scenario(port), timeout=180))
    except BaseException:
        print((root / "decoy.log").read_text()[-4000:], file=sys.stderr)
        raise
    finally:
        server.terminate()
        server.wait(timeout=30)
    print(f"{checks} passed, 0 failed")


if __name__ == "__main__":
    main()
