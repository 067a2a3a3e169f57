// decoy's live dashboard: plain JavaScript, no framework, no build step.
//
// Data comes from decoy's admin API: the event stream /__admin/dashboard/events
// (the last five minutes of per-second figures, then one tick a second), paged
// lists under /__admin/dashboard/api/, and WireMock's own endpoints for what they
// already do (a journal entry, scenarios, creating a stub). When decoy runs with
// --admin-token every call carries "Authorization: Bearer <token>"; the token is
// asked for when a call is refused and kept in sessionStorage (this tab only).
// The stream is read with fetch() rather than EventSource, which cannot send that
// header. Long lists are virtual: only the visible rows exist in the page, and they
// are fetched a page at a time, so 10,000 mappings or journal entries stay quick.
'use strict';

const API = '/__admin';
const HISTORY = 300;
const $ = (id) => document.getElementById(id);

const state = {
  token: sessionStorage.getItem('decoy-token') || '',
  view: 'overview',
  seconds: [],
  totals: null,
  mappingsVersion: null,
  journalRecorded: null,
  journalPaused: false,
  stream: null,
  selectedRequest: null,
};

class Unauthorized extends Error {}

function authHeaders(extra) {
  const h = Object.assign({}, extra || {});
  if (state.token) h.Authorization = 'Bearer ' + state.token;
  return h;
}

// Every admin call goes through api(), and any that fails (no answer, or an answer
// that is not 2xx) is shown in the error banner with what was asked and decoy's
// reason, so an action that did not happen never looks as if it did. 401 opens the
// login prompt instead. A caller that shows the failure itself passes
// { report: false }. Writes are same-origin fetches with a JSON body typed
// application/json, which is what the admin API takes from a browser.
async function api(path, options, { report = true } = {}) {
  const o = Object.assign({}, options || {});
  o.headers = authHeaders(o.headers);
  const what = (o.method || 'GET') + ' ' + API + path;
  let res;
  try {
    res = await fetch(API + path, Object.assign(o, { credentials: 'same-origin' }));
  } catch (e) {
    if (report) showError(what + ': no answer from decoy (' + e.message + ')');
    throw e;
  }
  if (res.status === 401) {
    showLogin(state.token ? 'That token was refused.' : '');
    throw new Unauthorized(path);
  }
  if (!res.ok && report) showError(what + ': ' + res.status + ' ' + reason(await res.clone().text(), res.statusText));
  return res;
}

// decoy's reason from an error answer: WireMock's {"errors": [...]} document, or
// the text itself.
function reason(text, fallback) {
  try {
    return JSON.parse(text).errors.map((e) => (e.source && e.source.pointer ? e.source.pointer + ': ' : '') + (e.detail || e.title)).join('; ');
  } catch (e) {
    return text.trim() || fallback || '';
  }
}

function showError(message) {
  setText('error-text', message);
  $('error-banner').hidden = false;
}

$('error-close').addEventListener('click', () => { $('error-banner').hidden = true; });

async function apiJson(path, options) {
  const res = await api(path, options);
  const text = await res.text();
  if (!res.ok) throw new Error(res.status + ' ' + text);
  return text ? JSON.parse(text) : {};
}

// ---------- formatting ----------

function esc(s) {
  return String(s == null ? '' : s).replace(/[&<>"']/g, (c) => (
    { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }[c]));
}

function fmtCount(n) {
  if (n == null) return '–';
  if (n >= 1e9) return (n / 1e9).toFixed(2) + ' G';
  if (n >= 1e6) return (n / 1e6).toFixed(2) + ' M';
  if (n >= 1e4) return (n / 1e3).toFixed(1) + ' k';
  return String(n);
}

function fmtMicros(us) {
  if (us == null) return '–';
  if (us >= 1e6) return (us / 1e6).toFixed(2) + ' s';
  if (us >= 1e3) return (us / 1e3).toFixed(us >= 1e4 ? 0 : 1) + ' ms';
  return (us >= 100 ? us.toFixed(0) : us.toFixed(1)) + ' µs';
}

function fmtTime(iso) {
  if (!iso) return '';
  const d = new Date(iso);
  return d.toLocaleTimeString([], { hour12: false }) + '.' + String(d.getMilliseconds()).padStart(3, '0');
}

