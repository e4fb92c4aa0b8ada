//! The device and what every job shares on it: the adapter opened with its limits, the
//! kernels (one shader module each, pipelines specialised on first use), the stand-in
//! buffers of unused bindings, error scopes and the errors wgpu reports outside them.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use wgpu::util::DeviceExt;

use super::interface::{self, Entry, Override};
use super::layout::{self, GpuShape};
use super::{adapter, shaders};
use crate::error::{Error, Result};
use crate::shape::ShapeKind;

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
    /// Treat storage bindings as holding at most this many bytes (below the adapter's limit),
    /// so that tests split small meshes over several bindings as large ones are.
    pub max_binding_bytes: Option<u64>,
    /// Treat this many bytes as the memory available to a mesh's build and device copy (the
    /// host's available memory otherwise, where the system tells it), so that tests see a
    /// mesh refused as one too large for the machine is.
    pub memory_bytes: Option<u64>,
    /// How meshes' triangles are stored on the device.
    pub mesh_records: MeshRecords,
    /// Read query points (and paired jobs' shapes) from their storage buffers, as on adapters
    /// whose textures are narrower than a texel row, instead of from texels
    /// (`shared/point_texels.wgsl`), so tests and benchmarks can compare both paths.
    pub storage_points: bool,
    /// Hold the walks' stacks to this many entries (fewer than `bvh::STACK_SIZE`), so that
    /// tests see a traversal that outgrows its stack reported, as a hierarchy too deep for
    /// the kernels' stacks would be.
    pub walk_stack_entries: Option<usize>,
    /// Answer every scene query by the BVH walk: resident scenes get no cell lists
    /// (`gpu::cells`), so tests and benchmarks can compare both paths.
    pub walk_only: bool,
    /// Ask every part of a mesh in parts for every row, none passed over for its box
    /// (`Engine::query_mesh_parts_stream`), so tests and benchmarks can compare both paths.
    pub every_part: bool,
}

/// How a mesh's triangles are stored on the device (its hierarchy is the same either way).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MeshRecords {
    /// On adapters whose device memory is the host's (CPU and integrated), indexed for meshes
    /// of [`MeshRecords::AUTO_INDEXED_TRIANGLES`] or more: every device byte is a host byte
    /// there, and indexed records keep a 2M-triangle job under 3× its STL file's size with
    /// signs (docs/perf-history.md). Otherwise packed (up to ~1.2× faster queries), unless the packed
    /// copy would not fit the memory there is and the indexed one would.
    #[default]
    Auto,
    /// Each triangle's corner and edges in f32 beside its normal: 56 bytes a triangle, the
    /// fewest loads per triangle test.
    Packed,
    /// Vertex indices and normal per triangle, the vertices shared: about 38 bytes a
    /// triangle on a closed mesh, a dependent load more per triangle test.
    Indexed,
}

impl MeshRecords {
    /// The fewest triangles `Auto` stores indexed on a CPU or integrated adapter whatever the
    /// memory (2^20).
    pub const AUTO_INDEXED_TRIANGLES: usize = 1 << 20;

    /// A record format by name (`auto`, `packed`, `indexed`), as the Python package takes it;
    /// anything else is a usage error listing the names.
    pub fn parse(name: &str) -> Result<MeshRecords> {
        match name {
            "auto" => Ok(MeshRecords::Auto),
            "packed" => Ok(MeshRecords::Packed),
            "indexed" => Ok(MeshRecords::Indexed),
            other => Err(Error::Usage(format!(
                "mesh_records: unknown format `{other}`; the valid ones are auto, packed, indexed"
            ))),
        }
    }
}

/// Where a job's host time went; the device computes while the host fills and drains.
#[derive(Clone, Copy, Debug, Default)]
pub struct JobTiming {
    /// Writing inputs into mapped buffers.
    pub fill: std::time::Duration,
    /// Blocked on the device (compute, and copies on non-unified adapters).
    pub wait: std::time::Duration,
    /// Handing mapped results to the sink.
    pub drain: std::time::Duration,
    /// Inside `queue.submit` (software adapters may execute the work right there).
    pub submit: std::time::Duration,
    pub chunks: usize,
}

