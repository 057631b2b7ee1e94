//! W8 instructions per operation (DESIGN.md, seed 003): each engine runs, at small N under
//! `valgrind --tool=callgrind`, W3's random puts (txns of 1,000, no sync), the same puts
//! again giving every key a new value (the steady state: the DB does not grow), W4's random
//! gets (one read txn; then each in a read txn of its own, as a server answers requests:
//! begun and aborted, or one handle reset and renewed), W5's scan (one read txn, every entry), W2's sorted APPEND puts
//! (txns of 1,000), W7's indexed entries (a record plus 10 DUPSORT index values each,
//! txns of 1,000), W6's one-put commits without the sync (on N entries, and again after 2 N
//! unmeasured ones: the steady state) and W9's removals
//! (N random deletes, half of a DB of 2 N entries, in one txn), counting only
//! what runs inside [`ferrobench_measure`] (a profile dump of its own), so key generation,
//! opening and the untimed loads before the reads are not counted. It also
//! counts the calls to malloc, calloc and realloc in the same window (LMDB's C code and
//! Rust's allocator both end there). Instructions (Ir) / N is the figure: it does not move with
//! machine noise. System calls (pwrite, fsync, mmap faults) run in the kernel and are not
//! counted.

use std::path::PathBuf;
use std::process::{Command, Stdio};

use clap::{Args, ValueEnum};
use serde::Serialize;

use crate::data::{indexed_entries, value, KeyBuf};
use crate::engines::{self, Config, Kind};

#[derive(Args, Clone, Debug)]
pub struct W8Args {
    /// Operations measured per engine and operation.
    #[arg(short = 'n', long, default_value_t = 20_000)]
    pub n: u64,
    /// Engines (default: ferrocore, LMDB, redb, SQLite).
    #[arg(long, value_enum, value_delimiter = ',')]
    pub engines: Vec<Kind>,
    /// Operations to measure (default: all of them), e.g. `--ops commit` for one column.
    #[arg(long, value_enum, value_delimiter = ',')]
    pub ops: Vec<Op>,
    /// Print a markdown table.
    #[arg(long)]
    pub markdown: bool,
    /// Also write the figures as JSON here.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize)]
pub enum Op {
    /// W3: random put (commit included).
    Put,
    /// W3 in the steady state: a random put that gives a key of the loaded DB a new value
    /// (commit included): the DB does not grow.
    Update,
    /// W4: random get.
    Get,
    /// W5: one step of a full scan.
    Next,
    /// W2: sorted APPEND put (commit included).
    Append,
    /// W7: one entry, a record and 10 DUPSORT index values (commit included).
    Index,
    /// W6 without the sync: a txn of one random put, committed (on a DB of N entries).
    Commit,
    /// The 1-put commit after 2 N unmeasured ones (on a DB of 3 N entries): the steady
    /// state, once the free pages the load left are worked through (the first commits
    /// after a load cost LMDB more than later ones, and the plain cell averages them in;
    /// after N warm-up commits, LMDB's still cost 8,516 instructions at N = 20,000, after
    /// 2 N 7,508, as at N = 40,000 and 80,000).
    CommitSteady,
    /// W4's random get, each in its own read txn (begin, get, abort), as a server answers
    /// a request.
    GetTxn,
    /// The same with one txn handle reset after each get and renewed before the next.
    GetRenew,
    /// W9's removals: a random delete, half of a DB of 2 N entries in one txn (commit
    /// included).
    Delete,
}

impl Op {
    const ALL: [Op; 11] = [
        Op::Put,
        Op::Update,
        Op::Get,
        Op::GetTxn,
        Op::GetRenew,
        Op::Next,
        Op::Append,
        Op::Index,
        Op::Commit,
        Op::CommitSteady,
        Op::Delete,
    ];

