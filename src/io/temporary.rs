//! Temporary outputs: the files and folders a job writes beside its targets before the rename
//! that commits them, and its spill files. Dropping their guards removes them; a CLI job ended
//! by SIGINT or SIGTERM drops nothing, so the CLI's signal thread removes what is listed here
//! (`remove_all`) before it exits.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

static PATHS: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// List `path` (before it is created, so that no moment leaves it unlisted).
pub(crate) fn track(path: &Path) {
    crate::sync::lock(&PATHS).push(path.to_path_buf());
}

/// Unlist `path`: committed (renamed onto its target) or removed by its guard.
pub(crate) fn forget(path: &Path) {
    let mut paths = crate::sync::lock(&PATHS);
    if let Some(k) = paths.iter().rposition(|p| p == path) {
        paths.swap_remove(k);
    }
}

/// Remove every listed file and folder (for an interrupted process; its other threads may
/// still be writing, so a folder is removed until it stays gone).
pub fn remove_all() {
    let paths = std::mem::take(&mut *crate::sync::lock(&PATHS));
    for path in paths {
        for _ in 0..8 {
            let removed = if path.is_dir() {
                std::fs::remove_dir_all(&path)
            } else {
                std::fs::remove_file(&path)
            };
            if removed.is_ok() || !path.exists() {
                break;
            }
        }
    }
}
