#!/usr/bin/env python3
"""Side-by-side comparison of decoy and real WireMock on a corpus of public mappings.

tests/corpus/ holds WireMock root directories (`mappings/` + `__files/`) that people
wrote in public repositories (tests/corpus/SOURCES.md says where each came from).
For every folder this script derives requests from the stubs themselves (one per
stub, scenario stubs in the order their states allow), adds a GET for every file
under `__files/` (WireMock serves that directory as a web root) and a few requests
that match nothing, serves the folder with WireMock and with decoy, sends the same
requests in the same order to both and compares status, body and the headers the
stub sets. Usage:

    tests/corpus-compat.py --wiremock path/to/wiremock-standalone-3.13.2.jar \\
                           --decoy path/to/decoy [--only OWNER__REPO] [--report FILE]

(`npm install wiremock@3.13.2` ships the jar in node_modules/wiremock/build/; the
WIREMOCK_JAR and DECOY environment variables work too.)

Bodies are compared byte for byte, except that when the stub that the request was
derived from gives its body as `jsonBody` (so the bytes on the wire are whatever the
engine's JSON serialiser prints, not something the stub author wrote) two bodies that
are the same JSON token for token, keys in the same order, count as equal; such
answers are counted and reported as "identical after JSON whitespace".

Exits non-zero when any answer differs and the difference is not listed in
tests/corpus/known-differences.json (a list of {"repo", "request", "reason"}; the
request is the label printed for it, e.g. "GET /api/users?id=1").
"""
import argparse
import base64
import collections
import http.client
import json
import os
import pathlib
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse

try:
    import re._parser as sre_parse  # Python 3.11+
    import re._constants as sre_c
except ImportError:  # pragma: no cover
    import sre_parse  # type: ignore
    import sre_constants as sre_c  # type: ignore

HERE = pathlib.Path(__file__).resolve().parent
CORPUS = HERE / "corpus"


class Skip(Exception):
    """A stub we cannot derive a request for; the message says why."""


# ---------------------------------------------------------------- regex -> string

def gen_regex(pattern, prefer_path=False):
    """A string that the regex matches as a whole (Python's reading of the
    pattern; Java-only syntax raises Skip)."""
    try:
        parsed = sre_parse.parse(pattern)
    except Exception as e:
        raise Skip(f"regex not understood by the generator: {pattern!r} ({e})")
    groups = {}
    try:
        out = _gen_seq(parsed, groups, prefer_path)
    except Skip:
        raise
    except Exception as e:
        raise Skip(f"cannot generate a string for regex {pattern!r} ({e})")
    try:
        ok = re.fullmatch(pattern, out, re.DOTALL) is not None
    except Exception:
        ok = False
    if not ok:
        raise Skip(f"generated {out!r} does not match regex {pattern!r}")
    return out


def _char_ok(c, items):
    for op, av in items:
        if op is sre_c.LITERAL and ord(c) == av:
            return True
        if op is sre_c.RANGE and av[0] <= ord(c) <= av[1]:
            return True
        if op is sre_c.CATEGORY:
            name = str(av)
            if "DIGIT" in name and (c.isdigit() != ("NOT" in name)):
                return True
            if "WORD" in name and ((c.isalnum() or c == "_") != ("NOT" in name)):
                return True
            if "SPACE" in name and (c.isspace() != ("NOT" in name)):
                return True
    return False


def _gen_in(items):
    negate = any(op is sre_c.NEGATE for op, _ in items)
    items = [(op, av) for op, av in items if op is not sre_c.NEGATE]
    if negate:
        for c in "a1xZ-_.":
            if not _char_ok(c, items):
                return c
        raise Skip("negated character class excludes every candidate")
    for op, av in items:
        if op is sre_c.LITERAL:
            return chr(av)
        if op is sre_c.RANGE:
            lo, hi = av
            for c in "a1A":
                if lo <= ord(c) <= hi:
                    return c
            return chr(lo)
        if op is sre_c.CATEGORY:
            name = str(av)
            if "NOT" in name:
                return "-" if "WORD" in name else "a"
            if "DIGIT" in name:
                return "1"
            if "WORD" in name:
                return "a"
            if "SPACE" in name:
                return " "
    raise Skip("empty character class")


