import test from 'node:test';
import assert from 'node:assert/strict';
import { slugify, exportFilename, safeFilename, mimeForFormat } from './export-name.js';

const date = new Date(2026, 0, 5, 12, 0, 0);

test('slug keeps ASCII alphanumerics and CJK ideographs', () => {
  assert.equal(slugify('Hello, World!'), 'Hello-World');
  assert.equal(slugify('  --日本語 テスト 中文--  '), '日本語-中文');
  assert.equal(slugify('!!!'), 'session');
  assert.equal(slugify(''), 'session');
  assert.equal(slugify('a'.repeat(50)), 'a'.repeat(40));
  assert.equal(slugify('a'.repeat(39) + ' b'), 'a'.repeat(39));
});

test('filenames per format and count', () => {
  // the date is local time, zero-padded: 5 January 2026, just after midnight here
  assert.equal(exportFilename({ name: 'a', format: 'json', date: new Date(2026, 0, 5, 0, 0, 1) }), 'keepsake-a-2026-01-05.json');
  assert.equal(exportFilename({ name: 'My chat', format: 'markdown', date }), 'keepsake-My-chat-2026-01-05.md');
  assert.equal(exportFilename({ name: 'My chat', format: 'json', date }), 'keepsake-My-chat-2026-01-05.json');
  assert.equal(exportFilename({ name: 'x', format: 'json', count: 3, date }), 'keepsake-sessions-2026-01-05.json');
});

test('safeFilename strips path characters', () => {
  assert.equal(safeFilename('../a/b.md', 'f.md'), 'a-b.md');
  assert.equal(safeFilename('', 'f.md'), 'f.md');
  assert.equal(safeFilename('keepsake-x-2026-01-05.json', 'f'), 'keepsake-x-2026-01-05.json');
  assert.match(mimeForFormat('markdown'), /^text\/markdown/);
  assert.match(mimeForFormat('json'), /^application\/json/);
});
