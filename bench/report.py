"""Renders docs/performance.md from one benchmark run (see bench.py)."""
import datetime
import pathlib
import platform


def fmt(x, digits=0):
    return "n/a" if x is None else f"{x:,.{digits}f}"


def ratio(a, b):
    return None if not a or not b else a / b


def render(r, duration):
    g = lambda k, f: (r.get(k) or {}).get(f)
    rows = []
    for key, title in [("static", "one static stub"), ("stubs-10", "10 stubs, requests spread"),
                       ("stubs-1000", "1,000 stubs, requests spread"), ("stubs-10000", "10,000 stubs, requests spread"),
                       ("stubs-10000-hot10", "10,000 stubs, requests to 10 of them"),
                       ("delay-100ms", "100 ms fixed delay, 1,000 connections")]:
        d, w, n = f"{key}/decoy", f"{key}/wiremock", f"{key}/nginx"
        rows.append("| {} | {} | {} | {} | {} | {} | {} | {} | {} |".format(
            title,
            fmt(g(d, "rps")), fmt(g(d, "p99_ms"), 2), fmt(g(d, "rss_mib"), 1),
            fmt(g(w, "rps")), fmt(g(w, "p99_ms"), 2), fmt(g(w, "rss_mib"), 1),
            fmt(ratio(g(d, "rps"), g(w, "rps")), 1) + "×",
            (fmt(g(n, "rps")) if g(n, "rps") else "")))

    def target(label, value, goal, ok):
        mark = "met" if ok else "**missed**"
        return f"| {label} | {value} | {goal} | {mark} |"

    static_d, static_n, static_w = g("static/decoy", "rps"), g("static/nginx", "rps"), g("static/wiremock", "rps")
    s10, s10k = g("stubs-10/decoy", "rps"), g("stubs-10000/decoy", "rps")
    delay_rps, delay_p99 = g("delay-100ms/decoy", "rps"), g("delay-100ms/decoy", "p99_ms")
    rss10k = g("stubs-10000/decoy", "rss_mib")
    start10k = g("startup-10000/decoy", "first_answer_ms")
    targets = [
        target("static vs nginx", fmt(ratio(static_d, static_n), 2) + "×", "≥ 0.8×", (ratio(static_d, static_n) or 0) >= 0.8),
        target("static vs WireMock", fmt(ratio(static_d, static_w), 1) + "×", "≥ 5×", (ratio(static_d, static_w) or 0) >= 5),
        target("10,000 stubs vs decoy's 10 stubs", fmt(ratio(s10k, s10), 2) + "×", "≥ 0.9×", (ratio(s10k, s10) or 0) >= 0.9),
        target("10,000 stubs (10 hit) vs decoy's 10 stubs", fmt(ratio(g("stubs-10000-hot10/decoy", "rps"), s10), 2) + "×", "(selection cost alone)",
               (ratio(g("stubs-10000-hot10/decoy", "rps"), s10) or 0) >= 0.9),
        target("100 ms delay, 1,000 connections", f"{fmt(delay_rps)} req/s, p99 {fmt(delay_p99, 1)} ms", "≥ 9,000 req/s, p99 ≤ 120 ms",
               (delay_rps or 0) >= 9000 and (delay_p99 or 1e9) <= 120),
        target("RSS with 10,000 stubs", f"{fmt(rss10k, 1)} MiB", "≤ 64 MiB", (rss10k or 1e9) <= 64),
        target("first answer after start, 10,000 stubs", f"{fmt(start10k)} ms", "≤ 100 ms", (start10k or 1e9) <= 100),
    ]
    journal = g("static/decoy/ab-median", "rps")
    nojournal, baseline = g("static/decoy-nojournal/ab-median", "rps"), g("static/decoy-baseline/ab-median", "rps")
    still, rewriting = g("churn-still/decoy", "rps"), g("churn-rewriting/decoy", "rps")
    rl, rl10k = r.get("reload-latency/churn") or {}, r.get("reload-latency/churn-10000") or {}
    lifecycle_targets = [
        target("journal on vs off (static stub)", fmt(ratio(journal, nojournal), 2) + "×", "≥ 0.9× (cost ≤ 10%)",
               (ratio(journal, nojournal) or 0) >= 0.9),
        target("throughput while a file is rewritten 10×/s", fmt(ratio(rewriting, still), 2) + "×", "≥ 0.9×",
               (ratio(rewriting, still) or 0) >= 0.9),
        target("failed or wrong answers while rewriting", fmt(g("churn-rewriting/decoy", "errors")), "0",
               g("churn-rewriting/decoy", "errors") == 0),
        target("reload latency, 2 stubs (median / max)", f"{fmt(rl.get('median_ms'))} / {fmt(rl.get('max_ms'))} ms", "≤ 250 ms",
               (rl.get("max_ms") or 1e9) <= 250),
        target("reload latency, 10,000 stubs (median / max)", f"{fmt(rl10k.get('median_ms'))} / {fmt(rl10k.get('max_ms'))} ms", "≤ 250 ms",
               (rl10k.get("max_ms") or 1e9) <= 250),
    ]
    lifecycle_rows = [
        f"| one static stub, journal on (the default) | {fmt(journal)} | {fmt(g('static/decoy/ab-median', 'p99_ms'), 2)} | {fmt(g('static/decoy/ab-median', 'rss_mib'), 1)} |",
        f"| one static stub, `--no-request-journal` | {fmt(nojournal)} | {fmt(g('static/decoy-nojournal/ab-median', 'p99_ms'), 2)} | {fmt(g('static/decoy-nojournal/ab-median', 'rss_mib'), 1)} |",
    ]
    if baseline:
        lifecycle_rows.append(
            f"| one static stub, build without journal or metrics | {fmt(baseline)} | {fmt(g('static/decoy-baseline/ab-median', 'p99_ms'), 2)} | {fmt(g('static/decoy-baseline/ab-median', 'rss_mib'), 1)} |")
    lifecycle_rows += [
        f"| static + churning stub, no rewrites (every answer checked; median of 2) | {fmt(still)} | {fmt(g('churn-still/decoy', 'p99_ms'), 2)} | {fmt(g('churn-still/decoy', 'rss_mib'), 1)} |",
        f"| same, file rewritten 10×/s ({g('churn-rewriting/decoy', 'rewrites')} rewrites, {g('churn-rewriting/decoy', 'swaps')} set swaps; median of 2) | {fmt(rewriting)} | {fmt(g('churn-rewriting/decoy', 'p99_ms'), 2)} | {fmt(g('churn-rewriting/decoy', 'rss_mib'), 1)} |",
    ]
    rounds = lambda k: ", ".join(fmt(x) for x in (g(k, "all_rps") or []))
    metrics_cost = (f"These three rows are medians of three rounds run in turn (journal on: {rounds('static/decoy/ab-median')}; "
                    f"off: {rounds('static/decoy-nojournal/ab-median')}; older build: {rounds('static/decoy-baseline/ab-median')} req/s). "
                    f"Journal and metrics together, against the build from before either existed: "
                    f"{fmt(ratio(journal, baseline), 2)}×; metrics alone (journal off): {fmt(ratio(nojournal, baseline), 2)}×."
                    if baseline else "")
    mq_section = render_mq(pathlib.Path(__file__).with_name("out") / "mq.json", target)
    errors = {k: v["errors"] for k, v in r.items() if v.get("errors")}
    notes = pathlib.Path(__file__).with_name("notes.md").read_text()
    wm_start = g("startup-10000/wiremock", "first_answer_ms")
    return f"""# Performance

Measured by `bench/run.sh` on {datetime.date.today().isoformat()} ({platform.machine()}, {_cpus()} CPUs, shared):
decoy, WireMock 3.13.2 standalone (`--no-request-journal --disable-request-logging
--async-response-enabled=true`, loaded in 8 s rounds until two in a row agree within
5%, so its JIT has settled) and nginx returning a static 200,
one after another in the same run, each driven by `wrk -t2 -c64 -d{duration}s` on
127.0.0.1 (the delay row uses 1,000 connections). The load generator shares the
two cores with the server, so absolute figures are lower than on a dedicated box and
drift between runs; the ratios are what to compare.

This page is written by the benchmark; the notes at the end are kept in `bench/notes.md`.

## Throughput, latency, memory

| scenario | decoy req/s | decoy p99 ms | decoy RSS MiB | WireMock req/s | WireMock p99 ms | WireMock RSS MiB | decoy / WireMock | nginx req/s |
|---|---:|---:|---:|---:|---:|---:|---:|---:|
{chr(10).join(rows)}

"Requests spread" means each request goes to a random stub of the set; the stubs mix
`url`, `urlPathPattern` and `urlPathTemplate` matchers (half exact, a quarter regex, a
quarter template), every one with a method. RSS is the peak resident set (`VmHWM`).

Start-up, spawn to first answered request with 10,000 one-stub files: decoy
{fmt(start10k)} ms (median of 5), WireMock {fmt(wm_start)} ms (median of 2).

Errors (non-2xx answers or socket errors) reported by wrk: {errors if errors else "none"}.

## Targets (issue 2)

| target | measured | goal | |
|---|---|---|---|
{chr(10).join(targets)}

## Mapping lifecycle: journal, metrics, hot reload (issue 3)

| scenario | decoy req/s | p99 ms | RSS MiB |
|---|---:|---:|---:|
{chr(10).join(lifecycle_rows)}

{metrics_cost}

Reload latency is from a mapping file renamed into place (as editors save) to the
first request answered from it, polled on fresh connections, 20 edits each
0.15 s apart: 2 stubs median {fmt(rl.get("median_ms"))} ms, p95 {fmt(rl.get("p95_ms"))} ms, max {fmt(rl.get("max_ms"))} ms;
10,000 stubs median {fmt(rl10k.get("median_ms"))} ms, p95 {fmt(rl10k.get("p95_ms"))} ms, max {fmt(rl10k.get("max_ms"))} ms.
WireMock does not watch its files at all.

| target | measured | goal | |
|---|---|---|---|
{chr(10).join(lifecycle_targets)}

{mq_section}

{render_plugins(pathlib.Path(__file__).with_name("out") / "plugins.json")}

{notes}"""


