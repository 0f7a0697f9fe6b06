//! Operations and checkpoints as they travel (docs/sync.md "What an operation is"): an operation
//! says "these registers now hold these values", all at the operation's stamp; a checkpoint is
//! the whole state, every register with its own stamp, plus which operations it holds. Both are
//! JSON; the transport seals them into encrypted files. Anything a file says is data: every
//! operation is checked here before the store merges it.

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

use super::regs::{EntryRegs, Fork, Kind, Loc, Name, Reg, SessionRegs, SettingReg, Trash};
use super::settings::is_synced;
use super::stamp::Stamp;

/// The operation format this host writes and reads.
pub const OP_VERSION: u32 = 1;
/// The longest id an operation may carry (entryIds the host keeps are at most 128 bytes).
pub const ID_MAX: usize = 128;

/// `Some(value)` for a field that is present, `null` included (`None`: absent).
fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<T>, D::Error> {
    T::deserialize(d).map(Some)
}

/// A session's registers an operation sets.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct SessionOp {
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created: Option<Stamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<Name>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pinned: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at: Option<i64>,
    /// `null`: restored (out of the trash).
    #[serde(default, deserialize_with = "present", skip_serializing_if = "Option::is_none")]
    pub trash: Option<Option<Trash>>,
    #[serde(default, deserialize_with = "present", skip_serializing_if = "Option::is_none")]
    pub extra: Option<Option<Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root: Option<Fork>,
}

/// An entry's registers an operation sets (`created` always: it is the entry's identity in time).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct EntryOp {
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created: Option<Stamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loc: Option<Loc>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fork: Option<Fork>,
}

/// A purge: the id of a session or an entry deleted for good.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Purged {
    pub kind: Kind,
    pub id: String,
}

/// A synced setting set (`value`) or removed (no `value`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SettingOp {
    pub key: String,
    #[serde(default, deserialize_with = "present", skip_serializing_if = "Option::is_none")]
    pub value: Option<Value>,
}

/// One operation: what one write changed in one session (or in the synced settings).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Op {
    pub v: u32,
    pub dev: String,
    pub seq: u64,
    pub t: i64,
    pub c: u32,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sessions: Vec<SessionOp>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub entries: Vec<EntryOp>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub purged: Vec<Purged>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub settings: Vec<SettingOp>,
}

fn check_id(what: &str, id: &str) -> Result<(), String> {
    if id.is_empty() || id.len() > ID_MAX || id.chars().any(char::is_control) {
        return Err(format!("{what} id {id:?} is not a valid id"));
    }
    Ok(())
}

fn check_fork(f: &Fork) -> Result<(), String> {
    if f.chosen > f.versions.len() || (!f.versions.is_empty() && f.chosen >= f.versions.len()) {
        return Err(format!("a fork chooses version {} of {}", f.chosen + 1, f.versions.len()));
    }
    for v in f.versions.iter().filter(|v| !v.is_empty()) {
        check_id("a version's entry", v)?;
    }
    Ok(())
}

impl Op {
    /// Parse and check one operation of device `dev`.
    pub fn parse(text: &str, dev: &str) -> Result<Op, String> {
        let op: Op = serde_json::from_str(text).map_err(|e| format!("an operation does not parse: {e}"))?;
        if op.v != OP_VERSION {
            return Err(format!("an operation of format {} (this host reads {OP_VERSION})", op.v));
        }
        if op.dev != dev {
            return Err(format!("an operation of device {:?} in the files of {dev:?}", op.dev));
        }
        if op.seq == 0 {
            return Err("an operation numbered 0".into());
        }
        op.check()?;
        Ok(op)
    }

