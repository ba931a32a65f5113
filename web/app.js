// GRPO Studio's browser view: watch and steer a run from any browser (docs/dashboard.md).
// Reads the run's HTTP API with the cluster token (Authorization: Bearer), which it takes from the
// address's fragment (#token=..., never sent to the server), keeps in sessionStorage for this tab,
// and removes from the address bar. Each panel polls at most once a second, incrementally
// (since=); the server sends long histories decimated (min/max per bucket) and the page keeps
// every series at most kMaxPoints long the same way, so a 100,000-step run draws as fast as a
// short one. Charts are uPlot (web/vendor/uplot, MIT). No inline script: the CSP forbids it.
'use strict';
(() => {
  const TOKEN_KEY = 'grpo-dashboard-token';
  const POINTS = 2000;          // points per series asked of the server for a history
  const MAX_POINTS = 4000;      // a series longer than this (live appends) is decimated to POINTS
  const FRAME_BUDGET_MS = 3;    // chart redraws per animation frame stop after this much work
  const MAX_EVENTS_SHOWN = 400;
  const PALETTE = ['#3b82f6', '#ef4444', '#10b981', '#f59e0b', '#8b5cf6', '#ec4899', '#14b8a6', '#64748b'];

  // The charts come from the run's endpoint (GET /grpo/dashboard/charts): the catalogue the desktop
  // Dashboard draws too (core/records/charts.h), so both show the same charts. chartsFrom turns it into
  // this page's specs: `series` of metric keys (TRL's names, as the run's metrics records hold
  // them), or a `pattern` that adds every key it matches; a band is two dashed lines, mean ± std.
  let CHARTS = [];
  const escapeRe = (t) => t.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
  function chartsFrom(catalogue) {
    return catalogue.map((c) => {
      const spec = { id: c.id, title: c.title, unit: c.unit, help: c.help || '', series: [] };
      for (const l of c.lines) {
        if (l.suffix) { spec.pattern = new RegExp('^' + escapeRe(l.key) + '(.+)' + escapeRe(l.suffix) + '$'); continue; }
        const colorIndex = spec.series.length;
        spec.series.push({ key: l.key, label: l.label, dash: !!l.dashed, points: !!l.points, colorIndex });
        if (l.band_std) {
          spec.series.push({ key: l.key, label: l.label + ' + std', plus: l.band_std, dash: true, colorIndex });
          spec.series.push({ key: l.key, label: l.label + ' − std', minus: l.band_std, dash: true, colorIndex });
        }
      }
      return spec;
    });
  }
  async function loadCharts() {
    CHARTS = chartsFrom(await api('/grpo/dashboard/charts'));
    await loadEventKinds();
    for (const spec of CHARTS) makeChart(spec);
  }
  // Event kinds come from the run's endpoint too (GET /grpo/dashboard/event-kinds, core/records/
  // catalogue.h): their labels, default severities, which are marked on the charts and at which
  // step. isMarker and severityOf follow the rule the desktop applies (run::event_is_marker,
  // run::event_severity).
  let EVENT_KINDS = { kinds: [], fault_field: 'advice', cleared_suffix: '_cleared' };
  let kindOf = new Map();
  async function loadEventKinds() {
    EVENT_KINDS = await api('/grpo/dashboard/event-kinds');
    kindOf = new Map(EVENT_KINDS.kinds.map((k) => [k.kind, k]));
  }
  const isCleared = (kind) => kind.length > EVENT_KINDS.cleared_suffix.length && kind.endsWith(EVENT_KINDS.cleared_suffix);
  function isMarker(e) {
    if (typeof e.event !== 'string' || !e.event) return false;
    if (kindOf.get(e.event)?.marker) return true;
    const fault = e[EVENT_KINDS.fault_field];
    return (typeof fault === 'string' && fault !== '') || isCleared(e.event);
  }
  function severityOf(e) {
    const kind = typeof e.event === 'string' ? e.event : '';
    if (isCleared(kind)) return 'cleared';
    if (typeof e.severity === 'string' && e.severity) return e.severity;
    return kindOf.get(kind)?.severity || 'info';
  }
  function markerStep(e) {
    const field = kindOf.get(e.event)?.step_field || 'step';
    return typeof e[field] === 'number' ? e[field] : typeof e.step === 'number' ? e.step : null;
  }
  const labelOf = (e) => (typeof e.event === 'string' && e.event ? kindOf.get(e.event)?.label || e.event : '?');

  const $ = (sel, root = document) => root.querySelector(sel);
  // Elements are built with textContent only: nothing the run wrote is ever parsed as HTML.
  function el(tag, props = {}, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(props)) {
      if (k === 'text') e.textContent = v;
      else if (k === 'dataset') Object.assign(e.dataset, v);
      else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
      else e[k] = v;
    }
    for (const c of children) if (c != null) e.append(c);
    return e;
  }
  const axisLabel = (v) => (v == null ? '' : v !== 0 && (Math.abs(v) < 1e-3 || Math.abs(v) >= 1e6) ? v.toExponential(1)
    : Math.abs(v) >= 1e4 ? (v / 1e3).toFixed(Math.abs(v) >= 1e5 ? 0 : 1) + 'k' : String(+v.toPrecision(4)));
  const fmt = (v, digits = 4) => (v == null || Number.isNaN(v) ? '—' :
    (Math.abs(v) >= 1e5 || (Math.abs(v) < 1e-3 && v !== 0) ? v.toExponential(2) : String(+v.toPrecision(digits))));

  // ---- the token -------------------------------------------------------------------------------
  let token = null;
  function takeTokenFromFragment() {
    const params = new URLSearchParams(location.hash.slice(1));
    if (!params.has('token')) return;
    const t = params.get('token').trim();
    if (t) sessionStorage.setItem(TOKEN_KEY, t);
    params.delete('token');
    const rest = params.toString();
    history.replaceState(null, '', location.pathname + location.search + (rest ? '#' + rest : ''));
  }

  class HttpError extends Error {
    constructor(status, message) { super(message); this.status = status; }
  }
  class Unauthorized extends Error {}

  async function api(path, { method = 'GET', body, blob = false } = {}) {
    if (!token) throw new Unauthorized('no token');
    const headers = { Authorization: 'Bearer ' + token };
    if (body !== undefined) headers['Content-Type'] = 'application/json';
    const r = await fetch(path, { method, headers, body, cache: 'no-store', credentials: 'omit', redirect: 'error' });
    if (r.status === 401) { onUnauthorized(); throw new Unauthorized('401'); }
    if (!r.ok) {
      let message = r.status + ' ' + r.statusText;
      try { message = (await r.json()).error.message || message; } catch (_) { /* not JSON */ }
      throw new HttpError(r.status, message);
    }
    return blob ? r.blob() : r.json();
  }

  // ---- connection: lost, back, or back to a restarted trainer ----------------------------------
  const conn = { ok: true, failures: 0, instance: null, stopped: false };
  function setConnection(text, level = '') {
    const c = $('#connection');
    c.textContent = text;
    c.dataset.level = level;
  }
  function onUnauthorized() {
    if (conn.stopped) return;
    conn.stopped = true;
    sessionStorage.removeItem(TOKEN_KEY);
    token = null;
    showLogin('The server refused the token (401). Paste the cluster token, or open the address the trainer printed.');
  }
  function noteFailure(err) {
    if (err instanceof Unauthorized || conn.stopped) return;
    if (err instanceof HttpError) return; // answered: the connection is fine
    conn.failures++;
    conn.ok = false;
    const ended = state && ['finished', 'stopped', 'stopping', 'failed'].includes(state.state);
    setConnection(`Connection lost (${err.message})` + (ended ? `: the run had ${state.state === 'stopping' ? 'stopped' : state.state}, ` +
      'so its trainer is gone (grpo serve RUN_DIR shows it read-only)' : '') + `; retrying… (${conn.failures})`, 'warn');
  }
  function noteSuccess() {
    if (!conn.ok) setConnection('Reconnected.', '');
    conn.ok = true;
    conn.failures = 0;
  }
  const backoff = (base) => (conn.ok ? base : Math.min(5000, 1000 * 2 ** Math.min(conn.failures, 3)));

  // A panel polls `fn` every `period` ms (more slowly while the connection is down or the tab hidden).
  const pollers = [];
  function poll(name, period, fn) {
    const p = { name, timer: 0, running: false };
    const run = async () => {
      if (conn.stopped) return;
      p.running = true;
      try { await fn(); noteSuccess(); } catch (e) { noteFailure(e); }
      p.running = false;
      if (!conn.stopped) p.timer = setTimeout(run, document.hidden ? Math.max(period, 5000) : backoff(period));
    };
    p.kick = () => { if (!p.running) { clearTimeout(p.timer); run(); } };
    pollers.push(p);
    run();
    return p;
  }

  // ---- series store: one run's metrics as columns ----------------------------------------------
  // Min/max decimation into two slots per bucket, as the server does (dashboard_routes.h).
  function decimate(x, cols, points) {
    const n = x.length, buckets = Math.max(1, points >> 1);
    const nx = [], ncols = new Map();
    for (const k of cols.keys()) ncols.set(k, []);
    for (let b = 0; b < buckets; b++) {
      const lo = Math.floor(n * b / buckets), hi = Math.floor(n * (b + 1) / buckets);
      if (hi <= lo) continue;
      const two = hi - lo >= 2;
      nx.push(x[lo]);
      if (two) nx.push(x[hi - 1]);
      for (const [k, v] of cols) {
        const out = ncols.get(k);
        if (!two) { out.push(v[lo]); continue; }
        let imin = -1, imax = -1;
        for (let i = lo; i < hi; i++) {
          const y = v[i];
          if (y == null) continue;
          if (imin < 0 || y < v[imin]) imin = i;
          if (imax < 0 || y > v[imax]) imax = i;
        }
        if (imin < 0) { out.push(null, null); continue; }
        out.push(v[Math.min(imin, imax)], v[Math.max(imin, imax)]);
      }
    }
    return [nx, ncols];
  }

  class RunSeries {
    constructor(run) { this.run = run; this.reset(); }
    reset() { this.x = []; this.cols = new Map(); this.lastStep = -1; this.epoch = null; this.available = []; this.version = 0; }
    wantedKeys() {
      const keys = new Set();
      for (const c of CHARTS) {
        for (const s of c.series || []) { keys.add(s.key); if (s.plus) keys.add(s.plus); if (s.minus) keys.add(s.minus); }
        if (c.pattern) for (const k of this.available) if (c.pattern.test(k)) keys.add(k);
      }
      return [...keys].slice(0, 64);
    }
    // Fetches what is new; true when anything changed.
    async update() {
      const keys = this.wantedKeys();
      const q = `/grpo/dashboard/series?run=${this.run}&since=${this.lastStep}&points=${POINTS}&keys=${encodeURIComponent(keys.join(','))}`;
      const r = await api(q);
      if (this.epoch !== null && r.epoch !== this.epoch) { this.reset(); return this.update(); } // rewritten (resume)
      this.epoch = r.epoch;
      const before = this.available.length;
      this.available = r.keys;
      const n = r.x.length;
      if (n === 0) return before !== r.keys.length && this.patternKeysMissing() ? this.reloadAll() : false;
      const rows = this.x.length;
      for (const x of r.x) this.x.push(x);
      for (const k of new Set([...this.cols.keys(), ...Object.keys(r.series)])) {
        let col = this.cols.get(k);
        if (!col) { col = new Array(rows).fill(null); this.cols.set(k, col); }
        const add = r.series[k];
        if (add) for (const v of add) col.push(v); else for (let i = 0; i < n; i++) col.push(null);
      }
      this.lastStep = r.last_step;
      if (this.x.length > MAX_POINTS) [this.x, this.cols] = decimate(this.x, this.cols, POINTS);
      if (this.patternKeysMissing()) return this.reloadAll();
      this.version++;
      return true;
    }
    patternKeysMissing() { return this.wantedKeys().some((k) => this.available.includes(k) && !this.cols.has(k)); }
    async reloadAll() { const keep = this.available; this.reset(); this.available = keep; await this.update(); return true; }
  }

  // ---- charts ----------------------------------------------------------------------------------
  const css = (name) => getComputedStyle(document.documentElement).getPropertyValue(name).trim();
  const charts = [];       // {spec, fig, plot, u, seriesKey, dirty}
  const dirty = new Set();
  let markers = [];        // {step, kind, label}

  function seriesOf(spec, store) {
    if (!spec.pattern) return spec.series;
    return store.available.filter((k) => spec.pattern.test(k)).sort()
      .map((k) => ({ key: k, label: k.match(spec.pattern)[1] }));
  }

  function columnFor(s, cols, n) {
    const base = cols.get(s.key);
    if (!base) return new Array(n).fill(null);
    if (!s.plus && !s.minus) return base;
    const other = cols.get(s.plus || s.minus) || [];
    const sign = s.plus ? 1 : -1;
    return base.map((v, i) => (v == null || other[i] == null ? null : v + sign * other[i]));
  }

  function makeChart(spec) {
    const plot = el('div', { className: 'plot' });
    const fig = el('figure', { className: 'chart', dataset: { chart: spec.id } },
      el('figcaption', { text: spec.title, title: spec.help }), plot, el('div', { className: 'empty', text: 'no data yet' }));
    $('#charts').append(fig);
    const c = { spec, fig, plot, u: null, seriesKey: '', visible: true };
    charts.push(c);
    new ResizeObserver(() => { if (c.u) c.u.setSize(sizeOf(c)); }).observe(plot);
    visibility.observe(fig);
    fig._chart = c;
    return c;
  }
  const visibility = new IntersectionObserver((entries) => {
    for (const e of entries) {
      const c = e.target._chart;
      c.visible = e.isIntersecting;
      if (c.visible && c.stale) schedule(c);
    }
  }, { rootMargin: '200px' });
  const sizeOf = (c) => ({ width: Math.max(200, c.plot.clientWidth), height: window.innerWidth < 600 ? 150 : 170 });

  function buildPlot(c, lines) {
    if (c.u) c.u.destroy();
    const muted = css('--muted'), grid = css('--grid');
    const axis = { stroke: muted, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid, width: 1 }, font: '11px system-ui, sans-serif' };
    const series = [{ label: 'step', value: (u, v) => (v == null ? '—' : String(v)) }];
    lines.forEach((s, i) => series.push({
      label: s.label, stroke: s.color || PALETTE[(s.colorIndex ?? i) % PALETTE.length], width: s.dash ? 1 : 1.5,
      dash: s.dash ? [4, 4] : undefined, spanGaps: true, points: { show: !!s.points, size: 4 },
      value: (u, v) => fmt(v),
    }));
    const opts = {
      ...sizeOf(c), series, legend: { live: true }, cursor: { drag: { x: true, y: false } },
      // A flat series (all zeros early in a run) gets a small range around it, not uPlot's 0..100.
      scales: { x: { time: false }, y: { range: (u, min, max) => (min == null ? [0, 1] : min === max
        ? [min - (Math.abs(min) || 1) * 0.1, max + (Math.abs(max) || 1) * 0.1] : uPlot.rangeNum(min, max, 0.1, true)) } },
      axes: [{ ...axis }, { ...axis, size: 58, values: (u, vals) => vals.map(axisLabel) }],
      hooks: {
        draw: [(u) => placeMarkers(c, u)],
        setSelect: [(u) => { if (u.select.width > 0) c.zoomed = true; }],  // a drag zooms: updates keep the zoom
      },
    };
    c.u = new uPlot(opts, [[]].concat(lines.map(() => [])), c.plot);
    c.zoomed = false;
    c.u.over.addEventListener('dblclick', () => { c.zoomed = false; });  // uPlot zooms out on double-click
    c.u.over.append(c.markerLayer = el('div', { className: 'markers' }));
    c.markerKey = '';
  }

  function placeMarkers(c, u) {
    // u.bbox, not the overlay's clientWidth: reading layout here would force a reflow per chart.
    const key = markers.length + ':' + u.scales.x.min + ':' + u.scales.x.max + ':' + u.bbox.width;
    if (key === c.markerKey) return;
    c.markerKey = key;
    c.markerLayer.replaceChildren();
    if (u.scales.x.min == null) return;
    let shown = 0;
    for (const m of markers) {
      if (m.step < u.scales.x.min || m.step > u.scales.x.max) continue;
      const mk = el('div', { className: 'marker', title: m.title, dataset: { kind: m.kind, severity: m.severity, step: String(m.step), label: m.label } });
      const x = u.valToPos(m.step, 'x');
      mk.style.left = x + 'px';
      // A label right of the middle is drawn to the left of its line, so that it stays inside
      // the chart (a stop at the last step would otherwise widen a phone's page).
      if (m.step > (u.scales.x.min + u.scales.x.max) / 2) mk.dataset.side = 'left';
      mk.style.setProperty('--label-top', (shown++ % 3) * 13 + 'px');  // labels of nearby markers stagger
      c.markerLayer.append(mk);
    }
  }

  // The data of one chart: its lines over the main run and, when comparing, the other run.
  function chartData(c) {
    const main = stores[0];
    const lines = seriesOf(c.spec, main).map((s, i) => ({ ...s, colorIndex: s.colorIndex ?? i }));
    const cmp = compareRun != null ? stores[compareRun] : null;
    let data;
    const ownCols = lines.map((s) => columnFor(s, main.cols, main.x.length));
    if (cmp) {
      const cmpLines = seriesOf(c.spec, cmp).map((s, i) => ({ ...s, colorIndex: s.colorIndex ?? i, label: s.label + ' (compared)', dash: true }));
      const cmpCols = cmpLines.map((s) => columnFor(s, cmp.cols, cmp.x.length));
      data = uPlot.join([[main.x, ...ownCols], [cmp.x, ...cmpCols]]);
      lines.push(...cmpLines);
    } else {
      data = [main.x, ...ownCols];
    }
    return { lines, data };
  }

  function drawChart(c) {
    c.stale = false;
    const { lines, data } = chartData(c);
    const key = lines.map((s) => s.label + (s.dash ? '~' : '')).join('|');
    if (key !== c.seriesKey || !c.u) { c.seriesKey = key; buildPlot(c, lines); }
    const hasData = data.slice(1).some((col) => col.some((v) => v != null));
    c.u.setData(data, !c.zoomed);
    const points = hasData ? String(data[0].length) : '0';
    if (c.fig.dataset.points !== points) c.fig.dataset.points = points;  // a write restyles the page: only on change
  }

  // Redraws go through animation frames, a few charts a frame, visible charts only. uPlot draws in
  // a microtask after setData, so a frame's cost is measured from a microtask queued after theirs,
  // and how many charts fit in a frame comes from the cost per chart measured so far.
  let frameRequested = false, updateStarted = 0, updateWork = 0, drawCost = 2;
  function schedule(c) {
    if (!c.visible) { c.stale = true; return; }
    dirty.add(c);
    if (!frameRequested) { frameRequested = true; requestAnimationFrame(frame); }
  }
  function frame() {
    frameRequested = false;
    const t0 = performance.now();
    let drawn = 0;
    for (const c of dirty) {
      dirty.delete(c);
      drawChart(c);
      drawn++;
      if (performance.now() - t0 + drawn * drawCost > FRAME_BUDGET_MS) break;
    }
    queueMicrotask(() => {  // after uPlot's own microtasks: the charts are drawn
      const t1 = performance.now();
      if (drawn) drawCost = 0.7 * drawCost + 0.3 * (t1 - t0) / drawn;
      performance.measure('grpo-frame-work', { start: t0, end: t1 });
      updateWork += t1 - t0;
      if (dirty.size) {
        if (!frameRequested) { frameRequested = true; requestAnimationFrame(frame); }
      } else if (updateStarted) {
        performance.measure('grpo-update', { start: updateStarted, end: t1 });  // latency: new data to drawn
        performance.measure('grpo-update-work', { start: t1 - updateWork, duration: updateWork });  // main-thread cost
        updateStarted = 0;
        updateWork = 0;
        if (!performance.getEntriesByName('grpo-ready').length) performance.mark('grpo-ready');
      }
    });
  }
  function redrawAll() {
    if (!updateStarted) updateStarted = performance.now();
    for (const c of charts) schedule(c);
    if (!dirty.size && updateStarted) { updateStarted = 0; updateWork = 0; }  // nothing visible to draw
  }

  // ---- state, events, samples, workers, adapters -------------------------------------------------
  let stores = [];
  let compareRun = null;
  let state = null;
  let events = [];        // every event seen (index = position in the run's events file)
  let configNow = {};     // the run's config with the retunes applied since

  function setMetric(name, value) {
    for (const e of document.querySelectorAll(`[data-metric="${name}"]`)) e.textContent = value;
  }

  async function updateState() {
    const s = await api('/grpo/dashboard/state');
    if (conn.instance && s.instance !== conn.instance) {
      conn.ok = true;
      conn.failures = 0;
      setConnection(`Reconnected: the trainer restarted (resumed at step ${s.step}).`, 'warn');
      events = [];
      $('#events').replaceChildren();
      markers = [];
      for (const st of stores) st.reset();
      seriesPoller && seriesPoller.kick();
    }
    conn.instance = s.instance;
    if (!state) { firstState(s); performance.mark('grpo-first-state'); }
    state = s;
    setMetric('step', String(s.step));
    setMetric('max_steps', s.max_steps ? String(s.max_steps) : '—');
    setMetric('policy_version', String(s.policy_version));
    const st = s.paused && s.state === 'running' ? 'pausing' : s.state;
    setMetric('state', st);
    $('[data-metric="state"]').dataset.state = st;
    setMetric('verdict', s.verdict || '');
    setMetric('advice', s.advice || '');
    $('#verdict').hidden = !s.verdict;
    if (s.live) {
      const ended = ['finished', 'stopped', 'failed'].includes(s.state);
      $('#pause').disabled = s.paused || ended;
      $('#resume').disabled = !s.paused || ended;
      $('#retune').disabled = ended;
      $('#stop').disabled = ended || s.state === 'stopping';
    }
    configNow = { ...(s.config || {}) };
    for (const e of events) if (e.event === 'retune' && e.new) Object.assign(configNow, e.new);
  }

  function firstState(s) {
    $('#run-label').textContent = s.run_dir;
    $('#run-label').title = s.run_dir;
    document.title = `GRPO · ${s.run_dir.split('/').filter(Boolean).pop() || s.run_dir}`;
    $('#controls').hidden = !s.live;
    $('#workers-panel').hidden = !s.live;
    $('#mode').textContent = s.live ? 'Live run: updates every second.' : 'Read-only: a run on disk (grpo serve).';
    stores = s.runs.map((_, i) => new RunSeries(i));
    if (s.runs.length > 1) {
      const sel = $('#compare');
      s.runs.slice(1).forEach((r, i) => sel.append(el('option', { value: String(i + 1), text: r })));
      $('#compare-box').hidden = false;
    }
  }

  let seriesPoller = null;
  async function updateSeries() {
    if (!stores.length) return;
    let changed = await stores[0].update();
    if (!performance.getEntriesByName('grpo-first-series').length) performance.mark('grpo-first-series');
    if (compareRun != null) changed = (await stores[compareRun].update()) || changed;
    if (changed) redrawAll();
  }

  function describeEvent(e) {
    const kind = e.event || '?';
    if (kind === 'retune' && e.new && typeof e.new === 'object')
      return 'retune: ' + Object.entries(e.new).map(([k, v]) =>
        `${k} ${e.old && k in e.old ? JSON.stringify(e.old[k]) : '?'} → ${JSON.stringify(v)}`).join(', ');
    let text = kind;
    if (typeof e.message === 'string') text += ': ' + e.message;
    else if (typeof e.worker === 'string') text += ': ' + e.worker;
    else if (typeof e.url === 'string') text += ': ' + e.url;
    if (typeof e.advice === 'string') text += ' — ' + e.advice;
    return text;
  }

  async function updateEvents() {
    const add = await api(`/grpo/events?since=${events.length}`);
    if (!add.length) return;
    const list = $('#events');
    const frag = document.createDocumentFragment();
    let newMarkers = false;
    for (const e of add) {
      events.push(e);
      const when = e.time ? new Date(e.time * 1000).toLocaleTimeString() : '';
      frag.prepend(el('li', { dataset: { kind: typeof e.event === 'string' ? e.event : '', severity: severityOf(e) } },
        el('span', { className: 'when', text: `step ${e.step ?? '?'} · ${when}` }), describeEvent(e)));
      if (isMarker(e)) {
        const step = markerStep(e);
        if (step != null) {
          markers.push({ step, kind: e.event, severity: severityOf(e), label: labelOf(e), title: `step ${step}: ${describeEvent(e)}` });
          newMarkers = true;
        }
      }
      if (e.event === 'retune' && e.new) Object.assign(configNow, e.new);
    }
    list.prepend(frag);
    while (list.children.length > MAX_EVENTS_SHOWN) list.lastElementChild.remove();
    if (newMarkers) redrawAll();
  }

  // The weighted total, then each reward function's own score (null: the function returned None).
  function rewardCell(s) {
    const td = el('td', { className: 'num', title: s.answer ? 'answer: ' + s.answer : '' }, el('div', { text: fmt(s.reward) }));
    if (s.rewards && typeof s.rewards === 'object')
      for (const [name, v] of Object.entries(s.rewards))
        td.append(el('div', { className: 'part', dataset: { reward: name }, text: name + ' ' + fmt(v) }));
    return td;
  }

  async function updateSamples() {
    const rows = await api('/grpo/dashboard/samples?limit=30');
    const body = $('#samples tbody');
    body.replaceChildren(...rows.slice().reverse().map((s) => el('tr', {},
      el('td', { className: 'num', text: String(s.step ?? '') }),
      el('td', { className: 'num', text: s.policy_version != null ? 'v' + s.policy_version : '' }),
      el('td', { className: 'text', text: String(s.prompt ?? '') }),
      el('td', { className: 'text', text: String(s.completion ?? '') }),
      rewardCell(s),
      el('td', { className: 'num', text: fmt(s.advantage) }))));
  }

  // A Slurm-launched worker's task: "123_4 running, 58:12 left" or "123_5 pending (Resources)".
  function slurmJob(w) {
    if (!w.job) return '';
    let t = w.job + ' ' + (w.job_state || '');
    if (w.job_reason) t += ' (' + w.job_reason + ')';
    if (w.job_time_left && w.job_state === 'running') t += ', ' + w.job_time_left + ' left';
    return t;
  }

  async function updateWorkers() {
    const ws = await api('/grpo/dashboard/workers');
    $('#workers-none').hidden = ws.length > 0;
    $('#workers').hidden = ws.length === 0;
    $('#workers tbody').replaceChildren(...ws.map((w) => el('tr', { dataset: { status: w.status } },
      el('td', { text: w.name || w.url, title: w.url }),
      el('td', { text: w.status }),
      el('td', { text: slurmJob(w), title: w.job_node ? 'node ' + w.job_node : '' }),
      el('td', { className: 'num', text: w.adapter_version < 0 ? '?' : w.adapter_version === 0 ? 'base' : 'v' + w.adapter_version }),
      el('td', { className: 'num', text: String(w.inflight) }),
      el('td', { className: 'num', text: fmt(w.tok_s, 3) }),
      el('td', { className: 'text', text: w.last_error || '' }))));
  }

  async function download(version, name) {
    const blob = await api(`/grpo/dashboard/adapter/${version}/${encodeURIComponent(name)}`, { blob: true });
    const url = URL.createObjectURL(blob);
    const a = el('a', { href: url, download: `policy-v${version}-${name}` });
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10000);
  }

  async function updateAdapters() {
    const vs = await api('/grpo/dashboard/adapters');
    const size = (b) => (b >= 1 << 20 ? (b / (1 << 20)).toFixed(1) + ' MiB' : b >= 1024 ? (b / 1024).toFixed(1) + ' KiB' : b + ' B');
    $('#adapters').replaceChildren(...vs.slice().reverse().map((v) => el('li', { dataset: { version: String(v.version) } },
      el('b', { text: v.name }), el('br'),
      ...v.files.map((f) => el('button', {
        type: 'button', text: `${f.name} (${size(f.bytes)})`, title: 'Download ' + f.name,
        onclick: () => download(v.version, f.name).catch((e) => setConnection('Download failed: ' + e.message, 'error')),
      })))));
  }

  // ---- controls ----------------------------------------------------------------------------------
  async function control(action) {
    try {
      await api('/grpo/run/' + action, { method: 'POST', body: '{}' });
      setConnection(`${action[0].toUpperCase() + action.slice(1)} sent; the trainer applies it at its next step boundary.`);
    } catch (e) {
      if (!(e instanceof Unauthorized)) setConnection(`${action} failed: ${e.message}`, 'error');
    }
    statePoller.kick();
  }

  let schema = null;
  async function openRetune() {
    if (!schema) schema = (await api('/grpo/config/schema')).filter((k) => k.retunable);
    const fields = $('#retune-fields');
    fields.replaceChildren();
    for (const k of schema) {
      const id = 'rt-' + k.name;
      const current = configNow[k.name] !== undefined ? configNow[k.name] : k.default;
      let input;
      if (k.range && k.range.choices) {
        input = el('select', { id }, ...k.range.choices.map((c) => el('option', { value: c, text: c, selected: c === current })));
      } else if (k.type === 'boolean') {
        input = el('input', { id, type: 'checkbox', checked: !!current });
      } else if (k.numeric && !k.type.startsWith('list')) {
        input = el('input', { id, type: 'number', step: 'any', value: current == null ? '' : String(current) });
        if (k.range.lo != null) input.min = String(k.range.lo);
        if (k.range.hi != null) input.max = String(k.range.hi);
      } else {
        input = el('input', { id, type: 'text', value: current == null ? '' : typeof current === 'string' ? current : JSON.stringify(current) });
      }
      input.dataset.key = k.name;
      input.dataset.type = k.type;
      input.dataset.initial = input.type === 'checkbox' ? String(input.checked) : input.value;
      input.addEventListener('input', () => input.classList.toggle('changed', valueOf(input, true) !== input.dataset.initial));
      fields.append(el('label', { htmlFor: id, text: k.name }, el('small', { text: `${k.range.text || k.type} · ${k.doc}` })), input);
    }
    $('#retune-message').textContent = '';
    $('#retune-dialog').showModal();
  }
  function valueOf(input, raw = false) {
    if (input.type === 'checkbox') return raw ? String(input.checked) : input.checked;
    if (raw) return input.value;
    if (input.type === 'number') return input.value === '' ? null : Number(input.value);
    if (input.tagName === 'SELECT' || input.dataset.type === 'string') return input.value;
    try { return JSON.parse(input.value); } catch (_) { return input.value; }
  }
  async function applyRetune(ev) {
    ev.preventDefault();
    const changes = {};
    for (const input of $('#retune-fields').querySelectorAll('[data-key]'))
      if (valueOf(input, true) !== input.dataset.initial) changes[input.dataset.key] = valueOf(input);
    if (!Object.keys(changes).length) { $('#retune-message').textContent = 'Nothing changed.'; return; }
    try {
      await api('/grpo/run/retune', { method: 'POST', body: JSON.stringify(changes) });
      $('#retune-dialog').close();
      setConnection('Retune accepted: ' + Object.entries(changes).map(([k, v]) => `${k} = ${JSON.stringify(v)}`).join(', '));
      eventsPoller.kick();
    } catch (e) {
      $('#retune-message').textContent = e instanceof HttpError ? `Refused (${e.status}): ${e.message}` : String(e.message);
    }
  }

  // ---- start -------------------------------------------------------------------------------------
  function showLogin(message = '') {
    $('#dashboard').hidden = true;
    $('#controls').hidden = true;
    $('#login').hidden = false;
    $('#login-message').textContent = message;
    $('#login-token').focus();
  }

  let statePoller, eventsPoller;
  function start() {
    conn.stopped = false;
    $('#login').hidden = true;
    $('#dashboard').hidden = false;
    setConnection('Connecting…');
    statePoller = poll('state', 1000, async () => {
      if (!charts.length) await loadCharts();
      await updateState();
      if (!seriesPoller) {
        seriesPoller = poll('series', 1000, updateSeries);
        eventsPoller = poll('events', 1000, updateEvents);
        poll('samples', 5000, updateSamples);
        poll('adapters', 5000, updateAdapters);
        if (state.live) poll('workers', 2000, updateWorkers);
        setConnection(state.live ? 'Connected.' : 'Connected (read-only).');
      }
    });
  }

  function init() {
    takeTokenFromFragment();
    token = sessionStorage.getItem(TOKEN_KEY);
    $('#login-form').addEventListener('submit', (ev) => {
      ev.preventDefault();
      const t = $('#login-token').value.trim();
      if (!t) return;
      sessionStorage.setItem(TOKEN_KEY, t);
      $('#login-token').value = '';
      location.reload();
    });
    $('#pause').addEventListener('click', () => control('pause'));
    $('#resume').addEventListener('click', () => control('resume'));
    $('#stop').addEventListener('click', () => $('#stop-dialog').showModal());
    $('#stop-cancel').addEventListener('click', () => $('#stop-dialog').close());
    $('#stop-form').addEventListener('submit', (ev) => { ev.preventDefault(); $('#stop-dialog').close(); control('stop'); });
    $('#retune').addEventListener('click', () => openRetune().catch((e) => setConnection('Retune: ' + e.message, 'error')));
    $('#retune-cancel').addEventListener('click', () => $('#retune-dialog').close());
    $('#retune-form').addEventListener('submit', applyRetune);
    $('#compare').addEventListener('change', (ev) => {
      compareRun = ev.target.value === '' ? null : Number(ev.target.value);
      if (compareRun != null) stores[compareRun].reset();
      seriesPoller && seriesPoller.kick();
      redrawAll();
    });
    matchMedia('(prefers-color-scheme: dark)').addEventListener('change', () => {
      for (const c of charts) c.seriesKey = '';
      redrawAll();
    });
    if (token) start(); else showLogin();
  }

  document.addEventListener('DOMContentLoaded', init);
})();
