//! Temporary outputs: the files and folders a job writes beside its targets before the rename
//! that commits them, and its spill files. Dropping their guards removes them; a CLI job ended
//! by SIGINT or SIGTERM drops nothing, so the CLI's signal thread removes what is listed here
//! (`remove_all`) before it exits. Nothing catches SIGKILL (the OOM killer's): the siblings a
//! killed job left carry its host and process id in their names (`sibling_name`), and the next
//! job writing that target on the same host removes those of processes no longer running
//! (`remove_stale`).

use std::path::{Path, PathBuf};
use std::sync::{Mutex, RwLock};

static PATHS: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// Held for reading around each write that may create folders in a listed output (a Zarr
/// chunk's `create_dir_all`), and for writing, for good, by `remove_all`: otherwise a writer
/// thread could create again a folder just removed, leaving a partial store behind.
static WRITES: RwLock<()> = RwLock::new(());

/// Run `write` (into a listed temporary output) unless `remove_all` has begun, which it then
/// waits for: the process is ending.
pub(crate) fn writing<T>(write: impl FnOnce() -> T) -> T {
    let _writing = crate::sync::read(&WRITES);
    write()
}

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

/// Remove every listed file and folder (for an interrupted process, which then exits: its
/// other threads' writes into them wait for good, `writing`).
pub fn remove_all() {
    // Writes in flight finish; none starts again (the guard is never given back).
    std::mem::forget(crate::sync::write(&WRITES));
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

/// [`remove_all`] from a panic hook: the panicking thread may hold the list's lock or a
/// write's, so neither is waited for (a list held elsewhere is left to the guards' drops).
pub fn remove_all_on_panic() {
    if let Ok(writes) = WRITES.try_write() {
        std::mem::forget(writes);
    }
    let paths = match PATHS.try_lock() {
        Ok(mut paths) => std::mem::take(&mut *paths),
        Err(std::sync::TryLockError::Poisoned(poisoned)) => {
            std::mem::take(&mut *poisoned.into_inner())
        }
        Err(std::sync::TryLockError::WouldBlock) => return,
    };
    for path in paths {
        let _ = if path.is_dir() {
            std::fs::remove_dir_all(&path)
        } else {
            std::fs::remove_file(&path)
        };
    }
}

/// The temporary file a job writes its output `target` (file name `name`) to before the rename,
/// `.NAME.partial-HOST-PID` beside it, listed; what killed processes left for `target` is
/// removed first.
pub(crate) fn partial_file_beside(target: &Path, name: &str) -> PathBuf {
    remove_stale(target);
    let temp = target.with_file_name(sibling_name(name, "partial"));
    track(&temp);
    temp
}

/// The name of a temporary sibling of the output `name`: `.NAME.WHAT-HOST-PID`.
pub(crate) fn sibling_name(name: &str, what: &str) -> String {
    format!(".{}.{what}-{}-{}", stem(name), host(), std::process::id())
}

/// What stands for the output's `name` in its siblings' names: the name itself, or, where
/// a sibling's name would pass the 255 bytes filesystems allow a name (a target's name near
/// that long could not be written at all), its start and a hash of the whole, so that two long
/// names alike in their first bytes still get siblings of their own.
fn stem(name: &str) -> String {
    // `.` `.` `-` `-` `-`, the longest kind ("partial"), a process id and a store number.
    let beside = 5 + "partial".len() + 10 + 20 + host().len();
    let room = 255usize.saturating_sub(beside);
    if name.len() <= room {
        return name.to_string();
    }
    // FNV-1a: the same on every build, so a later run finds a killed one's siblings.
    let hash = name.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    let mut keep = room.saturating_sub(17).min(name.len());
    while !name.is_char_boundary(keep) {
        keep -= 1;
    }
    format!("{}~{hash:016x}", &name[..keep])
}

/// This machine's name as sibling names carry it: letters, digits, `.` and `-` only.
fn host() -> &'static str {
    static HOST: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    HOST.get_or_init(|| {
        let name = host_name().unwrap_or_default();
        let kept: String = name
            .chars()
            .filter(|c| c.is_ascii_alphanumeric() || *c == '.' || *c == '-')
            .collect();
        if kept.is_empty() { "host".into() } else { kept }
    })
}

#[cfg(unix)]
fn host_name() -> Option<String> {
    let mut buffer = [0u8; 256];
    // SAFETY: the buffer is writable for its length; gethostname NUL-terminates what fits.
    if unsafe { libc::gethostname(buffer.as_mut_ptr().cast(), buffer.len() - 1) } != 0 {
        return None;
    }
    let end = buffer.iter().position(|&b| b == 0)?;
    Some(String::from_utf8_lossy(&buffer[..end]).into_owned())
}

#[cfg(not(unix))]
fn host_name() -> Option<String> {
    None
}

/// Remove the temporary siblings of `target` (`.NAME.partial-…`, `.NAME.old-…`) that a process
/// of this host left when it was killed: their process is no longer running. A sibling of a
/// running process, or of another host (a shared folder), is left alone.
pub(crate) fn remove_stale(target: &Path) {
    let (Some(dir), Some(name)) = (target.parent(), target.file_name()) else {
        return;
    };
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    let name = name.to_string_lossy();
    let prefixes = ["partial", "old"].map(|what| format!(".{}.{what}-{}-", stem(&name), host()));
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let file_name = entry.file_name();
        let file_name = file_name.to_string_lossy();
        let Some(rest) = prefixes
            .iter()
            .find_map(|p| file_name.strip_prefix(p.as_str()))
        else {
            continue;
        };
        // PID, or PID-N for a process's several stores.
        let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        if pid == std::process::id() || is_running(pid) {
            continue;
        }
        let path = entry.path();
        let _ = if path.is_dir() {
            std::fs::remove_dir_all(&path)
        } else {
            std::fs::remove_file(&path)
        };
    }
}

/// Whether process `pid` exists on this host (another user's, which we may not signal, does).
#[cfg(unix)]
fn is_running(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return true;
    };
    // SAFETY: signal 0 sends nothing; it only checks that the process exists.
    let signalled = unsafe { libc::kill(pid, 0) } == 0;
    signalled || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

#[cfg(not(unix))]
fn is_running(_pid: u32) -> bool {
    true
}

/// Where an output written to `target` lands: symbolic links are followed (as numpy's `save`
/// and zarr write through them), so that the rename that commits it replaces the file the link
/// names, not the link.
pub(crate) fn written_path(target: &Path) -> crate::error::Result<PathBuf> {
    let mut path = target.to_path_buf();
    // Linux's own limit on links followed in one lookup.
    for _ in 0..40 {
        match std::fs::symlink_metadata(&path) {
            Ok(found) if found.file_type().is_symlink() => {
                let link =
                    std::fs::read_link(&path).map_err(|source| crate::error::Error::Write {
                        path: target.to_path_buf(),
                        source,
                    })?;
                // A relative link is read from its own folder; `join` keeps an absolute one.
                path = path
                    .parent()
                    .map_or_else(|| link.clone(), |p| p.join(&link));
            }
            _ => return Ok(path),
        }
    }
    Err(crate::error::Error::BadFile {
        file: target.display().to_string(),
        problem: "a chain of more than 40 symbolic links (a loop?)".into(),
    })
}
