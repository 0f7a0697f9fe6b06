// The Firefox build (scripts/firefox.mjs) in Debian's firefox-esr, driven over WebDriver BiDi by
// puppeteer-core (no downloaded browser, no geckodriver), with the real keepsake-host registered
// by `keepsake-host install` for a test HOME (Firefox reads ~/.mozilla/native-messaging-hosts;
// the test's HOME holds ~/.mozilla/firefox, so install detects Firefox there).
//
//   1. the side panel page sends a message, the mock LLM streams the reply, the SQLite file holds
//      the turn; a reply with code and math is highlighted and typeset (the rich worker runs there),
//      a hostile code block is cut at its time budget and the panel keeps answering; a 1.25 MiB reply
//      is stored and read back although it arrives chunked (host → browser frames are capped at 1 MiB);
//   2. one SQLite file used from Chromium and Firefox: a chat saved in one is listed, searched
//      and loaded in the other, both ways;
//   3. an add-on whose ID Keepsake did not register: Firefox starts the host (a hand-written
//      manifest allows it) and the host refuses it with forbidden_origin, touching no database.
//
// Run: tests/e2e/run.sh firefox/firefox.e2e.mjs (installs firefox-esr and the npm packages).
// Launching Firefox, the test HOME and the sidebar page as a tab: launch.mjs (shared with
// ../sync.e2e.mjs).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import { HOST_BIN, launch as launchChromium, hostCall, sqlFile, waitFor, withTimeout } from '../harness.mjs';
import { startMockLlm } from '../mock-llm.mjs';
import { bubbles, tid, waitForBubbles } from '../panel.mjs';
import { GECKO_ID, TMP, rmrf, buildAddon, prepareHome, launchFirefox, reloadPanel, send } from './launch.mjs';

const MiB = 1024 * 1024;

const PROVIDER = (mock) => ({
  providers: [{ id: 'p1', name: 'Mock', kind: 'chat', baseUrl: `${mock.url}/v1`, apiKey: '', model: 'm' }],
  activeProvider: 'p1',
});

