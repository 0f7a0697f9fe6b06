import { useLocale } from './i18n.js';
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { createStorage } from './storage.js';
import { OPS, READ_OPS, WRITE_OPS, HostError } from './protocol.js';

/** A recording `call` transport; `script` decides each answer. */
function recorder(script = () => ({})) {
  const calls = [];
  const call = async (op, args, opts) => {
    calls.push({ op, args, opts });
    return script(op, args, calls.length);
  };
  return { call, calls };
}

function methodOf(s, op) {
  const [area, name] = op.split('.');
  return s[area]?.[name];
}

test('one method per operation, named after it, calling that op', async () => {
  const { call, calls } = recorder((op) => `result of ${op}`);
  const s = createStorage(call, { newId: () => 'id' });
  for (const op of OPS) {
    const m = methodOf(s, op);
    assert.equal(typeof m, 'function', `${op} has a method`);
    assert.equal(await m({}), `result of ${op}`);
    assert.equal(calls.at(-1).op, op);
  }
  assert.equal(calls.length, OPS.length);
  assert.equal(typeof s.history.append, 'function');
  assert.equal(typeof s.host.hello, 'function');
  assert.equal(typeof s.storage.import, 'function');
  assert.equal(typeof s.request.build, 'function');
});

test('writes get a clientRequestId, reads never do', async () => {
  const { call, calls } = recorder();
  let n = 0;
  const s = createStorage(call, { newId: () => `crid-${++n}` });
  for (const op of READ_OPS) await methodOf(s, op)();
  for (const c of calls) assert.equal(Object.hasOwn(c.args, 'clientRequestId'), false, c.op);
  calls.length = 0;
  for (const op of WRITE_OPS) await methodOf(s, op)({ a: 1 });
  for (const c of calls) {
    assert.match(c.args.clientRequestId, /^crid-\d+$/, c.op);
    assert.equal(c.args.a, 1);
  }
  assert.equal(new Set(calls.map((c) => c.args.clientRequestId)).size, WRITE_OPS.length, 'a new id per write');
});

test('a given clientRequestId is kept, and the caller args are not mutated', async () => {
  const { call, calls } = recorder();
  const s = createStorage(call, { newId: () => 'generated' });
  const args = { entry: { role: 'user', content: 'hi' } };
  await s.history.append(args);
  assert.equal(Object.hasOwn(args, 'clientRequestId'), false);
  assert.equal(calls[0].args.clientRequestId, 'generated');
  await s.history.append({ ...args, clientRequestId: 'mine' });
  assert.equal(calls[1].args.clientRequestId, 'mine');
});

test('the default id generator is crypto.randomUUID', async () => {
  const { call, calls } = recorder();
  const s = createStorage(call);
  await s.settings.set({ map: { a: 1 } });
  assert.match(calls[0].args.clientRequestId, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
});

for (const code of ['timeout', 'disconnected', 'host_exited', 'host_io']) {
  test(`a write failing with ${code} is retried once with the same id`, async () => {
    const { call, calls } = recorder((op, args, n) => {
      if (n === 1) throw new HostError(code, 'first attempt lost');
      return { length: 3, index: 2 };
    });
    const s = createStorage(call, { newId: () => 'same-id' });
    assert.deepEqual(await s.history.append({ entry: { role: 'user', content: 'x' } }, { timeoutMs: 5 }), { length: 3, index: 2 });
    assert.equal(calls.length, 2);
    assert.equal(calls[0].args.clientRequestId, 'same-id');
    assert.equal(calls[1].args.clientRequestId, 'same-id');
    assert.deepEqual(calls[1].args, calls[0].args);
    assert.deepEqual(calls[1].opts, { timeoutMs: 5 });
  });
}

test('only one retry: a second failure is thrown', async () => {
  const { call, calls } = recorder(() => {
    throw new HostError('host_exited', 'gone');
  });
  const s = createStorage(call, { newId: () => 'id' });
  await assert.rejects(s.sessions.save({}), (e) => e.code === 'host_exited');
  assert.equal(calls.length, 2);
});

for (const code of ['bad_request', 'busy', 'conflict', 'too_large_outbound', 'host_not_found', 'internal']) {
  test(`a write failing with ${code} is not retried`, async () => {
    const { call, calls } = recorder(() => {
      throw new HostError(code, 'no');
    });
    const s = createStorage(call, { newId: () => 'id' });
    await assert.rejects(s.history.clear(), (e) => e.code === code);
    assert.equal(calls.length, 1);
  });
}

test('reads are never retried', async () => {
  const { call, calls } = recorder(() => {
    throw new HostError('timeout', 'slow');
  });
  const s = createStorage(call);
  await assert.rejects(s.history.get({}), (e) => e.code === 'timeout');
  assert.equal(calls.length, 1);
});

test('a write that throws something without a code is not retried', async () => {
  const { call, calls } = recorder(() => {
    throw undefined; // eslint-disable-line no-throw-literal
  });
  const s = createStorage(call, { newId: () => 'id' });
  await assert.rejects(s.history.clear(), (e) => e === undefined);
  assert.equal(calls.length, 1);
});

test('a write with no args, null args or an empty clientRequestId gets a new id', async () => {
  const { call, calls } = recorder();
  const s = createStorage(call, { newId: () => 'x' });
  await s.history.clear();
  await s.history.clear(null);
  await s.history.clear({ clientRequestId: '' });
  assert.deepEqual(calls.map((c) => c.args), [{ clientRequestId: 'x' }, { clientRequestId: 'x' }, { clientRequestId: 'x' }]);
});

test('writes that may create an auto-named chat carry a fallbackName: the date in the UI language', async () => {
  const seen = [];
  const call = async (op, args) => { seen.push({ op, args }); return {}; };
  const when = Date.UTC(2026, 11, 6, 15, 4);
  useLocale('pt_BR');
  try {
    const s = createStorage(call, { newId: () => 'id-1', now: () => when });
    await s.history.append({ entry: { role: 'user', content: 'x' } });
    await s.sessions.save({ fallbackName: 'Mine' });
    await s.settings.set({ map: { a: 1 } });
    assert.match(seen[0].args.fallbackName, /6 de dez\.? de 2026/);
    assert.equal(seen[1].args.fallbackName, 'Mine', "the caller's name wins");
    assert.equal('fallbackName' in seen[2].args, false, 'only ops that take one');
  } finally {
    useLocale('en');
  }
});

test('listAllSessions follows the cursor to the last page and keeps the query', async () => {
  const { listAllSessions, LIST_PAGE_MAX } = await import('./storage.js');
  const pages = { '': { rows: [{ id: 'a' }, { id: 'b' }], total: 3, cursor: 'k1.next' }, 'k1.next': { rows: [{ id: 'c' }], total: 3, cursor: null } };
  const { call, calls } = recorder((op, args) => pages[args.cursor ?? '']);
  const s = createStorage(call, { newId: () => 'id' });
  assert.deepEqual((await listAllSessions(s, { query: 'x' })).map((r) => r.id), ['a', 'b', 'c']);
  assert.deepEqual(calls.map((c) => c.args), [{ query: 'x', limit: LIST_PAGE_MAX }, { query: 'x', limit: LIST_PAGE_MAX, cursor: 'k1.next' }]);
  // one empty page: no rows, one call
  const empty = recorder(() => ({ rows: [], total: 0, cursor: null }));
  assert.deepEqual(await listAllSessions(createStorage(empty.call), {}), []);
  assert.equal(empty.calls.length, 1);
});