function fmtUptime(s) {
  if (s == null) return '–';
  const h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60);
  return h ? h + ' h ' + m + ' min' : m ? m + ' min ' + (s % 60) + ' s' : s + ' s';
}

function setText(id, v) { const el = $(id); if (el) el.textContent = v; }

// ---------- login ----------

function showLogin(message) {
  $('login').hidden = false;
  $('login-error').textContent = message || '';
  $('token').focus();
}

$('login-form').addEventListener('submit', async (ev) => {
  ev.preventDefault();
  state.token = $('token').value.trim();
  try {
    await apiJson('/dashboard/api/live');
  } catch (e) {
    return;
  }
  sessionStorage.setItem('decoy-token', state.token);
  $('login').hidden = true;
  $('logout').hidden = false;
  start();
});

$('logout').addEventListener('click', () => {
  sessionStorage.removeItem('decoy-token');
  state.token = '';
  if (state.stream) state.stream.abort();
  location.reload();
});

// ---------- live stream ----------

function setConnection(text, cls) {
  const el = $('connection');
  el.textContent = text;
  el.className = 'connection ' + (cls || '');
}

async function connect() {
  const ctrl = new AbortController();
  state.stream = ctrl;
  try {
    const res = await fetch(API + '/dashboard/events', { headers: authHeaders(), signal: ctrl.signal });
    if (res.status === 401) { showLogin('That token was refused.'); return; }
    if (!res.ok || !res.body) {
      showError('GET ' + API + '/dashboard/events: ' + res.status + ' ' + reason(await res.text(), res.statusText));
      throw new Error('event stream: ' + res.status);
    }
    setConnection('live', 'live');
    const reader = res.body.getReader();
    const decoder = new TextDecoder();
    let buffer = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let end;
      while ((end = buffer.indexOf('\n\n')) >= 0) {
        onEvent(buffer.slice(0, end));
        buffer = buffer.slice(end + 2);
      }
    }
  } catch (e) {
    if (ctrl.signal.aborted) return;
  }
  setConnection('disconnected, retrying…', 'down');
  setTimeout(connect, 2000);
}

function onEvent(block) {
  let name = 'message', data = '';
  for (const line of block.split('\n')) {
    if (line.startsWith('event:')) name = line.slice(6).trim();
    else if (line.startsWith('data:')) data += line.slice(5).trim();
  }
  if (!data) return;
  const msg = JSON.parse(data);
  if (name === 'history') {
    state.seconds = msg.seconds || [];
    drawOverview();
  } else if (name === 'tick') {
    const last = state.seconds[state.seconds.length - 1];
    if (!last || last.t !== msg.second.t) state.seconds.push(msg.second);
    while (state.seconds.length > HISTORY) state.seconds.shift();
    onTick(msg.totals);
  }
}

function onTick(totals) {
  state.totals = totals;
  drawOverview();
  const problems = totals.mappings.problems;
  $('problem-badge').hidden = problems === 0;
  $('problem-badge').textContent = problems;
  const banner = $('problem-banner');
  banner.hidden = problems === 0;
  if (problems) {
    banner.innerHTML = esc(problems) + ' mapping problem' + (problems === 1 ? '' : 's') +
      ': some stubs were rejected when their files were loaded. <a href="#mappings">See them in Mappings</a>.';
  }
  if (state.mappingsVersion !== totals.mappings.version) {
    const first = state.mappingsVersion === null;
    state.mappingsVersion = totals.mappings.version;
    if (!first && state.view === 'mappings') refreshMappings(false);
  }
  if (state.journalRecorded !== totals.journal.recorded) {
    state.journalRecorded = totals.journal.recorded;
    if (state.view === 'journal' && !state.journalPaused) journalList.refresh();
  }
  if (state.view === 'mappings') mappingList.refresh(); // hits and last hit, live
  if (state.view === 'plugins') loadPlugins();
}

// ---------- overview ----------

const COLORS = { matched: '#2563eb', unmatched: '#ea580c', p50: '#16a34a', p95: '#ca8a04', p99: '#dc2626', calls: '#7c3aed', failures: '#dc2626' };

