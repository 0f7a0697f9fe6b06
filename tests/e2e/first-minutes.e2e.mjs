// Issue 32, the panel's defects a new user meets in the first minutes (each fails with the
// extension of the base commit, `KEEPSAKE_E2E_EXT_DIR=/work/base/extension`):
//   2. the "No provider" card a send left goes once a provider is added in Options;
//   7. a failed request shows its error once (the "Not answered" mark), not twice;
//   9. "Explain" on a selection: its prompt does not follow into the next new chat;
//   4. keyboard: Enter on Regenerate, ‹ / ›, Retry and Stop leaves the focus on a control with a
//      visible focus ring, never on <body>;
//   3. Options: Undo of a lower chat limit brings the chats back and the limit before it.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { withKeepsake, waitFor, hostCall } from './harness.mjs';
import { startMockLlm } from './mock-llm.mjs';
import { startPageServer } from './fixtures.mjs';
import { tid, waitForBubbles, sendAndAwaitReply, addProvider, activateProvider } from './panel.mjs';
import { sessions, trash, allSettings } from './db.mjs';

async function useMock(page, mock) {
  await hostCall(page, 'settings.set', {
    map: {
      providers: [{ id: 'p1', name: 'Mock', kind: 'chat', baseUrl: `${mock.url}/v1`, apiKey: '', model: 'mock-model' }],
      activeProvider: 'p1',
    },
  });
}

const ready = (page) => page.waitForSelector('html[data-ready="true"]', { timeout: 15_000 });

/** Every notice card and failed mark shown, with its text. */
const cards = (page) => page.$$eval('.notice, [data-testid="failed-mark"]', (els) => els.map((el) => ({ testid: el.dataset.testid, text: el.innerText.trim() })));

// ---------------------------------------------------------------------------------------------
// 2. Stale cards go when their cause goes

test('2: the "No provider" card a send left goes once a provider is added in Options', { timeout: 90_000 }, async (t) => {
  const mock = await startMockLlm({ script: (req) => ({ text: `Reply to: ${req.lastUserText}` }) });
  try {
    await withKeepsake(t, {}, async (k) => {
      const panel = await k.openPanel();
      await ready(panel);
      await panel.fill(tid('composer-input'), 'Hello, is anyone there?');
      await panel.click(tid('send'));
      const stale = () => cards(panel).then((c) => c.filter((x) => /No LLM provider/.test(x.text)));
      const first = await waitFor(async () => ((await stale()).length ? stale() : null), { timeoutMs: 10_000, what: 'the No provider card' });
      t.diagnostic(`before: ${JSON.stringify(first)}`);

      const opt = await k.openOptions();
      await ready(opt);
      const id = await addProvider(opt, { name: 'Mock', kind: 'chat', baseUrl: `${mock.url}/v1`, model: 'mock-model' });
      if (allSettings(k).activeProvider !== id) await activateProvider(opt, id);
      await waitFor(() => allSettings(k).activeProvider === id, { timeoutMs: 10_000, what: 'the provider active' });

      // the panel notices the provider (its label) and the card about its absence goes
      await waitFor(async () => /Mock/.test(await panel.innerText(tid('model-label'))), { timeoutMs: 10_000, what: 'the label names the provider' });
      await waitFor(async () => ((await stale()).length === 0 ? true : null), { timeoutMs: 10_000, what: 'the stale No provider card gone' });
      // the message is still in the composer and goes now
      assert.equal(await panel.inputValue(tid('composer-input')), 'Hello, is anyone there?');
      await panel.click(tid('send'));
      await waitForBubbles(panel, (b) => b.at(-1)?.role === 'assistant' && !b.at(-1).streaming && b.at(-1).text === 'Reply to: Hello, is anyone there?', { what: 'the reply' });
    });
  } finally {
    await mock.close();
  }
});

// ---------------------------------------------------------------------------------------------
// 7. One failure, one card

