#!/usr/bin/env python3
"""decoy's gRPC side driven by Python's grpcio (PyPI), a client decoy's authors did not write.

Usage: grpcio-compat.py DECOY_BINARY

Serves tests/grpc/wiremock-grpc-extension (the WireMock gRPC extension's own
descriptors and protos) with decoy, generates the Python client code from the same
protos with grpcio-tools, and makes every kind of call the root's stubs answer;
then asks the server's reflection (grpcio-reflection's client) and health service
(grpcio-health-checking) what it serves, with no proto on the client side. Last,
`decoy record` stands in front of a grpcio server, the grpcio client calls it,
the recording is stopped (SIGINT, as Ctrl-C) and the real server too, and decoy
serving what was recorded answers the same calls alike.
Needs grpcio, grpcio-tools, grpcio-reflection and grpcio-health-checking.
"""

import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "wiremock-grpc-extension")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    decoy = sys.argv[1]
    import grpc
    from grpc_tools import protoc

    gen = tempfile.mkdtemp()
    protos = ["ExampleServices.proto", "request/helloRequest.proto",
              "request/models/sentiment.proto", "response/helloResponse.proto"]
    import grpc_tools
    well_known = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
    rc = protoc.main(["protoc", f"-I{ROOT}/proto", f"-I{well_known}", f"--python_out={gen}",
                      f"--grpc_python_out={gen}"] + [f"{ROOT}/proto/{p}" for p in protos])
    assert rc == 0, "protoc failed"
    sys.path.insert(0, gen)
    import ExampleServices_pb2_grpc as services
    from request import helloRequest_pb2 as req_pb
    from google.protobuf import empty_pb2  # noqa: F401 (the Empty answer's type)

    port = free_port()
    proc = subprocess.Popen([decoy, "serve", "--root-dir", ROOT, "--port", str(port),
                             "--bind-address", "127.0.0.1", "--no-watch"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        for _ in range(200):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/__admin/health", timeout=1)
                break
            except OSError:
                time.sleep(0.05)
        else:
            raise SystemExit("decoy did not start")
        run(grpc, services, req_pb, port)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    record(decoy, grpc, services, req_pb)
    print("grpcio-compat: all checks passed")


def run(grpc, services, req_pb, port):
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    stub = services.GreetingServiceStub(channel)
    Hello = req_pb.HelloRequest

    def check(name, cond, detail=""):
        if not cond:
            raise SystemExit(f"FAILED: {name} {detail}")
        print(f"ok: {name}")

    check("unary", stub.greeting(Hello(name="Tom")).greeting == "Hi Tom")
    check("templated", stub.greeting(Hello(name="Alice")).greeting == "Hello Alice")
    try:
        stub.greeting(Hello(name="Prereq failure"))
        check("grpc-status-name", False)
    except grpc.RpcError as e:
        check("grpc-status-name", e.code() == grpc.StatusCode.FAILED_PRECONDITION
              and e.details() == "Failed on some prerequisite", repr(e))
    try:
        stub.greeting(Hello(name="Nobody"))
        check("no match", False)
    except grpc.RpcError as e:
        check("no match", e.code() == grpc.StatusCode.UNIMPLEMENTED
              and e.details() == "No matching stub mapping found for gRPC request", repr(e))
    resp, call = stub.greeting.with_call(Hello(name="Meta"), metadata=[("x-tenant", "acme")])
    initial = dict(call.initial_metadata())
    trailing = dict(call.trailing_metadata())
    check("metadata", resp.greeting == "Hi acme" and initial.get("x-served-by") == "decoy"
          and trailing.get("x-checksum") == "abc", f"{initial} {trailing}")
    try:
        stub.greeting(Hello(name="Slow"), timeout=0.2)
        check("deadline", False)
    except grpc.RpcError as e:
        check("deadline", e.code() == grpc.StatusCode.DEADLINE_EXCEEDED, repr(e))
    check("gzip", stub.greeting(Hello(name="Tom"), compression=grpc.Compression.Gzip).greeting == "Hi Tom")
    try:
        stub.greeting(Hello(name="Alan"))
        check("fault", False)
    except grpc.RpcError as e:
        check("fault", e.code() != grpc.StatusCode.OK, repr(e))
    got = [r.greeting for r in stub.oneGreetingManyReplies(Hello(name="Tom"))]
    check("server streaming", got == ["Hi", "Hi again", "Bye"], repr(got))
    one = stub.manyGreetingsOneReply(iter([Hello(name=n) for n in ["Tom", "Uri", "Rob", "Mark"]]))
    check("client streaming", one.greeting == "Hi Rob", repr(one))
    stub.oneGreetingEmptyReply(Hello(name="Tom"))
    check("an imported type (Empty)", True)

    # Reflection, with no proto on this side.
    from grpc_reflection.v1alpha.proto_reflection_descriptor_database import (
        ProtoReflectionDescriptorDatabase)
    from google.protobuf.descriptor_pool import DescriptorPool
    db = ProtoReflectionDescriptorDatabase(channel)
    names = set(db.get_services())
    check("reflection lists services", {"com.example.grpc.GreetingService",
                                        "com.example.grpc.BookingService",
                                        "grpc.health.v1.Health"} <= names, repr(names))
    pool = DescriptorPool(db)
    svc = pool.FindServiceByName("com.example.grpc.GreetingService")
    methods = [m.name for m in svc.methods]
    check("reflection describes a service", "greeting" in methods
          and svc.FindMethodByName("greeting").input_type.full_name == "com.example.grpc.request.HelloRequest",
          repr(methods))
    msg = pool.FindMessageTypeByName("com.example.grpc.request.HelloRequest")
    check("reflection describes a message", [f.name for f in msg.fields][:2] == ["name", "age"])

    from grpc_health.v1 import health_pb2, health_pb2_grpc
    health = health_pb2_grpc.HealthStub(channel)
    st = health.Check(health_pb2.HealthCheckRequest(service="")).status
    check("health", st == health_pb2.HealthCheckResponse.SERVING, repr(st))
    st = health.Check(health_pb2.HealthCheckRequest(service="com.example.grpc.GreetingService")).status
    check("health of a service", st == health_pb2.HealthCheckResponse.SERVING, repr(st))
    try:
        health.Check(health_pb2.HealthCheckRequest(service="no.Such"))
        check("health of an unknown service", False)
    except grpc.RpcError as e:
        check("health of an unknown service", e.code() == grpc.StatusCode.NOT_FOUND, repr(e))
    channel.close()


def start_decoy(args, port):
    proc = subprocess.Popen(args + ["--port", str(port), "--bind-address", "127.0.0.1"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    for _ in range(400):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/__admin/health", timeout=1)
            return proc
        except OSError:
            if proc.poll() is not None:
                raise SystemExit(f"decoy exited: {proc.stderr.read().decode()}")
            time.sleep(0.05)
    raise SystemExit("decoy did not start")


def record(decoy, grpc, services, req_pb):
    """`decoy record` in front of a grpcio server, then playback without it."""
    import shutil
    import signal
    from concurrent import futures
    from response import helloResponse_pb2 as resp_pb

    class Greeter(services.GreetingServiceServicer):
        def greeting(self, request, context):
            if request.name == "boom":
                context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, "too much")
            context.send_initial_metadata((("x-py", "grpcio"),))
            return resp_pb.HelloResponse(greeting=f"Py {request.name}")

        def oneGreetingManyReplies(self, request, context):
            for word in ("one", "two"):
                yield resp_pb.HelloResponse(greeting=f"{word} {request.name}")

    real = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    services.add_GreetingServiceServicer_to_server(Greeter(), real)
    real_port = real.add_insecure_port("127.0.0.1:0")
    real.start()
    root = tempfile.mkdtemp()
    shutil.copytree(os.path.join(ROOT, "grpc"), os.path.join(root, "grpc"))
    Hello = req_pb.HelloRequest

    def calls(port):
        channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        stub = services.GreetingServiceStub(channel)
        resp, call = stub.greeting.with_call(Hello(name="Ann"))
        meta = dict(call.initial_metadata())
        try:
            stub.greeting(Hello(name="boom"))
            failed = None
        except grpc.RpcError as e:
            failed = (e.code(), e.details())
        stream = [m.greeting for m in stub.oneGreetingManyReplies(Hello(name="Ann"))]
        channel.close()
        return {"unary": resp.greeting, "x-py": meta.get("x-py"), "failed": failed,
                "stream": stream}

    def check(name, cond, detail=""):
        if not cond:
            raise SystemExit(f"FAILED: {name} {detail}")
        print(f"ok: {name}")

    port = free_port()
    rec = start_decoy([decoy, "record", "--target", f"http://127.0.0.1:{real_port}",
                       "--root-dir", root], port)
    try:
        live = calls(port)
    finally:
        rec.send_signal(signal.SIGINT)
        rec.wait(timeout=30)
        real.stop(0)
    check("proxied through decoy record", live == {
        "unary": "Py Ann", "x-py": "grpcio",
        "failed": (grpc.StatusCode.RESOURCE_EXHAUSTED, "too much"),
        "stream": ["one Ann", "two Ann"]}, repr(live))
    written = os.listdir(os.path.join(root, "mappings"))
    check("recorded stubs written", len(written) == 3, repr(written))
    port = free_port()
    play = start_decoy([decoy, "serve", "--root-dir", root, "--no-watch"], port)
    try:
        again = calls(port)
    finally:
        play.terminate()
        play.wait(timeout=10)
    check("played back alike", again == live, repr(again))
    shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