function drawOverview() {
  const s = state.seconds;
  const last = s[s.length - 1];
  for (const side of ['http', 'mq']) {
    if (last) {
      const x = last[side];
      setText(side + '-rate', fmtCount(x.matched + x.unmatched));
      setText(side + '-p50', fmtMicros(x.p50));
      setText(side + '-p95', fmtMicros(x.p95));
      setText(side + '-p99', fmtMicros(x.p99));
    }
    if (state.totals) {
      setText(side + '-matched', fmtCount(state.totals[side].matched));
      setText(side + '-unmatched', fmtCount(state.totals[side].unmatched));
    }
    if (state.view !== 'overview') continue;
    drawChart($('chart-' + side + '-rate'), [
      { label: 'matched', color: COLORS.matched, values: s.map((x) => x[side].matched) },
      { label: 'unmatched', color: COLORS.unmatched, values: s.map((x) => x[side].unmatched) },
    ], fmtCount);
    drawChart($('chart-' + side + '-latency'), ['p50', 'p95', 'p99'].map((q) => (
      { label: q, color: COLORS[q], values: s.map((x) => x[side][q]) })), fmtMicros);
  }
  if (last) setText('plugin-rate', fmtCount(last.plugins.calls));
  if (state.totals) {
    const t = state.totals;
    setText('plugin-calls', fmtCount(t.plugins.calls));
    setText('plugin-failures', fmtCount(t.plugins.failures));
    $('plugin-failures').className = 'value' + (t.plugins.failures ? ' bad-text' : '');
    setText('mapping-totals', fmtCount(t.mappings.http) + ' / ' + fmtCount(t.mappings.mq));
    setText('journal-recorded', t.journal.enabled ? fmtCount(t.journal.recorded) : 'journal off');
    setText('uptime', fmtUptime(t.uptimeSeconds));
  }
  if (state.view === 'overview') {
    drawChart($('chart-plugins'), [
      { label: 'calls', color: COLORS.calls, values: s.map((x) => x.plugins.calls) },
      { label: 'failures', color: COLORS.failures, values: s.map((x) => x.plugins.failures) },
    ], fmtCount);
  }
}

// A line chart of the last HISTORY seconds, drawn on a canvas by hand: the newest
// second at the right edge, a null value leaves a gap.
function drawChart(canvas, series, fmt) {
  const dpr = window.devicePixelRatio || 1;
  const w = canvas.clientWidth, h = canvas.clientHeight;
  if (!w || !h) return;
  if (canvas.width !== Math.round(w * dpr) || canvas.height !== Math.round(h * dpr)) {
    canvas.width = Math.round(w * dpr);
    canvas.height = Math.round(h * dpr);
  }
  const g = canvas.getContext('2d');
  g.setTransform(dpr, 0, 0, dpr, 0, 0);
  g.clearRect(0, 0, w, h);
  const left = 60, right = 8, top = 18, bottom = 18;
  const pw = w - left - right, ph = h - top - bottom;
  let max = 0;
  for (const s of series) for (const v of s.values) if (v != null && v > max) max = v;
  max = niceMax(max);
  g.font = '11px system-ui, sans-serif';
  g.strokeStyle = '#e5e7eb';
  g.fillStyle = '#66707c';
  g.lineWidth = 1;
  g.textAlign = 'right';
  g.textBaseline = 'middle';
  for (let i = 0; i <= 4; i++) {
    const y = top + ph - (ph * i) / 4;
    g.beginPath(); g.moveTo(left, y); g.lineTo(left + pw, y); g.stroke();
    g.fillText(fmt((max * i) / 4), left - 6, y);
  }
  g.textAlign = 'left';
  g.textBaseline = 'alphabetic';
  g.fillText('−5 min', left, h - 4);
  g.textAlign = 'right';
  g.fillText('now', left + pw, h - 4);
  const step = pw / (HISTORY - 1);
  let lx = left;
  for (const s of series) {
    const n = s.values.length;
    g.strokeStyle = s.color;
    g.lineWidth = 1.5;
    g.beginPath();
    let pen = false;
    s.values.forEach((v, i) => {
      if (v == null) { pen = false; return; }
      const x = left + pw - (n - 1 - i) * step;
      const y = top + ph - (max ? (v / max) * ph : 0);
      if (pen) g.lineTo(x, y); else g.moveTo(x, y);
      pen = true;
    });
    g.stroke();
    g.fillStyle = s.color;
    g.textAlign = 'left';
    g.fillRect(lx, 5, 10, 3);
    g.fillText(s.label, lx + 13, 12);
    lx += 20 + g.measureText(s.label).width;
  }
}

