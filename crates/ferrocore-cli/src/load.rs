//! `ferrocore load`: reads what `mdb_dump` (or `ferrocore dump`) writes and puts it into an
//! environment, as LMDB's `mdb_load` does, with two differences that make a failed load
//! harmless: the whole input goes in one write txn (mdb_load commits every 100 puts), and
//! input that does not end with `DATA=END` is an error (mdb_load takes a dump cut short
//! for a complete one). This module reads the text; `load_pairs` decides how a section's
//! pairs are stored (bottom-up into an empty DB, else puts).

use std::fs::File;
use std::io::{self, BufRead, BufReader};
use std::path::PathBuf;

use ferrocore::{db_flags, Database, EnvOptions, Error, WriteTxn};

use crate::envpath::EnvPath;
use crate::failure::{Failure, Outcome};
use crate::load_pairs::{load_pairs, parse_memory, LoadMode, PairSource};
use crate::progress::{Progress, ProgressArgs, Unit};
use crate::text::{self, DecodeError, FLAG_NAMES};

/// Options of `ferrocore load`, those of `mdb_load`.
#[derive(clap::Args, Debug)]
#[command(
    display_name = "ferrocore",
    about = "Load text written by `ferrocore dump` or mdb_dump into an environment, as mdb_load",
    long_about = "Load text written by `ferrocore dump` or mdb_dump (format=bytevalue or \
                  print, one or several DB sections) into an environment, creating it and \
                  its named DBs (with the flags their headers give) if needed. The \
                  mapsize, maxreaders and db_pagesize of the first header apply when the \
                  environment is created.\n\n\
                  Everything goes in one write txn: a load that fails (malformed input, \
                  reported with its line number; a put the DB refuses) commits nothing, and \
                  an environment it created is removed. With -N, pairs whose key (or, in a \
                  DUPSORT DB, whose key and value) already exist are skipped, as mdb_load \
                  -N does; in a DUPSORT DB that includes a key's further values in the \
                  input, since NOOVERWRITE refuses any key already present.\n\n\
                  A section loaded into an empty DB (without -N) is built bottom-up from \
                  full pages: a dump is in the DB's order and streams straight in; input \
                  out of order is first sorted with temporary files in $TMPDIR, within \
                  --memory. A key repeated in a DB without duplicates keeps its last \
                  value, as with puts. Into a DB that has data, and with -N, each pair is \
                  put, as mdb_load does."
)]
pub struct Args {
    /// Read from FILE instead of standard input.
    #[arg(short = 'f', value_name = "FILE")]
    file: Option<PathBuf>,
    /// PATH is the data file itself, not the environment's directory (MDB_NOSUBDIR).
    #[arg(short = 'n', long = "no-subdir")]
    no_subdir: bool,
    /// Load into the named DB NAME when a section's header names none.
    #[arg(short = 's', value_name = "NAME")]
    subdb: Option<String>,
    /// Keep existing data: put with NOOVERWRITE and NODUPDATA, skipping what exists.
    #[arg(short = 'N')]
    no_overwrite: bool,
    /// The input is plain text without headers: a line for each key and one for its
    /// value, in the printable encoding, without the leading space.
    #[arg(short = 'T')]
    plain: bool,
    /// Memory for sorting input that is out of order (K, M or G suffix); past it, sorted
    /// runs go to temporary files.
    #[arg(long = "memory", value_name = "SIZE", default_value = "256M", value_parser = parse_memory)]
    memory: usize,
    #[command(flatten)]
    progress: ProgressArgs,
    /// The environment's directory (it must exist), or the data file with -n.
    path: PathBuf,
}

/// Named DBs one load may create or open: every handle stays open until the txn commits.
const MAX_DBS: u32 = 65_536;

/// A section header: what `readhdr` of mdb_load keeps.
#[derive(Debug, Default)]
struct Header {
    print: bool,
    name: Option<String>,
    flags: u16,
    map_size: Option<u64>,
    max_readers: Option<u32>,
    page_size: Option<usize>,
}

