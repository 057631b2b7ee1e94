//! `ferrocore check` on deliberately damaged files: each damage is a few bytes written into
//! an environment the library made, at offsets found through `ferrocore::raw`'s page views,
//! and the check must exit 1 and name the problem's kind and page. A clean environment
//! exits 0.

mod common;

use std::collections::BTreeSet;
use std::os::unix::fs::FileExt;
use std::path::Path;

use ferrocore::raw::{node_flags, view, DbRecord, Meta, PageSource};
use ferrocore::{Database, EnvOptions, Error};
use serde_json::Value;

use common::ferrocore;

const PS: usize = 4096;
/// The named DB of [`make_env`].
const NAMED: &str = "named";
/// Size of the overflow value of [`make_env`]: 3 pages.
const BIG: usize = 9000;

/// Main DB keys `key00000..key01999` and one overflow value (`big`), a named DB of 500
/// keys, then a second txn that deletes every third main key, so that the free DB has a
/// record.
fn make_env(dir: &Path) {
    // SAFETY: the test owns the directory.
    let env = unsafe { EnvOptions::new().max_dbs(4).open(dir).unwrap() };
    let mut txn = env.begin_write().unwrap();
    for i in 0..2000u32 {
        let key = format!("key{i:05}");
        txn.put(Database::MAIN, key.as_bytes(), &[7u8; 60], 0)
            .unwrap();
    }
    txn.put(Database::MAIN, b"big", &[9u8; BIG], 0).unwrap();
    let named = txn
        .open_db(Some(NAMED), ferrocore::db_flags::CREATE)
        .unwrap();
    for i in 0..500u32 {
        txn.put(named, &i.to_be_bytes(), b"value", 0).unwrap();
    }
    txn.commit().unwrap();
    let mut txn = env.begin_write().unwrap();
    for i in (0..2000u32).step_by(3) {
        let key = format!("key{i:05}");
        assert!(txn.delete(Database::MAIN, key.as_bytes()).unwrap());
    }
    txn.commit().unwrap();
}

/// The data file's bytes, as a page source.
struct Pages(Vec<u8>);

impl PageSource for Pages {
    fn page_size(&self) -> usize {
        PS
    }

    fn pages(&self, pgno: u64, count: usize) -> ferrocore::Result<&[u8]> {
        let start = pgno as usize * PS;
        match self.0.get(start..start + count * PS) {
            Some(bytes) if pgno >= 2 => Ok(bytes),
            _ => Err(Error::PageNotFound { pgno }),
        }
    }
}

impl Pages {
    /// The file offset of `part`, a slice of these bytes.
    fn offset_of(&self, part: &[u8]) -> u64 {
        let at = part.as_ptr() as usize - self.0.as_ptr() as usize;
        assert!(at + part.len() <= self.0.len());
        at as u64
    }
}

/// The environment's pages and its latest meta.
fn snapshot(dir: &Path) -> (Pages, Meta) {
    let meta = {
        // SAFETY: the test owns the directory.
        let env = unsafe { EnvOptions::new().max_dbs(4).open(dir).unwrap() };
        let txn = env.begin_read().unwrap();
        *txn.meta()
    };
    let bytes = std::fs::read(dir.join("data.mdb")).unwrap();
    assert_eq!(meta.page_size(), PS);
    (Pages(bytes), meta)
}

/// Writes `bytes` at `offset` of the data file.
fn damage(dir: &Path, offset: u64, bytes: &[u8]) {
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(dir.join("data.mdb"))
        .unwrap();
    file.write_all_at(bytes, offset).unwrap();
}

/// Every page of the tree rooted at `root`, in walk order.
fn tree_pages(src: &Pages, root: u64, out: &mut Vec<u64>) {
    out.push(root);
    let page = view(src, root).unwrap();
    if page.is_branch() {
        for i in 0..page.num_keys() {
            tree_pages(src, page.child(i).unwrap(), out);
        }
    }
}

/// The leaf of the main DB holding `key`: its page number.
fn main_leaf_with(src: &Pages, meta: &Meta, key: &[u8]) -> u64 {
    let mut pages = Vec::new();
    tree_pages(src, meta.main_db.root, &mut pages);
    pages
        .into_iter()
        .find(|&p| {
            let page = view(src, p).unwrap();
            page.is_leaf() && (0..page.num_keys()).any(|i| page.key(i).unwrap() == key)
        })
        .expect("a leaf holds the key")
}

