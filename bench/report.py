"""Writes the tables of docs/performance.md from what the benchmark scripts wrote.

    python3 bench/report.py [--only SECTION,...] [--out-dir bench/out] [--page docs/performance.md]
    python3 bench/report.py --transports-only      # the same as --only mq,grpc,emit
    python3 bench/report.py --record-machine       # bench/run.sh does this first

bench/run.sh runs every script, each writing its figures as JSON into bench/out/,
then this. The page holds hand-written prose around generated blocks, each between

    <!-- generated: NAME (bench/report.py) -->
    ...
    <!-- /generated: NAME -->

and only what is between a pair is replaced: the prose around them is left as it is.
A block whose script did not run (its JSON file is missing) says "not measured in
this run" rather than keeping old figures; with --only, the other blocks are not
touched. Each block names the date of the files it was made from (a file's
"measured" field when it has one, else its modification time).

The JSON files (all in --out-dir):

    machine.json    --record-machine: date, CPU, cores, memory, kernel, commit
    last-run.json   bench.py --json: static, stubs, delay, start-up, journal, reload
    tail.json       tail.py --json: closed-loop and fixed-rate percentiles
    plugins.json    plugins.py: templated, start-up with plugins, per-call costs
    mq.json         mq.py: RabbitMQ (AMQP 0-9-1) beside a bare lapin responder
    nats.json, mqtt.json, mq_amqp1.json: the same on NATS, MQTT, AMQP 1.0
    grpc.json       grpc.py: decoy beside a plain tonic server
    emit.json       emit.py: events published when a stub is hit
    record_mq.json  record_mq.py: `decoy record-mq` beside the back end alone
    scale_out.json  scale_out.py --json: --state and instances behind HAProxy
    dashboard.json  dashboard.py --json: one live dashboard open against none

bench/test_report.py tests the rendering on the samples in bench/testdata/ (the
figures of the runs the page was first written from, in the scripts' formats).
"""
import argparse
import datetime
import json
import os
import pathlib
import platform
import re
import subprocess
import sys

HERE = pathlib.Path(__file__).resolve().parent
NM = "not measured in this run"
DASH = "—"

SECTIONS = ["summary", "static", "tail", "stubs", "startup", "plugins", "mq", "grpc", "emit",
            "scaleout", "lifecycle"]
ALIASES = {"--transports-only": ["mq", "grpc", "emit"], "--plugins-and-mq-only": ["plugins", "mq"]}


# ---------------------------------------------------------------- figures

def fmt(x, digits=0):
    """A number with thousands separators, or NM when it was not measured."""
    if x is None or (isinstance(x, float) and x != x):
        return NM
    return f"{x:,.{digits}f}"


def ms(x, digits=2):
    return NM if x is None else f"{fmt(x, digits)} ms"


def ratio(a, b):
    return None if not a or not b else a / b


def times(r, digits=None):
    """A ratio: two decimals below 10×, fewer above."""
    if r is None:
        return NM
    if digits is None:
        digits = 2 if r < 10 else 1 if r < 100 else 0
    return f"{r:,.{digits}f}×"


class Data:
    """The JSON files of one run, each loaded once (None when missing); `used`
    collects the date of every file a block read, for its "Measured" line."""

    def __init__(self, out_dir):
        self.dir = pathlib.Path(out_dir)
        self.cache = {}
        self.used = set()

    def __call__(self, name, dated=True):
        if name not in self.cache:
            p = self.dir / f"{name}.json"
            self.cache[name] = json.loads(p.read_text()) if p.exists() else None
            if self.cache[name] is not None:
                d = self.cache[name]
                when = d.get("measured") if isinstance(d, dict) else None
                self.cache[name + "@date"] = when or datetime.date.fromtimestamp(p.stat().st_mtime).isoformat()
        if self.cache[name] is not None and dated:
            self.used.add(self.cache[name + "@date"])
        return self.cache[name]

    def take_dates(self):
        dates, self.used = sorted(self.used), set()
        return dates


def when(dates):
    if not dates:
        return "never"
    return dates[0] if len(dates) == 1 else f"{dates[0]} to {dates[-1]}"


def get(d, key, field):
    return ((d or {}).get(key) or {}).get(field)


def table(header, rows):
    align = "|" + "|".join("---" if i == 0 or h.startswith("_") else "---:" for i, h in enumerate(header)) + "|"
    head = "| " + " | ".join(h.lstrip("_") for h in header) + " |"
    return "\n".join([head, align] + ["| " + " | ".join(str(c) for c in r) + " |" for r in rows])


def cpus(data):
    m = data("machine", dated=False)
    return (m or {}).get("cpus") or os.cpu_count()


# ---------------------------------------------------------------- blocks

