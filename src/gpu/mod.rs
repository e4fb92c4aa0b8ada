//! The GPU engine: adapter choice, one device, pipelines built once, and a streaming loop
//! that splits any number of rows into chunks sized from the device limits, overlapping the
//! upload of one chunk with the compute and readback of the others.

pub mod adapter;
pub mod interface;
pub mod layout;
mod order;
mod plan;
pub mod shaders;
mod stream;

pub use adapter::{AdapterSummary, list_adapters};
pub use layout::{GpuHit, GpuSegmentHit, GpuShape, Params};
pub use order::morton_code;
pub use stream::{
    JobTiming, PackedSink, RowSink, RowSource, TRAVERSAL_OVERFLOW, dispatch_grid, hits_into_slice,
    points_from_slice,
};

use std::collections::HashMap;

use std::sync::{Arc, Mutex};
use wgpu::util::DeviceExt;

use crate::Mode;
use crate::bvh::GpuBvhNode;
use crate::error::{Error, Result};
use crate::fields::{Columns, Family, Fields, PackedRows};
use crate::math::DVec3;
use crate::shape::{Shape, ShapeKind};
pub(crate) use interface::{Entry, Override};

/// How to open the engine.
#[derive(Clone, Debug, Default)]
pub struct EngineOptions {
    /// Substring of the adapter name, or a backend (`vulkan`, `gl`, `metal`, `dx12`).
    /// `None` reads `CLOSEST_ADAPTER`, then prefers a hardware GPU over a software one.
    pub adapter: Option<String>,
    /// Rows per chunk; `None` sizes chunks from the device limits. Tests set it small to force
    /// many chunks.
    pub chunk_rows: Option<usize>,
    /// Use staging buffers and copies even on a unified-memory adapter (the path discrete
    /// GPUs take), so tests can exercise it on lavapipe.
    pub force_staging: bool,
    /// Run only the kernels every adapter has: never the subgroup kernels
    /// (`query_subgroup.wgsl`, `mesh_subgroup.wgsl`), so tests and benchmarks can compare them
    /// with `query.wgsl` and `mesh.wgsl` on lavapipe.
    pub portable_kernels: bool,
}

/// Rows per chunk when the limits allow it: big enough to amortise a submission, small enough
/// that a chunk's results are still in cache when the host drains them (measured in
/// docs/PERF.md: 2^18 rows halves the drain time of 2^20 on lavapipe).
const DEFAULT_CHUNK_ROWS: usize = 1 << 18;
/// Chunks in flight at once (upload of one overlaps compute/readback of the other).
const SLOTS: usize = 2;

/// A scene uploaded once; query it many times with [`Engine::query_scene`].
pub struct GpuScene {
    /// Shapes sorted by kind (see `layout::scene_layout`).
    shapes: wgpu::Buffer,
    /// Per kind `[start, end, root node, node count]`, a uniform.
    ranges: wgpu::Buffer,
    /// Every kind's BVH nodes (`bvh::GpuBvhNode`).
    nodes: wgpu::Buffer,
    /// The shapes' variable-size parts (`layout::ShapeData`).
    data: wgpu::Buffer,
    count: u32,
    /// Set when every shape has this kind (a specialised pipeline then runs).
    kind: Option<ShapeKind>,
    /// Bit k set when kind k has shapes in the BVH; 0 (no BVH) runs a pipeline without
    /// traversal code, and kinds absent from it are compiled out of the leaf tests.
    bvh_kinds: u32,
    /// Bit k set when kind k has shapes scanned linearly; the other kinds' loops are compiled
    /// out (software adapters would run an empty loop's body once).
    linear_kinds: u32,
    /// The BVH's boxes are oriented (triangles only): `mesh.wgsl` answers, from packed
    /// triangles and nodes (`layout::packed_triangles`, `bvh::pack_oriented`).
    oriented: bool,
}

impl GpuScene {
    pub fn len(&self) -> usize {
        self.count as usize
    }
    /// Bytes it holds on the device.
    pub fn device_bytes(&self) -> u64 {
        self.shapes.size() + self.ranges.size() + self.nodes.size() + self.data.size()
    }
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }
}

