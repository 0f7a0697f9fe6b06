// The chats drawer on a fake DOM and an in-memory host (test-support/fake-dom.js, fake-keeps.js):
// Name and Pin of the current chat, deleting the loaded chat, Clear all, the Recently deleted view
// (restore, delete for good, empty), and imports that ask before taking any setting.

import { test, beforeEach, afterEach } from 'node:test';
import assert from 'node:assert/strict';
import { installFakeDom, fire, byTestId, allByTestId } from '../test-support/fake-dom.js';
import { fakeKeeps } from '../test-support/fake-keeps.js';
import { flush } from '../test-support/fakes.js';
import { h } from '../lib/ui/dom.js';
import { useLocale } from '../lib/i18n.js';
import { createDrawer } from './drawer.js';

let dom;
beforeEach(() => { dom = installFakeDom(); });
afterEach(() => { dom.restore(); delete globalThis.FileReader; useLocale('en'); });

/** The drawer's markup as sidepanel.html has it (same data-testids). */
function skeleton() {
  const btn = (testid, text, extra = {}) => h('button', { type: 'button', class: 'btn btn-small', testid, ...extra }, h('span', { class: 'label', text }));
  const el = h('aside', { class: 'drawer', testid: 'drawer', hidden: true },
    h('div', { class: 'drawer-head' }, h('h2', { testid: 'drawer-title', text: 'Chats' }), h('button', { type: 'button', testid: 'drawer-close' })),
    h('div', { class: 'drawer-search', testid: 'drawer-search' }, h('input', { type: 'search', testid: 'session-search' })),
    h('div', { class: 'drawer-tools', testid: 'drawer-tools' },
      btn('name-session', 'Name'), btn('pin-session', 'Pin', { 'aria-pressed': 'false' }), btn('export-all-json', 'Export all'),
      btn('import-json-button', 'Import'), h('input', { type: 'file', testid: 'import-json' }),
      btn('trash-toggle', 'Recently deleted', { 'aria-pressed': 'false' }), btn('clear-all', 'Clear all')),
    h('div', { class: 'drawer-status', testid: 'drawer-status', hidden: true }),
    h('p', { class: 'session-total', testid: 'session-total', hidden: true }),
    h('ul', { class: 'session-list', testid: 'session-list' }),
    h('section', { class: 'trash-view', testid: 'trash-view', hidden: true },
      h('div', { class: 'trash-head' }, h('p', { testid: 'trash-hint' }), btn('trash-empty', 'Empty trash')),
      h('ul', { class: 'session-list trash-list', testid: 'trash-list' })));
  const toggle = h('button', { type: 'button', testid: 'drawer-toggle' });
  document.body.append(toggle, el);
  return { el, toggle };
}

/** Let the drawer's awaits settle (several rounds: list, act, list again). */
async function settle(n = 6) {
  for (let i = 0; i < n; i++) await flush();
}

function setup(host, { activeId = '', activeName = '' } = {}) {
  const { el, toggle } = skeleton();
  const changes = [];
  const loads = [];
  let active = activeId;
  const drawer = createDrawer({
    el, toggleButton: toggle, storage: host.storage,
    onLoad: async (id) => { loads.push(id); },
    report: (err, what) => `${what}: ${err.message}`,
    getActiveId: () => active,
    getActiveName: () => activeName,
    getBgOrigins: () => new Set(),
    onChanged: (c) => { changes.push(c); if (c.deletedActive) active = ''; },
  });
  const $ = (id) => byTestId(el, id);
  return { el, drawer, $, changes, loads, setActive: (id) => { active = id; } };
}

const statusText = (el) => byTestId(el, 'drawer-status').textContent;

test('the list shows every chat; the empty state no longer speaks of saving', async () => {
  const host = fakeKeeps();
  const { drawer, $ } = setup(host);
  drawer.open();
  await settle();
  const empty = $('session-empty');
  assert.equal(empty.textContent, 'No chats yet. Every chat you start is kept here.');
  assert.doesNotMatch(empty.textContent, /Save/);
  assert.equal($('name-session').disabled, true, 'nothing to name without a current chat');
  assert.equal($('pin-session').disabled, true);
});

