// SPDX-License-Identifier: MIT
// Browser tests of `heapprof view`: records programs under libheapprof.so, writes their viewer
// pages and drives them in the system's headless Chromium through playwright-core (never a
// downloaded browser). Fails on any console error or page exception. Screenshots go to
// $VIEW_ARTIFACTS. Exit 0 pass, 1 fail, 77 skip (no Chromium; ctest SKIP_RETURN_CODE).
//
//   node view_test.mjs                 every test (ctest: e2e_view_browser)
//   node view_test.mjs --measure N     bench: N-stack trace, size and time to interactive
//   node view_test.mjs --pages A.html ...  opens pages made by `heapprof view`, visits every
//                                      view, fails on any console error
//
// Environment (set by tests/browser/CMakeLists.txt): HEAPPROF, HEAPPROF_LIB, VIEW_SAMPLES,
// VIEW_PROGS, VIEW_WORK, VIEW_ARTIFACTS; CHROMIUM (default /usr/bin/chromium).
import {spawnSync} from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

const SKIP = 77;
const env = (k, d) => process.env[k] || d;
const HEAPPROF = env('HEAPPROF'), LIB = env('HEAPPROF_LIB');
const SAMPLES = env('VIEW_SAMPLES'), PROGS = env('VIEW_PROGS');
const WORK = env('VIEW_WORK', '/tmp/heapprof-view-test'), ART = env('VIEW_ARTIFACTS', WORK);
const CHROMIUM = env('CHROMIUM', '/usr/bin/chromium');
const ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync'];

if (!fs.existsSync(CHROMIUM)) {
  console.log(`SKIP: no Chromium at ${CHROMIUM} (apt-get install chromium; scripts/deps.sh does)`);
  process.exit(SKIP);
}
let chromium;
try {
  ({chromium} = await import('playwright-core'));
} catch (e) {
  console.error('FAIL: playwright-core is not installed in tests/browser (run scripts/deps.sh, ' +
    'or npm ci in tests/browser): ' + e.message);
  process.exit(1);
}
for (const [k, v] of Object.entries({HEAPPROF, HEAPPROF_LIB: LIB, VIEW_SAMPLES: SAMPLES, VIEW_PROGS: PROGS}))
  if (!v && !process.argv.includes('--pages')) { console.error(`FAIL: ${k} is not set (run through ctest)`); process.exit(1); }
fs.mkdirSync(WORK, {recursive: true});
fs.mkdirSync(ART, {recursive: true});

function check(cond, what) { if (!cond) throw new Error(what); }

function run(cmd, args, opts = {}) {
  const r = spawnSync(cmd, args, {encoding: 'utf8', maxBuffer: 1 << 28, timeout: 600000, ...opts});
  if (r.error) throw r.error;
  return r;
}

// Runs prog under the shim into WORK/name.hpt, then `heapprof view`; returns the page's path.
function record(name, prog, args = []) {
  const trace = path.join(WORK, name + '.hpt'), html = path.join(WORK, name + '.html');
  fs.rmSync(trace, {force: true});
  const r = run(prog, args, {env: {...process.env, LD_PRELOAD: LIB, HEAPPROF_OUT: trace, HEAPPROF_QUIET: '1'}});
  check(r.status === 0, `${prog} exited ${r.status}: ${r.stderr}`);
  const v = run(HEAPPROF, ['view', trace, '-o', html]);
  check(v.status === 0, `heapprof view ${trace}: ${v.stderr}`);
  return {trace, html};
}

let browser;
async function open(html, {width = 1280, height = 860} = {}) {
  const page = await browser.newPage({viewport: {width, height}});
  const errors = [];
  page.on('console', (m) => { if (m.type() === 'error' || m.type() === 'warning') errors.push(m.type() + ': ' + m.text()); });
  page.on('pageerror', (e) => errors.push('exception: ' + e.message));
  page.on('requestfailed', (r) => errors.push('request failed: ' + r.url()));
  page.on('request', (r) => { if (!r.url().startsWith('file:') && !r.url().startsWith('data:')) errors.push('network request: ' + r.url()); });
  const t0 = Date.now();
  await page.goto('file://' + html);
  await page.waitForSelector('body[data-ready="1"]', {timeout: 30000});
  page.loadMs = Date.now() - t0;
  page.errors = errors;
  return page;
}
const text = (page, sel) => page.locator(sel).first().innerText();
// A view's number key, as a keyboard user presses it: outside any text field.
async function tab(page, k) {
  await page.evaluate(() => document.activeElement && document.activeElement.blur());
  await page.keyboard.press(k);
}
function noErrors(page) { check(page.errors.length === 0, 'console errors:\n  ' + page.errors.join('\n  ')); }

