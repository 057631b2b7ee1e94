//! The compacting copy (LMDB's `mdb_env_copyfd1`, `MDB_CP_COMPACT`, `mdb_copy -c`): one
//! snapshot written as a data file that holds only the pages its trees reach, renumbered
//! densely from page 2, with an empty free DB.
//!
//! Layout of the copy (docs/FORMAT.md §13): meta 0 as a new environment's (txnid 0,
//! `mm_last_pg` 1, no roots), meta 1 with txnid 1 and the main DB's record pointing at the
//! new root; then the pages in post-order of a depth-first walk: a page is written after
//! everything it refers to (a leaf after its overflow runs and the trees of its named-DB
//! and sub-DB records, a branch after its children), so every page number a page holds is
//! known when it is written, and the main DB's root is the last page. The walk keeps one
//! page buffer per level of the trees it is inside (main DB, a named DB, a sub-DB: at most
//! three trees deep) and writes through a buffer of at most 1 MiB: memory does not grow
//! with the database.
//!
//! The metas come first in the file, so the last page number is computed before the walk,
//! as LMDB does: the snapshot's last page minus its free pages and the free DB's own pages
//! (the page accounting invariant, FORMAT.md §8). A walk that reaches more pages than that
//! (a page referenced twice) stops there; one that reaches fewer (leaked pages) fails at
//! the end. Both are `Corrupted`, and the output written so far is not a usable file.
//!
//! Entry points: [`copy_txn`] (a read txn's snapshot; `Env::copy_compact_to` takes a new
//! one), [`copy_snapshot`] (any page source, e.g. pages in memory), and [`copy_plain`] (a
//! snapshot as it is; `Env::copy_previous` writes the snapshot before the latest with
//! either, `mdb_copy -v`).

use std::io::Write;

use crate::btree::Position;
use crate::btree::MAX_DEPTH;
use crate::error::{Error, Result};
use crate::format::meta::{DbRecord, Meta, META_WRITE_SIZE};
use crate::format::page::OverflowView;
use crate::format::page::{edit, node_flags, page_flags, read_u64, PageView, P_INVALID};
use crate::store::PageSource;
use crate::txn::{ReadTxn, Source};

/// Leaf node flags of a DUPSORT key whose values are in a sub-DB.
const SUB_DB: u16 = node_flags::DUPDATA | node_flags::SUBDATA;

/// Size of the output buffer: writes reach the file in chunks of about this size.
const OUT_CHUNK: usize = 1 << 20;

/// Writes the snapshot of `txn` to `out` as a compacted data file (see the module docs).
pub fn copy_txn(txn: &ReadTxn<'_>, out: &mut dyn Write) -> Result<()> {
    match txn.source() {
        Source::Snapshot(pages) => copy_snapshot(pages, txn.meta(), out),
        Source::Write(_) => Err(Error::Panic("a read txn viewed through a write txn")),
    }
}

/// Writes the snapshot `meta` describes as it is: its two metas, then its pages
/// `2..=last_pgno` unchanged (a plain copy, for `mdb_copy -v` without `-c`).
pub fn copy_plain<S: PageSource + ?Sized>(src: &S, meta: &Meta, out: &mut dyn Write) -> Result<()> {
    let ps = src.page_size();
    let mut metas = vec![0u8; 2 * ps];
    let mut encoded = [0u8; META_WRITE_SIZE];
    for which in 0..2 {
        meta.encode(which, &mut encoded);
        metas[which as usize * ps..][..META_WRITE_SIZE].copy_from_slice(&encoded);
    }
    out.write_all(&metas)?;
    let chunk = (OUT_CHUNK / ps) as u64;
    let mut pgno = 2;
    while pgno <= meta.last_pgno {
        let count = chunk.min(meta.last_pgno + 1 - pgno);
        out.write_all(src.pages(pgno, count as usize)?)?;
        pgno += count;
    }
    Ok(())
}

