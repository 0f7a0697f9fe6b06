//! This device's sync folder and where its sync key is (docs/sync.md "The key"): two `meta` rows,
//! device-local (never an operation, never in the folder, kept by a restore like the daily
//! backup's row). The key reference is the JSON the transport writes (`sync::key::KeyRef`): a
//! secret-store account, or the key as text when no secret store was reachable.

use rusqlite::OptionalExtension;
use serde_json::Value;

use super::connection::Store;
use crate::protocol::HostResult;

pub(super) const FOLDER_META: &str = "sync_folder";
pub(super) const KEY_META: &str = "sync_key";

impl Store {
    /// `(folder, key reference)`, once `sync init` / `sync join` stored them.
    pub fn sync_folder(&mut self) -> HostResult<Option<(String, String)>> {
        self.read(|tx| {
            let get = |k: &str| -> HostResult<Option<String>> {
                Ok(tx.query_row("SELECT value FROM meta WHERE key = ?1", [k], |r| r.get(0)).optional()?)
            };
            Ok(get(FOLDER_META)?.zip(get(KEY_META)?))
        })
    }

    /// Store them (replacing what was there).
    pub fn sync_set_folder(&mut self, folder: &str, key_ref: &str) -> HostResult<()> {
        self.write("sync.folder", None, |w| {
            for (k, v) in [(FOLDER_META, folder), (KEY_META, key_ref)] {
                w.tx.execute(
                    "INSERT INTO meta (key, value) VALUES (?1, ?2) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                    [k, v],
                )?;
            }
            Ok(Value::Null)
        })?;
        Ok(())
    }

    /// Forget them (`sync leave`); the key text, if it was held here, is overwritten in the file.
    pub fn sync_clear_folder(&mut self) -> HostResult<()> {
        let was = self.secure_delete_on();
        let r = self.write("sync.folder", None, |w| {
            w.tx.execute("DELETE FROM meta WHERE key IN (?1, ?2)", [FOLDER_META, KEY_META])?;
            Ok(Value::Null)
        });
        self.restore_secure_delete(was);
        r?;
        Ok(())
    }
}
