#!/usr/bin/env python3
"""Replays every fixture folder under tests/fixtures against real WireMock.

The fixture runner in host/tests/fixtures.rs checks decoy against requests.json;
this script checks WireMock against the same file, so the expected answers are
known to be WireMock's own. Usage:

    tests/wiremock-compat.py path/to/wiremock-standalone-3.13.2.jar

(`npm install wiremock@3.13.2` ships the jar in node_modules/wiremock/build/.)
Exits non-zero when WireMock disagrees with a fixture. In an expected body or
header, `@HOSTNAME@` stands for this machine's name, as Java's
`InetAddress.getLocalHost().getHostName()` gives it (`{{hostname}}` writes it).
"""
import http.client
import json
import pathlib
import socket
import subprocess
import sys
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def request(port, req):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    body = req.get("body", "").encode()
    headers = dict(req.get("headers", {}))
    if "json" in req:
        # Compact, as the Rust runner (host/tests/fixtures.rs) sends it: a template
        # that echoes the body gets the same bytes from both.
        body = json.dumps(req["json"], separators=(",", ":")).encode()
        headers["Content-Type"] = "application/json"
    conn.request(req.get("method", "GET"), req["url"], body=body, headers=headers)
    resp = conn.getresponse()
    data = resp.read().decode("utf-8", "replace")
    headers = {k.lower(): v for k, v in resp.getheaders()[::-1]}  # first value wins
    conn.close()
    return resp.status, headers, data


def subset_problems(expected, actual, at="$"):
    """Where `actual` lacks something `expected` has (objects may have more keys;
    lists must have the same length)."""
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            return [f"{at}: expected an object, got {actual!r}"]
        out = []
        for k, v in expected.items():
            if k not in actual:
                out.append(f"{at}.{k}: missing")
            else:
                out += subset_problems(v, actual[k], f"{at}.{k}")
        return out
    if isinstance(expected, list):
        if not isinstance(actual, list) or len(actual) != len(expected):
            return [f"{at}: expected a list of {len(expected)}, got {actual!r}"]
        return [p for i, (e, a) in enumerate(zip(expected, actual)) for p in subset_problems(e, a, f"{at}[{i}]")]
    return [] if expected == actual else [f"{at}: {actual!r}, expected {expected!r}"]


def machine_hostname():
    """Java's InetAddress.getLocalHost().getHostName(): the host name when it
    resolves, else (as WireMock's helper then writes) localhost."""
    name = socket.gethostname()
    if not name or name == "localhost":
        return "localhost"
    try:
        socket.getaddrinfo(name, None)
        return name
    except OSError:
        return "localhost"


def expand(value):
    return value.replace("@HOSTNAME@", machine_hostname()) if isinstance(value, str) else value


def check(case, status, headers, body):
    exp = {k: expand(v) for k, v in case["expect"].items()}
    exp["headers"] = {k: expand(v) for k, v in exp.get("headers", {}).items()}
    exp["bodyContains"] = [expand(p) for p in exp.get("bodyContains", [])]
    problems = []
    if status != exp["status"]:
        problems.append(f"status {status}, expected {exp['status']}")
    for k, v in exp.get("headers", {}).items():
        if k.lower() == "matched-stub-id":
            continue  # WireMock only sends it in some configurations
        if headers.get(k.lower()) != v:
            problems.append(f"header {k}: {headers.get(k.lower())!r}, expected {v!r}")
    if "body" in exp and body != exp["body"]:
        problems.append(f"body {body!r}, expected {exp['body']!r}")
    if "json" in exp:
        try:
            problems += subset_problems(exp["json"], json.loads(body))
        except ValueError:
            problems.append(f"body is not JSON: {body!r}")
    for part in exp.get("bodyContains", []):
        if part not in body:
            problems.append(f"body lacks {part!r}")
    return problems


def main():
    jar = sys.argv[1]
    failures = 0
    for fixture in sorted(pathlib.Path(__file__).parent.joinpath("fixtures").iterdir()):
        port = free_port()
        proc = subprocess.Popen(
            ["java", "-jar", jar, "--port", str(port), "--bind-address", "127.0.0.1",
             "--root-dir", str(fixture), "--disable-banner", "--disable-gzip"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.time() + 60
            while True:
                try:
                    if request(port, {"url": "/__admin/health"})[0] == 200:
                        break
                except OSError:
                    pass
                if time.time() > deadline:
                    raise SystemExit(f"WireMock did not start for {fixture}")
                time.sleep(0.2)
            cases = json.loads(fixture.joinpath("requests.json").read_text())
            for i, case in enumerate(cases):
                problems = check(case, *request(port, case["request"]))
                label = f"{fixture.name} case {i} ({case['request'].get('method', 'GET')} {case['request']['url']})"
                if problems:
                    failures += 1
                    print(f"DIFFERS {label}: " + "; ".join(problems))
                else:
                    print(f"same    {label}")
        finally:
            proc.terminate()
            proc.wait()
    if failures:
        raise SystemExit(f"{failures} case(s) where WireMock disagrees with the fixtures")


if __name__ == "__main__":
    main()