// ---- the tests ----

async function testSample() {
  const {trace, html} = record('vector_map', path.join(SAMPLES, 'vector_map'));
  const stats = JSON.parse(run(HEAPPROF, ['stats', '--json', trace]).stdout);
  const page = await open(html);
  const fmt = (v) => v.toLocaleString('en-US');

  // summary: the totals of `heapprof stats`
  const cards = await text(page, '#sum-cards');
  check(cards.includes(fmt(stats.blocks) + ' blocks (' + fmt(stats.bytes) + ' bytes)'), 'summary lacks the allocated totals: ' + cards);
  check(cards.includes(fmt(stats.peak_blocks) + ' blocks at'), 'summary lacks the peak blocks');
  check(cards.includes(fmt(stats.events) + ' events'), 'summary lacks the event count');
  const cpuSamples = stats.cpu ? stats.cpu.samples : 0;
  if (cpuSamples > 0) check(new RegExp('CPU SAMPLES\\s*' + fmt(cpuSamples), 'i').test(cards), 'summary lacks the CPU sample count: ' + cards);
  else check(/CPU SAMPLES\s*not recorded/i.test(cards), 'summary lacks "CPU samples: not recorded"');
  // the size histogram's blocks add up to the allocated blocks; peak RSS as stats says
  const sizeRows = await page.$$eval('#sum-sizes tbody tr', (rs) => rs.map((r) => r.children[1].textContent));
  const sizeBlocks = sizeRows.reduce((a, t) => a + Number(t.replace(/,/g, '')), 0);
  check(sizeBlocks === stats.blocks, 'size histogram: ' + sizeBlocks + ' blocks, stats ' + stats.blocks);
  if (stats.peak_rss_bytes) check(/PEAK RSS/i.test(cards), 'summary lacks the peak RSS: ' + cards);
  await page.screenshot({path: path.join(ART, 'viewer-summary.png'), fullPage: true});

  // flamegraph: every metric with data, zoom, search, bottom-up
  await tab(page, '2');
  await page.waitForSelector('#view-flame.active canvas');
  const crumbs = () => text(page, '#flame-crumbs');
  check((await crumbs()).includes('bytes allocated'), 'flamegraph does not start on bytes');
  for (const m of ['blocks', 'peak', 'leaked', 'temporary', 'growth', 'cpu', 'bytes']) {
    const b = page.locator(`#metrics button[data-metric="${m}"]`);
    if (await b.isDisabled()) { check(m === 'leaked' || m === 'temporary' || (m === 'cpu' && !cpuSamples), `metric ${m} disabled`); continue; }
    await b.click();
    check((await b.getAttribute('aria-checked')) === 'true', `metric ${m} not selected`);
    const want = {blocks: 'blocks allocated', peak: 'global peak', leaked: 'live at exit', temporary: 'temporary', growth: 'copied', cpu: 'CPU samples', bytes: 'bytes allocated'}[m];
    check((await crumbs()).includes(want), `crumbs after ${m}: ${await crumbs()}`);
    if (m === 'cpu') check((await crumbs()).includes(fmt(cpuSamples) + ' (100.0%)'), 'cpu total: ' + await crumbs());
  }
  const cpu = page.locator('#metrics button[data-metric="cpu"]');
  if (!cpuSamples) {
    check(await cpu.isDisabled(), 'the cpu metric is enabled without samples');
    check((await cpu.getAttribute('title')).includes('not recorded'), 'cpu button does not say "not recorded"');
  }

  const canvas = page.locator('#flame');
  const box = await canvas.boundingBox();
  await canvas.hover({position: {x: 20, y: 18 * 1.5}});
  check(await page.locator('#tooltip').isVisible(), 'no tooltip on hover');
  await canvas.click({position: {x: 20, y: 18 * 1.5}}); // the widest child of the root
  const zoomed = await page.locator('#flame-crumbs button').count();
  check(zoomed === 2, `zoom: ${zoomed} crumbs`);
  check((await text(page, '#flame-details')).length > 0, 'no details after a click');
  await canvas.click({position: {x: box.width - 5, y: 18 * 2.5}}).catch(() => {});
  await page.keyboard.press('Escape');
  check(await page.locator('#flame-crumbs button').count() === 1, 'Escape does not zoom out');
  // keyboard only: down to the widest child of the root, Enter zooms, Backspace zooms out
  await canvas.focus();
  await page.mouse.move(0, 0);
  await page.keyboard.press('ArrowDown');
  const firstChild = await text(page, '#flame-details-fn');
  await page.keyboard.press('Enter');
  check(await page.locator('#flame-crumbs button').count() === 2, 'Enter does not zoom');
  check((await text(page, '#flame-crumbs')).includes(firstChild.slice(0, 40)), 'Enter zoomed elsewhere');
  await page.keyboard.press('Backspace');
  check(await page.locator('#flame-crumbs button').count() === 1, 'Backspace does not zoom out');

  await page.fill('#flame-search', 'main');
  const match = await text(page, '#flame-match');
  check(/^matched .* \((\d+\.\d)%\)/.test(match) && !match.includes('(0.0%)'), 'search: ' + match);
  await page.fill('#flame-search', 'no_such_function_xyz');
  check((await text(page, '#flame-match')).includes('no frame matches'), 'search for nothing');
  await page.fill('#flame-search', 'grow_vectors');
  await page.screenshot({path: path.join(ART, 'viewer-flame-search.png')});
  await page.fill('#flame-search', '');

  await page.check('#inverted');
  check((await crumbs()).startsWith('bottom-up'), 'inverted toggle: ' + await crumbs());
  await canvas.click({position: {x: 20, y: 18 * 1.5}});
  check(await page.locator('#flame-crumbs button').count() === 2, 'zoom in the bottom-up graph');
  await page.uncheck('#inverted');
  check((await crumbs()).startsWith('top-down'), 'inverted off');
  await canvas.hover({position: {x: box.width * 0.3, y: 18 * 4.5}});
  await page.screenshot({path: path.join(ART, 'viewer-flame.png')});

  // heap over time: the peak is selected first; a click picks a moment
  await tab(page, '3');
  await page.waitForSelector('#time-title');
  check((await text(page, '#time-title')).includes('at the global peak'), 'timeline does not open at the peak');
  const tc = page.locator('#timeline');
  const tb = await tc.boundingBox();
  await tc.click({position: {x: 70 + (tb.width - 86) * 0.2, y: 150}});
  const title = await text(page, '#time-title');
  check(/^Live (at \d|at the global peak|at exit)/.test(title), 'timeline click: ' + title);
  check(await page.locator('#time-table tbody tr').count() > 0 || (await text(page, '#time-details')).includes('Nothing was live'), 'no sites for the moment');
  await tc.focus();
  await page.keyboard.press('ArrowRight');
  await page.screenshot({path: path.join(ART, 'viewer-time.png')});
  // a site's name opens it in the sites table, expanded and focused; Enter folds it again
  await tab(page, '3');
  await page.locator('#time-table button.link').first().click();
  check(await page.locator('#view-sites.active').count() === 1, 'a site link does not open the sites view');
  check(await page.locator('#sites-table tbody tr.stack').count() === 1, 'the revealed site is not expanded');
  check(await page.evaluate(() => document.activeElement.classList.contains('site')), 'the revealed site has no focus');
  await page.keyboard.press('Enter');
  check(await page.locator('#sites-table tbody tr.stack').count() === 0, 'Enter does not fold the stack');

  // sites: sort by each figure, filter, expand a stack
  await tab(page, '4');
  await page.waitForSelector('#sites-table tbody tr.site');
  const nSites = await page.locator('#sites-table tbody tr.site').count();
  check(nSites > 3, `only ${nSites} site rows`);
  for (const col of ['blocks', 'peak', 'bytes']) {
    await page.click(`#sites-table th[data-col="${col}"] button`);
    check((await page.getAttribute(`#sites-table th[data-col="${col}"]`, 'aria-sort')) === 'descending', `sort by ${col}`);
    const idx = ['site', 'bytes', 'blocks', 'peak'].indexOf(col);
    const vals = await page.$$eval(`#sites-table tbody tr.site td:nth-child(${idx + 1})`, (tds) => tds.map((t) => t.textContent));
    const num = (s) => { const m = /^([\d,.]+)\s*(B|KiB|MiB|GiB)?$/.exec(s); if (!m) return 0; return parseFloat(m[1].replace(/,/g, '')) * ({KiB: 1024, MiB: 1048576, GiB: 1073741824}[m[2]] || 1); };
    for (let k = 1; k < vals.length; k++) check(num(vals[k - 1]) >= num(vals[k]), `sorted by ${col}: ${vals[k - 1]} before ${vals[k]}`);
  }
  await page.click('#sites-table th[data-col="bytes"] button');
  check((await page.getAttribute('#sites-table th[data-col="bytes"]', 'aria-sort')) === 'ascending', 'second click sorts ascending');
  await page.click('#sites-table th[data-col="bytes"] button');
  await page.fill('#sites-filter', 'count_words');
  await page.waitForFunction(() => document.getElementById('sites-count').textContent.includes('match'));
  const filtered = await page.locator('#sites-table tbody tr.site').count();
  check(filtered > 0 && filtered < nSites, `filter: ${filtered} of ${nSites}`);
  await page.locator('#sites-table tbody tr.site').first().click();
  check(await page.locator('#sites-table tbody tr.stack li').count() > 2, 'expanded stack has no frames');
  check((await text(page, '#sites-table tbody tr.stack')).includes('count_words'), 'expanded stack lacks the filtered frame');
  await page.screenshot({path: path.join(ART, 'viewer-sites.png')});
  await page.fill('#sites-filter', '');

  // growth hotspots and the untouched list
  await tab(page, '5');
  const growth = await text(page, '#view-growth');
  check(growth.includes('reserve'), 'growth view lacks reserve advice');
  check(await page.locator('#untouched-none').count() === 1 || await page.locator('#untouched-table tbody tr').count() > 0, 'untouched section');
  await page.screenshot({path: path.join(ART, 'viewer-growth.png'), fullPage: true});

  // README screenshot: the flamegraph, hovering a frame
  await tab(page, '2');
  await page.setViewportSize({width: 1200, height: 640});
  await page.waitForTimeout(200);
  await canvas.hover({position: {x: 300, y: 18 * 5.5}});
  await page.screenshot({path: path.join(ART, 'viewer.png')});
  noErrors(page);
  await page.close();
}

