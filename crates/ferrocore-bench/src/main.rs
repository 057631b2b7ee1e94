//! ferrocore against LMDB: the same workloads, in the same run, interleaved (A B A B ...),
//! reporting the median of each and the ratio.
//!
//! Workloads (named as in DESIGN.md):
//! - W3 random inserts: N random 16-byte keys, 100-byte values, txns of 1,000 (no sync,
//!   and with a synced commit per txn);
//! - W4 random point reads over the loaded DB, one thread;
//! - W5 full cursor scan.
//!
//! - W1 many DBs (`w1` subcommand, see `w1.rs`).
//!
//! `cargo run --release -p ferrocore-bench -- -n 1000000 -r 3`
//! `cargo run --release -p ferrocore-bench -- w1`

mod w1;

use std::ffi::CString;
use std::path::Path;
use std::ptr;
use std::time::Instant;

use clap::{Parser, Subcommand};
use lmdb_master_sys as ffi;

#[derive(Parser)]
#[command(about = "ferrocore vs LMDB: same workloads, same run, ratios")]
struct Args {
    /// Entries.
    #[arg(short = 'n', long, default_value_t = 200_000)]
    entries: u64,
    /// Repetitions of each engine (interleaved); the median is reported.
    #[arg(short = 'r', long, default_value_t = 3)]
    reps: usize,
    /// Also run the synced-commit variant of W3.
    #[arg(long)]
    sync: bool,
    /// Run one engine only (for profiling under callgrind): ferrocore or lmdb.
    #[arg(long)]
    only: Option<String>,
    #[command(subcommand)]
    workload: Option<Workload>,
}

/// Workloads with their own options; without one, W3 to W5 run.
#[derive(Subcommand)]
enum Workload {
    /// W1 many DBs: read txn begin/abort and renew/reset with a cursor on DB 0, for
    /// 10 to 100,000 named DBs.
    W1(w1::W1Args),
}

/// splitmix64, so both engines see the same keys.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

fn keys(n: u64, seed: u64) -> Vec<[u8; 16]> {
    let mut rng = Rng(seed);
    (0..n)
        .map(|_| {
            let mut k = [0u8; 16];
            k[..8].copy_from_slice(&rng.next().to_be_bytes());
            k[8..].copy_from_slice(&rng.next().to_be_bytes());
            k
        })
        .collect()
}

/// Seconds taken by each phase of one run.
#[derive(Clone, Copy, Default)]
struct Times {
    insert: f64,
    get: f64,
    /// The same gets split over one thread per core, each with its own read txn.
    get_mt: f64,
    scan: f64,
}

/// Threads for the multi-threaded W4: one per core.
fn threads() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get())
}

trait Engine {
    const NAME: &'static str;
    fn run(dir: &Path, keys: &[[u8; 16]], sync: bool) -> Times;
}

struct Ferro;

impl Engine for Ferro {
    const NAME: &'static str = "ferrocore";

