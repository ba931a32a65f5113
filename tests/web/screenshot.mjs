// The README's picture of the browser view: a real `grpo train --demo --serve` run, paused and
// resumed and retuned once (so its markers show), in Debian's headless chromium.
// usage: node screenshot.mjs --grpo PATH --out docs/dashboard-browser.png [--chromium PATH] [--steps 40] [--dark]
import { join } from 'node:path';
import { apiGet, cleanup, findChromium, launchBrowser, makeTokenFile, newPage, parseArgs, startProcess, stopProcess,
  tempDir, waitFor } from './lib.mjs';

const args = parseArgs(process.argv);
if (!args.grpo || !args.out) { console.error('usage: node screenshot.mjs --grpo PATH --out FILE.png'); process.exit(2); }
const STEPS = Number(args.steps || 40);

async function main() {
  const tmp = tempDir('grpo-web-shot-');
  const { token, file } = makeTokenFile(tmp);
  const train = startProcess(args.grpo, ['train', '--demo', '--steps', '100000', '--serve', '127.0.0.1:0',
    '--cluster-token-file', file, '--output', join(tmp, 'demo-run')], /serving run on (\S+)/, 60000);
  let browser;
  try {
    const [, base] = await train.ready;
    const step = async () => (await apiGet(base, '/grpo/run', token)).json.step;
    await waitFor('step 8', async () => (await step()) >= 8, 60000, 300);
    await apiGet(base, '/grpo/run/pause', token, 'POST', '{}');
    await new Promise((r) => setTimeout(r, 1500));
    await apiGet(base, '/grpo/run/resume', token, 'POST', '{}');
    await waitFor('step 16', async () => (await step()) >= 16, 60000, 300);
    await apiGet(base, '/grpo/run/retune', token, 'POST', JSON.stringify({ learning_rate: 0.0006 }));
    await waitFor(`step ${STEPS}`, async () => (await step()) >= STEPS, 120000, 300);
    browser = await launchBrowser(findChromium(args.chromium), { width: 1280, height: 1000 });
    const page = await newPage(browser, { width: 1280, height: 1000, dark: !!args.dark });
    await page.goto(`${base}/#token=${token}`, { waitUntil: 'load' });
    await page.waitForSelector('[data-chart="reward"] .marker[data-kind="retune"]', { timeout: 20000 });
    await page.waitForSelector('#samples tbody tr', { timeout: 20000 });
    await new Promise((r) => setTimeout(r, 1500));
    await page.screenshot({ path: args.out });
    console.log(`wrote ${args.out} at step ${await step()}`);
  } finally {
    if (browser) await browser.close().catch(() => null);
    await stopProcess(train.child);
    cleanup(tmp);
  }
}

main().catch((e) => { console.error(e); process.exit(1); });
