//! A session's entries as a tree, both ways (docs/sync.md "From the state to the chat"): the
//! local tables hold a chosen path and branches (storage-model §12.4: at each fork one version is
//! on the chosen path, the others are branches numbered 1…n); the replicated state holds each
//! entry's parent and, at a fork, the versions in their order and the chosen one. [`derive`] reads
//! the tree off the local rows; [`materialize`] lays a tree out as rows again, exactly as the
//! store writes them: local → state → local is the identity.
//!
//! What the state may hold that one device never makes, and how it is laid out:
//! - children no fork register names (two devices continued one chat while apart): versions in
//!   the order they were made, the latest chosen (a later continuation wins, as Regenerate does);
//! - an orphan, whose parent is not in the session (it left for the trash, or was purged, on
//!   another device): the orphans follow the end of the chosen path as one chain, oldest first;
//! - a cycle of parents (two devices moved entries under each other): broken at its oldest entry,
//!   which then follows the end of the chosen path like an orphan. Nothing is ever dropped.

use std::collections::{BTreeMap, BTreeSet};

use super::regs::Fork;
use super::stamp::Stamp;

/// A session's entries as the local tables hold them (entryIds).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Layout {
    /// The chosen path, positions 0…n−1.
    pub path: Vec<String>,
    /// The other versions: `(fork key, version number)` → its entries in order (the fork key is
    /// the entryId of the entry before the fork, `""` at the start of the chat).
    pub branches: BTreeMap<(String, u32), Vec<String>>,
    /// Each fork: key → `(chosen, versions)`.
    pub forks: BTreeMap<String, (u32, u32)>,
}

impl Layout {
    /// Every entryId the layout holds.
    pub fn ids(&self) -> impl Iterator<Item = &String> {
        self.path.iter().chain(self.branches.values().flatten())
    }
}

/// A session's tree: each entry's parent (`""`: the first of the chat) and, for each node with a
/// fork (`""`: the start), its versions.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Tree {
    pub parent: BTreeMap<String, String>,
    pub forks: BTreeMap<String, Fork>,
}

impl Tree {
    /// Each node's children, in the order of the given `created` stamps (then by id).
    pub fn children(&self, created: &dyn Fn(&str) -> Option<Stamp>) -> BTreeMap<String, Vec<String>> {
        let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (id, p) in &self.parent {
            out.entry(p.clone()).or_default().push(id.clone());
        }
        for kids in out.values_mut() {
            sort_by_created(kids, created);
        }
        out
    }
}

fn sort_by_created(ids: &mut [String], created: &dyn Fn(&str) -> Option<Stamp>) {
    ids.sort_by(|a, b| (created(a), a).cmp(&(created(b), b)));
}

/// The tree the local rows hold. A fork row whose key is in none of the session's runs has no
/// place in a tree and is left out.
pub fn derive(layout: &Layout) -> Tree {
    let mut tree = Tree::default();
    // each run (the chosen path, each branch) with the node it starts after
    let mut runs: Vec<(&str, &[String])> = vec![("", &layout.path)];
    for ((key, _), run) in &layout.branches {
        runs.push((key, run));
    }
    let mut next: BTreeMap<&str, Option<&str>> = BTreeMap::new();
    for (start, run) in &runs {
        let mut prev = *start;
        for id in run.iter() {
            tree.parent.insert(id.clone(), prev.to_owned());
            prev = id;
        }
        for (i, id) in run.iter().enumerate() {
            next.insert(id, run.get(i + 1).map(String::as_str));
        }
    }
    for (key, &(chosen, count)) in &layout.forks {
        let continuation = if key.is_empty() {
            Some(layout.path.first().map(String::as_str))
        } else {
            next.get(key.as_str()).copied()
        };
        let Some(continuation) = continuation else { continue };
        let versions = (1..=count)
            .map(|v| {
                if v == chosen {
                    continuation.unwrap_or("").to_owned()
                } else {
                    layout
                        .branches
                        .get(&(key.clone(), v))
                        .and_then(|r| r.first())
                        .cloned()
                        .unwrap_or_default()
                }
            })
            .collect();
        tree.forks.insert(key.clone(), Fork { versions, chosen: chosen.saturating_sub(1) as usize });
    }
    tree
}

