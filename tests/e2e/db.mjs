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

/** Sessions in the drawer (not in the trash), in drawer order: `[{id, name, pinned, entry_count}]`. */
export function sessions(k) {
  return k.sql(
    'SELECT id, name, pinned, entry_count FROM sessions WHERE trashed_at IS NULL ORDER BY pinned DESC, created_at DESC, insert_seq DESC',
  );
}

/**
 * What is in the trash (Recently deleted), newest first:
 * `[{id, name, kind, reason, entry_count, pinned, from_session}]`.
 */
export function trash(k) {
  return k.sql(`SELECT t.id, t.name, t.kind, t.reason, t.entry_count, s.pinned, t.from_session
                FROM trash t JOIN sessions s ON s.id = t.id ORDER BY s.trashed_at DESC, s.insert_seq DESC`);
}

/** A saved session's body: `[{position, role, image_count, text}]`. */
export function sessionBody(k, id) {
  return k.sql(
    `SELECT position, role, image_count, text FROM session_text WHERE session_id = '${id.replace(/'/g, "''")}' ORDER BY position`,
  );
}

/** The session the live conversation is ('' = none). */
export function activeSessionId(k) {
  return k.sql('SELECT active_session_id AS id FROM live_state WHERE id = 1')[0].id;
}

/** Image rows referenced by the live history (its window of the live chat's session). */
export function liveImages(k) {
  return k.sql(`SELECT h.position, i.sha256, i.mime, i.byte_length, i.is_thumbnail
                FROM history_entries h
                JOIN image_refs r ON r.holder = 'session' AND r.holder_id = h.id
                JOIN images i ON i.sha256 = r.sha256 ORDER BY h.position`);
}

/** One setting's JSON value (undefined when not stored). */
export function setting(k, key) {
  const rows = k.sql(`SELECT value FROM settings WHERE key = '${key.replace(/'/g, "''")}'`);
  return rows.length ? JSON.parse(rows[0].value) : undefined;
}

/** The live chat's entries ahead of its window (trimmed off it, kept in its session), oldest first. */
export function trimmed(k) {
  return k
    .sql(
      `SELECT e.position, e.entry FROM session_entries e JOIN live_state l ON l.id = 1
       WHERE e.session_id = l.active_session_id AND e.branch_id IS NULL AND e.position < l.live_from
       ORDER BY e.position, e.id`,
    )
    .map((r) => ({ position: r.position, entry: JSON.parse(r.entry) }));
}

/** Settings rows as an object of parsed values. */
export function allSettings(k) {
  return Object.fromEntries(k.sql('SELECT key, value FROM settings').map((r) => [r.key, JSON.parse(r.value)]));
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

/** The whole live chat: its kept entries, then the live ones, as `[{role, text}]`. */
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
