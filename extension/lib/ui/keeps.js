// What the panel and the options page say about "Keepsake keeps" (docs/keeps.md): versions of a
// turn, failed turns, the earlier part of a long chat, the trash ("Recently deleted"), evictions and
// the settings an import would take. Pure: no DOM, no chrome.* — tested in node.

import { formatWhen } from './format.js';
import { t, formatNumber } from '../i18n.js';

const DAY = 24 * 60 * 60 * 1000;

/** Page size for "N earlier messages" (sessions.get pages). */
export const EARLIER_PAGE = 40;

/** A count as people read it in the UI language (grouped digits). */
const num = (n) => formatNumber(Math.trunc(Number(n) || 0));

/** "1 message", "3 messages". */
export function messagesText(n) {
  const v = Math.max(0, Math.trunc(Number(n) || 0));
  return v === 1 ? t('uiMessagesOne', num(v)) : t('uiMessagesMany', num(v));
}

// ---- versions ---------------------------------------------------------------------------------

/**
 * Where each fork's turn is in the live window: a Map from live index to `{forkEntryId, chosen,
 * versions}`. The turn is the entry right after the entry whose `entryId` is `forkEntryId`, or
 * the first entry of the session for `""` (index 0 only when the window starts the session,
 * `offset` 0). `before` is the entryId of the entry just ahead of the window (body index
 * `offset − 1`) when the panel knows it, so a fork at the window's first entry is found too.
 * Forks that name no entry of the window (turns in the earlier part) are left out.
 */
export function forksByIndex(entries, forks, { offset = 0, before = '' } = {}) {
  const out = new Map();
  if (!Array.isArray(entries) || !Array.isArray(forks)) return out;
  const at = new Map();
  entries.forEach((e, i) => {
    if (e && typeof e.entryId === 'string' && e.entryId) at.set(e.entryId, i);
  });
  for (const f of forks) {
    if (!f || typeof f.forkEntryId !== 'string') continue;
    const versions = Math.trunc(Number(f.versions) || 0);
    const chosen = Math.trunc(Number(f.chosen) || 0);
    if (versions < 2 || chosen < 1 || chosen > versions) continue;
    let index = -1;
    if (f.forkEntryId === '') index = offset === 0 ? 0 : -1;
    else if (at.has(f.forkEntryId)) index = at.get(f.forkEntryId) + 1;
    else if (before && f.forkEntryId === before) index = 0;
    if (index >= 0 && index < entries.length) out.set(index, { forkEntryId: f.forkEntryId, chosen, versions });
  }
  return out;
}

/** Forks whose turn is not in the window (see forksByIndex): the panel may need `before`. */
export function unplacedForks(entries, forks, opts) {
  const placed = new Set([...forksByIndex(entries, forks, opts).values()].map((f) => f.forkEntryId));
  return (Array.isArray(forks) ? forks : []).filter((f) => f && typeof f.forkEntryId === 'string' && !placed.has(f.forkEntryId));
}

/** The version a "‹" or "›" click asks for, or 0 when there is none that way. */
export function stepVersion(fork, delta) {
  if (!fork) return 0;
  const v = fork.chosen + delta;
  return v >= 1 && v <= fork.versions ? v : 0;
}

/** "2 / 3" and its accessible label. */
export function versionLabel(fork) {
  return { text: `${fork.chosen} / ${fork.versions}`, label: t('uiVersionOf', fork.chosen, fork.versions) };
}

/** What Edit & resend or Regenerate says about the turn it replaces (nothing is lost). */
export function keptAsVersionText(fork) {
  const n = fork && fork.chosen >= 1 ? fork.chosen : 1;
  return t('uiKeptAsVersion', n);
}

// ---- failed turns -----------------------------------------------------------------------------

/** A user entry's failed stamp `{code, message, at}`, or null. */
export function failedOf(entry) {
  const f = entry && entry.role === 'user' ? entry.failed : null;
  return f && typeof f === 'object' ? f : null;
}

/** "Not answered: <message>". */
export function failedText(failed) {
  const msg = typeof failed?.message === 'string' && failed.message.trim() ? failed.message.trim() : failed?.code || t('uiReplyFailed');
  return t('uiNotAnswered', msg);
}

/** Index of the last user entry that is not an attached page (`isAttach(entry)`), or -1. */
export function lastUserIndex(entries, isAttach = () => false) {
  for (let i = (entries?.length || 0) - 1; i >= 0; i--) {
    const e = entries[i];
    if (e && e.role === 'user' && !isAttach(e)) return i;
  }
  return -1;
}

// ---- earlier messages -------------------------------------------------------------------------

/**
 * The next page of earlier messages to read: the `loaded` entries just ahead of the window are
 * shown already (body indices `offset − loaded` … `offset − 1`); the next page ends where they
 * start. → `{from, limit}`, or null when everything is loaded.
 */
export function nextEarlierPage(offset, loaded, page = EARLIER_PAGE) {
  const end = Math.max(0, Math.trunc(Number(offset) || 0) - Math.max(0, Math.trunc(Number(loaded) || 0)));
  if (end <= 0) return null;
  const from = Math.max(0, end - page);
  return { from, limit: end - from };
}

/** "1 earlier message", "12 earlier messages". */
export function earlierText(n) {
  return n === 1 ? t('uiEarlierOne', num(n)) : t('uiEarlierMany', num(n));
}

// ---- the trash --------------------------------------------------------------------------------

