// Imports larger than one message go in pieces (PROTOCOL.md "Memory budget"). The host refuses a
// frame of more than 100,000 JSON values (MAX_FRAME_VALUES) or 64 MiB, so a file is split by
// session into documents of at most PIECE_VALUES values and PIECE_BYTES bytes, each a complete
// import on its own:
// - an export (`format: "keepsake.sessions"`): each piece carries its sessions and exactly the
//   images they reference (`keepsake-image:sha256:<hex>`);
// - a browser-data dump (`savedSessions`, `session_<id>` bodies, `history`, `activeSessionId`,
//   settings): each piece carries its sessions and their bodies; the live history and
//   `activeSessionId` ride with the active session's piece (the host continues that session
//   only when the same import created it), the settings with the first piece.
// Imports are idempotent (a session id the host has is skipped), so importing the file again
// after a failed piece finishes it without duplicates. A single session too large for one message
// is never cut: it is listed in `tooLarge` and the caller says so (the terminal's
// `keepsake-host import` has no message limit).
//
// Pure: no DOM, no chrome.*.

import { IMAGE_REF_PREFIX, isImageRef } from './entries.js';
import { t } from './i18n.js';

/** The host's per-frame value limit (src/protocol/limits.rs MAX_FRAME_VALUES). */
export const HOST_MAX_VALUES = 100_000;
/** Values per piece: half the host's limit, leaving room for the envelope and any miscount. */
export const PIECE_VALUES = 50_000;
/** Bytes per piece (UTF-8 JSON), when a session does not need more on its own. */
export const PIECE_BYTES = 16 * 1024 * 1024;
/** The most one piece may hold: the 64 MiB frame less room for the envelope. */
export const FRAME_BYTES = 64 * 1024 * 1024 - 64 * 1024;

const EXPORT_FORMAT = 'keepsake.sessions';

/**
 * JSON values in `v` as the host counts them: every string (object keys included), number,
 * literal, array and object.
 */
export function countValues(v) {
  let n = 0;
  const stack = [v];
  while (stack.length) {
    const x = stack.pop();
    n += 1;
    if (Array.isArray(x)) {
      for (const y of x) stack.push(y);
    } else if (x && typeof x === 'object') {
      for (const k of Object.keys(x)) {
        n += 1;
        stack.push(x[k]);
      }
    }
  }
  return n;
}

const encoder = new TextEncoder();
/** UTF-8 bytes of `v` as JSON. */
function jsonBytes(v) {
  return encoder.encode(JSON.stringify(v)).length;
}

/** Every image hash `v` references. */
function imageRefs(v, out = new Set()) {
  const stack = [v];
  while (stack.length) {
    const x = stack.pop();
    if (typeof x === 'string') {
      if (isImageRef(x)) out.add(x.slice(IMAGE_REF_PREFIX.length));
    } else if (Array.isArray(x)) {
      for (const y of x) stack.push(y);
    } else if (x && typeof x === 'object') {
      for (const k of Object.keys(x)) stack.push(x[k]);
    }
  }
  return out;
}

function isReserved(key) {
  return key === 'history' || key === 'savedSessions' || key === 'activeSessionId' || key.startsWith('session_');
}

/**
 * Pack `units` ({values, bytes, ...}) greedily in order into groups within the budget; a unit
 * over the budget alone gets a group of its own when it fits one frame, else goes to `tooLarge`.
 */
function pack(units, { values, bytes, base }) {
  const groups = [];
  const tooLarge = [];
  let cur = null;
  for (const u of units) {
    if (u.values + base.values > HOST_MAX_VALUES - 1_000 || u.bytes + base.bytes > FRAME_BYTES) {
      tooLarge.push(u);
      continue;
    }
    if (!cur || cur.values + u.values > values || cur.bytes + u.bytes > bytes) {
      cur = { values: base.values, bytes: base.bytes, units: [] };
      groups.push(cur);
    }
    cur.units.push(u);
    cur.values += u.values;
    cur.bytes += u.bytes;
  }
  return { groups, tooLarge };
}

/** Whether `doc` needs no splitting. */
export function fitsOneMessage(doc, { values = PIECE_VALUES, bytes = PIECE_BYTES } = {}) {
  return countValues(doc) <= values && jsonBytes(doc) <= bytes;
}

/**
 * Split an import document into pieces.
 * → `{pieces: [doc], tooLarge: [{id, name, values, bytes}], warnings: [string]}`.
 * A document within one piece comes back as it is (one piece).
 */
export function splitImport(doc, { values = PIECE_VALUES, bytes = PIECE_BYTES } = {}) {
  if (!doc || typeof doc !== 'object' || Array.isArray(doc) || fitsOneMessage(doc, { values, bytes })) {
    return { pieces: [doc], tooLarge: [], warnings: [] };
  }
  return doc.format === EXPORT_FORMAT ? splitExport(doc, { values, bytes }) : splitDump(doc, { values, bytes });
}

function describe(u) {
  return { id: u.id, name: u.name, values: u.values, bytes: u.bytes };
}

