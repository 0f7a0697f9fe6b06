// node --test extension/background/selection.test.js
//
// The context menu on selected text and the attach-page command (selection.js), with a fake
// chrome (contextMenus, sidePanel, scripting, storage.session) and a fake host that records what
// it is asked to attach. The real menu, panel and host: tests/e2e/reading.e2e.mjs (e), (f).

import { test } from 'node:test';
import assert from 'node:assert/strict';

import { fakeChrome, fakeEvent } from '../test-support/fakes.js';
import { ASK_ACTIONS, PENDING_ASK_KEY, PENDING_ASK_MAX_AGE_MS, MAX_QUOTE_CHARS, createSelectionActions, promptFor } from './selection.js';

function setup({ selection = 'Line one\nline two', scriptFails = false, panelFails = false, attachPage } = {}) {
  const base = fakeChrome();
  const log = [];
  const attached = [];
  const events = [];
  const menus = [];
  let clock = 1_000;
  const chrome = {
    ...base,
    runtime: { lastError: undefined },
    contextMenus: {
      removeAll: async () => {
        log.push('removeAll');
        menus.length = 0;
      },
      create: (props, done) => {
        menus.push(props);
        done();
      },
      onClicked: fakeEvent(),
    },
    sidePanel: {
      open: async (target) => {
        log.push(['open', target]);
        if (panelFails) throw new Error('sidePanel.open() may only be called in response to a user gesture.');
      },
    },
    scripting: {
      executeScript: async ({ target, func }) => {
        log.push(['script', target, func.name]);
        if (scriptFails) throw new Error('Cannot access a chrome:// URL');
        return [{ result: selection }];
      },
    },
  };
  const storage = {
    history: {
      attach: async (args) => {
        log.push('attach');
        attached.push(args);
        return { attachId: `att-${attached.length}`, index: 0, length: 1 };
      },
    },
  };
  const actions = createSelectionActions({
    storage,
    broadcast: (e) => events.push(e),
    attachPage: attachPage ?? (async () => assert.fail('no page attach expected')),
    chrome,
    language: () => 'fr-FR',
    now: () => clock,
  });
  return { actions, chrome, log, attached, events, menus, tick: (ms) => (clock += ms) };
}

const TAB = { id: 7, windowId: 3, url: 'https://user:pw@example.com/a?x=1', title: 'A page' };

test('the menu: a Keepsake parent with Ask Keepsake, Explain, Translate, Summarize on selections, Attach this PDF on PDF links', async () => {
  const s = setup();
  await s.actions.installMenus();
  await s.actions.installMenus(); // a second onInstalled replaces them
  assert.deepEqual(s.menus, [
    { id: 'keepsake', title: 'Keepsake', contexts: ['selection', 'link'] },
    ...ASK_ACTIONS.map((a) => ({ id: `keepsake-${a.id}`, parentId: 'keepsake', title: a.title, contexts: ['selection'] })),
    { id: 'keepsake-pdf-link', parentId: 'keepsake', title: 'Attach this PDF', contexts: ['link'], targetUrlPatterns: ['*://*/*.pdf', '*://*/*.pdf?*', '*://*/*.pdf#*', '*://*/*.PDF', '*://*/*.PDF?*'] },
  ]);
  assert.deepEqual(ASK_ACTIONS.map((a) => a.title), ['Ask Keepsake', 'Explain', 'Translate', 'Summarize']);
});

test('Explain: the panel opens first (in the gesture), the page\'s selection is attached as a quote, the prompt waits for the panel', async () => {
  const s = setup();
  const ask = await s.actions.clicked({ menuItemId: 'keepsake-explain', selectionText: 'Line one line two', frameId: 2 }, TAB);
  assert.deepEqual(s.log[0], ['open', { windowId: 3 }], 'sidePanel.open is the first call');
  assert.deepEqual(s.log[1], ['script', { tabId: 7, frameIds: [2] }, 'readSelection'], 'the selection is read in its frame');
  assert.deepEqual(s.attached, [
    { ctx: { url: 'https://example.com/a?x=1', title: 'A page', mode: 'selection', header: 'Quoted: the text the reader selected\n', body: 'Line one\nline two' } },
  ]);
  assert.deepEqual(ask, { attachId: 'att-1', action: 'explain', prompt: 'Explain the quoted text.', chars: 17, title: 'A page', at: 1_000 });
  assert.deepEqual(s.chrome.sessionData.get(PENDING_ASK_KEY), ask, 'kept for a panel that is still opening');
  assert.deepEqual(s.events, [{ type: 'chat.ask' }]);
  assert.deepEqual(await s.actions.takeAsk(), ask);
  assert.equal(await s.actions.takeAsk(), null, 'taken once');
  assert.equal(s.chrome.sessionData.has(PENDING_ASK_KEY), false);
});

test('a page the extension may not script: the menu\'s own copy of the selection; a panel that did not open is not an error', async () => {
  const s = setup({ scriptFails: true, panelFails: true });
  const ask = await s.actions.clicked({ menuItemId: 'keepsake-translate', selectionText: '  Bonjour  ' }, TAB);
  assert.equal(s.attached[0].ctx.body, 'Bonjour');
  assert.equal(ask.prompt, 'Translate the quoted text into French.');
});