test('Name renames the current chat (no snapshot, no save); Pin pins it', async () => {
  const host = fakeKeeps({ sessions: [{ id: 's1', name: 'First words' }, { id: 's2', name: 'Other' }], activeSessionId: 's1' });
  const { el, drawer, $, changes } = setup(host, { activeId: 's1' });
  drawer.open();
  await settle();
  assert.equal($('name-session').disabled, false);
  $('name-session').click();
  const input = $('name-input');
  assert.equal(input.value, 'First words', 'starts from the current name');
  input.value = 'Lighthouse trip';
  fire($('name-form'), 'submit');
  await settle();
  assert.deepEqual(host.calls.filter((c) => c.op === 'sessions.rename').map((c) => c.args), [{ id: 's1', name: 'Lighthouse trip' }]);
  assert.equal(host.calls.some((c) => c.op === 'sessions.save'), false, 'Name never makes a snapshot');
  assert.equal($('name-result').textContent, 'Named this chat “Lighthouse trip”.');
  assert.deepEqual(changes, [{ renamed: 's1' }]);
  assert.equal($('name-form'), null);

  $('pin-session').click();
  await settle();
  assert.deepEqual(host.calls.filter((c) => c.op === 'sessions.pin').map((c) => c.args), [{ id: 's1', pinned: true }]);
  assert.equal($('pin-result').textContent, 'Pinned “Lighthouse trip”.');
  assert.equal($('pin-session').getAttribute('aria-pressed'), 'true');
  assert.equal($('pin-session').textContent, 'Unpin');
  const current = el.querySelector('[data-testid="session-row"][data-id="s1"]');
  assert.equal(current.dataset.pinned, 'true');
  assert.equal(current.dataset.active, 'true');
});

test('Name with a blank name says so and renames nothing', async () => {
  const host = fakeKeeps({ sessions: [{ id: 's1', name: 'A' }] });
  const { drawer, $ } = setup(host, { activeId: 's1' });
  drawer.open();
  await settle();
  $('name-session').click();
  $('name-input').value = '   ';
  fire($('name-form'), 'submit');
  await settle();
  assert.equal($('rename-error').textContent, 'A chat name cannot be blank.');
  assert.equal(host.calls.some((c) => c.op === 'sessions.rename'), false);
});

test('deleting the loaded chat asks, moves it to Recently deleted, tells the panel, and Undo restores it', async () => {
  const host = fakeKeeps({ sessions: [{ id: 's1', name: 'Loaded', pinned: true }, { id: 's2', name: 'Other' }], activeSessionId: 's1' });
  const { el, drawer, $, changes } = setup(host, { activeId: 's1' });
  drawer.open();
  await settle();
  const row = el.querySelector('[data-testid="session-row"][data-id="s1"]');
  byTestId(row, 'session-delete').click();
  const confirm = byTestId(row, 'confirm');
  assert.match(confirm.textContent, /Delete “Loaded”\? It goes to Recently deleted\./);
  assert.equal(host.calls.some((c) => c.op === 'sessions.delete'), false, 'nothing before the answer');
  byTestId(confirm, 'confirm-yes').click();
  await settle();
  assert.deepEqual(host.calls.filter((c) => c.op === 'sessions.delete').map((c) => c.args), [{ id: 's1' }]);
  assert.deepEqual(changes, [{ deletedActive: 's1' }], 'the panel re-reads the (now empty) live chat');
  assert.equal($('delete-result').textContent, 'Moved “Loaded” to Recently deleted.');
  assert.deepEqual(allByTestId(el, 'session-row').map((r) => r.dataset.id), ['s2']);
  assert.equal(host.calls.some((c) => c.op === 'sessions.save' || c.op === 'history.setBinding'), false, 'nothing re-saves it');

  $('delete-undo').click();
  await settle();
  assert.deepEqual(host.calls.filter((c) => c.op === 'trash.restore').map((c) => c.args), [{ id: 's1' }]);
  assert.equal($('trash-result').textContent, 'Restored “Loaded”.');
  const back = el.querySelector('[data-testid="session-row"][data-id="s1"]');
  assert.ok(back, 'back in the list');
  assert.equal(back.dataset.pinned, 'true', 'with its pin');
});

test('Clear all asks first and says where the chats go', async () => {
  const host = fakeKeeps({ sessions: [{ id: 'a', name: 'A' }, { id: 'b', name: 'B', pinned: true }] });
  const { el, drawer, $, changes } = setup(host, { activeId: 'a' });
  drawer.open();
  await settle();
  $('clear-all').click();
  const confirm = byTestId(el, 'confirm');
  assert.equal(confirm.querySelector('span').textContent, 'Move all 2 chats, pinned ones included, to Recently deleted? The current chat empties.');
  assert.equal(host.calls.some((c) => c.op === 'sessions.clearAll'), false);
  byTestId(confirm, 'confirm-yes').click();
  await settle();
  assert.equal($('clear-result').textContent, 'Moved 2 chats to Recently deleted.');
  assert.deepEqual(changes, [{ deletedActive: 'a' }]);
  assert.equal(host.state.trash.length, 2);
});

