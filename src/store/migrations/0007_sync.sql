-- Keepsake schema, version 7: sync (docs/sync.md). Every device, one memory: chats, trash and
-- versions on all of a person's machines, merged, never overwritten, over a folder an existing
-- syncer replicates.
--
-- The sync layer keeps a *replicated state* in tables of its own: every fact a person made is a
-- register holding a value and the stamp of the write that set it (`<ms, 15 digits>-<counter, 10
-- digits>-<device id>`, which sorts as the stamp does). Merging keeps, per register, the value
-- with the greatest stamp; a purge leaves a tombstone that wins over everything. The local tables
-- (sessions, session_entries, session_branches, session_forks, settings) are laid out from that
-- state for the chats an apply touched; a local write is recorded as operations by comparing, in
-- its own transaction, the chats it touched (found by the triggers below) with the state.
-- Nothing here is used until `keepsake-host sync init` or `sync join` writes `sync_device`.

-- This device: its id and name, the hybrid logical clock, the next operation number, and pause.
CREATE TABLE sync_device (
    id          INTEGER PRIMARY KEY CHECK (id = 1),
    device_id   TEXT NOT NULL,
    name        TEXT NOT NULL,
    created_at  INTEGER NOT NULL,
    paused      INTEGER NOT NULL DEFAULT 0 CHECK (paused IN (0, 1)),
    hlc_wall    INTEGER NOT NULL DEFAULT 0,           -- the greatest stamp made or applied: ms …
    hlc_counter INTEGER NOT NULL DEFAULT 0,           -- … and counter
    next_seq    INTEGER NOT NULL DEFAULT 1            -- the number of this device's next operation
);

-- The replicated state of each session: one register per column pair (value, stamp).
CREATE TABLE sync_sessions (
    session_id       TEXT PRIMARY KEY,
    created          TEXT,                            -- stamp of its first record: the device it began on
    name             TEXT,
    name_auto        INTEGER,                         -- 1: the name follows the first message
    name_stamp       TEXT,
    pinned           INTEGER,
    pinned_stamp     TEXT,
    created_at       INTEGER,
    created_at_stamp TEXT,
    trash            TEXT CHECK (trash IS NULL OR json_valid(trash)),  -- {at, reason, origin}, NULL: not in the trash
    trash_stamp      TEXT,
    extra            TEXT CHECK (extra IS NULL OR json_valid(extra)),
    extra_stamp      TEXT,
    root             TEXT CHECK (root IS NULL OR json_valid(root)),    -- versions at the start of the chat
    root_stamp       TEXT
) WITHOUT ROWID;

-- The replicated state of each entry: where it is (session, the entry it follows), what it says
-- (the stored entry JSON, pictures as keepsake-image:sha256:<hex>), the versions after it.
CREATE TABLE sync_entries (
    entry_id   TEXT PRIMARY KEY,
    created    TEXT,                                  -- stamp it was first recorded with (versions are in this order)
    session_id TEXT,
    parent     TEXT,                                  -- '' = the first entry of the chat
    loc_stamp  TEXT,
    fork       TEXT CHECK (fork IS NULL OR json_valid(fork)),          -- {versions: [entryId or ''], chosen}
    fork_stamp TEXT,
    body_stamp TEXT,
    body       TEXT CHECK (body IS NULL OR json_valid(body))           -- last: the other columns are read without it
);
CREATE INDEX sync_entries_session ON sync_entries(session_id);

-- The replicated state of the settings that sync (the list is in docs/sync.md).
CREATE TABLE sync_settings (
    key   TEXT PRIMARY KEY,
    value TEXT CHECK (value IS NULL OR json_valid(value)),   -- NULL: removed
    stamp TEXT NOT NULL
) WITHOUT ROWID;

-- Purged ids: what was deleted for good never comes back, whatever arrives later. No content.
CREATE TABLE sync_tombstones (
    kind  TEXT NOT NULL CHECK (kind IN ('session', 'entry')),
    id    TEXT NOT NULL,
    stamp TEXT NOT NULL,
    PRIMARY KEY (kind, id)
) WITHOUT ROWID;

-- This device's operations not yet sealed into a segment in the sync folder.
CREATE TABLE sync_outbox (
    seq        INTEGER PRIMARY KEY,                   -- the operation's number (from 1, no gaps)
    stamp      TEXT NOT NULL,
    op         TEXT NOT NULL CHECK (json_valid(op)),
    blobs      TEXT NOT NULL CHECK (json_valid(blobs)),   -- sha256 of each picture the op refers to
    created_at INTEGER NOT NULL
);

