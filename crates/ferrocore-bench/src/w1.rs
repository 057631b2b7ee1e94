//! W1 many DBs (DESIGN.md, seed 000): the cost of a read transaction that touches one named
//! DB, as a function of how many named DBs the environment has open.
//!
//! For each DB count (10 ... 100,000 by default), both engines get an environment with that
//! many named DBs, created and opened in one write txn (each with two keys) and committed.
//! Then, timed, M iterations of
//! - begin/abort: begin a read txn, open a cursor on DB 0, close it, abort the txn;
//! - renew/reset: renew an inactive read txn, open a cursor on DB 0, close it, reset.
//!
//! LMDB's `mdb_txn_begin`/`mdb_txn_renew` loop over every open DB, so at 100,000 DBs an
//! iteration takes around a millisecond: each cell stops after M iterations or after the
//! time budget, whichever comes first, and reports nanoseconds per iteration. Engines and
//! forms are interleaved (ferrocore, LMDB, ferrocore, LMDB ...) for each repetition; the
//! table gives the median.
//!
//! `ferrocore-bench w1` (defaults: M = 1,000,000, 2 s budget per cell, 3 repetitions).

use std::ffi::CString;
use std::hint::black_box;
use std::path::Path;
use std::ptr;
use std::time::{Duration, Instant};

use clap::{Args, ValueEnum};
use lmdb_master_sys as ffi;

use crate::{check, median};

