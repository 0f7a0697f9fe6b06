// Options page: provider cards (ping, active provider/model), conversation settings, and the Host panel
// (connection facts from host.hello, checks, importing data an older version kept in the browser).
// Settings go to keepsake-host with settings.get / settings.set (explicit keys, storage-model §3, §9).

import { hostCall, workerCall as rawWorkerCall, onWorkerEvent } from '../lib/bridge.js';
import { createStorage } from '../lib/storage.js';
import { explainHostError, HOST_ERROR_CODES, CLIENT_ERROR_CODES, PROTOCOL_VERSION, OPS } from '../lib/protocol.js';
import { ping } from '../lib/llm.js';
import { h, replaceChildren } from '../lib/ui/dom.js';
import { createBanner, isConnectionError } from '../lib/ui/banner.js';
import { describeImportResult, grouped } from '../lib/ui/format.js';
import { askImportSettings, importWithPreview } from '../lib/ui/import-confirm.js';
import { evictedNames, evictedNotice } from '../lib/ui/evicted.js';
import {
  KINDS, PRESETS, OPTION_KEYS, cardFromPreset, normalizeCard, validateCard, upsertCard, afterDelete,
  parseWholeNumber, parsePositiveWholeNumber, withDefaults, summarizeBrowserDump, insecureBaseUrlWarning, keyPlaceholder,
} from './providers.js';
import { saveSettings } from './settings-save.js';

const $ = (id) => document.getElementById(id);

let pending = 0;
function tracked(fn) {
  return async (...args) => {
    pending += 1;
    $('busy').hidden = false;
    try { return await fn(...args); } finally {
      pending -= 1;
      $('busy').hidden = pending === 0;
    }
  };
}
const workerCall = tracked(rawWorkerCall);
const storage = createStorage(tracked(hostCall));
const banner = createBanner($('host-banner'), { onRetry: reconnect });
const KNOWN = new Set([...HOST_ERROR_CODES, ...CLIENT_ERROR_CODES]);

/**
 * One line about `err` for a field or a status. A missing or stopped host is explained once, by the
 * banner at the top: every place that could not read says so in a few words instead of repeating it.
 */
function explainLine(err) {
  if (isConnectionError(err)) {
    banner.show(err);
    return 'the Keepsake host is not connected (the banner at the top says why and how to fix it)';
  }
  if (err && KNOWN.has(err.code)) {
    const ex = explainHostError(err);
    return `${ex.title}.${ex.detail ? ` ${ex.detail}` : ''}`;
  }
  return String(err?.message || err || 'Unknown error');
}

function setStatus(el, text, kind = '') {
  el.textContent = text || '';
  if (kind) el.dataset.kind = kind;
  else delete el.dataset.kind;
}

// ===================================================================================================
// Providers
// ===================================================================================================

let config = withDefaults({});
/** Cards on screen: id → {card (last saved or new), el, dirty, isNew} */
const cards = new Map();

for (const p of PRESETS) $('provider-preset').append(h('option', { value: p.id, text: p.id === 'custom' ? 'Custom…' : p.name }));

async function loadSettings() {
  try {
    const stored = await storage.settings.get({ keys: [...OPTION_KEYS] });
    config = withDefaults(stored);
    renderProviders();
    renderChatSettings();
  } catch (err) {
    setStatus($('settings-status'), `Could not read settings: ${explainLine(err)}`, 'error');
    replaceChildren($('provider-list'), h('div', { class: 'cards-empty', text: `Settings could not be read: ${explainLine(err)}` }));
  }
}

function renderProviders() {
  const list = $('provider-list');
  const keep = new Map();
  for (const c of config.providers) {
    const cur = cards.get(c.id);
    if (cur && (cur.dirty || JSON.stringify(cur.card) === JSON.stringify(c))) {
      if (!cur.dirty) cur.card = c;
      keep.set(c.id, cur);
    } else {
      keep.set(c.id, { card: c, dirty: false, isNew: false, el: null, lastStatus: cur?.lastStatus });
    }
  }
  for (const [id, cur] of cards) if (cur.isNew && !keep.has(id)) keep.set(id, cur);
  cards.clear();
  for (const [id, v] of keep) cards.set(id, v);
  const els = [];
  for (const [, v] of cards) {
    if (!v.el) {
      v.el = buildCard(v);
      if (v.lastStatus) setCardStatus(v, v.lastStatus.text, v.lastStatus.kind);
    }
    updateCardHead(v);
    els.push(v.el);
  }
  if (els.length === 0) els.push(h('div', { class: 'cards-empty', testid: 'provider-empty', text: 'No provider yet. Pick one under “Add” — Ollama and LM Studio run locally without a key.' }));
  replaceChildren(list, els);
  if (document.activeElement !== $('provider-active-model')) $('provider-active-model').value = config.activeModel;
}