-- Other devices seen: their names and what was applied from them.
CREATE TABLE sync_peers (
    device_id          TEXT PRIMARY KEY,
    name               TEXT,
    ops_applied        INTEGER NOT NULL DEFAULT 0,
    segments_applied   INTEGER NOT NULL DEFAULT 0,
    checkpoint_applied INTEGER,                       -- the number of its newest checkpoint applied here
    last_applied_at    INTEGER
) WITHOUT ROWID;

-- Which segments and which operations of each device were applied (ranges of numbers),
-- written in the same transaction as their effects: each is applied exactly once.
CREATE TABLE sync_applied_segments (
    device_id TEXT NOT NULL,
    lo        INTEGER NOT NULL,
    hi        INTEGER NOT NULL,
    PRIMARY KEY (device_id, lo)
) WITHOUT ROWID;
CREATE TABLE sync_applied_ops (
    device_id TEXT NOT NULL,
    lo        INTEGER NOT NULL,
    hi        INTEGER NOT NULL,
    PRIMARY KEY (device_id, lo)
) WITHOUT ROWID;

-- Segments (and checkpoints) waiting for pictures that have not arrived yet (applied once they have).
CREATE TABLE sync_pending (
    device_id TEXT NOT NULL,
    kind      TEXT NOT NULL CHECK (kind IN ('segment', 'checkpoint')),
    seq       INTEGER NOT NULL,
    missing   TEXT NOT NULL CHECK (json_valid(missing)),
    since     INTEGER NOT NULL,
    PRIMARY KEY (device_id, kind, seq)
) WITHOUT ROWID;

-- Pictures kept in `images` for sync while no entry refers to them: 'in', another device's
-- operations need it and are not applied yet (kept until an entry refers to it, at most 30
-- days); 'out', an operation of this device not sealed yet refers to it (kept until it is).
CREATE TABLE sync_blobs (
    sha256 TEXT NOT NULL,
    why    TEXT NOT NULL CHECK (why IN ('in', 'out')),
    put_at INTEGER NOT NULL,
    PRIMARY KEY (sha256, why)
) WITHOUT ROWID;

-- An image leaves with its last reference, unless sync keeps it (above).
DROP TRIGGER image_refs_collect;
CREATE TRIGGER image_refs_collect AFTER DELETE ON image_refs BEGIN
    DELETE FROM images WHERE sha256 = OLD.sha256
        AND NOT EXISTS (SELECT 1 FROM image_refs WHERE sha256 = OLD.sha256)
        AND NOT EXISTS (SELECT 1 FROM sync_blobs WHERE sha256 = OLD.sha256);
END;

-- Local only: chats this device's maxSessions cap evicted and whose trash item was then purged
-- here. Eviction is this device's policy: it removes nothing on the others, and these stay gone here.
CREATE TABLE sync_dropped (
    session_id TEXT PRIMARY KEY
) WITHOUT ROWID;

-- What the write under way touched (sessions, entries whose JSON changed, settings): filled by
-- the triggers below while sync is set up, emptied before the write commits.
CREATE TABLE sync_dirty (
    kind TEXT NOT NULL,
    id   TEXT NOT NULL,
    PRIMARY KEY (kind, id)
) WITHOUT ROWID;

-- Each mark is inserted only when it is not there yet (not `INSERT OR IGNORE`: a trigger's
-- conflict clause gives way to the outer statement's, and the store's upserts have their own).
CREATE TRIGGER sync_sessions_inserted AFTER INSERT ON sessions
WHEN EXISTS (SELECT 1 FROM sync_device) BEGIN
    INSERT INTO sync_dirty (kind, id) SELECT 'session', NEW.id WHERE NOT EXISTS (SELECT 1 FROM sync_dirty WHERE kind = 'session' AND id = NEW.id);
END;
CREATE TRIGGER sync_sessions_updated AFTER UPDATE ON sessions
WHEN EXISTS (SELECT 1 FROM sync_device) BEGIN
    INSERT INTO sync_dirty (kind, id) SELECT 'session', NEW.id WHERE NOT EXISTS (SELECT 1 FROM sync_dirty WHERE kind = 'session' AND id = NEW.id);
    INSERT INTO sync_dirty (kind, id) SELECT 'session', OLD.id WHERE NOT EXISTS (SELECT 1 FROM sync_dirty WHERE kind = 'session' AND id = OLD.id);