def render_mq(path, target):
    """The MQ section, from bench/mq.py's output (absent when it was not run)."""
    import json
    if not path.exists():
        return "## Message queues\n\nNot measured in this run (`bench/mq.py` needs RabbitMQ)."
    data = json.loads(path.read_text())
    rows, targets = [], []
    for row in data["rows"]:
        d, b = row["decoy"], row["bare"]
        rows.append(f"| {row['scenario']} | {fmt(d['tps'])} | {fmt(d['p95_ms'], 1)} / {fmt(d['p99_ms'], 1)} | "
                    f"{'≤ ' + fmt(d['processing_p99_ms'], 2) if d.get('processing_p99_ms') else 'n/a'} | {fmt(d.get('rss_mib'), 1)} | "
                    f"{fmt(b['tps'])} | {fmt(b['p95_ms'], 1)} / {fmt(b['p99_ms'], 1)} | {fmt(b.get('rss_mib'), 1)} | {fmt(row['ratio'], 2)}× | {d['wrong'] + b['wrong']} |")
        targets.append(target(f"decoy vs bare responder: {row['scenario']}", fmt(row["ratio"], 2) + "×", "≥ 0.8×",
                              (row["ratio"] or 0) >= 0.8))
    return f"""## Message queues (issue 5)

Measured by `bench/mq.py` (which `bench/run.sh` runs first), against this machine's
RabbitMQ, {data['seconds']} s per figure after 3 s of warm-up, decoy and the bare responder
one after the other on the same queues. The load driver (`host/examples/mq-load.rs`) keeps a window
of requests in flight per queue (50 with the delay, 10 without, 200 on one queue), each
490 bytes with a reply-to queue and a message id; it runs on the same two cores as decoy
and RabbitMQ. "bare" is a responder written directly on lapin (no files, no matching, no
metrics; a timer for the delay, a publisher confirm per reply, then the ack: what decoy
does), the ceiling on this broker. Round-trip latency includes the configured delay;
decoy's processing latency (request read to reply confirmed, delay excluded) is the
bucket bound of its own histogram.

| scenario | decoy t/s | decoy p95 / p99 ms | decoy processing p99 ms | decoy RSS MiB | bare t/s | bare p95 / p99 ms | bare RSS MiB | decoy / bare | wrong replies |
|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|
{chr(10).join(rows)}

| target | measured | goal | |
|---|---|---|---|
{chr(10).join(targets)}

For reference only, from other hardware: Traffic Parrot 5.12 publishes 6,022 t/s (4
vCPUs) and 14,984 t/s (16 vCPUs) for 20 XML mappings with 2 XPath lookups and a 100 ms
delay on IBM MQ, 99% under 50 ms of processing latency. Its replies take two values
from the request by XPath; so do decoy's in the XPath rows here (through the bundled
`response-template` plugin; the driver counts a reply without its own request's
account as wrong), while the bare responder's are fixed, the same size."""