test('a pending ask survives a worker restart (storage.session) and is dropped when the panel never took it', async () => {
  const s = setup();
  await s.actions.clicked({ menuItemId: 'keepsake-summarize' }, TAB);
  const again = createSelectionActions({ storage: {}, broadcast: () => {}, attachPage: async () => {}, chrome: s.chrome, now: () => 1_000 + 10 });
  assert.equal((await again.takeAsk()).prompt, 'Summarize the quoted text.');
  await s.actions.clicked({ menuItemId: 'keepsake-ask' }, TAB);
  s.tick(PENDING_ASK_MAX_AGE_MS + 1);
  assert.equal(await s.actions.takeAsk(), null);
  assert.equal(s.chrome.sessionData.has(PENDING_ASK_KEY), false, 'and forgotten');
});

test('a restore (changed with areas.restored) drops the pending ask: its quote was in the database put aside', async () => {
  const listeners = [];
  const events = { on: (name, fn) => { if (name === 'changed') listeners.push(fn); } };
  const s = setup();
  const actions = createSelectionActions({ storage: {}, broadcast: () => {}, attachPage: async () => {}, chrome: s.chrome, now: () => 1_000, events });
  await s.actions.clicked({ menuItemId: 'keepsake-explain' }, TAB);
  for (const fn of listeners) fn({ event: 'changed', seq: 3, areas: { history: true } });
  await new Promise((r) => setImmediate(r));
  assert.equal(s.chrome.sessionData.has(PENDING_ASK_KEY), true, 'an ordinary change keeps it');
  for (const fn of listeners) fn({ event: 'changed', seq: 4, areas: { restored: true } });
  await new Promise((r) => setImmediate(r));
  assert.equal(s.chrome.sessionData.has(PENDING_ASK_KEY), false);
  assert.equal(await actions.takeAsk(), null);
});

test('not ours, or nothing selected: nothing attached', async () => {
  const s = setup({ selection: '   ' });
  assert.equal(await s.actions.clicked({ menuItemId: 'other-extension-item' }, TAB), null);
  assert.equal(await s.actions.clicked({ menuItemId: 'keepsake-ask', selectionText: '' }, TAB), null);
  assert.deepEqual(s.attached, []);
  assert.deepEqual(s.events, []);
});

test('a very long selection is quoted up to MAX_QUOTE_CHARS', async () => {
  const s = setup({ selection: 'x'.repeat(MAX_QUOTE_CHARS + 10) });
  await s.actions.clicked({ menuItemId: 'keepsake-ask' }, TAB);
  assert.equal(s.attached[0].ctx.body.length, MAX_QUOTE_CHARS);
});

test('prompts: Ask leaves the composer to the reader; Translate names the reader\'s language', () => {
  assert.equal(promptFor('ask', 'en'), '');
  assert.equal(promptFor('translate', 'de'), 'Translate the quoted text into German.');
  assert.equal(promptFor('translate', ''), 'Translate the quoted text into English.');
  assert.equal(promptFor('translate', 'not a tag!'), 'Translate the quoted text into English.');
  assert.equal(promptFor('translate', 'zh-TW'), 'Translate the quoted text into Chinese (Taiwan).');
});

test('the attach-page command opens the panel and attaches the tab; the panel hears how it went', async () => {
  const calls = [];
  let fail = false;
  const s = setup({
    attachPage: async (args) => {
      calls.push(args);
      if (fail) throw Object.assign(new Error('The browser does not let extensions read its own chrome:// pages.'), { code: 'page_unreadable' });
      return { title: 'A page', chars: 1234, summarized: false };
    },
  });
  assert.equal(await s.actions.command('something-else', TAB), null);
  await s.actions.command('attach-page', TAB);
  assert.deepEqual(s.log[0], ['open', { windowId: 3 }]);
  assert.deepEqual(calls, [{ tabId: 7 }]);
  assert.deepEqual(s.events, [{ type: 'chat.attached', title: 'A page', chars: 1234, summarized: false, figures: 0, duplicate: false }]);
  fail = true;
  await s.actions.command('attach-page', TAB);
  assert.deepEqual(s.events[1], { type: 'chat.attached', error: { code: 'page_unreadable', message: 'The browser does not let extensions read its own chrome:// pages.' } });
});

test('Attach this PDF on a link: the panel opens, the link is read as a PDF, the panel hears how it went', async () => {
  const links = [];
  const attachPage = Object.assign(async () => assert.fail('not the tab'), {
    pdfLink: async (args) => {
      links.push(args);
      return { title: 'Paper', chars: 5000, summarized: false, figures: 2 };
    },
  });
  const s = setup({ attachPage });
  await s.actions.clicked({ menuItemId: 'keepsake-pdf-link', linkUrl: 'https://example.com/p.pdf' }, TAB);
  assert.deepEqual(s.log[0], ['open', { windowId: 3 }]);
  // the page the link is on goes along: lib/page-fetch.js sends cookies only to its origin
  assert.deepEqual(links, [{ url: 'https://example.com/p.pdf', title: '', tabUrl: TAB.url }]);
  assert.deepEqual(s.events, [{ type: 'chat.attached', title: 'Paper', chars: 5000, summarized: false, figures: 2, duplicate: false }]);
});
