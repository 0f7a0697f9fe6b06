// node --test extension/background/agent-sessions.test.js
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { AGENT_SESSIONS_KEY, createAgentSessions } from './agent-sessions.js';

/** A settings store with the host's contract: get({keys}) → stored keys only; set({map}). */
function fakeStorage(initial = {}) {
  const data = { ...initial };
  const writes = [];
  return {
    data,
    writes,
    settings: {
      async get({ keys }) {
        return Object.fromEntries(keys.filter((k) => k in data).map((k) => [k, structuredClone(data[k])]));
      },
      async set({ map }) {
        writes.push(structuredClone(map));
        Object.assign(data, structuredClone(map));
        return {};
      },
    },
  };
}

test('a chat keeps its agent session per server; other chats and servers do not see it', async () => {
  const storage = fakeStorage();
  const s = createAgentSessions({ storage, now: () => 1000 });
  assert.equal(await s.lookup('chat-1', 'http://127.0.0.1:4096'), null);
  await s.remember('chat-1', 'http://127.0.0.1:4096', 'ses_a');
  await s.remember('chat-2', 'http://127.0.0.1:4096', 'ses_b');
  assert.deepEqual(storage.data[AGENT_SESSIONS_KEY], {
    'chat-1': { baseUrl: 'http://127.0.0.1:4096', agentSessionId: 'ses_a', at: 1000 },
    'chat-2': { baseUrl: 'http://127.0.0.1:4096', agentSessionId: 'ses_b', at: 1000 },
  });
  assert.equal(await s.lookup('chat-1', 'http://127.0.0.1:4096/'), 'ses_a', 'trailing slashes aside');
  assert.equal(await s.lookup('chat-1', 'http://10.0.0.5:4096'), null, 'another server');
  assert.equal(await s.lookup('chat-3', 'http://127.0.0.1:4096'), null);
  assert.equal(await s.lookup('', 'http://127.0.0.1:4096'), null, 'a chat not stored yet has none');
  await s.remember('chat-1', 'http://127.0.0.1:4096', 'ses_c');
  assert.equal(await s.lookup('chat-1', 'http://127.0.0.1:4096'), 'ses_c', 'a replaced session');
  await s.remember('', 'http://127.0.0.1:4096', 'ses_x');
  assert.equal(storage.writes.length, 3, 'nothing written without a chat id');
});

test('a stored value of the wrong shape reads as no session', async () => {
  const s = createAgentSessions({ storage: fakeStorage({ [AGENT_SESSIONS_KEY]: { 'chat-1': 'ses_a', 'chat-2': { baseUrl: 'http://x', agentSessionId: 7 } } }) });
  assert.equal(await s.lookup('chat-1', 'http://x'), null);
  assert.equal(await s.lookup('chat-2', 'http://x'), null);
  const s2 = createAgentSessions({ storage: fakeStorage({ [AGENT_SESSIONS_KEY]: [1, 2] }) });
  assert.equal(await s2.lookup('chat-1', 'http://x'), null);
});
