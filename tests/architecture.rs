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
