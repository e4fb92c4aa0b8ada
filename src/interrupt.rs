//! Jobs a caller can interrupt: a long job asks, between chunks, the check its caller set for
//! this thread (Python's pending Ctrl-C, `checking_interrupts`), and ends with
//! `Error::Interrupted` when it says so. Without a check nothing is asked.

use std::cell::RefCell;

/// Whether the job running on this thread should stop.
pub type InterruptCheck = Box<dyn FnMut() -> bool>;

thread_local! {
    static CHECK: RefCell<Option<InterruptCheck>> = const { RefCell::new(None) };
}

/// Run `job` with `check` asked between its chunks (on this thread; work the job hands to
/// other threads is not asked). The check set before is restored afterwards, a panic included.
pub fn checking_interrupts<T>(check: InterruptCheck, job: impl FnOnce() -> T) -> T {
    struct Restore(Option<InterruptCheck>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let previous = self.0.take();
            CHECK.with(|c| *c.borrow_mut() = previous);
        }
    }
    let _restore = Restore(CHECK.with(|c| c.replace(Some(check))));
    job()
}

/// Whether this thread's check says stop. The check is taken out while it runs, so one that
/// runs code calling back into a job (a Python signal handler) sees no check of its own.
pub(crate) fn interrupted() -> bool {
    let Some(mut check) = CHECK.with(|c| c.borrow_mut().take()) else {
        return false;
    };
    let stop = check();
    CHECK.with(|c| {
        let mut slot = c.borrow_mut();
        if slot.is_none() {
            *slot = Some(check);
        }
    });
    stop
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;
    use std::rc::Rc;

    #[test]
    fn a_job_sees_its_check_and_the_one_before_comes_back() {
        assert!(!interrupted(), "no check: never interrupted");
        let asked = Rc::new(Cell::new(0));
        let counter = asked.clone();
        let stop_at_third = Box::new(move || {
            counter.set(counter.get() + 1);
            counter.get() >= 3
        });
        let seen = checking_interrupts(stop_at_third, || {
            let inner = checking_interrupts(Box::new(|| true), interrupted);
            assert!(inner, "the inner job's own check");
            (0..5).map(|_| interrupted()).collect::<Vec<_>>()
        });
        assert_eq!(seen, [false, false, true, true, true]);
        assert_eq!(asked.get(), 5);
        assert!(!interrupted(), "restored to none");
        let caught = std::panic::catch_unwind(|| {
            checking_interrupts(Box::new(|| true), || panic!("a job that panics"))
        });
        assert!(caught.is_err());
        assert!(!interrupted(), "restored after a panic");
    }
}
