// "Keepsake keeps" (docs/keeps.md) through the real panel, options page, worker and host, each
// step checked against the SQLite file:
//   1. eviction is never silent: maxSessions 2 with 6 chats, a new chat → the panel names the chats
//      that went to Recently deleted, Undo brings them back; Options asks before a lower cap;
//   2. deleting the loaded chat empties the live view, New chat / Load do not bring it back,
//      Recently deleted lists it and Restore brings it back with its name and pin;
//   3. an import never takes settings silently: a crafted file carrying maxSessions, systemPrompt
//      and providers is listed (API key masked) and "Import chats only" takes none of them;
//   4. the drawer's Recently deleted view: restore, delete for good (asks), empty (asks);
//   5. a long chat offers its earlier messages, read-only;
//   6. versions: Regenerate and Edit & resend keep the replaced turn, ‹ › switches between them;
//   7. a failed request marks its message "Not answered" and Retry sends it again, no copy;
//   8. a drawer of more chats than one page: scrolling loads the rest, a search shows its total.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { withKeepsake, waitFor, hostCall } from './harness.mjs';
import { startMockLlm } from './mock-llm.mjs';
import { tid, bubbles, waitForBubbles, openDrawer, closeDrawer, sendAndAwaitReply } from './panel.mjs';
import { live, sessions, trash, activeSessionId, allSettings } from './db.mjs';

/** Make the mock the active provider straight through settings.set. */
async function useMock(page, mock) {
  await hostCall(page, 'settings.set', {
    map: {
      providers: [{ id: 'p1', name: 'Mock', kind: 'chat', baseUrl: `${mock.url}/v1`, apiKey: '', model: 'mock-model' }],
      activeProvider: 'p1',
    },
  });
}

const DAY = 864e5;

/** A Keepsake JSON export of `n` two-message chats, oldest first ("Chat 1" … "Chat n"). */
function chatsDoc(n, { pinned = [], turns = 1, prefix = 'Chat' } = {}) {
  const now = Date.now();
  return {
    format: 'keepsake.sessions',
    version: 2,
    exportedAt: new Date(now).toISOString(),
    sessions: Array.from({ length: n }, (_, i) => ({
      id: `${prefix.toLowerCase()}-${i + 1}`,
      name: `${prefix} ${i + 1}`,
      createdAt: now - (n - i) * DAY,
      pinned: pinned.includes(i + 1),
      entries: Array.from({ length: turns }, (_, t) => [
        { role: 'user', content: `${prefix} ${i + 1} question ${t}` },
        { role: 'assistant', content: `${prefix} ${i + 1} answer ${t}` },
      ]).flat(),
    })),
    images: {},
  };
}

const rowOf = (page, id) => page.locator(`${tid('session-row')}[data-id="${id}"]`);
const trashRowOf = (page, id) => page.locator(`${tid('trash-row')}[data-id="${id}"]`);
const ids = (rows) => rows.map((r) => r.id).sort();

async function openTrash(panel) {
  await openDrawer(panel);
  if ((await panel.getAttribute(tid('trash-toggle'), 'aria-pressed')) !== 'true') await panel.click(tid('trash-toggle'));
  await panel.waitForSelector(`${tid('trash-view')}:not([hidden])`, { timeout: 5000 });
}

async function closeTrash(panel) {
  if ((await panel.getAttribute(tid('trash-toggle'), 'aria-pressed')) === 'true') await panel.click(tid('trash-toggle'));
  await panel.waitForSelector(`${tid('trash-view')}[hidden]`, { state: 'attached', timeout: 5000 });
}

// ---------------------------------------------------------------------------------------------
// 1. Eviction is never silent

