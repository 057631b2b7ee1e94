//! The commit's I/O, as named steps in LMDB's order. Everything here goes through the
//! environment's [`DataFile`](crate::io::DataFile); nothing else in a commit touches the
//! file.
//!
//! 1. [`CommitStep::GrowFile`]: the file is made to cover every page the meta will count,
//!    before anything is written to them (a page written through a writable map must lie
//!    within the file).
//! 2. [`CommitStep::WriteData`]: the dirty pages, sorted by page number, each run of
//!    adjacent pages in vectored writes.
//! 3. [`CommitStep::FlushData`]: `fdatasync`, unless `NO_SYNC`.
//! 4. [`CommitStep::WriteMeta`]: meta page `txnid & 1`, the older of the two.
//! 5. [`CommitStep::FlushMeta`]: `fdatasync`, unless `NO_SYNC` or `NO_META_SYNC`.
//!
//! Then the txn id is published and readers see the commit.
//!
//! What a failure leaves (the README's durability section has the same table):
//!
//! | step fails | the txn | the environment |
//! |---|---|---|
//! | GrowFile, WriteData | fails (`Error::Commit`), must be aborted | usable: the last commit stands, the next write txn works |
//! | FlushData, WriteMeta, FlushMeta | fails | poisoned: write txns get `Error::Panic` until it is reopened; read txns keep working |
//!
//! Steps 1 and 2 only touch pages no snapshot reaches (copy-on-write), so failing there
//! loses nothing. A failed flush is different: the kernel may have dropped the pages it
//! could not write while the page cache still shows them, so a later commit could build on
//! data that is not on the disk. And once the meta write has begun, the meta page is in
//! doubt: the commit puts the page's previous bytes back (best effort, as LMDB does) so
//! that no process takes the unflushed meta for the newest, and the environment stops.

use std::sync::atomic::Ordering;

use crate::env::{env_flags, EnvInner};
use crate::error::{Error, Result};
use crate::meta::{Meta, META_WRITE_SIZE};

/// A step of the commit's I/O, in the order they run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CommitStep {
    /// Growing the file to cover every page the new meta counts.
    GrowFile,
    /// Writing the txn's dirty pages.
    WriteData,
    /// Flushing the data pages to the disk.
    FlushData,
    /// Writing the meta page.
    WriteMeta,
    /// Flushing the meta page to the disk.
    FlushMeta,
}

impl CommitStep {
    /// Every step, in order.
    pub const ALL: [CommitStep; 5] = [
        CommitStep::GrowFile,
        CommitStep::WriteData,
        CommitStep::FlushData,
        CommitStep::WriteMeta,
        CommitStep::FlushMeta,
    ];

    /// Whether a failure at this step poisons the environment (see the module doc).
    pub fn failure_poisons(self) -> bool {
        !matches!(self, CommitStep::WriteData | CommitStep::GrowFile)
    }

    /// What the step does, for error messages.
    pub fn describe(self) -> &'static str {
        match self {
            CommitStep::WriteData => "writing the data pages",
            CommitStep::GrowFile => "growing the data file",
            CommitStep::FlushData => "flushing the data pages",
            CommitStep::WriteMeta => "writing the meta page",
            CommitStep::FlushMeta => "flushing the meta page",
        }
    }
}

/// The error of a failed step; a step that poisons marks the environment failed first.
fn failed(env: &EnvInner, step: CommitStep, source: std::io::Error) -> Error {
    if step.failure_poisons() {
        env.failed.store(true, Ordering::Release);
    }
    Error::Commit { step, source }
}

