//! Integrity checker: walks every tree of a snapshot and its free list, and verifies the
//! invariants the format promises.
//!
//! - every page is of the right type for its level, all leaves at the same depth;
//! - keys strictly ordered within each page and inside their parent's bounds;
//! - branch pages have at least 2 nodes, non-root leaves at least 1;
//! - overflow runs have a valid header and are long enough for their value;
//! - the record counts (depth, branch/leaf/overflow pages, entries) match the tree;
//! - page accounting: every page `2..=last_pgno` is reachable exactly once or listed
//!   exactly once in the free DB, never both, never neither.
//!
//! Two ways to run it over one walker: [`check_snapshot_with`] stops at the first problem
//! with `Error::Corrupted` (or the read error met), as `Env::check` and `ReadTxn::check`
//! report it; [`check_report`] goes on past every problem and returns them all (the first
//! [`CheckOptions::max_problems`] in full, the rest counted), for the operator's `check`.
//!
//! A hostile file cannot make either loop or recurse without bound: a page is descended
//! into at most once (a second reference is reported, not followed), tree depth is capped
//! by `MAX_DEPTH`, and the page map is sized by the snapshot's last page only once that
//! page is known to be readable.

use std::cmp::Ordering;

use crate::btree::{node_value, view, MAX_DEPTH};
use crate::error::{Error, Result};
use crate::format::idl::decode_idl;
use crate::format::meta::{DbRecord, Meta};
use crate::format::page::OverflowView;
use crate::format::page::{node_flags, Node, PageView, P_INVALID};
use crate::order::KeyCmp;
use crate::store::PageSource;

mod report;

pub use report::{CheckDetails, CheckOptions, CheckReport, DbName, DbPages, Problem, ProblemKind};

/// The orders of a DB in the snapshot: by name (`None` for the main DB) and flags.
pub type OrdersFor<'a> = &'a dyn Fn(Option<&[u8]>, u16) -> crate::order::Orders;

/// Who accounted for a page first.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Owner {
    Nobody,
    Tree,
    Free,
}

/// How often (in pages accounted for) the progress callback runs.
const PROGRESS_EVERY_PAGES: u64 = 4096;

struct Walker<'a, S: PageSource + ?Sized> {
    src: &'a S,
    orders_for: OrdersFor<'a>,
    last_pgno: u64,
    owner: Vec<Owner>,
    report: CheckReport,
    /// The DB being walked.
    db: Option<DbName>,
    /// Free-DB leaves walked, in key order: their records are read after the walk.
    free_leaves: Vec<u64>,
    dbs: Vec<DbPages>,
    /// `None`: stop at the first problem (it becomes the walk's error).
    collect: Option<Collected>,
    accounted: u64,
    progress: Option<&'a dyn Fn(u64)>,
}

struct Collected {
    max: usize,
    problems: Vec<Problem>,
    count: u64,
    by_kind: [u64; ProblemKind::ALL.len()],
}

#[derive(Default)]
struct Counts {
    branch: u64,
    leaf: u64,
    overflow: u64,
    entries: u64,
    /// Pages of DUPSORT sub-DBs (branch, leaf).
    sub_branch: u64,
    sub_leaf: u64,
}

/// The bounds and orders a page's keys are checked against.
#[derive(Clone, Copy)]
struct Bounds<'k> {
    lower: Option<&'k [u8]>,
    upper: Option<&'k [u8]>,
    cmp: KeyCmp,
    dup: Option<KeyCmp>,
}

/// Child `i` of branch `page` and the bounds of its keys.
fn child_of<'k>(page: &PageView<'k>, i: usize, b: Bounds<'k>) -> Result<(u64, Bounds<'k>)> {
    let lower = if i == 0 { b.lower } else { Some(page.key(i)?) };
    let upper = if i + 1 < page.num_keys() {
        Some(page.key(i + 1)?)
    } else {
        b.upper
    };
    Ok((page.child(i)?, Bounds { lower, upper, ..b }))
}

/// What the tree being walked is, for what its leaves hold.
#[derive(Clone, Copy, PartialEq, Eq)]
enum TreeKind {
    /// The main DB: its SUBDATA nodes are named DBs.
    Main,
    /// The free DB: its leaves are read for their records after the walk.
    Free,
    /// A named DB, or a DUPSORT sub-DB.
    Other,
}

