//! Uploaded mesh files (the mesh readers take files): written into a directory of the
//! server's own (mode 0700, made afresh at start), each file created exclusively with mode
//! 0600, and removed on every path (its handle's drop: answered, failed or abandoned), the
//! directory at exit (SPEC §7). A server killed outright (SIGKILL, the OOM killer) cannot
//! remove its directory, so each holds a lock on it while it lives and a starting server
//! removes the directories whose lock nobody holds.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use super::error::{ApiError, ApiResult};

/// The prefix of the servers' private directories' names (then the process id).
const PRIVATE_PREFIX: &str = "closest-serve-";

/// A directory younger than this is never taken for abandoned: its server may not have
/// locked it yet.
const ABANDONED_AFTER: std::time::Duration = std::time::Duration::from_secs(60);

/// The server's private directory, removed when dropped; locked while it lives.
pub(crate) struct PrivateDir {
    path: PathBuf,
    /// The directory opened and locked (flock) for the server's life: the lock goes with
    /// the process however it ends.
    _lock: Option<std::fs::File>,
}

impl PrivateDir {
    /// A new directory under the system's temporary one, made by us alone; the directories
    /// that killed servers left there removed first.
    pub fn new() -> crate::Result<PrivateDir> {
        let base = std::env::temp_dir();
        remove_abandoned(&base);
        let mut last = None;
        for attempt in 0..16u32 {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.subsec_nanos());
            let path = base.join(format!(
                "{PRIVATE_PREFIX}{}-{nanos:08x}{attempt}",
                std::process::id()
            ));
            let mut builder = std::fs::DirBuilder::new();
            #[cfg(unix)]
            std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
            // `create` fails on an existing path: a directory someone made first is not ours.
            match builder.create(&path) {
                Ok(()) => {
                    let lock = lock_exclusive(&path);
                    return Ok(PrivateDir { path, _lock: lock });
                }
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
        let path = self.path.join(format!(
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
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// The directory at `path` opened and locked exclusively, or None where it cannot be (held
/// by a live server, or no flock here).
#[cfg(unix)]
fn lock_exclusive(path: &Path) -> Option<std::fs::File> {
    use std::os::fd::AsRawFd;
    let dir = std::fs::File::open(path).ok()?;
    // SAFETY: flock on a descriptor we own; it touches no memory of ours.
    let locked = unsafe { libc::flock(dir.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0;
    locked.then_some(dir)
}

#[cfg(not(unix))]
fn lock_exclusive(_path: &Path) -> Option<std::fs::File> {
    None
}

/// Removes the private directories under `base` that killed servers left: ours, older than
/// a minute, whose lock we can take and whose process is gone. Nothing here is an error: a
/// directory left is only litter.
#[cfg(unix)]
fn remove_abandoned(base: &Path) {
    use std::os::unix::fs::MetadataExt;
    let Ok(entries) = std::fs::read_dir(base) else {
        return;
    };
    // SAFETY: geteuid only reads the process's credentials.
    let uid = unsafe { libc::geteuid() };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(PRIVATE_PREFIX))
            .and_then(|rest| rest.split('-').next())
            .and_then(|pid| pid.parse::<i32>().ok())
        else {
            continue;
        };
        let path = entry.path();
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        let old = meta
            .modified()
            .ok()
            .and_then(|m| m.elapsed().ok())
            .is_some_and(|age| age >= ABANDONED_AFTER);
        if !meta.is_dir() || meta.uid() != uid || !old || process_alive(pid) {
            continue;
        }
        // Held while we remove it, so no other starting server races us for it.
        if let Some(_held) = lock_exclusive(&path) {
            let _ = std::fs::remove_dir_all(&path);
        }
    }
}

#[cfg(not(unix))]
fn remove_abandoned(_base: &Path) {}

/// Whether a process `pid` exists (one of another user's counts: EPERM).
#[cfg(unix)]
fn process_alive(pid: i32) -> bool {
    // SAFETY: signal 0 sends nothing; it only asks whether the process exists.
    pid > 0
        && (unsafe { libc::kill(pid, 0) } == 0
            || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH))
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
