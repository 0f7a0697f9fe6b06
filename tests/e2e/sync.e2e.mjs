// Sync across devices in real browsers (issue 31): Chromium and firefox-esr, each with its own HOME,
// its own database and its own keepsake-host, sharing one sync folder — exactly what a syncer such
// as Syncthing produces on each machine, so no syncer runs here. `keepsake-host sync init` on the
// Chromium database prints the key; `sync join` with it on the Firefox database.
//
//   1. a chat made in Chromium (its panel, the mock LLM) shows in Firefox's drawer marked "from
//      <Chromium's device name>", as part of the row's button;
//   2. Firefox loads it and adds a reply through its panel and the mock LLM: the turn appears in
//      the Chromium panel, still open, without a reload (the page's own marker survives);
//   3. Options → Sync shows both devices on both sides;
//   4. Pause in Chromium's Options: a chat made in Chromium meanwhile waits there (its status says
//      so) and is not in Firefox after Firefox's reader has looked at the folder past the time an
//      unpaused writer would have written it (a condition on Firefox's `lastLookAt`, no sleep);
//      Resume: it reaches Firefox's drawer, and a chat Firefox made meanwhile reaches Chromium's,
//      whose row a screen reader names with "from <Firefox's device name>".
// Every wait is on a condition; the times from a write on one side to the other side showing it are
// printed (t.diagnostic), from Send: the whole turn (streamed, stored, sealed into the folder,
// applied by the other host, shown). Run: tests/e2e/run.sh sync.e2e.mjs (it installs firefox/'s
// packages); tests/e2e/run.sh with no file names runs it too (./test.sh).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import { launch as launchChromium, hostCall, waitFor, annotate, syncInit, syncJoin } from './harness.mjs';
import { startMockLlm } from './mock-llm.mjs';
import { tid, waitForBubbles, openDrawer } from './panel.mjs';
import { TMP, rmrf, buildAddon, prepareHome, launchFirefox, send } from './firefox/launch.mjs';

const CHROMIUM_NAME = 'Chromium desk';
const FIREFOX_NAME = 'Firefox laptop';

const PROVIDER = (mock) => ({
  providers: [{ id: 'p1', name: 'Mock', kind: 'chat', baseUrl: `${mock.url}/v1`, apiKey: '', model: 'm' }],
  activeProvider: 'p1',
});

/** The drawer's rows: `[{id, name, device, button}]` (button: the load button's whole text). */
function drawerRows(page) {
  return page.$$eval('[data-testid="session-row"]', (els) => els.map((el) => ({
    id: el.dataset.id,
    name: el.querySelector('.session-name')?.textContent ?? '',
    device: el.querySelector('[data-testid="session-device"]')?.textContent ?? null,
    deviceNameTranslate: el.querySelector('[data-testid="session-device"] .device-name')?.getAttribute('translate') ?? null,
    button: el.querySelector('[data-testid="session-load"]')?.textContent ?? '',
  })));
}

/** Options → Sync as shown: state, this device, the other devices' rows. */
function syncSection(page) {
  return page.$eval('[data-testid="sync-section"]', (el) => ({
    state: el.querySelector('[data-testid="sync-state"]')?.dataset.state ?? '',
    stateText: el.querySelector('[data-testid="sync-state"]')?.textContent ?? '',
    me: el.querySelector('[data-testid="sync-device-name"]')?.textContent ?? '',
    toggle: el.querySelector('[data-testid="sync-toggle"]')?.textContent ?? '',
    outbox: el.querySelector('[data-testid="sync-outbox"]:not([hidden])')?.textContent ?? '',
    devices: [...el.querySelectorAll('[data-testid="sync-device-row"]')].map((r) => ({
      name: r.querySelector('[data-testid="sync-device-row-name"]').textContent,
      applied: r.querySelector('[data-testid="sync-applied"]').textContent,
    })),
    problems: [...el.querySelectorAll('[data-testid="sync-problem"]')].map((p) => p.textContent),
  }));
}