function setCardStatus(v, text, kind = '') {
  v.lastStatus = text ? { text, kind } : null;
  setStatus(v.parts.status, text, kind);
}

function fieldRow(label, input, field, v, control = input) {
  const err = h('div', { class: 'field-error', testid: 'field-error', dataset: { field }, role: 'alert' });
  v.errors[field] = err;
  const id = `${v.card.id}-${field}`;
  input.id = id;
  input.setAttribute('aria-describedby', `${id}-err`);
  err.id = `${id}-err`;
  return h('div', { class: 'field' }, h('label', { for: id, text: label }), control, err);
}

function buildCard(v) {
  const c = v.card;
  v.errors = {};
  const name = h('input', { type: 'text', testid: 'provider-name', value: c.name || '', autocomplete: 'off' });
  const kind = h('select', { testid: 'provider-kind' }, KINDS.map((k) => h('option', { value: k.value, text: k.label })));
  kind.value = KINDS.some((k) => k.value === c.kind) ? c.kind : 'chat';
  const baseUrl = h('input', { type: 'url', testid: 'provider-base-url', value: c.baseUrl || '', placeholder: 'https://…/v1', autocomplete: 'off', spellcheck: 'false' });
  const apiKey = h('input', { type: 'password', testid: 'provider-api-key', value: c.apiKey || '', placeholder: keyPlaceholder(c), autocomplete: 'off', spellcheck: 'false' });
  const followBase = () => {
    apiKey.placeholder = keyPlaceholder({ kind: kind.value, baseUrl: baseUrl.value });
  };
  baseUrl.addEventListener('input', followBase);
  kind.addEventListener('change', followBase);
  const showKey = h('button', { type: 'button', class: 'btn btn-small', testid: 'provider-api-key-toggle', text: 'Show', 'aria-pressed': 'false' });
  showKey.addEventListener('click', () => {
    const show = apiKey.type === 'password';
    apiKey.type = show ? 'text' : 'password';
    showKey.textContent = show ? 'Hide' : 'Show';
    showKey.setAttribute('aria-pressed', String(show));
  });
  const model = h('input', { type: 'text', testid: 'provider-model', value: c.model || '', placeholder: 'model name', autocomplete: 'off', spellcheck: 'false' });
  const active = h('input', { type: 'radio', name: 'active-provider', testid: 'provider-active', 'aria-label': 'Use this provider' });
  const title = h('span', { class: 'card-title', testid: 'provider-title' });
  const unsaved = h('span', { class: 'badge badge-warn', testid: 'provider-unsaved', text: 'Unsaved' });
  const pingBtn = h('button', { type: 'button', class: 'btn btn-small', testid: 'provider-ping', text: 'Ping' });
  const pingResult = h('span', { class: 'ping-result', testid: 'provider-ping-result', role: 'status' });
  const save = h('button', { type: 'submit', class: 'btn btn-small btn-primary', testid: 'provider-save', text: 'Save' });
  const del = h('button', { type: 'button', class: 'btn btn-small btn-danger-outline', testid: 'provider-delete', text: 'Delete' });
  const status = h('div', { class: 'status', testid: 'provider-status', role: 'status' });
  const keyRow = h('div', { class: 'key-row' }, apiKey, showKey);
  // plain http:// to another machine: said under the fields at once, asked again on Save (issue 18)
  const insecure = h('div', { class: 'insecure-warning', testid: 'provider-insecure', id: `${c.id}-insecure`, 'aria-live': 'polite' });
  const showInsecure = () => {
    insecure.textContent = insecureBaseUrlWarning(baseUrl.value, { hasKey: apiKey.value.trim() !== '' });
  };
  // a key the host keeps in the system's secret store but could not read now (PROTOCOL.md "API
  // keys"): an empty field sent back keeps it
  const keyControl = c.apiKeyUnavailable
    ? h('div', {}, keyRow, h('div', { class: 'hint', testid: 'provider-api-key-unavailable', role: 'note', text: `The saved key is kept in the system’s secret store, which cannot be read now (${c.apiKeyUnavailable}). Leave the field empty to keep it, or enter the key again.` }))
    : keyRow;

  const form = h('form', { class: 'card', testid: 'provider-card', dataset: { id: c.id }, novalidate: true },
    h('div', { class: 'card-head' }, h('label', { class: 'inline' }, active, title), unsaved),
    h('div', { class: 'card-grid' },
      fieldRow('Name', name, 'name', v),
      fieldRow('API kind', kind, 'kind', v),
      fieldRow('Base URL', baseUrl, 'baseUrl', v),
      fieldRow('API key', apiKey, 'apiKey', v, keyControl),
      fieldRow('Model', model, 'model', v)),
    insecure,
    h('div', { class: 'card-actions' }, pingBtn, pingResult, h('span', { class: 'spacer' }), del, save),
    status);
  baseUrl.setAttribute('aria-describedby', `${baseUrl.getAttribute('aria-describedby')} ${c.id}-insecure`);
  showInsecure();
  v.inputs = { name, kind, baseUrl, apiKey, model, active };
  v.parts = { title, unsaved, status, pingResult };

  const read = () => normalizeCard({ ...v.card, name: name.value, kind: kind.value, baseUrl: baseUrl.value, apiKey: apiKey.value, model: model.value });
  v.read = read;
  form.addEventListener('input', (e) => {
    if (e.target === active) return;
    v.dirty = true;
    updateCardHead(v);
    if (e.target === baseUrl || e.target === apiKey) showInsecure();
  });
  kind.addEventListener('change', () => {
    // a kind change with an untouched preset URL moves to that kind's usual endpoint
    const preset = PRESETS.find((p) => p.kind === kind.value && p.id !== 'custom');
    if (kind.value === 'anthropic' && (!baseUrl.value || /api\.openai\.com/.test(baseUrl.value))) baseUrl.value = preset.baseUrl;
    if (preset && (kind.value === 'runs' || kind.value === 'agent') && !baseUrl.value.trim()) baseUrl.value = preset.baseUrl;
    v.dirty = true;
    updateCardHead(v);
    showInsecure();
  });
  active.addEventListener('change', () => { if (active.checked) makeActive(v); });
  form.addEventListener('submit', (e) => { e.preventDefault(); saveCard(v, save); });
  pingBtn.addEventListener('click', () => doPing(v, pingBtn));
  del.addEventListener('click', () => confirmDelete(v, form, del));
  return form;
}

