//! Floors of the module structure that need no GPU: production code does not call the f64
//! reference oracle (the geometry both need lives in `math`), so a bug in the oracle cannot
//! hide the same bug in the engine.

use std::path::{Path, PathBuf};

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn production_code_does_not_use_the_reference_oracle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    // The oracle itself, and the bench table that times the engine against it.
    let allowed = [src.join("reference"), src.join("bench.rs")];
    let mut offenders = Vec::new();
    for file in &files {
        if allowed.iter().any(|a| file.starts_with(a)) {
            continue;
        }
        let text = std::fs::read_to_string(file).unwrap();
        for (line, code) in text.lines().enumerate() {
            let code = code.split("//").next().unwrap_or("");
            if code.contains("reference::") {
                offenders.push(format!("{}:{}: {}", file.display(), line + 1, code.trim()));
            }
        }
    }
    assert!(
        offenders.is_empty(),
        "production code uses the oracle:\n{}",
        offenders.join("\n")
    );
}

/// A module's name from its file: `src/gpu/plan.rs` is `gpu::plan`, `src/gpu/mod.rs` is `gpu`.
fn module_name(src: &Path, file: &Path) -> String {
    let relative = file.strip_prefix(src).unwrap().with_extension("");
    let mut parts: Vec<String> = relative
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    parts.join("::")
}

/// The code of a file without line comments and without its `#[cfg(test)]` module.
fn production_code(text: &str) -> String {
    let text = text.split("#[cfg(test)]").next().unwrap_or("");
    text.lines()
        .map(|line| line.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The paths named after `prefix` (`crate::`, `super::`): `a::b::C`, and each item of a
/// `{...}` group as its own path.
fn paths_after(code: &str, prefix: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (at, _) in code.match_indices(prefix) {
        if code[..at]
            .chars()
            .last()
            .is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':')
        {
            continue;
        }
        let rest = &code[at + prefix.len()..];
        let end = rest
            .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':' || c == '{'))
            .unwrap_or(rest.len());
        let head = &rest[..end];
        if let Some(stem) = head.strip_suffix('{') {
            let stem = stem.trim_end_matches("::");
            let group_end = rest.find('}').unwrap_or(rest.len());
            for item in rest[end.min(group_end)..group_end].split(',') {
                let item: String = item
                    .trim()
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
                    .collect();
                match item.as_str() {
                    "" => {}
                    "self" => out.push(stem.to_string()),
                    _ => out.push(format!("{stem}::{item}")),
                }
            }
        } else {
            out.push(head.trim_end_matches("::").to_string());
        }
    }
    out
}

#[test]
fn modules_depend_on_each_other_without_cycles() {
    use std::collections::{BTreeMap, BTreeSet};
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let code: BTreeMap<String, String> = files
        .iter()
        .map(|f| (module_name(&src, f), f))
        .filter(|(name, _)| name != "lib" && name != "main")
        .map(|(name, f)| (name, production_code(&std::fs::read_to_string(f).unwrap())))
        .collect();
    let modules: BTreeSet<&str> = code.keys().map(String::as_str).collect();
    // The longest module a path names (`gpu::plan::Job` is in `gpu::plan`).
    let module_of = |path: &str| -> Option<String> {
        let segments: Vec<&str> = path.split("::").filter(|s| !s.is_empty()).collect();
        (1..=segments.len())
            .rev()
            .map(|k| segments[..k].join("::"))
            .find(|m| modules.contains(m.as_str()))
    };
    // Edges to a module's own descendants are its composition (declarations, re-exports and
    // impls of its types), not dependencies; every other name counts.
    let mut edges: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
    for (module, text) in &code {
        let parent = module.rsplit_once("::").map(|(p, _)| p);
        let mut targets: Vec<String> = paths_after(text, "crate::")
            .iter()
            .filter_map(|p| module_of(p))
            .collect();
        if let Some(parent) = parent {
            targets.extend(
                paths_after(text, "super::")
                    .iter()
                    .filter_map(|p| module_of(&format!("{parent}::{p}"))),
            );
        }
        let targets = targets
            .into_iter()
            .filter(|t| t != module && !t.starts_with(&format!("{module}::")))
            .collect();
        edges.insert(module, targets);
    }
    // Depth-first search for a path back to where it started.
    fn cycle_from<'a>(
        start: &'a str,
        at: &'a str,
        edges: &'a BTreeMap<&str, BTreeSet<String>>,
        path: &mut Vec<&'a str>,
        seen: &mut BTreeSet<&'a str>,
    ) -> bool {
        for next in edges.get(at).into_iter().flatten() {
            if next == start {
                path.push(next);
                return true;
            }
            if seen.insert(next) {
                path.push(next);
                if cycle_from(start, next, edges, path, seen) {
                    return true;
                }
                path.pop();
            }
        }
        false
    }
    let mut cycles = Vec::new();
    for &module in edges.keys() {
        let mut path = vec![module];
        if cycle_from(module, module, &edges, &mut path, &mut BTreeSet::new()) {
            cycles.push(path.join(" → "));
        }
    }
    assert!(
        edges.len() > 20 && edges.values().map(BTreeSet::len).sum::<usize>() > 40,
        "the module graph was not read: {edges:?}"
    );
    assert!(cycles.is_empty(), "module cycles:\n{}", cycles.join("\n"));
}

#[test]
fn engine_methods_live_in_the_engine_module() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let engine = src.join("engine");
    let outside: Vec<String> = files
        .iter()
        .filter(|f| !f.starts_with(&engine))
        .filter(|f| {
            let code = production_code(&std::fs::read_to_string(f).unwrap());
            [
                "impl Engine",
                "impl crate::Engine",
                "impl crate::engine::Engine",
            ]
            .iter()
            .any(|pattern| code.contains(pattern))
        })
        .map(|f| f.display().to_string())
        .collect();
    let inside = files.iter().filter(|f| f.starts_with(&engine)).count();
    assert!(inside >= 4, "src/engine/ was not found");
    assert!(
        outside.is_empty(),
        "`impl Engine` outside src/engine/: {outside:?}"
    );
}
