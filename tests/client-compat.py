#!/usr/bin/env python3
"""Drives a server's admin API with a real third-party WireMock client.

The client is the PyPI package `wiremock` (python-wiremock), which parses every
answer into its own model classes, so a shape it does not expect fails here. The
same script runs against decoy and against real WireMock 3.13.2, so each check is
known to hold for WireMock too. Usage:

    tests/client-compat.py decoy  path/to/decoy
    tests/client-compat.py wiremock path/to/wiremock-standalone-3.13.2.jar

Exits non-zero when a check fails.
"""
import http.server
import json
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

from wiremock.constants import Config
from wiremock.exceptions import NotFoundException
from wiremock.resources.mappings import (
    HttpMethods,
    Mapping,
    MappingRequest,
    MappingResponse,
)
from wiremock.resources.mappings.resource import Mappings
from wiremock.resources.near_misses import NearMissMatchPatternRequest
from wiremock.resources.near_misses.resource import NearMisses
from wiremock.resources.requests.resource import Requests
from wiremock.resources.scenarios.resource import Scenarios
from wiremock.resources.settings import GlobalSetting
from wiremock.resources.settings.resource import GlobalSettings


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(port, path):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def start(kind, program, root, port):
    if kind == "decoy":
        cmd = [program, "serve", "--port", str(port), "--bind-address", "127.0.0.1",
               "--root-dir", root]
    else:
        cmd = ["java", "-jar", program, "--port", str(port), "--bind-address", "127.0.0.1",
               "--root-dir", root, "--disable-banner"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            if get(port, "/__admin/health")[0] == 200:
                return proc
        except OSError:
            pass
        time.sleep(0.1)
    proc.kill()
    raise SystemExit(f"{kind} did not start")


class Upstream(http.server.BaseHTTPRequestHandler):
    """The "real service" a recording is made from."""
    def do_GET(self):
        body = b'{"recorded": true}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def admin_call(port, method, path, body=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/__admin{path}", data=data, method=method)
    req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            text = r.read().decode()
            return r.status, (json.loads(text) if text else None)
    except urllib.error.HTTPError as e:
        return e.code, None


def record_and_play_back(port, check):
    """WireMock's recording API (no client library covers it): start, traffic, stop."""
    upstream = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Upstream)
    threading.Thread(target=upstream.serve_forever, daemon=True).start()
    target = f"http://127.0.0.1:{upstream.server_address[1]}"
    check("recording status before any", admin_call(port, "GET", "/recordings/status") == (200, {"status": "NeverStarted"}))
    status, body = admin_call(port, "POST", "/recordings/start", {"targetBaseUrl": target, "persist": False})
    check("recordings/start", (status, body) == (200, {}), (status, body))
    check("recording status while recording", admin_call(port, "GET", "/recordings/status")[1] == {"status": "Recording"})
    check("a request goes through to the service", get(port, "/rec/item?id=7") == (200, '{"recorded": true}'))
    status, result = admin_call(port, "POST", "/recordings/stop")
    stubs = (result or {}).get("mappings", [])
    check("recordings/stop returns the recorded stub", status == 200 and len(stubs) == 1, result)
    if stubs:
        stub = stubs[0]
        check("recorded request", stub["request"] == {
            "urlPath": "/rec/item", "method": "GET",
            "queryParameters": {"id": {"hasExactly": [{"equalTo": "7"}]}}}, stub["request"])
        check("recorded response", stub["response"].get("status") == 200 and stub["response"].get("body") == '{"recorded": true}',
              stub["response"])
    upstream.shutdown()
    check("the recording answers without the service", get(port, "/rec/item?id=7") == (200, '{"recorded": true}'))
    check("recording status after stop", admin_call(port, "GET", "/recordings/status")[1] == {"status": "Stopped"})
    status, _ = admin_call(port, "POST", "/recordings/stop")
    check("stopping twice is refused", status >= 400, status)