/// The value of the free DB's first record: (its file offset, the pages it lists).
fn first_free_record(src: &Pages, meta: &Meta) -> (u64, Vec<u64>) {
    assert_eq!(meta.free_db.depth, 1, "one free-DB leaf");
    let leaf = view(src, meta.free_db.root).unwrap();
    let node = leaf.node(0).unwrap();
    assert_eq!(node.flags & node_flags::BIGDATA, 0, "an inline record");
    let words: Vec<u64> = node
        .data
        .chunks_exact(8)
        .map(|w| u64::from_le_bytes(w.try_into().unwrap()))
        .collect();
    assert_eq!(words[0] as usize, words.len() - 1, "count, then the pages");
    assert!(words.len() > 3, "a few free pages: {words:?}");
    (src.offset_of(node.data), words[1..].to_vec())
}

/// The record of the named DB in the main DB: (its file offset, the record).
fn named_record(src: &Pages, meta: &Meta) -> (u64, DbRecord) {
    let leaf = view(src, main_leaf_with(src, meta, NAMED.as_bytes())).unwrap();
    let node = (0..leaf.num_keys())
        .map(|i| leaf.node(i).unwrap())
        .find(|n| n.key == NAMED.as_bytes())
        .unwrap();
    assert_ne!(node.flags & node_flags::SUBDATA, 0);
    (src.offset_of(node.data), DbRecord::decode(node.data))
}

/// Runs `ferrocore check --json`: its exit status and report.
fn check_json(dir: &Path) -> (Option<i32>, Value) {
    let out = ferrocore()
        .args(["check", "--json"])
        .arg(dir)
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "check --json printed no JSON ({e}): {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code(), report)
}