TRANSPORTS_HEADING = "## gRPC, MQTT, NATS, AMQP 1.0, emitted messages and MQ recording"


def render_transports(out_dir, target=None):
    """The section of the newer transports, from what bench/grpc.py, nats.py, mqtt.py,
    mq_amqp1.py, emit.py and record_mq.py last wrote in bench/out (each part says when
    its script has not been run)."""
    import json
    target = target or _target

    def load(name):
        p = out_dir / f"{name}.json"
        return json.loads(p.read_text()) if p.exists() else None

    parts, targets = [], []
    g = load("grpc")
    if g:
        r = g["results"]
        rows = [f"| {name} | {fmt(v['calls_per_s'])} | {fmt(v['messages_per_s'])} | {fmt(v['p50_ms'], 2)} | {fmt(v['p99_ms'], 2)} |"
                for name, v in r.items()]
        t, d = r.get("tonic unary"), r.get("decoy static unary")
        many = r.get("decoy static unary, 1,000 methods")
        if t and d:
            rr, pr = d["calls_per_s"] / t["calls_per_s"], d["p99_ms"] / t["p99_ms"]
            targets.append(target("gRPC static unary calls/s vs a plain tonic server", f"{rr:.2f}×", "≥ 0.7×", rr >= 0.7))
            targets.append(target("gRPC static unary p99 vs a plain tonic server", f"{pr:.2f}×", "≤ 2×", pr <= 2))
        if d and many:
            cost = 1 - many["calls_per_s"] / d["calls_per_s"]
            targets.append(target("gRPC: 1,000 methods' cost over one", f"{cost * 100:.0f}%", "≤ 10%", cost <= 0.10))
        parts.append(f"""### gRPC

`bench/grpc.py` ({g['profile']} build, {g['seconds']} s per scenario, {g['concurrency']} calls
in flight over {g['connections']} HTTP/2 connections, driven by `host/examples/grpc-load.rs`,
a tonic client): decoy's stubs beside a plain tonic server answering the same fixed
messages, the ceiling.

| scenario | calls/s | messages/s | p50 ms | p99 ms |
|---|---:|---:|---:|---:|
{chr(10).join(rows)}""")
    else:
        parts.append("### gRPC\n\nNot measured in this run (`bench/grpc.py`).")

    rows = []
    n = load("nats")
    if n:
        for row in n["rows"]:
            rows.append((f"NATS: {row['scenario']}", row["decoy"]["tps"], row["decoy"]["p99_ms"],
                         row["bare"]["tps"], row["bare"]["p99_ms"], row["ratio_tps"], "async-nats"))
    m = load("mqtt")
    if m:
        for row in m["results"]:
            rows.append((f"MQTT: {row['scenario']}", row["decoy"]["msgs_per_s"], row["decoy"]["p99_ms"],
                         row["echo"]["msgs_per_s"], row["echo"]["p99_ms"], row["ratio"], "rumqttc"))
    a = load("mq_amqp1")
    if a:
        for row in a["rows"]:
            rows.append((f"AMQP 1.0: {row['scenario']}", row["decoy"]["tps"], row["decoy"]["p99_ms"],
                         row["bare"]["tps"], row["bare"]["p99_ms"], row["ratio"], "fe2o3-amqp"))
    if rows:
        table = [f"| {s} | {fmt(dt)} | {fmt(dp, 1)} | {fmt(bt)} | {fmt(bp, 1)} | {lib} | {fmt(r, 2)}× |"
                 for s, dt, dp, bt, bp, r, lib in rows]
        for s, _, _, _, _, r, _ in rows:
            targets.append(target(f"decoy vs the bare echo service: {s}", f"{r:.2f}×", "≥ 0.8×", r >= 0.8))
        parts.append(f"""### MQTT, NATS and AMQP 1.0

`bench/nats.py`, `bench/mqtt.py` and `bench/mq_amqp1.py`, against this machine's NATS,
Mosquitto and RabbitMQ (its AMQP 1.0 plugin): decoy beside a bare echo service written
with the same client library (`host/examples/nats-load.rs`, `mqtt-load.rs`,
`mq1-load.rs`: no files, no matching, no metrics), the ceiling on that broker, driven
by the same example's load driver on the same two cores.

| scenario | decoy msg/s | decoy p99 ms | bare msg/s | bare p99 ms | bare echo on | decoy / bare |
|---|---:|---:|---:|---:|---|---:|
{chr(10).join(table)}""")
    else:
        parts.append("### MQTT, NATS and AMQP 1.0\n\nNot measured in this run.")

    e = load("emit")
    if e:
        em = e["emit"]
        parts.append(f"""### Messages published when a stub is hit

`bench/emit.py` ({e['client']}, {e['connections']} connections, {e['seconds']} s each, one
after the other): a plain stub, then a stub whose `message` listener publishes one
{'templated' if e['templated'] else 'fixed'} event to RabbitMQ on each hit.

| | HTTP req/s | events published and confirmed /s | events dropped past the limit | failed |
|---|---:|---:|---:|---:|
| plain stub | {fmt(e['plain']['rps'])} | | | |
| stub publishing an event | {fmt(em['rps'])} | {fmt(em['events_per_s'])} | {fmt(em['dropped'])} | {fmt(em['failed'])} |

Every event is either published (and found on the queue: {fmt(em['on_queue'])}) or
counted in `decoy_published_messages_total`; the answers never wait for the broker.
One connection publishes about as fast as one RabbitMQ channel confirms: a load that
emits faster than that drops the excess, counted.""")
    rq = load("record_mq")
    if rq:
        alone, through = rq["back end alone"], rq["through decoy record-mq"]
        parts.append(f"""### MQ recording

`bench/record_mq.py` ({rq['profile']} build, RabbitMQ, {rq['queues']} queue(s), {rq['window']}
requests in flight): a bare lapin back end driven directly, then through `decoy
record-mq`, which forwards each request, pairs the reply and passes it back.

| | msg/s | p50 ms | p99 ms |
|---|---:|---:|---:|
| back end alone | {fmt(alone['tps'])} | {fmt(alone['p50_ms'], 2)} | {fmt(alone['p99_ms'], 2)} |
| through `decoy record-mq` | {fmt(through['tps'])} | {fmt(through['p50_ms'], 2)} | {fmt(through['p99_ms'], 2)} |

A recorded exchange crosses the broker four times rather than two: about half the
back end's own rate is the ceiling of any recorder placed between.""")
    import datetime
    stamps = [p.stat().st_mtime for p in (out_dir / f"{n}.json" for n in
              ("grpc", "nats", "mqtt", "mq_amqp1", "emit", "record_mq")) if p.exists()]
    when = datetime.date.fromtimestamp(max(stamps)).isoformat() if stamps else "never"
    body = "\n\n".join(parts)
    goals = ""
    if targets:
        goals = "\n\n| target | measured | goal | |\n|---|---|---|---|\n" + "\n".join(targets)
    return f"""{TRANSPORTS_HEADING}

Each script is one command after `cargo build --release -p decoy --bins --features bench
--example nats-load --example mqtt-load --example mq1-load --example mq-load --example
grpc-load`; `bench/run.sh` runs them all. Same machine and caveats as above; last
measured {when}.

{body}{goals}
"""