/// Rows per chunk when the limits allow it: big enough to amortise a submission, small enough
/// that a chunk's results are still in cache when the host drains them (measured in
/// docs/perf-history.md: 2^18 rows halves the drain time of 2^20 on lavapipe).
const DEFAULT_CHUNK_ROWS: usize = 1 << 18;

/// Storage buffers larger than this are uploaded piece by piece (`Context::storage_buffer_words`).
const UPLOAD_PIECE_BYTES: usize = 4 << 20;

pub(crate) struct Kernels {
    pub layout: wgpu::BindGroupLayout,
    pipeline_layout: wgpu::PipelineLayout,
    /// Shader modules by name (`query`, `segments`), with the overrides each declares; all
    /// share one bind-group layout.
    modules: HashMap<&'static str, (wgpu::ShaderModule, Vec<String>)>,
    /// Pipelines by their specialisation, built on first use.
    pipelines: Mutex<HashMap<PipelineKey, wgpu::ComputePipeline>>,
    pub workgroup_size: u32,
    /// `POINT_TEXELS`: the walks read points from texels (`Context::point_texels`).
    point_texels: bool,
    /// `STACK_LIMIT`: the entries a walk's stack may hold (`EngineOptions::walk_stack_entries`).
    pub stack_limit: u32,
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
    /// `TRIANGLE_RECORDS`: a triangle scene's records are indexed.
    pub indexed_triangles: bool,
    /// `PSEUDONORMAL_SIGNS`: a mesh's rows are signed by pseudonormal as they are answered.
    pub pseudonormal_signs: bool,
    /// `GRID_SAMPLES`: rows are the samples of an SDF grid, computed on the device.
    pub grid_samples: bool,
    /// `ONE_SHAPE`: the scene is one shape of `kind`, without a hierarchy.
    pub one_shape: bool,
    /// `FINE_WINDING`: `winding_numbers` at the fine accuracy.
    pub fine_winding: bool,
}