function niceMax(v) {
  if (v <= 0) return 1;
  const p = Math.pow(10, Math.floor(Math.log10(v)));
  for (const m of [1, 2, 2.5, 5, 10]) if (v <= m * p) return m * p;
  return 10 * p;
}

// ---------- virtual list ----------

// Rows of fixed height, fetched a page at a time as they scroll into view.
class VirtualList {
  constructor(el, cls, fetchPage, renderRow, onSelect) {
    this.el = el;
    this.cls = cls;
    this.fresh = new Map();
    this.loading = new Set();
    this.fetchPage = fetchPage;
    this.renderRow = renderRow;
    this.onSelect = onSelect;
    this.rowHeight = 28;
    this.pageSize = 100;
    this.spacer = document.createElement('div');
    this.spacer.className = 'vspacer';
    this.rows = document.createElement('div');
    el.append(this.spacer, this.rows);
    this.generation = 0;
    this.pages = new Map();
    this.total = 0;
    this.selected = null;
    el.addEventListener('scroll', () => this.render());
    window.addEventListener('resize', () => this.render());
    this.rows.addEventListener('click', (ev) => {
      const row = ev.target.closest('.vrow');
      if (!row || row.dataset.index === undefined) return;
      const item = this.item(Number(row.dataset.index));
      if (!item) return;
      this.selected = item.id;
      this.render();
      this.onSelect(item);
    });
  }

  item(i) {
    const page = this.pages.get(Math.floor(i / this.pageSize));
    return page ? page[i % this.pageSize] : undefined;
  }

  visibleRange() {
    const first = Math.max(0, Math.floor(this.el.scrollTop / this.rowHeight) - 2);
    const count = Math.ceil((this.el.clientHeight || 600) / this.rowHeight) + 4;
    return [first, Math.min(this.total, first + count)];
  }

  // Drops what was fetched and fetches the visible rows again, keeping the scroll.
  refresh() {
    this.generation++;
    this.fresh = new Map();
    this.loading = new Set();
    this.load(Math.floor(this.visibleRange()[0] / this.pageSize));
  }

  // Starts over at the top (a new search or filter).
  reset() {
    this.el.scrollTop = 0;
    this.pages = new Map();
    this.total = 0;
    this.refresh();
  }

  async load(p) {
    if (this.loading.has(p)) return;
    this.loading.add(p);
    const generation = this.generation;
    try {
      const r = await this.fetchPage(p * this.pageSize, this.pageSize);
      if (generation !== this.generation) return;
      if (this.fresh.size === 0) this.pages = new Map();
      this.fresh.set(p, true);
      this.total = r.total;
      this.pages.set(p, r.items);
      this.render();
    } catch (e) {
      if (!(e instanceof Unauthorized)) console.error(e);
    } finally {
      this.loading.delete(p);
    }
  }

  render() {
    this.spacer.style.height = this.total * this.rowHeight + 'px';
    const [a, b] = this.visibleRange();
    let html = '';
    for (let i = a; i < b; i++) {
      const p = Math.floor(i / this.pageSize);
      if (!this.fresh.has(p)) this.load(p);
      const it = this.item(i);
      const top = i * this.rowHeight;
      if (!it) {
        html += '<div class="vrow loading" style="top:' + top + 'px"><span>…</span></div>';
        continue;
      }
      const cls = 'vrow ' + this.cls + (it.id === this.selected ? ' selected' : '');
      html += '<div class="' + cls + '" data-index="' + i + '" data-id="' + esc(it.id) + '" style="top:' + top + 'px">' + this.renderRow(it) + '</div>';
    }
    this.rows.innerHTML = html;
  }
}

// ---------- mappings ----------

