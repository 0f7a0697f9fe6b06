//! The transport end to end over a real folder with real databases (`Store` on temp SQLite files,
//! its replicated state behind the seam) and the in-memory secret store: writer, reader, setup
//! and engine together, on one machine and without a syncer (the folder is shared by path).

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use serde_json::{json, Value};

use super::engine::{Engine, Opener};
use super::layout::{list_device, Folder};
use super::reader::{FolderStatus, Reader};
use super::replica::{Device, Replica};
use super::seal::SyncKey;
use super::writer::Writer;
use super::{key, setup};
use crate::domain::import::hex;
use crate::domain::new_entry::NewEntry;
use crate::secrets::memory::MemoryStore;
use crate::store::Store;

struct Dev {
    s: Store,
    mem: Arc<MemoryStore>,
    dir: tempfile::TempDir,
}

fn open() -> Dev {
    let dir = tempfile::tempdir().unwrap();
    let mut s = Store::open(&dir.path().join("keepsake.db")).unwrap();
    let mem = Arc::new(MemoryStore::new());
    s.set_secret_store(mem.clone());
    Dev { s, mem, dir }
}

fn init(folder: &Path, name: &str) -> (Dev, String) {
    let mut d = open();
    let j = setup::init(&mut d.s, &*d.mem, folder, Some(name), 1).unwrap();
    (d, j.key_text)
}

fn join(folder: &Path, key: &str, name: &str) -> Dev {
    let mut d = open();
    setup::join(&mut d.s, &*d.mem, folder, key, Some(name), 2).unwrap();
    d
}

fn parts(d: &mut Dev) -> (Device, SyncKey) {
    let dev = Replica::sync_device(&mut d.s).unwrap().unwrap();
    let k = key::load(&*d.mem, &dev.key).unwrap();
    (dev, k)
}

fn flush(d: &mut Dev) -> usize {
    let (dev, k) = parts(d);
    let mut w = Writer::start(&mut d.s, &dev, &k, 10).unwrap();
    w.flush(&mut d.s, 10).unwrap()
}

fn look(d: &mut Dev) -> FolderStatus {
    let (dev, k) = parts(d);
    let mut rd = Reader::new(Folder::new(&dev.folder), &dev.id, k);
    rd.look(&mut d.s, true, 20, &mut |_| {}).unwrap()
}

fn say(d: &mut Dev, content: Value) {
    let e = NewEntry::from_value(json!({"role": "user", "content": content})).unwrap();
    d.s.history_append(e, false, false, None, None).unwrap();
}

/// Every entry of every chat in the drawer, as JSON text, sorted (with repeats, if any).
fn entries(d: &mut Dev) -> Vec<String> {
    let mut out = Vec::new();
    for row in d.s.sessions_list(None, None, None).unwrap().rows() {
        let s = d.s.sessions_get(&row.id, false, 0, None).unwrap();
        out.extend(s["entries"].as_array().unwrap().iter().map(|e| e["content"].to_string()));
    }
    out.sort();
    out
}

/// A PNG the image code accepts (1×1).
fn png() -> Vec<u8> {
    let mut b = Vec::new();
    image::DynamicImage::new_rgb8(2, 2)
        .write_to(&mut std::io::Cursor::new(&mut b), image::ImageFormat::Png)
        .unwrap();
    b
}

fn data_url(bytes: &[u8]) -> String {
    use base64::Engine as _;
    format!("data:image/png;base64,{}", base64::engine::general_purpose::STANDARD.encode(bytes))
}

fn age(p: &Path) {
    let f = std::fs::OpenOptions::new().write(true).open(p).unwrap();
    f.set_modified(SystemTime::now() - Duration::from_secs(3600)).unwrap();
}

