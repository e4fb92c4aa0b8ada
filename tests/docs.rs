//! The documentation cannot drift silently (no GPU needed): every relative link in README,
//! docs/ and scripts/bench/ resolves to a file, and every `#anchor` to a heading of it; the
//! user guide's table of contents names every page of it. (`mdbook build docs`, in the test
//! command, builds the same pages; these checks make a broken link fail, which mdBook does not.)

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn markdown_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            markdown_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "md") {
            out.push(path);
        }
    }
}

/// The prose of a markdown file: fenced code blocks and inline code spans removed.
fn prose(text: &str) -> String {
    let mut out = String::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        // Inline code: every other backtick-delimited span.
        for (k, piece) in line.split('`').enumerate() {
            if k % 2 == 0 {
                out.push_str(piece);
            }
        }
        out.push('\n');
    }
    out
}

/// The anchor GitHub and mdBook give a heading: lower case, punctuation dropped, spaces as `-`.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

fn anchors(text: &str) -> BTreeSet<String> {
    let mut fenced = false;
    let mut out = BTreeSet::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if !fenced && line.starts_with('#') {
            out.insert(slug(line.trim_start_matches('#').replace('`', "").as_str()));
        }
    }
    out
}

/// The targets of `[text](target)` links and `[label]: target` definitions.
fn link_targets(prose: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (at, _) in prose.match_indices("](") {
        let rest = &prose[at + 2..];
        if let Some(end) = rest.find(')') {
            out.push(rest[..end].trim().to_string());
        }
    }
    for line in prose.lines() {
        let line = line.trim_start();
        if let Some(close) = line.find("]: ")
            && line.starts_with('[')
        {
            out.push(line[close + 3..].trim().to_string());
        }
    }
    out
}

fn documents() -> Vec<PathBuf> {
    let root = root();
    let mut files = vec![root.join("README.md"), root.join("scripts/bench/README.md")];
    markdown_files(&root.join("docs"), &mut files);
    files
}

#[test]
fn every_relative_link_and_anchor_resolves() {
    let mut broken = Vec::new();
    let mut checked = 0;
    for file in documents() {
        let text = std::fs::read_to_string(&file).unwrap();
        for target in link_targets(&prose(&text)) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            checked += 1;
            let (path, anchor) = match target.split_once('#') {
                Some((p, a)) => (p, Some(a)),
                None => (target.as_str(), None),
            };
            let resolved = if path.is_empty() {
                file.clone()
            } else {
                file.parent().unwrap().join(path)
            };
            if !resolved.exists() {
                broken.push(format!("{}: {target}: no such file", file.display()));
                continue;
            }
            if let Some(anchor) = anchor
                && resolved.extension().is_some_and(|e| e == "md")
                && !anchors(&std::fs::read_to_string(&resolved).unwrap()).contains(anchor)
            {
                broken.push(format!("{}: {target}: no such heading", file.display()));
            }
        }
    }
    assert!(
        checked > 30,
        "only {checked} links were found: the reader is broken"
    );
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn the_guide_contents_name_every_page() {
    let docs = root().join("docs");
    let summary = std::fs::read_to_string(docs.join("SUMMARY.md")).unwrap();
    let listed: BTreeSet<PathBuf> = link_targets(&summary)
        .iter()
        .map(|t| docs.join(t))
        .collect();
    let mut pages = Vec::new();
    markdown_files(&docs, &mut pages);
    let missing: Vec<String> = pages
        .iter()
        .filter(|p| p.file_name().unwrap() != "SUMMARY.md" && !listed.contains(*p))
        .map(|p| p.display().to_string())
        .collect();
    assert!(
        missing.is_empty(),
        "pages not in docs/SUMMARY.md: {missing:?}"
    );
}

#[test]
fn readme_stays_a_front_door() {
    let lines = std::fs::read_to_string(root().join("README.md"))
        .unwrap()
        .lines()
        .count();
    assert!(
        lines <= 250,
        "README.md has {lines} lines: move the detail to the guide (docs/guide/)"
    );
}
