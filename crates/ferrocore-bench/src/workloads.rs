//! The workloads of DESIGN.md ("How we measure"), each a plain function that opens one
//! engine in a fresh directory, runs the workload's phases, checks what it read, and
//! returns the timing of every phase. The runner calls one of them per child process, so
//! peak memory is per engine and per workload.

use std::path::Path;
use std::time::Instant;

use clap::ValueEnum;
use serde::{Deserialize, Serialize};

use crate::data::{indexed_entries, value, KeyBuf, Keys};
use crate::engines::{self, Config, Kind};

/// A unit the runner runs in one child process.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[value(rename_all = "kebab-case")]
pub enum Group {
    /// W2 sorted bulk load.
    W2,
    /// W2 as one bulk load: ferrocore's bottom-up loader against LMDB's MDB_APPEND, one
    /// txn each.
    W2Bulk,
    /// W3 random inserts, then W4 random reads and W5 a full scan over the result.
    W3,
    /// W6 on an empty file.
    W6Empty,
    /// W6 on a prefilled file.
    W6Prefilled,
    /// W7 indexed load.
    W7,
    /// W9 redb's workload set.
    W9,
}

impl Group {
    pub const ALL: [Group; 7] = [
        Group::W2,
        Group::W2Bulk,
        Group::W3,
        Group::W6Empty,
        Group::W6Prefilled,
        Group::W7,
        Group::W9,
    ];

    pub fn engines(self) -> &'static [Kind] {
        match self {
            Group::W2 | Group::W6Empty | Group::W6Prefilled | Group::W7 => &Kind::WITH_WRITEMAP,
            Group::W2Bulk => &Kind::BULK,
            Group::W3 | Group::W9 => &Kind::MAIN,
        }
    }
}

/// Workload sizes (`--full` or the quick default).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Sizes {
    pub name: String,
    /// W3-W5: entries (16-byte keys, 100-byte values).
    pub n: u64,
    /// W2: entries (16-byte keys, 100-byte values).
    pub w2_n: u64,
    /// W2: entries per write txn.
    pub w2_txn: u64,
    /// W6: synced commits of one put.
    pub w6_commits: u64,
    /// W6: entries (16-byte keys, 100-byte values) in the prefilled file.
    pub w6_prefill: u64,
    /// W7: entries, each in the main DB and in 10 indexes.
    pub w7_entries: u64,
    /// W7: entries per write txn.
    pub w7_txn: u64,
    /// W7: bytes of each entry's record.
    pub w7_record: usize,
    /// W9: elements of the bulk load.
    pub w9_elements: u64,
    /// W9: individual synced writes.
    pub w9_individual: u64,
    /// W9: batches and entries per batch.
    pub w9_batches: u64,
    pub w9_batch_size: u64,
    /// W9: random reads, and range reads of `w9_scan_len` entries.
    pub w9_reads: u64,
    pub w9_scans: u64,
    pub w9_scan_len: usize,
    /// Thread counts for W9's multi-threaded reads (W4 uses one per core).
    pub w9_threads: Vec<usize>,
}

impl Sizes {
    pub fn quick() -> Sizes {
        Sizes {
            name: "quick".into(),
            n: 200_000,
            w2_n: 1_000_000,
            w2_txn: 100_000,
            w6_commits: 1_000,
            w6_prefill: 2_000_000,
            w7_entries: 50_000,
            w7_txn: 1_000,
            w7_record: 256,
            w9_elements: 200_000,
            w9_individual: 1_000,
            w9_batches: 100,
            w9_batch_size: 1_000,
            w9_reads: 200_000,
            w9_scans: 100_000,
            w9_scan_len: 10,
            w9_threads: vec![cores(), 8],
        }
    }

    pub fn full() -> Sizes {
        Sizes {
            name: "full".into(),
            n: 1_000_000,
            w2_n: 10_000_000,
            w6_prefill: 20_000_000,
            w7_entries: 500_000,
            w9_elements: 1_000_000,
            w9_reads: 1_000_000,
            w9_scans: 500_000,
            ..Sizes::quick()
        }
    }
}

impl Sizes {
    /// Every count times `f` (for smoke tests of the harness; W6 keeps its 1,000 commits
    /// unless `f` < 1, W9's thread counts stay).
    pub fn scaled(mut self, f: f64) -> Sizes {
        let s = |x: &mut u64| *x = ((*x as f64 * f) as u64).max(10);
        #[allow(clippy::float_cmp)] // exactly the default scale, which names no factor
        if f != 1.0 {
            self.name = format!("{} x {f}", self.name);
        }
        s(&mut self.n);
        s(&mut self.w2_n);
        s(&mut self.w6_prefill);
        s(&mut self.w7_entries);
        s(&mut self.w9_elements);
        s(&mut self.w9_reads);
        s(&mut self.w9_scans);
        if f < 1.0 {
            s(&mut self.w6_commits);
            s(&mut self.w9_individual);
            s(&mut self.w9_batches);
        }
        self
    }
}

