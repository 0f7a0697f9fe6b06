// Options page: provider cards (ping, active provider/model), conversation settings, the Host panel
// (connection facts from host.hello, checks, importing data an older version kept in the browser) and
// Backups (options/backups.js: the host's copies of the database, and putting one back) and Sync
// (options/sync.js: this computer and the others sharing its sync folder, Pause / Resume, setting up).
// Settings go to keepsake-host with settings.get / settings.set (explicit keys, storage-model §3, §9).
// A `changed` event re-reads what it names; a restore names everything (protocol.js `changeAreas`).

import { hostCall, workerCall as rawWorkerCall, onWorkerEvent } from '../lib/bridge.js';
import { createStorage, listAllSessions } from '../lib/storage.js';
import { explainHostError, HOST_ERROR_CODES, CLIENT_ERROR_CODES, PROTOCOL_VERSION, OPS, changeAreas } from '../lib/protocol.js';
import { ping } from '../lib/llm.js';
import { h, replaceChildren } from '../lib/ui/dom.js';
import { createBanner, isConnectionError } from '../lib/ui/banner.js';
import { dbSizeText, describeImportResult } from '../lib/ui/format.js';
import { askImportSettings, importWithPreview } from '../lib/ui/import-confirm.js';
import { evictedNames, evictedNotice } from '../lib/ui/evicted.js';
import {
  KINDS, PRESETS, OPTION_KEYS, cardFromPreset, normalizeCard, validateCard, upsertCard, afterDelete,
  parseWholeNumber, parsePositiveWholeNumber, withDefaults, summarizeBrowserDump, insecureBaseUrlWarning, keyPlaceholder,
  secretStoreReason, keyInFileNote,
} from './providers.js';
import { operatingSystem } from '../lib/platform.js';
import { saveSettings } from './settings-save.js';
import { createBackups } from './backups.js';
import { createSync } from './sync.js';
import { t, localize, formatNumber } from '../lib/i18n.js';

// the page's static words in the UI language before anything else runs (and before first paint)
localize(document);

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
    return t('optHostNotConnectedLine');
  }
  if (err && KNOWN.has(err.code)) {
    const ex = explainHostError(err);
    return ex.detail ? t('optErrorLine', ex.title, ex.detail) : t('uiSentence', ex.title);
  }
  return String(err?.message || err || t('optUnknownError'));
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
/** The operating system, for the advice on where a secret store comes from (asked once). */
const platformOs = operatingSystem();
/** Cards on screen: id → {card (last saved or new), el, dirty, isNew} */
const cards = new Map();

for (const p of PRESETS) $('provider-preset').append(h('option', { value: p.id, text: p.id === 'custom' ? t('optPresetCustom') : p.name }));

