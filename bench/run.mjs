// The benchmark driver (./bench.sh runs it): Keepsake against the in-browser way, side by side in
// one headless Chromium run (performance.md §6). It makes a test build of the extension (a temp
// copy of extension/ plus bench/ext/, whose service worker is bench/ext/bench-sw.js), generates
// the inputs, registers keepsake-host and the echo host for a temp profile through the e2e harness,
// runs every case in interleaved rounds, then the scale sweep (bench/scale.mjs), the copies of the
// database (bench/backups.mjs) and sync (bench/sync.mjs), prints the tables
// and writes BENCHMARKS.md, docs/bench/send-latency.svg and docs/bench/scale.svg.
//
// Environment: KEEPSAKE_E2E_HOST_BIN (the release keepsake-host; bench.sh sets it),
// BENCH_ECHO_BIN (default target/release/examples/echo_host), BENCH_QUICK=1 (few rounds, small
// inputs; prints only, writes nothing into the repository).

import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

import { CHROMIUM, EXT_DIR, EXT_ID, HOST_BIN, PANEL_URL, PANEL_VIEWPORT, ROOT, launch, sleep, withTimeout } from '../tests/e2e/harness.mjs';
import { SEARCH_QUERIES } from './ext/gen.js';
import { writeScreenshots, writeSessionsExport } from './inputs.mjs';
import { peakRss, processCpuNs, readIo, serviceWorkerThread, threadCpuNs, extensionRenderers } from './procfs.mjs';
import { fmt, lineChart, markdownTable, row, summarize, textTable } from './report.mjs';
import { printScale, scaleChart, scaleSection, scaleSweep } from './scale.mjs';
import { backupsSection, runBackupFigures } from './backups.mjs';
import { runSyncFigures, syncSection } from './sync.mjs';
import { timePanel as timePanelPaints } from './panel-probe.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const QUICK = process.env.BENCH_QUICK === '1';
// BENCH_ONLY=search: scenario 8 alone, printed only (for working on search); BENCH_DUMP=1 also
// logs scenario 8's every sample (and, with BENCH_ONLY=text, each scenario-4 turn's timeline)
const ONLY_SEARCH = process.env.BENCH_ONLY === 'search';
// BENCH_ONLY=text: scenario 4 alone, printed with where the Keepsake turn's time goes
const ONLY_TEXT = process.env.BENCH_ONLY === 'text';
// BENCH_ONLY=scale: the scale sweep (bench/scale.mjs) alone, printed only
const ONLY_SCALE = process.env.BENCH_ONLY === 'scale';
// BENCH_ONLY=panel: scenario 6 alone (the panel's first text paint and its pictures), printed only
const ONLY_PANEL = process.env.BENCH_ONLY === 'panel';
const DUMP = process.env.BENCH_DUMP === '1';
const ECHO_BIN = process.env.BENCH_ECHO_BIN || path.join(ROOT, 'target', 'release', 'examples', 'echo_host');
const ECHO_NAME = 'dev.keepsake.bench_echo';
const MiB = 1024 * 1024;
const CALL_TIMEOUT_MS = 600_000;

/**
 * Sizes and round counts. Full: ≥ 9 rounds after one warm-up round (5 for the 20-screenshot case;
 * 25 for search, whose round trips, the echo host's included, fall in two groups on this kind of
 * machine, ~2 ms and ~8 ms, so 9 samples give a median that jumps between them from run to run).
 */
const CFG = QUICK
  ? { rounds: 2, warmup: 1, attachRounds: 1, attachShots: 6, searchRounds: 2, searchSessions: 100, searchChars: 20_000, sweep: [10, 60] }
  : { rounds: 9, warmup: 1, attachRounds: 5, attachShots: 20, searchRounds: 25, searchSessions: 1000, searchChars: 100_000, sweep: [10, 20, 40, 60] };
const ROUNDS_NOTE = `${CFG.rounds} rounds after ${CFG.warmup} warm-up round (scenario 5: ${CFG.attachRounds}, scenario 8: ${CFG.searchRounds})`;

// ---- inputs -----------------------------------------------------------------------------------

/** Six screenshots whose data URLs add up to about 8 MiB (1.33 URL chars per PNG byte). */
const HISTORY_SHOTS = Array.from({ length: 6 }, (_, i) => ({ name: `h${i}`, seed: 100 + i, bytes: 1_022_000 }));
/** A new pasted picture per round (scenario 2), within the 3 MiB per-turn cap. */
const PASTED = Array.from({ length: CFG.rounds + CFG.warmup + 1 }, (_, i) => ({ name: `p${i}`, seed: 200 + i, bytes: 1_500_000 }));
/** 1, 2 and 3 MB screenshots in turn (scenario 5). */
const ATTACH = Array.from({ length: CFG.attachShots }, (_, i) => ({ name: `a${i}`, seed: 300 + i, bytes: (1 + (i % 3)) * 1_000_000 + i * 4096 }));
const BIG = { name: 'big', seed: 400, bytes: 3_000_000 };

const history = (count, shots, seen = false) => ({ seed: 11, count, chars: 1200, shots, seen });
const shotNames = (n) => HISTORY_SHOTS.slice(0, n).map((s) => s.name);
const H_IMAGES = history(60, shotNames(6));
const H_SEEN = history(60, shotNames(6), true);
const H_TEXT = { seed: 21, count: 60, chars: 4950, shots: [], seen: false };
/** Scenario 4: the text conversation, and the 50 saved sessions beside it. */
const TEXT = { history: H_TEXT, userChars: 300, replyChars: 4950, sessions: 50, sessionChars: 20_000 };
/** Scenario 7: small appends per round. */
const APPENDS = 4;

// ---- the cases of the interleaved rounds ---------------------------------------------------------

const turn = (h, extra = {}) => ({ history: h, userChars: 200, replyChars: 1500, ...extra });
const ROUND_CASES = [
  { id: 's1', worker: 'turn', params: turn(H_IMAGES, { measure: 'turn' }) },
  { id: 's2', worker: 'turn', params: turn(H_IMAGES, { measure: 'body', pasted: PASTED.map((p) => p.name) }) },
  { id: 's3', worker: 'turn', params: turn(H_SEEN, { measure: 'body' }) },
  { id: 's6', panel: true, params: { history: H_IMAGES } },
  { id: 's7', worker: 'appendBytes', params: { history: H_IMAGES, appends: APPENDS }, io: true },
  { id: 's9hello', worker: 'hello', params: {} },
  { id: 's9chunked', worker: 'chunked', params: { shot: BIG.name } },
  ...CFG.sweep.flatMap((n) => [
    { id: `sweep-unseen-${n}`, worker: 'turn', params: turn(history(n, shotNames(n / 10)), { measure: 'body' }) },
    { id: `sweep-seen-${n}`, worker: 'turn', params: turn(history(n, shotNames(n / 10), true), { measure: 'body' }) },
  ]),
];

// ---- helpers ------------------------------------------------------------------------------------

const log = (...a) => console.error(`[bench ${new Date().toISOString().slice(11, 19)}]`, ...a);
const WAYS = ['keepsake', 'baseline'];
/** Round r runs Keepsake first when r is even, the baseline first when it is odd. */
const orderOf = (r) => (r % 2 ? [...WAYS].reverse() : WAYS);

/** Call `self.__bench[fn](...args)` in the service worker. */
function bench(k, fn, ...args) {
  return withTimeout(
    k.worker.evaluate(([f, a]) => self.__bench[f](...a), [fn, args]),
    CALL_TIMEOUT_MS,
    `__bench.${fn}(${JSON.stringify(args).slice(0, 120)})`,
  );
}

/** The test build: a temp copy of extension/ with bench/ext/ as bench/, its inputs and manifest. */
function makeTestBuild() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'keepsake-bench-ext-'));
  fs.cpSync(EXT_DIR, dir, { recursive: true, filter: (src) => !src.includes(`${path.sep}node_modules`) });
  fs.cpSync(path.join(here, 'ext'), path.join(dir, 'bench'), { recursive: true });
  const t0 = Date.now();
  const sizes = writeScreenshots(path.join(dir, 'bench', 'data'), [...HISTORY_SHOTS, ...PASTED, ...ATTACH, BIG]);
  log(`screenshots generated in ${Date.now() - t0} ms`);
  const manifestPath = path.join(dir, 'manifest.json');
  const manifest = JSON.parse(fs.readFileSync(manifestPath, 'utf8'));
  manifest.background = { service_worker: 'bench/bench-sw.js', type: 'module' };
  manifest.permissions = [...new Set([...manifest.permissions, 'unlimitedStorage'])];
  fs.writeFileSync(manifestPath, JSON.stringify(manifest, null, 2));
  return { dir, sizes };
}

/**
 * One request to keepsake-host over its stdio on `db` (a process of its own, like the CLI's): the
 * reply's `result`.
 */
