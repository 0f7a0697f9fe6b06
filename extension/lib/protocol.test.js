// Convention test: protocol.js mirrors PROTOCOL.md (every operation, its read/write kind, every
// error code), and storage.js has a method for every operation.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';

import {
  OPS,
  READ_OPS,
  WRITE_OPS,
  ErrorCode,
  ClientErrorCode,
  HOST_ERROR_CODES,
  CLIENT_ERROR_CODES,
  isWriteOp,
  timeoutFor,
  codeForDisconnect,
  explainHostError,
  HostError,
  HOST_NAME,
} from './protocol.js';
import { createStorage } from './storage.js';

const PROTOCOL_MD = readFileSync(new URL('../../PROTOCOL.md', import.meta.url), 'utf8');

/** The lines of one `## N. Title` section. */
function section(md, title) {
  const lines = md.split('\n');
  const start = lines.findIndex((l) => l.startsWith('## ') && l.includes(title));
  assert.ok(start >= 0, `PROTOCOL.md has a "${title}" section`);
  const rest = lines.slice(start + 1);
  const end = rest.findIndex((l) => l.startsWith('## '));
  return end < 0 ? rest : rest.slice(0, end);
}

/** op → 'read' | 'write', from the operation tables (a "W" after the name marks a write). */
function documentedOps(md) {
  const ops = new Map();
  for (const line of section(md, 'Operations')) {
    const m = /^\|\s*`([a-z]+\.[A-Za-z]+)`\s*(W)?\s*\|/.exec(line);
    if (!m) continue;
    const kind = m[2] ? 'write' : 'read';
    if (ops.has(m[1])) assert.equal(ops.get(m[1]), kind, `${m[1]} is listed twice with different kinds`);
    ops.set(m[1], kind);
  }
  return ops;
}

function documentedErrorCodes(md) {
  const codes = [];
  for (const line of section(md, 'Error codes')) {
    const m = /^\|\s*`([a-z_]+)`\s*\|/.exec(line);
    if (m) codes.push(m[1]);
  }
  return codes;
}

test('the parser finds the documented operations and codes', () => {
  const ops = documentedOps(PROTOCOL_MD);
  assert.ok(ops.size >= 30, `found ${ops.size} operations`);
  assert.equal(ops.get('host.hello'), 'read');
  assert.equal(ops.get('history.append'), 'write');
  assert.ok(documentedErrorCodes(PROTOCOL_MD).includes('bad_request'));
});

test('every documented operation is in protocol.js with the same read/write kind', () => {
  const ops = documentedOps(PROTOCOL_MD);
  for (const [op, kind] of ops) {
    assert.ok(OPS.includes(op), `${op} (PROTOCOL.md) is missing from protocol.js`);
    assert.equal(isWriteOp(op) ? 'write' : 'read', kind, `${op} should be a ${kind}`);
  }
  for (const op of OPS) assert.ok(ops.has(op), `${op} (protocol.js) is not documented in PROTOCOL.md`);
});

test('operation lists have no duplicates and do not overlap', () => {
  assert.equal(new Set(OPS).size, OPS.length);
  for (const op of READ_OPS) assert.equal(WRITE_OPS.includes(op), false, op);
});

test('storage.js has a method for every documented operation', () => {
  const s = createStorage(async () => null);
  for (const op of documentedOps(PROTOCOL_MD).keys()) {
    const [area, name] = op.split('.');
    assert.equal(typeof s[area]?.[name], 'function', `storage.${op}`);
  }
});

test('every documented error code has a constant', () => {
  const codes = documentedErrorCodes(PROTOCOL_MD);
  assert.ok(codes.length >= 11);
  for (const code of codes) assert.ok(HOST_ERROR_CODES.includes(code), `ErrorCode is missing ${code}`);
  for (const code of HOST_ERROR_CODES) assert.ok(codes.includes(code), `${code} is not in PROTOCOL.md §5`);
  assert.equal(ErrorCode.IMAGE_REJECTED, 'image_rejected');
});

test('client codes are distinct from host codes', () => {
  for (const code of ['timeout', 'disconnected', 'host_not_found', 'host_forbidden', 'host_exited', 'host_io', 'too_large_outbound']) {
    assert.ok(CLIENT_ERROR_CODES.includes(code), code);
  }
  for (const code of CLIENT_ERROR_CODES) assert.equal(HOST_ERROR_CODES.includes(code), false, code);
  assert.equal(ClientErrorCode.TOO_LARGE_OUTBOUND, 'too_large_outbound');
});