    fn label(self) -> &'static str {
        match self {
            Op::Put => "put",
            Op::Update => "update",
            Op::Get => "get",
            Op::GetTxn => "get, own read txn",
            Op::GetRenew => "get, renewed read txn",
            Op::Next => "next",
            Op::Append => "append put",
            Op::Index => "W7 entry",
            Op::Commit => "1-put commit",
            Op::CommitSteady => "1-put commit, steady",
            Op::Delete => "delete",
        }
    }
}

#[derive(Args, Clone, Debug)]
pub struct W8CellArgs {
    #[arg(long, value_enum)]
    engine: Kind,
    #[arg(long, value_enum)]
    op: Op,
    #[arg(short = 'n', long)]
    n: u64,
    #[arg(long)]
    dir: PathBuf,
}

/// What `w8` counts: everything that runs inside this call (its own profile dump).
#[no_mangle]
#[allow(clippy::no_mangle_with_rust_abi)] // only its symbol name matters, to callgrind; no C caller
#[inline(never)]
pub fn ferrobench_measure(f: &mut dyn FnMut()) {
    f();
}

/// The child, run under callgrind.
pub fn cell(args: &W8CellArgs) {
    let keys = KeyBuf::random(args.n, 16, 42);
    let k = keys.keys();
    let v = value(100);
    let cfg = Config {
        sync: false,
        data_bytes: args.n * (256 + 24 + 10 * 40),
        indexes: if args.op == Op::Index { 10 } else { 0 },
    };
    let mut e = engines::open(args.engine, &args.dir, cfg);
    let load = |e: &mut Box<dyn engines::Engine>| {
        for chunk in k.chunks(1000) {
            e.put_batch(chunk, &v, false);
        }
    };
    match args.op {
        Op::Put => ferrobench_measure(&mut || load(&mut e)),
        Op::Update => {
            load(&mut e);
            let other = value(100).iter().map(|b| b ^ 0x5a).collect::<Vec<u8>>();
            ferrobench_measure(&mut || {
                for chunk in k.chunks(1000) {
                    e.put_batch(chunk, &other, false);
                }
            });
            assert_eq!(e.get_all(k), args.n * 100);
        }
        Op::Get => {
            load(&mut e);
            let mut found = 0;
            ferrobench_measure(&mut || found = e.get_all(k));
            assert_eq!(found, args.n * 100);
        }
        Op::GetTxn | Op::GetRenew => {
            load(&mut e);
            let mut found = 0;
            let renew = args.op == Op::GetRenew;
            ferrobench_measure(&mut || found = e.get_each_in_own_txn(k, renew));
            assert_eq!(found, args.n * 100);
        }
        Op::Next => {
            load(&mut e);
            let mut seen = 0;
            ferrobench_measure(&mut || seen = e.scan());
            assert_eq!(seen, args.n);
        }
        Op::Append => {
            let sorted = KeyBuf::sorted(args.n, 16);
            ferrobench_measure(&mut || {
                for chunk in sorted.keys().chunks(1000) {
                    e.put_batch(chunk, &v, true);
                }
            });
        }
        Op::Commit => {
            load(&mut e);
            let more = KeyBuf::random(args.n, 16, 43);
            ferrobench_measure(&mut || {
                for k in more.keys().chunks(1) {
                    e.put_batch(k, &v, false);
                }
            });
        }
        Op::CommitSteady => {
            load(&mut e);
            let warm_up = KeyBuf::random(2 * args.n, 16, 43);
            for k in warm_up.keys().chunks(1) {
                e.put_batch(k, &v, false);
            }
            let more = KeyBuf::random(args.n, 16, 45);
            ferrobench_measure(&mut || {
                for k in more.keys().chunks(1) {
                    e.put_batch(k, &v, false);
                }
            });
            assert_eq!(e.get_all(more.keys()), args.n * 100);
        }
        Op::Delete => {
            let all = KeyBuf::random(2 * args.n, 16, 44);
            for chunk in all.keys().chunks(1000) {
                e.put_batch(chunk, &v, false);
            }
            let half = all.keys().take(args.n as usize);
            ferrobench_measure(&mut || e.delete_batch(half));
            assert_eq!(e.get_all(all.keys()), args.n * 100);
        }
        Op::Index => {
            let entries = indexed_entries(args.n, 10);
            let record = value(256);
            ferrobench_measure(&mut || {
                for chunk in entries.chunks(1000) {
                    e.indexed_batch(chunk, &record);
                }
            });
        }
    }
}

