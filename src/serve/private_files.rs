//! Uploaded mesh files (the mesh readers take files): written into a directory of the
//! server's own (mode 0700, made afresh at start), each file created exclusively with mode
//! 0600, and removed on every path (its handle's drop: answered, failed or abandoned), the
//! directory at exit (SPEC §7).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use super::error::{ApiError, ApiResult};

/// The server's private directory, removed when dropped.
pub(crate) struct PrivateDir(PathBuf);

impl PrivateDir {
    /// A new directory under the system's temporary one, made by us alone.
    pub fn new() -> crate::Result<PrivateDir> {
        let base = std::env::temp_dir();
        let mut last = None;
        for attempt in 0..16u32 {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.subsec_nanos());
            let path = base.join(format!(
                "closest-serve-{}-{nanos:08x}{attempt}",
                std::process::id()
            ));
            let mut builder = std::fs::DirBuilder::new();
            #[cfg(unix)]
            std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
            // `create` fails on an existing path: a directory someone made first is not ours.
            match builder.create(&path) {
                Ok(()) => return Ok(PrivateDir(path)),
                Err(e) => last = Some(e),
            }
        }
        Err(crate::Error::Write {
            path: base,
            source: last.expect("at least one attempt"),
        })
    }

    /// A new file in it, created exclusively (mode 0600), removed when the handle drops.
    pub async fn create(&self, extension: &str) -> ApiResult<(PrivateFile, tokio::fs::File)> {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let path = self.0.join(format!(
            "body-{}.{extension}",
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let mut options = tokio::fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        options.mode(0o600);
        let file = options
            .open(&path)
            .await
            .map_err(|e| ApiError::internal(format!("cannot store the body: {e}")))?;
        Ok((PrivateFile(path), file))
    }
}

impl PrivateDir {
    /// Removes it and what it holds. At exit the server calls this itself: a task still
    /// holding the state when the runtime's shutdown gives up on it (a loaded machine) would
    /// keep the directory past the process's end.
    pub fn remove(&self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

impl Drop for PrivateDir {
    fn drop(&mut self) {
        self.remove();
    }
}

/// A file of the private directory, removed when dropped.
pub(crate) struct PrivateFile(PathBuf);

impl PrivateFile {
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for PrivateFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}
