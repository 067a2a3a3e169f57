#!/usr/bin/env python3
"""Two decoy builds side by side: throughput, memory and start-up, interleaved.

    python3 bench/ab.py --a OLD_DECOY --b NEW_DECOY [--rounds 3] [--duration 8] [--json FILE]

For a change that should not move the figures (a refactor) or should improve them
(memory, start-up), both builds are measured in the same run, round by round in
turn (A, B, A, B, ...), on the same generated roots, so the machine's drift hits
both alike; the medians and their ratio (B / A) are printed. Scenarios:

- static: one stub, `wrk -t2 -c64`;
- stubs-10 / stubs-10000: requests spread over 10 or 10,000 stubs (bench.py's mix
  of exact, regex and template URLs), and their ratio (the "10,000 stubs spread
  >= 0.9x of 10" target), with the server's own CPU time per request for each
  (from /proc: steadier than req/s on shared cores) and the same ratio of those;
- rss-10000: peak RSS (VmHWM) after that load, journal on (the default);
- rss-10000-one-file: the same with the same 10,000 stubs in one
  `{"mappings": [...]}` file (the same load, its throughput not reported);
- start-10000: spawn to first answered request with 10,000 one-stub files, and the
  CPU time the server had used by then (less sensitive to a busy machine);
- reload-10000: a mapping file renamed into place, as editors save, to the first
  request answered from it, beside 10,000 one-stub files (bench.py's reload latency,
  20 edits per round; the median of each round, then the median of the rounds).

`--only start,reload` runs some of the three groups (throughput, start, reload).

All load is on 127.0.0.1 and bounded by wrk's duration. Needs wrk.
"""
import argparse
import json
import pathlib
import statistics
import sys
import tempfile

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import bench  # noqa: E402  (the shared helpers: roots, wrk, servers)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--a", required=True, help="the build before the change")
    ap.add_argument("--b", required=True, help="the build after the change")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--duration", type=int, default=8)
    ap.add_argument("--starts", type=int, default=7, help="start-up samples per build")
    ap.add_argument("--json", default=None)
    ap.add_argument("--only", default="throughput,start,reload",
                    help="comma-separated groups to run: throughput, start, reload (default all)")
    args = ap.parse_args()
    groups = set(args.only.split(","))
    unknown = groups - {"throughput", "start", "reload"}
    if unknown:
        sys.exit(f"--only: unknown group(s) {', '.join(sorted(unknown))}")

    base = pathlib.Path(tempfile.mkdtemp(prefix="decoy-ab-"))
    probe = {"request": {"urlPath": "/__probe"}, "response": {"status": 200}}
    static = {"request": {"method": "GET", "url": "/static"},
              "response": {"status": 200, "headers": {"Content-Type": "text/plain"}, "body": "hello"}}
    roots = {"static": bench.make_root(base, "static", [static, probe])}
    for n in (10, 10000):
        roots[n] = bench.make_root(base, f"stubs-{n}", [bench.stub(i) for i in range(n)] + [probe])
    roots["one-file-10000"] = bench.make_root_one_file(base, "one-file-10000", [bench.stub(i) for i in range(10000)] + [probe])
    if "reload" in groups:
        roots["churn-10000"] = bench.make_root(base, "churn-10000", [bench.stub(i) for i in range(10000)] + [probe])
        (roots["churn-10000"] / "mappings" / "churn.json").write_text(bench.churn_stub(0))
    scripts = {n: bench.lua_spread(base, n) for n in (10, 10000)}
    builds = {"A": args.a, "B": args.b}
    res = {k: {"static": [], "stubs-10": [], "stubs-10000": [], "rss-10000": [], "rss-10000-one-file": [], "start-10000": [], "start-10000-cpu": [], "reload-10000": [],
               "cpu-10": [], "cpu-10000": [], "round-ratio": [], "round-cpu-ratio": []} for k in builds}

    def load(label, exe, root, **kw):
        s = bench.decoy(root, bench.free_port(), exe=exe)
        try:
            s.start()
            bench.wrk(s.port, duration=2, **kw)
            cpu0 = bench.cpu_ms(s.proc.pid)
            r = bench.wrk(s.port, duration=args.duration, **kw)
            cpu1 = bench.cpu_ms(s.proc.pid)
            # The server's own CPU time per request (user + system, from /proc):
            # steadier than req/s when the load generator and other tenants share
            # the cores, since it does not count the time decoy waits for a core.
            if cpu0 is not None and cpu1 is not None and r["rps"] > 0:
                r["cpu_us"] = (cpu1 - cpu0) * 1000 / (r["rps"] * args.duration)
            return r, s.rss_mib()
        finally:
            s.stop()

    for rnd in range(args.rounds if "throughput" in groups else 0):
        # A then B, then B then A: neither build always runs on the heels of the other.
        order = list(builds.items()) if rnd % 2 == 0 else list(reversed(builds.items()))
        for k, exe in order:
            r, _ = load("static", exe, roots["static"], path="/static")
            res[k]["static"].append(r["rps"])
            r10, _ = load("stubs-10", exe, roots[10], script=scripts[10])
            res[k]["stubs-10"].append(r10["rps"])
            r, rss = load("stubs-10000", exe, roots[10000], script=scripts[10000])
            res[k]["stubs-10000"].append(r["rps"])
            res[k]["rss-10000"].append(rss)
            res[k]["round-ratio"].append(r["rps"] / r10["rps"])
            _, rss_one = load("one-file-10000", exe, roots["one-file-10000"], script=scripts[10000])
            res[k]["rss-10000-one-file"].append(rss_one)
            cpu = ""
            if "cpu_us" in r10 and "cpu_us" in r:
                res[k]["cpu-10"].append(r10["cpu_us"])
                res[k]["cpu-10000"].append(r["cpu_us"])
                res[k]["round-cpu-ratio"].append(r10["cpu_us"] / r["cpu_us"])
                cpu = f", CPU {r10['cpu_us']:.1f} / {r['cpu_us']:.1f} us a request"
            print(f"round {rnd + 1} {k}: static {res[k]['static'][-1]:.0f}, 10 spread {res[k]['stubs-10'][-1]:.0f}, "
                  f"10,000 spread {res[k]['stubs-10000'][-1]:.0f} req/s (ratio {res[k]['round-ratio'][-1]:.2f}){cpu}, "
                  f"RSS {rss:.1f} MiB, one file {rss_one:.1f} MiB", flush=True)
    for i in range(args.starts if "start" in groups else 0):
        order = list(builds.items()) if i % 2 == 0 else list(reversed(builds.items()))
        for k, exe in order:
            s = bench.decoy(roots[10000], bench.free_port(), exe=exe)
            try:
                s.start()
                res[k]["start-10000"].append(s.first_answer_ms)
                if s.first_answer_cpu_ms is not None:
                    res[k]["start-10000-cpu"].append(s.first_answer_cpu_ms)
            finally:
                s.stop()

    for i in range(args.rounds if "reload" in groups else 0):
        order = list(builds.items()) if i % 2 == 0 else list(reversed(builds.items()))
        for k, exe in order:
            r = bench.reload_latency(roots["churn-10000"], bench.free_port(), exe=exe)
            res[k]["reload-10000"].append(r["median_ms"])
            print(f"reload round {i + 1} {k}: median {r['median_ms']:.0f} ms, max {r['max_ms']:.0f} ms", flush=True)

    med = {k: {m: statistics.median(v) if v else float("nan") for m, v in r.items()} for k, r in res.items()}
    for k in builds:
        med[k]["spread-ratio"] = med[k]["stubs-10000"] / med[k]["stubs-10"] if res[k]["stubs-10"] else float("nan")
        med[k]["spread-cpu-ratio"] = med[k]["cpu-10"] / med[k]["cpu-10000"] if res[k]["cpu-10"] else float("nan")
    print()
    print("| figure | A (before) | B (after) | B / A |")
    print("|---|---:|---:|---:|")
    rows = [("static req/s", "static", "{:,.0f}"), ("10 stubs spread req/s", "stubs-10", "{:,.0f}"),
            ("10,000 stubs spread req/s", "stubs-10000", "{:,.0f}"),
            ("10,000 spread / 10 spread", "spread-ratio", "{:.2f}x"),
            ("the same, each round's own pair, median", "round-ratio", "{:.2f}x"),
            ("server CPU a request, 10 stubs spread (us)", "cpu-10", "{:.2f}"),
            ("server CPU a request, 10,000 stubs spread (us)", "cpu-10000", "{:.2f}"),
            ("CPU a request, 10 spread / 10,000 spread", "spread-cpu-ratio", "{:.2f}x"),
            ("RSS with 10,000 stubs, journal on (MiB)", "rss-10000", "{:.1f}"),
            ("the same, the 10,000 stubs in one file (MiB)", "rss-10000-one-file", "{:.1f}"),
            ("first answer after start, 10,000 stubs (ms)", "start-10000", "{:.0f}"),
            ("CPU time used by then, all threads (ms)", "start-10000-cpu", "{:.0f}"),
            ("reload latency beside 10,000 stubs, median (ms)", "reload-10000", "{:.0f}")]
    for name, key, fmt in rows:
        a, b = med["A"][key], med["B"][key]
        if a != a and b != b:  # not measured in this run (NaN)
            continue
        print(f"| {name} | {fmt.format(a)} | {fmt.format(b)} | {b / a:.2f}x |")
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps({"samples": res, "medians": med}, indent=2))


if __name__ == "__main__":
    main()