impl<S: PageSource + ?Sized> Walker<'_, S> {
    /// Records a problem. Stopping at the first, returns it as the walk's error: the
    /// error `Env::check` has always returned for it.
    fn problem(&mut self, kind: ProblemKind, pgno: u64, what: &'static str) -> Result<()> {
        self.found(kind, pgno, Error::corrupted(pgno, what))
    }

    /// Records a problem met as error `e` (a page that could not be read as expected).
    fn found(&mut self, kind: ProblemKind, pgno: u64, e: Error) -> Result<()> {
        let Some(c) = self.collect.as_mut() else {
            return Err(e);
        };
        c.count += 1;
        let at = ProblemKind::ALL.iter().position(|&k| k == kind);
        c.by_kind[at.expect("every kind is in ALL")] += 1;
        if c.problems.len() < c.max {
            let (pgno, what) = match e {
                Error::Corrupted { pgno: p, what } => (p, what.to_owned()),
                Error::PageNotFound { pgno: p } => (p, "page not in the snapshot".to_owned()),
                e => (pgno, e.to_string()),
            };
            c.problems.push(Problem {
                kind,
                pgno: (pgno != P_INVALID).then_some(pgno),
                db: self.db.clone(),
                what,
            });
        }
        Ok(())
    }

    /// Accounts for pages `pgno..pgno + count` as `owner`'s. Returns whether every one was
    /// in range and accounted for by nobody before; else the problem is recorded (the run
    /// accounted for up to the first page claimed before) and a caller does not descend.
    fn mark(
        &mut self,
        pgno: u64,
        count: u64,
        owner: Owner,
        out_of_range: (ProblemKind, &'static str),
    ) -> Result<bool> {
        let end = pgno.checked_add(count).filter(|&e| e <= self.last_pgno + 1);
        if pgno < 2 || end.is_none() {
            let first_bad = if pgno < 2 || pgno > self.last_pgno {
                pgno
            } else {
                self.last_pgno + 1
            };
            self.problem(out_of_range.0, first_bad, out_of_range.1)?;
            return Ok(false);
        }
        for p in pgno..pgno + count {
            let before = std::mem::replace(&mut self.owner[p as usize], owner);
            let (kind, what) = match (before, owner) {
                (Owner::Nobody, _) => {
                    self.accounted += 1;
                    if self.accounted.is_multiple_of(PROGRESS_EVERY_PAGES) {
                        if let Some(progress) = self.progress {
                            progress(self.accounted);
                        }
                    }
                    continue;
                }
                (Owner::Tree, Owner::Tree) => (
                    ProblemKind::ReachableTwice,
                    "page reachable twice from the trees",
                ),
                (Owner::Free, Owner::Free) => {
                    (ProblemKind::FreeTwice, "page listed twice in the free DB")
                }
                _ => (
                    ProblemKind::FreeAndReachable,
                    "page both reachable from a tree and listed as free",
                ),
            };
            // Keep the first owner: a tree page stays one.
            self.owner[p as usize] = before;
            self.problem(kind, p, what)?;
            // The rest of the run is not accounted for (it shows as leaked if nothing
            // else claims it): so that each page is claimed at most once and runs that
            // overlap cost no more than the file's pages, whatever their lengths say.
            return Ok(false);
        }
        Ok(true)
    }

    /// Walks the tree of `rec`; returns what it counted.
    fn tree(
        &mut self,
        rec: &DbRecord,
        cmp: KeyCmp,
        dup: Option<KeyCmp>,
        kind: TreeKind,
    ) -> Result<Counts> {
        let mut counts = Counts::default();
        if rec.root == P_INVALID {
            if rec.depth != 0
                || rec.entries != 0
                || rec.leaf_pages + rec.branch_pages + rec.overflow_pages != 0
            {
                self.problem(
                    ProblemKind::BadDbRecord,
                    P_INVALID,
                    "empty tree with non-zero counts",
                )?;
            }
            return Ok(counts);
        }
        if rec.depth == 0 || rec.depth as usize > MAX_DEPTH {
            self.problem(
                ProblemKind::BadDbRecord,
                rec.root,
                "tree depth out of range",
            )?;
            return Ok(counts);
        }
        let bounds = Bounds {
            lower: None,
            upper: None,
            cmp,
            dup,
        };
        self.page(rec.root, 0, rec.depth as usize, bounds, kind, &mut counts)?;
        // LMDB 0.9.36 lets a DUPSORT DB's branch/leaf counts drift (FORMAT.md): informational.
        if dup.is_none() && (counts.branch != rec.branch_pages || counts.leaf != rec.leaf_pages) {
            self.problem(
                ProblemKind::BadDbRecord,
                rec.root,
                "branch/leaf page counts differ from the tree",
            )?;
        }
        if counts.overflow != rec.overflow_pages {
            self.problem(
                ProblemKind::BadDbRecord,
                rec.root,
                "overflow page count differs from the tree",
            )?;
        }
        if counts.entries != rec.entries {
            self.problem(
                ProblemKind::BadDbRecord,
                rec.root,
                "entry count differs from the tree",
            )?;
        }
        Ok(counts)
    }

    /// Walks page `pgno` at `level` of a tree `depth` deep, and the pages below it.
    fn page(
        &mut self,
        pgno: u64,
        level: usize,
        depth: usize,
        b: Bounds<'_>,
        kind: TreeKind,
        counts: &mut Counts,
    ) -> Result<()> {
        let range = (ProblemKind::PageOutOfRange, "tree page outside the file");
        if !self.mark(pgno, 1, Owner::Tree, range)? {
            return Ok(());
        }
        self.report.tree_pages += 1;
        let src = self.src;
        let page = match view(src, pgno) {
            Ok(page) => page,
            Err(e) => return self.found(ProblemKind::BadPage, pgno, e),
        };
        let n = page.num_keys();
        if page.is_leaf() != (level + 1 == depth) {
            return self.problem(
                ProblemKind::WrongPageType,
                pgno,
                "page type does not match its level (leaves at unequal depth)",
            );
        }
        if let Err(e) = self.keys_in_order(&page, pgno, b) {
            return self.found(ProblemKind::BadPage, pgno, e);
        }
        if page.is_branch() {
            counts.branch += 1;
            if n < 2 {
                self.problem(
                    ProblemKind::BadTreeShape,
                    pgno,
                    "branch page with fewer than 2 nodes",
                )?;
            }
            for i in 0..n {
                match child_of(&page, i, b) {
                    Ok((child, bounds)) => {
                        self.page(child, level + 1, depth, bounds, kind, counts)?;
                    }
                    Err(e) => return self.found(ProblemKind::BadPage, pgno, e),
                }
            }
            return Ok(());
        }
        counts.leaf += 1;
        if level > 0 {
            if n == 0 {
                self.problem(ProblemKind::BadTreeShape, pgno, "empty non-root leaf")?;
            }
            self.report.min_leaf_fill = self.report.min_leaf_fill.min(page.fill_permille());
        }
        if kind == TreeKind::Free {
            self.free_leaves.push(pgno);
        }
        for i in 0..n {
            let node = match page.node(i) {
                Ok(node) => node,
                Err(e) => return self.found(ProblemKind::BadPage, pgno, e),
            };
            counts.entries += 1;
            self.leaf_node(&node, pgno, b.dup, kind, counts)?;
        }
        Ok(())
    }

    /// Checks the key order of `page` against itself and its bounds; records the first
    /// key out of place. Errors are keys that cannot be read.
    fn keys_in_order(&mut self, page: &PageView<'_>, pgno: u64, b: Bounds<'_>) -> Result<()> {
        let first_key = usize::from(page.is_branch());
        for i in first_key..page.num_keys() {
            let k = page.key(i)?;
            let problem = if i > first_key && b.cmp.compare(page.key(i - 1)?, k) != Ordering::Less {
                "keys out of order within the page"
            } else if b
                .lower
                .is_some_and(|lo| b.cmp.compare(k, lo) == Ordering::Less)
            {
                "key below its parent's separator"
            } else if b
                .upper
                .is_some_and(|hi| b.cmp.compare(k, hi) != Ordering::Less)
            {
                "key not below the next separator"
            } else {
                continue;
            };
            // One report a page: the keys after the first out of place say little more.
            return self.problem(ProblemKind::KeysOutOfOrder, pgno, problem);
        }
        Ok(())
    }

    /// What a leaf node holds beyond its key: duplicates, an overflow run, a named DB.
    fn leaf_node(
        &mut self,
        node: &Node<'_>,
        pgno: u64,
        dup: Option<KeyCmp>,
        kind: TreeKind,
        counts: &mut Counts,
    ) -> Result<()> {
        if node.flags & node_flags::DUPDATA != 0 {
            let Some(dcmp) = dup else {
                return self.problem(
                    ProblemKind::BadDuplicates,
                    pgno,
                    "duplicate values in a DB without DUPSORT",
                );
            };
            let values = self.dups(node, pgno, dcmp, counts)?;
            counts.entries += values.saturating_sub(1);
            return Ok(());
        }
        if node.flags & node_flags::BIGDATA != 0 {
            return self.overflow(node, counts);
        }
        if node.flags & node_flags::SUBDATA != 0 && kind == TreeKind::Main {
            if node.data.len() != DbRecord::SIZE {
                return self.problem(
                    ProblemKind::BadDbRecord,
                    pgno,
                    "named DB record of the wrong size",
                );
            }
            let sub = DbRecord::decode(node.data);
            self.report.named_dbs += 1;
            let orders = (self.orders_for)(Some(node.key), sub.flags);
            let outer = self.db.replace(DbName::Named(node.key.to_vec()));
            let walked = self.tree(&sub, orders.key, orders.dup, TreeKind::Other);
            let db = std::mem::replace(&mut self.db, outer);
            self.note_db(db.expect("set above"), &sub, &walked?);
        }
        Ok(())
    }

    /// The overflow run of a BIGDATA node.
    fn overflow(&mut self, node: &Node<'_>, counts: &mut Counts) -> Result<()> {
        let src = self.src;
        let run = node.overflow_pgno();
        let header = match src
            .page(run)
            .and_then(|first| OverflowView::parse(first, run))
        {
            Ok(header) => header,
            Err(e) => return self.found(ProblemKind::BadOverflow, run, e),
        };
        if let Err(e) = header.check_holds(src.page_size(), node.data_size()) {
            self.found(ProblemKind::BadOverflow, run, e)?;
        }
        let pages = header.pages as u64;
        let range = (ProblemKind::BadOverflow, "overflow run outside the file");
        self.mark(run, pages, Owner::Tree, range)?;
        self.report.tree_pages += pages;
        counts.overflow += pages;
        Ok(())
    }

    /// Checks the value set of a DUPSORT node; returns its number of values.
    fn dups(
        &mut self,
        node: &Node<'_>,
        pgno: u64,
        dcmp: KeyCmp,
        counts: &mut Counts,
    ) -> Result<u64> {
        let dups = match crate::dupsort::dups_of(node, pgno) {
            Ok(dups) => dups,
            Err(e) => {
                self.found(ProblemKind::BadDuplicates, pgno, e)?;
                return Ok(1);
            }
        };
        match dups {
            crate::dupsort::Dups::Single(_) => Ok(1),
            crate::dupsort::Dups::SubPage(sub) => {
                for i in 1..sub.num_keys() {
                    let ordered = match (sub.key(i - 1), sub.key(i)) {
                        (Ok(a), Ok(b)) => dcmp.compare(a, b) == Ordering::Less,
                        (Err(e), _) | (_, Err(e)) => {
                            self.found(ProblemKind::BadDuplicates, pgno, e)?;
                            break;
                        }
                    };
                    if !ordered {
                        self.problem(
                            ProblemKind::KeysOutOfOrder,
                            pgno,
                            "duplicate values out of order in a sub-page",
                        )?;
                        break;
                    }
                }
                Ok(sub.num_keys() as u64)
            }
            crate::dupsort::Dups::SubDb(rec) => {
                let sub = self.tree(&rec, dcmp, None, TreeKind::Other)?;
                counts.sub_branch += sub.branch;
                counts.sub_leaf += sub.leaf;
                if sub.entries == 0 {
                    self.problem(ProblemKind::BadDuplicates, pgno, "empty duplicate sub-DB")?;
                    return Ok(1);
                }
                Ok(sub.entries)
            }
        }
    }

    /// Keeps a DB's figures for the report.
    fn note_db(&mut self, db: DbName, rec: &DbRecord, counts: &Counts) {
        self.dbs.push(DbPages {
            db,
            depth: rec.depth,
            branch_pages: counts.branch + counts.sub_branch,
            leaf_pages: counts.leaf + counts.sub_leaf,
            overflow_pages: counts.overflow,
            entries: counts.entries,
        });
    }

    /// Reads the free-DB records from the free-DB leaves walked: keys are txn ids not
    /// after this snapshot; values list free pages.
    fn free_records(&mut self, snapshot_txnid: u64) -> Result<()> {
        let src = self.src;
        for leaf in std::mem::take(&mut self.free_leaves) {
            let page = match view(src, leaf) {
                Ok(page) => page,
                Err(e) => return self.found(ProblemKind::BadPage, leaf, e),
            };
            for i in 0..page.num_keys() {
                let record = page.node(i).and_then(|node| {
                    let value = node_value(src, &node)?;
                    Ok((node.key, value))
                });
                let (key, value) = match record {
                    Ok(record) => record,
                    Err(e) => {
                        self.found(ProblemKind::BadFreeRecord, leaf, e)?;
                        continue;
                    }
                };
                let Ok(txnid) = <[u8; 8]>::try_from(key).map(u64::from_le_bytes) else {
                    self.problem(
                        ProblemKind::BadFreeRecord,
                        leaf,
                        "free-DB key is not 8 bytes",
                    )?;
                    continue;
                };
                if txnid > snapshot_txnid {
                    self.problem(
                        ProblemKind::BadFreeRecord,
                        leaf,
                        "free-DB record from a future txn",
                    )?;
                    continue;
                }
                let pages = match decode_idl(value, leaf) {
                    Ok(pages) => pages,
                    Err(e) => {
                        self.found(ProblemKind::BadFreeRecord, leaf, e)?;
                        continue;
                    }
                };
                for p in pages {
                    let range = (ProblemKind::PageOutOfRange, "free page outside the file");
                    if self.mark(p, 1, Owner::Free, range)? {
                        self.report.free_pages += 1;
                    }
                }
            }
        }
        Ok(())
    }

    /// Pages neither reachable nor free.
    fn leaked(&mut self) -> Result<()> {
        for p in 2..=self.last_pgno {
            if self.owner[p as usize] == Owner::Nobody {
                self.problem(
                    ProblemKind::LeakedPage,
                    p,
                    "page neither reachable nor free (leaked)",
                )?;
            }
        }
        Ok(())
    }
}

