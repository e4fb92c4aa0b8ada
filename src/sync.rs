//! Locks that outlive a panic: a request that panics while holding one (a bug, or a driver
//! fault) must cost that request only (SPEC §7), so the next holder takes the lock over
//! instead of failing on its poison. Every value kept under these locks is whole between
//! statements (caches, counters, the pool of the stream's slots: a job that panics drops its
//! own set of slots rather than return it, `gpu::stream::LentSlots`).

use std::sync::{Arc, Mutex, MutexGuard, OnceLock, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// `mutex`, locked, taken over from a holder that panicked.
pub fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| {
        mutex.clear_poison();
        poisoned.into_inner()
    })
}

/// `lock`'s counterpart for reading an `RwLock`.
pub fn read<T>(lock: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(|poisoned| {
        lock.clear_poison();
        poisoned.into_inner()
    })
}

/// `lock`'s counterpart for writing an `RwLock`.
pub fn write<T>(lock: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    lock.write().unwrap_or_else(|poisoned| {
        lock.clear_poison();
        poisoned.into_inner()
    })
}

/// The value in `cell`, computed by `compute` where it is empty. Unlike
/// `OnceLock::get_or_init`, no caller waits on another's computation: two that race both
/// compute, and the first to finish fills the cell. `get_or_init` deadlocks where `compute`
/// runs rayon work (a mesh's sign checks and tables): a rayon worker waiting inside it for its
/// own jobs may take up another caller's job that asks the same cell (std's reentrant
/// initialisation), and workers waiting on the cell cannot run `compute`'s jobs. Two first
/// signed requests on one mesh hung the service that way (`Engine::resolve_sign`).
pub fn computed_once<T>(cell: &OnceLock<T>, compute: impl FnOnce() -> T) -> &T {
    if let Some(value) = cell.get() {
        return value;
    }
    let value = compute();
    cell.get_or_init(|| value)
}

/// `work` with its rayon jobs on a pool that lives in this process. Rayon's global pool does not
/// survive `fork`: a child (Python's multiprocessing "fork", Linux's default before 3.14)
/// inherits the pool's state but none of its threads, and its first parallel job waited
/// forever. A process other than the first to call this (a child forked from it) runs its jobs
/// on a pool of its own, built at its first call; the first process keeps the global pool.
pub fn in_process_pool<T: Send>(work: impl FnOnce() -> T + Send) -> T {
    static FIRST_PROCESS: OnceLock<u32> = OnceLock::new();
    static CHILD_POOL: Mutex<Option<(u32, Arc<rayon::ThreadPool>)>> = Mutex::new(None);
    let pid = std::process::id();
    if *FIRST_PROCESS.get_or_init(|| pid) == pid {
        return work();
    }
    let pool = {
        let mut slot = lock(&CHILD_POOL);
        match &*slot {
            Some((owner, pool)) if *owner == pid => Some(pool.clone()),
            _ => {
                let built = rayon::ThreadPoolBuilder::new()
                    .thread_name(|i| format!("closest-rayon-{i}"))
                    .build()
                    .ok()
                    .map(Arc::new);
                // A forked parent's pool has no threads here to stop: let it go unused.
                std::mem::forget(std::mem::replace(
                    &mut *slot,
                    built.clone().map(|pool| (pid, pool)),
                ));
                built
            }
        }
    };
    // No threads to be had: the caller's thread does the jobs itself.
    let pool = pool.or_else(|| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .use_current_thread()
            .build()
            .ok()
            .map(Arc::new)
    });
    match pool {
        Some(pool) => pool.install(work),
        None => work(),
    }
}

/// The message of a caught panic (`catch_unwind`'s payload): its text, or empty.
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_default()
}