    /// Every id valid, every entry's body an object naming its own entryId, every setting synced.
    pub fn check(&self) -> Result<(), String> {
        check_id("a device", &self.dev)?;
        for s in &self.sessions {
            check_id("a session", &s.id)?;
            if let Some(r) = &s.root {
                check_fork(r)?;
            }
        }
        for e in &self.entries {
            check_id("an entry", &e.id)?;
            if let Some(l) = &e.loc {
                check_id("a session", &l.session)?;
                if !l.parent.is_empty() {
                    check_id("an entry", &l.parent)?;
                }
            }
            if let Some(b) = &e.body {
                if b.get(crate::domain::entry::ENTRY_ID).and_then(Value::as_str) != Some(e.id.as_str()) {
                    return Err(format!("entry {:?}'s body names another entryId", e.id));
                }
            }
            if let Some(f) = &e.fork {
                check_fork(f)?;
            }
        }
        for p in &self.purged {
            check_id(p.kind.as_str(), &p.id)?;
        }
        for s in &self.settings {
            if !is_synced(&s.key) {
                return Err(format!("setting {:?} does not sync", s.key));
            }
        }
        Ok(())
    }

    pub fn stamp(&self) -> Stamp {
        Stamp::new(self.t, self.c, &self.dev)
    }

    /// The registers this operation sets, each at the operation's stamp.
    pub fn registers(&self) -> Registers {
        let s = self.stamp();
        Registers {
            sessions: self
                .sessions
                .iter()
                .map(|o| SessionRegs {
                    id: o.id.clone(),
                    created: o.created.clone(),
                    name: o.name.clone().map(|v| Reg::new(v, &s)),
                    pinned: o.pinned.map(|v| Reg::new(v, &s)),
                    created_at: o.created_at.map(|v| Reg::new(v, &s)),
                    trash: o.trash.clone().map(|v| Reg::new(v, &s)),
                    extra: o.extra.clone().map(|v| Reg::new(v, &s)),
                    root: o.root.clone().map(|v| Reg::new(v, &s)),
                })
                .collect(),
            entries: self
                .entries
                .iter()
                .map(|o| EntryRegs {
                    id: o.id.clone(),
                    created: o.created.clone(),
                    loc: o.loc.clone().map(|v| Reg::new(v, &s)),
                    body: o.body.clone().map(|v| Reg::new(v, &s)),
                    fork: o.fork.clone().map(|v| Reg::new(v, &s)),
                })
                .collect(),
            purged: self.purged.iter().map(|p| (p.kind, p.id.clone())).collect(),
            settings: self
                .settings
                .iter()
                .map(|o| SettingReg { key: o.key.clone(), value: Reg::new(o.value.clone(), &s) })
                .collect(),
        }
    }
}

/// Registers to merge: from one operation, or from a checkpoint.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Registers {
    pub sessions: Vec<SessionRegs>,
    pub entries: Vec<EntryRegs>,
    pub purged: Vec<(Kind, String)>,
    pub settings: Vec<SettingReg>,
}

/// A tombstone in a checkpoint.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Tombstone {
    pub kind: Kind,
    pub id: String,
    pub s: Stamp,
}

/// A checkpoint: the whole replicated state of one device, and the operations it holds
/// (`vector`: per device, the ranges of operation numbers applied).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StateDoc {
    pub v: u32,
    pub dev: String,
    pub sessions: Vec<SessionRegs>,
    pub entries: Vec<EntryRegs>,
    pub settings: Vec<SettingReg>,
    pub purged: Vec<Tombstone>,
    pub vector: BTreeMap<String, Vec<(u64, u64)>>,
}

impl StateDoc {
    /// Parse and check a checkpoint of device `dev`.
    pub fn parse(text: &str, dev: &str) -> Result<StateDoc, String> {
        let doc: StateDoc =
            serde_json::from_str(text).map_err(|e| format!("a checkpoint does not parse: {e}"))?;
        if doc.v != OP_VERSION {
            return Err(format!("a checkpoint of format {} (this host reads {OP_VERSION})", doc.v));
        }
        if doc.dev != dev {
            return Err(format!("a checkpoint of device {:?} in the files of {dev:?}", doc.dev));
        }
        // the same checks as an operation's, on the registers as one operation would carry them
        let as_op = Op {
            v: OP_VERSION,
            dev: doc.dev.clone(),
            seq: 1,
            t: 0,
            c: 0,
            sessions: doc
                .sessions
                .iter()
                .map(|s| SessionOp {
                    id: s.id.clone(),
                    root: s.root.as_ref().map(|r| r.v.clone()),
                    ..Default::default()
                })
                .collect(),
            entries: doc
                .entries
                .iter()
                .map(|e| EntryOp {
                    id: e.id.clone(),
                    created: None,
                    loc: e.loc.as_ref().map(|r| r.v.clone()),
                    body: e.body.as_ref().map(|r| r.v.clone()),
                    fork: e.fork.as_ref().map(|r| r.v.clone()),
                })
                .collect(),
            purged: doc.purged.iter().map(|t| Purged { kind: t.kind, id: t.id.clone() }).collect(),
            settings: doc.settings.iter().map(|s| SettingOp { key: s.key.clone(), value: None }).collect(),
        };
        as_op.check()?;
        Ok(doc)
    }

