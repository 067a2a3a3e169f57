#!/usr/bin/env python3
"""The training run of an instrumented decoy: HTTP requests of the kinds users send.

    python3 bench/training.py EXE

bench/optimize.sh runs it twice: on a build instrumented for profile-guided
optimization (rustc's -Cprofile-generate) and on a copy instrumented by BOLT. Each
writes its profile when it exits, which SIGTERM makes it do (a graceful stop). What
the run covers is what the optimized build is laid out and inlined for; code it does
not reach is treated as cold (smaller, slower to call), so the mix is the requests of
real WireMock roots, not one stub: a static stub, a stub among 2,000 (exact, regex
and template URLs), a templated answer, a JSON body matched by equalToJson and
matchesJsonPath, a header and query match, requests no stub matches (the near-miss
report), and the admin API (mappings, journal). Needs wrk; every request goes to
127.0.0.1 and every phase is bounded by wrk's duration.
"""
import json
import pathlib
import shutil
import sys
import tempfile

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import bench  # noqa: E402  (the shared helpers: roots, servers, wrk)

SPREAD = 2000
STUBS = [
    {"request": {"urlPath": "/__probe"}, "response": {"status": 200}},
    {"request": {"method": "GET", "url": "/static"},
     "response": {"status": 200, "headers": {"Content-Type": "text/plain"}, "body": "hello"}},
    {"request": {"method": "GET", "urlPathPattern": "/templated/.*"},
     "response": {"status": 200, "headers": {"Content-Type": "application/json"},
                  "body": "{\"path\": \"{{request.path}}\", \"q\": \"{{request.query.q}}\", "
                          "\"id\": \"{{randomValue length=8 type='ALPHANUMERIC'}}\"}",
                  "transformers": ["response-template"]}},
    {"request": {"method": "POST", "urlPath": "/orders",
                 "headers": {"Content-Type": {"contains": "json"}},
                 "bodyPatterns": [{"matchesJsonPath": "$.items[?(@.qty > 0)]"},
                                  {"equalToJson": {"customer": "c-1", "items": "${json-unit.ignore}"},
                                   "ignoreExtraElements": True}]},
     "response": {"status": 201, "jsonBody": {"id": 1, "status": "created"}}},
    {"request": {"method": "GET", "urlPath": "/search",
                 "queryParameters": {"q": {"matches": "[a-z]+"}},
                 "headers": {"Accept": {"equalTo": "application/json"}}},
     "response": {"status": 200, "jsonBody": {"results": []}}},
]


def lua(base, name, text):
    path = base / f"{name}.lua"
    path.write_text(text)
    return path


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__.split("\n\n")[1])
    exe = sys.argv[1]
    base = pathlib.Path(tempfile.mkdtemp(prefix="decoy-training-"))
    root = bench.make_root(base, "training", STUBS + [bench.stub(i) for i in range(SPREAD)])
    post = lua(base, "post", "wrk.method = 'POST'\n"
                             "wrk.headers['Content-Type'] = 'application/json'\n"
                             f"wrk.body = {json.dumps(json.dumps({'customer': 'c-1', 'items': [{'sku': 'a', 'qty': 2}]}))}\n")
    search = lua(base, "search", "wrk.headers['Accept'] = 'application/json'\n")
    server = bench.decoy(root, bench.free_port(), exe=exe)
    server.start()
    try:
        phases = [  # (path, seconds, connections, script)
            ("/static", 8, 32, None),
            ("/", 4, 32, bench.lua_spread(base, SPREAD)),
            ("/templated/abc?q=xyz", 4, 32, None),
            ("/orders", 3, 32, post),
            ("/search?q=shoes", 2, 32, search),
            ("/not-stubbed/anywhere", 2, 8, None),
            ("/__admin/mappings?limit=10", 1, 2, None),
            ("/__admin/requests?limit=10", 1, 2, None),
        ]
        for path, seconds, connections, script in phases:
            bench.wrk(server.port, path=path, connections=connections, duration=seconds, script=script, threads=1)
            print(f"trained: {path} for {seconds} s", flush=True)
    finally:
        server.stop()  # SIGTERM: a graceful stop, which writes the profile
        shutil.rmtree(base, ignore_errors=True)
    if server.proc.returncode != 0:
        sys.exit(f"the instrumented decoy exited with {server.proc.returncode}: its profile may be incomplete")


if __name__ == "__main__":
    main()
