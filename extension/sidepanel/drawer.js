// Chats drawer. Every chat is kept from its first message (docs/keeps.md "auto-keep"), so the
// drawer lists them all: search with content-match hint and highlighted snippet, load, rename, pin,
// delete (to Recently deleted), clear all (to Recently deleted), Name and Pin for the current chat,
// export (Markdown / JSON), import (asks before taking any setting: import-confirm.js), and the
// "Recently deleted" view: the trash, with Restore, Delete for good and Empty trash.

import { t, formatNumber } from '../lib/i18n.js';
import { h, icon, iconButton, replaceChildren, debounce, downloadText, readAsText, tNodes } from '../lib/ui/dom.js';
import { highlightSegments, normalizeQuery } from './snippet.js';
import { exportFilename, safeFilename, mimeForFormat } from './export-name.js';
import { describeImportResult, formatWhen } from '../lib/ui/format.js';
import { trashRowText, messagesText } from '../lib/ui/keeps.js';
import { askImportSettings, importWithPreview } from '../lib/ui/import-confirm.js';
import { listAllSessions, LIST_PAGE_MAX } from '../lib/storage.js';

/** Rows the drawer asks the host for at a time (`sessions.list` `limit`). */
export const DRAWER_PAGE = 50;

// Larger files go to the host in pieces (lib/import-pieces.js); past this the side panel would
// hold the file's text and its parsed copy at once, so the terminal is the better way in.
const MAX_IMPORT_BYTES = 512 * 1024 * 1024;

function highlighted(text, query, cls) {
  return h('span', { class: cls }, highlightSegments(text, query).map((s) => (s.match ? h('mark', { text: s.text }) : document.createTextNode(s.text))));
}

/**
 * "from <device name>" for a chat started on another device (`sessions.list` row `device`, issue
 * 31): text inside the row's button, so it is part of what a screen reader says for the row and
 * needs no focus of its own; the name is the person's own, marked translate="no".
 */
export function deviceMark(row) {
  const d = row?.device;
  if (!d || typeof d !== 'object') return null;
  const name = typeof d.name === 'string' && d.name.trim() ? d.name.trim() : typeof d.id === 'string' ? d.id.slice(0, 8) : '';
  if (!name) return null;
  return h('span', { class: 'session-device', testid: 'session-device', dataset: { deviceId: typeof d.id === 'string' ? d.id : undefined } },
    tNodes('drawerFromDevice', h('span', { class: 'device-name', translate: 'no', text: name })));
}

const chats = (n) => (n === 1 ? t('drawerChatsOne') : t('drawerChatsMany', formatNumber(n)));
const found = (n) => (n === 1 ? t('drawerFoundOne') : t('drawerFoundMany', formatNumber(n)));

/**
 * createDrawer({el, toggleButton, storage, onLoad(id) → Promise, report(err, what) → string,
 *               getActiveId(), getActiveName?(), getBgOrigins() → Set, onToggle(open),
 *               onChanged?({deletedActive?, restored?, renamed?, imported?})})
 * `onChanged` lets the panel re-read what a drawer action changed (the live chat emptied by deleting
 * it, a rename of the current chat for the title) without waiting for the host's `changed` event.
 */
