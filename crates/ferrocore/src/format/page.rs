//! Page layout of LMDB's data file, and bounds-checked views of pages and nodes.
//!
//! Every non-meta page starts with a 16-byte header:
//!
//! ```text
//!  0..8   mp_pgno   the page's own number
//!  8..10  mp_pad    LEAF2: fixed key size; otherwise unused
//! 10..12  mp_flags  BRANCH | LEAF | OVERFLOW | META | LEAF2 | SUBP
//! 12..14  mp_lower  end of the slot array (16 + 2 * nodes)
//! 14..16  mp_upper  start of the node area
//! 12..16  mp_pages  OVERFLOW only: length of the run in pages
//! ```
//!
//! The slot array (u16 offsets from the page start, in key order) grows up from byte 16;
//! nodes are packed down from the end of the page. A node is
//! `lo:u16 hi:u16 flags:u16 ksize:u16 key[ksize] data[...]`, where a leaf keeps the data
//! size in `lo | hi << 16` and a branch keeps its child page number in
//! `lo | hi << 16 | flags << 32`. See `docs/FORMAT.md`.
//!
//! Reading never trusts the file: [`PageView::parse`] checks the header and
//! [`PageView::node`] checks every offset and length against the page, so a corrupted
//! page yields [`Error::Corrupted`] instead of a panic. Mutation helpers at the bottom work
//! on a dirty page buffer the engine itself wrote, and assert their invariants.

use crate::error::{Error, Result};

/// Size of the header at the start of every page.
pub const PAGE_HEADER_SIZE: usize = 16;
/// Size of a node header (`lo`, `hi`, `flags`, `ksize`).
pub const NODE_HEADER_SIZE: usize = 8;
/// "No page": the root of an empty tree.
pub const P_INVALID: u64 = u64::MAX;
/// Smallest page size ferrocore accepts.
pub const MIN_PAGE_SIZE: usize = 4096;
/// Largest page size ferrocore accepts. `mp_upper` is a u16 holding offsets up to the page
/// size itself, so LMDB 0.9's format cannot describe 64 KiB pages (only MDB_DEVEL builds,
/// with a different data version, can).
pub const MAX_PAGE_SIZE: usize = 32768;

// The layout, checked when the crate compiles: LMDB 0.9's header sizes on a 64-bit
// machine, page sizes it can describe (`mp_upper` is a u16), and nodes that fit.
const _: () = assert!(PAGE_HEADER_SIZE == 16 && NODE_HEADER_SIZE == 8);
const _: () = assert!(MIN_PAGE_SIZE.is_power_of_two() && MAX_PAGE_SIZE.is_power_of_two());
const _: () = assert!(MIN_PAGE_SIZE <= MAX_PAGE_SIZE && MAX_PAGE_SIZE <= u16::MAX as usize + 1);
const _: () = assert!(node_max(MIN_PAGE_SIZE).is_multiple_of(2));
const _: () = assert!(2 * (node_max(MIN_PAGE_SIZE) + 2) <= MIN_PAGE_SIZE - PAGE_HEADER_SIZE);
const _: () = assert!(overflow_pages(MIN_PAGE_SIZE, MIN_PAGE_SIZE - PAGE_HEADER_SIZE) == 1);

/// Whole pages of `page_size` bytes in `bytes`, by a shift: page sizes are powers of two
/// (checked at open), and this runs on every commit, where a 64-bit division cost more.
#[inline]
pub fn pages_in(bytes: u64, page_size: usize) -> u64 {
    debug_assert!(page_size.is_power_of_two());
    bytes >> page_size.trailing_zeros()
}

/// Page flags (`mp_flags`).
pub mod page_flags {
    /// Branch page: nodes point at child pages.
    pub const BRANCH: u16 = 0x01;
    /// Leaf page: nodes hold keys and values.
    pub const LEAF: u16 = 0x02;
    /// First page of an overflow run.
    pub const OVERFLOW: u16 = 0x04;
    /// Meta page (pages 0 and 1).
    pub const META: u16 = 0x08;
    /// In-memory "dirty" marker; on disk only on sub-pages.
    pub const DIRTY: u16 = 0x10;
    /// Leaf of fixed-size keys without node headers (DUPFIXED).
    pub const LEAF2: u16 = 0x20;
    /// Sub-page embedded in a DUPSORT node.
    pub const SUBP: u16 = 0x40;
}