/// The walk, in either mode.
fn walk<S: PageSource + ?Sized>(
    src: &S,
    meta: &Meta,
    orders_for: OrdersFor<'_>,
    collect: Option<Collected>,
    progress: Option<&dyn Fn(u64)>,
) -> (Result<()>, CheckDetails) {
    let mut w = Walker {
        src,
        orders_for,
        last_pgno: meta.last_pgno,
        owner: Vec::new(),
        report: CheckReport {
            min_leaf_fill: 1000,
            ..Default::default()
        },
        db: None,
        free_leaves: Vec::new(),
        dbs: Vec::new(),
        collect,
        accounted: 2,
        progress,
    };
    let result = walk_all(&mut w, meta);
    let mut details = CheckDetails {
        counts: w.report,
        txnid: meta.txnid,
        last_pgno: meta.last_pgno,
        page_size: src.page_size(),
        dbs: w.dbs,
        ..CheckDetails::default()
    };
    if let Some(c) = w.collect {
        details.problems = c.problems;
        details.problem_count = c.count;
        details.by_kind = ProblemKind::ALL
            .iter()
            .zip(c.by_kind)
            .filter(|(_, n)| *n > 0)
            .map(|(&k, n)| (k, n))
            .collect();
    }
    (result, details)
}

fn walk_all<S: PageSource + ?Sized>(w: &mut Walker<'_, S>, meta: &Meta) -> Result<()> {
    // The page map is as long as the snapshot: only once its last page is known to be in
    // the file (a damaged meta may name any page).
    if meta.last_pgno >= 2 {
        if let Err(e) = w.src.page(meta.last_pgno) {
            return w.found(ProblemKind::BadMeta, meta.last_pgno, e);
        }
    }
    w.owner = vec![Owner::Nobody; meta.last_pgno as usize + 1];
    if w.collect.is_some() {
        metas(w, meta)?;
    }
    let main = (w.orders_for)(None, meta.main_db.flags);
    w.db = Some(DbName::Main);
    let counts = w.tree(&meta.main_db, main.key, main.dup, TreeKind::Main)?;
    // The main DB first in the list, before the named DBs found in it.
    w.note_db(DbName::Main, &meta.main_db, &counts);
    w.dbs.rotate_right(1);
    w.db = Some(DbName::Free);
    let counts = w.tree(&meta.free_db, KeyCmp::Integer, None, TreeKind::Free)?;
    w.note_db(DbName::Free, &meta.free_db, &counts);
    w.free_records(meta.txnid)?;
    w.db = None;
    w.leaked()
}

