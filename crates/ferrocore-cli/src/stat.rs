//! `ferrocore stat`: an environment's figures, worded as LMDB's `mdb_stat` words them, with
//! its flags: `-e` environment, `-f`/`-ff`/`-fff` free list, `-r`/`-rr` reader table,
//! `-a`/`-s` named DBs. With none of those it prints as `-e` (the environment and the main
//! DB), which is what `ferrocore stat` always printed.

use std::path::PathBuf;

use ferrocore::{Database, Env, EnvInfo, ReadTxn, Stat};

use crate::envpath::{self, EnvPath};
use crate::failure::{Failure, Outcome};
use crate::output::Output;

/// Options of `ferrocore stat`, those of `mdb_stat`.
#[derive(clap::Args, Debug)]
#[command(
    display_name = "ferrocore",
    about = "Print an environment's statistics, as mdb_stat",
    long_about = "Print an environment's statistics, worded as mdb_stat's. Without -e, -f, \
                  -r, -a or -s: the environment (as -e) and the main DB. -e adds one line \
                  mdb_stat does not print: how far behind the oldest reader is and how many \
                  freed pages it keeps from reuse."
)]
pub struct Args {
    /// Print the environment's figures (map size, pages, last txn, readers).
    #[arg(short = 'e')]
    env_info: bool,
    /// Print the free list: -f totals, -ff each txn's freed pages, -fff every page run.
    #[arg(short = 'f', action = clap::ArgAction::Count)]
    free: u8,
    /// Print the reader table; -rr first clears the slots of dead processes.
    #[arg(short = 'r', action = clap::ArgAction::Count)]
    readers: u8,
    /// Print the main DB and every named DB.
    #[arg(short = 'a', conflicts_with = "subdb")]
    all: bool,
    /// Print the named DB NAME instead of the main DB.
    #[arg(short = 's', value_name = "NAME")]
    subdb: Option<String>,
    /// PATH is the data file itself, not the environment's directory (MDB_NOSUBDIR).
    #[arg(short = 'n', long = "no-subdir")]
    no_subdir: bool,
    /// The environment's directory (or data file with -n).
    path: PathBuf,
}

/// Runs `ferrocore stat`.
pub fn run(args: &Args) -> Outcome {
    let at = EnvPath::new(args.path.clone(), args.no_subdir);
    let env = at.open_for_reading(args.all)?;
    let any_section =
        args.env_info || args.free > 0 || args.readers > 0 || args.all || args.subdb.is_some();
    let show_env = args.env_info || !any_section;
    // What mdb_stat reads before its read txn is read here before ours, so that our own
    // reader slot is neither counted nor listed.
    let info = if show_env {
        Some(env.info().map_err(|e| at.failure(e))?)
    } else {
        None
    };
    let mut reader_lines = Vec::new();
    if args.readers > 0 {
        reader_lines.push("Reader Table Status".to_owned());
        reader_table(&env, &mut reader_lines);
        if args.readers > 1 {
            let cleared = env.reader_check().map_err(|e| at.failure(e))?;
            reader_lines.push(format!("  {cleared} stale readers cleared."));
            reader_table(&env, &mut reader_lines);
        }
    }
    let txn = env.begin_read().map_err(|e| at.failure(e))?;
    let mut out = Output::stdout();
    if let Some(info) = info {
        env_section(&env, &txn, &info, &mut out)?;
    }
    for line in &reader_lines {
        out.line(line)?;
    }
    // As mdb_stat: the reader table alone ends there.
    if args.readers > 0 && !(args.subdb.is_some() || args.all || args.free > 0) {
        return out.finish();
    }
    if args.free > 0 {
        free_section(&at, &txn, args.free, &mut out)?;
    }
    let db = txn
        .open_db(args.subdb.as_deref())
        .map_err(|e| match &args.subdb {
            Some(name) => Failure::new(format!("{}: database {name}: {e}", at.path.display())),
            None => at.failure(e),
        })?;
    let stat = txn.db_stat(db).map_err(|e| at.failure(e))?;
    out.line(format!(
        "Status of {}",
        args.subdb.as_deref().unwrap_or("Main DB")
    ))?;
    db_figures(&stat, &mut out)?;
    if args.all {
        all_dbs(&at, &txn, &mut out)?;
    }
    out.finish()
}

/// `-e`: mdb_stat's "Environment Info", then the oldest reader's cost.
fn env_section(env: &Env, txn: &ReadTxn<'_>, info: &EnvInfo, out: &mut Output) -> Outcome {
    let page_size = env.page_size() as u64;
    let map_size = envpath::lmdb_map_size(txn.meta(), env.page_size());
    let address = match txn.meta().address {
        0 => "(nil)".to_owned(), // C's %p
        a => format!("{a:#x}"),
    };
    out.line("Environment Info")?;
    out.line(format!("  Map address: {address}"))?;
    out.line(format!("  Map size: {map_size}"))?;
    out.line(format!("  Page size: {page_size}"))?;
    out.line(format!("  Max pages: {}", map_size / page_size))?;
    out.line(format!("  Number of pages used: {}", info.last_pgno + 1))?;
    out.line(format!("  Last transaction ID: {}", info.last_txnid))?;
    out.line(format!("  Max readers: {}", info.max_readers))?;
    out.line(format!("  Number of readers used: {}", info.num_readers))?;
    out.line(format!(
        "  Oldest reader: {} txns behind, pinning {} freed pages",
        info.oldest_reader_lag, info.pinned_pages
    ))
}