function updateCardHead(v) {
  const c = v.read ? v.read() : v.card;
  v.parts.title.textContent = c.name || 'Unnamed provider';
  v.parts.unsaved.hidden = !(v.dirty || v.isNew);
  v.inputs.active.checked = config.activeProvider === v.card.id;
  v.inputs.active.disabled = v.isNew;
  v.el?.classList.toggle('active', config.activeProvider === v.card.id);
}

function showErrors(v, errors) {
  for (const [field, el] of Object.entries(v.errors)) el.textContent = errors[field] || '';
}

async function saveCard(v, button) {
  const card = v.read();
  const others = [...cards.values()].filter((x) => x !== v).map((x) => (x.read ? x.read() : x.card));
  const errors = validateCard(card, others);
  showErrors(v, errors);
  if (Object.keys(errors).length) {
    setCardStatus(v, 'Fix the highlighted fields.', 'error');
    return;
  }
  // A base URL that sends the key unencrypted is saved only once the person says so (not again
  // for a later edit of the same card that keeps that URL).
  const warning = insecureBaseUrlWarning(card.baseUrl, { hasKey: card.apiKey !== '' });
  if (warning && (v.isNew || normalizeCard(v.card).baseUrl !== card.baseUrl)) {
    button.disabled = true;
    const yes = await askInCard(v, `${warning} Save this base URL anyway?`);
    button.disabled = false;
    if (!yes) {
      setCardStatus(v, 'Not saved: the base URL is not encrypted.', 'error');
      return;
    }
  }
  button.disabled = true;
  try {
    // re-read so a card saved from another window is not lost
    const fresh = withDefaults(await storage.settings.get({ keys: ['providers', 'activeProvider', 'activeModel'] }));
    const providers = upsertCard(fresh.providers, card);
    const map = { providers };
    let activeProvider = fresh.activeProvider;
    if (!activeProvider || !providers.some((p) => p.id === activeProvider)) activeProvider = card.id; // the first card becomes active
    if (activeProvider === card.id) {
      map.activeProvider = card.id;
      map.activeModel = card.model;
    }
    await storage.settings.set({ map });
    v.card = card;
    v.dirty = false;
    v.isNew = false;
    config = withDefaults({ ...fresh, ...map, providers });
    setCardStatus(v, 'Saved.', 'ok');
    renderProviders();
  } catch (err) {
    setCardStatus(v, `Not saved: ${explainLine(err)}`, 'error');
  } finally {
    button.disabled = false;
  }
}