function hostCall(db, op, args) {
  const req = Buffer.from(JSON.stringify({ id: 1, op, args }));
  const len = Buffer.alloc(4);
  len.writeUInt32LE(req.length);
  const out = execFileSync(HOST_BIN, ['chrome-extension://' + EXT_ID + '/'], {
    input: Buffer.concat([len, req]),
    env: { ...process.env, KEEPSAKE_DB: db },
    maxBuffer: 256 * MiB,
  });
  for (let at = 0; at + 4 <= out.length; ) {
    const n = out.readUInt32LE(at);
    const msg = JSON.parse(out.subarray(at + 4, at + 4 + n).toString('utf8'));
    at += 4 + n;
    if (msg.id !== 1) continue;
    if (!msg.ok || msg.chunk) throw new Error(`${op}: ${JSON.stringify(msg).slice(0, 300)}`);
    return msg.result;
  }
  throw new Error(`${op}: no reply from keepsake-host`);
}

/**
 * Before scenario 8's own browser: wait (up to 20 s) until the first browser has exited and
 * write its dirty pages back, so its teardown does not run during the search rounds.
 */
async function settle(pids) {
  const t0 = Date.now();
  while (pids.some((p) => p && fs.existsSync(`/proc/${p}`)) && Date.now() - t0 < 20_000) await sleep(100);
  execFileSync('sync');
  log(`settled in ${Date.now() - t0} ms`);
}

/** Register the echo host for the profile, beside the manifest `keepsake-host install` wrote. */
function installEchoHost(profileDir) {
  const manifest = {
    name: ECHO_NAME,
    description: 'Keepsake benchmark: raw echo host',
    path: ECHO_BIN,
    type: 'stdio',
    allowed_origins: [`chrome-extension://${EXT_ID}/`],
  };
  fs.writeFileSync(path.join(profileDir, 'NativeMessagingHosts', `${ECHO_NAME}.json`), JSON.stringify(manifest));
}

/** The keepsake-host serving the worker's port (the newest when several run). */
function mainHostPid(k) {
  const pids = k.hostPids();
  if (!pids.length) throw new Error('no keepsake-host process under the browser');
  return Math.max(...pids);
}

/** Open one panel and time its first paints (bench/panel-probe.mjs), as scenario 6's sample. */
async function timePanel(k, way, expect) {
  const m = await timePanelPaints(k, way, expect);
  return { ms: m.text, domMs: m.textDom, imagesMs: m.images };
}

// ---- the blocks ---------------------------------------------------------------------------------

/** Interleaved rounds over ROUND_CASES; returns samples[id][way] = [result…]. */
async function roundCases(k) {
  const samples = {};
  const facts = {};
  const cases = ONLY_PANEL ? ROUND_CASES.filter((c) => c.id === 's6') : ROUND_CASES;
  for (const c of cases) {
    samples[c.id] = { keepsake: [], baseline: [] };
    if (c.worker) facts[c.id] = await bench(k, 'prepare', c.worker, c.params);
    if (c.id === 's9chunked') Object.assign(c.params, facts[c.id]);
  }
  const expect = { bubbles: H_IMAGES.count, images: H_IMAGES.shots.length };
  for (let r = 0; r < CFG.warmup + CFG.rounds; r++) {
    const t0 = Date.now();
    for (const c of cases) {
      for (const way of orderOf(r)) {
        let res;
        if (c.panel) {
          await bench(k, 'reset', 'turn', way, r, c.params);
          res = await timePanel(k, way, expect);
        } else {
          await bench(k, 'reset', c.worker, way, r, c.params);
          res = c.io ? await withWrites(k, way, () => bench(k, 'run', c.worker, way, r, c.params)) : await bench(k, 'run', c.worker, way, r, c.params);
        }
        if (r >= CFG.warmup) samples[c.id][way].push(res);
      }
    }
    log(`round ${r + 1}/${CFG.warmup + CFG.rounds}${r < CFG.warmup ? ' (warm-up)' : ''} in ${Date.now() - t0} ms`);
  }
  return { samples, facts };
}

/**
 * Run `fn` and count the bytes it wrote to disk: keepsake-host's write_bytes (minus its log's
 * growth), or the browser process's (chrome.storage.local is written there), after a settle wait
 * for LevelDB's background writes.
 */
async function withWrites(k, way, fn) {
  const pid = way === 'keepsake' ? mainHostPid(k) : k.browserPid;
  const logFile = path.join(k.dataDir, 'keepsake-host.log');
  const logSize = () => (fs.existsSync(logFile) ? fs.statSync(logFile).size : 0);
  const dbSize = () => ['', '-wal'].reduce((n, s) => n + (fs.existsSync(k.dbPath + s) ? fs.statSync(k.dbPath + s).size : 0), 0);
  const before = { io: readIo(pid), log: logSize(), db: dbSize() };
  const res = await fn();
  await sleep(500);
  const after = { io: readIo(pid), log: logSize(), db: dbSize() };
  let written = after.io.writeBytes - before.io.writeBytes;
  if (way === 'keepsake') written -= after.log - before.log;
  return { ...res, written, dbGrowth: after.db - before.db };
}

/** Scenario 4: the text conversation, turn after turn, both ways interleaved. */
async function textConversation(k) {
  const facts = await bench(k, 'prepare', 'textConversation', TEXT);
  const samples = { keepsake: [], baseline: [] };
  let logMark = 0;
  for (let r = 0; r < CFG.warmup + CFG.rounds; r++) {
    if (r === CFG.warmup) logMark = k.hostLog().length;
    for (const way of orderOf(r)) {
      const res = await bench(k, 'run', 'textConversation', way, r, TEXT);
      if (r >= CFG.warmup) samples[way].push(res);
    }
  }
  return { samples, facts, hostMs: servedMs(k.hostLog().slice(logMark)) };
}

/**
 * Scenario 4's Keepsake turns as a timeline: each storage call turns.js made (in the order of the
 * first turn) and the body reaching \`fetch\`, as median ms after the send → [{op, start, end, turns}].
 */
function timeline(samples) {
  const ops = new Map();
  for (const s of samples) {
    const seen = new Map();
    for (const c of s.trace ?? []) {
      const n = (seen.get(c.op) ?? 0) + 1;
      seen.set(c.op, n);
      const key = n === 1 ? c.op : `${c.op} #${n}`;
      if (!ops.has(key)) ops.set(key, { starts: [], ends: [] });
      ops.get(key).starts.push(c.start);
      if (c.end !== null) ops.get(key).ends.push(c.end);
    }
  }
  const med = (xs) => (xs.length ? round2(summarize(xs).median) : null);
  return [...ops].map(([op, { starts, ends }]) => ({ op, start: med(starts), end: med(ends), turns: starts.length }));
}

/** ms to 2 decimals (a median of two samples is their mean). */
const round2 = (x) => Math.round(x * 100) / 100;

function traceTable(samples) {
  const lines = ['call (median ms after send)         start      end   turns'];
  for (const { op, start, end, turns } of timeline(samples)) {
    lines.push(`${op.padEnd(34)} ${String(start ?? '–').padStart(7)} ${String(end ?? '–').padStart(8)} ${String(turns).padStart(7)}`);
  }
  return lines.join('\n');
}

/**
 * keepsake-host.log's `served` lines of `op` (debug level), in order: `{end, ms}`, `end` the line's
 * time in epoch ms (written just after the reply went out), `ms` the host's time for the request.
 */
function servedAt(logText, op) {
  const out = [];
  for (const m of logText.matchAll(/^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d+)?Z\s.*?served op=(\S+) ms=\d+ us=(\d+)/gm)) {
    if (m[3] !== op) continue;
    out.push({ end: Date.parse(`${m[1]}Z`) + Number(`0${m[2] ?? ''}`) * 1000, ms: Number(m[4]) / 1000 });
  }
  return out;
}

/** Host-side time of each operation from debug log lines `served op=<op> ms=<n> us=<n>`: op → [ms…]. */
function servedMs(logText) {
  const out = {};
  // `us=` (microseconds) where the host logs it, else whole `ms=`
  for (const [, op, ms, us] of logText.matchAll(/served op=(\S+) ms=(\d+)(?: us=(\d+))?/g)) {
    (out[op] ??= []).push(us === undefined ? Number(ms) : Number(us) / 1000);
  }
  return out;
}

/**
 * A V8 CPU profiler over a CDP `send(method, params)`: 1 ms samples; `stop()` → ms of samples the
 * thread was not idle (JavaScript, GC, native calls and blocking inside them; preemption counts
 * too) and ms of all samples.
 */
async function v8Profiler(send, close) {
  await send('Profiler.enable');
  await send('Profiler.setSamplingInterval', { interval: 1000 });
  return {
    start: () => send('Profiler.start'),
    async stop() {
      const { profile } = await send('Profiler.stop');
      const idle = new Set(profile.nodes.filter((n) => n.callFrame.functionName === '(idle)').map((n) => n.id));
      let busy = 0;
      let total = 0;
      profile.samples.forEach((node, i) => {
        const dt = profile.timeDeltas[i] ?? 0;
        total += dt;
        if (!idle.has(node)) busy += dt;
      });
      return { busyMs: busy / 1000, totalMs: total / 1000 };
    },
    close,
  };
}

/**
 * The V8 CPU profiler of the extension's service worker, through a browser-level CDP session
 * (Playwright has no CDP session for workers; the non-flat `Target.attachToTarget` mode carries the
 * worker's messages inside `Target.sendMessageToTarget` / `receivedMessageFromTarget`).
 */
