//! Runs every (workload group, engine) pair in a child process of this same binary,
//! interleaved over the repetitions (A B C, B C A, C A B, ...), collects what the children
//! report, and renders medians as text or markdown tables and as JSON.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use clap::{Args, ValueEnum};
use serde::{Deserialize, Serialize};

use crate::data::median;
use crate::engines::Kind;
use crate::machine::Machine;
use crate::workloads::{CellResult, Group, Sizes};

#[derive(Args, Clone, Debug)]
pub struct RunArgs {
    /// Full sizes (W2 10M entries, W3-W5 1M, W6 prefilled with 20M entries (~2.5 GB), W7
    /// 500k, W9 1M) instead of the quick default (W2 1M, W3-W5 200k, W6 prefilled with 2M
    /// (~250 MB), W7 50k, W9 200k).
    #[arg(long)]
    pub full: bool,
    /// Multiplies every size (e.g. 0.01 for a smoke test of the harness).
    #[arg(long, default_value_t = 1.0)]
    pub scale: f64,
    /// Repetitions of every cell, interleaved across engines; the median is reported.
    #[arg(short = 'r', long, default_value_t = 3)]
    pub reps: usize,
    /// Workload groups to run (default: all).
    #[arg(long, value_enum, value_delimiter = ',')]
    pub groups: Vec<Group>,
    /// Engines to run (default: each group's set; LMDB is always added, as the baseline).
    #[arg(long, value_enum, value_delimiter = ',')]
    pub engines: Vec<Kind>,
    /// Directory for the engines' files (default: the system temp dir).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Also write the results (every repetition, and the machine) as JSON here.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Print markdown tables instead of text.
    #[arg(long)]
    pub markdown: bool,
}

/// Everything a run produced.
#[derive(Serialize, Deserialize)]
pub struct Report {
    pub machine: Machine,
    pub sizes: Sizes,
    pub reps: usize,
    /// Every cell of every repetition, in the order they ran.
    pub cells: Vec<CellResult>,
    /// Medians per group, engine and phase.
    pub summary: Vec<Summary>,
}

#[derive(Serialize, Deserialize, Clone)]
pub struct Summary {
    pub group: Group,
    pub engine: Kind,
    pub workload: String,
    pub phase: String,
    pub ops: u64,
    pub median_secs: f64,
    pub ops_per_sec: f64,
    pub median_peak_rss_kb: u64,
    pub median_disk_bytes: u64,
}

