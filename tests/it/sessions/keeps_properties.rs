//! Keepsake keeps, as a property (docs/keeps.md): over random sequences of what a person does —
//! send, attach a large page, edit & resend, regenerate, switch versions, delete an entry, clear
//! from a point, new chat, load, delete a session, clear all, lower the cap, import a dump twice,
//! restore from the trash, purge, and days passing — every entry the host ever acknowledged is, after
//! every step, somewhere the user can reach it: the live chat, another version, a session, or the
//! trash. Only an explicit purge, or the expiry of a trash item older than `trashDays`, removes
//! one; nothing removed ever comes back. The clock is the store's injected clock.
//!
//! Runs against the library's `Store` on a real SQLite file (the same code the binary serves).
//! Sizes: `KEEPSAKE_KEEPS_SEQUENCES` (default 24, 200 with `KEEPSAKE_LONG=1`) sequences of
//! `KEEPSAKE_KEEPS_STEPS` (default 40, 120 long) steps; `KEEPSAKE_SEED` replays one run.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use crate::harness::{size, Rng};
use keepsake_host::domain::attach::Ctx;
use keepsake_host::domain::import::SettingsMode;
use keepsake_host::domain::new_entry::NewEntry;
use keepsake_host::store::{AttachArgs, ExportFormat, ImportOptions, Store};
use serde_json::{json, Value};

fn entry(v: Value) -> NewEntry {
    NewEntry::from_value(v).unwrap()
}

const DAY: i64 = 24 * 60 * 60 * 1000;

/// The markers of every entry of an export document: its sessions' entries and every other
/// version's (names are not entries: a name a removed message gave is renamed, but a name the
/// user gave stays theirs).
fn entry_markers(doc: &Value, out: &mut BTreeSet<u64>) {
    for s in doc["sessions"].as_array().into_iter().flatten() {
        let versions = s["versions"].as_array().into_iter().flatten();
        let others = versions.flat_map(|f| f["others"].as_array().into_iter().flatten());
        let lists = std::iter::once(&s["entries"]).chain(others.map(|o| &o["entries"]));
        for e in lists.flat_map(|l| l.as_array().into_iter().flatten()) {
            markers_in(&e["content"].to_string(), out);
        }
    }
}

/// The markers of every entry text the sequence made are `⟦n⟧`: find them in any text.
fn markers_in(text: &str, out: &mut BTreeSet<u64>) {
    let mut rest = text;
    while let Some(i) = rest.find('⟦') {
        rest = &rest[i + '⟦'.len_utf8()..];
        if let Some(j) = rest.find('⟧') {
            if let Ok(n) = rest[..j].parse() {
                out.insert(n);
            }
            rest = &rest[j..];
        }
    }
}

/// Everything the user can reach through the product's own read paths: every session in the
/// drawer and every trash item, exported whole (chosen path and every other version).
fn reachable(s: &mut Store) -> BTreeMap<u64, &'static str> {
    let mut out = BTreeMap::new();
    let drawer: Vec<String> =
        s.sessions_list(None, None, None).unwrap().rows().into_iter().map(|r| r.id).collect();
    let trash: Vec<String> = s.trash_list().unwrap()["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["id"].as_str().unwrap().to_owned())
        .collect();
    for (ids, place) in [(drawer, "session"), (trash, "trash")] {
        if ids.is_empty() {
            continue;
        }
        let doc = s.sessions_export(&ids, ExportFormat::Json).unwrap();
        let doc: Value = serde_json::from_str(doc["text"].as_str().unwrap()).unwrap();
        let mut found = BTreeSet::new();
        entry_markers(&doc, &mut found);
        for m in found {
            out.entry(m).or_insert(place);
        }
    }
    // the live window is a view of its session: it can only show what a session holds
    let live = s.history_get(keepsake_host::store::Page { from: 0, limit: None, inline: false }).unwrap();
    let mut shown = BTreeSet::new();
    markers_in(&live["entries"].to_string(), &mut shown);
    for m in shown {
        assert!(out.contains_key(&m), "⟦{m}⟧ is shown live but in no session");
    }
    out
}

