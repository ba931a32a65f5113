// Helpers for the browser view's tests and benchmark: the real `grpo` binary as a child process,
// Debian's chromium driven headless through puppeteer-core (no browser download), temporary run
// directories and cluster tokens. Loopback only; every wait is bounded in time.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, writeFileSync, chmodSync, rmSync, mkdirSync, appendFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export function parseArgs(argv) {
  const out = {};
  for (let i = 2; i < argv.length; i++) {
    const a = argv[i];
    if (!a.startsWith('--')) throw new Error(`unexpected argument ${a}`);
    const next = argv[i + 1];
    if (next === undefined || next.startsWith('--')) out[a.slice(2)] = true;
    else { out[a.slice(2)] = next; i++; }
  }
  return out;
}

export function findChromium(given) {
  for (const p of [given, process.env.CHROMIUM, '/usr/bin/chromium', '/usr/bin/chromium-browser'])
    if (p && existsSync(p)) return p;
  throw new Error('no chromium found: install Debian\'s chromium (scripts/setup.sh) or pass --chromium PATH');
}

export async function loadPuppeteer() {
  try {
    return (await import('puppeteer-core')).default;
  } catch (e) {
    throw new Error(`puppeteer-core is missing: run \`npm ci\` in tests/web (scripts/setup.sh does) (${e.message})`);
  }
}

export async function launchBrowser(chromium, { width = 1280, height = 900, dark = false } = {}) {
  const puppeteer = await loadPuppeteer();
  const browser = await puppeteer.launch({
    executablePath: chromium,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--no-first-run', '--disable-extensions',
      '--disable-background-networking', '--disable-component-update', '--metrics-recording-only',
      `--window-size=${width},${height}`],
    defaultViewport: { width, height },
    protocolTimeout: 60000,
  });
  return browser;
}

export async function newPage(browser, { dark = false, width, height } = {}) {
  const page = await browser.newPage();
  if (width) await page.setViewport({ width, height });
  await page.emulateMediaFeatures([{ name: 'prefers-color-scheme', value: dark ? 'dark' : 'light' }]);
  const errors = [];
  page.on('pageerror', (e) => errors.push('pageerror: ' + e.message));
  // Failed requests are logged by the browser itself (a refused retune's 400, a trainer that went
  // away): expected in these tests, and not script errors.
  page.on('console', (m) => { if (m.type() === 'error' && !m.text().startsWith('Failed to load resource')) errors.push('console: ' + m.text()); });
  page.errors = errors;
  return page;
}

export function tempDir(prefix = 'grpo-web-') { return mkdtempSync(join(tmpdir(), prefix)); }

export function makeTokenFile(dir) {
  const token = randomBytes(32).toString('hex');
  const file = join(dir, 'cluster-token');
  writeFileSync(file, token + '\n', { mode: 0o600 });
  chmodSync(file, 0o600);
  return { token, file };
}

// Starts `cmd args`, resolving once a stdout line matches `ready` (with the match), rejecting on
// exit or after `timeoutMs`. The process's output is kept for messages.
export function startProcess(cmd, args, ready, timeoutMs = 60000, env = {}) {
  const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, OPENBLAS_NUM_THREADS: '1', ...env } });
  child.output = '';
  child.exited = new Promise((res) => child.on('exit', (code, sig) => res({ code, sig })));
  const matched = new Promise((resolve, reject) => {
    let buf = '';
    const timer = setTimeout(() => reject(new Error(`${cmd} ${args.join(' ')}: not ready in ${timeoutMs} ms\n${child.output.slice(-2000)}`)), timeoutMs);
    child.stdout.on('data', (d) => {
      const s = d.toString();
      child.output += s;
      buf += s;
      const m = buf.match(ready);
      if (m) { clearTimeout(timer); resolve(m); buf = ''; }
    });
    child.stderr.on('data', (d) => { child.output += d.toString(); });
    child.exited.then(({ code, sig }) => { clearTimeout(timer); reject(new Error(`${cmd} exited (${code ?? sig}) before it was ready\n${child.output.slice(-3000)}`)); });
  });
  return { child, ready: matched };
}

export async function stopProcess(child, timeoutMs = 20000) {
  if (child.exitCode !== null || child.signalCode !== null) return;
  child.kill('SIGTERM');
  const t = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
  await child.exited;
  clearTimeout(t);
}

export async function waitFor(what, fn, timeoutMs = 20000, intervalMs = 100) {
  const end = Date.now() + timeoutMs;
  let last;
  while (Date.now() < end) {
    try { last = await fn(); if (last) return last; } catch (e) { last = e; }
    await new Promise((r) => setTimeout(r, intervalMs));
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what} (last: ${last instanceof Error ? last.message : JSON.stringify(last)})`);
}

export async function apiGet(base, path, token, method = 'GET', body) {
  const headers = token ? { Authorization: 'Bearer ' + token } : {};
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const r = await fetch(base + path, { method, headers, body });
  const text = await r.text();
  let json = null;
  try { json = JSON.parse(text); } catch (_) { /* not JSON */ }
  return { status: r.status, headers: r.headers, text, json };
}

// A run directory written the way RunDirectory writes one: config.json and one metrics record a
// line ({"step","time",<metric>...}); `series` metric names, each a smooth curve plus noise.
export function writeSyntheticRun(dir, { steps, series, maxSteps = steps, events = [], spikes = {} }) {
  mkdirSync(join(dir, 'adapters'), { recursive: true });
  mkdirSync(join(dir, 'checkpoints'), { recursive: true });
  writeFileSync(join(dir, 'config.json'), JSON.stringify({ max_steps: maxSteps, learning_rate: 0.0003, output_dir: dir }));
  const lines = [];
  const t0 = 1796000000;
  let chunk = '';
  for (let s = 1; s <= steps; s++) {
    const rec = { step: s, time: t0 + s * 0.5, policy_version: Math.floor(s / 2) };
    series.forEach((k, i) => { rec[k] = Math.sin(s / (200 + 37 * i)) * (i + 1) + Math.random() * 0.05 + (k === 'reward' ? 0.5 : 0); });
    Object.assign(rec, spikes[s] || {});
    chunk += JSON.stringify(rec) + '\n';
    if (chunk.length > 1 << 20) { lines.push(chunk); chunk = ''; }
  }
  lines.push(chunk);
  writeFileSync(join(dir, 'metrics.jsonl'), lines.join(''));
  writeFileSync(join(dir, 'events.jsonl'), events.map((e) => JSON.stringify(e) + '\n').join(''));
}

export function appendMetrics(dir, records) {
  appendFileSync(join(dir, 'metrics.jsonl'), records.map((r) => JSON.stringify(r) + '\n').join(''));
}

export function cleanup(dir) { try { rmSync(dir, { recursive: true, force: true }); } catch (_) { /* best effort */ } }

// Counts checks and prints the closing line CI reads ("N passed, M failed").
export class Checks {
  constructor() { this.passed = 0; this.failed = 0; }
  ok(name, cond, detail = '') {
    if (cond) { this.passed++; console.log(`PASS ${name}`); } else { this.failed++; console.log(`FAIL ${name}${detail ? ': ' + detail : ''}`); }
    return cond;
  }
  async step(name, fn) {
    const t = Date.now();
    try { await fn(); this.passed++; console.log(`PASS ${name} (${Date.now() - t} ms)`); return true; } catch (e) {
      this.failed++; console.log(`FAIL ${name} (${Date.now() - t} ms): ${e.stack || e.message}`); return false;
    }
  }
  summary() { console.log(`${this.passed} passed, ${this.failed} failed`); return this.failed === 0 ? 0 : 1; }
}
