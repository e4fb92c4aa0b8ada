//! The chunked, overlapped dispatch loop. Each slot owns one chunk's buffers; with two slots
//! the host fills chunk k+1 and drains chunk k−1 while the device computes chunk k. On
//! unified-memory adapters the storage buffers themselves are mapped (no staging copies).

use std::ops::Range;
use std::sync::{Mutex, mpsc};

use super::context::Context;
use super::interface::Bindings;
use super::layout::SEED_ROUNDS;
use super::layout::{GpuShape, Params};
use super::options::JobTiming;
use super::order::Reorder;
use super::plan::{Plan, ShapeBuffers};
use super::rows::RowSource;
use super::texels::{copy_to_row_texture, point_texel_count, row_texture};

/// Chunks in flight at once (upload of one overlaps compute/readback of the other).
const SLOTS: usize = 2;
use crate::error::{Error, Result};
use crate::fields::{Family, Fields, PackedRows, PackedSink};

/// Texels of a per-row record (`GpuShape`: a paired shape or a segment pair).
const SHAPE_TEXELS: usize = std::mem::size_of::<GpuShape>() / 16;

/// The widest output row of any job: a slot's result buffer holds a chunk of these.
fn max_output_row_bytes() -> usize {
    [Family::Hits, Family::Segments, Family::Bodies]
        .map(|family| Fields::all(family).row_words() * 4)
        .into_iter()
        .max()
        .unwrap_or(0)
}

/// A buffer the host writes: the storage buffer itself on unified memory, else a staging
/// buffer copied into it. Between uses it is mapped, or has a map request pending.
struct Upload {
    storage: wgpu::Buffer,
    staging: Option<wgpu::Buffer>,
    mapped: Option<mpsc::Receiver<std::result::Result<(), wgpu::BufferAsyncError>>>,
}

impl Upload {
    /// `usage` besides what a storage buffer the host writes needs.
    fn new(gpu: &Context, label: &str, size: u64, usage: wgpu::BufferUsages) -> Upload {
        let unified = gpu.unified_memory;
        let mut usage = usage | wgpu::BufferUsages::STORAGE;
        if unified {
            usage |= wgpu::BufferUsages::MAP_WRITE;
        } else {
            usage |= wgpu::BufferUsages::COPY_DST;
        }
        let storage = gpu.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(label),
            size,
            usage,
            mapped_at_creation: unified,
        });
        let staging = (!unified).then(|| {
            gpu.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some(label),
                size,
                usage: wgpu::BufferUsages::MAP_WRITE | wgpu::BufferUsages::COPY_SRC,
                mapped_at_creation: true,
            })
        });
        Upload {
            storage,
            staging,
            mapped: None,
        }
    }

    fn host(&self) -> &wgpu::Buffer {
        self.staging.as_ref().unwrap_or(&self.storage)
    }

    /// Wait until the host buffer is mapped, fill `bytes` of it from `source` (if any) and
    /// unmap: a bound buffer must be unmapped at submission even when the kernel ignores it.
    fn fill(
        &mut self,
        gpu: &Context,
        bytes: u64,
        range: Range<usize>,
        source: Option<&mut (dyn RowSource + '_)>,
    ) -> Result<()> {
        if let Some(rx) = self.mapped.take() {
            wait_map(gpu, rx)?;
        }
        let started = std::time::Instant::now();
        if let Some(source) = source {
            let mut view = self
                .host()
                .get_mapped_range_mut(..bytes)
                .map_err(|e| Error::Gpu(format!("mapping an upload buffer: {e}")))?;
            source.fill(range, view.slice(..))?;
        }
        self.host().unmap();
        crate::sync::lock(&gpu.timing).fill += started.elapsed();
        Ok(())
    }

    /// A request to map the host buffer again once the submission that uses it is done.
    fn remap_after_submit(&mut self) -> MapRequest {
        let (tx, rx) = mpsc::channel();
        self.mapped = Some(rx);
        MapRequest {
            buffer: self.host().clone(),
            mode: wgpu::MapMode::Write,
            bytes: self.host().size(),
            done: tx,
        }
    }
}