pub(crate) struct Kernels {
    pub layout: wgpu::BindGroupLayout,
    pipeline_layout: wgpu::PipelineLayout,
    /// Shader modules by name (`query`, `segments`), with the overrides each declares; all
    /// share one bind-group layout.
    modules: HashMap<&'static str, (wgpu::ShaderModule, Vec<String>)>,
    /// Pipelines by their specialisation, built on first use.
    pipelines: Mutex<HashMap<PipelineKey, wgpu::ComputePipeline>>,
    pub workgroup_size: u32,
}

/// What a pipeline is specialised for: software adapters run every branch the compiler cannot
/// drop, so code a job never takes is compiled out through pipeline overrides.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct PipelineKey {
    pub entry: Entry,
    /// `ONLY_KIND`: the one kind of every shape, if they share one.
    pub kind: Option<ShapeKind>,
    /// `BVH_KINDS`: the kinds in the scene's hierarchy, a bit each (0: no hierarchy).
    pub bvh_kinds: u32,
    /// `LINEAR_KINDS`: the kinds scanned linearly, a bit each.
    pub linear_kinds: u32,
    /// `FIELDS`: the output fields (`fields::Fields::bits`), which rows hold, packed.
    pub fields: u32,
}

impl Kernels {
    /// The pipeline for `key`, built on first use.
    pub(crate) fn pipeline(
        &self,
        device: &wgpu::Device,
        key: PipelineKey,
    ) -> Result<wgpu::ComputePipeline> {
        let mut cache = self.pipelines.lock().unwrap();
        if let Some(p) = cache.get(&key) {
            return Ok(p.clone());
        }
        let PipelineKey {
            entry,
            kind,
            bvh_kinds,
            linear_kinds,
            fields,
        } = key;
        let (module, declared) = &self.modules[entry.shader()];
        // Each override where the kernel declares it.
        let constants: Vec<(&str, f64)> = Override::ALL
            .into_iter()
            .filter(|o| declared.iter().any(|d| d == o.name()))
            .map(|o| {
                let value = match o {
                    Override::Fields => fields,
                    Override::OnlyKind => kind.map_or(shaders::ANY_KIND, |k| k as u32),
                    Override::BvhKinds => bvh_kinds,
                    Override::LinearKinds => linear_kinds,
                };
                (o.name(), f64::from(value))
            })
            .collect();
        let pipeline = in_error_scope(device, || {
            device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: Some(entry.name()),
                layout: Some(&self.pipeline_layout),
                module,
                entry_point: Some(entry.name()),
                compilation_options: wgpu::PipelineCompilationOptions {
                    constants: &constants,
                    ..Default::default()
                },
                cache: None,
            })
        })?;
        cache.insert(key, pipeline.clone());
        Ok(pipeline)
    }
}

/// The one kind all `shapes` share, if they share one.
pub(crate) fn common_kind(mut kinds: impl Iterator<Item = ShapeKind>) -> Option<ShapeKind> {
    let first = kinds.next()?;
    kinds.all(|k| k == first).then_some(first)
}

pub struct Engine {
    pub(crate) device: wgpu::Device,
    pub(crate) queue: wgpu::Queue,
    info: wgpu::AdapterInfo,
    pub(crate) limits: wgpu::Limits,
    /// Host-visible storage buffers are used directly (no staging copies).
    pub(crate) unified_memory: bool,
    /// Scenes run `query_subgroup.wgsl`, triangle scenes `mesh_subgroup.wgsl`.
    pub(crate) subgroup_kernels: bool,
    pub(crate) kernels: Kernels,
    pub(crate) chunk_rows: usize,
    /// Buffers of the chunk slots, kept between jobs.
    pub(crate) slots: Mutex<Vec<stream::Slot>>,
    /// Dispatch scene queries in Morton order within each chunk (on by default on CPU
    /// adapters, off on hardware GPUs).
    pub(crate) reorder_queries: std::sync::atomic::AtomicBool,
    /// Where the last job's time went.
    pub(crate) timing: Mutex<JobTiming>,
    /// The `kind_ranges` and `nodes` bindings of jobs that do not read them (`unused_nodes`
    /// also stands in for the winding tree of jobs without one).
    pub(crate) unused_ranges: wgpu::Buffer,
    pub(crate) unused_nodes: wgpu::Buffer,
    /// The `shape_data` binding of jobs whose shapes have no variable-size parts.
    pub(crate) unused_shape_data: wgpu::Buffer,
    /// Errors wgpu reports outside an error scope, and device loss.
    pub(crate) device_errors: Arc<Mutex<Vec<String>>>,
}