async function makeActive(v) {
  try {
    await storage.settings.set({ map: { activeProvider: v.card.id, activeModel: v.card.model || '' } });
    config.activeProvider = v.card.id;
    config.activeModel = v.card.model || '';
    $('provider-active-model').value = config.activeModel;
    for (const x of cards.values()) updateCardHead(x);
    setCardStatus(v, 'Now the active provider.', 'ok');
  } catch (err) {
    setCardStatus(v, `Could not switch: ${explainLine(err)}`, 'error');
    for (const x of cards.values()) updateCardHead(x);
  }
}

/** Ask inside a provider card (Save anyway / Cancel); → true to go on. Escape cancels. */
function askInCard(v, question) {
  return new Promise((resolve) => {
    v.el.querySelector('.confirm')?.remove();
    const yes = h('button', { type: 'button', class: 'btn btn-small btn-danger', testid: 'insecure-save', text: 'Save anyway' });
    const no = h('button', { type: 'button', class: 'btn btn-small', testid: 'insecure-cancel', text: 'Cancel' });
    const box = h('div', { class: 'confirm', role: 'alertdialog', testid: 'insecure-confirm', 'aria-label': question }, h('span', { testid: 'insecure-question', text: question }), no, yes);
    const answer = (ok) => { box.remove(); resolve(ok); };
    no.addEventListener('click', () => answer(false));
    yes.addEventListener('click', () => answer(true));
    box.addEventListener('keydown', (e) => { if (e.key === 'Escape') { e.preventDefault(); answer(false); } });
    v.el.append(box);
    no.focus();
  });
}

function confirmDelete(v, form, del) {
  form.querySelector('.confirm')?.remove();
  const yes = h('button', { type: 'button', class: 'btn btn-small btn-danger', testid: 'confirm-yes', text: 'Delete' });
  const no = h('button', { type: 'button', class: 'btn btn-small', testid: 'confirm-no', text: 'Cancel' });
  const box = h('div', { class: 'confirm', role: 'alertdialog', testid: 'confirm' }, h('span', { text: `Delete “${v.card.name || 'this provider'}”?` }), no, yes);
  no.addEventListener('click', () => { box.remove(); del.focus(); });
  yes.addEventListener('click', async () => {
    yes.disabled = true;
    if (v.isNew) {
      cards.delete(v.card.id);
      renderProviders();
      return;
    }
    try {
      const fresh = withDefaults(await storage.settings.get({ keys: ['providers', 'activeProvider', 'activeModel'] }));
      const next = afterDelete(fresh.providers, v.card.id, fresh.activeProvider, fresh.activeModel);
      await storage.settings.set({ map: next });
      cards.delete(v.card.id);
      config = withDefaults({ ...config, ...next });
      renderProviders();
    } catch (err) {
      box.remove();
      setCardStatus(v, `Not deleted: ${explainLine(err)}`, 'error');
    }
  });
  form.append(box);
  no.focus();
}

async function doPing(v, button) {
  const card = v.read();
  const errors = validateCard(card, []);
  delete errors.name;
  showErrors(v, errors);
  if (Object.keys(errors).length) {
    setStatus(v.parts.pingResult, 'Fill in the base URL and model first.');
    v.parts.pingResult.dataset.ok = 'false';
    return;
  }
  button.disabled = true;
  button.setAttribute('aria-busy', 'true');
  v.parts.pingResult.textContent = 'Pinging…';
  delete v.parts.pingResult.dataset.ok;
  try {
    const r = await ping({ id: card.id, name: card.name, kind: card.kind, baseUrl: card.baseUrl, apiKey: card.apiKey, model: card.model });
    v.parts.pingResult.dataset.ok = r?.ok ? 'true' : 'false';
    v.parts.pingResult.textContent = r?.ok
      ? `OK in ${Math.round(Number(r.ms) || 0)} ms${r.detail && r.detail !== 'OK' ? ` — ${String(r.detail).replace(/^OK:?\s*/, '')}` : ''}`
      : `Failed${Number.isFinite(r?.ms) ? ` after ${Math.round(r.ms)} ms` : ''}: ${r?.detail || 'no detail'}`;
  } catch (err) {
    v.parts.pingResult.dataset.ok = 'false';
    v.parts.pingResult.textContent = `Failed: ${err?.message || err}`;
  } finally {
    button.disabled = false;
    button.removeAttribute('aria-busy');
  }
}