/// The versions after a node as the state gives them: the fork register's order (versions whose
/// entry is no longer a child there dropped, empty versions kept), then children it does not
/// name in the order they were made; the chosen one is the register's when it is still there,
/// else the latest made. `children` are in the order they were made. `None`: nothing follows.
pub fn effective(reg: Option<&Fork>, children: &[String]) -> (Vec<String>, Option<usize>) {
    let Some(r) = reg else {
        let n = children.len();
        return (children.to_vec(), n.checked_sub(1));
    };
    let kids: BTreeSet<&str> = children.iter().map(String::as_str).collect();
    let mut seen = BTreeSet::new();
    let mut slots = Vec::new();
    let mut chosen = None;
    for (i, v) in r.versions.iter().enumerate() {
        let keep = v.is_empty() || (kids.contains(v.as_str()) && seen.insert(v.as_str()));
        if keep {
            if i == r.chosen {
                chosen = Some(slots.len());
            }
            slots.push(v.clone());
        }
    }
    for c in children {
        if !seen.contains(c.as_str()) {
            slots.push(c.clone());
        }
    }
    if chosen.is_none() {
        chosen = match children.last() {
            Some(latest) => slots.iter().position(|s| s == latest),
            None => (!slots.is_empty()).then_some(0),
        };
    }
    (slots, chosen)
}

/// Two forks that lay out the same way: both with two versions or more and equal, or both with
/// at most one and the same continuation.
pub fn same_fork(a: &(Vec<String>, Option<usize>), b: &(Vec<String>, Option<usize>)) -> bool {
    let single = |f: &(Vec<String>, Option<usize>)| -> Option<String> {
        f.1.and_then(|i| f.0.get(i)).filter(|s| !s.is_empty()).cloned()
    };
    match (a.0.len() >= 2, b.0.len() >= 2) {
        (true, true) => a == b,
        (false, false) => single(a) == single(b),
        _ => false,
    }
}

/// One entry of the state, as materialization needs it.
#[derive(Debug, Clone)]
pub struct Node {
    pub id: String,
    pub parent: String,
    pub created: Stamp,
    pub fork: Option<Fork>,
}

struct Builder<'a> {
    nodes: BTreeMap<&'a str, &'a Node>,
    root: Option<&'a Fork>,
    children: BTreeMap<String, Vec<String>>,
    /// An orphan (or a cycle's oldest entry) placed as the continuation of a node.
    attached: BTreeMap<String, String>,
}

impl Builder<'_> {
    fn fork(&self, node: &str) -> (Vec<String>, Option<usize>) {
        let reg =
            if node.is_empty() { self.root } else { self.nodes.get(node).and_then(|n| n.fork.as_ref()) };
        let kids = self.children.get(node).map(Vec::as_slice).unwrap_or(&[]);
        let (mut slots, mut chosen) = effective(reg, kids);
        if let Some(o) = self.attached.get(node) {
            match chosen {
                Some(i) if slots[i].is_empty() => slots[i] = o.clone(),
                _ => {
                    slots.push(o.clone());
                    chosen = Some(slots.len() - 1);
                }
            }
        }
        (slots, chosen)
    }

    fn reachable(&self) -> BTreeSet<String> {
        let mut seen = BTreeSet::new();
        let mut stack = vec![String::new()];
        while let Some(n) = stack.pop() {
            for s in self.fork(&n).0 {
                if !s.is_empty() && seen.insert(s.clone()) {
                    stack.push(s);
                }
            }
        }
        seen
    }

    fn end(&self) -> String {
        let mut node = String::new();
        let mut steps = 0;
        loop {
            let (slots, ch) = self.fork(&node);
            match ch.and_then(|i| slots.get(i)) {
                Some(n) if !n.is_empty() && steps <= self.nodes.len() => {
                    node = n.clone();
                    steps += 1;
                }
                _ => return node,
            }
        }
    }

    /// Follow the chosen continuation from `from`, pushing onto `out`, laying out every fork met.
    fn lay(&self, from: &str, out: &mut Vec<String>, layout: &mut Layout, placed: &mut BTreeSet<String>) {
        let mut node = from.to_owned();
        loop {
            let (slots, ch) = self.fork(&node);
            if slots.len() >= 2 {
                let ch = ch.unwrap_or(0);
                layout.forks.insert(node.clone(), (ch as u32 + 1, slots.len() as u32));
                for (i, s) in slots.iter().enumerate() {
                    if i == ch {
                        continue;
                    }
                    let mut run = Vec::new();
                    if !s.is_empty() && placed.insert(s.clone()) {
                        run.push(s.clone());
                        self.lay(s, &mut run, layout, placed);
                    }
                    layout.branches.insert((node.clone(), i as u32 + 1), run);
                }
            }
            match ch.and_then(|i| slots.get(i)) {
                Some(n) if !n.is_empty() && placed.insert(n.clone()) => {
                    out.push(n.clone());
                    node = n.clone();
                }
                _ => break,
            }
        }
    }
}