fn wait_map(
    gpu: &Context,
    rx: mpsc::Receiver<std::result::Result<(), wgpu::BufferAsyncError>>,
) -> Result<()> {
    let started = std::time::Instant::now();
    let result = wait_map_untimed(gpu, rx);
    crate::sync::lock(&gpu.timing).wait += started.elapsed();
    result
}

fn wait_map_untimed(
    gpu: &Context,
    rx: mpsc::Receiver<std::result::Result<(), wgpu::BufferAsyncError>>,
) -> Result<()> {
    // The submitter thread polls the device, which runs the map callbacks. A device error
    // (validation, loss) may mean a callback never comes: check for one while waiting.
    loop {
        match rx.recv_timeout(std::time::Duration::from_millis(200)) {
            Ok(r) => return r.map_err(|e| Error::Gpu(format!("buffer mapping failed: {e}"))),
            Err(mpsc::RecvTimeoutError::Timeout) => gpu.take_device_error()?,
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                gpu.take_device_error()?;
                return Err(Error::Gpu(
                    "the device stopped before a buffer was mapped".into(),
                ));
            }
        }
    }
}

type MapDone = mpsc::Sender<std::result::Result<(), wgpu::BufferAsyncError>>;
type MapWait = mpsc::Receiver<std::result::Result<(), wgpu::BufferAsyncError>>;

/// A buffer to map once its submission is done.
struct MapRequest {
    buffer: wgpu::Buffer,
    mode: wgpu::MapMode,
    bytes: u64,
    done: MapDone,
}

/// One chunk's work, handed to the submitter thread.
struct Order {
    commands: wgpu::CommandBuffer,
    maps: Vec<MapRequest>,
}

/// Submits orders in turn, then maps their buffers and polls until that is done. It runs on
/// its own thread because software adapters (lavapipe) execute the work inside
/// `queue.submit`: the host can fill and drain other chunks meanwhile.
fn submitter(gpu: &Context, orders: mpsc::Receiver<Order>) {
    let timing = &gpu.timing;
    for order in orders {
        let started = std::time::Instant::now();
        let index = gpu.queue.submit([order.commands]);
        crate::sync::lock(timing).submit += started.elapsed();
        for map in order.maps {
            let done = map.done;
            map.buffer
                .map_async(map.mode, ..map.bytes, move |r| drop(done.send(r)));
        }
        let waited = gpu.device.poll(wgpu::PollType::Wait {
            submission_index: Some(index),
            timeout: None,
        });
        if let Err(e) = waited {
            gpu.device_errors
                .lock()
                .unwrap()
                .push(format!("waiting for the device: {e}"));
            // Dropping the receiver makes the host's waits fail with this error.
            return;
        }
    }
}

/// Timestamps around a chunk's compute pass, read back with its results.
struct DeviceClock {
    queries: wgpu::QuerySet,
    resolved: wgpu::Buffer,
    readback: wgpu::Buffer,
}

impl DeviceClock {
    const BYTES: u64 = 2 * std::mem::size_of::<u64>() as u64;