#[derive(Serialize)]
struct Row {
    engine: Kind,
    op: Op,
    n: u64,
    instructions: u64,
    per_op: f64,
    /// Calls to malloc, calloc and realloc while measuring (C and Rust code alike: Rust's
    /// allocator calls libc's).
    allocations: u64,
}

/// Calls to libc's malloc, calloc and realloc recorded in a callgrind output file. In its
/// format a call is a `cfn=` line naming the callee (as "(id) name" the first time, then
/// as "(id)") followed by a `calls=COUNT ...` line.
fn alloc_calls(path: &std::path::Path) -> Option<u64> {
    let text = std::fs::read_to_string(path).ok()?;
    let mut names: std::collections::HashMap<&str, &str> = Default::default();
    let mut callee_is_alloc = false;
    let mut total = 0;
    for line in text.lines() {
        let (is_callee, rest) = match (line.strip_prefix("cfn="), line.strip_prefix("fn=")) {
            (Some(rest), _) => (true, rest),
            (None, Some(rest)) => (false, rest),
            (None, None) => {
                if let Some(calls) = line.strip_prefix("calls=") {
                    if callee_is_alloc {
                        total += calls.split_whitespace().next()?.parse::<u64>().ok()?;
                    }
                    callee_is_alloc = false;
                }
                continue;
            }
        };
        let name = match rest.split_once(' ') {
            Some((id, name)) => {
                names.insert(id, name);
                name
            }
            None => names.get(rest).copied().unwrap_or(""),
        };
        callee_is_alloc = is_callee && matches!(name, "malloc" | "calloc" | "realloc");
    }
    Some(total)
}

/// Total Ir from a callgrind output file ("totals:" or "summary:" line).
fn total_ir(path: &std::path::Path) -> Option<u64> {
    let text = std::fs::read_to_string(path).ok()?;
    text.lines()
        .rev()
        .find_map(|l| {
            l.strip_prefix("totals:")
                .or_else(|| l.strip_prefix("summary:"))
        })
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
}