#[test]
fn operations_and_pictures_reach_the_other_device_once() {
    let t = tempfile::tempdir().unwrap();
    let (mut a, k) = init(t.path(), "laptop");
    let mut b = join(t.path(), &k, "desk");
    let pic = png();
    let sha = hex(&<sha2::Sha256 as sha2::Digest>::digest(&pic));
    say(&mut a, json!("one"));
    say(
        &mut a,
        json!([{"type": "text", "text": "two"}, {"type": "image_url", "image_url": {"url": data_url(&pic)}}]),
    );
    assert!(flush(&mut a) > 0);
    assert_eq!(flush(&mut a), 0, "nothing sealed twice");
    let st = look(&mut b);
    assert!(st.applied_ops > 0);
    assert!(Replica::sync_has_blob(&mut b.s, &sha).unwrap(), "the picture arrived");
    let theirs = st.devices.iter().find(|d| !d.this_device).unwrap();
    assert_eq!((theirs.name.as_str(), theirs.applied, theirs.pending), ("laptop", 1, 0));
    assert_eq!(entries(&mut b), entries(&mut a));
    // a second look (and a second reader) applies nothing again
    assert_eq!(look(&mut b).applied_ops, 0);
    // and back
    say(&mut b, json!("three"));
    flush(&mut b);
    assert!(look(&mut a).applied_ops > 0);
    assert_eq!(entries(&mut a), entries(&mut b));
    assert_eq!(entries(&mut a).len(), 3, "{:?}", entries(&mut a));
}

#[test]
fn a_segment_written_but_not_marked_is_not_sealed_again() {
    let t = tempfile::tempdir().unwrap();
    let (mut a, k) = init(t.path(), "a");
    let mut b = join(t.path(), &k, "b");
    for i in 0..5 {
        say(&mut a, json!(format!("op {i}")));
    }
    // the database as it was before the seal: the kill came after the segment's rename and
    // before the mark committed
    let db = a.s.path().to_path_buf();
    let before = a.dir.path().join("before.db");
    crate::store::maintenance::backup_file(&db, &before).unwrap();
    flush(&mut a);
    let mem = a.mem.clone();
    let Dev { s, dir, .. } = a;
    s.close();
    for suffix in ["-wal", "-shm"] {
        let _ = std::fs::remove_file(crate::util::paths::sidecar(&db, suffix));
    }
    std::fs::copy(&before, &db).unwrap();
    let mut s = Store::open(&db).unwrap();
    s.set_secret_store(mem.clone());
    let mut a = Dev { s, mem, dir };
    assert!(Replica::sync_outbox_pending(&mut a.s).unwrap() > 0, "the outbox still holds them");
    say(&mut a, json!("after"));
    flush(&mut a);
    let (dev, k2) = parts(&mut a);
    let segs = list_device(&Folder::new(t.path()).device_dir(&dev.id)).unwrap().segments;
    assert_eq!(segs, vec![1, 2]);
    // segment 2 holds only what came after segment 1
    let p = Folder::new(t.path()).segment(&dev.id, 2);
    let bytes = super::folder::read_sealed(
        &p,
        super::seal::Kind::Segment,
        &super::layout::context(super::seal::Kind::Segment, &dev.id, 2),
        &k2,
    )
    .unwrap();
    let seg: super::payload::Segment = super::payload::from_bytes(&bytes).unwrap();
    let one = super::folder::read_sealed(
        &Folder::new(t.path()).segment(&dev.id, 1),
        super::seal::Kind::Segment,
        &super::layout::context(super::seal::Kind::Segment, &dev.id, 1),
        &k2,
    )
    .unwrap();
    let one: super::payload::Segment = super::payload::from_bytes(&one).unwrap();
    assert_eq!(seg.first_op, one.last_op + 1, "no operation sealed twice");
    look(&mut b);
    assert_eq!(entries(&mut b), entries(&mut a));
}

