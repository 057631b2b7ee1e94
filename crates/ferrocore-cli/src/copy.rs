//! `ferrocore copy`: copies an environment's data file, as LMDB's `mdb_copy`: as it is, or
//! with `-c` compacted (only the pages in use, renumbered, no free pages); into a directory,
//! a file (`-n`) or standard output; from the latest snapshot while writers go on, or with
//! `-v` from the one before it.

use std::fs::OpenOptions;
use std::io::{self, IsTerminal, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;

use ferrocore::{Database, Env, Error};

use crate::envpath::EnvPath;
use crate::failure::{Failure, Outcome};
use crate::progress::{Progress, ProgressArgs, Unit};

/// Options of `ferrocore copy`, those of `mdb_copy`.
#[derive(clap::Args, Debug)]
#[command(
    display_name = "ferrocore",
    about = "Copy an environment, as mdb_copy; -c compacts it",
    long_about = "Copy an environment's data file, as mdb_copy, from one snapshot while \
                  readers and writers go on.\n\n\
                  DST is an existing directory, where the copy is written as data.mdb, which \
                  must not exist yet; with -n, DST is the new data file itself. Without DST \
                  the copy goes to standard output. No lock file is written: the next \
                  opener makes one."
)]
pub struct Args {
    /// Compact while copying: only the pages in use, renumbered from page 2; the copy has
    /// no free pages (MDB_CP_COMPACT).
    #[arg(short = 'c')]
    compact: bool,
    /// SRC and DST are data files, not environment directories (MDB_NOSUBDIR).
    #[arg(short = 'n', long = "no-subdir")]
    no_subdir: bool,
    /// Copy the snapshot before the latest commit (MDB_PREVSNAPSHOT), for when the latest
    /// is damaged. Opens SRC for writing, and keeps writers out while it copies.
    #[arg(short = 'v')]
    previous: bool,
    /// The environment to copy: its directory (or data file with -n).
    src: PathBuf,
    /// Where to write the copy: a directory (or data file with -n); standard output if
    /// absent.
    dst: Option<PathBuf>,
    #[command(flatten)]
    progress: ProgressArgs,
}

/// Runs `ferrocore copy`.
pub fn run(args: &Args) -> Outcome {
    let at = EnvPath::new(args.src.clone(), args.no_subdir);
    let Some(dst) = &args.dst else {
        let stdout = io::stdout();
        if stdout.is_terminal() {
            return Err(Failure::new(
                "standard output is a terminal: give DST, or redirect the copy to a file",
            ));
        }
        let env = at.open_existing(!args.previous, 0)?;
        let mut out = stdout.lock();
        copy(&env, &mut out, args).map_err(|e| failure(&at, "standard output", e))?;
        return out
            .flush()
            .map_err(|e| Failure::writing("standard output", e));
    };
    let target = if args.no_subdir {
        dst.clone()
    } else {
        match std::fs::metadata(dst) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => {
                return Err(Failure::new(format!(
                    "{}: not a directory (with -n DST is the data file itself)",
                    dst.display()
                )))
            }
            Err(e) => return Err(Failure::new(format!("{}: {e}", dst.display()))),
        }
        dst.join("data.mdb")
    };
    let env = at.open_existing(!args.previous, 0)?;
    let shown = target.display().to_string();
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o644)
        .open(&target)
        .map_err(|e| Failure::new(format!("{shown}: {e}")))?;
    let written = copy(&env, &mut file, args)
        .map_err(|e| failure(&at, &shown, e))
        .and_then(|()| file.sync_all().map_err(|e| Failure::writing(&shown, e)));
    if written.is_err() {
        // Not a usable data file: remove what this command created.
        drop(file);
        let _ = std::fs::remove_file(&target);
    }
    written
}

/// Writes the copy `args` ask for.
fn copy(env: &Env, out: &mut dyn Write, args: &Args) -> ferrocore::Result<()> {
    let mut out = Counted {
        out,
        progress: Progress::new(
            args.progress,
            "copy",
            copy_size(env, args.compact),
            Unit::Bytes,
        ),
    };
    match (args.previous, args.compact) {
        (true, compact) => env.copy_previous(&mut out, compact),
        (false, true) => env.copy_compact_to(&mut out),
        (false, false) => env.copy_to(&mut out),
    }?;
    out.progress.finish();
    Ok(())
}

/// About how many bytes the copy writes: the latest snapshot's pages, less its free pages
/// when compacting. `None` if the figures cannot be read (the copy then says why).
fn copy_size(env: &Env, compact: bool) -> Option<u64> {
    let txn = env.begin_read().ok()?;
    let mut pages = txn.meta().last_pgno + 1;
    if compact {
        let mut cursor = txn.cursor(Database::FREE).ok()?;
        while let Some((_, value)) = cursor.next().ok()? {
            // A free-DB record: a count of pages, then the pages.
            let count = u64::from_le_bytes(value.get(..8)?.try_into().ok()?);
            pages = pages.saturating_sub(count);
        }
    }
    Some(pages * env.page_size() as u64)
}

/// A writer that counts what goes through it on a progress bar.
struct Counted<'a> {
    out: &'a mut dyn Write,
    progress: Progress,
}

impl Write for Counted<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.out.write(buf)?;
        self.progress.inc(n as u64);
        Ok(n)
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.out.write_all(buf)?;
        self.progress.inc(buf.len() as u64);
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}

/// A failed copy: writing the output (`what`), or reading the environment.
fn failure(at: &EnvPath, what: &str, e: Error) -> Failure {
    match e {
        Error::Io(e) => Failure::writing(what, e),
        Error::NotFound => Failure::new(format!(
            "{}: no snapshot before the latest commit",
            at.path.display()
        )),
        e => at.failure(e),
    }
}
