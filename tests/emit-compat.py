#!/usr/bin/env python3
"""Messages decoy emits, received by a third-party consumer: PyPI `pika` on RabbitMQ.

Starts decoy with a RabbitMQ connection, an HTTP stub whose `message` listener
publishes an event templated from the request, one whose event carries what the
stub answered (`originalResponse`) to a queue named from the request's path, one
whose destination renders as no name, and an MQ mapping that answers a request and
publishes two events. Then, as the downstream consumers would, pika consumes: the
event an HTTP POST emits (the answer checked first), the event carrying the answer,
the reply and both events of one request message, and a message sent through
`POST /__admin/channels/send`. Every queue is this run's own, deleted at the end.
Usage:

    tests/emit-compat.py path/to/decoy [amqp://guest:guest@127.0.0.1:5672/%2f]

Exits non-zero when a check fails.
"""
import json
import pathlib
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid

import pika

DECOY = sys.argv[1]
URL = sys.argv[2] if len(sys.argv) > 2 else "amqp://guest:guest@127.0.0.1:5672/%2f"
RUN = uuid.uuid4().hex
Q = {name: f"decoy-compat.{name}.{RUN}" for name in ("orders", "pay", "reply", "audit", "ledger", "sent", "shop")}
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
    (root / "mappings").mkdir(parents=True)
    (root / "mq-mappings").mkdir()
    (root / "mq-connections.json").write_text(json.dumps([
        {"connectionId": "rabbit", "connectionData": {"type": "amqp", "uri": URL}}]))
    (root / "mappings" / "orders.json").write_text(json.dumps({
        "request": {"method": "POST", "url": "/orders"},
        "response": {"status": 201, "jsonBody": {"status": "accepted"}},
        "serveEventListeners": [{"name": "message", "parameters": {
            "connection": "rabbit", "queue": Q["orders"],
            "body": "{\"event\": \"order.created\", \"id\": \"{{jsonPath originalRequest.body '$.id'}}\"}",
            "properties": {"event-type": "order.created"}}}],
    }))
    (root / "mappings" / "shop-orders.json").write_text(json.dumps({
        "request": {"method": "POST", "urlPathPattern": "/shops/[^/]+/orders"},
        "response": {"status": 201,
                     "headers": {"Location": "/orders/ORD-{{jsonPath request.body '$.id'}}"},
                     "body": "{\"orderId\": \"ORD-{{jsonPath request.body '$.id'}}\"}",
                     "transformers": ["response-template"]},
        "serveEventListeners": [{"name": "message", "parameters": {
            "connection": "rabbit", "queue": "decoy-compat.shop.{{originalRequest.pathSegments.[1]}}",
            "body": "{\"order\": \"{{jsonPath originalResponse.body '$.orderId'}}\", \"status\": {{originalResponse.status}}}",
            "properties": {"location": "{{originalResponse.headers.Location}}"}}}],
    }))
    (root / "mappings" / "notify.json").write_text(json.dumps({
        "request": {"urlPath": "/notify"},
        "response": {"status": 202, "body": "queued"},
        "serveEventListeners": [{"name": "message", "parameters": {
            "connection": "rabbit", "queue": "{{originalRequest.query.to}}", "body": "x"}}],
    }))
    (root / "mq-mappings" / "pay.json").write_text(json.dumps({
        "mappingId": "pay",
        "connectionId": "rabbit",
        "request": {"destination": {"name": Q["pay"], "type": "QUEUE"}},
        "response": {"text": "{\"paid\": true}"},
        "serveEventListeners": [
            {"name": "message", "parameters": {"connection": "rabbit", "queue": Q["audit"],
                                               "body": "audit {{jsonPath originalRequest.body '$.payment'}}"}},
            {"name": "message", "parameters": {"connection": "rabbit", "queue": Q["ledger"],
                                               "body": "ledger {{jsonPath originalRequest.body '$.payment'}}",
                                               "delay": {"type": "fixed", "milliseconds": 100}}}],
    }))


