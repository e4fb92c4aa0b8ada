//! Replays every fuzz target's kept corpus and crash inputs (`fuzz/corpus/<target>`,
//! `fuzz/artifacts/<target>`) through the same entry the fuzzers call, on the stable toolchain:
//! an input the fuzzer once crashed on stays fixed. See README's "Fuzzing".

use std::path::{Path, PathBuf};

use closest::io::fuzz::Loader;

fn inputs(folder: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(folder) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .map(|e| e.expect("a readable corpus entry").path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
}

#[test]
fn every_kept_fuzz_input_is_answered_without_a_panic() {
    let fuzz = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz");
    for loader in Loader::ALL {
        let corpus = inputs(&fuzz.join("corpus").join(loader.name()));
        let crashes = inputs(&fuzz.join("artifacts").join(loader.name()));
        // The hand-made seeds (fuzz/make_seeds.py) hold valid files of every variant: a
        // replay that accepts none of them is not reaching the readers.
        assert!(
            corpus.len() >= 2,
            "{}: the corpus is missing ({} files)",
            loader.name(),
            corpus.len()
        );
        let mut accepted = 0;
        for path in corpus.iter().chain(&crashes) {
            let data = std::fs::read(path).expect("a readable corpus file");
            let outcome = std::panic::catch_unwind(|| loader.feed(&data));
            match outcome {
                Ok(true) => accepted += 1,
                Ok(false) => {}
                Err(_) => panic!("{}: {} panicked", loader.name(), path.display()),
            }
        }
        assert!(
            accepted > 0,
            "{}: no input of {} was accepted",
            loader.name(),
            corpus.len()
        );
        // Each seed marked valid by its name must load.
        for path in &corpus {
            let name = path.file_name().unwrap().to_string_lossy();
            let valid = [
                "seed-tetra",
                "seed-ascii",
                "seed-binary",
                "seed-f32",
                "seed-header",
                "seed-stored",
                "seed-deflated",
                "seed-named",
                "seed-compressed",
                "seed-backref",
            ];
            if valid.iter().any(|v| name == *v) {
                let data = std::fs::read(path).unwrap();
                assert!(loader.feed(&data), "{}: {name} was refused", loader.name());
            }
        }
    }
}

/// The service's body parsers (`closest::serve::fuzz_body`, the `body` fuzz target): every kept
/// input answered without a panic, the `seed-` bodies taken and the `attack-` ones refused.
#[test]
fn every_kept_body_input_is_answered_without_a_panic() {
    let fuzz = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz");
    let corpus = inputs(&fuzz.join("corpus").join("body"));
    let crashes = inputs(&fuzz.join("artifacts").join("body"));
    assert!(
        corpus.len() >= 6,
        "the body corpus is missing ({} files)",
        corpus.len()
    );
    for path in corpus.iter().chain(&crashes) {
        let data = std::fs::read(path).expect("a readable corpus file");
        let taken = std::panic::catch_unwind(|| closest::serve::fuzz_body(&data))
            .unwrap_or_else(|_| panic!("body: {} panicked", path.display()));
        let name = path.file_name().unwrap().to_string_lossy();
        if name.starts_with("seed-") {
            assert!(taken, "body: {name} was refused");
        }
        if name.starts_with("attack-") {
            assert!(!taken, "body: {name} was taken");
        }
    }
}