test('7: a failed request shows its error once: the "Not answered" mark, no second card with the same text', { timeout: 90_000 }, async (t) => {
  let n = 0;
  const mock = await startMockLlm({
    script: (req) => (++n === 1 ? { status: 500, error: { message: 'The server had an error' } } : { text: `Reply to: ${req.lastUserText}` }),
  });
  try {
    await withKeepsake(t, {}, async (k) => {
      const panel = await k.openPanel();
      await ready(panel);
      await useMock(panel, mock);
      await panel.fill(tid('composer-input'), 'Will this fail?');
      await panel.click(tid('send'));
      // the chat.error event shows its card before the history read that brings the mark: once the
      // mark is there, a second card would be too
      const mark = panel.locator(tid('failed-mark'));
      await mark.waitFor({ timeout: 15_000 });
      await panel.waitForSelector(`${tid('stop')}[hidden]`, { state: 'attached', timeout: 10_000 });
      const shown = await cards(panel);
      t.diagnostic(`cards: ${JSON.stringify(shown)}`);
      const saying = shown.filter((c) => c.text.includes('The server had an error'));
      assert.equal(saying.length, 1, `the error shown once, not ${saying.length} times: ${JSON.stringify(shown)}`);
      assert.equal(saying[0].testid, 'failed-mark');
      assert.match(saying[0].text, /^Not answered: .*The server had an error/);
      // Retry still works from the mark
      await mark.locator(tid('retry')).click();
      await waitForBubbles(panel, (b) => b.at(-1)?.role === 'assistant' && !b.at(-1).streaming && b.at(-1).text === 'Reply to: Will this fail?', { what: 'the retried reply' });
      assert.equal(await panel.locator(tid('failed-mark')).count(), 0);
    });
  } finally {
    await mock.close();
  }
});

// ---------------------------------------------------------------------------------------------
// 9. A selection's prompt belongs to its chat

const POEM = '<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Harbour notes</title></head><body><h1>Harbour notes</h1>'
  + '<p id="quote">The lamp was lit at dusk.<br>The boats came home at dawn.</p></body></html>';

test('9: "Explain" on a selection puts its prompt in the composer; New chat does not carry it into the next chat', { timeout: 90_000 }, async (t) => {
  const site = await startPageServer({ '/notes.html': { body: POEM } });
  const url = `${site.origin}/notes.html`;
  try {
    await withKeepsake(t, {}, async (k) => {
      const panel = await k.openPanel();
      await ready(panel);
      const tab = await k.context.newPage();
      await tab.goto(url);
      await tab.evaluate(() => getSelection().selectAllChildren(document.getElementById('quote')));
      const clickMenu = (item) =>
        k.worker.evaluate(async ([u, item]) => {
          const [tab] = await chrome.tabs.query({ url: u });
          const info = { menuItemId: `keepsake-${item}`, parentMenuItemId: 'keepsake', selectionText: 'The lamp was lit at dusk.', frameId: 0, pageUrl: u, editable: false };
          return self.__keepsake.selection.clicked(info, tab);
        }, [url, item]);
      const ask = await clickMenu('explain');
      assert.equal(ask.prompt, 'Explain the quoted text.');
      await waitFor(async () => ((await panel.inputValue(tid('composer-input'))) === 'Explain the quoted text.' ? true : null), { timeoutMs: 10_000, what: 'the prompt in the composer' });

      // New chat: the quote stays with the chat it was attached to, and so does its prompt
      await panel.click(tid('new-chat'));
      await waitForBubbles(panel, (b) => b.length === 0, { what: 'an empty chat' });
      await waitFor(async () => ((await panel.inputValue(tid('composer-input'))) === '' ? true : null), {
        timeoutMs: 10_000, what: 'an empty composer in the new chat',
      });
      // nor does a reload bring it back (the draft kept in the session and the host)
      await panel.reload();
      await ready(panel);
      assert.equal(await panel.inputValue(tid('composer-input')), '');

      // a prompt the reader changed is their own text: it stays
      await clickMenu('explain');
      await waitFor(async () => ((await panel.inputValue(tid('composer-input'))) === 'Explain the quoted text.' ? true : null), { timeoutMs: 10_000, what: 'the prompt again' });
      await panel.fill(tid('composer-input'), 'Explain the quoted text, briefly.');
      await panel.click(tid('new-chat'));
      await waitForBubbles(panel, (b) => b.length === 0, { what: 'an empty chat' });
      assert.equal(await panel.inputValue(tid('composer-input')), 'Explain the quoted text, briefly.');
    });
  } finally {
    await site.close();
  }
});