def _gen_seq(seq, groups, prefer_path):
    out = []
    for op, av in seq:
        if op is sre_c.LITERAL:
            out.append(chr(av))
        elif op is sre_c.NOT_LITERAL:
            out.append("a" if chr(av) != "a" else "b")
        elif op is sre_c.ANY:
            out.append("a")
        elif op is sre_c.IN:
            out.append(_gen_in(av))
        elif op in (sre_c.MAX_REPEAT, sre_c.MIN_REPEAT, getattr(sre_c, "POSSESSIVE_REPEAT", None)):
            lo, hi, sub = av
            n = lo
            if n == 0 and hi != 0:
                # `.*` and `[^/]*` get one character, which reads more like a real
                # URL; optional groups stay out.
                if len(sub) == 1 and sub[0][0] in (sre_c.ANY, sre_c.IN):
                    n = 1
            out.append("".join(_gen_seq(sub, groups, prefer_path) for _ in range(n)))
        elif op is sre_c.SUBPATTERN:
            gid = av[0]
            s = _gen_seq(av[-1], groups, prefer_path)
            if gid is not None:
                groups[gid] = s
            out.append(s)
        elif op is getattr(sre_c, "ATOMIC_GROUP", None):
            out.append(_gen_seq(av, groups, prefer_path))
        elif op is sre_c.BRANCH:
            last = None
            for alt in av[1]:
                try:
                    out.append(_gen_seq(alt, groups, prefer_path))
                    break
                except Skip as e:
                    last = e
            else:
                raise last or Skip("no alternative")
        elif op is sre_c.AT:
            pass
        elif op in (sre_c.ASSERT, sre_c.ASSERT_NOT):
            pass  # checked by the fullmatch afterwards
        elif op is sre_c.GROUPREF:
            out.append(groups.get(av, ""))
        elif op is sre_c.CATEGORY:
            out.append(_gen_in([(op, av)]))
        else:
            raise Skip(f"regex construct {op} not supported by the generator")
    return "".join(out)


# ------------------------------------------------------------ pattern -> value

ABSENT = object()


def gen_value(pat, what):
    """A string satisfying a WireMock string-value pattern (ABSENT: send nothing)."""
    if not isinstance(pat, dict):
        if isinstance(pat, str):
            return pat
        raise Skip(f"{what}: pattern is not an object: {pat!r}")
    if "equalTo" in pat:
        return str(pat["equalTo"])
    if "contains" in pat:
        return str(pat["contains"])
    if "matches" in pat:
        return gen_regex(pat["matches"])
    if "absent" in pat:
        return ABSENT if pat["absent"] else "present"
    if "anything" in pat:
        return "anything"
    if "doesNotMatch" in pat:
        cand = "corpus-value"
        if re.fullmatch(pat["doesNotMatch"], cand):
            raise Skip(f"{what}: cannot find a value that doesNotMatch {pat['doesNotMatch']!r}")
        return cand
    if "doesNotContain" in pat:
        cand = "corpus-value"
        if pat["doesNotContain"] in cand:
            cand = "zzz"
        return cand
    if "equalToJson" in pat:
        v = pat["equalToJson"]
        return v if isinstance(v, str) else json.dumps(v)
    if "equalToXml" in pat:
        return pat["equalToXml"]
    if "or" in pat:
        last = None
        for sub in pat["or"]:
            try:
                return gen_value(sub, what)
            except Skip as e:
                last = e
        raise last or Skip(f"{what}: empty or")
    if "and" in pat:
        subs = pat["and"]
        for sub in subs:
            try:
                cand = gen_value(sub, what)
            except Skip:
                continue
            if cand is not ABSENT and all(simple_check(s, cand) for s in subs):
                return cand
        raise Skip(f"{what}: cannot satisfy every pattern of an 'and'")
    if "hasExactly" in pat or "includes" in pat:
        return [gen_value(p, what) for p in pat.get("hasExactly") or pat.get("includes")]
    for k in ("before", "after", "equalToDateTime"):
        if k in pat:
            raise Skip(f"{what}: date-time pattern ({k}) not generated")
    raise Skip(f"{what}: pattern {sorted(pat)} not generated")


def simple_check(pat, s):
    if "equalTo" in pat:
        if pat.get("caseInsensitive"):
            return str(pat["equalTo"]).lower() == s.lower()
        return str(pat["equalTo"]) == s
    if "contains" in pat:
        return pat["contains"] in s
    if "doesNotContain" in pat:
        return pat["doesNotContain"] not in s
    if "matches" in pat:
        try:
            return re.fullmatch(pat["matches"], s, re.DOTALL) is not None
        except Exception:
            return True
    if "doesNotMatch" in pat:
        try:
            return re.fullmatch(pat["doesNotMatch"], s, re.DOTALL) is None
        except Exception:
            return True
    return True


