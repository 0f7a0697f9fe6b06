// Provider cards and settings validation for the options page. Pure (no DOM, no chrome.*).

import { isLocalAddress, isLoopbackHost } from '../lib/llm.js';
import { t } from '../lib/i18n.js';

export const KINDS = Object.freeze([
  { value: 'chat', label: t('optKindChat') },
  { value: 'responses', label: t('optKindResponses') },
  { value: 'anthropic', label: t('optKindAnthropic') },
  // agent servers (lib/agents.js): Hermes Agent's /v1/runs, opencode's sessions
  { value: 'runs', label: t('providerKindRuns') },
  { value: 'agent', label: t('providerKindAgent') },
]);

/** Kinds whose server picks a model itself when the card names none. */
export const MODEL_OPTIONAL_KINDS = Object.freeze(['runs', 'agent']);

export const PRESETS = Object.freeze([
  { id: 'openai', name: 'OpenAI', kind: 'chat', baseUrl: 'https://api.openai.com/v1', model: 'gpt-4o-mini', needsKey: true },
  { id: 'ollama', name: 'Ollama', kind: 'chat', baseUrl: 'http://localhost:11434/v1', model: 'llama3.2', needsKey: false }, // i18n-ok: product name
  { id: 'lmstudio', name: 'LM Studio', kind: 'chat', baseUrl: 'http://localhost:1234/v1', model: '', needsKey: false },
  { id: 'openrouter', name: 'OpenRouter', kind: 'chat', baseUrl: 'https://openrouter.ai/api/v1', model: 'openai/gpt-4o-mini', needsKey: true },
  { id: 'openai-responses', name: 'OpenAI Responses', kind: 'responses', baseUrl: 'https://api.openai.com/v1', model: 'gpt-4o-mini', needsKey: true },
  { id: 'anthropic', name: 'Anthropic', kind: 'anthropic', baseUrl: 'https://api.anthropic.com', model: 'claude-3-5-haiku-latest', needsKey: true }, // i18n-ok: product name
  // Hermes Agent's API server (its API_SERVER_KEY is the key); opencode serve (its
  // OPENCODE_SERVER_PASSWORD, if set, is the key; model as provider/model, empty = its default)
  { id: 'hermes', name: 'Hermes Agent (runs)', kind: 'runs', baseUrl: 'http://127.0.0.1:8642', model: '', needsKey: true }, // i18n-ok: product name
  { id: 'opencode', name: 'opencode (agent)', kind: 'agent', baseUrl: 'http://127.0.0.1:4096', model: '', needsKey: false }, // i18n-ok: product name
  { id: 'custom', name: t('optPresetCustomName'), kind: 'chat', baseUrl: '', model: '', needsKey: false },
]);

const KIND_SET = new Set(KINDS.map((k) => k.value));

/**
 * What the API key field says before anything is typed: a server on this machine or the local
 * network needs none; the hosted providers need theirs (with the shape of their keys).
 * @param {{kind?: string, baseUrl?: string}} card
 */
export function keyPlaceholder(card) {
  const base = String(card?.baseUrl ?? '').trim();
  if (base && isLocalAddress(base)) return t('optKeyNotNeeded');
  let host = '';
  try {
    host = new URL(base).hostname.toLowerCase();
  } catch {
    host = '';
  }
  if (host === 'api.openai.com') return t('optKeyRequired', 'sk-…', 'platform.openai.com/api-keys');
  if (host === 'api.anthropic.com' || card?.kind === 'anthropic') return t('optKeyRequired', 'sk-ant-…', 'console.anthropic.com');
  if (host === 'openrouter.ai') return t('optKeyRequired', 'sk-or-…', 'openrouter.ai/keys');
  return base ? t('optKeyHosted') : t('optKeyLocal');
}

/** A new card from a preset id (unknown → custom); `newId` makes the card id. */
export function cardFromPreset(presetId, newId, existingNames = []) {
  const p = PRESETS.find((x) => x.id === presetId) || PRESETS[PRESETS.length - 1];
  return { id: newId(), name: uniqueName(p.name, existingNames), kind: p.kind, baseUrl: p.baseUrl, apiKey: '', model: p.model };
}

/** "OpenAI", "OpenAI 2", "OpenAI 3"… avoiding names already used. */
function uniqueName(base, existing) {
  const used = new Set(existing.map((n) => String(n).trim().toLowerCase()));
  if (!used.has(base.toLowerCase())) return base;
  for (let i = 2; ; i++) if (!used.has(`${base} ${i}`.toLowerCase())) return `${base} ${i}`;
}