async function workerProfiler(k) {
  const cdp = await k.context.browser().newBrowserCDPSession();
  const { targetInfos } = await cdp.send('Target.getTargets');
  const sw = targetInfos.find((t) => t.type === 'service_worker' && t.url.startsWith(`chrome-extension://${EXT_ID}/`));
  const { sessionId } = await cdp.send('Target.attachToTarget', { targetId: sw.targetId, flatten: false });
  const waiting = new Map();
  let nextId = 0;
  cdp.on('Target.receivedMessageFromTarget', (e) => {
    const msg = JSON.parse(e.message);
    waiting.get(msg.id)?.(msg);
    waiting.delete(msg.id);
  });
  const send = (method, params = {}) => {
    const id = ++nextId;
    const reply = new Promise((resolve) => waiting.set(id, resolve));
    return cdp
      .send('Target.sendMessageToTarget', { sessionId, message: JSON.stringify({ id, method, params }) })
      .then(() => withTimeout(reply, 60_000, `worker CDP ${method}`))
      .then((m) => m.result);
  };
  return v8Profiler(send, () => cdp.detach());
}

/** The V8 CPU profiler of a page (its main thread), through Playwright's page CDP session. */
async function pageProfiler(k, page) {
  const cdp = await k.context.newCDPSession(page);
  const send = (method, params = {}) => withTimeout(cdp.send(method, params), 60_000, `page CDP ${method}`);
  return v8Profiler(send, () => cdp.detach());
}

/**
 * `{pid, tid}` of the renderer main thread that runs `page` (an extension page runs in an
 * extension renderer, usually the service worker's): when there are several, the one whose main
 * thread gains the most CPU while the page spins for 150 ms.
 */
async function pageMainThread(k, page) {
  const pids = extensionRenderers(k.browserPid);
  if (pids.length === 1) return { pid: pids[0], tid: pids[0] };
  const before = pids.map((pid) => threadCpuNs(pid, pid));
  await page.evaluate(() => {
    const t = performance.now();
    while (performance.now() - t < 150);
  });
  const gained = pids.map((pid, i) => threadCpuNs(pid, pid) - before[i]);
  const pid = pids[gained.indexOf(Math.max(...gained))];
  return { pid, tid: pid };
}

/** Live-history entries whose picture is a thumbnail the host made. */
const LIVE_THUMBNAILS = `SELECT count(DISTINCT h.id) AS n FROM history_entries h
  JOIN image_refs r ON r.holder = 'session' AND r.holder_id = h.id
  JOIN images i ON i.sha256 = r.sha256 WHERE i.is_thumbnail = 1`;

/**
 * Scenario 5: 20 screenshots attached and bounded. Keepsake: the 📷 button of the real side panel
 * (bench/ext/attach-panel.js in the test build's sidepanel.html): the panel attaches over its own
 * port and keepsake-host process; the worker only serves the panel's history re-reads. Baseline:
 * the worker (baseline.js). Busy time, per thread: CPU of the service worker's thread and of the
 * panel page's main thread (/proc schedstat, ns) and the V8 profiler's not-idle samples of each.
 * Also the extension renderer's CPU (every thread), and for Keepsake the CPU of every host process
 * (the panel's and the worker's) and the panel host's peak RSS (a fresh process per round).
 */
async function attachScreenshots(k) {
  const params = { shots: ATTACH.map((a) => a.name) };
  await bench(k, 'prepare', 'attach', params);
  const panel = await k.context.newPage();
  await panel.setViewportSize(PANEL_VIEWPORT);
  await panel.goto(PANEL_URL, { timeout: 30_000 });
  await panel.waitForFunction(() => document.documentElement.dataset.ready === 'true', null, { timeout: 30_000 });
  const inPanel = (fn, ...args) =>
    withTimeout(
      panel.evaluate(([f, a]) => import('/bench/attach-panel.js').then((m) => m[f](...a)), [fn, args]),
      CALL_TIMEOUT_MS,
      `attach-panel ${fn}`,
    );
  const loaded = await inPanel('prepare', params.shots);
  log(`attach: ${loaded.shots} screenshots loaded in the panel (${(loaded.chars / MiB).toFixed(1)} MiB of data URLs)`);
  const pageThread = await pageMainThread(k, panel);
  const profilers = { sw: await workerProfiler(k), page: await pageProfiler(k, panel) };
  const samples = { keepsake: [], baseline: [] };
  try {
    for (let r = 0; r < CFG.warmup + CFG.attachRounds; r++) {
      for (const way of orderOf(r)) {
        await bench(k, 'reset', 'attach', way, r, params);
        let panelHost = null;
        if (way === 'keepsake') {
          const before = new Set(k.hostPids());
          await inPanel('reset');
          panelHost = k.hostPids().find((p) => !before.has(p));
          if (!panelHost) throw new Error('the panel port started no keepsake-host');
        }
        await sleep(500); // the panel's re-read after the reset settles
        const hosts = way === 'keepsake' ? k.hostPids() : [];
        const sw = serviceWorkerThread(k.browserPid);
        const cpu = () => ({
          sw: threadCpuNs(sw.pid, sw.tid),
          page: threadCpuNs(pageThread.pid, pageThread.tid),
          renderer: processCpuNs(sw.pid),
          hosts: hosts.reduce((n, pid) => n + processCpuNs(pid), 0),
        });
        await profilers.sw.start();
        await profilers.page.start();
        const before = cpu();
        const res = way === 'keepsake' ? await inPanel('run') : await bench(k, 'run', 'attach', way, r, params);
        const after = cpu();
        res.swNotIdleMs = (await profilers.sw.stop()).busyMs;
        res.pageNotIdleMs = (await profilers.page.stop()).busyMs;
        res.swBusyMs = (after.sw - before.sw) / 1e6;
        res.pageBusyMs = (after.page - before.page) / 1e6;
        res.threadsBusyMs = res.swBusyMs + res.pageBusyMs;
        res.rendererCpuMs = (after.renderer - before.renderer) / 1e6;
        if (way === 'keepsake') {
          res.hostCpuMs = (after.hosts - before.hosts) / 1e6;
          res.hostPeakRss = peakRss(panelHost);
          res.rewritten = k.sql(LIVE_THUMBNAILS)[0].n;
        }
        res.imageChars = await bench(k, 'liveImageChars', way);
        if (r >= CFG.warmup) samples[way].push(res);
        log(`attach ${way} round ${r + 1}: ${fmt(res.ms, 'ms')} wall, ${fmt(res.swBusyMs, 'ms')} worker CPU, ${fmt(res.pageBusyMs, 'ms')} panel page CPU`);
      }
    }
  } finally {
    await profilers.sw.close();
    await profilers.page.close();
    await panel.close();
  }
  return { samples, pageSharesRenderer: pageThread.pid === serviceWorkerThread(k.browserPid).pid };
}

/** Scenario 9: peak RSS of a fresh, idle keepsake-host (after its hello). */
async function idleRss(k) {
  const out = [];
  for (let i = 0; i < 3; i++) {
    const before = new Set(k.hostPids());
    await bench(k, 'openSpare');
    const pid = k.hostPids().find((p) => !before.has(p));
    out.push(peakRss(pid));
    await bench(k, 'closeSpare');
    await sleep(300);
  }
  return out;
}

/**
 * Scenario 8, in its own browser and data dir: 1,000 saved sessions imported with
 * `keepsake-host import`, the digests stored in chrome.storage.local; round trip through the
 * worker vs the digest scan, host-side time from the host's debug log (`served op=… ms=`).
 */
