#!/usr/bin/env python3
"""Plugin benchmark: templated responses (decoy's response-template plugin against
WireMock's own templating, and against decoy's static figure and nginx's static 200,
the ceiling of this machine under this load), start-up with 100
unreferenced plugins against none, and the per-call cost of a trivial Rust plugin.

Run through bench/run.sh (or after it has built the release binary, the example
and the test plugin): python3 bench/plugins.py --wiremock-jar JAR --plugins-dir DIR
It writes bench/out/plugins.json; bench/report.py puts it in docs/performance.md.
Rounds are interleaved (A, B, A, B...) and medians compared, because this shared
2-core machine drifts more between minutes than between neighbouring runs.
"""
import argparse
import json
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, str(pathlib.Path(__file__).parent))
from bench import REPO, decoy, free_port, make_root, nginx, warm_up, wiremock, wrk  # noqa: E402

TEMPLATED = {
    "request": {"method": "GET", "urlPathPattern": "/t/[a-z]+"},
    "response": {"status": 200, "headers": {"Content-Type": "text/plain"},
                 "body": "segment {{request.pathSegments.[1]}} q {{request.query.q}}",
                 "transformers": ["response-template"]},
}
STATIC = {"request": {"method": "GET", "url": "/static"},
          "response": {"status": 200, "headers": {"Content-Type": "text/plain"}, "body": "segment abc q xyz"}}
PROBE = {"request": {"urlPath": "/__probe"}, "response": {"status": 200}}


def check_body(port, path, want):
    import urllib.request
    body = urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5).read().decode()
    if body != want:
        raise SystemExit(f"unexpected body on port {port}: {body!r}, want {want!r}")


def median(xs):
    return statistics.median(xs)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--wiremock-jar", required=True)
    ap.add_argument("--plugins-dir", required=True, help="holds trivial.wasm (the test plugin)")
    ap.add_argument("--duration", type=int, default=10)
    ap.add_argument("--out", default=str(REPO / "bench" / "out" / "plugins.json"))
    args = ap.parse_args()
    d = args.duration
    base = pathlib.Path(tempfile.mkdtemp(prefix="decoy-plugin-bench-"))
    root = make_root(base, "templated", [TEMPLATED, STATIC, PROBE])
    cache = base / "cache"
    results = {}

    # Templated vs static (decoy), nginx's static 200 (the most any server answers on
    # this machine under this load), then WireMock: interleaved rounds.
    rounds = {"static/decoy": [], "templated/decoy": []}
    with_nginx = shutil.which("nginx") is not None
    if with_nginx:
        rounds["static/nginx"] = []
    for _ in range(3):
        for label in rounds:
            path = "/t/abc?q=xyz" if label == "templated/decoy" else "/static"
            if label == "static/nginx":
                s = nginx(base, free_port())
            else:
                s = decoy(root, free_port(), "--plugin-cache-dir", str(cache))
            try:
                s.start()
                if label != "static/nginx":
                    check_body(s.port, path, "segment abc q xyz")
                wrk(s.port, path=path, duration=2)
                r = wrk(s.port, path=path, duration=d)
                r["rss_mib"] = s.rss_mib()
                rounds[label].append(r)
                print(f"{label:24s} {r['rps']:10.0f} req/s  p99 {r['p99_ms']:.2f} ms  errors {r['errors']}", flush=True)
            finally:
                s.stop()
    for label, runs in rounds.items():
        runs.sort(key=lambda r: r["rps"])
        results[label] = dict(runs[len(runs) // 2], all_rps=[r["rps"] for r in runs],
                              errors=sum(r["errors"] for r in runs))
    s = wiremock(args.wiremock_jar, root, free_port())
    try:
        s.start()
        check_body(s.port, "/t/abc?q=xyz", "segment abc q xyz")
        warmed = warm_up(s.port, path="/t/abc?q=xyz")
        print(f"{'WireMock warm-up':24s} {', '.join(f'{x:.0f}' for x in warmed)} req/s", flush=True)
        r = wrk(s.port, path="/t/abc?q=xyz", duration=d)
        r["warm_up_rps"] = warmed
        r["rss_mib"] = s.rss_mib()
        results["templated/wiremock"] = r
        print(f"{'templated/wiremock':24s} {r['rps']:10.0f} req/s  p99 {r['p99_ms']:.2f} ms  errors {r['errors']}", flush=True)
        # The same warm WireMock on the static stub: what templating costs it.
        check_body(s.port, "/static", "segment abc q xyz")
        r = wrk(s.port, path="/static", duration=d)
        results["static/wiremock"] = r
        print(f"{'static/wiremock':24s} {r['rps']:10.0f} req/s  p99 {r['p99_ms']:.2f} ms  errors {r['errors']}", flush=True)
    finally:
        s.stop()

    # Start-up: spawn to first answer, with 100 unreferenced plugins in plugins/ and
    # with none; same 10 plain stubs; interleaved, 15 runs each.
    trivial = pathlib.Path(args.plugins_dir) / "trivial.wasm"
    plain = [{"request": {"urlPath": f"/p{i}"}, "response": {"body": str(i)}} for i in range(10)] + [PROBE]
    none_root = make_root(base, "no-plugins", plain)
    many_root = make_root(base, "100-plugins", plain)
    (many_root / "plugins").mkdir()
    for i in range(100):
        shutil.copy(trivial, many_root / "plugins" / f"unused{i}.wasm")
    starts = {"none": [], "100-unreferenced": []}
    for _ in range(15):
        for label, r in (("none", none_root), ("100-unreferenced", many_root)):
            s = decoy(r, free_port())
            try:
                s.start()
                starts[label].append(s.first_answer_ms)
            finally:
                s.stop()
    for label, xs in starts.items():
        results[f"startup/{label}"] = {"median_ms": median(xs), "all_ms": sorted(xs)}
        print(f"start-up, {label:18s} median {median(xs):.1f} ms  {sorted(round(x, 1) for x in xs)}", flush=True)

    # Per call, in-process.
    exe = REPO / "target" / "release" / "examples" / "plugin-calls"
    out = subprocess.run([str(exe), args.plugins_dir], capture_output=True, text=True, check=True).stdout
    results["per-call"] = json.loads(out.strip().splitlines()[-1])
    print("per call:", results["per-call"], flush=True)

    pathlib.Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    pathlib.Path(args.out).write_text(json.dumps(results, indent=2))
    print(f"wrote {args.out}")
    shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
