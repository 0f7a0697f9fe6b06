//! `sync init`, `sync join` and `sync leave` (docs/sync.md "Setting it up"). Every step that can
//! refuse runs before anything is written, and a failure after that takes back what this call
//! wrote: a refused `init` or `join` leaves the database, the secret store and the folder as
//! they were.

use std::path::{Path, PathBuf};

use super::folder::write_sealed;
use super::key::{self, Check, Kept};
use super::layout::{context, list_device, Folder};
use super::payload::{self, DeviceInfo, V};
use super::replica::{Device, Replica};
use super::seal::{Kind, SyncKey};
use super::SyncError;
use crate::secrets::SecretStore;
use crate::util::files::{self, Existing, WriteError};

/// What `init` or `join` did.
#[derive(Debug, Clone)]
pub struct Joined {
    pub device: Device,
    /// The key as text (`init` prints it once; `join` never prints it).
    pub key_text: String,
    pub kept: Kept,
}

/// This machine's name, the default device name.
pub fn host_name() -> String {
    #[cfg(unix)]
    {
        let mut buf = [0u8; 256];
        // SAFETY: the buffer is valid for its length; gethostname writes at most that many bytes.
        let r = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
        if r == 0 {
            let n = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
            let s = String::from_utf8_lossy(&buf[..n]).trim().to_owned();
            if !s.is_empty() {
                return s;
            }
        }
    }
    std::env::var("COMPUTERNAME").ok().filter(|s| !s.is_empty()).unwrap_or_else(|| "this device".into())
}

/// A device name as given: trimmed, 1–100 characters, no control characters.
pub fn check_name(name: &str) -> Result<String, SyncError> {
    let n = name.trim();
    if n.is_empty() || n.chars().count() > 100 || n.chars().any(char::is_control) {
        return Err(SyncError::Folder(
            "a device name is 1 to 100 characters, without control characters".into(),
        ));
    }
    Ok(n.to_owned())
}

fn absolute(p: &Path) -> PathBuf {
    crate::util::paths::absolute(p)
}

fn not_set_up_twice(r: &mut dyn Replica) -> Result<(), SyncError> {
    if let Some(d) = r.sync_device()? {
        return Err(SyncError::Folder(format!(
            "this database already syncs with {} as \u{201c}{}\u{201d}; run `keepsake-host sync leave` first to \
             sync with another folder",
            d.folder.display(),
            d.name
        )));
    }
    Ok(())
}

fn label(folder: &Path) -> String {
    format!("Keepsake sync key ({})", folder.display())
}

/// Write this device's `device` file (its name), replacing an older one.
pub fn write_device_file(d: &Device, key: &SyncKey, now: i64) -> Result<(), SyncError> {
    let f = Folder::new(&d.folder);
    let info = DeviceInfo {
        v: V,
        id: d.id.clone(),
        name: d.name.clone(),
        created_at: d.created_at,
        updated_at: now,
    };
    let ctx = context(Kind::Device, &d.id, 0);
    write_sealed(
        &f.device_file(&d.id),
        Existing::ReplaceOwn,
        &key.seal(Kind::Device, &ctx, &payload::to_bytes(&info)),
    )
    .map_err(|e| SyncError::Folder(e.to_string()))
}

fn finish(
    r: &mut dyn Replica,
    secrets: &dyn SecretStore,
    folder: &Path,
    name: Option<&str>,
    key: &SyncKey,
    now: i64,
) -> Result<Joined, SyncError> {
    let name = check_name(&name.map_or_else(host_name, str::to_owned))?;
    let kept = key::keep(secrets, key, &label(folder)).map_err(SyncError::Key)?;
    let device = Device {
        id: uuid::Uuid::new_v4().to_string(),
        name,
        created_at: now,
        folder: folder.to_path_buf(),
        key: kept.key_ref.clone(),
        paused: false,
    };
    let done =
        r.sync_setup(&device).map_err(SyncError::from).and_then(|()| write_device_file(&device, key, now));
    if let Err(e) = done {
        let _ = r.sync_forget();
        key::forget(secrets, &kept.key_ref);
        return Err(e);
    }
    Ok(Joined { device, key_text: key::to_text(key), kept })
}

