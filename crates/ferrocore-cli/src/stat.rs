//! `ferrocore stat`: an environment's figures, worded as LMDB's `mdb_stat` words them, with
//! its flags: `-e` environment, `-f`/`-ff`/`-fff` free list, `-r`/`-rr` reader table,
//! `-a`/`-s` named DBs. With none of those it prints as `-e` (the environment and the main
//! DB), which is what `ferrocore stat` always printed.

use std::path::PathBuf;

use ferrocore::{Database, Env, EnvInfo, ReadTxn, Stat};
use serde_json::{json, Map, Value};

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
    /// Print the same figures as one JSON object (keys: environment, readers,
    /// stale_readers_cleared, readers_after_check, freelist, db, dbs; each present when
    /// the text would show that section).
    #[arg(long)]
    json: bool,
    /// The environment's directory (or data file with -n).
    path: PathBuf,
}

impl Args {
    /// True if the environment's section is shown: with -e, or with no section asked for.
    fn show_env(&self) -> bool {
        let any_section =
            self.env_info || self.free > 0 || self.readers > 0 || self.all || self.subdb.is_some();
        self.env_info || !any_section
    }

    /// True if the reader table is all that is shown after the environment (as mdb_stat:
    /// -r alone ends there).
    fn readers_only(&self) -> bool {
        self.readers > 0 && !(self.subdb.is_some() || self.all || self.free > 0)
    }
}

/// Runs `ferrocore stat`.
pub fn run(args: &Args) -> Outcome {
    let at = EnvPath::new(args.path.clone(), args.no_subdir);
    let env = at.open_for_reading(args.all)?;
    if args.json {
        return run_json(args, &at, &env);
    }
    let show_env = args.show_env();
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
    if args.readers_only() {
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
    for (txnid, pages) in free_records(at, txn)? {
        total += pages.len() as u64;
        if level > 1 {
            free_record_lines(txnid, &pages, level > 2, out)?;
        }
    }
    out.line(format!("  Free pages: {total}"))
}

/// Every free-DB record, decoded (see [`free_record`]); a malformed one is a failure.
fn free_records(at: &EnvPath, txn: &ReadTxn<'_>) -> Outcome<Vec<(u64, Vec<u64>)>> {
    let mut records = Vec::new();
    let mut cursor = txn.cursor(Database::FREE).map_err(|e| at.failure(e))?;
    while let Some((key, value)) = cursor.next().map_err(|e| at.failure(e))? {
        records.push(free_record(key, value).ok_or_else(|| {
            Failure::new(format!(
                "{}: a free-list record is malformed ({} byte key, {} byte value)",
                at.path.display(),
                key.len(),
                value.len()
            ))
        })?);
    }
    Ok(records)
}

/// A free-DB record: the txn id, and the page numbers (LMDB's IDL: a count, then the pages
/// in descending order, all native 64-bit words).
pub fn free_record(key: &[u8], value: &[u8]) -> Option<(u64, Vec<u64>)> {
    let word = |b: &[u8]| u64::from_le_bytes(b.try_into().expect("8 bytes"));
    let txnid = word(key.get(..8)?);
    let count = usize::try_from(word(value.get(..8)?)).ok()?;
    let words = value.get(8..8 + count.checked_mul(8)?)?;
    Some((txnid, words.chunks_exact(8).map(word).collect()))
}

/// mdb_stat's lines for one free-DB record: its figures (`free_span`) and with `runs`
/// each run of consecutive pages (`free_runs`).
fn free_record_lines(txnid: u64, pages: &[u64], runs: bool, out: &mut Output) -> Outcome {
    let n = pages.len();
    let (span, bad) = free_span(pages);
    let bad = if bad { " [bad sequence]" } else { "" };
    out.line(format!(
        "    Transaction {txnid}, {n} pages, maxspan {span}{bad}"
    ))?;
    if runs {
        for (pg, run) in free_runs(pages) {
            if run > 1 {
                out.line(format!("     {pg:>9}[{run}]"))?;
            } else {
                out.line(format!("     {pg:>9}"))?;
            }
        }
    }
    Ok(())
}

/// mdb_stat's arithmetic for a free-DB record (its pages in descending order): the pages
/// are scanned from the smallest, `maxspan` is the longest run of consecutive numbers, and
/// a number not above the previous one marks the record a bad sequence. Returns (maxspan,
/// bad sequence).
pub fn free_span(pages: &[u64]) -> (usize, bool) {
    let n = pages.len() as isize;
    let at = |i: isize| pages[i as usize];
    let mut bad = false;
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
            bad = true;
        }
        prev = pg;
        pg = pg.wrapping_add(span as u64);
        while i >= span && at(i - span) == pg {
            span += 1;
            pg = pg.wrapping_add(1);
        }
    }
    (span as usize, bad)
}

/// The runs of consecutive pages of a free-DB record, as `mdb_stat -fff` lists them: from
/// the smallest page, (first page, length).
pub fn free_runs(pages: &[u64]) -> Vec<(u64, usize)> {
    let n = pages.len() as isize;
    let at = |i: isize| pages[i as usize];
    let mut runs = Vec::new();
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
        runs.push((pg, run as usize));
    }
    runs
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