/// Writes the snapshot `meta` describes, reading its pages from `src`, to `out` as a
/// compacted data file.
pub fn copy_snapshot<S: PageSource + ?Sized>(
    src: &S,
    meta: &Meta,
    out: &mut dyn Write,
) -> Result<()> {
    let ps = src.page_size();
    // The pages the main DB's trees reach: all but the free ones and the free DB's own.
    // (An empty main DB reaches none, whatever the free list says, as in LMDB's copy.)
    let new_last = if meta.main_db.root == P_INVALID {
        1
    } else {
        let freed = free_pages(src, meta)?;
        meta.last_pgno
            .checked_sub(freed)
            .filter(|&last| last >= 2)
            .ok_or_else(|| {
                Error::corrupted(meta.free_db.root, "more free pages than the snapshot has")
            })?
    };

    let mut free_db = DbRecord::empty(meta.free_db.flags);
    free_db.pad = ps as u32;
    let meta0 = Meta {
        address: meta.address,
        map_size: meta.map_size,
        free_db,
        main_db: DbRecord::empty(0),
        last_pgno: 1,
        txnid: 0,
    };
    let mut meta1 = meta0;
    if meta.main_db.root == P_INVALID {
        // Nothing to walk; only the flags travel (LMDB's copy also drops any stale counts).
        meta1.main_db = DbRecord::empty(meta.main_db.flags);
    } else {
        meta1.main_db = meta.main_db;
        meta1.main_db.root = new_last;
        meta1.last_pgno = new_last;
    }
    // With nothing in meta 1 that meta 0 lacks, both stay at txnid 0 (as LMDB's copy).
    if meta1.main_db != meta0.main_db {
        meta1.txnid = 1;
    }

    let file_bytes = (new_last as usize + 1).saturating_mul(ps);
    let mut c = Compactor {
        src,
        ps,
        out: Out {
            w: out,
            buf: Vec::with_capacity(file_bytes.min(OUT_CHUNK)),
        },
        next_pgno: 2,
        last_pgno: new_last,
        spare: Vec::new(),
    };
    let mut encoded = [0u8; META_WRITE_SIZE];
    for (which, m) in [(0u64, &meta0), (1, &meta1)] {
        m.encode(which, &mut encoded);
        let page = c.out.page_zeroed(ps)?;
        page[..META_WRITE_SIZE].copy_from_slice(&encoded);
    }
    let mut main = meta.main_db;
    c.tree(&mut main, Kind::Main)?;
    if main.root != meta1.main_db.root || c.next_pgno != new_last + 1 {
        return Err(Error::corrupted(
            meta.main_db.root,
            "pages neither reachable nor free (leaked): the copy's metas name a wrong last page",
        ));
    }
    c.out.flush()
}

/// Pages of the snapshot that a compact copy leaves out: those listed in the free DB, and
/// the free DB's own (as its record counts them).
fn free_pages<S: PageSource + ?Sized>(src: &S, meta: &Meta) -> Result<u64> {
    let at = meta.free_db.root;
    let too_many = || Error::corrupted(at, "free page counts overflow");
    let mut freed = meta
        .free_db
        .branch_pages
        .checked_add(meta.free_db.leaf_pages)
        .and_then(|n| n.checked_add(meta.free_db.overflow_pages))
        .ok_or_else(too_many)?;
    let mut pos = Position::default();
    let mut more = pos.first(src, &meta.free_db)?;
    while more {
        let (_, value) = pos.current(src)?;
        // An ID list: a count, then that many page numbers (trust the count, FORMAT.md §8).
        let count = value
            .get(..8)
            .map(|b| read_u64(b, 0))
            .filter(|&n| {
                n.checked_mul(8)
                    .is_some_and(|b| b <= value.len() as u64 - 8)
            })
            .ok_or_else(|| {
                Error::corrupted(pos.path.leaf(), "free-list record count exceeds its length")
            })?;
        freed = freed.checked_add(count).ok_or_else(too_many)?;
        more = pos.next(src, &meta.free_db)?;
    }
    Ok(freed)
}

/// Which tree the walk is in, which says what a leaf node may refer to.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// The main DB: named-DB records, sub-DBs, overflow runs.
    Main,
    /// A named DB: sub-DBs and overflow runs.
    Named,
    /// A DUPSORT sub-DB: its keys are the values, nodes refer to nothing.
    Dups,
}

/// A page of the walk's current path, copied so that its references can be rewritten.
struct Level {
    buf: Vec<u8>,
    /// Its number in the source snapshot.
    src_pgno: u64,
    branch: bool,
    /// Nodes on the page.
    n: usize,
    /// Branch: the next child to walk.
    next: usize,
}

struct Compactor<'a, 'w, S: PageSource + ?Sized> {
    src: &'a S,
    ps: usize,
    out: Out<'w>,
    /// Number the next page written gets.
    next_pgno: u64,
    /// The copy's last page: the walk must not write beyond it.
    last_pgno: u64,
    /// Page buffers to reuse.
    spare: Vec<Vec<u8>>,
}

