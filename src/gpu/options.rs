//! How the engine is opened (`EngineOptions`), how a mesh's records are laid out
//! (`MeshRecords`), and where a job's host time went (`JobTiming`).

use crate::error::{Error, Result};

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
    /// Walk a mesh chunk's rows in seeded rounds (`Rounds::Seeded`: each row after the first
    /// round starts from a neighbour's answer) or in one dispatch; `None`: rounds on CPU
    /// adapters, whose walks pay for every step and whose rows arrive in Morton order, one
    /// dispatch on GPUs, where the rounds' small first dispatches left the device idle (13 %
    /// more device time on an H100, docs/perf-history.md). The answers are the same either way.
    pub seeded_mesh_rounds: Option<bool>,
    /// Jobs called from several threads that may run through the device together
    /// (`Engine::jobs_at_once`); `None`: four on hardware GPUs, one on CPU adapters.
    pub jobs_at_once: Option<usize>,
    /// Build the loop limiter probe (`gpu::context`) from a broken source, so that tests see
    /// a probe that fails open the engine with the loop budget assumed.
    pub fail_loop_probe: bool,
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
    /// Recording the chunks' passes and bind groups (their fills aside).
    pub encode: std::time::Duration,
    /// The whole job from its first row to its last drained, slots' allocation included:
    /// what `fill`, `wait`, `drain` and `encode` leave of it is the job's own host work.
    pub run: std::time::Duration,
    pub chunks: usize,
    /// Time the device spent in the chunks' compute passes, from timestamp queries: `None`
    /// where the adapter has none (then `wait` is the nearest measure).
    pub device: Option<std::time::Duration>,
}

impl JobTiming {
    /// "fill … ms, wait … ms, drain … ms, encode … ms, submit … ms[, device … ms], N chunks,
    /// run … ms".
    pub fn breakdown(&self) -> String {
        let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
        let device = self
            .device
            .map_or(String::new(), |d| format!(", device {:.1} ms", ms(d)));
        format!(
            "fill {:.1} ms, wait {:.1} ms, drain {:.1} ms, encode {:.1} ms, submit {:.1} ms{device}, \
             {} chunks, run {:.1} ms",
            ms(self.fill),
            ms(self.wait),
            ms(self.drain),
            ms(self.encode),
            ms(self.submit),
            self.chunks,
            ms(self.run),
        )
    }
}