test('Recently deleted lists items in words, restores, deletes for good (asking) and empties (asking)', async () => {
  const now = Date.now();
  const host = fakeKeeps({
    sessions: [{ id: 'live', name: 'Live' }],
    trashDays: 30,
    trash: [
      { id: 't1', kind: 'session', name: 'Old trip', reason: 'evicted', trashedAt: now - 3600e3, expiresAt: now + 29.5 * 864e5, entryCount: 4, createdAt: now - 864e6, pinned: true },
      { id: 't2', kind: 'entries', name: 'Which tide?', reason: 'edited', trashedAt: now - 60e3, expiresAt: now + 30 * 864e5 - 60e3, entryCount: 2, createdAt: now, pinned: false, from: { sessionId: 'live', sessionName: 'Live', position: 3 } },
      { id: 't3', kind: 'session', name: 'Scratch', reason: 'deleted', trashedAt: now - 10e3, expiresAt: now + 30 * 864e5, entryCount: 1, createdAt: now, pinned: false },
    ],
  });
  const { el, drawer, $ } = setup(host);
  drawer.open();
  await settle();
  $('trash-toggle').click();
  await settle();
  assert.equal($('trash-toggle').getAttribute('aria-pressed'), 'true');
  assert.equal($('trash-view').hidden, false);
  assert.equal($('session-list').hidden, true);
  assert.equal($('drawer-title').textContent, 'Recently deleted');
  assert.equal($('clear-all').hidden, true, 'chat tools are hidden in the trash view');
  assert.match($('trash-hint').textContent, /stay here for 30 days/);
  const rows = allByTestId(el, 'trash-row');
  assert.deepEqual(rows.map((r) => r.dataset.id), ['t1', 't2', 't3']);
  assert.equal(byTestId(rows[0], 'trash-name').textContent, 'Old trip');
  assert.equal(byTestId(rows[0], 'trash-reason').textContent, 'Moved out by the chat limit · 4 messages');
  assert.match(byTestId(rows[0], 'trash-when').textContent, /^Deleted .+ · Gone for good in 30 days$/);
  assert.equal(byTestId(rows[0], 'trash-from'), null);
  assert.equal(byTestId(rows[1], 'trash-reason').textContent, 'Replaced by an edit · 2 messages');
  assert.equal(byTestId(rows[1], 'trash-from').textContent, 'From “Live”, message 4');

  // restore
  byTestId(rows[0], 'trash-restore').click();
  await settle();
  assert.deepEqual(host.calls.filter((c) => c.op === 'trash.restore').map((c) => c.args), [{ id: 't1' }]);
  assert.equal($('trash-result').textContent, 'Restored “Old trip”.');
  assert.deepEqual(allByTestId(el, 'trash-row').map((r) => r.dataset.id), ['t2', 't3']);
  assert.ok(host.state.sessions.some((s) => s.id === 't1' && s.pinned), 'back with its pin');

  // delete for good asks first
  const t2 = allByTestId(el, 'trash-row')[0];
  byTestId(t2, 'trash-purge').click();
  assert.equal(host.calls.some((c) => c.op === 'trash.purge'), false);
  const confirm = byTestId(t2, 'confirm');
  assert.match(confirm.textContent, /Delete “Which tide\?” for good\? This cannot be undone\./);
  byTestId(confirm, 'confirm-yes').click();
  await settle();
  assert.deepEqual(host.calls.filter((c) => c.op === 'trash.purge').map((c) => c.args), [{ id: 't2' }]);
  assert.deepEqual(allByTestId(el, 'trash-row').map((r) => r.dataset.id), ['t3']);

  // empty trash asks first
  $('trash-empty').click();
  const box = byTestId($('trash-view'), 'confirm');
  assert.match(box.textContent, /Delete all 1 item in Recently deleted for good\?/);
  byTestId(box, 'confirm-yes').click();
  await settle();
  assert.deepEqual(host.calls.filter((c) => c.op === 'trash.purge').map((c) => c.args), [{ id: 't2' }, { all: true }]);
  assert.equal($('trash-none').textContent, 'Nothing here.');
  assert.equal($('trash-empty').disabled, true);

  // back to the chats
  $('trash-toggle').click();
  await settle();
  assert.equal($('trash-view').hidden, true);
  assert.equal($('session-list').hidden, false);
  assert.deepEqual(allByTestId(el, 'session-row').map((r) => r.dataset.id).sort(), ['live', 't1']);
});