    fn new(gpu: &Context) -> Option<DeviceClock> {
        gpu.timestamp_period_ns?;
        let buffer = |label, usage| {
            gpu.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some(label),
                size: Self::BYTES,
                usage,
                mapped_at_creation: false,
            })
        };
        Some(DeviceClock {
            queries: gpu.device.create_query_set(&wgpu::QuerySetDescriptor {
                label: Some("pass timestamps"),
                ty: wgpu::QueryType::Timestamp,
                count: 2,
            }),
            resolved: buffer(
                "pass timestamps",
                wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
            ),
            readback: buffer(
                "pass timestamps readback",
                wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            ),
        })
    }

    fn pass_writes(&self) -> wgpu::ComputePassTimestampWrites<'_> {
        wgpu::ComputePassTimestampWrites {
            query_set: &self.queries,
            beginning_of_pass_write_index: Some(0),
            end_of_pass_write_index: Some(1),
        }
    }

    /// Copy the pass's timestamps where the host can map them.
    fn resolve(&self, encoder: &mut wgpu::CommandEncoder) -> (MapRequest, MapWait) {
        encoder.resolve_query_set(&self.queries, 0..2, &self.resolved, 0);
        encoder.copy_buffer_to_buffer(&self.resolved, 0, &self.readback, 0, Self::BYTES);
        let (done, mapped) = mpsc::channel();
        let request = MapRequest {
            buffer: self.readback.clone(),
            mode: wgpu::MapMode::Read,
            bytes: Self::BYTES,
            done,
        };
        (request, mapped)
    }

    /// The pass's duration; the readback is mapped (its map request went with the results').
    fn elapsed(&self, period_ns: f64) -> Result<std::time::Duration> {
        let ticks = {
            let view = self
                .readback
                .get_mapped_range(..)
                .map_err(|e| Error::Gpu(format!("mapping the pass timestamps: {e}")))?;
            let [begin, end]: [u64; 2] = bytemuck::pod_read_unaligned(&view);
            end.saturating_sub(begin)
        };
        self.readback.unmap();
        Ok(std::time::Duration::from_nanos(
            (ticks as f64 * period_ns) as u64,
        ))
    }
}

/// The chunk slots' buffers, kept between jobs: one set of [`SLOTS`] slots for each job
/// running at once, at most `jobs_at_once` sets. With more than one, jobs called from
/// several threads (the service's workers) overlap one job's fill and drain on the host with
/// another's chunks on the device; a CPU adapter keeps one, its device being the host's cores.
pub(crate) struct Slots {
    pool: Mutex<SlotPool>,
    returned: std::sync::Condvar,
}

struct SlotPool {
    /// Sets no job holds, their buffers kept for the next.
    free: Vec<Vec<Slot>>,
    /// Sets jobs hold now.
    lent: usize,
    jobs_at_once: usize,
}

impl Slots {
    pub fn new(jobs_at_once: usize) -> Slots {
        Slots {
            pool: Mutex::new(SlotPool {
                free: Vec::new(),
                lent: 0,
                jobs_at_once: jobs_at_once.max(1),
            }),
            returned: std::sync::Condvar::new(),
        }
    }

    /// Jobs that may run through the slots at once.
    pub fn jobs_at_once(&self) -> usize {
        crate::sync::lock(&self.pool).jobs_at_once
    }

    pub fn set_jobs_at_once(&self, jobs: usize) {
        crate::sync::lock(&self.pool).jobs_at_once = jobs.max(1);
        self.returned.notify_all();
    }

    /// A set of slots for one job (empty when new), waiting while `jobs_at_once` are lent.
    fn lend(&self) -> LentSlots<'_> {
        let mut pool = crate::sync::lock(&self.pool);
        loop {
            if pool.lent < pool.jobs_at_once {
                pool.lent += 1;
                let set = pool.free.pop().unwrap_or_default();
                return LentSlots { owner: self, set };
            }
            pool = self
                .returned
                .wait(pool)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
        }
    }
}

/// A job's set of slots, back to the pool when dropped; a job that panicked holding it may
/// have left a slot mid-flight, so its set is dropped instead.
struct LentSlots<'a> {
    owner: &'a Slots,
    set: Vec<Slot>,
}

impl Drop for LentSlots<'_> {
    fn drop(&mut self) {
        let set = std::mem::take(&mut self.set);
        let mut pool = crate::sync::lock(&self.owner.pool);
        pool.lent -= 1;
        if !std::thread::panicking() && !set.is_empty() {
            pool.free.push(set);
        }
        drop(pool);
        self.owner.returned.notify_one();
    }
}