fn run_cell(group: Group, engine: Kind, sizes: &Sizes, base: &Path) -> CellResult {
    let dir = tempfile::Builder::new()
        .prefix("ferrocore-bench-")
        .tempdir_in(base)
        .expect("temp dir");
    let exe = std::env::current_exe().expect("own path");
    let out = Command::new(exe)
        .arg("cell")
        .arg("--group")
        .arg(group.to_possible_value().unwrap().get_name())
        .arg("--engine")
        .arg(engine.short())
        .arg("--sizes")
        .arg(serde_json::to_string(sizes).unwrap())
        .arg("--dir")
        .arg(dir.path())
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .expect("spawn child");
    assert!(
        out.status.success(),
        "{group:?} on {engine:?} failed ({})",
        out.status
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout.lines().last().expect("child printed nothing");
    serde_json::from_str(line).expect("child result")
}

pub fn run(args: &RunArgs) -> Report {
    let sizes = if args.full {
        Sizes::full()
    } else {
        Sizes::quick()
    }
    .scaled(args.scale);
    let base = args.dir.clone().unwrap_or_else(std::env::temp_dir);
    let machine = Machine::probe(&base);
    for l in machine.lines() {
        eprintln!("{l}");
    }
    let groups: Vec<Group> = if args.groups.is_empty() {
        Group::ALL.to_vec()
    } else {
        args.groups.clone()
    };
    let mut cells = Vec::new();
    for &group in &groups {
        // The C ABI lanes run where asked for (W1 and W8 have their own commands).
        let c_lanes = [Kind::FerrocoreC, Kind::LmdbDebian]
            .into_iter()
            .filter(|k| args.engines.contains(k));
        let engines: Vec<Kind> = group
            .engines()
            .iter()
            .copied()
            .chain(c_lanes)
            .filter(|k| args.engines.is_empty() || args.engines.contains(k) || *k == Kind::Lmdb)
            .collect();
        for rep in 0..args.reps {
            // Each repetition starts one engine further on, so that no engine always runs
            // in the same place: first, or right after the same other engine (whose
            // deleted files and written-back pages the next synced writes may meet).
            let turn = rep % engines.len().max(1);
            for &engine in engines[turn..].iter().chain(&engines[..turn]) {
                eprint!(
                    "{group:?} rep {}/{} {:<34}",
                    rep + 1,
                    args.reps,
                    engine.label()
                );
                let c = run_cell(group, engine, &sizes, &base);
                let secs: f64 = c.phases.iter().map(|p| p.secs).sum();
                eprintln!(" {secs:8.2} s, peak RSS {} MiB", c.peak_rss_kb / 1024);
                cells.push(c);
            }
        }
    }
    let summary = summarize(&cells);
    Report {
        machine,
        sizes,
        reps: args.reps,
        cells,
        summary,
    }
}

fn summarize(cells: &[CellResult]) -> Vec<Summary> {
    // (group, engine) -> cells, in first-seen order.
    let mut keys: Vec<(Group, Kind)> = Vec::new();
    let mut by: BTreeMap<usize, Vec<&CellResult>> = BTreeMap::new();
    for c in cells {
        let pos = keys
            .iter()
            .position(|k| *k == (c.group, c.engine))
            .unwrap_or_else(|| {
                keys.push((c.group, c.engine));
                keys.len() - 1
            });
        by.entry(pos).or_default().push(c);
    }
    let mut out = Vec::new();
    for (pos, cs) in by {
        let (group, engine) = keys[pos];
        let rss = median(cs.iter().map(|c| c.peak_rss_kb as f64).collect()) as u64;
        let disk = median(cs.iter().map(|c| c.disk_bytes as f64).collect()) as u64;
        for (i, p) in cs[0].phases.iter().enumerate() {
            let secs = median(cs.iter().map(|c| c.phases[i].secs).collect());
            out.push(Summary {
                group,
                engine,
                workload: p.workload.clone(),
                phase: p.name.clone(),
                ops: p.ops,
                median_secs: secs,
                ops_per_sec: p.ops as f64 / secs,
                median_peak_rss_kb: rss,
                median_disk_bytes: disk,
            });
        }
    }
    out
}

/// 1234567.8 -> "1,234,568".
pub fn thousands(x: f64) -> String {
    let s = format!("{x:.0}");
    let (sign, digits) = s.split_at(usize::from(s.starts_with('-')));
    let mut out = String::new();
    for (i, ch) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(ch);
    }
    format!("{sign}{out}")
}

fn group_title(group: Group, sizes: &Sizes) -> String {
    match group {
        Group::W2 | Group::W2Bulk => format!(
            "{} entries, 16-byte keys, 100-byte values",
            thousands(sizes.w2_n as f64)
        ),
        Group::W3 => format!(
            "{} entries, 16-byte random keys, 100-byte values",
            thousands(sizes.n as f64)
        ),
        Group::W6Empty | Group::W6Prefilled => format!(
            "{} commits, 16-byte random key, 100-byte value",
            thousands(sizes.w6_commits as f64)
        ),
        Group::W7 => format!(
            "{} entries, {}-byte records, 4-byte index keys, 8-byte IDs",
            thousands(sizes.w7_entries as f64),
            sizes.w7_record
        ),
        Group::W9 => format!(
            "{} elements, 24-byte random keys, 150-byte values, every commit synced",
            thousands(sizes.w9_elements as f64)
        ),
    }
}