def render_summary(data):
    r, t, p = data("last-run"), data("tail"), data("plugins")
    n_cpu = cpus(data)
    m = data("machine", dated=False) or {}
    rows = []

    def row(label, decoy, ceiling, ceiling_name, wm, digits=0, unit=""):
        def cell(v):
            return NM if v is None else (fmt(v, digits) + unit)
        if decoy is None:
            rows.append([label, NM] + [DASH] * 4)
            return
        rows.append([label, cell(decoy),
                     DASH if ceiling_name is None else (cell(ceiling) + (f" ({ceiling_name})" if ceiling is not None else "")),
                     DASH if ceiling_name is None else times(ratio(decoy, ceiling)),
                     DASH if wm is DASH else cell(wm), DASH if wm is DASH else times(ratio(decoy, wm))])

    static = get(r, "static/decoy", "rps")
    nginx = get(r, "static/nginx", "rps")
    wm = get(r, "static/wiremock", "rps")
    row("static stub, req/s", static, nginx, "nginx", wm)
    per = lambda x: None if x is None else x / n_cpu
    row(f"the same, per core ({n_cpu} cores, shared with the load generator)", per(static), per(nginx), "nginx", per(wm))
    tm = (t or {}).get("medians", {})
    for c in _tail_conns(t) or [32, 256]:
        d, n, w = tm.get(f"decoy-reuseport/{c}", {}), tm.get(f"nginx/{c}", {}), tm.get(f"wiremock/{c}")
        row(f"p99, {c} connections, closed loop (`wrk --latency`)", d.get("p99"), n.get("p99"), "nginx, 1 worker",
            None if w is None else w.get("p99"), digits=2, unit=" ms")
        rate = n.get("f_rate") or d.get("f_rate")
        label = f"p99, {c} connections, at a fixed {fmt(rate)} req/s (no coordinated omission)" if rate else \
            f"p99, {c} connections, at a fixed rate (no coordinated omission)"
        rows.append([label, NM] + [DASH] * 4 if not d else
                    [label, _fixed_p99(d), _fixed_p99(n) + (" (nginx, 1 worker)" if n else ""),
                     _fixed_ratio(d, n), _fixed_p99(w or {}), _fixed_ratio(d, w)])
    delay = _delay(data)
    row("100 ms delay, 1,000 connections, req/s", get(r, "delay-100ms/decoy", "rps"), 10000 if r else None,
        "the delay's ceiling", get(r, "delay-100ms/wiremock", "rps"))
    row("the same, p99 closed loop", get(r, "delay-100ms/decoy", "p99_ms"), 100 if r else None, "the delay itself",
        get(r, "delay-100ms/wiremock", "p99_ms"), digits=1, unit=" ms")
    rows.append(["the same, p99 at a fixed rate", NM] + [DASH] * 4 if not delay.get("decoy") else
                ["the same, p99 at a fixed rate", _fixed_p99(delay["decoy"]), DASH, DASH,
                 _fixed_p99(delay.get("wiremock") or {}), _fixed_ratio(delay["decoy"], delay.get("wiremock"))])
    row("10,000 stubs, requests spread, req/s", get(r, "stubs-10000/decoy", "rps"), None, None,
        get(r, "stubs-10000/wiremock", "rps"))
    row("peak RSS with 10,000 stubs, MiB", get(r, "stubs-10000/decoy", "rss_mib"), None, None,
        get(r, "stubs-10000/wiremock", "rss_mib"), digits=1)
    row("memory per stub, KiB", _per_stub(r, "decoy"), None, None, _per_stub(r, "wiremock"), digits=1)
    row("first answer after start, 10,000 stubs, ms", get(r, "startup-10000/decoy", "first_answer_ms"), None, None,
        get(r, "startup-10000/wiremock", "first_answer_ms"))
    row("templated response, req/s", get(p, "templated/decoy", "rps"), get(p, "static/nginx", "rps"),
        "nginx, static", get(p, "templated/wiremock", "rps"))
    pc = (p or {}).get("per-call") or {}
    rows.append(["plugin call, warm instance / fresh instance per call",
                 f"{fmt(pc.get('trivial_warm_us'), 1)} / {fmt(pc.get('trivial_fresh_us'), 1)} µs" if pc else NM,
                 DASH, DASH, DASH, DASH])
    mq = _mq_rows(data, summary=True)
    for transport in ("RabbitMQ (AMQP 0-9-1)", "NATS", "MQTT", "AMQP 1.0"):
        found = [x for x in mq if x[2].startswith(transport + ":")]
        if found:
            d, b, label, bare = found[0]
            row(f"{label}, msg/s", d["tps"], b["tps"], bare, DASH)
        else:
            row(f"{transport}, msg/s", None, None, "bare echo", DASH)
    g = (data("grpc") or {}).get("results", {})
    row("gRPC static unary, calls/s", (g.get("decoy static unary") or {}).get("calls_per_s"),
        (g.get("tonic unary") or {}).get("calls_per_s"), "plain tonic server", DASH)
    e = data("emit")
    row("HTTP stub publishing an event to RabbitMQ: events/s", get(e, "emit", "events_per_s"), None, None, DASH)
    rq = data("record_mq")
    row("MQ recording (`decoy record-mq`), msg/s", get(rq, "through decoy record-mq", "tps"),
        get(rq, "back end alone", "tps"), "back end alone", DASH)
    s = data("scale_out")
    row("scenario stub through Redis (`--state`), req/s", get(s, "scenario-b", "rps"), get(s, "scenario-a", "rps"),
        "in process", DASH)
    dates = data.take_dates()
    head = _machine_line(m, dates)
    return head + "\n\n" + table(["figure", "decoy", "ceiling", "decoy / ceiling", "WireMock 3.13.2",
                                  "decoy / WireMock"], rows)