pub fn run(args: &W8Args) {
    if Command::new("valgrind")
        .arg("--version")
        .stdout(Stdio::null())
        .status()
        .is_err()
    {
        eprintln!(
            "W8 needs valgrind (callgrind), which is not installed here.\n\
             On Debian/Ubuntu: apt-get install valgrind"
        );
        std::process::exit(2);
    }
    let engines: Vec<Kind> = if args.engines.is_empty() {
        Kind::MAIN.to_vec()
    } else {
        args.engines.clone()
    };
    let ops: Vec<Op> = if args.ops.is_empty() {
        Op::ALL.to_vec()
    } else {
        args.ops.clone()
    };
    let exe = std::env::current_exe().expect("own path");
    let mut rows = Vec::new();
    for &engine in &engines {
        for &op in &ops {
            let dir = tempfile::tempdir().unwrap();
            let out = dir.path().join("callgrind.out");
            let data = dir.path().join("db");
            std::fs::create_dir(&data).unwrap();
            eprint!("W8 {:<10} {:?} under callgrind ...", engine.short(), op);
            // The window is a dump of its own: `<out>.1` holds what ran before
            // `ferrobench_measure`, `<out>.2` exactly what ran inside it. (Switching
            // collection off outside it instead does not stop the call counts: a function
            // called in the window would report the setup's calls to it as well.)
            let status = Command::new("valgrind")
                .arg("--tool=callgrind")
                .arg(format!("--callgrind-out-file={}", out.display()))
                .arg("--dump-before=ferrobench_measure")
                .arg("--dump-after=ferrobench_measure")
                .arg(&exe)
                .arg("w8-cell")
                .arg("--engine")
                .arg(engine.short())
                .arg("--op")
                .arg(op.to_possible_value().expect("no op is skipped").get_name())
                .arg("-n")
                .arg(args.n.to_string())
                .arg("--dir")
                .arg(&data)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .expect("run valgrind");
            assert!(status.success(), "callgrind run failed: {status}");
            let window = out.with_extension("out.2");
            let ir = total_ir(&window).expect("no totals in callgrind output");
            let allocations = alloc_calls(&window).expect("callgrind output");
            let per_op = ir as f64 / args.n as f64;
            eprintln!(
                " {per_op:.0} instructions/op, {:.2} allocations/op",
                allocations as f64 / args.n as f64
            );
            rows.push(Row {
                engine,
                op,
                n: args.n,
                instructions: ir,
                per_op,
                allocations,
            });
        }
    }
    let machine = crate::machine::Machine::probe(&std::env::temp_dir());
    let find = |e: Kind, op: Op| rows.iter().find(|r| r.engine == e && r.op == op);
    let sep = if args.markdown { "|" } else { "" };
    let header: Vec<String> = ops
        .iter()
        .map(|op| format!("{} Ir/op", op.label()))
        .collect();
    if args.markdown {
        println!(
            "Date: {}. Command: `{}`. {}.\n",
            machine.date, machine.command, machine.versions
        );
        println!("| engine | {} |", header.join(" | "));
        println!("|---|{}", "---:|".repeat(header.len()));
    } else {
        for l in machine.lines() {
            println!("{l}");
        }
        println!(
            "\nW8 instructions per operation under callgrind, N = {} (16-byte random keys, 100-byte values;\n\
             put, append put, W7 entry: txns of 1000, no sync, commit included; get, next: one read txn;\n\
             get, own read txn: begin, get, abort; renewed: one txn reset and renewed around each get;\n\
             1-put commit: a txn of one put on N entries, no sync; steady: the same after 2 N unmeasured ones;\n\
             delete: N of 2 N entries in one txn);\n\
             (x) = engine / LMDB\n",
            args.n
        );
        let cols: Vec<String> = header.iter().map(|h| format!("{h:>18}")).collect();
        println!("{:<16} {}", "engine", cols.join(" "));
    }
    for &e in &engines {
        let cell = |op| {
            let r = find(e, op).unwrap();
            match find(Kind::Lmdb, op) {
                Some(b) => format!("{:.0} ({:.2})", r.per_op, r.per_op / b.per_op),
                None => format!("{:.0}", r.per_op),
            }
        };
        let cells: Vec<String> = ops.iter().map(|&op| cell(op)).collect();
        if args.markdown {
            println!(
                "{sep} {} {sep} {} {sep}",
                e.label(),
                cells.join(&format!(" {sep} "))
            );
        } else {
            let cells: Vec<String> = cells.iter().map(|c| format!("{c:>18}")).collect();
            println!("{:<16} {}", e.label(), cells.join(" "));
        }
    }
    // Allocations per op, the same layout.
    if args.markdown {
        println!("\nAllocations (calls to malloc, calloc, realloc) per operation:\n");
        let labels: Vec<&str> = ops.iter().map(|op| op.label()).collect();
        println!("| engine | {} |", labels.join(" | "));
        println!("|---|{}", "---:|".repeat(ops.len()));
    } else {
        println!("\nallocations (malloc, calloc, realloc calls) per operation");
    }
    for &e in &engines {
        let cells: Vec<String> = ops
            .iter()
            .map(|&op| {
                format!(
                    "{:.2}",
                    find(e, op).unwrap().allocations as f64 / args.n as f64
                )
            })
            .collect();
        if args.markdown {
            println!(
                "{sep} {} {sep} {} {sep}",
                e.label(),
                cells.join(&format!(" {sep} "))
            );
        } else {
            let cells: Vec<String> = cells.iter().map(|c| format!("{c:>18}")).collect();
            println!("{:<16} {}", e.label(), cells.join(" "));
        }
    }
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_string_pretty(&rows).unwrap()).expect("write JSON");
    }
}