/// Leaf node flags (`mn_flags`).
pub mod node_flags {
    /// Data lives in an overflow run; the node holds its first page number.
    pub const BIGDATA: u16 = 0x01;
    /// Data is a 48-byte database record.
    pub const SUBDATA: u16 = 0x02;
    /// Data is a sub-page (or, with SUBDATA, a sub-database) of duplicates.
    pub const DUPDATA: u16 = 0x04;
}

/// Rounds `n` up to an even number: every node footprint is even so nodes stay 2-aligned.
#[inline]
pub const fn even(n: usize) -> usize {
    (n + 1) & !1
}

/// Largest node (header + key + inline data) kept inside a page: two must fit.
#[inline]
pub const fn node_max(page_size: usize) -> usize {
    (((page_size - PAGE_HEADER_SIZE) / 2) & !1) - 2
}

/// Number of pages of an overflow run holding `data_size` bytes.
#[inline]
pub const fn overflow_pages(page_size: usize, data_size: usize) -> usize {
    (PAGE_HEADER_SIZE - 1 + data_size) / page_size + 1
}

#[inline(always)]
pub(crate) fn read_u16(b: &[u8], off: usize) -> u16 {
    u16::from_le_bytes(b[off..off + 2].try_into().expect("2 bytes"))
}

#[inline]
pub(crate) fn read_u32(b: &[u8], off: usize) -> u32 {
    u32::from_le_bytes(b[off..off + 4].try_into().expect("4 bytes"))
}

#[inline]
pub(crate) fn read_u64(b: &[u8], off: usize) -> u64 {
    u64::from_le_bytes(b[off..off + 8].try_into().expect("8 bytes"))
}

#[inline]
pub(crate) fn write_u16(b: &mut [u8], off: usize, v: u16) {
    b[off..off + 2].copy_from_slice(&v.to_le_bytes());
}

#[inline]
pub(crate) fn write_u32(b: &mut [u8], off: usize, v: u32) {
    b[off..off + 4].copy_from_slice(&v.to_le_bytes());
}

#[inline]
pub(crate) fn write_u64(b: &mut [u8], off: usize, v: u64) {
    b[off..off + 8].copy_from_slice(&v.to_le_bytes());
}

/// A validated view of a branch or leaf page (not LEAF2, not overflow).
#[derive(Clone, Copy, Debug)]
pub struct PageView<'a> {
    pgno: u64,
    bytes: &'a [u8],
    flags: u16,
    num_keys: usize,
    upper: usize,
    /// LEAF2 pages (DUPFIXED): the size of every key, stored packed without nodes; else 0.
    fixed: usize,
}

/// What [`PageView::parse`] found in a page's header, to view the same (unchanged) bytes
/// again without parsing them: a cursor stepping through a leaf of a read snapshot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PageShape {
    pgno: u64,
    flags: u16,
    num_keys: usize,
    upper: usize,
    fixed: usize,
}

impl PageShape {
    /// The page it describes.
    pub fn pgno(&self) -> u64 {
        self.pgno
    }

    /// The shape as a plain leaf's (a leaf that is not LEAF2), or `None`.
    #[inline(always)]
    pub fn plain_leaf(&self) -> Option<PlainLeaf> {
        if self.flags & page_flags::LEAF == 0 || self.fixed != 0 {
            return None;
        }
        Some(PlainLeaf {
            num_keys: u16::try_from(self.num_keys).ok()?,
            upper: self.upper,
        })
    }

    /// Key and value of node `i` of the page `bytes` this shape was taken from, if it is
    /// a plain leaf ([`PageShape::plain_leaf`]) and [`PlainLeaf::item`] finds them.
    #[inline(always)]
    pub fn plain_leaf_item<'a>(&self, b: &'a [u8], i: usize) -> Option<(&'a [u8], &'a [u8])> {
        self.plain_leaf()?.item(b, i)
    }
}

/// The shape of a leaf page that is not LEAF2 (see [`PageShape::plain_leaf`]): what a read
/// cursor keeps of its leaf while it steps along it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PlainLeaf {
    /// Below 2^15 on any valid page: a u16 spares the slot's offset an overflow check.
    num_keys: u16,
    upper: usize,
}

