//! The engine: every job the library runs (scene, paired, segment-pair, mesh and contact
//! queries), each turned into a `gpu::plan::Job` and carried out by the streaming loop. This is
//! the only place `impl Engine` lives: `mesh/` here for meshes, `contacts.rs` for spheres,
//! `sdf.rs` for grids.

mod band;
mod bodies;
mod contacts;
mod distance;
mod mesh;
mod samples;
mod sdf;

pub use band::{BandSlab, BandWork, SdfBand};
pub use bodies::{
    BODY_SCALE_LIMIT, BodyContacts, BodyPairs, check_bodies, check_bodies_from, check_body_scale,
    check_body_scale_from, check_mesh_body_scale, is_body_kind, torus_conflict, torus_refusal,
};
pub use contacts::{SphereContacts, SphereReader, Spheres};
pub use distance::{Deviations, Direction, MeshDistance, MeshDistanceSummary, surface_samples};
pub use mesh::{GpuMesh, MeshQuery};
pub use samples::{MeshSamples, SampleRows, sample_fields};
pub use sdf::SdfGrid;

use crate::Mode;
use crate::error::{Error, Result};
use crate::fields::{Family, Fields, GpuHit, PackedSink, mended_rows};
use crate::gpu::rows::{self, RowSource};
use crate::gpu::scene::Hierarchy;
use crate::gpu::stream::{self, Inputs};
use crate::gpu::{Context, EngineOptions, GpuScene, JobTiming, common_kind, layout, plan, scene};
use crate::math::DVec3;
use crate::points::Points;
use crate::shape::Shape;

/// A job answers at least this many rows a shape before its scene gets cell lists: their
/// build costs about as much as 50 rows a shape save on lavapipe (docs/perf-history.md).
const CELL_LIST_ROWS_PER_SHAPE: usize = 100;

/// The GPU closest-point engine: one device, its kernels built once, and the jobs of SPEC §2
/// and §4 streamed through it in chunks sized from the device limits.
pub struct Engine {
    pub(crate) gpu: Context,
    slots: stream::Slots,
}

/// An engine being opened on a thread of its own from [`EngineOpening::start`] on, while a
/// one-shot job reads its inputs: opening lavapipe's adapter and device takes 60–100 ms, as
/// long as reading a mesh of a few hundred thousand triangles. Dropped unopened (the job failed
/// first), it is waited for, so that no thread is left inside the driver as the process exits.
pub struct EngineOpening {
    options: EngineOptions,
    opening: Option<std::thread::JoinHandle<Result<Engine>>>,
}

impl EngineOpening {
    /// Start opening the engine `options` ask for.
    pub fn start(options: &EngineOptions) -> EngineOpening {
        let owned = options.clone();
        let opening = std::thread::Builder::new()
            .name("closest-engine-open".into())
            .spawn(move || Engine::new(&owned))
            .ok();
        EngineOpening {
            options: options.clone(),
            opening,
        }
    }

    /// The engine, once open, or why it could not be: [`Engine::new`]'s answer.
    pub fn engine(mut self) -> Result<Engine> {
        match self.opening.take() {
            Some(thread) => thread
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
            // The system gave no thread: opened here.
            None => Engine::new(&self.options),
        }
    }
}

impl Drop for EngineOpening {
    fn drop(&mut self) {
        if let Some(thread) = self.opening.take() {
            // Its answer, an engine or an error, is not wanted; a panic stays on its thread.
            let _ = thread.join();
        }
    }
}

impl Engine {
    /// Open the adapter the options (or `CLOSEST_ADAPTER`) name, or the best one available.
    pub fn new(options: &EngineOptions) -> Result<Engine> {
        let gpu = Context::open(options)?;
        // Jobs from several threads overlap on a hardware GPU (their host work beside each
        // other's device work; four served the H100 best, docs/perf-history.md); a CPU
        // adapter's device is the host itself.
        let jobs_at_once =
            options
                .jobs_at_once
                .unwrap_or(if gpu.info.device_type == wgpu::DeviceType::Cpu {
                    1
                } else {
                    4
                });
        Ok(Engine {
            gpu,
            slots: stream::Slots::new(jobs_at_once),
        })
    }