/// Lay the state's entries of one session out as local rows. `root`: the fork register at the
/// start of the chat.
pub fn materialize(entries: &[Node], root: Option<&Fork>) -> Layout {
    let nodes: BTreeMap<&str, &Node> = entries.iter().map(|n| (n.id.as_str(), n)).collect();
    let created = |id: &str| nodes.get(id).map(|n| n.created.clone());
    let mut children: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for n in entries {
        if n.parent.is_empty() || (nodes.contains_key(n.parent.as_str()) && n.parent != n.id) {
            children.entry(n.parent.clone()).or_default().push(n.id.clone());
        }
    }
    for kids in children.values_mut() {
        sort_by_created(kids, &created);
        kids.dedup();
    }
    let mut b = Builder { nodes, root, children, attached: BTreeMap::new() };
    // oldest first: orphans, then (only when none is left) the oldest entry of a cycle
    let mut by_age: Vec<&Node> = entries.iter().collect();
    by_age.sort_by(|x, y| (&x.created, &x.id).cmp(&(&y.created, &y.id)));
    loop {
        let reach = b.reachable();
        let unplaced: Vec<&Node> = by_age.iter().copied().filter(|n| !reach.contains(&n.id)).collect();
        let pick = unplaced
            .iter()
            .find(|n| !(n.parent.is_empty() || b.nodes.contains_key(n.parent.as_str())))
            .or(unplaced.first())
            .copied();
        let Some(o) = pick else { break };
        if let Some(kids) = b.children.get_mut(&o.parent) {
            kids.retain(|k| k != &o.id);
        }
        let end = b.end();
        b.attached.insert(end, o.id.clone());
    }
    let mut layout = Layout::default();
    let mut path = Vec::new();
    let mut placed = BTreeSet::new();
    b.lay("", &mut path, &mut layout, &mut placed);
    layout.path = path;
    layout
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    /// The state a device records for a layout: every entry's parent, created in the order given,
    /// every fork's register.
    fn nodes(layout: &Layout, order: &[&str]) -> (Vec<Node>, Option<Fork>) {
        let tree = derive(layout);
        let rank = |id: &str| order.iter().position(|o| *o == id).expect("ordered") as i64;
        let n = tree
            .parent
            .iter()
            .map(|(id, p)| Node {
                id: id.clone(),
                parent: p.clone(),
                created: Stamp::new(rank(id), 0, "d"),
                fork: tree.forks.get(id).cloned(),
            })
            .collect();
        (n, tree.forks.get("").cloned())
    }

    fn round_trip(layout: &Layout, order: &[&str]) {
        let (n, root) = nodes(layout, order);
        assert_eq!(materialize(&n, root.as_ref()), *layout);
    }

    fn layout(path: &[&str], branches: &[(&str, u32, &[&str])], forks: &[(&str, u32, u32)]) -> Layout {
        Layout {
            path: ids(path),
            branches: branches.iter().map(|(k, v, r)| ((k.to_string(), *v), ids(r))).collect(),
            forks: forks.iter().map(|(k, c, n)| (k.to_string(), (*c, *n))).collect(),
        }
    }

    #[test]
    fn every_shape_the_store_writes_comes_back_the_same() {
        // a plain chat
        round_trip(&layout(&["a", "b", "c"], &[], &[]), &["a", "b", "c"]);
        // regenerated twice (versions 1, 2 kept; 3 chosen), then continued
        round_trip(
            &layout(&["a", "b3", "c"], &[("a", 1, &["b1"]), ("a", 2, &["b2", "x"])], &[("a", 3, 3)]),
            &["a", "b1", "b2", "x", "b3", "c"],
        );
        // switched back to version 1: the chosen one is not the latest
        round_trip(&layout(&["a", "b1"], &[("a", 2, &["b2"])], &[("a", 1, 2)]), &["a", "b1", "b2"]);
        // edit & resend of the first message: a fork at the start
        round_trip(
            &layout(&["u2", "r2"], &[("", 1, &["u1", "r1"])], &[("", 2, 2)]),
            &["u1", "r1", "u2", "r2"],
        );
        // a fork inside another version (nested)
        round_trip(
            &layout(
                &["a", "b2"],
                &[("a", 1, &["b1", "c1"]), ("b1", 2, &["c2", "d2"])],
                &[("a", 2, 2), ("b1", 1, 2)],
            ),
            &["a", "b1", "c1", "c2", "d2", "b2"],
        );
        // the chosen version's entries went to the trash: an empty version stays, chosen
        round_trip(&layout(&["a"], &[("a", 2, &["b2"])], &[("a", 1, 2)]), &["a", "b2"]);
        // switched away from it: an empty branch
        round_trip(&layout(&["a", "b2"], &[("a", 1, &[])], &[("a", 2, 2)]), &["a", "b2"]);
        // both versions empty
        round_trip(&layout(&["a"], &[("a", 2, &[])], &[("a", 1, 2)]), &["a"]);
        // a version's order is not the order its first entries were made (a removal moved one)
        round_trip(&layout(&["a", "y", "z"], &[("a", 2, &["x"])], &[("a", 1, 2)]), &["a", "x", "y", "z"]);
        // empty session
        round_trip(&Layout::default(), &[]);
    }

    fn node(id: &str, parent: &str, t: i64) -> Node {
        Node { id: id.into(), parent: parent.into(), created: Stamp::new(t, 0, "d"), fork: None }
    }

    #[test]
    fn two_continuations_of_one_entry_become_versions_the_later_chosen() {
        let n =
            [node("a", "", 1), node("b", "a", 2), node("x", "b", 5), node("y", "b", 4), node("y2", "y", 6)];
        let l = materialize(&n, None);
        assert_eq!(l, layout(&["a", "b", "x"], &[("b", 1, &["y", "y2"])], &[("b", 2, 2)]));
    }

    #[test]
    fn orphans_follow_the_chosen_path_oldest_first_and_nothing_is_lost() {
        // c's parent (p) left the session; d follows c; e is another orphan, older than c
        let n =
            [node("a", "", 1), node("b", "a", 2), node("c", "p", 7), node("d", "c", 8), node("e", "q", 5)];
        let l = materialize(&n, None);
        assert_eq!(l.path, ids(&["a", "b", "e", "c", "d"]));
        // an empty chosen version at the end: the orphan fills it
        let mut a = node("a", "", 1);
        a.fork = Some(Fork { versions: ids(&["", "b"]), chosen: 0 });
        let n = [a, node("b", "a", 2), node("o", "gone", 3)];
        let l = materialize(&n, None);
        assert_eq!(l, layout(&["a", "o"], &[("a", 2, &["b"])], &[("a", 1, 2)]));
    }

    #[test]
    fn a_cycle_of_parents_is_broken_at_its_oldest_entry() {
        let n = [node("a", "", 1), node("x", "y", 3), node("y", "x", 4), node("self", "self", 9)];
        let l = materialize(&n, None);
        assert_eq!(l.path, ids(&["a", "x", "y", "self"]));
    }

    #[test]
    fn a_register_naming_entries_that_left_keeps_the_rest_in_order() {
        let reg = Fork { versions: ids(&["gone", "b", "", "c"]), chosen: 0 };
        let (slots, ch) = effective(Some(&reg), &ids(&["c", "b", "new"]));
        assert_eq!(slots, ids(&["b", "", "c", "new"]));
        assert_eq!(ch, Some(3), "the chosen one left: the latest made (new) is chosen");
        let reg = Fork { versions: ids(&["b", ""]), chosen: 1 };
        assert_eq!(effective(Some(&reg), &ids(&["b"])), (ids(&["b", ""]), Some(1)));
        assert_eq!(effective(None, &[]), (vec![], None));
        assert!(same_fork(&(ids(&["b"]), Some(0)), &(ids(&["b"]), Some(0))));
        assert!(same_fork(&(ids(&[""]), Some(0)), &(vec![], None)));
        assert!(!same_fork(&(ids(&["b", "c"]), Some(0)), &(ids(&["b", "c"]), Some(1))));
    }
}
