-- Keepsake schema, version 3: the content-search index (storage-model §5.3).
--
-- session_search kept one whole copy of each session's text (and a lower-cased one), so every
-- query scanned every session's whole text. Now the text is kept in pieces of about 900 bytes, and
-- every distinct one- and two-character sequence of the lower-cased text is listed once per
-- session with the position of its first occurrence: one- and two-character queries are
-- answered by the index alone, longer ones need all their two-character sequences present and
-- are verified from the latest position those allow. All three tables are derived from
-- session_entries and rebuilt by keepsake-host (here right after this script, at salvage).

DROP TABLE session_search;

-- One row per indexed session. `doc` is never reused (AUTOINCREMENT), so postings of a
-- session deleted by a path that missed them can never point at another session.
CREATE TABLE search_docs (
    doc         INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id  TEXT NOT NULL UNIQUE REFERENCES sessions(id) ON DELETE CASCADE,
    lower_bytes INTEGER NOT NULL,           -- byte length of the whole lower-cased text
    last_char   TEXT NOT NULL DEFAULT ''    -- its last character ('' = empty text)
);

-- The searchable text (`entryText(e) + "\n"` over the body) in order of `start`.
CREATE TABLE search_pieces (
    doc        INTEGER NOT NULL REFERENCES search_docs(doc) ON DELETE CASCADE,
    start      INTEGER NOT NULL,            -- byte offset of text_lower in the whole lower-cased text
    text       TEXT NOT NULL,
    text_lower TEXT NOT NULL,
    PRIMARY KEY (doc, start)
);

-- Postings: gram = one or two lower-cased characters; pos = byte offset of its first
-- occurrence in the session's lower-cased text.
CREATE TABLE search_grams (
    gram TEXT NOT NULL,
    doc  INTEGER NOT NULL,
    pos  INTEGER NOT NULL,
    PRIMARY KEY (gram, doc)
) WITHOUT ROWID;

-- (no ORDER BY inside group_concat: older sqlite3 shells could not read the schema)
CREATE VIEW search_text AS
SELECT session_id, group_concat(text, '') AS text
FROM (SELECT d.doc, d.session_id, p.text FROM search_docs d JOIN search_pieces p ON p.doc = d.doc
      ORDER BY d.doc, p.start)
GROUP BY doc;

DELETE FROM about WHERE name = 'session_search';
INSERT INTO about (name, description) VALUES
    ('search_docs', 'derived: one row per saved session in the search index (rebuildable)'),
    ('search_pieces', 'derived: each saved session''s searchable text in pieces of about 900 bytes, with a lower-cased copy'),
    ('search_grams', 'derived: every one- and two-character sequence of each session''s lower-cased text, with its first position'),
    ('search_text', 'view: each saved session''s searchable text in one piece');