pub(crate) struct Slot {
    capacity: usize,
    /// Per round of the job's longest pass (`plan::Rounds`).
    params: [wgpu::Buffer; SEED_ROUNDS as usize],
    points: Upload,
    /// The points again as texels, where the walks read them there (`Context::point_texels`).
    point_texels: Option<(wgpu::Texture, wgpu::TextureView)>,
    shapes: Option<Upload>,
    /// Per-row records (paired shapes, segment pairs) again as texels, six a row, where the
    /// kernels read them (`Plan::shape_texels`).
    shape_texels: Option<(wgpu::Texture, wgpu::TextureView)>,
    hits: wgpu::Buffer,
    readback: Option<wgpu::Buffer>,
    in_flight: Option<InFlight>,
    /// Where the device has timestamp queries.
    clock: Option<DeviceClock>,
    /// The in-flight chunk's dispatch order, when its points were reordered.
    reorder: Reorder,
}

struct InFlight {
    range: Range<usize>,
    fields: Fields,
    mapped: MapWait,
    /// The pass timestamps' readback, where the slot has a clock.
    clock_mapped: Option<MapWait>,
}

impl Slot {
    fn new(gpu: &Context, capacity: usize) -> Slot {
        let device = &gpu.device;
        let hit_bytes = (capacity * max_output_row_bytes()) as u64;
        let unified = gpu.unified_memory;
        Slot {
            capacity,
            params: [(); SEED_ROUNDS as usize].map(|_| {
                device.create_buffer(&wgpu::BufferDescriptor {
                    label: Some("params"),
                    size: std::mem::size_of::<Params>() as u64,
                    usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
                    mapped_at_creation: false,
                })
            }),
            // Never empty: grid chunks upload no points but still bind the buffer.
            points: Upload::new(
                gpu,
                "points",
                // Whole texels, for the copy into `point_texels`.
                (16 * point_texel_count(capacity)).max(64) as u64,
                wgpu::BufferUsages::COPY_SRC,
            ),
            point_texels: gpu
                .point_texels
                .then(|| row_texture(gpu, "point texels", point_texel_count(capacity))),
            shape_texels: None,
            shapes: None,
            hits: device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("hits"),
                size: hit_bytes,
                usage: wgpu::BufferUsages::STORAGE
                    | if unified {
                        wgpu::BufferUsages::MAP_READ
                    } else {
                        wgpu::BufferUsages::COPY_SRC
                    },
                mapped_at_creation: false,
            }),
            readback: (!unified).then(|| {
                device.create_buffer(&wgpu::BufferDescriptor {
                    label: Some("hits readback"),
                    size: hit_bytes,
                    usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                    mapped_at_creation: false,
                })
            }),
            in_flight: None,
            clock: DeviceClock::new(gpu),
            reorder: Reorder::default(),
        }
    }

    fn readable(&self) -> &wgpu::Buffer {
        self.readback.as_ref().unwrap_or(&self.hits)
    }

    /// Wait for the chunk in flight, if any, and hand its hits to `sink`.
    fn drain(&mut self, gpu: &Context, sink: &mut dyn PackedSink) -> Result<()> {
        let Some(flight) = self.in_flight.take() else {
            return Ok(());
        };
        wait_map(gpu, flight.mapped)?;
        let started = std::time::Instant::now();
        let row_words = flight.fields.row_words();
        let bytes = (flight.range.len() * row_words * 4) as u64;
        let result = {
            let view = self
                .readable()
                .get_mapped_range(..bytes)
                .map_err(|e| Error::Gpu(format!("mapping the results: {e}")))?;
            let rows = PackedRows::new(
                flight.fields,
                self.reorder.restore(bytemuck::cast_slice(&view), row_words),
            )
            .spread(gpu.drain_spread);
            // The kernel marks a row whose BVH traversal outgrew its stack rather than
            // answer it.
            match rows.overflowed_row() {
                Some(k) => Err(Error::Gpu(format!(
                    "BVH traversal overflowed its stack of {} entries at row {}{}",
                    gpu.kernels.stack_limit,
                    flight.range.start + k,
                    if gpu.kernels.loop_budget != 0 {
                        format!(
                            " (or this adapter's loop limiter cut it short, or a body's walk \
                             reached its budget of {} loop iterations: Mesa 22's lavapipe stops \
                             an invocation's loops after 65,535 passes, Mesa 25's runs them all; \
                             scripts/lavapipe.sh installs it)",
                            gpu.kernels.loop_budget
                        )
                    } else {
                        String::new()
                    }
                ))),
                None => sink.take(flight.range.start, rows),
            }
        };
        self.readable().unmap();
        let device = match (&self.clock, flight.clock_mapped, gpu.timestamp_period_ns) {
            (Some(clock), Some(mapped), Some(period_ns)) => {
                wait_map_untimed(gpu, mapped)?;
                Some(clock.elapsed(period_ns)?)
            }
            _ => None,
        };
        let mut timing = crate::sync::lock(&gpu.timing);
        timing.drain += started.elapsed();
        timing.chunks += 1;
        if let Some(device) = device {
            *timing.device.get_or_insert_default() += device;
            *crate::sync::lock(&gpu.device_total).get_or_insert_default() += device;
        }
        result
    }
}