const mappingList = new VirtualList($('mapping-list'), 'mapping-cols mapping-row',
  (offset, limit) => apiJson('/dashboard/api/mappings?offset=' + offset + '&limit=' + limit +
    '&q=' + encodeURIComponent($('mapping-search').value)).then((r) => {
    setText('mapping-count', r.total === r.all ? r.all + ' mappings' : r.total + ' of ' + r.all + ' mappings');
    return r;
  }),
  (m) => '<span>' + esc(m.kind.toUpperCase()) + '</span><span>' + esc(m.method) + '</span><span title="' + esc(m.urlKind) + '">' + esc(m.url) +
    '</span><span>' + esc(m.name || '') + '</span><span>' + esc(m.file || '(admin API)') + (m.index != null && m.file ? ' [' + m.index + ']' : '') +
    '</span><span class="num">' + fmtCount(m.hits) + '</span><span class="num">' + fmtMicros(m.meanLatencyMicros) +
    '</span><span>' + esc(m.lastHit ? fmtTime(m.lastHit) : '') + '</span>',
  showMapping);

let searchTimer = null;
$('mapping-search').addEventListener('input', () => {
  clearTimeout(searchTimer);
  searchTimer = setTimeout(() => mappingList.reset(), 200);
});

async function refreshMappings(fromTop) {
  if (fromTop) mappingList.reset(); else mappingList.refresh();
  try {
    const p = await apiJson('/dashboard/api/problems');
    const box = $('problems');
    box.hidden = p.problems.length === 0 && p.warnings.length === 0;
    const rows = (list) => list.map((x) => '<tr><td><code>' + esc(x.file) + '</code></td><td>' +
      esc(x.mapping ? (x.mapping.kind === 'connection' ? 'connection ' : '') + '#' + x.mapping.index + (x.mapping.id ? ' id ' + x.mapping.id : '') + (x.mapping.name ? ' "' + x.mapping.name + '"' : '') : '(whole file)') +
      '</td><td><code>' + esc(x.field || '') + '</code></td><td>' + esc(x.reason) + '</td></tr>').join('');
    let html = '';
    if (p.problems.length) {
      html += '<h2>' + p.problems.length + ' mapping' + (p.problems.length === 1 ? ' was' : 's were') +
        ' rejected (the rest are served)</h2><table id="problem-table"><tr><th>file</th><th>mapping</th><th>field</th><th>reason</th></tr>' + rows(p.problems) + '</table>';
    }
    if (p.warnings.length) {
      html += '<details><summary>' + p.warnings.length + ' warning' + (p.warnings.length === 1 ? '' : 's') +
        ' (served, but not entirely as written)</summary><table><tr><th>file</th><th>mapping</th><th>field</th><th>reason</th></tr>' + rows(p.warnings) + '</table></details>';
    }
    box.innerHTML = html;
  } catch (e) { /* the login prompt is up */ }
}

async function showMapping(row) {
  const d = await apiJson('/dashboard/api/mappings/' + encodeURIComponent(row.id));
  const m = d.row;
  $('mapping-detail').hidden = false;
  setText('mapping-title', (m.name || m.id));
  const facts = [['id', m.id], ['kind', m.kind], ['match', m.method + ' ' + m.urlKind + ' ' + m.url], ['file', (m.file || '(admin API)') + (m.index != null ? ' [' + m.index + ']' : '')],
    ['priority', m.priority], ['hits', m.hits], ['mean processing', fmtMicros(m.meanLatencyMicros)], ['last hit', m.lastHit || 'never']];
  if (m.connection) facts.push(['connection', m.connection]);
  $('mapping-facts').innerHTML = facts.map(([k, v]) => '<dt>' + esc(k) + '</dt><dd>' + esc(v) + '</dd>').join('');
  setText('mapping-json', JSON.stringify(d.json, null, 2));
}

// ---------- journal ----------

const journalList = new VirtualList($('journal-list'), 'journal-cols journal-row',
  (offset, limit) => apiJson('/dashboard/api/journal?offset=' + offset + '&limit=' + limit + '&filter=' + $('journal-filter').value).then((r) => {
    setText('journal-count', r.enabled ? r.total + ' requests in the journal' : 'the request journal is disabled');
    return r;
  }),
  (e) => '<span>' + esc(fmtTime(e.loggedDate)) + '</span><span>' + esc(e.method) + '</span><span>' + esc(e.url) + '</span><span class="num">' + e.status +
    '</span><span class="' + (e.matched ? 'matched">matched' : 'unmatched">unmatched') + '</span><span>' + esc(e.mapping ? (e.mapping.name || e.mapping.id) : '') +
    '</span><span class="num">' + fmtMicros(e.processMicros) + '</span>',
  showRequest);