/// The input, line by line, counting lines from 1 (and bytes, for the progress bar).
struct Lines<R> {
    reader: R,
    line: Vec<u8>,
    number: u64,
    progress: Progress,
}

impl<R: BufRead> Lines<R> {
    /// Reads the next line (without its newline) into `self.line`; false at the end.
    fn next(&mut self) -> Outcome<bool> {
        self.line.clear();
        let n = self
            .reader
            .read_until(b'\n', &mut self.line)
            .map_err(|e| Failure::new(format!("reading input: {e}")))?;
        if n == 0 {
            return Ok(false);
        }
        self.progress.inc(n as u64);
        self.number += 1;
        if self.line.last() == Some(&b'\n') {
            self.line.pop();
        }
        Ok(true)
    }

    /// True if no input is left.
    fn at_end(&mut self) -> Outcome<bool> {
        let buf = self
            .reader
            .fill_buf()
            .map_err(|e| Failure::new(format!("reading input: {e}")))?;
        Ok(buf.is_empty())
    }

    /// A failure at the current line.
    fn error(&self, what: impl std::fmt::Display) -> Failure {
        Failure::new(format!("line {}: {what}", self.number))
    }

    /// A failure at the line after the last one read (the input ended there).
    fn unexpected_end(&self, expected: &str) -> Failure {
        Failure::new(format!(
            "line {}: unexpected end of input, expected {expected}",
            self.number + 1
        ))
    }

    /// The current line, shown in a message (at most 40 bytes, escaped).
    fn shown(&self) -> String {
        let mut s = Vec::new();
        text::encode_print(&mut s, &self.line[..self.line.len().min(40)]);
        let more = if self.line.len() > 40 { "..." } else { "" };
        format!("\"{}{more}\"", String::from_utf8_lossy(&s))
    }
}

/// Runs `ferrocore load`.
pub fn run(args: &Args) -> Outcome {
    let (reader, size): (Box<dyn BufRead>, Option<u64>) = match &args.file {
        Some(path) => {
            let file =
                File::open(path).map_err(|e| Failure::new(format!("{}: {e}", path.display())))?;
            let size = file
                .metadata()
                .ok()
                .filter(std::fs::Metadata::is_file)
                .map(|m| m.len());
            (Box::new(BufReader::with_capacity(1 << 16, file)), size)
        }
        None => (
            Box::new(BufReader::with_capacity(1 << 16, io::stdin())),
            None,
        ),
    };
    let mut input = Lines {
        reader,
        line: Vec::new(),
        number: 0,
        progress: Progress::new(args.progress, "load", size, Unit::Bytes),
    };
    // As mdb_load, the first header is read before the environment is opened: its sizes
    // are those the environment is created with.
    let first = if args.plain {
        Header {
            print: true,
            ..Header::default()
        }
    } else {
        read_header(&mut input)?
    };

    let at = EnvPath::new(args.path.clone(), args.no_subdir);
    let (data_file, lock_file) = (at.data_file(), at.lock_file());
    let data_existed = data_file.exists();
    let lock_existed = lock_file.exists();
    if !at.no_subdir && !at.path.is_dir() {
        return Err(Failure::new(format!(
            "{}: no such directory (load puts the environment's files in an existing one)",
            at.path.display()
        )));
    }
    let result = load(args, &at, first, data_existed, &mut input);
    if result.is_ok() {
        input.progress.finish();
    }
    if result.is_err() && !data_existed {
        // The load created the environment and committed nothing: leave no trace.
        let _ = std::fs::remove_file(&data_file);
        if !lock_existed {
            let _ = std::fs::remove_file(&lock_file);
        }
    }
    result
}

