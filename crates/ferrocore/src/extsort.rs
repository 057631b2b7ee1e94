//! External sort: key/value pairs in a DB's order, with bounded memory, for the bulk
//! loader (seed 004: "order the data on disk, then build the pages").
//!
//! Pairs are held in memory up to [`SortOptions::memory_bytes`]; each time the budget
//! fills, they are sorted and written as a run to an anonymous temporary file (deleted
//! when closed, also on a crash). [`ExternalSort::finish`] merges the runs (first in
//! groups of [`SortOptions::fan_in`] when there are more) and yields the pairs in order.
//! Input that fits the budget is sorted in memory and never touches a file.
//!
//! Order: keys by the DB's key order; in a DUPSORT DB, a key's values by its value order;
//! ties in arrival order (a stable sort), so that of a repeated key the last value comes
//! last. Each pair carries a caller's tag (such as its input line) back out.
//!
//! Run file record: `klen: u32 LE, vlen: u32 LE, tag: u64 LE, key, value`.

use std::cmp::Ordering;
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Seek, Write};
use std::path::PathBuf;

use crate::bulk::ItemLimits;
use crate::error::{Error, Result};
use crate::order::Orders;
use crate::txn::{Database, WriteTxn};

/// Bytes of a run record's header.
const RECORD_HEADER: usize = 16;
/// Bytes the in-memory index spends per pair.
const SLOT_BYTES: usize = std::mem::size_of::<Slot>();

/// Limits of an external sort.
#[derive(Clone, Debug)]
pub struct SortOptions {
    /// Memory for pairs held before a sorted run is written out, and for the merge's read
    /// buffers (default 256 MiB; at least 4 KiB is used).
    pub memory_bytes: usize,
    /// Directory of the temporary run files (default: the system's temp dir, `TMPDIR`).
    pub temp_dir: Option<PathBuf>,
    /// Most runs merged at once (default 64, at least 2); more are merged in groups first,
    /// which bounds open files and read buffers.
    pub fan_in: usize,
}

impl Default for SortOptions {
    fn default() -> Self {
        SortOptions {
            memory_bytes: 256 << 20,
            temp_dir: None,
            fan_in: 64,
        }
    }
}

/// A pair held in memory: where its bytes are in the arena, and its tag.
#[derive(Clone, Copy, Debug)]
struct Slot {
    start: usize,
    key_len: u32,
    value_len: u32,
    tag: u64,
}

/// Sorts pairs in a DB's order: push them in any order, then [`ExternalSort::finish`].
pub struct ExternalSort {
    orders: Orders,
    /// What the DB refuses (for `for_db`): checked as pairs arrive.
    limits: Option<ItemLimits>,
    options: SortOptions,
    /// Pair bytes (key then value), in arrival order.
    arena: Vec<u8>,
    index: Vec<Slot>,
    /// Capacities the budget gives the arena and the index.
    arena_cap: usize,
    index_cap: usize,
    /// Sorted runs written so far, in arrival order.
    runs: Vec<File>,
    pushed: u64,
}

impl ExternalSort {
    /// A sort by `orders` (key order, and value order for a DUPSORT DB).
    pub fn new(orders: Orders, options: SortOptions) -> ExternalSort {
        let memory = options.memory_bytes.max(4096);
        ExternalSort {
            orders,
            limits: None,
            arena_cap: memory / 4 * 3,
            index_cap: (memory / 4 / SLOT_BYTES).max(1),
            options: SortOptions {
                memory_bytes: memory,
                fan_in: options.fan_in.max(2),
                ..options
            },
            arena: Vec::new(),
            index: Vec::new(),
            runs: Vec::new(),
            pushed: 0,
        }
    }

    /// A sort in `db`'s orders that refuses (`BadValSize`) what a put into `db` refuses
    /// for its size, as the pairs arrive.
    pub fn for_db(txn: &WriteTxn<'_>, db: Database, options: SortOptions) -> Result<Self> {
        let orders = txn.orders(db)?;
        let mut sort = ExternalSort::new(orders, options);
        sort.limits = Some(ItemLimits {
            max_key: txn.max_key_size(),
            dupsort: orders.dup.is_some(),
        });
        Ok(sort)
    }

    /// Pairs pushed so far.
    pub fn len(&self) -> u64 {
        self.pushed
    }

    /// True if nothing was pushed.
    pub fn is_empty(&self) -> bool {
        self.pushed == 0
    }

    /// Sorted runs written to temporary files so far.
    pub fn runs_written(&self) -> usize {
        self.runs.len()
    }

