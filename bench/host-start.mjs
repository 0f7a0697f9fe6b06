// Scenario 9 (issue 6), the browser's share: spawn → first `host.hello` reply from an MV3 service
// worker in headless Chromium, for keepsake-host and the echo host (examples/echo_host.rs, which
// opens no database), in interleaved rounds; with `perf` (root) it also splits each start into
// Chromium's and the host's parts from kernel events on the same clock as the worker's timestamps.
//
//   cargo build --release --bin keepsake-host --example echo_host
//   node bench/host-start.mjs            # HOST_START_N=40 rounds, HOST_START_PERF=0 to skip perf
//
// KEEPSAKE_HOST_BIN and BENCH_ECHO_BIN choose other builds; HOST_START_BASELINE=<path> adds a row
// for a second keepsake-host build (an A/B of a change; give the builds distinct file names, the
// split tells them apart by command name); HOST_START_DEBUG=1 prints every round's split.
//
// The extension is a minimal one written to a temp dir (the Keepsake key, so the built-in ID and
// keepsake-host's caller check pass; a service worker with one function), the hosts are registered
// for the temp profile only, keepsake-host gets a temp database (the warm-up rounds create it, so
// every measured start finds an existing, migrated file, as in ./bench.sh). The host-side numbers
// without a browser, on a populated database too, come from `cargo test --test it host::start --
// --ignored --nocapture`.
//
// Clock: the worker stamps `performance.timeOrigin + performance.now()` (wall clock, coarsened by
// Chromium to 0.1 ms); `perf record -k CLOCK_MONOTONIC` stamps the kernel events, moved onto the
// wall clock by the offset between the two clocks that this script reads (the kernel refuses
// CLOCK_REALTIME for perf events).
// Per start: connectNative → clone() (Chromium finds and reads the manifest, checks the origin,
// prepares the launch), clone() (the fork: the browser process's page tables copied), child until
// execve (Chromium's code in the child), execve (the copied address space released, the host's
// binary loaded), exec → reply write (the host: loading, init, and for keepsake-host the database
// open; it includes waiting for the hello frame), reply write → onMessage in the worker (Chromium
// reads the pipe and passes the message on). A keepsake-host that answers hello before opening its
// database (dbOpened: false) then sends a `db` event; "spawn → open" times the worker until it.

import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawn, spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const ROOT = path.resolve(here, '..');
const require = createRequire(path.join(ROOT, 'tests', 'e2e', 'package.json'));
const { chromium } = require('playwright-core');

const N = Number(process.env.HOST_START_N || 40);
const WARMUP = 3;
const CHROMIUM = process.env.KEEPSAKE_E2E_CHROMIUM || '/usr/bin/chromium';
const KS_BIN = process.env.KEEPSAKE_HOST_BIN || path.join(ROOT, 'target', 'release', 'keepsake-host');
const ECHO_BIN = process.env.BENCH_ECHO_BIN || path.join(ROOT, 'target', 'release', 'examples', 'echo_host');
const EXT_ID = 'ejaedcjldiggibmnammkkoekohjgefkk';
const HOSTS = [
  { key: 'keepsake', name: 'dev.keepsake.start_ks', bin: KS_BIN },
  { key: 'echo', name: 'dev.keepsake.start_echo', bin: ECHO_BIN },
];
// HOST_START_BASELINE=<another keepsake-host build>: a third row, for an A/B of a change
if (process.env.HOST_START_BASELINE) HOSTS.push({ key: 'baseline', name: 'dev.keepsake.start_base', bin: process.env.HOST_START_BASELINE });

const SW = `
self.helloOnce = (name) => new Promise((resolve, reject) => {
  const stamp = () => performance.timeOrigin + performance.now();
  const t0 = stamp();
  const port = chrome.runtime.connectNative(name);
  let t1;
  let ok;
  port.onMessage.addListener((m) => {
    const t = stamp();
    if (m.event === 'db') {
      // keepsake-host answers hello before opening its database and says how that went next
      port.disconnect();
      resolve({ t0, t1, t2: t, ok: ok && m.dbError === null });
      return;
    }
    if (m.event) return;
    t1 = t;
    ok = m.ok === true;
    if (m.result?.dbOpened === false) return;
    port.disconnect();
    resolve({ t0, t1, t2: t1, ok });
  });
  port.onDisconnect.addListener(() => reject(new Error(chrome.runtime.lastError?.message || 'disconnected')));
  port.postMessage({ id: 1, op: 'host.hello', args: {} });
});
self.ready = true;
`;

function keepsakeKey() {
  const m = JSON.parse(fs.readFileSync(path.join(ROOT, 'extension', 'manifest.json'), 'utf8'));
  return m.key;
}

function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  const n = s.length;
  return n ? (n % 2 ? s[(n - 1) / 2] : (s[n / 2 - 1] + s[n / 2]) / 2) : NaN;
}

