// Import throughput: the JSON export of scenario 8 (1,000 sessions × 100K chars of mixed
// English/Chinese, bench/inputs.mjs `writeSessionsExport`, seed 31) imported with the release
// `keepsake-host import` into a fresh database, `IMPORT_RUNS` times (default 3): MB/s of export
// JSON per run (wall clock), the median, and each run's CPU time and peak RSS (from
// /usr/bin/time -v when installed; on a shared machine the CPU figure is the steadier one).
//
//   node bench/import.mjs            (or BENCH_ONLY=import ./bench.sh) prints the figures only
//   IMPORT_SESSIONS=100 node bench/import.mjs   a smaller document (for profiling)

import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execFileSync, spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

import { writeSessionsExport } from './inputs.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const host = process.env.KEEPSAKE_E2E_HOST_BIN || path.join(root, 'target', 'release', 'keepsake-host');
const runs = Number(process.env.IMPORT_RUNS || 3);
const count = Number(process.env.IMPORT_SESSIONS || 1000);
const chars = Number(process.env.IMPORT_CHARS || 100_000);
const MB = 1e6;

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'keepsake-bench-import-'));
try {
  const doc = path.join(dir, 'sessions.json');
  writeSessionsExport(doc, { seed: 31, count, chars });
  const bytes = fs.statSync(doc).size;
  console.log(`import: ${count} sessions × ${chars / 1000}K chars, ${(bytes / 2 ** 20).toFixed(1)} MiB of export JSON; ${host}`);
  const timeV = fs.existsSync('/usr/bin/time');
  const rates = [];
  const cpuRates = [];
  for (let r = 0; r < runs; r++) {
    const db = path.join(dir, `run-${r}.db`);
    execFileSync('sync');
    const argv = ['--db', db, 'import', doc];
    const t0 = process.hrtime.bigint();
    const p = timeV
      ? spawnSync('/usr/bin/time', ['-v', host, ...argv], { encoding: 'utf8' })
      : spawnSync(host, argv, { encoding: 'utf8' });
    const s = Number(process.hrtime.bigint() - t0) / 1e9;
    if (p.status !== 0) throw new Error(`import failed (${p.status}): ${p.stderr}`);
    const rss = /Maximum resident set size \(kbytes\): (\d+)/.exec(p.stderr || '');
    const user = /User time \(seconds\): ([\d.]+)/.exec(p.stderr || '');
    const sys = /System time \(seconds\): ([\d.]+)/.exec(p.stderr || '');
    const cpu = user && sys ? Number(user[1]) + Number(sys[1]) : null;
    const rate = bytes / MB / s;
    rates.push(rate);
    if (cpu) cpuRates.push(bytes / MB / cpu);
    console.log(
      `run ${r + 1}: ${s.toFixed(2)} s, ${rate.toFixed(1)} MB/s` +
        (cpu ? ` (CPU ${cpu.toFixed(2)} s: ${(bytes / MB / cpu).toFixed(1)} MB/s of CPU time)` : '') +
        (rss ? `, peak RSS ${(Number(rss[1]) / 1024).toFixed(0)} MiB` : '') +
        `, database ${(fs.statSync(db).size / 2 ** 20).toFixed(0)} MiB`,
    );
    fs.rmSync(db, { force: true });
    for (const x of ['-wal', '-shm']) fs.rmSync(db + x, { force: true });
  }
  const median = (xs) => xs.sort((a, b) => a - b)[Math.floor(xs.length / 2)].toFixed(1);
  console.log(
    `median: ${median(rates)} MB/s of export JSON (${runs} runs)` +
      (cpuRates.length ? `; per CPU second: ${median(cpuRates)} MB/s` : ''),
  );
} finally {
  fs.rmSync(dir, { recursive: true, force: true });
}
