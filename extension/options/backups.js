// Options → Backups (issue 36): the copies keepsake-host keeps of the database, and putting one back.
//
//   - the four device-local settings (`backupsEnabled`, `backupFolder`, `backupDaily`,
//     `backupWeekly`): one Save, checked here for what a form can check (whole numbers in range)
//     and by the host for the rest (the folder); a value the host refuses is shown under its field;
//   - the last daily outcome (`backups.list` `last`: made, skipped and why, failed and why, running);
//   - "Back up now" (`backups.create`, a `manual` copy);
//   - the copies, newest first (kind, local time, schema version, chats, size), each with "Restore",
//     which asks ONCE, naming the copy's time and chat count and saying that the current chats are
//     kept as a copy first (`backups.restore` makes a `prerestore` copy before anything else);
//   - "Undo restore" while `backups.list` returns `undo` (the copy the last restore made, as long as
//     nothing was written since): a restore of that copy, itself undoable.
// While a backup or a restore runs, the section says so and its buttons wait.
//
// The host's own words (a skip's or a failure's reason) are shown as they come, marked
// translate="no": they are data from the host, not the UI's words. No DOM string parsing anywhere.

import { t, formatDateTime, formatNumber } from '../lib/i18n.js';
import { h, replaceChildren, debounce } from '../lib/ui/dom.js';
import { sizeText } from '../lib/ui/format.js';
import { parseWholeNumber } from './providers.js';

/** The device-local backup settings (never exported or imported: PROTOCOL.md, issue 36). */
export const BACKUP_KEYS = Object.freeze(['backupsEnabled', 'backupFolder', 'backupDaily', 'backupWeekly']);
/** The host's defaults and ranges (src/domain/settings.rs `check_value`). */
export const BACKUP_DEFAULTS = Object.freeze({ backupsEnabled: true, backupFolder: '', backupDaily: 7, backupWeekly: 4 });
export const DAILY_RANGE = Object.freeze({ min: 1, max: 365 });
export const WEEKLY_RANGE = Object.freeze({ min: 0, max: 52 });

/** The list is read again this often while the page is shown: the host makes daily copies on its own, with no event. */
export const LIST_POLL_MS = 60_000;
/** …and this often while a daily copy is due or being made (no outcome yet, or `running`), at most LIST_SOON_TRIES times. */
export const LIST_SOON_MS = 3_000;
export const LIST_SOON_TRIES = 40;

/** A time as the host gives it (ms since the epoch, or an ISO string) → ms, or NaN. */
export function timeMs(v) {
  if (typeof v === 'number') return v;
  if (typeof v === 'string' && v) return Date.parse(v);
  return NaN;
}

/** A time in the UI language, or '—' when there is none. */
function when(v) {
  const ms = timeMs(v);
  return Number.isFinite(ms) ? formatDateTime(ms) : '—';
}

/** "12 chats" / "1 chat" in the UI language. */
export function chatsText(n) {
  const k = Math.max(0, Math.trunc(Number(n) || 0));
  return k === 1 ? t('optBackupChatsOne', formatNumber(k)) : t('optBackupChatsMany', formatNumber(k));
}

/** A copy's kind in words. */
export function kindText(kind) {
  switch (kind) {
    case 'daily': return t('optBackupKindDaily');
    case 'weekly': return t('optBackupKindWeekly');
    case 'premigration': return t('optBackupKindPremigration');
    case 'prerestore': return t('optBackupKindPrerestore');
    case 'manual': return t('optBackupKindManual');
    default: return String(kind ?? '');
  }
}

/** What a row shows of a copy: `{kind, when, schema, chats, size}`. */
export function copyFacts(copy) {
  return {
    kind: kindText(copy?.kind),
    when: when(copy?.createdAt),
    schema: Number.isInteger(copy?.schemaVersion) ? formatNumber(copy.schemaVersion) : '—',
    chats: Number.isFinite(Number(copy?.sessions)) && copy?.sessions !== null ? formatNumber(Number(copy.sessions)) : '—',
    size: sizeText(copy?.bytes),
  };
}