/// A snapshot's pages with its two meta pages: a txn's page source serves only pages from
/// 2 on (a tree that points at a meta is damaged), so the report's check of the metas
/// gets them here, as `pages(0, 2)` and only so.
pub(crate) struct WithMetas<'a, S: PageSource + ?Sized> {
    /// The snapshot's pages.
    pub pages: &'a S,
    /// Pages 0 and 1.
    pub metas: &'a [u8],
}

impl<S: PageSource + ?Sized> PageSource for WithMetas<'_, S> {
    fn page_size(&self) -> usize {
        self.pages.page_size()
    }

    fn pages(&self, pgno: u64, count: usize) -> Result<&[u8]> {
        if (pgno, count) == (0, 2) {
            return Ok(self.metas);
        }
        self.pages.pages(pgno, count)
    }
}

/// The two meta pages, when `src` holds them: each must be a meta, the current one must
/// be `meta`, and the other an older snapshot within the file. A meta whose checksum does
/// not match is the torn write of a commit that did not happen, which the next commit
/// overwrites: not a problem.
fn metas<S: PageSource + ?Sized>(w: &mut Walker<'_, S>, meta: &Meta) -> Result<()> {
    let Ok(pages) = w.src.pages(0, 2) else {
        return Ok(());
    };
    let ps = w.src.page_size();
    if meta.page_size() != ps {
        w.problem(
            ProblemKind::BadMeta,
            0,
            "the meta's page size is not the file's",
        )?;
    }
    let mut current = 0;
    for which in 0..2u64 {
        let page = &pages[which as usize * ps..(which as usize + 1) * ps];
        match Meta::decode(page, which) {
            Ok((m, _)) if m == *meta => current += 1,
            Ok((m, _)) if m.txnid >= meta.txnid => {
                w.problem(
                    ProblemKind::BadMeta,
                    which,
                    "meta page as new as the current one, but another",
                )?;
            }
            Ok((m, _)) if !m.fits_file(meta.last_pgno + 1) => {
                w.problem(
                    ProblemKind::BadMeta,
                    which,
                    "older meta page names pages past the current snapshot",
                )?;
            }
            Ok(_) | Err(Error::Corrupted { .. }) => {}
            Err(e) => w.found(ProblemKind::BadMeta, which, e)?,
        }
    }
    if current == 0 {
        w.problem(
            ProblemKind::BadMeta,
            P_INVALID,
            "neither meta page holds the snapshot checked",
        )?;
    }
    Ok(())
}

