import { test, beforeEach, afterEach } from 'node:test';
import assert from 'node:assert/strict';
import { installFakeDom, byTestId } from '../../test-support/fake-dom.js';
import { fakeKeeps } from '../../test-support/fake-keeps.js';
import { flush } from '../../test-support/fakes.js';
import { evictedNames, evictedNotice } from './evicted.js';

let dom;
beforeEach(() => { dom = installFakeDom(); });
afterEach(() => dom.restore());

async function evictTwo() {
  const host = fakeKeeps({ sessions: [1, 2, 3, 4].map((i) => ({ id: `s${i}`, name: `Chat ${i}`, createdAt: i * 1000, pinned: i === 1 })) });
  const r = await host.storage.settings.set({ map: { maxSessions: 2 } });
  return { host, ids: r.evicted };
}

test('the notice names the chats that went and Undo brings them back', async () => {
  const { host, ids } = await evictTwo();
  assert.deepEqual(ids, ['s2', 's3'], 'the oldest unpinned ones');
  const names = await evictedNames(host.storage, ids);
  assert.deepEqual(names, ['Chat 2', 'Chat 3']);
  const restored = [];
  const el = evictedNotice({ storage: host.storage, ids, names, onRestored: (r) => restored.push(...r) });
  document.body.append(el);
  assert.equal(byTestId(el, 'evicted-text').textContent, '2 older chats moved to Recently deleted: “Chat 2”, “Chat 3”.');
  byTestId(el, 'evicted-undo').click();
  for (let i = 0; i < 6; i++) await flush();
  assert.deepEqual(host.calls.filter((c) => c.op === 'trash.restore').map((c) => c.args.id), ['s2', 's3']);
  assert.deepEqual(restored, ['s2', 's3']);
  assert.equal(byTestId(el, 'evicted-undo'), null);
  assert.equal(byTestId(el, 'evicted-text').textContent, 'Brought back 2 chats.');
  assert.equal(el.dataset.restored, 'true');
  assert.deepEqual(host.state.sessions.map((s) => s.id).sort(), ['s1', 's2', 's3', 's4']);
});

/** Click Undo on a notice for `ids` and let it settle → {el, restored (what onRestored got)}. */
async function undo(storage, ids) {
  const restored = [];
  const el = evictedNotice({ storage, ids, onRestored: (r) => restored.push(...r), explain: (e) => `explained ${e.code}` });
  document.body.append(el);
  byTestId(el, 'evicted-undo').click();
  for (let i = 0; i < 6; i++) await flush();
  return { el, restored };
}

test('Undo skips what is no longer in the trash and reports other failures', async () => {
  const { host, ids } = await evictTwo();
  await host.storage.trash.purge({ id: ids[0] });
  const done = await undo(host.storage, ids);
  assert.deepEqual(done.restored, ['s3'], 'the purged one is skipped, not a failure');
  assert.equal(byTestId(done.el, 'evicted-text').textContent, 'Brought back 1 chat.');

  const boom = Object.assign(new Error('disk'), { code: 'disk_full' });
  const failing = { trash: { restore: async () => { throw boom; } } };
  const bad = await undo(failing, ['x']);
  assert.deepEqual(bad.restored, []);
  assert.equal(byTestId(bad.el, 'evicted-undo').disabled, false, 'Undo can be tried again');
  assert.equal(bad.el.querySelector('.notice-detail').textContent, 'Could not bring back 1: explained disk_full');
  assert.equal(bad.el.dataset.restored, undefined);
  assert.deepEqual(await evictedNames({ trash: { list: async () => { throw boom; } } }, ['x']), []);
});

test('Undo of a lower cap puts the cap before it back first (undoCause), then the chats; a failing undoCause restores nothing', async () => {
  const { host, ids } = await evictTwo();
  const order = [];
  const el = evictedNotice({
    storage: host.storage,
    ids,
    undoCause: async () => { order.push('cap'); await host.storage.settings.set({ map: { maxSessions: 0 } }); },
    onRestored: (r) => order.push(...r),
  });
  document.body.append(el);
  byTestId(el, 'evicted-undo').click();
  for (let i = 0; i < 8; i++) await flush();
  assert.deepEqual(order, ['cap', 's2', 's3']);
  const calls = host.calls.map((c) => c.op);
  assert.ok(calls.lastIndexOf('settings.set') < calls.indexOf('trash.restore'), 'the cap goes back before any chat');
  assert.equal(byTestId(el, 'evicted-text').textContent, 'Brought back 2 chats.');

  const again = await evictTwo();
  const boom = Object.assign(new Error('disk'), { code: 'disk_full' });
  const bad = evictedNotice({ storage: again.host.storage, ids: again.ids, undoCause: async () => { throw boom; }, explain: (e) => `explained ${e.code}` });
  document.body.append(bad);
  byTestId(bad, 'evicted-undo').click();
  for (let i = 0; i < 8; i++) await flush();
  assert.equal(again.host.calls.filter((c) => c.op === 'trash.restore').length, 0, 'no chat restored');
  assert.equal(byTestId(bad, 'evicted-undo').disabled, false, 'Undo can be tried again');
  assert.equal(bad.querySelector('.notice-detail').textContent, 'Could not bring back 2: explained disk_full');
});
