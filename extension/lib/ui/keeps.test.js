import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  forksByIndex, unplacedForks, stepVersion, versionLabel, keptAsVersionText, failedOf, failedText, lastUserIndex,
  nextEarlierPage, earlierText, trashRowText, evictedText, namesOf, nameList, evictionQuestion,
  previewSettings, previewSummary, messagesText,
} from './keeps.js';

const e = (role, entryId, extra = {}) => ({ role, content: entryId, entryId, ...extra });

test('forksByIndex: the turn is the entry after the fork entry; "" is the first entry of the session', () => {
  const entries = [e('user', 'u1'), e('assistant', 'a1'), e('user', 'u2'), e('assistant', 'a2')];
  const forks = [
    { forkEntryId: 'u2', chosen: 2, versions: 3 }, // a regenerated reply: versions of a2
    { forkEntryId: '', chosen: 1, versions: 2 }, // the first message was edited
    { forkEntryId: 'gone', chosen: 1, versions: 2 }, // a turn ahead of the window
    { forkEntryId: 'a2', chosen: 1, versions: 2 }, // after the last entry: nothing to put it on
    { forkEntryId: 'a1', chosen: 3, versions: 2 }, // malformed: chosen > versions
  ];
  const m = forksByIndex(entries, forks);
  assert.deepEqual([...m.keys()].sort(), [0, 3]);
  assert.deepEqual(m.get(3), { forkEntryId: 'u2', chosen: 2, versions: 3 });
  assert.deepEqual(m.get(0), { forkEntryId: '', chosen: 1, versions: 2 });
  // a window that does not start the session: "" is not in it, but the entry ahead of it can be named
  const w = forksByIndex(entries, [{ forkEntryId: '', chosen: 1, versions: 2 }, { forkEntryId: 'before', chosen: 2, versions: 2 }], { offset: 5, before: 'before' });
  assert.deepEqual([...w.entries()], [[0, { forkEntryId: 'before', chosen: 2, versions: 2 }]]);
  assert.deepEqual(unplacedForks(entries, [{ forkEntryId: 'before', chosen: 1, versions: 2 }], { offset: 5 }).map((f) => f.forkEntryId), ['before']);
  assert.deepEqual(forksByIndex(null, forks).size, 0);
});

test('version steps and labels', () => {
  const f = { forkEntryId: 'x', chosen: 2, versions: 3 };
  assert.equal(stepVersion(f, -1), 1);
  assert.equal(stepVersion(f, +1), 3);
  assert.equal(stepVersion({ ...f, chosen: 3 }, +1), 0);
  assert.equal(stepVersion({ ...f, chosen: 1 }, -1), 0);
  assert.deepEqual(versionLabel(f), { text: '2 / 3', label: 'Version 2 of 3' });
  assert.equal(keptAsVersionText(null), 'The current version is kept as version 1; switch back with ‹ ›.');
  assert.equal(keptAsVersionText(f), 'The current version is kept as version 2; switch back with ‹ ›.');
});

test('failed turns: the mark text and where Retry goes', () => {
  const failed = { code: 'http_500', message: 'Mock error 500', at: 1 };
  assert.deepEqual(failedOf({ role: 'user', content: 'q', failed }), failed);
  assert.equal(failedOf({ role: 'assistant', content: 'a', failed }), null);
  assert.equal(failedOf({ role: 'user', content: 'q' }), null);
  assert.equal(failedText(failed), 'Not answered: Mock error 500');
  assert.equal(failedText({ code: 'timeout', message: '' }), 'Not answered: timeout');
  const attach = (x) => x.attach === true;
  assert.equal(lastUserIndex([{ role: 'user' }, { role: 'assistant' }, { role: 'user' }, { role: 'user', attach: true }], attach), 2);
  assert.equal(lastUserIndex([], attach), -1);
});

test('earlier pages: nearest the window first, down to the start', () => {
  assert.deepEqual(nextEarlierPage(100, 0, 40), { from: 60, limit: 40 });
  assert.deepEqual(nextEarlierPage(100, 40, 40), { from: 20, limit: 40 });
  assert.deepEqual(nextEarlierPage(100, 80, 40), { from: 0, limit: 20 });
  assert.equal(nextEarlierPage(100, 100, 40), null);
  assert.equal(nextEarlierPage(0, 0), null);
  assert.equal(earlierText(1), '1 earlier message');
  assert.equal(earlierText(12), '12 earlier messages');
});

