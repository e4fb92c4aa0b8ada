//! Floors of the module structure that need no GPU: production code does not call the f64
//! reference oracle (the geometry both need lives in `math`), so a bug in the oracle cannot
//! hide the same bug in the engine.

use std::path::{Path, PathBuf};

/// Every file under `dir` whose name ends in `.{ext}`.
fn files_with_extension(dir: &Path, ext: &str, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files_with_extension(&path, ext, out);
        } else if path.extension().is_some_and(|e| e == ext) {
            out.push(path);
        }
    }
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    files_with_extension(dir, "rs", out);
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

/// Every module's dependencies: the modules whose items its production code names through
/// `crate::` or `super::` paths (a name re-exported by lib.rs counts as its own module's).
fn module_graph() -> std::collections::BTreeMap<String, std::collections::BTreeSet<String>> {
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
    // lib.rs's re-exports: `pub use a::{B, c::D}` makes `crate::B` a's and `crate::D` a::c's.
    let lib = production_code(&std::fs::read_to_string(src.join("lib.rs")).unwrap());
    let mut reexports: BTreeMap<String, String> = BTreeMap::new();
    for line in lib
        .lines()
        .filter(|l| l.trim_start().starts_with("pub use "))
    {
        let path = line.trim_start().trim_start_matches("pub use ");
        for full in paths_after(&format!("crate::{path}"), "crate::") {
            if let Some((module, item)) = full.rsplit_once("::") {
                reexports.insert(item.to_string(), module.to_string());
            }
        }
    }
    let modules: BTreeSet<&str> = code.keys().map(String::as_str).collect();
    // The longest module a path names (`gpu::plan::Job` is in `gpu::plan`).
    let module_of = |path: &str| -> Option<String> {
        let mut segments: Vec<String> = path
            .split("::")
            .filter(|s| !s.is_empty())
            .map(String::from)
            .collect();
        if let Some(module) = segments.first().and_then(|s| reexports.get(s)) {
            let mut resolved: Vec<String> = module.split("::").map(String::from).collect();
            resolved.extend(segments.drain(1..));
            segments = resolved;
        }
        (1..=segments.len())
            .rev()
            .map(|k| segments[..k].join("::"))
            .find(|m| modules.contains(m.as_str()))
    };
    // Edges to a module's own descendants are its composition (declarations, re-exports and
    // impls of its types), not dependencies; every other name counts.
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
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
        edges.insert(module.clone(), targets);
    }
    edges
}

#[test]
fn modules_depend_on_each_other_without_cycles() {
    use std::collections::{BTreeMap, BTreeSet};
    let graph = module_graph();
    let edges: BTreeMap<&str, BTreeSet<String>> =
        graph.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
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

fn architecture_doc() -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/ARCHITECTURE.md"))
        .unwrap()
}

/// The names docs/ARCHITECTURE.md writes as code: every `...` span.
fn code_spans(text: &str) -> std::collections::BTreeSet<String> {
    text.split('`')
        .skip(1)
        .step_by(2)
        .map(|s| s.trim().to_string())
        .collect()
}

