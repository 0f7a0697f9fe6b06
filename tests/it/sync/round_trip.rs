//! Local rows → replicated state → rows again is the identity.

use std::sync::atomic::AtomicI64;
use std::sync::Arc;

use super::*;

#[test]
fn a_plain_chat_reaches_another_device() {
    let clock = Arc::new(AtomicI64::new(1_700_000_000_000));
    let mut a = Dev::new("dev-a", Arc::clone(&clock), 0);
    let mut b = Dev::new("dev-b", Arc::clone(&clock), 0);
    let mut folder = Folder::default();
    a.append("user", "hello");
    a.append("assistant", "hi there");
    let mut devs = [a, b];
    settle(&mut devs, &mut folder);
    let [mut a, mut b] = devs;
    let (da, db) = (dump(&mut a.s), dump(&mut b.s));
    assert_eq!(first_difference(&da, &db, ""), None);
    assert_eq!(da["drawer"].as_array().unwrap().len(), 1, "{da}");
}
