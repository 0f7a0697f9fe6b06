// What the benchmark reads from /proc (Linux): disk writes of a process, its peak RSS, the CPU
// time of one thread, and the extension's renderer process (where the service worker runs).

import fs from 'node:fs';
import { spawnSync } from 'node:child_process';

const TICKS_PER_SECOND = 100; // USER_HZ on Linux

/**
 * `write_bytes` (what the process sent to the storage layer) and `wchar` (bytes passed to write
 * calls, pipes included) from /proc/<pid>/io.
 * @param {number} pid
 * @returns {{writeBytes: number, wchar: number}}
 */
export function readIo(pid) {
  const text = fs.readFileSync(`/proc/${pid}/io`, 'utf8');
  const field = (name) => Number(new RegExp(`^${name}: (\\d+)$`, 'm').exec(text)[1]);
  return { writeBytes: field('write_bytes'), wchar: field('wchar') };
}

/**
 * Peak resident set size (VmHWM) of a process, in bytes.
 * @param {number} pid
 * @returns {number}
 */
export function peakRss(pid) {
  const m = /^VmHWM:\s+(\d+) kB$/m.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
  return Number(m[1]) * 1024;
}

/**
 * CPU time of one thread in nanoseconds (/proc/<pid>/task/<tid>/schedstat: time on a CPU).
 * @param {number} pid
 * @param {number} tid
 * @returns {number}
 */
export function threadCpuNs(pid, tid) {
  return Number(fs.readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ')[0]);
}

/**
 * CPU time of a whole process (every thread, user + system) in nanoseconds, 10 ms resolution.
 * @param {number} pid
 * @returns {number}
 */
export function processCpuNs(pid) {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return ((Number(fields[11]) + Number(fields[12])) * 1e9) / TICKS_PER_SECOND;
}

/**
 * The thread of `pid` whose name starts with `prefix` (e.g. "ServiceWorker"), or null.
 * @param {number} pid
 * @param {string} prefix
 * @returns {number|null}
 */
export function findThread(pid, prefix) {
  for (const tid of fs.readdirSync(`/proc/${pid}/task`)) {
    let comm = '';
    try {
      comm = fs.readFileSync(`/proc/${pid}/task/${tid}/comm`, 'utf8').trim();
    } catch {
      continue; // the thread ended
    }
    if (comm.startsWith(prefix)) return Number(tid);
  }
  return null;
}

/**
 * Renderer processes of the browser `browserPid` that host extensions (`--extension-process`).
 * @param {number} browserPid
 * @returns {number[]}
 */
export function extensionRenderers(browserPid) {
  const ps = spawnSync('ps', ['-eo', 'pid=,ppid=,args='], { encoding: 'utf8' }).stdout;
  const procs = ps
    .split('\n')
    .map((l) => /^\s*(\d+)\s+(\d+)\s+(.*)$/.exec(l))
    .filter(Boolean)
    .map(([, pid, ppid, args]) => ({ pid: Number(pid), ppid: Number(ppid), args }));
  const parent = new Map(procs.map((p) => [p.pid, p.ppid]));
  const under = (pid) => {
    for (let p = pid, n = 0; p > 1 && n < 32; p = parent.get(p), n++) if (p === browserPid) return true;
    return false;
  };
  return procs
    .filter((p) => p.args.includes('--type=renderer') && p.args.includes('--extension-process') && under(p.pid))
    .map((p) => p.pid);
}

/**
 * The service worker thread of the extension: `{pid, tid}` of the renderer thread named
 * "ServiceWorker…" (Chromium names the thread that runs a service worker's JavaScript so).
 * @param {number} browserPid
 * @returns {{pid: number, tid: number}}
 */
export function serviceWorkerThread(browserPid) {
  for (const pid of extensionRenderers(browserPid)) {
    const tid = findThread(pid, 'ServiceWorker');
    if (tid) return { pid, tid };
  }
  throw new Error('no extension renderer with a ServiceWorker thread');
}
