//! `ferrocore demo` (the default command): a small workload on a fresh environment in a
//! temporary directory — random inserts in synced txns, random point reads, a full scan,
//! then an integrity check — and what it measured.

use std::time::Instant;

use ferrocore::{Database, EnvOptions};

use crate::failure::{Failure, Outcome};

/// Options of `ferrocore demo`.
#[derive(clap::Args, Debug)]
#[command(
    display_name = "ferrocore",
    about = "Run the demo workload on a temporary environment (the default command)"
)]
pub struct Args {
    /// Number of entries.
    #[arg(short = 'n', long, default_value_t = 1_000_000)]
    pub entries: u64,
    /// Entries per write txn.
    #[arg(long, default_value_t = 1000)]
    pub batch: u64,
}

impl Default for Args {
    fn default() -> Self {
        Args {
            entries: 1_000_000,
            batch: 1000,
        }
    }
}

/// A small deterministic generator (splitmix64) so runs are repeatable.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn key(&mut self) -> [u8; 16] {
        let mut k = [0u8; 16];
        k[..8].copy_from_slice(&self.next().to_be_bytes());
        k[8..].copy_from_slice(&self.next().to_be_bytes());
        k
    }
}

fn rate(n: u64, secs: f64) -> String {
    format!("{:>10.0} ops/s", n as f64 / secs)
}

/// Runs `ferrocore demo`.
pub fn run(args: &Args) -> Outcome {
    demo(args.entries, args.batch.max(1)).map_err(|e| Failure::new(e.to_string()))
}

fn demo(entries: u64, batch: u64) -> ferrocore::Result<()> {
    let dir = tempfile::tempdir()?;
    // SAFETY: the directory is ours and nothing else touches it while the demo runs.
    let env = unsafe { EnvOptions::new().open(dir.path())? };
    println!(
        "ferrocore demo: {entries} random 16-byte keys, 100-byte values, txns of {batch}, in {}",
        dir.path().display()
    );
    let value = [0x5Au8; 100];
    let mut rng = Rng(42);
    let t = Instant::now();
    let mut done = 0;
    while done < entries {
        let mut txn = env.begin_write()?;
        for _ in 0..batch.min(entries - done) {
            txn.put(Database::MAIN, &rng.key(), &value, 0)?;
        }
        txn.commit()?;
        done += batch.min(entries - done);
    }
    let load = t.elapsed().as_secs_f64();
    println!(
        "  insert (random, synced commits)  {:>8.3} s  {}",
        load,
        rate(entries, load)
    );

    let mut rng = Rng(42);
    let t = Instant::now();
    let txn = env.begin_read()?;
    let mut found = 0u64;
    for _ in 0..entries {
        if txn.get(Database::MAIN, &rng.key())?.is_some() {
            found += 1;
        }
    }
    let reads = t.elapsed().as_secs_f64();
    println!(
        "  get (random, all hit)             {:>8.3} s  {}",
        reads,
        rate(entries, reads)
    );
    assert_eq!(found, entries, "every inserted key is found");

    let t = Instant::now();
    let mut cursor = txn.cursor(Database::MAIN)?;
    let mut scanned = 0u64;
    let mut bytes = 0usize;
    let mut item = cursor.first()?.map(|(k, v)| k.len() + v.len());
    while let Some(len) = item {
        scanned += 1;
        bytes += len;
        item = cursor.next()?.map(|(k, v)| k.len() + v.len());
    }
    let scan = t.elapsed().as_secs_f64();
    println!(
        "  full cursor scan                  {:>8.3} s  {}  ({} MB)",
        scan,
        rate(scanned, scan),
        bytes >> 20
    );
    let stat = txn.stat();
    drop(txn);
    let t = Instant::now();
    let report = env.check()?;
    println!(
        "  check: every page accounted for   {:>8.3} s  ({} tree pages, {} free)",
        t.elapsed().as_secs_f64(),
        report.tree_pages,
        report.free_pages
    );
    let info = env.info()?;
    println!(
        "  entries {}  depth {}  leaf pages {}  branch pages {}  file {:.1} MB  last txn {}",
        stat.entries,
        stat.depth,
        stat.leaf_pages,
        stat.branch_pages,
        ((info.last_pgno + 1) * env.page_size() as u64) as f64 / 1e6,
        info.last_txnid
    );
    Ok(())
}