test('two browsers, two homes, two databases, one sync folder: chats, replies, Options → Sync and Pause', { timeout: 600_000 }, async (t) => {
  const t0 = Date.now();
  const folder = fs.mkdtempSync(path.join(os.tmpdir(), `${TMP}sync-folder-`));
  const dataA = fs.mkdtempSync(path.join(os.tmpdir(), `${TMP}sync-chromium-`));
  const homeA = fs.mkdtempSync(path.join(os.tmpdir(), `${TMP}sync-home-chromium-`));
  const dataB = fs.mkdtempSync(path.join(os.tmpdir(), `${TMP}sync-firefox-`));
  const envA = {
    ...process.env, HOME: homeA, XDG_CONFIG_HOME: path.join(homeA, '.config'), KEEPSAKE_DB: path.join(dataA, 'keepsake.db'), KEEPSAKE_SECRET_STORE: 'off',
  };
  const h = prepareHome({ dataDir: dataB }); // Firefox's HOME, its host registered there
  const addon = buildAddon();
  const mock = await startMockLlm({ script: (req) => ({ text: `Noted: ${req.lastUserText}`, chunkSize: 6, delayMs: 2 }) });
  let k = null;
  let ff = null;
  try {
    // ---- set up: init on Chromium's database, join on Firefox's with the printed key ---------------
    const key = syncInit(envA, folder, CHROMIUM_NAME);
    syncJoin(h.env, folder, key, FIREFOX_NAME);

    k = await launchChromium({ dataDir: dataA, env: { HOME: homeA, XDG_CONFIG_HOME: envA.XDG_CONFIG_HOME }, name: 'sync-chromium' });
    ff = await launchFirefox({ env: h.env, addonDir: addon, name: 'sync-firefox' });
    const chromium = await k.openPanel();
    const firefox = await ff.openPanel();
    assert.equal((await hostCall(chromium, 'host.hello')).dbPath, envA.KEEPSAKE_DB);
    assert.equal((await hostCall(firefox, 'host.hello')).dbPath, h.dbPath);
    // providers never sync (they hold keys): each side has its own
    await hostCall(chromium, 'settings.set', { map: PROVIDER(mock) });
    await hostCall(firefox, 'settings.set', { map: PROVIDER(mock) });

    // ---- 1. a chat made in Chromium shows in Firefox's drawer, "from Chromium desk" ----------------
    await chromium.fill(tid('composer-input'), 'Chromium asks about the saltmarsh lighthouse');
    await chromium.click(tid('send'));
    const asked = Date.now();
    await waitForBubbles(chromium, (b) => b.length === 2 && !b[1].streaming && b[1].index !== null, { timeoutMs: 60_000, what: 'the Chromium reply stored' });
    const written = Date.now();
    const sessionId = (await hostCall(chromium, 'host.status')).activeSessionId;
    assert.ok(sessionId, 'the Chromium chat is a session');
    await chromium.evaluate(() => { window.__e2eSameDocument = true; });

    await openDrawer(firefox);
    const row = await waitFor(async () => (await drawerRows(firefox)).find((r) => r.id === sessionId && r.device === `from ${CHROMIUM_NAME}`), {
      timeoutMs: 60_000, what: 'the Chromium chat in Firefox\'s drawer, marked "from Chromium desk"',
    });
    const drawn = Date.now();
    t.diagnostic(`a chat made in Chromium showed in Firefox's open drawer ${drawn - asked} ms after Send (the whole turn: streamed, stored, sealed, applied, drawn), ${drawn - written} ms after the test saw its reply stored`);
    assert.equal(row.device, `from ${CHROMIUM_NAME}`);
    assert.equal(row.deviceNameTranslate, 'no');
    assert.match(row.button, new RegExp(`saltmarsh lighthouse.* · from ${CHROMIUM_NAME}$`), 'the mark is part of the row\'s button');

    // ---- 2. Firefox continues it; the open Chromium panel shows the turn without a reload ----------
    await firefox.click(`${tid('session-row')}[data-id="${sessionId}"] ${tid('session-load')}`);
    await waitForBubbles(firefox, (b) => b.length === 2 && b[0].text === 'Chromium asks about the saltmarsh lighthouse', { timeoutMs: 30_000, what: 'the Chromium chat loaded in Firefox' });
    await send(firefox, 'Firefox continues: who keeps the light now?');
    const replied = Date.now();
    await waitForBubbles(firefox, (b) => b.length === 4 && !b[3].streaming && b[3].index !== null, { timeoutMs: 60_000, what: 'the Firefox reply stored' });
    const shown = await waitForBubbles(chromium, (b) => b.length === 4 && b[3].text === 'Noted: Firefox continues: who keeps the light now?', {
      timeoutMs: 60_000, what: 'the Firefox turn in the open Chromium panel',
    });
    const appeared = Date.now();
    // (from Send: Firefox's panel is read over BiDi, so the moment the test sees the reply stored
    // there can come after Chromium already shows it)
    t.diagnostic(`a reply added in Firefox showed in the open Chromium panel ${appeared - replied} ms after Send in Firefox (the whole turn: streamed, stored, sealed, applied, shown)`);
    assert.deepEqual(shown.map((b) => b.role), ['user', 'assistant', 'user', 'assistant']);
    assert.equal(await chromium.evaluate(() => window.__e2eSameDocument === true), true, 'the Chromium panel was not reloaded');

    // ---- 3. Options → Sync on both sides shows both devices -----------------------------------------
    const optA = await k.openOptions();
    await optA.locator('html[data-ready="true"]').waitFor({ timeout: 20_000 });
    const a = await waitFor(async () => {
      const s = await syncSection(optA);
      return s.devices.some((d) => d.name === FIREFOX_NAME) ? s : null;
    }, { timeoutMs: 30_000, what: 'Chromium\'s Options → Sync listing Firefox' });
    assert.equal(a.state, 'on');
    assert.equal(a.me, CHROMIUM_NAME);
    assert.deepEqual(a.problems, []);
    const optB = await ff.openOptions();
    const b = await waitFor(async () => {
      const s = await syncSection(optB);
      return s.devices.some((d) => d.name === CHROMIUM_NAME) ? s : null;
    }, { timeoutMs: 30_000, what: 'Firefox\'s Options → Sync listing Chromium' });
    assert.equal(b.me, FIREFOX_NAME);
    assert.ok(Number(b.devices.find((d) => d.name === CHROMIUM_NAME).applied) > 0, `Firefox applied Chromium's changes: ${JSON.stringify(b.devices)}`);

    // ---- 4. Pause stops the other side from seeing new chats until Resume ---------------------------
    await optA.click(tid('sync-toggle'));
    await waitFor(async () => (await syncSection(optA)).state === 'paused', { timeoutMs: 20_000, what: 'Chromium paused' });
    await chromium.click(tid('new-chat'));
    await waitForBubbles(chromium, (x) => x.length === 0, { timeoutMs: 20_000, what: 'a new chat in Chromium' });
    await chromium.fill(tid('composer-input'), 'A paused chat about the quartermaster ledger');
    await chromium.click(tid('send'));
    await waitForBubbles(chromium, (x) => x.length === 2 && !x[1].streaming && x[1].index !== null, { timeoutMs: 60_000, what: 'the paused chat stored in Chromium' });
    const pausedAt = Date.now();
    const pausedId = (await hostCall(chromium, 'host.status')).activeSessionId;
    const waiting = await waitFor(async () => {
      const s = await syncSection(optA);
      return s.outbox ? s : null;
    }, { timeoutMs: 20_000, what: 'Chromium\'s Options saying its changes wait' });
    assert.match(waiting.outbox, /wait: they are written to the sync folder when you resume|waits: it is written/);
    // Firefox makes a chat of its own meanwhile
    await firefox.click(tid('new-chat'));
    await waitForBubbles(firefox, (x) => x.length === 0, { timeoutMs: 20_000, what: 'a new chat in Firefox' });
    await send(firefox, 'Firefox asks about the tide tables');
    await waitForBubbles(firefox, (x) => x.length === 2 && !x[1].streaming && x[1].index !== null, { timeoutMs: 60_000, what: 'the Firefox chat stored' });
    const firefoxId = (await hostCall(firefox, 'host.status')).activeSessionId;
    // Firefox's reader has looked at the folder well after an unpaused writer would have written the
    // paused chat (it writes within 250 ms): the chat is still not there
    let lastStatus = null;
    await waitFor(async () => {
      const s = (lastStatus = await hostCall(firefox, 'sync.status'));
      return Number(s.lastLookAt) > pausedAt + 2_000;
    }, { timeoutMs: 30_000, what: 'Firefox\'s reader looking at the folder after the paused chat' }).catch((e) => {
      throw annotate(e, `pausedAt ${pausedAt}, now ${Date.now()}, Firefox's sync.status: ${JSON.stringify(lastStatus)}`);
    });
    await openDrawer(firefox);
    assert.equal((await drawerRows(firefox)).some((r) => r.id === pausedId), false, 'the paused chat is not in Firefox');
    assert.equal((await hostCall(firefox, 'sessions.list', { limit: 1000 })).rows.some((r) => r.id === pausedId), false);

    await optA.click(tid('sync-toggle'));
    const resumed = Date.now();
    await waitFor(async () => (await syncSection(optA)).state === 'on', { timeoutMs: 20_000, what: 'Chromium resumed' });
    const late = await waitFor(async () => (await drawerRows(firefox)).find((r) => r.id === pausedId), { timeoutMs: 60_000, what: 'the paused chat in Firefox after Resume' });
    t.diagnostic(`after Resume the chat made while paused showed in Firefox's drawer in ${Date.now() - resumed} ms`);
    assert.equal(late.device, `from ${CHROMIUM_NAME}`);
    // and Firefox's chat in Chromium's drawer: a screen reader names the row's button with the mark
    await openDrawer(chromium);
    await waitFor(async () => (await drawerRows(chromium)).some((r) => r.id === firefoxId), { timeoutMs: 60_000, what: 'the Firefox chat in Chromium\'s drawer' });
    t.diagnostic(`after Resume the chat Firefox made meanwhile showed in Chromium's drawer in ${Date.now() - resumed} ms`);
    const button = chromium.getByRole('button', { name: new RegExp(`tide tables.*from ${FIREFOX_NAME}`) });
    assert.equal(await button.count(), 1, 'the row\'s button is named with "from Firefox laptop"');
    await button.focus();
    assert.equal(await chromium.evaluate(() => document.activeElement?.dataset.testid), 'session-load', 'reached as the row\'s one button');
    t.diagnostic(`done in ${Date.now() - t0} ms`);
  } catch (e) {
    if (k) {
      const dir = await k.collectArtifacts(`FAILED: ${e.stack || e.message}`).catch(() => null);
      if (dir) annotate(e, `artifacts: ${dir}`);
    }
    throw e;
  } finally {
    await ff?.close();
    await k?.close();
    await mock.close();
    for (const d of [folder, dataA, homeA, dataB, h.home, addon]) rmrf(d);
  }
});