/// A job's per-row inputs: its points, its shapes (paired rows, segment pairs), or neither
/// (grid samples, made on the device).
#[derive(Default)]
pub(crate) struct Inputs<'a> {
    pub points: Option<&'a mut dyn RowSource>,
    pub shapes: Option<&'a mut dyn RowSource>,
}

impl<'a> Inputs<'a> {
    pub(crate) fn points(points: &'a mut dyn RowSource) -> Self {
        Inputs {
            points: Some(points),
            shapes: None,
        }
    }
}

/// Run a job over `rows` rows in chunks.
pub(crate) fn run(
    gpu: &Context,
    slots: &Slots,
    plan: &Plan<'_>,
    rows: usize,
    inputs: Inputs<'_>,
    sink: &mut dyn PackedSink,
) -> Result<()> {
    if plan.fields.row_words() == 0 {
        return Err(Error::Usage(
            "fields: name at least one output field".into(),
        ));
    }
    if rows == 0 {
        return Ok(());
    }
    gpu.take_device_error()?;
    let started = std::time::Instant::now();
    *crate::sync::lock(&gpu.timing) = JobTiming::default();
    let chunks: Vec<Range<usize>> = match plan.grid {
        Some(grid) => grid.chunks(gpu.chunk_rows, rows),
        None => (0..rows)
            .step_by(gpu.chunk_rows)
            .map(|start| start..(start + gpu.chunk_rows).min(rows))
            .collect(),
    };
    let chunk = chunks.iter().map(Range::len).max().unwrap_or(0);
    // Taken before the slots, so that a job holding them never waits for the turn.
    let _turn = gpu.turn.take();
    let mut lent = slots.lend();
    let slots = &mut lent.set;
    if slots.len() < SLOTS || slots.iter().any(|s| s.capacity < chunk) {
        slots.clear();
        let capacity = gpu.chunk_rows.min(rows.max(chunk));
        for _ in 0..SLOTS {
            slots.push(gpu.checked(|| Slot::new(gpu, capacity))?);
        }
    }
    if plan.streams_shapes() {
        let records = plan.records_per_row();
        let too_small = |slot: &Slot| {
            slot.shapes.as_ref().is_none_or(|upload| {
                upload.storage.size()
                    < (slot.capacity * records * std::mem::size_of::<GpuShape>()) as u64
            })
        };
        for slot in slots.iter_mut().filter(|s| too_small(s)) {
            let size = (slot.capacity * records * std::mem::size_of::<GpuShape>()) as u64;
            slot.shapes = Some(gpu.checked(|| {
                Upload::new(gpu, "paired shapes", size, wgpu::BufferUsages::COPY_SRC)
            })?);
        }
    }
    if plan.shape_texels {
        for slot in slots.iter_mut().filter(|s| s.shape_texels.is_none()) {
            let texels = SHAPE_TEXELS * slot.capacity;
            slot.shape_texels =
                Some(gpu.checked(|| row_texture(gpu, "paired shape texels", texels))?);
        }
    }

    let outcome = run_chunks(gpu, plan, slots, &chunks, inputs, sink);
    crate::sync::lock(&gpu.timing).run = started.elapsed();
    if outcome.is_err() {
        // Leave no half-finished slot behind for the next job.
        slots.clear();
    }
    outcome
}

