// Copies of the database at 10,000 sessions (issue 36): "Back up now" (`backups.create`), a restore
// of that copy (`backups.restore`) and the copy made before a migration (a v(latest−1) database
// opened by the host), each timed with the host's peak RSS (VmHWM). The measuring is T27's figures
// test (tests/it/storage_file/backups.rs `t27_figures_…`), run with the release host it is given;
// this module runs it `rounds` times, reads the `T27 figures json:` line each prints and writes the
// BENCHMARKS.md section. Alone: `BENCH_ONLY=backups ./bench.sh` (printed only); part of the full run.

import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { markdownTable, range } from './report.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const MiB = 1024 * 1024;
const MARK = 'T27 figures json: ';
const COLUMNS = [
  ['what', 'At this size'],
  ['time', 'Time'],
  ['rss', 'Host peak RSS'],
];

/**
 * The figures of one run of a figures test, from its output, or null when it printed none.
 * @param {string} text the test's stderr
 * @param {string} [mark] what the figures line starts with (T27's by default)
 */
export function parseFigures(text, mark = MARK) {
  const line = String(text)
    .split('\n')
    .find((l) => l.startsWith(mark));
  if (!line) return null;
  return JSON.parse(line.slice(mark.length));
}

/**
 * Run one Rust figures test (`cargo test --test it <test> -- --nocapture`) with `env` added; its
 * output (stdout and stderr) and the figures its `mark` line holds, or null.
 * @param {{test: string, mark: string, env: object}} o
 * @returns {{status: number|null, text: string, fig: object|null}}
 */
export function runFiguresTest({ test, mark, env }) {
  const r = spawnSync('cargo', ['test', '--locked', '--test', 'it', test, '--', '--nocapture'], {
    cwd: ROOT,
    env: { ...process.env, ...env },
    encoding: 'utf8',
    maxBuffer: 64 * MiB,
  });
  const text = `${r.stderr}\n${r.stdout}`;
  return { status: r.status, text, fig: parseFigures(text, mark) };
}

/**
 * Run the figures test `rounds` times with `hostBin`; each round builds its own database.
 * @param {{hostBin: string, sessions?: number, rounds?: number, log?: (...a: any[]) => void}} o
 * @returns {object[]} one parsed figures object per round
 */
export function runBackupFigures({ hostBin, sessions = 10_000, rounds = 3, log = () => {} }) {
  const out = [];
  for (let i = 0; i < rounds; i++) {
    log(`backups: round ${i + 1} of ${rounds} (${sessions} sessions)`);
    const r = runFiguresTest({
      test: 'storage_file::backups::t27_figures',
      mark: MARK,
      env: { KEEPSAKE_HOST_BIN: hostBin, KEEPSAKE_BACKUP_SESSIONS: String(sessions) },
    });
    if (r.status !== 0 || !r.fig) throw new Error(`the backup figures test failed (exit ${r.status}):\n${r.text.slice(-4000)}`);
    out.push(r.fig);
  }
  return out;
}

const ms = [(x) => Math.round(x).toLocaleString('en-US'), 'ms'];
const mib = [(kib) => (kib / 1024).toFixed(0), 'MiB'];

/**
 * The table rows (`{what, time, rss}`) of the figures of several rounds.
 * @param {object[]} figs parsed figures
 */
export function backupRows(figs) {
  const pm = figs.map((f) => f.premigration).filter(Boolean);
  const rows = [
    { what: '"Back up now" (`backups.create`): a checked copy in the backups folder', time: range(figs.map((f) => f.backup.ms), ms), rss: range(figs.map((f) => f.backup.peakKiB), mib) },
    { what: 'Restore of that copy (`backups.restore`): a pre-restore copy, then every table in one transaction', time: range(figs.map((f) => f.restore.ms), ms), rss: range(figs.map((f) => f.restore.peakKiB), mib) },
  ];
  if (pm.length) {
    rows.push({
      what: `Pre-migration copy (v${pm[0].fromVersion} → v${pm[0].toVersion}, made by the open; the whole open ${range(pm.map((p) => p.openMs), ms)})`,
      time: range(pm.map((p) => p.copyMs), ms),
      rss: range(pm.map((p) => p.peakKiB), mib),
    });
  } else {
    rows.push({ what: 'Pre-migration copy', time: 'not measured: the latest migration changes existing tables', rss: '–' });
  }
  return rows;
}

/**
 * The BENCHMARKS.md section.
 * @param {object[]} figs parsed figures, one per round
 */
export function backupsSection(figs) {
  if (!figs?.length) return '';
  const f = figs[0];
  const size = range(
    figs.map((x) => x.dbBytes),
    [(b) => (b / MiB).toFixed(0), 'MiB'],
  );
  const host = f.release ? 'the release keepsake-host' : f.host;
  return `## Copies of the database (issue 36)

${f.sessions.toLocaleString('en-US')} saved sessions of ${f.entries} entries of about ${f.chars.toLocaleString('en-US')} characters each (English and CJK text, no
pictures; database ${size}), ${figs.length} rounds, each on a database of its own built by the test with \`keepsake-host import\`; ${host}. Time of the call (or, for the pre-migration copy, the copy's own time
from the host's log) and the host's peak RSS (VmHWM) while it ran. Measured by T27's figures test
(\`tests/it/storage_file/backups.rs\` \`t27_figures_premigration_copy_and_backup_time_and_peak_rss\`); alone:
\`BENCH_ONLY=backups ./bench.sh\`. The pre-migration copy is measured on the same database made one schema older
(what the latest migration created dropped, \`user_version\` set back).

${markdownTable(backupRows(figs), COLUMNS)}
`;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const hostBin = process.env.KEEPSAKE_HOST_BIN;
  if (!hostBin) {
    console.error('bench/backups.mjs: set KEEPSAKE_HOST_BIN to the release keepsake-host (./bench.sh does)');
    process.exit(2);
  }
  const sessions = Number(process.env.KEEPSAKE_BACKUP_SESSIONS) || 10_000;
  const figs = runBackupFigures({ hostBin, sessions, rounds: Number(process.env.BENCH_ROUNDS) || 3, log: (...a) => console.error(...a) });
  console.log(backupsSection(figs));
}