test('Firefox: registered by install, a streamed reply stored in SQLite, a 1.25 MiB reply read back chunked', { timeout: 240_000 }, async (t) => {
  const t0 = Date.now();
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), `${TMP}data-`));
  fs.writeFileSync(path.join(dataDir, 'debug'), ''); // the host logs one line per op served
  const h = prepareHome({ dataDir });
  const addon = buildAddon();
  const mock = await startMockLlm({
    script: (req) => {
      const q = req.lastUserText ?? '';
      if (/very long/.test(q)) return { huge: Math.round(1.25 * MiB), chunkSize: 64 * 1024 };
      if (/Code and math/.test(q)) return { text: 'Here:\n\n```python\ndef area(r):\n    return 3.14159 * r ** 2\n```\n\nso $A = \\pi r^2$.', chunkSize: 16 };
      if (/hostile/.test(q)) return { text: '```java\n' + '_'.repeat(60_000) + '\n```', chunkSize: 4_000 };
      return { text: 'Firefox hears you, lighthouse keeper.', chunkSize: 4, delayMs: 5 };
    },
  });
  let ff = null;
  try {
    // the registration: `install` found Firefox in the test HOME and wrote the Mozilla manifest
    assert.equal(h.report.ok, true);
    const ffEntry = h.report.manifests.find((m) => m.path === h.manifestPath);
    assert.ok(ffEntry, `install wrote ${h.manifestPath}: ${JSON.stringify(h.report.manifests)}`);
    assert.match(ffEntry.browser, /Firefox/);
    const manifest = JSON.parse(fs.readFileSync(h.manifestPath, 'utf8'));
    assert.deepEqual(manifest.allowed_extensions, [GECKO_ID]);
    assert.equal(manifest.path, fs.realpathSync(HOST_BIN));

    ff = await launchFirefox({ env: h.env, addonDir: addon, name: 'firefox-send' });
    assert.equal(ff.addonId, GECKO_ID);
    t.diagnostic(`Firefox ${await ff.browser.version()} up with the add-on in ${Date.now() - t0} ms`);
    const panel = await ff.openPanel();

    const hello = await hostCall(panel, 'host.hello');
    assert.equal(hello.dbError, null);
    assert.equal(hello.dbPath, h.dbPath, 'the host Firefox started uses the test database');
    // lib/platform.js takes Firefox's side: the sidebar API, no offscreen documents (PDF attach says so)
    const platform = await panel.evaluate(async () => {
      const m = await import('/lib/platform.js');
      return { family: m.browserFamily(), sidebarOpen: typeof browser.sidebarAction?.open, sidePanel: typeof chrome.sidePanel, pdf: m.pdfReading(), session: !!chrome.storage.session };
    });
    assert.deepEqual(platform, { family: 'firefox', sidebarOpen: 'function', sidePanel: 'undefined', pdf: { how: null, reasonKey: 'attachPdfNotInFirefox' }, session: true });
    await hostCall(panel, 'settings.set', { map: PROVIDER(mock) });

    // a message typed and sent in the panel; the reply streams in (several deltas), then is stored
    await send(panel, 'Hello from Firefox');
    const shown = await waitForBubbles(
      panel,
      (b) => {
        const a = b.find((x) => x.role === 'assistant');
        return b.length === 2 && a && !a.streaming && a.index !== null && a.text === 'Firefox hears you, lighthouse keeper.';
      },
      { timeoutMs: 60_000, what: 'the streamed reply, stored' },
    );
    assert.equal(shown[0].text, 'Hello from Firefox');
    const chatReq = mock.requests.find((r) => r.kind === 'chat');
    assert.ok(chatReq?.body?.stream === true, 'the request asked for a stream');
    const rows = sqlFile(h.dbPath, `SELECT role, json_extract(entry, '$.content') AS content FROM history_entries ORDER BY position`);
    assert.deepEqual(
      rows.map((r) => [r.role, r.content]),
      [
        ['user', 'Hello from Firefox'],
        ['assistant', 'Firefox hears you, lighthouse keeper.'],
      ],
    );
    const [session] = sqlFile(h.dbPath, 'SELECT count(*) AS n FROM sessions');
    assert.ok(session.n >= 1, 'the live chat is kept in a session');

    // code and math (issue 30): highlight.js and KaTeX run in the rich worker, a module Worker (Firefox
    // 128+); a block highlight.js would take tens of seconds on is cut at the time budget and stays plain
    // while the panel keeps answering
    const lastReply = () => panel.evaluate(() => {
      const r = [...document.querySelectorAll('[data-testid="bubble"][data-role="assistant"]:not([data-streaming]) .msg-body')].pop();
      const code = r?.querySelector('.md-codeblock code');
      return r && code ? {
        chars: code.textContent.length,
        lit: !!r.querySelector('code.hljs .hljs-keyword'),
        pending: !!r.querySelector('[data-md-pending]'),
        katex: r.querySelectorAll('.md-math .katex math').length,
      } : null;
    });
    await send(panel, 'Code and math please');
    await waitFor(async () => {
      const s = await lastReply();
      return s && s.lit && s.katex === 1 && !s.pending;
    }, { timeoutMs: 60_000, what: 'hljs token spans and KaTeX in the Firefox panel' });
    await send(panel, 'Something hostile');
    const t1 = Date.now();
    let slowest = 0;
    await waitFor(async () => {
      const a = Date.now();
      const s = await withTimeout(lastReply(), 10_000, 'the Firefox panel answering');
      slowest = Math.max(slowest, Date.now() - a);
      return s && s.chars === 60_000 && !s.pending && !s.lit;
    }, { timeoutMs: 90_000, what: 'the hostile block settled, plain' });
    t.diagnostic(`Firefox: a streamed 60,000-underscore java block settled plain in ${Date.now() - t1} ms; the panel's slowest answer meanwhile ${slowest} ms`);
    assert.ok(slowest < 5_000, `the panel answered within ${slowest} ms`);

    // a reply over 1 MiB: streamed, stored whole, read back through chunked host replies
    await send(panel, 'Write a very long answer');
    // (the live history keeps a single entry over its 300,000-char budget, dropping older ones:
    // storage-model §4.1; the earlier turn stays in the session)
    await waitForBubbles(panel, (b) => b.some((x) => x.role === 'assistant' && !x.streaming && x.index !== null && x.text.length > 1.2 * MiB), {
      timeoutMs: 150_000,
      what: 'the huge reply finished and stored',
    }).catch(async (err) => {
      const b = await bubbles(panel).catch(() => []);
      const rows = sqlFile(h.dbPath, 'SELECT role, content_chars FROM history_entries ORDER BY position');
      const hostLog = fs.existsSync(path.join(dataDir, 'keepsake-host.log')) ? fs.readFileSync(path.join(dataDir, 'keepsake-host.log'), 'utf8').split('\n').slice(-15).join('\n') : '';
      err.message += `\nbubbles: ${JSON.stringify(b.map((x) => [x.role, x.streaming, x.index, x.text.length, x.text.slice(0, 80)]))}\nrows: ${JSON.stringify(rows)}\nmock requests: ${mock.requests.length}\nhost log:\n${hostLog}\nconsole:\n${ff.log.slice(-20).join('\n')}`;
      throw err;
    });
    const [big] = sqlFile(h.dbPath, `SELECT content_chars, length(entry) AS bytes FROM history_entries WHERE role = 'assistant' ORDER BY position DESC LIMIT 1`);
    assert.equal(big.content_chars, Math.round(1.25 * MiB));
    assert.ok(big.bytes > MiB);
    const got = await hostCall(panel, 'history.get', {}, {}, { timeoutMs: 60_000 });
    const e = got.entries.findLast((x) => x.role === 'assistant');
    assert.equal(e.content.length, Math.round(1.25 * MiB));
    assert.ok(e.content.startsWith('The quick brown fox'));
    const logText = fs.readFileSync(path.join(dataDir, 'keepsake-host.log'), 'utf8');
    const served = [...logText.matchAll(/served op=history\.get ms=\d+(?: us=\d+)? bytes=(\d+)/g)].map((m) => Number(m[1]));
    assert.ok(served.some((n) => n > MiB), `history.get replies over one 1 MiB frame were served (chunked): ${served.join(', ')}`);
    t.diagnostic(`done in ${Date.now() - t0} ms`);
  } finally {
    await ff?.close();
    await mock.close();
    rmrf(addon);
    rmrf(h.home);
    rmrf(dataDir);
  }
});

