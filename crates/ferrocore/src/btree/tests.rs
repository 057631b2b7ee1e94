//! Unit tests of the tree over pages in memory (`store::memory`): no file, no map, no
//! transaction. Random puts and deletes against a `BTreeMap`, with a "commit" every few
//! operations so that copy-on-write runs; after each phase every key is looked up, the
//! tree is scanned both ways, and every page is accounted for (reachable once, or freed).

use std::collections::{BTreeMap, BTreeSet};

use crate::format::meta::DbRecord;
use crate::format::page::{node_flags, OverflowView, PageView, P_INVALID};
use crate::order::KeyCmp;
use crate::store::memory::MemoryPages;
use crate::store::PageSource;

use super::{get, Position, PutMode, TreeMut};

/// The test's data, from the fault injector's splitmix64.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        crate::io::fault::next_random(&mut self.0) % n
    }
}

/// Pages reachable from `db`'s root: (branch, leaf, overflow), each page seen once.
fn reachable(src: &MemoryPages, db: &DbRecord, seen: &mut BTreeSet<u64>) -> (u64, u64, u64) {
    let mut counts = (0, 0, 0);
    if db.root == P_INVALID {
        return counts;
    }
    let mut stack = vec![db.root];
    while let Some(pgno) = stack.pop() {
        assert!(seen.insert(pgno), "page {pgno} reachable twice");
        let page = PageView::parse(src.page(pgno).unwrap(), pgno).unwrap();
        for i in 0..page.num_keys() {
            if page.is_branch() {
                stack.push(page.child(i).unwrap());
                continue;
            }
            let node = page.node(i).unwrap();
            if node.flags & node_flags::BIGDATA != 0 {
                let run = node.overflow_pgno();
                let header = OverflowView::parse(src.page(run).unwrap(), run).unwrap();
                for p in run..run + header.pages as u64 {
                    assert!(seen.insert(p), "overflow page {p} reachable twice");
                }
                counts.2 += header.pages as u64;
            }
        }
        if page.is_branch() {
            counts.0 += 1;
        } else {
            counts.1 += 1;
        }
    }
    counts
}

/// The tree holds exactly `model`, in `cmp`'s order, and its pages add up.
fn assert_matches(
    src: &MemoryPages,
    db: &DbRecord,
    cmp: KeyCmp,
    model: &BTreeMap<Vec<u8>, Vec<u8>>,
) {
    let mut want: Vec<(&[u8], &[u8])> = model.iter().map(|(k, v)| (&k[..], &v[..])).collect();
    want.sort_by(|a, b| cmp.compare(a.0, b.0));
    for (k, v) in &want {
        assert_eq!(get(src, db, cmp, k).unwrap(), Some(*v), "get {k:?}");
    }
    assert_eq!(db.entries, want.len() as u64, "entries");

    let mut forward = Vec::new();
    let mut pos = Position::default();
    while pos.next(src, db).unwrap() {
        let (k, v) = pos.current(src).unwrap();
        forward.push((k, v));
    }
    assert_eq!(forward, want, "forward scan");
    let mut backward = Vec::new();
    let mut pos = Position::default();
    while pos.prev(src, db).unwrap() {
        backward.push(pos.current(src).unwrap());
    }
    backward.reverse();
    assert_eq!(backward, want, "backward scan");

    let mut seen = BTreeSet::new();
    let (branch, leaf, overflow) = reachable(src, db, &mut seen);
    assert_eq!(
        (branch, leaf, overflow),
        (db.branch_pages, db.leaf_pages, db.overflow_pages),
        "page counts of the record"
    );
    let (allocated, freed) = src.counts();
    assert_eq!(
        seen.len() as u64 + freed,
        allocated,
        "every page allocated is reachable once or freed"
    );
}

fn key_for(rng: &mut Rng, cmp: KeyCmp) -> Vec<u8> {
    match cmp {
        KeyCmp::Integer => rng.below(5_000).to_ne_bytes().to_vec(),
        _ => {
            let len = 1 + rng.below(40) as usize;
            (0..len).map(|_| b'a' + rng.below(4) as u8).collect()
        }
    }
}

