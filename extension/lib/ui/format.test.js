import test from 'node:test';
import assert from 'node:assert/strict';
import { useLocale } from '../i18n.js';
import { grouped, formatChars, shortUrl, describeImportResult, progressText, formatWhen, dbSizeText, sizeText } from './format.js';

test('grouped numbers', () => {
  assert.equal(grouped(0), '0');
  assert.equal(grouped(1234567), '1,234,567');
  assert.equal(grouped(-1000), '-1,000');
  assert.equal(formatChars(1), '1 char');
  assert.equal(formatChars(12000), '12,000 chars');
});

test('shortUrl', () => {
  assert.equal(shortUrl('https://example.com/'), 'example.com');
  assert.equal(shortUrl('https://example.com/a/b?q=1'), 'example.com/a/b');
  assert.equal(shortUrl('not a url'), 'not a url');
});

test('formatWhen', () => {
  const now = new Date(2026, 1, 3, 15, 0).getTime();
  assert.equal(formatWhen(new Date(2026, 1, 3, 9, 5).getTime(), now), '09:05');
  assert.equal(formatWhen(new Date(2025, 11, 31, 23, 59).getTime(), now), 'Dec 31, 2025, 23:59');
});

test('dates, counts and words follow the UI language', () => {
  const now = new Date(2026, 1, 3, 15, 0).getTime();
  try {
    useLocale('zh_CN');
    assert.equal(formatWhen(new Date(2025, 11, 31, 23, 59).getTime(), now), '2025年12月31日 23:59');
    assert.equal(formatChars(12000), '12,000 个字符');
    useLocale('pt_BR');
    assert.equal(formatWhen(new Date(2025, 11, 31, 23, 59).getTime(), now), '31 de dez. de 2025, 23:59');
    assert.equal(formatChars(12000), '12.000 caracteres');
    assert.equal(describeImportResult({ sessionsImported: 1200, sessionsSkipped: 0, settingsImported: 0, settingsSkipped: 0, imagesStored: 0 })[0], 'Conversas: 1.200 importadas, 0 ignoradas.');
  } finally {
    useLocale('en');
  }
});

test('import results', () => {
  const r = { sessionsImported: 2, sessionsSkipped: 1, sessionsAlreadyHere: 1, settingsImported: 3, settingsSkipped: 0, live: 'archived', imagesStored: 4, overCap: 0, warnings: ['bad item'] };
  const lines = describeImportResult(r);
  assert.equal(lines[0], 'Chats: 2 imported, 1 skipped (1 already here).');
  // "0 imported, 3 skipped" says why
  assert.equal(describeImportResult({ ...r, sessionsImported: 0, sessionsSkipped: 3, sessionsAlreadyHere: 3 })[0], 'Chats: 0 imported, 3 skipped (3 already here).');
  assert.equal(describeImportResult({ ...r, sessionsImported: 0, sessionsSkipped: 3, sessionsAlreadyHere: 1 })[0], 'Chats: 0 imported, 3 skipped (1 already here, 2 unreadable: see the warnings).');
  assert.equal(lines[1], 'Settings: 3 imported, 0 skipped.');
  assert.match(lines[2], /kept as a chat of its own/);
  assert.equal(lines[3], 'Images stored: 4.');
  assert.equal(lines[4], 'Warning: bad item');
  assert.deepEqual(describeImportResult(null), ['The host returned no result.']);
});

test('import results: no settings taken; over the limit means the next new chat moves old ones to Recently deleted', () => {
  const lines = describeImportResult({ sessionsImported: 6, sessionsSkipped: 0, settingsImported: 0, settingsSkipped: 0, live: 'absent', imagesStored: 0, overCap: 4, warnings: [] });
  assert.equal(lines[1], 'Settings: none taken.');
  const over = lines.find((l) => /limit/.test(l));
  assert.equal(over, 'You now have 4 more chats than your limit (Options): your next new chat moves the oldest unpinned ones to Recently deleted.');
  assert.ok(lines.every((l) => !/evict|next save/i.test(l)), 'no "the next save evicts" wording');
});

test('progress text', () => {
  assert.equal(progressText({ stage: 'summary', done: 1, total: 3 }), 'Condensing the attached page (1/3)…');
  assert.equal(progressText({ stage: 'bounding' }), 'Shrinking older images…');
  assert.equal(progressText({ stage: 'rescue', note: 'x' }), 'Context too long — retrying with large attachments omitted — x');
});

test('the Host panel size line names the -wal file for what it is, not a "log"', () => {
  const st = { sizes: { database: 4096, wal: 2 * 1024 * 1024 }, counts: { images: 3 }, imageBytes: 300 * 1024 };
  const line = dbSizeText(st);
  assert.match(line, /^2\.0 MiB \(database 4 KiB, writes not yet merged 2\.0 MiB in keepsake\.db-wal, merged in when the host closes; 3 images, 300 KiB\)$/);
  assert.doesNotMatch(line, /\blog\b/);
  assert.equal(sizeText(1536 * 1024), '1.5 MiB');
});