# ----------------------------------------------------------------- bodies

def _placeholders(v):
    if isinstance(v, dict):
        return {k: _placeholders(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_placeholders(x) for x in v if x != "${json-unit.ignore-element}"]
    if isinstance(v, str) and v.startswith("${json-unit."):
        if v == "${json-unit.any-number}":
            return 1
        if v == "${json-unit.any-boolean}":
            return True
        if v.startswith("${json-unit.regex}"):
            return gen_regex(v[len("${json-unit.regex}"):])
        return "x"
    return v


def _merge(a, b):
    if isinstance(a, dict) and isinstance(b, dict):
        out = dict(a)
        for k, v in b.items():
            out[k] = _merge(out[k], v) if k in out else v
        return out
    if isinstance(a, list) and isinstance(b, list):
        out = list(a)
        for i, v in enumerate(b):
            if i < len(out):
                out[i] = _merge(out[i], v)
            else:
                out.append(v)
        return out
    return b


_STEP = re.compile(r"""\.([A-Za-z_$@][\w$@-]*)|\[['"]([^'"]+)['"]\]|\[(\d+)\]|\[\?\(@\.([\w-]+)\s*==\s*(?:'([^']*)'|"([^"]*)"|(-?\d+(?:\.\d+)?|true|false))\)\]|\[\*\]""")


def json_for_path(expr, leaf):
    """A JSON document in which the JsonPath `expr` selects `leaf` (simple paths only)."""
    if not expr.startswith("$"):
        raise Skip(f"JsonPath {expr!r} not generated")
    rest = expr[1:]
    steps = []
    pos = 0
    while pos < len(rest):
        m = _STEP.match(rest, pos)
        if not m:
            raise Skip(f"JsonPath {expr!r} not generated")
        steps.append(m)
        pos = m.end()

    def build(i):
        if i == len(steps):
            return leaf
        m = steps[i]
        if m.group(1) or m.group(2):
            return {m.group(1) or m.group(2): build(i + 1)}
        if m.group(3):
            n = int(m.group(3))
            return [{} for _ in range(n)] + [build(i + 1)]
        if m.group(4):
            lit = m.group(5) if m.group(5) is not None else m.group(6)
            if lit is None:
                lit = json.loads(m.group(7))
            inner = build(i + 1)
            obj = {m.group(4): lit}
            if isinstance(inner, dict):
                obj = _merge(obj, inner)
            elif i + 1 != len(steps):
                raise Skip(f"JsonPath {expr!r} not generated")
            return [obj]
        return [build(i + 1)]  # [*]
    if steps and steps[-1].group(1) in ("length", "size") and not steps[-1].group(2):
        raise Skip(f"JsonPath {expr!r} (length/size) not generated")
    return build(0)


def xml_for_xpath(expr, text):
    m = re.fullmatch(r"/{1,2}((?:[\w.-]+:)?[\w.-]+(?:/(?:[\w.-]+:)?[\w.-]+)*)(?:\[text\(\)\s*=\s*'([^']*)'\])?(/text\(\))?", expr.strip())
    if not m:
        raise Skip(f"XPath {expr!r} not generated")
    names = m.group(1).split("/")
    if any(":" in n for n in names):
        raise Skip(f"XPath {expr!r} (namespace prefix) not generated")
    if m.group(2) is not None:
        text = m.group(2)
    inner = text or ""
    for n in reversed(names):
        inner = f"<{n}>{inner}</{n}>"
    return inner


def gen_body(req):
    patterns = req.get("bodyPatterns") or []
    form = req.get("formParameters")
    if req.get("multipartPatterns"):
        raise Skip("multipartPatterns not generated")
    if form:
        pairs = []
        for k, p in form.items():
            v = gen_value(p, f"formParameters.{k}")
            if v is ABSENT:
                continue
            for one in (v if isinstance(v, list) else [v]):
                pairs.append((k, one))
        return urllib.parse.urlencode(pairs).encode(), "application/x-www-form-urlencoded"
    if not patterns:
        return None, None
    doc = None
    text = None
    xml = None
    ctype = None
    for p in patterns:
        if not isinstance(p, dict):
            raise Skip("body pattern is not an object")
        if "equalToJson" in p:
            v = p["equalToJson"]
            if isinstance(v, str):
                try:
                    v = json.loads(v)
                except ValueError:
                    text = v
                    continue
            doc = _merge(doc, _placeholders(v)) if doc is not None else _placeholders(v)
            ctype = "application/json"
        elif "matchesJsonPath" in p:
            mj = p["matchesJsonPath"]
            if isinstance(mj, str):
                part = json_for_path(mj, "x")
            else:
                sub = {k: v for k, v in mj.items() if k != "expression"}
                leaf = gen_value(sub, "matchesJsonPath") if sub else "x"
                if leaf is ABSENT:
                    continue
                if isinstance(leaf, list):
                    leaf = leaf[0]
                if "equalToJson" in sub:
                    leaf = json.loads(leaf)
                part = json_for_path(mj["expression"], leaf)
            doc = _merge(doc, part) if doc is not None else part
            ctype = "application/json"
        elif "equalToXml" in p:
            xml = p["equalToXml"]
            ctype = "application/xml"
        elif "matchesXPath" in p:
            mx = p["matchesXPath"]
            if isinstance(mx, str):
                xml = xml or xml_for_xpath(mx, "x")
            else:
                sub = {k: v for k, v in mx.items() if k not in ("expression", "xPathNamespaces")}
                leaf = gen_value(sub, "matchesXPath") if sub else "x"
                xml = xml or xml_for_xpath(mx["expression"], leaf)
            ctype = "application/xml"
        elif "binaryEqualTo" in p:
            return base64.b64decode(p["binaryEqualTo"]), "application/octet-stream"
        elif "matchesJsonSchema" in p:
            raise Skip("matchesJsonSchema body not generated")
        elif any(k in p for k in ("equalTo", "contains", "matches", "doesNotMatch", "doesNotContain", "anything", "and", "or")):
            v = gen_value(p, "bodyPatterns")
            if v is ABSENT:
                continue
            if text is None or simple_check(p, text) is False:
                text = v if text is None else text + v
        else:
            raise Skip(f"body pattern {sorted(p)} not generated")
    if doc is not None:
        if text is not None or xml is not None:
            raise Skip("body must be JSON and text/XML at once")
        return json.dumps(doc).encode(), ctype
    if xml is not None:
        return xml.encode(), ctype
    return (text or "").encode(), ctype


# ---------------------------------------------------------------- requests

def gen_url(req):
    if "url" in req:
        path = req["url"]
    elif "urlPath" in req:
        path = req["urlPath"]
    elif "urlPattern" in req:
        path = gen_regex(req["urlPattern"])
    elif "urlPathPattern" in req:
        path = gen_regex(req["urlPathPattern"])
    elif "urlPathTemplate" in req:
        params = req.get("pathParameters") or {}

        def sub(m):
            name = m.group(1)
            if name in params:
                v = gen_value(params[name], f"pathParameters.{name}")
                if not isinstance(v, str):
                    raise Skip(f"pathParameters.{name} not generated")
                return urllib.parse.quote(v, safe="")
            return "1"
        path = re.sub(r"\{([^}]+)\}", sub, req["urlPathTemplate"])
    else:
        path = "/"
    if not path.startswith("/"):
        raise Skip(f"URL {path!r} does not start with /")
    # characters a client would have to escape
    path = urllib.parse.quote(path, safe="/?&=%:@!$'()*+,;~-._[]{}|")
    q = []
    for k, p in (req.get("queryParameters") or {}).items():
        v = gen_value(p, f"queryParameters.{k}")
        if v is ABSENT:
            continue
        for one in (v if isinstance(v, list) else [v]):
            q.append((k, one))
    if q:
        path += ("&" if "?" in path else "?") + urllib.parse.urlencode(q, quote_via=urllib.parse.quote)
    return path


def derive(stub):
    req = stub.get("request") or {}
    method = req.get("method") or "GET"
    if method == "ANY":
        method = "GET"
    if req.get("customMatcher"):
        raise Skip("customMatcher not generated")
    url = gen_url(req)
    headers = []
    for k, p in (req.get("headers") or {}).items():
        v = gen_value(p, f"headers.{k}")
        if v is ABSENT:
            continue
        for one in (v if isinstance(v, list) else [v]):
            headers.append((k, one))
    cookies = []
    for k, p in (req.get("cookies") or {}).items():
        v = gen_value(p, f"cookies.{k}")
        if v is ABSENT:
            continue
        cookies.append(f"{k}={v[0] if isinstance(v, list) else v}")
    if cookies:
        headers.append(("Cookie", "; ".join(cookies)))
    auth = req.get("basicAuthCredentials") or req.get("basicAuth")
    if auth:
        tok = base64.b64encode(f"{auth.get('username', '')}:{auth.get('password', '')}".encode()).decode()
        headers.append(("Authorization", "Basic " + tok))
    host = req.get("host")
    if host:
        v = gen_value(host, "host")
        if isinstance(v, str):
            headers.append(("Host", v))
    body, ctype = gen_body(req)
    if body is not None and ctype and not any(k.lower() == "content-type" for k, _ in headers):
        headers.append(("Content-Type", ctype))
    return {"method": method, "url": url, "headers": headers, "body": body or b""}


# ---------------------------------------------------------------- corpus

def load_stubs(root):
    stubs = []
    mdir = root / "mappings"
    for f in sorted(mdir.rglob("*.json")):
        if any(part.startswith(".") for part in f.relative_to(mdir).parts):
            continue
        try:
            j = json.loads(f.read_text(encoding="utf-8"))
        except Exception:
            continue
        items = j.get("mappings", [j]) if isinstance(j, dict) else []
        for i, s in enumerate(items):
            if isinstance(s, dict) and "request" in s:
                stubs.append((f"{f.relative_to(mdir)}#{i}", s))
    return stubs


def static_body(root, stub):
    r = stub.get("response") or {}
    if "body" in r:
        return r["body"].encode() if isinstance(r["body"], str) else None
    if "jsonBody" in r:
        return None
    if "base64Body" in r:
        return base64.b64decode(r["base64Body"])
    if "bodyFileName" in r:
        try:
            return (root / "__files" / r["bodyFileName"]).read_bytes()
        except Exception:
            return None
    return b""


def build_plan(root):
    """(label, request, stub origin or None, stub or None) in the order they are sent,
    plus the list of (origin, reason) skipped."""
    stubs = load_stubs(root)
    plan, skipped = [], []
    scenario = collections.OrderedDict()
    for origin, s in stubs:
        if s.get("scenarioName"):
            scenario.setdefault(s["scenarioName"], []).append((origin, s))
            continue
        try:
            plan.append(("stub", derive(s), origin, s))
        except Skip as e:
            skipped.append((origin, str(e)))
    if scenario:
        plan.append(("reset-scenarios", None, None, None))
    for name, members in scenario.items():
        state, left, guard = "Started", list(members), 0
        while left and guard < 50:
            guard += 1
            nxt = next(((o, s) for o, s in left if s.get("requiredScenarioState", state) == state), None)
            if nxt is None:
                break
            left.remove(nxt)
            try:
                plan.append(("scenario", derive(nxt[1]), nxt[0], nxt[1]))
            except Skip as e:
                skipped.append((nxt[0], str(e)))
                continue
            state = nxt[1].get("newScenarioState") or state
        for o, s in left:  # states never reached: still ask, answers must agree too
            try:
                plan.append(("scenario", derive(s), o, s))
            except Skip as e:
                skipped.append((o, str(e)))
    fdir = root / "__files"
    if fdir.is_dir():
        for f in sorted(p for p in fdir.rglob("*") if p.is_file()):
            rel = f.relative_to(fdir).as_posix()
            plan.append(("webroot", {"method": "GET", "url": "/" + urllib.parse.quote(rel), "headers": [], "body": b""}, None, None))
    nomatch = [
        {"method": "GET", "url": "/corpus-compat/no-such-path", "headers": [], "body": b""},
        {"method": "POST", "url": "/corpus-compat/no-such-path?x=1", "headers": [("Content-Type", "application/json")], "body": b'{"nothing": "matches"}'},
    ]
    first = next((p for p in plan if p[0] == "stub"), None)
    if first:  # a near miss: the first stub's URL with a method nobody uses
        nomatch.append({"method": "PATCH", "url": first[1]["url"].split("?")[0] + "/corpus-compat-extra", "headers": [], "body": b""})
    for r in nomatch:
        plan.append(("nomatch", r, None, None))
    return stubs, plan, skipped


# ---------------------------------------------------------------- servers

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def send(port, r, timeout=15):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.putrequest(r["method"], r["url"], skip_host=any(k.lower() == "host" for k, _ in r["headers"]), skip_accept_encoding=True)
        for k, v in r["headers"]:
            conn.putheader(k, v)
        if r["body"] or r["method"] in ("POST", "PUT", "PATCH"):
            conn.putheader("Content-Length", str(len(r["body"])))
        conn.endheaders(r["body"] or None)
        resp = conn.getresponse()
        body = resp.read()
        headers = collections.defaultdict(list)
        for k, v in resp.getheaders():
            headers[k.lower()].append(v)
        return {"status": resp.status, "headers": dict(headers), "body": body}
    except Exception as e:
        return {"status": f"error:{type(e).__name__}", "headers": {}, "body": b""}
    finally:
        conn.close()


class StartFailed(Exception):
    def __init__(self, what, log):
        text = log.read_text(errors="replace") if log.exists() else ""
        lines = [l for l in text.splitlines() if l.strip() and not l.startswith("\tat ")]
        self.tail = "\n".join(lines[-12:])
        super().__init__(f"{what} did not start: {self.tail[-300:]}")


def wait_up(port, proc, what, log):
    deadline = time.time() + 90
    while time.time() < deadline:
        if proc.poll() is not None:
            raise StartFailed(what, log)
        try:
            if send(port, {"method": "GET", "url": "/__admin/mappings", "headers": [], "body": b""}, 2)["status"] == 200:
                return
        except Exception:
            pass
        time.sleep(0.2)
    proc.kill()
    raise StartFailed(what, log)


def start(kind, exe, root, logdir):
    port = free_port()
    log = logdir / f"{kind}.log"
    if kind == "wiremock":
        cmd = ["java", "-jar", exe, "--port", str(port), "--bind-address", "127.0.0.1", "--root-dir", str(root), "--disable-banner"]
    else:
        cmd = [exe, "serve", "--root-dir", str(root), "--port", str(port), "--bind-address", "127.0.0.1"]
    proc = subprocess.Popen(cmd, stdout=open(log, "wb"), stderr=subprocess.STDOUT)
    wait_up(port, proc, kind, log)
    return proc, port


# ---------------------------------------------------------------- compare

def label(r):
    return f"{r['method']} {r['url']}"


def json_tokens(b):
    try:
        return json.loads(b, object_pairs_hook=lambda pairs: ("obj", pairs))
    except Exception:
        return None


def compare(kind, stub, wm, dc):
    """(problems, normalised): what differs, and whether JSON whitespace was ignored."""
    problems = []
    if wm["status"] != dc["status"]:
        problems.append(f"status {wm['status']} vs {dc['status']}")
    normalised = False
    if wm["body"] != dc["body"]:
        resp = (stub or {}).get("response") or {}
        if "jsonBody" in resp and wm["status"] == dc["status"] and json_tokens(wm["body"]) is not None \
                and json_tokens(wm["body"]) == json_tokens(dc["body"]):
            normalised = True
        else:
            problems.append("body")
    names = {"content-type"}
    for k in ((stub or {}).get("response") or {}).get("headers") or {}:
        names.add(k.lower())
    for n in sorted(names):
        if wm["headers"].get(n) != dc["headers"].get(n):
            problems.append(f"header {n}: {wm['headers'].get(n)} vs {dc['headers'].get(n)}")
    return problems, normalised


def guess(root, stubs, kind, stub, wm, dc, problems):
    """A reason guess for one difference: what mechanism most likely explains it."""
    resp = (stub or {}).get("response") or {}
    tr = resp.get("transformers") or []
    text = json.dumps(resp)
    if isinstance(wm["status"], str) or isinstance(dc["status"], str):
        return "fault / connection behaviour"
    if kind == "webroot":
        return "__files web root (GET of a file under __files/)"
    if kind == "nomatch":
        if wm["status"] == dc["status"] == 404:
            return "no-match report (404 body/headers)"
        return "request that should match nothing"
    if wm["status"] != dc["status"]:
        if 404 in (wm["status"], dc["status"]):
            who = "decoy" if dc["status"] == 404 else "WireMock"
            unknown = [t for t in tr if t != "response-template"]
            if unknown:
                return f"stub naming unknown transformer {unknown} (one engine serves it, the other does not)"
            return f"matching: only {'WireMock' if who == 'decoy' else 'decoy'} matched the derived request"
        return "status differs"
    only_headers = all(p.startswith("header") for p in problems)
    if only_headers:
        return "response headers: " + ", ".join(sorted({p.split(':')[0][7:] for p in problems}))
    # which stub's static body each engine sent
    def owners(body):
        parsed = json_tokens(body)
        out = []
        for o, s in stubs:
            r = s.get("response") or {}
            if "jsonBody" in r:
                if parsed is not None and parsed == json_tokens(json.dumps(r["jsonBody"]).encode()):
                    out.append(o)
            elif static_body(root, s) == body:
                out.append(o)
        return out
    owners_wm, owners_dc = owners(wm["body"]), owners(dc["body"])
    if owners_wm and owners_dc and not set(owners_wm) & set(owners_dc):
        return "stub selection: engines chose different stubs (tie-breaking between equal-priority stubs?)"
    if "response-template" in tr or "{{" in text:
        if re.search(r"randomValue|now|uuid|random|date", text, re.I):
            return "templating with a random/time helper (nondeterministic)"
        return "response templating output"
    if tr:
        return f"stub naming transformer(s) {tr}"
    if "jsonBody" in resp:
        return "jsonBody serialisation"
    if "bodyFileName" in resp:
        return "bodyFileName body"
    return "body differs"


def short(b, n=160):
    s = b.decode("utf-8", "replace") if isinstance(b, bytes) else str(b)
    s = s.replace("\n", "\\n")
    return s if len(s) <= n else s[:n] + f"... ({len(s)} chars)"


def run_repo(root, args, allow, logdir):
    stubs, plan, skipped = build_plan(root)
    work = pathlib.Path(tempfile.mkdtemp(prefix="corpus-", dir=logdir))
    # each engine gets its own copy, so neither sees files the other writes
    wm_root, dc_root = work / "wm", work / "dc"
    shutil.copytree(root, wm_root, ignore=shutil.ignore_patterns("LICENSE"))
    shutil.copytree(root, dc_root, ignore=shutil.ignore_patterns("LICENSE"))
    up = {}
    for kind, exe, r in (("wiremock", args.wiremock, wm_root), ("decoy", args.decoy, dc_root)):
        try:
            up[kind] = start(kind, exe, r, work)
        except StartFailed as e:
            up[kind] = e
    repo = root.name
    if any(isinstance(v, StartFailed) for v in up.values()):
        # Refusing a root directory is an answer too: it must be the same.
        for v in up.values():
            if not isinstance(v, StartFailed):
                v[0].terminate()
                v[0].wait(10)
        fail = {k: isinstance(v, StartFailed) for k, v in up.items()}
        same = fail["wiremock"] and fail["decoy"]
        res = dict(kind="startup", request="(start with this root directory)", origin=None, stub=None,
                   wm={"status": "refused to start" if fail["wiremock"] else "started", "headers": {},
                       "body": (up["wiremock"].tail if fail["wiremock"] else "").encode()},
                   dc={"status": "refused to start" if fail["decoy"] else "started", "headers": {},
                       "body": (up["decoy"].tail if fail["decoy"] else "").encode()},
                   problems=[] if same else ["startup"], normalised=False, req_body=b"", req_headers=[])
        res["reason"] = None if same else "startup: one engine refuses this root directory, the other serves it"
        res["allowed"] = not same and (repo, res["request"]) in allow
        return stubs, skipped, [res]
    (wm_proc, wm_port), (dc_proc, dc_port) = up["wiremock"], up["decoy"]
    results = []
    try:
        for kind, r, origin, stub in plan:
            if kind == "reset-scenarios":
                for port in (wm_port, dc_port):
                    send(port, {"method": "POST", "url": "/__admin/scenarios/reset", "headers": [], "body": b""})
                continue
            wm = send(wm_port, r)
            dc = send(dc_port, r)
            problems, normalised = compare(kind, stub, wm, dc)
            results.append(dict(kind=kind, request=label(r), origin=origin, stub=stub, wm=wm, dc=dc,
                                problems=problems, normalised=normalised,
                                req_body=r["body"], req_headers=r["headers"]))
    finally:
        for p in (wm_proc, dc_proc):
            p.terminate()
        for p in (wm_proc, dc_proc):
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
    for res in results:
        res["reason"] = guess(root, stubs, res["kind"], res["stub"], res["wm"], res["dc"], res["problems"]) if res["problems"] else None
        res["allowed"] = bool(res["problems"]) and (repo, res["request"]) in allow
    return stubs, skipped, results


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--wiremock", default=os.environ.get("WIREMOCK_JAR"), help="wiremock-standalone-3.13.2.jar")
    ap.add_argument("--decoy", default=os.environ.get("DECOY"), help="the decoy binary")
    ap.add_argument("--corpus", default=str(CORPUS))
    ap.add_argument("--only", action="append", help="only this corpus folder (repeatable)")
    ap.add_argument("--samples", type=int, default=2, help="samples printed per category")
    ap.add_argument("--report", help="write every difference as JSON to this file")
    ap.add_argument("--keep-logs", action="store_true")
    args = ap.parse_args()
    if not args.wiremock or not args.decoy:
        ap.error("give --wiremock JAR and --decoy BINARY (or WIREMOCK_JAR / DECOY)")
    corpus = pathlib.Path(args.corpus)
    allow = set()
    kd = corpus / "known-differences.json"
    if kd.exists():
        for e in json.loads(kd.read_text()):
            allow.add((e["repo"], e["request"]))
    logdir = pathlib.Path(tempfile.mkdtemp(prefix="corpus-compat-"))
    folders = sorted(p for p in corpus.iterdir() if (p / "mappings").is_dir())
    if args.only:
        folders = [p for p in folders if p.name in args.only]
    totals = collections.Counter()
    by_reason = collections.defaultdict(list)
    report = []
    failing = 0
    print(f"{'repo':58} {'stubs':>5} {'skip':>4} {'reqs':>5} {'same':>5} {'json-ws':>7} {'diff':>5} {'allowed':>7}  same%")
    for root in folders:
        try:
            stubs, skipped, results = run_repo(root, args, allow, logdir)
        except Exception as e:
            print(f"{root.name:58} ERROR {e}")
            failing += 1
            continue
        n = len(results)
        diff = [r for r in results if r["problems"]]
        allowed = [r for r in diff if r["allowed"]]
        same = n - len(diff)
        ws = sum(1 for r in results if r["normalised"] and not r["problems"])
        pct = 100.0 * same / n if n else 100.0
        print(f"{root.name:58} {len(stubs):5} {len(skipped):4} {n:5} {same:5} {ws:7} {len(diff):5} {len(allowed):7}  {pct:5.1f}")
        totals.update(stubs=len(stubs), skipped=len(skipped), requests=n, same=same, ws=ws, diff=len(diff), allowed=len(allowed))
        failing += len(diff) - len(allowed)
        for r in diff:
            by_reason[r["reason"]].append((root.name, r))
            report.append({"repo": root.name, "request": r["request"], "kind": r["kind"], "stub": r["origin"],
                           "reason": r["reason"], "problems": r["problems"], "allowed": r["allowed"],
                           "request_headers": r["req_headers"], "request_body": short(r["req_body"], 2000),
                           "wiremock": {"status": r["wm"]["status"], "headers": r["wm"]["headers"], "body": short(r["wm"]["body"], 4000)},
                           "decoy": {"status": r["dc"]["status"], "headers": r["dc"]["headers"], "body": short(r["dc"]["body"], 4000)}})
        if args.report:
            for o, why in skipped:
                report.append({"repo": root.name, "skipped": o, "reason": why})
    t = totals
    pct = 100.0 * t["same"] / t["requests"] if t["requests"] else 100.0
    print(f"{'TOTAL':58} {t['stubs']:5} {t['skipped']:4} {t['requests']:5} {t['same']:5} {t['ws']:7} {t['diff']:5} {t['allowed']:7}  {pct:5.1f}")
    if by_reason:
        print("\nDifferences by reason (guessed from the stub and the two answers):")
        for reason, items in sorted(by_reason.items(), key=lambda kv: -len(kv[1])):
            repos = collections.Counter(repo for repo, _ in items)
            print(f"\n  {len(items):4}  {reason}")
            print("        repos: " + ", ".join(f"{k} ({v})" for k, v in repos.most_common()))
            for repo, r in items[: args.samples]:
                print(f"        e.g. [{repo}] {r['request']}  (stub {r['origin']})  {'; '.join(r['problems'])}")
                print(f"             WireMock {r['wm']['status']}: {short(r['wm']['body'])}")
                print(f"             decoy    {r['dc']['status']}: {short(r['dc']['body'])}")
    if args.report:
        pathlib.Path(args.report).write_text(json.dumps(report, indent=1, default=str))
    if not args.keep_logs:
        shutil.rmtree(logdir, ignore_errors=True)
    else:
        print(f"\nlogs: {logdir}")
    if failing:
        print(f"\n{failing} answer(s) differ and are not in {kd.name}")
    sys.exit(1 if failing else 0)


if __name__ == "__main__":
    main()