def main():
    kind, program = sys.argv[1], sys.argv[2]
    failures = []

    def check(what, ok, detail=""):
        print(f"{'ok  ' if ok else 'FAIL'} {kind}: {what}" + (f" ({detail})" if not ok else ""))
        if not ok:
            failures.append(what)

    with tempfile.TemporaryDirectory() as root:
        port = free_port()
        proc = start(kind, program, root, port)
        try:
            Config.base_url = f"http://127.0.0.1:{port}/__admin"

            m = Mappings.create_mapping(Mapping(
                priority=100,
                request=MappingRequest(method=HttpMethods.GET, url="/client/hello"),
                response=MappingResponse(status=200, body="hi from the client"),
                persistent=False,
            ))
            check("create_mapping returns the mapping with an id", bool(m.id))
            check("the stub serves", get(port, "/client/hello") == (200, "hi from the client"))

            all_mappings = Mappings.retrieve_all_mappings()
            check("retrieve_all_mappings lists it", [x.id for x in all_mappings.mappings] == [m.id],
                  [x.id for x in all_mappings.mappings])
            check("meta.total", all_mappings.meta.total == 1, all_mappings.meta.total)

            one = Mappings.retrieve_mapping(m.id)
            check("retrieve_mapping", one.id == m.id and one.response.body == "hi from the client")

            one.response = MappingResponse(status=201, body="edited")
            Mappings.update_mapping(one)
            check("update_mapping changes the answer", get(port, "/client/hello") == (201, "edited"))

            get(port, "/client/unknown")
            reqs = Requests.get_all_received_requests()
            urls = [r.request.url for r in reqs.requests]
            check("journal lists newest first", urls[:3] == ["/client/unknown", "/client/hello", "/client/hello"], urls)
            check("journal meta.total", reqs.meta.total == 3, reqs.meta.total)
            first = Requests.get_request(reqs.requests[0].id)
            check("get_request by id", first.request.url == "/client/unknown")

            count = Requests.get_matching_request_count(
                NearMissMatchPatternRequest(method="GET", url="/client/hello"))
            check("get_matching_request_count", count.count == 2, count.count)
            found = Requests.get_matching_requests(
                NearMissMatchPatternRequest(method="GET", url_path_pattern="/client/.*"))
            check("get_matching_requests", len(found.requests) == 3, len(found.requests))
            unmatched = Requests.get_unmatched_requests()
            check("get_unmatched_requests", [r.url for r in unmatched.requests] == ["/client/unknown"])
            misses = Requests.get_unmatched_requests_near_misses()
            check("get_unmatched_requests_near_misses parses", misses is not None)
            nm = NearMisses.find_nearest_misses_by_request_pattern(
                NearMissMatchPatternRequest(url="/client/hellp", method="GET"))
            check("find_nearest_misses_by_request_pattern parses", nm is not None)

            Mappings.create_mapping(Mapping(
                scenario_name="flow", required_scenario_state="Started", new_scenario_state="done",
                request=MappingRequest(method=HttpMethods.POST, url="/client/flow"),
                response=MappingResponse(status=200, body="first"),
            ))
            Mappings.create_mapping(Mapping(
                scenario_name="flow", required_scenario_state="done",
                request=MappingRequest(method=HttpMethods.POST, url="/client/flow"),
                response=MappingResponse(status=200, body="second"),
            ))
            post = lambda: urllib.request.urlopen(urllib.request.Request(
                f"http://127.0.0.1:{port}/client/flow", data=b"", method="POST"), timeout=10).read().decode()
            check("scenario moves on", [post(), post()] == ["first", "second"])
            Scenarios.reset_all_scenarios()
            check("reset_all_scenarios", post() == "first")

            # WireMock answers POST /__admin/settings with an empty body, which this
            # client then fails to parse as JSON; decoy answers the same way, so the
            # same exception is expected from both, after the settings took effect.
            try:
                GlobalSettings.update_global_settings(GlobalSetting(fixed_delay=1))
            except ValueError:
                pass
            status, text = get(port, "/__admin/settings")
            check("update_global_settings took effect", status == 200 and '"fixedDelay"' in text, text)
            try:
                GlobalSettings.update_global_settings(GlobalSetting(fixed_delay=0))
            except ValueError:
                pass

            # This client resets with POST /__admin/requests/reset, a WireMock 2 endpoint
            # that WireMock 3 answers with 404; decoy still accepts it. Both accept DELETE.
            try:
                Requests.reset_request_journal()
            except NotFoundException:
                check("only WireMock lacks POST /requests/reset", kind == "wiremock")
                urllib.request.urlopen(urllib.request.Request(
                    f"http://127.0.0.1:{port}/__admin/requests", method="DELETE"), timeout=10).read()
            check("reset_request_journal empties it", Requests.get_all_received_requests().meta.total == 0)

            Mappings.delete_mapping(m.id)
            check("delete_mapping", get(port, "/client/hello")[0] == 404)
            Mappings.delete_all_mappings()
            check("delete_all_mappings", Mappings.retrieve_all_mappings().meta.total == 0)
            Mappings.reset_mappings()
            check("reset_mappings", True)

            record_and_play_back(port, check)
        finally:
            proc.terminate()
            proc.wait(timeout=20)
    if failures:
        raise SystemExit(f"{len(failures)} check(s) failed for {kind}")
    print(f"{kind}: every client check passed")


if __name__ == "__main__":
    main()
