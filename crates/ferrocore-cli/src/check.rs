//! `ferrocore check`: verifies every page of an environment's latest snapshot, the free
//! list and the tree invariants, and reports every problem it finds (the first 100 in
//! full, the rest counted), as text or with `--json` as one JSON object.
//!
//! Exit status: 0 when clean, 1 when problems were found, 2 when the environment cannot
//! be opened or read at all (no report then; with `--json`, an object with `"error"`).

use std::path::PathBuf;

use ferrocore::{CheckDetails, CheckOptions, DbName};
use serde_json::{json, Value};

use crate::envpath::EnvPath;
use crate::failure::{Failure, Outcome};
use crate::output::Output;
use crate::progress::{Progress, ProgressArgs, Unit};

/// Exit status of a check that found problems.
const DAMAGED: u8 = 1;
/// Exit status of a check that could not read the environment.
const UNREADABLE: u8 = 2;

/// Options of `ferrocore check`.
#[derive(clap::Args, Debug)]
#[command(
    display_name = "ferrocore",
    about = "Verify every page, the free list and the tree invariants",
    long_about = "Verify the latest snapshot of an environment: every page reachable exactly \
                  once from the trees or listed once in the free DB (no leaked, doubly used \
                  or both free and used page), key order within and across pages, tree shape, \
                  DUPSORT values and sub-DBs, overflow runs, the meta pages, and the figures \
                  of every DB record. Every problem is reported (the first 100 in full), \
                  with its kind, page and DB.\n\n\
                  Exit status: 0 when clean, 1 when problems were found, 2 when the \
                  environment cannot be opened or read at all."
)]
pub struct Args {
    /// PATH is the data file itself, not the environment's directory (MDB_NOSUBDIR).
    #[arg(short = 'n', long = "no-subdir")]
    no_subdir: bool,
    /// Print the report as one JSON object.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    progress: ProgressArgs,
    /// The environment's directory (or data file with -n).
    path: PathBuf,
}

/// Runs `ferrocore check`.
pub fn run(args: &Args) -> Outcome {
    let at = EnvPath::new(args.path.clone(), args.no_subdir);
    let details = match check(&at, args.progress) {
        Ok(details) => details,
        Err(failure) => {
            if args.json {
                let mut out = Output::stdout();
                let error = json!({
                    "path": at.path.display().to_string(),
                    "ok": false,
                    "error": failure.to_string(),
                });
                out.line(error.to_string())?;
                out.finish()?;
            }
            return Err(failure.with_status(UNREADABLE));
        }
    };
    let mut out = Output::stdout();
    if args.json {
        out.line(to_json(&at, &details).to_string())?;
    } else {
        text_report(&details, &mut out)?;
    }
    out.finish()?;
    if details.is_clean() {
        return Ok(());
    }
    let n = details.problem_count;
    Err(Failure::new(format!(
        "{}: MDB_CORRUPTED: {n} problem{} found",
        at.path.display(),
        if n == 1 { "" } else { "s" }
    ))
    .with_status(DAMAGED))
}

/// Checks the environment's latest snapshot, through a read txn that keeps its pages.
fn check(at: &EnvPath, progress: ProgressArgs) -> Outcome<CheckDetails> {
    let env = at.open_existing(true, 0)?;
    let txn = env.begin_read().map_err(|e| at.failure(e))?;
    let last_pgno = txn.meta().last_pgno;
    let mut progress = Progress::new(progress, "check", Some(last_pgno + 1), Unit::Pages);
    let pages_done = |n: u64| progress.set(n);
    let options = CheckOptions {
        progress: Some(&pages_done),
        ..CheckOptions::default()
    };
    // Each DB's flags give its orders (the file keeps no trace of application
    // comparators), as for LMDB's tools: this environment was opened with none.
    let details = txn.check_report(options).map_err(|e| at.failure(e))?;
    progress.finish();
    Ok(details)
}

/// The readable report: the verdict, the snapshot, each DB's figures, the problems.
fn text_report(d: &CheckDetails, out: &mut Output) -> Outcome {
    let c = &d.counts;
    if d.is_clean() {
        out.line(format!(
            "ok: {} tree pages, {} free pages, {} named DBs, lowest leaf fill {}‰",
            c.tree_pages, c.free_pages, c.named_dbs, c.min_leaf_fill
        ))?;
    } else {
        let kinds: Vec<String> = d.by_kind.iter().map(|(k, n)| format!("{k}: {n}")).collect();
        out.line(format!(
            "CORRUPTED: {} problem{} ({})",
            d.problem_count,
            if d.problem_count == 1 { "" } else { "s" },
            kinds.join(", ")
        ))?;
    }
    out.line(format!(
        "Snapshot: txn {}, last page {}, page size {}",
        d.txnid, d.last_pgno, d.page_size
    ))?;
    for db in &d.dbs {
        out.line(format!(
            "  {}: depth {}, {} branch, {} leaf, {} overflow pages, {} entries",
            db.db, db.depth, db.branch_pages, db.leaf_pages, db.overflow_pages, db.entries
        ))?;
    }
    out.line(format!(
        "  pages: {} in trees, {} free, 2 meta, of {} in the snapshot",
        c.tree_pages,
        c.free_pages,
        d.last_pgno + 1
    ))?;
    if d.is_clean() {
        return Ok(());
    }
    out.line("Problems:")?;
    for p in &d.problems {
        out.line(format!("  {p}"))?;
    }
    let unlisted = d.problem_count - d.problems.len() as u64;
    if unlisted > 0 {
        out.line(format!("  ... and {unlisted} more"))?;
    }
    Ok(())
}

/// A DB's name in JSON: "main", "free", or the named DB's name (invalid UTF-8 replaced).
fn db_json(db: &DbName) -> Value {
    match db {
        DbName::Main => json!({"kind": "main"}),
        DbName::Free => json!({"kind": "free"}),
        DbName::Named(name) => json!({"kind": "named", "name": String::from_utf8_lossy(name)}),
    }
}

/// The report as JSON: the same figures and problems as the text.
fn to_json(at: &EnvPath, d: &CheckDetails) -> Value {
    let c = &d.counts;
    let dbs: Vec<Value> = d
        .dbs
        .iter()
        .map(|db| {
            json!({
                "db": db_json(&db.db),
                "depth": db.depth,
                "branch_pages": db.branch_pages,
                "leaf_pages": db.leaf_pages,
                "overflow_pages": db.overflow_pages,
                "entries": db.entries,
            })
        })
        .collect();
    let problems: Vec<Value> = d
        .problems
        .iter()
        .map(|p| {
            json!({
                "kind": p.kind.id(),
                "description": p.kind.to_string(),
                "pgno": p.pgno,
                "db": p.db.as_ref().map(db_json),
                "what": p.what,
            })
        })
        .collect();
    let by_kind: serde_json::Map<String, Value> = d
        .by_kind
        .iter()
        .map(|(k, n)| (k.id().to_owned(), json!(n)))
        .collect();
    json!({
        "path": at.path.display().to_string(),
        "ok": d.is_clean(),
        "txnid": d.txnid,
        "last_pgno": d.last_pgno,
        "page_size": d.page_size,
        "tree_pages": c.tree_pages,
        "free_pages": c.free_pages,
        "named_dbs": c.named_dbs,
        "min_leaf_fill_permille": c.min_leaf_fill,
        "dbs": dbs,
        "problem_count": d.problem_count,
        "problems_by_kind": by_kind,
        "problems": problems,
        "problems_not_listed": d.problem_count - d.problems.len() as u64,
    })
}
