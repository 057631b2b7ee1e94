//! The two meta pages (pages 0 and 1) and the 48-byte database record.
//!
//! ```text
//! meta page:  0..16 page header (pgno 0|1, flags META)
//!            16 magic u32 0xBEEFC0DE   20 version u32 = 1   24 address u64
//!            32 mapsize u64            40 FREE db record (48) 88 MAIN db record (48)
//!           136 last_pg u64           144 txnid u64
//!           152 ferrocore trailer: tag u32 "FCCK", crc32c u32 of bytes 0..152,
//!               covered txnid u64, reserved u64 (LMDB never reads past 152)
//! db record:  0 pad u32  4 flags u16  6 depth u16  8 branch_pages u64
//!            16 leaf_pages u64  24 overflow_pages u64  32 entries u64  40 root u64
//! ```
//!
//! Commit of txn N writes meta `N & 1`, overwriting the older snapshot; open takes the
//! newest valid one. LMDB rewrites only bytes 32..152 when it commits, so a trailer whose
//! covered txnid differs from the meta's own txnid is stale (LMDB wrote after us) and is
//! ignored rather than taken for a torn write.

use crate::error::{Error, Result};
use crate::format::page::{
    page_flags, read_u16, read_u32, read_u64, write_u16, write_u32, write_u64, P_INVALID,
};

/// `mm_magic`.
pub const MAGIC: u32 = 0xBEEF_C0DE;
/// `mm_version`: LMDB 0.9's data format.
pub const DATA_VERSION: u32 = 1;
/// Bytes of the meta page LMDB defines (header + `MDB_meta`).
pub const META_END: usize = 152;
/// Tag of ferrocore's checksum trailer ("FCCK" little-endian).
pub const TRAILER_TAG: u32 = 0x4B43_4346;
/// Size of the trailer.
pub const TRAILER_SIZE: usize = 24;
/// Bytes of a meta page ferrocore writes (the rest of the page stays zero).
pub const META_WRITE_SIZE: usize = META_END + TRAILER_SIZE;

// The meta page's layout, checked when the crate compiles: LMDB's `MDB_meta` (magic,
// version, address, map size, two 48-byte records, last page, txn id) after the page
// header, then ferrocore's trailer, all within the smallest page.
const _: () = assert!(
    META_END == crate::format::page::PAGE_HEADER_SIZE + 4 + 4 + 8 + 8 + 2 * DbRecord::SIZE + 8 + 8
);
const _: () = assert!(META_WRITE_SIZE <= crate::format::page::MIN_PAGE_SIZE);
// `MDB_db`: pad (u32), flags and depth (u16), then five u64s.
const _: () = assert!(DbRecord::SIZE == 4 + 2 + 2 + 5 * 8);

/// A B+tree's root and statistics: LMDB's `MDB_db`, 48 bytes on disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DbRecord {
    /// `md_pad`: page size in the FREE record of a meta; DUPFIXED value size in sub-DBs.
    pub pad: u32,
    /// DB flags.
    pub flags: u16,
    /// Tree depth (leaf level = 1), 0 when empty.
    pub depth: u16,
    /// Branch pages in the tree.
    pub branch_pages: u64,
    /// Leaf pages in the tree.
    pub leaf_pages: u64,
    /// Pages in overflow runs.
    pub overflow_pages: u64,
    /// Number of data items.
    pub entries: u64,
    /// Root page, or `P_INVALID`.
    pub root: u64,
}

impl DbRecord {
    /// Encoded size.
    pub const SIZE: usize = 48;

    /// An empty tree with the given flags.
    pub fn empty(flags: u16) -> Self {
        DbRecord {
            pad: 0,
            flags,
            depth: 0,
            branch_pages: 0,
            leaf_pages: 0,
            overflow_pages: 0,
            entries: 0,
            root: P_INVALID,
        }
    }

    /// Decodes a record from 48 bytes.
    pub fn decode(b: &[u8]) -> Self {
        DbRecord {
            pad: read_u32(b, 0),
            flags: read_u16(b, 4),
            depth: read_u16(b, 6),
            branch_pages: read_u64(b, 8),
            leaf_pages: read_u64(b, 16),
            overflow_pages: read_u64(b, 24),
            entries: read_u64(b, 32),
            root: read_u64(b, 40),
        }
    }

    /// Encodes the record into 48 bytes.
    #[inline]
    pub fn encode(&self, b: &mut [u8]) {
        write_u32(b, 0, self.pad);
        write_u16(b, 4, self.flags);
        write_u16(b, 6, self.depth);
        write_u64(b, 8, self.branch_pages);
        write_u64(b, 16, self.leaf_pages);
        write_u64(b, 24, self.overflow_pages);
        write_u64(b, 32, self.entries);
        write_u64(b, 40, self.root);
    }