impl Engine {
    /// Open the adapter the options (or `CLOSEST_ADAPTER`) name, or the best one available.
    pub fn new(options: &EngineOptions) -> Result<Engine> {
        let (adapter, info) = adapter::choose(options.adapter.as_deref())?;
        let cpu_adapter = info.device_type == wgpu::DeviceType::Cpu;
        let features = adapter.features();
        let unified_memory = !options.force_staging
            && matches!(
                info.device_type,
                wgpu::DeviceType::Cpu | wgpu::DeviceType::IntegratedGpu
            )
            && features.contains(wgpu::Features::MAPPABLE_PRIMARY_BUFFERS);
        let mut required_features = if unified_memory {
            wgpu::Features::MAPPABLE_PRIMARY_BUFFERS
        } else {
            wgpu::Features::empty()
        };
        // The subgroup kernels are written for subgroups of exactly 8 lanes.
        let subgroup_kernels = features.contains(wgpu::Features::SUBGROUP)
            && info.subgroup_min_size == 8
            && info.subgroup_max_size == 8
            && !options.portable_kernels;
        if subgroup_kernels {
            required_features |= wgpu::Features::SUBGROUP;
        }
        let limits = adapter.limits();
        let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
            label: Some("closest"),
            required_features,
            required_limits: limits.clone(),
            experimental_features: wgpu::ExperimentalFeatures::disabled(),
            memory_hints: wgpu::MemoryHints::Performance,
            trace: wgpu::Trace::Off,
        }))
        .map_err(|e| Error::NoAdapter(format!("cannot open {}: {e}", info.name)))?;

        let device_errors = Arc::new(Mutex::new(Vec::new()));
        let sink = device_errors.clone();
        device.on_uncaptured_error(Arc::new(move |e: wgpu::Error| {
            sink.lock().unwrap().push(e.to_string());
        }));
        let sink = device_errors.clone();
        device.set_device_lost_callback(move |reason, message| {
            sink.lock()
                .unwrap()
                .push(format!("device lost ({reason:?}): {message}"));
        });

        let kernels = in_error_scope(&device, || build_kernels(&device, subgroup_kernels))??;
        let row_bytes = std::mem::size_of::<GpuShape>() as u64; // the widest per-row buffer
        let by_binding = limits.max_storage_buffer_binding_size / row_bytes;
        let by_buffer = limits.max_buffer_size / row_bytes;
        let by_dispatch = 65_535u64 * 65_535 * kernels.workgroup_size as u64;
        let limit = by_binding.min(by_buffer).min(by_dispatch).max(1) as usize;
        let chunk_rows = options
            .chunk_rows
            .unwrap_or(DEFAULT_CHUNK_ROWS)
            .clamp(1, limit);

        let unused_ranges = device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
            label: Some("unused kind ranges"),
            contents: bytemuck::cast_slice(&vec![[0u32; 4]; ShapeKind::ALL.len() + 1]),
            usage: wgpu::BufferUsages::UNIFORM,
        });
        let unused_nodes = device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
            label: Some("unused bvh nodes"),
            contents: bytemuck::bytes_of(&GpuBvhNode::default()),
            usage: wgpu::BufferUsages::STORAGE,
        });
        let unused_shape_data = device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
            label: Some("unused shape data"),
            contents: &layout::ShapeData::default().into_bytes(),
            usage: wgpu::BufferUsages::STORAGE,
        });
        Ok(Engine {
            subgroup_kernels,
            device,
            queue,
            info,
            limits,
            unified_memory,
            kernels,
            chunk_rows,
            slots: Mutex::new(Vec::new()),
            // The host's Morton sort pays where the device is the CPU (coherent lanes, and
            // the subgroup walks need them) and costs more than it saves on a hardware GPU,
            // whose queries outrun it (docs/PERF.md: H100).
            reorder_queries: std::sync::atomic::AtomicBool::new(cpu_adapter),
            timing: Mutex::new(JobTiming::default()),
            unused_ranges,
            unused_nodes,
            unused_shape_data,
            device_errors,
        })
    }

    pub fn adapter_info(&self) -> &wgpu::AdapterInfo {
        &self.info
    }
    pub fn limits(&self) -> &wgpu::Limits {
        &self.limits
    }
    /// Rows per chunk in use.
    pub fn chunk_rows(&self) -> usize {
        self.chunk_rows
    }
    /// Whether scene queries through a BVH are dispatched in Morton order within each chunk
    /// (results always come back in row order): by default on CPU adapters (lavapipe), where
    /// it makes the lanes coherent, and not on hardware GPUs, where the host's sort costs more
    /// than the device saves (docs/PERF.md).
    pub fn reorders_queries(&self) -> bool {
        self.reorder_queries
            .load(std::sync::atomic::Ordering::Relaxed)
    }
    /// Override [`Engine::reorders_queries`], to measure its effect.
    pub fn set_reorder_queries(&self, on: bool) {
        self.reorder_queries
            .store(on, std::sync::atomic::Ordering::Relaxed);
    }

    /// Whether inputs and outputs are written and read in place (no staging copies).
    pub fn unified_memory(&self) -> bool {
        self.unified_memory
    }
    /// Whether scene queries run the subgroup kernels, `query_subgroup.wgsl` and (triangle
    /// scenes, meshes) `mesh_subgroup.wgsl`: adapters with subgroups of exactly 8 lanes, such
    /// as lavapipe, unless [`EngineOptions::portable_kernels`].
    pub fn subgroup_kernels(&self) -> bool {
        self.subgroup_kernels
    }
    /// The scene and mesh kernels in use, for summaries and benchmark headers.
    pub fn scene_kernels(&self) -> &'static str {
        if self.subgroup_kernels {
            "query_subgroup.wgsl, mesh_subgroup.wgsl"
        } else {
            "query.wgsl, mesh.wgsl"
        }
    }
    /// Where the last job's time went (host fill, waiting on the device, host drain).
    pub fn last_timing(&self) -> JobTiming {
        *self.timing.lock().unwrap()
    }

    /// One line naming the adapter, for summaries.
    pub fn describe(&self) -> String {
        format!(
            "{} ({:?}, {:?})",
            self.info.name, self.info.backend, self.info.device_type
        )
    }

    /// Upload a scene once; it stays on the device for any number of queries.
    pub fn upload_scene(&self, shapes: &[Shape]) -> Result<GpuScene> {
        self.upload_scene_with(shapes, true, |_| Ok(()))
    }

    /// [`Engine::upload_scene`], asking `admit` first with the device bytes the scene will
    /// take, before any is allocated (a service's memory budget); its refusal is returned.
    pub fn upload_scene_admitted<E: From<Error>>(
        &self,
        shapes: &[Shape],
        admit: impl FnOnce(u64) -> std::result::Result<(), E>,
    ) -> std::result::Result<GpuScene, E> {
        self.upload_scene_with(shapes, true, admit)
    }

    /// [`Engine::upload_scene`] without hierarchies: every query scans every shape. For
    /// comparisons with the BVH path; slower beyond a handful of shapes.
    pub fn upload_scene_brute_force(&self, shapes: &[Shape]) -> Result<GpuScene> {
        self.upload_scene_with(shapes, false, |_| Ok(()))
    }

    fn upload_scene_with<E: From<Error>>(
        &self,
        shapes: &[Shape],
        use_bvh: bool,
        admit: impl FnOnce(u64) -> std::result::Result<(), E>,
    ) -> std::result::Result<GpuScene, E> {
        let scene_layout = layout::scene_layout(shapes, use_bvh);
        let bvh_kinds = scene_layout.bvh_kinds();
        let linear_kinds = scene_layout.linear_kinds();
        let oriented = scene_layout.oriented;
        // mesh.wgsl packs node and leaf indices beside a leaf count.
        let max_triangles = 1usize << (32 - crate::bvh::LEAF_COUNT_BITS);
        if oriented && shapes.len() >= max_triangles {
            return Err(Error::Usage(format!(
                "a triangle scene holds at most {} triangles ({} given)",
                max_triangles - 1,
                shapes.len()
            ))
            .into());
        }
        let layout::SceneBindings {
            records,
            ranges,
            nodes,
            data,
        } = scene_layout.into_bindings();
        let bytes = records.len() as u64;
        let max = self.limits.max_storage_buffer_binding_size;
        if bytes > max {
            return Err(Error::Usage(format!(
                "the scene has {} shapes ({bytes} bytes), more than one storage binding holds on \
                 this adapter ({max} bytes)",
                shapes.len(),
            ))
            .into());
        }
        self.check_shape_data(data.len())?;
        let ranges_bytes = std::mem::size_of_val(ranges.as_slice()) as u64;
        admit(bytes + ranges_bytes + nodes.len() as u64 + data.len() as u64)?;
        let storage = |label, contents: &[u8]| self.storage_buffer(label, contents);
        let (shapes_buffer, ranges, nodes, data) = self.checked(|| {
            (
                storage("scene shapes", &records),
                self.device
                    .create_buffer_init(&wgpu::util::BufferInitDescriptor {
                        label: Some("scene kind ranges"),
                        contents: bytemuck::cast_slice(&ranges),
                        usage: wgpu::BufferUsages::UNIFORM,
                    }),
                storage("scene bvh nodes", &nodes),
                storage("scene shape data", &data),
            )
        })?;
        Ok(GpuScene {
            shapes: shapes_buffer,
            ranges,
            nodes,
            data,
            count: shapes.len() as u32,
            kind: common_kind(shapes.iter().map(Shape::kind)),
            bvh_kinds,
            linear_kinds,
            oriented,
        })
    }

    /// Convex hull faces beyond one binding are refused with the sizes named.
    fn check_shape_data(&self, bytes: usize) -> Result<()> {
        let max = self.limits.max_storage_buffer_binding_size;
        if bytes as u64 > max {
            return Err(Error::Usage(format!(
                "the convex hulls' faces take {bytes} bytes, more than one storage binding holds \
                 on this adapter ({max} bytes)"
            )));
        }
        Ok(())
    }

    /// A read-only storage buffer holding `contents` (call inside [`Engine::checked`]).
    pub(crate) fn storage_buffer(&self, label: &str, contents: &[u8]) -> wgpu::Buffer {
        self.device
            .create_buffer_init(&wgpu::util::BufferInitDescriptor {
                label: Some(label),
                contents,
                usage: wgpu::BufferUsages::STORAGE,
            })
    }

    /// Nearest shape of `scene` for every point (SPEC §2).
    pub fn query_scene(
        &self,
        scene: &GpuScene,
        points: &[[f32; 3]],
        mode: Mode,
    ) -> Result<Vec<GpuHit>> {
        let mut out = vec![GpuHit::default(); points.len()];
        self.query_scene_stream(
            scene,
            points.len(),
            &mut stream::points_from_slice(points),
            mode,
            &mut stream::hits_into_slice(&mut out),
        )?;
        Ok(out)
    }

    /// Streaming form of [`Engine::query_scene`]: `source` fills each chunk's points and `sink`
    /// receives each chunk's hits, in row order.
    pub fn query_scene_stream(
        &self,
        scene: &GpuScene,
        rows: usize,
        source: &mut dyn RowSource,
        mode: Mode,
        sink: &mut dyn RowSink,
    ) -> Result<()> {
        let all = Fields::all(Family::Hits);
        self.query_scene_fields_stream(scene, rows, source, mode, all, &mut stream::HitRows(sink))
    }

    /// [`Engine::query_scene_stream`] computing and moving back only `fields`: `sink`
    /// receives each chunk's rows packed as the device wrote them.
    pub fn query_scene_fields_stream(
        &self,
        scene: &GpuScene,
        rows: usize,
        source: &mut dyn RowSource,
        mode: Mode,
        fields: Fields,
        sink: &mut dyn PackedSink,
    ) -> Result<()> {
        self.query_scene_signed_stream(scene, None, rows, source, mode, fields, sink)
    }

    /// Nearest shape of `scene` for every point, only `fields` computed and returned.
    pub fn query_scene_fields(
        &self,
        scene: &GpuScene,
        points: &[[f32; 3]],
        mode: Mode,
        fields: Fields,
    ) -> Result<Columns> {
        Columns::collect(fields, points.len(), |sink| {
            let mut source = stream::points_from_slice(points);
            self.query_scene_fields_stream(scene, points.len(), &mut source, mode, fields, sink)
        })
    }

    /// [`Engine::query_scene_fields_stream`] for a mesh's scene, its answers signed on the
    /// device by `winding` (`WindingTree::gpu_words`) when given.
    #[expect(
        clippy::too_many_arguments,
        reason = "one job's inputs, passed through"
    )]
    pub(crate) fn query_scene_signed_stream(
        &self,
        scene: &GpuScene,
        winding: Option<&wgpu::Buffer>,
        rows: usize,
        source: &mut dyn RowSource,
        mode: Mode,
        fields: Fields,
        sink: &mut dyn PackedSink,
    ) -> Result<()> {
        stream::run(
            self,
            &plan::Job::Nearest { scene, winding }.plan(self, fields)?,
            rows,
            Some(source),
            None,
            mode,
            fields,
            sink,
        )
    }

    /// Streaming form of [`Engine::query_paired`]: one row per shape.
    pub fn query_paired_stream(
        &self,
        shapes: &[Shape],
        points: &mut dyn RowSource,
        mode: Mode,
        sink: &mut dyn RowSink,
    ) -> Result<()> {
        let all = Fields::all(Family::Hits);
        self.query_paired_fields_stream(shapes, points, mode, all, &mut stream::HitRows(sink))
    }

    /// [`Engine::query_paired_stream`] computing and moving back only `fields`.
    pub fn query_paired_fields_stream(
        &self,
        shapes: &[Shape],
        points: &mut dyn RowSource,
        mode: Mode,
        fields: Fields,
        sink: &mut dyn PackedSink,
    ) -> Result<()> {
        let (data, data_starts) = layout::ShapeData::for_paired(shapes);
        let data = if data_starts.is_empty() {
            None
        } else {
            let bytes = data.into_bytes();
            self.check_shape_data(bytes.len())?;
            Some(self.checked(|| self.storage_buffer("paired shape data", &bytes))?)
        };
        let mut shape_source = stream::shapes_from_slice(shapes, &data_starts);
        let kind = common_kind(shapes.iter().map(Shape::kind));
        stream::run(
            self,
            &plan::Job::Paired {
                kind,
                data: data.as_ref(),
            }
            .plan(self, fields)?,
            shapes.len(),
            Some(points),
            Some(&mut shape_source),
            mode,
            fields,
            sink,
        )
    }

    /// Point i against shape i, only `fields` computed and returned.
    pub fn query_paired_fields(
        &self,
        shapes: &[Shape],
        points: &[[f32; 3]],
        mode: Mode,
        fields: Fields,
    ) -> Result<Columns> {
        check_paired_counts(shapes.len(), points.len())?;
        Columns::collect(fields, points.len(), |sink| {
            let mut source = stream::points_from_slice(points);
            self.query_paired_fields_stream(shapes, &mut source, mode, fields, sink)
        })
    }

    /// Closest points between segment `a[i]` and segment `b[i]` for every i (SPEC §2).
    pub fn segment_pairs(&self, a: &[[DVec3; 2]], b: &[[DVec3; 2]]) -> Result<Vec<GpuSegmentHit>> {
        check_segment_counts(a.len(), b.len())?;
        let mut out = vec![GpuSegmentHit::default(); a.len()];
        self.segment_pairs_stream(
            a.len(),
            &mut stream::segment_pairs_from_slices(a, b),
            &mut |first: usize, rows: &[GpuSegmentHit]| {
                out[first..first + rows.len()].copy_from_slice(rows);
                Ok(())
            },
        )?;
        Ok(out)
    }

    /// Streaming form of [`Engine::segment_pairs`]: `pairs` writes each chunk's records
    /// (`GpuShape::from_segment_pair`) and `sink` receives each chunk's results in row order.
    pub fn segment_pairs_stream(
        &self,
        rows: usize,
        pairs: &mut dyn RowSource,
        sink: &mut dyn FnMut(usize, &[GpuSegmentHit]) -> Result<()>,
    ) -> Result<()> {
        self.segment_pairs_fields_stream(
            rows,
            pairs,
            Fields::all(Family::Segments),
            &mut |first: usize, rows: PackedRows<'_>| {
                sink(first, rows.as_segment_hits().expect("every segment field"))
            },
        )
    }

    /// [`Engine::segment_pairs_stream`] computing and moving back only `fields`.
    pub fn segment_pairs_fields_stream(
        &self,
        rows: usize,
        pairs: &mut dyn RowSource,
        fields: Fields,
        sink: &mut dyn PackedSink,
    ) -> Result<()> {
        stream::run(
            self,
            &plan::Job::SegmentPairs.plan(self, fields)?,
            rows,
            None,
            Some(pairs),
            Mode::Solid,
            fields,
            sink,
        )
    }

    /// [`Engine::segment_pairs`], only `fields` computed and returned.
    pub fn segment_pairs_fields(
        &self,
        a: &[[DVec3; 2]],
        b: &[[DVec3; 2]],
        fields: Fields,
    ) -> Result<Columns> {
        check_segment_counts(a.len(), b.len())?;
        Columns::collect(fields, a.len(), |sink| {
            let mut pairs = stream::segment_pairs_from_slices(a, b);
            self.segment_pairs_fields_stream(a.len(), &mut pairs, fields, sink)
        })
    }

    /// Point i against shape i (SPEC §2 "paired").
    pub fn query_paired(
        &self,
        shapes: &[Shape],
        points: &[[f32; 3]],
        mode: Mode,
    ) -> Result<Vec<GpuHit>> {
        check_paired_counts(shapes.len(), points.len())?;
        let mut out = vec![GpuHit::default(); points.len()];
        self.query_paired_stream(
            shapes,
            &mut stream::points_from_slice(points),
            mode,
            &mut stream::hits_into_slice(&mut out),
        )?;
        Ok(out)
    }

    /// Run `f` inside validation and out-of-memory error scopes, turning what they catch into
    /// [`Error::Gpu`].
    pub(crate) fn checked<T>(&self, f: impl FnOnce() -> T) -> Result<T> {
        in_error_scope(&self.device, f)
    }

    /// Errors reported outside a scope since the last call (device loss included).
    pub(crate) fn take_device_error(&self) -> Result<()> {
        let mut errors = self.device_errors.lock().unwrap();
        if errors.is_empty() {
            Ok(())
        } else {
            Err(Error::Gpu(errors.drain(..).collect::<Vec<_>>().join("; ")))
        }
    }
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

