// Read what the host stored, straight from the SQLite file (never through the extension).

/** The live history: `[{position, role, image_count, attach_id, content_chars, text, entry}]`. */
export function live(k) {
  return k
    .sql(
      `SELECT h.position, h.role, h.image_count, h.attach_id, h.content_chars, t.text, h.entry
       FROM history_entries h JOIN history_text t ON t.position = h.position ORDER BY h.position`,
    )
    .map((r) => ({ ...r, entry: JSON.parse(r.entry) }));
}

/** Saved sessions in drawer order: `[{id, name, pinned, entry_count}]`. */
export function sessions(k) {
  return k.sql('SELECT id, name, pinned, entry_count FROM sessions ORDER BY pinned DESC, created_at DESC, insert_seq DESC');
}

/** A saved session's body: `[{position, role, image_count, text}]`. */
export function sessionBody(k, id) {
  return k.sql(
    `SELECT position, role, image_count, text FROM session_text WHERE session_id = '${id.replace(/'/g, "''")}' ORDER BY position`,
  );
}

/** The saved session the live conversation belongs to ('' = none). */
export function activeSessionId(k) {
  return k.sql('SELECT active_session_id AS id FROM live_state WHERE id = 1')[0].id;
}

/** Image rows referenced by the live history. */
export function liveImages(k) {
  return k.sql(`SELECT h.position, i.sha256, i.mime, i.byte_length, i.is_thumbnail
                FROM history_entries h
                JOIN image_refs r ON r.holder = 'history' AND r.holder_id = h.id
                JOIN images i ON i.sha256 = r.sha256 ORDER BY h.position`);
}

/** One setting's JSON value (undefined when not stored). */
export function setting(k, key) {
  const rows = k.sql(`SELECT value FROM settings WHERE key = '${key.replace(/'/g, "''")}'`);
  return rows.length ? JSON.parse(rows[0].value) : undefined;
}

/** Entries trimmed off a bound live history since it was bound (storage-model §11.1), oldest first. */
export function trimmed(k) {
  return k
    .sql('SELECT position, entry FROM history_trimmed ORDER BY position, id')
    .map((r) => ({ position: r.position, entry: JSON.parse(r.entry) }));
}

/** The text of an entry as the history_text view computes it (string content, or text parts joined). */
export function entryText(entry) {
  const c = entry?.content;
  if (typeof c === 'string') return c;
  if (!Array.isArray(c)) return '';
  return c
    .filter((p) => p && (p.type === 'text' || p.type === 'input_text'))
    .map((p) => p.text)
    .join('\n');
}

/** The whole bound conversation: trimmed entries, then the live ones, as `[{role, text}]`. */
export function boundConversation(k) {
  return [
    ...trimmed(k).map((r) => ({ role: r.entry.role, text: entryText(r.entry) })),
    ...live(k).map((r) => ({ role: r.role, text: r.text ?? '' })),
  ];
}

/** Applied writes by operation, from the at-most-once log: `{op: count}`. */
export function clientRequestCounts(k) {
  return Object.fromEntries(k.sql('SELECT op, count(*) AS n FROM client_requests GROUP BY op').map((r) => [r.op, r.n]));
}