function fakeFile(name, obj) {
  const text = JSON.stringify(obj);
  globalThis.FileReader = class {
    readAsText(file) { this.result = file.text; setTimeout(() => this.onload(), 0); }
  };
  return { name, size: text.length, text };
}

async function importFileInto(ctx, file) {
  const input = ctx.$('import-json');
  input.files = [file];
  fire(input, 'change');
  await settle(4);
  await new Promise((r) => setTimeout(r, 5));
  await settle(4);
}

test('Import of a file without settings imports at once with settings "none"', async () => {
  const host = fakeKeeps({ preview: { sessionsNew: 2, sessionsSkipped: 0, liveEntries: 0, settings: [], settingsInvalid: 0, warnings: [] }, importResult: { sessionsImported: 2, sessionsSkipped: 0, settingsImported: 0, settingsSkipped: 0, live: 'absent', imagesStored: 0, overCap: 0, warnings: [] } });
  const ctx = setup(host);
  ctx.drawer.open();
  await settle();
  await importFileInto(ctx, fakeFile('export.json', { format: 'keepsake.sessions', version: 2, sessions: [] }));
  assert.deepEqual(host.ops().filter((o) => o.startsWith('storage.')), ['storage.importPreview', 'storage.import']);
  assert.equal(host.calls.find((c) => c.op === 'storage.import').args.settings, 'none');
  assert.equal(ctx.$('import-confirm'), null, 'nothing to ask');
  assert.match(ctx.$('import-result').textContent, /Imported export\.json\./);
});

const SETTINGS_PREVIEW = {
  sessionsNew: 1, sessionsSkipped: 0, liveEntries: 3, settingsInvalid: 0, warnings: [],
  settings: [
    { key: 'maxSessions', value: 2, current: 'absent' },
    { key: 'systemPrompt', value: 'Always answer in French.', current: 'different' },
    { key: 'providers', value: [{ id: 'p', name: 'Evil', kind: 'chat', baseUrl: 'https://evil.example/v1', apiKey: '••••abcd', model: 'm' }], current: 'absent' },
  ],
};

test('Import of a file with settings asks; "Import chats only" takes none of them', async () => {
  const host = fakeKeeps({ preview: SETTINGS_PREVIEW });
  const ctx = setup(host);
  ctx.drawer.open();
  await settle();
  await importFileInto(ctx, fakeFile('crafted.json', { maxSessions: 2 }));
  const box = ctx.$('import-confirm');
  assert.ok(box, 'the import asks first');
  assert.equal(host.ops().includes('storage.import'), false, 'nothing imported before the answer');
  const items = allByTestId(box, 'import-setting');
  assert.deepEqual(items.map((li) => li.dataset.key), ['maxSessions', 'systemPrompt', 'providers']);
  assert.match(items[0].textContent, /maxSessions 2 \(new\)/);
  assert.match(items[1].textContent, /differs from yours \(yours stays\)/);
  assert.match(items[2].textContent, /••••abcd/, 'the key is shown masked');
  assert.doesNotMatch(box.textContent, /sk-/);
  assert.match(box.textContent, /1 new chat, a current chat of 3 messages/);
  byTestId(box, 'import-chats-only').click();
  await settle();
  assert.deepEqual(host.calls.filter((c) => c.op === 'storage.import').map((c) => c.args.settings), ['none']);
  assert.equal(ctx.$('import-confirm'), null);
});

test('Import with settings: "these settings" sends keep, "replace" overwrite, Cancel imports nothing', async () => {
  for (const [button, expected] of [['import-with-settings', ['keep']], ['import-replace-settings', ['overwrite']], ['import-cancel', []]]) {
    dom.restore();
    dom = installFakeDom();
    const host = fakeKeeps({ preview: SETTINGS_PREVIEW });
    const ctx = setup(host);
    ctx.drawer.open();
    await settle();
    await importFileInto(ctx, fakeFile('crafted.json', { maxSessions: 2 }));
    byTestId(ctx.$('import-confirm'), button).click();
    await settle();
    assert.deepEqual(host.calls.filter((c) => c.op === 'storage.import').map((c) => c.args.settings), expected, button);
    if (button === 'import-cancel') assert.match(ctx.$('import-result').textContent, /cancelled; nothing was changed/);
  }
});