fn run_chunks(
    gpu: &Context,
    plan: &Plan<'_>,
    slots: &mut [Slot],
    chunks: &[Range<usize>],
    mut inputs: Inputs<'_>,
    sink: &mut dyn PackedSink,
) -> Result<()> {
    std::thread::scope(|scope| {
        let (orders, queue) = mpsc::channel();
        scope.spawn(move || submitter(gpu, queue));
        for (k, range) in chunks.iter().cloned().enumerate() {
            if crate::interrupt::interrupted() {
                return Err(Error::Interrupted);
            }
            let slot = &mut slots[k % SLOTS];
            slot.drain(gpu, sink)?;
            // Filling and waiting for a mapped buffer have their own entries.
            let elsewhere = |t: &JobTiming| t.fill + t.wait;
            let started = std::time::Instant::now();
            let before = elsewhere(&crate::sync::lock(&gpu.timing));
            let order = encode_chunk(gpu, plan, slot, range, &mut inputs)?;
            let mut timing = crate::sync::lock(&gpu.timing);
            let spent = elsewhere(&timing).saturating_sub(before);
            timing.encode += started.elapsed().saturating_sub(spent);
            drop(timing);
            orders
                .send(order)
                .map_err(|_| Error::Gpu("the submitter thread stopped".into()))?;
            // On GL the chunk is done before this thread calls the device again: a call
            // beside a long chunk waits for the context's lock, and wgpu panics after 6 s.
            if gpu.turn.is_needed() {
                slots[k % SLOTS].drain(gpu, sink)?;
            }
        }
        drop(orders);
        // Drain in submission order so the sink sees rows in order.
        let chunks = chunks.len();
        for k in chunks.saturating_sub(SLOTS)..chunks {
            slots[k % SLOTS].drain(gpu, sink)?;
        }
        Ok(())
    })
}

