//! Which settings sync (docs/sync.md "What syncs"): an explicit list. A setting not named here
//! never leaves the device: API keys and the provider cards that refer to them (`providers`,
//! `activeProvider`, `activeModel`), the backup settings (where this computer keeps its copies),
//! `maxSessions` (how much this device keeps: eviction is local), drafts and agent sessions, and
//! any key this list does not know.

/// The settings a person chooses once for every device.
pub const SYNCED_SETTINGS: [&str; 4] =
    ["systemPrompt", "autoSummarizeAttachments", "summarizeThresholdChars", "trashDays"];

pub fn is_synced(key: &str) -> bool {
    SYNCED_SETTINGS.contains(&key)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::settings::{is_device_local, DEVICE_LOCAL};

    #[test]
    fn keys_and_device_settings_never_sync() {
        for k in
            ["providers", "activeProvider", "activeModel", "maxSessions", "composerDraft", "agentSessions"]
        {
            assert!(!is_synced(k), "{k}");
        }
        for k in DEVICE_LOCAL {
            assert!(!is_synced(k), "{k}");
        }
        assert!(SYNCED_SETTINGS.iter().all(|k| !is_device_local(k)));
        assert!(is_synced("systemPrompt") && is_synced("trashDays"));
    }
}