impl PlainLeaf {
    /// Key and value of node `i` of the page `bytes` this shape was taken from, if `i` is
    /// one of its nodes and the value is stored in the node (no overflow, no DUPSORT
    /// values); `None` for anything else, a damaged node included (then
    /// [`PageView::node`] says what is wrong). Every read is a checked slice of `bytes`,
    /// so no shape can make it read outside them; the shape only spares the header's
    /// parse: a read cursor's step along a leaf.
    #[inline(always)]
    pub fn item<'a>(&self, b: &'a [u8], i: usize) -> Option<(&'a [u8], &'a [u8])> {
        if i >= usize::from(self.num_keys) {
            return None;
        }
        let slot = PAGE_HEADER_SIZE + 2 * i;
        let &[o0, o1] = b.get(slot..slot + 2)? else {
            return None;
        };
        let off = u16::from_le_bytes([o0, o1]) as usize;
        if off < self.upper {
            return None;
        }
        let &[l0, l1, h0, h1, f0, f1, k0, k1] = b.get(off..off + NODE_HEADER_SIZE)? else {
            return None;
        };
        if u16::from_le_bytes([f0, f1]) & (node_flags::BIGDATA | node_flags::DUPDATA) != 0 {
            return None;
        }
        let dsize =
            (u16::from_le_bytes([l0, l1]) as usize) | (u16::from_le_bytes([h0, h1]) as usize) << 16;
        let key_start = off + NODE_HEADER_SIZE;
        let key_end = key_start + u16::from_le_bytes([k0, k1]) as usize;
        Some((b.get(key_start..key_end)?, b.get(key_end..key_end + dsize)?))
    }
}

/// Builds a corruption error off the hot path.
#[cold]
#[inline(never)]
fn corrupt(pgno: u64, what: &'static str) -> Error {
    Error::corrupted(pgno, what)
}

/// A node read from a page: its key and what its data field holds.
#[derive(Clone, Copy, Debug)]
pub struct Node<'a> {
    /// The node's flags (`node_flags`); 0 on branch pages.
    pub flags: u16,
    /// The key bytes (empty for node 0 of a branch page).
    pub key: &'a [u8],
    /// Branch: child page number. Leaf: data size in bytes.
    pub lo_hi: u64,
    /// Leaf only: the bytes stored in the node after the key (the value, an 8-byte
    /// overflow page number, a 48-byte DB record or a sub-page). Empty on branches.
    pub data: &'a [u8],
}

impl Node<'_> {
    /// The child page number of a branch node.
    #[inline]
    pub fn child(&self) -> u64 {
        self.lo_hi
    }

    /// The full value size of a leaf node (for BIGDATA, the size of the overflow value).
    #[inline]
    pub fn data_size(&self) -> usize {
        self.lo_hi as usize
    }

    /// The first page of the overflow run of a BIGDATA leaf node.
    #[inline]
    pub fn overflow_pgno(&self) -> u64 {
        debug_assert!(self.flags & node_flags::BIGDATA != 0);
        read_u64(self.data, 0)
    }
}

/// The header of the first page of an overflow run, checked: the page is marked as an
/// overflow page and carries its own number, and the run it records (`mp_pages`) is not
/// empty. The one parser of that header: reads, frees, copies and checks all use it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OverflowView {
    /// The run's first page.
    pub pgno: u64,
    /// The run's length in pages, as its header records it.
    pub pages: usize,
}

impl OverflowView {
    /// Parses `first`, the first page of the run said to start at `pgno`.
    pub fn parse(first: &[u8], pgno: u64) -> Result<Self> {
        if read_u16(first, 10) != page_flags::OVERFLOW || read_u64(first, 0) != pgno {
            return Err(Error::corrupted(pgno, "bad overflow page header"));
        }
        let pages = read_u32(first, 12) as usize;
        if pages == 0 {
            return Err(Error::corrupted(pgno, "empty overflow run"));
        }
        Ok(OverflowView { pgno, pages })
    }

    /// Checks that the run is long enough for a value of `size` bytes.
    pub fn check_holds(&self, page_size: usize, size: usize) -> Result<()> {
        if self.pages < overflow_pages(page_size, size) {
            return Err(Error::corrupted(
                self.pgno,
                "overflow run shorter than its value",
            ));
        }
        Ok(())
    }
}

