//! The device and what every job shares on it: the adapter opened with its limits, the
//! kernels (`kernels.rs`), the stand-in buffers of unused bindings, textures of texels
//! (`texels.rs`), error scopes and the errors wgpu reports outside them.

use std::sync::{Arc, Mutex};

use wgpu::util::DeviceExt;

use super::adapter;
use super::kernels::{Kernels, build_kernels, in_error_scope};
use super::layout::{self, GpuShape};
use super::options::{EngineOptions, JobTiming, MeshRecords};
use super::texels::{
    cut_back, layer_words_of, max_texels, texel_extent, texels_descriptor, texels_view,
};
use super::turn::DeviceTurn;
use crate::error::{Error, Result};
use crate::shape::ShapeKind;

/// Rows per chunk on a CPU adapter when the limits allow it: big enough to amortise a
/// submission, small enough that a chunk's results are still in cache when the host drains
/// them (measured in docs/perf-history.md: 2^18 rows halves the drain time of 2^20 on lavapipe).
const CPU_CHUNK_ROWS: usize = 1 << 18;

/// Rows per chunk on a hardware GPU: a chunk of 2^18 barely fills an H100 once, and its tail
/// leaves the device idle (2^20 cut the device time of 10^7 mesh queries by 36–37 %:
/// docs/perf-history.md, H100).
const GPU_CHUNK_ROWS: usize = 1 << 20;

