#!/usr/bin/env python3
"""MQTT virtual services driven by a third-party client (PyPI paho-mqtt), end to end.

Usage: mqtt-compat.py DECOY_BINARY [BROKER_HOST [BROKER_PORT]]

Starts decoy with an MQTT connection to the broker (Mosquitto on 127.0.0.1:1883 by
default) and mappings on topics of this run's own, then, as the system under test:
- MQTT 5: requests at QoS 0, 1 and 2 with a response topic, correlation data and a
  user property; each reply must come on the response topic with its request's
  correlation data, at the request's QoS, once;
- MQTT 3.1.1: a request whose reply goes to a topic the mapping names, templated from
  the request topic, retained (a client subscribing afterwards still gets it);
- an unmatched request is published on the unmatched topic, as it came.
Every request is counted against its reply. Exits non-zero on the first failure.
"""

import json
import os
import queue
import socket
import subprocess
import sys
import tempfile
import time
import uuid

import paho.mqtt.client as mqtt
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

DEADLINE = 30


def fail(msg):
    print(f"FAIL: {msg}")
    sys.exit(1)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def client(version, host, port, topics, got):
    c = mqtt.Client(
        mqtt.CallbackAPIVersion.VERSION2,
        client_id=f"paho-{uuid.uuid4().hex[:12]}",
        protocol=mqtt.MQTTv5 if version == 5 else mqtt.MQTTv311,
    )
    subscribed = queue.Queue()

    def on_message(_c, _u, m):
        props = getattr(m, "properties", None)
        got.put(
            {
                "topic": m.topic,
                "body": m.payload.decode(),
                "qos": m.qos,
                "retain": bool(m.retain),
                "corr": getattr(props, "CorrelationData", None) if props else None,
                "user": list(getattr(props, "UserProperty", []) or []) if props else [],
            }
        )

    c.on_message = on_message
    c.on_subscribe = lambda *a: subscribed.put(True)
    c.connect(host, port, keepalive=30)
    c.loop_start()
    for t in topics:
        c.subscribe(t, qos=2)
        subscribed.get(timeout=10)
    return c