fn value_for(rng: &mut Rng, page_size: usize) -> Vec<u8> {
    // Mostly small; some past the node limit, into overflow runs of one page or several.
    let len = match rng.below(20) {
        0 => page_size / 2 + rng.below(3 * page_size as u64) as usize,
        _ => rng.below(120) as usize,
    };
    vec![rng.below(256) as u8; len]
}

fn random_ops(page_size: usize, cmp: KeyCmp, seed: u64) {
    let mut rng = Rng(seed);
    let mut src = MemoryPages::new(page_size);
    let mut db = DbRecord::empty(0);
    let mut model = BTreeMap::new();
    for phase in 0..6 {
        // Phases grow the tree, then shrink it to nothing, then grow it again.
        let delete_share = [0, 1, 9, 10, 10, 2][phase];
        for op in 0..1_500 {
            let key = key_for(&mut rng, cmp);
            let mut tree = TreeMut {
                store: &mut src,
                db: &mut db,
                cmp,
            };
            if rng.below(10) < delete_share {
                let victim = model
                    .keys()
                    .nth(rng.below(model.len().max(1) as u64) as usize)
                    .cloned();
                let key = victim.unwrap_or(key);
                assert_eq!(tree.delete(&key).unwrap(), model.remove(&key).is_some());
            } else {
                let value = value_for(&mut rng, page_size);
                tree.put(&key, &value, PutMode::default()).unwrap();
                model.insert(key, value);
            }
            if op % 97 == 0 {
                src.end_txn();
            }
        }
        assert_matches(&src, &db, cmp, &model);
    }
}

#[test]
fn random_puts_and_deletes_match_a_map() {
    for (page_size, seed) in [(4096, 1), (4096, 2), (8192, 3)] {
        random_ops(page_size, KeyCmp::Lexicographic, seed);
    }
}

#[test]
fn other_orders_keep_their_order() {
    random_ops(4096, KeyCmp::Reverse, 4);
    random_ops(4096, KeyCmp::Integer, 5);
}

#[test]
fn append_fills_pages_in_order() {
    let mut src = MemoryPages::new(4096);
    let mut db = DbRecord::empty(0);
    let mut model = BTreeMap::new();
    let append = PutMode {
        append: true,
        ..PutMode::default()
    };
    for i in 0u32..20_000 {
        let key = i.to_be_bytes().to_vec();
        TreeMut {
            store: &mut src,
            db: &mut db,
            cmp: KeyCmp::Lexicographic,
        }
        .put(&key, b"value", append)
        .unwrap();
        model.insert(key, b"value".to_vec());
    }
    // A key that does not sort last is refused, and changes nothing.
    let err = TreeMut {
        store: &mut src,
        db: &mut db,
        cmp: KeyCmp::Lexicographic,
    }
    .put(&5u32.to_be_bytes(), b"late", append)
    .unwrap_err();
    assert!(matches!(err, crate::error::Error::KeyExist), "{err:?}");
    assert_matches(&src, &db, KeyCmp::Lexicographic, &model);
    // Appended leaves are full: 20,000 nodes of 8 + 4 + 5 bytes (+ 2 for the slot) fit
    // 4080 / 20 = 204 to a page, so about 98 leaves, where splits in the middle make ~200.
    assert!(db.leaf_pages <= 100, "{} leaves", db.leaf_pages);
}

