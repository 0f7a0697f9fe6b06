-- Keepsake schema, version 6: display renditions of stored images (storage-model §2.6).
--
-- A rendition is derived data: the picture at the size the side panel shows it (at most
-- DISPLAY_MAX_WIDTH px wide, JPEG), made by keepsake-host the first time `images.display` asks
-- for it. It is never used for a request body (those read `images.bytes`). `digest` is the SHA-256
-- of `bytes`: a rendition that no longer matches it is remade, never reported. A rendition
-- leaves with its image.
CREATE TABLE image_renditions (
    sha256     TEXT PRIMARY KEY REFERENCES images(sha256) ON DELETE CASCADE,
    mime       TEXT NOT NULL,
    width      INTEGER NOT NULL,
    height     INTEGER NOT NULL,
    digest     TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    bytes      BLOB NOT NULL
);

-- foreign_keys may be off (salvage copies rows with it off): the trigger removes a rendition
-- whatever the pragma says.
CREATE TRIGGER images_drop_rendition AFTER DELETE ON images BEGIN
    DELETE FROM image_renditions WHERE sha256 = OLD.sha256;
END;

-- OR REPLACE: a salvage may have copied the damaged file's `about` rows in before this runs
INSERT OR REPLACE INTO about (name, description) VALUES
    ('image_renditions', 'derived: each stored image at the size the side panel shows it (JPEG at most 1280 px wide, or the original bytes), made on first request, removed with its image, never sent to a model');
