-- Keepsake schema, version 2: attach metadata, the change tracker, thumbnail provenance.

-- Metadata recorded by history.attach for as long as an entry with that attachId exists
-- (live, trimmed or in a saved body): the page context minus its body, the paper flag and the
-- text auto-summary should condense (storage-model §4.3, §7.4).
CREATE TABLE attachments (
    attach_id      TEXT PRIMARY KEY,
    ctx            TEXT NOT NULL CHECK (json_valid(ctx)),
    paper          INTEGER NOT NULL DEFAULT 0 CHECK (paper IN (0, 1)),
    summary_source TEXT,
    created_at     INTEGER NOT NULL
);

ALTER TABLE session_entries ADD COLUMN attach_id TEXT;
ALTER TABLE history_trimmed ADD COLUMN attach_id TEXT;
UPDATE session_entries SET attach_id = json_extract(entry, '$.attachId')
    WHERE json_type(entry, '$.attachId') = 'text';
UPDATE history_trimmed SET attach_id = json_extract(entry, '$.attachId')
    WHERE json_type(entry, '$.attachId') = 'text';
CREATE INDEX history_entries_attach ON history_entries(attach_id) WHERE attach_id IS NOT NULL;
CREATE INDEX session_entries_attach ON session_entries(attach_id) WHERE attach_id IS NOT NULL;

CREATE TRIGGER history_entries_attach_release AFTER DELETE ON history_entries
WHEN OLD.attach_id IS NOT NULL BEGIN
    DELETE FROM attachments WHERE attach_id = OLD.attach_id
        AND NOT EXISTS (SELECT 1 FROM history_entries WHERE attach_id = OLD.attach_id)
        AND NOT EXISTS (SELECT 1 FROM history_trimmed WHERE attach_id = OLD.attach_id)
        AND NOT EXISTS (SELECT 1 FROM session_entries WHERE attach_id = OLD.attach_id);
END;
CREATE TRIGGER session_entries_attach_release AFTER DELETE ON session_entries
WHEN OLD.attach_id IS NOT NULL BEGIN
    DELETE FROM attachments WHERE attach_id = OLD.attach_id
        AND NOT EXISTS (SELECT 1 FROM history_entries WHERE attach_id = OLD.attach_id)
        AND NOT EXISTS (SELECT 1 FROM history_trimmed WHERE attach_id = OLD.attach_id)
        AND NOT EXISTS (SELECT 1 FROM session_entries WHERE attach_id = OLD.attach_id);
END;
CREATE TRIGGER history_trimmed_attach_release AFTER DELETE ON history_trimmed
WHEN OLD.attach_id IS NOT NULL BEGIN
    DELETE FROM attachments WHERE attach_id = OLD.attach_id
        AND NOT EXISTS (SELECT 1 FROM history_entries WHERE attach_id = OLD.attach_id)
        AND NOT EXISTS (SELECT 1 FROM history_trimmed WHERE attach_id = OLD.attach_id)
        AND NOT EXISTS (SELECT 1 FROM session_entries WHERE attach_id = OLD.attach_id);
END;

-- attach.trackChange records, keyed '<mode>::<url>'; the 50 most recent are kept.
CREATE TABLE attach_tracker (
    key         TEXT PRIMARY KEY,
    text_sha256 TEXT NOT NULL,
    text_length INTEGER NOT NULL,             -- UTF-16 units
    attached_at INTEGER NOT NULL
);

-- Thumbnails remember the blob they were made from, so the same picture is never re-encoded.
ALTER TABLE images ADD COLUMN source_sha256 TEXT;
CREATE INDEX images_source ON images(source_sha256) WHERE source_sha256 IS NOT NULL;

INSERT INTO about (name, description) VALUES
    ('attachments', 'what history.attach recorded about each attached page (context without its body), kept while an entry with that attachId exists'),
    ('attach_tracker', 'last attached text hash and length per mode and URL (the 50 most recent), to tell the user a page changed');