#[test]
fn the_architecture_page_names_every_source_file_kernel_entry_point_and_override() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let doc = architecture_doc();
    let spans = code_spans(&doc);
    let mut missing = Vec::new();
    // Source files: `dir/file.rs`, or `file.rs` in a row (line) that names `dir/`; a directory's
    // mod.rs as `dir/`.
    let src = root.join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    for file in &files {
        let relative = file
            .strip_prefix(&src)
            .unwrap()
            .to_string_lossy()
            .replace('\\', "/");
        let named = match relative.rsplit_once('/') {
            None => spans.contains(&relative),
            Some((dir, "mod.rs")) => spans.contains(&format!("{dir}/")),
            Some((dir, name)) => {
                spans.contains(&relative)
                    || doc.lines().any(|line| {
                        line.contains(&format!("`{dir}/"))
                            && code_spans(line).iter().any(|s| s == name)
                    })
            }
        };
        if !named {
            missing.push(format!("source file src/{relative}"));
        }
    }
    // Kernels: every WGSL file, as its path under shaders/ or its name.
    let mut shaders = Vec::new();
    files_with_extension(&root.join("shaders"), "wgsl", &mut shaders);
    for file in &shaders {
        let relative = file
            .strip_prefix(root.join("shaders"))
            .unwrap()
            .to_string_lossy()
            .replace('\\', "/");
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        if !spans.contains(&relative) && !spans.contains(&name) {
            missing.push(format!("shader shaders/{relative}"));
        }
    }
    for entry in closest::gpu::interface::Entry::ALL {
        if !spans.contains(entry.name()) {
            missing.push(format!("entry point `{}`", entry.name()));
        }
    }
    for o in closest::gpu::interface::Override::ALL {
        if !spans.contains(o.name()) {
            missing.push(format!("override `{}`", o.name()));
        }
    }
    assert!(
        files.len() > 40 && shaders.len() > 20,
        "the sources were not found"
    );
    assert!(
        missing.is_empty(),
        "docs/ARCHITECTURE.md does not name:\n{}",
        missing.join("\n")
    );
}

/// The module table's rows, top to bottom, as the module names each row's first cell gives
/// (`gpu/cells.rs` is `gpu::cells`, `io/` is `io`).
fn module_rows(doc: &str) -> Vec<Vec<String>> {
    let section = doc
        .split("\n## Modules")
        .nth(1)
        .and_then(|s| s.split("\n## ").next())
        .expect("a `## Modules` section");
    section
        .lines()
        .filter(|l| l.starts_with("| `"))
        .map(|line| {
            let first_cell = line.split('|').nth(1).unwrap_or("");
            code_spans(first_cell)
                .into_iter()
                .map(|name| {
                    name.trim_end_matches('/')
                        .trim_end_matches(".rs")
                        .replace('/', "::")
                })
                .collect()
        })
        .collect()
}

/// The upward uses the page allows, written there as "- `a` uses `b`: why".
fn allowed_upward_uses(doc: &str) -> std::collections::BTreeSet<(String, String)> {
    doc.lines()
        .filter_map(|line| {
            let rest = line.strip_prefix("- `")?;
            let (user, rest) = rest.split_once("` uses `")?;
            let (used, _) = rest.split_once('`')?;
            Some((user.to_string(), used.to_string()))
        })
        .collect()
}

#[test]
fn modules_use_only_modules_listed_above_them() {
    let doc = architecture_doc();
    let rows = module_rows(&doc);
    let allowed = allowed_upward_uses(&doc);
    // The row of a module: the row naming it, else the row naming its nearest ancestor.
    let row_of = |module: &str| -> Option<usize> {
        let segments: Vec<&str> = module.split("::").collect();
        (1..=segments.len()).rev().find_map(|k| {
            let name = segments[..k].join("::");
            rows.iter().position(|row| row.contains(&name))
        })
    };
    let graph = module_graph();
    let mut unlisted = Vec::new();
    let mut upward = Vec::new();
    for (module, uses) in &graph {
        let Some(at) = row_of(module) else {
            unlisted.push(module.clone());
            continue;
        };
        for used in uses {
            let Some(used_at) = row_of(used) else {
                continue;
            };
            if used_at > at && !allowed.contains(&(module.clone(), used.clone())) {
                upward.push(format!("{module} (row {at}) uses {used} (row {used_at})"));
            }
        }
    }
    assert!(rows.len() > 10, "the module table was not read: {rows:?}");
    assert!(
        unlisted.is_empty(),
        "modules in no row of docs/ARCHITECTURE.md's table: {unlisted:?}"
    );
    assert!(
        upward.is_empty(),
        "modules that use one listed below them (reorder the table, or list the use as \
         \"- `a` uses `b`: why\"):\n{}",
        upward.join("\n")
    );
}