/// Storage buffers larger than this are uploaded piece by piece (`Context::storage_buffer_words`).
const UPLOAD_PIECE_BYTES: usize = 4 << 20;

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
    /// Host bytes granted by `reserve_memory` to builds under way and not yet given back: two
    /// meshes uploaded at once (a service's clients) must not both pass a check that holds
    /// one.
    pub(crate) reserved_host_bytes: std::sync::Arc<std::sync::Mutex<u64>>,
    /// `EngineOptions::mesh_records`.
    pub(crate) mesh_records: MeshRecords,
    /// `EngineOptions::walk_only`.
    pub(crate) walk_only: bool,
    /// `EngineOptions::every_part`.
    pub(crate) every_part: bool,
    /// Host-visible storage buffers are used directly (no staging copies).
    pub(crate) unified_memory: bool,
    /// Whether a chunk's results are copied out on every core (`PackedRows::spread`).
    pub(crate) drain_spread: bool,
    /// Mesh walks in seeded rounds (`EngineOptions::seeded_mesh_rounds`).
    pub(crate) seeded_mesh_rounds: bool,
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
    /// Device time of every job since the engine opened (`JobTiming::device` summed): a job
    /// of several queries (a band grid's levels) is the difference across it.
    pub(crate) device_total: Mutex<Option<std::time::Duration>>,
    /// Nanoseconds a timestamp tick, where the device has timestamp queries (`JobTiming::device`).
    pub(crate) timestamp_period_ns: Option<f64>,
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
    /// One thread at a time on a GL device (`gpu::turn`).
    pub(crate) turn: DeviceTurn,
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
        let timestamps = features.contains(wgpu::Features::TIMESTAMP_QUERY);
        if timestamps {
            required_features |= wgpu::Features::TIMESTAMP_QUERY;
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
        .map_err(|e| Error::no_adapter(format!("cannot open {}: {e}", info.name)))?;

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

        let max_texels = max_texels(&limits, info.backend);
        // Points as texels need whole texel rows; a chunk's points must fit the texture.
        let point_texels = !options.storage_points
            && u64::from(limits.max_texture_dimension_2d) >= 1 << layout::TEXEL_ROW_BITS;
        let stack_limit = options
            .walk_stack_entries
            .map_or(crate::bvh::STACK_SIZE, |n| {
                n.clamp(1, crate::bvh::STACK_SIZE)
            }) as u32;
        // Mesa 22's software adapters leave every loop once an invocation has run 65,535
        // loop iterations (its loop limiter; Mesa 25's run them all): where a probe sees it,
        // body walks stop short of that and say so. A probe that fails assumes the limiter:
        // a body walk refused is better than an engine that does not open.
        let limited = cpu_adapter
            && loops_are_limited(&device, &queue, options.fail_loop_probe).unwrap_or(true);
        let loop_budget = if limited { LOOP_BUDGET } else { 0 };
        let kernels = in_error_scope(&device, || {
            build_kernels(
                &device,
                subgroup_kernels,
                point_texels,
                stack_limit,
                loop_budget,
            )
        })?;
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
            .unwrap_or(if cpu_adapter {
                CPU_CHUNK_ROWS
            } else {
                GPU_CHUNK_ROWS
            })
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
            &texels_descriptor("unused texels", (1, 1, 1), info.backend),
            wgpu::util::TextureDataOrder::LayerMajor,
            &vec![0; 16 * super::texels::layers_on(info.backend, 1)],
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
        let timestamp_period_ns = timestamps.then(|| f64::from(queue.get_timestamp_period()));
        let turn = DeviceTurn::for_backend(info.backend);
        Ok(Context {
            binding_bytes,
            memory_bytes: options.memory_bytes,
            reserved_host_bytes: Default::default(),
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
            drain_spread: !cpu_adapter,
            seeded_mesh_rounds: options.seeded_mesh_rounds.unwrap_or(cpu_adapter),
            grid_on_device: std::sync::atomic::AtomicBool::new(true),
            timing: Mutex::new(JobTiming::default()),
            device_total: Mutex::new(None),
            timestamp_period_ns,
            unused_ranges,
            unused_sign_data,
            max_texels,
            unused_shape_data,
            unused_texels,
            device_errors,
            lost,
            turn,
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
    /// The host's memory is what the system reports available (Linux's `MemAvailable`), less
    /// what other builds under way hold reserved; a CPU adapter's device memory is the host's
    /// too. What is granted stays reserved until the returned guard is dropped (the upload's
    /// end). wgpu reports no device budget for hardware GPUs: there an allocation that fails
    /// is reported by the error scope around it.
    pub(crate) fn reserve_memory(
        &self,
        what: &str,
        device: u64,
        build: u64,
    ) -> Result<HostReservation> {
        // Held while the system is asked, so that two checks at once see each other.
        let mut reserved = self
            .reserved_host_bytes
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let Some(available) = self
            .memory_bytes
            .or_else(crate::host_memory::host_available_bytes)
        else {
            return Ok(HostReservation::default());
        };
        let available = available.saturating_sub(*reserved);
        let shared = self.device_memory_is_hosts();
        let on_host = build + if shared { device } else { 0 };
        if on_host > available {
            // Needs rounded up, what is available down (below 1 MiB, in bytes).
            let mib = |b: u64| format!("{} MiB", b.div_ceil(1 << 20));
            let available = match available {
                0..0x10_0000 => format!("{available} bytes"),
                _ => format!("{} MiB", available >> 20),
            };
            let others = match *reserved {
                0 => String::new(),
                held => format!(" beside the {} that uploads under way hold", mib(held)),
            };
            return Err(Error::OutOfMemory(format!(
                "{what} needs about {} of host memory ({} to build, {} on the device{}), but \
                 {available} are available{others}",
                mib(on_host),
                mib(build),
                mib(device),
                if shared {
                    ", which is host memory on this adapter"
                } else {
                    ""
                },
            )));
        }
        *reserved = reserved.saturating_add(on_host);
        Ok(HostReservation {
            ledger: Some(self.reserved_host_bytes.clone()),
            bytes: on_host,
        })
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
        let texture = self.device.create_texture(&texels_descriptor(
            label,
            (width, height, layers),
            self.info.backend,
        ));
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
        let _turn = self.turn.take();
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

/// Host bytes granted to a build by [`Context::reserve_memory`], given back when dropped.
#[derive(Default)]
pub(crate) struct HostReservation {
    ledger: Option<std::sync::Arc<std::sync::Mutex<u64>>>,
    bytes: u64,
}

impl Drop for HostReservation {
    fn drop(&mut self) {
        if let Some(ledger) = &self.ledger {
            let mut reserved = ledger
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            *reserved = reserved.saturating_sub(self.bytes);
        }
    }
}

/// Iterations the limiter probe asks for: more than Mesa 22's limiter lets an invocation run.
const LOOP_PROBE_ITERATIONS: u32 = 70_000;

/// Loop iterations a body walk may run an invocation where loops are limited: short of the
/// 65,535 after which Mesa 22's limiter stops them.
const LOOP_BUDGET: u32 = 60_000;

/// Whether the device cuts long loops short (Mesa 22's llvmpipe stops every loop of an
/// invocation after 65,535 iterations in all, silently): one invocation counts to
/// `LOOP_PROBE_ITERATIONS`, a bound it reads from memory so no compiler folds the loop.
/// `fail`: build the probe from a broken source, as a test's fault.
fn loops_are_limited(device: &wgpu::Device, queue: &wgpu::Queue, fail: bool) -> Result<bool> {
    const PROBE: &str = "
@group(0) @binding(0) var<storage, read_write> words: array<u32, 2>;
@compute @workgroup_size(1)
fn probe() {
    var n = 0u;
    loop {
        if n >= words[0] { break; }
        n += 1u;
    }
    words[1] = n;
}";
    let counted = in_error_scope(device, || -> Result<u32> {
        let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some("loop limiter probe"),
            source: wgpu::ShaderSource::Wgsl(if fail { "fn probe(" } else { PROBE }.into()),
        });
        let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some("loop limiter probe"),
            layout: None,
            module: &module,
            entry_point: Some("probe"),
            compilation_options: Default::default(),
            cache: None,
        });
        let words = device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
            label: Some("loop limiter probe"),
            contents: bytemuck::cast_slice(&[LOOP_PROBE_ITERATIONS, 0]),
            usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
        });
        let read = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("loop limiter probe read"),
            size: 8,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let group = device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some("loop limiter probe"),
            layout: &pipeline.get_bind_group_layout(0),
            entries: &[wgpu::BindGroupEntry {
                binding: 0,
                resource: words.as_entire_binding(),
            }],
        });
        let mut encoder = device.create_command_encoder(&Default::default());
        {
            let mut pass = encoder.begin_compute_pass(&Default::default());
            pass.set_pipeline(&pipeline);
            pass.set_bind_group(0, &group, &[]);
            pass.dispatch_workgroups(1, 1, 1);
        }
        encoder.copy_buffer_to_buffer(&words, 0, &read, 0, 8);
        queue.submit([encoder.finish()]);
        read.slice(..).map_async(wgpu::MapMode::Read, |_| {});
        device
            .poll(wgpu::PollType::wait_indefinitely())
            .map_err(|e| Error::Gpu(format!("the loop limiter probe: {e}")))?;
        let view = read
            .slice(..)
            .get_mapped_range()
            .map_err(|e| Error::Gpu(format!("the loop limiter probe: {e}")))?;
        Ok(bytemuck::cast_slice::<u8, u32>(&view)[1])
    })??;
    Ok(counted < LOOP_PROBE_ITERATIONS)
}