/// `sync init --folder DIR [--name NAME]`: a new sync folder (DIR is created when missing) and a
/// new key. A folder that already holds one is refused (`join` it instead).
pub fn init(
    r: &mut dyn Replica,
    secrets: &dyn SecretStore,
    folder: &Path,
    name: Option<&str>,
    now: i64,
) -> Result<Joined, SyncError> {
    let folder = absolute(folder);
    not_set_up_twice(r)?;
    if let Some(n) = name {
        check_name(n)?;
    }
    let f = Folder::new(&folder);
    if std::fs::symlink_metadata(f.keycheck()).is_ok() {
        return Err(SyncError::Folder(format!(
            "{} already holds a Keepsake sync folder: join it with `keepsake-host sync join --folder {} --key KEY` \
             and the key your first device printed; nothing was changed",
            folder.display(),
            folder.display()
        )));
    }
    files::private_dir(&f.base()).map_err(|e| SyncError::Folder(format!("{}: {e}", f.base().display())))?;
    let key = SyncKey::random();
    match write_sealed(&f.keycheck(), Existing::Refuse, &key::keycheck_bytes(&key)) {
        Ok(()) => {}
        Err(WriteError::Exists { .. }) => {
            return Err(SyncError::Folder(format!(
                "{} was set up by someone else at the same moment; nothing was changed",
                folder.display()
            )))
        }
        Err(e) => return Err(SyncError::Folder(e.to_string())),
    }
    finish(r, secrets, &folder, name, &key, now).inspect_err(|_| {
        let _ = std::fs::remove_file(f.keycheck());
    })
}

/// `sync join --folder DIR --key KEY [--name NAME]`: the key is checked against the folder's
/// keycheck before anything is written; a wrong key changes nothing.
pub fn join(
    r: &mut dyn Replica,
    secrets: &dyn SecretStore,
    folder: &Path,
    key_text: &str,
    name: Option<&str>,
    now: i64,
) -> Result<Joined, SyncError> {
    let folder = absolute(folder);
    let key = key::from_text(key_text).map_err(|e| SyncError::Key(format!("{e}; nothing was changed")))?;
    not_set_up_twice(r)?;
    if let Some(n) = name {
        check_name(n)?;
    }
    let f = Folder::new(&folder);
    match key::check(&f, &key) {
        Check::Right => {}
        Check::Missing => {
            return Err(SyncError::Folder(format!(
                "{} holds no Keepsake sync folder (no keepsake/keycheck): is it the folder your syncer shares, and \
                 has it finished copying? Nothing was changed",
                folder.display()
            )))
        }
        Check::Wrong => {
            return Err(SyncError::Key(format!(
                "this is not the key of the sync folder at {}: nothing was changed. Use the key `keepsake-host sync \
                 init` printed on your first device",
                folder.display()
            )))
        }
        Check::Unreadable(why) => {
            return Err(SyncError::Folder(format!(
                "the sync folder's keycheck at {} cannot be read ({why}): nothing was changed; if your syncer is \
                 still copying, try again when it is done",
                f.keycheck().display()
            )))
        }
    }
    finish(r, secrets, &folder, name, &key, now)
}

/// What `leave` did.
#[derive(Debug, Clone)]
pub struct Left {
    pub device: Device,
    /// Files of this device removed from the folder (`--remove-my-files`).
    pub removed: usize,
}

/// `sync leave [--remove-my-files]`: this database stops syncing; its chats stay. The key is
/// removed from the secret store. With `remove_my_files`, this device's folder goes too (only
/// files of the shapes Keepsake writes there; other devices keep what they applied).
pub fn leave(
    r: &mut dyn Replica,
    secrets: &dyn SecretStore,
    remove_my_files: bool,
) -> Result<Left, SyncError> {
    let Some(device) = r.sync_device()? else {
        return Err(SyncError::Folder("this database does not sync (nothing to leave)".into()));
    };
    r.sync_forget()?;
    key::forget(secrets, &device.key);
    let mut removed = 0;
    if remove_my_files {
        let f = Folder::new(&device.folder);
        let dir = f.device_dir(&device.id);
        if let Ok(files) = list_device(&dir) {
            let mut paths: Vec<PathBuf> = files.segments.iter().map(|&s| f.segment(&device.id, s)).collect();
            paths.extend(files.checkpoints.iter().map(|&c| f.checkpoint(&device.id, c)));
            paths.push(f.device_file(&device.id));
            for p in paths {
                if files::remove_file_no_follow(&p).is_ok() {
                    removed += 1;
                }
            }
            super::folder::remove_stale_temps(&dir, std::time::Duration::ZERO);
            let _ = std::fs::remove_dir(&dir);
        }
    }
    Ok(Left { device, removed })
}