    /// Adds a pair, tagged with its arrival number (0, 1, ...).
    pub fn push(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        self.push_tagged(key, value, self.pushed)
    }

    /// Adds a pair with a tag of the caller's (an input position) that comes back with it.
    pub fn push_tagged(&mut self, key: &[u8], value: &[u8], tag: u64) -> Result<()> {
        if let Some(limits) = &self.limits {
            limits.check(key, value)?;
        }
        let len = key.len() + value.len();
        if self.arena.len() + len > self.arena_cap || self.index.len() == self.index_cap {
            self.spill()?;
        }
        if len > self.arena_cap {
            // Larger than the budget on its own: a run of one pair.
            let mut out = self.new_run_writer()?;
            write_record(&mut out, key, value, tag)?;
            self.runs.push(finish_writer(out)?);
        } else {
            if self.arena.capacity() == 0 {
                // The whole share at once: growing by doubling would pass the budget.
                self.arena.reserve_exact(self.arena_cap);
                self.index.reserve_exact(self.index_cap);
            }
            self.index.push(Slot {
                start: self.arena.len(),
                key_len: key.len() as u32,
                value_len: value.len() as u32,
                tag,
            });
            self.arena.extend_from_slice(key);
            self.arena.extend_from_slice(value);
        }
        self.pushed += 1;
        Ok(())
    }

    fn new_run_writer(&self) -> Result<BufWriter<File>> {
        let file = match &self.options.temp_dir {
            Some(dir) => tempfile::tempfile_in(dir)?,
            None => tempfile::tempfile()?,
        };
        Ok(BufWriter::with_capacity(1 << 16, file))
    }

    /// Sorts the pairs in memory (stable: ties keep arrival order).
    fn sort_memory(&mut self) {
        let (arena, orders) = (&self.arena, self.orders);
        self.index.sort_unstable_by(|a, b| {
            compare(orders, slot_pair(arena, a), slot_pair(arena, b)).then(a.start.cmp(&b.start))
        });
    }

    /// Writes the pairs in memory as a sorted run.
    fn spill(&mut self) -> Result<()> {
        if self.index.is_empty() {
            return Ok(());
        }
        self.sort_memory();
        let mut out = self.new_run_writer()?;
        for slot in &self.index {
            let (key, value) = slot_pair(&self.arena, slot);
            write_record(&mut out, key, value, slot.tag)?;
        }
        self.runs.push(finish_writer(out)?);
        self.arena.clear();
        self.index.clear();
        Ok(())
    }

    /// The pairs, in order.
    pub fn finish(mut self) -> Result<SortedItems> {
        if self.runs.is_empty() {
            self.sort_memory();
            return Ok(SortedItems(Source::Memory {
                arena: self.arena,
                index: self.index,
                next: 0,
            }));
        }
        self.spill()?;
        self.arena = Vec::new();
        self.index = Vec::new();
        let fan_in = self.options.fan_in;
        let mut runs = std::mem::take(&mut self.runs);
        while runs.len() > fan_in {
            // Consecutive groups, so the merged runs keep arrival order among themselves.
            let mut merged = Vec::with_capacity(runs.len().div_ceil(fan_in));
            let mut rest = runs.into_iter();
            loop {
                let group: Vec<File> = rest.by_ref().take(fan_in).collect();
                if group.is_empty() {
                    break;
                }
                let mut merger = Merger::new(self.orders, group, self.read_buffer(fan_in))?;
                let mut out = self.new_run_writer()?;
                while let Some(item) = merger.next()? {
                    write_record(&mut out, item.key, item.value, item.tag)?;
                }
                merged.push(finish_writer(out)?);
            }
            runs = merged;
        }
        let buffer = self.read_buffer(runs.len());
        Ok(SortedItems(Source::Merge(Merger::new(
            self.orders,
            runs,
            buffer,
        )?)))
    }

    /// Read buffer per run when `runs` are merged: a share of the budget.
    fn read_buffer(&self, runs: usize) -> usize {
        (self.options.memory_bytes / (runs + 1)).clamp(4096, 1 << 20)
    }
}

/// The pair of a slot.
fn slot_pair<'a>(arena: &'a [u8], slot: &Slot) -> (&'a [u8], &'a [u8]) {
    let key_end = slot.start + slot.key_len as usize;
    (
        &arena[slot.start..key_end],
        &arena[key_end..key_end + slot.value_len as usize],
    )
}

/// Orders two pairs: by key, then (DUPSORT) by value.
fn compare(orders: Orders, a: (&[u8], &[u8]), b: (&[u8], &[u8])) -> Ordering {
    orders.key.compare(a.0, b.0).then_with(|| match orders.dup {
        Some(dcmp) => dcmp.compare(a.1, b.1),
        None => Ordering::Equal,
    })
}