async function search(testBuild) {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'keepsake-bench-search-'));
  const dbPath = path.join(dataDir, 'keepsake.db');
  const doc = path.join(dataDir, 'sessions.json');
  const seed = 31;
  try {
    let t0 = Date.now();
    writeSessionsExport(doc, { seed, count: CFG.searchSessions, chars: CFG.searchChars });
    const genMs = Date.now() - t0;
    t0 = Date.now();
    execFileSync(HOST_BIN, ['--db', dbPath, 'import', doc], { stdio: ['ignore', 'ignore', 'inherit'] });
    const importMs = Date.now() - t0;
    execFileSync('sync'); // the import's 500 MB of dirty pages are written back before timing, not during
    const docBytes = fs.statSync(doc).size;
    fs.rmSync(doc);
    log(`search: ${CFG.searchSessions} sessions generated in ${genMs} ms, imported in ${importMs} ms`);
    // each query's sessions.list result, as keepsake-host gives it, for the echo host to replay
    const replies = Object.fromEntries(
      SEARCH_QUERIES.map(({ q }, i) => {
        const file = path.join(dataDir, `reply-${i}.json`);
        fs.writeFileSync(file, JSON.stringify(hostCall(dbPath, 'sessions.list', { query: q, limit: 50 })));
        return [q, file];
      }),
    );
    const k = await launch({ name: 'bench-search', extDir: testBuild, dataDir, hostDebug: true });
    try {
      installEchoHost(k.profileDir);
      await bench(k, 'init');
      const facts = await bench(k, 'prepare', 'search', { seed, count: CFG.searchSessions, chars: CFG.searchChars });
      Object.assign(facts, { genMs, importMs, docBytes, dbBytes: fs.statSync(dbPath).size });
      log(`search: digests stored in ${Math.round(facts.storeMs)} ms, loaded in ${Math.round(facts.loadMs)} ms`);
      const samples = Object.fromEntries(SEARCH_QUERIES.map((q) => [q.q, { keepsake: [], baseline: [], floor: [], spun: [] }]));
      // the spun floor: the echo host keeps its CPU busy as long as keepsake-host takes for the
      // query (host log of 3 calls each after the warm-up), then replays the same reply
      const spinUs = {};
      let logMark = 0;
      for (let r = 0; r < CFG.warmup + CFG.searchRounds; r++) {
        if (r === CFG.warmup) {
          logMark = k.hostLog().length;
          for (let i = 0; i < 3; i++) for (const { q } of SEARCH_QUERIES) await bench(k, 'run', 'search', 'keepsake', r, { query: q });
          const warm = servedAt(k.hostLog().slice(logMark), 'sessions.list').map((x) => x.ms);
          SEARCH_QUERIES.forEach(({ q }, i) => {
            spinUs[q] = Math.round(1000 * summarize(warm.filter((_, j) => j % SEARCH_QUERIES.length === i)).median);
          });
          logMark = k.hostLog().length;
        }
        for (const { q } of SEARCH_QUERIES) {
          for (const way of orderOf(r)) {
            const res = await bench(k, 'run', 'search', way, r, { query: q });
            if (r >= CFG.warmup) samples[q][way].push(res);
          }
          const floor = await bench(k, 'run', 'searchFloor', 'keepsake', r, { file: replies[q] });
          if (r >= CFG.warmup) samples[q].floor.push(floor);
          if (r >= CFG.warmup) samples[q].spun.push(await bench(k, 'run', 'searchFloor', 'keepsake', r, { file: replies[q], spinUs: spinUs[q] }));
        }
      }
      const served = servedAt(k.hostLog().slice(logMark), 'sessions.list');
      const nq = SEARCH_QUERIES.length;
      const hostMs = Object.fromEntries(SEARCH_QUERIES.map(({ q }, i) => [q, served.filter((_, j) => j % nq === i).map((x) => x.ms)]));
      // each Keepsake round trip's two legs, from the worker's clock and the host log's (one machine
      // clock): the request until the host began on it, and the reply from when the host had written
      // it until the worker had it
      const legs = Object.fromEntries(
        SEARCH_QUERIES.map(({ q }, i) => {
          const pairs = samples[q].keepsake.map((x, r) => [x, served[r * nq + i]]).filter(([x, h]) => h && x.at0 != null);
          return [q, { request: pairs.map(([x, h]) => h.end - h.ms - x.at0), reply: pairs.map(([x, h]) => x.at1 - h.end) }];
        }),
      );
      if (DUMP) {
        // for bench/sched-legs.py: every sample with its worker times, the host log, the processes
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'keepsake-bench-search-dump-'));
        fs.writeFileSync(path.join(dir, 'samples.json'), JSON.stringify(samples));
        fs.writeFileSync(path.join(dir, 'host.log'), k.hostLog());
        fs.writeFileSync(path.join(dir, 'pids.json'), JSON.stringify({ host: mainHostPid(k), browser: k.browserPid }));
        log(`search samples, host log and pids written to ${dir} (bench/sched-legs.py)`);
      }
      if (DUMP) for (const q of Object.keys(samples)) log(`samples ${q} k=${samples[q].keepsake.map((x) => x.ms.toFixed(1))} b=${samples[q].baseline.map((x) => x.ms.toFixed(1))} f=${samples[q].floor.map((x) => x.ms.toFixed(1))} s=${samples[q].spun.map((x) => x.ms.toFixed(1))} h=${hostMs[q]} req=${legs[q].request.map((x) => x.toFixed(1))} rep=${legs[q].reply.map((x) => x.toFixed(1))}`);
      return { samples, facts, hostMs, spinUs, legs };
    } finally {
      await k.close();
    }
  } finally {
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}

// ---- machine and versions -------------------------------------------------------------------------

function machine() {
  const cpuinfo = fs.readFileSync('/proc/cpuinfo', 'utf8');
  const model = /^model name\s*:\s*(.*)$/m.exec(cpuinfo)?.[1] ?? os.cpus()[0]?.model ?? '?';
  const flags = new Set((/^flags\s*:\s*(.*)$/m.exec(cpuinfo)?.[1] ?? '').split(' '));
  const wanted = ['sse4_2', 'avx', 'avx2', 'fma', 'bmi2', 'avx512f', 'avx512bw', 'avx512vl', 'sha_ni', 'aes'];
  const run = (cmd, args) => {
    try {
      return execFileSync(cmd, args, { encoding: 'utf8' }).trim();
    } catch {
      return '?';
    }
  };
  const lock = fs.readFileSync(path.join(ROOT, 'Cargo.lock'), 'utf8');
  const crate = (name) => new RegExp(`name = "${name}"\\nversion = "([^"]+)"`).exec(lock)?.[1] ?? '?';
  const pw = JSON.parse(fs.readFileSync(path.join(ROOT, 'tests', 'e2e', 'node_modules', 'playwright-core', 'package.json'), 'utf8'));
  return {
    cpu: model,
    flags: wanted.filter((f) => flags.has(f)).join(' '),
    cores: os.cpus().length,
    ram: `${(os.totalmem() / 1024 ** 3).toFixed(1)} GiB`,
    kernel: os.release(),
    chromium: run(CHROMIUM, ['--version']),
    rust: run('rustc', ['--version']),
    node: process.version,
    playwright: pw.version,
    crates: ['rusqlite', 'serde_json', 'image', 'fast_image_resize', 'jpeg-encoder', 'memchr'].map((c) => `${c} ${crate(c)}`).join(', '),
  };
}

// ---- the table ----------------------------------------------------------------------------------

const pickAll = (xs, key) => xs.map((x) => x[key]);
const ratioAtMost = (t) => ({ ratio }) => ratio != null && ratio <= t;

function buildRows(R) {
  const A = R.rounds.samples;
  const rows = [];
  const ways = (id, key = 'ms') => ({ keepsake: pickAll(A[id].keepsake, key), baseline: pickAll(A[id].baseline, key) });
  rows.push(row({ scenario: '1 Turn storage work, 8 MiB images', ...ways('s1'), target: 'ratio ≤ 0.1', met: ratioAtMost(0.1) }));
  rows.push(row({ scenario: '2 Send: 6 unseen screenshots + 1 pasted', ...ways('s2'), target: 'ratio ≤ 1.0', met: ratioAtMost(1.0) }));
  rows.push(row({ scenario: '3 Send: pictures seen (labels)', ...ways('s3'), target: 'ratio ≤ 0.5', met: ratioAtMost(0.5) }));
  const tc = R.text.samples;
  rows.push(row({ scenario: '4 Send: text, 60 entries ≈300K chars', keepsake: pickAll(tc.keepsake, 'ms'), baseline: pickAll(tc.baseline, 'ms'), target: 'ratio ≤ 0.5', met: ratioAtMost(0.5) }));
  const at = R.attach.samples;
  rows.push(row({ scenario: `5 Attach ${CFG.attachShots} screenshots + bound: wall`, keepsake: pickAll(at.keepsake, 'ms'), baseline: pickAll(at.baseline, 'ms'), target: 'ratio ≤ 0.5', met: ratioAtMost(0.5) }));
  rows.push(row({ scenario: '5 … service-worker busy (thread CPU)', keepsake: pickAll(at.keepsake, 'swBusyMs'), baseline: pickAll(at.baseline, 'swBusyMs'), target: 'ratio ≤ 0.1', met: ratioAtMost(0.1) }));
  rows.push(row({ scenario: '5 … service-worker not idle (V8 profiler)', keepsake: pickAll(at.keepsake, 'swNotIdleMs'), baseline: pickAll(at.baseline, 'swNotIdleMs'), target: 'ratio ≤ 0.1', met: ratioAtMost(0.1) }));
  rows.push(row({ scenario: '5 … side-panel page busy (thread CPU, info)', keepsake: pickAll(at.keepsake, 'pageBusyMs'), baseline: pickAll(at.baseline, 'pageBusyMs'), target: '–', met: () => null }));
  rows.push(row({ scenario: '5 … side-panel page not idle (V8, info)', keepsake: pickAll(at.keepsake, 'pageNotIdleMs'), baseline: pickAll(at.baseline, 'pageNotIdleMs'), target: '–', met: () => null }));
  rows.push(row({ scenario: '5 … worker + page busy (thread CPU, info)', keepsake: pickAll(at.keepsake, 'threadsBusyMs'), baseline: pickAll(at.baseline, 'threadsBusyMs'), target: '–', met: () => null }));
  rows.push(row({ scenario: '6 Panel, 60 entries: first text paint', ...ways('s6'), target: 'ratio ≤ 0.5', met: ratioAtMost(0.5) }));
  rows.push(row({ scenario: '6 … all 6 pictures shown', ...ways('s6', 'imagesMs'), target: 'ratio ≤ 0.5', met: ratioAtMost(0.5) }));
  const perAppend = (xs) => xs.map((x) => x.written / APPENDS);
  rows.push(row({ scenario: '7 Bytes written per append (8 MiB images)', keepsake: perAppend(A.s7.keepsake), baseline: perAppend(A.s7.baseline), unit: 'bytes', target: 'ratio ≤ 0.05', met: ratioAtMost(0.05) }));
  rows.push(...searchRows(R));
  rows.push(row({ scenario: '9 Host start: spawn → port open (vs echo host)', ...ways('s9hello'), target: 'ratio ≤ 1.1', met: ratioAtMost(1.1) }));
  const mb = (R.rounds.facts.s9chunked.replyChars / MiB).toFixed(2);
  rows.push(row({ scenario: `9 Chunked reply ${mb} MiB: images.get vs echo`, ...ways('s9chunked'), target: 'ratio ≤ 1.25 (≥ 80 % throughput)', met: ratioAtMost(1.25) }));
  rows.push(row({ scenario: '9 Host peak RSS, idle', keepsake: R.idleRss, unit: 'bytes', target: '≤ 64 MiB', met: ({ ks }) => ks.max <= 64 * MiB }));
  rows.push(row({ scenario: '9 Host peak RSS, bounding scenario 5', keepsake: pickAll(at.keepsake, 'hostPeakRss'), unit: 'bytes', target: '≤ 256 MiB', met: ({ ks }) => ks.max <= 256 * MiB }));
  return rows;
}