    pub fn adapter_info(&self) -> &wgpu::AdapterInfo {
        &self.gpu.info
    }
    pub fn limits(&self) -> &wgpu::Limits {
        &self.gpu.limits
    }
    /// The loop iterations a body walk may run an invocation: nonzero where the adapter cuts
    /// longer loops short (Mesa 22's software adapters), 0 for no limit.
    pub fn body_loop_budget(&self) -> u32 {
        self.gpu.kernels.loop_budget
    }
    /// Rows per chunk in use.
    pub fn chunk_rows(&self) -> usize {
        self.gpu.chunk_rows
    }
    /// Whether scene queries through a BVH are dispatched in Morton order within each chunk
    /// (results always come back in row order): by default on CPU adapters (lavapipe), where
    /// it makes the lanes coherent, and not on hardware GPUs, where the host's sort costs more
    /// than the device saves (docs/perf-history.md).
    pub fn reorders_queries(&self) -> bool {
        self.gpu
            .reorder_queries
            .load(std::sync::atomic::Ordering::Relaxed)
    }
    /// Override [`Engine::reorders_queries`], to measure its effect.
    pub fn set_reorder_queries(&self, on: bool) {
        self.gpu
            .reorder_queries
            .store(on, std::sync::atomic::Ordering::Relaxed);
    }

    /// Jobs called from several threads at once that run through the device together (four on
    /// hardware GPUs, one on CPU adapters): each holds its own chunk buffers, so one's fill
    /// and drain on the host overlap another's chunks on the device (the buffers are kept for
    /// later jobs, so an engine used by four threads at once holds four sets). More wait their
    /// turn. [`Engine::last_timing`] then mixes the jobs that overlapped.
    pub fn jobs_at_once(&self) -> usize {
        self.slots.jobs_at_once()
    }

    /// Override [`Engine::jobs_at_once`] (at least 1), to measure and test it.
    pub fn set_jobs_at_once(&self, jobs: usize) {
        self.slots.set_jobs_at_once(jobs);
    }

    /// Whether SDF grids are sampled on the device (each chunk uploads a header, not its
    /// points) wherever the mesh allows it; on by default. Off, the host computes every sample
    /// and the device answers them as query points.
    pub fn samples_grids_on_device(&self) -> bool {
        self.gpu
            .grid_on_device
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Override [`Engine::samples_grids_on_device`], to measure and test it.
    pub fn set_grid_on_device(&self, on: bool) {
        self.gpu
            .grid_on_device
            .store(on, std::sync::atomic::Ordering::Relaxed);
    }

    /// Whether inputs and outputs are written and read in place (no staging copies).
    pub fn unified_memory(&self) -> bool {
        self.gpu.unified_memory
    }
    /// Whether scene queries run the subgroup kernels, `query_subgroup.wgsl` and (triangle
    /// scenes, meshes) `mesh_subgroup.wgsl`, and dense body jobs `bodies_subgroup.wgsl`:
    /// adapters with subgroups of exactly 8 lanes, such as lavapipe, unless
    /// [`EngineOptions::portable_kernels`].
    pub fn subgroup_kernels(&self) -> bool {
        self.gpu.subgroup_kernels
    }
    /// Whether mesh walks run in seeded rounds (`EngineOptions::seeded_mesh_rounds`) rather
    /// than one dispatch a chunk.
    pub fn seeded_mesh_rounds(&self) -> bool {
        self.gpu.seeded_mesh_rounds
    }
    /// Whether the walks read each chunk's points from texels (`shared/point_texels.wgsl`):
    /// adapters whose 2-D textures are at least a texel row wide, unless
    /// [`EngineOptions::storage_points`].
    pub fn point_texels(&self) -> bool {
        self.gpu.point_texels
    }
    /// The scene and mesh kernels in use, for summaries and benchmark headers.
    pub fn scene_kernels(&self) -> &'static str {
        if self.gpu.subgroup_kernels {
            "query_subgroup.wgsl, mesh_subgroup.wgsl"
        } else {
            "query.wgsl, mesh.wgsl"
        }
    }
    /// Where the last job's time went (host fill, waiting on the device, host drain).
    pub fn last_timing(&self) -> JobTiming {
        *crate::sync::lock(&self.gpu.timing)
    }