test('timeouts: small ops 10 s, writes above the 10 s busy timeout, heavy ops 120 s', () => {
  assert.equal(HOST_NAME, 'dev.keepsake.host');
  assert.equal(timeoutFor('history.meta'), 10_000);
  assert.ok(timeoutFor('history.append') > 10_000);
  for (const op of ['request.build', 'history.attach', 'history.boundImages', 'images.thumbnail', 'storage.import', 'sessions.export']) {
    assert.equal(timeoutFor(op), 120_000, op);
  }
  for (const op of OPS) assert.ok(timeoutFor(op) > 0, op);
  // a whole-database copy (and a restore, which makes one first) may take minutes on a big database
  for (const op of ['backups.create', 'backups.restore']) assert.equal(timeoutFor(op), 600_000, op);
});

test('platform.md §7 browser messages map to codes', () => {
  assert.equal(codeForDisconnect('Specified native messaging host not found.'), 'host_not_found');
  assert.equal(codeForDisconnect('Native messaging host dev.keepsake.host is not registered.'), 'host_not_found');
  assert.equal(codeForDisconnect('Access to the specified native messaging host is forbidden.'), 'host_forbidden');
  assert.equal(codeForDisconnect('Native host has exited.'), 'host_exited');
  assert.equal(codeForDisconnect('Failed to start native messaging host.'), 'host_exited');
  assert.equal(codeForDisconnect('Error when communicating with the native messaging host.'), 'host_io');
  assert.equal(codeForDisconnect('Invalid native messaging host name specified.'), 'disconnected');
  assert.equal(codeForDisconnect(undefined), 'disconnected');
});

test('explainHostError gives a title, a detail and the fix command', () => {
  for (const code of [...HOST_ERROR_CODES, ...CLIENT_ERROR_CODES, 'something_new']) {
    const x = explainHostError({ code, message: 'm' });
    assert.equal(typeof x.title, 'string', code);
    assert.ok(x.title.length > 0, code);
    assert.equal(typeof x.detail, 'string', code);
    assert.ok(x.fix === null || typeof x.fix === 'string', code);
  }
  const nf = explainHostError(new HostError('host_not_found', 'x', { browserMessage: 'Specified native messaging host not found.' }));
  // the fix is a command and nothing else (the Copy button copies it); the rest is in `then`
  assert.equal(nf.fix, './install.sh');
  assert.match(nf.then, /reload the extension/);
  assert.match(nf.then, /--user-data-dir DIR needs keepsake-host install --user-data-dir DIR/);
  assert.match(nf.detail, /Specified native messaging host not found/);
  assert.equal(explainHostError({ code: 'host_forbidden' }).fix, 'keepsake-host install');
  for (const code of [...HOST_ERROR_CODES, ...CLIENT_ERROR_CODES]) {
    const { fix } = explainHostError({ code });
    if (fix) assert.doesNotMatch(fix, /[()]|\bthen\b|^Run /, `${code}: a command, not a sentence: ${fix}`);
  }
  // this extension's ID filled in where the browser says it
  const saved = globalThis.chrome;
  globalThis.chrome = { runtime: { id: 'ejaedcjldiggibmnammkkoekohjgefkk' } };
  try {
    assert.deepEqual(
      [explainHostError({ code: 'forbidden_origin' }).fix, explainHostError({ code: 'forbidden_origin' }).then],
      ['keepsake-host install --extension-id ejaedcjldiggibmnammkkoekohjgefkk', null],
    );
  } finally {
    globalThis.chrome = saved;
  }
  assert.equal(explainHostError({ code: 'host_exited' }).fix, 'keepsake-host doctor');
  assert.equal(explainHostError({ code: 'host_io' }).fix, 'keepsake-host doctor');
  assert.equal(explainHostError({ code: 'db_corrupt' }).fix, 'keepsake-host doctor');
  assert.equal(explainHostError({ code: 'timeout' }).fix, null);
});

test('changeAreas: a restore names every area; other events pass as they are', async () => {
  const { changeAreas } = await import('./protocol.js');
  const plain = { history: true, sessions: { ids: ['a'] } };
  assert.equal(changeAreas({ areas: plain }), plain, 'an ordinary change is not copied');
  assert.deepEqual(changeAreas({}), {});
  assert.deepEqual(changeAreas(null), {});
  assert.deepEqual(changeAreas({ areas: 'x' }), {});
  assert.deepEqual(changeAreas({ areas: { restored: 'yes' } }), { restored: 'yes' }, 'only restored: true counts');
  const r = changeAreas({ seq: 9, areas: { restored: true } });
  assert.deepEqual(r, { settings: true, history: true, binding: true, sessions: { index: true }, trash: true, restored: true });
  assert.deepEqual(changeAreas({ areas: { restored: true, sessions: { ids: ['a'] } } }).sessions, { ids: ['a'], index: true });
});

test('backups.create and backups.restore may take minutes; backups.list is a large read', () => {
  assert.equal(timeoutFor('backups.restore'), 600_000);
  assert.equal(timeoutFor('backups.create'), 600_000);
  assert.equal(timeoutFor('backups.list'), 30_000);
  assert.equal(isWriteOp('backups.restore'), true);
  assert.equal(isWriteOp('backups.list'), false);
});
