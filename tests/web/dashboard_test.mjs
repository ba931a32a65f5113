// The browser view in a real browser (issue 19): Debian's chromium, headless, drives the page that
// a real `grpo train --demo --serve 127.0.0.1:0` serves, then the read-only page of `grpo serve`.
//   - without the token: the login prompt, no data on the page, and every data route answers 401;
//   - with #token=...: the token moves to sessionStorage and leaves the address bar; the current
//     step shows in [data-metric="step"]; the reward, staleness and throughput charts are drawn;
//     the charts on the page are the run's catalogue (GET /grpo/dashboard/charts), in its order;
//   - pause and resume act on the run (its step stops, then moves again); a retune shows as a
//     marker on the charts, a bad value is refused with the key named; stop (confirmed) ends it;
//   - the trainer resumed on the same port: the page reconnects by itself and says so;
//   - grpo serve: read-only (no controls, no control routes), the last step, comparing two runs.
// usage: node dashboard_test.mjs --grpo PATH [--chromium PATH] [--keep]
// Prints "N passed, M failed" last; exits non-zero on any failure. About 40 s on 2 cores.
import { appendFileSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  Checks, apiGet, appendMetrics, cleanup, findChromium, launchBrowser, makeTokenFile, newPage, parseArgs, startProcess, stopProcess,
  tempDir, waitFor, writeSyntheticRun,
} from './lib.mjs';

const args = parseArgs(process.argv);
if (!args.grpo) { console.error('usage: node dashboard_test.mjs --grpo PATH [--chromium PATH]'); process.exit(2); }
const checks = new Checks();
const deadline = setTimeout(() => { console.log('FAIL the whole test: over 150 s'); process.exit(1); }, 150000);

const DATA_ROUTES = [
  ['GET', '/grpo/run'], ['GET', '/grpo/metrics?since=-1'], ['GET', '/grpo/events?since=0'],
  ['GET', '/grpo/dashboard/state'], ['GET', '/grpo/dashboard/series?since=-1'], ['GET', '/grpo/dashboard/samples'],
  ['GET', '/grpo/dashboard/workers'], ['GET', '/grpo/dashboard/adapters'], ['GET', '/grpo/config/schema'],
  ['GET', '/grpo/dashboard/charts'], ['GET', '/grpo/dashboard/metrics'], ['GET', '/grpo/dashboard/event-kinds'],
  ['GET', '/grpo/dashboard/adapter/1/adapter_config.json'], ['GET', '/grpo/bucket/policy-v1/SHA256SUMS'],
  ['POST', '/grpo/run/pause'], ['POST', '/grpo/run/resume'], ['POST', '/grpo/run/stop'], ['POST', '/grpo/run/retune'],
];

// How long a check may wait for the training run to get somewhere (a step, a point on a chart,
// a published adapter, a retune applied at the next step): the run's pace on a loaded machine,
// not a speed target. CI builds beside this test; a budget of a few seconds failed there.
const RUN_PACE_MS = 120000;

const text = (page, sel) => page.$eval(sel, (e) => e.textContent.trim()).catch(() => null);
const stepOnPage = async (page) => Number(await text(page, '[data-metric="step"]'));

// Pixels of a chart's canvas in its first two series' colours (#3b82f6, #ef4444; the grid and axes
// are grey): the lines are really drawn.
const linePixels = (page, id) => page.evaluate((chartId) => {
  const c = document.querySelector(`[data-chart="${chartId}"] canvas`);
  if (!c || !c.width) return 0;
  const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
  const near = (i, r, g, b) => Math.abs(d[i] - r) < 40 && Math.abs(d[i + 1] - g) < 40 && Math.abs(d[i + 2] - b) < 40;
  let n = 0;
  for (let i = 0; i < d.length; i += 4) if (d[i + 3] > 100 && (near(i, 59, 130, 246) || near(i, 239, 68, 68))) n++;
  return n;
}, id);