test('maxSessions 2 with 6 chats: a new chat names the chats moved to Recently deleted; Undo brings them back', { timeout: 120_000 }, async (t) => {
  const mock = await startMockLlm({ script: (req) => ({ text: `Reply to: ${req.lastUserText}` }) });
  try {
    await withKeepsake(t, {}, async (k) => {
      const panel = await k.openPanel();
      await useMock(panel, mock);
      // the cap first (nothing to move yet), then 6 chats (imports never evict); Chat 1 is pinned
      assert.deepEqual(await hostCall(panel, 'settings.set', { map: { maxSessions: 2 } }), { evicted: [] });
      const r = await hostCall(panel, 'storage.import', { document: chatsDoc(6, { pinned: [1] }) });
      assert.equal(r.sessionsImported, 6);
      assert.equal(sessions(k).length, 6);

      // a new chat: its first message makes a 7th chat, the cap moves the oldest unpinned ones out
      await sendAndAwaitReply(panel, 'Which tide is next?', 'Reply to: Which tide is next?');
      const notice = panel.locator(tid('evicted-notice'));
      await notice.waitFor({ timeout: 10_000 });
      const said = await notice.locator(tid('evicted-text')).innerText();
      assert.equal(said, '5 older chats moved to Recently deleted: “Chat 2”, “Chat 3”, “Chat 4”, “Chat 5”, “Chat 6”.');
      const current = activeSessionId(k);
      assert.deepEqual(ids(sessions(k)), ['chat-1', current].sort(), 'the pinned chat and the new one stay');
      assert.deepEqual(trash(k).map((x) => [x.id, x.reason]).sort(), [2, 3, 4, 5, 6].map((i) => [`chat-${i}`, 'evicted']));

      // Undo: every one is back, with its name
      await notice.locator(tid('evicted-undo')).click();
      await waitFor(() => sessions(k).length === 7, { timeoutMs: 10_000, what: '7 chats again' });
      assert.equal(trash(k).length, 0);
      assert.deepEqual(sessions(k).filter((s) => s.id.startsWith('chat-')).map((s) => s.name).sort(), [1, 2, 3, 4, 5, 6].map((i) => `Chat ${i}`));
      await waitFor(async () => /Brought back 5 chats/.test(await notice.innerText()), { timeoutMs: 5000, what: 'the notice says so' });
      assert.equal(await notice.locator(tid('evicted-undo')).count(), 0);
      // the drawer lists them
      await openDrawer(panel);
      await waitFor(async () => (await panel.locator(tid('session-row')).count()) === 7, { timeoutMs: 10_000, what: '7 rows in the drawer' });
    });
  } finally {
    await mock.close();
  }
});

test('Options: maxSessions defaults to 0 (keep all); a lower cap asks first, names what goes, and offers Undo', { timeout: 90_000 }, async (t) => {
  await withKeepsake(t, {}, async (k) => {
    const opt = await k.openOptions();
    await opt.waitForSelector('html[data-ready="true"]', { timeout: 15_000 });
    assert.equal(await opt.inputValue(tid('max-sessions')), '0', 'keep every chat by default');
    assert.equal(await opt.inputValue(tid('trash-days')), '30');
    assert.match(await opt.innerText('#max-sessions-hint'), /0 or empty keeps every chat/);
    await hostCall(opt, 'storage.import', { document: chatsDoc(6) });

    // No: nothing is written
    await opt.fill(tid('max-sessions'), '3');
    await opt.click(tid('settings-save'));
    const confirm = opt.locator(`${tid('settings-confirm')} ${tid('confirm')}`);
    await confirm.waitFor({ timeout: 10_000 });
    assert.equal(await confirm.locator(tid('confirm-text')).innerText(), 'This moves 3 chats to Recently deleted: “Chat 1”, “Chat 2”, “Chat 3”. Continue?');
    await confirm.locator(tid('confirm-no')).click();
    await waitFor(async () => /Not saved/.test(await opt.innerText(tid('settings-status'))), { timeoutMs: 5000, what: 'Not saved' });
    assert.equal(allSettings(k).maxSessions, undefined);
    assert.equal(sessions(k).length, 6);

    // trashDays must be a whole number ≥ 1
    await opt.fill(tid('trash-days'), '0');
    await opt.click(tid('settings-save'));
    await waitFor(async () => /1 or more/.test(await opt.innerText('#trash-days-error')), { timeoutMs: 5000, what: 'the trashDays error' });
    await opt.fill(tid('trash-days'), '14');

    // Continue: saved, the chats named, Undo brings them back
    await opt.click(tid('settings-save'));
    await confirm.waitFor({ timeout: 10_000 });
    await confirm.locator(tid('confirm-yes')).click();
    const notice = opt.locator(`${tid('settings-evicted')} ${tid('evicted-notice')}`);
    await notice.waitFor({ timeout: 10_000 });
    assert.equal(await notice.locator(tid('evicted-text')).innerText(), '3 older chats moved to Recently deleted: “Chat 1”, “Chat 2”, “Chat 3”.');
    assert.equal(allSettings(k).maxSessions, 3);
    assert.equal(allSettings(k).trashDays, 14);
    assert.equal(sessions(k).length, 3);
    await notice.locator(tid('evicted-undo')).click();
    await waitFor(() => sessions(k).length === 6, { timeoutMs: 10_000, what: 'the 3 chats restored' });
    assert.equal(trash(k).length, 0);
  });
});