const WORKLOAD_NAMES: [(&str, &str); 7] = [
    ("W2", "sorted bulk load"),
    ("W3", "random inserts"),
    ("W4", "random point reads (over W3's result)"),
    ("W5", "full cursor scan (over W3's result)"),
    ("W6", "synced commits of one small put"),
    ("W7", "indexed load (seed 001's slapadd)"),
    (
        "W9",
        "redb's workload set (times in ms, as redb publishes them)",
    ),
];

/// Renders the summary: one table per workload, rows = phases (plus peak memory and file
/// size), columns = engines, each cell "figure (ratio to LMDB)".
pub fn render(report: &Report, markdown: bool) -> String {
    let mut out = String::new();
    let nl = if markdown { "\n\n" } else { "\n" };
    if markdown {
        out.push_str(&format!(
            "Date: {}. Machine: {} cores ({}), {:.0} GiB, Linux {}, files on {}. {}.{nl}\
             Command: `{}` ({} sizes, median of {} interleaved repetitions).{nl}",
            report.machine.date,
            report.machine.cores,
            report.machine.cpu,
            report.machine.memory_gib,
            report.machine.kernel,
            report.machine.filesystem,
            report.machine.versions,
            report.machine.command,
            report.sizes.name,
            report.reps
        ));
    } else {
        for l in report.machine.lines() {
            out.push_str(&l);
            out.push('\n');
        }
        out.push_str(&format!(
            "sizes: {}; median of {} interleaved repetitions\n",
            report.sizes.name, report.reps
        ));
    }
    out.push_str(if markdown {
        "Speed rows: ops/s (W9: ms); in parentheses LMDB's time / the engine's time (> 1: faster than LMDB). \
         Memory and size rows: in parentheses the engine's figure / LMDB's (> 1: more than LMDB). \
         Peak RSS is the VmHWM of the child process that ran that engine on that workload (it includes the \
         harness's key arrays and, for the memory-mapped engines, the file pages they touched); file size is \
         the disk space the engine's files occupy after it closed.\n\n"
    } else {
        "speed rows: ops/s (W9: ms), (x) = LMDB time / engine time, >1 faster than LMDB\n\
         memory/size rows: (x) = engine / LMDB, >1 more than LMDB\n\
         peak RSS = VmHWM of the child process running that engine on that workload (harness key arrays\n\
         included; for mmap engines, touched file pages included); size = disk space of the files after close\n"
    });
    for (w, wname) in WORKLOAD_NAMES {
        let rows: Vec<&Summary> = report.summary.iter().filter(|s| s.workload == w).collect();
        if rows.is_empty() {
            continue;
        }
        let mut engines: Vec<Kind> = Vec::new();
        let mut phases: Vec<(Group, String)> = Vec::new();
        for s in &rows {
            if !engines.contains(&s.engine) {
                engines.push(s.engine);
            }
            if !phases.contains(&(s.group, s.phase.clone())) {
                phases.push((s.group, s.phase.clone()));
            }
        }
        let groups: Vec<Group> = {
            let mut g: Vec<Group> = Vec::new();
            for (gr, _) in &phases {
                if !g.contains(gr) {
                    g.push(*gr);
                }
            }
            g
        };
        let title = format!("{w} {wname}: {}", group_title(groups[0], &report.sizes));
        let ms = w == "W9";
        let find = |g: Group, e: Kind, p: &str| {
            report
                .summary
                .iter()
                .find(|s| s.group == g && s.engine == e && s.phase == p)
        };
        let mut table: Vec<Vec<String>> = Vec::new();
        let mut header = vec![String::new()];
        header.extend(engines.iter().map(|e| e.label().to_string()));
        table.push(header);
        for (g, p) in &phases {
            let mut row = vec![p.clone()];
            let base = find(*g, Kind::Lmdb, p);
            for &e in &engines {
                row.push(match find(*g, e, p) {
                    None => "-".into(),
                    Some(s) => {
                        let fig = if ms {
                            format!("{:.0}", s.median_secs * 1000.0)
                        } else {
                            thousands(s.ops_per_sec)
                        };
                        match base {
                            Some(b) => format!("{fig} ({:.2})", b.median_secs / s.median_secs),
                            None => fig,
                        }
                    }
                });
            }
            table.push(row);
        }
        // Memory and size: once per group, in the table of the group's first workload.
        for &g in &groups {
            let first_w = report
                .summary
                .iter()
                .find(|s| s.group == g)
                .map(|s| s.workload.as_str());
            if first_w != Some(w) {
                continue;
            }
            let suffix = match g {
                Group::W3 => " (W3-W5 run)",
                Group::W2Bulk => ", bulk load",
                Group::W6Empty => ", empty file",
                Group::W6Prefilled => ", prefilled file",
                _ => "",
            };
            for (label, pick) in [
                (
                    "peak RSS MiB",
                    (|s: &Summary| s.median_peak_rss_kb as f64 / 1024.0) as fn(&Summary) -> f64,
                ),
                ("file size MiB", |s: &Summary| {
                    s.median_disk_bytes as f64 / (1024.0 * 1024.0)
                }),
            ] {
                let mut row = vec![format!("{label}{suffix}")];
                let base = report
                    .summary
                    .iter()
                    .find(|s| s.group == g && s.engine == Kind::Lmdb)
                    .map(pick);
                for &e in &engines {
                    let v = report
                        .summary
                        .iter()
                        .find(|s| s.group == g && s.engine == e)
                        .map(pick);
                    row.push(match (v, base) {
                        (Some(v), Some(b)) if b > 0.0 => format!("{v:.1} ({:.2})", v / b),
                        (Some(v), _) => format!("{v:.1}"),
                        _ => "-".into(),
                    });
                }
                table.push(row);
            }
        }
        if markdown {
            out.push_str(&format!("**{title}**\n\n"));
            out.push_str(&markdown_table(&table));
            out.push('\n');
        } else {
            out.push_str(&format!("\n{title}\n"));
            out.push_str(&text_table(&table));
        }
    }
    out
}

