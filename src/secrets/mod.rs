//! The operating system's secret store, where provider API keys are kept (PROTOCOL.md "API
//! keys"): the Secret Service on Linux and the BSDs (GNOME Keyring, KWallet, KeePassXC; reached
//! over D-Bus by the pure-Rust zbus client), the login Keychain on macOS, the Credential Manager
//! on Windows; through the `keyring` crate. Items are generic passwords under the service
//! [`SERVICE`], one account per key (a UUID the database's reference names).
//!
//! Every call runs on a thread of its own with a time limit, so a store that hangs (a D-Bus
//! activation that never finishes, an unlock prompt nobody answers) costs a bounded wait and
//! reads as unreachable instead of blocking the host. Secrets read are kept in this process's
//! memory by account (an account's secret never changes: a new key gets a new account), so a
//! chat turn does not ask the store each time.
//!
//! `KEEPSAKE_SECRET_STORE=off` turns the store off for this process: keys stay in the database
//! file as they did before (tests and machines whose secret store must not be touched).

use std::collections::HashMap;
use std::sync::mpsc;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// The service name every Keepsake item is stored under (`secret-tool search service
/// dev.keepsake.host` lists them on Linux).
pub const SERVICE: &str = "dev.keepsake.host";

/// The environment variable that turns the store off (`off`) or on (`os`, the default).
pub const ENV: &str = "KEEPSAKE_SECRET_STORE";

/// A place to keep secrets by account.
pub trait SecretStore: Send + Sync {
    /// What the store is, for messages ("the Secret Service (D-Bus)").
    fn name(&self) -> String;
    /// Whether the store can be used now; `Err` says why not.
    fn probe(&self) -> Result<(), String>;
    /// Store `secret` under a new `account`.
    fn put(&self, account: &str, label: &str, secret: &str) -> Result<(), String>;
    /// The secret of `account`; `Ok(None)` when the store has no such item.
    fn get(&self, account: &str) -> Result<Option<String>, String>;
    /// Remove `account`'s item (no item is not an error).
    fn delete(&self, account: &str) -> Result<(), String>;
}

/// The store this process uses: the operating system's, unless `KEEPSAKE_SECRET_STORE=off`.
/// One per process, so every connection shares its cache.
pub fn system() -> Arc<dyn SecretStore> {
    static SYSTEM: OnceLock<Arc<dyn SecretStore>> = OnceLock::new();
    SYSTEM
        .get_or_init(|| match std::env::var(ENV).ok().as_deref().map(str::trim) {
            Some("off") => Arc::new(Off(format!("turned off by {ENV}=off"))),
            Some("" | "os") | None => Arc::new(OsStore::new()),
            Some(other) => Arc::new(Off(format!("{ENV}={other} is not \"os\" or \"off\""))),
        })
        .clone()
}

/// No store: every call fails with the reason.
pub struct Off(pub String);

impl SecretStore for Off {
    fn name(&self) -> String {
        "no secret store".into()
    }
    fn probe(&self) -> Result<(), String> {
        Err(self.0.clone())
    }
    fn put(&self, _: &str, _: &str, _: &str) -> Result<(), String> {
        Err(self.0.clone())
    }
    fn get(&self, _: &str) -> Result<Option<String>, String> {
        Err(self.0.clone())
    }
    fn delete(&self, _: &str) -> Result<(), String> {
        Err(self.0.clone())
    }
}

/// How long the probe's answer is reused (a store started after the host is found within this).
const PROBE_TTL: Duration = Duration::from_secs(30);
const PROBE_LIMIT: Duration = Duration::from_secs(5);
const GET_LIMIT: Duration = Duration::from_secs(5);
/// Writing may show an unlock prompt on a desktop: give the person time to answer it.
const PUT_LIMIT: Duration = Duration::from_secs(20);
const DELETE_LIMIT: Duration = Duration::from_secs(10);

/// The operating system's store through the `keyring` crate.
pub struct OsStore {
    cache: Mutex<HashMap<String, String>>,
    probed: Mutex<Option<(Instant, Result<(), String>)>>,
}

impl Default for OsStore {
    fn default() -> Self {
        Self::new()
    }
}

impl OsStore {
    pub fn new() -> Self {
        OsStore { cache: Mutex::new(HashMap::new()), probed: Mutex::new(None) }
    }

