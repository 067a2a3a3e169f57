#!/usr/bin/env python3
"""`decoy record-mq` and playback driven by third-party clients: pika (RabbitMQ),
paho-mqtt 2.1.0 (MQTT 5 through Mosquitto) and nats-py (NATS).

For each broker: an echo back end of this script's own answers on the "real"
destination (`echo:<body>`, the request's correlation id); `decoy record-mq` listens
where the client sends its requests and forwards them; the client sends its
requests (JSON, XML, a repeat) and gets the back end's replies through decoy; decoy
is stopped with SIGINT and writes the mappings; the back end is stopped; `decoy
serve` on the recorded files gives the same client the same replies. Usage:

    tests/mq-record.py path/to/decoy [rabbitmq|mqtt|nats ...]

Exits non-zero when a check fails.
"""
import asyncio
import json
import pathlib
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid

DECOY = sys.argv[1]
WHICH = sys.argv[2:] or ["rabbitmq", "mqtt", "nats"]
REQUESTS = ['{"symbol":"ACME","qty":3}', "<quote><symbol>XYZ</symbol></quote>",
            '{"symbol":"ACME","qty":3}', "plain text"]
checks = 0


def check(cond, what):
    global checks
    if not cond:
        raise AssertionError(what)
    checks += 1
    print(f"ok: {what}")