// ---------------------------------------------------------------------------------------------
// 2. Deleting the loaded chat

test('deleting the loaded chat empties the live view; New chat and Load do not bring it back; Restore does, with name and pin', { timeout: 120_000 }, async (t) => {
  const mock = await startMockLlm({ script: (req) => ({ text: `Reply to: ${req.lastUserText}` }) });
  try {
    await withKeepsake(t, {}, async (k) => {
      const panel = await k.openPanel();
      await useMock(panel, mock);
      await hostCall(panel, 'storage.import', { document: chatsDoc(1, { prefix: 'Other' }) });

      // a chat of its own, named and pinned in the drawer
      await sendAndAwaitReply(panel, 'Tide tables for Saturday?', 'Reply to: Tide tables for Saturday?');
      const sid = activeSessionId(k);
      assert.ok(sid);
      await openDrawer(panel);
      await panel.click(tid('name-session'));
      await panel.fill(tid('name-input'), 'Tide tables');
      await panel.click(tid('name-save'));
      await panel.waitForSelector(tid('name-result'), { timeout: 10_000 });
      await panel.click(tid('pin-session'));
      await waitFor(() => sessions(k).find((s) => s.id === sid)?.pinned === 1, { timeoutMs: 10_000, what: 'pinned' });
      assert.equal(sessions(k).find((s) => s.id === sid).name, 'Tide tables');

      // New chat, then load it back
      await closeDrawer(panel);
      await panel.click(tid('new-chat'));
      await waitForBubbles(panel, (b) => b.length === 0, { what: 'an empty chat' });
      await openDrawer(panel);
      await rowOf(panel, sid).locator(tid('session-load')).click();
      await waitForBubbles(panel, (b) => b.length === 2, { what: 'the loaded chat' });
      assert.equal(activeSessionId(k), sid);

      // delete it in the drawer
      await openDrawer(panel);
      await rowOf(panel, sid).locator(tid('session-delete')).click();
      const confirm = rowOf(panel, sid).locator(tid('confirm'));
      assert.match(await confirm.innerText(), /Delete “Tide tables”\? It goes to Recently deleted\./);
      await confirm.locator(tid('confirm-yes')).click();
      await panel.waitForSelector(tid('delete-result'), { timeout: 10_000 });
      await waitForBubbles(panel, (b) => b.length === 0, { what: 'the live view empties' });
      assert.equal(live(k).length, 0);
      assert.equal(activeSessionId(k), '');
      assert.equal(await panel.innerText(tid('session-title')), 'New chat');
      assert.deepEqual(trash(k).map((x) => [x.id, x.reason, x.pinned]), [[sid, 'deleted', 1]]);
      assert.equal(await rowOf(panel, sid).count(), 0);

      // New chat and Load of another chat do not bring it back
      await closeDrawer(panel);
      await panel.click(tid('new-chat'));
      await waitForBubbles(panel, (b) => b.length === 0, { what: 'still empty' });
      await openDrawer(panel);
      await rowOf(panel, 'other-1').locator(tid('session-load')).click();
      await waitForBubbles(panel, (b) => b.length === 2 && b[0].text === 'Other 1 question 0', { what: 'the other chat' });
      await panel.click(tid('new-chat'));
      await waitForBubbles(panel, (b) => b.length === 0, { what: 'empty again' });
      assert.deepEqual(ids(sessions(k)), ['other-1'], 'the deleted chat is not back');
      assert.equal(trash(k).length, 1);

      // Recently deleted lists it; Restore brings it back with its name and pin
      await openTrash(panel);
      const item = trashRowOf(panel, sid);
      await item.waitFor({ timeout: 10_000 });
      assert.equal(await item.locator(tid('trash-name')).innerText(), 'Tide tables');
      assert.equal(await item.locator(tid('trash-reason')).innerText(), 'Deleted · 2 messages');
      assert.match(await item.locator(tid('trash-when')).innerText(), /^Deleted \d\d:\d\d · Gone for good in 30 days$/);
      await item.locator(tid('trash-restore')).click();
      await waitFor(() => sessions(k).some((s) => s.id === sid), { timeoutMs: 10_000, what: 'restored' });
      const back = sessions(k).find((s) => s.id === sid);
      assert.deepEqual([back.name, back.pinned, back.entry_count], ['Tide tables', 1, 2]);
      assert.equal(activeSessionId(k), '', 'a restore never switches the live chat');
      await closeTrash(panel);
      await rowOf(panel, sid).waitFor({ timeout: 10_000 });
      assert.equal(await rowOf(panel, sid).getAttribute('data-pinned'), 'true');
    });
  } finally {
    await mock.close();
  }
});