async function loadSettings() {
  try {
    const stored = await storage.settings.get({ keys: [...OPTION_KEYS] });
    config = withDefaults(stored);
    renderProviders();
    renderChatSettings();
  } catch (err) {
    setStatus($('settings-status'), t('optCouldNotReadSettings', explainLine(err)), 'error');
    replaceChildren($('provider-list'), h('div', { class: 'cards-empty', text: t('optSettingsNotRead', explainLine(err)) }));
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
  if (els.length === 0) els.push(h('div', { class: 'cards-empty', testid: 'provider-empty', text: t('optNoProvider') }));
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
  const showKey = h('button', { type: 'button', class: 'btn btn-small', testid: 'provider-api-key-toggle', text: t('optShowKey'), 'aria-pressed': 'false' });
  showKey.addEventListener('click', () => {
    const show = apiKey.type === 'password';
    apiKey.type = show ? 'text' : 'password';
    showKey.textContent = show ? t('optHideKey') : t('optShowKey');
    showKey.setAttribute('aria-pressed', String(show));
  });
  const model = h('input', { type: 'text', testid: 'provider-model', value: c.model || '', placeholder: t('optModelPlaceholder'), autocomplete: 'off', spellcheck: 'false' });
  const active = h('input', { type: 'radio', name: 'active-provider', testid: 'provider-active', 'aria-label': t('optUseProvider') });
  const title = h('span', { class: 'card-title', testid: 'provider-title' });
  const unsaved = h('span', { class: 'badge badge-warn', testid: 'provider-unsaved', text: t('optUnsaved') });
  const pingBtn = h('button', { type: 'button', class: 'btn btn-small', testid: 'provider-ping', text: t('optPing') });
  const pingResult = h('span', { class: 'ping-result', testid: 'provider-ping-result', role: 'status' });
  const save = h('button', { type: 'submit', class: 'btn btn-small btn-primary', testid: 'provider-save', text: t('optSave') });
  const del = h('button', { type: 'button', class: 'btn btn-small btn-danger-outline', testid: 'provider-delete', text: t('optDelete') });
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
    ? h('div', {}, keyRow, h('div', { class: 'hint', testid: 'provider-api-key-unavailable', role: 'note', text: t('optKeyUnavailable', c.apiKeyUnavailable) }))
    : keyRow;

  const form = h('form', { class: 'card', testid: 'provider-card', dataset: { id: c.id }, novalidate: true },
    h('div', { class: 'card-head' }, h('label', { class: 'inline' }, active, title), unsaved),
    h('div', { class: 'card-grid' },
      fieldRow(t('optFieldName'), name, 'name', v),
      fieldRow(t('optFieldKind'), kind, 'kind', v),
      fieldRow(t('optFieldBaseUrl'), baseUrl, 'baseUrl', v),
      fieldRow(t('optFieldApiKey'), apiKey, 'apiKey', v, keyControl),
      fieldRow(t('optFieldModel'), model, 'model', v)),
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
  v.parts.title.textContent = c.name || t('optUnnamedProvider');
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
    setCardStatus(v, t('optFixFields'), 'error');
    return;
  }
  // A base URL that sends the key unencrypted is saved only once the person says so (not again
  // for a later edit of the same card that keeps that URL).
  const warning = insecureBaseUrlWarning(card.baseUrl, { hasKey: card.apiKey !== '' });
  if (warning && (v.isNew || normalizeCard(v.card).baseUrl !== card.baseUrl)) {
    button.disabled = true;
    const yes = await askInCard(v, t('optSaveInsecureQuestion', warning));
    button.disabled = false;
    if (!yes) {
      setCardStatus(v, t('optNotSavedInsecure'), 'error');
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
    const saved = await storage.settings.set({ map });
    v.card = card;
    v.dirty = false;
    v.isNew = false;
    config = withDefaults({ ...fresh, ...map, providers });
    // a new or changed key the host kept in the database (no secret store reachable): said at
    // Save, from the reply of the write itself (PROTOCOL.md "API keys")
    const inFile = keyInFileNote(saved, card.id, await platformOs);
    setCardStatus(v, inFile || t('optSaved'), inFile ? 'warn' : 'ok');
    renderProviders();
  } catch (err) {
    setCardStatus(v, t('optNotSaved', explainLine(err)), 'error');
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
    setCardStatus(v, t('optNowActive'), 'ok');
  } catch (err) {
    setCardStatus(v, t('optCouldNotSwitch', explainLine(err)), 'error');
    for (const x of cards.values()) updateCardHead(x);
  }
}

/** Ask inside a provider card (Save anyway / Cancel); → true to go on. Escape cancels. */
function askInCard(v, question) {
  return new Promise((resolve) => {
    v.el.querySelector('.confirm')?.remove();
    const yes = h('button', { type: 'button', class: 'btn btn-small btn-danger', testid: 'insecure-save', text: t('optSaveAnyway') });
    const no = h('button', { type: 'button', class: 'btn btn-small', testid: 'insecure-cancel', text: t('optCancel') });
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
  const yes = h('button', { type: 'button', class: 'btn btn-small btn-danger', testid: 'confirm-yes', text: t('optDelete') });
  const no = h('button', { type: 'button', class: 'btn btn-small', testid: 'confirm-no', text: t('optCancel') });
  const box = h('div', { class: 'confirm', role: 'alertdialog', testid: 'confirm' }, h('span', { text: v.card.name ? t('optDeleteNamedQuestion', v.card.name) : t('optDeleteThisQuestion') }), no, yes);
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
      setCardStatus(v, t('optNotDeleted', explainLine(err)), 'error');
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
    setStatus(v.parts.pingResult, t('optPingFillFirst'));
    v.parts.pingResult.dataset.ok = 'false';
    return;
  }
  button.disabled = true;
  button.setAttribute('aria-busy', 'true');
  v.parts.pingResult.textContent = t('optPinging');
  delete v.parts.pingResult.dataset.ok;
  try {
    const r = await ping({ id: card.id, name: card.name, kind: card.kind, baseUrl: card.baseUrl, apiKey: card.apiKey, model: card.model });
    v.parts.pingResult.dataset.ok = r?.ok ? 'true' : 'false';
    const ms = (x) => formatNumber(Math.round(Number(x) || 0));
    const okDetail = r?.detail && r.detail !== 'OK' ? String(r.detail).replace(/^OK:?\s*/, '') : '';
    const failDetail = r?.detail || t('optPingNoDetail');
    if (r?.ok) v.parts.pingResult.textContent = okDetail ? t('optPingOkDetail', ms(r.ms), okDetail) : t('optPingOk', ms(r.ms));
    else v.parts.pingResult.textContent = Number.isFinite(r?.ms) ? t('optPingFailedAfter', ms(r.ms), failDetail) : t('optPingFailed', failDetail);
  } catch (err) {
    v.parts.pingResult.dataset.ok = 'false';
    v.parts.pingResult.textContent = t('optPingFailed', err?.message || err);
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
  setCardStatus(v, preset?.needsKey ? t('optNewCardNeedsKey') : t('optNewCardCheckModel'));
});

$('provider-active-model-save').addEventListener('click', async (e) => {
  const btn = e.currentTarget;
  const status = $('active-model-status');
  const value = $('provider-active-model').value.trim();
  if (!config.activeProvider) { setStatus(status, t('optChooseActiveFirst'), 'error'); return; }
  btn.disabled = true;
  try {
    await storage.settings.set({ map: { activeModel: value } });
    config.activeModel = value;
    setStatus(status, value ? t('optRepliesUseModel', value) : t('optRepliesUseCardModel'), 'ok');
  } catch (err) {
    setStatus(status, t('optNotSaved', explainLine(err)), 'error');
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
    const yes = h('button', { type: 'button', class: 'btn btn-small btn-danger', testid: 'confirm-yes', text: t('optContinue') });
    const no = h('button', { type: 'button', class: 'btn btn-small', testid: 'confirm-no', text: t('optCancel') });
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
    setStatus($('settings-status'), t('optFixFields'), 'error');
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
  const capBefore = config.maxSessions; // Undo of what a lower cap moved puts this cap back
  const undoCause = async () => {
    await storage.settings.set({ map: { maxSessions: capBefore } });
    config.maxSessions = capBefore;
    renderChatSettings();
  };
  try {
    const r = await saveSettings({ storage, map, ask: askInForm });
    if (!r.saved) {
      setStatus($('settings-status'), t('optNotSavedNothingChanged'), '');
      return;
    }
    Object.assign(config, map);
    chatDirty = false;
    renderChatSettings();
    setStatus($('settings-status'), t('optSaved'), 'ok');
    if (r.evicted.length) {
      const names = await evictedNames(storage, r.evicted);
      $('settings-evicted').append(evictedNotice({ storage, ids: r.evicted, names, explain: explainLine, dismissable: false, undoCause, onRestored: () => loadCounts() }));
    }
  } catch (err) {
    setStatus($('settings-status'), t('optNotSaved', explainLine(err)), 'error');
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
  const stateText = {
    open: () => t('optStateConnected'),
    idle: () => t('optStateIdle'),
    connecting: () => t('optStateConnecting'),
    error: () => t('optStateNotConnected'),
  }[st.state]?.() || st.state || '—';
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
  $('host-protocol').textContent = pv === undefined ? '—' : pv === PROTOCOL_VERSION ? `${pv}` : t('optProtocolDiffers', pv, PROTOCOL_VERSION);
  $('host-db-path').textContent = hello.dbPath || '—';
  const sv = hello.schemaVersion;
  const lv = hello.latestSchemaVersion;
  $('host-schema').textContent = sv === undefined || sv === null ? '—' : lv !== undefined && lv !== sv ? t('optSchemaLatest', sv, lv) : `${sv}`;
  const dbErr = $('host-db-error');
  if (hello.dbError) {
    const ex = explainHostError(hello.dbError);
    replaceChildren(dbErr, h('strong', { text: ex.title }), h('div', { text: ex.detail }),
      h('div', {}, `${t('optRunDoctorBefore')} `, h('code', { text: 'keepsake-host doctor' }), ` ${t('optRunDoctorAfter')}`));
    dbErr.hidden = false;
  } else {
    dbErr.hidden = true;
  }
}

async function loadCounts() {
  try {
    const meta = await storage.history.meta();
    const earlier = Number(meta?.offset) || 0;
    const len = Number(meta?.length) || 0;
    const shown = len === 1 ? t('optLiveShownOne', formatNumber(len)) : t('optLiveShownMany', formatNumber(len));
    $('host-live-count').textContent = earlier ? t('optLiveShownEarlier', shown, formatNumber(earlier)) : shown;
  } catch (err) {
    $('host-live-count').textContent = t('optUnavailable', explainLine(err));
  }
  try {
    // every row: the counts add up the entries and pins of them all
    const rows = await listAllSessions(storage, {});
    const n = Array.isArray(rows) ? rows.length : 0;
    const entries = Array.isArray(rows) ? rows.reduce((a, r) => a + (Number(r.entryCount) || 0), 0) : 0;
    const pinned = Array.isArray(rows) ? rows.filter((r) => r.pinned).length : 0;
    $('host-session-count').textContent = pinned
      ? t('optSessionCountPinned', formatNumber(n), formatNumber(entries), formatNumber(pinned))
      : t('optSessionCount', formatNumber(n), formatNumber(entries));
  } catch (err) {
    $('host-session-count').textContent = t('optUnavailable', explainLine(err));
  }
  try {
    const st = await storage.host.status({});
    $('host-db-size').textContent = dbSizeText(st);
    // where the API keys are: the system's secret store, or the database file when none is reachable
    const keys = st?.apiKeys;
    $('host-api-keys').textContent = apiKeysText(keys);
    $('host-api-keys').dataset.status = keys?.status || '';
  } catch (err) {
    $('host-db-size').textContent = t('optUnavailable', explainLine(err));
  }
}

/**
 * Where the API keys are, in the UI language: host.status `apiKeys` (PROTOCOL.md "API keys") said
 * again from its counts, as the host's English `summary` says it (src/store/keys.rs). The store's
 * name and the reason none is reachable are the host's words.
 */
function apiKeysText(k) {
  if (!k || typeof k !== 'object') return '—';
  const inFile = Number(k.inFile) || 0;
  const inStore = Number(k.inSecretStore) || 0;
  const missing = Number(k.missing) || 0;
  const store = k.secretStore?.name || '';
  const keys = (n) => (n === 1 ? t('optApiKeysOne', formatNumber(n)) : t('optApiKeysMany', formatNumber(n)));
  if (!store && !k.secretStore) return k.summary || '—';
  if (k.secretStore?.reachable === false) {
    const why = secretStoreReason(k.secretStore.reason || '');
    if (inFile > 0) return t('optApiKeysInFileNoStore', why, keys(inFile));
    if (inStore > 0) return t('optApiKeysStoreUnreachable', keys(inStore), store, why);
    return t('optApiKeysNoStore', why);
  }
  if (inFile > 0) return t('optApiKeysStillInFile', keys(inFile), store);
  if (missing > 0) return missing === 1 ? t('optApiKeysMissingOne', formatNumber(missing), keys(inStore), store) : t('optApiKeysMissingMany', formatNumber(missing), keys(inStore), store);
  if (inStore > 0) return t('optApiKeysInStore', keys(inStore), store);
  return t('optApiKeysNone', store);
}



async function loadHost() {
  try {
    applyHostState(await workerCall('host.state'));
  } catch (err) {
    $('host-state').textContent = t('optStateUnknown', explainLine(err));
  }
  try {
    showHello(await storage.host.hello());
    $('host-state').textContent = t('optStateConnected');
    banner.hide();
  } catch (err) {
    $('host-state').textContent = t('optStateNotConnectedWhy', explainLine(err));
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
      add(true, t('optCheckStarts', hello.version || ''));
    } catch (err) {
      const ex = explainHostError(err);
      add(false, t('optCheckConnection', ex.title, ex.detail));
      if (ex.fix) add('info', t('optCheckFix', ex.then ? `${ex.fix} — ${ex.then}` : ex.fix));
    }
    if (hello) {
      add(hello.protocolVersion === PROTOCOL_VERSION, hello.protocolVersion === PROTOCOL_VERSION
        ? t('optCheckProtocolOk', hello.protocolVersion)
        : t('optCheckProtocolBad', hello.protocolVersion, PROTOCOL_VERSION));
      if (hello.dbError) {
        const ex = explainHostError(hello.dbError);
        add(false, t('optCheckDatabaseBad', ex.title, ex.detail));
      } else {
        add(true, t('optCheckDatabaseOk', hello.dbPath || t('optPathNotReported')));
      }
      if (hello.schemaVersion !== undefined && hello.latestSchemaVersion !== undefined) {
        add(hello.schemaVersion === hello.latestSchemaVersion, hello.schemaVersion === hello.latestSchemaVersion
          ? t('optCheckSchemaOk', hello.schemaVersion)
          : t('optCheckSchemaBad', hello.schemaVersion, hello.latestSchemaVersion));
      }
      if (Array.isArray(hello.ops)) {
        const missing = OPS.filter((op) => !hello.ops.includes(op));
        add(missing.length === 0, missing.length === 0 ? t('optCheckOpsOk', OPS.length) : t('optCheckOpsMissing', missing.join(', ')));
      }
      if (!hello.dbError) {
        try {
          await storage.history.meta();
          await storage.sessions.list({ limit: 1 });
          add(true, t('optCheckReadOk'));
        } catch (err) {
          add(false, t('optCheckReadFailed', explainLine(err)));
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
          const extra = [c.browserError ? t('optDoctorBrowserError', c.browserError) : '', c.fix ? t('optCheckFix', c.fix) : ''].filter(Boolean).join(' ');
          add(ok, `doctor · ${c.check}: ${c.detail}${extra ? ` — ${extra}` : ''}`);
        }
        if (!checks.length) add('info', t('optDoctorNothing'));
      } catch (err) {
        add(false, t('optDoctorFailed', explainLine(err)));
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
      ? t('optBrowserDataEmpty')
      : t('optBrowserDataFound', formatNumber(s.sessions), formatNumber(s.history), formatNumber(s.settings));
    $('import-browser-data').disabled = s.empty;
  } catch (err) {
    $('browser-data-summary').textContent = t('optBrowserDataUnreadable', err?.message || err);
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
      replaceChildren(out, h('div', { text: t('optNothingToImport') }));
      out.dataset.kind = 'info';
      out.hidden = false;
      return;
    }
    const ask = (preview) => askImportSettings({ container: $('import-browser-confirm'), preview, fileName: t('optBrowserDataName') });
    const progress = (i, n) => {
      replaceChildren(out, h('div', { text: t('optImportingPiece', formatNumber(i + 1), formatNumber(n)) }));
      out.dataset.kind = 'info';
      out.hidden = false;
    };
    const done = await importWithPreview({ storage, doc: dump, ask, progress });
    if (done.cancelled) {
      replaceChildren(out, h('div', { text: t('optImportCancelled') }));
      out.dataset.kind = 'info';
      out.hidden = false;
      return;
    }
    const r = done.result;
    replaceChildren(out, h('div', { text: t('optImportedIntoDb') }), describeImportResult(r).map((l) => h('div', { text: l })));
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
    replaceChildren(out, h('div', { text: t('optImportFailed', explainLine(err)) }));
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
  const yes = h('button', { type: 'button', class: 'btn btn-small btn-danger', testid: 'confirm-yes', text: t('optRemove') });
  const no = h('button', { type: 'button', class: 'btn btn-small', testid: 'confirm-no', text: t('optCancel') });
  const box = h('div', { class: 'confirm', role: 'alertdialog', testid: 'confirm' }, h('span', { text: t('optRemoveBrowserQuestion', formatNumber(keys.length)) }), no, yes);
  no.addEventListener('click', () => { box.remove(); e.target.focus(); });
  yes.addEventListener('click', async () => {
    yes.disabled = true;
    try {
      await chrome.storage.local.remove(keys);
      setStatus($('remove-browser-status'), t('optRemovedBrowserKeys', formatNumber(keys.length)), 'ok');
      importedKeys = null;
      $('remove-browser-copy').hidden = true;
      await previewBrowserData();
    } catch (err) {
      setStatus($('remove-browser-status'), t('optCouldNotRemove', err?.message || err), 'error');
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

// ===================================================================================================
// Backups
// ===================================================================================================

const backups = createBackups({
  el: $('backups-body'),
  storage,
  explain: explainLine,
  // the page's other sections hear of a restore through its `changed` event too; this one is at once
  onRestored: () => { loadSettings(); loadCounts(); },
});

// ===================================================================================================
// Sync
// ===================================================================================================

const sync = createSync({ el: $('sync-body'), storage, explain: explainLine, os: platformOs });

onWorkerEvent((ev) => {
  if (!ev) return;
  if (ev.type === 'host.state') applyHostState(ev);
  else if (ev.type === 'changed') {
    const a = changeAreas(ev); // a restore names every area
    // a saved provider can change where its key is kept (Host → "API keys")
    if (a.settings) { loadSettings(); loadCounts(); backups.reloadSettings(); }
    if (a.history || a.sessions) loadCounts();
    // any write ends the undo of a restore (backups.list `undo`); a restore or a backup changes the list
    backups.refreshSoon();
    // an apply of another device's changes, a pause or a resume is a write like any other
    sync.refreshSoon();
  } else if (ev.type === 'events.connected' && ev.reconnected) { loadSettings(); loadHost(); backups.load(); sync.load(); }
});
// a daily copy is made by the host on its own, and files arrive in the sync folder with no event:
// both are read again when the page is looked at
document.addEventListener('visibilitychange', () => {
  if (document.visibilityState === 'visible') { backups.refreshSoon(); sync.refreshSoon(); }
});

async function start() {
  renderChatSettings(); // defaults until the host answers
  await Promise.allSettled([loadSettings(), loadHost(), previewBrowserData(), backups.load(), sync.load()]);
  document.documentElement.dataset.ready = 'true';
}
start();
