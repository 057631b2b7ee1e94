//! Where a command writes: standard output or a file, buffered, with write errors turned
//! into failures (a closed pipe ends the command quietly instead of panicking as
//! `println!` would).

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;

use crate::failure::{Failure, Outcome};

/// A buffered output and the name to report its errors under.
pub struct Output {
    w: BufWriter<Box<dyn Write>>,
    name: String,
}

impl Output {
    /// Standard output.
    pub fn stdout() -> Output {
        Output {
            w: BufWriter::with_capacity(1 << 16, Box::new(io::stdout())),
            name: "standard output".to_owned(),
        }
    }

    /// A file, created or truncated.
    pub fn create(path: &Path) -> Outcome<Output> {
        let file =
            File::create(path).map_err(|e| Failure::new(format!("{}: {e}", path.display())))?;
        Ok(Output {
            w: BufWriter::with_capacity(1 << 16, Box::new(file)),
            name: path.display().to_string(),
        })
    }

    /// Writes `bytes`.
    pub fn bytes(&mut self, bytes: &[u8]) -> Outcome {
        self.w
            .write_all(bytes)
            .map_err(|e| Failure::writing(&self.name, e))
    }

    /// Writes `text` and a newline.
    pub fn line(&mut self, text: impl AsRef<str>) -> Outcome {
        self.bytes(text.as_ref().as_bytes())?;
        self.bytes(b"\n")
    }

    /// Flushes everything written (call before returning success).
    pub fn finish(mut self) -> Outcome {
        self.w.flush().map_err(|e| Failure::writing(&self.name, e))
    }
}