def _machine_line(m, dates):
    parts = [f"Measured on {when(dates)}"]
    desc = ", ".join(x for x in (m.get("cpu"), f"{m['cpus']} cores" if m.get("cpus") else None,
                                 f"{m['memory_gib']:.0f} GiB" if m.get("memory_gib") else None,
                                 f"Linux {m['kernel']}" if m.get("kernel") else None) if x)
    line = parts[0] + (f" ({desc})" if desc else "")
    if m.get("commit"):
        line += f", decoy at commit `{m['commit']}`"
    line += "."
    if m.get("load_average") is not None:
        line += f" Load average when the run began: {m['load_average']:.1f}."
    if m.get("note"):
        line += " " + m["note"]
    return line


def _tail_conns(t):
    if not t:
        return []
    return sorted({int(k.split("/", 1)[1]) for k in t.get("medians", {}) if k.split("/", 1)[1].isdigit()})


def _fell_behind(f):
    return f.get("f_achieved") is not None and f.get("f_rate") and f["f_achieved"] < 0.95 * f["f_rate"]


def _fixed_ratio(a, b):
    """decoy's fixed-rate p99 over another's; a dash when either fell behind the rate."""
    if not a or not b:
        return NM
    if _fell_behind(a) or _fell_behind(b):
        return DASH
    return times(ratio(a.get("f_p99"), b.get("f_p99")))


def _fixed_p99(f):
    if not f:
        return NM
    if _fell_behind(f):
        return f"fell behind the rate ({fmt(f['f_achieved'])}/s answered)"
    return ms(f.get("f_p99"))


def _variant_name(server):
    """tail.py's name for a decoy variant with its thread count (`decoy-reuseport-2t`)."""
    m = re.fullmatch(r"decoy-(\w+)-(\d+)t", server)
    if not m:
        return server
    return f"decoy, `{m.group(1)}`, `--container-threads {m.group(2)}`"


def _delay(data):
    """The 100 ms-delay, 1,000-connection case of tail.py, by server: any median whose
    key is SERVER/CASE with "delay" in CASE (decoy's default layout for decoy)."""
    out = {}
    for key, v in ((data("tail") or {}).get("medians") or {}).items():
        server, _, case = key.partition("/")
        if "delay" in case:
            name = "decoy" if server in ("decoy", "decoy-reuseport") else server
            out.setdefault(name, v)
    return out


def _per_stub(r, server):
    big, small = get(r, f"stubs-10000/{server}", "rss_mib"), get(r, f"stubs-10/{server}", "rss_mib")
    return None if big is None or small is None else (big - small) * 1024 / 9990


def render_static(data):
    r = data("last-run")
    if not r:
        return f"{NM.capitalize()} (`bench/bench.py`)."
    n_cpu = cpus(data)
    rows = []
    for key, label in [("static/nginx", "nginx, static 200 (the ceiling)"), ("static/decoy", "decoy, one static stub"),
                       ("static/wiremock", "WireMock 3.13.2, one static stub")]:
        v = r.get(key) or {}
        rows.append([label, fmt(v.get("rps")), fmt(None if v.get("rps") is None else v["rps"] / n_cpu),
                     fmt(v.get("p99_ms"), 2), DASH if key.endswith("nginx") else fmt(v.get("rss_mib"), 1),
                     times(ratio(v.get("rps"), get(r, "static/nginx", "rps")))])
    errors = {k: v["errors"] for k, v in r.items() if isinstance(v, dict) and v.get("errors")}
    return (f"Measured {when(data.take_dates())}.\n\n"
            + table(["server", "req/s", "req/s per core", "p99 ms", "peak RSS MiB", "× nginx"], rows)
            + "\n\nErrors (non-2xx answers or socket errors) reported by wrk: "
            + (", ".join(f"{k} {v}" for k, v in errors.items()) if errors else "none") + ".")


