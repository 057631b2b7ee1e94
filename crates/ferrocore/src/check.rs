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

use std::cmp::Ordering;

use crate::btree::{view, MAX_DEPTH};
use crate::error::{Error, Result};
use crate::format::idl::decode_idl;
use crate::format::meta::{DbRecord, Meta};
use crate::format::page::OverflowView;
use crate::format::page::{node_flags, P_INVALID};
use crate::order::KeyCmp;
use crate::store::PageSource;

/// What the checker counted.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CheckReport {
    /// Pages reachable from the trees (free DB included).
    pub tree_pages: u64,
    /// Pages listed in free-DB records.
    pub free_pages: u64,
    /// Named databases found in the main DB.
    pub named_dbs: u64,
    /// Lowest fill (per-mille) of a non-root leaf, or 1000 if there is none.
    pub min_leaf_fill: usize,
}

/// The orders of a DB in the snapshot: by name (`None` for the main DB) and flags.
pub type OrdersFor<'a> = &'a dyn Fn(Option<&[u8]>, u16) -> crate::order::Orders;

struct Walker<'a, S: PageSource + ?Sized> {
    src: &'a S,
    orders_for: OrdersFor<'a>,
    last_pgno: u64,
    seen: Vec<bool>,
    report: CheckReport,
}

#[derive(Default)]
struct Counts {
    branch: u64,
    leaf: u64,
    overflow: u64,
    entries: u64,
}

impl<S: PageSource + ?Sized> Walker<'_, S> {
    fn mark(&mut self, pgno: u64, count: u64, what: &'static str) -> Result<()> {
        for p in pgno..pgno + count {
            if p < 2 || p > self.last_pgno {
                return Err(Error::corrupted(p, what));
            }
            if std::mem::replace(&mut self.seen[p as usize], true) {
                return Err(Error::corrupted(
                    p,
                    "page referenced twice (or both used and free)",
                ));
            }
        }
        Ok(())
    }

    fn tree(
        &mut self,
        db: &DbRecord,
        cmp: KeyCmp,
        dup: Option<KeyCmp>,
        is_main: bool,
    ) -> Result<Counts> {
        let mut counts = Counts::default();
        if db.root == P_INVALID {
            if db.depth != 0
                || db.entries != 0
                || db.leaf_pages + db.branch_pages + db.overflow_pages != 0
            {
                return Err(Error::corrupted(
                    P_INVALID,
                    "empty tree with non-zero counts",
                ));
            }
            return Ok(counts);
        }
        if db.depth == 0 || db.depth as usize > MAX_DEPTH {
            return Err(Error::corrupted(db.root, "tree depth out of range"));
        }
        self.page(
            db.root,
            0,
            db.depth as usize,
            None,
            None,
            (cmp, dup),
            is_main,
            &mut counts,
        )?;
        // LMDB 0.9.36 lets a DUPSORT DB's branch/leaf counts drift (FORMAT.md): informational.
        if dup.is_none() && (counts.branch != db.branch_pages || counts.leaf != db.leaf_pages) {
            return Err(Error::corrupted(
                db.root,
                "branch/leaf page counts differ from the tree",
            ));
        }
        if counts.overflow != db.overflow_pages {
            return Err(Error::corrupted(
                db.root,
                "overflow page count differs from the tree",
            ));
        }
        if counts.entries != db.entries {
            return Err(Error::corrupted(
                db.root,
                "entry count differs from the tree",
            ));
        }
        Ok(counts)
    }

    #[allow(clippy::too_many_arguments)]
    fn page(
        &mut self,
        pgno: u64,
        level: usize,
        depth: usize,
        lower: Option<&[u8]>,
        upper: Option<&[u8]>,
        (cmp, dup): (KeyCmp, Option<KeyCmp>),
        is_main: bool,
        counts: &mut Counts,
    ) -> Result<()> {
        self.mark(pgno, 1, "tree page outside the file")?;
        self.report.tree_pages += 1;
        let src = self.src;
        let page = view(src, pgno)?;
        let n = page.num_keys();
        if page.is_leaf() != (level + 1 == depth) {
            return Err(Error::corrupted(
                pgno,
                "page type does not match its level (leaves at unequal depth)",
            ));
        }
        let first_key = usize::from(page.is_branch());
        for i in first_key..n {
            let k = page.key(i)?;
            if i > first_key && cmp.compare(page.key(i - 1)?, k) != Ordering::Less {
                return Err(Error::corrupted(pgno, "keys out of order within the page"));
            }
            if lower.is_some_and(|lo| cmp.compare(k, lo) == Ordering::Less) {
                return Err(Error::corrupted(pgno, "key below its parent's separator"));
            }
            if upper.is_some_and(|hi| cmp.compare(k, hi) != Ordering::Less) {
                return Err(Error::corrupted(pgno, "key not below the next separator"));
            }
        }
        if page.is_branch() {
            counts.branch += 1;
            if n < 2 {
                return Err(Error::corrupted(
                    pgno,
                    "branch page with fewer than 2 nodes",
                ));
            }
            for i in 0..n {
                let lo = if i == 0 { lower } else { Some(page.key(i)?) };
                let hi = if i + 1 < n {
                    Some(page.key(i + 1)?)
                } else {
                    upper
                };
                self.page(
                    page.child(i)?,
                    level + 1,
                    depth,
                    lo,
                    hi,
                    (cmp, dup),
                    is_main,
                    counts,
                )?;
            }
            return Ok(());
        }
        counts.leaf += 1;
        if level > 0 {
            if n == 0 {
                return Err(Error::corrupted(pgno, "empty non-root leaf"));
            }
            self.report.min_leaf_fill = self.report.min_leaf_fill.min(page.fill_permille());
        }
        for i in 0..n {
            let node = page.node(i)?;
            counts.entries += 1;
            if node.flags & node_flags::DUPDATA != 0 {
                let Some(dcmp) = dup else {
                    return Err(Error::corrupted(
                        pgno,
                        "duplicate values in a DB without DUPSORT",
                    ));
                };
                counts.entries += self.dups(&node, pgno, dcmp)? - 1;
                continue;
            }
            if node.flags & node_flags::BIGDATA != 0 {
                let run = node.overflow_pgno();
                let header = OverflowView::parse(src.page(run)?, run)?;
                header.check_holds(src.page_size(), node.data_size())?;
                let pages = header.pages as u64;
                self.mark(run, pages, "overflow run outside the file")?;
                self.report.tree_pages += pages;
                counts.overflow += pages;
            } else if node.flags & node_flags::SUBDATA != 0 && is_main {
                if node.data.len() != DbRecord::SIZE {
                    return Err(Error::corrupted(pgno, "named DB record of the wrong size"));
                }
                let sub = DbRecord::decode(node.data);
                self.report.named_dbs += 1;
                let orders = (self.orders_for)(Some(node.key), sub.flags);
                self.tree(&sub, orders.key, orders.dup, false)?;
            }
        }
        Ok(())
    }
}

