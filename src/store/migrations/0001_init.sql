-- Keepsake schema, version 1. This file is append-only history: never edit it, add 0002_….sql.
-- Every JSON value is valid JSON stored as TEXT; every timestamp is integer ms since the Unix
-- epoch in a column ending in _at. Image bytes live once in `images`; entries refer to them
-- with the URL keepsake-image:sha256:<hex>.

-- What each table is for, readable with: SELECT * FROM about;
CREATE TABLE about (
    name        TEXT PRIMARY KEY,
    description TEXT NOT NULL
);

-- Small host bookkeeping values (schema notes, change-log floor).
CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);

-- Extension settings: one row per key, the value verbatim as JSON.
CREATE TABLE settings (
    key        TEXT PRIMARY KEY,
    value      TEXT NOT NULL CHECK (json_valid(value)),
    updated_at INTEGER NOT NULL
);

-- The one live conversation, one row per entry, in order of `position` (0 = oldest).
CREATE TABLE history_entries (
    id            INTEGER PRIMARY KEY,
    position      INTEGER NOT NULL,
    role          TEXT,
    content_chars INTEGER NOT NULL,          -- UTF-16 units of text, images not counted
    image_count   INTEGER NOT NULL DEFAULT 0,
    attach_id     TEXT,                      -- the entry's attachId stamp, if any
    entry         TEXT NOT NULL CHECK (json_valid(entry)),
    created_at    INTEGER NOT NULL
);
CREATE INDEX history_entries_position ON history_entries(position);

-- Entries trimmed off the front of a *bound* live history since its session was loaded; a
-- write-back puts them back at the head of the session body (storage-model §11.1).
CREATE TABLE history_trimmed (
    id         INTEGER PRIMARY KEY,
    position   INTEGER NOT NULL,
    entry      TEXT NOT NULL CHECK (json_valid(entry)),
    trimmed_at INTEGER NOT NULL
);

-- Single row: which saved session the live conversation belongs to ('' = none).
CREATE TABLE live_state (
    id                INTEGER PRIMARY KEY CHECK (id = 1),
    active_session_id TEXT NOT NULL DEFAULT '',
    bound_at          INTEGER
);
INSERT INTO live_state (id, active_session_id) VALUES (1, '');

-- Saved sessions (named snapshots). Order: pinned first, then newest created_at, ties by
-- insert_seq (later inserted = newer).
CREATE TABLE sessions (
    id          TEXT PRIMARY KEY,
    name        TEXT NOT NULL,
    name_lower  TEXT NOT NULL,
    created_at  INTEGER NOT NULL,
    pinned      INTEGER NOT NULL DEFAULT 0 CHECK (pinned IN (0, 1)),
    insert_seq  INTEGER NOT NULL,
    entry_count INTEGER NOT NULL DEFAULT 0,
    updated_at  INTEGER NOT NULL,
    extra       TEXT CHECK (extra IS NULL OR json_valid(extra))  -- unknown imported fields
);
CREATE INDEX sessions_order ON sessions(pinned DESC, created_at DESC, insert_seq DESC);

-- A session's body: one row per entry, in order of `position`.
CREATE TABLE session_entries (
    id            INTEGER PRIMARY KEY,
    session_id    TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    position      INTEGER NOT NULL,
    role          TEXT,
    content_chars INTEGER NOT NULL,
    image_count   INTEGER NOT NULL DEFAULT 0,
    entry         TEXT NOT NULL CHECK (json_valid(entry))
);
CREATE INDEX session_entries_order ON session_entries(session_id, position);

-- Derived search data (rebuildable from session_entries): the full text and a lower-cased copy.
CREATE TABLE session_search (
    session_id TEXT PRIMARY KEY REFERENCES sessions(id) ON DELETE CASCADE,
    text       TEXT NOT NULL,
    text_lower TEXT NOT NULL
);

-- Image bytes, stored once, keyed by SHA-256 of the bytes.
CREATE TABLE images (
    sha256       TEXT PRIMARY KEY CHECK (length(sha256) = 64),
    mime         TEXT NOT NULL,
    width        INTEGER,                   -- NULL when the header could not be read
    height       INTEGER,
    byte_length  INTEGER NOT NULL,
    is_thumbnail INTEGER NOT NULL DEFAULT 0 CHECK (is_thumbnail IN (0, 1)),
    created_at   INTEGER NOT NULL,
    bytes        BLOB NOT NULL
);