/// splitmix64's finaliser: spreads every bit of `x` over the result.
fn mix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

struct Run {
    s: Store,
    rng: Rng,
    next: u64,
    /// Markers acknowledged and not yet destroyed by a purge or an expiry.
    expected: BTreeSet<u64>,
    /// Markers destroyed (they must never come back).
    destroyed: BTreeSet<u64>,
    clock: Arc<AtomicI64>,
    log: Vec<(&'static str, String)>,
    imports: u64,
    /// The seed that replays the whole test run (`KEEPSAKE_SEED`).
    seed: u64,
}

impl Run {
    fn marker(&mut self) -> String {
        self.next += 1;
        format!("⟦{}⟧", self.next)
    }

    fn ack(&mut self, text: &str) {
        markers_in(text, &mut self.expected);
    }

    fn live(&mut self) -> Vec<Value> {
        let g =
            self.s.history_get(keepsake_host::store::Page { from: 0, limit: None, inline: false }).unwrap();
        g["entries"].as_array().unwrap().clone()
    }

    /// Uniform in `lo..=hi`; each xorshift output is mixed first (its low bits alone, drawn back
    /// to back for small ranges, follow each other too closely).
    fn draw(&mut self, lo: u64, hi: u64) -> u64 {
        lo + mix(self.rng.next_u64()) % (hi - lo + 1)
    }

    fn pick(&mut self, n: usize) -> usize {
        self.draw(0, n as u64 - 1) as usize
    }

    fn sessions(&mut self) -> Vec<String> {
        self.s.sessions_list(None, None, None).unwrap().rows().into_iter().map(|r| r.id).collect()
    }

    fn trash_items(&mut self) -> Vec<Value> {
        self.s.trash_list().unwrap()["items"].as_array().unwrap().clone()
    }

    /// The markers a trash item holds (read before it is purged).
    fn markers_of(&mut self, id: &str) -> BTreeSet<u64> {
        let doc = self.s.sessions_export(&[id.to_owned()], ExportFormat::Json).unwrap();
        let doc: Value = serde_json::from_str(doc["text"].as_str().unwrap()).unwrap();
        let mut m = BTreeSet::new();
        entry_markers(&doc, &mut m);
        m
    }

    /// Append a plain entry to the live chat and count its text as acknowledged.
    fn append_acked(&mut self, role: &str, text: &str) {
        self.s
            .history_append(entry(json!({"role": role, "content": text})), false, false, None, None)
            .unwrap();
        self.ack(text);
    }

    fn destroy(&mut self, gone: BTreeSet<u64>) {
        for m in gone {
            self.expected.remove(&m);
            self.destroyed.insert(m);
        }
    }