$('journal-filter').addEventListener('change', () => journalList.reset());
$('journal-pause').addEventListener('click', () => {
  state.journalPaused = !state.journalPaused;
  $('journal-pause').textContent = state.journalPaused ? 'Resume' : 'Pause';
  $('journal-pause').classList.toggle('on', state.journalPaused);
  if (!state.journalPaused) journalList.refresh();
});

function headerLines(headers) {
  const out = [];
  for (const [k, v] of Object.entries(headers || {})) for (const one of [].concat(v)) out.push([k, one]);
  return out;
}

async function showRequest(row) {
  const ev = await apiJson('/requests/' + encodeURIComponent(row.id));
  state.selectedRequest = { row, ev };
  const r = ev.request;
  $('journal-detail').hidden = false;
  setText('journal-title', r.method + ' ' + r.url);
  $('curl-text').hidden = true;
  $('stub-box').hidden = true;
  setText('stub-result', '');
  setText('journal-request', r.method + ' ' + r.absoluteUrl + '\n' + headerLines(r.headers).map(([k, v]) => k + ': ' + v).join('\n') + (r.body ? '\n\n' + r.body : ''));
  const resp = ev.response || {};
  setText('journal-response', (resp.status || row.status) + '\n' + headerLines(resp.headers).map(([k, v]) => k + ': ' + v).join('\n') + (resp.body ? '\n\n' + resp.body : ''));
  $('near-miss-box').hidden = row.matched;
  if (!row.matched) await loadNearMiss(row.id);
}

async function loadNearMiss(id) {
  const n = await apiJson('/dashboard/api/journal/' + encodeURIComponent(id) + '/near-miss');
  setText('near-miss', (n.matchesNow ? 'A stub matches this request now (one was added or changed since).\nThe report as it was against the closest stub:\n' : '') + n.report);
}

function shellQuote(s) { return "'" + String(s).replace(/'/g, "'\\''") + "'"; }

function curlFor(r) {
  const parts = ['curl'];
  if (r.method !== 'GET' || r.body) parts.push('-X', r.method);
  for (const [k, v] of headerLines(r.headers)) {
    if (/^(host|content-length|connection)$/i.test(k)) continue;
    parts.push('-H', shellQuote(k + ': ' + v));
  }
  if (r.body) parts.push('--data-binary', shellQuote(r.body));
  parts.push(shellQuote(r.absoluteUrl));
  return parts.join(' ');
}

$('copy-curl').addEventListener('click', async () => {
  if (!state.selectedRequest) return;
  const text = curlFor(state.selectedRequest.ev.request);
  const area = $('curl-text');
  area.value = text;
  area.hidden = false;
  try {
    await navigator.clipboard.writeText(text);
  } catch (e) {
    area.select();
    try { document.execCommand('copy'); } catch (e2) { /* shown for copying by hand */ }
  }
});

$('make-stub').addEventListener('click', () => {
  if (!state.selectedRequest) return;
  const r = state.selectedRequest.ev.request;
  const stub = { name: r.method + ' ' + r.url, request: { method: r.method, url: r.url }, response: { status: 200, headers: { 'Content-Type': 'application/json' }, body: '{}' } };
  const type = Object.entries(r.headers || {}).find(([k]) => k.toLowerCase() === 'content-type');
  if (r.body) {
    stub.request.bodyPatterns = [type && String(type[1]).includes('json') ? { equalToJson: r.body } : { equalTo: r.body }];
  }
  $('stub-editor').value = JSON.stringify(stub, null, 2);
  $('stub-box').hidden = false;
  setText('stub-result', '');
});

$('stub-save').addEventListener('click', async () => {
  const result = $('stub-result');
  let body;
  try {
    body = JSON.parse($('stub-editor').value);
  } catch (e) {
    result.className = 'bad-text';
    result.textContent = 'Not valid JSON: ' + e.message;
    return;
  }
  let res;
  try {
    res = await api('/mappings', { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) }, { report: false });
  } catch (e) {
    if (e instanceof Unauthorized) return;
    result.className = 'bad-text';
    result.textContent = 'No answer from decoy: ' + e.message;
    return;
  }
  const text = await res.text();
  if (res.ok) {
    const m = JSON.parse(text);
    result.className = 'good-text';
    result.textContent = 'Stub created: ' + m.id;
    if (state.selectedRequest && !state.selectedRequest.row.matched) await loadNearMiss(state.selectedRequest.row.id);
  } else {
    result.className = 'bad-text';
    result.textContent = 'Refused (' + res.status + '): ' + reason(text, res.statusText);
  }
});

// ---------- scenarios ----------

async function loadScenarios() {
  const d = await apiJson('/scenarios');
  const body = $('scenario-table').querySelector('tbody');
  setText('scenario-count', d.scenarios.length ? d.scenarios.length + ' scenarios' : 'No mapping belongs to a scenario.');
  body.innerHTML = d.scenarios.map((s) => '<tr data-scenario="' + esc(s.name) + '"><td>' + esc(s.name) + '</td><td class="scenario-state">' + esc(s.state) +
    '</td><td><select>' + s.possibleStates.map((p) => '<option' + (p === s.state ? ' selected' : '') + '>' + esc(p) + '</option>').join('') +
    '</select> <button type="button" class="scenario-set">Set</button></td><td><button type="button" class="scenario-reset">Reset</button></td></tr>').join('');
}

$('scenario-table').addEventListener('click', async (ev) => {
  const row = ev.target.closest('tr[data-scenario]');
  if (!row) return;
  const name = row.dataset.scenario;
  let target = null;
  if (ev.target.classList.contains('scenario-set')) target = row.querySelector('select').value;
  if (ev.target.classList.contains('scenario-reset')) target = 'Started';
  if (target === null) return;
  await api('/scenarios/' + encodeURIComponent(name) + '/state', { method: 'PUT', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ state: target }) });
  await loadScenarios();
});