#[derive(Args, Clone, Debug)]
pub struct W1Args {
    /// Numbers of named DBs, comma separated.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "10,100,1000,10000,100000"
    )]
    dbs: Vec<u32>,
    /// Iterations per cell at most (M).
    #[arg(short = 'm', long, default_value_t = 1_000_000)]
    iters: u64,
    /// Time budget per cell in milliseconds: a cell stops after M iterations or this long.
    #[arg(long, default_value_t = 2000)]
    budget_ms: u64,
    /// Repetitions (engines interleaved in each); the median is reported.
    #[arg(short = 'r', long, default_value_t = 3)]
    reps: usize,
    /// Run one engine only (for profiling under callgrind).
    #[arg(long, value_enum)]
    only: Option<EngineName>,
    /// Run one form only (for profiling under callgrind).
    #[arg(long, value_enum)]
    form: Option<Form>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum EngineName {
    Ferrocore,
    Lmdb,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Form {
    /// begin read txn, cursor open/close, abort.
    Begin,
    /// renew inactive read txn, cursor open/close, reset.
    Renew,
}

/// Counts iterations and stops a loop after `max` of them or once `budget` has passed,
/// reading the clock only every `stride` iterations (the stride grows so the clock is read
/// about a hundred times per budget, and at every iteration while iterations are slow).
struct Clock {
    start: Instant,
    done: u64,
    next_check: u64,
    stride: u64,
    max: u64,
    budget: Duration,
}

impl Clock {
    fn new(max: u64, budget: Duration) -> Self {
        Clock {
            start: Instant::now(),
            done: 0,
            next_check: 0,
            stride: 1,
            max: max.max(1),
            budget,
        }
    }

    /// Whether to run one more iteration (and counts it).
    #[inline(always)]
    fn tick(&mut self) -> bool {
        if self.done < self.next_check {
            self.done += 1;
            return true;
        }
        self.check()
    }

    #[cold]
    #[inline(never)]
    fn check(&mut self) -> bool {
        if self.done >= self.max {
            return false;
        }
        if self.done > 0 {
            let elapsed = self.start.elapsed();
            if elapsed >= self.budget {
                return false;
            }
            let per_iter = (elapsed.as_nanos() as f64 / self.done as f64).max(1.0);
            let target = (self.budget.as_nanos() as f64 / 100.0 / per_iter) as u64;
            self.stride = (self.stride * 2).min(target).max(1);
        }
        self.next_check = (self.done + self.stride).min(self.max);
        self.done += 1;
        true
    }

    /// Iterations run and nanoseconds per iteration.
    fn finish(self) -> (u64, f64) {
        let ns = self.start.elapsed().as_nanos() as f64;
        (self.done, ns / self.done.max(1) as f64)
    }
}

/// An environment with `n` named DBs, ready for the timed loops.
trait W1Engine {
    const NAME: &'static str;
    /// Runs iterations of `form` until `clock` says stop.
    fn run(&mut self, form: Form, clock: &mut Clock);
}

/// The name of DB `i` (the same in both engines).
fn db_name(i: u32) -> String {
    format!("db{i:06}")
}

struct Ferro {
    env: ferrocore::Env,
    db0: ferrocore::Database,
    /// Depth of the main DB, which holds the named DBs' records.
    main_depth: u32,
}

impl Ferro {
    fn setup(dir: &Path, n: u32) -> Self {
        use ferrocore::{db_flags, env_flags, EnvOptions};
        // SAFETY: the benchmark owns the temporary directory.
        let env = unsafe {
            EnvOptions::new()
                .max_dbs(n)
                .flags(env_flags::NO_SYNC)
                .open(dir)
                .unwrap()
        };
        let mut txn = env.begin_write().unwrap();
        let mut db0 = None;
        for i in 0..n {
            let db = txn.open_db(Some(&db_name(i)), db_flags::CREATE).unwrap();
            txn.put(db, b"key0", b"value0", 0).unwrap();
            txn.put(db, b"key1", b"value1", 0).unwrap();
            db0.get_or_insert(db);
        }
        txn.commit().unwrap();
        env.sync().unwrap();
        let db0 = db0.expect("at least one DB");
        // The DB is visible, with its keys, to a new read txn.
        let main_depth = {
            let txn = env.begin_read().unwrap();
            assert_eq!(txn.get(db0, b"key1").unwrap(), Some(&b"value1"[..]));
            txn.stat().depth
        };
        Ferro {
            env,
            db0,
            main_depth,
        }
    }
}

impl W1Engine for Ferro {
    const NAME: &'static str = "ferrocore";

    fn run(&mut self, form: Form, clock: &mut Clock) {
        let db = self.db0;
        match form {
            Form::Begin => {
                while clock.tick() {
                    let txn = self.env.begin_read().unwrap();
                    let cursor = txn.cursor(db).unwrap();
                    black_box(&cursor);
                    drop(cursor);
                    drop(txn);
                }
            }
            Form::Renew => {
                let mut inactive = self.env.begin_read().unwrap().reset();
                while clock.tick() {
                    let txn = inactive.renew().unwrap();
                    let cursor = txn.cursor(db).unwrap();
                    black_box(&cursor);
                    drop(cursor);
                    inactive = txn.reset();
                }
            }
        }
    }
}

struct Lmdb {
    env: *mut ffi::MDB_env,
    dbi0: ffi::MDB_dbi,
}

impl Lmdb {
    fn setup(dir: &Path, n: u32) -> Self {
        // SAFETY: plain use of LMDB's C API on handles created here, in the documented
        // order; every MDB_val and name points at live Rust memory for the call.
        unsafe {
            let mut env = ptr::null_mut();
            check(ffi::mdb_env_create(&mut env), "env_create");
            check(ffi::mdb_env_set_maxdbs(env, n), "set_maxdbs");
            // One leaf page per DB plus the main DB's pages, with room to spare.
            let map = (n as usize * 4096 * 3).max(64 << 20);
            check(ffi::mdb_env_set_mapsize(env, map), "set_mapsize");
            let path = CString::new(dir.to_str().unwrap()).unwrap();
            check(
                ffi::mdb_env_open(env, path.as_ptr(), ffi::MDB_NOSYNC, 0o644),
                "env_open",
            );
            let mut txn = ptr::null_mut();
            check(
                ffi::mdb_txn_begin(env, ptr::null_mut(), 0, &mut txn),
                "txn_begin",
            );
            let mut dbi0 = None;
            for i in 0..n {
                let name = CString::new(db_name(i)).unwrap();
                let mut dbi = 0;
                check(
                    ffi::mdb_dbi_open(txn, name.as_ptr(), ffi::MDB_CREATE, &mut dbi),
                    "dbi_open",
                );
                for (k, v) in [(&b"key0"[..], &b"value0"[..]), (b"key1", b"value1")] {
                    let mut kv = crate::val(k);
                    let mut vv = crate::val(v);
                    check(ffi::mdb_put(txn, dbi, &mut kv, &mut vv, 0), "put");
                }
                dbi0.get_or_insert(dbi);
            }
            check(ffi::mdb_txn_commit(txn), "commit");
            check(ffi::mdb_env_sync(env, 1), "env_sync");
            Lmdb {
                env,
                dbi0: dbi0.expect("at least one DB"),
            }
        }
    }
}

impl Drop for Lmdb {
    fn drop(&mut self) {
        // SAFETY: no txn of this env is live (every loop ends its txns).
        unsafe { ffi::mdb_env_close(self.env) }
    }
}

impl W1Engine for Lmdb {
    const NAME: &'static str = "LMDB";

    fn run(&mut self, form: Form, clock: &mut Clock) {
        // SAFETY: the C API on this env's handles, in the documented order: a cursor is
        // closed before its txn ends; a reset txn is only renewed or aborted.
        unsafe {
            let mut txn = ptr::null_mut();
            let mut cur = ptr::null_mut();
            match form {
                Form::Begin => {
                    while clock.tick() {
                        check(
                            ffi::mdb_txn_begin(
                                self.env,
                                ptr::null_mut(),
                                ffi::MDB_RDONLY,
                                &mut txn,
                            ),
                            "txn_begin",
                        );
                        check(
                            ffi::mdb_cursor_open(txn, self.dbi0, &mut cur),
                            "cursor_open",
                        );
                        black_box(cur);
                        ffi::mdb_cursor_close(cur);
                        ffi::mdb_txn_abort(txn);
                    }
                }
                Form::Renew => {
                    check(
                        ffi::mdb_txn_begin(self.env, ptr::null_mut(), ffi::MDB_RDONLY, &mut txn),
                        "txn_begin",
                    );
                    ffi::mdb_txn_reset(txn);
                    while clock.tick() {
                        check(ffi::mdb_txn_renew(txn), "txn_renew");
                        check(
                            ffi::mdb_cursor_open(txn, self.dbi0, &mut cur),
                            "cursor_open",
                        );
                        black_box(cur);
                        ffi::mdb_cursor_close(cur);
                        ffi::mdb_txn_reset(txn);
                    }
                    ffi::mdb_txn_abort(txn);
                }
            }
        }
    }
}

/// One measurement: a short warm-up, then the timed loop. Returns (iterations, ns/iter).
fn measure<E: W1Engine>(e: &mut E, form: Form, args: &W1Args) -> (u64, f64) {
    let budget = Duration::from_millis(args.budget_ms);
    let mut warm = Clock::new((args.iters / 100).clamp(1, 10_000), budget / 20);
    e.run(form, &mut warm);
    let mut clock = Clock::new(args.iters, budget);
    e.run(form, &mut clock);
    clock.finish()
}

fn form_label(form: Form) -> &'static str {
    match form {
        Form::Begin => "begin/abort",
        Form::Renew => "renew/reset",
    }
}

