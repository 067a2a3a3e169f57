#!/usr/bin/env python3
"""The live dashboard (/__admin/dashboard) in a real headless Chromium, driven by Selenium.

Starts decoy with --admin-token on a root of 10,000 generated stubs plus a few
hand-written ones (one of them rejected at load, one in a scenario, one templated
by the bundled response-template plugin), and checks each view against the admin
API: signing in with the token, the overview's counters moving while requests are
sent, the rejected mapping shown with its file, field and reason, searching the
mappings, the journal filtered to unmatched requests, a near miss opened, a
request copied as curl, a stub created from a journal entry and then answering,
a scenario whose name has a space set and reset, a failed call shown in the error
banner, the plugin's counters. The lists hold 10,000 rows each
and the test checks they stay virtual (only the visible rows are in the page).
A screenshot of each view is saved in the output directory.

Usage: tests/dashboard/test_dashboard.py path/to/decoy [output-dir]
Prints "skipped: <reason>" and exits 0 when Chromium, its driver or Selenium is
missing; exits non-zero when a check fails.
"""
import http.client
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

TOKEN = "s3cret-token"
STUBS = 10_000
WAIT = 30  # seconds: generous, only so a broken page cannot hang the run


def skip(reason):
    print(f"skipped: {reason}")
    sys.exit(0)


try:
    from selenium import webdriver
    from selenium.common.exceptions import StaleElementReferenceException, TimeoutException
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select, WebDriverWait
except ImportError:
    skip("the Python package selenium is not installed")

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")


class Decoy:
    """A decoy process on a free port, with the admin token."""

    def __init__(self, program, root):
        self.log = open(os.path.join(root, "decoy.log"), "w+")
        self.proc = subprocess.Popen(
            [program, "serve", "--root-dir", root, "--port", "0",
             "--bind-address", "127.0.0.1", "--admin-token", TOKEN,
             "--max-request-journal-entries", str(STUBS)],
            stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 120
        self.port = None
        while self.port is None:
            if self.proc.poll() is not None or time.time() > deadline:
                self.log.seek(0)
                raise SystemExit("decoy did not start:\n" + self.log.read())
            self.log.seek(0)
            m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", self.log.read())
            if m:
                self.port = int(m.group(1))
            else:
                time.sleep(0.2)
        self.base = f"http://127.0.0.1:{self.port}"

    def request(self, method, path, body=None, token=TOKEN):
        req = urllib.request.Request(self.base + path, method=method,
                                     data=body.encode() if body is not None else None)
        if token:
            req.add_header("Authorization", "Bearer " + token)
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()

    def admin(self, path, method="GET", body=None):
        status, text = self.request(method, "/__admin" + path, body)
        assert status == 200, f"{method} /__admin{path}: {status} {text}"
        return json.loads(text) if text else {}

    def matched_total(self):
        _, text = self.request("GET", "/__admin/metrics")
        m = re.search(r'decoy_requests_total\{transport="http",outcome="matched"\} (\d+)', text)
        return int(m.group(1))

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def send_many(port, paths, threads=4):
    """Sends GETs over keep-alive connections; returns nothing, raises on errors."""
    errors = []

    def worker(chunk):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        try:
            for p in chunk:
                conn.request("GET", p)
                conn.getresponse().read()
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)
        finally:
            conn.close()

    chunks = [paths[i::threads] for i in range(threads)]
    ts = [threading.Thread(target=worker, args=(c,)) for c in chunks]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors


def write_root(root):
    os.makedirs(os.path.join(root, "mappings"))
    generated = [{
        "name": f"generated {i}",
        "request": {"method": "GET", "url": f"/gen/{i}"},
        "response": {"status": 200, "body": f"gen {i}"},
        "metadata": {"batch": "load", "n": i},
    } for i in range(STUBS)]
    with open(os.path.join(root, "mappings", "generated.json"), "w") as f:
        json.dump({"mappings": generated}, f)
    hand = [
        {"name": "hello", "request": {"method": "GET", "url": "/hello"},
         "response": {"status": 200, "body": "hi"}, "metadata": {"team": "payments"}},
        # A helper (upper), so the plugin renders it and its calls count: a template of
        # plain request fields alone is rendered by decoy itself, with no plugin call.
        {"name": "templated", "request": {"method": "GET", "urlPath": "/greet"},
         "response": {"status": 200, "body": "hello {{upper request.query.who}}",
                      "transformers": ["response-template"]}},
        {"name": "add to cart", "scenarioName": "shopping cart",
         "requiredScenarioState": "Started", "newScenarioState": "Full",
         "request": {"method": "POST", "url": "/cart"}, "response": {"status": 200}},
        {"name": "checkout", "scenarioName": "shopping cart", "requiredScenarioState": "Full",
         "newScenarioState": "Paid",
         "request": {"method": "POST", "url": "/checkout"}, "response": {"status": 200}},
    ]
    with open(os.path.join(root, "mappings", "hand.json"), "w") as f:
        json.dump({"mappings": hand}, f)
    with open(os.path.join(root, "mappings", "broken.json"), "w") as f:
        json.dump({"request": {"method": "GET", "url": "/broken",
                               "headers": {"Accept": {"equalTO": "x"}}},
                   "response": {"status": 200}}, f)