    fn step(&mut self) {
        let live = self.live();
        let action = self.draw(0, 16);
        match action {
            0..=2 => {
                let (q, a) = (self.marker(), self.marker());
                let q = format!("question {q}");
                self.append_acked("user", &q);
                let a = format!("answer {a}");
                self.append_acked("assistant", &a);
                self.log.push(("send", String::new()));
            }
            3 => {
                let m = self.marker();
                let body = format!("{m} {}", "page text ".repeat(30_001));
                let ctx: Ctx = serde_json::from_value(
                    json!({"url": "https://p.example/", "title": "Page", "mode": "full", "body": body}),
                )
                .unwrap();
                let a = AttachArgs {
                    ctx,
                    images: Vec::new(),
                    placement_end: false,
                    summary_source: None,
                    paper: false,
                    video_src: None,
                    fallback_name: None,
                };
                self.s.history_attach(a, None).unwrap();
                self.ack(&m);
                self.log.push(("attach a 300K page", String::new()));
            }
            4 => {
                // edit & resend a user turn
                let users: Vec<usize> =
                    live.iter().enumerate().filter(|(_, e)| e["role"] == "user").map(|(i, _)| i).collect();
                if users.is_empty() {
                    return;
                }
                let i = users[self.pick(users.len())];
                let (q, a) = (self.marker(), self.marker());
                let q = format!("edited {q}");
                self.s
                    .history_branch(i as u64, entry(json!({"role": "user", "content": q})), false, None)
                    .unwrap();
                self.ack(&q);
                let a = format!("reply {a}");
                self.append_acked("assistant", &a);
                self.log.push(("edit & resend", i.to_string()));
            }
            5 => {
                // regenerate the last reply
                let Some(i) = live.iter().rposition(|e| e["role"] == "assistant") else { return };
                let a = format!("regenerated {}", self.marker());
                self.s
                    .history_branch(i as u64, entry(json!({"role": "assistant", "content": a})), false, None)
                    .unwrap();
                self.ack(&a);
                self.log.push(("regenerate", i.to_string()));
            }
            6 => {
                let g = self
                    .s
                    .history_get(keepsake_host::store::Page { from: 0, limit: None, inline: false })
                    .unwrap();
                let forks = g["forks"].as_array().unwrap().clone();
                if forks.is_empty() {
                    return;
                }
                let f = &forks[self.pick(forks.len())];
                let v = self.draw(1, f["versions"].as_u64().unwrap());
                self.s.history_switch_version(f["forkEntryId"].as_str().unwrap(), v, None).unwrap();
                self.log.push(("switch version", v.to_string()));
            }
            7 => {
                if live.is_empty() {
                    return;
                }
                let i = self.pick(live.len());
                self.s.history_remove_at(i as u64, None).unwrap();
                self.log.push(("delete entry", i.to_string()));
            }
            8 => {
                let i = if live.is_empty() { 0 } else { self.pick(live.len()) };
                self.s.history_truncate_from(i as u64, None).unwrap();
                self.log.push(("clear from", i.to_string()));
            }
            9 => {
                let save_current = self.draw(0, 1) == 1;
                self.s.history_clear(save_current, None).unwrap();
                self.log.push(("new chat", String::new()));
            }
            10 => {
                let ids = self.sessions();
                if ids.is_empty() {
                    return;
                }
                let id = ids[self.pick(ids.len())].clone();
                self.s.sessions_load(&id, true, None).unwrap();
                self.log.push(("load", id));
            }
            11 => {
                let ids = self.sessions();
                if ids.is_empty() {
                    return;
                }
                let id = ids[self.pick(ids.len())].clone();
                self.s.sessions_delete(&id, None).unwrap();
                self.log.push(("delete session", id));
            }
            12 => {
                if self.draw(0, 3) == 0 {
                    self.s.sessions_clear_all(None).unwrap();
                    self.log.push(("clear all", String::new()));
                } else {
                    let cap = self.draw(0, 4);
                    let mut m = serde_json::Map::new();
                    m.insert("maxSessions".into(), json!(cap));
                    self.s.settings_set(&m, None).unwrap();
                    self.log.push(("lower the cap", cap.to_string()));
                }
            }
            13 => {
                // import a browser dump twice (its active session and live history diverge)
                self.imports += 1;
                let (a, b, c) = (self.marker(), self.marker(), self.marker());
                let sid = format!("dump-{}", self.imports);
                let doc = json!({
                    "activeSessionId": sid,
                    "savedSessions": [{"id": sid, "name": "Dump"}],
                    format!("session_{sid}"): [{"role": "user", "content": format!("dump q {a}")},
                                               {"role": "assistant", "content": format!("dump old {b}")}],
                    "history": [{"role": "user", "content": format!("dump q {a}")},
                                {"role": "assistant", "content": format!("dump new {c}")}],
                    "maxSessions": 1,
                });
                for _ in 0..2 {
                    self.s
                        .storage_import(&doc, ImportOptions { settings: SettingsMode::None }, None)
                        .unwrap();
                }
                self.ack(&format!("{a}{b}{c}"));
                self.log.push(("import twice", sid));
            }
            14 => {
                let items = self.trash_items();
                if items.is_empty() {
                    return;
                }
                let id = items[self.pick(items.len())]["id"].as_str().unwrap().to_owned();
                if self.draw(0, 2) == 0 {
                    let gone = self.markers_of(&id);
                    self.s.trash_purge(Some(&id), None).unwrap();
                    self.destroy(gone);
                    self.log.push(("purge", id));
                } else {
                    self.s.trash_restore(&id, None).unwrap();
                    self.log.push(("restore", id));
                }
            }
            _ => {
                // days pass; the host's expiry runs
                let days = self.draw(0, 40) as i64;
                let now = self.clock.fetch_add(days * DAY, Ordering::SeqCst) + days * DAY;
                let cutoff = now - 30 * DAY;
                let mut gone = BTreeSet::new();
                for item in self.trash_items() {
                    if item["trashedAt"].as_i64().unwrap() < cutoff {
                        let id = item["id"].as_str().unwrap().to_owned();
                        gone.extend(self.markers_of(&id));
                    }
                }
                self.s.trash_expire(true).unwrap();
                // a marker in a purged item may live on elsewhere only if it was copied
                // (snapshots are not made here, so gone means gone)
                self.destroy(gone);
                self.log.push(("days pass", days.to_string()));
            }
        }
    }

