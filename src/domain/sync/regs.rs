//! The replicated state's registers (docs/sync.md "The replicated state") and how two copies of
//! one merge: every register keeps the value with the greatest stamp (last writer wins; equal
//! stamps, which one device never gives two values, keep the greater value's JSON so the merge
//! stays a function of its inputs), an entry's or a session's `created` keeps the least stamp.
//! Merging is commutative, associative and idempotent: any order, any number of times, the same
//! state. Tombstones (purges) are applied by the store: a purged id's registers are dropped and
//! never taken again.

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use super::stamp::Stamp;

impl Serialize for Stamp {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.encode())
    }
}

impl<'de> Deserialize<'de> for Stamp {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Stamp, D::Error> {
        let s = String::deserialize(d)?;
        Stamp::decode(&s).ok_or_else(|| D::Error::custom(format!("not a stamp: {s:?}")))
    }
}

/// One register: a value and the stamp of the write that set it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Reg<T> {
    pub v: T,
    pub s: Stamp,
}

impl<T> Reg<T> {
    pub fn new(v: T, s: &Stamp) -> Reg<T> {
        Reg { v, s: s.clone() }
    }
}

/// Where an entry is: its session and the entry it follows (`""`: the first of the chat).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Loc {
    pub session: String,
    pub parent: String,
}

/// A session's name and whether it still follows the chat's first message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Name {
    pub name: String,
    pub auto: bool,
}

/// A session in the trash: when, why and what the item holds (the `trash_origin` JSON).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Trash {
    pub at: i64,
    pub reason: String,
    pub origin: Value,
}

/// The versions at a fork, in their order (the entryId of each version's first entry; `""` for a
/// version left with no entry), and which one the chat follows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Fork {
    pub versions: Vec<String>,
    pub chosen: usize,
}

/// An entry's registers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EntryRegs {
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created: Option<Stamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loc: Option<Reg<Loc>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<Reg<Value>>,
    /// The versions that continue the chat after this entry (none: one way on).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fork: Option<Reg<Fork>>,
}

/// A session's registers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionRegs {
    pub id: String,
    /// The stamp it was first recorded with: its device is the one the chat began on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created: Option<Stamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<Reg<Name>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pinned: Option<Reg<bool>>,
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "createdAt")]
    pub created_at: Option<Reg<i64>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trash: Option<Reg<Option<Trash>>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extra: Option<Reg<Option<Value>>>,
    /// The versions at the start of the chat.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root: Option<Reg<Fork>>,
}

/// A synced setting: its value, or `None` once removed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SettingReg {
    pub key: String,
    pub value: Reg<Option<Value>>,
}

/// What a purge left: the id, never the content.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Session,
    Entry,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Session => "session",
            Kind::Entry => "entry",
        }
    }
}

/// Keep the later of two registers. Returns whether `mine` changed.
pub fn lww<T: Serialize + PartialEq + Clone>(mine: &mut Option<Reg<T>>, theirs: &Option<Reg<T>>) -> bool {
    let Some(t) = theirs else { return false };
    let take = match mine {
        None => true,
        Some(m) if t.s > m.s => true,
        // one device never gives one register two values at one stamp; if it ever happened, the
        // greater value's JSON wins on every device alike
        Some(m) if t.s == m.s && t.v != m.v => {
            serde_json::to_string(&t.v).unwrap_or_default() > serde_json::to_string(&m.v).unwrap_or_default()
        }
        Some(_) => false,
    };
    if take {
        *mine = Some(t.clone());
    }
    take
}

/// Keep the earlier of two `created` stamps. Returns whether `mine` changed.
pub fn earliest(mine: &mut Option<Stamp>, theirs: &Option<Stamp>) -> bool {
    match (mine.as_ref(), theirs) {
        (_, None) => false,
        (Some(m), Some(t)) if m <= t => false,
        (_, Some(t)) => {
            *mine = Some(t.clone());
            true
        }
    }
}

/// What merging changed in an entry.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EntryChange {
    pub created: bool,
    pub loc: bool,
    pub body: bool,
    pub fork: bool,
}

impl EntryChange {
    pub fn any(&self) -> bool {
        self.created || self.loc || self.body || self.fork
    }
}

impl EntryRegs {
    pub fn empty(id: &str) -> EntryRegs {
        EntryRegs { id: id.to_owned(), created: None, loc: None, body: None, fork: None }
    }

    /// Merge another copy of this entry's registers into these.
    pub fn merge(&mut self, o: &EntryRegs) -> EntryChange {
        EntryChange {
            created: earliest(&mut self.created, &o.created),
            loc: lww(&mut self.loc, &o.loc),
            body: lww(&mut self.body, &o.body),
            fork: lww(&mut self.fork, &o.fork),
        }
    }

    /// Everything an entry needs to be shown: when it was made, where it is and what it says.
    pub fn ready(&self) -> bool {
        self.created.is_some() && self.loc.is_some() && self.body.is_some()
    }

    pub fn session(&self) -> Option<&str> {
        self.loc.as_ref().map(|l| l.v.session.as_str())
    }