/// The used parts of page `pgno` if it is a branch or leaf page of the file (node slots:
/// not LEAF2, not a sub-page) whose bytes are known to be well formed (checked whole
/// before, see `store::CheckedPages`, which also lists pages of other kinds): its
/// `mp_lower` and `mp_upper`, as [`PageView::bounds`] gives them, without the rest of a
/// parse. `None` for any other page, or bounds that do not fit: the caller parses it.
#[inline]
pub fn known_page_bounds(bytes: &[u8], pgno: u64) -> Option<(usize, usize)> {
    let header = bytes.get(..PAGE_HEADER_SIZE)?;
    let shape = read_u16(header, 10)
        & (page_flags::BRANCH
            | page_flags::LEAF
            | page_flags::OVERFLOW
            | page_flags::META
            | page_flags::LEAF2
            | page_flags::DIRTY
            | page_flags::SUBP);
    if (shape != page_flags::BRANCH && shape != page_flags::LEAF) || read_u64(header, 0) != pgno {
        return None;
    }
    let lower = read_u16(header, 12) as usize;
    let upper = read_u16(header, 14) as usize;
    (PAGE_HEADER_SIZE <= lower && lower <= upper && upper <= bytes.len()).then_some((lower, upper))
}

impl<'a> PageView<'a> {
    /// Checks the header of a branch or leaf page whose number is `pgno`.
    #[inline]
    pub fn parse(bytes: &'a [u8], pgno: u64) -> Result<Self> {
        let Some(header) = bytes.get(..PAGE_HEADER_SIZE) else {
            return Err(corrupt(pgno, "page shorter than its header"));
        };
        let flags = read_u16(header, 10);
        let kind_bits = page_flags::BRANCH
            | page_flags::LEAF
            | page_flags::OVERFLOW
            | page_flags::META
            | page_flags::LEAF2;
        let shape = flags & (kind_bits | page_flags::DIRTY | page_flags::SUBP);
        if shape == page_flags::BRANCH || shape == page_flags::LEAF {
            // The common case, in one test: a branch or leaf page of the file, neither a
            // sub-page nor marked dirty. It must carry its own number.
            if read_u64(header, 0) != pgno {
                return Err(corrupt(pgno, "page number in header does not match"));
            }
        } else {
            // Exactly one of BRANCH and LEAF, and none of the other kinds.
            let kind = flags & kind_bits;
            if kind == page_flags::LEAF | page_flags::LEAF2 {
                return Self::parse_leaf2(bytes, pgno, flags);
            }
            if kind != page_flags::BRANCH && kind != page_flags::LEAF {
                return Err(corrupt(pgno, "not a branch or leaf page"));
            }
            if flags & page_flags::SUBP == 0 && read_u64(header, 0) != pgno {
                return Err(corrupt(pgno, "page number in header does not match"));
            }
            // LMDB clears P_DIRTY before it writes a page; only sub-pages keep it.
            if flags & (page_flags::DIRTY | page_flags::SUBP) == page_flags::DIRTY {
                return Err(corrupt(pgno, "page marked dirty in the file"));
            }
        }
        let lower = read_u16(header, 12) as usize;
        let upper = read_u16(header, 14) as usize;
        if lower < PAGE_HEADER_SIZE
            || !lower.is_multiple_of(2)
            || lower > upper
            || upper > bytes.len()
        {
            return Err(corrupt(pgno, "bad lower/upper bounds"));
        }
        Ok(PageView {
            pgno,
            bytes,
            flags,
            num_keys: (lower - PAGE_HEADER_SIZE) / 2,
            upper,
            fixed: 0,
        })
    }

    /// What this view's header says, for [`PageView::with_shape`].
    #[inline]
    pub fn shape(&self) -> PageShape {
        PageShape {
            pgno: self.pgno,
            flags: self.flags,
            num_keys: self.num_keys,
            upper: self.upper,
            fixed: self.fixed,
        }
    }

    /// A view of `bytes`, which `shape` came from (the same page, unchanged since), without
    /// parsing the header again. `None` if the bytes cannot be that page (another length).
    /// Node reads stay bounds-checked against `bytes` whatever the shape says.
    #[inline]
    pub fn with_shape(bytes: &'a [u8], shape: PageShape) -> Option<Self> {
        let fits = if shape.fixed == 0 {
            shape.upper <= bytes.len() && PAGE_HEADER_SIZE + 2 * shape.num_keys <= shape.upper
        } else {
            shape.upper == bytes.len()
                && PAGE_HEADER_SIZE + shape.num_keys * shape.fixed <= bytes.len()
        };
        fits.then_some(PageView {
            pgno: shape.pgno,
            bytes,
            flags: shape.flags,
            num_keys: shape.num_keys,
            upper: shape.upper,
            fixed: shape.fixed,
        })
    }