impl Kernels {
    /// The pipeline for `key`, built on first use.
    pub(crate) fn pipeline(
        &self,
        device: &wgpu::Device,
        key: PipelineKey,
    ) -> Result<wgpu::ComputePipeline> {
        let mut cache = crate::sync::lock(&self.pipelines);
        if let Some(p) = cache.get(&key) {
            return Ok(p.clone());
        }
        let PipelineKey {
            entry,
            kind,
            bvh_kinds,
            linear_kinds,
            fields,
            indexed_triangles,
            pseudonormal_signs,
            grid_samples,
            one_shape,
            fine_winding,
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
                    Override::TriangleRecords => u32::from(indexed_triangles),
                    Override::PseudonormalSigns => u32::from(pseudonormal_signs),
                    Override::GridSamples => u32::from(grid_samples),
                    Override::OneShape => u32::from(one_shape),
                    Override::PointTexels => u32::from(self.point_texels),
                    Override::StackLimit => self.stack_limit,
                    Override::FineWinding => u32::from(fine_winding),
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

/// The device and what every job shares on it: kernels and pipelines, the chunk slots, the
/// stand-in buffers of unused bindings and the errors wgpu reports. The engine's jobs
/// (`crate::engine`) run on it through `plan` and `stream`.
pub(crate) struct Context {
    pub(crate) device: wgpu::Device,
    pub(crate) queue: wgpu::Queue,
    pub(crate) info: wgpu::AdapterInfo,
    pub(crate) limits: wgpu::Limits,
    /// Bytes one storage binding may hold: the adapter's limit, or less if the options say so.
    pub(crate) binding_bytes: u64,
    /// `EngineOptions::memory_bytes`.
    pub(crate) memory_bytes: Option<u64>,
    /// `EngineOptions::mesh_records`.
    pub(crate) mesh_records: MeshRecords,
    /// `EngineOptions::walk_only`.
    pub(crate) walk_only: bool,
    /// `EngineOptions::every_part`.
    pub(crate) every_part: bool,
    /// Host-visible storage buffers are used directly (no staging copies).
    pub(crate) unified_memory: bool,
    /// Scenes run `query_subgroup.wgsl`, triangle scenes `mesh_subgroup.wgsl`.
    pub(crate) subgroup_kernels: bool,
    /// Each chunk's points (and paired jobs' shapes) are copied into texels the kernels read
    /// (`Slot::PointTexels`, `Slot::Texels`).
    pub(crate) point_texels: bool,
    pub(crate) kernels: Kernels,
    pub(crate) chunk_rows: usize,
    /// Dispatch scene queries in Morton order within each chunk (on by default on CPU
    /// adapters, off on hardware GPUs).
    pub(crate) reorder_queries: std::sync::atomic::AtomicBool,
    /// SDF grids are sampled on the device where it can (on by default).
    pub(crate) grid_on_device: std::sync::atomic::AtomicBool,
    /// Where the last job's time went.
    pub(crate) timing: Mutex<JobTiming>,
    /// The `kind_ranges`, `texels` and `sign_data` bindings of jobs that do not read them.
    pub(crate) unused_ranges: wgpu::Buffer,
    pub(crate) unused_texels: wgpu::TextureView,
    pub(crate) unused_sign_data: wgpu::Buffer,
    /// The `shape_data` binding of jobs whose shapes have no variable-size parts.
    pub(crate) unused_shape_data: wgpu::Buffer,
    /// Texels a scene's texture holds at most (`Context::texture_texels`, `max_texels`).
    pub(crate) max_texels: u64,
    /// Errors wgpu reports outside an error scope, and device loss.
    pub(crate) device_errors: Arc<Mutex<Vec<String>>>,
    /// Set by the device-lost callback: nothing more can run on this device.
    pub(crate) lost: Arc<std::sync::atomic::AtomicBool>,
}

impl Context {
    /// Open the adapter the options (or `CLOSEST_ADAPTER`) name, or the best one available.
    pub(crate) fn open(options: &EngineOptions) -> Result<Context> {
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
            // Smaller memory blocks: a job's large buffers get allocations of their own either
            // way, and on CPU adapters the rest of a larger block is host memory held for
            // nothing (~4 MiB of a 2M-triangle job's peak, docs/perf-history.md).
            memory_hints: wgpu::MemoryHints::MemoryUsage,
            trace: wgpu::Trace::Off,
        }))
        .map_err(|e| Error::NoAdapter(format!("cannot open {}: {e}", info.name)))?;

        let device_errors = Arc::new(Mutex::new(Vec::new()));
        let sink = device_errors.clone();
        device.on_uncaptured_error(Arc::new(move |e: wgpu::Error| {
            crate::sync::lock(&sink).push(e.to_string());
        }));
        let sink = device_errors.clone();
        let lost = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let lost_flag = lost.clone();
        device.set_device_lost_callback(move |reason, message| {
            lost_flag.store(true, std::sync::atomic::Ordering::SeqCst);
            crate::sync::lock(&sink).push(format!("device lost ({reason:?}): {message}"));
        });

        let max_texels = max_texels(&limits);
        // Points as texels need whole texel rows; a chunk's points must fit the texture.
        let point_texels = !options.storage_points
            && u64::from(limits.max_texture_dimension_2d) >= 1 << layout::TEXEL_ROW_BITS;
        let stack_limit = options
            .walk_stack_entries
            .map_or(crate::bvh::STACK_SIZE, |n| {
                n.clamp(1, crate::bvh::STACK_SIZE)
            }) as u32;
        let kernels = in_error_scope(&device, || {
            build_kernels(&device, subgroup_kernels, point_texels, stack_limit)
        })??;
        let row_bytes = std::mem::size_of::<GpuShape>() as u64; // the widest per-row buffer
        let by_binding = limits.max_storage_buffer_binding_size / row_bytes;
        let by_buffer = limits.max_buffer_size / row_bytes;
        let by_dispatch = 65_535u64 * 65_535 * kernels.workgroup_size as u64;
        let by_texels = if point_texels {
            max_texels * 4 / 3
        } else {
            u64::MAX
        };
        let limit = by_binding
            .min(by_buffer)
            .min(by_dispatch)
            .min(by_texels)
            .max(1) as usize;
        let chunk_rows = options
            .chunk_rows
            .unwrap_or(DEFAULT_CHUNK_ROWS)
            .clamp(1, limit);

        let unused_ranges = device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
            label: Some("unused kind ranges"),
            contents: bytemuck::cast_slice(&vec![[0u32; 4]; ShapeKind::ALL.len() + 1]),
            usage: wgpu::BufferUsages::UNIFORM,
        });
        let unused_sign_data = device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
            label: Some("unused sign data"),
            contents: &[0; 16],
            usage: wgpu::BufferUsages::STORAGE,
        });
        let unused_texels = texels_view(&device.create_texture_with_data(
            &queue,
            &texels_descriptor("unused texels", (1, 1, 1)),
            wgpu::util::TextureDataOrder::LayerMajor,
            &[0; 16],
        ));
        let unused_shape_data = device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
            label: Some("unused shape data"),
            contents: &layout::ShapeData::default().into_bytes(),
            usage: wgpu::BufferUsages::STORAGE,
        });
        let binding_bytes = options
            .max_binding_bytes
            .map_or(limits.max_storage_buffer_binding_size, |max| {
                max.clamp(1024, limits.max_storage_buffer_binding_size)
            });
        Ok(Context {
            binding_bytes,
            memory_bytes: options.memory_bytes,
            mesh_records: options.mesh_records,
            walk_only: options.walk_only,
            every_part: options.every_part,
            subgroup_kernels,
            point_texels,
            device,
            queue,
            info,
            limits,
            unified_memory,
            kernels,
            chunk_rows,
            // The host's Morton sort pays where the device is the CPU (coherent lanes, and
            // the subgroup walks need them) and costs more than it saves on a hardware GPU,
            // whose queries outrun it (docs/perf-history.md: H100).
            reorder_queries: std::sync::atomic::AtomicBool::new(cpu_adapter),
            grid_on_device: std::sync::atomic::AtomicBool::new(true),
            timing: Mutex::new(JobTiming::default()),
            unused_ranges,
            unused_sign_data,
            max_texels,
            unused_shape_data,
            unused_texels,
            device_errors,
            lost,
        })
    }

    /// Whether the device's memory is the host's (CPU and integrated adapters): what a job
    /// keeps on the device then counts against the host's memory too.
    pub(crate) fn device_memory_is_hosts(&self) -> bool {
        matches!(
            self.info.device_type,
            wgpu::DeviceType::Cpu | wgpu::DeviceType::IntegratedGpu
        )
    }

    /// Refuse, before the long work starts, what needs more memory than there is: `device`
    /// bytes that stay on the device and `build` bytes the host holds while building them.
    /// The host's memory is what the system reports available (Linux's `MemAvailable`); a CPU
    /// adapter's device memory is the host's too. wgpu reports no device budget for hardware
    /// GPUs: there an allocation that fails is reported by the error scope around it.
    pub(crate) fn check_memory(&self, what: &str, device: u64, build: u64) -> Result<()> {
        let Some(available) = self.memory_bytes.or_else(host_available_bytes) else {
            return Ok(());
        };
        let shared = self.device_memory_is_hosts();
        let on_host = build + if shared { device } else { 0 };
        if on_host > available {
            let mib = |b: u64| b.div_ceil(1 << 20);
            return Err(Error::OutOfMemory(format!(
                "{what} needs about {} MiB of host memory ({} MiB to build, {} MiB \
                 on the device{}), but {} MiB are available",
                mib(on_host),
                mib(build),
                mib(device),
                if shared {
                    ", which is host memory on this adapter"
                } else {
                    ""
                },
                mib(available)
            )));
        }
        Ok(())
    }

    /// Convex hull faces beyond one binding are refused with the sizes named.
    pub(crate) fn check_shape_data(&self, bytes: usize) -> Result<()> {
        let max = self.binding_bytes;
        if bytes as u64 > max {
            return Err(Error::Usage(format!(
                "the convex hulls' faces take {bytes} bytes, more than one storage binding holds \
                 on this adapter ({max} bytes)"
            )));
        }
        Ok(())
    }

    /// A read-only storage buffer holding `contents` (call inside [`Context::checked`]).
    pub(crate) fn storage_buffer(&self, label: &str, contents: &[u8]) -> wgpu::Buffer {
        self.device
            .create_buffer_init(&wgpu::util::BufferInitDescriptor {
                label: Some(label),
                contents,
                usage: wgpu::BufferUsages::STORAGE,
            })
    }

    /// A read-only storage buffer holding `words`, which it consumes (call inside
    /// [`Context::checked`]). Large contents go up in pieces from the end, each written and
    /// waited for before the host copy is cut short, so that host and device together hold
    /// about one copy plus a piece: on software adapters the device's memory is the host's,
    /// and two whole copies of a large mesh were its peak of memory.
    pub(crate) fn storage_buffer_words(&self, label: &str, mut words: Vec<u32>) -> wgpu::Buffer {
        self.storage_buffer_tail(label, &mut words, 0)
    }

    /// [`Context::storage_buffer_words`] of `words[first..]`, `words` cut back to `first`.
    pub(crate) fn storage_buffer_tail(
        &self,
        label: &str,
        words: &mut Vec<u32>,
        first: usize,
    ) -> wgpu::Buffer {
        const PIECE_WORDS: usize = UPLOAD_PIECE_BYTES / 4;
        let len = words.len() - first;
        if len <= PIECE_WORDS {
            let buffer = self.storage_buffer(label, bytemuck::cast_slice(&words[first..]));
            cut_back(words, first);
            return buffer;
        }
        let buffer = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(label),
            size: 4 * len as u64,
            usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        while words.len() > first {
            let start = (words.len() - first - 1) / PIECE_WORDS * PIECE_WORDS;
            let piece: &[u8] = bytemuck::cast_slice(&words[first + start..]);
            self.queue.write_buffer(&buffer, 4 * start as u64, piece);
            self.wait_for_queue();
            cut_back(words, first + start);
        }
        buffer
    }

    fn wait_for_queue(&self) {
        let index = self.queue.submit([]);
        // A failed wait leaves the device lost, which the error scope around reports.
        let _ = self.device.poll(wgpu::PollType::Wait {
            submission_index: Some(index),
            timeout: None,
        });
    }

    /// The words of `parts`, one after the other, as an Rgba32Uint array texture, four a texel,
    /// in rows of `1 << TEXEL_ROW_BITS` texels and layers of `1 << TEXEL_LAYER_ROW_BITS` rows
    /// (the last padded with zeros; `texel_texture_bytes`). Written a whole layer at a time from
    /// the end, the parts shrinking as the texture fills (as `storage_buffer_words`): a write of
    /// part of a layer would have wgpu clear the whole texture first, touching all of it.
    pub(crate) fn texture_texels(
        &self,
        label: &str,
        mut parts: [Vec<u32>; 2],
    ) -> wgpu::TextureView {
        let first_len = parts[0].len();
        let (width, height, layers) = texel_extent(first_len + parts[1].len());
        let layer_words = 4 * width * height;
        let texture = self
            .device
            .create_texture(&texels_descriptor(label, (width, height, layers)));
        for layer in (0..layers).rev() {
            self.queue.write_texture(
                wgpu::TexelCopyTextureInfo {
                    texture: &texture,
                    mip_level: 0,
                    origin: wgpu::Origin3d {
                        x: 0,
                        y: 0,
                        z: layer as u32,
                    },
                    aspect: wgpu::TextureAspect::All,
                },
                bytemuck::cast_slice(&layer_words_of(&parts, layer_words * layer, layer_words)),
                wgpu::TexelCopyBufferLayout {
                    offset: 0,
                    bytes_per_row: Some(16 * width as u32),
                    rows_per_image: Some(height as u32),
                },
                wgpu::Extent3d {
                    width: width as u32,
                    height: height as u32,
                    depth_or_array_layers: 1,
                },
            );
            self.wait_for_queue();
            let start = layer_words * layer;
            cut_back(&mut parts[1], start.saturating_sub(first_len));
            cut_back(&mut parts[0], start.min(first_len));
        }
        texels_view(&texture)
    }

    /// Run `f` inside validation and out-of-memory error scopes, turning what they catch into
    /// [`Error::Gpu`].
    pub(crate) fn checked<T>(&self, f: impl FnOnce() -> T) -> Result<T> {
        in_error_scope(&self.device, f)
    }

    /// Errors reported outside a scope since the last call (device loss included).
    pub(crate) fn take_device_error(&self) -> Result<()> {
        let mut errors = crate::sync::lock(&self.device_errors);
        if errors.is_empty() {
            Ok(())
        } else {
            Err(Error::Gpu(errors.drain(..).collect::<Vec<_>>().join("; ")))
        }
    }
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

