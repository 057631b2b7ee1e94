//! What a check finds: the counts of a clean snapshot, and for the operator's report
//! every problem with its kind, page and DB, and each DB's figures.

use std::fmt;

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

/// The kinds of problem [`ReadTxn::check_report`](crate::ReadTxn::check_report) finds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum ProblemKind {
    /// A meta page is not a valid meta, or names pages the file does not hold.
    BadMeta,
    /// A page number outside `2..=last_pgno` (a child pointer, a DB root, a free page).
    PageOutOfRange,
    /// A page that cannot be read as the page its reference says: bad header, a node or
    /// key outside the page.
    BadPage,
    /// A page of the wrong type for its level (leaves at unequal depths).
    WrongPageType,
    /// A page reached twice from the trees.
    ReachableTwice,
    /// A page both reachable from a tree and listed as free.
    FreeAndReachable,
    /// A page listed twice in the free DB.
    FreeTwice,
    /// A page neither reachable nor free.
    LeakedPage,
    /// Keys (or a DUPSORT key's values) not in strictly increasing order within a page,
    /// or outside the bounds their parent's separators set.
    KeysOutOfOrder,
    /// A tree of the wrong shape: a branch page with fewer than 2 nodes, an empty
    /// non-root leaf, a depth out of range.
    BadTreeShape,
    /// An overflow run with a bad header, too short for its value, or running past the
    /// last page.
    BadOverflow,
    /// A DB record (named DB or DUPSORT sub-DB) whose figures differ from its tree, or
    /// which is not a DB record at all.
    BadDbRecord,
    /// A DUPSORT value set that cannot be read, or a sub-DB that is empty.
    BadDuplicates,
    /// A free-DB record that is malformed or from a future txn.
    BadFreeRecord,
}

impl ProblemKind {
    /// Every kind, in the order reports list them.
    pub const ALL: [ProblemKind; 14] = [
        ProblemKind::BadMeta,
        ProblemKind::PageOutOfRange,
        ProblemKind::BadPage,
        ProblemKind::WrongPageType,
        ProblemKind::ReachableTwice,
        ProblemKind::FreeAndReachable,
        ProblemKind::FreeTwice,
        ProblemKind::LeakedPage,
        ProblemKind::KeysOutOfOrder,
        ProblemKind::BadTreeShape,
        ProblemKind::BadOverflow,
        ProblemKind::BadDbRecord,
        ProblemKind::BadDuplicates,
        ProblemKind::BadFreeRecord,
    ];

    /// A stable identifier (`leaked_page`, ...), for machine-readable reports.
    pub fn id(self) -> &'static str {
        match self {
            ProblemKind::BadMeta => "bad_meta",
            ProblemKind::PageOutOfRange => "page_out_of_range",
            ProblemKind::BadPage => "bad_page",
            ProblemKind::WrongPageType => "wrong_page_type",
            ProblemKind::ReachableTwice => "reachable_twice",
            ProblemKind::FreeAndReachable => "free_and_reachable",
            ProblemKind::FreeTwice => "free_twice",
            ProblemKind::LeakedPage => "leaked_page",
            ProblemKind::KeysOutOfOrder => "keys_out_of_order",
            ProblemKind::BadTreeShape => "bad_tree_shape",
            ProblemKind::BadOverflow => "bad_overflow",
            ProblemKind::BadDbRecord => "bad_db_record",
            ProblemKind::BadDuplicates => "bad_duplicates",
            ProblemKind::BadFreeRecord => "bad_free_record",
        }
    }
}

impl fmt::Display for ProblemKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ProblemKind::BadMeta => "bad meta page",
            ProblemKind::PageOutOfRange => "page number out of range",
            ProblemKind::BadPage => "unreadable page",
            ProblemKind::WrongPageType => "wrong page type",
            ProblemKind::ReachableTwice => "page reachable twice",
            ProblemKind::FreeAndReachable => "page both free and reachable",
            ProblemKind::FreeTwice => "page free twice",
            ProblemKind::LeakedPage => "leaked page",
            ProblemKind::KeysOutOfOrder => "keys out of order",
            ProblemKind::BadTreeShape => "bad tree shape",
            ProblemKind::BadOverflow => "bad overflow run",
            ProblemKind::BadDbRecord => "bad DB record",
            ProblemKind::BadDuplicates => "bad duplicates",
            ProblemKind::BadFreeRecord => "bad free-DB record",
        })
    }
}

/// Which DB a problem or a figure belongs to.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum DbName {
    /// The main DB.
    Main,
    /// The free DB (LMDB's FREE_DBI).
    Free,
    /// A named DB: its key in the main DB.
    Named(Vec<u8>),
}

impl fmt::Display for DbName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DbName::Main => f.write_str("main DB"),
            DbName::Free => f.write_str("free DB"),
            DbName::Named(name) => write!(f, "DB {:?}", String::from_utf8_lossy(name)),
        }
    }
}

/// One problem [`ReadTxn::check_report`](crate::ReadTxn::check_report) found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// What kind.
    pub kind: ProblemKind,
    /// The page it was found on, if it is about one.
    pub pgno: Option<u64>,
    /// The DB whose tree it was found in; `None` for the metas and page accounting.
    pub db: Option<DbName>,
    /// What exactly was wrong.
    pub what: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.kind)?;
        if let Some(pgno) = self.pgno {
            write!(f, ", page {pgno}")?;
        }
        if let Some(db) = &self.db {
            write!(f, ", {db}")?;
        }
        write!(f, ": {}", self.what)
    }
}

/// A DB's figures as the checker walked them (pages of DUPSORT sub-DBs included).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DbPages {
    /// Which DB.
    pub db: DbName,
    /// The depth its record gives.
    pub depth: u16,
    /// Branch pages walked.
    pub branch_pages: u64,
    /// Leaf pages walked.
    pub leaf_pages: u64,
    /// Overflow pages walked.
    pub overflow_pages: u64,
    /// Entries counted (each value of a DUPSORT DB).
    pub entries: u64,
}

/// How [`ReadTxn::check_report`](crate::ReadTxn::check_report) runs.
#[derive(Clone, Copy)]
pub struct CheckOptions<'a> {
    /// Problems kept in full; past these they are only counted.
    pub max_problems: usize,
    /// Called now and then (every few thousand pages) with the number of pages accounted
    /// for so far, out of `last_pgno + 1`.
    pub progress: Option<&'a dyn Fn(u64)>,
}

impl Default for CheckOptions<'_> {
    fn default() -> Self {
        CheckOptions {
            max_problems: 100,
            progress: None,
        }
    }
}

/// Everything [`ReadTxn::check_report`](crate::ReadTxn::check_report) found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CheckDetails {
    /// The totals (as far as the walk got).
    pub counts: CheckReport,
    /// The snapshot's txn id.
    pub txnid: u64,
    /// The snapshot's last page.
    pub last_pgno: u64,
    /// Page size in bytes.
    pub page_size: usize,
    /// Each DB walked: the main DB, the named DBs in key order, the free DB.
    pub dbs: Vec<DbPages>,
    /// The first problems found, in the order found.
    pub problems: Vec<Problem>,
    /// How many problems were found in all (`problems` holds the first of them).
    pub problem_count: u64,
    /// How many of each kind, in [`ProblemKind::ALL`]'s order, kinds found only.
    pub by_kind: Vec<(ProblemKind, u64)>,
}

impl CheckDetails {
    /// True if no problem was found.
    pub fn is_clean(&self) -> bool {
        self.problem_count == 0
    }
}