    fn check(&mut self, seq: usize, step: usize) {
        let found = reachable(&mut self.s);
        for m in &self.expected {
            assert!(
                found.contains_key(m),
                "KEEPSAKE_SEED={} sequence {seq} step {step}: ⟦{m}⟧ was acknowledged and is nowhere; steps: {:?}",
                self.seed,
                self.log
            );
        }
        for m in found.keys() {
            assert!(
                !self.destroyed.contains(m),
                "KEEPSAKE_SEED={} sequence {seq} step {step}: ⟦{m}⟧ was purged and came back; steps: {:?}",
                self.seed,
                self.log
            );
            assert!(m <= &self.next, "sequence {seq} step {step}: ⟦{m}⟧ was never made");
        }
    }
}

#[test]
fn every_acknowledged_entry_stays_reachable_until_purged_or_expired() {
    let sequences = size("KEEPSAKE_KEEPS_SEQUENCES", 24, 200);
    let steps = size("KEEPSAKE_KEEPS_STEPS", 40, 120);
    let mut seeder = Rng::from_env();
    let seed = seeder.seed();
    let started = std::time::Instant::now();
    let mut total = 0;
    let mut kinds: BTreeMap<&'static str, usize> = BTreeMap::new();
    let only: Option<usize> = std::env::var("KEEPS_ONLY").ok().and_then(|v| v.parse().ok());
    for seq in 0..sequences {
        if only.is_some_and(|o| o != seq) {
            seeder.next_u64();
            continue;
        }
        let dir = tempfile::tempdir().unwrap();
        let mut s = Store::open(&dir.path().join("keepsake.db")).unwrap();
        let clock = Arc::new(AtomicI64::new(1_780_000_000_000));
        let c = Arc::clone(&clock);
        s.set_clock(Arc::new(move || c.load(Ordering::SeqCst)));
        let mut run = Run {
            s,
            // consecutive outputs of one xorshift stream start streams that are the same one
            // shifted by a step: mixed, each sequence gets a stream of its own
            rng: Rng::new(mix(seeder.next_u64())),
            next: 0,
            expected: BTreeSet::new(),
            destroyed: BTreeSet::new(),
            clock,
            log: Vec::new(),
            imports: 0,
            seed,
        };
        for step in 0..steps {
            run.step();
            // each step's clock moves a little, as time does
            run.clock.fetch_add(1_000, Ordering::SeqCst);
            run.check(seq, step);
            total += 1;
        }
        for (k, _) in &run.log {
            *kinds.entry(k).or_default() += 1;
        }
        run.s.close();
    }
    eprintln!(
        "keeps property: {sequences} sequences, {total} steps, seed {seed} (KEEPSAKE_SEED={seed} replays), {:.1} s; actions: {kinds:?}",
        started.elapsed().as_secs_f64()
    );
}
