#!/usr/bin/env python3
"""decoy's AMQP 1.0 virtual service driven by Apache Qpid Proton (PyPI
python-qpid-proton), a client decoy does not use itself, through RabbitMQ's
rabbitmq_amqp1_0 plugin on 127.0.0.1:5672.

Usage: amqp1-compat.py DECOY_BINARY

Starts decoy with one `amqp1` connection and three mappings on a request queue of
its own, then as a requester would: sends requests with a reply-to address and ids
of several AMQP types, and checks that every one gets exactly its reply (counted,
correlated, with properties); that an AMQP map body is matched as JSON; that
messages no mapping matches (a wrong property, binary garbage) are kept on the
unmatched queue rather than answered or lost. The queues are `/queue/NAME`
addresses, which RabbitMQ declares; they are deleted at the end. Bounded: every
wait has a deadline.
"""
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid

from proton import Message, ulong
from proton.utils import BlockingConnection

BROKER = "amqp://guest:guest@127.0.0.1:5672"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_get(port, path):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as r:
        return r.read().decode()


def main():
    decoy = sys.argv[1]
    tag = uuid.uuid4().hex[:10]
    req, reply, lost = (f"/queue/decoy-py-{what}-{tag}" for what in ("req", "reply", "lost"))
    failures = []

    def check(what, ok, detail=""):
        print(("ok   " if ok else "FAIL ") + what + (f": {detail}" if detail and not ok else ""))
        if not ok:
            failures.append(what)

    # The queues exist before decoy listens (a link to /queue/NAME declares it).
    conn = BlockingConnection(BROKER, timeout=20)
    replies = conn.create_receiver(reply, credit=200)
    strays = conn.create_receiver(lost, credit=10)
    sender = conn.create_sender(req)

    root = tempfile.mkdtemp()
    os.makedirs(f"{root}/mq-mappings")
    with open(f"{root}/mq-connections.json", "w") as f:
        json.dump([{"connectionId": "broker", "connectionData": {
            "type": "amqp1", "uri": BROKER, "containerId": "decoy-compat",
            "unmatched": {"queue": lost}}}], f)
    with open(f"{root}/mq-mappings/quote.json", "w") as f:
        json.dump({"mappings": [
            {"request": {"destination": req,
                         "bodyMatcher": {"matchesXPath": "/quoteRequest[symbol='ACME']"},
                         "properties": {"channel": {"equalTo": "web"}}},
             "response": {"text": "<quote id=\"{{xPath request.body '/quoteRequest/@id'}}\">42.00</quote>",
                          "properties": {"served-by": "decoy"},
                          "transformers": ["response-template"]}},
            {"request": {"destination": req,
                         "bodyMatcher": {"equalToJson": {"symbol": "ACME", "qty": 5}}},
             "response": {"text": "{\"price\": 210.0}"}},
        ]}, f)
    port = free_port()
    proc = subprocess.Popen([decoy, "serve", "--port", str(port), "--bind-address", "127.0.0.1",
                             "--root-dir", root], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.time() + 60
        while True:
            try:
                http_get(port, "/__admin/health")
                break
            except OSError:
                if time.time() > deadline or proc.poll() is not None:
                    raise SystemExit("decoy did not start")
                time.sleep(0.1)

        # 100 requests; ids of every AMQP type a requester may use. The reply's
        # correlation id is the request's correlation id, or else its message id,
        # with its type kept.
        expected = {}
        for i in range(100):
            kind = i % 4
            m = Message(body=f"<quoteRequest id='{i}'><symbol>ACME</symbol></quoteRequest>",
                        reply_to=reply, properties={"channel": "web"})
            if kind == 0:
                m.id, m.correlation_id = f"id-{i}", f"corr-{i}"
                want = f"corr-{i}"
            elif kind == 1:
                m.id = uuid.UUID(int=i)
                want = m.id
            elif kind == 2:
                m.id = ulong(10_000 + i)
                want = m.id
            else:
                m.id = f"ID:jms-{i}"
                want = m.id
            expected[want] = f'<quote id="{i}">42.00</quote>'
            sender.send(m)  # returns once the broker accepted it
        got = {}
        deadline = time.time() + 60
        while len(got) < len(expected) and time.time() < deadline:
            try:
                m = replies.receive(timeout=5)
            except Exception:
                continue
            replies.accept()
            got.setdefault(m.correlation_id, []).append(m)
        check("every request answered", set(got) == set(expected),
              f"missing {len(set(expected) - set(got))}, unknown {set(got) - set(expected)}")
        check("each exactly once", all(len(v) == 1 for v in got.values()))
        check("each with its own reply body",
              all(v[0].body == expected[k] for k, v in got.items() if k in expected),
              str([(k, v[0].body) for k, v in list(got.items())[:3]]))
        any_reply = next(iter(got.values()))[0] if got else Message()
        check("reply properties set", (any_reply.properties or {}).get("served-by") == "decoy",
              str(any_reply.properties))
        check("typed ids kept their type",
              # (Proton hands a ulong id back as a Python int.)
              any(isinstance(k, uuid.UUID) for k in got) and any(type(k) in (int, ulong) for k in got),
              str([type(k) for k in got][:4]))

        # An AMQP map body is matched as JSON.
        sender.send(Message(body={"symbol": "ACME", "qty": 5}, id="map-1", reply_to=reply))
        m = replies.receive(timeout=30)
        replies.accept()
        check("a map body matched with equalToJson", m.body == '{"price": 210.0}' and m.correlation_id == "map-1",
              f"{m.body!r} {m.correlation_id!r}")

        # Not matched (a wrong property; binary garbage): kept on the unmatched queue.
        sender.send(Message(body="<quoteRequest><symbol>ACME</symbol></quoteRequest>", id="stray-1",
                            reply_to=reply, properties={"channel": "fax"}))
        sender.send(Message(body=b"\xff\xfe\x00garbage", id="stray-2", reply_to=reply))
        seen = set()
        for _ in range(2):
            m = strays.receive(timeout=30)
            strays.accept()
            seen.add(m.id)
        check("unmatched messages kept on the unmatched queue", seen == {"stray-1", "stray-2"}, str(seen))
        try:
            extra = replies.receive(timeout=1)
            check("nothing else answered", False, repr(extra.body))
        except Exception:
            check("nothing else answered", True)

        metrics = http_get(port, "/__admin/metrics")
        check("metrics under transport amqp1",
              'decoy_requests_total{transport="amqp1",outcome="matched"} 101' in metrics
              and 'decoy_requests_total{transport="amqp1",outcome="unmatched"} 2' in metrics,
              "\n".join(l for l in metrics.splitlines() if "amqp1" in l))
    finally:
        proc.terminate()
        try:
            _, err = proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
        conn.close()
        for q in (req, reply, lost):
            subprocess.run(["rabbitmqctl", "-q", "delete_queue", q.rsplit("/", 1)[1]],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    if failures:
        sys.stderr.write(err.decode(errors="replace")[-4000:])
        raise SystemExit(f"{len(failures)} AMQP 1.0 check(s) failed")
    print("amqp1: every Qpid Proton check passed")


if __name__ == "__main__":
    main()