/** Scenario 8's rows: each query's round trip, host-side time and the channel floor. */
function searchRows(R) {
  const rows = [];
  const S = R.search;
  for (const { q, label } of SEARCH_QUERIES) {
    const s = S.samples[q];
    rows.push(
      row({
        scenario: `8 Search ${label} "${q}": round trip vs digest scan`,
        keepsake: pickAll(s.keepsake, 'ms'),
        baseline: pickAll(s.baseline, 'ms'),
        target: 'RT ≤ 5 ms, ratio ≤ 0.2',
        met: ({ ks, ratio }) => ks.median <= 5 && ratio != null && ratio <= 0.2,
      }),
    );
    rows.push(row({ scenario: `8 … host-side (host log)`, keepsake: S.hostMs[q], target: 'p50 ≤ 5 ms', met: ({ ks }) => ks.median <= 5 }));
    rows.push(row({ scenario: `8 … request leg: worker sends → host begins (info)`, keepsake: S.legs[q].request, target: '–', met: () => null }));
    rows.push(row({ scenario: `8 … reply leg: host has written → worker has it (info)`, keepsake: S.legs[q].reply, target: '–', met: () => null }));
    rows.push(
      row({
        scenario: `8 … channel floor: echo host replays the same reply (info)`,
        keepsake: pickAll(s.floor, 'ms'),
        baseline: pickAll(s.baseline, 'ms'),
        target: '–',
        met: () => null,
      }),
    );
    rows.push(
      row({
        scenario: `8 … echo host busy ${(S.spinUs[q] / 1000).toFixed(2)} ms (warm-up host-side), then replays (info)`,
        keepsake: pickAll(s.spun, 'ms'),
        baseline: pickAll(s.baseline, 'ms'),
        target: '–',
        met: () => null,
      }),
    );
  }
  // the data set's import, one run: bytes of export JSON per second of `keepsake-host import`
  rows.push(
    row({
      scenario: `8 Import: ${(S.facts.docBytes / MiB).toFixed(0)} MiB export, keepsake-host import`,
      keepsake: [S.facts.docBytes / 1e6 / (S.facts.importMs / 1000)],
      unit: 'MB/s',
      target: '≥ 60 MB/s',
      met: ({ ks }) => ks.median >= 60,
    }),
  );
  return rows;
}

function sweepRows(R) {
  return CFG.sweep.flatMap((n) =>
    ['unseen', 'seen'].map((style) => {
      const s = R.rounds.samples[`sweep-${style}-${n}`];
      return row({
        scenario: `Sweep: send, ${n} entries, ${n / 10} screenshot${n > 10 ? 's' : ''} ${style}`,
        keepsake: pickAll(s.keepsake, 'ms'),
        baseline: pickAll(s.baseline, 'ms'),
        target: '– (chart)',
        met: () => null,
      });
    }),
  );
}

function chart(R) {
  const series = [];
  const colors = { keepsake: '#1a73e8', baseline: '#d93025' };
  for (const style of ['unseen', 'seen']) {
    for (const way of WAYS) {
      series.push({
        name: `${way === 'keepsake' ? 'Keepsake' : 'in-browser'}, ${style === 'unseen' ? 'pictures unseen' : 'pictures seen'}`,
        color: colors[way],
        dash: style === 'seen' ? '6 4' : undefined,
        points: CFG.sweep.map((n) => [n, summarize(pickAll(R.rounds.samples[`sweep-${style}-${n}`][way], 'ms')).median]),
      });
    }
  }
  return lineChart({
    title: 'Send latency (send → request body at fetch), median',
    xLabel: 'history entries (one 1 MB screenshot per 10 entries)',
    yLabel: 'ms',
    series,
  });
}

// ---- main -----------------------------------------------------------------------------------------

async function main() {
  for (const [what, file] of [['keepsake-host', HOST_BIN], ['echo host', ECHO_BIN], ['chromium', CHROMIUM]]) {
    if (!fs.existsSync(file)) throw new Error(`${what} not found at ${file}`);
  }
  const started = new Date();
  const mach = machine();
  const build = makeTestBuild();
  const R = {};
  if (ONLY_SEARCH) {
    try {
      R.search = await search(build.dir);
    } finally {
      fs.rmSync(build.dir, { recursive: true, force: true });
    }
    console.log(textTable(searchRows(R)));
    return;
  }
  if (ONLY_SCALE) {
    try {
      const res = await scaleSweep(build.dir);
      printScale(res);
      // nothing is written into the repository; the section and chart go to a temp dir
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'keepsake-bench-scale-report-'));
      fs.writeFileSync(path.join(dir, 'scale-section.txt'), scaleSection(res));
      fs.writeFileSync(path.join(dir, 'scale.svg'), scaleChart(res));
      fs.writeFileSync(path.join(dir, 'scale.json'), JSON.stringify(res));
      log(`the Scale section, its chart and the samples are in ${dir}`);
    } finally {
      fs.rmSync(build.dir, { recursive: true, force: true });
    }
    return;
  }
  if (ONLY_TEXT) {
    try {
      const k = await launch({ name: 'bench', extDir: build.dir, hostDebug: true });
      try {
        await bench(k, 'init');
        R.text = await textConversation(k);
      } finally {
        await k.close();
      }
    } finally {
      fs.rmSync(build.dir, { recursive: true, force: true });
    }
    const tc = R.text.samples;
    console.log(textTable([row({ scenario: '4 Send: text', keepsake: pickAll(tc.keepsake, 'ms'), baseline: pickAll(tc.baseline, 'ms'), target: 'ratio ≤ 0.5', met: ratioAtMost(0.5) })]));
    console.log(traceTable(tc.keepsake));
    if (DUMP) for (const [i, x] of tc.keepsake.entries()) log(`round ${i}: ${x.trace.map((c) => `${c.op} ${c.start}–${c.end}`).join(', ')}`);
    return;
  }
  if (ONLY_PANEL) {
    try {
      const k = await launch({ name: 'bench', extDir: build.dir, hostDebug: true });
      try {
        await bench(k, 'init');
        R.rounds = await roundCases(k);
      } finally {
        await k.close();
      }
    } finally {
      fs.rmSync(build.dir, { recursive: true, force: true });
    }
    const s6 = R.rounds.samples.s6;
    const ways = (key) => ({ keepsake: pickAll(s6.keepsake, key), baseline: pickAll(s6.baseline, key) });
    console.log(textTable([
      row({ scenario: '6 Panel, 60 entries: first text paint', ...ways('ms'), target: 'ratio ≤ 0.5', met: ratioAtMost(0.5) }),
      row({ scenario: '6 … all 6 pictures shown', ...ways('imagesMs'), target: 'ratio ≤ 0.5', met: ratioAtMost(0.5) }),
    ]));
    return;
  }
  try {
    const k = await launch({ name: 'bench', extDir: build.dir, hostDebug: true });
    try {
      installEchoHost(k.profileDir);
      await bench(k, 'init');
      R.checks = {};
      for (const [id, p] of [
        ['s1', ROUND_CASES[0].params],
        ['s2', ROUND_CASES[1].params],
        ['s3', ROUND_CASES[2].params],
        ['s4', TEXT],
      ]) {
        R.checks[id] = await bench(k, 'checkBodies', p);
      }
      log('body checks', JSON.stringify(R.checks));
      R.rounds = await roundCases(k);
      R.calibration = await bench(k, 'calibrate', { history: H_IMAGES }, CFG.rounds);
      R.text = await textConversation(k);
      R.attach = await attachScreenshots(k);
      R.idleRss = await idleRss(k);
      R.renderers = extensionRenderers(k.browserPid).length;
    } finally {
      await k.close();
    }
    await settle([k.browserPid]);
    R.search = await search(build.dir);
    R.scale = await scaleSweep(build.dir);
    R.backups = runBackupFigures({ hostBin: HOST_BIN, rounds: QUICK ? 1 : 3, sessions: QUICK ? 1000 : 10_000, log });
    R.sync = runSyncFigures({ hostBin: HOST_BIN, rounds: 1, sessions: QUICK ? 1000 : 10_000, edits: QUICK ? 12 : 30, log });
  } finally {
    fs.rmSync(build.dir, { recursive: true, force: true });
  }
  const finished = new Date();
  const rows = [...buildRows(R), ...sweepRows(R)];
  const out = { started, finished, mach, rows, R, sizes: build.sizes };
  printReport(out);
  printScale(R.scale);
  console.log(backupsSection(R.backups));
  console.log(syncSection(R.sync));
  if (QUICK) {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'keepsake-bench-quick-'));
    fs.writeFileSync(path.join(dir, 'BENCHMARKS.md'), markdown(out));
    fs.writeFileSync(path.join(dir, 'send-latency.svg'), chart(R));
    fs.writeFileSync(path.join(dir, 'scale.svg'), scaleChart(R.scale));
    log(`BENCH_QUICK: nothing written into the repository; the report is in ${dir}`);
  } else {
    fs.writeFileSync(path.join(ROOT, 'BENCHMARKS.md'), markdown(out));
    fs.mkdirSync(path.join(ROOT, 'docs', 'bench'), { recursive: true });
    fs.writeFileSync(path.join(ROOT, 'docs', 'bench', 'send-latency.svg'), chart(R));
    fs.writeFileSync(path.join(ROOT, 'docs', 'bench', 'scale.svg'), scaleChart(R.scale));
    log('wrote BENCHMARKS.md, docs/bench/send-latency.svg and docs/bench/scale.svg');
  }
}