fn text_table(t: &[Vec<String>]) -> String {
    let cols = t[0].len();
    let widths: Vec<usize> = (0..cols)
        .map(|c| t.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for (i, r) in t.iter().enumerate() {
        let cells: Vec<String> = r
            .iter()
            .enumerate()
            .map(|(c, s)| {
                if c == 0 {
                    format!("{s:<w$}", w = widths[c])
                } else {
                    format!("{s:>w$}", w = widths[c])
                }
            })
            .collect();
        out.push_str(cells.join(" | ").trim_end());
        out.push('\n');
        if i == 0 {
            let rule: Vec<String> = widths.iter().map(|w| "-".repeat(*w)).collect();
            out.push_str(&rule.join("-+-"));
            out.push('\n');
        }
    }
    out
}

fn markdown_table(t: &[Vec<String>]) -> String {
    let mut out = String::new();
    for (i, r) in t.iter().enumerate() {
        out.push_str(&format!("| {} |\n", r.join(" | ")));
        if i == 0 {
            let rule: Vec<&str> = (0..r.len())
                .map(|c| if c == 0 { "---" } else { "---:" })
                .collect();
            out.push_str(&format!("|{}|\n", rule.join("|")));
        }
    }
    out
}

pub fn write_json(report: &Report, path: &Path) {
    std::fs::write(path, serde_json::to_string_pretty(report).unwrap()).expect("write JSON");
}

pub fn read_json(path: &Path) -> Report {
    serde_json::from_str(&std::fs::read_to_string(path).expect("read JSON")).expect("parse JSON")
}