/// Threads for "all cores".
pub fn cores() -> usize {
    std::thread::available_parallelism().map_or(2, std::num::NonZero::get)
}

/// One timed phase.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Phase {
    /// The DESIGN.md workload it reports (W2 ... W9).
    pub workload: String,
    pub name: String,
    pub ops: u64,
    pub secs: f64,
}

/// What one engine did on one group, in one child process.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CellResult {
    pub group: Group,
    pub engine: Kind,
    pub phases: Vec<Phase>,
    /// Bytes allocated on disk by the engine's files at the end (blocks x 512: sparse
    /// files count what they use).
    pub disk_bytes: u64,
    /// Apparent size of the engine's files (LMDB WRITEMAP extends its file to the map
    /// size).
    pub apparent_bytes: u64,
    /// Peak resident set of the child process (VmHWM), kB.
    pub peak_rss_kb: u64,
    /// Resident set just before the engine was opened (the harness and its key arrays), kB.
    pub base_rss_kb: u64,
}

struct Recorder {
    phases: Vec<Phase>,
}

impl Recorder {
    fn time<T>(&mut self, workload: &str, name: &str, ops: u64, f: impl FnOnce() -> T) -> T {
        let t = Instant::now();
        let r = f();
        let secs = t.elapsed().as_secs_f64();
        self.phases.push(Phase {
            workload: workload.into(),
            name: name.into(),
            ops,
            secs,
        });
        r
    }
}

/// Runs `group` on `engine` in the fresh directory `dir`.
pub fn run(group: Group, engine: Kind, sizes: &Sizes, dir: &Path) -> CellResult {
    let mut rec = Recorder { phases: Vec::new() };
    let mut base_rss_kb = 0;
    let mut opened = |cfg: Config| {
        base_rss_kb = crate::machine::rss_kb();
        engines::open(engine, dir, cfg)
    };
    match group {
        Group::W2 => {
            let keys = KeyBuf::sorted(sizes.w2_n, 16);
            let v = value(100);
            let cfg = Config {
                sync: false,
                data_bytes: sizes.w2_n * 140,
                indexes: 0,
            };
            let mut e = opened(cfg);
            rec.time(
                "W2",
                &format!("sorted load, append, txns of {}, sync at end", sizes.w2_txn),
                sizes.w2_n,
                || {
                    for chunk in keys.keys().chunks(sizes.w2_txn as usize) {
                        e.put_batch(chunk, &v, true);
                    }
                    e.sync();
                },
            );
            // A light check (a full scan would put the whole file in the mmap engines'
            // resident set and blur the peak-memory figure).
            let sample = keys.keys().take(1000);
            assert_eq!(e.get_all(sample), sample.count() as u64 * 100);
        }
        Group::W2Bulk => {
            let keys = KeyBuf::sorted(sizes.w2_n, 16);
            let v = value(100);
            let cfg = Config {
                sync: false,
                data_bytes: sizes.w2_n * 140,
                indexes: 0,
            };
            let mut e = opened(cfg);
            rec.time(
                "W2",
                "bulk load in one txn (ferrocore bulk loader, LMDB MDB_APPEND), sync at end",
                sizes.w2_n,
                || {
                    e.bulk_load(keys.keys(), &v);
                    e.sync();
                },
            );
            let sample = keys.keys().take(1000);
            assert_eq!(e.get_all(sample), sample.count() as u64 * 100);
        }
        Group::W3 => {
            let keys = KeyBuf::random(sizes.n, 16, 42);
            let k = keys.keys();
            let v = value(100);
            let cfg = Config {
                sync: false,
                data_bytes: sizes.n * 140,
                indexes: 0,
            };
            let mut e = opened(cfg);
            rec.time(
                "W3",
                "random insert, txns of 1000, no sync",
                sizes.n,
                || {
                    for chunk in k.chunks(1000) {
                        e.put_batch(chunk, &v, false);
                    }
                },
            );
            let found = rec.time("W4", "random get, 1 thread", sizes.n, || e.get_all(k));
            assert_eq!(found, sizes.n * 100);
            let threads = cores();
            e.prepare_readers(threads);
            let parts = k.split(threads);
            let found = rec.time(
                "W4",
                &format!("random get, {threads} threads (1 per core)"),
                sizes.n,
                || e.get_parallel(&parts),
            );
            assert_eq!(found, sizes.n * 100);
            let n = rec.time("W5", "full scan", sizes.n, || e.scan());
            assert_eq!(n, sizes.n);
        }
        Group::W6Empty | Group::W6Prefilled => {
            let prefill = if group == Group::W6Prefilled {
                sizes.w6_prefill
            } else {
                0
            };
            let cfg = Config {
                sync: true,
                data_bytes: (prefill + sizes.w6_commits) * 140,
                indexes: 0,
            };
            let v = value(100);
            let commits = KeyBuf::random(sizes.w6_commits, 16, 6);
            let mut e = if prefill > 0 {
                let pre = KeyBuf::spread(prefill, 16, 60);
                let mut e = opened(cfg);
                e.set_sync(false);
                for chunk in pre.keys().chunks(100_000) {
                    e.put_batch(chunk, &v, true);
                }
                e.sync();
                e.set_sync(true);
                drop(pre);
                e
            } else {
                opened(cfg)
            };
            let name = if prefill > 0 {
                format!(
                    "1 put per synced commit, file prefilled with {} entries",
                    crate::runner::thousands(prefill as f64)
                )
            } else {
                "1 put per synced commit, empty file".to_string()
            };
            rec.time("W6", &name, sizes.w6_commits, || {
                for k in commits.keys().chunks(1) {
                    e.put_batch(k, &v, false);
                }
            });
            assert_eq!(e.get_all(commits.keys()), sizes.w6_commits * 100);
        }
        Group::W7 => {
            let entries = indexed_entries(sizes.w7_entries, 10);
            let record = value(sizes.w7_record);
            let cfg = Config {
                sync: false,
                data_bytes: sizes.w7_entries * (sizes.w7_record as u64 + 24 + 10 * 40),
                indexes: 10,
            };
            let mut e = opened(cfg);
            rec.time(
                "W7",
                &format!(
                    "indexed load: main DB + 10 DUPSORT indexes, txns of {}, sync at end",
                    sizes.w7_txn
                ),
                sizes.w7_entries,
                || {
                    for chunk in entries.chunks(sizes.w7_txn as usize) {
                        e.indexed_batch(chunk, &record);
                    }
                    e.sync();
                },
            );
        }
        Group::W9 => run_w9(sizes, &mut rec, &mut opened),
    }
    let (disk_bytes, apparent_bytes) = dir_size(dir);
    CellResult {
        group,
        engine,
        phases: rec.phases,
        disk_bytes,
        apparent_bytes,
        peak_rss_kb: crate::machine::peak_rss_kb(),
        base_rss_kb,
    }
}