$('scenarios-reset-all').addEventListener('click', async () => {
  await api('/scenarios/reset', { method: 'POST' });
  await loadScenarios();
});

// ---------- plugins ----------

async function loadPlugins() {
  const d = await apiJson('/dashboard/api/plugins');
  setText('plugin-note', !d.enabled ? 'Plugins are off.' : d.plugins.length ? '' : 'No plugin is loaded yet (a plugin loads when a mapping first names it).');
  $('plugin-table').querySelector('tbody').innerHTML = d.plugins.map((p) => '<tr data-plugin="' + esc(p.name) + '"><td>' + esc(p.name) + '</td><td>' +
    esc([p.matcher ? 'matcher' : '', p.transformer ? 'transformer' : ''].filter(Boolean).join(', ')) + '</td><td' + (p.sha256 ? ' title="sha256 ' + esc(p.sha256) + '"' : '') + '>' + (p.loading ? 'compiling' : p.loadError ? 'failed to load' : 'ready') +
    '</td><td class="num">' + p.warmInstances + '</td><td class="num">' + p.calls + '</td><td class="num' + (p.failures ? ' bad-text' : '') + '">' + p.failures +
    '</td><td class="num">' + p.timeouts + '</td><td class="num">' + p.instancesCreated + ' / ' + p.instancesRetired + '</td><td>' +
    (p.lastError ? esc(fmtTime(p.lastError.at)) + '<pre class="bad-text">' + esc(p.lastError.reason) + '</pre>' : '') + '</td></tr>').join('');
}

// ---------- views ----------

function showView() {
  const name = (location.hash || '#overview').slice(1);
  state.view = ['overview', 'mappings', 'journal', 'scenarios', 'plugins'].includes(name) ? name : 'overview';
  for (const v of document.querySelectorAll('.view')) v.hidden = v.id !== 'view-' + state.view;
  for (const a of document.querySelectorAll('nav a')) a.classList.toggle('active', a.id === 'tab-' + state.view);
  const load = {
    overview: () => drawOverview(),
    mappings: () => refreshMappings(true),
    journal: () => journalList.reset(),
    scenarios: () => loadScenarios(),
    plugins: () => loadPlugins(),
  }[state.view];
  Promise.resolve().then(load).catch((e) => { if (!(e instanceof Unauthorized)) console.error(e); });
}

window.addEventListener('hashchange', showView);
window.addEventListener('resize', () => drawOverview());

async function start() {
  if (state.token) $('logout').hidden = false;
  showView();
  connect();
}

(async () => {
  try {
    await apiJson('/dashboard/api/live');
  } catch (e) {
    if (e instanceof Unauthorized) return;
  }
  start();
})();