impl<S: PageSource + ?Sized> Compactor<'_, '_, S> {
    /// Numbers the next `count` pages of the copy. A walk that would need more pages than
    /// the snapshot has in use met a page twice (a damaged file): `Corrupted`, which also
    /// bounds the work a damaged file can cause.
    fn allocate(&mut self, count: u64, src_pgno: u64) -> Result<u64> {
        let first = self.next_pgno;
        match first.checked_add(count) {
            Some(end) if end <= self.last_pgno + 1 => {
                self.next_pgno = end;
                Ok(first)
            }
            _ => Err(Error::corrupted(
                src_pgno,
                "more pages reachable than in use (a page referenced twice?)",
            )),
        }
    }

    /// Copies the tree of `rec` and points `rec.root` at the copy's root. `kind` says which
    /// tree it is; the recursion into named DBs and sub-DBs is at most three trees deep.
    fn tree(&mut self, rec: &mut DbRecord, kind: Kind) -> Result<()> {
        if rec.root == P_INVALID {
            return Ok(());
        }
        let depth = rec.depth as usize;
        if depth == 0 || depth > MAX_DEPTH {
            return Err(Error::corrupted(rec.root, "tree depth out of range"));
        }
        let mut path: Vec<Level> = Vec::with_capacity(depth);
        self.descend(&mut path, rec.root, depth)?;
        loop {
            let top = path
                .last_mut()
                .expect("the path holds the page being walked");
            if top.branch && top.next < top.n {
                let child = PageView::parse(&top.buf, top.src_pgno)?.child(top.next)?;
                top.next += 1;
                self.descend(&mut path, child, depth)?;
                continue;
            }
            if !top.branch {
                self.leaf_references(top, kind)?;
            }
            let done = path.pop().expect("the path holds the page being walked");
            let new = self.write_page(&done)?;
            self.spare.push(done.buf);
            match path.last_mut() {
                Some(parent) => edit::set_child(&mut parent.buf, parent.next - 1, new),
                None => {
                    rec.root = new;
                    return Ok(());
                }
            }
        }
    }

    /// Reads page `pgno` as the next level of a tree of `depth` levels and puts a copy of
    /// it on `path`.
    fn descend(&mut self, path: &mut Vec<Level>, pgno: u64, depth: usize) -> Result<()> {
        let bytes = self.src.page(pgno)?;
        let page = PageView::parse(bytes, pgno)?;
        let level = path.len();
        if page.is_leaf() != (level + 1 == depth) {
            return Err(Error::corrupted(
                pgno,
                "page type does not match its tree level",
            ));
        }
        if page.is_branch() && page.num_keys() == 0 {
            return Err(Error::corrupted(pgno, "empty branch page"));
        }
        if page.flags() & page_flags::SUBP != 0 {
            return Err(Error::corrupted(pgno, "sub-page where a tree page belongs"));
        }
        let mut buf = self.spare.pop().unwrap_or_default();
        buf.clear();
        buf.extend_from_slice(bytes);
        path.push(Level {
            buf,
            src_pgno: pgno,
            branch: page.is_branch(),
            n: page.num_keys(),
            next: 0,
        });
        Ok(())
    }

    /// Copies what the leaf `leaf`'s nodes refer to (overflow runs, the trees of named-DB
    /// and sub-DB records) and rewrites the references to the copies' page numbers.
    fn leaf_references(&mut self, leaf: &mut Level, kind: Kind) -> Result<()> {
        let pgno = leaf.src_pgno;
        for i in 0..leaf.n {
            let (flags, at, size) = {
                let page = PageView::parse(&leaf.buf, pgno)?;
                if page.is_leaf2() {
                    return Ok(()); // LEAF2 items are values, nothing else
                }
                let node = page.node(i)?;
                // Where the node's data lies in the page (a sub-slice of the buffer).
                let at = node.data.as_ptr() as usize - leaf.buf.as_ptr() as usize;
                (node.flags, at, node.data_size())
            };
            let refs = flags & (node_flags::BIGDATA | node_flags::SUBDATA | node_flags::DUPDATA);
            if kind == Kind::Dups {
                // A sub-DB's keys are values; its nodes carry no data.
                if refs & (node_flags::BIGDATA | node_flags::SUBDATA) != 0 {
                    return Err(Error::corrupted(
                        pgno,
                        "page reference in a duplicate sub-DB",
                    ));
                }
                continue;
            }
            let data = &mut leaf.buf[at..];
            match refs {
                0 | node_flags::DUPDATA => {} // a value, or a sub-page of values
                node_flags::BIGDATA => {
                    let new = self.overflow(read_u64(data, 0), size)?;
                    data[..8].copy_from_slice(&new.to_le_bytes());
                }
                node_flags::SUBDATA if kind != Kind::Main => {
                    return Err(Error::corrupted(
                        pgno,
                        "named-DB record outside the main DB",
                    ));
                }
                node_flags::SUBDATA | SUB_DB => {
                    if size != DbRecord::SIZE {
                        return Err(Error::corrupted(pgno, "DB record of the wrong size"));
                    }
                    let mut rec = DbRecord::decode(&data[..DbRecord::SIZE]);
                    let sub = if refs == node_flags::SUBDATA {
                        Kind::Named
                    } else {
                        Kind::Dups
                    };
                    self.tree(&mut rec, sub)?;
                    rec.encode(&mut leaf.buf[at..at + DbRecord::SIZE]);
                }
                _ => return Err(Error::corrupted(pgno, "leaf node with invalid flags")),
            }
        }
        Ok(())
    }