def render_tail(data):
    t, r = data("tail"), data("last-run")
    parts = []
    if t:
        names = {"nginx": "nginx, 1 worker (the ceiling)",
                 "hyper-alone": "hyper alone, 1 thread (decoy's HTTP library, nothing else)", "decoy-reuseport": "decoy, `reuseport` (the default)",
                 "decoy-dealt": "decoy, `dealt`", "decoy-shared": "decoy, `shared`", "wiremock": "WireMock 3.13.2"}
        med = t.get("medians", {})
        servers = []
        for k in med:
            s = k.split("/", 1)[0]
            if s not in servers and k.split("/", 1)[1].isdigit():
                servers.append(s)
        rows = []
        for c in _tail_conns(t):
            n = med.get(f"nginx/{c}", {})
            for s in servers:
                v = med.get(f"{s}/{c}")
                if v is None:
                    continue
                rows.append([f"{c:,}", names.get(s) or _variant_name(s), fmt(v.get("rps")), times(ratio(v.get("rps"), n.get("rps"))),
                             ms(v.get("p99")), times(ratio(v.get("p99"), n.get("p99"))),
                             fmt(v.get("f_rate")), _fixed_p99(v), _fixed_ratio(v, n)])
        parts.append(table(["connections", "_server", "req/s, closed loop", "× nginx", "p99, closed loop", "× nginx",
                            "fixed rate, req/s", "p99 at that rate", "× nginx"], rows))
    else:
        parts.append(f"{NM.capitalize()} (`bench/tail.py`).")
    delay = _delay(data)
    rows = []
    for s, label in (("decoy", "decoy"), ("wiremock", "WireMock 3.13.2")):
        # Closed-loop figures from bench.py's run, else from tail.py's own wrk pass.
        t = delay.get(s) or {}
        rps = get(r, f"delay-100ms/{s}", "rps") or t.get("rps")
        p99 = get(r, f"delay-100ms/{s}", "p99_ms") or t.get("p99")
        rows.append([label, fmt(rps), ms(p99, 1), fmt(get(r, f"delay-100ms/{s}", "rss_mib"), 1),
                     fmt(t.get("f_rate")), _fixed_p99(t)])
    parts.append("Every answer delayed 100 ms (`fixedDelayMilliseconds`), 1,000 connections; the most any "
                 "server can answer is 1,000 / 0.1 s = 10,000 req/s:\n\n"
                 + table(["server", "req/s, closed loop", "p99, closed loop", "peak RSS MiB", "fixed rate, req/s",
                          "p99 at that rate"], rows))
    return f"Measured {when(data.take_dates())}.\n\n" + "\n\n".join(parts)


def render_stubs(data):
    r = data("last-run")
    if not r:
        return f"{NM.capitalize()} (`bench/bench.py`)."
    base = get(r, "stubs-10/decoy", "rps")
    rows = []
    for key, label in [("stubs-10", "10, requests spread"), ("stubs-1000", "1,000, requests spread"),
                       ("stubs-10000", "10,000, requests spread"),
                       ("stubs-10000-hot10", "10,000, requests to 10 of them")]:
        d, w = r.get(f"{key}/decoy") or {}, r.get(f"{key}/wiremock")
        rows.append([label, fmt(d.get("rps")), times(ratio(d.get("rps"), base)), fmt(d.get("p99_ms"), 2),
                     fmt(d.get("rss_mib"), 1)] +
                    ([fmt(w.get("rps")), fmt(w.get("p99_ms"), 2), fmt(w.get("rss_mib"), 1),
                      times(ratio(d.get("rps"), w.get("rps")), 1)] if w else [DASH] * 4))
    per = [f"decoy {fmt(_per_stub(r, 'decoy'), 1)} KiB", f"WireMock {fmt(_per_stub(r, 'wiremock'), 1)} KiB"]
    return (f"Measured {when(data.take_dates())}.\n\n"
            + table(["stubs", "decoy req/s", "× decoy's 10 stubs", "decoy p99 ms", "decoy RSS MiB", "WireMock req/s",
                     "WireMock p99 ms", "WireMock RSS MiB", "decoy / WireMock"], rows)
            + "\n\nMemory per stub (peak RSS with 10,000 stubs less that with 10, over the 9,990 more): "
            + ", ".join(per) + ".")