$('provider-add').addEventListener('click', () => {
  const names = [...cards.values()].map((x) => (x.read ? x.read().name : x.card.name));
  const card = cardFromPreset($('provider-preset').value, () => crypto.randomUUID(), names);
  const v = { card, dirty: true, isNew: true, el: null };
  cards.set(card.id, v);
  renderProviders();
  v.inputs.name.focus();
  v.el.scrollIntoView({ block: 'nearest' });
  const preset = PRESETS.find((p) => p.id === $('provider-preset').value);
  setCardStatus(v, preset?.needsKey ? 'Enter the API key, then Save.' : 'Check the model name, then Save.');
});

$('provider-active-model-save').addEventListener('click', async (e) => {
  const btn = e.currentTarget;
  const status = $('active-model-status');
  const value = $('provider-active-model').value.trim();
  if (!config.activeProvider) { setStatus(status, 'Choose an active provider first.', 'error'); return; }
  btn.disabled = true;
  try {
    await storage.settings.set({ map: { activeModel: value } });
    config.activeModel = value;
    setStatus(status, value ? `Replies now use ${value}.` : 'Replies use the card’s model.', 'ok');
  } catch (err) {
    setStatus(status, `Not saved: ${explainLine(err)}`, 'error');
  } finally {
    btn.disabled = false;
  }
});

// ===================================================================================================
// Conversation settings
// ===================================================================================================

let chatDirty = false;
function renderChatSettings() {
  if (chatDirty) return;
  $('system-prompt').value = config.systemPrompt;
  $('auto-summary').checked = config.autoSummarizeAttachments;
  $('summary-threshold').value = config.summarizeThresholdChars ? String(config.summarizeThresholdChars) : '';
  $('max-sessions').value = String(config.maxSessions);
  $('trash-days').value = String(config.trashDays);
  $('summary-threshold').disabled = !config.autoSummarizeAttachments;
}
$('settings-form').addEventListener('input', () => { chatDirty = true; setStatus($('settings-status'), ''); });
$('auto-summary').addEventListener('change', () => { $('summary-threshold').disabled = !$('auto-summary').checked; });
/** Ask in the form before a save that moves chats to Recently deleted; → true to go on. */
function askInForm(question) {
  return new Promise((resolve) => {
    const host = $('settings-confirm');
    host.querySelector('.confirm')?.remove();
    const yes = h('button', { type: 'button', class: 'btn btn-small btn-danger', testid: 'confirm-yes', text: 'Continue' });
    const no = h('button', { type: 'button', class: 'btn btn-small', testid: 'confirm-no', text: 'Cancel' });
    const box = h('div', { class: 'confirm', role: 'alertdialog', testid: 'confirm', 'aria-label': question }, h('span', { testid: 'confirm-text', text: question }), no, yes);
    const answer = (v) => { box.remove(); resolve(v); };
    no.addEventListener('click', () => answer(false));
    yes.addEventListener('click', () => answer(true));
    box.addEventListener('keydown', (e) => { if (e.key === 'Escape') { e.preventDefault(); answer(false); } });
    host.append(box);
    no.focus();
  });
}

$('settings-form').addEventListener('submit', async (e) => {
  e.preventDefault();
  const threshold = parseWholeNumber($('summary-threshold').value, { emptyValue: 0 });
  const maxSessions = parseWholeNumber($('max-sessions').value, { emptyValue: 0 });
  const trashDays = parsePositiveWholeNumber($('trash-days').value, { emptyValue: 30 });
  const fields = [['summary-threshold', threshold], ['max-sessions', maxSessions], ['trash-days', trashDays]];
  for (const [id, r] of fields) {
    $(`${id}-error`).textContent = r.ok ? '' : r.error;
    $(id).setAttribute('aria-invalid', String(!r.ok));
  }
  const bad = fields.find(([, r]) => !r.ok);
  if (bad) {
    setStatus($('settings-status'), 'Fix the highlighted fields.', 'error');
    $(bad[0]).focus();
    return;
  }
  const map = {
    systemPrompt: $('system-prompt').value,
    autoSummarizeAttachments: $('auto-summary').checked,
    summarizeThresholdChars: threshold.value,
    maxSessions: maxSessions.value,
    trashDays: trashDays.value,
  };
  const btn = $('settings-save');
  btn.disabled = true;
  replaceChildren($('settings-evicted'));
  try {
    const r = await saveSettings({ storage, map, ask: askInForm });
    if (!r.saved) {
      setStatus($('settings-status'), 'Not saved: nothing was changed.', '');
      return;
    }
    Object.assign(config, map);
    chatDirty = false;
    renderChatSettings();
    setStatus($('settings-status'), 'Saved.', 'ok');
    if (r.evicted.length) {
      const names = await evictedNames(storage, r.evicted);
      $('settings-evicted').append(evictedNotice({ storage, ids: r.evicted, names, explain: explainLine, dismissable: false, onRestored: () => loadCounts() }));
    }
  } catch (err) {
    setStatus($('settings-status'), `Not saved: ${explainLine(err)}`, 'error');
  } finally {
    btn.disabled = false;
  }
});