/** The copies newest first (the host sends them so; a list that is not is sorted here). */
export function newestFirst(copies) {
  const list = Array.isArray(copies) ? copies.filter((c) => c && typeof c.id === 'string') : [];
  return list.map((c, i) => [c, i]).sort(([a, i], [b, j]) => (timeMs(b.createdAt) || 0) - (timeMs(a.createdAt) || 0) || i - j).map(([c]) => c);
}

/** The one question before a restore: the copy's time and chats, and that nothing is lost. */
export function restoreQuestion(copy) {
  return t('optBackupRestoreQuestion', when(copy?.createdAt), chatsText(copy?.sessions));
}

/**
 * The last daily backup in words: `{text, kind, reason}` (`reason`: the host's own words for a
 * skip or a failure, shown after the text).
 */
export function lastText(last, { enabled = true } = {}) {
  if (!enabled) return { text: t('optBackupsOff'), kind: 'warn', reason: '' };
  if (!last || typeof last !== 'object') return { text: t('optBackupLastNone'), kind: '', reason: '' };
  const at = when(last.at ?? last.day);
  const reason = typeof last.message === 'string' ? last.message : '';
  switch (last.outcome) {
    case 'made': return { text: t('optBackupLastMade', at), kind: 'ok', reason: '' };
    case 'skipped': return { text: t('optBackupLastSkipped', at), kind: 'warn', reason };
    case 'failed': return { text: t('optBackupLastFailed', at), kind: 'error', reason };
    case 'running': return { text: t('optBackupLastRunning', at), kind: '', reason: '' };
    default: return { text: t('optBackupLastNone'), kind: '', reason: '' };
  }
}

/** Stored values with the host's defaults where a key is absent or not of its type. */
export function backupSettings(stored) {
  const s = stored && typeof stored === 'object' ? stored : {};
  const whole = (v, d) => (Number.isSafeInteger(v) ? v : d);
  return {
    backupsEnabled: typeof s.backupsEnabled === 'boolean' ? s.backupsEnabled : BACKUP_DEFAULTS.backupsEnabled,
    backupFolder: typeof s.backupFolder === 'string' ? s.backupFolder : BACKUP_DEFAULTS.backupFolder,
    backupDaily: whole(s.backupDaily, BACKUP_DEFAULTS.backupDaily),
    backupWeekly: whole(s.backupWeekly, BACKUP_DEFAULTS.backupWeekly),
  };
}

function inRange(text, { min, max }, emptyValue) {
  const r = parseWholeNumber(text, { emptyValue });
  if (r.ok && (r.value < min || r.value > max)) return { ok: false, error: t('optErrRange', formatNumber(min), formatNumber(max)) };
  return r;
}

/**
 * The form's values → `{ok: true, map}` (the four settings to write) or `{ok: false, errors}`
 * (key → a line for that field). Empty numbers take the defaults; the folder is the host's to check.
 */
export function readBackupForm({ enabled, folder, daily, weekly }) {
  const d = inRange(daily, DAILY_RANGE, BACKUP_DEFAULTS.backupDaily);
  const w = inRange(weekly, WEEKLY_RANGE, BACKUP_DEFAULTS.backupWeekly);
  const errors = {};
  if (!d.ok) errors.backupDaily = d.error;
  if (!w.ok) errors.backupWeekly = w.error;
  if (Object.keys(errors).length) return { ok: false, errors };
  return { ok: true, map: { backupsEnabled: !!enabled, backupFolder: String(folder ?? '').trim(), backupDaily: d.value, backupWeekly: w.value } };
}

/**
 * The setting a host error names (`backupFolder must be …`: check_value's messages start with the
 * key), or ''. No key is part of another, so a plain search is exact.
 */