/// The reader table as `mdb_reader_list` prints it.
fn reader_table(env: &Env, lines: &mut Vec<String>) {
    let readers = env.readers();
    if readers.is_empty() {
        lines.push("(no active readers)".to_owned());
        return;
    }
    lines.push("    pid     thread     txnid".to_owned());
    for (pid, thread, snapshot) in readers {
        // LMDB prints the pid as a C int.
        let pid = pid as i32;
        lines.push(match snapshot {
            Some(txnid) => format!("{pid:>10} {thread:x} {txnid}"),
            None => format!("{pid:>10} {thread:x} -"),
        });
    }
}

/// A tree's figures, as mdb_stat's `prstat`.
fn db_figures(stat: &Stat, out: &mut Output) -> Outcome {
    out.line(format!("  Tree depth: {}", stat.depth))?;
    out.line(format!("  Branch pages: {}", stat.branch_pages))?;
    out.line(format!("  Leaf pages: {}", stat.leaf_pages))?;
    out.line(format!("  Overflow pages: {}", stat.overflow_pages))?;
    out.line(format!("  Entries: {}", stat.entries))
}

/// `-f`: the free DB's figures and, with `-ff`, each record (the txn that freed the pages,
/// their count and longest run of consecutive pages), with `-fff` every run.
fn free_section(at: &EnvPath, txn: &ReadTxn<'_>, level: u8, out: &mut Output) -> Outcome {
    out.line("Freelist Status")?;
    let stat = txn.db_stat(Database::FREE).map_err(|e| at.failure(e))?;
    db_figures(&stat, out)?;
    let mut total = 0u64;
    let mut cursor = txn.cursor(Database::FREE).map_err(|e| at.failure(e))?;
    while let Some((key, value)) = cursor.next().map_err(|e| at.failure(e))? {
        let (txnid, pages) = free_record(key, value).ok_or_else(|| {
            Failure::new(format!(
                "{}: a free-list record is malformed ({} byte key, {} byte value)",
                at.path.display(),
                key.len(),
                value.len()
            ))
        })?;
        total += pages.len() as u64;
        if level > 1 {
            free_record_lines(txnid, &pages, level > 2, out)?;
        }
    }
    out.line(format!("  Free pages: {total}"))
}

/// A free-DB record: the txn id, and the page numbers (LMDB's IDL: a count, then the pages
/// in descending order, all native 64-bit words).
fn free_record(key: &[u8], value: &[u8]) -> Option<(u64, Vec<u64>)> {
    let word = |b: &[u8]| u64::from_le_bytes(b.try_into().expect("8 bytes"));
    let txnid = word(key.get(..8)?);
    let count = usize::try_from(word(value.get(..8)?)).ok()?;
    let words = value.get(8..8 + count.checked_mul(8)?)?;
    Some((txnid, words.chunks_exact(8).map(word).collect()))
}

/// mdb_stat's lines for one free-DB record, its arithmetic included: the pages are scanned
/// from the smallest, `maxspan` is the longest run of consecutive numbers, and a number
/// not above the previous one marks the record `[bad sequence]`.
fn free_record_lines(txnid: u64, pages: &[u64], runs: bool, out: &mut Output) -> Outcome {
    let n = pages.len() as isize;
    let at = |i: isize| pages[i as usize];
    let mut bad = "";
    let mut span: isize = 0;
    let mut prev = 1u64;
    let mut i = n;
    loop {
        i -= 1;
        if i < 0 {
            break;
        }
        let mut pg = at(i);
        if pg <= prev {
            bad = " [bad sequence]";
        }
        prev = pg;
        pg = pg.wrapping_add(span as u64);
        while i >= span && at(i - span) == pg {
            span += 1;
            pg = pg.wrapping_add(1);
        }
    }
    out.line(format!(
        "    Transaction {txnid}, {n} pages, maxspan {span}{bad}"
    ))?;
    if runs {
        let mut j = n - 1;
        while j >= 0 {
            let pg = at(j);
            let mut run: isize = 1;
            loop {
                j -= 1;
                if j < 0 || at(j) != pg.wrapping_add(run as u64) {
                    break;
                }
                run += 1;
            }
            if run > 1 {
                out.line(format!("     {pg:>9}[{run}]"))?;
            } else {
                out.line(format!("     {pg:>9}"))?;
            }
        }
    }
    Ok(())
}

/// `-a`: every named DB after the main DB.
fn all_dbs(at: &EnvPath, txn: &ReadTxn<'_>, out: &mut Output) -> Outcome {
    let candidates = envpath::candidate_names(txn).map_err(|e| at.failure(e))?;
    envpath::each_named_db(at, txn, &candidates, |name, db| {
        let stat = txn.db_stat(db).map_err(|e| at.failure(e))?;
        out.line(format!("Status of {name}"))?;
        db_figures(&stat, out)
    })
}
