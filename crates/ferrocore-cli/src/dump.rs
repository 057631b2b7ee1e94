//! `ferrocore dump`: an environment's DBs as text, as LMDB's `mdb_dump` writes them (the
//! format is described in `text.rs`), so either tool's output loads with either loader.

use std::path::PathBuf;

use ferrocore::{Database, ReadTxn};

use crate::envpath::{self, EnvPath};
use crate::failure::{Failure, Outcome};
use crate::output::Output;
use crate::progress::{Progress, ProgressArgs, Unit};
use crate::text::{self, FLAG_NAMES};

/// Options of `ferrocore dump`, those of `mdb_dump`.
#[derive(clap::Args, Debug)]
#[command(
    display_name = "ferrocore",
    about = "Write DBs as text, as mdb_dump does (load it back with `ferrocore load` or mdb_load)",
    long_about = "Write DBs as text, as LMDB's mdb_dump does, byte for byte: a header \
                  (VERSION=3, format, database=NAME for a named DB, type=btree, mapsize, \
                  maxreaders, the DB's flags, db_pagesize, HEADER=END), one line for each key \
                  and one for its value, and DATA=END.\n\n\
                  Without -a or -s, dumps the main DB. With -p, printable bytes appear as \
                  themselves, a backslash as \\\\ and other bytes as \\ and two hex digits \
                  (LMDB 0.9.25's rule: LMDB 0.9.24 wrote the backslash bare)."
)]
pub struct Args {
    /// Dump every named DB (each key of the main DB that names one; as mdb_dump -a, the
    /// main DB's other keys are not dumped).
    #[arg(short = 'a', conflicts_with = "subdb")]
    all: bool,
    /// Dump only the named DB NAME.
    #[arg(short = 's', value_name = "NAME")]
    subdb: Option<String>,
    /// List the names of the named DBs instead of dumping them.
    #[arg(short = 'l', conflicts_with = "subdb")]
    list: bool,
    /// Write keys and values as printable text rather than hex.
    #[arg(short = 'p')]
    print: bool,
    /// PATH is the data file itself, not the environment's directory (MDB_NOSUBDIR).
    #[arg(short = 'n', long = "no-subdir")]
    no_subdir: bool,
    /// Write to FILE instead of standard output.
    #[arg(short = 'f', value_name = "FILE")]
    file: Option<PathBuf>,
    #[command(flatten)]
    progress: ProgressArgs,
    /// The environment's directory (or data file with -n).
    path: PathBuf,
}

/// What a section's header says about the environment: the same for every DB.
struct EnvFigures {
    map_size: u64,
    map_address: u64,
    max_readers: u32,
}

/// Runs `ferrocore dump`.
pub fn run(args: &Args) -> Outcome {
    let at = EnvPath::new(args.path.clone(), args.no_subdir);
    let env = at.open_for_reading(args.all || args.list)?;
    let info = env.info().map_err(|e| at.failure(e))?;
    let txn = env.begin_read().map_err(|e| at.failure(e))?;
    let figures = EnvFigures {
        map_size: envpath::lmdb_map_size(txn.meta(), env.page_size()),
        map_address: txn.meta().address,
        max_readers: info.max_readers,
    };
    let mut out = match &args.file {
        Some(file) => Output::create(file)?,
        None => Output::stdout(),
    };
    if args.all || args.list {
        dump_all(&at, &txn, &figures, args, &mut out)?;
    } else {
        let db = txn
            .open_db(args.subdb.as_deref())
            .map_err(|e| match &args.subdb {
                Some(name) => Failure::new(format!("{}: database {name}: {e}", at.path.display())),
                None => at.failure(e),
            })?;
        dump_db(
            &at,
            &txn,
            db,
            args.subdb.as_deref(),
            &figures,
            args,
            &mut out,
        )?;
    }
    out.finish()
}

/// `-a` and `-l`: every named DB, in the main DB's key order.
fn dump_all(
    at: &EnvPath,
    txn: &ReadTxn<'_>,
    figures: &EnvFigures,
    args: &Args,
    out: &mut Output,
) -> Outcome {
    let names = envpath::candidate_names(txn).map_err(|e| at.failure(e))?;
    if names.is_empty() {
        return Err(Failure::new(format!(
            "{} does not contain multiple databases",
            at.path.display()
        )));
    }
    envpath::each_named_db(at, txn, &names, |name, db| {
        if args.list {
            out.line(&name)
        } else {
            dump_db(at, txn, db, Some(&name), figures, args, out)
        }
    })
}

/// One section: header, data lines, `DATA=END`.
fn dump_db(
    at: &EnvPath,
    txn: &ReadTxn<'_>,
    db: Database,
    name: Option<&str>,
    figures: &EnvFigures,
    args: &Args,
    out: &mut Output,
) -> Outcome {
    let print = args.print;
    let flags = txn.db_flags(db).map_err(|e| at.failure(e))?;
    let stat = txn.db_stat(db).map_err(|e| at.failure(e))?;
    let mut header = String::from("VERSION=3\n");
    header.push_str(if print {
        "format=print\n"
    } else {
        "format=bytevalue\n"
    });
    if let Some(name) = name {
        header.push_str(&format!("database={name}\n"));
    }
    header.push_str("type=btree\n");
    header.push_str(&format!("mapsize={}\n", figures.map_size));
    if figures.map_address != 0 {
        // C's %p.
        header.push_str(&format!("mapaddr={:#x}\n", figures.map_address));
    }
    header.push_str(&format!("maxreaders={}\n", figures.max_readers));
    if flags & ferrocore::db_flags::DUP_SORT != 0 {
        header.push_str("duplicates=1\n");
    }
    for (bit, keyword) in FLAG_NAMES {
        if flags & bit != 0 {
            header.push_str(&format!("{keyword}=1\n"));
        }
    }
    header.push_str(&format!("db_pagesize={}\nHEADER=END\n", stat.page_size));
    out.bytes(header.as_bytes())?;

    let encode = if print {
        text::encode_print
    } else {
        text::encode_hex
    };
    let what = format!("dump {}", name.unwrap_or("main DB"));
    let mut progress = Progress::new(args.progress, &what, Some(stat.entries), Unit::Entries);
    let mut line = Vec::with_capacity(256);
    let mut cursor = txn.cursor(db).map_err(|e| at.failure(e))?;
    while let Some((key, value)) = cursor.next().map_err(|e| at.failure(e))? {
        progress.inc(1);
        line.clear();
        line.push(b' ');
        encode(&mut line, key);
        line.extend_from_slice(b"\n ");
        encode(&mut line, value);
        line.push(b'\n');
        out.bytes(&line)?;
    }
    progress.finish();
    out.bytes(b"DATA=END\n")
}