/// `delete_leading` deletes the first keys while they are the ones given, as a queue's
/// consumer does (the free DB), values on overflow pages included: the tree then holds
/// the rest, its pages add up, and a first key that differs deletes nothing.
#[test]
fn delete_leading_takes_the_first_keys_in_order() {
    let page_size = 4096;
    let mut rng = Rng(7);
    let mut src = MemoryPages::new(page_size);
    let mut db = DbRecord::empty(0);
    let mut model = BTreeMap::new();
    let cmp = KeyCmp::Integer;
    let key = |i: u64| i.to_le_bytes();
    for i in 0..2_000u64 {
        let value = value_for(&mut rng, page_size);
        let mut tree = TreeMut {
            store: &mut src,
            db: &mut db,
            cmp,
        };
        tree.put(&key(i), &value, PutMode::default()).unwrap();
        model.insert(key(i).to_vec(), value);
    }
    src.end_txn();
    let mut next = 0u64;
    while next < 2_000 {
        let batch = 1 + rng.below(12);
        let keys: Vec<[u8; 8]> = (next..next + batch).map(key).collect();
        let mut tree = TreeMut {
            store: &mut src,
            db: &mut db,
            cmp,
        };
        // Not the first key: nothing happens.
        assert_eq!(tree.delete_leading(&[key(next + 1)]).unwrap(), 0);
        let n = tree.delete_leading(&keys).unwrap() as u64;
        assert!(n >= 1 && n <= batch, "deleted {n} of {batch}");
        for i in next..next + n {
            model.remove(&key(i)[..]);
        }
        next += n;
        if next.is_multiple_of(7) {
            src.end_txn();
        }
        if next % 101 < 12 {
            assert_matches(&src, &db, cmp, &model);
        }
    }
    assert_matches(&src, &db, cmp, &model);
    assert_eq!(db.root, P_INVALID, "every key deleted");
}

/// The rebalance tests' tree, empty, on 4 KiB pages, for integer keys and 100-byte values:
/// its pages, its record, the bytes of a page past its header, the value, and the bytes
/// one item takes in a leaf (an 8-byte node header, the 8-byte key, the value and a 2-byte
/// slot).
fn rebalance_tree() -> (MemoryPages, DbRecord, usize, [u8; 100], usize) {
    let page_size = 4096;
    let usable = page_size - crate::format::page::PAGE_HEADER_SIZE;
    let value = [7; 100];
    let node = 8 + 8 + value.len() + 2;
    (
        MemoryPages::new(page_size),
        DbRecord::empty(0),
        usable,
        value,
        node,
    )
}

/// Away from the tree's first leaf, LMDB's rule: an underfull leaf whose sibling can lend
/// it nodes borrows them, even when the two would fit one page (a merge there frees a page
/// amid the txn's new ones, and a delete of many keys at random then writes its pages in
/// many short runs).
#[test]
fn an_underfull_leaf_past_the_first_borrows_from_its_sibling() {
    let (mut src, mut db, usable, value, node) = rebalance_tree();
    let (cmp, key) = (KeyCmp::Integer, |i: u64| i.to_le_bytes());
    let mut model = BTreeMap::new();
    for i in 0..(3 * usable / node) as u64 {
        TreeMut {
            store: &mut src,
            db: &mut db,
            cmp,
        }
        .put(&key(i), &value, PutMode::default())
        .unwrap();
        model.insert(key(i).to_vec(), value.to_vec());
    }
    assert!(db.depth == 2 && db.leaf_pages >= 3, "three leaves or more");
    // The leaf at `idx` under the root: its fill (per mille, as the rebalance computes
    // it) and first key.
    let leaf = |src: &MemoryPages, db: &DbRecord, idx: usize| {
        let root = PageView::parse(src.page(db.root).unwrap(), db.root).unwrap();
        let pgno = root.child(idx).unwrap();
        let page = PageView::parse(src.page(pgno).unwrap(), pgno).unwrap();
        let first = u64::from_le_bytes(page.key(0).unwrap().try_into().unwrap());
        (page.fill_permille(), first)
    };
    let mut delete = |src: &mut MemoryPages, db: &mut DbRecord, k: u64| {
        assert!(TreeMut {
            store: &mut *src,
            db: &mut *db,
            cmp,
        }
        .delete(&key(k))
        .unwrap());
        model.remove(key(k).as_slice());
        src.end_txn();
    };
    // The first leaf down to at most 60%, still above a quarter: no rebalance yet.
    while leaf(&src, &db, 0).0 > 600 {
        let first = leaf(&src, &db, 0).1;
        delete(&mut src, &mut db, first);
    }
    let (first_fill, _) = leaf(&src, &db, 0);
    assert!(first_fill >= 300, "{first_fill}");
    // The second leaf emptied from its front until a delete leaves it under a quarter:
    // the first leaf (the sibling, at most 60%) could merge with it, and lends instead.
    let leaves = db.leaf_pages;
    let (mut fill, _) = leaf(&src, &db, 1);
    while fill >= 250 {
        let (_, first) = leaf(&src, &db, 1);
        // Under a quarter after this delete: the rebalance runs (the fill computed as the
        // rebalance does, from the bytes left).
        let root = PageView::parse(src.page(db.root).unwrap(), db.root).unwrap();
        let pgno = root.child(1).unwrap();
        let page = PageView::parse(src.page(pgno).unwrap(), pgno).unwrap();
        fill = 1000 * (usable - page.free_space() - node) / usable;
        delete(&mut src, &mut db, first);
    }
    assert_eq!(db.leaf_pages, leaves, "no merge: the sibling lent nodes");
    assert!(leaf(&src, &db, 1).0 >= 250, "the second leaf refilled");
    assert_matches(&src, &db, cmp, &model);
}

