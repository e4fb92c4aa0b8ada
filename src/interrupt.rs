//! Jobs a caller can interrupt: a long job asks, between chunks, the check its caller set for
//! this thread (Python's pending Ctrl-C, `checking_interrupts`), and ends with
//! `Error::Interrupted` when it says so. Without a check nothing is asked.

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering};

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

/// How often a polled job's caller asks its check.
const POLL_INTERVAL: std::time::Duration = std::time::Duration::from_millis(20);

/// Run `job` on a thread of its own while this thread asks its check every 20 ms (work on
/// other threads, as a parallel build's, never asks it): once the check says stop, `job` sees
/// its flag set, should end early with an answer to throw away, and this is
/// `Error::Interrupted`. Without a check, or without a thread to spare, `job` runs here.
pub(crate) fn polled<T: Send>(
    job: impl FnOnce(&AtomicBool) -> T + Send,
) -> crate::error::Result<T> {
    polled_every(POLL_INTERVAL, job)
}

/// [`polled`], asking every `interval`. The wait between asks ends as soon as the job does:
/// sleeping out the interval made every polled job from Python (each mesh's build) last a
/// whole number of intervals, 10 ms more on average.
fn polled_every<T: Send>(
    interval: std::time::Duration,
    job: impl FnOnce(&AtomicBool) -> T + Send,
) -> crate::error::Result<T> {
    let stop = AtomicBool::new(false);
    if CHECK.with(|c| c.borrow().is_none()) {
        return Ok(job(&stop));
    }
    let job = std::sync::Mutex::new(Some(job));
    let run = || {
        let job = job
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        // On its own thread: rayon work in this process's pool.
        job.map(|job| crate::sync::in_process_pool(|| job(&stop)))
    };
    let answer = std::thread::scope(|scope| {
        // The worker holds the sender until it ends, however it ends (a panic included): the
        // receiver then hears that it is gone.
        let (ended, ending) = std::sync::mpsc::channel::<()>();
        let started = std::thread::Builder::new()
            .name("closest-polled".into())
            .spawn_scoped(scope, move || {
                let _ended = ended;
                run()
            });
        let Ok(worker) = started else {
            return Ok(run());
        };
        ask_until_ended(&stop, &ending, interval);
        worker.join()
    });
    match answer {
        Ok(_) if stop.load(Ordering::Relaxed) => Err(crate::error::Error::Interrupted),
        Ok(value) => Ok(value.expect("the job runs once")),
        Err(panic) => std::panic::resume_unwind(panic),
    }
}

/// Run `aside` on a thread of its own while this thread runs `here`; both answers. `aside`
/// runs under a check of its own that says stop once `here` fails or, while this thread waits
/// for `aside`, this thread's check says stop (asked every 20 ms, as [`polled`] asks it):
/// `aside` then ends early with an answer to throw away (`Error::Interrupted` from a polled
/// job), and where this thread's check said stop, `here`'s answer is `Error::Interrupted`.
/// Without a thread to spare, `aside` runs here after `here`.
pub(crate) fn beside<A: Send, H>(
    aside: impl FnOnce() -> A + Send,
    here: impl FnOnce() -> crate::error::Result<H>,
) -> (A, crate::error::Result<H>) {
    let stop = std::sync::Arc::new(AtomicBool::new(false));
    let aside = std::sync::Mutex::new(Some(aside));
    let run_aside = || {
        let aside = aside
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
            .expect("the job aside runs once");
        crate::sync::in_process_pool(aside)
    };
    std::thread::scope(|scope| {
        let (ended, ending) = std::sync::mpsc::channel::<()>();
        let asked = stop.clone();
        let started = std::thread::Builder::new()
            .name("closest-beside".into())
            .spawn_scoped(scope, move || {
                let _ended = ended;
                let stopped = Box::new(move || asked.load(Ordering::Relaxed));
                checking_interrupts(stopped, run_aside)
            });
        let answer = here();
        let Ok(worker) = started else {
            return (run_aside(), answer);
        };
        if answer.is_err() {
            stop.store(true, Ordering::Relaxed);
        }
        ask_until_ended(&stop, &ending, POLL_INTERVAL);
        let aside = worker
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        // Stopped after this side answered: the check said stop, whether or not the job aside
        // heard it before it ended (its last steps may not ask), and the call is interrupted.
        if stop.load(Ordering::Relaxed) && answer.is_ok() {
            return (aside, Err(crate::error::Error::Interrupted));
        }
        (aside, answer)
    })
}

/// Join `thread`, which holds the sender of `ending` until it ends, asking this thread's
/// check every 20 ms meanwhile (as [`polled`] asks it): once the check says stop, this is
/// `Error::Interrupted` at once, and the thread is left to end on its own (its answer thrown
/// away). A panic on the thread is resumed here.
pub(crate) fn join_asking<T>(
    thread: std::thread::JoinHandle<T>,
    ending: &std::sync::mpsc::Receiver<()>,
) -> crate::error::Result<T> {
    loop {
        if interrupted() {
            return Err(crate::error::Error::Interrupted);
        }
        match ending.recv_timeout(POLL_INTERVAL) {
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => continue,
            _ => break,
        }
    }
    Ok(thread
        .join()
        .unwrap_or_else(|panic| std::panic::resume_unwind(panic)))
}