    /// A LEAF2 page: `mp_pad` keys of one size packed from byte 16; `mp_lower` counts them
    /// (16 + 2n) and `mp_upper` is only a counter (it may exceed the page).
    #[cold]
    fn parse_leaf2(bytes: &'a [u8], pgno: u64, flags: u16) -> Result<Self> {
        if flags & page_flags::SUBP == 0 && read_u64(bytes, 0) != pgno {
            return Err(corrupt(pgno, "page number in header does not match"));
        }
        let fixed = read_u16(bytes, 8) as usize;
        let lower = read_u16(bytes, 12) as usize;
        if fixed == 0 || lower < PAGE_HEADER_SIZE || !lower.is_multiple_of(2) {
            return Err(corrupt(pgno, "bad LEAF2 page header"));
        }
        let num_keys = (lower - PAGE_HEADER_SIZE) / 2;
        if PAGE_HEADER_SIZE + num_keys * fixed > bytes.len() {
            return Err(corrupt(pgno, "LEAF2 keys run past the page"));
        }
        Ok(PageView {
            pgno,
            bytes,
            flags,
            num_keys,
            upper: bytes.len(),
            fixed,
        })
    }

    /// The key size of a LEAF2 page, or 0.
    #[inline]
    pub fn fixed_size(&self) -> usize {
        self.fixed
    }

    /// True for a LEAF2 page (fixed-size keys without nodes).
    #[inline]
    pub fn is_leaf2(&self) -> bool {
        self.fixed != 0
    }

    /// This page's number.
    #[inline]
    pub fn pgno(&self) -> u64 {
        self.pgno
    }

    /// The raw page bytes.
    #[inline]
    pub fn bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// Page flags.
    #[inline]
    pub fn flags(&self) -> u16 {
        self.flags
    }

    /// True for a leaf page.
    #[inline]
    pub fn is_leaf(&self) -> bool {
        self.flags & page_flags::LEAF != 0
    }

    /// True for a branch page.
    #[inline]
    pub fn is_branch(&self) -> bool {
        self.flags & page_flags::BRANCH != 0
    }

    /// Number of nodes.
    #[inline]
    pub fn num_keys(&self) -> usize {
        self.num_keys
    }

    /// The used parts of the page: bytes before the first bound and from the second on
    /// (`mp_lower` and `mp_upper` for node pages; for LEAF2 pages, the end of the keys).
    #[inline]
    pub fn bounds(&self) -> (usize, usize) {
        if self.fixed != 0 {
            // LEAF2: the keys lie right after the header; the rest is free.
            return (
                PAGE_HEADER_SIZE + self.num_keys * self.fixed,
                self.bytes.len(),
            );
        }
        (PAGE_HEADER_SIZE + 2 * self.num_keys, self.upper)
    }

    /// Free bytes between the slot array and the node area.
    #[inline]
    pub fn free_space(&self) -> usize {
        if self.fixed != 0 {
            return self.bytes.len() - PAGE_HEADER_SIZE - self.num_keys * self.fixed;
        }
        read_u16(self.bytes, 14) as usize - read_u16(self.bytes, 12) as usize
    }

    /// Fill in per-mille, as LMDB measures it.
    pub fn fill_permille(&self) -> usize {
        let usable = self.bytes.len() - PAGE_HEADER_SIZE;
        1000 * (usable - self.free_space()) / usable
    }

    /// Offset of node `i`, checked to lie in the node area, and its header (`lo`, `hi`,
    /// `flags`, `ksize`), checked to fit the page: one bounds check for the four fields.
    #[inline(always)]
    fn node_header(&self, i: usize) -> Result<(usize, [u8; NODE_HEADER_SIZE])> {
        if i >= self.num_keys {
            return Err(corrupt(self.pgno, "node index past the slot array"));
        }
        let slot = PAGE_HEADER_SIZE + 2 * i;
        let Some(&[o0, o1]) = self.bytes.get(slot..slot + 2) else {
            return Err(corrupt(self.pgno, "node index past the slot array"));
        };
        let off = u16::from_le_bytes([o0, o1]) as usize;
        match self.bytes.get(off..off + NODE_HEADER_SIZE) {
            Some(&[l0, l1, h0, h1, f0, f1, k0, k1]) if off >= self.upper => {
                Ok((off, [l0, l1, h0, h1, f0, f1, k0, k1]))
            }
            _ => Err(corrupt(self.pgno, "node offset outside the node area")),
        }
    }

