// The transcript on a fake DOM: version controls on turns with other versions, the "Not answered"
// mark with Retry on the last message only, and the read-only earlier messages.

import { test, beforeEach, afterEach } from 'node:test';
import assert from 'node:assert/strict';
import { installFakeDom, byTestId, allByTestId } from '../test-support/fake-dom.js';
import { h } from '../lib/ui/dom.js';
import { createMessageList } from './messages.js';

let dom;
beforeEach(() => { dom = installFakeDom(); });
afterEach(() => dom.restore());

function setup() {
  const calls = [];
  const scroller = h('main', { class: 'scroller' });
  Object.assign(scroller, { scrollTop: 0, scrollHeight: 0, clientHeight: 0 });
  const earlierHost = h('div', { testid: 'earlier', hidden: true });
  const list = h('div', { testid: 'messages' });
  const streamHost = h('div', {});
  const emptyState = h('div', { testid: 'empty-state' });
  scroller.append(emptyState, earlierHost, list, streamHost);
  document.body.append(scroller);
  const rec = (name) => (...args) => calls.push([name, ...args.filter((a) => typeof a !== 'object' || a === null || !('isConnected' in a))]);
  const messages = createMessageList({
    list, streamHost, scroller, emptyState, earlierHost,
    images: { display: () => new Promise(() => {}) },
    actions: {
      onCopy: rec('copy'), onDelete: rec('delete'), onResend: async () => {}, onRegenerate: rec('regenerate'),
      onUndoAttach: rec('undoAttach'), onSeek: rec('seek'), loadInlineImages: async () => [],
      onSwitchVersion: rec('switch'), onRetry: rec('retry'), onLoadEarlier: () => calls.push(['loadEarlier']),
    },
  });
  return { messages, list, earlierHost, emptyState, calls };
}

const u = (id, text, extra = {}) => ({ role: 'user', content: text, entryId: id, ...extra });
const a = (id, text, extra = {}) => ({ role: 'assistant', content: text, entryId: id, ...extra });
const bubbleAt = (list, i) => list.querySelector(`[data-testid="bubble"][data-index="${i}"]`);

test('a turn with other versions shows ‹ n / m › and asks to switch', () => {
  const { messages, list, calls } = setup();
  const entries = [u('u1', 'Who kept the light?'), a('a1', 'Reply 2'), u('u2', 'When?'), a('a2', 'Reply')];
  messages.render(entries, { forks: [{ forkEntryId: 'u1', chosen: 2, versions: 2 }], offset: 0 });
  const turn = bubbleAt(list, 1);
  assert.equal(byTestId(turn, 'version-label').textContent, '2 / 2');
  assert.equal(byTestId(turn, 'version-label').getAttribute('aria-label'), 'Version 2 of 2');
  assert.equal(byTestId(turn, 'version-next').disabled, true, 'no later version');
  assert.equal(byTestId(turn, 'version-prev').getAttribute('aria-label'), 'Show version 1 of 2');
  assert.equal(allByTestId(list, 'versions').length, 1, 'only that turn');
  byTestId(turn, 'version-prev').click();
  assert.deepEqual(calls, [['switch', { forkEntryId: 'u1', chosen: 2, versions: 2 }, 1]]);
  assert.equal(messages.forkAt(1).chosen, 2);
  // the same entries with another chosen version: the controls follow, the bubbles stay
  const el = bubbleAt(list, 0);
  messages.render(entries, { forks: [{ forkEntryId: 'u1', chosen: 1, versions: 3 }], offset: 0 });
  assert.equal(bubbleAt(list, 0), el);
  assert.equal(byTestId(bubbleAt(list, 1), 'version-label').textContent, '1 / 3');
  assert.equal(byTestId(bubbleAt(list, 1), 'version-prev').disabled, true);
  messages.render(entries, { forks: [], offset: 0 });
  assert.equal(allByTestId(list, 'versions').length, 0);
});

test('Regenerate says the current reply is kept as a version; edit says so too', () => {
  const { messages, list } = setup();
  messages.render([u('u1', 'q'), a('a1', 'r')], { forks: [{ forkEntryId: 'u1', chosen: 3, versions: 3 }] });
  const regen = byTestId(bubbleAt(list, 1), 'msg-regenerate');
  assert.equal(regen.hidden, false);
  assert.match(regen.title, /kept as version 3/);
  byTestId(bubbleAt(list, 0), 'msg-edit').click();
  assert.equal(byTestId(bubbleAt(list, 0), 'edit-status').textContent, 'The current version is kept as version 1; switch back with ‹ ›.');
});