async function noTokenChecks(browser, base, token) {
  const page = await newPage(browser);
  const dataRequests = [];
  page.on('request', (r) => { if (new URL(r.url()).pathname.startsWith('/grpo/')) dataRequests.push(r.url()); });
  await checks.step('without the token the page loads, shows the login prompt and no data', async () => {
    const r = await page.goto(base + '/', { waitUntil: 'load' });
    if (r.status() !== 200) throw new Error(`GET / answered ${r.status()}: is the dashboard mounted on this server?`);
    const csp = r.headers()['content-security-policy'] || '';
    if (!csp.includes("script-src 'self'") || csp.includes('unsafe-inline')) throw new Error('weak or missing CSP: ' + csp);
    await page.waitForSelector('#login:not([hidden])', { timeout: 5000 });
    if ((await text(page, '[data-metric="step"]')) !== '—') throw new Error('a step is shown without the token');
    const drawn = await page.$$eval('[data-chart][data-points]:not([data-points="0"])', (l) => l.length);
    if (drawn) throw new Error(`${drawn} charts have data without the token`);
    if (dataRequests.length) throw new Error('the page asked for data without a token: ' + dataRequests.join(', '));
  });
  await checks.step('without the token every data and control route answers 401 (from the page and from outside)', async () => {
    const fromPage = await page.evaluate(async (routes) => {
      const out = [];
      for (const [method, path] of routes) out.push([path, (await fetch(path, { method, body: method === 'POST' ? '{}' : undefined })).status]);
      return out;
    }, DATA_ROUTES);
    const bad = fromPage.filter(([, s]) => s !== 401);
    for (const [method, path] of DATA_ROUTES) {
      const r = await apiGet(base, path, 'wrong-' + token.slice(0, 8), method, method === 'POST' ? '{}' : undefined);
      if (r.status !== 401) bad.push([path + ' (wrong token)', r.status]);
    }
    if (bad.length) throw new Error('not 401: ' + JSON.stringify(bad));
  });
  await checks.step('a wrong token typed at the prompt is refused and the prompt says so', async () => {
    await page.type('#login-token', 'not-the-token');
    await Promise.all([page.waitForNavigation({ waitUntil: 'load' }), page.click('#login-form button[type=submit]')]);
    await page.waitForFunction(() => document.querySelector('#login-message').textContent.includes('401'), { timeout: 8000 });
    const stored = await page.evaluate(() => sessionStorage.length);
    if (stored !== 0) throw new Error('a refused token stayed in sessionStorage');
  });
  await page.close();
}