    /// Node `i`, with every offset checked against the page.
    #[inline]
    pub fn node(&self, i: usize) -> Result<Node<'a>> {
        self.node_inlined(i)
    }

    /// [`PageView::node`], always inlined: for the hot loops (a cursor's step), where the
    /// call and the returned `Result` cost as much as the checks.
    #[inline(always)]
    pub fn node_inlined(&self, i: usize) -> Result<Node<'a>> {
        if self.fixed != 0 {
            return Ok(Node {
                flags: 0,
                key: self.key(i)?,
                lo_hi: 0,
                data: &[],
            });
        }
        let b = self.bytes;
        let (off, [l0, l1, h0, h1, f0, f1, k0, k1]) = self.node_header(i)?;
        let lo = u16::from_le_bytes([l0, l1]) as u64;
        let hi = u16::from_le_bytes([h0, h1]) as u64;
        let fl = u16::from_le_bytes([f0, f1]);
        let ksize = u16::from_le_bytes([k0, k1]) as usize;
        let key_start = off + NODE_HEADER_SIZE;
        let key_end = key_start + ksize;
        let Some(key) = b.get(key_start..key_end) else {
            return Err(corrupt(self.pgno, "node key runs past the page"));
        };
        if self.is_branch() {
            return Ok(Node {
                flags: 0,
                key,
                lo_hi: lo | hi << 16 | (fl as u64) << 32,
                data: &[],
            });
        }
        let dsize = (lo | hi << 16) as usize;
        let stored = if fl & node_flags::BIGDATA != 0 {
            8
        } else {
            dsize
        };
        let Some(data) = b.get(key_end..key_end + stored) else {
            return Err(corrupt(self.pgno, "node data runs past the page"));
        };
        Ok(Node {
            flags: fl,
            key,
            lo_hi: dsize as u64,
            data,
        })
    }

    /// Key of node `i` (empty for node 0 of a branch); checks only what the key needs.
    #[inline(always)]
    pub fn key(&self, i: usize) -> Result<&'a [u8]> {
        if self.fixed != 0 {
            if i >= self.num_keys {
                return Err(corrupt(self.pgno, "key index past the LEAF2 page"));
            }
            let start = PAGE_HEADER_SIZE + i * self.fixed;
            return Ok(&self.bytes[start..start + self.fixed]);
        }
        let (off, [.., k0, k1]) = self.node_header(i)?;
        let ksize = u16::from_le_bytes([k0, k1]) as usize;
        match self
            .bytes
            .get(off + NODE_HEADER_SIZE..off + NODE_HEADER_SIZE + ksize)
        {
            Some(k) => Ok(k),
            None => Err(corrupt(self.pgno, "node key runs past the page")),
        }
    }

    /// Child page of branch node `i`.
    #[inline(always)]
    pub fn child(&self, i: usize) -> Result<u64> {
        debug_assert!(self.is_branch());
        // `lo`, `hi` and `flags` hold the child's number, low half first.
        let (_, [l0, l1, h0, h1, f0, f1, ..]) = self.node_header(i)?;
        Ok(u64::from_le_bytes([l0, l1, h0, h1, f0, f1, 0, 0]))
    }

    /// The bytes of node `i` as stored (header, key, data; not padded), bounds-checked.
    pub fn node_raw(&self, i: usize) -> Result<&'a [u8]> {
        if self.fixed != 0 {
            return self.key(i); // a LEAF2 item is just its key
        }
        let (off, len) = self.node_extent(i)?;
        Ok(&self.bytes[off..off + len])
    }

    /// Where node `i` of a page that is not LEAF2 lies: its offset and stored length
    /// (header, key, data; not padded), checked to lie within the node area and the page.
    #[inline(always)]
    pub fn node_extent(&self, i: usize) -> Result<(usize, usize)> {
        debug_assert!(self.fixed == 0, "LEAF2 pages have no nodes");
        let (off, [l0, l1, h0, h1, f0, f1, k0, k1]) = self.node_header(i)?;
        let b = self.bytes;
        let ksize = u16::from_le_bytes([k0, k1]) as usize;
        let stored = if self.is_branch() {
            0
        } else if u16::from_le_bytes([f0, f1]) & node_flags::BIGDATA != 0 {
            8
        } else {
            u32::from_le_bytes([l0, l1, h0, h1]) as usize
        };
        let len = NODE_HEADER_SIZE + ksize + stored;
        if off + len > b.len() {
            return Err(corrupt(self.pgno, "node runs past the page"));
        }
        Ok((off, len))
    }

    /// Checks every node of the page, and that their footprints fit the node area the
    /// way the engine's in-place edits assume. Run before a page is copied for writing.
    pub fn validate_all(&self) -> Result<()> {
        if self.fixed != 0 {
            return Ok(()); // parse_leaf2 checked that every key lies in the page
        }
        let b = self.bytes;
        let mut total = 0;
        for i in 0..self.num_keys {
            total += even(self.node_extent(i)?.1);
        }
        if total > b.len() - self.upper {
            return Err(corrupt(self.pgno, "nodes overlap or exceed the node area"));
        }
        Ok(())
    }
}