END;
CREATE TRIGGER sync_sessions_deleted AFTER DELETE ON sessions
WHEN EXISTS (SELECT 1 FROM sync_device) BEGIN
    INSERT INTO sync_dirty (kind, id) SELECT 'session', OLD.id WHERE NOT EXISTS (SELECT 1 FROM sync_dirty WHERE kind = 'session' AND id = OLD.id);
    INSERT INTO sync_dirty (kind, id) SELECT 'evicted', OLD.id WHERE OLD.trash_reason = 'evicted' AND NOT EXISTS (SELECT 1 FROM sync_dirty WHERE kind = 'evicted' AND id = OLD.id);
END;
CREATE TRIGGER sync_entries_inserted AFTER INSERT ON session_entries
WHEN EXISTS (SELECT 1 FROM sync_device) BEGIN
    INSERT INTO sync_dirty (kind, id) SELECT 'session', NEW.session_id WHERE NOT EXISTS (SELECT 1 FROM sync_dirty WHERE kind = 'session' AND id = NEW.session_id);
    INSERT INTO sync_dirty (kind, id) SELECT 'entry', NEW.entry_id WHERE NEW.entry_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM sync_dirty WHERE kind = 'entry' AND id = NEW.entry_id);
END;
CREATE TRIGGER sync_entries_updated AFTER UPDATE ON session_entries
WHEN EXISTS (SELECT 1 FROM sync_device) BEGIN
    INSERT INTO sync_dirty (kind, id) SELECT 'session', NEW.session_id WHERE NOT EXISTS (SELECT 1 FROM sync_dirty WHERE kind = 'session' AND id = NEW.session_id);
    INSERT INTO sync_dirty (kind, id) SELECT 'session', OLD.session_id WHERE NOT EXISTS (SELECT 1 FROM sync_dirty WHERE kind = 'session' AND id = OLD.session_id);
    INSERT INTO sync_dirty (kind, id) SELECT 'entry', NEW.entry_id WHERE NEW.entry_id IS NOT NULL AND (OLD.entry IS NOT NEW.entry OR OLD.entry_id IS NOT NEW.entry_id) AND NOT EXISTS (SELECT 1 FROM sync_dirty WHERE kind = 'entry' AND id = NEW.entry_id);
END;
CREATE TRIGGER sync_entries_deleted AFTER DELETE ON session_entries
WHEN EXISTS (SELECT 1 FROM sync_device) BEGIN
    INSERT INTO sync_dirty (kind, id) SELECT 'session', OLD.session_id WHERE NOT EXISTS (SELECT 1 FROM sync_dirty WHERE kind = 'session' AND id = OLD.session_id);
END;
CREATE TRIGGER sync_branches_inserted AFTER INSERT ON session_branches
WHEN EXISTS (SELECT 1 FROM sync_device) BEGIN
    INSERT INTO sync_dirty (kind, id) SELECT 'session', NEW.session_id WHERE NOT EXISTS (SELECT 1 FROM sync_dirty WHERE kind = 'session' AND id = NEW.session_id);
END;
CREATE TRIGGER sync_branches_updated AFTER UPDATE ON session_branches
WHEN EXISTS (SELECT 1 FROM sync_device) BEGIN
    INSERT INTO sync_dirty (kind, id) SELECT 'session', NEW.session_id WHERE NOT EXISTS (SELECT 1 FROM sync_dirty WHERE kind = 'session' AND id = NEW.session_id);
    INSERT INTO sync_dirty (kind, id) SELECT 'session', OLD.session_id WHERE NOT EXISTS (SELECT 1 FROM sync_dirty WHERE kind = 'session' AND id = OLD.session_id);
END;
CREATE TRIGGER sync_branches_deleted AFTER DELETE ON session_branches
WHEN EXISTS (SELECT 1 FROM sync_device) BEGIN
    INSERT INTO sync_dirty (kind, id) SELECT 'session', OLD.session_id WHERE NOT EXISTS (SELECT 1 FROM sync_dirty WHERE kind = 'session' AND id = OLD.session_id);
END;
CREATE TRIGGER sync_forks_inserted AFTER INSERT ON session_forks
WHEN EXISTS (SELECT 1 FROM sync_device) BEGIN
    INSERT INTO sync_dirty (kind, id) SELECT 'session', NEW.session_id WHERE NOT EXISTS (SELECT 1 FROM sync_dirty WHERE kind = 'session' AND id = NEW.session_id);