def start(args, ready):
    """Starts decoy and waits for the line that says it is ready."""
    p = subprocess.Popen([DECOY, *args], stdout=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        line = p.stdout.readline()
        if not line:
            raise RuntimeError(f"decoy {args[0]} ended before it was ready")
        if ready in line:
            return p
    raise RuntimeError(f"decoy {args[0]} not ready in time")


def stop_recording(p):
    p.send_signal(signal.SIGINT)
    out, _ = p.communicate(timeout=60)
    print(out.strip())
    check(p.returncode == 0, "record-mq exits cleanly on SIGINT")
    return out


def root_with(connection):
    root = pathlib.Path(tempfile.mkdtemp(prefix="decoy-record-"))
    (root / "mq-connections.json").write_text(json.dumps([connection]))
    return root


def record_then_play(name, root, route_args, ask, back_end):
    stop_back_end = back_end()
    rec = start(["record-mq", "--root-dir", str(root), *route_args, "--timeout-ms", "5000"],
                "recording")
    recorded = [ask(body, f"rec-{i}") for i, body in enumerate(REQUESTS)]
    for body, reply in zip(REQUESTS, recorded):
        check(reply == "echo:" + body, f"{name}: the back end's reply through decoy for {body!r}")
    out = stop_recording(rec)
    stop_back_end()
    files = sorted((root / "mq-mappings").glob("*.json"))
    check(len(files) == 3, f"{name}: one mapping per distinct request (3 of 4), got {len(files)}")
    check("recorded 3 mapping(s)" in out, f"{name}: the summary says 3")
    serve = start(["serve", "--root-dir", str(root), "--port", "0", "--bind-address", "127.0.0.1"],
                  "listening on")
    try:
        played = [ask(body, f"play-{i}") for i, body in enumerate(REQUESTS)]
    finally:
        serve.terminate()
        serve.wait(timeout=30)
    check(played == recorded, f"{name}: playback gives the recorded replies")
    shutil.rmtree(root)


# --- RabbitMQ with pika -------------------------------------------------------------
def rabbitmq():
    import pika
    p = f"decoy-record.{uuid.uuid4().hex[:12]}"
    listen, real, reply = f"{p}.listen", f"{p}.real", f"{p}.reply"
    params = pika.URLParameters("amqp://guest:guest@127.0.0.1:5672/%2f")
    setup = pika.BlockingConnection(params)
    ch = setup.channel()
    for q in (listen, real, reply):
        ch.queue_declare(q)
    root = root_with({"connectionId": "rabbit", "connectionData": {
        "type": "amqp", "uri": "amqp://guest:guest@127.0.0.1:5672/%2f",
        "unmatched": {"queue": f"{p}.unmatched"}, "declareQueues": True}})

    def back_end():
        stop = threading.Event()

        def run():
            conn = pika.BlockingConnection(params)
            c = conn.channel()
            for method, props, body in c.consume(real, inactivity_timeout=0.2):
                if stop.is_set():
                    break
                if method is None:
                    continue
                c.basic_publish("", props.reply_to, b"echo:" + body,
                                pika.BasicProperties(correlation_id=props.correlation_id))
                c.basic_ack(method.delivery_tag)
            c.cancel()
            conn.close()
        t = threading.Thread(target=run)
        t.start()
        return lambda: (stop.set(), t.join())

    def ask(body, corr):
        conn = pika.BlockingConnection(params)
        c = conn.channel()
        c.basic_publish("", listen, body.encode(),
                        pika.BasicProperties(reply_to=reply, correlation_id=corr))
        deadline = time.monotonic() + 30
        try:
            while time.monotonic() < deadline:
                method, props, got = c.basic_get(reply, auto_ack=True)
                if method is None:
                    time.sleep(0.02)
                    continue
                if props.correlation_id == corr:
                    return got.decode()
            raise AssertionError(f"no reply for {body!r}")
        finally:
            conn.close()

    try:
        record_then_play("RabbitMQ (pika)", root, ["--listen", listen, "--forward", real], ask, back_end)
    finally:
        for q in (listen, real, reply, f"{p}.unmatched"):
            ch.queue_delete(q)
        setup.close()


# --- MQTT 5 with paho-mqtt ----------------------------------------------------------
def mqtt():
    import paho.mqtt.client as paho
    from paho.mqtt.packettypes import PacketTypes
    from paho.mqtt.properties import Properties
    p = f"decoy-record/{uuid.uuid4().hex[:12]}"
    listen, real, reply = f"{p}/listen", f"{p}/real", f"{p}/reply"
    root = root_with({"connectionId": "m", "connectionData": {
        "type": "mqtt", "uri": "mqtt://127.0.0.1:1883", "cleanSession": True,
        "clientId": f"rec{uuid.uuid4().hex[:8]}", "unmatched": {"queue": f"{p}/unmatched"}}})

    def client():
        c = paho.Client(paho.CallbackAPIVersion.VERSION2, protocol=paho.MQTTv5)
        c.connect("127.0.0.1", 1883)
        c.loop_start()
        return c

    def back_end():
        c = client()

        def on_message(cl, _u, msg):
            props = Properties(PacketTypes.PUBLISH)
            corr = getattr(msg.properties, "CorrelationData", None)
            if corr is not None:
                props.CorrelationData = corr
            cl.publish(msg.properties.ResponseTopic, b"echo:" + msg.payload, qos=1, properties=props)
        c.on_message = on_message
        c.subscribe(real, qos=1)
        time.sleep(0.5)
        return lambda: (c.loop_stop(), c.disconnect())

    replies = {}
    got = threading.Condition()
    requester = client()

    def on_reply(_c, _u, msg):
        with got:
            replies[msg.properties.CorrelationData.decode()] = msg.payload.decode()
            got.notify_all()
    requester.on_message = on_reply
    requester.subscribe(reply, qos=1)
    time.sleep(0.5)

    def ask(body, corr):
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            props = Properties(PacketTypes.PUBLISH)
            props.ResponseTopic = reply
            props.CorrelationData = corr.encode()
            requester.publish(listen, body.encode(), qos=1, properties=props)
            with got:
                # decoy subscribes in the background: asked again until answered.
                got.wait_for(lambda: corr in replies, timeout=2)
                if corr in replies:
                    return replies[corr]
        raise AssertionError(f"no reply for {body!r}")

    try:
        record_then_play("MQTT 5 (paho-mqtt)", root,
                         ["--listen", f"topic:{listen}", "--forward", f"topic:{real}"], ask, back_end)
    finally:
        requester.loop_stop()
        requester.disconnect()


# --- NATS with nats-py --------------------------------------------------------------
def nats_():
    import nats
    p = f"decoy-record.{uuid.uuid4().hex[:12]}"
    listen, real = f"{p}.listen", f"{p}.real"
    root = root_with({"connectionId": "n", "connectionData": {
        "type": "nats", "uri": "nats://127.0.0.1:4222", "unmatched": {"queue": f"{p}.unmatched"}}})
    loop = asyncio.new_event_loop()
    threading.Thread(target=loop.run_forever, daemon=True).start()

    def run(coro):
        return asyncio.run_coroutine_threadsafe(coro, loop).result(timeout=120)

    def back_end():
        async def up():
            nc = await nats.connect("nats://127.0.0.1:4222")

            async def echo(msg):
                await msg.respond(b"echo:" + msg.data)
            await nc.subscribe(real, cb=echo)
            await nc.flush()
            return nc
        nc = run(up())
        return lambda: run(nc.close())

    async def ask_async(body):
        nc = await nats.connect("nats://127.0.0.1:4222")
        try:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                try:
                    r = await nc.request(listen, body.encode(), timeout=2)
                    return r.data.decode()
                except Exception:
                    # No responder yet (decoy subscribes in the background), or no
                    # reply in time: asked again.
                    await asyncio.sleep(0.1)
            raise AssertionError(f"no reply for {body!r}")
        finally:
            await nc.close()

    record_then_play("NATS (nats-py)", root, ["--listen", listen, "--forward", real],
                     lambda body, _corr: run(ask_async(body)), back_end)
    loop.call_soon_threadsafe(loop.stop)


for which in WHICH:
    {"rabbitmq": rabbitmq, "mqtt": mqtt, "nats": nats_}[which]()
print(f"mq-record: {checks} checks passed")