    /// The device time of every job since the engine opened, where the adapter has timestamp
    /// queries: a job of several queries (a band grid, training samples signed by winding
    /// number) took the difference across it.
    pub fn device_time_total(&self) -> Option<std::time::Duration> {
        *crate::sync::lock(&self.gpu.device_total)
    }

    /// Whether the device is lost (a driver reset, a GPU fallen off the bus): nothing more runs
    /// on this engine; a new one must be opened.
    pub fn is_lost(&self) -> bool {
        self.gpu.lost.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Destroy the device, as a driver reset would: for the service's fault tests only.
    #[doc(hidden)]
    pub fn lose_device_for_tests(&self) {
        self.gpu.device.destroy();
        // The callback may come later; the engine is lost from now on.
        self.gpu
            .lost
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }

    /// One line naming the adapter, for summaries.
    pub fn describe(&self) -> String {
        format!(
            "{} ({:?}, {:?})",
            self.gpu.info.name, self.gpu.info.backend, self.gpu.info.device_type
        )
    }

    /// Upload a scene once; it stays on the device for any number of queries.
    /// A scene of bounded shapes of at most eight kinds (no hulls) also gets cell lists (`gpu::cells`):
    /// seconds of build for 10^5 shapes, repaid after a few million queries.
    pub fn upload_scene(&self, shapes: &[Shape]) -> Result<GpuScene> {
        scene::upload(&self.gpu, shapes, Hierarchy::CellLists, |_| Ok(()))
    }

    /// [`Engine::upload_scene`] for a job of `rows` queries: cell lists only where that many
    /// repay their build.
    pub fn upload_scene_for_rows(&self, shapes: &[Shape], rows: usize) -> Result<GpuScene> {
        let hierarchy = if rows >= CELL_LIST_ROWS_PER_SHAPE * shapes.len() {
            Hierarchy::CellLists
        } else {
            Hierarchy::Bvh
        };
        scene::upload(&self.gpu, shapes, hierarchy, |_| Ok(()))
    }

    /// [`Engine::upload_scene`], asking `admit` first with the device bytes the scene will
    /// take, before any is allocated (a service's memory budget); its refusal is returned.
    pub fn upload_scene_admitted<E: From<Error>>(
        &self,
        shapes: &[Shape],
        admit: impl FnOnce(u64) -> std::result::Result<(), E>,
    ) -> std::result::Result<GpuScene, E> {
        scene::upload(&self.gpu, shapes, Hierarchy::CellLists, admit)
    }

    /// [`Engine::upload_scene`] without hierarchies: every query scans every shape. For
    /// comparisons with the BVH path; slower beyond a handful of shapes.
    pub fn upload_scene_brute_force(&self, shapes: &[Shape]) -> Result<GpuScene> {
        scene::upload(&self.gpu, shapes, Hierarchy::None, |_| Ok(()))
    }

    /// A scene query (SPEC §2): the nearest shape of `job.scene` for every point, only
    /// `job.fields` computed and moved back. `sink` takes each chunk's rows, packed, in row
    /// order: a [`Columns`] collects them, any other [`PackedSink`] streams them.
    pub fn query_scene(&self, job: SceneQuery<'_>, sink: &mut dyn PackedSink) -> Result<()> {
        let SceneQuery {
            scene,
            mut points,
            mode,
            fields,
        } = job;
        let rows = points.len();
        let job = plan::Job::Nearest {
            scene,
            sign: plan::DeviceSign::None,
            grid: None,
        };
        let plan = job.plan(&self.gpu, fields, mode)?;
        let frame = scene.frame;
        if frame == DVec3::ZERO {
            return self.run(&plan, rows, Inputs::points(&mut points.source(frame)), sink);
        }
        let mut moved_back = crate::fields::points_moved(frame, sink);
        self.run(
            &plan,
            rows,
            Inputs::points(&mut points.source(frame)),
            &mut moved_back,
        )
    }

    /// Carry out `plan` on `rows` rows of `inputs`, chunk by chunk, into `sink`.
    pub(crate) fn run(
        &self,
        plan: &plan::Plan<'_>,
        rows: usize,
        inputs: Inputs<'_>,
        sink: &mut dyn PackedSink,
    ) -> Result<()> {
        stream::run(&self.gpu, &self.slots, plan, rows, inputs, sink)
    }

    /// Point i against shape i (SPEC §2 "paired"), only `job.fields` computed; `sink` as for
    /// [`Engine::query_scene`].
    pub fn query_paired(&self, job: PairedQuery<'_>, sink: &mut dyn PackedSink) -> Result<()> {
        let PairedQuery {
            shapes,
            mut points,
            mode,
            fields,
        } = job;
        check_paired_counts(shapes.len(), points.len())?;
        crate::shape::check_spans(shapes)?;
        let (data, data_starts) = layout::ShapeData::for_paired(shapes);
        let data = self.shape_data_buffer(data, &data_starts)?;
        let frames = paired_frames(shapes);
        let mut shape_source = rows::shapes_from_slice(shapes, &data_starts, &frames);
        let kind = common_kind(shapes.iter().map(Shape::kind));
        let job = plan::Job::Paired {
            kind,
            data: data.as_ref(),
        };
        if frames.is_empty() {
            let inputs = Inputs {
                points: Some(&mut points.source(DVec3::ZERO)),
                shapes: Some(&mut shape_source),
            };
            let plan = job.plan(&self.gpu, fields, mode)?;
            return self.run(&plan, shapes.len(), inputs, sink);
        }
        // Closest points are moved back from the frames: every field asked of the device.
        let plan = job.plan(&self.gpu, Fields::all(Family::Hits), mode)?;
        let inputs = Inputs {
            points: Some(&mut points.source_in_frames(&frames)),
            shapes: Some(&mut shape_source),
        };
        let mut finish = mended_rows(fields, sink, |row, hit: &mut GpuHit| {
            let offset = frames[row];
            if offset != DVec3::ZERO && hit.shape >= 0 {
                let [x, y, z] = hit.point.map(f64::from);
                hit.point = (DVec3::new(x, y, z) + offset).to_f32();
            }
        });
        self.run(&plan, shapes.len(), inputs, &mut finish)
    }

    /// Closest points between segment `a[i]` and segment `b[i]` for every i (SPEC §2), only
    /// `job.fields` computed; `sink` as for [`Engine::query_scene`].
    pub fn segment_pairs(&self, job: SegmentPairs<'_>, sink: &mut dyn PackedSink) -> Result<()> {
        let SegmentPairs { pairs, fields } = job;
        let (mut a, mut b) = (Vec::new(), Vec::new());
        let (rows, mut source): (usize, Box<dyn RowSource + '_>) = match pairs {
            SegmentRows::Slices(sa, sb) => {
                check_segment_counts(sa.len(), sb.len())?;
                (sa.len(), Box::new(rows::segment_pairs_from_slices(sa, sb)))
            }
            SegmentRows::Read(reader) => {
                let rows = reader.rows();
                let fill = move |range: std::ops::Range<usize>, out: wgpu::WriteOnly<'_, [u8]>| {
                    let asked = range.len();
                    reader.read(range, &mut a, &mut b)?;
                    crate::points::check_rows("segment reader (A)", asked, a.len())?;
                    crate::points::check_rows("segment reader (B)", asked, b.len())?;
                    let segment =
                        |r: &[f64; 6]| [DVec3::new(r[0], r[1], r[2]), DVec3::new(r[3], r[4], r[5])];
                    rows::write_segment_pairs(a.iter().map(segment), b.iter().map(segment), out);
                    Ok(())
                };
                (rows, Box::new(fill))
            }
        };
        let plan = plan::Job::SegmentPairs.plan(&self.gpu, fields, Mode::Solid)?;
        let inputs = Inputs {
            points: None,
            shapes: Some(&mut *source),
        };
        self.run(&plan, rows, inputs, sink)
    }
}