def render_startup(data):
    r, p = data("last-run"), data("plugins")
    rl, rl10k = (r or {}).get("reload-latency/churn"), (r or {}).get("reload-latency/churn-10000")
    sd, sw = (r or {}).get("startup-10000/decoy") or {}, (r or {}).get("startup-10000/wiremock") or {}

    def n_of(x):
        n = (x or {}).get("runs") or len((x or {}).get("all_ms") or [])
        return f" (median of {n})" if n else ""

    def reload(x):
        return NM if not x else f"{fmt(x.get('median_ms'))} / {fmt(x.get('max_ms'))} ms"

    rows = [
        ["first answer after start, 10,000 one-stub files", ms(sd.get("first_answer_ms"), 0) + n_of(sd),
         ms(sw.get("first_answer_ms"), 0) + n_of(sw)],
        ["first answer after start, 10 stubs", ms(get(p, "startup/none", "median_ms"), 1)
         + n_of((p or {}).get("startup/none")), DASH],
        ["the same with 100 unreferenced plugins in `plugins/`", ms(get(p, "startup/100-unreferenced", "median_ms"), 1),
         DASH],
        ["a saved mapping file to its first answer, 2 stubs (median / max)", reload(rl), "does not watch its files"],
        ["the same beside 10,000 stubs (median / max)", reload(rl10k), "does not watch its files"],
    ]
    return f"Measured {when(data.take_dates())}.\n\n" + table(["", "decoy", "WireMock 3.13.2"], rows)


def render_plugins(data):
    p = data("plugins")
    if not p:
        return f"{NM.capitalize()} (`bench/plugins.py`)."
    g = lambda k, f: get(p, k, f)
    static, templated, wm = g("static/decoy", "rps"), g("templated/decoy", "rps"), g("templated/wiremock", "rps")
    rounds = lambda k: ", ".join(fmt(x) for x in (g(k, "all_rps") or []))
    rows = [
        ["decoy, static stub", fmt(static), fmt(g("static/decoy", "p99_ms"), 2), fmt(g("static/decoy", "rss_mib"), 1)],
        ["decoy, templated (`response-template` plugin)", fmt(templated), fmt(g("templated/decoy", "p99_ms"), 2),
         fmt(g("templated/decoy", "rss_mib"), 1)],
        ["WireMock 3.13.2, templated", fmt(wm), fmt(g("templated/wiremock", "p99_ms"), 2),
         fmt(g("templated/wiremock", "rss_mib"), 1)],
        ["WireMock 3.13.2, static stub (the same warm JVM)", fmt(g("static/wiremock", "rps")),
         fmt(g("static/wiremock", "p99_ms"), 2), DASH],
        ["nginx, static 200 (the ceiling)", fmt(g("static/nginx", "rps")), fmt(g("static/nginx", "p99_ms"), 2), DASH],
    ]
    pc = p.get("per-call") or {}
    calls = [
        ["a trivial Rust transformer, warm instance (`isolation: pooled`, the default)", fmt(pc.get("trivial_warm_us"), 1)],
        ["the same, a fresh instance per call (`isolation: per-request`)", fmt(pc.get("trivial_fresh_us"), 1)],
        ["`response-template` rendering the template above, warm", fmt(pc.get("template_warm_us"), 1)],
        ["`response-template` rendering two `xPath` values from a 490-byte XML request, warm",
         fmt(pc.get("xpath_template_warm_us"), 1)],
    ]
    warm = g("templated/wiremock", "warm_up_rps")
    text = (f"Measured {when(data.take_dates())}. decoy's rows are medians of three interleaved rounds "
            f"(static: {rounds('static/decoy')}; templated: {rounds('templated/decoy')} req/s)")
    text += (f"; WireMock was loaded in 8 s rounds until two in a row agreed within 5% "
             f"({', '.join(fmt(x) for x in warm)} req/s) before its measured round." if warm else ".")
    text += (f" Templated against static: decoy {times(ratio(templated, static))}, WireMock "
             f"{times(ratio(wm, g('static/wiremock', 'rps')))}; decoy's templated figure is "
             f"{times(ratio(templated, wm), 1)} WireMock's.")
    return (text + "\n\n" + table(["scenario", "req/s", "p99 ms", "peak RSS MiB"], rows)
            + "\n\nPer call, in process (`host/examples/plugin-calls.rs`, median of 5 rounds):\n\n"
            + table(["call", "µs"], calls))