    fn cached(&self, account: &str) -> Option<String> {
        self.cache.lock().ok()?.get(account).cloned()
    }

    fn remember(&self, account: &str, secret: Option<&str>) {
        if let Ok(mut c) = self.cache.lock() {
            match secret {
                Some(s) => c.insert(account.to_owned(), s.to_owned()),
                None => c.remove(account),
            };
        }
    }

    fn forget_probe(&self) {
        if let Ok(mut p) = self.probed.lock() {
            *p = None;
        }
    }
}

/// Run `f` on its own thread; an answer later than `limit` is an error (the thread is left to
/// finish on its own).
fn bounded<T: Send + 'static>(
    what: &str,
    limit: Duration,
    f: impl FnOnce() -> Result<T, String> + Send + 'static,
) -> Result<T, String> {
    let (tx, rx) = mpsc::channel();
    let spawned = std::thread::Builder::new().name("keepsake-secrets".into()).spawn(move || {
        let _ = tx.send(f());
    });
    if let Err(e) = spawned {
        return Err(format!("cannot start a thread for the secret store: {e}"));
    }
    match rx.recv_timeout(limit) {
        Ok(r) => r,
        Err(mpsc::RecvTimeoutError::Timeout) => {
            Err(format!("the secret store did not answer {what} within {} s", limit.as_secs()))
        }
        Err(mpsc::RecvTimeoutError::Disconnected) => Err(format!("the secret store call ({what}) failed")),
    }
}

#[cfg(any(target_os = "linux", target_os = "freebsd", target_os = "openbsd"))]
mod platform {
    pub const NAME: &str = "the Secret Service (D-Bus)";

    /// A D-Bus session bus to talk to, before zbus tries: its own error for a missing bus is
    /// less clear than this.
    pub fn precheck() -> Result<(), String> {
        if std::env::var_os("DBUS_SESSION_BUS_ADDRESS").is_some_and(|a| !a.is_empty()) {
            return Ok(());
        }
        let runtime = std::env::var_os("XDG_RUNTIME_DIR").filter(|d| !d.is_empty());
        if runtime.is_some_and(|d| std::path::Path::new(&d).join("bus").exists()) {
            return Ok(());
        }
        Err("no D-Bus session bus: DBUS_SESSION_BUS_ADDRESS is not set and $XDG_RUNTIME_DIR/bus does not exist".into())
    }
}

#[cfg(target_os = "macos")]
mod platform {
    pub const NAME: &str = "the macOS Keychain";
    pub fn precheck() -> Result<(), String> {
        Ok(())
    }
}

#[cfg(target_os = "windows")]
mod platform {
    pub const NAME: &str = "the Windows Credential Manager";
    pub fn precheck() -> Result<(), String> {
        Ok(())
    }
}

#[cfg(not(any(
    target_os = "linux",
    target_os = "freebsd",
    target_os = "openbsd",
    target_os = "macos",
    target_os = "windows"
)))]
mod platform {
    pub const NAME: &str = "no secret store";
    pub fn precheck() -> Result<(), String> {
        Err("this platform has no secret store keepsake-host can use".into())
    }
}

fn entry(account: &str) -> Result<keyring::Entry, String> {
    keyring::Entry::new(SERVICE, account).map_err(|e| format!("{e}"))
}

fn describe(e: &keyring::Error) -> String {
    match e {
        keyring::Error::NoStorageAccess(inner) => {
            format!("the secret store refused access (locked?): {inner}")
        }
        keyring::Error::PlatformFailure(inner) => format!("{inner}"),
        other => format!("{other}"),
    }
}

impl SecretStore for OsStore {
    fn name(&self) -> String {
        platform::NAME.into()
    }

    fn probe(&self) -> Result<(), String> {
        if let Ok(p) = self.probed.lock() {
            if let Some((at, r)) = p.as_ref() {
                if at.elapsed() < PROBE_TTL {
                    return r.clone();
                }
            }
        }
        let r = platform::precheck().and_then(|()| {
            // a store that keeps nothing past this process (the crate's mock) is no store
            let persistent = matches!(
                keyring::default::default_credential_builder().persistence(),
                keyring::credential::CredentialPersistence::UntilDelete
            );
            if !persistent {
                return Err("the secret store on this platform does not keep secrets".into());
            }
            bounded("a look-up", PROBE_LIMIT, || match entry("keepsake-probe")?.get_password() {
                Ok(_) | Err(keyring::Error::NoEntry) => Ok(()),
                Err(e) => Err(describe(&e)),
            })
        });
        if let Ok(mut p) = self.probed.lock() {
            *p = Some((Instant::now(), r.clone()));
        }
        r
    }

