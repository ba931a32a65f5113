// Benchmark of the browser view (BENCHMARKS.md, "Browser view"): a run of 100,000 steps x 20
// metric series served by `grpo serve`, opened in Debian's headless chromium with every chart on
// screen, then one new step a second for --seconds. Measured in the page with the Performance API:
//   load     navigation start -> every chart drawn with the history ("grpo-ready" mark), and the
//            history request (/grpo/dashboard/series, decimated by the server) time and size
//   update   per update: the page's work from the new data to the last chart redrawn
//            ("grpo-update" measures; the redraws are spread over animation frames), the work in
//            any one frame ("grpo-frame-work"), frames slower than 16.7 ms, long tasks (> 50 ms)
// usage: node bench_dashboard.mjs --grpo PATH [--chromium PATH] [--steps 100000] [--series 20] [--seconds 20]
//        [--width 1600 --height 3200]
import { join } from 'node:path';
import { apiGet, appendMetrics, cleanup, findChromium, launchBrowser, makeTokenFile, newPage, parseArgs, startProcess, stopProcess,
  tempDir, waitFor, writeSyntheticRun } from './lib.mjs';

const args = parseArgs(process.argv);
const STEPS = Number(args.steps || 100000), SECONDS = Number(args.seconds || 20);
// The default viewport shows all 15 charts at once (every one redraws on every update: the worst
// case); --width 1280 --height 900 is a laptop's window (charts off screen wait until scrolled to).
const WIDTH = Number(args.width || 1600), HEIGHT = Number(args.height || 3200);
// 20 of the metrics the charts show (trained tok/s is derived from two of them).
const ALL = ['reward', 'reward_std', 'rewards/accuracy/mean', 'eval/accuracy', 'sample/staleness_mean', 'sample/staleness_max',
  'rollout/generated_tok_s', 'batch/trained_tokens_per_step', 'perf/step_s', 'kl', 'loss', 'clip_ratio/low_mean',
  'clip_ratio/high_mean', 'clip_ratio/region_mean', 'perf/mfu_wall_clock', 'sample/rollout_queue_size', 'trainer_idle_frac',
  'generation_idle_frac', 'learning_rate', 'completions/mean_length'];
const SERIES = ALL.slice(0, Number(args.series || 20));

const stats = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const q = (p) => (s.length ? s[Math.min(s.length - 1, Math.floor(p * s.length))] : NaN);
  return { n: s.length, median: q(0.5), p95: q(0.95), max: s.length ? s[s.length - 1] : NaN };
};
const ms = (x) => (Number.isFinite(x) ? x.toFixed(1) : '-');

