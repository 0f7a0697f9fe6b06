// Issue 36 through the real extension, the real keepsake-host and its real clock knob
// (KEEPSAKE_CLOCK_OFFSET_MS, read once when the host starts), each step checked against the SQLite
// file and the copies in the backups folder:
//   (a) chats made "two days ago"; a browser started "yesterday" lets the host make yesterday's daily
//       copy of them (a host makes the day's copy 2 s after it opens the database, so the chats must be
//       there before "yesterday's" browser starts); today more chats (one of them deleted, so Recently deleted holds it). Options →
//       Backups: a folder the host refuses is said by its field; Restore on yesterday's copy, with its
//       one confirmation: the open panels show
//       yesterday's chats and not today's (drawer list, transcript, title, Recently deleted), and the
//       database holds exactly them; "Undo restore" brings today's back, in the panels and the file;
//       then `keepsake-host restore ID --yes` from a terminal, with the browser open: the panels follow,
//       and the next message goes with yesterday's model, not today's the worker held (today's chats
//       use another model of the mock).
//   (b) removing and re-adding the extension (a fresh browser profile on the same database) and, in
//       one profile, clearing the extension's and the sites' stored data (CDP
//       Storage.clearDataForOrigin, cookies, cache, chrome.storage) leave every chat in place and
//       listed.
// With the extension before issue 36 (KEEPSAKE_E2E_EXT_DIR=/work/base/extension) (a) fails once it
// reaches Options → Backups: there is no such section. With only the worker's settings memory of before (it forgot
// its settings on `areas.settings` alone), the last message went with today's model.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { withKeepsake, waitFor, hostCall, sqlFile, EXT_ID, HOST_BIN } from './harness.mjs';
import { startMockLlm } from './mock-llm.mjs';
import { tid, bubbles, waitForBubbles, openDrawer, closeDrawer, sendAndAwaitReply } from './panel.mjs';
import { sessions, trash, activeSessionId, setting } from './db.mjs';

const DAY = 864e5;
const reply = (text) => `Noted: ${text}`;

/** Make the mock the active provider straight through settings.set. */
async function useMock(page, mock) {
  await hostCall(page, 'settings.set', {
    map: {
      providers: [{ id: 'p1', name: 'Mock', kind: 'chat', baseUrl: `${mock.url}/v1`, apiKey: '', model: 'mock-model' }],
      activeProvider: 'p1',
    },
  });
}

/** One chat per text, each started with New chat and answered by the mock; → the texts. */
async function makeChats(panel, texts) {
  for (const text of texts) {
    await panel.click(tid('new-chat'));
    await waitForBubbles(panel, (b) => b.length === 0, { what: 'an empty chat' });
    await sendAndAwaitReply(panel, text, reply(text));
  }
  return texts;
}

/** The chats' first messages, from the SQLite file (not in the trash), sorted. */
function chatTexts(dbPath) {
  return sqlFile(dbPath, `SELECT t.text FROM session_text t JOIN sessions s ON s.id = t.session_id
                         WHERE s.trashed_at IS NULL AND t.position = 0 ORDER BY t.text`).map((r) => r.text);
}

/** The drawer's rows (their session ids), once `pred(ids)` holds. */
async function drawerIds(panel, pred, what) {
  return waitFor(async () => {
    const ids = await panel.$$eval('[data-testid="session-row"]', (els) => els.map((el) => el.dataset.id));
    return pred(ids) ? ids : null;
  }, { timeoutMs: 20_000, what });
}

/** The daily copies backups.list reports. */
async function dailyCopies(page) {
  const r = await hostCall(page, 'backups.list', {});
  return (r?.copies || []).filter((c) => c.kind === 'daily' || c.kind === 'weekly');
}

const copyFile = (dataDir, id) => path.join(dataDir, 'backups', `${id}.db`);