/// `--json`: the figures the text would show, as one JSON object.
fn run_json(args: &Args, at: &EnvPath, env: &Env) -> Outcome {
    let mut report = Map::new();
    // Read before our read txn, as for the text.
    let info = if args.show_env() {
        Some(env.info().map_err(|e| at.failure(e))?)
    } else {
        None
    };
    if args.readers > 0 {
        report.insert("readers".into(), readers_json(env));
        if args.readers > 1 {
            let cleared = env.reader_check().map_err(|e| at.failure(e))?;
            report.insert("stale_readers_cleared".into(), json!(cleared));
            report.insert("readers_after_check".into(), readers_json(env));
        }
    }
    let txn = env.begin_read().map_err(|e| at.failure(e))?;
    if let Some(info) = info {
        report.insert("environment".into(), env_json(env, &txn, &info));
    }
    let mut incomplete = Ok(());
    if !args.readers_only() {
        if args.free > 0 {
            report.insert("freelist".into(), free_json(at, &txn, args.free)?);
        }
        let db = txn
            .open_db(args.subdb.as_deref())
            .map_err(|e| match &args.subdb {
                Some(name) => Failure::new(format!("{}: database {name}: {e}", at.path.display())),
                None => at.failure(e),
            })?;
        let stat = txn.db_stat(db).map_err(|e| at.failure(e))?;
        report.insert("db".into(), db_json(args.subdb.as_deref(), &stat));
        if args.all {
            let candidates = envpath::candidate_names(&txn).map_err(|e| at.failure(e))?;
            let mut dbs = Vec::new();
            // A DB that cannot be opened is reported and fails the command, after the rest.
            incomplete = envpath::each_named_db(at, &txn, &candidates, |name, db| {
                let stat = txn.db_stat(db).map_err(|e| at.failure(e))?;
                dbs.push(db_json(Some(&name), &stat));
                Ok(())
            });
            report.insert("dbs".into(), Value::Array(dbs));
        }
    }
    let mut out = Output::stdout();
    out.line(Value::Object(report).to_string())?;
    out.finish()?;
    incomplete
}

/// `-e`'s figures.
fn env_json(env: &Env, txn: &ReadTxn<'_>, info: &EnvInfo) -> Value {
    let page_size = env.page_size() as u64;
    let map_size = envpath::lmdb_map_size(txn.meta(), env.page_size());
    let address = match txn.meta().address {
        0 => Value::Null,
        a => json!(a),
    };
    json!({
        "map_address": address,
        "map_size": map_size,
        "page_size": page_size,
        "max_pages": map_size / page_size,
        "pages_used": info.last_pgno + 1,
        "last_txnid": info.last_txnid,
        "max_readers": info.max_readers,
        "readers_used": info.num_readers,
        "oldest_reader_lag": info.oldest_reader_lag,
        "pinned_pages": info.pinned_pages,
    })
}

/// The reader table: pid (as a C int, as LMDB prints it), thread, txn id (null if the
/// slot holds no snapshot).
fn readers_json(env: &Env) -> Value {
    env.readers()
        .into_iter()
        .map(|(pid, thread, snapshot)| json!({"pid": pid as i32, "thread": thread, "txnid": snapshot}))
        .collect()
}

/// A tree's figures; `name` for a named DB.
fn db_json(name: Option<&str>, stat: &Stat) -> Value {
    json!({
        "name": name,
        "depth": stat.depth,
        "branch_pages": stat.branch_pages,
        "leaf_pages": stat.leaf_pages,
        "overflow_pages": stat.overflow_pages,
        "entries": stat.entries,
    })
}

/// `-f`: the free DB's figures and free pages; with `-ff` each record (txn, pages,
/// maxspan, bad sequence), with `-fff` its runs.
fn free_json(at: &EnvPath, txn: &ReadTxn<'_>, level: u8) -> Outcome<Value> {
    let stat = txn.db_stat(Database::FREE).map_err(|e| at.failure(e))?;
    let mut total = 0u64;
    let mut records = Vec::new();
    for (txnid, pages) in free_records(at, txn)? {
        total += pages.len() as u64;
        if level > 1 {
            let (maxspan, bad) = free_span(&pages);
            let mut record = json!({
                "txnid": txnid,
                "pages": pages.len(),
                "maxspan": maxspan,
                "bad_sequence": bad,
            });
            if level > 2 {
                let runs: Vec<Value> = free_runs(&pages)
                    .into_iter()
                    .map(|(pgno, pages)| json!({"pgno": pgno, "pages": pages}))
                    .collect();
                record["runs"] = Value::Array(runs);
            }
            records.push(record);
        }
    }
    let mut free = db_json(None, &stat);
    if let Value::Object(fields) = &mut free {
        fields.remove("name");
    }
    free["free_pages"] = json!(total);
    if level > 1 {
        free["records"] = Value::Array(records);
    }
    Ok(free)
}