fn build_kernels(
    device: &wgpu::Device,
    subgroups: bool,
    point_texels: bool,
    stack_limit: u32,
) -> Result<Kernels> {
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
        point_texels,
        stack_limit,
    })
}

/// A texels texture (the `texels` binding) of `(width, height, layers)`.
fn texels_descriptor(
    label: &str,
    (width, height, layers): (usize, usize, usize),
) -> wgpu::TextureDescriptor<'_> {
    wgpu::TextureDescriptor {
        label: Some(label),
        size: wgpu::Extent3d {
            width: width as u32,
            height: height as u32,
            depth_or_array_layers: layers as u32,
        },
        mip_level_count: 1,
        sample_count: 1,
        dimension: wgpu::TextureDimension::D2,
        format: wgpu::TextureFormat::Rgba32Uint,
        usage: wgpu::TextureUsages::TEXTURE_BINDING | wgpu::TextureUsages::COPY_DST,
        view_formats: &[],
    }
}

/// The view the kernels bind: every layer, as `texture_2d_array<u32>`.
fn texels_view(texture: &wgpu::Texture) -> wgpu::TextureView {
    texture.create_view(&wgpu::TextureViewDescriptor {
        dimension: Some(wgpu::TextureViewDimension::D2Array),
        ..Default::default()
    })
}