test("pinning a row keeps the focus on that row's pin, and Escape still closes the drawer", async () => {
  const host = fakeKeeps({ sessions: [{ id: 's1', name: 'A' }, { id: 's2', name: 'B' }] });
  const { el, drawer } = setup(host);
  drawer.open();
  await settle();
  const pinOf = (id) => el.querySelector(`[data-testid="session-row"][data-id="${id}"] [data-testid="session-pin"]`);
  pinOf('s2').focus();
  pinOf('s2').click();
  await settle();
  assert.deepEqual(host.calls.filter((c) => c.op === 'sessions.pin').map((c) => c.args), [{ id: 's2', pinned: true }]);
  assert.equal(document.activeElement, pinOf('s2'), 'the rebuilt row\'s pin has the focus');
  assert.equal(pinOf('s2').getAttribute('aria-pressed'), 'true');
  fire(document.activeElement, 'keydown', { key: 'Escape' });
  assert.equal(el.hidden, true, 'Escape closes the drawer');

  // focus that fell to <body> while the drawer is open: Escape is still heard
  drawer.open();
  await settle();
  document.activeElement.blur();
  assert.equal(document.activeElement, document.body);
  fire(document.body, 'keydown', { key: 'Escape' });
  assert.equal(el.hidden, true);
});

test('each chat names its export formats (MD, JSON) instead of a "{ }" icon', async () => {
  const host = fakeKeeps({ sessions: [{ id: 's1', name: 'A' }] });
  const { el, drawer } = setup(host);
  drawer.open();
  await settle();
  const row = el.querySelector('[data-testid="session-row"][data-id="s1"]');
  const md = byTestId(row, 'export-md');
  const json = byTestId(row, 'export-json');
  assert.equal(md.textContent, 'MD');
  assert.equal(md.getAttribute('aria-label'), 'Export as Markdown');
  assert.equal(json.textContent, 'JSON');
  assert.equal(json.getAttribute('title'), 'Export as JSON (everything, to import again)');
  assert.ok(![...row.querySelectorAll('button')].some((b) => b.textContent.includes('{ }')));
});

test('renaming a chat in the list gives the name field the row: the row buttons step aside until done', async () => {
  const host = fakeKeeps({ sessions: [{ id: 's1', name: 'A' }] });
  const { el, drawer } = setup(host);
  drawer.open();
  await settle();
  const row = () => el.querySelector('[data-testid="session-row"][data-id="s1"]');
  byTestId(row(), 'session-rename').click();
  assert.ok(byTestId(row(), 'session-rename-input'));
  assert.equal(row().querySelector('.session-actions').hidden, true, 'pin, rename, export and delete are out of the way');
  byTestId(row(), 'session-rename-cancel').click();
  assert.equal(byTestId(row(), 'session-rename-input'), null);
  assert.equal(row().querySelector('.session-actions').hidden, false);
});

/** `n` chats, newest first: c000 is the newest. */
const many = (n, name = (i) => `chat ${i}`) => Array.from({ length: n }, (_, i) => ({ id: `c${String(i).padStart(3, '0')}`, name: name(i) }));
const shownIds = (el) => allByTestId(el, 'session-row').map((li) => li.dataset.id);

test('the drawer shows a page, its total, and the next page on Show more; actions keep the rows shown', async () => {
  const host = fakeKeeps({ sessions: many(120), activeSessionId: 'c110' });
  const { el, drawer, $ } = setup(host, { activeId: 'c110' });
  drawer.open();
  await settle();
  assert.equal(shownIds(el).length, 50);
  assert.equal($('session-total').textContent, '120 chats');
  assert.equal($('session-total').hidden, false);
  assert.equal($('session-more').textContent, 'Show more (70 more)');
  assert.deepEqual(host.calls.filter((c) => c.op === 'sessions.list').map((c) => c.args), [{ limit: 50 }]);
  $('session-more').click();
  await settle();
  assert.deepEqual(shownIds(el), many(100).map((s) => s.id), 'the second page follows the first, once');
  $('session-more').click();
  await settle();
  assert.equal(shownIds(el).length, 120);
  assert.equal($('session-more'), null, 'the last page: nothing more to show');

  // pinning a row far down reads the list anew as long as it was (the rows stay shown)
  const far = el.querySelector('[data-testid="session-row"][data-id="c115"]');
  byTestId(far, 'session-pin').click();
  await settle();
  assert.equal(shownIds(el)[0], 'c115', 'pinned first');
  assert.equal(shownIds(el).length, 120);
  // Pin of the current chat finds it among the rows shown; Export all takes every chat
  $('pin-session').click();
  await settle();
  assert.deepEqual(host.calls.filter((c) => c.op === 'sessions.pin').at(-1).args, { id: 'c110', pinned: true });
});

