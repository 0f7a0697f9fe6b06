// Sessions drawer: list (pinned first, active marked), search with content-match hint and highlighted
// snippet, load, rename, pin, delete, clear all, save current, export (Markdown / JSON) and import.

import { h, icon, iconButton, replaceChildren, debounce, downloadText, readAsText } from './dom.js';
import { highlightSegments, normalizeQuery } from './snippet.js';
import { exportFilename, safeFilename, mimeForFormat } from './export-name.js';
import { describeImportResult, formatWhen } from './format.js';

const MAX_IMPORT_BYTES = 64 * 1024 * 1024;

function highlighted(text, query, cls) {
  return h('span', { class: cls }, highlightSegments(text, query).map((s) => (s.match ? h('mark', { text: s.text }) : document.createTextNode(s.text))));
}

/**
 * createDrawer({el, storage, onLoad(id) → Promise, report(err, what) → string, getActiveId(), getBgOrigins() → Set, onToggle(open)})
 */
export function createDrawer({ el, toggleButton, storage, onLoad, report, getActiveId, getBgOrigins, onToggle }) {
  const $ = (id) => el.querySelector(`[data-testid="${id}"]`);
  const search = $('session-search');
  const list = $('session-list');
  const status = $('drawer-status');
  const importInput = $('import-json');
  const importButton = $('import-json-button');
  const saveButton = $('save-session');
  const exportAllButton = $('export-all-json');
  const clearAllButton = $('clear-all');
  const closeButton = $('drawer-close');

  let rows = [];
  let allCount = 0;
  let seq = 0;
  let opened = false;
  let query = '';

  // ---- status line -------------------------------------------------------------------------
  function setStatus(lines, kind = 'info', testid = 'drawer-status-text') {
    const arr = Array.isArray(lines) ? lines : [lines];
    replaceChildren(status, arr.filter(Boolean).map((l) => h('div', { text: l })));
    status.dataset.kind = kind;
    status.hidden = arr.filter(Boolean).length === 0;
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
  async function refresh() {
    const my = ++seq;
    const q = normalizeQuery(search.value);
    list.setAttribute('aria-busy', 'true');
    try {
      const result = await storage.sessions.list(q ? { query: q } : {});
      if (my !== seq) return;
      rows = Array.isArray(result) ? result : [];
      if (!q) allCount = rows.length;
      query = q;
      renderList();
    } catch (err) {
      if (my === seq) fail(err, 'Could not list sessions');
    } finally {
      if (my === seq) list.removeAttribute('aria-busy');
    }
  }
  const refreshSoon = debounce(refresh, 250);

  function renderList() {
    const activeId = getActiveId();
    const bg = getBgOrigins?.() || new Set();
    if (rows.length === 0) {
      replaceChildren(list, h('li', { class: 'session-empty', testid: 'session-empty', text: query ? `No session matches “${query}”.` : 'No saved sessions yet. “Save” keeps the current chat here.' }));
      return;
    }
    replaceChildren(list, rows.map((row) => buildRow(row, activeId, bg)));
  }

  function buildRow(row, activeId, bg) {
    const active = !!activeId && row.id === activeId;
    const name = row.name || '(untitled)';
    const count = Number.isFinite(row.entryCount) ? `${row.entryCount} message${row.entryCount === 1 ? '' : 's'}` : '';
    const sub = [formatWhen(row.createdAt), count].filter(Boolean).join(' · ');
    const li = h('li', {
      class: `session-row${active ? ' active' : ''}${row.pinned ? ' pinned' : ''}`, testid: 'session-row',
      dataset: { id: row.id, pinned: row.pinned ? 'true' : 'false', active: active ? 'true' : 'false', contentMatch: row.contentMatch === undefined ? undefined : String(row.contentMatch) },
      'aria-current': active ? 'true' : undefined,
    });
    const nameEl = highlighted(name, query, 'session-name');
    const main = h('button', {
      type: 'button', class: 'session-main', testid: 'session-load', title: `Load “${name}”`,
      on: { click: () => load(row, main) },
    },
    h('span', { class: 'session-line' },
      row.pinned ? h('span', { class: 'pin-mark', 'aria-label': 'Pinned', title: 'Pinned' }, icon('pin')) : null,
      nameEl,
      active ? h('span', { class: 'badge', testid: 'session-active', text: 'Current' }) : null,
      bg.has(row.id) ? h('span', { class: 'bg-dot', testid: 'session-bg', title: 'A reply is still being written into this session', 'aria-label': 'Reply in progress' }) : null),
    h('span', { class: 'session-sub', text: sub }),
    row.contentMatch === true ? h('span', { class: 'session-hint', testid: 'session-hint', text: 'Match in messages' }) : null,
    row.contentMatch === false ? h('span', { class: 'session-hint', testid: 'session-hint', text: 'Match in name' }) : null,
    row.contentMatch === true && typeof row.snippet === 'string' ? highlighted(row.snippet, query, 'session-snippet') : null);
    const snippetEl = main.querySelector('.session-snippet');
    if (snippetEl) snippetEl.setAttribute('data-testid', 'session-snippet');

    const actions = h('div', { class: 'session-actions' },
      iconButton('pin', row.pinned ? 'Unpin' : 'Pin', { testid: 'session-pin', 'aria-pressed': row.pinned ? 'true' : 'false', class: `icon-btn${row.pinned ? ' on' : ''}`, on: { click: (e) => pin(row, e.currentTarget) } }),
      iconButton('edit', 'Rename', { testid: 'session-rename', on: { click: () => startRename(li, row) } }),
      iconButton('download', 'Export Markdown', { testid: 'export-md', on: { click: (e) => exportRows([row], 'markdown', e.currentTarget) } }),
      h('button', { type: 'button', class: 'icon-btn text-btn', testid: 'export-json', 'aria-label': 'Export JSON', title: 'Export JSON', text: '{ }', on: { click: (e) => exportRows([row], 'json', e.currentTarget) } }),
      iconButton('trash', 'Delete', { testid: 'session-delete', on: { click: () => confirmInRow(li, `Delete “${name}”?`, 'Delete', () => remove(row)) } }));
    li.append(main, actions);
    return li;
  }

  // ---- inline confirm ----------------------------------------------------------------------
  function confirmInline(container, question, yesLabel, onYes, { before = null } = {}) {
    container.querySelector('.confirm')?.remove();
    const yes = h('button', { type: 'button', class: 'btn btn-danger btn-small', testid: 'confirm-yes', text: yesLabel });
    const no = h('button', { type: 'button', class: 'btn btn-small', testid: 'confirm-no', text: 'Cancel' });
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
        fail(err, `Could not load “${row.name}”`);
      }
    });
  }

  async function pin(row, button) {
    await busy(button, async () => {
      try {
        await storage.sessions.pin({ id: row.id, pinned: !row.pinned });
        await refresh();
      } catch (err) {
        fail(err, 'Could not change the pin');
      }
    });
  }

  function startRename(li, row) {
    const nameEl = li.querySelector('.session-name');
    if (!nameEl || li.querySelector('.rename-input')) return;
    const input = h('input', { type: 'text', class: 'rename-input', testid: 'session-rename-input', 'aria-label': 'Session name', maxLength: 80, value: row.name || '' });
    const main = li.querySelector('.session-main');
    const form = h('form', { class: 'rename-form' }, input,
      h('button', { type: 'submit', class: 'btn btn-small btn-primary', testid: 'session-rename-save', text: 'Save' }),
      h('button', { type: 'button', class: 'btn btn-small', testid: 'session-rename-cancel', text: 'Cancel', on: { click: () => done() } }));
    const done = () => { form.remove(); main.hidden = false; };
    form.addEventListener('submit', async (e) => {
      e.preventDefault();
      const name = input.value.trim();
      if (!name) { setStatus('A session name cannot be blank.', 'error', 'rename-error'); input.focus(); return; }
      try {
        await storage.sessions.rename({ id: row.id, name });
        done();
        setStatus('');
        await refresh();
      } catch (err) {
        fail(err, 'Could not rename');
      }
    });
    input.addEventListener('keydown', (e) => { if (e.key === 'Escape') { e.preventDefault(); e.stopPropagation(); done(); } });
    main.hidden = true;
    li.insertBefore(form, main);
    input.focus();
    input.select();
  }

  async function remove(row) {
    try {
      const r = await storage.sessions.delete({ id: row.id });
      setStatus(r?.deleted ? `Deleted “${row.name}”.` : `“${row.name}” was already gone.`);
      await refresh();
    } catch (err) {
      fail(err, 'Could not delete');
    }
  }

  async function exportRows(list, format, button) {
    if (list.length === 0) { setStatus('There are no sessions to export.'); return; }
    await busy(button, async () => {
      try {
        const r = await storage.sessions.export({ ids: list.map((x) => x.id), format });
        const fallback = exportFilename({ name: list[0].name, format, count: list.length });
        const filename = safeFilename(r?.filename, fallback);
        downloadText(filename, String(r?.text ?? ''), mimeForFormat(format));
        setStatus(`Exported ${filename}`, 'info', 'export-result');
      } catch (err) {
        fail(err, 'Export failed');
      }
    });
  }

  async function saveCurrent() {
    await busy(saveButton, async () => {
      try {
        const activeId = getActiveId();
        const r = await storage.sessions.save({ ...(activeId ? { id: activeId } : {}), fallbackName: new Date().toLocaleString() });
        if (r?.created && r.session?.id) {
          // Bind the live chat to its new snapshot, so the next save or "New chat" writes back in place
          // instead of archiving a duplicate (sessions.save itself never changes the binding, §5.2).
          try { await storage.history.setBinding({ id: r.session.id }); } catch { /* the snapshot exists either way */ }
        }
        if (!r?.session) setStatus('Nothing to save: this chat is empty.', 'info', 'save-result');
        else if (r.created) setStatus(`Saved as “${r.session.name}”.${r.evicted?.length ? ` ${r.evicted.length} old session(s) removed (maxSessions).` : ''}`, 'info', 'save-result');
        else setStatus(`Updated “${r.session.name}”.`, 'info', 'save-result');
        await refresh();
      } catch (err) {
        fail(err, 'Could not save');
      }
    });
  }

  async function importFile(file) {
    if (!file) return;
    if (file.size > MAX_IMPORT_BYTES) {
      setStatus([`${file.name} is over 64 MiB, the browser's limit for one message to the host.`, `Import it in a terminal: keepsake-host import "${file.name}"`], 'error', 'import-result');
      return;
    }
    await busy(importButton, async () => {
      let doc;
      try {
        doc = JSON.parse(await readAsText(file));
      } catch (err) {
        setStatus(`${file.name} is not valid JSON: ${err?.message || err}`, 'error', 'import-result');
        return;
      }
      if (!doc || typeof doc !== 'object' || Array.isArray(doc)) {
        setStatus(`${file.name} is not a Keepsake export (expected a JSON object).`, 'error', 'import-result');
        return;
      }
      setStatus(`Importing ${file.name}…`);
      try {
        const r = await storage.storage.import({ document: doc });
        setStatus([`Imported ${file.name}.`, ...describeImportResult(r)], 'info', 'import-result');
        await refresh();
      } catch (err) {
        setStatus(report(err, `Import of ${file.name} failed`), 'error', 'import-result');
      }
    });
  }

  // ---- open / close ------------------------------------------------------------------------
  function open() {
    if (opened) return;
    opened = true;
    el.hidden = false;
    el.classList.add('open');
    toggleButton.setAttribute('aria-expanded', 'true');
    onToggle?.(true);
    refresh();
    search.focus();
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
  search.addEventListener('input', () => refreshSoon());
  search.addEventListener('keydown', (e) => { if (e.key === 'Enter') { e.preventDefault(); refreshSoon.flush(); } });
  saveButton.addEventListener('click', saveCurrent);
  exportAllButton.addEventListener('click', async (e) => {
    const btn = e.currentTarget;
    try {
      const all = normalizeQuery(search.value) ? await storage.sessions.list({}) : rows;
      await exportRows(all, 'json', btn);
    } catch (err) { fail(err, 'Export failed'); }
  });
  clearAllButton.addEventListener('click', () => confirmInline(status.parentElement, `Delete all ${allCount || ''} saved sessions, pinned ones included?`.replace('  ', ' '), 'Delete all', async () => {
    try {
      const r = await storage.sessions.clearAll();
      setStatus(`Deleted ${Number(r?.deleted) || 0} session(s).`);
      await refresh();
    } catch (err) { fail(err, 'Could not clear sessions'); }
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
    refreshIfOpen() { if (opened) refresh(); },
    rerender() { if (opened) renderList(); },
    get isOpen() { return opened; },
  };
}