#[test]
fn a_segment_of_our_own_damaged_in_the_folder_is_made_good_by_a_checkpoint() {
    let t = tempfile::tempdir().unwrap();
    let (mut a, k) = init(t.path(), "a");
    say(&mut a, json!("one"));
    flush(&mut a);
    let dev = Replica::sync_device(&mut a.s).unwrap().unwrap();
    std::fs::write(Folder::new(t.path()).segment(&dev.id, 1), b"KSYNC1 torn").unwrap();
    say(&mut a, json!("two"));
    assert!(flush(&mut a) > 0, "the writer goes on");
    let files = list_device(&Folder::new(t.path()).device_dir(&dev.id)).unwrap();
    assert_eq!(
        (files.segments, files.checkpoints),
        (vec![1, 2], vec![2]),
        "a checkpoint makes segment 1 good"
    );
    let mut b = join(t.path(), &k, "b");
    let st = look(&mut b);
    assert_eq!(
        entries(&mut b),
        entries(&mut a),
        "what the damaged segment held arrived through the checkpoint"
    );
    assert!(st.problems.is_empty(), "{:?}", st.problems);
}

#[test]
fn a_flipped_byte_is_refused_and_reported_and_the_rest_applies() {
    let t = tempfile::tempdir().unwrap();
    let (mut a, k) = init(t.path(), "a");
    let mut b = join(t.path(), &k, "b");
    say(&mut a, json!("first"));
    flush(&mut a);
    say(&mut a, json!("second"));
    flush(&mut a);
    let dev = Replica::sync_device(&mut a.s).unwrap().unwrap();
    let p = Folder::new(t.path()).segment(&dev.id, 1);
    let mut bytes = std::fs::read(&p).unwrap();
    bytes[60] ^= 0x20;
    std::fs::write(&p, &bytes).unwrap();
    // still changing (just written): not reported yet, not applied; segment 2 is
    let st = look(&mut b);
    assert!(st.problems.is_empty(), "{:?}", st.problems);
    assert_eq!(st.applied_segments, 1);
    age(&p);
    let st = look(&mut b);
    assert_eq!(st.problems.len(), 1, "{:?}", st.problems);
    assert_eq!(st.problems[0].kind, "foreign");
    assert!(st.problems[0].file.as_deref().unwrap().ends_with("000000000001.seg"));
    // the intact file comes back (the syncer fixed it): applied, the problem goes
    bytes[60] ^= 0x20;
    std::fs::write(&p, &bytes).unwrap();
    let st = look(&mut b);
    assert!(st.problems.is_empty());
    assert_eq!(entries(&mut b), entries(&mut a));
}

#[test]
fn a_segment_waits_for_its_pictures() {
    let t = tempfile::tempdir().unwrap();
    let (mut a, k) = init(t.path(), "a");
    let mut b = join(t.path(), &k, "b");
    let pic = png();
    let sha = hex(&<sha2::Sha256 as sha2::Digest>::digest(&pic));
    say(&mut a, json!([{"type": "image_url", "image_url": {"url": data_url(&pic)}}]));
    flush(&mut a);
    let (_, key) = parts(&mut a);
    let blob = Folder::new(t.path()).blob(&key.blob_name(&sha));
    let kept = std::fs::read(&blob).unwrap();
    std::fs::remove_file(&blob).unwrap();
    let st = look(&mut b);
    assert_eq!(st.applied_ops, 0);
    assert_eq!(st.problems[0].kind, "pictures", "{:?}", st.problems);
    assert!(st.problems[0].detail.contains("1 picture from a"), "{}", st.problems[0].detail);
    std::fs::write(&blob, kept).unwrap();
    let st = look(&mut b);
    assert!(st.applied_ops > 0);
    assert!(st.problems.is_empty());
    assert_eq!(entries(&mut b), entries(&mut a));
}

#[test]
fn a_device_with_another_key_is_one_problem() {
    let t = tempfile::tempdir().unwrap();
    let other = tempfile::tempdir().unwrap();
    let (_a, k) = init(t.path(), "a");
    let (mut x, _) = init(other.path(), "stranger");
    say(&mut x, json!("x"));
    flush(&mut x);
    // the stranger's folder copied into ours
    let xd = Replica::sync_device(&mut x.s).unwrap().unwrap().id;
    let from = Folder::new(other.path()).device_dir(&xd);
    let to = Folder::new(t.path()).device_dir(&xd);
    std::fs::create_dir_all(&to).unwrap();
    for e in std::fs::read_dir(&from).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        age(&to.join(e.file_name()));
    }
    let mut b = join(t.path(), &k, "b");
    let st = look(&mut b);
    assert_eq!(st.problems.len(), 1, "{:?}", st.problems);
    assert_eq!(st.problems[0].kind, "foreign");
    assert!(st.problems[0].file.as_deref().unwrap().ends_with("/device"));
    assert!(entries(&mut b).is_empty());
}