/// What a new node carries after its key.
#[derive(Clone, Copy, Debug)]
pub enum NodeValue<'a> {
    /// Branch node: the child page number.
    Child(u64),
    /// Leaf node with inline data and the given node flags (0, SUBDATA or DUPDATA...).
    Inline { flags: u16, data: &'a [u8] },
    /// Leaf node whose data lives in an overflow run starting at `pgno`.
    Overflow { pgno: u64, size: usize },
}

impl NodeValue<'_> {
    /// Bytes the node occupies in the node area (not counting its slot).
    #[inline]
    pub fn footprint(&self, key_len: usize) -> usize {
        even(NODE_HEADER_SIZE + key_len + self.stored_len())
    }

    /// The node header (`lo`, `hi`, `flags`, `ksize`) for a node with this value.
    #[inline]
    pub fn header(&self, key_len: usize) -> [u8; NODE_HEADER_SIZE] {
        let (lo_hi, flags) = match *self {
            NodeValue::Child(pgno) => (pgno, (pgno >> 32) as u16),
            NodeValue::Inline { flags, data } => (data.len() as u64, flags),
            NodeValue::Overflow { size, .. } => (size as u64, node_flags::BIGDATA),
        };
        let mut h = [0u8; NODE_HEADER_SIZE];
        write_u16(&mut h, 0, lo_hi as u16);
        write_u16(&mut h, 2, (lo_hi >> 16) as u16);
        write_u16(&mut h, 4, flags);
        write_u16(&mut h, 6, key_len as u16);
        h
    }

    #[inline]
    fn stored_len(&self) -> usize {
        match self {
            NodeValue::Child(_) => 0,
            NodeValue::Inline { data, .. } => data.len(),
            NodeValue::Overflow { .. } => 8,
        }
    }
}

/// Mutation helpers on a dirty page buffer that the engine owns (in `format/edit.rs`).
pub use super::edit;

#[cfg(test)]
mod tests {
    use super::*;

