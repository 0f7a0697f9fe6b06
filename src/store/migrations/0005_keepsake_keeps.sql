-- Keepsake schema, version 5: Keepsake keeps. Nothing a person made disappears without their say.
--
-- Until version 4 the live conversation had its own table (history_entries): entries trimmed off
-- its front were dropped unless the chat had been saved, and a saved session was a copy written
-- back on "New chat". Now every conversation is a session from its first entry (auto-keep):
--
-- * `session_entries` holds every entry of every conversation, once. An entry is on its session's
--   chosen path (branch_id IS NULL, positions 0..n-1), on one of its other versions (branch_id),
--   or in the trash (its session row has trashed_at set).
-- * The live history is a window onto the bound session's chosen path: the entries from
--   `live_state.live_from` on. Trimming moves `live_from`; it never deletes a row. The view
--   `history_entries` shows the window as the old table did.
-- * Removals move entries to the trash: a trashed session row (kept `trashDays`, 30 by default),
--   restorable, purged only on request or when it expires.
-- * Regenerate and Edit & resend keep what they replace as another version of that turn
--   (`session_branches`, `session_forks`).
--
-- This file runs in two parts around a step in keepsake-host (store/migrate.rs) that moves the old
-- live history and its trimmed entries into sessions; the part below runs first.

-- Other versions of a conversation: the entries after a fork that are not on the chosen path.
-- fork_entry_id is the entryId of the entry before the fork ('' = the start of the conversation).
CREATE TABLE session_branches (
    id            INTEGER PRIMARY KEY,
    session_id    TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    fork_entry_id TEXT NOT NULL,
    version       INTEGER NOT NULL CHECK (version >= 1),   -- its number among the versions at the fork
    created_at    INTEGER NOT NULL,
    UNIQUE (session_id, fork_entry_id, version)
);

-- One row per fork: how many versions it has and which one the chosen path follows.
CREATE TABLE session_forks (
    session_id    TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    fork_entry_id TEXT NOT NULL,
    chosen        INTEGER NOT NULL CHECK (chosen >= 1),
    versions      INTEGER NOT NULL CHECK (versions >= 2 AND chosen <= versions),
    PRIMARY KEY (session_id, fork_entry_id)
) WITHOUT ROWID;

ALTER TABLE session_entries ADD COLUMN entry_id TEXT;      -- the entry's host-assigned entryId (also in `entry`)
ALTER TABLE session_entries ADD COLUMN branch_id INTEGER REFERENCES session_branches(id) ON DELETE CASCADE;
ALTER TABLE session_entries ADD COLUMN created_at INTEGER; -- when the entry was stored (NULL before version 5)

ALTER TABLE sessions ADD COLUMN name_auto INTEGER NOT NULL DEFAULT 0;  -- 1: the name follows the first message until renamed
ALTER TABLE sessions ADD COLUMN trashed_at INTEGER;                    -- set while the session is in the trash
ALTER TABLE sessions ADD COLUMN trash_reason TEXT;                     -- deleted, cleared, evicted, edited, regenerated, undo-attach
ALTER TABLE sessions ADD COLUMN trash_origin TEXT;                     -- JSON: what the trash item was and where it came from

ALTER TABLE live_state ADD COLUMN live_from INTEGER NOT NULL DEFAULT 0; -- first body position in the live window

-- @step fold_live_history
-- (keepsake-host moves the live history and its trimmed entries into sessions here: store/migrate.rs)

-- The old live tables are empty of meaning now: their entries live in sessions.
DELETE FROM image_refs WHERE holder IN ('history', 'trimmed');
DROP VIEW history_text;
DROP TABLE history_entries;
DROP TABLE history_trimmed;

-- An attach's metadata is kept while an entry with its attachId exists anywhere.
DROP TRIGGER session_entries_attach_release;
CREATE TRIGGER session_entries_attach_release AFTER DELETE ON session_entries
WHEN OLD.attach_id IS NOT NULL BEGIN
    DELETE FROM attachments WHERE attach_id = OLD.attach_id
        AND NOT EXISTS (SELECT 1 FROM session_entries WHERE attach_id = OLD.attach_id);
