//! One batching task per resident target: concurrent queries that agree on what they ask
//! (operation, mode or sign, fields) are coalesced into shared dispatches of up to
//! `batch_rows` rows, waiting at most `batch_delay` for company, and each request gets its own
//! rows back. Rows are answered independently of their neighbours (the engine's answers do
//! not depend on row order or chunking, which its tests check), so a batched answer is bit for
//! bit the one the request gets alone. A target's task is the only code that batches its
//! queries; the tasks are async (no thread each) and run their engine calls on a pool of
//! `--workers` blocking threads shared by every target; a target's batches run beside each
//! other as far as the engine overlaps jobs (`Engine::jobs_at_once`). A panic in an engine
//! call is that batch's 500: the task, the pool and the queue count go on.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::{Semaphore, mpsc};

use crate::auto_sign::SignChoice;
use crate::engine::GpuMesh;
use crate::engine::{MeshQuery, SceneQuery, SphereContacts, Spheres};
use crate::fields::{Columns, Fields};
use crate::gpu::GpuScene;
use crate::{Engine, Mode, Points, Result};

use super::body::RowValues;
use super::metrics::Metrics;

/// What a resident target is.
pub(crate) enum Target {
    Scene(Box<GpuScene>),
    Mesh(Box<GpuMesh>),
}

/// A query a worker runs; requests batch together only with equal operations and fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Op {
    SceneQuery(Mode),
    Contacts,
    MeshQuery(SignChoice),
}

impl Op {
    /// Values per input row.
    pub fn width(self) -> usize {
        match self {
            Op::Contacts => 4,
            Op::SceneQuery(_) | Op::MeshQuery(_) => 3,
        }
    }
}

/// A fault a test asks for (`closest serve --test-hooks`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fault {
    /// The engine call of the request's batch panics.
    Panic,
    /// The device is lost before the request's batch runs.
    LoseDevice,
}

/// One request's rows (f64 as received, `op.width()` values a row) and where its answer goes.
pub(crate) struct Job {
    pub op: Op,
    pub fields: Fields,
    pub rows: RowValues,
    pub fault: Option<Fault>,
    pub queued: Instant,
    /// The answer, or the engine's error (shared by every request of the dispatch).
    pub reply: tokio::sync::oneshot::Sender<Result<Answer, Arc<crate::Error>>>,
}

/// A request's rows answered, and where its time went.
pub(crate) struct Answer {
    pub columns: Columns,
    /// From the request's arrival at the worker to its batch's start.
    pub queue_wait: Duration,
    /// The engine call of its batch.
    pub device: Duration,
}

impl Job {
    fn row_count(&self) -> usize {
        self.rows.len() / self.op.width()
    }
}

/// How a worker batches.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Batching {
    pub rows: usize,
    pub delay: Duration,
}

/// What every target's task shares.
#[derive(Clone)]
pub(crate) struct Shared {
    pub batching: Batching,
    /// Requests waiting for a batch (503 past `--max-queue`).
    pub waiting: Arc<AtomicUsize>,
    pub metrics: Arc<Metrics>,
    /// Permits to run an engine call: the `--workers` pool.
    pub pool: Arc<Semaphore>,
    /// Told when an engine call finds the device lost.
    pub device_lost: Arc<tokio::sync::Notify>,
}