test('a message that was not answered is marked; Retry only on the last message', () => {
  const { messages, list, calls } = setup();
  const failed = { code: 'http_500', message: 'Mock error 500', at: 1 };
  messages.render([u('u1', 'first', { failed }), u('u2', 'second', { failed })]);
  const marks = allByTestId(list, 'failed-mark');
  assert.equal(marks.length, 2);
  assert.equal(marks[0].querySelector('.failed-text').textContent, 'Not answered: Mock error 500');
  assert.equal(bubbleAt(list, 0).dataset.failed, 'true');
  assert.equal(byTestId(bubbleAt(list, 0), 'retry').hidden, true, 'not on an earlier message');
  const retry = byTestId(bubbleAt(list, 1), 'retry');
  assert.equal(retry.hidden, false);
  retry.click();
  assert.deepEqual(calls, [['retry', 1]]);
  messages.startStream('s1');
  assert.equal(byTestId(bubbleAt(list, 1), 'retry').hidden, true, 'not while a reply is written');
  messages.endStream();
  // answered: the stamp is gone, so is the mark
  messages.render([u('u1', 'first', { failed }), u('u2', 'second'), a('a2', 'ok')]);
  assert.equal(allByTestId(list, 'failed-mark').length, 1);
  assert.equal(byTestId(bubbleAt(list, 0), 'retry').hidden, true);
});

test('earlier messages: a button with the count, then read-only bubbles above the window', () => {
  const { messages, earlierHost, emptyState, calls } = setup();
  messages.render([]);
  messages.setEarlier({ entries: [], from: 90, remaining: 90 });
  assert.equal(earlierHost.hidden, false);
  assert.equal(emptyState.hidden, true, 'a chat with earlier messages is not empty');
  const button = byTestId(earlierHost, 'earlier-messages');
  assert.equal(button.textContent, '90 earlier messages');
  button.click();
  assert.deepEqual(calls, [['loadEarlier']]);
  messages.setEarlier({ entries: [], from: 90, remaining: 90, loading: true });
  assert.equal(byTestId(earlierHost, 'earlier-messages').disabled, true);
  const attach = { role: 'user', content: '[Page context attached by Keepsake]\nURL: https://ex.com/\nTitle: Ex\nMode: readable\n---\n\nbody', attachId: 'at1', entryId: 'x0' };
  messages.setEarlier({ entries: [attach, u('e1', 'old question', { failed: { code: 'x', message: 'boom' } }), a('e2', 'old answer')], from: 87, remaining: 87 });
  assert.equal(byTestId(earlierHost, 'earlier-messages').textContent, '87 earlier messages');
  assert.equal(byTestId(earlierHost, 'earlier-head').textContent, 'Earlier messages · read-only');
  const olds = allByTestId(earlierHost, 'earlier-bubble');
  assert.deepEqual(olds.map((b) => b.dataset.position), ['88', '89']);
  for (const b of olds) {
    for (const id of ['msg-edit', 'msg-delete', 'msg-regenerate', 'retry']) assert.equal(byTestId(b, id), null, `${id} on an earlier message`);
    assert.ok(byTestId(b, 'msg-copy'), 'Copy stays');
  }
  assert.ok(byTestId(olds[0], 'failed-mark'), 'the mark is shown, without Retry');
  const chip = byTestId(earlierHost, 'earlier-chip');
  assert.equal(byTestId(chip, 'attach-undo'), null);
  assert.equal(allByTestId(earlierHost, 'bubble').length, 0, 'earlier bubbles are not live bubbles');
  messages.setEarlier({ entries: [], from: 0, remaining: 0 });
  assert.equal(earlierHost.hidden, true);
});

test('an attach chip links only to an http(s) page; any other address is shown as text (issue 30)', () => {
  const { messages, list } = setup();
  const attach = (id, url) => ({ role: 'user', content: `[Page context attached by Keepsake]\nURL: ${url}\nTitle: Page ${id}\nMode: readable\n---\n\nbody`, attachId: `at-${id}`, entryId: id });
  const urls = {
    ok: 'https://example.com/article?x=1',
    js: 'javascript:alert(document.cookie)',
    jsCase: 'JaVaScRiPt:alert(1)',
    file: 'file:///etc/passwd',
    data: 'data:text/html,<script>alert(1)</script>',
    vb: 'vbscript:msgbox(1)',
    chrome: 'chrome://settings/passwords',
    ext: 'chrome-extension://abcdefghijklmnop/options.html',
    blob: 'blob:https://evil.example/2b7f1c1e-0000-4000-8000-000000000000',
    tab: 'java\tscript:alert(1)',
  };
  const ids = Object.keys(urls);
  messages.render(ids.flatMap((id) => [attach(id, urls[id]), a(`r-${id}`, 'ok')]));
  const chips = allByTestId(list, 'attach-chip');
  assert.equal(chips.length, ids.length);
  chips.forEach((chip, i) => {
    const id = ids[i];
    const title = chip.querySelector('.chip-title');
    assert.equal(title.textContent, `Page ${id}`, id);
    if (id === 'ok') {
      assert.equal(title.localName, 'a');
      assert.equal(title.getAttribute('href'), urls.ok);
      assert.equal(title.getAttribute('rel'), 'noreferrer noopener');
    } else {
      assert.equal(title.localName, 'span', `${id}: shown as text`);
      assert.equal(title.getAttribute('href'), null, `${id}: no href`);
      assert.equal(chip.querySelector('a'), null, `${id}: no link in the chip`);
    }
  });
});