test('(a) yesterday\'s daily copy restored from Options shows yesterday\'s chats in the panel; Undo restore brings today\'s back', { timeout: 300_000 }, async (t) => {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'keepsake-e2e-backups-'));
  const mock = await startMockLlm({ script: (req) => ({ text: reply(req.lastUserText) }) });
  const yesterdays = ['Yesterday: the tide tables for Saltmarsh Point', 'Yesterday: lamp oil order'];
  const todays = ['Today: storm warning log', 'Today: keeper rota', 'Today: a chat deleted today'];
  try {
    // 1. two days ago: the chats that will be yesterday's
    await withKeepsake(t, { dataDir, name: 'backups-a-1', env: { KEEPSAKE_CLOCK_OFFSET_MS: String(-2 * DAY) } }, async (k) => {
      const panel = await k.openPanel();
      await panel.locator('html[data-ready="true"]').waitFor({ timeout: 15_000 });
      await useMock(panel, mock);
      await makeChats(panel, yesterdays);
      assert.deepEqual(chatTexts(k.dbPath), [...yesterdays].sort());
    });

    // 2. yesterday: a browser started then lets its host make yesterday's daily copy, holding them
    let yesterday;
    await withKeepsake(t, { dataDir, name: 'backups-a-2', env: { KEEPSAKE_CLOCK_OFFSET_MS: String(-DAY) } }, async (k) => {
      const page = await k.openBridgePage();
      yesterday = await waitFor(async () => {
        const day = new Date(Date.now() - DAY).toDateString();
        return (await dailyCopies(page)).find((c) => new Date(c.createdAt).toDateString() === day && c.sessions === 2);
      }, { timeoutMs: 60_000, intervalMs: 500, what: 'yesterday\'s daily copy with its 2 chats (backups.list)' });
      t.diagnostic(`yesterday's copy: ${yesterday.id} (${yesterday.bytes} bytes, schema ${yesterday.schemaVersion})`);
    });
    const yFile = copyFile(dataDir, yesterday.id);
    assert.ok(fs.existsSync(yFile), `the copy is a file in the backups folder: ${yFile}`);
    assert.equal(fs.statSync(yFile).mode & 0o777, 0o600, 'the copy is private');
    assert.deepEqual(chatTexts(yFile), [...yesterdays].sort(), 'the copy holds yesterday\'s chats');
    assert.equal(sqlFile(yFile, 'PRAGMA integrity_check')[0].integrity_check, 'ok');

    // 3. today
    await withKeepsake(t, { dataDir, name: 'backups-a-3' }, async (k) => {
      const panel = await k.openPanel();
      await panel.locator('html[data-ready="true"]').waitFor({ timeout: 15_000 });
      // today's chats are answered by another model of the mock (a setting of today's database)
      await hostCall(panel, 'settings.set', { map: { activeModel: 'mock-model-2' } });
      await makeChats(panel, todays);
      assert.equal(mock.requests.at(-1).body.model, 'mock-model-2');
      const deleted = sessions(k).find((s) => s.name.startsWith('Today: a chat deleted'));
      assert.ok(deleted, 'the chat to delete');
      // it goes to Recently deleted; the live chat is then another of today's
      await openDrawer(panel);
      const rotaId = sessions(k).find((s) => s.name.startsWith('Today: keeper rota')).id;
      await panel.locator(`${tid('session-row')}[data-id="${rotaId}"] ${tid('session-load')}`).click();
      await waitForBubbles(panel, (b) => b.length === 2 && b[0].text === todays[1], { what: 'the rota chat loaded' });
      await hostCall(panel, 'sessions.delete', { id: deleted.id });
      await waitFor(() => trash(k).length === 1, { timeoutMs: 10_000, what: 'the deleted chat in the trash' });
      const today = { texts: chatTexts(k.dbPath), ids: sessions(k).map((s) => s.id).sort(), live: activeSessionId(k) };
      assert.deepEqual(today.texts, [...yesterdays, todays[0], todays[1]].sort());
      assert.equal(today.live, rotaId);

      // a second panel shows Recently deleted
      const trashPanel = await k.openPanel();
      await trashPanel.locator('html[data-ready="true"]').waitFor({ timeout: 15_000 });
      await openDrawer(trashPanel);
      await trashPanel.click(tid('trash-toggle'));
      await trashPanel.locator(`${tid('trash-row')}[data-id="${deleted.id}"]`).waitFor({ timeout: 10_000 });
      await openDrawer(panel); // loading a chat closed it
      await drawerIds(panel, (ids) => ids.length === 4, 'the drawer lists 4 chats');

      // Options → Backups: yesterday's copy, Restore, ONE confirmation
      const options = await k.openOptions();
      await options.locator('html[data-ready="true"]').waitFor({ timeout: 15_000 });
      // the settings: a folder the host refuses is said under the folder field, nothing is written
      await options.fill(tid('backup-folder'), 'not/an/absolute/path');
      await options.fill(tid('backup-daily'), '10');
      await options.click(tid('backup-save'));
      const folderError = options.locator('[data-testid="field-error"][data-field="backupFolder"]');
      await waitFor(async () => /backupFolder must be/.test(await folderError.innerText()), { timeoutMs: 10_000, what: 'the host\'s refusal under the folder field' });
      assert.equal(setting(k, 'backupFolder'), undefined);
      assert.equal(setting(k, 'backupDaily'), undefined);
      await options.fill(tid('backup-folder'), '');
      await options.click(tid('backup-save'));
      await waitFor(async () => (await options.innerText(tid('backup-settings-status'))) === 'Saved.', { timeoutMs: 10_000, what: 'Saved.' });
      assert.equal(await folderError.innerText(), '');
      assert.deepEqual([setting(k, 'backupsEnabled'), setting(k, 'backupFolder'), setting(k, 'backupDaily'), setting(k, 'backupWeekly')], [true, '', 10, 4]);

      const row = options.locator(`${tid('backup-row')}[data-id="${yesterday.id}"]`);
      await row.waitFor({ timeout: 15_000 });
      assert.equal(await row.locator(tid('backup-kind')).innerText(), 'Daily');
      assert.equal(await row.locator(tid('backup-chats')).innerText(), '2');
      const when = await row.locator(tid('backup-time')).innerText();
      await row.locator(tid('backup-restore')).focus();
      await options.keyboard.press('Enter'); // keyboard reachable
      const confirm = options.locator(tid('confirm'));
      await confirm.waitFor({ timeout: 5000 });
      assert.equal(await confirm.count(), 1);
      assert.equal(await options.locator(tid('confirm-text')).innerText(),
        `Put back the copy made ${when} (2 chats)? Your current chats are kept as a copy first, so you can undo this.`);
      const t0 = Date.now();
      await options.click(tid('confirm-yes'));
      await waitFor(async () => (await options.getAttribute(tid('backup-result'), 'data-kind')) === 'ok', {
        timeoutMs: 60_000, what: 'the restore finished (backup-result ok)',
      }).catch(async (e) => { throw new Error(`${e.message}; result: ${await options.innerText(tid('backup-result')).catch(() => '?')}`); });
      t.diagnostic(`restore from Options: ${Date.now() - t0} ms to its result`);
      assert.equal(await options.locator(tid('confirm')).count(), 0, 'no second question was asked');

      // the file holds yesterday's chats, and not today's
      assert.deepEqual(chatTexts(k.dbPath), [...yesterdays].sort());
      assert.equal(trash(k).length, 0, 'yesterday nothing had been deleted');
      assert.equal(setting(k, 'backupDaily'), 10, 'the device\'s backup settings are not restored');
      assert.equal(await options.inputValue(tid('backup-daily')), '10');
      const yIds = sessions(k).map((s) => s.id).sort();
      // the panel: drawer, transcript and title are yesterday's; no trace of today's
      await drawerIds(panel, (ids) => ids.length === 2 && ids.slice().sort().join() === yIds.join(), 'the drawer lists yesterday\'s 2 chats');
      const yLive = activeSessionId(k);
      const yLiveName = sessions(k).find((s) => s.id === yLive).name;
      await waitForBubbles(panel, (b) => b.length === 2 && b[0].text === yesterdays[1] && b[1].text === reply(yesterdays[1]), { what: 'yesterday\'s live chat in the transcript' });
      await waitFor(async () => (await panel.innerText(tid('session-title'))) === yLiveName, { timeoutMs: 10_000, what: `the title "${yLiveName}"` });
      assert.ok(!(await panel.innerText('body')).includes('Today:'), 'nothing of today is shown');
      await panel.locator(tid('restored-notice')).waitFor({ timeout: 10_000 });
      // Recently deleted in the other panel is yesterday's (empty)
      await trashPanel.locator(tid('trash-none')).waitFor({ timeout: 10_000 });
      // a copy of today's chats was made first
      const listed = await hostCall(options, 'backups.list', {});
      assert.ok(listed.undo && listed.copies.some((c) => c.id === listed.undo.id && c.kind === 'prerestore'), 'the copy made before the restore is listed and undoes it');
      assert.deepEqual(chatTexts(copyFile(dataDir, listed.undo.id)), today.texts, 'it holds today\'s chats');

      // Undo restore: today's chats are back, in the panels and the file
      const undo = options.locator(tid('backup-undo'));
      await undo.waitFor({ timeout: 10_000 });
      await undo.click();
      await waitFor(async () => /Restore undone/.test(await options.innerText(tid('backup-result'))), { timeoutMs: 60_000, what: 'the undo finished' });
      assert.deepEqual(chatTexts(k.dbPath), today.texts);
      assert.deepEqual(sessions(k).map((s) => s.id).sort(), today.ids);
      assert.equal(activeSessionId(k), rotaId);
      assert.deepEqual(trash(k).map((x) => x.id), [deleted.id]);
      await drawerIds(panel, (ids) => ids.length === 4 && ids.slice().sort().join() === today.ids.join(), 'the drawer lists today\'s 4 chats again');
      await waitForBubbles(panel, (b) => b.length === 2 && b[0].text === todays[1], { what: 'today\'s live chat again' });
      await waitFor(async () => (await panel.innerText(tid('session-title'))).startsWith('Today: keeper rota'), { timeoutMs: 10_000, what: 'today\'s title' });
      await trashPanel.locator(`${tid('trash-row')}[data-id="${deleted.id}"]`).waitFor({ timeout: 10_000 });

      // and the chat goes on: a new message after the undo is stored in today's chat
      await closeDrawer(panel);
      await sendAndAwaitReply(panel, 'After the undo', reply('After the undo'));
      assert.equal(sqlFile(k.dbPath, `SELECT entry_count FROM sessions WHERE id = '${rotaId}'`)[0].entry_count, 4);
      const shown = await bubbles(panel);
      assert.deepEqual(shown.map((b) => b.text), [todays[1], reply(todays[1]), 'After the undo', reply('After the undo')]);
      assert.equal(mock.requests.at(-1).body.model, 'mock-model-2', 'today\'s model');

      // a restore from a terminal while the browser is open: another process's restore, announced by
      // the browser's host (its poller), and the panel follows it
      const t1 = Date.now();
      const cli = JSON.parse(execFileSync(HOST_BIN, ['restore', yesterday.id, '--yes', '--json', '--db', k.dbPath], { encoding: 'utf8', timeout: 60_000 }));
      t.diagnostic(`keepsake-host restore --json: ${JSON.stringify(cli)}`);
      assert.deepEqual(chatTexts(k.dbPath), [...yesterdays].sort());
      await waitForBubbles(panel, (b) => b.length === 2 && b[0].text === yesterdays[1], { what: 'the panel follows the terminal\'s restore' });
      t.diagnostic(`the panel showed the terminal's restore ${Date.now() - t1} ms after the command started (the host's poller announces within 1 s)`);
      await openDrawer(panel);
      await drawerIds(panel, (ids) => ids.slice().sort().join() === yIds.join(), 'the drawer follows it');
      await trashPanel.locator(tid('trash-none')).waitFor({ timeout: 10_000 });
      await options.locator(tid('backup-undo')).waitFor({ timeout: 10_000 }); // Options offers its undo
      // the worker dropped what it held of today's settings: the next message goes with yesterday's
      await closeDrawer(panel);
      await sendAndAwaitReply(panel, 'After the terminal\'s restore', reply('After the terminal\'s restore'));
      assert.equal(mock.requests.at(-1).body.model, 'mock-model', 'yesterday\'s model, not the one the worker held');
      assert.equal(sqlFile(k.dbPath, `SELECT entry_count FROM sessions WHERE id = '${activeSessionId(k)}'`)[0].entry_count, 4);
      assert.deepEqual(chatTexts(k.dbPath), [...yesterdays].sort());
    });
  } finally {
    await mock.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
});