/// The most texels `Context::texture_texels` can hold under `limits`: layers of 64 rows of
/// 4,096 texels, as many as the adapter's array layers; an adapter whose textures are narrower
/// than a row holds one row (`texel_extent` makes short textures one row wide).
fn max_texels(limits: &wgpu::Limits) -> u64 {
    use super::layout::{TEXEL_LAYER_ROW_BITS, TEXEL_ROW_BITS};
    let side = u64::from(limits.max_texture_dimension_2d);
    let row = 1u64 << TEXEL_ROW_BITS;
    if side < row {
        return side;
    }
    row * (1u64 << TEXEL_LAYER_ROW_BITS) * u64::from(limits.max_texture_array_layers)
}

/// The (width, height, layers) of the texture `Context::texture_texels` makes for `words`.
fn texel_extent(words: usize) -> (usize, usize, usize) {
    use super::layout::{TEXEL_LAYER_ROW_BITS, TEXEL_ROW_BITS};
    let texels = words.div_ceil(4).max(1);
    let width = texels.min(1 << TEXEL_ROW_BITS);
    let rows = texels.div_ceil(width);
    let height = rows.min(1 << TEXEL_LAYER_ROW_BITS);
    (width, height, rows.div_ceil(height))
}

/// A texture for a chunk's `texels` of row data (its points, `shared/point_texels.wgsl`, or
/// its paired shapes), whole rows of texels in the layers of `texture_texels`, and its view.
pub(crate) fn row_texture(
    device: &wgpu::Device,
    label: &str,
    texels: usize,
) -> (wgpu::Texture, wgpu::TextureView) {
    use super::layout::{TEXEL_LAYER_ROW_BITS, TEXEL_ROW_BITS};
    let texel_rows = texels.max(1).div_ceil(1 << TEXEL_ROW_BITS);
    let height = texel_rows.min(1 << TEXEL_LAYER_ROW_BITS);
    let texture = device.create_texture(&texels_descriptor(
        label,
        (1 << TEXEL_ROW_BITS, height, texel_rows.div_ceil(height)),
    ));
    let view = texels_view(&texture);
    (texture, view)
}