async function testHostileNames() {
  const {html} = record('hostile_names', path.join(PROGS, 'hostile_names'));
  const raw = fs.readFileSync(html, 'utf8');
  check(!raw.includes('<img src=x'), 'the page holds a raw <img> from the trace');
  check(!raw.includes('</script><script>window'), 'the data can close its <script> element');
  check(raw.includes('\\u003cimg src=x onerror=window.__pwned=1\\u003e'), 'the hostile name did not reach the data (symbol table)');
  const page = await open(html);
  const pwned = () => page.evaluate(() => window.__pwned);
  await tab(page, '4');
  await page.waitForSelector('#sites-table tbody tr.site');
  const sites = await text(page, '#sites-table tbody');
  check(sites.includes('<img src=x onerror=window.__pwned=1>'), 'the <img> name is not shown as text in the sites table');
  check(sites.includes('</script><script>window.__pwned=2</script>'), 'the </script> name is not shown as text');
  await page.locator('#sites-table tbody tr.site').first().click();
  await tab(page, '2');
  await page.fill('#flame-search', 'onerror');
  check(!(await text(page, '#flame-match')).includes('no frame matches'), 'search does not find the hostile frame');
  await tab(page, '1');
  await tab(page, '3');
  await tab(page, '5');
  check(await page.evaluate(() => document.querySelectorAll('img').length) === 0, 'an <img> element was created');
  check(await page.evaluate(() => document.scripts.length) === 2, 'a script element was added');
  check((await pwned()) === undefined, 'injected code ran');
  noErrors(page);
  await page.close();
}