/// Fill a chunk's inputs and record its plan's passes; the submitter thread submits them.
fn encode_chunk(
    gpu: &Context,
    plan: &Plan<'_>,
    slot: &mut Slot,
    range: Range<usize>,
    inputs: &mut Inputs<'_>,
) -> Result<Order> {
    let (fields, mode) = (plan.fields, plan.mode);
    let points = inputs.points.as_deref_mut();
    let shapes = inputs.shapes.as_deref_mut();
    let n = range.len();
    // A dense grid chunk uploads no points: its header goes in `Params`, and it dispatches
    // whole bricks; listed boxes upload their records.
    let (point_bytes, threads, grid_header) = match plan.grid {
        Some(grid) => (
            grid.point_bytes(&range),
            grid.threads(&range),
            grid.header(&range),
        ),
        None => ((n * 12) as u64, n, [0; super::grid::HEADER_WORDS]),
    };
    let shape_bytes = (n * plan.records_per_row() * std::mem::size_of::<GpuShape>()) as u64;
    let hit_bytes = (n * fields.row_words() * 4) as u64;
    // A job without points still binds the buffer, so it is unmapped all the same.
    slot.reorder.clear();
    match points {
        Some(source) if plan.reorders_points => {
            let reorder = &mut slot.reorder;
            let mut sorted = |range: Range<usize>, out: wgpu::WriteOnly<'_, [u8]>| {
                reorder.fill_sorted(source, range, out)
            };
            slot.points
                .fill(gpu, point_bytes, range.clone(), Some(&mut sorted))?;
        }
        points => slot.points.fill(gpu, point_bytes, range.clone(), points)?,
    }
    let row_shapes = match (plan.streams_shapes(), slot.shapes.as_mut(), shapes) {
        // A body job's rows are its bodies: sorted as points are (one record a row).
        (true, Some(upload), Some(source))
            if plan.reorders_points && plan.records_per_row() == 1 =>
        {
            let reorder = &mut slot.reorder;
            let mut sorted = |range: Range<usize>, out: wgpu::WriteOnly<'_, [u8]>| {
                reorder.fill_sorted_records(source, range, out)
            };
            upload.fill(gpu, shape_bytes, range.clone(), Some(&mut sorted))?;
            Some(&*upload)
        }
        (true, Some(upload), Some(source)) => {
            upload.fill(gpu, shape_bytes, range.clone(), Some(source))?;
            Some(&*upload)
        }
        (true, Some(upload), None) => Some(&*upload),
        _ => None,
    };
    let (shape_buffer, kind_ranges, texels, shape_data, shape_count) = match &plan.shapes {
        ShapeBuffers::Resident {
            records,
            kind_ranges,
            texels,
            data,
            count,
        } => (*records, *kind_ranges, *texels, *data, *count),
        ShapeBuffers::BodiesAgainst {
            kind_ranges,
            texels,
            count,
            data,
        } => (
            &row_shapes
                .expect("slots of body jobs have shape buffers")
                .storage,
            *kind_ranges,
            *texels,
            data.unwrap_or(&gpu.unused_shape_data),
            *count,
        ),
        ShapeBuffers::PerRow { data, .. } => (
            &row_shapes
                .expect("slots of per-row jobs have shape buffers")
                .storage,
            &gpu.unused_ranges,
            match (&slot.shape_texels, plan.shape_texels) {
                (Some((_, view)), true) => view,
                _ => &gpu.unused_texels,
            },
            data.unwrap_or(&gpu.unused_shape_data),
            n as u32,
        ),
    };
    // Shapes kept on the device go after the widest rows that leave the shape out.
    let kept_shapes = if plan.keeps_shapes && !fields.contains(crate::fields::SHAPE) {
        let at = slot.capacity * (max_output_row_bytes() / 4 - 1);
        debug_assert!(n * fields.row_words() <= at);
        at as u32
    } else {
        0
    };
    let round_count = plan.round_count();
    let bind_groups: Vec<wgpu::BindGroup> = (0..round_count)
        .map(|round| {
            let params = Params {
                round: round as u32,
                round_count: round_count as u32,
                kept_shapes,
                grid: grid_header,
                ..Params::new(threads as u32, shape_count, mode, range.start as u32)
            };
            gpu.queue
                .write_buffer(&slot.params[round], 0, bytemuck::bytes_of(&params));
            Bindings {
                params: &slot.params[round],
                shapes: shape_buffer,
                points: &slot.points.storage,
                hits: &slot.hits,
                kind_ranges,
                sign_data: plan.sign_data.unwrap_or(&gpu.unused_sign_data),
                shape_data,
                texels,
                point_texels: slot
                    .point_texels
                    .as_ref()
                    .map_or(&gpu.unused_texels, |(_, view)| view),
            }
            .bind_group(&gpu.device, &gpu.kernels.layout)
        })
        .collect();
    let mut encoder = gpu
        .device
        .create_command_encoder(&wgpu::CommandEncoderDescriptor {
            label: Some("chunk"),
        });
    for (upload, bytes) in [(Some(&slot.points), point_bytes), (row_shapes, shape_bytes)] {
        if let Some(Upload {
            storage,
            staging: Some(staging),
            ..
        }) = upload
        {
            encoder.copy_buffer_to_buffer(staging, 0, storage, 0, bytes);
        }
    }
    if let Some((texture, _)) = &slot.point_texels
        && point_bytes > 0
        && plan.grid.is_none()
    {
        copy_to_row_texture(
            &mut encoder,
            &slot.points.storage,
            texture,
            point_texel_count(n),
        );
    }
    if let (Some((texture, _)), Some(upload), true) =
        (&slot.shape_texels, row_shapes, plan.shape_texels)
    {
        copy_to_row_texture(&mut encoder, &upload.storage, texture, SHAPE_TEXELS * n);
    }
    {
        let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
            label: Some("query"),
            timestamp_writes: slot.clock.as_ref().map(DeviceClock::pass_writes),
        });
        for planned in &plan.passes {
            pass.set_pipeline(&planned.pipeline);
            for (bind_group, threads) in bind_groups.iter().zip(planned.rounds.rows(threads)) {
                if threads == 0 {
                    continue;
                }
                pass.set_bind_group(0, bind_group, &[]);
                let [x, y] = dispatch_grid(threads, gpu.kernels.workgroup_size);
                pass.dispatch_workgroups(x, y, 1);
            }
        }
    }
    if let Some(readback) = &slot.readback
        && hit_bytes > 0
    {
        encoder.copy_buffer_to_buffer(&slot.hits, 0, readback, 0, hit_bytes);
    }
    let (done, mapped) = mpsc::channel();
    let mut maps = vec![MapRequest {
        buffer: slot.readable().clone(),
        mode: wgpu::MapMode::Read,
        bytes: hit_bytes,
        done,
    }];
    let clock_mapped = slot.clock.as_ref().map(|clock| {
        let (request, mapped) = clock.resolve(&mut encoder);
        maps.push(request);
        mapped
    });
    maps.push(slot.points.remap_after_submit());
    if plan.streams_shapes() {
        if let Some(upload) = slot.shapes.as_mut() {
            maps.push(upload.remap_after_submit());
        }
    }
    slot.in_flight = Some(InFlight {
        range,
        fields,
        mapped,
        clock_mapped,
    });
    Ok(Order {
        commands: encoder.finish(),
        maps,
    })
}