    /// The encoded record.
    pub fn to_bytes(&self) -> [u8; Self::SIZE] {
        let mut b = [0u8; Self::SIZE];
        self.encode(&mut b);
        b
    }
}

/// The content of a meta page: one committed snapshot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Meta {
    /// `mm_address` (FIXEDMAP); kept as found.
    pub address: u64,
    /// `mm_mapsize`.
    pub map_size: u64,
    /// The free DB (its `pad` is the page size).
    pub free_db: DbRecord,
    /// The main DB.
    pub main_db: DbRecord,
    /// Highest page number in use.
    pub last_pgno: u64,
    /// Id of the txn that wrote this meta.
    pub txnid: u64,
}

/// How a meta page's trailer judged it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MetaCheck {
    /// Our trailer covers this txnid and the checksum matches.
    Verified,
    /// No trailer for this txnid (written by LMDB, or before the trailer existed): trusted
    /// as LMDB trusts it.
    Unverified,
}

impl Meta {
    /// Page size recorded in the meta.
    pub fn page_size(&self) -> usize {
        self.free_db.pad as usize
    }

    /// Parses and checks a meta page. `page` holds at least `META_WRITE_SIZE` bytes.
    pub fn decode(page: &[u8], which: u64) -> Result<(Meta, MetaCheck)> {
        if page.len() < META_WRITE_SIZE {
            return Err(Error::Invalid("file too short for a meta page"));
        }
        if read_u16(page, 10) & page_flags::META == 0 {
            return Err(Error::Invalid("meta page lacks the META flag"));
        }
        let magic = read_u32(page, 16);
        if magic != MAGIC {
            if magic.swap_bytes() == MAGIC {
                return Err(Error::Invalid(
                    "file was written on a host of the other byte order",
                ));
            }
            return Err(Error::Invalid("bad magic"));
        }
        let version = read_u32(page, 20);
        if version != DATA_VERSION {
            return Err(Error::VersionMismatch { found: version });
        }
        let meta = Meta {
            address: read_u64(page, 24),
            map_size: read_u64(page, 32),
            free_db: DbRecord::decode(&page[40..88]),
            main_db: DbRecord::decode(&page[88..136]),
            last_pgno: read_u64(page, 136),
            txnid: read_u64(page, 144),
        };
        let mut check = MetaCheck::Unverified;
        if read_u32(page, META_END) == TRAILER_TAG && read_u64(page, META_END + 8) == meta.txnid {
            if read_u32(page, META_END + 4) != crc32c::crc32c(&page[..META_END]) {
                return Err(Error::corrupted(
                    which,
                    "meta page checksum mismatch (torn write?)",
                ));
            }
            check = MetaCheck::Verified;
        }
        Ok((meta, check))
    }

    /// Encodes meta page `which` (0 or 1) with its checksum trailer.
    pub fn encode(&self, which: u64, out: &mut [u8; META_WRITE_SIZE]) {
        out.fill(0);
        write_u64(out, 0, which);
        write_u16(out, 10, page_flags::META);
        write_u32(out, 16, MAGIC);
        write_u32(out, 20, DATA_VERSION);
        write_u64(out, 24, self.address);
        write_u64(out, 32, self.map_size);
        self.free_db.encode(&mut out[40..88]);
        self.main_db.encode(&mut out[88..136]);
        write_u64(out, 136, self.last_pgno);
        write_u64(out, 144, self.txnid);
        let crc = crc32c::crc32c(&out[..META_END]);
        write_u32(out, META_END, TRAILER_TAG);
        write_u32(out, META_END + 4, crc);
        write_u64(out, META_END + 8, self.txnid);
    }

    /// The meta of a new, empty environment.
    pub fn new_empty(page_size: usize, map_size: u64, env_flags: u16) -> Meta {
        let mut free_db = DbRecord::empty(crate::db_flags::INTEGER_KEY | env_flags);
        free_db.pad = page_size as u32;
        Meta {
            address: 0,
            map_size,
            free_db,
            main_db: DbRecord::empty(0),
            last_pgno: 1,
            txnid: 0,
        }
    }

    /// Checks that every page this meta names lies within a file of `file_pages` pages.
    pub fn fits_file(&self, file_pages: u64) -> bool {
        let in_file = |root: u64| root == P_INVALID || root <= self.last_pgno;
        self.last_pgno < file_pages
            && self.last_pgno >= 1
            && in_file(self.free_db.root)
            && in_file(self.main_db.root)
    }
}