    /// Writes a branch or leaf page under its new number, with the gap between its slots
    /// and its nodes zeroed (it holds stale bytes, perhaps of deleted data).
    fn write_page(&mut self, level: &Level) -> Result<u64> {
        let (used_to, used_from) = PageView::parse(&level.buf, level.src_pgno)?.bounds();
        let new = self.allocate(1, level.src_pgno)?;
        let page = self.out.page(&level.buf)?;
        edit::set_pgno(page, new);
        page[used_to..used_from].fill(0);
        Ok(new)
    }

    /// Copies the overflow run at `pgno` holding a value of `size` bytes; returns its new
    /// first page. Bytes past the value's end are written as zeros.
    fn overflow(&mut self, pgno: u64, size: usize) -> Result<u64> {
        let ps = self.ps;
        let first = self.src.page(pgno)?;
        let header = OverflowView::parse(first, pgno)?;
        header.check_holds(ps, size)?;
        let pages = header.pages;
        let run = self.src.pages(pgno, pages)?;
        let new = self.allocate(pages as u64, pgno)?;
        // The value occupies run[16 .. end]; pages wholly inside it go out as they are.
        let end = 16 + size;
        let whole = (end / ps).min(pages);
        let page = self.out.page(&run[..ps])?;
        edit::set_pgno(page, new);
        page[end.min(ps)..].fill(0);
        if whole > 1 {
            self.out.bytes(&run[ps..whole * ps])?;
        }
        for k in whole.max(1)..pages {
            let page = self.out.page(&run[k * ps..(k + 1) * ps])?;
            page[end.saturating_sub(k * ps).min(ps)..].fill(0);
        }
        Ok(new)
    }
}

/// The copy's output, buffered in chunks of at most [`OUT_CHUNK`] bytes.
struct Out<'w> {
    w: &'w mut dyn Write,
    buf: Vec<u8>,
}

impl Out<'_> {
    /// Appends `bytes` (a page, at most 32 KiB) to the buffer and returns it there, to be
    /// patched before it is written.
    fn page(&mut self, bytes: &[u8]) -> Result<&mut [u8]> {
        if self.buf.len() + bytes.len() > OUT_CHUNK {
            self.flush()?;
        }
        let at = self.buf.len();
        self.buf.extend_from_slice(bytes);
        Ok(&mut self.buf[at..])
    }

    /// Appends `len` zero bytes and returns them.
    fn page_zeroed(&mut self, len: usize) -> Result<&mut [u8]> {
        if self.buf.len() + len > OUT_CHUNK {
            self.flush()?;
        }
        let at = self.buf.len();
        self.buf.resize(at + len, 0);
        Ok(&mut self.buf[at..])
    }

    /// Writes `bytes` after what is buffered: through the buffer if they are few, else
    /// straight from where they are (a long overflow run, from the map).
    fn bytes(&mut self, bytes: &[u8]) -> Result<()> {
        if self.buf.len() + bytes.len() <= OUT_CHUNK {
            self.buf.extend_from_slice(bytes);
            return Ok(());
        }
        self.flush()?;
        if bytes.len() < OUT_CHUNK {
            self.buf.extend_from_slice(bytes);
        } else {
            self.w.write_all(bytes)?;
        }
        Ok(())
    }

    /// Writes out what is buffered.
    fn flush(&mut self) -> Result<()> {
        self.w.write_all(&self.buf)?;
        self.buf.clear();
        Ok(())
    }
}