async function liveChecks(browser, base, token, runDir, train) {
  const page = await newPage(browser);
  await checks.step('with #token= the token moves to sessionStorage, leaves the address bar, and the step shows', async () => {
    await page.goto(`${base}/#token=${token}`, { waitUntil: 'load' });
    const where = await page.evaluate(() => ({ hash: location.hash, href: location.href, stored: sessionStorage.length }));
    if (where.hash !== '' || where.href.includes(token)) throw new Error('token still in the address bar: ' + where.href);
    if (where.stored !== 1) throw new Error('token not in sessionStorage');
    await waitFor('a step >= 1 in [data-metric="step"]', async () => (await stepOnPage(page)) >= 1, RUN_PACE_MS);
    const api = (await apiGet(base, '/grpo/run', token)).json;
    const shown = await stepOnPage(page);
    if (Math.abs(api.step - shown) > 3) throw new Error(`page shows step ${shown}, the run is at ${api.step}`);
  });
  await checks.step('the reward, staleness and throughput charts are drawn (canvas, with data)', async () => {
    for (const id of ['reward', 'staleness', 'throughput']) {
      // Two points make a line: wait for the run to log them, then for the canvas to show it.
      await page.waitForFunction((c) => Number(document.querySelector(`[data-chart="${c}"]`)?.dataset.points || 0) >= 2,
        { timeout: RUN_PACE_MS }, id);
      await page.waitForSelector(`[data-chart="${id}"] canvas`, { timeout: 15000 });
      await waitFor(`the ${id} chart's line`, async () => (await linePixels(page, id)) > 20, 30000);
    }
  });
  await checks.step("the page shows the run's chart catalogue, every chart in its order (as the desktop does)", async () => {
    const catalogue = (await apiGet(base, '/grpo/dashboard/charts', token)).json;
    if (!Array.isArray(catalogue) || catalogue.length < 10) throw new Error('no chart catalogue: ' + JSON.stringify(catalogue));
    const want = catalogue.map((c) => [c.id, c.title]);
    const shown = await page.$$eval('[data-chart]', (l) => l.map((f) => [f.dataset.chart, f.querySelector('figcaption').textContent]));
    if (JSON.stringify(shown) !== JSON.stringify(want)) {
      throw new Error(`charts shown ${JSON.stringify(shown)}, the catalogue says ${JSON.stringify(want)}`);
    }
  });
  await checks.step('pause acts on the run: the state says paused and the step stops', async () => {
    await page.click('#pause');
    await page.waitForFunction(() => document.querySelector('[data-metric="state"]').textContent === 'paused', { timeout: RUN_PACE_MS });
    const a = (await apiGet(base, '/grpo/run', token)).json;
    if (!a.paused) throw new Error('/grpo/run says not paused');
    await new Promise((r) => setTimeout(r, 2500));
    const b = (await apiGet(base, '/grpo/run', token)).json;
    if (b.step !== a.step) throw new Error(`the step moved while paused: ${a.step} -> ${b.step}`);
    if (!(await page.$eval('#pause', (e) => e.disabled))) throw new Error('Pause still enabled while paused');
  });
  await checks.step('resume acts on the run: the state says running and the step moves again', async () => {
    const before = (await apiGet(base, '/grpo/run', token)).json.step;
    await page.click('#resume');
    await page.waitForFunction(() => document.querySelector('[data-metric="state"]').textContent === 'running', { timeout: 10000 });
    await waitFor('the step to move after resume', async () => (await apiGet(base, '/grpo/run', token)).json.step > before, RUN_PACE_MS);
  });
  await checks.step('pause and resume show as markers on the charts', async () => {
    await page.waitForSelector('[data-chart="reward"] .marker[data-kind="pause"]', { timeout: 10000 });
    await page.waitForSelector('[data-chart="reward"] .marker[data-kind="resume"]', { timeout: 10000 });
  });
  await checks.step('a retune with a bad value is refused server-side, naming the key', async () => {
    await page.click('#retune');
    await page.waitForSelector('#retune-dialog[open] #rt-learning_rate', { timeout: 10000 });
    const keys = await page.$$eval('#retune-fields [data-key]', (l) => l.map((e) => e.dataset.key));
    if (!keys.includes('temperature')) throw new Error('retune form lacks temperature: ' + keys.join(','));
    await page.$eval('#rt-learning_rate', (e) => { e.value = '-1'; e.dispatchEvent(new Event('input')); });
    await page.click('#retune-apply');
    await page.waitForFunction(() => /learning_rate/.test(document.querySelector('#retune-message').textContent), { timeout: 10000 });
    if (!(await page.$('#retune-dialog[open]'))) throw new Error('the dialog closed on a refused retune');
  });
  await checks.step('a retune is applied and appears as a marker on the charts and in the events', async () => {
    await page.$eval('#rt-learning_rate', (e) => { e.value = '0.0005'; e.dispatchEvent(new Event('input')); });
    await page.click('#retune-apply');
    await page.waitForSelector('#retune-dialog:not([open])', { timeout: 10000 });
    await page.waitForSelector('[data-chart="reward"] .marker[data-kind="retune"]', { timeout: RUN_PACE_MS });
    await page.waitForSelector('[data-chart="throughput"] .marker[data-kind="retune"]', { timeout: 5000 });
    const ev = await page.$eval('#events li[data-kind="retune"]', (e) => e.textContent);
    if (!/learning_rate .* → 0\.0005/.test(ev)) throw new Error('retune event reads: ' + ev);
  });
  await checks.step("the markers are the events the run's catalogue marks, at the catalogue's step, with its labels", async () => {
    const kinds = (await apiGet(base, '/grpo/dashboard/event-kinds', token)).json;
    const byKind = new Map(kinds.kinds.map((k) => [k.kind, k]));
    for (const k of ['pause', 'resume', 'retune', 'stop', 'error']) {
      if (!byKind.get(k)?.marker) throw new Error(`the catalogue does not mark ${k}: ${JSON.stringify(kinds)}`);
    }
    if (byKind.get('start')?.marker) throw new Error('the catalogue marks start');
    const events = (await apiGet(base, '/grpo/events?since=0', token)).json;
    // The rule as the catalogue states it (core/records/catalogue.h, event_is_marker).
    const marked = events.filter((e) => typeof e.event === 'string' && (byKind.get(e.event)?.marker ||
      typeof e[kinds.fault_field] === 'string' || e.event.endsWith(kinds.cleared_suffix)));
    const want = marked.map((e) => `${e.event}@${e[byKind.get(e.event)?.step_field || 'step'] ?? e.step}:${byKind.get(e.event)?.label || e.event}`).sort();
    await waitFor('every marked event on the reward chart', async () =>
      (await page.$$eval('[data-chart="reward"] .marker', (l) => l.length)) >= want.length, 10000);
    const shown = (await page.$$eval('[data-chart="reward"] .marker',
      (l) => l.map((m) => `${m.dataset.kind}@${m.dataset.step}:${m.dataset.label}`))).sort();
    if (JSON.stringify(shown) !== JSON.stringify(want)) throw new Error(`markers ${JSON.stringify(shown)}, the catalogue marks ${JSON.stringify(want)}`);
    const metrics = (await apiGet(base, '/grpo/dashboard/metrics', token)).json;
    if (!metrics.some((m) => m.name === 'trained_tok_s' && m.derived)) throw new Error('no derived trained_tok_s in the metric catalogue');
    const help = await page.$eval('[data-chart="throughput"] figcaption', (e) => e.title);
    if (!/generated: .*\[tok\/s\]/.test(help)) throw new Error('the throughput chart\'s help reads: ' + help);
  });
  await checks.step('samples, adapter versions and the events list are filled; an adapter file downloads with the token', async () => {
    await page.waitForSelector('#samples tbody tr', { timeout: RUN_PACE_MS });
    // Each reward function's own score beside the total.
    const parts = await page.$$eval('#samples tbody tr:first-child td .part', (l) => l.map((e) => e.textContent));
    if (!parts.length || !parts.every((t) => /^\S+ (-?[\d.]+(e[-+]?\d+)?|—)$/.test(t))) throw new Error('per-function rewards: ' + JSON.stringify(parts));
    // The run publishes adapter versions at its own pace; the page asks for them every 5 s.
    await waitFor('a published adapter version (/grpo/dashboard/adapters)', async () => {
      const r = await apiGet(base, '/grpo/dashboard/adapters', token);
      return Array.isArray(r.json) && r.json.length > 0;
    }, RUN_PACE_MS, 500);
    await page.waitForSelector('#adapters li button', { timeout: 30000 });
    const bytes = await page.evaluate(async (t) => {
      const v = document.querySelector('#adapters li').dataset.version;
      const r = await fetch(`/grpo/dashboard/adapter/${v}/adapter_config.json`, { headers: { Authorization: 'Bearer ' + t } });
      return r.ok ? (await r.text()).length : -r.status;
    }, token);
    if (!(bytes > 10)) throw new Error('adapter download: ' + bytes);
    const kinds = await page.$$eval('#events li', (l) => l.map((e) => e.dataset.kind));
    for (const k of ['start', 'pause', 'resume', 'retune']) if (!kinds.includes(k)) throw new Error(`no ${k} event listed: ${kinds}`);
  });
  await checks.step('stop asks for confirmation, then ends the run', async () => {
    await page.click('#stop');
    await page.waitForSelector('#stop-dialog[open]', { timeout: 5000 });
    await page.click('#stop-cancel');
    if ((await apiGet(base, '/grpo/run', token)).json.state === 'stopping') throw new Error('cancel stopped the run');
    await page.click('#stop');
    await page.waitForSelector('#stop-dialog[open]', { timeout: 5000 });
    await page.click('#stop-confirm');
    const exit = await Promise.race([train.exited, new Promise((r) => setTimeout(() => r(null), 30000))]);
    if (!exit) throw new Error('the trainer did not exit within 30 s of the stop');
    await page.waitForFunction(() => /Connection lost/.test(document.querySelector('#connection').textContent), { timeout: 10000 });
  });
  return page;
}

