//! Progress of long runs (load, copy, check, dump) on standard error: a bar with rate and
//! ETA when standard error is a terminal; on anything else nothing, unless `--progress`
//! asks for it, then one line a second (for logs). `--quiet` shows nothing either way.
//!
//! The bar is fed in batches ([`Progress::inc`] adds to a local count and hands it to the
//! bar only past a threshold), so a loop over millions of entries pays an add and a
//! compare per entry.

use std::io::{self, IsTerminal, Write};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle, TermLike};

/// The flags every long-running command takes.
#[derive(clap::Args, Clone, Copy, Debug, Default)]
pub struct ProgressArgs {
    /// Show progress on standard error even when it is not a terminal (one line a
    /// second).
    #[arg(long)]
    progress: bool,
    /// Show no progress, even on a terminal.
    #[arg(long)]
    quiet: bool,
}

/// What a run counts.
#[derive(Clone, Copy, Debug)]
pub enum Unit {
    /// Bytes (shown as KiB, MiB, ...).
    Bytes,
    /// Entries (key/value pairs).
    Entries,
    /// Pages.
    Pages,
}

impl Unit {
    /// How much is counted locally before the bar hears of it.
    fn batch(self) -> u64 {
        match self {
            Unit::Bytes => 1 << 20,
            Unit::Entries => 4096,
            Unit::Pages => 1024,
        }
    }
}

/// A progress bar, or nothing.
pub struct Progress {
    bar: Option<ProgressBar>,
    pending: u64,
    batch: u64,
    /// On a terminal the bar is cleared at the end; in a log its last line stays.
    terminal: bool,
}

impl Progress {
    /// Progress of `what` (e.g. "dump main DB"), out of `total` if it is known.
    pub fn new(args: ProgressArgs, what: &str, total: Option<u64>, unit: Unit) -> Progress {
        let terminal = io::stderr().is_terminal();
        let none = Progress {
            bar: None,
            pending: 0,
            batch: unit.batch(),
            terminal,
        };
        if args.quiet || !(terminal || args.progress) {
            return none;
        }
        let target = if terminal {
            ProgressDrawTarget::stderr()
        } else {
            ProgressDrawTarget::term_like(Box::new(LogLines::default()))
        };
        let bar = ProgressBar::with_draw_target(total, target);
        let (count, rate) = match unit {
            Unit::Bytes => ("{binary_bytes}", "{binary_bytes_per_sec}"),
            Unit::Entries => ("{human_pos} entries", "{per_sec:0}"),
            Unit::Pages => ("{human_pos} pages", "{per_sec:0}"),
        };
        let template = match (total, unit) {
            (Some(_), Unit::Bytes) => {
                format!("{{msg}} {{wide_bar}} {count}/{{binary_total_bytes}} ({rate}, ETA {{eta}})")
            }
            (Some(_), _) => {
                format!("{{msg}} {{wide_bar}} {count} of {{human_len}} ({rate}, ETA {{eta}})")
            }
            (None, _) => format!("{{msg}} {{spinner}} {count} ({rate}, {{elapsed}})"),
        };
        let style = ProgressStyle::with_template(&template).expect("a valid template");
        bar.set_style(style);
        bar.set_message(what.to_owned());
        if terminal {
            bar.enable_steady_tick(Duration::from_millis(200));
        }
        Progress {
            bar: Some(bar),
            ..none
        }
    }

    /// Counts `n` more.
    #[inline]
    pub fn inc(&mut self, n: u64) {
        if self.bar.is_some() {
            self.pending += n;
            if self.pending >= self.batch {
                self.flush();
            }
        }
    }

    /// Sets the count to `n` (for work that counts for itself).
    pub fn set(&self, n: u64) {
        if let Some(bar) = &self.bar {
            bar.set_position(n);
        }
    }

    /// Hands the local count to the bar.
    fn flush(&mut self) {
        if let Some(bar) = &self.bar {
            bar.inc(std::mem::take(&mut self.pending));
        }
    }

    /// Ends the bar: cleared on a terminal, its last line kept in a log.
    pub fn finish(&mut self) {
        self.flush();
        if let Some(bar) = self.bar.take() {
            if self.terminal {
                bar.finish_and_clear();
            } else {
                bar.finish();
            }
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        // A run that failed: the bar goes, so that the error is the last thing shown.
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
    }
}

/// A "terminal" for logs: a frame drawn at least a second after the last one written
/// becomes one line of standard error, and the last frame is written when the bar goes
/// (so a log ends with the final figures); cursor moves and clearing are ignored.
#[derive(Debug, Default)]
struct LogLines {
    /// When a line was last written, and the latest frame not written.
    state: Mutex<(Option<Instant>, Option<String>)>,
}

impl LogLines {
    fn frame(&self, s: &str) -> io::Result<()> {
        if s.trim().is_empty() {
            return Ok(());
        }
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let now = Instant::now();
        if state
            .0
            .is_some_and(|at| now.duration_since(at) < Duration::from_secs(1))
        {
            state.1 = Some(s.to_owned());
            return Ok(());
        }
        *state = (Some(now), None);
        writeln!(io::stderr(), "{s}")
    }
}

impl Drop for LogLines {
    fn drop(&mut self) {
        let state = self.state.get_mut().unwrap_or_else(PoisonError::into_inner);
        if let Some(last) = state.1.take() {
            let _ = writeln!(io::stderr(), "{last}");
        }
    }
}

impl TermLike for LogLines {
    fn width(&self) -> u16 {
        100
    }

    fn move_cursor_up(&self, _: usize) -> io::Result<()> {
        Ok(())
    }

    fn move_cursor_down(&self, _: usize) -> io::Result<()> {
        Ok(())
    }

    fn move_cursor_right(&self, _: usize) -> io::Result<()> {
        Ok(())
    }

    fn move_cursor_left(&self, _: usize) -> io::Result<()> {
        Ok(())
    }

    fn write_line(&self, s: &str) -> io::Result<()> {
        self.frame(s)
    }

    fn write_str(&self, s: &str) -> io::Result<()> {
        self.frame(s)
    }

    fn clear_line(&self) -> io::Result<()> {
        Ok(())
    }

    fn flush(&self) -> io::Result<()> {
        io::stderr().flush()
    }
}
