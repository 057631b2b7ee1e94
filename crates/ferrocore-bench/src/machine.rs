//! What machine a run was on, and the memory figures of this process (Linux /proc).

use std::path::Path;

use serde::{Deserialize, Serialize};

fn status_kb(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// Current resident set, kB.
pub fn rss_kb() -> u64 {
    status_kb("VmRSS:")
}

/// Peak resident set of this process so far (VmHWM), kB. Counts anonymous memory and the
/// pages of memory-mapped files this process touched (so for LMDB and ferrocore it
/// includes the part of the data file read through the map).
pub fn peak_rss_kb() -> u64 {
    status_kb("VmHWM:")
}

/// The machine note printed above every table.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Machine {
    pub date: String,
    pub command: String,
    pub cpu: String,
    pub cores: usize,
    pub memory_gib: f64,
    pub kernel: String,
    pub temp_dir: String,
    pub filesystem: String,
    pub versions: String,
}

fn first_line_after(text: &str, prefix: &str) -> Option<String> {
    text.lines()
        .find(|l| l.starts_with(prefix))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_string())
}

/// Filesystem type and device of the mount holding `dir` (longest matching mount point).
fn filesystem_of(dir: &Path) -> String {
    let dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap_or_default();
    let mut best: Option<(usize, String)> = None;
    for line in mounts.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 3 {
            continue;
        }
        if dir.starts_with(f[1]) && best.as_ref().is_none_or(|(len, _)| f[1].len() > *len) {
            best = Some((f[1].len(), format!("{} on {} ({})", f[2], f[1], f[0])));
        }
    }
    best.map_or_else(|| "unknown".into(), |(_, s)| s)
}

fn redb_version() -> String {
    // The lock file pins the version this binary was built with.
    let lock = include_str!("../../../Cargo.lock");
    let mut lines = lock.lines();
    while let Some(l) = lines.next() {
        if l == "name = \"redb\"" {
            if let Some(v) = lines.next() {
                return v
                    .trim_start_matches("version = ")
                    .trim_matches('"')
                    .to_string();
            }
        }
    }
    "?".into()
}

impl Machine {
    pub fn probe(temp_dir: &Path) -> Machine {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
        let mem_kb: f64 = first_line_after(&meminfo, "MemTotal")
            .and_then(|v| v.trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0.0);
        let date = std::process::Command::new("date")
            .args(["-u", "+%Y-%m-%d %H:%M UTC"])
            .output()
            .ok()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_default();
        let args: Vec<String> = std::env::args().skip(1).collect();
        Machine {
            date,
            command: format!("ferrocore-bench {}", args.join(" "))
                .trim()
                .to_string(),
            cpu: first_line_after(&cpuinfo, "model name").unwrap_or_else(|| "unknown".into()),
            cores: crate::workloads::cores(),
            memory_gib: mem_kb / (1024.0 * 1024.0),
            kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
                .unwrap_or_default()
                .trim()
                .to_string(),
            temp_dir: temp_dir.display().to_string(),
            filesystem: filesystem_of(temp_dir),
            versions: format!(
                "{} (lmdb-master-sys), redb {}, SQLite {} (rusqlite, bundled)",
                crate::engines::lmdb::version(),
                redb_version(),
                crate::engines::sqlite::version()
            ),
        }
    }

    pub fn lines(&self) -> Vec<String> {
        vec![
            format!("date: {}", self.date),
            format!("command: {}", self.command),
            format!(
                "machine: {} cores ({}), {:.1} GiB memory, Linux {}",
                self.cores, self.cpu, self.memory_gib, self.kernel
            ),
            format!("temp dir: {} on {}", self.temp_dir, self.filesystem),
            format!("engines: {}", self.versions),
        ]
    }
}