/**
 * What separate profiling showed for the targets missed so far (2026-12-03, same machine, Chromium 156;
 * not figures of this run). Printed for a scenario only while one of its rows misses its target.
 */
const MISS_NOTES = [
  {
    scenario: /^4 /,
    text: `BENCH_ONLY=text ./bench.sh prints where a Keepsake turn's time goes (median ms after the send, 2026-12-04):
  request.build 0.1–4.3 (host-side 2–3 ms, a ~8 KB delta reply instead of the 408 KB full body), history.append
  4.9–13.6 (host-side ~3 ms: a FULL-synchronous commit), body at \`fetch\` 9.4. Before the changes of 2026-12-04 the
  turn made three round trips one after the other (settings.get, request.build, history.append) and then parsed
  the body, walked it and stringified it again: body at \`fetch\` 16.9 ms, ratio 0.50–0.62. Changes made: the
  settings are kept in the worker (read again after a \`changed\` event naming them), a body that came as text
  goes to the provider as that text, and the provider request goes out while the user entry is appended
  (nothing is shown before it is stored). What is left between request.build's reply and \`fetch\`: the delta
  applied (~0.5 ms) and its SHA-256 check (TextEncoder of the 260K-char mixed-script text 1.7 ms, the digest
  0.3 ms). A miss now means round trips in this machine's slow group (scenario 8's channel floor: ~2 ms or
  ~7–9 ms for the same reply).`,
  },
  {
    scenario: /^5 … service-worker/,
    text: `The worker carries no pixels any more: the side panel captures and attaches over its own port and
  keepsake-host process (sidepanel/pixels.js). Before that change, 64 % of the worker's non-idle samples were
  \`postMessage\` and 34 % the NativePort request calling it: serialising the data URLs onto its native port.
  What the worker still does during the case is serve the panel's history re-reads after each attach and each
  byte-budget pass (\`history.get\` with image references, a few KB, through chrome.runtime messages and its own
  port) and relay its host's \`changed\` events; the serialisation now runs on the panel page's main thread (the
  page rows). The baseline's time is chrome.storage.local.set (63 %), drawing thumbnails (15 %) and base64
  decoding (4 %).`,
  },
  {
    scenario: /^6 /,
    text: `Pictures: the panel now shows display renditions (at most 1280 px wide, JPEG q82, made by the host on the
  first request and kept, \`images.display\`, one batched call for the pictures of a render) and reads the original only
  for the lightbox. BENCH_ONLY=panel on 2026-12-06 (other builds running): all 6 pictures shown 1316 → 510 ms against
  the in-browser way's 481–498 ms (ratio 2.74 → 1.02). What is left is the in-browser way's advantage of reading
  its pictures from the same chrome.storage.local read as the text, while the panel's pictures wait for the text's
  render and then one more round trip (worker, host, renditions decoded in the page). First text paint, from timing
  marks in the panel (not committed): boot.js sends \`history.get\` 55–180 ms after navigation start (the page and
  its renderer starting), the reply is in 25–60 ms later, sidepanel.js starts running at 140–220 ms (module graph:
  31 modules, 309 KB, all preloaded), and rendering plus the layout of the 60 bubbles takes ~100 ms (Markdown 2–9 ms
  of it) — the same messages.js and stylesheet the in-browser page renders with. After the text paint, the
  pictures: asked for on the next frame (~20 ms), \`images.display\` of the 6 renditions (1.8 MB of base64 for
  these noise-panel screenshots) ~110 ms through the worker, decoded ~40 ms. Tried: \`content-visibility: auto\` on
  the bubbles (0.58 in one run), not kept: a bubble off screen then reads as empty text (extension/README.md).
  Asking for the newest pictures' renditions as soon as the history arrives, before the bubbles are built (A/B,
  2 × 9 rounds each, 2026-12-06 20:10 while a CI run shared the cores): pictures shown 497 / 398 ms against 502 /
  491 ms without, but the first text paint 358 / 343 ms against 304 / 260 ms — the reply lands during the render;
  not kept, the text comes first.
  Left: loading only the modules the first paint needs (the drawer, composer, switcher and import code are static
  imports today).`,
  },
  {
    scenario: /^8 Search/,
    text: `Since issue 23 a search answers one page: the first 50 rows with their snippets and the total (for 鲸,
  50 of 256 rows, a 16 KB reply instead of 80 KB; host-side 1.22 → 0.35 ms and round trip 8.7 → 1.3 ms in
  BENCH_ONLY=search of 2026-12-06), and the in-browser way does the same job (first page and total). What follows
  is the profile from before paging, when the whole list was sent. The index answers from postings and the pieces
  around each hit; a query no longer touches the other sessions' text. The 1-character query matches a quarter of
  the sessions (256 rows, an 80 KB reply), so its cost was per hit. valgrind --tool=callgrind of a host answering 20 × \`sessions.list 鲸\` on this run's database
  (bench/search-host.py): 6.0 M instructions per query (16.6 M four changes ago, 9.5 M before the drawer was kept
  in memory with per-row JSON text): the hit's piece 52 % (the snippet cut 24 %, SQLite's descent and rusqlite's
  step, bind and reset ~20 %), neighbouring pieces for the ~21 % of hits near a piece's edge 19 %, the drawer's one
  read of the 1,000 rows 9 % (paid again only after a write), JSON 3 %. Host-side is ~1.2–1.8 ms. What is left is
  the channel, measured in every run by two rows. "Channel floor": the echo host replays the very same reply, what the
  worker pays for these bytes when the host's work is free. "Echo host busy": the echo host first keeps its CPU busy
  for as long as keepsake-host took for that query, then replays it: what any host that needs that long pays through
  this channel. On this machine (a 2-vCPU Firecracker VM) round trips fall in two groups (fast ~2–3 ms and slow ~6–10
  ms for 鲸, ~1–2 and ~4–8 ms for the small replies), and the longer the host works the more of them land in the
  slow one: in BENCH_DUMP=1 BENCH_ONLY=search ./bench.sh runs of 2026-12-04 05:05–05:08, 鲸's Keepsake medians 9.3,
  5.4 and 9.0 ms stood beside busy-echo medians of 9.4, 3.8 and 8.3 ms and floors of 6.1, 2.7 and 5.2 ms (floor
  ratios 0.21–0.42). So for 鲸 Keepsake costs what the channel costs a host of its host-side time, and in a run
  where the floor's own ratio is over 0.2, no host work can meet the target. The 2- and 5-character queries answer in
  0.5–1.0 ms host-side with 1–12 KB replies and usually meet it; their ratio moves between runs with the same two
  groups (quill 0.107–0.318 in the runs of 2026-12-04; Keepsake's round trips land in the slow group more often than
  the busy echo host's, 7–14 of 25 against 4–6). The two "leg" rows split each Keepsake round trip with the host
  log's clock: the request leg (the worker's send until the host begins) and the reply leg (the host has written
  the reply until the worker has it; the two clocks agree to ~0.3 ms, so a leg can read slightly negative). In the
  run of 05:30, quill's slow round trips (3.1–7.6 ms) were all in the reply leg,
  whose fast group is 0.2–0.7 ms, while host-side stayed 0.55–1.04 ms and the request leg 0.07–0.5 ms: the slow group
  is Chromium delivering bytes already written to its pipe, not the host's work. strace of a warm query: 3 system
  calls (a read lock, an fstat, an unlock) and one writev for the reply. \`perf record -a -e sched:sched_switch -e
  sched:sched_wakeup\` over BENCH_ONLY=search at 06:29 shows what a slow reply leg is: the host's write wakes the
  browser's Chrome_IOThread (nice −8) on the host's CPU; it wakes the ThreadPool thread that reads the pipe onto that
  same CPU, then runs on for ~2.9 ms without a switch while the other CPU is idle (swapper), and the reader waits
  behind it; the worker has the reply ~0.3 ms after the reader runs. \`bench/sched-legs.py\` (its docstring has the
  commands) on a capture at 06:47: that thread's runs over 1 ms (median 2.9 ms, median spacing 35 ms) come whatever
  woke it, and alike after either host's write (28 of 693 wakeups by keepsake-host, 20 of 404 by the echo host); one
  followed the host's write in 12 of 34 matched Keepsake round trips, 8 of 21 echo replays and 9 of 20 busy-echo
  replays. Changes made for the channel: each reply now
  goes out in one writev, prefixes and bodies together (before, a 4-byte prefix write and a body write per frame),
  and the debug log line is written after the reply, not before it. Tried and dropped: a thread to cut snippets beside
  the SQLite reads (it started 0.33–1.12 ms after spawn: waking an idle vCPU is slow here).`,
  },
  {
    scenario: /^8 Import/,
    text: `perf record --call-graph dwarf of \`keepsake-host import\` (a 200-session, 27 MB export of this generator):
  before the changes of 2026-12-06, building the search index was ~75 % (writing the \`search_grams\` postings 46 %
  — each session's rows scattered over the whole index, one row per statement — and computing the grams 24 %, half
  of it SipHash), commit and WAL checkpoint ~17 %, the session rows ~5 %, parsing the JSON into a tree only 2.5 %;
  fsync 0.35 s in all (strace). Changes made: the postings of a write are collected, sorted by the index's key and
  written 64 rows a statement; grams past ASCII are hashed with a multiply-rotate instead of SipHash; the import's
  bodies are moved, not copied. On the 128 MiB export: CPU 26–30 s → 11.1–12.6 s (4.5 → 10.7 MB per CPU second),
  peak RSS 846 → 611 MiB (BENCH_ONLY=import, 3 runs each, release build, on a loaded machine). Where the CPU goes
  now: the grams 25 %, writing the postings 20 %, commit and checkpoint ~22 %, the session rows 9 %, reading
  bodies back to index them 6 %. The index is ~70 % of the 533 MiB database: an import at 60 MB/s of export
  would need the index built after the import (search would then have to scan what is not indexed yet) — not
  done. A streaming parse would lower the peak RSS (the document is a tree in memory today), not the time.`,
  },
  {
    scenario: /^9 Host start/,
    text: `Since issue 23 keepsake-host answers \`host.hello\` before it opens the database and opens it right after that
  reply, announcing the result (schema version, or the database's error) in a \`db\` event; the port counts as open
  once that event is in, because the pages need the database's state (the banner for a damaged, too-new or locked
  file) before they show anything — so this row, timed as the extension's \`NativePort.open()\`, includes the open.
  bench/host-start.mjs (BENCH_ONLY=start, 100 interleaved starts, three runs on 2026-12-06 while other builds ran):
  spawn → hello p50 18.1 / 21.4 / 22.5 ms against the build before 21.4 / 23.0 / 24.3 ms and the echo host 15.1 /
  20.1 / 19.1 ms (ratio 1.20 / 1.06 / 1.18, before 1.42 / 1.14 / 1.27); spawn → \`db\` event 24–25.5 ms, what the
  open cost before. The earlier profile (perf, Chromium 156, echo host): connectNative → clone 0.84 ms, fork of the
  browser 2.44 ms, child until execve 1.66 ms, execve 2.53 ms, reply → onMessage ~1.1 ms: Chromium's own share is
  8.6 ms of the echo host's 9.6 ms on an idle machine and 12–15 ms on a busy one. keepsake-host's own part
  (uprobes, populated database, 60 starts): exec → main 1.2 ms (binary load), init and caller check 0.4 ms,
  database open 1.6 ms (SQLite parsing the schema 0.85–1.25 ms), hello 0.1 ms. Earlier changes: the poller's
  connection opens 250 ms after the open, no write lock when the schema is current, fat LTO. What is left is the
  schema parse on the path to the first reply that needs the database: the time a person waits for their chat did
  not move.`,
  },
  {
    scenario: /^9 Chunked/,
    text: `Outside Chromium (a node client on the pipes, the same framing) images.get of this picture takes 66.7 ms
  and the echo host's reply 54.1 ms (medians of 21): the host's own share is ~12 ms. perf of the host: the
  chunk framing both hosts share (\`split_pieces\` 27 %, serde escaping the chunk \`data\` 25 %, copies 10 %),
  then the SHA-256 re-check of the blob on read (9 %) and base64 encoding (7 %). In Chromium the same reply
  takes 90–700 ms with a wide, uneven spread (the row's min–max), so the median ratio moves from run to run;
  a base64 payload needs no escaping, so framing at byte offsets without the per-character scan would speed
  up both hosts.`,
  },
];