/// The (kind, page) of every problem listed.
fn problems(report: &Value) -> BTreeSet<(String, Option<u64>)> {
    report["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["kind"].as_str().unwrap().to_owned(), p["pgno"].as_u64()))
        .collect()
}

/// The kinds of problem found, from the report's counts.
fn kinds(report: &Value) -> BTreeSet<String> {
    report["problems_by_kind"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect()
}

fn set<const N: usize>(items: [&str; N]) -> BTreeSet<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

#[test]
fn a_clean_environment_passes() {
    let dir = tempfile::tempdir().unwrap();
    make_env(dir.path());
    let (code, report) = check_json(dir.path());
    assert_eq!(code, Some(0), "{report}");
    assert_eq!(report["ok"], true);
    assert_eq!(report["problem_count"], 0);
    assert!(report["free_pages"].as_u64().unwrap() > 0, "{report}");
    let out = ferrocore().arg("check").arg(dir.path()).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("ok: "), "{text}");
    assert!(text.contains("DB \"named\": depth "), "{text}");
}

#[test]
fn a_leaked_page_is_found() {
    let dir = tempfile::tempdir().unwrap();
    make_env(dir.path());
    let (src, meta) = snapshot(dir.path());
    let (at, free) = first_free_record(&src, &meta);
    // One page fewer in the record's count: its last (smallest) page is listed no more.
    let count = free.len() as u64 - 1;
    damage(dir.path(), at, &count.to_le_bytes());
    let leaked = *free.last().unwrap();
    let (code, report) = check_json(dir.path());
    assert_eq!(code, Some(1), "{report}");
    assert_eq!(kinds(&report), set(["leaked_page"]), "{report}");
    assert_eq!(
        problems(&report),
        BTreeSet::from([("leaked_page".to_owned(), Some(leaked))])
    );
}

#[test]
fn a_page_both_free_and_in_a_tree_is_found() {
    let dir = tempfile::tempdir().unwrap();
    make_env(dir.path());
    let (src, meta) = snapshot(dir.path());
    let (at, free) = first_free_record(&src, &meta);
    let mut used = Vec::new();
    tree_pages(&src, meta.main_db.root, &mut used);
    // Replace a free page by a page of the main tree, keeping the record descending: the
    // tree page is then free too, and the page it replaced is leaked.
    let (i, page) = (0..free.len())
        .find_map(|i| {
            let above = if i == 0 { u64::MAX } else { free[i - 1] };
            let below = free.get(i + 1).copied().unwrap_or(1);
            used.iter()
                .find(|&&p| below < p && p < above)
                .map(|&p| (i, p))
        })
        .expect("a tree page fits between two free pages");
    damage(dir.path(), at + 8 + 8 * i as u64, &page.to_le_bytes());
    let (code, report) = check_json(dir.path());
    assert_eq!(code, Some(1), "{report}");
    assert_eq!(
        kinds(&report),
        set(["free_and_reachable", "leaked_page"]),
        "{report}"
    );
    assert_eq!(
        problems(&report),
        BTreeSet::from([
            ("free_and_reachable".to_owned(), Some(page)),
            ("leaked_page".to_owned(), Some(free[i])),
        ])
    );
}

#[test]
fn keys_out_of_order_in_a_leaf_are_found() {
    let dir = tempfile::tempdir().unwrap();
    make_env(dir.path());
    let (src, meta) = snapshot(dir.path());
    // Keys 1 and 2 of a leaf swap places: the leaf holds the same keys, so they stay
    // within its bounds, but out of order.
    let pgno = main_leaf_with(&src, &meta, b"key00100");
    let leaf = view(&src, pgno).unwrap();
    assert!(leaf.num_keys() >= 3);
    let (one, two) = (leaf.key(1).unwrap(), leaf.key(2).unwrap());
    assert_eq!(one.len(), two.len());
    damage(dir.path(), src.offset_of(one), two);
    damage(dir.path(), src.offset_of(two), one);
    let (code, report) = check_json(dir.path());
    assert_eq!(code, Some(1), "{report}");
    assert_eq!(kinds(&report), set(["keys_out_of_order"]), "{report}");
    assert_eq!(
        problems(&report),
        BTreeSet::from([("keys_out_of_order".to_owned(), Some(pgno))])
    );
    assert_eq!(report["problems"][0]["db"]["kind"], "main");
    assert_eq!(
        report["problems"][0]["what"],
        "keys out of order within the page"
    );
}

/// The first page of the `big` value's overflow run.
fn big_run(src: &Pages, meta: &Meta) -> u64 {
    let leaf = view(src, main_leaf_with(src, meta, b"big")).unwrap();
    let node = (0..leaf.num_keys())
        .map(|i| leaf.node(i).unwrap())
        .find(|n| n.key == b"big")
        .unwrap();
    assert_ne!(node.flags & node_flags::BIGDATA, 0);
    node.overflow_pgno()
}

#[test]
fn an_overflow_run_too_short_is_found() {
    let dir = tempfile::tempdir().unwrap();
    make_env(dir.path());
    let (src, meta) = snapshot(dir.path());
    let run = big_run(&src, &meta);
    // The header's page count (offset 12): 1 where the value needs 3.
    damage(dir.path(), run * PS as u64 + 12, &1u32.to_le_bytes());
    let (code, report) = check_json(dir.path());
    assert_eq!(code, Some(1), "{report}");
    let found = problems(&report);
    assert!(
        found.contains(&("bad_overflow".to_owned(), Some(run))),
        "{report}"
    );
    // The two pages no longer in the run are leaked; the main DB's record counts 3.
    assert!(found.contains(&("leaked_page".to_owned(), Some(run + 1))));
    assert!(found.contains(&("leaked_page".to_owned(), Some(run + 2))));
    assert_eq!(
        kinds(&report),
        set(["bad_overflow", "leaked_page", "bad_db_record"]),
        "{report}"
    );
}

#[test]
fn an_overflow_run_past_the_last_page_is_found() {
    let dir = tempfile::tempdir().unwrap();
    make_env(dir.path());
    let (src, meta) = snapshot(dir.path());
    let run = big_run(&src, &meta);
    damage(dir.path(), run * PS as u64 + 12, &u32::MAX.to_le_bytes());
    let (code, report) = check_json(dir.path());
    assert_eq!(code, Some(1), "{report}");
    assert!(kinds(&report).contains("bad_overflow"), "{report}");
    let first = &report["problems"][0];
    assert_eq!(first["kind"], "bad_overflow", "{report}");
    assert_eq!(first["what"], "overflow run outside the file", "{report}");
}

#[test]
fn a_named_db_record_with_a_wrong_entry_count_is_found() {
    let dir = tempfile::tempdir().unwrap();
    make_env(dir.path());
    let (src, meta) = snapshot(dir.path());
    let (at, mut record) = named_record(&src, &meta);
    assert_eq!(record.entries, 500);
    record.entries = 499;
    damage(dir.path(), at, &record.to_bytes());
    let (code, report) = check_json(dir.path());
    assert_eq!(code, Some(1), "{report}");
    assert_eq!(kinds(&report), set(["bad_db_record"]), "{report}");
    let problem = &report["problems"][0];
    assert_eq!(problem["what"], "entry count differs from the tree");
    assert_eq!(problem["db"]["name"], NAMED);
    assert_eq!(problem["pgno"], record.root);
}

#[test]
fn a_named_db_record_with_a_wrong_root_is_found() {
    let dir = tempfile::tempdir().unwrap();
    make_env(dir.path());
    let (src, meta) = snapshot(dir.path());
    let (at, mut record) = named_record(&src, &meta);
    // The named DB's root is now the main DB's root: a page reached twice, and the named
    // DB's own pages leaked.
    let own_root = record.root;
    record.root = meta.main_db.root;
    damage(dir.path(), at, &record.to_bytes());
    let (code, report) = check_json(dir.path());
    assert_eq!(code, Some(1), "{report}");
    let found = problems(&report);
    assert!(
        found.contains(&("reachable_twice".to_owned(), Some(meta.main_db.root))),
        "{report}"
    );
    assert!(
        found.contains(&("leaked_page".to_owned(), Some(own_root))),
        "{report}"
    );
}

#[test]
fn problems_past_the_limit_are_counted() {
    let dir = tempfile::tempdir().unwrap();
    {
        // SAFETY: the test owns the directory.
        let env = unsafe { EnvOptions::new().open(dir.path()).unwrap() };
        let mut txn = env.begin_write().unwrap();
        for i in 0..8000u32 {
            txn.put(Database::MAIN, &i.to_be_bytes(), &[7u8; 80], 0)
                .unwrap();
        }
        txn.commit().unwrap();
    }
    let (src, meta) = snapshot(dir.path());
    let mut pages = Vec::new();
    tree_pages(&src, meta.main_db.root, &mut pages);
    assert!(pages.len() > 150, "{} pages", pages.len());
    // The root's flags (offset 10) made P_OVERFLOW: it cannot be read as a tree page, and
    // every page below it is leaked.
    damage(dir.path(), pages[0] * PS as u64 + 10, &4u16.to_le_bytes());
    let (code, report) = check_json(dir.path());
    assert_eq!(code, Some(1), "{report}");
    assert_eq!(report["problems"][0]["kind"], "bad_page", "{report}");
    let listed = report["problems"].as_array().unwrap().len() as u64;
    let count = report["problem_count"].as_u64().unwrap();
    assert_eq!(listed, 100, "{report}");
    assert!(count >= pages.len() as u64, "{report}");
    assert_eq!(report["problems_not_listed"].as_u64().unwrap(), count - 100);
    let out = ferrocore().arg("check").arg(dir.path()).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(&format!("  ... and {} more", count - 100)),
        "{text}"
    );
}