def replace_transports_section(doc_path, out_dir):
    """Puts a fresh transports section into docs/performance.md, before the notes."""
    doc = doc_path.read_text()
    section = render_transports(out_dir)
    if TRANSPORTS_HEADING in doc:
        start = doc.index(TRANSPORTS_HEADING)
        end = doc.find("\n## ", start + 1)
        doc = doc[:start] + section.rstrip() + "\n" + (doc[end:] if end >= 0 else "")
    else:
        marker = "\n" + PLUGINS_BEGIN
        if marker not in doc:
            marker = "\n## Notes"
        doc = doc.replace(marker, "\n" + section + marker, 1)
    doc_path.write_text(doc)


def _target(label, value, goal, ok):
    return f"| {label} | {value} | {goal} | {'met' if ok else '**missed**'} |"


PLUGINS_BEGIN = "<!-- plugins: written by bench/plugins.py -->"
PLUGINS_END = "<!-- /plugins -->"


def render_plugins(path):
    """The plugin section, from bench/plugins.py's output (absent when it was not run)."""
    import json
    if not path.exists():
        return f"{PLUGINS_BEGIN}\n## Plugins (issue 4)\n\nNot measured in this run (`bench/plugins.py`).\n{PLUGINS_END}"
    data = json.loads(path.read_text())
    g = lambda k, f: (data.get(k) or {}).get(f)
    static, templated, wm = g("static/decoy", "rps"), g("templated/decoy", "rps"), g("templated/wiremock", "rps")
    ceiling, wm_static = g("static/nginx", "rps"), g("static/wiremock", "rps")
    none, many = g("startup/none", "median_ms"), g("startup/100-unreferenced", "median_ms")
    pc = data.get("per-call", {})
    rounds = lambda k: ", ".join(fmt(x) for x in (g(k, "all_rps") or []))
    start_ratio = ratio(many, none)
    warm_rates = g("templated/wiremock", "warm_up_rps")
    warm = (f"WireMock was loaded in rounds of 8 s until two in a row agreed within 5% "
            f"({', '.join(fmt(x) for x in warm_rates)} req/s), so its JIT had settled, "
            f"before its measured round." if warm_rates else "WireMock was warmed up for 15 s.")
    bound = ""
    if wm:
        bound = (f"\n\nTen times WireMock's templated figure is {fmt(10 * wm)} req/s. decoy's static stub, "
                 f"the most its templated row could reach if templating cost nothing, is {fmt(static)} req/s "
                 f"here ({fmt(ratio(static, wm), 1)}× WireMock's templated figure)")
        if ceiling:
            bound += (f", and nginx's static 200 under the same load is {fmt(ceiling)} req/s "
                      f"(rounds: {rounds('static/nginx')})")
        bound += "."
        if ceiling and 10 * wm > ceiling:
            bound += (f" So the 10× goal asks for more than nginx answers with a static 200 on the same "
                      f"machine in the same run ({fmt(10 * wm / ceiling, 2)}× nginx's figure): no HTTP server "
                      f"here reaches it, templated or not.")
        if wm_static:
            bound += (f" Warm, WireMock's templating costs it {fmt(100 * (1 - wm / wm_static), 0)}% of its static "
                      f"figure; decoy's costs it {fmt(100 * (1 - (ratio(templated, static) or 0)), 0)}%.")
    targets = [
        _target("templated vs decoy's static figure", fmt(ratio(templated, static), 2) + "×", "≥ 0.5×",
                (ratio(templated, static) or 0) >= 0.5),
        _target("templated vs WireMock's templating", fmt(ratio(templated, wm), 1) + "×", "≥ 10×",
                (ratio(templated, wm) or 0) >= 10),
        _target("start-up with 100 unreferenced plugins vs none", fmt(start_ratio, 3) + "×", "within 5% (≤ 1.05×)",
                (start_ratio or 9) <= 1.05),
    ]
    return f"""{PLUGINS_BEGIN}
## Plugins (issue 4)

Measured by `bench/plugins.py` (which `bench/run.sh` runs), same machine and method.
The templated stub is `"body": "segment {{{{request.pathSegments.[1]}}}} q {{{{request.query.q}}}}"` with
`"transformers": ["response-template"]`, requested as `/t/abc?q=xyz`, served by decoy
through its bundled WebAssembly plugin and by WireMock 3.13.2 through its own
templating; the static stub answers the same 17 bytes. decoy's two rows are medians of
three interleaved rounds (static: {rounds("static/decoy")}; templated: {rounds("templated/decoy")} req/s);
every body was checked before the load. {warm}

| scenario | req/s | p99 ms | RSS MiB |
|---|---:|---:|---:|
| decoy, static stub | {fmt(static)} | {fmt(g("static/decoy", "p99_ms"), 2)} | {fmt(g("static/decoy", "rss_mib"), 1)} |
| decoy, templated (response-template plugin) | {fmt(templated)} | {fmt(g("templated/decoy", "p99_ms"), 2)} | {fmt(g("templated/decoy", "rss_mib"), 1)} |
| WireMock, templated | {fmt(wm)} | {fmt(g("templated/wiremock", "p99_ms"), 2)} | {fmt(g("templated/wiremock", "rss_mib"), 1)} |
| WireMock, static stub (same warm JVM) | {fmt(wm_static)} | {fmt(g("static/wiremock", "p99_ms"), 2)} | |
| nginx, static 200 (the ceiling) | {fmt(ceiling)} | {fmt(g("static/nginx", "p99_ms"), 2)} | |{bound}

Start-up, spawn to first answer, 10 plain stubs, median of 15 interleaved runs: with
no `plugins/` folder {fmt(none, 1)} ms; with 100 unreferenced 750 KB plugins in it
{fmt(many, 1)} ms. Nothing is read or compiled until a mapping names a plugin.

Per call, in-process (`host/examples/plugin-calls.rs`, median of 5 rounds): a trivial
Rust transformer on a warm instance {fmt(pc.get("trivial_warm_us"), 1)} µs, on a fresh instance per call
(`isolation: per-request`) {fmt(pc.get("trivial_fresh_us"), 1)} µs; response-template rendering the
template above on a warm instance {fmt(pc.get("template_warm_us"), 1)} µs, and Traffic Parrot's MQ
reply (two `xPath` values from a 490-byte request) {fmt(pc.get("xpath_template_warm_us"), 1)} µs.

| target | measured | goal | |
|---|---|---|---|
{chr(10).join(targets)}
{PLUGINS_END}"""