/// Start the task of `target`; it ends when the returned sender is dropped, after answering
/// what was queued. Must be called within the service's runtime.
pub(crate) fn start(
    engine: Arc<Engine>,
    target: Arc<Target>,
    shared: Shared,
) -> mpsc::UnboundedSender<Job> {
    let (sender, mut jobs) = mpsc::unbounded_channel::<Job>();
    let in_flight = Arc::new(Semaphore::new(engine.jobs_at_once()));
    let running = Arc::new(Running::default());
    tokio::spawn(async move {
        // A batch is formed once it has a turn: at most as many of this target's batches run
        // at once as the engine overlaps, and with one (a CPU adapter) the next batch
        // gathers the requests that come while this one runs, as large as they make it.
        while let Ok(turn) = in_flight.clone().acquire_owned().await {
            let Some(first) = jobs.recv().await else {
                break;
            };
            let (mut batch, mut rows) =
                gather(first, &mut jobs, Job::row_count, shared.batching, &running).await;
            let Ok(permit) = shared.pool.clone().acquire_owned().await else {
                return;
            };
            // Requests that came while the batch waited for a worker join it.
            while rows < shared.batching.rows {
                let Ok(job) = jobs.try_recv() else { break };
                rows += job.row_count();
                batch.push(job);
            }
            shared.waiting.fetch_sub(batch.len(), Ordering::Relaxed);
            let (engine, target, metrics) =
                (engine.clone(), target.clone(), shared.metrics.clone());
            let lost = shared.device_lost.clone();
            // Only batches that are not full hold the next ones back: a large one (a client's
            // many rows) runs beside the small ones of other clients, as before, and never
            // makes them wait for it.
            let running = (rows < shared.batching.rows).then(|| running.clone().start());
            // Not awaited: the target's next batches may run beside this one (the engine
            // overlaps four jobs on a hardware GPU, `Engine::jobs_at_once`).
            // `run_group` catches the engine's panics; anything else is a bug of ours, and
            // the requests it held are answered 500 by their dropped reply channels.
            tokio::task::spawn_blocking(move || {
                // Dropped in this order: the batch ends before its turn is given back, so that
                // with one turn (a CPU adapter) the next batch finds the target idle.
                let _held = (running, turn, permit);
                // Each run of equal requests shares dispatches; their order is kept.
                while !batch.is_empty() {
                    let key = (batch[0].op, batch[0].fields);
                    let (group, rest): (Vec<Job>, Vec<Job>) =
                        batch.into_iter().partition(|j| (j.op, j.fields) == key);
                    batch = rest;
                    run_group(&engine, &target, group, &metrics);
                }
                if engine.is_lost() {
                    lost.notify_one();
                }
            });
        }
    });
    sender
}

/// A batch of `first` and the requests that join it, and its rows (`row_count` of each), up
/// to `batching.rows`. While the target has other batches that are not full running, one that
/// is not full waits for them to end, gathering what comes meanwhile, and then goes: small
/// calls overlap little on a GPU, so the device is never idle while requests wait and each
/// batch is as large as the arrivals make it (docs/perf-history.md "The service's host side on
/// an H200"). On an idle target it waits at most `batching.delay` for company. Only this
/// target's task starts batches, so while it gathers the running ones only end.
async fn gather<T>(
    first: T,
    jobs: &mut mpsc::UnboundedReceiver<T>,
    row_count: impl Fn(&T) -> usize,
    batching: Batching,
    running: &Running,
) -> (Vec<T>, usize) {
    let mut rows = row_count(&first);
    let mut batch = vec![first];
    let deadline = tokio::time::Instant::now() + batching.delay;
    let mut behind_running = false;
    while rows < batching.rows {
        // Listening before looking, so that an end between the two is not missed.
        let done = running.finished.notified();
        tokio::pin!(done);
        done.as_mut().enable();
        let others_running = running.count.load(Ordering::Acquire) > 0;
        if behind_running && !others_running {
            break;
        }
        behind_running |= others_running;
        let next = async {
            if others_running {
                jobs.recv().await
            } else {
                tokio::time::timeout_at(deadline, jobs.recv())
                    .await
                    .ok()
                    .flatten()
            }
        };
        let job = tokio::select! {
            job = next => job,
            () = &mut done, if others_running => continue,
        };
        let Some(job) = job else { break };
        rows += row_count(&job);
        batch.push(job);
    }
    (batch, rows)
}

/// A target's batches that are not full running on the engine, and word when one ends.
#[derive(Default)]
struct Running {
    count: AtomicUsize,
    finished: tokio::sync::Notify,
}

impl Running {
    /// Counts a batch as running until the returned guard drops (at its end, or its panic).
    fn start(self: Arc<Running>) -> RunningBatch {
        self.count.fetch_add(1, Ordering::AcqRel);
        RunningBatch(self)
    }
}

struct RunningBatch(Arc<Running>);

impl Drop for RunningBatch {
    fn drop(&mut self) {
        self.0.count.fetch_sub(1, Ordering::AcqRel);
        self.0.finished.notify_waiters();
    }
}