/// Record copies of the first `texels` texels (16 bytes each) of `buffer` into `texture` (made
/// by [`row_texture`]): whole layers, then whole texel rows, then the last row's texels.
pub(crate) fn copy_to_row_texture(
    encoder: &mut wgpu::CommandEncoder,
    buffer: &wgpu::Buffer,
    texture: &wgpu::Texture,
    texels: usize,
) {
    use super::layout::{TEXEL_LAYER_ROW_BITS, TEXEL_ROW_BITS};
    let (width, layer_rows) = (1usize << TEXEL_ROW_BITS, 1usize << TEXEL_LAYER_ROW_BITS);
    let layer_texels = width * layer_rows;
    let mut done = 0;
    while done < texels {
        let (layer, row) = (done / layer_texels, done % layer_texels / width);
        let left = texels - done;
        let (w, h, d) = if row == 0 && left >= layer_texels {
            (width, layer_rows, left / layer_texels)
        } else if left >= width {
            (width, (left / width).min(layer_rows - row), 1)
        } else {
            (left, 1, 1)
        };
        encoder.copy_buffer_to_texture(
            wgpu::TexelCopyBufferInfo {
                buffer,
                layout: wgpu::TexelCopyBufferLayout {
                    offset: 16 * done as u64,
                    bytes_per_row: Some(16 * width as u32),
                    rows_per_image: Some(layer_rows as u32),
                },
            },
            wgpu::TexelCopyTextureInfo {
                texture,
                mip_level: 0,
                origin: wgpu::Origin3d {
                    x: 0,
                    y: row as u32,
                    z: layer as u32,
                },
                aspect: wgpu::TextureAspect::All,
            },
            wgpu::Extent3d {
                width: w as u32,
                height: h as u32,
                depth_or_array_layers: d as u32,
            },
        );
        done += w * h * d;
    }
}