export function fieldOfError(err) {
  const m = String(err?.message ?? '');
  return BACKUP_KEYS.find((k) => m.includes(k)) || '';
}

/**
 * Build the section's contents into `el` and wire them.
 * @param {object} o
 * @param {Element} o.el        the container (options.html `#backups-body`)
 * @param {object} o.storage    createStorage(...) client (settings.get/set, backups.list/create/restore)
 * @param {(err: any) => string} o.explain  one line about an error (the page's explainLine)
 * @param {() => void} [o.onRestored]  after a restore or an undo finished (the page reloads the rest)
 * @param {{setTimeout: Function, clearTimeout: Function}} [o.timers]  for the list's re-reads (tests)
 * @returns {{load: () => Promise<void>, refresh: () => Promise<void>, refreshSoon: () => void, reloadSettings: () => Promise<void>}}
 */
export function createBackups({
  el, storage, explain, onRestored = () => {},
  timers = { setTimeout: (fn, ms) => setTimeout(fn, ms), clearTimeout: (id) => clearTimeout(id) },
}) {
  const field = (key, label, input, hintText) => {
    const id = `backup-${key}`;
    input.id = id;
    const hint = hintText ? h('div', { class: 'hint', id: `${id}-hint`, text: hintText }) : null;
    const err = h('div', { class: 'field-error', id: `${id}-error`, testid: 'field-error', dataset: { field: key }, role: 'alert' });
    input.setAttribute('aria-describedby', [hint ? `${id}-hint` : '', `${id}-error`].filter(Boolean).join(' '));
    return { row: h('div', { class: 'field' }, h('label', { for: id, text: label }), input, hint, err), err };
  };

  const enabled = h('input', { type: 'checkbox', id: 'backup-enabled', testid: 'backup-enabled' });
  const folder = h('input', { type: 'text', testid: 'backup-folder', autocomplete: 'off', spellcheck: 'false', class: 'wide', placeholder: t('optBackupFolderPlaceholder') });
  const daily = h('input', { type: 'text', inputmode: 'numeric', testid: 'backup-daily', placeholder: String(BACKUP_DEFAULTS.backupDaily) });
  const weekly = h('input', { type: 'text', inputmode: 'numeric', testid: 'backup-weekly', placeholder: String(BACKUP_DEFAULTS.backupWeekly) });
  const fFolder = field('backupFolder', t('optBackupFolderLabel'), folder, t('optBackupFolderHint'));
  const fDaily = field('backupDaily', t('optBackupDailyLabel'), daily, t('optBackupDailyHint'));
  const fWeekly = field('backupWeekly', t('optBackupWeeklyLabel'), weekly, t('optBackupWeeklyHint'));
  const enabledErr = h('div', { class: 'field-error', testid: 'field-error', dataset: { field: 'backupsEnabled' }, role: 'alert' });
  const errors = { backupsEnabled: enabledErr, backupFolder: fFolder.err, backupDaily: fDaily.err, backupWeekly: fWeekly.err };
  const inputs = { backupsEnabled: enabled, backupFolder: folder, backupDaily: daily, backupWeekly: weekly };
  const save = h('button', { type: 'submit', class: 'btn btn-primary', testid: 'backup-save', text: t('optSave') });
  const saveStatus = h('span', { class: 'status', testid: 'backup-settings-status', role: 'status' });
  const form = h('form', { class: 'backup-form', testid: 'backup-form', novalidate: true },
    h('div', { class: 'field check' }, enabled, h('label', { for: 'backup-enabled', text: t('optBackupEnabledLabel') })),
    enabledErr,
    fFolder.row,
    h('div', { class: 'backup-numbers' }, fDaily.row, fWeekly.row),
    h('div', { class: 'actions' }, save, saveStatus));

  // the host's words and paths: data, not the UI's words (the i18n check skips translate="no")
  const noTranslate = (node) => { node.setAttribute('translate', 'no'); return node; };
  const where = noTranslate(h('span', { class: 'mono', testid: 'backup-where' }));
  const whereLine = h('p', { class: 'hint', testid: 'backup-where-line' }, h('span', { text: t('optBackupWhere') }), ' ', where);
  const lastLine = h('div', { class: 'status backup-last', testid: 'backup-last', role: 'status' });
  const lastMain = h('span', { testid: 'backup-last-text' });
  const lastReason = noTranslate(h('span', { testid: 'backup-last-reason' }));
  lastLine.append(lastMain, ' ', lastReason);

  const now = h('button', { type: 'button', class: 'btn', testid: 'backup-now', text: t('optBackupNow') });
  const undo = h('button', { type: 'button', class: 'btn btn-primary', testid: 'backup-undo', text: t('optBackupUndo') });
  const undoHint = h('span', { class: 'hint', testid: 'backup-undo-hint', id: 'backup-undo-hint' });
  undo.setAttribute('aria-describedby', 'backup-undo-hint');
  const undoRow = h('div', { class: 'inline', testid: 'backup-undo-row' }, undo, undoHint);
  undoRow.hidden = true;
  const progress = h('span', { class: 'spinner', testid: 'backup-progress', role: 'progressbar', 'aria-label': t('optBusy') });
  progress.hidden = true;
  const result = h('div', { class: 'result', testid: 'backup-result', role: 'status', 'aria-live': 'polite' });
  result.hidden = true;

  const listHead = h('h3', { text: t('optBackupCopiesHeading') });
  const table = h('table', { class: 'backups', testid: 'backup-list' });
  const listStatus = h('div', { class: 'status', testid: 'backup-list-status', role: 'status' });

  replaceChildren(el, form, lastLine, h('div', { class: 'inline backup-actions' }, now, progress), undoRow, result, listHead, whereLine, listStatus, table);

  let settingsDirty = false;
  let busy = false;
  let state = { copies: [], undo: null, enabled: true };

  function setStatus(node, text, kind = '') {
    node.textContent = text || '';
    if (kind) node.dataset.kind = kind;
    else delete node.dataset.kind;
  }

  function showResult(lines, kind) {
    replaceChildren(result, (Array.isArray(lines) ? lines : [lines]).filter(Boolean).map((l) => h('div', { text: l })));
    result.dataset.kind = kind;
    result.hidden = false;
  }

  /** Buttons wait while a backup or a restore runs. */
  function setBusy(on) {
    busy = on;
    progress.hidden = !on;
    el.setAttribute('aria-busy', on ? 'true' : 'false');
    now.disabled = on;
    undo.disabled = on;
    for (const b of table.querySelectorAll('button')) b.disabled = on;
  }

  // ---- settings ------------------------------------------------------------------------------
  function showSettings(v) {
    if (settingsDirty) return;
    enabled.checked = v.backupsEnabled;
    folder.value = v.backupFolder;
    daily.value = String(v.backupDaily);
    weekly.value = String(v.backupWeekly);
  }

  function showFieldErrors(map) {
    for (const [k, node] of Object.entries(errors)) {
      node.textContent = map[k] || '';
      inputs[k].setAttribute('aria-invalid', String(!!map[k]));
    }
  }

  async function reloadSettings() {
    try {
      showSettings(backupSettings(await storage.settings.get({ keys: [...BACKUP_KEYS] })));
    } catch (err) {
      setStatus(saveStatus, t('optCouldNotReadSettings', explain(err)), 'error');
    }
  }

  form.addEventListener('input', () => { settingsDirty = true; setStatus(saveStatus, ''); });
  form.addEventListener('change', () => { settingsDirty = true; setStatus(saveStatus, ''); });
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    const r = readBackupForm({ enabled: enabled.checked, folder: folder.value, daily: daily.value, weekly: weekly.value });
    if (!r.ok) {
      showFieldErrors(r.errors);
      setStatus(saveStatus, t('optFixFields'), 'error');
      inputs[Object.keys(r.errors)[0]].focus();
      return;
    }
    showFieldErrors({});
    save.disabled = true;
    try {
      await storage.settings.set({ map: r.map });
      settingsDirty = false;
      showSettings(r.map);
      setStatus(saveStatus, t('optSaved'), 'ok');
      await refresh();
    } catch (err) {
      const key = err?.code === 'bad_request' ? fieldOfError(err) : '';
      if (key) {
        showFieldErrors({ [key]: explain(err) });
        inputs[key].focus();
        setStatus(saveStatus, t('optNotSavedNothingChanged'), 'error');
      } else {
        setStatus(saveStatus, t('optNotSaved', explain(err)), 'error');
      }
    } finally {
      save.disabled = false;
    }
  });

  // ---- the list ------------------------------------------------------------------------------
  // Read again on a timer too: the host makes the daily copy on its own thread and says nothing,
  // so a page opened before it finished would not list it. Soon while one is due, then seldom.
  let pollTimer = null;
  let soonTries = 0;
  let dueSoon = false;
  function schedule() {
    if (pollTimer !== null) timers.clearTimeout(pollTimer);
    const soon = dueSoon && soonTries < LIST_SOON_TRIES;
    if (soon) soonTries += 1;
    pollTimer = timers.setTimeout(() => {
      pollTimer = null;
      if (busy || globalThis.document?.visibilityState === 'hidden') schedule();
      else refresh();
    }, soon ? LIST_SOON_MS : LIST_POLL_MS);
  }

  let listSeq = 0;
  async function refresh() {
    const my = ++listSeq;
    table.setAttribute('aria-busy', 'true');
    try {
      const r = await storage.backups.list({});
      if (my !== listSeq) return;
      state = { copies: newestFirst(r?.copies), undo: r?.undo && typeof r.undo.id === 'string' ? r.undo : null, enabled: r?.enabled !== false };
      dueSoon = state.enabled && (!r?.last || r.last.outcome === 'running');
      where.textContent = typeof r?.folder === 'string' && r.folder ? r.folder : '—';
      const last = lastText(r?.last, { enabled: state.enabled });
      setStatus(lastMain, last.text);
      lastReason.textContent = last.reason;
      if (last.kind) lastLine.dataset.kind = last.kind;
      else delete lastLine.dataset.kind;
      setStatus(listStatus, '');
      renderList();
      renderUndo();
    } catch (err) {
      if (my !== listSeq) return;
      setStatus(listStatus, t('optBackupListFailed', explain(err)), 'error');
      replaceChildren(table);
      state = { ...state, copies: [], undo: null };
      renderUndo();
    } finally {
      if (my === listSeq) {
        table.removeAttribute('aria-busy');
        schedule();
      }
    }
  }
  const refreshSoon = debounce(() => { if (!busy) refresh(); }, 300);

  function renderUndo() {
    undoRow.hidden = !state.undo;
    undoHint.textContent = state.undo ? t('optBackupUndoHint', when(state.undo.createdAt)) : '';
  }

  function renderList() {
    if (state.copies.length === 0) {
      replaceChildren(table, h('tbody', {}, h('tr', {}, h('td', { class: 'backups-empty', testid: 'backup-none', text: t('optBackupNone') }))));
      return;
    }
    const head = h('thead', {}, h('tr', {},
      h('th', { scope: 'col', text: t('optBackupColKind') }),
      h('th', { scope: 'col', text: t('optBackupColTime') }),
      h('th', { scope: 'col', text: t('optBackupColSchema') }),
      h('th', { scope: 'col', class: 'num', text: t('optBackupColChats') }),
      h('th', { scope: 'col', class: 'num', text: t('optBackupColSize') }),
      h('th', { scope: 'col', text: t('optBackupColAction') })));
    const body = h('tbody', {}, state.copies.map((c) => buildRow(c)));
    replaceChildren(table, head, body);
  }

  function buildRow(copy) {
    const f = copyFacts(copy);
    const restoreButton = h('button', { type: 'button', class: 'btn btn-small', testid: 'backup-restore', text: t('optBackupRestore'), 'aria-label': t('optBackupRestoreLabel', f.when), disabled: busy });
    const tr = h('tr', { testid: 'backup-row', dataset: { id: copy.id, kind: copy.kind } },
      h('td', { testid: 'backup-kind', text: f.kind }),
      h('td', { testid: 'backup-time', text: f.when }),
      h('td', { testid: 'backup-schema', text: f.schema }),
      h('td', { class: 'num', testid: 'backup-chats', text: f.chats }),
      h('td', { class: 'num', testid: 'backup-size', text: f.size }),
      h('td', {}, restoreButton));
    restoreButton.addEventListener('click', () => confirmRestore(copy, tr, restoreButton));
    return tr;
  }

  /** The one confirmation, in a row right under the copy; Cancel has the focus, Escape cancels. */
  function confirmRestore(copy, tr, button) {
    table.querySelector('.confirm-row')?.remove();
    const question = restoreQuestion(copy);
    const yes = h('button', { type: 'button', class: 'btn btn-small btn-danger', testid: 'confirm-yes', text: t('optBackupRestoreYes') });
    const no = h('button', { type: 'button', class: 'btn btn-small', testid: 'confirm-no', text: t('optCancel') });
    const box = h('div', { class: 'confirm', role: 'alertdialog', testid: 'confirm', 'aria-label': question }, h('span', { testid: 'confirm-text', text: question }), no, yes);
    const row = h('tr', { class: 'confirm-row' }, h('td', { colspan: '6' }, box));
    const cancel = () => { row.remove(); button.focus(); };
    no.addEventListener('click', cancel);
    box.addEventListener('keydown', (e) => { if (e.key === 'Escape') { e.preventDefault(); cancel(); } });
    yes.addEventListener('click', () => {
      row.remove();
      restore(copy, { undo: false });
    });
    tr.after(row);
    no.focus();
  }

  async function restore(copy, { undo: isUndo }) {
    if (busy) return;
    setBusy(true);
    showResult(isUndo ? t('optBackupUndoing') : t('optBackupRestoring', when(copy.createdAt)), 'info');
    try {
      const r = await storage.backups.restore({ id: copy.id });
      showResult(isUndo
        ? t('optBackupUndone', when(copy.createdAt))
        : [t('optBackupRestored', when(copy.createdAt), chatsText(copy.sessions)), t('optBackupRestoredUndo')], 'ok');
      result.dataset.restored = String(r?.restored ?? copy.id);
    } catch (err) {
      showResult(isUndo ? t('optBackupUndoFailed', explain(err)) : t('optBackupRestoreFailed', explain(err)), 'error');
    } finally {
      setBusy(false);
      await refresh();
      try { onRestored(); } catch { /* the page's own reload reports its errors */ }
      (state.undo && !undoRow.hidden ? undo : now).focus();
    }
  }

  undo.addEventListener('click', () => {
    if (state.undo) restore({ id: state.undo.id, createdAt: state.undo.createdAt }, { undo: true });
  });

  now.addEventListener('click', async () => {
    if (busy) return;
    setBusy(true);
    showResult(t('optBackupMaking'), 'info');
    try {
      const r = await storage.backups.create({});
      const c = r?.copy ?? {};
      showResult(t('optBackupMade', when(c.createdAt), chatsText(c.sessions), sizeText(c.bytes)), 'ok');
    } catch (err) {
      showResult(t('optBackupMakeFailed', explain(err)), 'error');
    } finally {
      setBusy(false);
      await refresh();
    }
  });

  return {
    async load() {
      await Promise.allSettled([reloadSettings(), refresh()]);
    },
    refresh,
    refreshSoon,
    reloadSettings,
  };
}
