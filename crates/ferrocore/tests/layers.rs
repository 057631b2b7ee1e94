//! The modules of the engine and of the C ABI import each other without cycles: each
//! layer uses only those below it (README, Layout).
//!
//! Reads every `.rs` file under a crate's `src/`, maps it to its top-level module
//! (`src/btree/put.rs` -> `btree`; `lib.rs` is the root and is skipped) and collects the
//! modules it names as `crate::<module>`, in `use` lines, `use crate::{a::X, b::Y}`
//! groups and paths. Comments and `#[cfg(test)]` modules do not count. Fails with the
//! cycles found; `cargo test --test layers -- --nocapture` prints the layers.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

type Graph = BTreeMap<String, BTreeSet<String>>;

/// The identifier at the start of `s`.
fn ident(s: &str) -> &str {
    let end = s
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(s.len());
    &s[..end]
}

/// Modules named by `crate::` paths in `code` (comments already removed).
fn crate_paths(code: &str, out: &mut BTreeSet<String>) {
    for (at, _) in code.match_indices("crate::") {
        let rest = &code[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            // `crate::{a::X, b::{Y, Z}}`: the first segment of each top-level item.
            let mut depth = 0;
            let mut item_start = true;
            for (i, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => item_start = true,
                    c if item_start && !c.is_whitespace() => {
                        item_start = false;
                        let name = ident(&group[i..]);
                        if group[i + name.len()..].starts_with("::") {
                            out.insert(name.to_string());
                        }
                    }
                    _ => {}
                }
            }
        } else {
            let name = ident(rest);
            if rest[name.len()..].starts_with("::") {
                out.insert(name.to_string());
            }
        }
    }
}

/// The import graph of the crate whose sources are in `src`.
fn import_graph(src: &Path) -> Graph {
    let mut graph = Graph::new();
    let mut stack = vec![src.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let rel = path.strip_prefix(src).unwrap();
            let top = rel.components().next().unwrap().as_os_str();
            let module = top.to_str().unwrap().trim_end_matches(".rs").to_string();
            if module == "lib" || module == "main" {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            let text = match text.find("#[cfg(test)]") {
                Some(cut) => &text[..cut],
                None => &text[..],
            };
            let code: String = text
                .lines()
                .map(|l| l.split("//").next().unwrap())
                .collect::<Vec<_>>()
                .join("\n");
            let mut used = BTreeSet::new();
            crate_paths(&code, &mut used);
            used.remove(&module);
            graph.entry(module).or_default().extend(used);
        }
    }
    // Only the crate's own modules (not items of the root such as `crate::db_flags`).
    let modules: BTreeSet<String> = graph.keys().cloned().collect();
    for used in graph.values_mut() {
        used.retain(|m| modules.contains(m));
    }
    graph
}

/// The modules of `graph` in layers, bottom first, or the modules left on cycles.
fn layers(graph: &Graph) -> Result<Vec<Vec<String>>, BTreeSet<String>> {
    let mut placed: BTreeSet<String> = BTreeSet::new();
    let mut out = Vec::new();
    while placed.len() < graph.len() {
        let layer: Vec<String> = graph
            .iter()
            .filter(|(m, used)| !placed.contains(*m) && used.iter().all(|u| placed.contains(u)))
            .map(|(m, _)| m.clone())
            .collect();
        if layer.is_empty() {
            return Err(graph
                .keys()
                .filter(|m| !placed.contains(*m))
                .cloned()
                .collect());
        }
        placed.extend(layer.iter().cloned());
        out.push(layer);
    }
    Ok(out)
}

fn assert_acyclic(crate_dir: &str) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(crate_dir)
        .join("src");
    let graph = import_graph(&src);
    assert!(graph.len() > 3, "found the modules of {}", src.display());
    match layers(&graph) {
        Ok(layers) => {
            println!("{crate_dir}: layers, bottom first:");
            for (i, layer) in layers.iter().enumerate() {
                println!("  {i}: {}", layer.join(" "));
            }
        }
        Err(stuck) => {
            let report: Vec<String> = stuck
                .iter()
                .map(|m| {
                    let on_cycle: Vec<&str> = graph[m]
                        .iter()
                        .filter(|u| stuck.contains(*u))
                        .map(String::as_str)
                        .collect();
                    format!("{m} imports {}", on_cycle.join(", "))
                })
                .collect();
            panic!(
                "{crate_dir}: modules on or above an import cycle (each with what it imports among them):\n  {}",
                report.join("\n  ")
            );
        }
    }
}

#[test]
fn engine_modules_form_layers() {
    assert_acyclic(".");
}

#[test]
fn c_abi_modules_form_layers() {
    assert_acyclic("../ferrocore-lmdb");
}

#[test]
fn a_cycle_is_found() {
    let mut graph = Graph::new();
    let mut code = BTreeSet::new();
    crate_paths(
        "use crate::{btree::{self, Path}, error::Result};\nlet x = crate::store::f();",
        &mut code,
    );
    assert_eq!(
        code.iter().map(String::as_str).collect::<Vec<_>>(),
        ["btree", "error", "store"]
    );
    graph.insert("a".into(), ["b".to_string()].into());
    graph.insert("b".into(), ["c".to_string()].into());
    graph.insert("c".into(), ["a".to_string()].into());
    graph.insert("d".into(), BTreeSet::new());
    assert_eq!(
        layers(&graph).unwrap_err(),
        ["a", "b", "c"].map(String::from).into()
    );
    graph.get_mut("c").unwrap().clear();
    assert_eq!(layers(&graph).unwrap().len(), 3);
}