class Page:
    def __init__(self, driver, out):
        self.d = driver
        self.out = out

    def wait(self, what, cond):
        try:
            # Lists are re-rendered each second, so an element found a moment ago may
            # be gone: that is one more poll, not a failure.
            return WebDriverWait(self.d, WAIT, poll_frequency=0.2,
                                 ignored_exceptions=(StaleElementReferenceException,)
                                 ).until(lambda d: cond())
        except TimeoutException:
            self.shot("failure")
            raise AssertionError(f"timed out waiting for {what}") from None

    def el(self, id_):
        return self.d.find_element(By.ID, id_)

    def text(self, id_):
        return self.el(id_).text

    def rows(self, list_id):
        """The rows on screen as (data-id, text), read in one go (the list is
        re-rendered every second, so element references do not last)."""
        return [tuple(r) for r in self.d.execute_script(
            "return [...document.querySelectorAll(arguments[0])].map(r => [r.dataset.id, r.innerText])",
            f"#{list_id} .vrow[data-id]")]

    def click_row(self, list_id, text_part):
        """Clicks the first row on screen whose text holds `text_part`."""
        def click():
            return self.d.execute_script(
                "const r = [...document.querySelectorAll(arguments[0])].find(r => r.innerText.includes(arguments[1]));"
                "if (r) r.click(); return !!r;", f"#{list_id} .vrow[data-id]", text_part)
        self.wait(f"a row with {text_part!r} in {list_id}", click)

    def go(self, view):
        self.d.execute_script(f"location.hash = '#{view}'")
        self.wait(f"the {view} view", lambda: self.el(f"view-{view}").is_displayed())

    def shot(self, name):
        path = os.path.join(self.out, f"dashboard-{name}.png")
        self.d.save_screenshot(path)
        print(f"  screenshot {path}")


def number(text):
    """A count as the page shows it ("1234", "12.3 k")."""
    t = text.replace("\u2013", "").strip()
    if t.endswith(" k"):
        return float(t[:-2]) * 1000
    return float(t) if t else -1


def main():
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    if not CHROMIUM or not DRIVER:
        skip("needs chromium and chromedriver (Debian: apt-get install chromium chromium-driver)")
    program = os.path.abspath(sys.argv[1])
    out = os.path.abspath(sys.argv[2] if len(sys.argv) > 2 else "target/dashboard-test")
    os.makedirs(out, exist_ok=True)
    root = tempfile.mkdtemp(prefix="decoy-dashboard-")
    write_root(root)
    server = Decoy(program, root)
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                "--disable-gpu", "--window-size=1400,900", f"--user-data-dir={root}/chrome"]:
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(DRIVER), options=options)
    driver.set_page_load_timeout(WAIT)
    page = Page(driver, out)
    try:
        run(server, page)
        print("dashboard: all checks passed")
    finally:
        driver.quit()
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