test('trash rows in words', () => {
  const now = new Date(2026, 5, 1, 12, 0).getTime();
  const row = (item) => trashRowText({ kind: 'session', name: 'S', entryCount: 1, trashedAt: now, expiresAt: now + 864e5, ...item }, now);
  assert.equal(row({ reason: 'evicted' }).reason, 'Moved out by the chat limit');
  assert.equal(row({ reason: 'cleared' }).reason, 'Removed by Clear all');
  assert.equal(row({ reason: 'undo-attach' }).reason, 'Attachment removed');
  assert.equal(row({ reason: 'regenerated' }).reason, 'Replaced by Regenerate');
  assert.equal(row({ reason: 'someday' }).reason, 'someday');
  assert.equal(row({ reason: undefined }).reason, 'Removed');
  assert.equal(row({ expiresAt: now + 29.2 * 864e5 }).expires, 'Gone for good in 30 days');
  assert.equal(row({ expiresAt: now + 3600e3 }).expires, 'Gone for good within a day');
  assert.equal(row({ expiresAt: now - 1 }).expires, 'Gone for good soon');
  const t = trashRowText({ id: 'x', kind: 'entries', name: '', reason: 'deleted', trashedAt: new Date(2026, 5, 1, 9, 5).getTime(), expiresAt: now + 10 * 864e5, entryCount: 1, from: { sessionId: 's', sessionName: 'Tides', position: 0 } }, now);
  assert.deepEqual(t, { name: '(untitled)', reason: 'Deleted', deleted: 'Deleted 09:05', expires: 'Gone for good in 10 days', count: '1 message', from: 'From “Tides”, message 1' });
  assert.equal(trashRowText({ kind: 'session', name: 'S', entryCount: 3, trashedAt: now, expiresAt: now }, now).from, '');
  assert.equal(messagesText(3), '3 messages');
});

test('eviction texts name what goes', () => {
  assert.equal(evictedText(1), '1 older chat moved to Recently deleted');
  assert.equal(evictedText(4), '4 older chats moved to Recently deleted');
  assert.deepEqual(namesOf(['b', 'x', 'a'], [{ id: 'a', name: 'A' }, { id: 'b', name: 'B' }]), ['B', 'A']);
  assert.equal(nameList(['a', 'b']), '“a”, “b”');
  assert.equal(nameList(['1', '2', '3', '4', '5', '6', '7'], 5), '“1”, “2”, “3”, “4”, “5” and 2 more');
  assert.equal(evictionQuestion([]), null);
  assert.equal(evictionQuestion([{ name: 'Old' }]), 'This moves 1 chat to Recently deleted: “Old”. Continue?');
});

test('import preview: settings with masked values and what they would change', () => {
  const rows = previewSettings({ settings: [
    { key: 'providers', value: [{ name: 'X', apiKey: '••••wxyz' }], current: 'absent' },
    { key: 'maxSessions', value: 2, current: 'different' },
    { key: 'theme', value: 'dark', current: 'same' },
    { nokey: true },
  ] });
  assert.deepEqual(rows.map((r) => [r.key, r.value, r.change]), [
    ['providers', '[{"name":"X","apiKey":"••••wxyz"}]', 'new'],
    ['maxSessions', '2', 'differs from yours (yours stays)'],
    ['theme', '"dark"', 'same as yours'],
  ]);
  const [long] = previewSettings({ settings: [{ key: 'systemPrompt', value: 'x'.repeat(300), current: 'absent' }] });
  assert.equal(long.value.length, 120);
  assert.ok(long.value.endsWith('…'));
  assert.deepEqual(previewSettings(null), []);
  assert.equal(previewSummary({ sessionsNew: 1, sessionsSkipped: 2, sessionsAlreadyHere: 2, liveEntries: 0 }), 'This file has 1 new chat, 2 already here.');
  // a skipped chat the host does not have was unreadable, not "already here"
  assert.equal(previewSummary({ sessionsNew: 0, sessionsSkipped: 3, sessionsAlreadyHere: 1, liveEntries: 0 }), 'This file has 0 new chats, 1 already here, 2 unreadable (see the warnings).');
});