/// Step 2: writes `dirty` (page number and buffer, sorted by page number, a buffer of
/// several pages for an overflow run), each run of adjacent pages in vectored writes.
/// `in_map` (`WRITE_MAP`): the pages are in place in the map already, and each run is
/// only announced to the data file (the fault-injecting one records it).
pub(crate) fn write_data(env: &EnvInner, dirty: &[(u64, &[u8])], in_map: bool) -> Result<()> {
    let ps = env.page_size;
    debug_assert!(
        dirty.windows(2).all(|w| w[0].0 < w[1].0),
        "dirty pages sorted"
    );
    let mut i = 0;
    while i < dirty.len() {
        let start = dirty[i].0;
        let mut end = start + (dirty[i].1.len() / ps) as u64;
        let mut j = i + 1;
        while j < dirty.len() && dirty[j].0 == end {
            end += (dirty[j].1.len() / ps) as u64;
            j += 1;
        }
        debug_assert!(
            j == dirty.len() || dirty[j].0 > end,
            "dirty buffers overlap"
        );
        let offset = start * ps as u64;
        let written = if in_map {
            env.data
                .wrote_through_map(offset, ((end - start) as usize) * ps)
        } else {
            env.data
                .write_vectored_at(offset, &mut dirty[i..j].iter().map(|&(_, b)| b))
        };
        written.map_err(|e| failed(env, CommitStep::WriteData, e))?;
        i = j;
    }
    Ok(())
}

/// Step 1: makes the file cover pages `..next_pgno`, before they are written, and even
/// those allocated and freed again within the txn (never written): open rejects a meta
/// whose last page lies past the end of the file.
pub(crate) fn grow_file(env: &EnvInner, next_pgno: u64) -> Result<()> {
    let needed = next_pgno * env.page_size as u64;
    if env.file_len.load(Ordering::Acquire) >= needed {
        return Ok(());
    }
    let grow = || -> std::io::Result<u64> {
        let actual = env.data.len()?;
        if actual < needed {
            env.data.set_len(needed)?;
        }
        Ok(actual)
    };
    let actual = grow().map_err(|e| failed(env, CommitStep::GrowFile, e))?;
    env.file_len.store(needed.max(actual), Ordering::Release);
    Ok(())
}

/// True if commits flush nothing: `NO_SYNC`, or `WRITE_MAP` with `MAP_ASYNC` (LMDB's
/// asynchronous map flush, which Linux leaves to its writeback).
fn no_sync(flags: u32) -> bool {
    flags & env_flags::NO_SYNC != 0
        || flags & (env_flags::WRITE_MAP | env_flags::MAP_ASYNC)
            == env_flags::WRITE_MAP | env_flags::MAP_ASYNC
}

/// Step 3: flushes the data pages, unless `NO_SYNC` (or `WRITE_MAP` with `MAP_ASYNC`).
/// Under `WRITE_MAP` this is the same `fdatasync`: the kernel writes the map's dirty
/// pages, and only those (it tracks them), never the whole map.
pub(crate) fn flush_data(env: &EnvInner) -> Result<()> {
    if no_sync(env.flags.load(Ordering::Relaxed)) {
        return Ok(());
    }
    env.data
        .sync_data()
        .map_err(|e| failed(env, CommitStep::FlushData, e))
}

/// Steps 4 and 5: writes `meta` to its page (`txnid & 1`) and flushes it unless
/// `NO_SYNC`, `NO_META_SYNC` or `WRITE_MAP` with `MAP_ASYNC`. The meta is written with
/// `pwrite` under `WRITE_MAP` too (the page cache is the map's). On failure the page's previous bytes are written back.
pub(crate) fn write_and_flush_meta(env: &EnvInner, meta: &Meta) -> Result<()> {
    let which = meta.txnid & 1;
    let offset = which * env.page_size as u64;
    let mut previous = [0u8; META_WRITE_SIZE];
    previous.copy_from_slice(env.map.slice(offset as usize, META_WRITE_SIZE));
    let mut buf = [0u8; META_WRITE_SIZE];
    meta.encode(which, &mut buf);
    let flags = env.flags.load(Ordering::Relaxed);
    let result = env
        .data
        .write_at(offset, &buf)
        .map_err(|e| (CommitStep::WriteMeta, e))
        .and_then(|()| {
            if no_sync(flags) || flags & env_flags::NO_META_SYNC != 0 {
                return Ok(());
            }
            env.data.sync_data().map_err(|e| (CommitStep::FlushMeta, e))
        });
    result.map_err(|(step, e)| {
        // The meta page is in doubt: put back what it held, so that no process opening the
        // file takes an unflushed meta for the newest. If that fails too, the checksum
        // trailer still marks a torn page, and the other meta is the last commit's.
        let _ = env.data.write_at(offset, &previous);
        failed(env, step, e)
    })
}