// ===================================================================================================
// Host panel
// ===================================================================================================

let lastHello = null;

function applyHostState(st) {
  if (!st || typeof st !== 'object') return;
  const stateText = { open: 'Connected', idle: 'Idle (connects on demand)', connecting: 'Connecting…', error: 'Not connected' }[st.state] || st.state || '—';
  $('host-state').textContent = stateText;
  $('host-state').dataset.state = st.state || '';
  if (st.hello) showHello(st.hello);
  if (st.dbError) banner.show(st.dbError);
  else if (st.state === 'error' && st.error) banner.show(st.error);
  else if (st.state === 'open') banner.hide();
}

function showHello(hello) {
  lastHello = hello;
  $('host-version').textContent = hello.version ? `${hello.name || 'keepsake-host'} ${hello.version}` : '—';
  const pv = hello.protocolVersion;
  $('host-protocol').textContent = pv === undefined ? '—' : `${pv}${pv === PROTOCOL_VERSION ? '' : ` (this extension speaks ${PROTOCOL_VERSION})`}`;
  $('host-db-path').textContent = hello.dbPath || '—';
  const sv = hello.schemaVersion;
  const lv = hello.latestSchemaVersion;
  $('host-schema').textContent = sv === undefined || sv === null ? '—' : `${sv}${lv !== undefined && lv !== sv ? ` (latest ${lv})` : ''}`;
  const dbErr = $('host-db-error');
  if (hello.dbError) {
    const ex = explainHostError(hello.dbError);
    replaceChildren(dbErr, h('strong', { text: ex.title }), h('div', { text: ex.detail }),
      h('div', {}, 'Run ', h('code', { text: 'keepsake-host doctor' }), ' in a terminal for the full diagnosis.'));
    dbErr.hidden = false;
  } else {
    dbErr.hidden = true;
  }
}

async function loadCounts() {
  try {
    const meta = await storage.history.meta();
    const earlier = Number(meta?.offset) || 0;
    $('host-live-count').textContent = `${grouped(meta?.length ?? 0)} message${meta?.length === 1 ? '' : 's'} shown${earlier ? ` (${grouped(earlier)} earlier kept in its chat)` : ''}`;
  } catch (err) {
    $('host-live-count').textContent = `unavailable: ${explainLine(err)}`;
  }
  try {
    const rows = await storage.sessions.list({});
    const n = Array.isArray(rows) ? rows.length : 0;
    const entries = Array.isArray(rows) ? rows.reduce((a, r) => a + (Number(r.entryCount) || 0), 0) : 0;
    const pinned = Array.isArray(rows) ? rows.filter((r) => r.pinned).length : 0;
    $('host-session-count').textContent = `${grouped(n)} (${grouped(entries)} messages${pinned ? `, ${pinned} pinned` : ''})`;
  } catch (err) {
    $('host-session-count').textContent = `unavailable: ${explainLine(err)}`;
  }
  try {
    const st = await storage.host.status({});
    const db = Number(st?.sizes?.database) || 0;
    const wal = Number(st?.sizes?.wal) || 0;
    $('host-db-size').textContent = `${mib(db + wal)} (database ${mib(db)}, log ${mib(wal)}; ${grouped(st?.counts?.images ?? 0)} images, ${mib(st?.imageBytes ?? 0)})`;
    // where the API keys are: the system's secret store, or the database file when none is reachable
    const keys = st?.apiKeys;
    $('host-api-keys').textContent = keys?.summary || '—';
    $('host-api-keys').dataset.status = keys?.status || '';
  } catch (err) {
    $('host-db-size').textContent = `unavailable: ${explainLine(err)}`;
  }
}

function mib(bytes) {
  const n = Number(bytes) || 0;
  return n >= 1024 * 1024 ? `${(n / (1024 * 1024)).toFixed(1)} MiB` : `${Math.round(n / 1024)} KiB`;
}