function splitExport(doc, budget) {
  const images = doc.images && typeof doc.images === 'object' ? doc.images : {};
  const head = {};
  for (const k of Object.keys(doc)) if (k !== 'sessions' && k !== 'images') head[k] = doc[k];
  const base = { values: countValues(head) + 4, bytes: jsonBytes(head) + 32 };
  const sessions = Array.isArray(doc.sessions) ? doc.sessions : [];
  const units = sessions.map((s) => {
    const refs = [...imageRefs(s)].filter((h) => Object.prototype.hasOwnProperty.call(images, h));
    let v = countValues(s);
    let b = jsonBytes(s) + 1;
    for (const h of refs) {
      v += 1 + countValues(images[h]);
      b += jsonBytes({ [h]: images[h] });
    }
    return { id: s?.id, name: s?.name, session: s, refs, values: v, bytes: b };
  });
  const { groups, tooLarge } = pack(units, { ...budget, base });
  const pieces = groups.map((g) => {
    const imgs = {};
    for (const u of g.units) for (const h of u.refs) imgs[h] = images[h];
    return { ...head, sessions: g.units.map((u) => u.session), images: imgs };
  });
  if (pieces.length === 0) pieces.push({ ...head, sessions: [], images: {} });
  return { pieces, tooLarge: tooLarge.map(describe), warnings: [] };
}

function splitDump(doc, budget) {
  const settings = {};
  for (const k of Object.keys(doc)) if (!isReserved(k)) settings[k] = doc[k];
  const saved = Array.isArray(doc.savedSessions) ? doc.savedSessions : [];
  const active = typeof doc.activeSessionId === 'string' ? doc.activeSessionId : null;
  const live = Array.isArray(doc.history) ? doc.history : null;
  const bodyKey = (s) => (s && typeof s.id === 'string' ? `session_${s.id}` : null);
  const units = saved.map((s) => {
    const key = bodyKey(s);
    const body = key && Object.prototype.hasOwnProperty.call(doc, key) ? doc[key] : undefined;
    const liveHere = active !== null && s?.id === active;
    let v = countValues(s) + (body === undefined ? 0 : 1 + countValues(body));
    let b = jsonBytes(s) + 1 + (body === undefined ? 0 : jsonBytes({ [key]: body }));
    if (liveHere && live) {
      v += 3 + countValues(live);
      b += jsonBytes({ history: live, activeSessionId: active });
    }
    return { id: s?.id, name: s?.name, element: s, key, body, liveHere, values: v, bytes: b };
  });
  const { groups, tooLarge } = pack(units, { ...budget, base: { values: 4, bytes: 32 } });
  // a `session_<id>` body no savedSessions element names: the host would ignore it with a
  // warning, so it says the same here instead of carrying the body along
  const named = new Set(units.map((u) => u.key));
  const warnings = Object.keys(doc)
    .filter((k) => k.startsWith('session_') && !named.has(k))
    .map((k) => t('bgImportOrphanSession', k));
  const liveGroup = groups.findIndex((g) => g.units.some((u) => u.liveHere));
  const pieces = groups.map((g, i) => {
    const p = i === 0 ? { ...settings } : {};
    p.savedSessions = g.units.map((u) => u.element);
    for (const u of g.units) if (u.body !== undefined) p[u.key] = u.body;
    if (i === liveGroup) {
      p.history = live;
      p.activeSessionId = active;
    }
    return p;
  });
  // the live history without its active session in any piece: a piece of its own (with the
  // settings when there is no other piece); too large for one message → reported, never cut
  if (live && liveGroup < 0) {
    const extra = { history: live };
    if (active !== null) extra.activeSessionId = active;
    if (countValues(extra) > HOST_MAX_VALUES - 1_000 || jsonBytes(extra) > FRAME_BYTES) {
      tooLarge.push({ id: null, name: t('bgImportOpenChat'), values: countValues(extra), bytes: jsonBytes(extra) });
    } else if (pieces.length === 0) {
      pieces.push({ ...settings, ...extra });
    } else {
      pieces.push(extra);
    }
  }
  if (pieces.length === 0) pieces.push({ ...settings });
  return { pieces, tooLarge: tooLarge.map(describe), warnings };
}

/** Results of every piece's `storage.importPreview`, as one preview. */
export function mergePreviews(list) {
  const out = { sessionsNew: 0, sessionsSkipped: 0, sessionsAlreadyHere: 0, liveEntries: 0, settings: [], settingsInvalid: 0, warnings: [] };
  for (const p of list) {
    out.sessionsNew += Number(p?.sessionsNew) || 0;
    out.sessionsSkipped += Number(p?.sessionsSkipped) || 0;
    out.sessionsAlreadyHere += Number(p?.sessionsAlreadyHere) || 0;
    out.liveEntries += Number(p?.liveEntries) || 0;
    out.settingsInvalid += Number(p?.settingsInvalid) || 0;
    if (Array.isArray(p?.settings)) out.settings.push(...p.settings);
    if (Array.isArray(p?.warnings)) out.warnings.push(...p.warnings);
  }
  return out;
}

/** Results of every piece's `storage.import`, as one result. */
export function mergeResults(list) {
  const out = { sessionsImported: 0, sessionsSkipped: 0, sessionsAlreadyHere: 0, settingsImported: 0, settingsSkipped: 0, live: 'absent', imagesStored: 0, overCap: 0, warnings: [] };
  for (const r of list) {
    out.sessionsImported += Number(r?.sessionsImported) || 0;
    out.sessionsSkipped += Number(r?.sessionsSkipped) || 0;
    out.sessionsAlreadyHere += Number(r?.sessionsAlreadyHere) || 0;
    out.settingsImported += Number(r?.settingsImported) || 0;
    out.settingsSkipped += Number(r?.settingsSkipped) || 0;
    out.imagesStored += Number(r?.imagesStored) || 0;
    if (r?.live && r.live !== 'absent') out.live = r.live;
    out.overCap = Number(r?.overCap) || 0;
    if (Array.isArray(r?.warnings)) out.warnings.push(...r.warnings);
  }
  return out;
}