// A trace cut right after its header (a program killed at once): no events, no sites. Every
// view must still render, without errors.
async function testEmptyTrace() {
  const {trace} = record('empty_src', path.join(SAMPLES, 'exact_counts'));
  const cut = path.join(WORK, 'empty.hpt'), html = path.join(WORK, 'empty.html');
  fs.writeFileSync(cut, fs.readFileSync(trace).subarray(0, 100));
  const v = run(HEAPPROF, ['view', cut, '-o', html]);
  check(v.status === 0, 'heapprof view of a header-only trace: ' + v.stderr);
  const page = await open(html);
  for (const k of ['1', '2', '3', '4', '5']) await tab(page, k);
  check((await text(page, '#sites-count')).startsWith('0 of 0'), 'sites of an empty trace');
  await tab(page, '2');
  check((await text(page, '#flame-details')).startsWith('Nothing to draw'), 'empty flamegraph says so');
  await tab(page, '3');
  await page.locator('#timeline').click({position: {x: 200, y: 100}});
  noErrors(page);
  await page.close();
}

async function testManyStacks(n, measure) {
  const {html} = record('many_stacks', path.join(PROGS, 'many_stacks'), [String(n)]);
  const size = fs.statSync(html).size;
  const data = JSON.parse(/<script type="application\/json" id="heapprof-data">([\s\S]*?)<\/script>/.exec(fs.readFileSync(html, 'utf8'))[1]);
  check(data.sites.node.length >= n * 0.99, `only ${data.sites.node.length} sites for ${n} stacks`);
  check(size < 20 * 1024 * 1024, `page of ${size} bytes for ${n} stacks`);
  const page = await open(html);
  const ready = await page.evaluate(() => window.heapprofReady);
  const t = async (key, sel) => { const a = Date.now(); await tab(page, key); await page.waitForSelector(sel); return Date.now() - a; };
  const flameMs = await t('2', '#view-flame.active #flame-crumbs button');
  const fb = await page.locator('#flame').boundingBox();
  let a0 = Date.now();
  for (let k = 0; k < 20; k++) await page.mouse.move(fb.x + 5 + k * 40, fb.y + 18 * (2 + (k % 4)) + 9);
  await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => r())));
  const hoverMs = (Date.now() - a0) / 20;
  const timeMs = await t('3', '#time-title');
  const sitesMs = await t('4', '#sites-table tbody tr.site');
  let a = Date.now();
  await page.fill('#sites-filter', 'step3');
  await page.waitForFunction(() => document.getElementById('sites-count').textContent.includes('match'));
  const filterMs = Date.now() - a;
  a = Date.now();
  await tab(page, '2');
  await page.check('#inverted');
  const invMs = Date.now() - a;
  noErrors(page);
  const line = `many_stacks ${n}: ${data.sites.node.length} sites, ${data.nodes.length / 2} tree nodes, page ${(size / 1048576).toFixed(1)} MiB; ` +
    `load to interactive ${page.loadMs} ms (script done at ${ready.toFixed(0)} ms); flamegraph ${flameMs} ms, timeline ${timeMs} ms, ` +
    `sites table ${sitesMs} ms, filter ${filterMs} ms, bottom-up ${invMs} ms, flamegraph hover ${hoverMs.toFixed(0)} ms`;
  console.log(line);
  await page.close();
  return line;
}

