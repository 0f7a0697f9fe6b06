// The copies section's arithmetic (node --test bench/backups.test.mjs): reading the figures line the
// Rust test prints, ranges over rounds, the rows. No host, no timing.

import assert from 'node:assert/strict';
import test from 'node:test';

import { backupRows, backupsSection, parseFigures } from './backups.mjs';

const fig = (backupMs, premigration = { fromVersion: 5, toVersion: 6, copyMs: 1000, openMs: 1010, peakKiB: 13 * 1024 }) => ({
  sessions: 10_000,
  entries: 10,
  chars: 1000,
  dbBytes: 400 * 1024 * 1024,
  host: 'KEEPSAKE_HOST_BIN=/x/release/keepsake-host',
  release: true,
  backup: { ms: backupMs, peakKiB: 43 * 1024 },
  restore: { ms: 4250, peakKiB: 50 * 1024 },
  premigration,
});

test('parseFigures reads the one figures line among the test output, or says there is none', () => {
  const text = `running 1 test\nT27 figures: 10000 sessions …\nT27 figures json: ${JSON.stringify(fig(1068))}\ntest … ok\n`;
  assert.deepEqual(parseFigures(text), fig(1068));
  assert.equal(parseFigures('running 1 test\ntest … FAILED\n'), null);
});

test('rows give the range over the rounds, one value when they agree', () => {
  const rows = backupRows([fig(1068), fig(1164), fig(1046)]);
  assert.equal(rows.length, 3);
  assert.equal(rows[0].time, '1,046–1,164 ms');
  assert.equal(rows[0].rss, '43 MiB');
  assert.equal(rows[1].time, '4,250 ms');
  assert.match(rows[2].what, /v5 → v6.*1,010 ms/);
  assert.equal(rows[2].time, '1,000 ms');
});

test('a run whose pre-migration copy could not be measured says so', () => {
  const rows = backupRows([fig(900, null)]);
  assert.match(rows[2].time, /not measured/);
});

test('the section names its size, rounds and how to run it alone', () => {
  const s = backupsSection([fig(1068), fig(1164)]);
  assert.match(s, /^## Copies of the database/);
  assert.match(s, /10,000 saved sessions of 10 entries of about 1,000 characters/);
  assert.match(s, /the release keepsake-host/);
  assert.match(s, /2 rounds/);
  assert.match(s, /BENCH_ONLY=backups \.\/bench\.sh/);
  assert.equal(backupsSection([]), '');
});
