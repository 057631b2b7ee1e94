//! Everything between the engine and the data file: the memory map readers read through
//! ([`Map`]), the seam every write goes through ([`DataFile`], with [`OsFile`] the real
//! file), and a fault-injecting file for power-loss and failure tests ([`fault`]).

pub mod fault;
mod file;
mod map;

pub use file::{DataFile, OsFile, SyncedWriteError, MAX_WRITE_BYTES};
pub use map::{Map, DEFAULT_RESERVATION};
