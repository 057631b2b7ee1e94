//! LMDB's C API and ABI on ferrocore: built as `liblmdb.so` (soname `liblmdb.so.0`) and
//! `liblmdb.a`, with `include/lmdb.h`, so a program built against LMDB runs on ferrocore
//! unchanged.
//!
//! Modules, from the bottom up; each imports only modules listed before it:
//! - `types`: the C structs and constants, and reading/filling a caller's `MDB_val`;
//! - `errors`: LMDB codes as Rust results, `mdb_strerror`, `mdb_version`;
//! - `handles`: `MDB_env`, `MDB_txn`, `MDB_cursor`, their pool and access helpers, and
//!   `guard`;
//! - `env`, `txn`, `dbi` (databases and the plain get/put/del), `cursor`: the exported
//!   `extern "C"` functions, which import from the three above and never from each other.
//!
//! Every exported function runs its body under `handles::guard`: a Rust error becomes its
//! LMDB code, and a panic never crosses into C — it becomes `MDB_PANIC` and marks the
//! environment failed.
//!
//! Raw pointers from C are dereferenced throughout. Each exported function's `# Safety`
//! section states LMDB's contract for its arguments, as a C caller of LMDB already keeps
//! it: handle arguments are null or live handles of this library (a txn and its cursors
//! used by one thread at a time), `MDB_val` arguments are null or point to valid `MDB_val`s
//! whose data is readable (writable for outputs), and `mdb_env_close` comes after the
//! environment's txns and cursors ended. Every `unsafe` block says, in a `// SAFETY:`
//! comment, which part of that contract (or which check just before) makes it sound.

#![deny(unsafe_op_in_unsafe_fn)]
#![deny(clippy::undocumented_unsafe_blocks)]
#![warn(missing_docs)]
// The C names of LMDB's types (MDB_env, MDB_val, ...) are kept.
#![allow(non_camel_case_types)]

pub mod cursor;
pub mod dbi;
pub mod env;
pub mod errors;
mod handles;
pub mod txn;
pub mod types;

pub use handles::{MDB_assert_func, MDB_cursor, MDB_env, MDB_txn};
pub use types::*;