def _mq_rows(data, summary=False):
    """(decoy, bare, label, bare responder) per MQ scenario: RabbitMQ's from mq.json,
    then NATS, MQTT and AMQP 1.0; for the summary, one scenario a transport."""
    rows = []
    for row in (data("mq") or {}).get("rows", []):
        if summary and not row["scenario"].startswith("1 queue"):
            continue
        rows.append((row["decoy"], row["bare"], f"RabbitMQ (AMQP 0-9-1): {row['scenario']}", "bare lapin responder"))
    for name, transport, lib, key in (("nats", "NATS", "async-nats", "rows"), ("mqtt", "MQTT", "rumqttc", "results"),
                                      ("mq_amqp1", "AMQP 1.0", "fe2o3-amqp", "rows")):
        for i, row in enumerate((data(name) or {}).get(key, [])):
            if summary and i > 0:
                continue
            d, b = row["decoy"], row.get("bare") or row.get("echo")
            rows.append((dict(d, tps=d.get("tps", d.get("msgs_per_s"))), dict(b, tps=b.get("tps", b.get("msgs_per_s"))),
                         f"{transport}: {row['scenario']}", f"bare {lib} echo"))
    return rows


def render_mq(data):
    scen = _mq_rows(data)
    if not scen:
        return f"{NM.capitalize()} (`bench/mq.py`, `nats.py`, `mqtt.py` and `mq_amqp1.py` need their brokers)."
    rows, wrong = [], 0
    for d, b, label, bare in scen:
        wrong += (d.get("wrong") or 0) + (b.get("wrong") or 0) + (d.get("mismatched") or 0) + (b.get("mismatched") or 0)
        rows.append([label, fmt(d["tps"]), fmt(d.get("p99_ms"), 1), fmt(b["tps"]), fmt(b.get("p99_ms"), 1), bare,
                     times(ratio(d["tps"], b["tps"]))])
    mq = data("mq")
    extra = ""
    if mq:
        extra = "\n\nOn RabbitMQ, decoy's own processing time (request read to reply confirmed, delay excluded; " \
                "the bound of its histogram's bucket) and peak RSS: " + "; ".join(
                    f"{row['scenario']}: p99 ≤ {fmt(row['decoy'].get('processing_p99_ms'), 0)} ms, "
                    f"{fmt(row['decoy'].get('rss_mib'), 1)} MiB (the bare responder {fmt(row['bare'].get('rss_mib'), 1)} MiB)"
                    for row in mq["rows"]) + "."
    return (f"Measured {when(data.take_dates())}.\n\n"
            + table(["transport and scenario", "decoy msg/s", "decoy p99 ms", "bare msg/s", "bare p99 ms",
                     "_bare responder", "decoy / bare"], rows)
            + f"\n\nWrong or unanswered replies: {wrong}." + extra)


def render_grpc(data):
    g = data("grpc")
    if not g:
        return f"{NM.capitalize()} (`bench/grpc.py`)."
    r = g["results"]
    rows = [[name, fmt(v["calls_per_s"]), fmt(v["messages_per_s"]), fmt(v["p50_ms"], 2), fmt(v["p99_ms"], 2)]
            for name, v in r.items()]
    t, d, many = r.get("tonic unary"), r.get("decoy static unary"), r.get("decoy static unary, 1,000 methods")
    line = ""
    if t and d:
        line = (f"\n\ndecoy's static unary stub: {times(ratio(d['calls_per_s'], t['calls_per_s']))} tonic's calls/s, "
                f"p99 {times(ratio(d['p99_ms'], t['p99_ms']))} tonic's")
        if many:
            line += f"; among 1,000 methods {times(ratio(many['calls_per_s'], d['calls_per_s']))} its one-method figure"
        line += "."
    return (f"Measured {when(data.take_dates())} ({g['profile']} build, {g['seconds']} s per scenario, "
            f"{g['concurrency']} calls in flight over {g['connections']} HTTP/2 connections).\n\n"
            + table(["scenario", "calls/s", "messages/s", "p50 ms", "p99 ms"], rows) + line)


def render_emit(data):
    e, rq = data("emit"), data("record_mq")
    parts = []
    if e:
        em = e["emit"]
        parts.append(
            f"`bench/emit.py` ({e['client']}, {e['connections']} connections, {e['seconds']} s each): a plain stub, "
            f"then a stub whose `message` listener publishes one {'templated' if e['templated'] else 'fixed'} event "
            f"to RabbitMQ on each hit.\n\n"
            + table(["", "HTTP req/s", "events published and confirmed /s", "events dropped past the limit", "failed"], [
                ["plain stub", fmt(get(e, "plain", "rps")), DASH, DASH, DASH],
                ["stub publishing an event", fmt(em.get("rps")), fmt(em.get("events_per_s")), fmt(em.get("dropped")),
                 fmt(em.get("failed"))]])
            + f"\n\nEvents found on the queue afterwards: {fmt(em.get('on_queue'))}.")
    else:
        parts.append(f"Events on HTTP hits: {NM} (`bench/emit.py` needs RabbitMQ).")
    if rq:
        a, t = rq["back end alone"], rq["through decoy record-mq"]
        parts.append(
            f"`bench/record_mq.py` ({rq['profile']} build, RabbitMQ, {rq['queues']} queue{'s' if rq['queues'] != 1 else ''}, "
            f"{rq['window']} requests "
            f"in flight): a bare lapin back end driven directly, then through `decoy record-mq`.\n\n"
            + table(["", "msg/s", "p50 ms", "p99 ms"], [
                ["back end alone", fmt(a["tps"]), fmt(a.get("p50_ms"), 2), fmt(a.get("p99_ms"), 2)],
                ["through `decoy record-mq`", fmt(t["tps"]), fmt(t.get("p50_ms"), 2), fmt(t.get("p99_ms"), 2)]])
            + f"\n\nThrough the recorder: {times(ratio(t['tps'], a['tps']))} the back end's rate.")
    else:
        parts.append(f"MQ recording: {NM} (`bench/record_mq.py` needs RabbitMQ).")
    return f"Measured {when(data.take_dates())}.\n\n" + "\n\n".join(parts)