export function createDrawer({ el, toggleButton, storage, onLoad, report, getActiveId, getActiveName, getBgOrigins, onToggle, onChanged }) {
  const $ = (id) => el.querySelector(`[data-testid="${id}"]`);
  const title = $('drawer-title');
  const searchBox = $('drawer-search');
  const search = $('session-search');
  const list = $('session-list');
  const totalEl = $('session-total');
  const status = $('drawer-status');
  const tools = $('drawer-tools');
  const importInput = $('import-json');
  const importButton = $('import-json-button');
  const nameButton = $('name-session');
  const pinButton = $('pin-session');
  const exportAllButton = $('export-all-json');
  const clearAllButton = $('clear-all');
  const trashToggle = $('trash-toggle');
  const trashView = $('trash-view');
  const trashList = $('trash-list');
  const trashHint = $('trash-hint');
  const trashEmpty = $('trash-empty');
  const closeButton = $('drawer-close');
  const chatTools = [nameButton, pinButton, exportAllButton, importButton, clearAllButton];

  // the rows shown: the first pages of the list or search, `total` rows in all, `cursor` for
  // the next page (null: every row is shown)
  let rows = [];
  let total = 0;
  let cursor = null;
  let more = null; // the next page's request while it runs
  let allCount = 0;
  let seq = 0;
  let opened = false;
  let query = '';
  let trashOpen = false;
  let trashItems = [];
  let trashDays = 30;
  let trashSeq = 0;

  // ---- status line -------------------------------------------------------------------------
  /** Lines of text, optionally with one action button after them (`{text, testid, onClick}`). */
  function setStatus(lines, kind = 'info', testid = 'drawer-status-text', action = null) {
    const arr = (Array.isArray(lines) ? lines : [lines]).filter(Boolean);
    replaceChildren(status, arr.map((l) => h('div', { text: l })));
    if (action && arr.length) {
      const b = h('button', { type: 'button', class: 'btn btn-small', testid: action.testid, text: action.text });
      b.addEventListener('click', () => busy(b, action.onClick));
      status.append(b);
    }
    status.dataset.kind = kind;
    status.hidden = arr.length === 0;
    status.querySelectorAll('div').forEach((d, i) => { if (i === 0) d.setAttribute('data-testid', testid); });
  }
  function fail(err, what) {
    setStatus(report(err, what), 'error');
  }

  async function busy(button, fn) {
    if (button) { button.disabled = true; button.setAttribute('aria-busy', 'true'); }
    try { return await fn(); } finally {
      if (button) { button.disabled = false; button.removeAttribute('aria-busy'); }
    }
  }

  // ---- list --------------------------------------------------------------------------------
  /** The list or search read anew: its first page, or as many rows as were shown (up to the
   * host's page maximum) when the query is the same (an action's refresh keeps the scroll). */
  async function refresh() {
    const my = ++seq;
    const q = normalizeQuery(search.value);
    const limit = q === query ? Math.min(Math.max(DRAWER_PAGE, rows.length), LIST_PAGE_MAX) : DRAWER_PAGE;
    list.setAttribute('aria-busy', 'true');
    try {
      const page = await storage.sessions.list({ ...(q ? { query: q } : {}), limit });
      if (my !== seq) return;
      rows = Array.isArray(page?.rows) ? page.rows : [];
      total = Number.isFinite(page?.total) ? page.total : rows.length;
      cursor = typeof page?.cursor === 'string' ? page.cursor : null;
      more = null;
      if (!q) allCount = total;
      query = q;
      renderList();
    } catch (err) {
      if (my === seq) fail(err, t('drawerListFailed'));
    } finally {
      if (my === seq) list.removeAttribute('aria-busy');
    }
  }
  const refreshSoon = debounce(refresh, 250);

  /** The next page after the rows shown, added below them; a reply for an older list or
   * search (a refresh came in between) is dropped. */
  async function loadMore() {
    if (!cursor || more) return;
    const my = seq;
    const q = query;
    more = storage.sessions.list({ ...(q ? { query: q } : {}), limit: DRAWER_PAGE, cursor });
    try {
      const page = await more;
      if (my !== seq) return;
      const known = new Set(rows.map((r) => r.id));
      const added = (Array.isArray(page?.rows) ? page.rows : []).filter((r) => !known.has(r.id));
      rows = rows.concat(added);
      if (Number.isFinite(page?.total)) total = page.total;
      if (!q) allCount = total;
      cursor = typeof page?.cursor === 'string' ? page.cursor : null;
      more = null;
      const activeId = getActiveId();
      const bg = getBgOrigins?.() || new Set();
      list.querySelector('.session-more-row')?.remove();
      list.append(...added.map((row) => buildRow(row, activeId, bg)));
      renderTotal();
      appendMore();
    } catch (err) {
      if (my === seq) { more = null; fail(err, t('drawerListFailed')); }
    }
  }

  // the last row of a list with more to show: a button (and, scrolled into view, the next page
  // loads by itself)
  const observer = typeof IntersectionObserver === 'function'
    ? new IntersectionObserver((seen) => { if (seen.some((e) => e.isIntersecting)) loadMore(); }, { root: list, rootMargin: '0px 0px 200px 0px' })
    : null;
  function appendMore() {
    observer?.disconnect();
    if (!cursor) return;
    const button = h('button', { type: 'button', class: 'btn btn-small session-more', testid: 'session-more', text: t('drawerShowMore', formatNumber(Math.max(0, total - rows.length))), on: { click: () => loadMore() } });
    const li = h('li', { class: 'session-more-row', testid: 'session-more-row' }, button);
    list.append(li);
    observer?.observe(li);
  }

  function renderTotal() {
    totalEl.textContent = query ? found(total) : chats(total);
    totalEl.hidden = trashOpen || (total === 0 && !query);
  }

  function renderList() {
    const activeId = getActiveId();
    const bg = getBgOrigins?.() || new Set();
    updateCurrentTools();
    renderTotal();
    if (rows.length === 0) {
      observer?.disconnect();
      replaceChildren(list, h('li', { class: 'session-empty', testid: 'session-empty', text: query ? t('drawerNoMatch', query) : t('drawerNoChats') }));
      return;
    }
    replaceChildren(list, rows.map((row) => buildRow(row, activeId, bg)));
    appendMore();
  }

  /** Name and Pin act on the current chat: enabled when there is one, Pin pressed when it is pinned. */
  function updateCurrentTools() {
    const activeId = getActiveId();
    nameButton.disabled = !activeId;
    pinButton.disabled = !activeId;
    const row = activeId ? rows.find((r) => r.id === activeId) : null;
    const pinned = row ? !!row.pinned : activeId ? pinButton.getAttribute('aria-pressed') === 'true' : false;
    pinButton.setAttribute('aria-pressed', pinned ? 'true' : 'false');
    pinButton.title = pinned ? t('drawerUnpinTitle') : t('drawerPinTitle');
    const label = pinButton.querySelector('.label');
    if (label) label.textContent = pinned ? t('drawerUnpin') : t('drawerPin');
  }

  function buildRow(row, activeId, bg) {
    const active = !!activeId && row.id === activeId;
    const name = row.name || t('drawerUntitled');
    const count = Number.isFinite(row.entryCount) ? messagesText(row.entryCount) : '';
    const sub = [formatWhen(row.createdAt), count].filter(Boolean).join(' · ');
    const device = deviceMark(row);
    const li = h('li', {
      class: `session-row${active ? ' active' : ''}${row.pinned ? ' pinned' : ''}`, testid: 'session-row',
      dataset: { id: row.id, pinned: row.pinned ? 'true' : 'false', active: active ? 'true' : 'false', contentMatch: row.contentMatch === undefined ? undefined : String(row.contentMatch) },
      'aria-current': active ? 'true' : undefined,
    });
    const nameEl = highlighted(name, query, 'session-name');
    const main = h('button', {
      type: 'button', class: 'session-main', testid: 'session-load', title: t('drawerLoadTitle', name),
      on: { click: () => load(row, main) },
    },
    h('span', { class: 'session-line' },
      row.pinned ? h('span', { class: 'pin-mark', 'aria-label': t('drawerPinned'), title: t('drawerPinned') }, icon('pin')) : null,
      nameEl,
      active ? h('span', { class: 'badge', testid: 'session-active', text: t('drawerCurrent') }) : null,
      bg.has(row.id) ? h('span', { class: 'bg-dot', testid: 'session-bg', title: t('drawerBgTitle'), 'aria-label': t('drawerBgLabel') }) : null),
    h('span', { class: 'session-sub' }, sub, device ? [' · ', device] : null),
    row.contentMatch === true ? h('span', { class: 'session-hint', testid: 'session-hint', text: t('drawerMatchMessages') }) : null,
    row.contentMatch === false ? h('span', { class: 'session-hint', testid: 'session-hint', text: t('drawerMatchName') }) : null,
    row.contentMatch === true && typeof row.snippet === 'string' ? highlighted(row.snippet, query, 'session-snippet') : null);
    const snippetEl = main.querySelector('.session-snippet');
    if (snippetEl) snippetEl.setAttribute('data-testid', 'session-snippet');

    const actions = h('div', { class: 'session-actions' },
      iconButton('pin', row.pinned ? t('drawerUnpin') : t('drawerPin'), { testid: 'session-pin', 'aria-pressed': row.pinned ? 'true' : 'false', class: `icon-btn${row.pinned ? ' on' : ''}`, on: { click: (e) => pin(row, e.currentTarget) } }),
      iconButton('edit', t('drawerRename'), { testid: 'session-rename', on: { click: () => startRename(li, row) } }),
      // the two export formats named, not drawn ("{ }" said nothing to most people)
      h('button', { type: 'button', class: 'icon-btn text-btn', testid: 'export-md', 'aria-label': t('drawerExportMd'), title: t('drawerExportMdTitle'), text: 'MD', on: { click: (e) => exportRows([row], 'markdown', e.currentTarget) } }),
      h('button', { type: 'button', class: 'icon-btn text-btn', testid: 'export-json', 'aria-label': t('drawerExportJson'), title: t('drawerExportJsonTitle'), text: 'JSON', on: { click: (e) => exportRows([row], 'json', e.currentTarget) } }),
      iconButton('trash', t('drawerDelete'), { testid: 'session-delete', on: { click: () => confirmInRow(li, t('drawerDeleteConfirm', name), t('drawerDelete'), () => remove(row, active)) } }));
    li.append(main, actions);
    return li;
  }

  // ---- inline confirm ----------------------------------------------------------------------
  function confirmInline(container, question, yesLabel, onYes, { before = null } = {}) {
    container.querySelector('.confirm')?.remove();
    const yes = h('button', { type: 'button', class: 'btn btn-danger btn-small', testid: 'confirm-yes', text: yesLabel });
    const no = h('button', { type: 'button', class: 'btn btn-small', testid: 'confirm-no', text: t('drawerCancel') });
    const box = h('div', { class: 'confirm', role: 'alertdialog', 'aria-label': question, testid: 'confirm' }, h('span', { text: question }), no, yes);
    no.addEventListener('click', () => box.remove());
    box.addEventListener('keydown', (e) => { if (e.key === 'Escape') { e.stopPropagation(); box.remove(); } });
    yes.addEventListener('click', async () => {
      await busy(yes, onYes);
      box.remove();
    });
    container.insertBefore(box, before);
    no.focus();
    return box;
  }
  const confirmInRow = (li, q, y, fn) => confirmInline(li, q, y, fn);

  // ---- actions -----------------------------------------------------------------------------
  async function load(row, button) {
    await busy(button, async () => {
      try {
        await onLoad(row.id);
        setStatus('');
        close();
      } catch (err) {
        fail(err, t('drawerLoadFailed', row.name));
      }
    });
  }

  async function pin(row, button) {
    await busy(button, async () => {
      try {
        await storage.sessions.pin({ id: row.id, pinned: !row.pinned });
        await refresh();
        // the list was built anew: focus goes to the same row's pin, not to <body> (where the
        // drawer's Escape would no longer be heard)
        const again = [...list.querySelectorAll('[data-testid="session-row"]')].find((li) => li.dataset.id === row.id);
        (again?.querySelector('[data-testid="session-pin"]') ?? search).focus();
      } catch (err) {
        fail(err, t('drawerPinFailed'));
      }
    });
  }

  function startRename(li, row) {
    const nameEl = li.querySelector('.session-name');
    if (!nameEl || li.querySelector('.rename-input')) return;
    const input = h('input', { type: 'text', class: 'rename-input', testid: 'session-rename-input', 'aria-label': t('drawerChatName'), maxLength: 80, value: row.name || '' });
    const main = li.querySelector('.session-main');
    const form = h('form', { class: 'rename-form' }, input,
      h('button', { type: 'submit', class: 'btn btn-small btn-primary', testid: 'session-rename-save', text: t('drawerSave') }),
      h('button', { type: 'button', class: 'btn btn-small', testid: 'session-rename-cancel', text: t('drawerCancel'), on: { click: () => done() } }));
    // the row's buttons step aside while the name is edited (at 400 px they left the field a sliver)
    const rowActions = li.querySelector('.session-actions');
    const done = () => { form.remove(); main.hidden = false; if (rowActions) rowActions.hidden = false; };
    form.addEventListener('submit', async (e) => {
      e.preventDefault();
      const name = input.value.trim();
      if (!name) { setStatus(t('drawerNameBlank'), 'error', 'rename-error'); input.focus(); return; }
      try {
        await storage.sessions.rename({ id: row.id, name });
        done();
        setStatus('');
        if (row.id === getActiveId()) onChanged?.({ renamed: row.id });
        await refresh();
      } catch (err) {
        fail(err, t('drawerRenameFailed'));
      }
    });
    input.addEventListener('keydown', (e) => { if (e.key === 'Escape') { e.preventDefault(); e.stopPropagation(); done(); } });
    main.hidden = true;
    if (rowActions) rowActions.hidden = true;
    li.insertBefore(form, main);
    input.focus();
    input.select();
  }

  async function remove(row, wasActive) {
    try {
      const r = await storage.sessions.delete({ id: row.id });
      if (r?.deleted) {
        setStatus(t('drawerMovedToTrash', row.name), 'info', 'delete-result', {
          text: t('drawerUndo'), testid: 'delete-undo', onClick: () => restore({ id: row.id, name: row.name }),
        });
      } else {
        setStatus(t('drawerAlreadyGone', row.name), 'info', 'delete-result');
      }
      // Deleting the loaded chat empties the live history (the host did it): show the empty chat now.
      if (wasActive || row.id === getActiveId()) onChanged?.({ deletedActive: row.id });
      await refresh();
    } catch (err) {
      fail(err, t('drawerDeleteFailed'));
    }
  }

  async function exportRows(items, format, button) {
    if (items.length === 0) { setStatus(t('drawerNothingToExport')); return; }
    await busy(button, async () => {
      try {
        const r = await storage.sessions.export({ ids: items.map((x) => x.id), format });
        const fallback = exportFilename({ name: items[0].name, format, count: items.length });
        const filename = safeFilename(r?.filename, fallback);
        downloadText(filename, String(r?.text ?? ''), mimeForFormat(format));
        setStatus(t('drawerExported', filename), 'info', 'export-result');
      } catch (err) {
        fail(err, t('drawerExportFailed'));
      }
    });
  }

  // ---- Name and Pin the current chat ---------------------------------------------------------
  async function currentRow() {
    const id = getActiveId();
    if (!id) return null;
    const shown = rows.find((r) => r.id === id);
    if (shown) return shown;
    // not among the rows shown: the session itself (no entries needed)
    try {
      const s = await storage.sessions.get({ id, limit: 0, images: 'ref' });
      return s && s.trashedAt === undefined ? { id: s.id, name: s.name, pinned: !!s.pinned } : null;
    } catch (err) {
      if (err?.code === 'not_found') return null;
      throw err;
    }
  }

  function nameCurrent() {
    const id = getActiveId();
    if (!id) { setStatus(t('drawerNothingToName'), 'info', 'name-result'); return; }
    const old = el.querySelector('.name-form');
    if (old) { old.querySelector('input').focus(); return; }
    const current = rows.find((r) => r.id === id)?.name || getActiveName?.() || '';
    const input = h('input', { type: 'text', class: 'rename-input', testid: 'name-input', 'aria-label': t('drawerCurrentName'), maxLength: 80, value: current });
    const form = h('form', { class: 'rename-form name-form', testid: 'name-form' }, input,
      h('button', { type: 'submit', class: 'btn btn-small btn-primary', testid: 'name-save', text: t('drawerSave') }),
      h('button', { type: 'button', class: 'btn btn-small', testid: 'name-cancel', text: t('drawerCancel'), on: { click: () => form.remove() } }));
    form.addEventListener('submit', async (e) => {
      e.preventDefault();
      const name = input.value.trim();
      if (!name) { setStatus(t('drawerNameBlank'), 'error', 'rename-error'); input.focus(); return; }
      try {
        await storage.sessions.rename({ id, name });
        form.remove();
        setStatus(t('drawerNamed', name), 'info', 'name-result');
        onChanged?.({ renamed: id });
        await refresh();
      } catch (err) {
        fail(err, t('drawerNameFailed'));
      }
    });
    input.addEventListener('keydown', (e) => { if (e.key === 'Escape') { e.preventDefault(); e.stopPropagation(); form.remove(); nameButton.focus(); } });
    tools.after(form);
    input.focus();
    input.select();
  }

  async function pinCurrent() {
    await busy(pinButton, async () => {
      try {
        const row = await currentRow();
        if (!row) { setStatus(t('drawerNothingToPin'), 'info', 'pin-result'); return; }
        await storage.sessions.pin({ id: row.id, pinned: !row.pinned });
        setStatus(row.pinned ? t('drawerUnpinnedName', row.name) : t('drawerPinnedName', row.name), 'info', 'pin-result');
        await refresh();
      } catch (err) {
        fail(err, t('drawerPinFailed'));
      }
    });
  }

  // ---- import ------------------------------------------------------------------------------
  async function importFile(file) {
    if (!file) return;
    if (file.size > MAX_IMPORT_BYTES) {
      setStatus([t('drawerImportTooBig', file.name), t('drawerImportInTerminal', `keepsake-host import "${file.name}"`)], 'error', 'import-result');
      return;
    }
    await busy(importButton, async () => {
      let doc;
      try {
        doc = JSON.parse(await readAsText(file));
      } catch (err) {
        setStatus(t('drawerImportNotJson', file.name, err?.message || err), 'error', 'import-result');
        return;
      }
      // an array goes to the host too: it says what the file looks like (another product's export, …)
      if (!doc || typeof doc !== 'object') {
        setStatus(t('drawerImportNotExport', file.name), 'error', 'import-result');
        return;
      }
      setStatus(t('drawerReadingFile', file.name));
      try {
        const ask = (preview) => {
          setStatus('');
          return askImportSettings({ container: status.parentElement, before: status, preview, fileName: file.name });
        };
        const progress = (i, n) => setStatus(t('drawerImportingPiece', file.name, formatNumber(i + 1), formatNumber(n)));
        const r = await importWithPreview({ storage, doc, ask, progress });
        if (r.cancelled) { setStatus(t('drawerImportCancelled', file.name), 'info', 'import-result'); return; }
        setStatus([t('drawerImported', file.name), ...describeImportResult(r.result)], 'info', 'import-result');
        onChanged?.({ imported: true });
        await refresh();
      } catch (err) {
        setStatus(report(err, t('drawerImportFailed', file.name)), 'error', 'import-result');
      }
    });
  }

  // ---- Recently deleted (the trash) ---------------------------------------------------------
  async function refreshTrash() {
    const my = ++trashSeq;
    trashList.setAttribute('aria-busy', 'true');
    try {
      const r = await storage.trash.list();
      if (my !== trashSeq) return;
      trashItems = Array.isArray(r?.items) ? r.items : [];
      if (Number.isInteger(r?.trashDays) && r.trashDays >= 1) trashDays = r.trashDays;
      renderTrash();
    } catch (err) {
      if (my === trashSeq) fail(err, t('drawerTrashReadFailed'));
    } finally {
      if (my === trashSeq) trashList.removeAttribute('aria-busy');
    }
  }

  function renderTrash() {
    trashHint.textContent = trashDays === 1 ? t('drawerTrashHintOne') : t('drawerTrashHint', formatNumber(trashDays));
    trashEmpty.disabled = trashItems.length === 0;
    if (trashItems.length === 0) {
      replaceChildren(trashList, h('li', { class: 'session-empty', testid: 'trash-none', text: t('drawerTrashNone') }));
      return;
    }
    const now = Date.now();
    replaceChildren(trashList, trashItems.map((item) => buildTrashRow(item, now)));
  }

  function buildTrashRow(item, now) {
    const it = trashRowText(item, now);
    const li = h('li', { class: 'session-row trash-row', testid: 'trash-row', dataset: { id: item.id, kind: item.kind, reason: item.reason } });
    const main = h('div', { class: 'session-main trash-main' },
      h('span', { class: 'session-line' },
        item.pinned ? h('span', { class: 'pin-mark', 'aria-label': t('drawerPinned'), title: t('drawerPinned') }, icon('pin')) : null,
        h('span', { class: 'session-name', testid: 'trash-name', text: it.name })),
      h('span', { class: 'session-sub', testid: 'trash-reason', text: `${it.reason} · ${it.count}` }),
      it.from ? h('span', { class: 'session-sub', testid: 'trash-from', text: it.from }) : null,
      h('span', { class: 'session-sub', testid: 'trash-when', text: `${it.deleted} · ${it.expires}` }));
    const actions = h('div', { class: 'session-actions trash-actions' },
      h('button', { type: 'button', class: 'btn btn-small', testid: 'trash-restore', text: t('drawerRestore'), title: t('drawerRestoreTitle', it.name), on: { click: (e) => busy(e.currentTarget, () => restore(item)) } }),
      h('button', { type: 'button', class: 'btn btn-small btn-danger-outline', testid: 'trash-purge', text: t('drawerPurge'), on: { click: () => confirmInRow(li, t('drawerPurgeConfirm', it.name), t('drawerPurge'), () => purge(item)) } }));
    li.append(main, actions);
    return li;
  }

  async function restore(item) {
    try {
      const r = await storage.trash.restore({ id: item.id });
      const name = item.name || t('drawerUntitled');
      setStatus(r?.kind === 'entries' ? t('drawerRestoredEntries', name) : t('drawerRestored', name), 'info', 'trash-result');
      onChanged?.({ restored: r?.sessionId || item.id });
    } catch (err) {
      if (err?.code === 'not_found') setStatus(t('drawerNotInTrash', item.name), 'info', 'trash-result');
      else fail(err, t('drawerRestoreFailed'));
    }
    if (trashOpen) await refreshTrash();
    else await refresh();
  }

  async function purge(item) {
    try {
      await storage.trash.purge({ id: item.id });
      setStatus(t('drawerPurged', item.name), 'info', 'trash-result');
    } catch (err) {
      if (err?.code === 'not_found') setStatus(t('drawerAlreadyGone', item.name), 'info', 'trash-result');
      else fail(err, t('drawerPurgeFailed'));
    }
    await refreshTrash();
  }

  function emptyTrash() {
    const n = trashItems.length;
    if (n === 0) return;
    confirmInline(trashView, n === 1 ? t('drawerEmptyTrashConfirmOne') : t('drawerEmptyTrashConfirm', formatNumber(n)), t('drawerEmptyTrash'), async () => {
      try {
        const r = await storage.trash.purge({ all: true });
        const purged = Number(r?.purged) || 0;
        setStatus(purged === 1 ? t('drawerPurgedOne') : t('drawerPurgedMany', formatNumber(purged)), 'info', 'trash-result');
      } catch (err) { fail(err, t('drawerEmptyTrashFailed')); }
      await refreshTrash();
    }, { before: trashList });
  }

  function showTrash(on) {
    trashOpen = on;
    trashToggle.setAttribute('aria-pressed', on ? 'true' : 'false');
    trashToggle.querySelector('.label').textContent = on ? t('drawerBackToChats') : t('drawerTrash');
    title.textContent = on ? t('drawerTrash') : t('panelChats');
    trashView.hidden = !on;
    list.hidden = on;
    totalEl.hidden = on;
    searchBox.hidden = on;
    for (const b of chatTools) b.hidden = on;
    el.querySelector('.name-form')?.remove();
    el.querySelectorAll('.confirm').forEach((c) => c.remove());
    setStatus('');
    if (on) refreshTrash();
    else refresh();
  }

  // ---- open / close ------------------------------------------------------------------------
  function open() {
    if (opened) return;
    opened = true;
    el.hidden = false;
    el.classList.add('open');
    toggleButton.setAttribute('aria-expanded', 'true');
    onToggle?.(true);
    if (trashOpen) refreshTrash();
    else {
      refresh();
      search.focus();
    }
  }
  function close() {
    if (!opened) return;
    opened = false;
    el.classList.remove('open');
    el.hidden = true;
    toggleButton.setAttribute('aria-expanded', 'false');
    onToggle?.(false);
    toggleButton.focus();
  }

  toggleButton.addEventListener('click', () => (opened ? close() : open()));
  closeButton.addEventListener('click', close);
  el.addEventListener('keydown', (e) => { if (e.key === 'Escape') { e.preventDefault(); close(); } });
  // focus that fell to <body> (a row rebuilt under it) still closes an open drawer with Escape
  document.addEventListener('keydown', (e) => {
    if (e.key === 'Escape' && opened && (!document.activeElement || document.activeElement === document.body)) {
      e.preventDefault();
      close();
    }
  });
  search.addEventListener('input', () => refreshSoon());
  search.addEventListener('keydown', (e) => { if (e.key === 'Enter') { e.preventDefault(); refreshSoon.flush(); } });
  nameButton.addEventListener('click', nameCurrent);
  pinButton.addEventListener('click', pinCurrent);
  trashToggle.addEventListener('click', () => showTrash(!trashOpen));
  trashEmpty.addEventListener('click', emptyTrash);
  exportAllButton.addEventListener('click', async (e) => {
    const btn = e.currentTarget;
    try {
      // every chat, not only the pages shown
      const all = !normalizeQuery(search.value) && !cursor ? rows : await listAllSessions(storage, {});
      await exportRows(all, 'json', btn);
    } catch (err) { fail(err, t('drawerExportFailed')); }
  });
  clearAllButton.addEventListener('click', () => confirmInline(status.parentElement, allCount ? t('drawerClearAllConfirm', chats(allCount)) : t('drawerClearAllConfirmAny'), t('drawerMoveAll'), async () => {
    try {
      const r = await storage.sessions.clearAll();
      const n = Number(r?.deleted) || 0;
      setStatus(t('drawerClearedN', chats(n)), 'info', 'clear-result');
      onChanged?.({ deletedActive: getActiveId() || '' });
      await refresh();
    } catch (err) { fail(err, t('drawerClearFailed')); }
  }, { before: status }));
  importButton.addEventListener('click', () => importInput.click());
  importInput.addEventListener('change', async () => {
    const file = importInput.files?.[0];
    importInput.value = '';
    await importFile(file);
  });

  return {
    open,
    close,
    refresh,
    showTrash,
    refreshIfOpen() {
      if (!opened) return;
      if (trashOpen) refreshTrash();
      else refresh();
    },
    rerender() {
      if (!opened) updateCurrentTools();
      else if (!trashOpen) renderList();
      else updateCurrentTools();
    },
    get isOpen() { return opened; },
    get trashOpen() { return trashOpen; },
  };
}
