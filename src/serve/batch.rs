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
    tokio::spawn(async move {
        // A batch is formed once it has a turn: at most as many of this target's batches run
        // at once as the engine overlaps, and with one (a CPU adapter) the next batch
        // gathers the requests that come while this one runs, as large as they make it.
        while let Ok(turn) = in_flight.clone().acquire_owned().await {
            let Some(first) = jobs.recv().await else {
                break;
            };
            let mut batch = vec![first];
            let mut rows = batch[0].row_count();
            let deadline = tokio::time::Instant::now() + shared.batching.delay;
            while rows < shared.batching.rows {
                match tokio::time::timeout_at(deadline, jobs.recv()).await {
                    Ok(Some(job)) => {
                        rows += job.row_count();
                        batch.push(job);
                    }
                    _ => break,
                }
            }
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
            // Not awaited: the target's next batches may run beside this one (the engine
            // overlaps four jobs on a hardware GPU, `Engine::jobs_at_once`).
            // `run_group` catches the engine's panics; anything else is a bug of ours, and
            // the requests it held are answered 500 by their dropped reply channels.
            tokio::task::spawn_blocking(move || {
                let _permits = (turn, permit);
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