def replace_plugins_section(doc_path, plugins_json):
    """Puts a fresh plugin section into an existing docs/performance.md."""
    doc = doc_path.read_text()
    section = render_plugins(plugins_json)
    if PLUGINS_BEGIN in doc and PLUGINS_END in doc:
        head, rest = doc.split(PLUGINS_BEGIN, 1)
        _, tail = rest.split(PLUGINS_END, 1)
        doc = head + section + tail
    else:
        marker = "\n## Notes"
        doc = doc.replace(marker, "\n" + section + "\n" + marker, 1) if marker in doc else doc + "\n" + section + "\n"
    doc_path.write_text(doc)


def _cpus():
    import os
    return os.cpu_count()


if __name__ == "__main__":
    import sys
    here = pathlib.Path(__file__).parent
    if sys.argv[1:] == ["--transports-only"]:
        # After bench/grpc.py, nats.py, mqtt.py, mq_amqp1.py, emit.py, record_mq.py.
        replace_transports_section(here.parent / "docs" / "performance.md", here / "out")
        print("updated the gRPC, broker, emitted-message and recording section of docs/performance.md")
        sys.exit(0)
    if sys.argv[1:] == ["--plugins-and-mq-only"]:
        # After bench/plugins.py and bench/mq.py alone: refresh those two sections of
        # the page and leave the HTTP figures of the last full run as they are.
        doc_path = here.parent / "docs" / "performance.md"
        doc = doc_path.read_text()
        start = doc.index("## Message queues")
        ends = [doc.find(m, start + 1) for m in ("\n## ", "\n" + PLUGINS_BEGIN)]
        end = min(e for e in ends if e >= 0)
        mq = render_mq(here / "out" / "mq.json", _target)
        doc_path.write_text(doc[:start] + mq + "\n" + doc[end:])
        replace_plugins_section(doc_path, here / "out" / "plugins.json")
        print("updated the plugin and MQ sections of docs/performance.md")
