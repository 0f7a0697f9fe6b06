// Sync (issue 31, docs/sync.md) with the release host and real files: what the sync folder holds
// per byte of the database and per byte of content, the first device sealing a database of
// 10,000 sessions, a new device joining that folder (seconds until caught up, its peak RSS, its
// apply throughput in operations/s and MB/s of segments), and two hosts converging through two real
// Syncthing instances on loopback. The measuring is done by two Rust tests, run with the release
// host: the sync figures test (tests/it/sync/figures.rs) and T32 (tests/it/sync/converge.rs); this
// module runs them, reads the `Sync figures json:` and `T32 figures json:` lines they print and
// writes the BENCHMARKS.md section. Alone: `BENCH_ONLY=sync ./bench.sh` (printed only); part of the
// full run.

import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { runFiguresTest } from './backups.mjs';
import { markdownTable, range } from './report.mjs';

const MiB = 1024 * 1024;
export const FOLDER_MARK = 'Sync figures json: ';
export const CONVERGE_MARK = 'T32 figures json: ';
const SKIPPED = 'SKIPPED (Syncthing test not run)';
const COLUMNS = [
  ['what', 'What'],
  ['figure', 'Figure'],
  ['detail', 'Of what'],
];

/**
 * Run the sync figures test `rounds` times (each with a folder and databases of its own), then T32
 * once with `edits` edits per side.
 * @param {{hostBin: string, sessions?: number, rounds?: number, edits?: number, log?: (...a: any[]) => void}} o
 * @returns {{folder: object[], converge: object|null, convergeSkipped?: string}}
 */
export function runSyncFigures({ hostBin, sessions = 10_000, rounds = 1, edits = 30, log = () => {} }) {
  const folder = [];
  for (let i = 0; i < rounds; i++) {
    log(`sync: round ${i + 1} of ${rounds} (${sessions} sessions, a new device joining)`);
    const r = runFiguresTest({
      test: 'sync::figures::t36_sync_figures',
      mark: FOLDER_MARK,
      env: { KEEPSAKE_HOST_BIN: hostBin, KEEPSAKE_SYNC_SESSIONS: String(sessions) },
    });
    if (r.status !== 0 || !r.fig) throw new Error(`the sync figures test failed (exit ${r.status}):\n${r.text.slice(-4000)}`);
    folder.push(r.fig);
  }
  log(`sync: two hosts through real Syncthing (${edits} edits per side)`);
  const c = runFiguresTest({
    test: 'sync::converge::t32',
    mark: CONVERGE_MARK,
    env: { KEEPSAKE_HOST_BIN: hostBin, KEEPSAKE_SYNC_EDITS: String(edits) },
  });
  if (c.status !== 0) throw new Error(`T32 failed (exit ${c.status}):\n${c.text.slice(-4000)}`);
  if (!c.fig) {
    const why = c.text.split('\n').find((l) => l.includes(SKIPPED));
    return { folder, converge: null, convergeSkipped: why ? why.trim() : 'T32 printed no figures' };
  }
  return { folder, converge: c.fig };
}

const ratio = [(x) => x.toFixed(2), 'bytes'];
const times = [(x) => x.toFixed(1), '×'];
const sec = [(ms) => (ms / 1000).toFixed(1), 's'];
const mib = [(b) => (b / MiB).toFixed(0), 'MiB'];
const kib = [(k) => (k / 1024).toFixed(0), 'MiB'];
const opsS = [(x) => Math.round(x).toLocaleString('en-US'), 'operations/s'];
const mbS = [(x) => x.toFixed(1), 'MB/s'];
const ms = [(x) => Math.round(x).toLocaleString('en-US'), 'ms'];

/** Folder bytes per database byte and per content byte (text typed or replied + pictures attached). */
export function perByte(f) {
  const content = f.content.textBytes + f.content.pictureBytes;
  return { perDb: f.folder.bytes / f.db.bytes, perContent: f.folder.bytes / content, dbGrowth: f.db.withSyncBytes / f.db.bytes };
}

/** The new device's apply throughput over its whole catch-up (from its start). */
export function throughput(f) {
  const s = f.join.ms / 1000;
  return { opsPerS: f.join.ops / s, mbPerS: f.folder.segmentBytes / 1e6 / s };
}

/**
 * The table rows (`{what, figure, detail}`) of the rounds' figures and T32's.
 * @param {object[]} figs the sync figures, one per round
 * @param {object|null} converge T32 figures
 * @param {string} [skipped] why T32 gave none
 */