-- Who uses which image: holder 'history' (history_entries.id), 'session' (session_entries.id)
-- or 'trimmed' (history_trimmed.id). An image leaves `images` when its last reference goes.
CREATE TABLE image_refs (
    holder    TEXT NOT NULL CHECK (holder IN ('history', 'session', 'trimmed')),
    holder_id INTEGER NOT NULL,
    sha256    TEXT NOT NULL REFERENCES images(sha256),
    PRIMARY KEY (holder, holder_id, sha256)
) WITHOUT ROWID;
CREATE INDEX image_refs_sha256 ON image_refs(sha256);

CREATE TRIGGER history_entries_release AFTER DELETE ON history_entries BEGIN
    DELETE FROM image_refs WHERE holder = 'history' AND holder_id = OLD.id;
END;
CREATE TRIGGER session_entries_release AFTER DELETE ON session_entries BEGIN
    DELETE FROM image_refs WHERE holder = 'session' AND holder_id = OLD.id;
END;
CREATE TRIGGER history_trimmed_release AFTER DELETE ON history_trimmed BEGIN
    DELETE FROM image_refs WHERE holder = 'trimmed' AND holder_id = OLD.id;
END;
CREATE TRIGGER image_refs_collect AFTER DELETE ON image_refs BEGIN
    DELETE FROM images WHERE sha256 = OLD.sha256
        AND NOT EXISTS (SELECT 1 FROM image_refs WHERE sha256 = OLD.sha256);
END;

-- Change log behind `changed` events and changes.since: one row per committed write.
CREATE TABLE changes (
    seq               INTEGER PRIMARY KEY AUTOINCREMENT,
    changed_at        INTEGER NOT NULL,
    areas             TEXT NOT NULL CHECK (json_valid(areas)),
    client_request_id TEXT,
    origin            TEXT NOT NULL          -- which host process committed it
);

-- At-most-once writes: a clientRequestId, its operation and the result it returned.
CREATE TABLE client_requests (
    client_request_id TEXT PRIMARY KEY,
    op                TEXT NOT NULL,
    result            TEXT NOT NULL CHECK (json_valid(result)),
    created_at        INTEGER NOT NULL
);
CREATE INDEX client_requests_age ON client_requests(created_at);

-- Read-only views for people: text without image data.
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
ORDER BY s.pinned DESC, s.created_at DESC, s.insert_seq DESC, e.position;

CREATE VIEW session_list AS
SELECT id, name, datetime(created_at / 1000, 'unixepoch') AS created_utc, pinned, entry_count
FROM sessions ORDER BY pinned DESC, created_at DESC, insert_seq DESC;

INSERT INTO about (name, description) VALUES
    ('settings', 'extension settings, one JSON value per key'),
    ('history_entries', 'the live conversation, one row per entry (position 0 = oldest); entry is the JSON the extension stored, images as keepsake-image:sha256:<hex>'),
    ('history_trimmed', 'entries trimmed off a loaded session''s live copy, kept so saving back loses nothing'),
    ('live_state', 'active_session_id: the saved session the live conversation belongs to ('''' = none)'),
    ('sessions', 'saved sessions (snapshots): name, created_at, pinned'),
    ('session_entries', 'the body of each saved session, one row per entry'),
    ('session_search', 'derived full-text search data for each session (rebuildable)'),
    ('images', 'image bytes stored once, keyed by SHA-256; SELECT sha256, mime, width, height, byte_length FROM images'),
    ('image_refs', 'which entries use which image; an image is deleted with its last reference'),
    ('changes', 'log of committed writes behind change events (kept: the latest 1,000 or more)'),
    ('client_requests', 'results of writes by clientRequestId, so a retried write applies at most once'),
    ('history_text', 'view: the live conversation as plain text'),
    ('session_text', 'view: every saved session as plain text'),
    ('session_list', 'view: saved sessions in drawer order');