END;

DROP INDEX session_entries_order;
CREATE INDEX session_entries_path ON session_entries(session_id, branch_id, position);
CREATE UNIQUE INDEX session_entries_entry_id ON session_entries(entry_id);
CREATE INDEX sessions_trashed ON sessions(trashed_at) WHERE trashed_at IS NOT NULL;

-- The live history: the bound session's chosen path from live_from on, as the old table showed it.
CREATE VIEW history_entries AS
SELECT e.id, e.position - l.live_from AS position, e.role, e.content_chars, e.image_count, e.attach_id,
       e.entry, e.entry_id, e.created_at
FROM session_entries e JOIN live_state l ON l.id = 1
WHERE e.session_id = l.active_session_id AND e.branch_id IS NULL AND e.position >= l.live_from;

CREATE VIEW history_text AS
SELECT position, role,
       CASE json_type(entry, '$.content')
           WHEN 'text' THEN json_extract(entry, '$.content')
           ELSE (SELECT group_concat(json_extract(p.value, '$.text'), char(10))
                 FROM json_each(entry, '$.content') AS p
                 WHERE json_extract(p.value, '$.type') IN ('text', 'input_text'))
       END AS text,
       image_count, attach_id, created_at
FROM history_entries ORDER BY position;

DROP VIEW session_text;
CREATE VIEW session_text AS
SELECT s.name AS session, e.session_id, e.position, e.role,
       CASE json_type(e.entry, '$.content')
           WHEN 'text' THEN json_extract(e.entry, '$.content')
           ELSE (SELECT group_concat(json_extract(p.value, '$.text'), char(10))
                 FROM json_each(e.entry, '$.content') AS p
                 WHERE json_extract(p.value, '$.type') IN ('text', 'input_text'))
       END AS text,
       e.image_count
FROM session_entries e JOIN sessions s ON s.id = e.session_id
WHERE s.trashed_at IS NULL AND e.branch_id IS NULL
ORDER BY s.pinned DESC, s.created_at DESC, s.insert_seq DESC, e.position;

DROP VIEW session_list;
CREATE VIEW session_list AS
SELECT id, name, datetime(created_at / 1000, 'unixepoch') AS created_utc, pinned, entry_count
FROM sessions WHERE trashed_at IS NULL ORDER BY pinned DESC, created_at DESC, insert_seq DESC;

-- What is in the trash, newest first.
CREATE VIEW trash AS
SELECT id, name, json_extract(trash_origin, '$.kind') AS kind, trash_reason AS reason,
       datetime(trashed_at / 1000, 'unixepoch') AS trashed_utc, entry_count,
       json_extract(trash_origin, '$.sessionId') AS from_session
FROM sessions WHERE trashed_at IS NOT NULL ORDER BY trashed_at DESC, insert_seq DESC;

DELETE FROM about WHERE name IN ('history_trimmed');
UPDATE about SET description = 'view: the live conversation, the bound session''s entries from live_state.live_from on (position 0 = oldest shown)'
WHERE name = 'history_entries';
UPDATE about SET description = 'live_state: active_session_id, the session the live conversation is ('''' = none), and live_from, where its live window starts'
WHERE name = 'live_state';
UPDATE about SET description = 'every conversation, one row per session (auto-kept from its first message); trashed_at is set while it is in the trash'
WHERE name = 'sessions';
UPDATE about SET description = 'every entry, one row each: on its session''s chosen path (branch_id NULL), on another version (branch_id), or in a trashed session'
WHERE name = 'session_entries';
UPDATE about SET description = 'view: every session not in the trash, as plain text (chosen path)' WHERE name = 'session_text';
UPDATE about SET description = 'view: sessions not in the trash, in drawer order' WHERE name = 'session_list';
INSERT INTO about (name, description) VALUES
    ('session_branches', 'other versions of a conversation (Regenerate, Edit & resend): entries after the fork at fork_entry_id that are not on the chosen path'),
    ('session_forks', 'per fork: how many versions it has and which one the chosen path follows'),
    ('trash', 'view: what was deleted, kept trashDays (default 30) and restorable: keepsake-host trash');