/** A trash item's `reason` in words. */
function reasonText(reason) {
  switch (reason) {
    case 'deleted': return t('uiReasonDeleted');
    case 'cleared': return t('uiReasonCleared');
    case 'evicted': return t('uiReasonEvicted');
    case 'edited': return t('uiReasonEdited');
    case 'regenerated': return t('uiReasonRegenerated');
    case 'undo-attach': return t('uiReasonUndoAttach');
    default: return typeof reason === 'string' && reason ? reason : t('uiReasonRemoved');
  }
}

/** "Gone for good in 12 days" (whole days from now, rounded up), "… within a day", or "… soon" when past. */
function expiresText(ms, now = Date.now()) {
  const left = Number(ms) - now;
  if (!(left > 0)) return t('uiGoneSoon');
  const days = Math.ceil(left / DAY);
  return days <= 1 ? t('uiGoneWithinDay') : t('uiGoneInDays', num(days));
}

/**
 * What a "Recently deleted" row shows:
 * `{name, reason, deleted, expires, count, from}` (from: where removed entries were, or '').
 */
export function trashRowText(item, now = Date.now()) {
  const name = typeof item?.name === 'string' && item.name ? item.name : t('uiUntitled');
  let from = '';
  if (item?.kind === 'entries' && item.from && typeof item.from === 'object') {
    const named = typeof item.from.sessionName === 'string' && item.from.sessionName ? item.from.sessionName : '';
    const at = Number.isInteger(item.from.position) ? num(item.from.position + 1) : '';
    if (named) from = at ? t('uiFromChatAt', named, at) : t('uiFromChat', named);
    else from = at ? t('uiFromAnyChatAt', at) : t('uiFromAnyChat');
  }
  return {
    name,
    reason: reasonText(item?.reason),
    deleted: t('uiDeletedWhen', formatWhen(item?.trashedAt, now)),
    expires: expiresText(item?.expiresAt, now),
    count: messagesText(item?.entryCount),
    from,
  };
}

// ---- eviction ---------------------------------------------------------------------------------

/** "1 older chat moved to Recently deleted", "3 older chats …". */
export function evictedText(n) {
  return n === 1 ? t('uiEvictedOne', num(n)) : t('uiEvictedMany', num(n));
}

/** Names of `ids` from trash items (or session rows), in the order of `ids`; unknown ids are left out. */
export function namesOf(ids, items) {
  const by = new Map((Array.isArray(items) ? items : []).filter((x) => x && typeof x.id === 'string').map((x) => [x.id, x.name]));
  return (Array.isArray(ids) ? ids : []).filter((id) => by.has(id)).map((id) => by.get(id) || t('uiUntitled'));
}

/** A list of names for a sentence: “a”, “b” and 3 more. */
export function nameList(names, max = 5) {
  const q = names.map((n) => `“${n}”`);
  if (q.length <= max) return q.join(', ');
  return t('uiNameListMore', q.slice(0, max).join(', '), num(q.length - max));
}

/** The question before a lower maxSessions: null when nothing would move. */
export function evictionQuestion(rows) {
  const list = Array.isArray(rows) ? rows : [];
  if (list.length === 0) return null;
  const names = nameList(list.map((r) => r?.name || t('uiUntitled')));
  return list.length === 1 ? t('uiEvictionQuestionOne', num(1), names) : t('uiEvictionQuestionMany', num(list.length), names);
}

// ---- imports ----------------------------------------------------------------------------------

/** Settings an import must never take without the person's say. */
export const GUARDED_SETTINGS = Object.freeze(['providers', 'activeProvider', 'systemPrompt']);

/** A setting's (already masked) value as one short line. */
function settingValueText(value, max = 120) {
  let s;
  if (typeof value === 'string') s = JSON.stringify(value);
  else {
    try {
      s = JSON.stringify(value);
    } catch {
      s = String(value);
    }
  }
  if (s === undefined) s = String(value);
  return s.length > max ? `${s.slice(0, max - 1)}…` : s;
}

/** What importing a setting would do to the current value, in words. */
export function settingChangeText(current, mode = 'keep') {
  if (current === 'absent') return t('uiSettingNew');
  if (current === 'same') return t('uiSettingSame');
  return mode === 'overwrite' ? t('uiSettingReplaces') : t('uiSettingDiffers');
}

/** The rows of an import preview's settings: `[{key, value, change, current}]`. */
export function previewSettings(preview) {
  const list = Array.isArray(preview?.settings) ? preview.settings : [];
  return list
    .filter((s) => s && typeof s.key === 'string')
    .map((s) => ({ key: s.key, value: settingValueText(s.value), current: s.current, change: settingChangeText(s.current) }));
}

/** One line about what an import preview found. */
export function previewSummary(preview) {
  const n = (x) => Math.max(0, Math.trunc(Number(x) || 0));
  const fresh = n(preview?.sessionsNew);
  const bits = [fresh === 1 ? t('uiNewChatsOne', num(fresh)) : t('uiNewChatsMany', num(fresh))];
  const skipped = n(preview?.sessionsSkipped);
  const here = Math.min(skipped, n(preview?.sessionsAlreadyHere));
  if (here) bits.push(here === 1 ? t('uiAlreadyHereOne', num(here)) : t('uiAlreadyHereMany', num(here)));
  const bad = skipped - here;
  if (bad > 0) bits.push(bad === 1 ? t('uiUnreadableSeeOne', num(bad)) : t('uiUnreadableSeeMany', num(bad)));
  if (n(preview?.liveEntries)) bits.push(t('uiCurrentChatOf', messagesText(n(preview.liveEntries))));
  return t('uiFileHas', bits.join(', '));
}
