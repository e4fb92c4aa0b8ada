//! One thread at a time on a GL device. wgpu's GL backend holds one lock on its context through
//! each call and panics when a thread waits more than 6 s for it (wgpu-hal's
//! `CONTEXT_LOCK_TIMEOUT_SECS`): a pipeline build or a chunk longer than that on llvmpipe
//! killed the jobs, uploads and drops waiting beside it (body tests on two threads aborted).
//! On GL, jobs, uploads and pipeline builds take the device's turn, which waits without a
//! timeout; a job's chunks then run one after another (`stream::run_chunks`); resources dropped
//! while another thread holds the turn are dropped by that thread as it gives the turn back,
//! so that a drop never waits (Python drops them holding the GIL, which a job may ask for).
//! Other backends need no turn: taking it costs nothing there.

use std::mem::ManuallyDrop;
use std::sync::{Arc, Mutex};

/// The turn on one device, if its backend needs one (GL).
#[derive(Clone)]
pub(crate) struct DeviceTurn(Option<Arc<Turn>>);

struct Turn {
    /// Reentrant: a job's uploads and pipeline builds take the turn its thread holds.
    lock: parking_lot::ReentrantMutex<()>,
    /// Resources dropped while another thread held the turn, dropped in its turn.
    buried: Mutex<Vec<Box<dyn Send>>>,
}

impl Turn {
    /// Drop what was buried (the turn held).
    fn drop_buried(&self) {
        // Taken out first: a resource's drop must not run holding the list's lock.
        let buried = std::mem::take(&mut *crate::sync::lock(&self.buried));
        drop(buried);
    }
}

/// The turn, held until dropped.
pub(crate) struct TurnHeld<'a> {
    held: Option<(&'a Turn, parking_lot::ReentrantMutexGuard<'a, ()>)>,
}

impl Drop for TurnHeld<'_> {
    fn drop(&mut self) {
        if let Some((turn, guard)) = self.held.take() {
            turn.drop_buried();
            drop(guard);
        }
    }
}

impl DeviceTurn {
    /// A turn for a device of `backend`.
    pub(crate) fn for_backend(backend: wgpu::Backend) -> Self {
        DeviceTurn((backend == wgpu::Backend::Gl).then(|| {
            Arc::new(Turn {
                lock: parking_lot::ReentrantMutex::new(()),
                buried: Mutex::new(Vec::new()),
            })
        }))
    }

    /// Whether this device has a turn: its threads never overlap their calls.
    pub(crate) fn is_needed(&self) -> bool {
        self.0.is_some()
    }

    /// The turn, waiting for it (without a timeout) while another thread holds it.
    pub(crate) fn take(&self) -> TurnHeld<'_> {
        TurnHeld {
            held: self.0.as_deref().map(|turn| {
                let guard = turn.lock.lock();
                turn.drop_buried();
                (turn, guard)
            }),
        }
    }

    /// Drop `value` in the turn: now, unless another thread holds it; then that thread drops
    /// it as it gives the turn back (or the next to take it).
    pub(crate) fn dispose<T: Send + 'static>(&self, value: T) {
        let Some(turn) = self.0.as_deref() else {
            return drop(value);
        };
        match turn.lock.try_lock() {
            Some(_guard) => drop(value),
            None => crate::sync::lock(&turn.buried).push(Box::new(value)),
        }
    }
}

/// A device resource dropped in its device's turn ([`DeviceTurn::dispose`]).
pub(crate) struct InTurn<T: Send + 'static> {
    value: ManuallyDrop<T>,
    turn: DeviceTurn,
}

impl<T: Send + 'static> InTurn<T> {
    pub(crate) fn new(value: T, turn: &DeviceTurn) -> Self {
        InTurn {
            value: ManuallyDrop::new(value),
            turn: turn.clone(),
        }
    }
}

impl<T: Send + 'static> std::ops::Deref for InTurn<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.value
    }
}

impl<T: Send + 'static> Drop for InTurn<T> {
    fn drop(&mut self) {
        // SAFETY: `value` is taken once, here, and never used again.
        let value = unsafe { ManuallyDrop::take(&mut self.value) };
        self.turn.dispose(value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Counts its drops.
    struct Counted(Arc<AtomicUsize>);
    impl Drop for Counted {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn a_value_dropped_while_another_thread_holds_the_turn_is_dropped_as_it_gives_it_back() {
        let turn = DeviceTurn::for_backend(wgpu::Backend::Gl);
        let drops = Arc::new(AtomicUsize::new(0));
        let held = turn.take();
        // Reentrant on its own thread.
        drop(turn.take());
        std::thread::scope(|scope| {
            let value = InTurn::new(Counted(drops.clone()), &turn);
            // Dropped on another thread without waiting for the turn.
            scope.spawn(move || drop(value)).join().unwrap();
        });
        assert_eq!(drops.load(Ordering::SeqCst), 0, "dropped outside the turn");
        drop(held);
        assert_eq!(
            drops.load(Ordering::SeqCst),
            1,
            "not dropped as the turn was given back"
        );
        // With the turn free, a drop is immediate.
        drop(InTurn::new(Counted(drops.clone()), &turn));
        assert_eq!(drops.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn a_device_without_a_turn_never_waits() {
        let turn = DeviceTurn::for_backend(wgpu::Backend::Vulkan);
        assert!(!turn.is_needed());
        let (_a, _b) = (turn.take(), turn.take());
        let drops = Arc::new(AtomicUsize::new(0));
        std::thread::scope(|scope| {
            let value = InTurn::new(Counted(drops.clone()), &turn);
            scope.spawn(move || drop(value)).join().unwrap();
        });
        assert_eq!(drops.load(Ordering::SeqCst), 1);
    }
}
