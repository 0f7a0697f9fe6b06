// Display formatting shared by the side panel and the options page. Pure.

/** 1234567 → "1,234,567" whatever the locale (storage-model §1 "grouped"). */
export function grouped(n) {
  const v = Math.trunc(Number(n) || 0);
  const sign = v < 0 ? '-' : '';
  return sign + String(Math.abs(v)).replace(/\B(?=(\d{3})+(?!\d))/g, ',');
}

export function formatChars(n) {
  return `${grouped(n)} ${Math.trunc(Number(n) || 0) === 1 ? 'char' : 'chars'}`;
}

/** Host of a URL for compact display, or the input when it does not parse. */
export function shortUrl(url) {
  try {
    const u = new URL(url);
    const path = u.pathname === '/' ? '' : u.pathname;
    const s = u.host + path;
    return s.length > 60 ? s.slice(0, 59) + '…' : s;
  } catch {
    return typeof url === 'string' ? url : '';
  }
}

/** Session timestamp: "14:05" today, else "2026-01-31 14:05". */
export function formatWhen(ms, now = Date.now()) {
  const d = new Date(Number(ms) || 0);
  const n = new Date(now);
  const pad = (x) => String(x).padStart(2, '0');
  const time = `${pad(d.getHours())}:${pad(d.getMinutes())}`;
  const sameDay = d.getFullYear() === n.getFullYear() && d.getMonth() === n.getMonth() && d.getDate() === n.getDate();
  return sameDay ? time : `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${time}`;
}

/**
 * Why chats were skipped: ` (3 already here)`, ` (1 unreadable: see the warnings)`, both, or ''.
 * @param {number} skipped
 * @param {number} already the ones the host has (its copy wins)
 */
export function skippedWhy(skipped, already) {
  if (!skipped) return '';
  const here = Math.min(already, skipped);
  const bad = skipped - here;
  const bits = [];
  if (here) bits.push(`${here} already here`);
  if (bad) bits.push(`${bad} unreadable: see the warnings`);
  return ` (${bits.join(', ')})`;
}

/** storage.import result → short human lines (PROTOCOL.md storage.import). */
export function describeImportResult(r) {
  if (!r || typeof r !== 'object') return ['The host returned no result.'];
  const lines = [];
  const n = (x) => Number(x) || 0;
  lines.push(`Chats: ${n(r.sessionsImported)} imported, ${n(r.sessionsSkipped)} skipped${skippedWhy(n(r.sessionsSkipped), n(r.sessionsAlreadyHere))}.`);
  if (n(r.settingsImported) || n(r.settingsSkipped)) lines.push(`Settings: ${n(r.settingsImported)} imported, ${n(r.settingsSkipped)} skipped.`);
  else lines.push('Settings: none taken.');
  const live = {
    replaced: 'Current chat: the imported one (yours was empty).',
    archived: 'Current chat in the file: kept as a chat of its own (yours is unchanged).',
    unchanged: 'Current chat in the file: already here, unchanged.',
    absent: 'Current chat in the file: none.',
  }[r.live];
  if (live) lines.push(live);
  lines.push(`Images stored: ${n(r.imagesStored)}.`);
  if (n(r.overCap) > 0) lines.push(`You now have ${n(r.overCap)} more chat${n(r.overCap) === 1 ? '' : 's'} than your limit (Options): your next new chat moves the oldest unpinned ones to Recently deleted.`);
  const warnings = Array.isArray(r.warnings) ? r.warnings.filter((w) => typeof w === 'string') : [];
  for (const w of warnings.slice(0, 20)) lines.push(`Warning: ${w}`);
  if (warnings.length > 20) lines.push(`… and ${warnings.length - 20} more warnings.`);
  return lines;
}

/** A human label for chat.progress stages. */
export function progressText(ev) {
  const stage = ev && ev.stage;
  const label = {
    summary: 'Condensing the attached page',
    rescue: 'Context too long — retrying with large attachments omitted',
    bounding: 'Shrinking older images',
    continuation: 'Continuing the reply',
  }[stage] || 'Working';
  const total = Number(ev?.total) || 0;
  const done = Number(ev?.done) || 0;
  let s = label;
  if (total > 0) s += ` (${Math.min(done, total)}/${total})`;
  if (ev?.note) return `${s} — ${ev.note}`;
  return s + '…';
}
