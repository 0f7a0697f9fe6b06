import { test } from 'node:test';
import assert from 'node:assert/strict';
import { fakeKeeps } from '../test-support/fake-keeps.js';
import { saveSettings } from './settings-save.js';

const five = () => [1, 2, 3, 4, 5].map((i) => ({ id: `s${i}`, name: `Chat ${i}`, createdAt: 1000 * i }));

test('a cap that moves chats asks first, naming them, and writes nothing on No', async () => {
  const host = fakeKeeps({ sessions: five() });
  const asked = [];
  const r = await saveSettings({ storage: host.storage, map: { maxSessions: 3, trashDays: 30 }, ask: async (q, rows) => { asked.push([q, rows.map((x) => x.id)]); return false; } });
  assert.deepEqual(r, { saved: false, cancelled: true });
  assert.deepEqual(asked, [['This moves 2 chats to Recently deleted: “Chat 1”, “Chat 2”. Continue?', ['s1', 's2']]]);
  assert.deepEqual(host.ops(), ['sessions.evictionPlan'], 'no settings.set');
});

test('on Yes the cap is saved and what went is reported', async () => {
  const host = fakeKeeps({ sessions: five() });
  const r = await saveSettings({ storage: host.storage, map: { maxSessions: 4 }, ask: async () => true });
  assert.deepEqual(r, { saved: true, evicted: ['s1'] });
  assert.deepEqual(host.ops(), ['sessions.evictionPlan', 'settings.set']);
  assert.equal(host.state.trash[0].reason, 'evicted');
});

test('0 (keep all) or a cap nothing exceeds saves without asking', async () => {
  for (const maxSessions of [0, 10]) {
    const host = fakeKeeps({ sessions: five() });
    const r = await saveSettings({ storage: host.storage, map: { maxSessions }, ask: async () => assert.fail('asked') });
    assert.deepEqual(r, { saved: true, evicted: [] });
  }
});