impl<S: PageSource + ?Sized> Walker<'_, S> {
    /// Checks the value set of a DUPSORT node; returns its number of values.
    fn dups(
        &mut self,
        node: &crate::format::page::Node<'_>,
        pgno: u64,
        dcmp: KeyCmp,
    ) -> Result<u64> {
        match crate::dupsort::dups_of(node, pgno)? {
            crate::dupsort::Dups::Single(_) => Ok(1),
            crate::dupsort::Dups::SubPage(sub) => {
                for i in 1..sub.num_keys() {
                    if dcmp.compare(sub.key(i - 1)?, sub.key(i)?) != Ordering::Less {
                        return Err(Error::corrupted(
                            pgno,
                            "duplicate values out of order in a sub-page",
                        ));
                    }
                }
                Ok(sub.num_keys() as u64)
            }
            crate::dupsort::Dups::SubDb(rec) => {
                let counts = self.tree(&rec, dcmp, None, false)?;
                if counts.entries == 0 {
                    return Err(Error::corrupted(pgno, "empty duplicate sub-DB"));
                }
                Ok(counts.entries)
            }
        }
    }
}

/// Checks the snapshot described by `meta`, with the DBs' orders given by `orders_for`
/// (application comparators leave no trace in the file).
pub fn check_snapshot_with<S: PageSource + ?Sized>(
    src: &S,
    meta: &Meta,
    orders_for: OrdersFor<'_>,
) -> Result<CheckReport> {
    let mut w = Walker {
        src,
        orders_for,
        last_pgno: meta.last_pgno,
        seen: vec![false; meta.last_pgno as usize + 1],
        report: CheckReport {
            min_leaf_fill: 1000,
            ..Default::default()
        },
    };
    let main = orders_for(None, meta.main_db.flags);
    w.tree(&meta.main_db, main.key, main.dup, true)?;
    w.tree(&meta.free_db, KeyCmp::Integer, None, false)?;
    // Free-DB records: keys are txn ids not after this snapshot; values list free pages.
    let mut pos = crate::btree::Position::default();
    let mut more = pos.first(src, &meta.free_db)?;
    while more {
        let (key, value) = pos.current(src)?;
        let txnid = <[u8; 8]>::try_from(key)
            .map(u64::from_le_bytes)
            .map_err(|_| Error::corrupted(pos.path.leaf(), "free-DB key is not 8 bytes"))?;
        if txnid > meta.txnid {
            return Err(Error::corrupted(
                pos.path.leaf(),
                "free-DB record from a future txn",
            ));
        }
        let pages = decode_idl(value, pos.path.leaf())?;
        if pages.windows(2).any(|p| p[0] <= p[1]) {
            return Err(Error::corrupted(
                pos.path.leaf(),
                "free-DB record not strictly descending",
            ));
        }
        for p in pages {
            w.mark(p, 1, "free page outside the file")?;
            w.report.free_pages += 1;
        }
        more = pos.next(src, &meta.free_db)?;
    }
    if let Some(p) = (2..=meta.last_pgno).find(|&p| !w.seen[p as usize]) {
        return Err(Error::corrupted(
            p,
            "page neither reachable nor free (leaked)",
        ));
    }
    Ok(w.report)
}