test('one SQLite file from Chromium and Firefox: a chat saved in one is listed, searched and loaded in the other', { timeout: 240_000 }, async (t) => {
  const t0 = Date.now();
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), `${TMP}shared-`));
  const mock = await startMockLlm({ script: (req) => ({ text: `Noted: ${req.lastUserText}`, chunkSize: 6 }) });
  const addon = buildAddon();
  const h = prepareHome({ dataDir });
  try {
    // 1. Chromium (its own profile, registered with --user-data-dir by the harness) writes a chat
    const k = await launchChromium({ dataDir, name: 'firefox-shared-chromium' });
    let fromChromium;
    try {
      const panel = await k.openPanel();
      await hostCall(panel, 'settings.set', { map: PROVIDER(mock) });
      await panel.fill(tid('composer-input'), 'Chromium asks about the saltmarsh lighthouse');
      await panel.click(tid('send'));
      await waitForBubbles(panel, (b) => b.length === 2 && !b[1].streaming && b[1].index !== null, { timeoutMs: 60_000, what: 'the Chromium reply stored' });
      const hello = await hostCall(panel, 'host.hello');
      assert.equal(hello.dbPath, h.dbPath, 'Chromium\'s host uses the shared file');
      fromChromium = (await hostCall(panel, 'host.status')).activeSessionId;
      assert.ok(fromChromium, 'the Chromium chat is a session');
      // a new chat, so the session is no longer the live one in either browser
      await hostCall(panel, 'history.clear', {});
    } finally {
      await k.close();
    }

    // 2. Firefox lists it, finds it by a word of its content, loads it, and shows it
    const ff = await launchFirefox({ env: h.env, addonDir: addon, name: 'firefox-shared' });
    try {
      const panel = await ff.openPanel();
      const listed = (await hostCall(panel, 'sessions.list', {})).rows;
      assert.ok(listed.some((s) => s.id === fromChromium), `Firefox lists the Chromium chat: ${JSON.stringify(listed.map((s) => s.id))}`);
      const found = (await hostCall(panel, 'sessions.list', { query: 'saltmarsh' })).rows;
      assert.deepEqual(found.map((s) => s.id), [fromChromium], 'searching finds exactly the Chromium chat');
      await hostCall(panel, 'sessions.load', { id: fromChromium });
      await reloadPanel(panel);
      await waitForBubbles(panel, (b) => b.length === 2 && b[0].text === 'Chromium asks about the saltmarsh lighthouse' && b[1].text === 'Noted: Chromium asks about the saltmarsh lighthouse', {
        timeoutMs: 30_000,
        what: 'the Chromium chat shown in Firefox',
      });

      // 3. Firefox writes a chat of its own
      await hostCall(panel, 'history.clear', {});
      await hostCall(panel, 'settings.set', { map: PROVIDER(mock) });
      await reloadPanel(panel);
      await send(panel, 'Firefox asks about the quartermaster ledger');
      await waitForBubbles(panel, (b) => b.length === 2 && !b[1].streaming && b[1].index !== null, { timeoutMs: 60_000, what: 'the Firefox reply stored' });
      await hostCall(panel, 'history.clear', {});
    } finally {
      await ff.close();
    }

    // 4. Chromium lists, searches and loads the Firefox chat
    const k2 = await launchChromium({ dataDir, name: 'firefox-shared-chromium-2' });
    try {
      const panel = await k2.openPanel();
      const found = (await hostCall(panel, 'sessions.list', { query: 'quartermaster' })).rows;
      assert.equal(found.length, 1, `one hit: ${JSON.stringify(found)}`);
      assert.notEqual(found[0].id, fromChromium);
      const all = (await hostCall(panel, 'sessions.list', {})).rows;
      assert.ok(all.some((s) => s.id === fromChromium) && all.some((s) => s.id === found[0].id), 'both chats are listed');
      await hostCall(panel, 'sessions.load', { id: found[0].id });
      await panel.reload();
      await waitForBubbles(panel, (b) => b.length === 2 && b[0].text === 'Firefox asks about the quartermaster ledger' && b[1].text === 'Noted: Firefox asks about the quartermaster ledger', {
        timeoutMs: 30_000,
        what: 'the Firefox chat shown in Chromium',
      });
    } finally {
      await k2.close();
    }
    t.diagnostic(`Chromium → Firefox → Chromium on one file in ${Date.now() - t0} ms`);
  } finally {
    await mock.close();
    rmrf(addon);
    rmrf(h.home);
    rmrf(dataDir);
  }
});

