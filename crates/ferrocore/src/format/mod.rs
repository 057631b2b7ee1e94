//! The on-disk format, LMDB 0.9's: views that check what they read and edits of pages
//! the engine itself wrote. The bottom layer of the engine, with `error`.
//!
//! - `page`: the page header, nodes, the overflow run header ([`page::OverflowView`]),
//!   LEAF2 pages and sub-pages;
//! - `edit`: changes to pages the engine owns (insert and delete nodes, headers);
//! - `meta`: the two meta pages and the 48-byte DB record;
//! - `idl`: the ID lists the free DB stores.

pub mod edit;
pub mod idl;
pub mod meta;
pub mod page;