/// Texels `rows` points take (three words a row).
pub(crate) fn point_texel_count(rows: usize) -> usize {
    (3 * rows).div_ceil(4)
}

/// The bytes of the texture `Context::texture_texels` makes for `words` (whole layers).
pub(crate) fn texel_texture_bytes(words: usize) -> u64 {
    let (width, height, layers) = texel_extent(words);
    16 * (width * height * layers) as u64
}

/// Words `start .. start + count` of the two parts one after the other, zeros past their end:
/// borrowed where one part holds them all, else gathered.
fn layer_words_of(
    parts: &[Vec<u32>; 2],
    start: usize,
    count: usize,
) -> std::borrow::Cow<'_, [u32]> {
    let first_len = parts[0].len();
    let end = start + count;
    if end <= first_len {
        return std::borrow::Cow::Borrowed(&parts[0][start..end]);
    }
    if start >= first_len && end - first_len <= parts[1].len() {
        return std::borrow::Cow::Borrowed(&parts[1][start - first_len..end - first_len]);
    }
    let mut words: Vec<u32> = parts[0].get(start..).unwrap_or(&[]).to_vec();
    words.extend_from_slice(
        parts[1]
            .get(start.saturating_sub(first_len)..)
            .unwrap_or(&[]),
    );
    words.truncate(count);
    words.resize(count, 0);
    std::borrow::Cow::Owned(words)
}

/// `words` cut back to `len`, its memory given back (a large allocation shrinks in place: the
/// allocator unmaps its tail).
fn cut_back(words: &mut Vec<u32>, len: usize) {
    if words.len() > len {
        words.truncate(len);
        words.shrink_to_fit();
    }
}

/// The host memory available to a new allocation, where the system tells it (Linux).
fn host_available_bytes() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = meminfo.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

#[cfg(test)]
mod tests {
    use super::max_texels;

    #[test]
    fn texel_capacity_is_whole_layers_or_one_row_on_narrow_adapters() {
        let limits = |side, layers| wgpu::Limits {
            max_texture_dimension_2d: side,
            max_texture_array_layers: layers,
            ..wgpu::Limits::default()
        };
        assert_eq!(max_texels(&limits(16384, 2048)), 4096 * 64 * 2048);
        assert_eq!(max_texels(&limits(8192, 256)), 4096 * 64 * 256);
        assert_eq!(max_texels(&limits(2048, 256)), 2048);
    }
}