def render_scaleout(data):
    s = data("scale_out")
    if not s:
        return f"{NM.capitalize()} (`bench/scale_out.py` needs redis-server and haproxy)."
    rows = []
    for a, b, label in [("static-a", "static-b", "static stub, one instance: without `--state` (A), with it (B)"),
                        ("scenario-a", "scenario-b", "scenario stub moving on every request: in process (A), through Redis (B)"),
                        ("lb1-static", "lb3-static", "static stub behind HAProxy: one instance (A), three (B)"),
                        ("lb1-scenario", "lb3-scenario", "scenario stub behind HAProxy: one instance (A), three (B)")]:
        x, y = s.get(a) or {}, s.get(b) or {}
        rows.append([label, fmt(x.get("rps")), fmt(y.get("rps")), times(ratio(y.get("rps"), x.get("rps"))),
                     f"{fmt(x.get('p99_ms'), 1)} → {fmt(y.get('p99_ms'), 1)} ms"])
    redis = s.get("redis") or {}
    per = [f"{fmt(v['usec_per_call'], 1)} µs a call over {fmt(v['calls'])} calls ({k})" for k, v in redis.items()]
    names = {"static-a": "static, no --state", "static-b": "static, --state", "scenario-a": "scenario in process",
             "scenario-b": "scenario through Redis", "lb1-static": "static, one instance behind HAProxy",
             "lb3-static": "static, three behind HAProxy", "lb1-scenario": "scenario, one instance behind HAProxy",
             "lb3-scenario": "scenario, three behind HAProxy"}
    errors = {names.get(k, k): v["errors"] for k, v in s.items() if isinstance(v, dict) and v.get("errors")}
    return (f"Measured {when(data.take_dates())} (`wrk -t2 -c32`, {s.get('duration_s')} s a round, "
            f"medians of {s.get('rounds')} rounds).\n\n"
            + table(["scenario", "A req/s", "B req/s", "B / A", "p99 A → B"], rows)
            + "\n\nRedis's own time per scenario request (its Lua script, from `INFO commandstats`): "
            + ("; ".join(per) if per else NM) + "."
            + "\n\nErrors (non-2xx answers or socket errors) reported by wrk: "
            + (", ".join(f"{k} {v}" for k, v in errors.items()) if errors else "none") + ".")


def render_lifecycle(data):
    r, dash = data("last-run"), data("dashboard")
    g = lambda k, f: get(r, k, f)
    on, off = g("static/decoy/ab-median", "rps"), g("static/decoy-nojournal/ab-median", "rps")
    still, rewriting = g("churn-still/decoy", "rps"), g("churn-rewriting/decoy", "rps")
    rows = [
        ["one static stub, journal on (the default)", fmt(on), fmt(g("static/decoy/ab-median", "p99_ms"), 2),
         fmt(g("static/decoy/ab-median", "rss_mib"), 1)],
        ["the same, `--no-request-journal`", fmt(off), fmt(g("static/decoy-nojournal/ab-median", "p99_ms"), 2),
         fmt(g("static/decoy-nojournal/ab-median", "rss_mib"), 1)],
        ["a static and a reloading stub, every answer checked, no rewrites", fmt(still),
         fmt(g("churn-still/decoy", "p99_ms"), 2), fmt(g("churn-still/decoy", "rss_mib"), 1)],
        ["the same while its file is rewritten 10 times a second", fmt(rewriting),
         fmt(g("churn-rewriting/decoy", "p99_ms"), 2), fmt(g("churn-rewriting/decoy", "rss_mib"), 1)],
    ]
    if dash:
        rows += [["one static stub, no dashboard open", fmt(dash.get("none_rps")), DASH, DASH],
                 ["the same with one live dashboard open", fmt(dash.get("open_rps")), DASH, DASH]]
    lines = [f"Journal on against off: {times(ratio(on, off))} the throughput (medians of three rounds run in turn)."]
    lines.append(f"While a file is rewritten 10 times a second: {times(ratio(rewriting, still))} the throughput, "
                 f"{fmt(g('churn-rewriting/decoy', 'errors'))} failed or wrong answers, "
                 f"{fmt(g('churn-rewriting/decoy', 'swaps'))} reloads.")
    if dash:
        lines.append(f"One dashboard open against none: {times(ratio(dash.get('open_rps'), dash.get('none_rps')))} "
                     f"(median of {dash.get('rounds')} rounds of {dash.get('seconds')} s each, the two alternating; "
                     f"median of each round's own ratio {times(dash.get('median_round_ratio'))}).")
    else:
        lines.append(f"One dashboard open against none: {NM} (`bench/dashboard.py`).")
    return (f"Measured {when(data.take_dates())}.\n\n" + table(["scenario", "req/s", "p99 ms", "peak RSS MiB"], rows)
            + "\n\n" + " ".join(lines))