async function loadHost() {
  try {
    applyHostState(await workerCall('host.state'));
  } catch (err) {
    $('host-state').textContent = `Unknown: ${explainLine(err)}`;
  }
  try {
    showHello(await storage.host.hello());
    $('host-state').textContent = 'Connected';
    banner.hide();
  } catch (err) {
    $('host-state').textContent = `Not connected: ${explainLine(err)}`;
    return false;
  }
  await loadCounts();
  return true;
}

async function runChecks() {
  const list = $('host-checks');
  const items = [];
  const add = (ok, text) => items.push(h('li', { dataset: { ok: String(ok) }, testid: 'host-check-item' }, h('span', { class: 'mark', text: ok === true ? '✓' : ok === false ? '✗' : 'i' }), h('span', { text })));
  const btn = $('host-check');
  btn.disabled = true;
  btn.setAttribute('aria-busy', 'true');
  try {
    let hello = null;
    try {
      hello = await storage.host.hello();
      showHello(hello);
      add(true, `The browser starts keepsake-host ${hello.version || ''} and it answers.`);
    } catch (err) {
      const ex = explainHostError(err);
      add(false, `Connection: ${ex.title}. ${ex.detail}`);
      if (ex.fix) add('info', `Fix: ${ex.fix}${ex.then ? ` — ${ex.then}` : ''}`);
    }
    if (hello) {
      add(hello.protocolVersion === PROTOCOL_VERSION, hello.protocolVersion === PROTOCOL_VERSION
        ? `Protocol version ${hello.protocolVersion} matches the extension.`
        : `Protocol version ${hello.protocolVersion} differs from the extension's ${PROTOCOL_VERSION}: install matching versions.`);
      if (hello.dbError) {
        const ex = explainHostError(hello.dbError);
        add(false, `Database: ${ex.title}. ${ex.detail}`);
      } else {
        add(true, `Database opened: ${hello.dbPath || '(path not reported)'}.`);
      }
      if (hello.schemaVersion !== undefined && hello.latestSchemaVersion !== undefined) {
        add(hello.schemaVersion === hello.latestSchemaVersion, hello.schemaVersion === hello.latestSchemaVersion
          ? `Schema version ${hello.schemaVersion} is current.`
          : `Schema version ${hello.schemaVersion}, this host knows ${hello.latestSchemaVersion}.`);
      }
      if (Array.isArray(hello.ops)) {
        const missing = OPS.filter((op) => !hello.ops.includes(op));
        add(missing.length === 0, missing.length === 0 ? `All ${OPS.length} operations the extension uses are available.` : `The host lacks: ${missing.join(', ')} — update keepsake-host.`);
      }
      if (!hello.dbError) {
        try {
          await storage.history.meta();
          await storage.sessions.list({});
          add(true, 'Reading the conversation and the session list works.');
        } catch (err) {
          add(false, `Reading failed: ${explainLine(err)}`);
        }
        await loadCounts();
      }
    }
    if (hello && !hello.dbError) {
      // the host runs `keepsake-host doctor --json` for us: manifests, permissions, Flatpak/Snap
      try {
        const st = await storage.host.status({ doctor: true });
        const checks = Array.isArray(st?.doctor?.checks) ? st.doctor.checks : [];
        for (const c of checks) {
          const ok = c.status === 'ok' ? true : c.status === 'fail' ? false : 'info';
          const extra = [c.browserError ? `The extension would see: “${c.browserError}”` : '', c.fix ? `Fix: ${c.fix}` : ''].filter(Boolean).join(' ');
          add(ok, `doctor · ${c.check}: ${c.detail}${extra ? ` — ${extra}` : ''}`);
        }
        if (!checks.length) add('info', 'keepsake-host doctor reported nothing; run it in a terminal.');
      } catch (err) {
        add(false, `keepsake-host doctor could not run: ${explainLine(err)}. Run it in a terminal.`);
      }
    }
  } finally {
    replaceChildren(list, items);
    list.hidden = false;
    btn.disabled = false;
    btn.removeAttribute('aria-busy');
  }
}

async function reconnect() {
  try {
    const st = await workerCall('host.reconnect');
    applyHostState(st);
    if (st?.state === 'open') await Promise.all([loadSettings(), loadHost()]);
  } catch (err) {
    explainLine(err);
  }
}

$('host-check').addEventListener('click', runChecks);
$('host-reconnect').addEventListener('click', async (e) => {
  const b = e.currentTarget;
  b.disabled = true;
  try { await reconnect(); } finally { b.disabled = false; }
});

// ---- import what the browser kept ------------------------------------------------------------------
let importedKeys = null;