export function syncRows(figs, converge, skipped = '') {
  const f = figs[0];
  const pb = figs.map(perByte);
  const tp = figs.map(throughput);
  const rows = [
    {
      what: 'Sync folder per byte of the database',
      figure: range(pb.map((p) => p.perDb), ratio),
      detail: `folder ${range(figs.map((x) => x.folder.bytes), mib)}: ${f.folder.segments} segments ${range(figs.map((x) => x.folder.segmentBytes), mib)}, ${f.folder.blobs} pictures ${range(figs.map((x) => x.folder.blobBytes), mib)}, ${f.folder.checkpoints} checkpoints; database ${range(figs.map((x) => x.db.bytes), mib)} before sync was set up`,
    },
    {
      what: 'Sync folder per byte of content',
      figure: range(pb.map((p) => p.perContent), ratio),
      detail: `text typed or replied ${range(figs.map((x) => x.content.textBytes), mib)} + pictures attached ${range(figs.map((x) => x.content.pictureBytes), mib)}`,
    },
    {
      what: "The database with sync's tables",
      figure: range(pb.map((p) => p.dbGrowth), times),
      detail: `${range(figs.map((x) => x.db.withSyncBytes), mib)}: the replicated state keeps every entry's body beside the chats' own rows`,
    },
    {
      what: `First device: \`sync init\` on ${f.sessions.toLocaleString('en-US')} sessions, then its host seals them`,
      figure: range(figs.map((x) => x.seal.initMs + x.seal.ms), sec),
      detail: `\`sync init\` (records every chat) ${range(figs.map((x) => x.seal.initMs), sec)}, sealing ${range(figs.map((x) => x.seal.ms), sec)}; host peak RSS ${range(figs.map((x) => x.seal.peakKiB), kib)}`,
    },
    {
      what: `New device joins: caught up from ${f.join.from}`,
      figure: range(figs.map((x) => x.join.ms), sec),
      detail: `from the host's start until every segment is applied (${f.folder.segments} segments, ${f.sessions.toLocaleString('en-US')} chats in its drawer; the host reports a device's progress when a look ends, so this is one figure)`,
    },
    ...(figs.every((x) => x.joinFromCheckpoint)
      ? [
          {
            what: 'New device joins: caught up from a checkpoint',
            figure: range(figs.map((x) => x.joinFromCheckpoint.ms), sec),
            detail: `a checkpoint of the whole state (${range(figs.map((x) => x.joinFromCheckpoint.checkpointBytes), mib)}; made here by the first device's writer repairing a segment damaged on purpose, the same checkpoint it writes every 1,000 segments), from the host's start; peak RSS ${range(figs.map((x) => x.joinFromCheckpoint.peakKiB), kib)}`,
          },
        ]
      : []),
    {
      what: 'New device: host peak RSS while catching up from segments',
      figure: range(figs.map((x) => x.join.peakKiB), kib),
      detail: 'VmHWM of the joining host',
    },
    {
      what: 'Apply throughput on the new device',
      figure: `${range(tp.map((t) => t.opsPerS), opsS)}, ${range(tp.map((t) => t.mbPerS), mbS)}`,
      detail: `${range(figs.map((x) => x.join.ops), [(x) => x.toLocaleString('en-US'), 'operations'])} (one per chat, holding its ${f.entries} entries), segment bytes, over the whole catch-up; reading, opening, storing the pictures and applying`,
    },
  ];
  if (converge) {
    rows.push(
      {
        what: 'Two hosts through real Syncthing: write → the other side finds it',
        figure: `p50 ${range([converge.p50Ms], ms)}, max ${range([converge.maxMs], ms)}`,
        detail: `${converge.probes} probes, one write at a time, timed until the other host's search finds it (Syncthing ${converge.syncthing}, its 1 s watch delay included)`,
      },
      {
        what: 'After a paused stretch: both sides have everything',
        figure: range([converge.catchUpMs], sec),
        detail: `after Syncthing resumes (${converge.pausedWrites} writes while paused; ${converge.acked} acknowledged entries on both sides, ${converge.lost} lost; mostly Syncthing reconnecting)`,
      },
    );
  } else {
    rows.push({ what: 'Two hosts through real Syncthing', figure: 'not measured', detail: skipped || 'no figures' });
  }
  return rows;
}

/**
 * The BENCHMARKS.md section.
 * @param {{folder: object[], converge: object|null, convergeSkipped?: string}|null} r
 */
export function syncSection(r) {
  if (!r?.folder?.length) return '';
  const figs = r.folder;
  const f = figs[0];
  const host = f.release ? 'the release keepsake-host' : f.host;
  return `## Sync (issue 31)

A device holding ${f.sessions.toLocaleString('en-US')} saved sessions of ${f.entries} entries of about ${f.chars.toLocaleString('en-US')} characters each (English and CJK text; one
session in ${f.pictureEvery} with a 1280×720 screenshot, ${f.pictures} pictures) runs \`keepsake-host sync init\` and its host seals every chat
into the sync folder; a second device runs \`sync join\` on that folder and its host catches up. ${figs.length === 1 ? 'One round, with' : `${figs.length} rounds, each with`} a folder and
databases of its own built by the test (\`keepsake-host import\`); ${host}; real files on the local disk. Measured by the sync
figures test (\`tests/it/sync/figures.rs\`) and, through two real Syncthing instances on loopback, by T32
(\`tests/it/sync/converge.rs\`${r.converge ? `, ${r.converge.edits} edits per side` : ''}); alone: \`BENCH_ONLY=sync ./bench.sh\` (\`KEEPSAKE_SYNC_SESSIONS\`,
\`KEEPSAKE_SYNC_EDITS\`, \`BENCH_ROUNDS\`). ${f.folder.checkpoints ? `The folder held ${f.folder.checkpoints} checkpoint(s): the new device applied the newest, then the segments after it.` : `A device writes a checkpoint only after 1,000 segments of its own, so this folder (${f.folder.segments} segments) holds none: the new device catches up from segments.${f.joinFromCheckpoint ? ' A third device then joins from a checkpoint of the same state.' : ''}`}

${markdownTable(syncRows(figs, r.converge, r.convergeSkipped), COLUMNS)}
`;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const hostBin = process.env.KEEPSAKE_HOST_BIN;
  if (!hostBin) {
    console.error('bench/sync.mjs: set KEEPSAKE_HOST_BIN to the release keepsake-host (./bench.sh does)');
    process.exit(2);
  }
  const r = runSyncFigures({
    hostBin,
    sessions: Number(process.env.KEEPSAKE_SYNC_SESSIONS) || 10_000,
    rounds: Number(process.env.BENCH_ROUNDS) || 1,
    edits: Number(process.env.KEEPSAKE_SYNC_EDITS) || 30,
    log: (...a) => console.error(...a),
  });
  console.log(syncSection(r));
}
