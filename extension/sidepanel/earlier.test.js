import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createEarlier } from './earlier.js';
import { flush } from '../test-support/fakes.js';

/** A session body of `n` entries (entryId `e<position>`) behind a fake sessions.get. */
function fakeSessions(n, id = 's1') {
  const bodies = new Map([[id, Array.from({ length: n }, (_, i) => ({ role: i % 2 ? 'assistant' : 'user', content: `m${i}`, entryId: `e${i}` }))]]);
  const calls = [];
  return {
    calls,
    bodies,
    storage: {
      sessions: {
        async get(args) {
          calls.push(args);
          const body = bodies.get(args.id) || [];
          const from = args.from ?? 0;
          const end = args.limit === undefined ? body.length : from + args.limit;
          return { id: args.id, entries: body.slice(from, end), from, length: body.length, forks: [] };
        },
      },
    },
  };
}

test('pages of 40 nearest the window first, read with image references', async () => {
  const host = fakeSessions(160);
  const shown = [];
  const earlier = createEarlier({ storage: host.storage, show: (v) => shown.push(v) });
  await earlier.sync({ sessionId: 's1', offset: 100 });
  assert.deepEqual(shown.at(-1), { entries: [], from: 100, remaining: 100, loading: false });
  await earlier.loadMore();
  assert.deepEqual(host.calls, [{ id: 's1', from: 60, limit: 40, images: 'ref' }]);
  assert.equal(shown.at(-1).remaining, 60);
  assert.equal(shown.at(-1).from, 60);
  assert.deepEqual(shown.at(-1).entries.map((x) => x.content).slice(0, 2), ['m60', 'm61']);
  assert.equal(earlier.beforeId(), 'e99', 'the entry just ahead of the window');
  await earlier.loadMore();
  await earlier.loadMore();
  assert.deepEqual(host.calls.map((c) => [c.from, c.limit]), [[60, 40], [20, 40], [0, 20]]);
  assert.equal(shown.at(-1).remaining, 0);
  assert.equal(shown.at(-1).entries.length, 100);
  await earlier.loadMore();
  assert.equal(host.calls.length, 3, 'nothing left to read');
});

test('the window moving forward reads the entries in between; moving back drops what is no longer ahead', async () => {
  const host = fakeSessions(160);
  const shown = [];
  const earlier = createEarlier({ storage: host.storage, show: (v) => shown.push(v) });
  await earlier.sync({ sessionId: 's1', offset: 100 });
  await earlier.loadMore();
  await earlier.sync({ sessionId: 's1', offset: 102 }); // a send trimmed two entries off the window
  assert.deepEqual(host.calls.at(-1), { id: 's1', from: 100, limit: 2, images: 'ref' });
  assert.equal(shown.at(-1).entries.length, 42);
  assert.equal(shown.at(-1).from, 60);
  assert.equal(earlier.beforeId(), 'e101');
  await earlier.sync({ sessionId: 's1', offset: 90 }); // a version switch moved the window back
  assert.equal(shown.at(-1).entries.length, 30);
  assert.equal(earlier.beforeId(), 'e89');
  await earlier.sync({ sessionId: 's2', offset: 5 }); // another chat
  assert.deepEqual(shown.at(-1), { entries: [], from: 5, remaining: 5, loading: false });
  await earlier.sync({ sessionId: '', offset: 0 }); // New chat
  assert.deepEqual(shown.at(-1), { entries: [], from: 0, remaining: 0, loading: false });
});

test('nothing read yet: a forward move reads nothing; fetchBefore reads the one entry ahead of the window', async () => {
  const host = fakeSessions(70);
  const earlier = createEarlier({ storage: host.storage, show: () => {} });
  await earlier.sync({ sessionId: 's1', offset: 8 });
  await earlier.sync({ sessionId: 's1', offset: 10 });
  assert.equal(host.calls.length, 0);
  assert.equal(earlier.beforeId(), '');
  assert.equal(await earlier.fetchBefore(), 'e9');
  assert.deepEqual(host.calls, [{ id: 's1', from: 9, limit: 1, images: 'ref' }]);
  assert.equal(earlier.beforeId(), 'e9');
  await earlier.sync({ sessionId: 's1', offset: 11 });
  assert.equal(earlier.beforeId(), '', 'a stale id is not used');
});

test('a page that answers after the chat changed is dropped', async () => {
  const host = fakeSessions(100);
  let release;
  const slow = new Promise((r) => { release = r; });
  const get = host.storage.sessions.get;
  host.storage.sessions.get = async (a) => { await slow; return get(a); };
  const shown = [];
  const earlier = createEarlier({ storage: host.storage, show: (v) => shown.push(v) });
  await earlier.sync({ sessionId: 's1', offset: 50 });
  const loading = earlier.loadMore();
  await flush();
  assert.equal(shown.at(-1).loading, true);
  await earlier.sync({ sessionId: 's2', offset: 3 });
  release();
  await loading;
  assert.deepEqual(shown.at(-1), { entries: [], from: 3, remaining: 3, loading: false });
  assert.equal(earlier.state.sessionId, 's2');
});

test('forget (a restore): the same chat at the same offset starts over and reads the restored entries', async () => {
  const host = fakeSessions(100);
  const shown = [];
  const earlier = createEarlier({ storage: host.storage, show: (v) => shown.push(v) });
  await earlier.sync({ sessionId: 's1', offset: 60 });
  await earlier.loadMore();
  assert.equal(shown.at(-1).entries[0].content, 'm20');
  // another database is put in place: the same session id holds other entries
  host.bodies.set('s1', Array.from({ length: 100 }, (_, i) => ({ role: 'user', content: `restored ${i}`, entryId: `r${i}` })));
  await earlier.sync({ sessionId: 's1', offset: 60 });
  assert.equal(shown.at(-1).entries[0].content, 'm20', 'without forget the old entries stay (same chat, same offset)');
  earlier.forget();
  assert.deepEqual(shown.at(-1).entries, [], 'nothing of the old database is shown');
  assert.equal(earlier.beforeId(), '');
  await earlier.sync({ sessionId: 's1', offset: 60 });
  assert.deepEqual(shown.at(-1), { entries: [], from: 60, remaining: 60, loading: false });
  await earlier.loadMore();
  assert.equal(shown.at(-1).entries[0].content, 'restored 20');
  assert.equal(earlier.beforeId(), 'r59');
});