function deltaNote(R) {
  const first = R.text.samples.keepsake[0] ?? {};
  const last = R.text.samples.keepsake.at(-1) ?? {};
  const args = last.buildArgs ?? [];
  const n = (key) => last.bodies[key] - first.bodies[key];
  const counts = last.bodies ? `; over the measured rounds after the first, turns.js's BodyMemory counted ${n('full')} full bodies, ${n('delta')} deltas, ${n('rejected')} rejected` : '';
  const what = args.includes('since') ? 'asks for a delta: only what changed since the body it holds comes back' : 'no `since`: the full body comes back every turn';
  return `\`${args.join(', ')}\` (${what}${counts})`;
}

function missNotes(rows) {
  const missed = MISS_NOTES.filter((n) => rows.some((r) => n.scenario.test(r.scenario) && r.met === 'NO'));
  if (!missed.length) return '';
  return `## Where a target is missed: what the profiles show

${missed.map((n) => `- **${rows.find((r) => n.scenario.test(r.scenario)).scenario}.** ${n.text}`).join('\n')}

`;
}

function checkLines(R) {
  return Object.entries(R.checks).map(
    ([id, c]) =>
      `${id}: Keepsake ${c.keepsake.messages} messages, ${c.keepsake.length} chars; baseline ${c.baseline.messages} messages, ${c.baseline.length} chars; ${c.equal ? 'identical' : 'NOT identical'}`,
  );
}

function machineLines(m) {
  return [
    `CPU: ${m.cpu}, ${m.cores} cores; flags: ${m.flags}; RAM ${m.ram}; Linux ${m.kernel}`,
    `${m.chromium}; ${m.rust}; node ${m.node}; playwright-core ${m.playwright}`,
    `crates: ${m.crates}`,
  ];
}

/** The baseline's building blocks measured in this run, against the issue's reference medians. */
function calibrationLine(R) {
  const m = (key) => fmt(summarize(R.calibration[key]).median, 'ms');
  return `chrome.storage.local with scenario 1's 8 MiB history, this run (median of ${R.calibration.set.length}): set ${m('set')}, get ${m('get')}, JSON.stringify ${m('stringify')} (the issue's reference figures: 118, 68 and 17.5 ms)`;
}

function printReport({ mach, rows, R }) {
  console.log('');
  console.log(machineLines(mach).join('\n'));
  console.log(`rounds: ${ROUNDS_NOTE}${QUICK ? ' — BENCH_QUICK (small inputs, not for publishing)' : ''}`);
  console.log(calibrationLine(R));
  console.log('');
  console.log(textTable(rows));
  console.log('');
  console.log('Body checks (the same history, both ways):');
  for (const l of checkLines(R)) console.log(`  ${l}`);
}

