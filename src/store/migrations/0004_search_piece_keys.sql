-- Keepsake schema, version 4: each search piece is found by one integer key.
--
-- Version 3 keyed `search_pieces` by (doc, start): a rowid table with a separate index, so
-- finding the piece that holds a hit took two b-tree descents (the index, then the row). Now
-- the row's own key is `doc * 2^32 + start`: the piece holding byte `at` of document `doc` is
-- the row with the largest key ≤ doc * 2^32 + at, one descent. `doc` and `start` stay as
-- plain columns for reading. A document's pieces are removed by a trigger when its
-- search_docs row goes (itself deleted with its session), as version 3's cascade did.
-- The rows are copied as they are: the index needs no rebuild.

CREATE TABLE search_pieces_v4 (
    key        INTEGER PRIMARY KEY,         -- doc * 4294967296 + start
    doc        INTEGER NOT NULL,
    start      INTEGER NOT NULL,            -- byte offset of text_lower in the whole lower-cased text
    text       TEXT NOT NULL,
    text_lower TEXT NOT NULL,
    CHECK (start >= 0 AND start < 4294967296 AND key = doc * 4294967296 + start)
);

INSERT INTO search_pieces_v4 (key, doc, start, text, text_lower)
SELECT doc * 4294967296 + start, doc, start, text, text_lower FROM search_pieces ORDER BY doc, start;

DROP VIEW search_text;
DROP TABLE search_pieces;
ALTER TABLE search_pieces_v4 RENAME TO search_pieces;

CREATE TRIGGER search_docs_drop_pieces AFTER DELETE ON search_docs BEGIN
    DELETE FROM search_pieces WHERE key >= old.doc * 4294967296 AND key < (old.doc + 1) * 4294967296;
END;

-- (no ORDER BY inside group_concat: older sqlite3 shells could not read the schema)
CREATE VIEW search_text AS
SELECT session_id, group_concat(text, '') AS text
FROM (SELECT d.doc, d.session_id, p.text FROM search_docs d JOIN search_pieces p
      ON p.key >= d.doc * 4294967296 AND p.key < (d.doc + 1) * 4294967296
      ORDER BY p.key)
GROUP BY doc;

UPDATE about SET description = 'derived: each saved session''s searchable text in pieces of about 900 bytes, with a lower-cased copy; key = doc * 2^32 + start'
WHERE name = 'search_pieces';
