//! One batching worker per resident target: concurrent queries that agree on what they ask
//! (operation, mode or sign, fields) are coalesced into shared dispatches of up to
//! `batch_rows` rows, waiting at most `batch_delay` for company, and each request gets its own
//! rows back. Rows are answered independently of their neighbours (the engine's answers do
//! not depend on row order or chunking, which its tests check), so a batched answer is bit for
//! bit the one the request gets alone. The worker is the only code that queries the target.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::DVec3;
use crate::engine::GpuMesh;
use crate::fields::{Columns, Fields};
use crate::gpu::{GpuScene, query_point};
use crate::mesh::Sign;
use crate::{Engine, Mode, Result};

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
    MeshQuery(Sign),
}

impl Op {
    /// Values per input row.
    fn width(self) -> usize {
        match self {
            Op::Contacts => 4,
            Op::SceneQuery(_) | Op::MeshQuery(_) => 3,
        }
    }
}

/// One request's rows (f64 as received, `op.width()` values a row) and where its answer goes.
pub(crate) struct Job {
    pub op: Op,
    pub fields: Fields,
    pub rows: Vec<f64>,
    /// The answer, or the engine's error (shared by every request of the dispatch).
    pub reply: tokio::sync::oneshot::Sender<Result<Columns, Arc<crate::Error>>>,
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

/// Start the worker of `target`; it ends when the returned sender (and its clones) are dropped,
/// after answering what was queued.
pub(crate) fn start(
    engine: Arc<Engine>,
    target: Arc<Target>,
    batching: Batching,
    waiting: Arc<AtomicUsize>,
    metrics: Arc<Metrics>,
) -> mpsc::Sender<Job> {
    let (sender, jobs) = mpsc::channel::<Job>();
    std::thread::spawn(move || {
        while let Ok(first) = jobs.recv() {
            let mut batch = vec![first];
            let mut rows = batch[0].row_count();
            let deadline = Instant::now() + batching.delay;
            while rows < batching.rows {
                let next = match jobs.try_recv() {
                    Ok(job) => Some(job),
                    Err(_) => {
                        let left = deadline.saturating_duration_since(Instant::now());
                        if left.is_zero() {
                            None
                        } else {
                            jobs.recv_timeout(left).ok()
                        }
                    }
                };
                let Some(job) = next else { break };
                rows += job.row_count();
                batch.push(job);
            }
            waiting.fetch_sub(batch.len(), Ordering::Relaxed);
            // Each run of equal requests shares dispatches; their order is kept.
            while !batch.is_empty() {
                let key = (batch[0].op, batch[0].fields);
                let (group, rest): (Vec<Job>, Vec<Job>) =
                    batch.into_iter().partition(|j| (j.op, j.fields) == key);
                batch = rest;
                run_group(&engine, &target, group, &metrics);
            }
        }
    });
    sender
}

/// Answer `group` (equal operations and fields) in one engine call and split the answer.
fn run_group(engine: &Engine, target: &Target, group: Vec<Job>, metrics: &Metrics) {
    let (op, fields) = (group[0].op, group[0].fields);
    let counts: Vec<usize> = group.iter().map(Job::row_count).collect();
    let total: usize = counts.iter().sum();
    metrics.batch(total);
    let mut values = Vec::with_capacity(total * op.width());
    for job in &group {
        values.extend_from_slice(&job.rows);
    }
    let answer = answer(engine, target, op, fields, &values).map_err(Arc::new);
    let mut first = 0;
    for (job, count) in group.into_iter().zip(counts) {
        let reply = match &answer {
            Ok(columns) => Ok(rows_of(columns, first, count)),
            Err(e) => Err(e.clone()),
        };
        first += count;
        // A client that went away no longer listens; nothing else to do.
        let _ = job.reply.send(reply);
    }
}

fn answer(
    engine: &Engine,
    target: &Target,
    op: Op,
    fields: Fields,
    values: &[f64],
) -> Result<Columns> {
    match (op, target) {
        (Op::SceneQuery(mode), Target::Scene(scene)) => {
            let points: Vec<[f32; 3]> = values
                .chunks_exact(3)
                .map(|p| query_point([p[0], p[1], p[2]], DVec3::ZERO))
                .collect();
            engine.query_scene_fields(scene, &points, mode, fields)
        }
        (Op::Contacts, Target::Scene(scene)) => {
            let spheres: Vec<[f32; 4]> = values
                .chunks_exact(4)
                .map(|s| {
                    let [x, y, z] = query_point([s[0], s[1], s[2]], DVec3::ZERO);
                    [x, y, z, s[3] as f32]
                })
                .collect();
            engine.sphere_contacts_fields(scene, &spheres, fields)
        }
        (Op::MeshQuery(sign), Target::Mesh(mesh)) => {
            let points: Vec<[f64; 3]> =
                values.chunks_exact(3).map(|p| [p[0], p[1], p[2]]).collect();
            engine.query_mesh_fields(mesh, &points, sign, fields)
        }
        _ => Err(crate::Error::Usage(
            "this operation does not apply to this kind of target".into(),
        )),
    }
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