function markdown({ started, finished, mach, rows, R, sizes }) {
  const at = R.attach.samples;
  const med = (xs, key) => summarize(pickAll(xs, key))?.median;
  const S = R.search.facts;
  const ch = R.rounds.facts.s9chunked;
  const shotMiB = (names) => (names.reduce((n, x) => n + sizes[x], 0) / MiB).toFixed(2);
  return `# Benchmarks: Keepsake against the in-browser way

Written by \`./bench.sh\` (bench/run.mjs) on ${started.toISOString()} (${Math.round((finished - started) / 1000)} s).
Every figure below comes from this one run. Ratio = Keepsake / baseline (lower is better); no absolute-time
pass/fail except where the target is absolute. Method: performance.md §6 — every case runs both ways in the
same headless Chromium, in interleaved rounds (each round runs every case once, both ways, alternating which
way goes first): ${ROUNDS_NOTE}. Scenarios 1–3, 6, 7, 9 and the sweep share the rounds; scenario 4 (one
conversation going on turn after turn), 5 (20 attaches per round) and 8 (its own browser and data set) run as
their own blocks of rounds, interleaved the same way. Medians, with min–max.

## Machine

${machineLines(mach).map((l) => `- ${l}`).join('\n')}
- ${calibrationLine(R)}

Command: \`./bench.sh\` (release \`keepsake-host\`, release \`examples/echo_host.rs\`, Debian's \`/usr/bin/chromium\`
headless through the e2e harness, a temp profile with the host registered by \`keepsake-host install --user-data-dir\`).

## Results

${markdownTable(rows)}

The sweep rows are the chart: send latency (scenario 2/3 style, time to the body at \`fetch\`, no pasted picture)
against history size, one ~1 MB screenshot per 10 entries, unseen or seen. The live history holds at most 60
entries (storage-model §4.1), so larger sizes do not exist there (120 entries would be trimmed to 60).

![Send latency against history size](docs/bench/send-latency.svg)

Body checks (one turn from the same stored history, both ways; the request body string handed to \`fetch\`):

${checkLines(R).map((l) => `- ${l}`).join('\n')}

## How each scenario is measured

Both ways run in the extension's service worker (the test build's \`bench/bench-sw.js\` imports the real
\`background/sw.js\`), except the Keepsake way of scenario 5 and both ways of 6, which run in a side-panel page. **Keepsake** = the real \`background/turns.js\`, \`lib/storage.js\` and \`lib/native-port.js\` talking
to the release host, timed from the call until the result is available in the worker (transfer, chunk
reassembly and parsing included). **Baseline** = \`bench/ext/baseline.js\`: \`chrome.storage.local\` (with
\`unlimitedStorage\`), the same rules in plain JavaScript, \`createImageBitmap\` + \`OffscreenCanvas\` +
\`convertToBlob\` for thumbnails. The LLM is the only fake in both: \`fetch\` to the provider is replaced by a
function that notes when the body string arrived and answers a short SSE stream through the real \`lib/llm.js\`.

1. **Turn storage work.** A 60-entry history (${H_IMAGES.count} × ~${H_IMAGES.chars} chars) holding 6 unseen screenshots
   (${shotMiB(H_IMAGES.shots)} MiB of PNG, ${(med(R.rounds.samples.s1.keepsake, 'bodyLength') / MiB).toFixed(2)} MiB request body), reset before every run. Keepsake: \`turns.send\` → \`turns.idle()\` (settings.get,
   request.build with \`imageRefs\` — the worker's ImageCache holds the 6 pictures as it does after they were
   pasted — tokens filled, history.append, the fake stream, history.get for videoSrc, history.append with
   \`markImagesSeen\`). Baseline: settings and history read, body built and stringified, user entry pushed and
   the history written, the reply appended the same way (read, push, stamp seen, write).
2. **Send with pictures.** As 1 plus a new 1.5 MB pasted PNG per round; time from send until the body string
   reaches \`fetch\` (the real path appends the user entry first, so both ways include that append).
3. **Send, pictures seen.** As 2 without the pasted picture, the 6 screenshots stamped \`imagesSeen\` (labels).
4. **Send, text only.** ${H_TEXT.count} entries × ${H_TEXT.chars} chars (≈300K chars, no pictures) plus ${TEXT.sessions} saved sessions
   (${TEXT.sessionChars / 1000}K chars each; host: \`storage.import\`; baseline: \`savedSessions\` + \`session_<id>\` keys). Not reset: every
   round is the next turn of the same conversation (trim keeps it at ≤ 60 entries / 300K chars). Time to body
   at \`fetch\`. Whatever turns.js uses to build a body is what is measured; in this run its \`request.build\` carried
   the arguments ${deltaNote(R)}. Host-side medians from its debug log over these turns:
   ${Object.entries(R.text.hostMs).map(([op, xs]) => `${op} ${round2(summarize(xs).median)} ms`).join(', ')}. Where a Keepsake turn's time went (each storage
   call turns.js made, median ms after the send, from start to reply; \`BENCH_ONLY=text ./bench.sh\` prints the same):
   ${timeline(R.text.samples.keepsake).map(({ op, start, end }) => (op === 'fetch' ? `body at \`fetch\` ${start}` : `${op} ${start}–${end ?? '?'}`)).join(', ')}.
5. **Attach ${CFG.attachShots} screenshots and bound** (PNG of 1, 2 and 3 MB in turn, ${shotMiB(ATTACH.map((a) => a.name))} MiB). Keepsake: the product's
   📷 path in the real side panel (the test build's \`sidepanel.html\`, driven by \`bench/ext/attach-panel.js\`): ${CFG.attachShots} clicks, one
   after the other, each captured (\`captureVisibleTab\` answers the generated PNG as a data URL, the only stand-in),
   attached with \`history.attach\` (mode screenshot) over the **panel's own native port and keepsake-host process**
   (the host bounds after each attach), the chip drawn from that port's \`changed\` event and the history re-read
   through the worker; then \`history.boundImages\` on the panel's port (returns once all bounding is done). The
   panel's port is reopened before each round (a fresh host process, connected before the clock starts, as the
   worker's port is). Baseline: in the worker, per screenshot read, push, bound with OffscreenCanvas thumbnails (480 px
   JPEG q0.82, oldest first, never the newest), write. Busy time, per thread, two ways: CPU time of the renderer
   thread named \`ServiceWorker\` and of the panel page's main thread (/proc/<pid>/task/<tid>/schedstat; the renderer's
   main thread, which also does some of the process's own work, hence the baseline's non-zero figure) over the case, and the V8 CPU profiler of each (CDP, 1 ms samples) counting every sample that is not \`(idle)\` — that one
   also counts time a thread waits inside a call (e.g. \`postMessage\`) or is preempted. The page rows and
   worker + page are info: the work the panel now does is reported, not hidden (the panel page ${R.attach.pageSharesRenderer ? 'runs in the worker\'s renderer process' : 'runs in another renderer process than the worker'}). Medians also:
   CPU of the whole case, Keepsake: extension renderer (all threads) ${fmt(med(at.keepsake, 'rendererCpuMs'), 'ms')} + hosts (the panel's and
   the worker's) ${fmt(med(at.keepsake, 'hostCpuMs'), 'ms')}; baseline: extension renderer ${fmt(med(at.baseline, 'rendererCpuMs'), 'ms')} (decoding and encoding run on its other
   threads; the browser process's LevelDB work is not counted); entries thumbnailed
   Keepsake ${med(at.keepsake, 'rewritten')} vs baseline ${med(at.baseline, 'rewritten')}; live image URL chars after bounding Keepsake
   ${med(at.keepsake, 'imageChars')} vs baseline ${med(at.baseline, 'imageChars')}.
6. **Panel.** Both hold scenario 1's history. Keepsake: the real \`sidepanel/sidepanel.html\` in a new tab
   (history.get with references, pictures through images.get). Baseline: \`bench/ext/panel.html\` reads
   chrome.storage.local and renders the same entries (same Markdown renderer and CSS, pictures as Blob URLs).
   First text paint = ms from navigation start until all ${H_IMAGES.count} bubbles are in the DOM and the next frame
   has run (MutationObserver + requestAnimationFrame + a message), recorded by an init script in both pages.
   The bubbles were in the DOM (before that frame) at ${fmt(med(R.rounds.samples.s6.keepsake, 'domMs'), 'ms')} (Keepsake) and
   ${fmt(med(R.rounds.samples.s6.baseline, 'domMs'), 'ms')} (baseline), medians.
7. **Bytes written per append.** Scenario 1's history, ${APPENDS} small appends per round after a reset. Keepsake:
   \`write_bytes\` of the keepsake-host process (/proc/<pid>/io) minus the growth of its debug log; baseline:
   \`write_bytes\` of the browser process (chrome.storage.local's LevelDB is written there), both read 500 ms after
   the last append. Database + WAL size growth Keepsake: ${fmt(med(R.rounds.samples.s7.keepsake, 'dbGrowth') / APPENDS, 'bytes')} per append (WAL reuse makes it smaller than what is written).
8. **Search** in a second browser with its own data dir: ${CFG.searchSessions} sessions × ${CFG.searchChars / 1000}K chars of mixed
   English/Chinese (JSON export of ${(S.docBytes / MiB).toFixed(0)} MiB, generated in ${S.genMs} ms, \`keepsake-host import\` in ${S.importMs} ms,
   database ${(S.dbBytes / MiB).toFixed(0)} MiB). Both ways do the drawer's job: the first page of 50 rows, snippets for
   those only, and how many the whole search found. Keepsake: \`sessions.list({query, limit: 50})\` round trip (\`{rows, total,
   cursor}\`); host-side = the host's own \`served op=sessions.list … us=\` debug log line (microseconds). Baseline: lower-cased digests
   kept in chrome.storage.local (written in ${Math.round(S.storeMs)} ms, read back in ${Math.round(S.loadMs)} ms — what a restarted
   worker pays before its first search), every one scanned in memory with \`indexOf\` (for the total), the first 50 hits in
   the drawer's order given the snippet cut from the digest.
9. **Host.** Start: a fresh \`NativePort\` (the real client) → \`open()\` (spawn, \`host.hello\`, then the \`db\` event once the host has opened the database);
   the echo host is the same through its own manifest. Chunked reply: \`images.get\` of a ${(BIG.bytes / 1e6).toFixed(1)} MB PNG
   (${ch.b64Chars} base64 chars, a ${ch.replyChars}-byte reply in chunk frames) against \`examples/echo_host.rs\` answering
   \`bench.reply\` with a reply of the same shape and length, cut by keepsake-host's own \`frames_for_reply\`
   (base64 prebuilt per size: only the copy, chunking and pipe remain). Peak RSS = VmHWM from /proc: a fresh
   idle host after hello (3 samples), and the fresh host of every scenario-5 round.

${scaleSection(R.scale)}${backupsSection(R.backups)}${syncSection(R.sync)}
${missNotes(rows)}## Realism caveat

The inputs are generated by committed code (\`bench/ext/gen.js\`, \`bench/inputs.mjs\`), seeded and deterministic.
A synthetic screenshot is flat colour plus one panel of noise sized to the wanted file size; real screenshots
compress better, so the same bytes carry fewer real pixels here and decode costs follow the compressed bytes.
The text is shuffled English and Chinese words. The machine is shared and has 2 cores: medians moved 5–15 %
between runs in earlier measurements while the ratios held.
`;
}

main().catch((e) => {
  console.error(e?.stack || e);
  process.exitCode = 1;
});