/** `s` without trailing slashes: a scan, not `/\/+$/`, which is quadratic in a run of slashes (issue 18). */
function trimTrailingSlashes(s) {
  let end = s.length;
  while (end > 0 && s.charCodeAt(end - 1) === 0x2f) end--;
  return end === s.length ? s : s.slice(0, end);
}

/** Trim fields and drop trailing slashes from the base URL. */
export function normalizeCard(card) {
  const str = (v) => (typeof v === 'string' ? v.trim() : '');
  return {
    ...card,
    id: str(card?.id),
    name: str(card?.name),
    kind: KIND_SET.has(card?.kind) ? card.kind : 'chat',
    baseUrl: trimTrailingSlashes(str(card?.baseUrl)),
    apiKey: str(card?.apiKey),
    model: str(card?.model),
  };
}

/** Field errors of a card: {} when valid. `others` = the other cards (names must be unique). */
export function validateCard(card, others = []) {
  const c = normalizeCard(card);
  const errors = {};
  if (!c.name) errors.name = t('optErrNameMissing');
  else if (others.some((o) => o && o.id !== c.id && String(o.name || '').trim().toLowerCase() === c.name.toLowerCase())) errors.name = t('optErrNameTaken');
  if (!KIND_SET.has(card?.kind)) errors.kind = t('optErrKind');
  if (!c.baseUrl) errors.baseUrl = t('optErrBaseUrlMissing');
  else {
    let u = null;
    try { u = new URL(c.baseUrl); } catch { u = null; }
    if (!u || (u.protocol !== 'http:' && u.protocol !== 'https:')) errors.baseUrl = t('optErrBaseUrlScheme');
  }
  if (!c.model && !MODEL_OPTIONAL_KINDS.includes(c.kind)) errors.model = t('optErrModel');
  return errors;
}

/**
 * The warning for a base URL that would carry the key and the chat unencrypted: plain `http://` to
 * anything but loopback (issue 18). '' when the URL is https, loopback http, or not a URL at all
 * (validateCard reports that).
 * @param {string} baseUrl
 * @param {{hasKey?: boolean}} [opts] whether the card holds an API key (the text says so)
 */
export function insecureBaseUrlWarning(baseUrl, { hasKey = true } = {}) {
  let u;
  try {
    u = new URL(String(baseUrl ?? '').trim());
  } catch {
    return '';
  }
  if (u.protocol !== 'http:' || isLoopbackHost(u.hostname)) return '';
  return hasKey ? t('optInsecureWithKey', u.host) : t('optInsecure', u.host);
}

/** Stored providers list, read defensively (defaults hold no LLM cards, storage-model §9). */
function readProviders(value) {
  if (!Array.isArray(value)) return [];
  return value.filter((p) => p && typeof p === 'object' && typeof p.id === 'string' && p.id);
}

/** Put `card` into `list` (replace by id, else append). */
export function upsertCard(list, card) {
  const i = list.findIndex((p) => p.id === card.id);
  if (i < 0) return [...list, card];
  const next = [...list];
  next[i] = card;
  return next;
}

/**
 * The settings to write when a card is deleted: drop it; if it was active, the first remaining card
 * becomes active (or none).
 */
export function afterDelete(list, id, activeProvider, activeModel) {
  const providers = list.filter((p) => p.id !== id);
  if (activeProvider !== id) return { providers, activeProvider, activeModel };
  const next = providers[0];
  return { providers, activeProvider: next ? next.id : '', activeModel: next ? next.model || '' : '' };
}

/**
 * A whole number ≥ 0 from a form field. Empty → `emptyValue`.
 * → {ok: true, value} | {ok: false, error}
 */
export function parseWholeNumber(text, { emptyValue = 0, max = Number.MAX_SAFE_INTEGER } = {}) {
  const s = String(text ?? '').trim().replace(/[,_\s]/g, '');
  if (s === '') return { ok: true, value: emptyValue };
  if (!/^\d+$/.test(s)) return { ok: false, error: t('optErrWholeNumber') };
  const v = Number(s);
  if (!Number.isSafeInteger(v) || v > max) return { ok: false, error: t('optErrNumberMax', max) };
  return { ok: true, value: v };
}

/**
 * A whole number ≥ 1 from a form field (trashDays). Empty → `emptyValue`.
 * → {ok: true, value} | {ok: false, error}
 */