pub fn run(args: &W1Args) {
    assert!(!args.dbs.is_empty(), "--dbs needs at least one count");
    let engines = match args.only {
        None => vec![EngineName::Ferrocore, EngineName::Lmdb],
        Some(e) => vec![e],
    };
    let forms = match args.form {
        None => vec![Form::Begin, Form::Renew],
        Some(f) => vec![f],
    };
    // Columns: (engine, form); one median per DB count.
    let columns: Vec<(EngineName, Form)> = engines
        .iter()
        .flat_map(|&e| forms.iter().map(move |&f| (e, f)))
        .collect();
    let mut table: Vec<(u32, Vec<f64>)> = Vec::new();
    for &n in &args.dbs {
        // The directories outlive the environments in them (dropped in reverse order).
        let fdir = tempfile::tempdir().unwrap();
        let ldir = tempfile::tempdir().unwrap();
        let mut ferro = None;
        let mut lmdb = None;
        if engines.contains(&EngineName::Ferrocore) {
            let t = Instant::now();
            ferro = Some(Ferro::setup(fdir.path(), n));
            eprintln!(
                "W1 {n} DBs: {} setup {:.2} s, main DB depth {}",
                Ferro::NAME,
                t.elapsed().as_secs_f64(),
                ferro.as_ref().unwrap().main_depth
            );
        }
        if engines.contains(&EngineName::Lmdb) {
            let t = Instant::now();
            lmdb = Some(Lmdb::setup(ldir.path(), n));
            eprintln!(
                "W1 {n} DBs: {} setup {:.2} s",
                Lmdb::NAME,
                t.elapsed().as_secs_f64()
            );
        }
        let mut samples = vec![Vec::new(); columns.len()];
        for rep in 0..args.reps {
            // A B A B: for each form, each engine in turn.
            for &form in &forms {
                for (c, &(engine, f)) in columns.iter().enumerate() {
                    if f != form {
                        continue;
                    }
                    let (iters, ns) = match engine {
                        EngineName::Ferrocore => measure(ferro.as_mut().unwrap(), form, args),
                        EngineName::Lmdb => measure(lmdb.as_mut().unwrap(), form, args),
                    };
                    let name = match engine {
                        EngineName::Ferrocore => Ferro::NAME,
                        EngineName::Lmdb => Lmdb::NAME,
                    };
                    eprintln!(
                        "W1 {n} DBs rep {}: {name} {}: {ns:.0} ns/iter ({iters} iterations)",
                        rep + 1,
                        form_label(form)
                    );
                    samples[c].push(ns);
                }
            }
        }
        table.push((n, samples.into_iter().map(median).collect()));
    }
    print_table(args, &columns, &table);
}

fn print_table(args: &W1Args, columns: &[(EngineName, Form)], table: &[(u32, Vec<f64>)]) {
    println!(
        "W1 many DBs: ns per iteration (begin read txn or renew, open and close a cursor on DB 0, \
         abort or reset); median of {} interleaved runs, each of {} iterations or {} ms, \
         whichever ends first",
        args.reps, args.iters, args.budget_ms
    );
    let mut header = String::from("| named DBs |");
    let mut rule = String::from("|---:|");
    for &(engine, form) in columns {
        let name = match engine {
            EngineName::Ferrocore => Ferro::NAME,
            EngineName::Lmdb => Lmdb::NAME,
        };
        header.push_str(&format!(" {name} {} ns |", form_label(form)));
        rule.push_str("---:|");
    }
    println!("{header}");
    println!("{rule}");
    for (n, cells) in table {
        let mut row = format!("| {n} |");
        for ns in cells {
            row.push_str(&format!(" {ns:.0} |"));
        }
        println!("{row}");
    }
    if table.len() > 1 {
        let (first_n, first) = &table[0];
        let (last_n, last) = &table[table.len() - 1];
        let mut row = format!("| ratio {last_n} / {first_n} DBs |");
        for (a, b) in first.iter().zip(last) {
            row.push_str(&format!(" {:.2}x |", b / a));
        }
        println!("{row}");
    }
}