/// A queue deleted at its front, as the free DB's oldest records are: a delete that leaves
/// the first leaf underfull merges it with its sibling when the two fit one page together
/// (the tree a single leaf again), even though the sibling could lend it nodes; otherwise
/// nodes move and the first leaf is a quarter full again.
#[test]
fn an_underfull_leaf_merges_with_a_sibling_it_fits_with() {
    let (mut src, mut db, usable, value, node) = rebalance_tree();
    let (cmp, key) = (KeyCmp::Integer, |i: u64| i.to_le_bytes());
    let used = |src: &MemoryPages, pgno: u64| {
        let page = PageView::parse(src.page(pgno).unwrap(), pgno).unwrap();
        usable - page.free_space()
    };
    let (mut merges, mut moves) = (0, 0);
    // 34 nodes fit a page: from 28 on, the sibling is too full for the first leaf to merge
    // with once it is underfull (8 nodes), and lends it nodes first.
    let extras = [8u64, 12, 20, 26, 28, 30];
    for extra in extras {
        // One leaf full, the next holding `extra` entries (keys in order fill the first).
        let count = (usable / node) as u64 + extra;
        for i in 0..count {
            let mut tree = TreeMut {
                store: &mut src,
                db: &mut db,
                cmp,
            };
            tree.put(&key(i), &value, PutMode::default()).unwrap();
        }
        assert_eq!(db.leaf_pages, 2, "{extra}: one split");
        for first in 0..count {
            let two = db.leaf_pages == 2;
            let (left, right) = if two {
                let root = PageView::parse(src.page(db.root).unwrap(), db.root).unwrap();
                (root.child(0).unwrap(), root.child(1).unwrap())
            } else {
                (db.root, P_INVALID)
            };
            let before = used(&src, left);
            let sibling = if two {
                1000 * used(&src, right) / usable
            } else {
                0
            };
            let mut tree = TreeMut {
                store: &mut src,
                db: &mut db,
                cmp,
            };
            assert!(tree.delete(&key(first)).unwrap());
            if !two || db.root == P_INVALID {
                continue;
            }
            let fill = 1000 * (before - node) / usable;
            if fill < 250 && fill + sibling <= super::delete::MERGE_ROOM {
                assert_eq!(
                    db.leaf_pages, 1,
                    "{extra}, {first}: {fill} + {sibling} merge"
                );
                merges += 1;
            } else if fill < 250 {
                assert_eq!(db.leaf_pages, 2, "{extra}, {first}: nodes move");
                let root = PageView::parse(src.page(db.root).unwrap(), db.root).unwrap();
                let left = root.child(0).unwrap();
                assert!(
                    1000 * used(&src, left) / usable >= 250,
                    "{extra}, {first}: refilled"
                );
                moves += 1;
            }
            src.end_txn();
        }
        assert_eq!(db.root, P_INVALID, "{extra}: every key deleted");
        assert_matches(&src, &db, cmp, &BTreeMap::new());
    }
    // One merge per queue: the tree is a single leaf from then on.
    assert!(
        merges == extras.len() && moves >= 1,
        "{merges} merges, {moves} moves"
    );
}
