//! Fork generations: the count of `fork()`s that led to this process (each child adds one).
//!
//! fcntl locks are not inherited by a child, and a child shares its parent's reader slots
//! and writer lock only by accident, which LMDB leaves undefined. So an environment (and
//! its lock file) remembers the generation it was opened in; in a child its txns fail with
//! `Panic`, it never releases the parent's reader slots, and it never closes the inherited
//! lock-file descriptor (closing any descriptor of a file drops every fcntl lock the process
//! holds on it, including those of the child's own later open of the same environment).

use std::sync::atomic::{AtomicU64, Ordering};

static GENERATION: AtomicU64 = AtomicU64::new(0);

extern "C" fn after_fork_in_child() {
    // Only an atomic increment: the handler runs in the child of a possibly
    // multi-threaded process, where little else is safe.
    GENERATION.fetch_add(1, Ordering::Relaxed);
}

/// The current generation, without installing anything (for drops and checks).
#[inline]
pub fn current_generation() -> u64 {
    GENERATION.load(Ordering::Relaxed)
}

/// The current generation, installing the `pthread_atfork` handler once (call at open).
pub fn generation() -> u64 {
    static INSTALL: std::sync::Once = std::sync::Once::new();
    INSTALL.call_once(|| {
        // SAFETY: registers a handler that only increments an atomic; no prepare/parent
        // handlers.
        let rc = unsafe { libc::pthread_atfork(None, None, Some(after_fork_in_child)) };
        debug_assert_eq!(rc, 0, "pthread_atfork");
    });
    current_generation()
}