    pub fn registers(&self) -> Registers {
        Registers {
            sessions: self.sessions.clone(),
            entries: self.entries.clone(),
            purged: self.purged.iter().map(|t| (t.kind, t.id.clone())).collect(),
            settings: self.settings.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn op() -> Op {
        Op {
            v: OP_VERSION,
            dev: "dev-a".into(),
            seq: 3,
            t: 1_000,
            c: 2,
            sessions: vec![SessionOp {
                id: "s".into(),
                trash: Some(None),
                name: Some(Name { name: "Chat".into(), auto: true }),
                ..Default::default()
            }],
            entries: vec![EntryOp {
                id: "e".into(),
                created: Some(Stamp::new(999, 0, "dev-a")),
                loc: Some(Loc { session: "s".into(), parent: String::new() }),
                body: Some(json!({"role": "user", "content": "hi", "entryId": "e"})),
                fork: None,
            }],
            purged: vec![Purged { kind: Kind::Entry, id: "gone".into() }],
            settings: vec![
                SettingOp { key: "systemPrompt".into(), value: Some(Value::Null) },
                SettingOp { key: "trashDays".into(), value: None },
            ],
        }
    }

    #[test]
    fn an_operation_round_trips_and_keeps_null_apart_from_absent() {
        let o = op();
        let text = serde_json::to_string(&o).unwrap();
        let back = Op::parse(&text, "dev-a").unwrap();
        assert_eq!(back, o);
        assert_eq!(back.sessions[0].trash, Some(None), "a restore is a value");
        assert_eq!(back.sessions[0].extra, None, "extra was not set");
        assert_eq!(back.settings[0].value, Some(Value::Null), "a setting set to null");
        assert_eq!(back.settings[1].value, None, "a setting removed");
        let r = back.registers();
        assert_eq!(r.sessions[0].name.as_ref().unwrap().s, Stamp::new(1_000, 2, "dev-a"));
        assert_eq!(r.entries[0].created, Some(Stamp::new(999, 0, "dev-a")));
    }

    #[test]
    fn foreign_or_malformed_operations_are_refused() {
        let text = serde_json::to_string(&op()).unwrap();
        assert!(Op::parse(&text, "dev-b").unwrap_err().contains("device"));
        let mut o = op();
        o.v = 2;
        assert!(Op::parse(&serde_json::to_string(&o).unwrap(), "dev-a").unwrap_err().contains("format"));
        let mut o = op();
        o.entries[0].body = Some(json!({"entryId": "other"}));
        assert!(Op::parse(&serde_json::to_string(&o).unwrap(), "dev-a").is_err());
        let mut o = op();
        o.settings.push(SettingOp { key: "providers".into(), value: Some(json!([])) });
        assert!(Op::parse(&serde_json::to_string(&o).unwrap(), "dev-a")
            .unwrap_err()
            .contains("does not sync"));
        let mut o = op();
        o.entries[0].id = "x".repeat(200);
        assert!(Op::parse(&serde_json::to_string(&o).unwrap(), "dev-a").is_err());
        let mut o = op();
        o.sessions[0].root = Some(Fork { versions: vec!["a".into()], chosen: 1 });
        assert!(Op::parse(&serde_json::to_string(&o).unwrap(), "dev-a").is_err());
        assert!(Op::parse("{\"v\":1}", "dev-a").is_err());
    }
}