fn write_record(out: &mut impl Write, key: &[u8], value: &[u8], tag: u64) -> Result<()> {
    let mut header = [0u8; RECORD_HEADER];
    header[..4].copy_from_slice(&(key.len() as u32).to_le_bytes());
    header[4..8].copy_from_slice(&(value.len() as u32).to_le_bytes());
    header[8..].copy_from_slice(&tag.to_le_bytes());
    out.write_all(&header)?;
    out.write_all(key)?;
    out.write_all(value)?;
    Ok(())
}

/// Flushes a run and rewinds it for reading.
fn finish_writer(out: BufWriter<File>) -> Result<File> {
    let mut file = out.into_inner().map_err(|e| Error::Io(e.into_error()))?;
    file.rewind()?;
    Ok(file)
}

/// A pair coming out of the sort.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SortedItem<'a> {
    /// The key.
    pub key: &'a [u8],
    /// The value.
    pub value: &'a [u8],
    /// The tag it was pushed with.
    pub tag: u64,
}

/// The sorted pairs: call [`SortedItems::next`] until it gives `None`.
pub struct SortedItems(Source);

enum Source {
    Memory {
        arena: Vec<u8>,
        index: Vec<Slot>,
        next: usize,
    },
    Merge(Merger),
}

impl SortedItems {
    /// The next pair in order (valid until the next call), or `None` after the last.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Result<Option<SortedItem<'_>>> {
        match &mut self.0 {
            Source::Memory { arena, index, next } => {
                let Some(slot) = index.get(*next) else {
                    return Ok(None);
                };
                *next += 1;
                let (key, value) = slot_pair(arena, slot);
                Ok(Some(SortedItem {
                    key,
                    value,
                    tag: slot.tag,
                }))
            }
            Source::Merge(m) => m.next(),
        }
    }
}

/// One run being read: its current pair.
struct RunReader {
    reader: BufReader<File>,
    /// Key then value of the current pair.
    pair: Vec<u8>,
    key_len: usize,
    tag: u64,
}

impl RunReader {
    /// Reads the next pair; false at the end of the run.
    fn advance(&mut self) -> Result<bool> {
        let mut header = [0u8; RECORD_HEADER];
        let mut got = 0;
        while got < RECORD_HEADER {
            let n = self.reader.read(&mut header[got..])?;
            if n == 0 {
                if got == 0 {
                    return Ok(false);
                }
                return Err(truncated());
            }
            got += n;
        }
        let key_len = u32::from_le_bytes(header[..4].try_into().expect("4 bytes")) as usize;
        let value_len = u32::from_le_bytes(header[4..8].try_into().expect("4 bytes")) as usize;
        self.tag = u64::from_le_bytes(header[8..].try_into().expect("8 bytes"));
        self.key_len = key_len;
        self.pair.resize(key_len + value_len, 0);
        self.reader
            .read_exact(&mut self.pair)
            .map_err(|_| truncated())?;
        Ok(true)
    }

    fn item(&self) -> (&[u8], &[u8]) {
        self.pair.split_at(self.key_len)
    }
}

fn truncated() -> Error {
    Error::Io(std::io::Error::new(
        std::io::ErrorKind::UnexpectedEof,
        "external sort: a temporary run file ended inside a record",
    ))
}

/// A k-way merge of sorted runs: a binary heap of run numbers, smallest pair on top
/// (ties: the earlier run, whose pairs arrived first).
struct Merger {
    orders: Orders,
    runs: Vec<RunReader>,
    heap: Vec<usize>,
    /// The run whose pair was handed out last, to advance on the next call.
    handed: Option<usize>,
}

impl Merger {
    fn new(orders: Orders, files: Vec<File>, buffer: usize) -> Result<Merger> {
        let mut runs = Vec::with_capacity(files.len());
        let mut heap = Vec::with_capacity(files.len());
        for file in files {
            let mut run = RunReader {
                reader: BufReader::with_capacity(buffer, file),
                pair: Vec::new(),
                key_len: 0,
                tag: 0,
            };
            if run.advance()? {
                heap.push(runs.len());
            }
            runs.push(run);
        }
        let mut m = Merger {
            orders,
            runs,
            heap,
            handed: None,
        };
        for i in (0..m.heap.len() / 2).rev() {
            m.sift_down(i);
        }
        Ok(m)
    }