/// Workgroups for `rows` rows: one row of up to 65 535 groups, then more rows of groups
/// (the kernel's `row_of` flattens them back).
pub fn dispatch_grid(rows: usize, workgroup_size: u32) -> [u32; 2] {
    const MAX: usize = 65_535;
    let groups = rows.div_ceil(workgroup_size as usize).max(1);
    if groups <= MAX {
        [groups as u32, 1]
    } else {
        [MAX as u32, groups.div_ceil(MAX) as u32]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};

    fn lent(slots: &Slots) -> usize {
        crate::sync::lock(&slots.pool).lent
    }

    #[test]
    fn a_job_that_panics_gives_its_turn_back() {
        let slots = Slots::new(1);
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _set = slots.lend();
            panic!("a panic mid-job");
        }));
        assert!(caught.is_err());
        assert_eq!(lent(&slots), 0);
        // The one turn is free again (this would wait for ever otherwise).
        let set = slots.lend();
        assert_eq!(lent(&slots), 1);
        drop(set);
        assert_eq!(lent(&slots), 0);
    }

    #[test]
    fn jobs_past_the_limit_wait_their_turn() {
        let slots = Slots::new(2);
        let first = slots.lend();
        let _second = slots.lend();
        let third_ran = AtomicBool::new(false);
        std::thread::scope(|threads| {
            let third = threads.spawn(|| {
                let _set = slots.lend();
                third_ran.store(true, Ordering::SeqCst);
            });
            std::thread::sleep(std::time::Duration::from_millis(100));
            assert!(
                !third_ran.load(Ordering::SeqCst),
                "a third job ran beside two"
            );
            drop(first);
            third.join().unwrap();
        });
        assert!(third_ran.load(Ordering::SeqCst));
        assert_eq!(lent(&slots), 1);
    }
}
