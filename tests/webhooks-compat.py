#!/usr/bin/env python3
"""Webhooks side by side: the callbacks real WireMock 3.13.2 sends and decoy's.

A small HTTP receiver on a free port records every request it gets. One root
directory of stubs with webhooks (`serveEventListeners`, and WireMock 2's
`postServeActions`) whose templates use the request in different ways is served by
WireMock, then by decoy; the same requests go to both, and the callbacks each sent
are compared: method, path and query, body, and every header a stub names. Usage:

    tests/webhooks-compat.py --wiremock path/to/wiremock-standalone-3.13.2.jar \\
                             --decoy path/to/decoy

(`npm install wiremock@3.13.2` ships the jar in node_modules/wiremock/build/.)
Prints "skipped: ..." and exits 0 when java is not installed; exits non-zero when
the two engines' callbacks differ.
"""
import argparse
import http.client
import http.server
import json
import pathlib
import shutil
import socket
import socketserver
import subprocess
import sys
import tempfile
import threading
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Receiver:
    """Records (method, path, headers, body) of every request; answers 200."""

    def __init__(self):
        self.got = []
        self.lock = threading.Lock()
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def record(self):
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n) if n else b""
                with outer.lock:
                    outer.got.append({
                        "method": self.command,
                        "path": self.path,
                        "headers": [(k.lower(), v) for k, v in self.headers.items()],
                        "body": body.decode("utf-8", "replace"),
                    })
                self.send_response(200)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = record

            def log_message(self, *args):
                pass

        class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
            daemon_threads = True

            def handle_error(self, request, client_address):
                pass  # an engine closing its pooled connection as it stops

        self.server = Server(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def take(self):
        with self.lock:
            got, self.got = self.got, []
        return got


def stubs(cb):
    """The stubs and, for each, the request that triggers it. Each webhook's URL starts
    with /cb/<case>, which is how callbacks are paired."""
    listener = lambda **p: [{"name": "webhook", "parameters": p}]
    json_headers = {"Content-Type": "application/json"}
    return [
        ("echo",
         {"request": {"method": "POST", "urlPath": "/echo"}, "response": {"status": 202},
          "serveEventListeners": listener(
              method="POST", url=cb + "/cb/echo/{{jsonPath originalRequest.body '$.id'}}?from={{originalRequest.query.from}}",
              headers={"Content-Type": "application/json", "X-Trace": "{{originalRequest.headers.X-Trace}}",
                       "X-Multi": ["a", "{{originalRequest.method}}"]},
              body="{\"id\": \"{{jsonPath originalRequest.body '$.id'}}\", \"url\": \"{{originalRequest.url}}\", "
                   "\"path\": \"{{originalRequest.path}}\", \"extra\": \"{{parameters.extra}}\", "
                   "\"own\": \"{{parameters.url}}\", \"request\": \"{{request.url}}\"}",
              extra="E")},
         {"method": "POST", "url": "/echo?from=shop", "headers": {"X-Trace": "t-1", **json_headers}, "body": "{\"id\": 42}"}),
        ("method",
         {"request": {"urlPath": "/method"},
          "serveEventListeners": listener(method="{{originalRequest.headers.X-Method}}", url=cb + "/cb/method", body="sent with PUT")},
         {"method": "GET", "url": "/method", "headers": {"X-Method": "PUT"}, "body": ""}),
        ("get-no-body",
         {"request": {"urlPath": "/get"},
          "serveEventListeners": listener(url=cb + "/cb/get-no-body", body="not sent with GET")},
         {"method": "GET", "url": "/get", "headers": {}, "body": ""}),
        ("binary",
         {"request": {"urlPath": "/binary"},
          "serveEventListeners": listener(method="PUT", url=cb + "/cb/binary", base64Body="aGVsbG8ge3t4fX0=")},
         {"method": "GET", "url": "/binary", "headers": {}, "body": ""}),
        ("helpers",
         {"request": {"urlPathPattern": "/helpers/.*"},
          "serveEventListeners": listener(
              method="POST", url=cb + "/cb/helpers",
              body="{{upper originalRequest.query.name}} {{originalRequest.path.[1]}} {{size originalRequest.query.v}} "
                   "{{#each originalRequest.query.v}}[{{this}}]{{/each}} {{originalRequest.headers.content-type}}")},
         {"method": "POST", "url": "/helpers/abc?name=ann&v=1&v=2", "headers": {"Content-Type": "text/plain"}, "body": "x"}),
        ("legacy",
         {"request": {"urlPath": "/legacy"},
          "postServeActions": {"webhook": {"method": "POST", "url": cb + "/cb/legacy", "body": "{{originalRequest.method}}"}}},
         {"method": "DELETE", "url": "/legacy", "headers": {}, "body": ""}),
        ("delayed",
         {"request": {"urlPath": "/delayed"},
          "serveEventListeners": listener(method="POST", url=cb + "/cb/delayed", body="late",
                                          delay={"type": "fixed", "milliseconds": 200})},
         {"method": "GET", "url": "/delayed", "headers": {}, "body": ""}),
        ("two",
         {"request": {"urlPath": "/two"},
          "serveEventListeners": listener(url=cb + "/cb/two/a") + listener(url=cb + "/cb/two/b")},
         {"method": "GET", "url": "/two", "headers": {}, "body": ""}),
    ]


def wait_up(port, proc, what):
    deadline = time.time() + 90
    while time.time() < deadline:
        if proc.poll() is not None:
            sys.exit(f"{what} did not start")
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            c.request("GET", "/__admin/mappings")
            if c.getresponse().status == 200:
                return
        except OSError:
            pass
        time.sleep(0.2)
    proc.kill()
    sys.exit(f"{what} did not start within 90 s")


def run(kind, exe, root, cases, receiver, logdir):
    port = free_port()
    if kind == "wiremock":
        cmd = ["java", "-jar", exe, "--port", str(port), "--bind-address", "127.0.0.1",
               "--root-dir", str(root), "--disable-banner"]
    else:
        cmd = [exe, "serve", "--root-dir", str(root), "--port", str(port), "--bind-address", "127.0.0.1"]
    proc = subprocess.Popen(cmd, stdout=open(logdir / f"{kind}.log", "wb"), stderr=subprocess.STDOUT)
    try:
        wait_up(port, proc, kind)
        receiver.take()
        for _, _, req in cases:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            c.request(req["method"], req["url"], body=req["body"].encode(), headers=req["headers"])
            c.getresponse().read()
        expected = sum(len(stub.get("serveEventListeners", [])) or 1 for _, stub, _ in cases)
        deadline = time.time() + 15
        got = []
        while len(got) < expected and time.time() < deadline:
            time.sleep(0.1)
            got += receiver.take()
        time.sleep(0.3)  # nothing more should come
        return got + receiver.take()
    finally:
        proc.terminate()
        proc.wait()


def by_path(callbacks):
    out = {}
    for c in callbacks:
        out.setdefault(c["path"].split("?")[0], []).append(c)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--wiremock", required=True)
    ap.add_argument("--decoy", required=True)
    args = ap.parse_args()
    if shutil.which("java") is None:
        print("skipped: webhooks-compat needs java to run WireMock")
        return 0
    receiver = Receiver()
    cases = stubs(f"http://127.0.0.1:{receiver.port}")
    work = pathlib.Path(tempfile.mkdtemp(prefix="webhooks-compat-"))
    root = work / "root"
    (root / "mappings").mkdir(parents=True)
    (root / "__files").mkdir()
    for name, stub, _ in cases:
        (root / "mappings" / f"{name}.json").write_text(json.dumps(stub, indent=2))
    wm = by_path(run("wiremock", args.wiremock, root, cases, receiver, work))
    dc = by_path(run("decoy", args.decoy, root, cases, receiver, work))
    named = {h.lower() for _, stub, _ in cases
             for l in stub.get("serveEventListeners", []) for h in l["parameters"].get("headers", {})}
    failures = 0
    for path in sorted(set(wm) | set(dc)):
        a, b = wm.get(path, []), dc.get(path, [])
        problems = []
        if len(a) != len(b):
            problems.append(f"{len(a)} callback(s) from WireMock, {len(b)} from decoy")
        for x, y in zip(a, b):
            for k in ("method", "path", "body"):
                if x[k] != y[k]:
                    problems.append(f"{k}: WireMock {x[k]!r}, decoy {y[k]!r}")
            for h in sorted(named):
                xv = [v for k, v in x["headers"] if k == h]
                yv = [v for k, v in y["headers"] if k == h]
                if xv != yv:
                    problems.append(f"header {h}: WireMock {xv}, decoy {yv}")
        if problems:
            failures += 1
            print(f"DIFFERS {path}:\n  " + "\n  ".join(problems))
        else:
            print(f"same    {path}: {a[0]['method']} {a[0]['path']} {a[0]['body']!r}" if a else f"same    {path}")
    if not wm:
        print("WireMock sent no callback at all; see", work / "wiremock.log")
        return 1
    if failures:
        print(f"{failures} webhook case(s) differ; logs in {work}")
        return 1
    shutil.rmtree(work, ignore_errors=True)
    print(f"all {len(wm)} webhook targets got the same callbacks from WireMock and decoy")
    return 0


if __name__ == "__main__":
    sys.exit(main())