    /// True if run `a`'s pair comes before run `b`'s.
    fn before(&self, a: usize, b: usize) -> bool {
        compare(self.orders, self.runs[a].item(), self.runs[b].item()).then(a.cmp(&b))
            == Ordering::Less
    }

    fn sift_down(&mut self, mut i: usize) {
        loop {
            let (l, r) = (2 * i + 1, 2 * i + 2);
            let mut least = i;
            if l < self.heap.len() && self.before(self.heap[l], self.heap[least]) {
                least = l;
            }
            if r < self.heap.len() && self.before(self.heap[r], self.heap[least]) {
                least = r;
            }
            if least == i {
                return;
            }
            self.heap.swap(i, least);
            i = least;
        }
    }

    fn next(&mut self) -> Result<Option<SortedItem<'_>>> {
        if let Some(run) = self.handed.take() {
            debug_assert_eq!(self.heap.first(), Some(&run));
            if !self.runs[run].advance()? {
                let last = self.heap.len() - 1;
                self.heap.swap(0, last);
                self.heap.pop();
            }
            if !self.heap.is_empty() {
                self.sift_down(0);
            }
        }
        let Some(&top) = self.heap.first() else {
            return Ok(None);
        };
        self.handed = Some(top);
        let run = &self.runs[top];
        let (key, value) = run.item();
        Ok(Some(SortedItem {
            key,
            value,
            tag: run.tag,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::order::KeyCmp;

    fn drain(items: &mut SortedItems) -> Vec<(Vec<u8>, Vec<u8>, u64)> {
        let mut out = Vec::new();
        while let Some(i) = items.next().unwrap() {
            out.push((i.key.to_vec(), i.value.to_vec(), i.tag));
        }
        out
    }

    fn pairs(n: u64, seed: u64) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut x = seed;
        (0..n)
            .map(|i| {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let k = (x >> 40) % (n / 3 + 1); // repeats on purpose
                (
                    k.to_be_bytes().to_vec(),
                    i.to_le_bytes()[..(i % 5) as usize].to_vec(),
                )
            })
            .collect()
    }

    #[test]
    fn runs_and_multi_pass_merge_match_a_stable_sort() {
        let orders = Orders {
            key: KeyCmp::Lexicographic,
            dup: None,
        };
        let input = pairs(3000, 9);
        let mut want: Vec<(Vec<u8>, Vec<u8>, u64)> = input
            .iter()
            .enumerate()
            .map(|(i, (k, v))| (k.clone(), v.clone(), i as u64))
            .collect();
        want.sort_by(|a, b| a.0.cmp(&b.0)); // stable: ties by arrival
        for (memory, fan_in) in [(1 << 20, 64), (4096, 64), (4096, 3), (4096, 2)] {
            let options = SortOptions {
                memory_bytes: memory,
                temp_dir: None,
                fan_in,
            };
            let mut sort = ExternalSort::new(orders, options);
            for (k, v) in &input {
                sort.push(k, v).unwrap();
            }
            let runs = sort.runs_written();
            assert_eq!(runs > 0, memory == 4096, "memory {memory}: {runs} runs");
            let got = drain(&mut sort.finish().unwrap());
            assert_eq!(got, want, "memory {memory} fan-in {fan_in}");
        }
    }

    #[test]
    fn dup_order_sorts_values_and_a_huge_pair_is_its_own_run() {
        let orders = Orders {
            key: KeyCmp::Reverse,
            dup: Some(KeyCmp::Integer),
        };
        let mut sort = ExternalSort::new(
            orders,
            SortOptions {
                memory_bytes: 4096,
                ..SortOptions::default()
            },
        );
        sort.push(b"ab", &7u32.to_le_bytes()).unwrap();
        sort.push(b"ba", &300u32.to_le_bytes()).unwrap();
        sort.push(b"ab", &5u32.to_le_bytes()).unwrap();
        sort.push(b"zz", &vec![1u8; 10_000]).unwrap();
        sort.push(b"ba", &2u32.to_le_bytes()).unwrap();
        assert_eq!(
            sort.runs_written(),
            2,
            "the pairs before it, then the big one"
        );
        let got = drain(&mut sort.finish().unwrap());
        let keys: Vec<(&[u8], u64)> = got.iter().map(|(k, _, t)| (&k[..], *t)).collect();
        // Reverse key order: "ba" < "ab" < "zz"; values of a key by integer order.
        assert_eq!(
            keys,
            [
                (&b"ba"[..], 4),
                (b"ba", 1),
                (b"ab", 2),
                (b"ab", 0),
                (b"zz", 3)
            ]
        );
        assert_eq!(got[4].1.len(), 10_000);
    }
}