fn walk(p: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(p).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_dir() {
            out.extend(walk(&e.path()));
        } else {
            out.push((e.path().display().to_string(), std::fs::read(e.path()).unwrap()));
        }
    }
    out.sort();
    out
}

#[test]
fn a_wrong_key_at_join_changes_nothing() {
    let t = tempfile::tempdir().unwrap();
    let (_a, _k) = init(t.path(), "a");
    let before = walk(t.path());
    let mut d = open();
    say(&mut d, json!("mine"));
    let wrong = key::to_text(&SyncKey::random());
    let e = setup::join(&mut d.s, &*d.mem, t.path(), &wrong, None, 5).unwrap_err().to_string();
    assert!(e.contains("not the key of the sync folder") && e.contains("nothing was changed"), "{e}");
    assert_eq!(walk(t.path()), before);
    assert!(Replica::sync_device(&mut d.s).unwrap().is_none());
    assert!(d.s.sync_folder().unwrap().is_none());
    assert!(d.mem.accounts().is_empty());
    assert_eq!(Replica::sync_outbox_pending(&mut d.s).unwrap(), 0, "nothing recorded");
    let e = setup::join(&mut d.s, &*d.mem, t.path(), "not-a-key", None, 5).unwrap_err().to_string();
    assert!(e.contains("52 letters"), "{e}");
    let empty = tempfile::tempdir().unwrap();
    let e = setup::join(&mut d.s, &*d.mem, empty.path(), &wrong, None, 5).unwrap_err().to_string();
    assert!(e.contains("holds no Keepsake sync folder"), "{e}");
    // init on a folder that has one is refused too
    let e = setup::init(&mut d.s, &*d.mem, t.path(), None, 5).unwrap_err().to_string();
    assert!(e.contains("already holds a Keepsake sync folder"), "{e}");
    assert_eq!(walk(t.path()), before);
}

#[test]
fn leave_removes_only_this_devices_files_when_asked_and_keeps_the_chats() {
    let t = tempfile::tempdir().unwrap();
    let (mut a, k) = init(t.path(), "a");
    let mut b = join(t.path(), &k, "b");
    say(&mut a, json!("from a"));
    flush(&mut a);
    say(&mut b, json!("from b"));
    flush(&mut b);
    look(&mut b);
    let bid = Replica::sync_device(&mut b.s).unwrap().unwrap().id;
    let left = setup::leave(&mut b.s, &*b.mem, true).unwrap();
    assert_eq!(left.removed, 2, "a segment and the device file");
    assert!(!Folder::new(t.path()).device_dir(&bid).exists());
    assert!(Replica::sync_device(&mut b.s).unwrap().is_none());
    assert!(b.s.sync_folder().unwrap().is_none());
    assert!(b.mem.accounts().is_empty(), "the key left the secret store");
    assert_eq!(entries(&mut b).len(), 2, "the chats stay");
    assert_eq!(look(&mut a).devices.len(), 1);
    let e = setup::leave(&mut b.s, &*b.mem, false).unwrap_err().to_string();
    assert!(e.contains("does not sync"));
}