/// A scene query: [`Engine::query_scene`].
pub struct SceneQuery<'a> {
    pub scene: &'a GpuScene,
    pub points: Points<'a>,
    pub mode: Mode,
    pub fields: Fields,
}

/// Point i against shape i: [`Engine::query_paired`].
pub struct PairedQuery<'a> {
    pub shapes: &'a [Shape],
    pub points: Points<'a>,
    pub mode: Mode,
    pub fields: Fields,
}

/// Segment pairs: [`Engine::segment_pairs`].
pub struct SegmentPairs<'a> {
    pub pairs: SegmentRows<'a>,
    pub fields: Fields,
}

/// Segment pairs as a front end has them: two slices (segment i of each is a pair), or a
/// reader.
pub enum SegmentRows<'a> {
    Slices(&'a [[DVec3; 2]], &'a [[DVec3; 2]]),
    Read(&'a mut dyn SegmentReader),
}

/// Segment pairs read chunk by chunk: rows `range` of A and of B, each segment as its six
/// coordinates `[ax, ay, az, bx, by, bz]` as read (made into records in one pass).
pub trait SegmentReader {
    fn rows(&self) -> usize;
    fn read(
        &mut self,
        range: std::ops::Range<usize>,
        a: &mut Vec<[f64; 6]>,
        b: &mut Vec<[f64; 6]>,
    ) -> Result<()>;
}

