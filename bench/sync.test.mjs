// The sync section's arithmetic (node --test bench/sync.test.mjs): reading the figures lines the
// Rust tests print (the sync figures test, T32), bytes per byte, throughput, ranges over rounds, the
// rows and the section. No host, no timing.

import assert from 'node:assert/strict';
import test from 'node:test';

import { parseFigures } from './backups.mjs';
import { CONVERGE_MARK, FOLDER_MARK, perByte, syncRows, syncSection, throughput } from './sync.mjs';

const MiB = 1024 * 1024;
const fig = (joinMs, checkpoints = 0) => ({
  sessions: 10_000,
  entries: 10,
  chars: 1000,
  pictures: 500,
  pictureEvery: 20,
  host: 'KEEPSAKE_HOST_BIN=/x/release/keepsake-host',
  release: true,
  content: { textBytes: 100 * MiB, pictureBytes: 100 * MiB },
  db: { bytes: 400 * MiB, withSyncBytes: 800 * MiB, newDeviceBytes: 700 * MiB },
  folder: { bytes: 300 * MiB, segments: 60, segmentBytes: 200 * MiB, blobs: 500, blobBytes: 100 * MiB, checkpoints, checkpointBytes: 0 },
  seal: { initMs: 2000, ms: 8000, peakKiB: 80 * 1024 },
  joinFromCheckpoint: { checkpointBytes: 150 * MiB, writtenMs: 3000, ms: 12_000, ops: 10_000, peakKiB: 300 * 1024 },
  join: { from: checkpoints ? 'a checkpoint and the segments after it' : 'segments', ms: joinMs, ops: 10_000, peakKiB: 120 * 1024 },
});
const converge = { edits: 30, probes: 30, p50Ms: 1250, maxMs: 1690, pausedWrites: 60, catchUpMs: 44_700, acked: 120, lost: 0, syncthing: 'v1.19.2-ds1', host: 'x', release: true };

test('both figures lines are read from the tests’ output', () => {
  const text = `running 1 test\nSync figures: …\n${FOLDER_MARK}${JSON.stringify(fig(20_000))}\nT32: …\n${CONVERGE_MARK}${JSON.stringify(converge)}\n`;
  assert.deepEqual(parseFigures(text, FOLDER_MARK), fig(20_000));
  assert.deepEqual(parseFigures(text, CONVERGE_MARK), converge);
  assert.equal(parseFigures('test … FAILED\n', FOLDER_MARK), null);
});

test('bytes per byte: the folder over the database before sync, over text + pictures; the database growth', () => {
  const p = perByte(fig(20_000));
  assert.equal(p.perDb, 0.75);
  assert.equal(p.perContent, 1.5);
  assert.equal(p.dbGrowth, 2);
});

test('throughput is over the whole catch-up: operations/s and MB (10^6) of segments per second', () => {
  const t = throughput(fig(20_000));
  assert.equal(t.opsPerS, 500);
  assert.equal(t.mbPerS, (200 * MiB) / 1e6 / 20);
});

test('rows give ranges over rounds and T32’s percentiles', () => {
  const rows = syncRows([fig(20_000), fig(25_000)], converge);
  const by = (w) => rows.find((r) => r.what.startsWith(w));
  assert.equal(by('Sync folder per byte of the database').figure, '0.75 bytes');
  assert.equal(by('Sync folder per byte of content').figure, '1.50 bytes');
  assert.equal(by("The database with sync's tables").figure, '2.0 ×');
  assert.equal(by('First device').figure, '10.0 s');
  assert.equal(by('New device joins').figure, '20.0–25.0 s');
  assert.match(by('New device joins').what, /from segments$/);
  assert.equal(by('New device: host peak RSS').figure, '120 MiB');
  assert.equal(by('New device joins: caught up from a checkpoint').figure, '12.0 s');
  assert.match(by('New device joins: caught up from a checkpoint').detail, /150 MiB.*peak RSS 300 MiB/);
  assert.equal(by('Apply throughput').figure, '400–500 operations/s, 8.4–10.5 MB/s');
  assert.equal(by('Two hosts through real Syncthing').figure, 'p50 1,250 ms, max 1,690 ms');
  assert.match(by('Two hosts through real Syncthing').detail, /30 probes.*v1\.19\.2-ds1/);
  assert.equal(by('After a paused stretch').figure, '44.7 s');
  assert.match(by('After a paused stretch').detail, /120 acknowledged entries on both sides, 0 lost/);
});

test('without Syncthing the convergence row says why', () => {
  const rows = syncRows([fig(20_000)], null, 'SKIPPED (Syncthing test not run): syncthing not found');
  assert.equal(rows.at(-1).figure, 'not measured');
  assert.match(rows.at(-1).detail, /syncthing not found/);
});

test('the section names its size, where the new device starts from and how to run it alone', () => {
  const s = syncSection({ folder: [fig(20_000)], converge });
  assert.match(s, /^## Sync \(issue 31\)/);
  assert.match(s, /10,000 saved sessions of 10 entries of about 1,000 characters/);
  assert.match(s, /one\nsession in 20 with a 1280×720 screenshot, 500 pictures/);
  assert.match(s, /the release keepsake-host/);
  assert.match(s, /One round, with a folder and/);
  assert.match(syncSection({ folder: [fig(20_000), fig(21_000)], converge }), /2 rounds, each with a folder and/);
  assert.match(s, /30 edits per side/);
  assert.match(s, /this folder \(60 segments\) holds none: the new device catches up from segments\. A third device then joins from a checkpoint/);
  assert.match(s, /BENCH_ONLY=sync \.\/bench\.sh/);
  assert.match(syncSection({ folder: [fig(20_000, 1)], converge }), /held 1 checkpoint\(s\)/);
  assert.equal(syncSection({ folder: [], converge: null }), '');
  assert.equal(syncSection(null), '');
});
