import { test } from 'node:test';
import assert from 'node:assert/strict';

import { createSiteCache } from './site-cache.js';
import { deferred, fakeChrome, flush } from '../test-support/fakes.js';

const tab = (id, url = `https://example.com/${id}`) => [id, { id, url }];
const stored = (data, url) => ({ data, url, at: 1 });

function listenerCounts(c) {
  return [c.tabs.onRemoved.size, c.tabs.onUpdated.size, c.tabs.onReplaced.size];
}

test('keys and URLs: site:<tabId> only; pages compared without the fragment; an unknown URL is no change', async () => {
  const c = fakeChrome({
    tabs: new Map([tab(12, 'https://a/1#t=3'), tab(13, 'https://a/2'), tab(14, 'https://a/anything'), tab(15, null)]),
    session: new Map([
      ['site:12', stored('same page', 'https://a/1')],
      ['site:13', stored('moved', 'https://a/1')],
      ['site:14', stored('no url', null)],
      ['site:15', stored('tab url unknown', 'https://a/3')],
      ['site:x', 'not a tab'],
      ['other', 'kept'],
    ]),
  });
  const cache = createSiteCache({ chrome: c, now: () => 7 });
  assert.equal(await cache.get(12), 'same page');
  assert.equal(await cache.get(13), null);
  assert.equal(await cache.get(14), 'no url');
  assert.equal(await cache.get(15), 'tab url unknown');
  assert.deepEqual([...c.sessionData.keys()].sort(), ['other', 'site:12', 'site:14', 'site:15', 'site:x']);
  await cache.put(12, 'd', { url: 'https://a/b?c#d' });
  assert.deepEqual(c.sessionData.get('site:12'), { data: 'd', url: 'https://a/b?c', at: 7 });
});

test('put stores one session key per tab and get returns it', async () => {
  const c = fakeChrome({ tabs: new Map([tab(1)]) });
  const cache = createSiteCache({ chrome: c, now: () => 7 });
  await cache.put(1, { title: 'T' }, { url: 'https://example.com/1#x' });
  assert.deepEqual(c.sessionData.get('site:1'), { data: { title: 'T' }, url: 'https://example.com/1', at: 7 });
  assert.deepEqual(await cache.get(1), { title: 'T' });
  assert.equal(await cache.get(2), null);
});

test('restore is lazy: nothing is read until the first lookup, and only once', async () => {
  const c = fakeChrome({
    tabs: new Map([tab(1)]),
    session: new Map([['site:1', stored({ v: 1 }, 'https://example.com/1')]]),
  });
  const cache = createSiteCache({ chrome: c });
  assert.equal(c.calls.sessionGet, 0);
  assert.deepEqual(listenerCounts(c), [0, 0, 0], 'no listeners at wake');
  assert.deepEqual(await cache.get(1), { v: 1 });
  assert.equal(c.calls.sessionGet, 1);
  await cache.get(1);
  await cache.get(3);
  assert.equal(c.calls.sessionGet, 1, 'restored once');
});

test('concurrent first lookups share one restore', async () => {
  const c = fakeChrome({ tabs: new Map([tab(1)]), session: new Map([['site:1', stored('a', null)]]) });
  const cache = createSiteCache({ chrome: c });
  const [a, b] = await Promise.all([cache.get(1), cache.get(1)]);
  assert.equal(a, 'a');
  assert.equal(b, 'a');
  assert.equal(c.calls.sessionGet, 1);
});

test('restore prunes keys of closed tabs and of tabs that left the page', async () => {
  const c = fakeChrome({
    tabs: new Map([tab(1), tab(3, 'https://example.com/elsewhere')]),
    session: new Map([
      ['site:1', stored('alive', 'https://example.com/1')],
      ['site:2', stored('closed', 'https://example.com/2')],
      ['site:3', stored('navigated', 'https://example.com/3')],
      ['unrelated', 'kept'],
    ]),
  });
  const cache = createSiteCache({ chrome: c });
  assert.equal(await cache.get(2), null);
  assert.deepEqual([...c.sessionData.keys()].sort(), ['site:1', 'unrelated']);
  assert.equal(await cache.get(1), 'alive');
  assert.equal(await cache.get(3), null);
  assert.equal(cache.size, 1);
});

test('a tab closed during an in-flight restore is pruned', async () => {
  const c = fakeChrome({
    tabs: new Map([tab(1), tab(2)]),
    session: new Map([
      ['site:1', stored('one', 'https://example.com/1')],
      ['site:2', stored('two', 'https://example.com/2')],
    ]),
  });
  const slow = deferred();
  c.tabGetOverride.set(1, () => slow.promise);
  const cache = createSiteCache({ chrome: c });
  const lookup = cache.get(1);
  await flush();
  assert.deepEqual(c.calls.tabsGet.sort(), [1, 2], 'liveness is being checked');
  assert.equal(c.tabs.onRemoved.size, 1, 'the removal listener is in place during the restore');
  // tabs.get(1) answered "alive" just before the tab closed
  c.liveTabs.delete(1);
  c.tabs.onRemoved.fire(1, { windowId: 1, isWindowClosing: false });
  slow.resolve({ id: 1, url: 'https://example.com/1' });
  assert.equal(await lookup, null);
  await flush();
  assert.equal(c.sessionData.has('site:1'), false);
  assert.equal(await cache.get(2), 'two');
  assert.equal(c.sessionData.has('site:2'), true);
});