    /// Every stamp these registers hold (the clock moves past each).
    pub fn stamps(&self) -> impl Iterator<Item = &Stamp> {
        self.created
            .iter()
            .chain(self.loc.as_ref().map(|r| &r.s))
            .chain(self.body.as_ref().map(|r| &r.s))
            .chain(self.fork.as_ref().map(|r| &r.s))
    }
}

impl SessionRegs {
    pub fn empty(id: &str) -> SessionRegs {
        SessionRegs {
            id: id.to_owned(),
            created: None,
            name: None,
            pinned: None,
            created_at: None,
            trash: None,
            extra: None,
            root: None,
        }
    }

    /// Merge another copy of this session's registers into these. Returns whether any changed.
    pub fn merge(&mut self, o: &SessionRegs) -> bool {
        let mut changed = earliest(&mut self.created, &o.created);
        changed |= lww(&mut self.name, &o.name);
        changed |= lww(&mut self.pinned, &o.pinned);
        changed |= lww(&mut self.created_at, &o.created_at);
        changed |= lww(&mut self.trash, &o.trash);
        changed |= lww(&mut self.extra, &o.extra);
        changed |= lww(&mut self.root, &o.root);
        changed
    }

    /// Everything a session row needs: when it began, its name and its date.
    pub fn ready(&self) -> bool {
        self.created.is_some() && self.name.is_some() && self.created_at.is_some()
    }

    pub fn trash(&self) -> Option<&Trash> {
        self.trash.as_ref().and_then(|r| r.v.as_ref())
    }

    pub fn stamps(&self) -> impl Iterator<Item = &Stamp> {
        self.created
            .iter()
            .chain(self.name.as_ref().map(|r| &r.s))
            .chain(self.pinned.as_ref().map(|r| &r.s))
            .chain(self.created_at.as_ref().map(|r| &r.s))
            .chain(self.trash.as_ref().map(|r| &r.s))
            .chain(self.extra.as_ref().map(|r| &r.s))
            .chain(self.root.as_ref().map(|r| &r.s))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn st(t: i64, dev: &str) -> Stamp {
        Stamp::new(t, 0, dev)
    }

    fn entry(id: &str, created: i64, loc: (&str, &str, i64), body: (&str, i64)) -> EntryRegs {
        EntryRegs {
            id: id.into(),
            created: Some(st(created, "a")),
            loc: Some(Reg::new(Loc { session: loc.0.into(), parent: loc.1.into() }, &st(loc.2, "a"))),
            body: Some(Reg::new(json!({"content": body.0}), &st(body.1, "b"))),
            fork: None,
        }
    }

    #[test]
    fn merging_is_commutative_associative_and_idempotent() {
        let x = entry("e", 5, ("s1", "", 5), ("one", 5));
        let y = entry("e", 3, ("s2", "p", 9), ("two", 4));
        let z = entry("e", 7, ("s3", "q", 8), ("three", 6));
        let fold = |order: &[&EntryRegs]| {
            let mut m = EntryRegs::empty("e");
            for r in order {
                m.merge(r);
            }
            m
        };
        let want = fold(&[&x, &y, &z]);
        for order in [[&x, &z, &y], [&y, &x, &z], [&y, &z, &x], [&z, &x, &y], [&z, &y, &x]] {
            assert_eq!(fold(&order), want);
        }
        assert_eq!(fold(&[&x, &y, &z, &z, &x, &y]), want);
        assert_eq!(want.created.unwrap().t, 3, "created keeps the earliest");
        assert_eq!(want.loc.unwrap().v.session, "s2", "loc keeps the latest");
        assert_eq!(want.body.unwrap().v, json!({"content": "three"}));
    }

    #[test]
    fn equal_stamps_pick_the_same_value_on_every_device() {
        let s = st(1, "a");
        let mut a = Some(Reg::new(json!("x"), &s));
        let mut b = Some(Reg::new(json!("y"), &s));
        let (ca, cb) = (a.clone(), b.clone());
        lww(&mut a, &cb);
        lww(&mut b, &ca);
        assert_eq!(a, b);
        let again = a.clone();
        assert!(!lww(&mut a, &again), "the same value again changes nothing");
    }

    #[test]
    fn a_trash_register_holds_a_restore_as_a_value() {
        let mut s = SessionRegs::empty("s");
        let trashed = SessionRegs {
            trash: Some(Reg::new(
                Some(Trash { at: 1, reason: "deleted".into(), origin: json!({"kind": "session"}) }),
                &st(10, "a"),
            )),
            ..SessionRegs::empty("s")
        };
        let restored = SessionRegs { trash: Some(Reg::new(None, &st(20, "b"))), ..SessionRegs::empty("s") };
        s.merge(&restored);
        s.merge(&trashed);
        assert!(s.trash().is_none(), "the later restore wins whatever the order");
        let doc = serde_json::to_value(&s).unwrap();
        let back: SessionRegs = serde_json::from_value(doc).unwrap();
        assert_eq!(back, s);
    }
}