/// Picks the current meta from the two candidates: the newest valid one, meta 0 on a tie.
pub fn choose(
    m0: Result<(Meta, MetaCheck)>,
    m1: Result<(Meta, MetaCheck)>,
    file_pages: u64,
) -> Result<Meta> {
    let ok =
        |m: &Result<(Meta, MetaCheck)>| matches!(m, Ok((meta, _)) if meta.fits_file(file_pages));
    match (ok(&m0), ok(&m1)) {
        (true, true) => {
            let a = m0.expect("checked").0;
            let b = m1.expect("checked").0;
            Ok(if b.txnid > a.txnid { b } else { a })
        }
        (true, false) => Ok(m0.expect("checked").0),
        (false, true) => Ok(m1.expect("checked").0),
        (false, false) => match (m0, m1) {
            // Report the most telling error: a format error beats "past end of file".
            (Err(e @ (Error::Invalid(_) | Error::VersionMismatch { .. })), _) => Err(e),
            (_, Err(e @ (Error::Invalid(_) | Error::VersionMismatch { .. }))) => Err(e),
            (Err(e), _) => Err(e),
            _ => Err(Error::Invalid(
                "both meta pages point past the end of the file",
            )),
        },
    }
}

/// Statistics of a tree (`MDB_stat`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stat {
    /// Page size.
    pub page_size: u32,
    /// Tree depth.
    pub depth: u32,
    /// Branch pages.
    pub branch_pages: u64,
    /// Leaf pages.
    pub leaf_pages: u64,
    /// Overflow pages.
    pub overflow_pages: u64,
    /// Data items.
    pub entries: u64,
}

impl DbRecord {
    /// The record's statistics, for pages of `page_size` bytes.
    pub fn stat(&self, page_size: usize) -> Stat {
        Stat {
            page_size: page_size as u32,
            depth: self.depth as u32,
            branch_pages: self.branch_pages,
            leaf_pages: self.leaf_pages,
            overflow_pages: self.overflow_pages,
            entries: self.entries,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip_and_checksum() {
        let mut meta = Meta::new_empty(4096, 1 << 20, 0);
        meta.txnid = 5;
        meta.last_pgno = 9;
        let mut buf = [0u8; META_WRITE_SIZE];
        meta.encode(1, &mut buf);
        let (back, check) = Meta::decode(&buf, 1).unwrap();
        assert_eq!(back, meta);
        assert_eq!(check, MetaCheck::Verified);
        // LMDB commits over our trailer: the txnid moves on, the stale trailer is ignored.
        write_u64(&mut buf, 144, 7);
        let (back, check) = Meta::decode(&buf, 1).unwrap();
        assert_eq!(back.txnid, 7);
        assert_eq!(check, MetaCheck::Unverified);
        // A torn write: the txnid matches the trailer but the content does not.
        write_u64(&mut buf, 144, 5);
        write_u64(&mut buf, 136, 10);
        assert!(matches!(
            Meta::decode(&buf, 1),
            Err(Error::Corrupted { .. })
        ));
    }

    /// The example in docs/FORMAT.md §2.2: meta 0 of a fresh 4 KiB environment.
    #[test]
    fn matches_the_documented_example() {
        let meta = Meta::new_empty(4096, 1 << 20, 0);
        let mut buf = [0u8; META_WRITE_SIZE];
        meta.encode(0, &mut buf);
        assert_eq!(
            &buf[0x90..0xa0],
            &[0, 0, 0, 0, 0, 0, 0, 0, 0x46, 0x43, 0x43, 0x4b, 0xe2, 0x5d, 0x38, 0xfd]
        );
        assert_eq!(
            &buf[0x20..0x30],
            &[0, 0, 0x10, 0, 0, 0, 0, 0, 0, 0x10, 0, 0, 0x08, 0, 0, 0]
        );
        assert_eq!(
            &buf[0x80..0x90],
            &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 1, 0, 0, 0, 0, 0, 0, 0]
        );
    }

    #[test]
    fn bad_magic_and_version() {
        let meta = Meta::new_empty(4096, 1 << 20, 0);
        let mut buf = [0u8; META_WRITE_SIZE];
        meta.encode(0, &mut buf);
        let mut v = buf;
        write_u32(&mut v, 20, 999);
        v[META_END..].fill(0);
        assert!(matches!(
            Meta::decode(&v, 0),
            Err(Error::VersionMismatch { found: 999 })
        ));
        let mut m = buf;
        write_u32(&mut m, 16, MAGIC.swap_bytes());
        assert!(matches!(Meta::decode(&m, 0), Err(Error::Invalid(_))));
    }
}