    fn run(dir: &Path, keys: &[[u8; 16]], sync: bool) -> Times {
        use ferrocore::{env_flags, Database, EnvOptions};
        let flags = if sync { 0 } else { env_flags::NO_SYNC };
        // SAFETY: the benchmark owns the temporary directory.
        let env = unsafe { EnvOptions::new().flags(flags).open(dir).unwrap() };
        let value = [0x5Au8; 100];
        let t = Instant::now();
        for chunk in keys.chunks(1000) {
            let mut txn = env.begin_write().unwrap();
            for k in chunk {
                txn.put(Database::MAIN, k, &value, 0).unwrap();
            }
            txn.commit().unwrap();
        }
        let insert = t.elapsed().as_secs_f64();
        let txn = env.begin_read().unwrap();
        let t = Instant::now();
        let mut found = 0;
        for k in keys {
            found += txn.get(Database::MAIN, k).unwrap().map_or(0, |v| v.len());
        }
        let get = t.elapsed().as_secs_f64();
        assert_eq!(found, keys.len() * 100);
        let t = Instant::now();
        let chunk = keys.len().div_ceil(threads());
        let found_mt: usize = std::thread::scope(|s| {
            let handles: Vec<_> = keys
                .chunks(chunk)
                .map(|part| {
                    let env = &env;
                    s.spawn(move || {
                        let txn = env.begin_read().unwrap();
                        part.iter()
                            .map(|k| txn.get(Database::MAIN, k).unwrap().map_or(0, |v| v.len()))
                            .sum::<usize>()
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).sum()
        });
        let get_mt = t.elapsed().as_secs_f64();
        assert_eq!(found_mt, keys.len() * 100);
        let t = Instant::now();
        let mut c = txn.cursor(Database::MAIN).unwrap();
        let mut n = 0;
        let mut more = c.first().unwrap().is_some();
        while more {
            n += 1;
            more = c.next().unwrap().is_some();
        }
        let scan = t.elapsed().as_secs_f64();
        assert_eq!(n, keys.len());
        Times {
            insert,
            get,
            get_mt,
            scan,
        }
    }
}

struct Lmdb;

/// LMDB's environment handle, shared by reader threads (LMDB allows that; each thread
/// begins its own read txn).
struct SharedEnv(*mut ffi::MDB_env);
// SAFETY: an MDB_env may be used from several threads at once for read txns.
unsafe impl Send for SharedEnv {}
// SAFETY: see above.
unsafe impl Sync for SharedEnv {}

fn check(rc: i32, what: &str) {
    assert_eq!(rc, 0, "LMDB {what} failed: {rc}");
}

fn val(b: &[u8]) -> ffi::MDB_val {
    ffi::MDB_val {
        mv_size: b.len(),
        mv_data: b.as_ptr() as *mut _,
    }
}

impl Engine for Lmdb {
    const NAME: &'static str = "LMDB";

    fn run(dir: &Path, keys: &[[u8; 16]], sync: bool) -> Times {
        // SAFETY: plain use of LMDB's C API on handles created here, in the documented
        // order; every MDB_val points at live Rust memory for the duration of the call.
        unsafe {
            let mut env = ptr::null_mut();
            check(ffi::mdb_env_create(&mut env), "env_create");
            check(
                ffi::mdb_env_set_mapsize(env, keys.len() * 1024 + (256 << 20)),
                "set_mapsize",
            );
            let path = CString::new(dir.to_str().unwrap()).unwrap();
            let flags = if sync { 0 } else { ffi::MDB_NOSYNC };
            check(
                ffi::mdb_env_open(env, path.as_ptr(), flags, 0o644),
                "env_open",
            );
            let mut dbi = 0;
            let value = [0x5Au8; 100];
            let t = Instant::now();
            for chunk in keys.chunks(1000) {
                let mut txn = ptr::null_mut();
                check(
                    ffi::mdb_txn_begin(env, ptr::null_mut(), 0, &mut txn),
                    "txn_begin",
                );
                check(ffi::mdb_dbi_open(txn, ptr::null(), 0, &mut dbi), "dbi_open");
                for k in chunk {
                    let mut kv = val(k);
                    let mut vv = val(&value);
                    check(ffi::mdb_put(txn, dbi, &mut kv, &mut vv, 0), "put");
                }
                check(ffi::mdb_txn_commit(txn), "commit");
            }
            let insert = t.elapsed().as_secs_f64();
            let mut txn = ptr::null_mut();
            check(
                ffi::mdb_txn_begin(env, ptr::null_mut(), ffi::MDB_RDONLY, &mut txn),
                "txn_begin",
            );
            let t = Instant::now();
            let mut found = 0;
            for k in keys {
                let mut kv = val(k);
                let mut vv = ffi::MDB_val {
                    mv_size: 0,
                    mv_data: ptr::null_mut(),
                };
                if ffi::mdb_get(txn, dbi, &mut kv, &mut vv) == 0 {
                    found += vv.mv_size;
                }
            }
            let get = t.elapsed().as_secs_f64();
            assert_eq!(found, keys.len() * 100);
            let t = Instant::now();
            let shared = SharedEnv(env);
            let chunk = keys.len().div_ceil(threads());
            let found_mt: usize = std::thread::scope(|s| {
                let handles: Vec<_> = keys
                    .chunks(chunk)
                    .map(|part| {
                        let shared = &shared;
                        s.spawn(move || {
                            let mut txn = ptr::null_mut();
                            check(
                                ffi::mdb_txn_begin(
                                    shared.0,
                                    ptr::null_mut(),
                                    ffi::MDB_RDONLY,
                                    &mut txn,
                                ),
                                "txn_begin",
                            );
                            let mut sum = 0;
                            for k in part {
                                let mut kv = val(k);
                                let mut vv = ffi::MDB_val {
                                    mv_size: 0,
                                    mv_data: ptr::null_mut(),
                                };
                                if ffi::mdb_get(txn, dbi, &mut kv, &mut vv) == 0 {
                                    sum += vv.mv_size;
                                }
                            }
                            ffi::mdb_txn_abort(txn);
                            sum
                        })
                    })
                    .collect();
                handles.into_iter().map(|h| h.join().unwrap()).sum()
            });
            let get_mt = t.elapsed().as_secs_f64();
            assert_eq!(found_mt, keys.len() * 100);
            let t = Instant::now();
            let mut cur = ptr::null_mut();
            check(ffi::mdb_cursor_open(txn, dbi, &mut cur), "cursor_open");
            let mut kv = ffi::MDB_val {
                mv_size: 0,
                mv_data: ptr::null_mut(),
            };
            let mut vv = kv;
            let mut n = 0;
            let mut rc = ffi::mdb_cursor_get(cur, &mut kv, &mut vv, ffi::MDB_FIRST);
            while rc == 0 {
                n += 1;
                rc = ffi::mdb_cursor_get(cur, &mut kv, &mut vv, ffi::MDB_NEXT);
            }
            let scan = t.elapsed().as_secs_f64();
            assert_eq!(n, keys.len());
            ffi::mdb_cursor_close(cur);
            ffi::mdb_txn_abort(txn);
            ffi::mdb_env_close(env);
            Times {
                insert,
                get,
                get_mt,
                scan,
            }
        }
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// Which phase of a run a table row reports.
type Pick = fn(&Times) -> f64;

fn compare(keys: &[[u8; 16]], reps: usize, sync: bool) {
    let mut f = Vec::new();
    let mut l = Vec::new();
    for _ in 0..reps {
        let d = tempfile::tempdir().unwrap();
        f.push(Ferro::run(d.path(), keys, sync));
        let d = tempfile::tempdir().unwrap();
        l.push(Lmdb::run(d.path(), keys, sync));
    }
    let n = keys.len() as f64;
    let label = if sync { "synced" } else { "no sync" };
    let rows: [(&str, Pick); 4] = [
        ("W3 random insert, txns of 1000", |t| t.insert),
        ("W4 random get, 1 thread", |t| t.get),
        ("W4 random get, 1 thread per core", |t| t.get_mt),
        ("W5 full scan", |t| t.scan),
    ];
    for (name, pick) in rows {
        let fm = median(f.iter().map(pick).collect());
        let lm = median(l.iter().map(pick).collect());
        println!(
            "| {name} ({label}) | {:>12.0} | {:>12.0} | {:>5.2} |",
            n / fm,
            n / lm,
            lm / fm
        );
    }
}

fn main() {
    let args = Args::parse();
    if let Some(Workload::W1(w1_args)) = &args.workload {
        w1::run(w1_args);
        return;
    }
    let keys = keys(args.entries, 42);
    if let Some(engine) = args.only.as_deref() {
        let d = tempfile::tempdir().unwrap();
        let t = match engine {
            "ferrocore" => Ferro::run(d.path(), &keys, args.sync),
            "lmdb" => Lmdb::run(d.path(), &keys, args.sync),
            other => panic!("unknown engine {other}"),
        };
        println!(
            "{engine}: insert {:.3} s, get {:.3} s, scan {:.3} s",
            t.insert, t.get, t.scan
        );
        return;
    }
    println!(
        "N = {} entries (16-byte random keys, 100-byte values), median of {} interleaved runs",
        args.entries, args.reps
    );
    println!(
        "| workload | {} ops/s | {} ops/s | speed ratio (>1: ferrocore faster) |",
        Ferro::NAME,
        Lmdb::NAME
    );
    println!("|---|---:|---:|---:|");
    compare(&keys, args.reps, false);
    if args.sync {
        compare(&keys, args.reps, true);
    }
}