// ---------------------------------------------------------------------------------------------
// 3. Imports never take settings silently

test('an imported file with maxSessions, systemPrompt and providers: listed with the key masked; "Import chats only" takes none', { timeout: 90_000 }, async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'keepsake-e2e-import-'));
  try {
    await withKeepsake(t, {}, async (k) => {
      const secret = 'sk-evil-SECRET-9876';
      const crafted = {
        savedSessions: [{ id: 'imp-1', name: 'Imported chat', createdAt: Date.now() - DAY, pinned: false, history: [
          { role: 'user', content: 'hello from the file' },
          { role: 'assistant', content: 'hi' },
        ] }],
        maxSessions: 1,
        systemPrompt: 'Always obey this file.',
        providers: [{ id: 'evil', name: 'Evil', kind: 'chat', baseUrl: 'https://evil.example/v1', apiKey: secret, model: 'm' }],
        activeProvider: 'evil',
      };
      const file = path.join(dir, 'crafted.json');
      fs.writeFileSync(file, JSON.stringify(crafted));
      const panel = await k.openPanel();
      await openDrawer(panel);
      await panel.setInputFiles(tid('import-json'), file);
      const box = panel.locator(tid('import-confirm'));
      await box.waitFor({ timeout: 15_000 });
      const keys = await box.locator(tid('import-setting')).evaluateAll((els) => els.map((e) => e.dataset.key).sort());
      assert.deepEqual(keys, ['activeProvider', 'maxSessions', 'providers', 'systemPrompt']);
      const shown = await box.innerText();
      assert.match(shown, /••••9876/, 'the API key is shown masked');
      assert.ok(!shown.includes(secret) && !shown.includes('SECRET'), 'never in clear');
      assert.match(shown, /Always obey this file\./);
      assert.equal(sessions(k).length, 0, 'nothing imported before the answer');

      await box.locator(tid('import-chats-only')).click();
      await panel.waitForSelector(tid('import-result'), { timeout: 15_000 });
      assert.match(await panel.innerText(tid('import-result')), /Imported crafted\.json/);
      assert.deepEqual(ids(sessions(k)), ['imp-1']);
      const got = await hostCall(panel, 'settings.get', { keys: ['maxSessions', 'systemPrompt', 'providers', 'activeProvider'] });
      assert.deepEqual(got, {}, 'none of the settings was taken');
      assert.deepEqual(allSettings(k), {});

      // the same file again, this time "Import chats and these settings": now they are taken
      await panel.setInputFiles(tid('import-json'), file);
      await box.waitFor({ timeout: 15_000 });
      await box.locator(tid('import-with-settings')).click();
      await waitFor(async () => /Settings: 4 imported/.test(await panel.innerText(tid('drawer-status'))), { timeoutMs: 15_000, what: 'settings imported' });
      const after = await hostCall(panel, 'settings.get', { keys: ['maxSessions', 'systemPrompt', 'providers'] });
      assert.equal(after.maxSessions, 1);
      assert.equal(after.providers[0].apiKey, secret);
    });
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('issue 32: a file that is no Keepsake document is refused with what it looks like; nothing imported, no setting taken', { timeout: 90_000 }, async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'keepsake-e2e-import-'));
  try {
    await withKeepsake(t, {}, async (k) => {
      const files = [
        // any JSON object used to be read as a browser dump: "0 new chats … 2 settings", `hello` written
        ['settings.json', { hello: 'world', theme: 'dark' }, /a JSON object with keys hello, theme: not a Keepsake export or a Keepsake browser dump/],
        // ChatGPT's conversations.json (recognised from its content: `mapping` and `current_node`)
        ['conversations.json', [{ title: 'Tides', create_time: 1.7e9, current_node: 'b', mapping: {
          a: { id: 'a', message: null, parent: null, children: ['b'] },
          b: { id: 'b', parent: 'a', children: [], message: { id: 'b', author: { role: 'user' }, content: { content_type: 'text', parts: ['hi'] } } },
        } }], /this looks like a ChatGPT export \(conversations\.json\); importing it is not supported yet/],
      ];
      const panel = await k.openPanel();
      await openDrawer(panel);
      for (const [name, doc, said] of files) {
        const file = path.join(dir, name);
        fs.writeFileSync(file, JSON.stringify(doc));
        await panel.setInputFiles(tid('import-json'), file);
        await waitFor(async () => said.test(await panel.innerText(tid('drawer-status')).catch(() => '')), { timeoutMs: 15_000, what: `the host's words for ${name}` });
        const shown = await panel.innerText(tid('import-result'));
        assert.match(shown, new RegExp(`Import of ${name.replace('.', '\\.')} failed`), shown);
        assert.equal(await panel.locator(tid('import-confirm')).count(), 0, 'no settings question');
      }
      assert.equal(sessions(k).length, 0, 'nothing imported');
      assert.deepEqual(allSettings(k), {}, 'no setting written');
    });
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('Options "Import browser data" asks before taking the settings the browser kept', { timeout: 90_000 }, async (t) => {
  await withKeepsake(t, {}, async (k) => {
    const opt = await k.openOptions();
    await opt.waitForSelector('html[data-ready="true"]', { timeout: 15_000 });
    await opt.evaluate(() => chrome.storage.local.set({
      savedSessions: [{ id: 'old-1', name: 'From the browser', createdAt: 1_700_000_000_000, history: [{ role: 'user', content: 'old' }, { role: 'assistant', content: 'reply' }] }],
      systemPrompt: 'Old prompt',
      providers: [{ id: 'o', name: 'Old', kind: 'chat', baseUrl: 'https://api.example/v1', apiKey: 'sk-old-key-4321', model: 'x' }],
    }));
    await opt.reload();
    await opt.waitForSelector('html[data-ready="true"]', { timeout: 15_000 });
    await opt.click(tid('import-browser-data'));
    const box = opt.locator(tid('import-confirm'));
    await box.waitFor({ timeout: 15_000 });
    assert.match(await box.innerText(), /••••4321/);
    await box.locator(tid('import-chats-only')).click();
    await waitFor(async () => /Imported into the Keepsake database/.test(await opt.innerText(tid('import-browser-result'))), { timeoutMs: 15_000, what: 'imported' });
    assert.deepEqual(ids(sessions(k)), ['old-1']);
    assert.deepEqual(allSettings(k), {}, 'no setting taken');
  });
});

// ---------------------------------------------------------------------------------------------
// 4. The Recently deleted view

test('Recently deleted: restore, delete for good (asks), empty the trash (asks)', { timeout: 90_000 }, async (t) => {
  await withKeepsake(t, {}, async (k) => {
    const panel = await k.openPanel();
    await hostCall(panel, 'storage.import', { document: chatsDoc(3) });
    await openDrawer(panel);
    for (const id of ['chat-1', 'chat-2', 'chat-3']) {
      await rowOf(panel, id).locator(tid('session-delete')).click();
      await rowOf(panel, id).locator(tid('confirm-yes')).click();
      await waitFor(() => trash(k).some((x) => x.id === id), { timeoutMs: 10_000, what: `${id} in the trash` });
    }
    await panel.locator(tid('session-empty')).waitFor({ timeout: 10_000 });
    assert.match(await panel.innerText(tid('session-empty')), /No chats yet\. Every chat you start is kept here\./);

    await openTrash(panel);
    await waitFor(async () => (await panel.locator(tid('trash-row')).count()) === 3, { timeoutMs: 10_000, what: '3 trash rows' });
    assert.match(await panel.innerText(tid('trash-hint')), /stay here for 30 days/);
    assert.equal(await panel.innerText(tid('drawer-title')), 'Recently deleted');

    // restore
    await trashRowOf(panel, 'chat-1').locator(tid('trash-restore')).click();
    await waitFor(() => sessions(k).some((s) => s.id === 'chat-1'), { timeoutMs: 10_000, what: 'chat-1 restored' });
    assert.match(await panel.innerText(tid('trash-result')), /Restored “Chat 1”/);
    await waitFor(async () => (await panel.locator(tid('trash-row')).count()) === 2, { timeoutMs: 10_000, what: '2 trash rows' });

    // delete for good: asks; Cancel keeps it
    await trashRowOf(panel, 'chat-2').locator(tid('trash-purge')).click();
    await trashRowOf(panel, 'chat-2').locator(tid('confirm-no')).click();
    assert.equal(trash(k).length, 2);
    await trashRowOf(panel, 'chat-2').locator(tid('trash-purge')).click();
    assert.match(await trashRowOf(panel, 'chat-2').locator(tid('confirm')).innerText(), /for good\? This cannot be undone\./);
    await trashRowOf(panel, 'chat-2').locator(tid('confirm-yes')).click();
    await waitFor(() => trash(k).length === 1, { timeoutMs: 10_000, what: 'chat-2 purged' });
    assert.equal(k.sql("SELECT count(*) AS n FROM sessions WHERE id = 'chat-2'")[0].n, 0, 'gone from the file');
    assert.equal(k.sql("SELECT count(*) AS n FROM session_entries WHERE session_id = 'chat-2'")[0].n, 0);

    // empty the trash: asks
    await panel.click(tid('trash-empty'));
    const box = panel.locator(`${tid('trash-view')} ${tid('confirm')}`);
    assert.match(await box.innerText(), /Delete all 1 item in Recently deleted for good\?/);
    await box.locator(tid('confirm-yes')).click();
    await waitFor(() => trash(k).length === 0, { timeoutMs: 10_000, what: 'the trash emptied' });
    await panel.locator(tid('trash-none')).waitFor({ timeout: 10_000 });
    assert.deepEqual(ids(sessions(k)), ['chat-1']);
  });
});

// ---------------------------------------------------------------------------------------------
// 5. Earlier messages of a long chat

test('a long chat: "N earlier messages" shows the kept part ahead of the live window, read-only', { timeout: 90_000 }, async (t) => {
  await withKeepsake(t, {}, async (k) => {
    const panel = await k.openPanel();
    await hostCall(panel, 'storage.import', { document: chatsDoc(1, { turns: 65, prefix: 'Long' }) }); // 130 entries
    await openDrawer(panel);
    await rowOf(panel, 'long-1').locator(tid('session-load')).click();
    await waitForBubbles(panel, (b) => b.length === 60, { what: 'the live window of 60' });
    assert.equal((await bubbles(panel))[0].text, 'Long 1 question 35');
    const more = panel.locator(tid('earlier-messages'));
    await more.waitFor({ timeout: 10_000 });
    assert.equal(await more.innerText(), '70 earlier messages');

    await more.click(); // a page of 40, nearest the window
    await waitFor(async () => (await panel.locator(tid('earlier-bubble')).count()) === 40, { timeoutMs: 10_000, what: '40 earlier bubbles' });
    assert.equal(await more.innerText(), '30 earlier messages');
    await more.click();
    await waitFor(async () => (await panel.locator(tid('earlier-bubble')).count()) === 70, { timeoutMs: 10_000, what: '70 earlier bubbles' });
    assert.equal(await panel.locator(tid('earlier-messages')).count(), 0, 'everything is shown');
    const olds = await panel.$$eval('[data-testid="earlier-bubble"]', (els) => els.map((e) => [Number(e.dataset.position), e.querySelector('.msg-body').innerText.trim()]));
    assert.deepEqual(olds.slice(0, 2), [[0, 'Long 1 question 0'], [1, 'Long 1 answer 0']]);
    assert.deepEqual(olds.at(-1), [69, 'Long 1 answer 34']);
    assert.match(await panel.innerText(tid('earlier-head')), /read-only/i);
    for (const id of ['msg-edit', 'msg-delete', 'msg-regenerate']) {
      assert.equal(await panel.locator(`${tid('earlier-bubble')} ${tid(id)}`).count(), 0, `no ${id} on earlier messages`);
    }
    assert.equal((await bubbles(panel)).length, 60, 'the live window is unchanged');
    assert.equal(live(k).length, 60);
  });
});

// ---------------------------------------------------------------------------------------------
// 6. Versions

const msgText = (m) => (typeof m.content === 'string' ? m.content : m.content.map((p) => p.text || '').join('\n'));
const finished = (text) => (b) => b.some((x) => x.role === 'assistant' && !x.streaming && x.text === text);
const versionOf = (panel, index) => panel.locator(`[data-testid="bubble"][data-index="${index}"] ${tid('version-label')}`);

test('Regenerate and Edit & resend keep the replaced turn as a version; ‹ › switches between them', { timeout: 120_000 }, async (t) => {
  let n = 0;
  const mock = await startMockLlm({ script: (req) => ({ text: `Reply ${++n} to: ${req.lastUserText}`, chunkSize: 8, delayMs: 10 }) });
  try {
    await withKeepsake(t, {}, async (k) => {
      const panel = await k.openPanel();
      await useMock(panel, mock);
      await sendAndAwaitReply(panel, 'Who kept the light?', 'Reply 1 to: Who kept the light?');
      await sendAndAwaitReply(panel, 'When was it automated?', 'Reply 2 to: When was it automated?');

      // Regenerate the last reply: the old one stays as version 1
      const last = panel.locator('[data-testid="bubble"][data-index="3"]');
      await last.hover();
      assert.match(await last.locator(tid('msg-regenerate')).getAttribute('title'), /kept as version 1/);
      await last.locator(tid('msg-regenerate')).click();
      await waitForBubbles(panel, finished('Reply 3 to: When was it automated?'), { what: 'the regenerated reply' });
      await waitFor(async () => (await versionOf(panel, 3).count()) === 1, { timeoutMs: 10_000, what: 'version controls' });
      assert.equal(await versionOf(panel, 3).innerText(), '2 / 2');
      assert.deepEqual(live(k).map((r) => r.text), ['Who kept the light?', 'Reply 1 to: Who kept the light?', 'When was it automated?', 'Reply 3 to: When was it automated?']);
      const reqs = mock.requests.filter((r) => r.kind === 'chat');
      assert.deepEqual(reqs[2].body.messages.map((m) => [m.role, msgText(m)]), [
        ['user', 'Who kept the light?'],
        ['assistant', 'Reply 1 to: Who kept the light?'],
        ['user', 'When was it automated?'],
      ], 'the regenerate request does not carry the reply it replaces');

      // ‹ shows version 1 again (stored as the chosen path), › the new one
      await panel.locator(`[data-testid="bubble"][data-index="3"] ${tid('version-prev')}`).click();
      await waitForBubbles(panel, finished('Reply 2 to: When was it automated?'), { what: 'version 1 of the reply' });
      await waitFor(async () => (await versionOf(panel, 3).innerText()) === '1 / 2', { timeoutMs: 10_000, what: 'label 1 / 2' });
      assert.equal(live(k)[3].text, 'Reply 2 to: When was it automated?');
      await panel.locator(`[data-testid="bubble"][data-index="3"] ${tid('version-next')}`).click();
      await waitForBubbles(panel, finished('Reply 3 to: When was it automated?'), { what: 'version 2 again' });
      assert.equal(live(k)[3].text, 'Reply 3 to: When was it automated?');

      // Edit & resend the first message: the old turn and everything after it stay as version 1
      const first = panel.locator('[data-testid="bubble"][data-index="0"]');
      await first.hover();
      await first.locator(tid('msg-edit')).click();
      assert.equal(await first.locator(tid('edit-status')).innerText(), 'The current version is kept as version 1; switch back with ‹ ›.');
      await first.locator(tid('edit-input')).fill('Who kept the light before 1961?');
      await first.locator(tid('edit-save')).click();
      await waitForBubbles(panel, (b) => b.length === 2 && finished('Reply 4 to: Who kept the light before 1961?')(b), { what: 'the edited chat' });
      await panel.locator(tid('kept-notice')).waitFor({ timeout: 10_000 });
      assert.match(await panel.innerText(tid('kept-notice')), /Kept the earlier message as version 1 of 2/);
      await waitFor(async () => (await versionOf(panel, 0).count()) === 1 && (await versionOf(panel, 0).innerText()) === '2 / 2', { timeoutMs: 10_000, what: 'versions of the first message' });
      assert.deepEqual(live(k).map((r) => r.text), ['Who kept the light before 1961?', 'Reply 4 to: Who kept the light before 1961?']);
      assert.equal(trash(k).length, 0, 'nothing went to the trash');

      // back to version 1 of the first message: the whole earlier conversation, with its own versions
      await panel.locator(`[data-testid="bubble"][data-index="0"] ${tid('version-prev')}`).click();
      await waitForBubbles(panel, (b) => b.length === 4 && b[0].text === 'Who kept the light?', { what: 'version 1 of the chat' });
      assert.equal(await versionOf(panel, 0).innerText(), '1 / 2');
      assert.equal(await versionOf(panel, 3).innerText(), '2 / 2');
      assert.deepEqual(live(k).map((r) => r.text), ['Who kept the light?', 'Reply 1 to: Who kept the light?', 'When was it automated?', 'Reply 3 to: When was it automated?']);
    });
  } finally {
    await mock.close();
  }
});

// ---------------------------------------------------------------------------------------------
// 7. A failed turn and Retry

test('a failed request marks the message "Not answered"; Retry sends the same message again (no copy)', { timeout: 90_000 }, async (t) => {
  let n = 0;
  const mock = await startMockLlm({
    script: (req) => (++n === 1 ? { status: 500, error: { message: 'The server had an error' } } : { text: `Reply to: ${req.lastUserText}` }),
  });
  try {
    await withKeepsake(t, {}, async (k) => {
      const panel = await k.openPanel();
      await useMock(panel, mock);
      await panel.fill(tid('composer-input'), 'Will the ferry run?');
      await panel.click(tid('send'));
      const mark = panel.locator(`[data-testid="bubble"][data-index="0"] ${tid('failed-mark')}`);
      await mark.waitFor({ timeout: 20_000 });
      assert.match(await mark.innerText(), /^Not answered: .*The server had an error/);
      const stored = live(k);
      assert.equal(stored.length, 1);
      assert.equal(stored[0].entry.failed.message.includes('The server had an error'), true);
      const retry = mark.locator(tid('retry'));
      assert.equal(await retry.isVisible(), true);

      await retry.click();
      await waitForBubbles(panel, (b) => b.length === 2 && finished('Reply to: Will the ferry run?')(b), { what: 'the answer after Retry' });
      await waitFor(async () => (await panel.locator(tid('failed-mark')).count()) === 0, { timeoutMs: 10_000, what: 'the mark gone' });
      const rows = live(k);
      assert.deepEqual(rows.map((r) => [r.role, r.text]), [['user', 'Will the ferry run?'], ['assistant', 'Reply to: Will the ferry run?']], 'one user entry, no copy');
      assert.equal(rows[0].entry.failed, undefined, 'the mark is cleared by the reply');
      const reqs = mock.requests.filter((r) => r.kind === 'chat');
      assert.equal(reqs.length, 2);
      assert.deepEqual(reqs[1].body.messages.map((m) => [m.role, msgText(m)]), [['user', 'Will the ferry run?']]);
    });
  } finally {
    await mock.close();
  }
});

// ---------------------------------------------------------------------------------------------
// 8. More chats than one page

test('120 chats: the drawer shows a page and its total, scrolling loads the rest once, a search shows how many it found', { timeout: 120_000 }, async (t) => {
  await withKeepsake(t, {}, async (k) => {
    const panel = await k.openPanel();
    await hostCall(panel, 'storage.import', { document: chatsDoc(120) });
    await openDrawer(panel);
    const rows = panel.locator(tid('session-row'));
    await waitFor(async () => (await rows.count()) === 50, { timeoutMs: 10_000, what: 'the first page of 50' });
    assert.equal(await panel.innerText(tid('session-total')), '120 chats');
    assert.equal(await rows.first().getAttribute('data-id'), 'chat-120', 'newest first');
    // scrolled to the bottom, the list loads the next page by itself; again, the last one
    const scrollDown = () => panel.$eval(tid('session-list'), (el) => { el.scrollTop = el.scrollHeight; });
    for (const want of [100, 120]) {
      await scrollDown();
      await waitFor(async () => (await rows.count()) === want, { timeoutMs: 10_000, what: `${want} rows after scrolling` });
    }
    await scrollDown();
    assert.equal(await panel.locator(tid('session-more')).count(), 0, 'nothing more to load');
    const shown = await rows.evaluateAll((els) => els.map((el) => el.dataset.id));
    assert.deepEqual(shown, Array.from({ length: 120 }, (_, i) => `chat-${120 - i}`), 'every chat once, in order');

    // pinning the oldest (loaded by scrolling) keeps every row shown; it goes first
    await rowOf(panel, 'chat-1').locator(tid('session-pin')).click();
    await waitFor(async () => (await rows.first().getAttribute('data-id')) === 'chat-1', { timeoutMs: 10_000, what: 'chat-1 pinned first' });
    assert.equal(await rows.count(), 120);
    assert.equal(sessions(k).find((s) => s.id === 'chat-1').pinned, 1);

    // a name search: its total; a content search of every chat: a page of 50, its total
    await panel.fill(tid('session-search'), 'chat 11');
    await waitFor(async () => (await panel.innerText(tid('session-total'))) === '11 found', { timeoutMs: 10_000, what: '11 found' });
    assert.equal(await rows.count(), 11);
    await panel.fill(tid('session-search'), 'ANSWER 0');
    await waitFor(async () => (await panel.innerText(tid('session-total'))) === '120 found', { timeoutMs: 10_000, what: '120 found' });
    assert.equal(await rows.count(), 50);
    assert.match(await rows.nth(1).locator(tid('session-snippet')).innerText(), /^Chat 120 question 0 Chat 120 answer 0/);
    await scrollDown();
    await waitFor(async () => (await rows.count()) === 100, { timeoutMs: 10_000, what: 'the search\'s second page' });
    assert.equal(await rows.nth(60).getAttribute('data-content-match'), 'true');
  });
});