async function reconnectCheck(page, grpo, base, token, tokenFile, runDir) {
  let resumed = null;
  await checks.step('the trainer resumed on the same port: the page reconnects by itself and says so', async () => {
    const port = new URL(base).port;
    resumed = startProcess(grpo, ['train', '--resume', runDir, '--steps', '100000', '--serve', `127.0.0.1:${port}`,
      '--cluster-token-file', tokenFile], /serving run on (\S+)/, 60000);
    await resumed.ready;
    await page.waitForFunction(() => /Reconnected: the trainer restarted/.test(document.querySelector('#connection').textContent), { timeout: 30000 });
    await waitFor('the step to show again', async () => (await stepOnPage(page)) >= 1, 20000);
  });
  if (resumed) {
    await apiGet(base, '/grpo/run/stop', token, 'POST', '{}').catch(() => null);
    await Promise.race([resumed.child.exited, new Promise((r) => setTimeout(r, 20000))]);
    await stopProcess(resumed.child);
  }
}

async function readOnlyChecks(browser, grpo, tokenFile, token, runDir, tmp) {
  // A marker at the run's last step, forced rather than left to when the stop landed: its label
  // is the one that could widen a phone's page.
  const metricLines = readFileSync(join(runDir, 'metrics.jsonl'), 'utf8').trim().split('\n');
  const lastStep = JSON.parse(metricLines[metricLines.length - 1]).step;
  appendFileSync(join(runDir, 'events.jsonl'), JSON.stringify({ event: 'retune', time: Date.now() / 1000,
    applied_at_step: lastStep, old: { temperature: 1.0 }, new: { temperature: 0.9 } }) + '\n');
  const other = join(tmp, 'other-run');
  writeSyntheticRun(other, { steps: 500, series: ['reward', 'reward_std', 'sample/staleness_mean', 'rollout/generated_tok_s'],
    spikes: { 251: { reward: 100 }, 377: { reward: -50 } } });
  const serve = startProcess(grpo, ['serve', runDir, other, '--listen', '127.0.0.1:0', '--cluster-token-file', tokenFile],
    /dashboard: (http:\/\/\S+)\/#token=(\S+)/, 30000);
  try {
    const m = await serve.ready;
    const base = m[1];
    await checks.step('grpo serve prints the address with the token and refuses data without it', async () => {
      if (m[2] !== token) throw new Error('printed token differs from the token file');
      for (const [method, path] of DATA_ROUTES.filter(([meth]) => meth === 'GET')) {
        const r = await apiGet(base, path, null, method);
        if (r.status !== 401) throw new Error(`${path}: ${r.status}`);
      }
      const ctl = await apiGet(base, '/grpo/run/pause', token, 'POST', '{}');
      if (ctl.status !== 404) throw new Error('a read-only server answered pause with ' + ctl.status);
    });
    await checks.step('the series route decimates to the points asked, keeping every spike; a rewritten file changes its epoch', async () => {
      const full = (await apiGet(base, '/grpo/dashboard/series?run=1&since=-1&points=5000&keys=reward', token)).json;
      const small = (await apiGet(base, '/grpo/dashboard/series?run=1&since=-1&points=64&keys=reward', token)).json;
      if (full.sampled || full.x.length !== 500) throw new Error(`full: ${full.x.length} rows, sampled ${full.sampled}`);
      if (!small.sampled || small.x.length > 64 || small.x.length < 32) throw new Error(`decimated to ${small.x.length} points`);
      const ys = small.series.reward;
      if (Math.max(...ys) !== 100 || Math.min(...ys) !== -50) throw new Error(`spikes lost: max ${Math.max(...ys)}, min ${Math.min(...ys)}`);
      if (small.x[0] !== 1 || small.x[small.x.length - 1] !== 500) throw new Error('the ends of the run are not kept');
      const tail = (await apiGet(base, '/grpo/dashboard/series?run=1&since=490&keys=reward', token)).json;
      if (tail.x.join(',') !== '491,492,493,494,495,496,497,498,499,500') throw new Error('since=490 gave ' + tail.x);
      const bad = await apiGet(base, '/grpo/dashboard/series?points=abc', token);
      if (bad.status !== 400) throw new Error('points=abc answered ' + bad.status);
      appendMetrics(other, [{ step: 10, time: 1796000000, reward: 7 }]);  // a resume rewrote the run from step 10
      const again = (await apiGet(base, '/grpo/dashboard/series?run=1&since=500&keys=reward', token)).json;
      if (again.epoch === full.epoch || again.rows !== 10) throw new Error(`after the rewrite: epoch ${again.epoch}, rows ${again.rows}`);
    });
    const page = await newPage(browser, { width: 390, height: 844, dark: true });  // a phone, dark
    await checks.step('grpo serve: the read-only page shows the last step, no controls, and compares two runs', async () => {
      await page.goto(`${base}/#token=${m[2]}`, { waitUntil: 'load' });
      const last = (await apiGet(base, '/grpo/run', token)).json.step;
      await waitFor('the last step', async () => (await stepOnPage(page)) === last, 15000);
      if (!(await page.$('#controls[hidden]'))) throw new Error('controls shown on a read-only run');
      await page.waitForSelector('[data-chart="reward"][data-points]:not([data-points="0"])', { timeout: 10000 });
      const edge = await page.waitForSelector(`[data-chart="reward"] .marker[data-step="${lastStep}"]`, { timeout: 10000 })
        .then((h) => h.evaluate((e) => e.dataset.side || 'right'), () => 'missing');
      if (edge !== 'left') throw new Error(`the marker at the last step (${lastStep}) is ${edge}; its label must be drawn to the left`);
      await page.select('#compare', '1');
      await page.waitForFunction(() => [...document.querySelectorAll('[data-chart="reward"] .u-legend .u-series')]
        .some((e) => e.textContent.includes('(compared)')), { timeout: 10000 });
      const width = await page.evaluate(() => document.documentElement.scrollWidth);
      if (width > 400) throw new Error(`the page is ${width} px wide on a 390 px phone`);
    });
    await checks.step('no script errors on the pages', async () => {
      if (page.errors.length) throw new Error(page.errors.join('\n'));
    });
  } finally {
    await stopProcess(serve.child);
  }
}

async function main() {
  const chromium = findChromium(args.chromium);
  const tmp = tempDir();
  const { token, file: tokenFile } = makeTokenFile(tmp);
  const runDir = join(tmp, 'run');
  const train = startProcess(args.grpo, ['train', '--demo', '--steps', '100000', '--serve', '127.0.0.1:0',
    '--cluster-token-file', tokenFile, '--output', runDir], /serving run on (\S+)/, 60000);
  let browser = null;
  try {
    const [, base] = await train.ready;
    browser = await launchBrowser(chromium);
    const mounted = (await apiGet(base, '/')).status === 200;
    if (checks.ok('grpo train --serve serves the page at / (RunEndpoint mounts add_dashboard_routes)', mounted)) {
      await noTokenChecks(browser, base, token);
      const page = await liveChecks(browser, base, token, runDir, train.child);
      await reconnectCheck(page, args.grpo, base, token, tokenFile, runDir);
      if (page.errors.length) checks.ok('no script errors on the live page', false, page.errors.join('\n'));
    } else {
      // The read-only checks below still run, on the run's first steps.
      await waitFor('3 steps', async () => (await apiGet(base, '/grpo/run', token)).json.step >= 3, 60000, 300);
      await stopProcess(train.child);
    }
    await readOnlyChecks(browser, args.grpo, tokenFile, token, runDir, tmp);
  } catch (e) {
    checks.ok('test harness', false, e.stack || e.message);
  } finally {
    if (browser) await browser.close().catch(() => null);
    await stopProcess(train.child);
    if (!args.keep) cleanup(tmp);
  }
  clearTimeout(deadline);
  process.exit(checks.summary());
}

main();