export function parsePositiveWholeNumber(text, { emptyValue = 30, max = 36500 } = {}) {
  const r = parseWholeNumber(text, { emptyValue, max });
  if (r.ok && r.value < 1) return { ok: false, error: t('optErrPositive') };
  return r;
}

/** Default of `trashDays` (docs/keeps.md "The trash"). */
export const DEFAULT_TRASH_DAYS = 30;

/** Keys this page reads (storage-model §9 explicit key list, the part the options page edits). */
export const OPTION_KEYS = Object.freeze(['providers', 'activeProvider', 'activeModel', 'systemPrompt', 'autoSummarizeAttachments', 'summarizeThresholdChars', 'maxSessions', 'trashDays']);

/** Effective values with defaults overlaid (stored values win). */
export function withDefaults(stored) {
  const s = stored && typeof stored === 'object' ? stored : {};
  return {
    providers: readProviders(s.providers),
    activeProvider: typeof s.activeProvider === 'string' ? s.activeProvider : '',
    activeModel: typeof s.activeModel === 'string' ? s.activeModel : '',
    systemPrompt: typeof s.systemPrompt === 'string' ? s.systemPrompt : '',
    autoSummarizeAttachments: typeof s.autoSummarizeAttachments === 'boolean' ? s.autoSummarizeAttachments : true,
    summarizeThresholdChars: Number.isSafeInteger(s.summarizeThresholdChars) && s.summarizeThresholdChars >= 0 ? s.summarizeThresholdChars : 0,
    // 0 = keep every chat (docs/keeps.md "Eviction"): the default
    maxSessions: Number.isSafeInteger(s.maxSessions) && s.maxSessions >= 0 ? s.maxSessions : 0,
    trashDays: Number.isSafeInteger(s.trashDays) && s.trashDays >= 1 ? s.trashDays : DEFAULT_TRASH_DAYS,
  };
}

/** Keys of a chrome.storage.local dump that look like Keepsake/browsa data (for the import preview). */
export function summarizeBrowserDump(dump) {
  const d = dump && typeof dump === 'object' ? dump : {};
  const keys = Object.keys(d);
  const sessions = Array.isArray(d.savedSessions) ? d.savedSessions.length : 0;
  const history = Array.isArray(d.history) ? d.history.length : 0;
  const bodies = keys.filter((k) => k.startsWith('session_')).length;
  const settings = keys.filter((k) => k !== 'history' && k !== 'savedSessions' && k !== 'activeSessionId' && !k.startsWith('session_')).length;
  return { keys: keys.length, sessions, history, bodies, settings, empty: keys.length === 0 };
}

/** The host's words when the secret store is off on purpose (src/secrets/mod.rs). */
const STORE_OFF = 'turned off by KEEPSAKE_SECRET_STORE=off'; // i18n-ok: host text matched, not shown

/** The host's usual reasons no secret store is reachable (src/secrets/mod.rs), in the UI language; others as given. */
export function secretStoreReason(why) {
  switch (why) {
    case STORE_OFF: return t('optSecretStoreOff');
    case 'this platform has no secret store keepsake-host can use': return t('optSecretStoreNoPlatform'); // i18n-ok: host text matched, not shown
    default: return why;
  }
}

/**
 * What Save says when the host kept a card's new or changed API key as text in the database
 * because no secret store is reachable: the `keysInFile` of the settings.set reply (PROTOCOL.md
 * "API keys") names the card. '' otherwise (the key went to the secret store, or no new key).
 * "Saved — but …", why, and how to get a secret store on this platform (`os`: lib/platform.js
 * operatingSystem).
 * @param {any} reply the settings.set result
 * @param {string} cardId the card saved
 * @param {'linux'|'mac'|'win'|''} os
 * @returns {string}
 */
export function keyInFileNote(reply, cardId, os) {
  const k = reply?.keysInFile;
  if (!k || typeof k !== 'object' || !Array.isArray(k.ids) || !k.ids.includes(cardId)) return '';
  const reason = typeof k.reason === 'string' ? k.reason : '';
  const hint =
    reason === STORE_OFF ? t('optKeyStoreHintOff')
      : os === 'linux' ? t('optKeyStoreHintLinux')
        : os === 'mac' ? t('optKeyStoreHintMac')
          : os === 'win' ? t('optKeyStoreHintWindows')
            : t('optKeyStoreHintOther');
  return t('optSavedKeyInFile', reason ? secretStoreReason(reason) : t('optSecretStoreUnreachable'), hint);
}