/// Opens the environment and loads every section into it, in one txn.
fn load(
    args: &Args,
    at: &EnvPath,
    first: Header,
    data_existed: bool,
    input: &mut Lines<Box<dyn BufRead>>,
) -> Outcome {
    let mut options = EnvOptions::new();
    options.flags(at.flags(0)).max_dbs(MAX_DBS);
    let creating =
        !data_existed || std::fs::metadata(at.data_file()).map_or(true, |m| m.len() == 0);
    if creating {
        if let Some(bytes) = first.map_size {
            // As mdb_load: the dump's map size is the new environment's (a limit, as in
            // LMDB), so a dump of this environment shows the source's figure again.
            options.map_size(bytes);
        }
        if let Some(n) = first.max_readers {
            options.max_readers(n);
        }
        if let Some(bytes) = first.page_size {
            options.page_size(bytes);
        }
    }
    let env = at.open_with(&options)?;
    let mut txn = env.begin_write().map_err(|e| at.failure(e))?;
    let mode = LoadMode {
        no_overwrite: args.no_overwrite,
        memory_bytes: args.memory,
    };
    let mut header = first;
    loop {
        let name = header.name.as_deref().or(args.subdb.as_deref());
        let db = open_db(&mut txn, name, header.flags, input)?;
        let mut pairs = SectionPairs {
            input: &mut *input,
            print: header.print,
            plain: args.plain,
        };
        load_pairs(&mut txn, db, mode, &mut pairs)?;
        let done = args.plain || input.at_end()?;
        if done {
            break;
        }
        header = read_header(input)?;
    }
    txn.commit().map_err(|e| at.failure(e))
}

/// Opens (creating if needed) the section's DB with the header's flags.
fn open_db<R: BufRead>(
    txn: &mut WriteTxn<'_>,
    name: Option<&str>,
    flags: u16,
    input: &Lines<R>,
) -> Outcome<Database> {
    txn.open_db(name, u32::from(flags) | db_flags::CREATE)
        .map_err(|e| {
            let which = name.map_or("the main DB".to_owned(), |n| format!("database {n}"));
            match e {
                Error::Incompatible => {
                    input.error(format!("{which} exists with other flags than the header's"))
                }
                e => input.error(format!("opening {which}: {e}")),
            }
        })
}

/// Reads a header, through `HEADER=END`.
fn read_header<R: BufRead>(input: &mut Lines<R>) -> Outcome<Header> {
    let mut h = Header::default();
    loop {
        if !input.next()? {
            return Err(input.unexpected_end("a header line or HEADER=END"));
        }
        let line = input.line.as_slice();
        if line == b"HEADER=END" {
            return Ok(h);
        }
        let Some(eq) = line.iter().position(|&c| c == b'=') else {
            return Err(input.error(format!(
                "expected KEYWORD=VALUE or HEADER=END in the header, found {}",
                input.shown()
            )));
        };
        let (keyword, value) = (&line[..eq], &line[eq + 1..]);
        let number = |what: &str| -> Outcome<u64> {
            std::str::from_utf8(value)
                .ok()
                .and_then(|v| v.parse::<u64>().ok())
                .ok_or_else(|| {
                    input.error(format!(
                        "expected a number after {what}=, found {}",
                        input.shown()
                    ))
                })
        };
        match keyword {
            b"VERSION" => {
                let version = number("VERSION")?;
                if version > 3 {
                    return Err(input.error(format!(
                        "unsupported VERSION {version} (this loader reads up to 3)"
                    )));
                }
            }
            b"format" => match value {
                b"print" => h.print = true,
                b"bytevalue" => h.print = false,
                _ => {
                    return Err(input.error(format!(
                        "unsupported format {} (expected bytevalue or print)",
                        input.shown()
                    )))
                }
            },
            b"type" if value != b"btree" => {
                return Err(input.error(format!(
                    "unsupported type {} (expected btree)",
                    input.shown()
                )))
            }
            b"type" => {}
            b"database" => {
                let name = std::str::from_utf8(value).map_err(|_| {
                    input.error(
                        "the database name is not UTF-8 (ferrocore's API names DBs with UTF-8)",
                    )
                })?;
                if name.is_empty() {
                    return Err(input.error("expected a database name after database="));
                }
                h.name = Some(name.to_owned());
            }
            b"mapsize" => h.map_size = Some(number("mapsize")?),
            b"maxreaders" => {
                let n = number("maxreaders")?;
                h.max_readers = Some(
                    u32::try_from(n)
                        .ok()
                        .filter(|&n| n > 0)
                        .ok_or_else(|| input.error(format!("invalid maxreaders {n}")))?,
                );
            }
            b"db_pagesize" => {
                let n = number("db_pagesize")?;
                if !(n.is_power_of_two() && (4096..=32768).contains(&n)) {
                    return Err(input.error(format!(
                        "invalid db_pagesize {n} (expected a power of two from 4096 to 32768)"
                    )));
                }
                h.page_size = Some(n as usize);
            }
            // A fixed map address is not something a loaded environment can promise.
            b"mapaddr" => {}
            b"duplicates" => h.flags |= flag_value(input, value, db_flags::DUP_SORT)?,
            _ => match FLAG_NAMES.iter().find(|(_, k)| k.as_bytes() == keyword) {
                Some(&(bit, _)) => h.flags |= flag_value(input, value, bit)?,
                None => eprintln!(
                    "ferrocore: line {}: unrecognized keyword ignored: {}",
                    input.number,
                    String::from_utf8_lossy(keyword)
                ),
            },
        }
    }
}