    fn put(&self, account: &str, label: &str, secret: &str) -> Result<(), String> {
        let (a, l, s) = (account.to_owned(), label.to_owned(), secret.to_owned());
        let r = bounded("a write", PUT_LIMIT, move || {
            let e = entry(&a)?;
            e.set_password(&s).map_err(|e| describe(&e))?;
            // the name a person sees in Seahorse; where the platform has no label this is a no-op
            let _ = e.update_attributes(&HashMap::from([("label", l.as_str())]));
            Ok(())
        });
        // not cached: the read-back that follows every write (store/keys.rs) asks the store itself
        if r.is_err() {
            self.forget_probe();
        }
        r
    }

    fn get(&self, account: &str) -> Result<Option<String>, String> {
        if let Some(s) = self.cached(account) {
            return Ok(Some(s));
        }
        self.probe()?;
        let a = account.to_owned();
        let r = bounded("a read", GET_LIMIT, move || match entry(&a)?.get_password() {
            Ok(s) => Ok(Some(s)),
            Err(keyring::Error::NoEntry) => Ok(None),
            Err(e) => Err(describe(&e)),
        });
        match &r {
            Ok(Some(s)) => self.remember(account, Some(s)),
            Ok(None) => {}
            Err(_) => self.forget_probe(),
        }
        r
    }

    fn delete(&self, account: &str) -> Result<(), String> {
        self.remember(account, None);
        let a = account.to_owned();
        bounded("a delete", DELETE_LIMIT, move || match entry(&a)?.delete_credential() {
            Ok(()) | Err(keyring::Error::NoEntry) => Ok(()),
            Err(e) => Err(describe(&e)),
        })
    }
}

/// A store in memory with failures on demand, for tests of what the host does when the store
/// fails midway.
#[doc(hidden)]
pub mod memory {
    use super::SecretStore;
    use std::collections::BTreeMap;
    use std::sync::atomic::{AtomicI64, Ordering};
    use std::sync::Mutex;

    #[derive(Default)]
    pub struct MemoryStore {
        pub items: Mutex<BTreeMap<String, (String, String)>>,
        /// `Some(reason)`: the store is unreachable.
        pub down: Mutex<Option<String>>,
        /// Writes left before every write fails (negative: never fail).
        pub puts_left: AtomicI64,
        /// Writes that "succeed" but keep nothing (a store that loses what it is given).
        pub lose_writes: std::sync::atomic::AtomicBool,
    }

    impl MemoryStore {
        pub fn new() -> Self {
            MemoryStore { puts_left: AtomicI64::new(-1), ..Default::default() }
        }
        pub fn secrets(&self) -> Vec<String> {
            self.items.lock().unwrap().values().map(|(_, s)| s.clone()).collect()
        }
        pub fn accounts(&self) -> Vec<String> {
            self.items.lock().unwrap().keys().cloned().collect()
        }
        fn check(&self) -> Result<(), String> {
            match &*self.down.lock().unwrap() {
                Some(r) => Err(r.clone()),
                None => Ok(()),
            }
        }
    }

    impl SecretStore for MemoryStore {
        fn name(&self) -> String {
            "the test store".into()
        }
        fn probe(&self) -> Result<(), String> {
            self.check()
        }
        fn put(&self, account: &str, label: &str, secret: &str) -> Result<(), String> {
            self.check()?;
            let left = self.puts_left.load(Ordering::SeqCst);
            if left == 0 {
                return Err("the test store refuses writes".into());
            }
            if left > 0 {
                self.puts_left.store(left - 1, Ordering::SeqCst);
            }
            if !self.lose_writes.load(Ordering::SeqCst) {
                self.items.lock().unwrap().insert(account.into(), (label.into(), secret.into()));
            }
            Ok(())
        }
        fn get(&self, account: &str) -> Result<Option<String>, String> {
            self.check()?;
            Ok(self.items.lock().unwrap().get(account).map(|(_, s)| s.clone()))
        }
        fn delete(&self, account: &str) -> Result<(), String> {
            self.check()?;
            self.items.lock().unwrap().remove(account);
            Ok(())
        }
    }
}
