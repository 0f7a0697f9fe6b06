//! The Syncthing harness itself: two instances on loopback replicate files both ways, and a
//! paused connection holds them back until it resumes.

use std::time::{Duration, Instant};

use super::syncthing::{arrived, available, pair, wait_for};

#[test]
fn two_syncthing_instances_on_loopback_replicate_a_folder_both_ways() {
    if !available() {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let (da, db) = (t.path().join("a"), t.path().join("b"));
    let (a, b) = pair(&da, &db);
    let started = Instant::now();
    std::fs::write(da.join("from-a"), b"hello from a").unwrap();
    wait_for("from-a on b", Duration::from_secs(120), || {
        arrived(&db.join("from-a"), b"hello from a").then_some(())
    });
    let took = started.elapsed();
    std::fs::write(db.join("from-b"), b"hello from b").unwrap();
    wait_for("from-b on a", Duration::from_secs(120), || {
        arrived(&da.join("from-b"), b"hello from b").then_some(())
    });
    // paused: nothing passes; resumed: it does
    a.pause(&b);
    wait_for("the pause", Duration::from_secs(30), || (!a.connected(&b)).then_some(()));
    std::fs::write(da.join("while-paused"), b"x").unwrap();
    let saw_during_pause = arrived(&db.join("while-paused"), b"x");
    a.resume(&b);
    wait_for("while-paused on b", Duration::from_secs(180), || {
        arrived(&db.join("while-paused"), b"x").then_some(())
    });
    wait_for("a's view: b needs nothing", Duration::from_secs(60), || {
        (a.need_bytes(&b) == Some(0)).then_some(())
    });
    assert!(!saw_during_pause, "a file passed while the connection was paused");
    eprintln!("syncthing on loopback: a file written on a appeared on b after {took:?}");
}