/// Answer `group` (equal operations and fields) in one engine call and split the answer. A
/// shared call that fails or panics (the engine's locks outlive it: `crate::sync`) is tried
/// again one request at a time, so that one request's fault is its own 500 only (SPEC §7);
/// a lost device fails them all.
fn run_group(engine: &Engine, target: &Target, group: Vec<Job>, metrics: &Metrics) {
    if let Err(group) = try_shared(engine, target, group, metrics) {
        for job in group {
            // A lone request is always answered (`try_shared` gives back only groups).
            let _ = try_shared(engine, target, vec![job], metrics);
        }
    }
}

/// One engine call for `group`: `Ok` once every request is answered from it, `Err(group)`
/// when it failed and the group has more than one request (they are then not answered).
fn try_shared(
    engine: &Engine,
    target: &Target,
    group: Vec<Job>,
    metrics: &Metrics,
) -> std::result::Result<(), Vec<Job>> {
    let (op, fields) = (group[0].op, group[0].fields);
    let counts: Vec<usize> = group.iter().map(Job::row_count).collect();
    let total: usize = counts.iter().sum();
    metrics.batch(total);
    let values = RowValues::concat(group.iter().map(|job| &job.rows), total * op.width());
    let faults: Vec<Fault> = group.iter().filter_map(|j| j.fault).collect();
    let started = Instant::now();
    let answer = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        if faults.contains(&Fault::LoseDevice) {
            engine.lose_device_for_tests();
        }
        if faults.contains(&Fault::Panic) {
            panic!("test hook: a panic in the engine call");
        }
        answer(engine, target, op, fields, &values)
    }))
    .unwrap_or_else(|panic| {
        let what = crate::sync::panic_message(&*panic);
        Err(crate::Error::Gpu(format!("the query panicked: {what}")))
    })
    .map_err(Arc::new);
    let device = started.elapsed();
    if answer.is_err() && group.len() > 1 && !engine.is_lost() {
        return Err(group);
    }
    let mut first = 0;
    for (job, count) in group.into_iter().zip(counts) {
        let reply = match &answer {
            Ok(columns) => Ok(Answer {
                columns: rows_of(columns, first, count),
                queue_wait: started.saturating_duration_since(job.queued),
                device,
            }),
            Err(e) => Err(e.clone()),
        };
        first += count;
        // A client that went away no longer listens; nothing else to do.
        let _ = job.reply.send(reply);
    }
    Ok(())
}

fn answer(
    engine: &Engine,
    target: &Target,
    op: Op,
    fields: Fields,
    values: &RowValues,
) -> Result<Columns> {
    let mut columns = Columns::new(fields, values.len() / op.width());
    let points = || match values {
        RowValues::F32(v) => Points::F32(bytemuck::cast_slice(v)),
        RowValues::F64(v) => Points::F64(bytemuck::cast_slice(v)),
    };
    match (op, target) {
        // The rows as received, read in place: rounded to f32 once, on their way to the device.
        (Op::SceneQuery(mode), Target::Scene(scene)) => {
            let job = SceneQuery {
                scene,
                points: points(),
                mode,
                fields,
            };
            engine.query_scene(job, &mut columns)
        }
        (Op::Contacts, Target::Scene(scene)) => {
            // Read in place, float64 centres rounded once, in the scene's frame.
            let spheres = match values {
                RowValues::F32(v) => Spheres::Slice(bytemuck::cast_slice(v)),
                RowValues::F64(v) => Spheres::SliceF64(bytemuck::cast_slice(v)),
            };
            let job = SphereContacts {
                scene,
                spheres,
                fields,
            };
            engine.sphere_contacts(job, &mut columns)
        }
        (Op::MeshQuery(sign), Target::Mesh(mesh)) => {
            let job = MeshQuery {
                mesh,
                points: points(),
                sign: engine.resolve_sign(mesh, sign)?,
                fields,
            };
            engine.query_mesh(job, &mut columns)
        }
        _ => Err(crate::Error::Usage(
            "this operation does not apply to this kind of target".into(),
        )),
    }?;
    Ok(columns)
}