// Any page: every view, a flamegraph zoom and bottom-up, a timeline click, a stack expanded.
async function visit(html) {
  const page = await open(path.resolve(html));
  for (const k of ['1', '2', '3', '4', '5']) await tab(page, k);
  await tab(page, '2');
  if ((await page.locator('#flame').boundingBox()).height > 30)
    await page.locator('#flame').click({position: {x: 10, y: 18 * 1.5}});
  await page.check('#inverted');
  await tab(page, '3');
  await page.locator('#timeline').click({position: {x: 300, y: 100}});
  await tab(page, '4');
  const row = page.locator('#sites-table tbody tr.site').first();
  if (await row.count()) await row.click();
  noErrors(page);
  await page.close();
}

const measure = process.argv.indexOf('--measure');
const pages = process.argv.indexOf('--pages');
const tests = pages > 0
  ? process.argv.slice(pages + 1).map((h) => [h, () => visit(h)])
  : measure > 0
  ? [['many_stacks', () => testManyStacks(Number(process.argv[measure + 1] || 100000), true)]]
  : [['sample', testSample], ['hostile_names', testHostileNames], ['empty_trace', testEmptyTrace], ['many_stacks', () => testManyStacks(100000, false)]];

browser = await chromium.launch({executablePath: CHROMIUM, args: ARGS, headless: true});
let failed = 0;
for (const [name, fn] of tests) {
  try {
    await fn();
    console.log(`PASS ${name}`);
  } catch (e) {
    failed++;
    console.log(`FAIL ${name}: ${e.stack || e}`);
  }
}
await browser.close();
console.log(failed ? `${failed} of ${tests.length} failed` : `all ${tests.length} passed; screenshots in ${ART}`);
process.exit(failed ? 1 : 0);