def wait_served(c, topic, reply, got, version):
    """Publishes a probe until decoy answers: it subscribes once serving starts."""
    end = time.time() + DEADLINE
    while time.time() < end:
        props = None
        if version == 5:
            props = Properties(PacketTypes.PUBLISH)
            props.ResponseTopic = reply
            props.CorrelationData = b"probe"
        c.publish(topic, "probe", qos=1, properties=props)
        try:
            got.get(timeout=0.5)
            time.sleep(0.3)
            while not got.empty():
                got.get_nowait()
            return
        except queue.Empty:
            pass
    fail(f"decoy never answered on {topic}")


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        sys.exit(2)
    decoy = sys.argv[1]
    host = sys.argv[2] if len(sys.argv) > 2 else "127.0.0.1"
    port = int(sys.argv[3]) if len(sys.argv) > 3 else 1883
    base = f"decoy-compat/{uuid.uuid4().hex}"
    root = tempfile.mkdtemp()
    os.makedirs(f"{root}/mq-mappings")
    with open(f"{root}/mq-connections.json", "w") as f:
        json.dump(
            [
                {"connectionId": "m5", "connectionData": {"type": "mqtt", "uri": f"mqtt://{host}:{port}",
                                                          "unmatched": {"queue": f"{base}/unmatched"}}},
                {"connectionId": "m311", "connectionData": {"type": "mqtt", "uri": f"mqtt://{host}:{port}",
                                                            "protocolVersion": "3.1.1"}},
            ],
            f,
        )
    mappings = {
        "status.json": {
            "connectionId": "m5",
            "request": {"destination": {"name": f"{base}/devices/+/status", "type": "TOPIC"},
                        "bodyMatcher": {"matchesJsonPath": "$.id"},
                        "properties": {"tenant": {"equalTo": "acme"}}},
            "response": {"text": "{\"id\": {{jsonPath request.body '$.id'}}, \"ok\": true}",
                         "transformers": ["response-template"]},
            "receiveThreads": 2,
        },
        "probe.json": {
            "connectionId": "m5",
            "request": {"destination": {"name": f"{base}/devices/+/status", "type": "TOPIC"},
                        "bodyMatcher": {"equalTo": "probe"}},
            "response": {"text": "ready"},
        },
        "lamp.json": {
            "connectionId": "m311",
            "request": {"destination": {"name": f"{base}/lamps/+/set", "type": "TOPIC"}},
            "response": {"destination": {"name": f"{base}/lamps/{{{{regexExtract request.destination 'lamps/([^/]+)/set' 'p'}}}}{{{{p.[0]}}}}/state",
                                         "type": "TOPIC"},
                         "text": "state={{request.body}}", "retain": True,
                         "transformers": ["response-template"]},
        },
    }
    for name, m in mappings.items():
        with open(f"{root}/mq-mappings/{name}", "w") as f:
            json.dump(m, f)
    http = free_port()
    proc = subprocess.Popen([decoy, "serve", "--root-dir", root, "--port", str(http)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        run(base, host, port)
        print("mqtt-compat: all passed")
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()


def run(base, host, port):
    # MQTT 5: response topic and correlation data.
    replies, lost = f"{base}/replies", f"{base}/unmatched"
    got = queue.Queue()
    c5 = client(5, host, port, [replies, lost], got)
    wait_served(c5, f"{base}/devices/0/status", replies, got, 5)
    n = 90
    for i in range(n):
        props = Properties(PacketTypes.PUBLISH)
        props.ResponseTopic = replies
        props.CorrelationData = f"req-{i}".encode()
        props.UserProperty = ("tenant", "acme")
        c5.publish(f"{base}/devices/d{i}/status", json.dumps({"id": i}), qos=i % 3, properties=props)
    seen = {}
    end = time.time() + DEADLINE
    while len(seen) < n and time.time() < end:
        try:
            m = got.get(timeout=max(0.1, end - time.time()))
        except queue.Empty:
            break
        if m["corr"] == b"probe":
            continue
        seen.setdefault(m["corr"], []).append(m)
    for i in range(n):
        ms = seen.get(f"req-{i}".encode())
        if not ms:
            fail(f"req-{i}: no reply ({len(seen)} of {n} answered)")
        if len(ms) != 1:
            fail(f"req-{i}: answered {len(ms)} times")
        m = ms[0]
        if m["topic"] != replies or json.loads(m["body"]) != {"id": i, "ok": True}:
            fail(f"req-{i}: {m}")
        if m["qos"] != i % 3:
            fail(f"req-{i}: reply at QoS {m['qos']}, asked at {i % 3}")
    print(f"MQTT 5: {n} requests at QoS 0/1/2, {n} replies, each once, on the response topic")

    props = Properties(PacketTypes.PUBLISH)
    props.ResponseTopic = replies
    props.CorrelationData = b"stranger"
    props.UserProperty = ("tenant", "other")
    c5.publish(f"{base}/devices/x/status", "{\"id\": 1}", qos=1, properties=props)
    try:
        m = got.get(timeout=10)
    except queue.Empty:
        fail("the unmatched request was not published on the unmatched topic")
    if m["topic"] != lost or m["body"] != "{\"id\": 1}" or ("tenant", "other") not in m["user"]:
        fail(f"unmatched: {m}")
    print("MQTT 5: an unmatched request went to the unmatched topic as it came")
    c5.loop_stop()
    c5.disconnect()

    # MQTT 3.1.1: no response topic; the mapping names the reply topic.
    got = queue.Queue()
    c3 = client(3, host, port, [f"{base}/lamps/+/state"], got)
    end = time.time() + DEADLINE
    reply = None
    while time.time() < end and reply is None:
        c3.publish(f"{base}/lamps/kitchen/set", "on", qos=2)
        try:
            reply = got.get(timeout=0.7)
        except queue.Empty:
            pass
    if reply is None:
        fail("MQTT 3.1.1: no reply")
    if reply["topic"] != f"{base}/lamps/kitchen/state" or reply["body"] != "state=on" or reply["qos"] != 2:
        fail(f"MQTT 3.1.1: {reply}")
    c3.loop_stop()
    c3.disconnect()
    late = queue.Queue()
    c = client(3, host, port, [f"{base}/lamps/kitchen/state"], late)
    try:
        m = late.get(timeout=10)
    except queue.Empty:
        fail("the reply was not retained")
    if not m["retain"] or m["body"] != "state=on":
        fail(f"retained: {m}")
    c.publish(f"{base}/lamps/kitchen/state", b"", qos=1, retain=True).wait_for_publish(5)
    c.loop_stop()
    c.disconnect()
    print("MQTT 3.1.1: reply on the templated topic, at the request's QoS 2, retained")


if __name__ == "__main__":
    main()