// ---------------------------------------------------------------------------------------------
// 4. Keyboard: the focus stays on a control, with a ring

/** The focused element: its test id, whether it is <body>, and whether a focus ring shows. */
const focused = (page) =>
  page.evaluate(() => {
    const el = document.activeElement;
    const cs = el ? getComputedStyle(el) : null;
    return {
      body: !el || el === document.body,
      testid: el?.dataset?.testid ?? el?.id ?? el?.tagName,
      index: el?.closest?.('[data-testid="bubble"]')?.dataset.index ?? null,
      ring: !!el && el.matches(':focus-visible') && cs.outlineStyle !== 'none' && parseFloat(cs.outlineWidth) > 0,
    };
  });

async function pressOn(page, locator) {
  await locator.focus();
  await page.keyboard.press('Enter');
}

async function assertFocusKept(t, page, what, allowed) {
  const f = await waitFor(async () => {
    const x = await focused(page);
    return x.body ? null : x;
  }, { timeoutMs: 10_000, what: `focus on a control after ${what}` }).catch(async () => focused(page));
  t.diagnostic(`after ${what}: ${JSON.stringify(f)}`);
  assert.equal(f.body, false, `after ${what} the focus fell to <body>`);
  assert.ok(allowed.includes(f.testid), `after ${what} the focus is on ${f.testid}, expected one of ${allowed}`);
  assert.equal(f.ring, true, `after ${what} the focused ${f.testid} shows a focus ring`);
  return f;
}

test('4: Enter on Regenerate, ‹ / ›, Retry and Stop keeps the focus on a control with a visible ring', { timeout: 120_000 }, async (t) => {
  let n = 0;
  const mock = await startMockLlm({
    script: (req) => {
      n += 1;
      if (n === 3) return { status: 500, error: { message: 'The server had an error' } };
      if (/keep talking/.test(req.lastUserText)) return { text: 'word '.repeat(50), hangAfter: 2, chunkSize: 5 };
      return { text: `Reply ${n} to: ${req.lastUserText}` };
    },
  });
  try {
    await withKeepsake(t, {}, async (k) => {
      const panel = await k.openPanel();
      await ready(panel);
      await useMock(panel, mock);
      await sendAndAwaitReply(panel, 'Name a tide.', 'Reply 1 to: Name a tide.');

      // Regenerate, by keyboard
      await pressOn(panel, panel.locator(`[data-testid="bubble"][data-index="1"] ${tid('msg-regenerate')}`), 'Regenerate');
      await waitForBubbles(panel, (b) => b.at(-1)?.role === 'assistant' && !b.at(-1).streaming && b.at(-1).text === 'Reply 2 to: Name a tide.', { what: 'the new reply' });
      await panel.waitForSelector(`${tid('stop')}[hidden]`, { state: 'attached', timeout: 10_000 });
      await assertFocusKept(t, panel, 'Regenerate', ['msg-regenerate', 'composer-input', 'version-prev']);

      // ‹ then ›
      const prev = panel.locator(`[data-testid="bubble"][data-index="1"] ${tid('version-prev')}`);
      await pressOn(panel, prev, '‹');
      await waitForBubbles(panel, (b) => b.at(-1)?.text === 'Reply 1 to: Name a tide.', { what: 'version 1 shown' });
      await assertFocusKept(t, panel, '‹', ['version-next', 'version-prev']);
      const next = panel.locator(`[data-testid="bubble"][data-index="1"] ${tid('version-next')}`);
      await pressOn(panel, next, '›');
      await waitForBubbles(panel, (b) => b.at(-1)?.text === 'Reply 2 to: Name a tide.', { what: 'version 2 shown' });
      await assertFocusKept(t, panel, '›', ['version-prev', 'version-next']);

      // Retry, by keyboard (the third request fails)
      await panel.fill(tid('composer-input'), 'This will fail once.');
      await panel.keyboard.press('Enter');
      const retry = panel.locator(`${tid('failed-mark')} ${tid('retry')}`);
      await retry.waitFor({ timeout: 15_000 });
      await pressOn(panel, retry, 'Retry');
      await waitForBubbles(panel, (b) => b.at(-1)?.role === 'assistant' && !b.at(-1).streaming && /^Reply 4 to: This will fail once\.$/.test(b.at(-1).text), { what: 'the retried reply' });
      await panel.waitForSelector(`${tid('stop')}[hidden]`, { state: 'attached', timeout: 10_000 });
      await assertFocusKept(t, panel, 'Retry', ['msg-regenerate', 'composer-input']);

      // Stop, by keyboard, while a reply hangs
      await panel.focus(tid('composer-input'));
      await panel.fill(tid('composer-input'), 'Please keep talking.');
      await panel.keyboard.press('Enter');
      await panel.waitForSelector(`${tid('stop')}:not([hidden])`, { timeout: 15_000 });
      await waitForBubbles(panel, (b) => b.some((x) => x.streaming && x.text.length > 0), { what: 'streaming text' });
      await pressOn(panel, panel.locator(tid('stop')), 'Stop');
      await panel.waitForSelector(`${tid('stop')}[hidden]`, { state: 'attached', timeout: 15_000 });
      await waitForBubbles(panel, (b) => b.at(-1)?.role === 'assistant' && !b.at(-1).streaming, { what: 'the stopped reply settled' });
      await assertFocusKept(t, panel, 'Stop', ['composer-input', 'msg-regenerate']);
    });
  } finally {
    await mock.close();
  }
});