#[test]
fn a_bad_older_meta_page_is_found() {
    let dir = tempfile::tempdir().unwrap();
    make_env(dir.path());
    let (_, meta) = snapshot(dir.path());
    // Txn 2 wrote meta 0; meta 1 holds txn 1. Its magic (offset 16) broken: the
    // environment opens on meta 0, but has no older snapshot to fall back on.
    assert_eq!(meta.txnid, 2);
    damage(dir.path(), PS as u64 + 16, &[0u8; 4]);
    let (code, report) = check_json(dir.path());
    assert_eq!(code, Some(1), "{report}");
    assert_eq!(kinds(&report), set(["bad_meta"]), "{report}");
    assert_eq!(
        problems(&report),
        BTreeSet::from([("bad_meta".to_owned(), Some(1))])
    );
}

/// A small deterministic PRNG (xorshift64*), so that a failing round replays.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

#[test]
fn random_damage_is_reported_never_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    make_env(dir.path());
    let data = dir.path().join("data.mdb");
    let pristine = std::fs::read(&data).unwrap();
    let pages = (pristine.len() / PS) as u64;
    let mut rng = Rng(0x5eed_1234_abcd_0001);
    let mut noticed = 0;
    let rounds = 150;
    for round in 0..rounds {
        let mut bytes = pristine.clone();
        for _ in 0..=rng.below(6) {
            // Mostly page headers and slot arrays, where damage matters most.
            let page = 2 + rng.below(pages - 2);
            let offset = if rng.below(4) == 0 {
                rng.below(PS as u64)
            } else {
                rng.below(64)
            };
            let at = (page * PS as u64 + offset) as usize;
            bytes[at] ^= 1 << rng.below(8);
        }
        std::fs::write(&data, &bytes).unwrap();
        let (code, report) = check_json(dir.path());
        match code {
            Some(0) => assert_eq!(report["ok"], true, "round {round}: {report}"),
            Some(1) => {
                assert!(report["problem_count"].as_u64().unwrap() > 0, "{report}");
                noticed += 1;
            }
            Some(2) => assert!(report["error"].is_string(), "round {round}: {report}"),
            other => panic!("round {round}: check ended with {other:?}: {report}"),
        }
    }
    // Some damage is harmless (free pages, unused space); most is not.
    assert!(
        noticed > rounds / 2,
        "only {noticed} of {rounds} rounds noticed"
    );
}