test('a search shows how many it found; a stale page is dropped; Export all exports every chat', async () => {
  const host = fakeKeeps({ sessions: many(75, (i) => (i % 3 === 0 ? `whale ${i}` : `chat ${i}`)) });
  const { el, drawer, $ } = setup(host);
  drawer.open();
  await settle();
  assert.equal($('session-total').textContent, '75 chats');
  // a Show more still running when the search is typed: its page never lands in the search
  $('session-more').click();
  $('session-search').value = 'WHALE';
  fire($('session-search'), 'keydown', { key: 'Enter' });
  await settle(10);
  assert.equal($('session-total').textContent, '25 found');
  assert.equal(shownIds(el).length, 25);
  assert.ok(shownIds(el).every((id) => Number(id.slice(1)) % 3 === 0), 'only the search\'s rows');
  assert.equal($('session-more'), null);
  $('session-search').value = 'zeppelin';
  fire($('session-search'), 'keydown', { key: 'Enter' });
  await settle();
  assert.equal($('session-total').textContent, '0 found');
  $('session-search').value = '';
  fire($('session-search'), 'keydown', { key: 'Enter' });
  await settle();
  $('export-all-json').click();
  await settle();
  const exported = host.calls.filter((c) => c.op === 'sessions.export');
  assert.equal(exported.length, 1);
  assert.equal(exported[0].args.ids.length, 75, 'every chat, not only the page shown');
});

test('Pin of a current chat not among the rows shown looks the chat up by id', async () => {
  const host = fakeKeeps({ sessions: many(60), activeSessionId: 'c059' });
  const { drawer, $ } = setup(host, { activeId: 'c059' });
  drawer.open();
  await settle();
  $('pin-session').click();
  await settle();
  assert.deepEqual(host.calls.filter((c) => c.op === 'sessions.get').map((c) => c.args), [{ id: 'c059', limit: 0, images: 'ref' }]);
  assert.deepEqual(host.calls.filter((c) => c.op === 'sessions.pin').map((c) => c.args), [{ id: 'c059', pinned: true }]);
});

test('a chat started on another device says "from <device name>" inside its row\'s button (issue 31), in every language', async () => {
  const desk = { id: '9a71d3c4-0000-4000-8000-000000000002', name: 'ana-desktop' };
  const host = fakeKeeps({ sessions: [
    { id: 's1', name: 'Lighthouse log', device: desk },
    { id: 's2', name: 'Written here' },
    { id: 's3', name: 'Unnamed device', device: { id: '5b22e0f1-0000-4000-8000-000000000003', name: '' } },
  ] });
  const { el, drawer } = setup(host);
  drawer.open();
  await settle();
  const row = (id) => allByTestId(el, 'session-row').find((r) => r.dataset.id === id);
  const mark = byTestId(row('s1'), 'session-device');
  assert.equal(mark.textContent, 'from ana-desktop');
  assert.equal(mark.dataset.deviceId, desk.id);
  const name = mark.querySelector('.device-name');
  assert.equal(name.textContent, 'ana-desktop');
  assert.equal(name.getAttribute('translate'), 'no', 'the device\'s name is the person\'s, not the UI\'s words');
  // inside the row's one button: read with the row by a screen reader, reached by the row's Tab stop
  const button = byTestId(row('s1'), 'session-load');
  assert.ok(button.contains(mark), 'part of the load button');
  assert.match(button.textContent, /Lighthouse log.* · from ana-desktop$/);
  assert.equal(byTestId(row('s2'), 'session-device'), null, 'a chat started here has no mark');
  assert.equal(byTestId(row('s3'), 'session-device').textContent, 'from 5b22e0f1', 'no name: the start of the id');

  for (const [loc, want] of [['zh_CN', '来自 ana-desktop'], ['pt_BR', 'de ana-desktop']]) {
    useLocale(loc);
    drawer.rerender();
    assert.equal(byTestId(row('s1'), 'session-device').textContent, want, loc);
  }
});