/// Ask this thread's check every `interval` until a job on another thread ends (`ending`
/// hears its sender go), setting `stop` once the check says so: the check is asked until it
/// says stop, its answer (Python's exception) taken once.
fn ask_until_ended(
    stop: &AtomicBool,
    ending: &std::sync::mpsc::Receiver<()>,
    interval: std::time::Duration,
) {
    loop {
        if !stop.load(Ordering::Relaxed) && interrupted() {
            stop.store(true, Ordering::Relaxed);
        }
        match ending.recv_timeout(interval) {
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => continue,
            _ => break,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;
    use std::rc::Rc;

    /// A check that says stop from its `n`th ask on, and the count of its asks.
    fn stopping_at_ask(n: u32) -> (Rc<Cell<u32>>, InterruptCheck) {
        let asked = Rc::new(Cell::new(0));
        let counter = asked.clone();
        let check = Box::new(move || {
            counter.set(counter.get() + 1);
            counter.get() >= n
        });
        (asked, check)
    }

    #[test]
    fn a_job_sees_its_check_and_the_one_before_comes_back() {
        assert!(!interrupted(), "no check: never interrupted");
        let (asked, stop_at_third) = stopping_at_ask(3);
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

    #[test]
    fn a_polled_job_on_its_own_thread_sees_the_stop() {
        // Without a check: run here, never stopped.
        assert_eq!(
            polled(|stop| stop.load(Ordering::Relaxed)).ok(),
            Some(false)
        );
        // A check that says stop on its second ask: the job, which waits for its flag, ends
        // and the answer is Interrupted.
        let (asks, check) = stopping_at_ask(2);
        let answer = checking_interrupts(check, || {
            polled(|stop| {
                while !stop.load(Ordering::Relaxed) {
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
            })
        });
        assert!(matches!(answer, Err(crate::error::Error::Interrupted)));
        assert_eq!(asks.get(), 2, "asked until it said stop, then no more");
        // A job that ends first is answered.
        let done = checking_interrupts(Box::new(|| false), || polled(|_| 7));
        assert_eq!(done.ok(), Some(7));
    }

    #[test]
    fn a_job_beside_stops_when_this_side_fails_or_is_interrupted() {
        // The job aside waits for its stop; it sees it once this side fails...
        let wait_for_stop = || {
            polled(|stop| {
                while !stop.load(Ordering::Relaxed) {
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
            })
        };
        let (aside, here) = beside(wait_for_stop, || {
            Err::<(), _>(crate::error::Error::Usage("this side".into()))
        });
        assert!(matches!(aside, Err(crate::error::Error::Interrupted)));
        assert!(matches!(here, Err(crate::error::Error::Usage(_))));
        // ... or once this thread's check says stop while it waits.
        let (asks, check) = stopping_at_ask(2);
        let (aside, here) = checking_interrupts(check, || beside(wait_for_stop, || Ok(5)));
        assert!(matches!(aside, Err(crate::error::Error::Interrupted)));
        assert!(matches!(here, Err(crate::error::Error::Interrupted)));
        assert_eq!(asks.get(), 2, "asked until it said stop, then no more");
        // A job aside that never asks: it ends on its own, and the call is interrupted all
        // the same (the check's answer, Python's exception, was taken).
        let (_, check) = stopping_at_ask(1);
        let sleep = || std::thread::sleep(std::time::Duration::from_millis(60));
        let (_, here) = checking_interrupts(check, || beside(sleep, || Ok(5)));
        assert!(matches!(here, Err(crate::error::Error::Interrupted)));
        // A job aside that ends is answered, with this side's answer.
        let (aside, here) = beside(|| 3, || Ok(4));
        assert_eq!((aside, here.ok()), (3, Some(4)));
    }

    #[test]
    fn a_thread_joined_asking_is_left_when_the_check_says_stop() {
        // A thread that runs until told to end: a check that says stop on its second ask
        // answers Interrupted while the thread still runs.
        let spawn = |value: u32| {
            let (release, released) = std::sync::mpsc::channel::<()>();
            let (ended, ending) = std::sync::mpsc::channel::<()>();
            let thread = std::thread::spawn(move || {
                let _ended = ended;
                let _ = released.recv();
                value
            });
            (thread, ending, release)
        };
        let (thread, ending, release) = spawn(3);
        let (asks, check) = stopping_at_ask(2);
        let answer = checking_interrupts(check, || join_asking(thread, &ending));
        assert!(matches!(answer, Err(crate::error::Error::Interrupted)));
        assert_eq!(asks.get(), 2);
        drop(release);
        // Never stopped: the thread's answer, as soon as it ends.
        let (thread, ending, release) = spawn(4);
        drop(release);
        let answer = checking_interrupts(Box::new(|| false), || join_asking(thread, &ending));
        assert_eq!(answer.ok(), Some(4));
    }

    #[test]
    fn a_polled_job_is_answered_when_it_ends_not_at_the_next_ask() {
        // Asked once an hour: a wait that slept out the interval would hold the answer that
        // long, so the answer has to come well within the ten seconds allowed here.
        let (answered, answer) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let (asks, check) = stopping_at_ask(u32::MAX);
            let hour = std::time::Duration::from_secs(3600);
            let done = checking_interrupts(check, || polled_every(hour, |_| 7));
            let _ = answered.send((done.ok(), asks.get()));
        });
        let (done, asks) = answer
            .recv_timeout(std::time::Duration::from_secs(10))
            .expect("the polled job's answer within 10 s, not after the hour's ask");
        assert_eq!((done, asks), (Some(7), 1), "answered, the check asked once");
    }
}