/// Run `f` inside validation and out-of-memory error scopes.
fn in_error_scope<T>(device: &wgpu::Device, f: impl FnOnce() -> T) -> Result<T> {
    let oom = device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
    let validation = device.push_error_scope(wgpu::ErrorFilter::Validation);
    let value = f();
    let v = pollster::block_on(validation.pop());
    let o = pollster::block_on(oom.pop());
    match (v, o) {
        (None, None) => Ok(value),
        (Some(e), _) | (None, Some(e)) => Err(Error::Gpu(e.to_string())),
    }
}

fn build_kernels(device: &wgpu::Device, subgroups: bool) -> Result<Kernels> {
    // Every entry point shares one workgroup size (the dispatch grid is computed once).
    let mut modules = HashMap::new();
    let mut workgroup_size = None;
    for (name, entries) in interface::kernel_shaders() {
        if !subgroups && entries.iter().any(|e| e.needs_subgroups()) {
            continue;
        }
        let shader = shaders::compose(name).map_err(Error::Gpu)?;
        let reflected = interface::reflect(&shader);
        for entry in entries {
            let [size, _, _] = shader.workgroup_size(entry.name()).ok_or_else(|| {
                Error::Gpu(format!("{name}.wgsl has no `{}` entry point", entry.name()))
            })?;
            if *workgroup_size.get_or_insert(size) != size {
                return Err(Error::Gpu(format!(
                    "{name}.wgsl: `{}` has another workgroup size",
                    entry.name()
                )));
            }
        }
        let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some(name),
            source: wgpu::ShaderSource::Wgsl(shader.source.as_str().into()),
        });
        modules.insert(name, (module, reflected.overrides));
    }
    let workgroup_size = workgroup_size.expect("at least one kernel");
    let layout = interface::bind_group_layout(device);
    let pipeline_layout = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
        label: Some("kernels"),
        bind_group_layouts: &[Some(&layout)],
        immediate_size: 0,
    });
    Ok(Kernels {
        layout,
        pipeline_layout,
        modules,
        pipelines: Mutex::new(HashMap::new()),
        workgroup_size,
    })
}