const f2 = (x) => (Number.isFinite(x) ? x.toFixed(2) : '–');

function havePerf() {
  if (process.env.HOST_START_PERF === '0') return false;
  const r = spawnSync('perf', ['record', '-q', '-k', 'CLOCK_MONOTONIC', '-e', 'sched:sched_process_exec', '-o', '/dev/null', 'true'], { stdio: 'ignore' });
  return r.status === 0;
}

/** Wall clock minus CLOCK_MONOTONIC, ms (the median of a few reads). */
function wallMinusMonotonic() {
  const d = [];
  for (let i = 0; i < 9; i++) {
    const mono = Number(process.hrtime.bigint()) / 1e6;
    d.push(performance.timeOrigin + performance.now() - mono);
  }
  return median(d);
}

/**
 * Kernel events per host process: in the browser, the `clone` that forks it and the fork's end;
 * in the child, `execve` (still Chromium's code before it) and the exec's end (the old address
 * space released, the host's binary loaded); in the host, the first stdin read and the first
 * frame written after it (the reply).
 */
function perfEvents(data, comms, offset) {
  const out = spawnSync('perf', ['script', '-i', data, '-F', 'comm,pid,tid,time,event,trace', '--ns'], { encoding: 'utf8', maxBuffer: 1 << 28 }).stdout;
  const procs = new Map(); // pid → {cloneEnter, fork, execveEnter, exec, comm, readEnter, readExit, write}
  const cloneEnter = new Map(); // tid → time of its last clone()/clone3() entry
  const get = (pid) => procs.get(pid) ?? procs.set(pid, {}).get(pid);
  for (const line of out.split('\n')) {
    const m = line.match(/^\s*(\S.*?)\s+(\d+)\/(\d+)\s+(\d+\.\d+):\s+(\S+):\s*(.*)$/);
    if (!m) continue;
    const [, comm, pid, tid, ts, ev, trace] = m;
    const t = Number(ts) * 1000 + offset; // ms, wall clock
    if (ev === 'syscalls:sys_enter_clone' || ev === 'syscalls:sys_enter_clone3') {
      cloneEnter.set(tid, t);
    } else if (ev === 'sched:sched_process_fork') {
      const child = trace.match(/child_pid=(\d+)/)?.[1];
      if (child) Object.assign(get(child), { fork: t, cloneEnter: cloneEnter.get(tid) });
    } else if (ev === 'syscalls:sys_enter_execve') {
      if (procs.has(pid)) procs.get(pid).execveEnter = t;
    } else if (ev === 'sched:sched_process_exec') {
      const p = get(pid);
      const name = path.basename(trace.match(/filename=(\S+)/)?.[1] ?? comm);
      if (comms.includes(name.slice(0, 15))) Object.assign(p, { exec: t, comm: name.slice(0, 15) });
    } else if (pid === tid && procs.has(pid) && procs.get(pid).exec) {
      const p = procs.get(pid);
      if (ev === 'syscalls:sys_enter_read' && /fd: 0x0+\b/.test(trace) && p.readEnter === undefined) p.readEnter = t;
      else if (ev === 'syscalls:sys_exit_read' && p.readEnter !== undefined && p.readExit === undefined) p.readExit = t;
      else if (ev === 'syscalls:sys_enter_write' && p.readExit !== undefined && p.write === undefined && !/fd: 0x0*[23]\b/.test(trace)) p.write = t;
    }
  }
  return [...procs.values()].filter((p) => p.exec !== undefined);
}