// ---------------------------------------------------------------------------------------------
// 3. Undo of a lower chat limit

function chatsDoc(n) {
  const now = Date.now();
  return {
    format: 'keepsake.sessions',
    version: 2,
    exportedAt: new Date(now).toISOString(),
    sessions: Array.from({ length: n }, (_, i) => ({
      id: `chat-${i + 1}`,
      name: `Chat ${i + 1}`,
      createdAt: now - (n - i) * 864e5,
      entries: [{ role: 'user', content: `Chat ${i + 1} question` }, { role: 'assistant', content: `Chat ${i + 1} answer` }],
    })),
    images: {},
  };
}

test('3: Options, a lower chat limit then Undo: the chats and the limit before it come back', { timeout: 90_000 }, async (t) => {
  await withKeepsake(t, {}, async (k) => {
    const opt = await k.openOptions();
    await ready(opt);
    await hostCall(opt, 'settings.set', { map: { maxSessions: 10 } });
    await hostCall(opt, 'storage.import', { document: chatsDoc(6) });
    await opt.reload();
    await ready(opt);
    assert.equal(await opt.inputValue(tid('max-sessions')), '10');

    await opt.fill(tid('max-sessions'), '3');
    await opt.click(tid('settings-save'));
    const confirm = opt.locator(`${tid('settings-confirm')} ${tid('confirm')}`);
    await confirm.waitFor({ timeout: 10_000 });
    await confirm.locator(tid('confirm-yes')).click();
    const notice = opt.locator(`${tid('settings-evicted')} ${tid('evicted-notice')}`);
    await notice.waitFor({ timeout: 10_000 });
    assert.equal(allSettings(k).maxSessions, 3);
    assert.equal(sessions(k).length, 3);

    await notice.locator(tid('evicted-undo')).click();
    await waitFor(() => sessions(k).length === 6, { timeoutMs: 10_000, what: 'the 3 chats restored' });
    assert.equal(trash(k).length, 0);
    await waitFor(() => allSettings(k).maxSessions === 10, { timeoutMs: 10_000, what: `maxSessions back to 10 (is ${allSettings(k).maxSessions})` });
    await waitFor(async () => ((await opt.inputValue(tid('max-sessions'))) === '10' ? true : null), { timeoutMs: 10_000, what: 'Options shows 10 again' });
  });
});
