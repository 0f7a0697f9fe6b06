// End-to-end harness: the real extension and the real keepsake-host in Debian's headless Chromium,
// driven by playwright-core (never a downloaded browser). Launch recipe: docs/platform.md §11.
//
//   const k = await launch({ name: 'smoke' });
//   const panel = await k.openPanel();
//   k.sql('SELECT count(*) AS n FROM history_entries');   // the real SQLite file, read-only
//   await k.close();
//
// Every wait has a timeout; nothing here can hang a test run.

import { chromium } from 'playwright-core';
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
export const ROOT = path.resolve(here, '..', '..');
export const EXT_DIR = process.env.KEEPSAKE_E2E_EXT_DIR || path.join(ROOT, 'extension');
export const HOST_BIN = process.env.KEEPSAKE_E2E_HOST_BIN || path.join(ROOT, 'target', 'debug', 'keepsake-host');
export const CHROMIUM = process.env.KEEPSAKE_E2E_CHROMIUM || '/usr/bin/chromium';
export const EXT_ID = 'ejaedcjldiggibmnammkkoekohjgefkk';
export const HOST_NAME = 'dev.keepsake.host';
export const ARTIFACTS = path.join(here, 'artifacts');
export const SCREENSHOTS = path.join(ROOT, 'docs', 'screenshots');
export const PANEL_URL = `chrome-extension://${EXT_ID}/sidepanel/sidepanel.html`;
export const OPTIONS_URL = `chrome-extension://${EXT_ID}/options/options.html`;
export const PANEL_VIEWPORT = { width: 420, height: 800 };

const TMP_PREFIX = 'keepsake-e2e-';

/** Sleep. */
export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Reject after `ms` with a message naming what was awaited. */
export function withTimeout(promise, ms, what) {
  let timer;
  const t = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms: ${what}`)), ms);
  });
  return Promise.race([promise, t]).finally(() => clearTimeout(timer));
}

/**
 * Poll `fn` until it returns a truthy value (returned) or `timeoutMs` passes (throws with the last
 * value or error seen, so a failure says what was observed).
 */
export async function waitFor(fn, { timeoutMs = 10_000, intervalMs = 100, what = 'condition' } = {}) {
  const deadline = Date.now() + timeoutMs;
  let last;
  let lastErr;
  for (;;) {
    try {
      last = await fn();
      lastErr = undefined;
      if (last) return last;
    } catch (e) {
      lastErr = e;
    }
    if (Date.now() > deadline) {
      const seen = lastErr ? `last error: ${lastErr.message}` : `last value: ${short(last)}`;
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what} (${seen})`);
    }
    await sleep(intervalMs);
  }
}

function short(v) {
  let s;
  try {
    s = JSON.stringify(v);
  } catch {
    s = String(v);
  }
  return s && s.length > 300 ? `${s.slice(0, 300)}…` : s;
}

// ---------------------------------------------------------------------------------------------
// The host manifest

/**
 * Register the host for a Chromium profile exactly as a user would:
 * `keepsake-host install --user-data-dir <profile>` (writes
 * `<profile>/NativeMessagingHosts/dev.keepsake.host.json` pointing at the built binary).
 * `env` is the browser's environment (KEEPSAKE_DB); HOME is a throwaway dir because `install`
 * also registers with every browser it detects under the user's config folders, and a test must
 * touch nothing outside its temp dirs.
 */