test('Firefox: an add-on ID Keepsake did not register is refused by the host (forbidden_origin), the database never opened', { timeout: 120_000 }, async () => {
  const OTHER = 'impostor@example.org';
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), `${TMP}refused-`));
  // A manifest someone else wrote for this binary (not `install`'s: no receipt names it) lets
  // Firefox start the host for another add-on; the host admits only keepsake@keepsake.dev and the
  // IDs of manifests install registered.
  const h = prepareHome({ dataDir, register: false });
  fs.mkdirSync(path.dirname(h.manifestPath), { recursive: true });
  fs.writeFileSync(
    h.manifestPath,
    JSON.stringify({ name: 'dev.keepsake.host', description: 'not Keepsake', path: HOST_BIN, type: 'stdio', allowed_extensions: [OTHER] }),
  );
  const addon = buildAddon(OTHER);
  let ff = null;
  try {
    ff = await launchFirefox({ env: h.env, addonDir: addon, name: 'firefox-refused' });
    assert.equal(ff.addonId, OTHER);
    const panel = await ff.openPanel();
    const reply = await withTimeout(
      panel.evaluate(() => chrome.runtime.sendMessage({ kind: 'host', op: 'host.hello', args: {}, opts: {} })),
      30_000,
      'host.hello from the impostor',
    );
    assert.equal(reply.ok, false, JSON.stringify(reply));
    assert.equal(reply.error.code, 'forbidden_origin', JSON.stringify(reply));
    assert.match(JSON.stringify(reply.error), /impostor@example\.org/);
    assert.equal(fs.existsSync(h.dbPath), false, 'a refused caller never creates the database');
    // the panel says what is wrong instead of working
    await waitFor(() => panel.evaluate(() => document.body.innerText.includes('impostor@example.org') || !!document.querySelector('[data-testid="host-banner"]:not([hidden])')).catch(() => false), {
      timeoutMs: 20_000,
      what: 'the panel shows the refusal',
    });
  } finally {
    await ff?.close();
    rmrf(addon);
    rmrf(h.home);
    rmrf(dataDir);
  }
});
