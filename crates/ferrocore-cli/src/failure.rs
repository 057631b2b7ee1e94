//! Why a command failed, as `main` reports it: one line on stderr and a non-zero exit
//! status (1, unless the command chose another).

use std::fmt;
use std::io;
use std::path::Path;

/// A failed command.
#[derive(Debug)]
pub enum Failure {
    /// Printed as `ferrocore: {message}`; exit status 1.
    Message(String),
    /// Printed as `ferrocore: {message}`; exit status `code` (`check` tells a damaged
    /// environment, 1, from one it cannot read at all, 2).
    Status(u8, String),
    /// The reader of our output went away (`ferrocore dump | head`): nothing more to say,
    /// but the output is incomplete, so the exit status still says so.
    BrokenPipe,
}

/// The result of a command.
pub type Outcome<T = ()> = Result<T, Failure>;

impl Failure {
    /// A failure described by `message`.
    pub fn new(message: impl Into<String>) -> Failure {
        Failure::Message(message.into())
    }

    /// This failure with exit status `code`.
    pub fn with_status(self, code: u8) -> Failure {
        match self {
            Failure::Message(m) | Failure::Status(_, m) => Failure::Status(code, m),
            Failure::BrokenPipe => Failure::BrokenPipe,
        }
    }

    /// The exit status to end with.
    pub fn exit_status(&self) -> u8 {
        match self {
            Failure::Status(code, _) => *code,
            Failure::Message(_) | Failure::BrokenPipe => 1,
        }
    }

    /// An engine error met while working on `path`.
    pub fn at(path: &Path, e: ferrocore::Error) -> Failure {
        Failure::new(format!("{}: {e}", path.display()))
    }

    /// An error writing our output (to `what`: a file name or "standard output").
    pub fn writing(what: &str, e: io::Error) -> Failure {
        if e.kind() == io::ErrorKind::BrokenPipe {
            Failure::BrokenPipe
        } else {
            Failure::new(format!("writing {what}: {e}"))
        }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Message(m) | Failure::Status(_, m) => f.write_str(m),
            Failure::BrokenPipe => f.write_str("output closed"),
        }
    }
}