async function main() {
  const chromium = findChromium(args.chromium);
  const tmp = tempDir('grpo-web-bench-');
  const { token, file } = makeTokenFile(tmp);
  const run = join(tmp, 'run');
  let t = Date.now();
  writeSyntheticRun(run, { steps: STEPS, series: SERIES, maxSteps: STEPS + 10000 });
  console.log(`wrote ${STEPS} steps x ${SERIES.length} series in ${Date.now() - t} ms`);
  const serve = startProcess(args.grpo, ['serve', run, '--listen', '127.0.0.1:0', '--cluster-token-file', file],
    /dashboard: (http:\/\/\S+)\/#token=/, 30000);
  let browser;
  try {
    const [, base] = await serve.ready;
    if (args['keep-run']) console.log('run directory: ' + run);
    // The server parses the run's metrics once, in the background from its start: the first
    // state request waits for that (a cold start); the page then opens on a warm server.
    t = Date.now();
    const first = await apiGet(base, '/grpo/dashboard/state', token);
    if (first.status !== 200) throw new Error('state: ' + first.status);
    console.log(`server: metrics of ${STEPS} steps read and ready ${Date.now() - t} ms after the first request (started with the server)`);
    browser = await launchBrowser(chromium, { width: WIDTH, height: HEIGHT });
    const page = await newPage(browser, { width: WIDTH, height: HEIGHT });
    await page.evaluateOnNewDocument(() => {
      window.__frames = [];
      window.__long = [];
      let last = 0;
      const tick = (now) => { if (last) window.__frames.push(now - last); last = now; requestAnimationFrame(tick); };
      requestAnimationFrame(tick);
      new PerformanceObserver((l) => { for (const e of l.getEntries()) window.__long.push(e.duration); }).observe({ type: 'longtask', buffered: true });
    });
    t = Date.now();
    await page.goto(`${base}/#token=${token}`, { waitUntil: 'load' });
    await page.waitForFunction(() => performance.getEntriesByName('grpo-ready').length > 0, { timeout: 120000 });
    const load = await page.evaluate(() => {
      const ready = performance.getEntriesByName('grpo-ready')[0].startTime;
      const series = performance.getEntriesByType('resource').filter((e) => e.name.includes('/grpo/dashboard/series'));
      const first = series[0];
      const points = [...document.querySelectorAll('[data-chart][data-points]')].map((e) => Number(e.dataset.points));
      const mark = (n) => { const e = performance.getEntriesByName(n)[0]; return e ? e.startTime : NaN; };
      return { ready, firstState: mark('grpo-first-state'), firstSeries: mark('grpo-first-series'), seriesMs: first ? first.responseEnd - first.startTime : NaN, seriesBytes: first ? first.encodedBodySize : 0,
        charts: points.filter((p) => p > 0).length, maxPoints: Math.max(...points), heapMB: performance.memory ? performance.memory.usedJSHeapSize / 2 ** 20 : NaN };
    });
    console.log(`load: ready ${ms(load.ready)} ms after navigation start (${Date.now() - t} ms wall; state at ${ms(load.firstState)}, ` +
      `history parsed at ${ms(load.firstSeries)}); history request ${ms(load.seriesMs)} ms, ` +
      `${(load.seriesBytes / 1024).toFixed(0)} KiB; ${load.charts} charts drawn, ${load.maxPoints} points per series; JS heap ${ms(load.heapMB)} MiB`);
    // Live: one step a second, as a trainer writes them.
    await page.evaluate(() => { performance.clearMeasures(); window.__frames = []; window.__long = []; });
    for (let s = 1; s <= SECONDS; s++) {
      const rec = { step: STEPS + s, time: 1796000000 + (STEPS + s) * 0.5 };
      for (const k of SERIES) rec[k] = Math.random();
      appendMetrics(run, [rec]);
      await new Promise((r) => setTimeout(r, 1000));
    }
    await waitFor('the last step on the page', () => page.$eval('[data-metric="step"]', (e, last) => Number(e.textContent) === last, STEPS + SECONDS), 10000);
    const upd = await page.evaluate(() => ({
      updates: performance.getEntriesByName('grpo-update-work').map((e) => e.duration),
      latency: performance.getEntriesByName('grpo-update').map((e) => e.duration),
      frameWork: performance.getEntriesByName('grpo-frame-work').map((e) => e.duration),
      frames: window.__frames, long: window.__long,
    }));
    const u = stats(upd.updates), f = stats(upd.frameWork), fr = stats(upd.frames), lat = stats(upd.latency);
    console.log(`update: ${u.n} updates; page work per update median ${ms(u.median)} ms, p95 ${ms(u.p95)}, max ${ms(u.max)} ` +
      `(spread over frames; new data to last chart drawn: median ${ms(lat.median)} ms); work in one frame median ${ms(f.median)} ms, max ${ms(f.max)}; ` +
      `${fr.n} frames, interval median ${ms(fr.median)} ms, max ${ms(fr.max)}, ${upd.frames.filter((x) => x > 16.7 * 1.5).length} slower than 25 ms; ` +
      `${upd.long.length} long tasks (> 50 ms)`);
    if (page.errors.length) console.log('page errors:\n' + page.errors.join('\n'));
    console.log(JSON.stringify({ steps: STEPS, series: SERIES.length, viewport: `${WIDTH}x${HEIGHT}`, load, update: { work: u, latency: lat, frameWork: f, frames: fr, longTasks: upd.long.length } }));
  } finally {
    if (browser) await browser.close().catch(() => null);
    await stopProcess(serve.child);
    cleanup(tmp);
  }
}

main().catch((e) => { console.error(e); process.exit(1); });