async function previewBrowserData() {
  try {
    const dump = await chrome.storage.local.get(null);
    const s = summarizeBrowserDump(dump);
    $('browser-data-summary').textContent = s.empty
      ? 'Nothing is stored in this browser profile.'
      : `Found ${s.sessions} saved session(s), ${s.history} live message(s), ${s.settings} setting(s).`;
    $('import-browser-data').disabled = s.empty;
  } catch (err) {
    $('browser-data-summary').textContent = `Could not read browser storage: ${err?.message || err}`;
  }
}

$('import-browser-data').addEventListener('click', async (e) => {
  const btn = e.currentTarget;
  const out = $('import-browser-result');
  btn.disabled = true;
  btn.setAttribute('aria-busy', 'true');
  $('remove-browser-row').hidden = true;
  importedKeys = null;
  try {
    const dump = await chrome.storage.local.get(null);
    if (!dump || Object.keys(dump).length === 0) {
      replaceChildren(out, h('div', { text: 'Nothing to import: this browser profile holds no Keepsake data.' }));
      out.dataset.kind = 'info';
      out.hidden = false;
      return;
    }
    const ask = (preview) => askImportSettings({ container: $('import-browser-confirm'), preview, fileName: 'Browser data' });
    const progress = (i, n) => {
      replaceChildren(out, h('div', { text: `Importing: piece ${i + 1} of ${n}…` }));
      out.dataset.kind = 'info';
      out.hidden = false;
    };
    const done = await importWithPreview({ storage, doc: dump, ask, progress });
    if (done.cancelled) {
      replaceChildren(out, h('div', { text: 'Import cancelled; nothing was changed.' }));
      out.dataset.kind = 'info';
      out.hidden = false;
      return;
    }
    const r = done.result;
    replaceChildren(out, h('div', { text: 'Imported into the Keepsake database.' }), describeImportResult(r).map((l) => h('div', { text: l })));
    out.dataset.kind = 'ok';
    out.hidden = false;
    loadCounts();
    if (done.tooLarge?.length) {
      // something stayed behind: the browser's copy is the only one of it, so no removal is offered
      out.dataset.kind = 'error';
      return;
    }
    importedKeys = Object.keys(dump);
    $('remove-browser-row').hidden = false;
    setStatus($('remove-browser-status'), '');
  } catch (err) {
    replaceChildren(out, h('div', { text: `Import failed; nothing was changed in the browser. ${explainLine(err)}` }));
    out.dataset.kind = 'error';
    out.hidden = false;
  } finally {
    btn.disabled = false;
    btn.removeAttribute('aria-busy');
  }
});

$('remove-browser-copy').addEventListener('click', (e) => {
  const row = $('remove-browser-row');
  row.querySelector('.confirm')?.remove();
  const keys = importedKeys || [];
  const yes = h('button', { type: 'button', class: 'btn btn-small btn-danger', testid: 'confirm-yes', text: 'Remove' });
  const no = h('button', { type: 'button', class: 'btn btn-small', testid: 'confirm-no', text: 'Cancel' });
  const box = h('div', { class: 'confirm', role: 'alertdialog', testid: 'confirm' }, h('span', { text: `Remove the ${keys.length} imported key(s) from this browser profile? The Keepsake database keeps its copy.` }), no, yes);
  no.addEventListener('click', () => { box.remove(); e.target.focus(); });
  yes.addEventListener('click', async () => {
    yes.disabled = true;
    try {
      await chrome.storage.local.remove(keys);
      setStatus($('remove-browser-status'), `Removed ${keys.length} key(s) from the browser.`, 'ok');
      importedKeys = null;
      $('remove-browser-copy').hidden = true;
      await previewBrowserData();
    } catch (err) {
      setStatus($('remove-browser-status'), `Could not remove: ${err?.message || err}`, 'error');
    } finally {
      box.remove();
    }
  });
  row.append(box);
  no.focus();
});

// ===================================================================================================
// Start
// ===================================================================================================

onWorkerEvent((ev) => {
  if (!ev) return;
  if (ev.type === 'host.state') applyHostState(ev);
  else if (ev.type === 'changed') {
    // a saved provider can change where its key is kept (Host → "API keys")
    if (ev.areas?.settings) { loadSettings(); loadCounts(); }
    if (ev.areas?.history || ev.areas?.sessions) loadCounts();
  } else if (ev.type === 'events.connected' && ev.reconnected) { loadSettings(); loadHost(); }
});

async function start() {
  renderChatSettings(); // defaults until the host answers
  await Promise.allSettled([loadSettings(), loadHost(), previewBrowserData()]);
  document.documentElement.dataset.ready = 'true';
}
start();