END;
CREATE TRIGGER sync_forks_updated AFTER UPDATE ON session_forks
WHEN EXISTS (SELECT 1 FROM sync_device) BEGIN
    INSERT INTO sync_dirty (kind, id) SELECT 'session', NEW.session_id WHERE NOT EXISTS (SELECT 1 FROM sync_dirty WHERE kind = 'session' AND id = NEW.session_id);
    INSERT INTO sync_dirty (kind, id) SELECT 'session', OLD.session_id WHERE NOT EXISTS (SELECT 1 FROM sync_dirty WHERE kind = 'session' AND id = OLD.session_id);
END;
CREATE TRIGGER sync_forks_deleted AFTER DELETE ON session_forks
WHEN EXISTS (SELECT 1 FROM sync_device) BEGIN
    INSERT INTO sync_dirty (kind, id) SELECT 'session', OLD.session_id WHERE NOT EXISTS (SELECT 1 FROM sync_dirty WHERE kind = 'session' AND id = OLD.session_id);
END;
CREATE TRIGGER sync_settings_inserted AFTER INSERT ON settings
WHEN EXISTS (SELECT 1 FROM sync_device) BEGIN
    INSERT INTO sync_dirty (kind, id) SELECT 'setting', NEW.key WHERE NOT EXISTS (SELECT 1 FROM sync_dirty WHERE kind = 'setting' AND id = NEW.key);
END;
CREATE TRIGGER sync_settings_updated AFTER UPDATE ON settings
WHEN EXISTS (SELECT 1 FROM sync_device) BEGIN
    INSERT INTO sync_dirty (kind, id) SELECT 'setting', NEW.key WHERE NOT EXISTS (SELECT 1 FROM sync_dirty WHERE kind = 'setting' AND id = NEW.key);
    INSERT INTO sync_dirty (kind, id) SELECT 'setting', OLD.key WHERE NOT EXISTS (SELECT 1 FROM sync_dirty WHERE kind = 'setting' AND id = OLD.key);
END;
CREATE TRIGGER sync_settings_deleted AFTER DELETE ON settings
WHEN EXISTS (SELECT 1 FROM sync_device) BEGIN
    INSERT INTO sync_dirty (kind, id) SELECT 'setting', OLD.key WHERE NOT EXISTS (SELECT 1 FROM sync_dirty WHERE kind = 'setting' AND id = OLD.key);
END;

-- OR REPLACE: a salvage may have copied the damaged file's `about` rows in before this runs
INSERT OR REPLACE INTO about (name, description) VALUES
    ('sync_device', 'sync: this device (one row once sync is set up): device_id, name, paused, the hybrid logical clock (hlc_wall, hlc_counter) and next_seq, the number of its next operation'),
    ('sync_sessions', 'sync: the replicated state of each chat, one register per column with its stamp (<ms>-<counter>-<device id>, the latest wins): name, pinned, created_at, trash, extra, root (versions at the start); created = its first stamp, whose device is where the chat began'),
    ('sync_entries', 'sync: the replicated state of each entry: where it is (session_id, parent = the entry it follows, '''' = first), its JSON (body), the versions after it (fork), each with its stamp; created orders versions'),
    ('sync_settings', 'sync: the replicated state of the settings that sync (systemPrompt, autoSummarizeAttachments, summarizeThresholdChars, trashDays); value NULL = removed'),
    ('sync_tombstones', 'sync: ids deleted for good (a purge): never brought back by anything that arrives later; no content is kept'),
    ('sync_outbox', 'sync: this device''s operations (JSON) not yet sealed into a segment of the sync folder, with the pictures (sha256) each needs'),
    ('sync_peers', 'sync: the other devices seen: their names, operations and segments applied from each, their newest checkpoint applied, when last'),
    ('sync_applied_segments', 'sync: which segments of each device were applied (ranges lo..hi), written with their effects: each applied exactly once'),
    ('sync_applied_ops', 'sync: which operations of each device were applied (ranges lo..hi), written with their effects: each applied exactly once'),
    ('sync_pending', 'sync: segments and checkpoints waiting for pictures that have not arrived yet (missing: their sha256)'),
    ('sync_blobs', 'sync: pictures kept in images while no entry refers to them: why = in, another device''s operations not applied yet need it (30 days at most); out, an operation of this device not sealed yet refers to it'),
    ('sync_dropped', 'sync, this device only: chats its maxSessions cap evicted and whose trash item was purged here; they stay gone here and nothing is removed elsewhere'),
    ('sync_dirty', 'sync: what the write under way touched (filled by triggers, empty between writes)');