#[test]
fn a_new_device_starts_from_a_checkpoint_and_the_old_segments_fold() {
    let t = tempfile::tempdir().unwrap();
    let (mut a, k) = init(t.path(), "a");
    let (dev, key) = parts(&mut a);
    let mut w = Writer::start(&mut a.s, &dev, &key, 1).unwrap();
    for round in 0..3 {
        for i in 0..3 {
            say(&mut a, json!(format!("{round}-{i}")));
            w.flush(&mut a.s, 1).unwrap();
        }
        w.checkpoint(&mut a.s, 1).unwrap();
    }
    say(&mut a, json!("last"));
    w.flush(&mut a.s, 1).unwrap();
    let files = list_device(&Folder::new(t.path()).device_dir(&dev.id)).unwrap();
    // checkpoints at 3, 6, 9: the newest two kept, segments up to 6 folded
    assert_eq!(files.checkpoints, vec![6, 9]);
    assert_eq!(files.segments, vec![7, 8, 9, 10]);
    let mut c = join(t.path(), &k, "c");
    let st = look(&mut c);
    assert_eq!(entries(&mut c), entries(&mut a));
    assert_eq!(entries(&mut c).len(), 10);
    assert_eq!(st.applied_segments, 2, "the checkpoint and segment 10 only");
}

fn wait(what: &str, mut f: impl FnMut() -> bool) -> Duration {
    let t0 = std::time::Instant::now();
    while !f() {
        assert!(t0.elapsed() < Duration::from_secs(30), "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
    t0.elapsed()
}

#[test]
fn the_engine_writes_within_a_second_applies_pauses_and_stops() {
    let t = tempfile::tempdir().unwrap();
    let folder = t.path().join("folder");
    let (mut a, k) = init(&folder, "a");
    let mut b = join(&folder, &k, "b");
    let start = |d: &Dev| {
        let db = d.s.path().to_path_buf();
        let path = db.clone();
        let open: Opener = Arc::new(move || {
            Store::open_more(&path, "engine-test".into())
                .map(|s| Box::new(s) as Box<dyn Replica + Send>)
                .map_err(|e| e.to_string())
        });
        Engine::start(&db, open, d.mem.clone())
    };
    let (ea, eb) = (start(&a), start(&b));
    say(&mut a, json!("hello"));
    let took = wait("the segment", || Replica::sync_outbox_pending(&mut a.s).unwrap() == 0);
    assert!(took < Duration::from_secs(10), "{took:?}");
    eprintln!("engine: a write sealed into a segment after {took:?} (target 1 s)");
    let applied = wait("b applies it", || entries(&mut b).contains(&"\"hello\"".to_string()));
    eprintln!("engine: the other engine applied it {applied:?} later");
    // a second engine on the same database waits for the lock: nothing sealed twice
    let a2 = start(&a);
    Replica::sync_set_paused(&mut b.s, true).unwrap();
    say(&mut a, json!("while b is paused"));
    wait("the segment", || Replica::sync_outbox_pending(&mut a.s).unwrap() == 0);
    std::thread::sleep(Duration::from_millis(300));
    assert!(!entries(&mut b).iter().any(|e| e.contains("paused")), "applied while paused");
    Replica::sync_set_paused(&mut b.s, false).unwrap();
    let resumed = wait("b applies it after resume", || entries(&mut b).iter().any(|e| e.contains("paused")));
    eprintln!("engine: applied {resumed:?} after resume");
    assert_eq!(entries(&mut b), entries(&mut a));
    let (dev, _) = parts(&mut a);
    let segs = list_device(&Folder::new(&folder).device_dir(&dev.id)).unwrap().segments;
    assert_eq!(segs.len(), 2, "one segment per write, none twice: {segs:?}");
    // idle, the reader looks on its timer only: its own reads of the folder do not wake it
    let looked = || super::engine::shared_for(b.s.path()).and_then(|s| s.snapshot()).map(|s| s.at);
    let (first, t1) = (looked(), std::time::Instant::now());
    let mut changes = 0;
    let mut last = first;
    while t1.elapsed() < Duration::from_millis(1500) {
        if looked() != last {
            changes += 1;
            last = looked();
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(changes <= 1, "the idle reader looked {changes} times in 1.5 s");
    let t0 = std::time::Instant::now();
    for e in [ea, eb, a2] {
        e.stop();
    }
    eprintln!("engine: three engines stopped in {:?}", t0.elapsed());
    assert!(t0.elapsed() < Duration::from_secs(10), "stop took {:?}", t0.elapsed());
}