/// W9, after redb's benchmark (crates/redb-bench/benches/common.rs there): 24-byte random
/// keys, 150-byte values, every commit durable.
fn run_w9(
    sizes: &Sizes,
    rec: &mut Recorder,
    opened: &mut dyn FnMut(Config) -> Box<dyn engines::Engine>,
) {
    let keys = KeyBuf::random(sizes.w9_elements, 24, 3);
    let k = keys.keys();
    let individual = KeyBuf::random(sizes.w9_individual, 24, 31);
    let batches = KeyBuf::random(sizes.w9_batches * sizes.w9_batch_size, 24, 32);
    let starts = KeyBuf::random(sizes.w9_scans, 24, 33);
    let v = value(150);
    let total = sizes.w9_elements + sizes.w9_individual + sizes.w9_batches * sizes.w9_batch_size;
    let cfg = Config {
        sync: true,
        data_bytes: total * 200,
        indexes: 0,
    };
    let mut e = opened(cfg);
    rec.time("W9", "bulk load (1 txn)", sizes.w9_elements, || {
        e.put_batch(k, &v, false);
    });
    rec.time(
        "W9",
        "individual writes (synced)",
        sizes.w9_individual,
        || {
            for one in individual.keys().chunks(1) {
                e.put_batch(one, &v, false);
            }
        },
    );
    rec.time(
        "W9",
        &format!("batch writes ({} per synced txn)", sizes.w9_batch_size),
        sizes.w9_batches * sizes.w9_batch_size,
        || {
            for b in batches.keys().chunks(sizes.w9_batch_size as usize) {
                e.put_batch(b, &v, false);
            }
        },
    );
    let reads = k.take(sizes.w9_reads as usize);
    let found = rec.time("W9", "random reads", reads.count() as u64, || {
        e.get_all(reads)
    });
    assert_eq!(found, reads.count() as u64 * 150);
    let n = rec.time(
        "W9",
        &format!("range reads ({} entries each)", sizes.w9_scan_len),
        sizes.w9_scans,
        || e.range_reads(starts.keys(), sizes.w9_scan_len),
    );
    assert!(n > 0);
    for &threads in &sizes.w9_threads {
        e.prepare_readers(threads);
        let parts: Vec<Keys<'_>> = k.split(threads);
        let found = rec.time(
            "W9",
            &format!("random reads, {threads} threads"),
            sizes.w9_elements,
            || e.get_parallel(&parts),
        );
        assert_eq!(found, sizes.w9_elements * 150);
    }
    let half = k.take(sizes.w9_elements as usize / 2);
    rec.time("W9", "removals (half, 1 txn)", half.count() as u64, || {
        e.delete_batch(half);
    });
}

/// (allocated, apparent) bytes of the files under `dir`.
pub fn dir_size(dir: &Path) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt;
    let mut alloc = 0;
    let mut apparent = 0;
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        if let Ok(m) = entry.metadata() {
            if m.is_file() {
                alloc += m.blocks() * 512;
                apparent += m.len();
            }
        }
    }
    (alloc, apparent)
}