async function main() {
  for (const h of HOSTS) if (!fs.existsSync(h.bin)) throw new Error(`${h.bin} missing: cargo build --release --bin keepsake-host --example echo_host`);
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'keepsake-start-'));
  const ext = path.join(tmp, 'ext');
  const profile = path.join(tmp, 'profile');
  const data = path.join(tmp, 'data');
  fs.mkdirSync(ext);
  fs.mkdirSync(path.join(profile, 'NativeMessagingHosts'), { recursive: true });
  fs.mkdirSync(data);
  fs.writeFileSync(
    path.join(ext, 'manifest.json'),
    JSON.stringify({ manifest_version: 3, name: 'host start', version: '1', key: keepsakeKey(), permissions: ['nativeMessaging'], background: { service_worker: 'sw.js' } }),
  );
  fs.writeFileSync(path.join(ext, 'sw.js'), SW);
  for (const h of HOSTS) {
    const manifest = { name: h.name, description: 'host start measurement', path: h.bin, type: 'stdio', allowed_origins: [`chrome-extension://${EXT_ID}/`] };
    fs.writeFileSync(path.join(profile, 'NativeMessagingHosts', `${h.name}.json`), JSON.stringify(manifest));
  }
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: false,
    ignoreDefaultArgs: ['--disable-extensions'],
    args: ['--headless=new', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync', `--disable-extensions-except=${ext}`, `--load-extension=${ext}`],
    env: { ...process.env, KEEPSAKE_DB: path.join(data, 'keepsake.db') },
  });
  try {
    let sw = context.serviceWorkers()[0] ?? (await context.waitForEvent('serviceworker'));
    for (let i = 0; i < 100 && !(await sw.evaluate(() => self.ready === true).catch(() => false)); i++) await new Promise((r) => setTimeout(r, 50));

    const comms = HOSTS.map((h) => path.basename(h.bin).slice(0, 15));
    // the split tells the hosts apart by command name
    const perf = havePerf() && new Set(comms).size === comms.length;
    const perfData = path.join(tmp, 'perf.data');
    let rec = null;
    if (perf) {
      // the syscalls of the hosts only (a filter on the command name), so the rest of the
      // machine is not slowed down by tracing
      const only = comms.map((c) => `comm == "${c}"`).join(' || ');
      const events = ['sched:sched_process_fork', 'sched:sched_process_exec', 'syscalls:sys_enter_clone', 'syscalls:sys_enter_clone3', 'syscalls:sys_enter_execve'].flatMap((e) => ['-e', e]);
      for (const e of ['syscalls:sys_enter_read', 'syscalls:sys_exit_read', 'syscalls:sys_enter_write']) events.push('-e', e, '--filter', only);
      rec = spawn('perf', ['record', '-q', '-a', '-k', 'CLOCK_MONOTONIC', ...events, '-o', perfData], { stdio: 'ignore' });
      await new Promise((r) => setTimeout(r, 1500)); // perf attaches to every CPU
    }
    const rows = Object.fromEntries(HOSTS.map((h) => [h.key, []]));
    for (let round = 0; round < N + WARMUP; round++) {
      for (const h of HOSTS) {
        const r = await sw.evaluate((name) => self.helloOnce(name), h.name);
        if (!r.ok) throw new Error(`${h.key}: hello failed`);
        if (round >= WARMUP) rows[h.key].push(r);
        await new Promise((res) => setTimeout(res, 30)); // let the host exit before the next start
      }
    }
    if (rec) {
      rec.kill('SIGINT');
      await new Promise((r) => rec.on('exit', r));
    }

    const perfRows = perf ? perfEvents(perfData, comms, wallMinusMonotonic()) : [];
    // what the extension waits for: the hello reply, then (keepsake-host answering hello before its
    // database) the `db` event; its port counts as open only then
    console.log('\nspawn → open (hello, and the db event after it), median ms: ' + HOSTS.map((h) => `${h.key} ${f2(median(rows[h.key].map((r) => r.t2 - r.t0)))}`).join(', '));
    console.log(`\nspawn → host.hello reply from an MV3 service worker, Chromium ${spawnSync(CHROMIUM, ['--version'], { encoding: 'utf8' }).stdout.trim()}, ${N} interleaved rounds after ${WARMUP} warm-up (ms)`);
    for (const h of HOSTS) console.log(`${h.key}: ${h.bin}`);
    console.log('');
    const head = perf
      ? '| host | worker total p50 | min | max | connectNative → clone() | clone() (fork) | child until execve | execve | exec → reply write (host) | reply write → onMessage | n |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|'
      : '| host | worker total p50 | min | max | n |\n|---|---:|---:|---:|---:|';
    console.log(head);
    for (const h of HOSTS) {
      const rs = rows[h.key];
      const totals = rs.map((r) => r.t1 - r.t0);
      let extra = '';
      if (perf) {
        const comm = path.basename(h.bin).slice(0, 15);
        const parts = [[], [], [], [], [], []];
        for (const r of rs) {
          const p = perfRows.find((q) => q.comm === comm && q.exec > r.t0 && q.exec < r.t1);
          if (!p || [p.cloneEnter, p.fork, p.execveEnter, p.write].includes(undefined)) continue;
          const marks = [r.t0, p.cloneEnter, p.fork, p.execveEnter, p.exec, p.write, r.t1];
          marks.slice(1).forEach((t, i) => parts[i].push(t - marks[i]));
          if (process.env.HOST_START_DEBUG) console.log(h.key, marks.slice(1).map((t, i) => (t - marks[i]).toFixed(2)).join(' '), (r.t1 - r.t0).toFixed(2));
        }
        extra = parts.map((v) => ` ${f2(median(v))} |`).join('');
      }
      console.log(`| ${h.key} | ${f2(median(totals))} | ${f2(Math.min(...totals))} | ${f2(Math.max(...totals))} |${extra} ${rs.length} |`);
    }
    if (!perf) console.log('\n(no split: it needs perf, run as root, and host binaries with distinct file names; HOST_START_PERF=0 skips it)');
  } finally {
    await context.close();
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}

await main();