test('a tab navigated away during an in-flight restore is pruned', async () => {
  const c = fakeChrome({ tabs: new Map([tab(1)]), session: new Map([['site:1', stored('one', 'https://example.com/1')]]) });
  const slow = deferred();
  c.tabGetOverride.set(1, () => slow.promise);
  const cache = createSiteCache({ chrome: c });
  const lookup = cache.get(1);
  await flush();
  c.tabs.onUpdated.fire(1, { url: 'https://example.com/other' }, {});
  slow.resolve({ id: 1, url: 'https://example.com/1' });
  assert.equal(await lookup, null);
  assert.equal(c.sessionData.has('site:1'), false);
});

test('listeners exist only while there is something to clean up', async () => {
  const c = fakeChrome({ tabs: new Map([tab(1), tab(2)]) });
  const cache = createSiteCache({ chrome: c });
  await cache.get(1);
  assert.deepEqual(listenerCounts(c), [0, 0, 0], 'empty restore registers nothing');
  assert.equal(cache.listening, false);

  await cache.put(1, 'a', { url: 'https://example.com/1' });
  await cache.put(2, 'b', { url: 'https://example.com/2' });
  assert.deepEqual(listenerCounts(c), [1, 1, 1], 'registered once');

  c.tabs.onRemoved.fire(1, {});
  await flush();
  assert.equal(await cache.get(1), null);
  assert.equal(c.sessionData.has('site:1'), false);
  assert.deepEqual(listenerCounts(c), [1, 1, 1], 'tab 2 still needs them');

  await cache.drop(2);
  assert.deepEqual(listenerCounts(c), [0, 0, 0], 'removed when the cache is empty');
  assert.equal(cache.listening, false);
});

test('a restore of stale keys only leaves no listeners behind', async () => {
  const c = fakeChrome({ tabs: new Map(), session: new Map([['site:9', stored('x', null)]]) });
  const cache = createSiteCache({ chrome: c });
  assert.equal(await cache.get(9), null);
  assert.deepEqual(listenerCounts(c), [0, 0, 0]);
  assert.equal(c.sessionData.size, 0);
});

test('navigation drops the tab data; same-page updates keep it', async () => {
  const c = fakeChrome({ tabs: new Map([tab(1)]) });
  const cache = createSiteCache({ chrome: c });
  await cache.put(1, 'page data', { url: 'https://example.com/1' });
  c.tabs.onUpdated.fire(1, { status: 'loading' }, {});
  c.tabs.onUpdated.fire(1, { url: 'https://example.com/1#section' }, {});
  await flush();
  assert.equal(await cache.get(1), 'page data');
  c.tabs.onUpdated.fire(1, { url: 'https://example.com/next' }, {});
  await flush();
  assert.equal(await cache.get(1), null);
  assert.equal(c.sessionData.has('site:1'), false);
  assert.deepEqual(listenerCounts(c), [0, 0, 0]);
});

test('a replaced tab (prerender swap) drops the old id', async () => {
  const c = fakeChrome({ tabs: new Map([tab(1)]) });
  const cache = createSiteCache({ chrome: c });
  await cache.put(1, 'x', { url: 'https://example.com/1' });
  c.tabs.onReplaced.fire(5, 1);
  await flush();
  assert.equal(await cache.get(1), null);
});

test('a put after a worker wake restores the other tabs first', async () => {
  const c = fakeChrome({
    tabs: new Map([tab(1), tab(2)]),
    session: new Map([['site:1', stored('old one', 'https://example.com/1')]]),
  });
  const cache = createSiteCache({ chrome: c });
  await cache.put(2, 'new two', { url: 'https://example.com/2' });
  assert.equal(await cache.get(1), 'old one');
  assert.equal(await cache.get(2), 'new two');
  assert.equal(cache.listening, true);
});

test('a failed restore is retried on the next lookup', async () => {
  const c = fakeChrome({ tabs: new Map([tab(1)]), session: new Map([['site:1', stored('v', null)]]) });
  const realGet = c.storage.session.get;
  let fail = true;
  c.storage.session.get = async (k) => {
    if (fail) throw new Error('storage unavailable');
    return realGet(k);
  };
  const warn = console.warn;
  console.warn = () => {};
  const cache = createSiteCache({ chrome: c });
  try {
    assert.equal(await cache.get(1), null);
  } finally {
    console.warn = warn;
  }
  fail = false;
  assert.equal(await cache.get(1), 'v');
});