/// The bits a flag line `keyword=value` sets: `bit` for 1, none for 0.
fn flag_value<R: BufRead>(input: &Lines<R>, value: &[u8], bit: u16) -> Outcome<u16> {
    match value {
        b"1" => Ok(bit),
        b"0" => Ok(0),
        _ => Err(input.error(format!("expected 0 or 1 after =, found {}", input.shown()))),
    }
}

/// Decodes the field of the current line that starts at byte `from`.
fn decode<R: BufRead>(input: &Lines<R>, from: usize, print: bool, out: &mut Vec<u8>) -> Outcome {
    let field = &input.line[from..];
    let r = if print {
        text::decode_print(field, out)
    } else {
        text::decode_hex(field, out)
    };
    r.map_err(|DecodeError { column, expected }| {
        input.error(format!("column {}: expected {expected}", from + column + 1))
    })
}

/// The pairs of a section: key and value lines through `DATA=END`, or with `-T` plain
/// lines to the end of the input.
struct SectionPairs<'a, R> {
    input: &'a mut Lines<R>,
    print: bool,
    plain: bool,
}

impl<R: BufRead> PairSource for SectionPairs<'_, R> {
    fn next_pair(&mut self, key: &mut Vec<u8>, value: &mut Vec<u8>) -> Outcome<bool> {
        if self.plain {
            next_plain_pair(self.input, key, value)
        } else {
            next_section_pair(self.input, self.print, key, value)
        }
    }

    fn line(&self) -> u64 {
        self.input.number
    }
}

/// Reads a key line and its value line; false at `DATA=END`.
fn next_section_pair<R: BufRead>(
    input: &mut Lines<R>,
    print: bool,
    key: &mut Vec<u8>,
    value: &mut Vec<u8>,
) -> Outcome<bool> {
    if !input.next()? {
        return Err(input.unexpected_end("a key line or DATA=END"));
    }
    if input.line.first() != Some(&b' ') {
        if input.line == b"DATA=END" {
            return Ok(false);
        }
        return Err(input.error(format!(
            "expected a key line (a space, then the key) or DATA=END, found {}",
            input.shown()
        )));
    }
    decode(input, 1, print, key)?;
    if !input.next()? {
        return Err(input.unexpected_end(&format!("the value of the key on line {}", input.number)));
    }
    if input.line.first() != Some(&b' ') {
        return Err(input.error(format!(
            "expected the value of the key on line {} (a space, then the value), found {}",
            input.number - 1,
            input.shown()
        )));
    }
    decode(input, 1, print, value)?;
    Ok(true)
}

/// `-T`: reads a key line and a value line (printable encoding, no leading space); false
/// at the end of the input.
fn next_plain_pair<R: BufRead>(
    input: &mut Lines<R>,
    key: &mut Vec<u8>,
    value: &mut Vec<u8>,
) -> Outcome<bool> {
    if !input.next()? {
        return Ok(false);
    }
    decode(input, 0, true, key)?;
    if !input.next()? {
        return Err(input.unexpected_end(&format!("the value of the key on line {}", input.number)));
    }
    decode(input, 0, true, value)?;
    Ok(true)
}