fn check_paired_counts(shapes: usize, points: usize) -> Result<()> {
    if shapes != points {
        return Err(Error::Usage(format!(
            "paired queries need as many shapes as points ({shapes} shapes, {points} points)"
        )));
    }
    Ok(())
}

fn check_segment_counts(a: usize, b: usize) -> Result<()> {
    if a != b {
        return Err(Error::Usage(format!(
            "segment pairs need as many segments in A as in B ({a} and {b})"
        )));
    }
    Ok(())
}

/// Each paired row's frame: where shape i lies beyond `mesh::FAR_RADII` times its radius from
/// the origin, the point and the shape are both moved by minus its centre in f64 before they
/// are rounded to f32, so that they differ by what f32 holds about zero, not about their
/// coordinates (a point 0.3 from a sphere 10^8 away was answered inside it). Unbounded shapes
/// keep the world frame (a plane's record is anchored at its point nearest the origin, which
/// no shared move brings near a far point). Empty where no row moves.
fn paired_frames(shapes: &[Shape]) -> Vec<DVec3> {
    frames_where_far(shapes, |shape| {
        match crate::bvh::bounding_ball(std::slice::from_ref(shape)) {
            Some((centre, radius)) if centre.length() > crate::mesh::FAR_RADII * radius => centre,
            _ => DVec3::ZERO,
        }
    })
}

/// `frame` of every shape, or nothing where every frame is zero; a pass over the shapes on
/// every core first, so that the usual job, with none far, holds no frames.
pub(crate) fn frames_where_far(
    shapes: &[Shape],
    frame: impl Fn(&Shape) -> DVec3 + Sync,
) -> Vec<DVec3> {
    use rayon::prelude::*;
    let far = |shape: &Shape| frame(shape) != DVec3::ZERO;
    if !shapes.par_iter().with_min_len(4096).any(far) {
        return Vec::new();
    }
    shapes.par_iter().with_min_len(4096).map(&frame).collect()
}