test('(b) removing and re-adding the extension, and clearing the browser\'s data, leave every chat in place and listed', { timeout: 180_000 }, async (t) => {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'keepsake-e2e-backups-'));
  const mock = await startMockLlm({ script: (req) => ({ text: reply(req.lastUserText) }) });
  const texts = ['Kept: the first chat', 'Kept: the second chat', 'Kept: the third chat'];
  let before;
  try {
    await withKeepsake(t, { dataDir, name: 'backups-b-1' }, async (k) => {
      const panel = await k.openPanel();
      await panel.locator('html[data-ready="true"]').waitFor({ timeout: 15_000 });
      await useMock(panel, mock);
      await makeChats(panel, texts);
      before = sqlFile(k.dbPath, 'SELECT id, name, entry_count, pinned FROM sessions ORDER BY id');
      assert.equal(before.length, 3);

      // what a person's "Clear browsing data" removes: the extension's and the sites' stored data
      const site = await k.context.newPage();
      await site.goto(`${mock.url}/v1/models`);
      await site.evaluate(() => { localStorage.setItem('x', '1'); document.cookie = 'c=1; max-age=3600'; });
      await panel.evaluate(async () => {
        localStorage.setItem('e', '1');
        await chrome.storage.local.set({ leftover: 'an older version kept this' });
      });
      const cdp = await k.context.newCDPSession(panel);
      const origins = [`chrome-extension://${EXT_ID}`, new URL(mock.url).origin];
      for (const origin of origins) await cdp.send('Storage.clearDataForOrigin', { origin, storageTypes: 'all' });
      await cdp.send('Network.enable');
      await cdp.send('Network.clearBrowserCookies');
      await cdp.send('Network.clearBrowserCache');
      await cdp.detach();
      await panel.evaluate(async () => {
        await chrome.storage.local.clear();
        await chrome.storage.session.clear();
      });
      assert.equal(await site.evaluate(() => localStorage.length), 0, 'the site\'s storage is cleared');
      assert.equal(await panel.evaluate(() => localStorage.length), 0, 'the extension\'s web storage is cleared');
      assert.deepEqual(await panel.evaluate(() => chrome.storage.local.get(null)), {}, 'the extension\'s storage is empty');
      // the worker's memory goes too
      await k.stopWorker();
      await panel.reload();
      await panel.locator('html[data-ready="true"]').waitFor({ timeout: 20_000 });
      await waitForBubbles(panel, (b) => b.length === 2 && b[0].text === texts[2], { what: 'the live chat after clearing' });
      await openDrawer(panel);
      await drawerIds(panel, (ids) => ids.slice().sort().join() === before.map((r) => r.id).join(), 'every chat listed after clearing');
      assert.deepEqual(sqlFile(k.dbPath, 'SELECT id, name, entry_count, pinned FROM sessions ORDER BY id'), before);
    });

    // removed and added again: a new browser profile, the same database
    await withKeepsake(t, { dataDir, name: 'backups-b-2' }, async (k) => {
      const panel = await k.openPanel();
      await panel.locator('html[data-ready="true"]').waitFor({ timeout: 15_000 });
      await waitForBubbles(panel, (b) => b.length === 2 && b[0].text === texts[2], { what: 'the live chat in the new profile' });
      await openDrawer(panel);
      await drawerIds(panel, (ids) => ids.slice().sort().join() === before.map((r) => r.id).join(), 'every chat listed in the new profile');
      const first = before.find((r) => r.name.startsWith('Kept: the first'));
      await panel.locator(`${tid('session-row')}[data-id="${first.id}"] ${tid('session-load')}`).click();
      await waitForBubbles(panel, (b) => b.length === 2 && b[0].text === texts[0] && b[1].text === reply(texts[0]), { what: 'the first chat loaded' });
      assert.deepEqual(sqlFile(k.dbPath, 'SELECT id, name, entry_count, pinned FROM sessions ORDER BY id'), before);
      t.diagnostic(`${before.length} chats kept across clearing the browser's data and a new profile`);
    });
  } finally {
    await mock.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
});