/// Rows `first .. first + count` of every column.
fn rows_of(columns: &Columns, first: usize, count: usize) -> Columns {
    Columns {
        columns: columns
            .columns
            .iter()
            .map(|(field, values)| {
                let w = field.width;
                (*field, values[first * w..(first + count) * w].to_vec())
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("a runtime")
    }

    const BATCHING: Batching = Batching {
        rows: 100,
        delay: Duration::from_millis(300),
    };

    #[test]
    fn an_idle_targets_batch_waits_the_delay_for_company() {
        runtime().block_on(async {
            let (sender, mut jobs) = mpsc::unbounded_channel::<usize>();
            let running = Running::default();
            let started = Instant::now();
            let late = tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(50)).await;
                sender.send(7).expect("a listener");
                sender
            });
            let (batch, rows) = gather(1, &mut jobs, |r| *r, BATCHING, &running).await;
            assert_eq!((batch, rows), (vec![1, 7], 8));
            assert!(
                started.elapsed() >= BATCHING.delay,
                "{:?}",
                started.elapsed()
            );
            drop(late.await);
        });
    }

    #[test]
    fn a_full_batch_goes_at_once() {
        runtime().block_on(async {
            let (sender, mut jobs) = mpsc::unbounded_channel::<usize>();
            sender.send(99).expect("a listener");
            let started = Instant::now();
            let (batch, rows) = gather(1, &mut jobs, |r| *r, BATCHING, &Running::default()).await;
            assert_eq!((batch, rows), (vec![1, 99], 100));
            assert!(
                started.elapsed() < BATCHING.delay,
                "{:?}",
                started.elapsed()
            );
        });
    }

    #[test]
    fn a_batch_behind_a_running_one_goes_when_it_ends() {
        runtime().block_on(async {
            let (sender, mut jobs) = mpsc::unbounded_channel::<usize>();
            let running = Arc::new(Running::default());
            let batch_running = running.clone().start();
            let started = Instant::now();
            // Company comes while the running batch runs; then it ends, long before the delay.
            let ends = tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(20)).await;
                sender.send(2).expect("a listener");
                tokio::time::sleep(Duration::from_millis(20)).await;
                drop(batch_running);
                sender
            });
            let (batch, rows) = gather(1, &mut jobs, |r| *r, BATCHING, &running).await;
            let waited = started.elapsed();
            assert_eq!((batch, rows), (vec![1, 2], 3));
            assert!(waited >= Duration::from_millis(40), "{waited:?}");
            assert!(
                waited < BATCHING.delay,
                "went after {waited:?}, not when the batch ended"
            );
            assert_eq!(running.count.load(Ordering::Acquire), 0);
            drop(ends.await);
        });
    }

    #[test]
    fn a_batch_behind_a_running_one_waits_past_the_delay_until_it_ends() {
        runtime().block_on(async {
            let (_sender, mut jobs) = mpsc::unbounded_channel::<usize>();
            let running = Arc::new(Running::default());
            let batch_running = running.clone().start();
            let started = Instant::now();
            let ends = tokio::spawn(async move {
                tokio::time::sleep(2 * BATCHING.delay).await;
                drop(batch_running);
            });
            let (batch, _) = gather(1, &mut jobs, |r| *r, BATCHING, &running).await;
            assert_eq!(batch, vec![1]);
            let waited = started.elapsed();
            assert!(
                waited >= 2 * BATCHING.delay,
                "went after {waited:?}, while the batch ran"
            );
            ends.await.expect("the running batch ends");
        });
    }

    #[test]
    fn a_full_batch_goes_beside_running_ones() {
        runtime().block_on(async {
            let (sender, mut jobs) = mpsc::unbounded_channel::<usize>();
            let running = Arc::new(Running::default());
            let _running = running.clone().start();
            sender.send(60).expect("a listener");
            sender.send(60).expect("a listener");
            let started = Instant::now();
            let (batch, rows) = gather(1, &mut jobs, |r| *r, BATCHING, &running).await;
            assert_eq!((batch, rows), (vec![1, 60, 60], 121));
            assert!(
                started.elapsed() < BATCHING.delay,
                "{:?}",
                started.elapsed()
            );
        });
    }

    #[test]
    fn requests_gone_end_the_gathering() {
        runtime().block_on(async {
            let (sender, mut jobs) = mpsc::unbounded_channel::<usize>();
            let running = Arc::new(Running::default());
            let _running = running.clone().start();
            drop(sender);
            let (batch, _) = gather(1, &mut jobs, |r| *r, BATCHING, &running).await;
            assert_eq!(batch, vec![1]);
        });
    }
}