    /// What a page header with `flags` should give, by the rules `PageView::parse` checks
    /// one at a time (its fast path tests the common case at once): the error's text, or
    /// `None` for a page it accepts as a branch, leaf or sub-page (`Some("leaf2")`: handed
    /// to the LEAF2 parse).
    fn header_verdict(flags: u16, own_pgno: bool) -> Option<&'static str> {
        let kind = flags
            & (page_flags::BRANCH
                | page_flags::LEAF
                | page_flags::OVERFLOW
                | page_flags::META
                | page_flags::LEAF2);
        if kind == page_flags::LEAF | page_flags::LEAF2 {
            return Some("leaf2");
        }
        if kind != page_flags::BRANCH && kind != page_flags::LEAF {
            return Some("not a branch or leaf page");
        }
        if flags & page_flags::SUBP == 0 && !own_pgno {
            return Some("page number in header does not match");
        }
        if flags & (page_flags::DIRTY | page_flags::SUBP) == page_flags::DIRTY {
            return Some("page marked dirty in the file");
        }
        None
    }

    #[test]
    fn every_header_flag_combination_is_judged_by_the_rules() {
        for flags in 0..=0xffu16 {
            for own_pgno in [true, false] {
                let mut page = vec![0u8; 256];
                edit::init(&mut page, 9, page_flags::LEAF);
                write_u16(&mut page, 10, flags);
                let pgno = if own_pgno { 9 } else { 10 };
                let got = match PageView::parse(&page, pgno) {
                    Ok(v) => {
                        assert_eq!(v.flags, flags);
                        assert_eq!(v.num_keys(), 0);
                        None
                    }
                    Err(Error::Corrupted { what, .. }) => Some(what),
                    Err(e) => panic!("flags {flags:#x}: {e}"),
                };
                match header_verdict(flags, own_pgno) {
                    // The LEAF2 parse has checks of its own; only where it went matters.
                    Some("leaf2") => assert_ne!(got, Some("not a branch or leaf page")),
                    want => assert_eq!(got, want, "flags {flags:#x}, own pgno {own_pgno}"),
                }
            }
        }
        // The bounds are checked on every path.
        let mut page = vec![0u8; 256];
        edit::init(&mut page, 9, page_flags::BRANCH);
        write_u16(&mut page, 12, 17);
        assert!(PageView::parse(&page, 9).is_err());
        write_u16(&mut page, 10, page_flags::LEAF | page_flags::SUBP);
        assert!(PageView::parse(&page, 9).is_err());
    }

    /// `known_page_bounds` never accepts a header `PageView::parse` refuses, nor a LEAF2
    /// page or a sub-page, and gives the parse's bounds: for every combination of flags,
    /// with and without the page's own number, with bounds in and out of order.
    #[test]
    fn known_page_bounds_accept_only_what_a_parse_accepts() {
        let mut accepted = 0;
        for flags in 0..=0xffu16 {
            for own_pgno in [true, false] {
                for (lower, upper) in [
                    (20, 200),
                    (16, 256),
                    (20, 20),
                    (40, 30),
                    (14, 100),
                    (20, 300),
                ] {
                    let mut page = vec![0u8; 256];
                    edit::init(&mut page, 9, page_flags::LEAF);
                    write_u16(&mut page, 10, flags);
                    write_u16(&mut page, 12, lower);
                    write_u16(&mut page, 14, upper);
                    let pgno = if own_pgno { 9 } else { 10 };
                    let Some(bounds) = known_page_bounds(&page, pgno) else {
                        continue;
                    };
                    let view = PageView::parse(&page, pgno).unwrap_or_else(|e| {
                        panic!("flags {flags:#x}, bounds {lower}..{upper}: taken, parse says {e}")
                    });
                    assert_eq!(bounds, view.bounds(), "flags {flags:#x}");
                    assert_eq!(flags & (page_flags::LEAF2 | page_flags::SUBP), 0);
                    accepted += 1;
                }
            }
        }
        // Branch and leaf pages, with or without the one flag no check looks at (0x80),
        // with their own number and bounds in order.
        assert_eq!(accepted, 2 * 2 * 3);
    }

    #[test]
    fn limits_match_lmdb() {
        assert_eq!(node_max(4096), 2038);
        assert_eq!(node_max(8192), 4086);
        assert_eq!(node_max(16384), 8182);
        assert_eq!(node_max(32768), 16374);
        assert_eq!(overflow_pages(4096, 4096 - 16), 1);
        assert_eq!(overflow_pages(4096, 4096 - 15), 2);
    }

    #[test]
    fn insert_delete_roundtrip() {
        let mut page = vec![0u8; 4096];
        edit::init(&mut page, 7, page_flags::LEAF);
        assert!(edit::insert_node(
            &mut page,
            0,
            b"b",
            NodeValue::Inline {
                flags: 0,
                data: b"2"
            }
        ));
        assert!(edit::insert_node(
            &mut page,
            0,
            b"a",
            NodeValue::Inline {
                flags: 0,
                data: b"1"
            }
        ));
        assert!(edit::insert_node(
            &mut page,
            2,
            b"c",
            NodeValue::Inline {
                flags: 0,
                data: b"333"
            }
        ));
        let v = PageView::parse(&page, 7).unwrap();
        assert_eq!(v.num_keys(), 3);
        assert_eq!(v.node(0).unwrap().key, b"a");
        assert_eq!(v.node(2).unwrap().data, b"333");
        edit::delete_node(&mut page, 1);
        let v = PageView::parse(&page, 7).unwrap();
        assert_eq!(v.num_keys(), 2);
        assert_eq!(v.node(0).unwrap().data, b"1");
        assert_eq!(v.node(1).unwrap().key, b"c");
        assert_eq!(
            v.free_space(),
            4096 - 16 - 4 - even(8 + 1 + 1) - even(8 + 1 + 3)
        );
    }

    #[test]
    fn corrupted_offsets_are_errors() {
        let mut page = vec![0u8; 4096];
        edit::init(&mut page, 3, page_flags::LEAF);
        assert!(edit::insert_node(
            &mut page,
            0,
            b"k",
            NodeValue::Inline {
                flags: 0,
                data: b"v"
            }
        ));
        write_u16(&mut page, 16, 4094); // slot points at the last 2 bytes
        let v = PageView::parse(&page, 3).unwrap();
        assert!(matches!(v.node(0), Err(Error::Corrupted { pgno: 3, .. })));
        write_u16(&mut page, 14, 5000); // upper beyond the page
        assert!(PageView::parse(&page, 3).is_err());
        assert!(PageView::parse(&page, 4).is_err());
    }
}