export function installHost(profileDir, env) {
  const manifestPath = path.join(profileDir, 'NativeMessagingHosts', `${HOST_NAME}.json`);
  const home = fs.mkdtempSync(path.join(os.tmpdir(), `${TMP_PREFIX}home-`));
  let out;
  try {
    out = execFileSync(HOST_BIN, ['install', '--user-data-dir', profileDir, '--json'], {
      encoding: 'utf8',
      timeout: 30_000,
      env: { ...env, HOME: home, XDG_CONFIG_HOME: path.join(home, '.config') },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
  } catch (e) {
    throw new Error(`\`${HOST_BIN} install --user-data-dir ${profileDir}\` failed: ${e.stderr || e.message}`);
  } finally {
    rmrf(home);
  }
  if (!fs.existsSync(manifestPath)) {
    throw new Error(`keepsake-host install did not write ${manifestPath}; it printed:\n${out}`);
  }
  return { manifestPath, via: 'install', report: JSON.parse(out) };
}

// ---------------------------------------------------------------------------------------------
// SQLite, read directly (never through the extension)

/** Run one read-only query against a database file; returns rows as objects. */
export function sqlFile(dbPath, query) {
  if (!fs.existsSync(dbPath)) throw new Error(`no database at ${dbPath}`);
  const r = spawnSync('sqlite3', ['-readonly', '-json', '-cmd', '.timeout 5000', dbPath, query], {
    encoding: 'utf8',
    timeout: 20_000,
    maxBuffer: 256 * 1024 * 1024,
  });
  if (r.error) throw r.error;
  if (r.status !== 0) throw new Error(`sqlite3 failed (${r.status}) on ${query}: ${r.stderr}`);
  const text = r.stdout.trim();
  return text ? JSON.parse(text) : [];
}

// ---------------------------------------------------------------------------------------------
// Processes

function processes() {
  const r = spawnSync('ps', ['-eo', 'pid=,ppid=,args='], { encoding: 'utf8', timeout: 5000 });
  return r.stdout
    .split('\n')
    .map((l) => l.trim().match(/^(\d+)\s+(\d+)\s+(.*)$/))
    .filter(Boolean)
    .map(([, pid, ppid, args]) => ({ pid: +pid, ppid: +ppid, args }));
}

/** The browser process of a profile: names `--user-data-dir=<profile>`, its parent does not. */
export function findBrowserPid(profileDir) {
  const procs = processes();
  const mine = procs.filter((p) => p.args.includes(`--user-data-dir=${profileDir}`));
  const pids = new Set(mine.map((p) => p.pid));
  const top = mine.find((p) => !pids.has(p.ppid) && !/--type=/.test(p.args));
  return top ? top.pid : null;
}

/** Pids of keepsake-host processes (browser launches) whose parent chain includes `ancestorPid`. */
export function hostPidsUnder(ancestorPid) {
  if (ancestorPid == null) throw new Error('hostPidsUnder: no browser pid');
  const procs = processes();
  const parent = new Map(procs.map((p) => [p.pid, p.ppid]));
  const under = (pid) => {
    for (let p = pid, n = 0; p > 1 && n < 64; p = parent.get(p), n++) {
      if (p === ancestorPid) return true;
    }
    return false;
  };
  return procs
    .filter((p) => /keepsake-host/.test(p.args.split(' ')[0]) && /chrome-extension:\/\//.test(p.args))
    .filter((p) => under(p.pid))
    .map((p) => p.pid);
}

// ---------------------------------------------------------------------------------------------
// Launch

/**
 * Launch Chromium with the extension on a fresh profile and a fresh host data dir.
 *
 * @param {object} o
 * @param {object} [o.env]            extra environment for the browser (reaches the host)
 * @param {boolean} [o.hostInstalled] register the native host (default true)
 * @param {string} [o.dataDir]        reuse a host data dir (default: a new temp dir)
 * @param {string} [o.name]           test name, for artifact files
 * @param {string} [o.extDir]         the unpacked extension (default: extension/)
 * @param {boolean} [o.waitReady]     wait for self.__keepsakeReady (default true)
 * @param {boolean} [o.hostDebug]     debug logging in keepsake-host.log (a `debug` marker file)
 * @param {string[]} [o.browserArgs]  more Chromium switches (e.g. `--host-resolver-rules`)
 */
export async function launch({
  env = {},
  hostInstalled = true,
  dataDir,
  name = 'e2e',
  extDir = EXT_DIR,
  waitReady = true,
  downloads = true,
  hostDebug = false,
  browserArgs = [],
} = {}) {
  const t0 = Date.now();
  const profileDir = fs.mkdtempSync(path.join(os.tmpdir(), `${TMP_PREFIX}profile-`));
  const ownDataDir = !dataDir;
  dataDir = dataDir || fs.mkdtempSync(path.join(os.tmpdir(), `${TMP_PREFIX}data-`));
  const dbPath = path.join(dataDir, 'keepsake.db');
  // a file named `debug` beside the database turns on the host's debug log (one line per op served)
  if (hostDebug) fs.writeFileSync(path.join(dataDir, 'debug'), '');
  // API keys stay in the database file unless a test brings a secret store of its own
  // (secrets.e2e.mjs): a developer's desktop keyring is never touched
  const fullEnv = { ...process.env, KEEPSAKE_SECRET_STORE: 'off', KEEPSAKE_DB: dbPath, ...env };
  let install = null;
  if (hostInstalled) install = installHost(profileDir, fullEnv);

  fs.mkdirSync(ARTIFACTS, { recursive: true });
  const safeName = name.replace(/[^a-z0-9._-]+/gi, '_').slice(0, 80);
  const logLines = [];
  const log = (line) => logLines.push(`${new Date().toISOString()} ${line}`);
  log(`profile ${profileDir} data ${dataDir} manifest via ${install ? install.via : 'none'}`);

  const launching = withTimeout(
    chromium.launchPersistentContext(profileDir, {
      executablePath: CHROMIUM,
      headless: false, // the mode comes from --headless=new below
      ignoreDefaultArgs: ['--disable-extensions'],
      args: [
        '--headless=new',
        '--no-sandbox',
        '--disable-gpu',
        '--disable-quic',
        '--no-first-run',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
        // the browser's own passwords never go to a secret store the environment names
        '--password-store=basic',
        `--disable-extensions-except=${extDir}`,
        `--load-extension=${extDir}`,
        ...browserArgs,
      ],
      env: fullEnv,
      viewport: PANEL_VIEWPORT,
      acceptDownloads: downloads,
      timeout: 30_000,
    }),
    45_000,
    'chromium.launchPersistentContext',
  );
  let context;
  try {
    context = await launching;
  } catch (e) {
    rmrf(profileDir);
    if (ownDataDir) rmrf(dataDir);
    throw annotate(e, `launching ${CHROMIUM} with the extension at ${extDir} failed`);
  }

  const consoleOf = (where) => (msg) => log(`[${where} ${msg.type()}] ${msg.text()}`);
  const watchPage = (page) => {
    const tag = () => {
      try {
        return new URL(page.url()).pathname.split('/').pop() || page.url();
      } catch {
        return 'page';
      }
    };
    page.on('console', (m) => consoleOf(tag())(m));
    page.on('pageerror', (e) => log(`[${tag()} pageerror] ${e.stack || e.message}`));
  };
  context.on('page', watchPage);
  context.pages().forEach(watchPage);

  let worker = null;
  let stopMarker = null;
  let workerGeneration = 0;
  const onWorker = (w) => {
    if (!w.url().startsWith(`chrome-extension://${EXT_ID}/`)) return;
    worker = w;
    workerGeneration++;
    log(`service worker #${workerGeneration} ${w.url()}`);
    w.on('console', consoleOf('sw'));
    w.on('close', () => log(`service worker #${workerGeneration} closed`));
  };
  context.on('serviceworker', onWorker);
  context.serviceWorkers().forEach(onWorker);

  // Pid of the browser process (the parent of every host it starts): the chromium process whose
  // command line names this profile and whose parent does not.
  const browserPid = findBrowserPid(profileDir);

  const k = {
    context,
    extId: EXT_ID,
    profileDir,
    dataDir,
    dbPath,
    install,
    browserPid,
    log,
    logLines,
    name: safeName,
    get worker() {
      return worker;
    },
    get workerGeneration() {
      return workerGeneration;
    },

    /** Wait for the extension's service worker (by URL) and its readiness flag. */
    async waitForWorker({ timeoutMs = 20_000 } = {}) {
      const w = await waitFor(() => worker, { timeoutMs, what: 'the extension service worker' });
      await waitFor(() => w.evaluate(() => self.__keepsakeReady === true), {
        timeoutMs,
        intervalMs: 100,
        what: 'self.__keepsakeReady in the service worker',
      });
      await w.evaluate(captureWorkerConsole).catch(() => {});
      return w;
    },

    /** Open the side panel page as an ordinary tab (platform.md §11). */
    async openPanel({ viewport = PANEL_VIEWPORT, query = '' } = {}) {
      const page = await context.newPage();
      page.setDefaultTimeout(15_000);
      await page.setViewportSize(viewport);
      await page.goto(PANEL_URL + query, { timeout: 20_000 });
      return page;
    },

    /**
     * An extension page that is neither the panel nor options (the manifest shown as a page):
     * it can call the bridge (`chrome.runtime`) without a UI that re-reads on every change.
     */
    async openBridgePage() {
      const page = await context.newPage();
      await page.goto(`chrome-extension://${EXT_ID}/manifest.json`, { timeout: 20_000 });
      return page;
    },

    /** Open the options page as a tab. */
    async openOptions({ viewport = { width: 900, height: 900 } } = {}) {
      const page = await context.newPage();
      page.setDefaultTimeout(15_000);
      await page.setViewportSize(viewport);
      await page.goto(OPTIONS_URL, { timeout: 20_000 });
      return page;
    },

    /**
     * Stop the extension's service worker with CDP `ServiceWorker.stopAllWorkers` (a session on
     * an extension page) and prove it stopped: CDP reports the version `stopped`, and the JS
     * realm is new afterwards (`workerIsFresh()` checks a marker set here is gone).
     * The worker restarts on the next message or port connection to it.
     *
     * Measured with Chromium 156 + playwright-core 1.65: Playwright's Worker object does NOT
     * emit 'close' on a stop; it stays attached and evaluates in the restarted worker.
     */
    async stopWorker({ timeoutMs = 15_000 } = {}) {
      const w = worker;
      if (!w) throw new Error('no service worker to stop');
      stopMarker = `stop-${Date.now()}-${Math.random()}`;
      await withTimeout(
        w.evaluate((m) => {
          self.__e2eStopMarker = m;
        }, stopMarker),
        timeoutMs,
        'setting the stop marker in the worker',
      );
      // A page of the extension's own origin hosts the CDP session.
      let page = context
        .pages()
        .find((p) => !p.isClosed() && p.url().startsWith(`chrome-extension://${EXT_ID}/`));
      let opened = null;
      if (!page) {
        opened = page = await context.newPage();
        await page.goto(`chrome-extension://${EXT_ID}/manifest.json`, { timeout: 10_000 });
      }
      const cdp = await context.newCDPSession(page);
      const statuses = [];
      try {
        cdp.on('ServiceWorker.workerVersionUpdated', ({ versions }) => {
          for (const v of versions) {
            if (v.scriptURL.startsWith(`chrome-extension://${EXT_ID}/`)) statuses.push(v.runningStatus);
          }
        });
        await cdp.send('ServiceWorker.enable');
        // enable() reports the current versions asynchronously; wait for that first report.
        await waitFor(() => statuses.length > 0, { timeoutMs, what: 'ServiceWorker.workerVersionUpdated' });
        const before = statuses.length;
        await cdp.send('ServiceWorker.stopAllWorkers');
        await waitFor(() => statuses.slice(before).includes('stopped'), {
          timeoutMs,
          what: 'CDP runningStatus "stopped" for the extension worker',
        }).catch((e) => {
          throw new Error(`${e.message}; CDP statuses: ${statuses.join(',')}`);
        });
        log(`service worker stopped (CDP statuses: ${statuses.join(',')})`);
        return { statuses };
      } finally {
        await cdp.detach().catch(() => {});
        if (opened) await opened.close().catch(() => {});
      }
    },

    /** After stopWorker(): true when the running worker is a new JS realm (the marker is gone). */
    async workerIsFresh({ timeoutMs = 20_000 } = {}) {
      if (!stopMarker) throw new Error('workerIsFresh() before stopWorker()');
      const w = await k.waitForWorker({ timeoutMs });
      const m = await w.evaluate(() => self.__e2eStopMarker);
      return m !== stopMarker;
    },

    /** Read the real SQLite file (read-only); rows as objects. */
    sql(query) {
      return sqlFile(dbPath, query);
    },

    /** The host log (keepsake-host.log beside the database), or '' when absent. */
    hostLog() {
      const p = path.join(dataDir, 'keepsake-host.log');
      return fs.existsSync(p) ? fs.readFileSync(p, 'utf8') : '';
    },

    /** keepsake-host processes started by this browser. */
    hostPids() {
      return hostPidsUnder(browserPid);
    },

    /** The service worker's console lines captured so far (this realm only). */
    async workerLogs() {
      if (!worker) return [];
      return withTimeout(worker.evaluate(() => self.__e2eLogs || []), 5000, 'worker logs').catch(() => []);
    },

    /** Save a screenshot of every open page plus logs into artifacts/. */
    async collectArtifacts(reason = 'failure') {
      const base = path.join(ARTIFACTS, `${safeName}`);
      rmrf(base);
      fs.mkdirSync(base, { recursive: true });
      let i = 0;
      for (const p of context.pages()) {
        if (p.isClosed()) continue;
        const file = path.join(base, `page-${i++}.png`);
        await withTimeout(p.screenshot({ path: file, fullPage: true }), 10_000, 'screenshot').catch(() => {});
        fs.appendFileSync(path.join(base, 'pages.txt'), `${file}: ${p.url()}\n`);
      }
      const swLogs = worker
        ? await withTimeout(worker.evaluate(() => self.__e2eLogs || []), 5000, 'worker logs').catch(() => [])
        : [];
      fs.writeFileSync(
        path.join(base, 'browser.log'),
        `${reason}\n${logLines.join('\n')}\n--- service worker console ---\n${swLogs.join('\n')}\n`,
      );
      const hl = k.hostLog();
      if (hl) fs.writeFileSync(path.join(base, 'keepsake-host.log'), hl);
      return base;
    },

    /** Close the browser and delete the temp profile (and data dir unless `keepData`). */
    async close({ keepData = false } = {}) {
      await withTimeout(context.close(), 20_000, 'context.close').catch((e) => log(`close: ${e.message}`));
      rmrf(profileDir);
      if (ownDataDir && !keepData) rmrf(dataDir);
    },
  };

  if (waitReady) {
    try {
      await k.waitForWorker();
    } catch (e) {
      const missing = missingImports(extDir);
      if (missing.length) e.message += `\n  the extension has unresolved imports: ${missing.join('; ')}`;
      await k.collectArtifacts(`launch: ${e.message}`).catch(() => {});
      await k.close();
      throw e;
    }
  }
  log(`ready in ${Date.now() - t0} ms`);
  return k;
}

/**
 * Static imports of the extension's modules that name a missing file (a worker that fails to
 * load shows nothing to Playwright; this says why).
 */
export function missingImports(extDir = EXT_DIR) {
  const out = [];
  const walk = (dir) => {
    for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
      const p = path.join(dir, e.name);
      if (e.isDirectory()) {
        if (e.name !== 'node_modules' && !e.name.startsWith('.')) walk(p);
      } else if (/\.m?js$/.test(e.name) && !/\.test\.m?js$/.test(e.name)) {
        const src = fs.readFileSync(p, 'utf8');
        for (const m of src.matchAll(/^\s*(?:import|export)\s[^;]*?from\s*['"](\.{1,2}\/[^'"]+)['"]/gm)) {
          const target = path.resolve(path.dirname(p), m[1]);
          if (!fs.existsSync(target)) out.push(`${path.relative(extDir, p)} → ${m[1]}`);
        }
      }
    }
  };
  walk(extDir);
  return out;
}

/**
 * Runs inside the service worker: keep its console output and unhandled errors in
 * `self.__e2eLogs` (Playwright does not report a service worker's console), once per realm.
 */
function captureWorkerConsole() {
  if (self.__e2eLogs) return;
  const logs = (self.__e2eLogs = []);
  const fmt = (a) => {
    if (a instanceof Error) return a.stack || String(a);
    if (typeof a === 'string') return a;
    try {
      return JSON.stringify(a);
    } catch {
      return String(a);
    }
  };
  for (const level of ['log', 'info', 'warn', 'error', 'debug']) {
    const orig = console[level].bind(console);
    console[level] = (...args) => {
      logs.push(`${new Date().toISOString()} [sw ${level}] ${args.map(fmt).join(' ')}`.slice(0, 4000));
      if (logs.length > 2000) logs.splice(0, 500);
      orig(...args);
    };
  }
  self.addEventListener('error', (e) => logs.push(`[sw uncaught] ${e.message}`));
  self.addEventListener('unhandledrejection', (e) => logs.push(`[sw unhandledrejection] ${fmt(e.reason)}`));
}

function rmrf(p) {
  try {
    fs.rmSync(p, { recursive: true, force: true, maxRetries: 3 });
  } catch {
    /* temp dir; best effort */
  }
}

/** Add a line to an error's message and stack (reporters print one or the other). */
export function annotate(e, line) {
  if (!e || typeof e !== 'object') return e;
  try {
    e.message = `${e.message}\n  ${line}`;
    if (typeof e.stack === 'string') e.stack = `${e.stack}\n  ${line}`;
  } catch {
    /* frozen error */
  }
  return e;
}

/**
 * node:test helper: launch, run `fn(k)`, and on failure save screenshots, the browser/console
 * log and the host log into artifacts/<test name>/ before closing.
 */
export async function withKeepsake(t, opts, fn) {
  const k = await launch({ name: t.name, ...opts });
  try {
    return await fn(k);
  } catch (e) {
    const dir = await k.collectArtifacts(`FAILED: ${e.stack || e.message}`).catch(() => null);
    if (dir) annotate(e, `artifacts: ${dir}`);
    throw e;
  } finally {
    await k.close();
  }
}

// ---------------------------------------------------------------------------------------------
// Page helpers

/** Call a host operation through the page's bridge (`chrome.runtime.sendMessage` to the worker). */
export async function hostCall(page, op, args = {}, opts = {}, { timeoutMs = 30_000 } = {}) {
  const reply = await withTimeout(
    page.evaluate(
      ([op, args, opts]) => chrome.runtime.sendMessage({ kind: 'host', op, args, opts }),
      [op, args, opts],
    ),
    timeoutMs,
    `hostCall ${op}`,
  );
  if (!reply || !reply.ok) {
    const err = new Error(`hostCall ${op} failed: ${short(reply && reply.error)}`);
    err.reply = reply;
    throw err;
  }
  return reply.result;
}

/** Call a worker handler (`chat.send`, …) through the page's bridge. */
export async function workerCall(page, kind, payload = {}, { timeoutMs = 30_000 } = {}) {
  const reply = await withTimeout(
    page.evaluate(([kind, payload]) => chrome.runtime.sendMessage({ kind, ...payload }), [kind, payload]),
    timeoutMs,
    `workerCall ${kind}`,
  );
  if (!reply || !reply.ok) {
    const err = new Error(`workerCall ${kind} failed: ${short(reply && reply.error)}`);
    err.reply = reply;
    throw err;
  }
  return reply.result;
}

// ---------------------------------------------------------------------------------------------
// A host of the test's own, and sync set up as a person does it

/**
 * `keepsake-host serve` over pipes on `db` (a second process beside the browser's, or a device
 * with no browser): `call(op, args)` → result (rejects with the error's code), `close()`.
 * `env` is its environment (default: this process's, with no secret store).
 */
export function serveHost(db, { env = { ...process.env, KEEPSAKE_SECRET_STORE: 'off' } } = {}) {
  const child = spawn(HOST_BIN, ['--db', db, 'serve'], { env, stdio: ['pipe', 'pipe', 'ignore'] });
  let buf = Buffer.alloc(0);
  const waiting = new Map();
  let next = 1;
  child.stdout.on('data', (d) => {
    buf = Buffer.concat([buf, d]);
    while (buf.length >= 4) {
      const n = buf.readUInt32LE(0);
      if (buf.length < 4 + n) break;
      const msg = JSON.parse(buf.subarray(4, 4 + n).toString('utf8'));
      buf = buf.subarray(4 + n);
      const w = waiting.get(msg.id);
      if (!w) continue;
      waiting.delete(msg.id);
      if (msg.ok) w.resolve(msg.result);
      else w.reject(Object.assign(new Error(msg.error.message), { code: msg.error.code }));
    }
  });
  return {
    call(op, args = {}) {
      const id = next++;
      const body = Buffer.from(JSON.stringify({ id, op, args }));
      const head = Buffer.alloc(4);
      head.writeUInt32LE(body.length);
      child.stdin.write(Buffer.concat([head, body]));
      return withTimeout(new Promise((resolve, reject) => waiting.set(id, { resolve, reject })), 60_000, `serveHost ${op}`);
    },
    async close() {
      child.stdin.end();
      await withTimeout(new Promise((r) => (child.exitCode !== null ? r() : child.on('exit', r))), 30_000, 'the host exiting').catch(() => child.kill('SIGKILL'));
    },
  };
}

/**
 * `keepsake-host sync init --folder … --name …` on the database `env.KEEPSAKE_DB`, as a person types
 * it: the key it printed once (52 letters and digits in groups of four).
 */
export function syncInit(env, folder, name) {
  const out = execFileSync(HOST_BIN, ['sync', 'init', '--folder', folder, '--name', name], { env, encoding: 'utf8', timeout: 60_000, stdio: ['ignore', 'pipe', 'pipe'] });
  const m = /\b[a-z2-7]{4}(?:-[a-z2-7]{4}){12}\b/.exec(out);
  if (!m) throw new Error(`sync init printed no key:\n${out}`);
  return m[0];
}

/** `keepsake-host sync join --folder … --key … --name …` on the database `env.KEEPSAKE_DB`. */
export function syncJoin(env, folder, key, name) {
  return execFileSync(HOST_BIN, ['sync', 'join', '--folder', folder, '--key', key, '--name', name], { env, encoding: 'utf8', timeout: 60_000, stdio: ['ignore', 'pipe', 'pipe'] });
}

