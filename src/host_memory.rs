//! The host allocator's settings for large jobs (glibc on Linux; elsewhere these do nothing).
//!
//! glibc keeps memory that the build's threads freed in their arenas, and after each large
//! free it raises its mmap threshold (up to 32 MiB), so later blocks of that size land in the
//! arenas too and stay resident once freed. A 2M-triangle mesh's upload then came on top of
//! ~60 MiB of memory already free (docs/perf-history.md, issue 14).

/// Hand the allocator's free memory back to the system (between the phases of a large build).
pub fn return_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only releases free memory; it has no preconditions.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Serve every block of 1 MiB or more straight from the system, and give it back when freed
/// (a fixed mmap threshold: glibc then stops raising it). For the command line's process,
/// whose large blocks are a job's buffers; a library leaves its host's allocator alone.
pub fn map_large_blocks() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt changes a tuning parameter; called before the process's threads start.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 1 << 20);
    }
}

/// The memory the command line's `--memory-bytes` grants, for what is built before any engine
/// exists (a scene file's convex hulls); engines take theirs from their own options.
static PROCESS_MEMORY_BYTES: std::sync::OnceLock<u64> = std::sync::OnceLock::new();

/// Hold what the process builds outside an engine to `bytes` (`--memory-bytes`).
pub fn limit_process_memory(bytes: u64) {
    let _ = PROCESS_MEMORY_BYTES.set(bytes);
}

/// What a build outside an engine may take: `--memory-bytes` where given, else what the
/// system reports available.
pub fn process_available_bytes() -> Option<u64> {
    PROCESS_MEMORY_BYTES
        .get()
        .copied()
        .or_else(host_available_bytes)
}

/// The host memory available to a new allocation, where the system tells it (Linux).
pub fn host_available_bytes() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = meminfo.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}