RENDER = {name: globals()[f"render_{name}"] for name in SECTIONS}


# ---------------------------------------------------------------- the page

def begin(name):
    return f"<!-- generated: {name} (bench/report.py) -->"


def end(name):
    return f"<!-- /generated: {name} -->"


def fill(page, out_dir, only=None):
    """The page with each chosen block between its markers rendered afresh."""
    data = Data(out_dir)
    missing = []
    for name in only or SECTIONS:
        b, e = begin(name), end(name)
        if b not in page or e not in page:
            missing.append(name)
            continue
        head, rest = page.split(b, 1)
        _, tail = rest.split(e, 1)
        page = head + b + "\n" + RENDER[name](data).rstrip() + "\n" + e + tail
        data.take_dates()
    if missing:
        raise SystemExit(f"the page has no markers for: {', '.join(missing)} (add `{begin(missing[0])}` and "
                         f"`{end(missing[0])}` where the block goes)")
    return page


def record_machine(path):
    """What the page's first line says about the machine, taken when the run begins."""
    info = {"date": datetime.datetime.now(datetime.timezone.utc).date().isoformat(), "cpus": os.cpu_count(),
            "kernel": platform.release(), "load_average": os.getloadavg()[0]}
    try:
        cpuinfo = pathlib.Path("/proc/cpuinfo").read_text()
        m = re.search(r"^model name\s*:\s*(.+)$", cpuinfo, re.M)
        info["cpu"] = m.group(1).strip() if m else platform.machine()
        mem = re.search(r"^MemTotal:\s+(\d+) kB", pathlib.Path("/proc/meminfo").read_text(), re.M)
        info["memory_gib"] = int(mem.group(1)) / 1024 / 1024 if mem else None
    except OSError:
        info["cpu"] = platform.machine()
    try:
        info["commit"] = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=HERE, capture_output=True,
                                        text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        pass
    info["measured"] = info["date"]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(info, indent=2) + "\n")
    return info


def main(argv):
    ap = argparse.ArgumentParser(description="Writes the tables of docs/performance.md from bench/out/*.json.")
    ap.add_argument("--only", default=None, help=f"comma-separated blocks, of: {', '.join(SECTIONS)}")
    ap.add_argument("--out-dir", default=str(HERE / "out"))
    ap.add_argument("--page", default=str(HERE.parent / "docs" / "performance.md"))
    ap.add_argument("--record-machine", action="store_true", help="write OUT_DIR/machine.json and stop")
    ap.add_argument("--stdout", action="store_true", help="print the page instead of writing it")
    for alias, names in ALIASES.items():
        ap.add_argument(alias, action="store_true", help=f"the same as --only {','.join(names)}")
    args = ap.parse_args(argv)
    if args.record_machine:
        print(json.dumps(record_machine(pathlib.Path(args.out_dir) / "machine.json")))
        return
    only = args.only.split(",") if args.only else None
    for alias, names in ALIASES.items():
        if getattr(args, alias[2:].replace("-", "_")):
            only = (only or []) + names
    unknown = [n for n in only or [] if n not in SECTIONS]
    if unknown:
        raise SystemExit(f"no such block: {', '.join(unknown)} (blocks: {', '.join(SECTIONS)})")
    page_path = pathlib.Path(args.page)
    page = fill(page_path.read_text(), args.out_dir, only)
    if args.stdout:
        sys.stdout.write(page)
    else:
        page_path.write_text(page)
        print(f"wrote {', '.join(only or SECTIONS)} in {page_path}")


if __name__ == "__main__":
    main(sys.argv[1:])