def run(server, page):
    d = page.d
    print("sign in: the API refuses without the token, the page asks for it")
    status, _ = server.request("GET", "/__admin/dashboard/api/live", token=None)
    assert status == 401, f"the dashboard's API answered {status} without the token"
    d.get(server.base + "/__admin/dashboard")
    page.wait("the login prompt", lambda: page.el("login").is_displayed())
    page.el("token").send_keys("wrong")
    page.el("login-button").click()
    page.wait("the refusal", lambda: "refused" in page.text("login-error"))
    page.el("token").clear()
    page.el("token").send_keys(TOKEN)
    page.el("login-button").click()
    page.wait("the login prompt to close", lambda: not page.el("login").is_displayed())
    page.wait("the live stream", lambda: page.text("connection") == "live")

    print("overview: counters move while requests are sent")
    page.wait("the first tick", lambda: number(page.text("http-matched")) >= 0)
    before = number(page.text("http-matched"))
    send_many(server.port, ["/hello"] * 200 + ["/greet?who=ann"] * 50 + ["/nowhere"] * 20)
    expected = server.matched_total()
    assert expected >= before + 250, (before, expected)
    page.wait(f"matched to reach {expected}",
              lambda: number(page.text("http-matched")) == expected)
    # The tick that shows the last matched request can come before the last
    # unmatched ones are answered (they end each sender's list): wait for them too.
    page.wait("unmatched to reach 20", lambda: number(page.text("http-unmatched")) >= 20)
    page.wait("a p99 figure", lambda: "µs" in page.text("http-p99") or "ms" in page.text("http-p99"))
    rate_drawn = d.execute_script(
        "return state.seconds.some(s => s.http.matched > 0)")
    assert rate_drawn, "no second with matched requests in the chart's data"
    page.wait("plugin calls", lambda: number(page.text("plugin-calls")) >= 50)
    page.shot("overview")

    print("mappings: the rejected file is shown with its field and reason; search; JSON")
    page.go("mappings")
    page.wait("the problem table", lambda: page.el("problems").is_displayed())
    problems = page.text("problems")
    api_problems = server.admin("/dashboard/api/problems")["problems"]
    assert len(api_problems) == 1, api_problems
    for part in ["mappings/broken.json", "request.headers.Accept.equalTO", "did you mean"]:
        assert part in problems, f"{part!r} not in the problem table: {problems}"
    total = server.admin("/dashboard/api/mappings?limit=1")["total"]
    assert total == STUBS + 4, total
    page.wait("the mapping count", lambda: page.text("mapping-count") == f"{total} mappings")
    page.wait("mapping rows", lambda: len(page.rows("mapping-list")) > 5)
    shown = len(d.find_elements(By.CSS_SELECTOR, "#mapping-list .vrow"))
    assert shown < 100, f"{shown} rows in the page for {total} mappings: the list is not virtual"
    d.execute_script("document.getElementById('mapping-list').scrollTop = 1e9")
    page.wait("the last generated mapping after scrolling to the end",
              lambda: any("generated 9999" in t for _, t in page.rows("mapping-list")))
    page.el("mapping-search").send_keys("payments")
    page.wait("one search result", lambda: page.text("mapping-count") == f"1 of {total} mappings")
    # The count can change before the list, still scrolled to the end, renders its row.
    page.wait("the search result's row", lambda: len(page.rows("mapping-list")) > 0)
    _, text = page.rows("mapping-list")[0]
    assert "/hello" in text, text
    api_hello = server.admin("/dashboard/api/mappings?q=payments")["items"][0]
    page.click_row("mapping-list", "/hello")
    page.wait("the mapping's JSON", lambda: '"payments"' in page.text("mapping-json"))
    page.wait("its hits", lambda: str(api_hello["hits"]) in page.text("mapping-facts"))
    page.shot("mappings")

    print("journal: 10,000 entries, filter unmatched, near miss, curl, stub from a request")
    send_many(server.port, [f"/gen/{i}" for i in range(STUBS)], threads=8)
    page.go("journal")
    page.wait("a full journal", lambda: page.text("journal-count") == f"{STUBS} requests in the journal")
    shown = len(d.find_elements(By.CSS_SELECTOR, "#journal-list .vrow"))
    assert shown < 100, f"{shown} rows in the page for {STUBS} entries: the list is not virtual"
    send_many(server.port, ["/orders/77?x=1"])
    page.el("journal-pause").click()
    Select(page.el("journal-filter")).select_by_value("unmatched")
    unmatched = server.admin("/dashboard/api/journal?filter=unmatched&limit=1")["total"]
    page.wait("only unmatched rows",
              lambda: page.text("journal-count") == f"{unmatched} requests in the journal")
    # The count can change before the list renders its rows.
    page.wait("unmatched rows on screen", lambda: page.rows("journal-list"))
    rows = page.rows("journal-list")
    assert all("unmatched" in t for _, t in rows), rows
    send_many(server.port, ["/paused-request"])
    time.sleep(2.5)  # two ticks: a paused list must not take the new entry in
    assert not any("/paused-request" in t for _, t in page.rows("journal-list")), "paused list moved"
    page.el("journal-pause").click()
    page.wait("the list to move again after resuming",
              lambda: any("/paused-request" in t for _, t in page.rows("journal-list")))
    page.click_row("journal-list", "/orders/77")
    page.wait("the near-miss report", lambda: "Request was not matched" in page.text("near-miss"))
    assert "/orders/77" in page.text("near-miss")
    page.el("copy-curl").click()
    page.wait("the curl command", lambda: page.el("curl-text").is_displayed())
    curl = page.el("curl-text").get_attribute("value")
    assert curl.startswith("curl ") and f"127.0.0.1:{server.port}/orders/77?x=1" in curl, curl
    page.shot("journal")
    page.el("make-stub").click()
    page.wait("the stub editor", lambda: page.el("stub-editor").is_displayed())
    editor = page.el("stub-editor")
    stub = json.loads(editor.get_attribute("value"))
    assert stub["request"] == {"method": "GET", "url": "/orders/77?x=1"}, stub
    stub["response"] = {"status": 202, "body": "made from the journal"}
    d.execute_script("arguments[0].value = arguments[1]", editor, json.dumps(stub, indent=2))
    page.el("stub-save").click()
    page.wait("the stub to be created", lambda: "Stub created" in page.text("stub-result"))
    status, body = server.request("GET", "/orders/77?x=1", token=None)
    assert (status, body) == (202, "made from the journal"), (status, body)
    page.shot("journal-stub")

    print("scenarios: state shown, set and reset")
    page.go("scenarios")
    page.wait("the shopping cart scenario", lambda: len(d.find_elements(By.CSS_SELECTOR, "tr[data-scenario='shopping cart']")) == 1)
    row = d.find_element(By.CSS_SELECTOR, "tr[data-scenario='shopping cart']")
    assert row.find_element(By.CLASS_NAME, "scenario-state").text == "Started"
    Select(row.find_element(By.TAG_NAME, "select")).select_by_visible_text("Full")
    row.find_element(By.CLASS_NAME, "scenario-set").click()  # the table is static until then
    page.wait("state Full in the API", lambda: scenario_state(server) == "Full")
    page.wait("state Full in the page", lambda: d.find_element(
        By.CSS_SELECTOR, "tr[data-scenario='shopping cart'] .scenario-state").text == "Full")
    page.shot("scenarios")
    d.find_element(By.CSS_SELECTOR, "tr[data-scenario='shopping cart'] .scenario-reset").click()
    page.wait("state Started again", lambda: scenario_state(server) == "Started")
    # (The name has a space: set and reset go through an encoded path.)

    print("a failed call is shown, not swallowed")
    d.execute_script("api('/scenarios/' + encodeURIComponent('no such scenario') + '/state',"
                     " { method: 'PUT', headers: { 'Content-Type': 'application/json' }, body: '{}' })")
    page.wait("the error banner", lambda: page.el("error-banner").is_displayed())
    shown = page.text("error-text")
    assert "404" in shown and "Scenario no such scenario does not exist" in shown, shown
    page.el("error-close").click()
    page.wait("the banner dismissed", lambda: not page.el("error-banner").is_displayed())

    print("plugins: calls and failures as the API counts them")
    page.go("plugins")
    page.wait("the response-template row", lambda: len(d.find_elements(
        By.CSS_SELECTOR, "tr[data-plugin='response-template']")) == 1)
    api_plugin = next(p for p in server.admin("/dashboard/api/plugins")["plugins"]
                      if p["name"] == "response-template")
    assert api_plugin["calls"] >= 50, api_plugin
    # The table is redrawn each second: its cells are read in one go.
    cells = d.execute_script(
        "return [...document.querySelectorAll(\"tr[data-plugin='response-template'] td\")].map(c => c.innerText)")
    assert cells[4] == str(api_plugin["calls"]), (cells, api_plugin)
    assert cells[5] == str(api_plugin["failures"]), (cells, api_plugin)
    page.shot("plugins")

    page.go("overview")
    time.sleep(1.5)
    page.shot("overview-after")


def scenario_state(server):
    for s in server.admin("/scenarios")["scenarios"]:
        if s["name"] == "shopping cart":
            return s["state"]
    return None


if __name__ == "__main__":
    main()