/// Checks the snapshot described by `meta`, with the DBs' orders given by `orders_for`
/// (application comparators leave no trace in the file). Stops at the first problem.
pub fn check_snapshot_with<S: PageSource + ?Sized>(
    src: &S,
    meta: &Meta,
    orders_for: OrdersFor<'_>,
) -> Result<CheckReport> {
    let (result, details) = walk(src, meta, orders_for, None, None);
    result.map(|()| details.counts)
}

/// Checks the snapshot described by `meta` as `check_snapshot_with` does, but goes on
/// past every problem and returns them all, with each DB's figures. Never fails: a page
/// that cannot be read is a problem like any other.
///
/// `src` serves the snapshot's pages (and pages 0 and 1, if it can, for the meta pages'
/// check), e.g. a map of the data file while a read txn of the snapshot is open.
pub fn check_report<S: PageSource + ?Sized>(
    src: &S,
    meta: &Meta,
    orders_for: OrdersFor<'_>,
    options: CheckOptions<'_>,
) -> CheckDetails {
    let collect = Collected {
        max: options.max_problems,
        problems: Vec::new(),
        count: 0,
        by_kind: [0; ProblemKind::ALL.len()],
    };
    let (result, details) = walk(src, meta, orders_for, Some(collect), options.progress);
    debug_assert!(
        result.is_ok(),
        "collecting never stops the walk: {result:?}"
    );
    details
}