def http(port, method, path, body=None):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method,
                                 data=None if body is None else json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def next_message(ch, queue, wait=30):
    """The next message on `queue`, consumed with basic_consume as a service would."""
    got = []

    def on(channel, method, props, body):
        got.append((props, body.decode()))
        channel.basic_ack(method.delivery_tag)
        channel.stop_consuming()

    tag = ch.basic_consume(queue, on)
    deadline = time.monotonic() + wait
    while not got and time.monotonic() < deadline:
        ch.connection.process_data_events(time_limit=0.2)
    ch.basic_cancel(tag)
    if not got:
        raise AssertionError(f"no message on {queue} within {wait} s")
    return got[0]


def up(port, wait=60):
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        try:
            if http(port, "GET", "/__admin/health")[0] == 200:
                return
        except OSError:
            pass
        time.sleep(0.1)
    raise AssertionError("decoy did not start")


def scenario(port, ch):
    status, body = http(port, "POST", "/orders", {"id": "A-17"})
    check(status == 201 and json.loads(body) == {"status": "accepted"}, "the HTTP answer is the stub's")
    props, event = next_message(ch, Q["orders"])
    check(json.loads(event) == {"event": "order.created", "id": "A-17"}, "pika receives the event templated from the request")
    check(props.headers.get("event-type") == "order.created", "with its properties as AMQP headers")

    status, body = http(port, "POST", f"/shops/{RUN}/orders", {"id": "B-2"})
    check(status == 201 and json.loads(body) == {"orderId": "ORD-B-2"}, "the templated HTTP answer")
    props, event = next_message(ch, Q["shop"])
    check(json.loads(event) == {"order": "ORD-B-2", "status": 201},
          "pika receives the answer's body and status, on the queue the request's path named")
    check(props.headers.get("location") == "/orders/ORD-B-2", "and its Location header as a property")

    status, body = http(port, "GET", "/notify")
    check((status, body) == (202, "queued"), "a destination that renders empty leaves the answer alone")

    ch.basic_publish("", Q["pay"], json.dumps({"payment": "P-9"}),
                     pika.BasicProperties(reply_to=Q["reply"], correlation_id="c-1"))
    props, reply = next_message(ch, Q["reply"])
    check(reply == '{"paid": true}' and props.correlation_id == "c-1", "one request message gets its reply")
    _, audit = next_message(ch, Q["audit"])
    _, ledger = next_message(ch, Q["ledger"])
    check((audit, ledger) == ("audit P-9", "ledger P-9"), "and both of its events, on two queues")

    status, body = http(port, "POST", "/__admin/channels/send",
                        {"type": "mq", "connection": "rabbit", "queue": Q["sent"],
                         "message": {"body": {"data": "from test code"}}})
    check(status == 200 and json.loads(body) == {"sentCount": 1}, "channels/send answers sentCount 1")
    _, sent = next_message(ch, Q["sent"])
    check(sent == "from test code", "pika receives the message sent through the admin API")
    status, body = http(port, "POST", "/__admin/channels/send", {"connection": "nope", "queue": Q["sent"]})
    check(status == 422 and "nope" in body, "an unknown connection is a 422 naming it")

    with urllib.request.urlopen(f"http://127.0.0.1:{port}/__admin/metrics", timeout=5) as r:
        metrics = r.read().decode()
    check('decoy_published_messages_total{outcome="published"} 5' in metrics, "five messages counted as published")
    check('decoy_published_messages_total{outcome="invalid"} 1' in metrics, "the one with no destination counted as invalid")


def main():
    params = pika.URLParameters(URL)
    conn = pika.BlockingConnection(params)
    ch = conn.channel()
    for q in Q.values():
        ch.queue_declare(q)
    with tempfile.TemporaryDirectory() as tmp:
        root = pathlib.Path(tmp)
        write_root(root)
        port = free_port()
        log = open(root / "decoy.log", "w")
        server = subprocess.Popen([DECOY, "serve", "--root-dir", str(root), "--port", str(port),
                                   "--bind-address", "127.0.0.1", "--no-watch"], stdout=log, stderr=subprocess.STDOUT)
        try:
            up(port)
            scenario(port, ch)
        except BaseException:
            print((root / "decoy.log").read_text()[-4000:], file=sys.stderr)
            raise
        finally:
            server.terminate()
            server.wait(timeout=30)
            for q in Q.values():
                ch.queue_delete(q)
            conn.close()
    print(f"{checks} passed, 0 failed")


if __name__ == "__main__":
    main()
