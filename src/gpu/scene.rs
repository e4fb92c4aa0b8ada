//! Scenes resident on the device: records sorted by kind, kind ranges, each kind's hierarchy
//! and the shapes' variable-size parts, uploaded once and queried any number of times.

use wgpu::util::DeviceExt;

use super::context::{Context, common_kind};
use super::layout;
use crate::error::Error;
use crate::math::DVec3;
use crate::shape::{Shape, ShapeKind};

/// A scene uploaded once; query it many times with [`Engine::query_scene`].
pub struct GpuScene {
    /// What the kernels read of the records outside the walk: a packed triangle scene's index
    /// tables, an indexed one's records (`layout::indexed_triangles`); a stand-in otherwise.
    pub(crate) shapes: wgpu::Buffer,
    /// Per kind `[start, end, root node, node count]`, a uniform.
    pub(crate) ranges: wgpu::Buffer,
    /// The records the walks read, then every kind's BVH nodes, as texels (`texel_words`).
    pub(crate) texels: wgpu::TextureView,
    /// The shapes' variable-size parts (`layout::ShapeData`).
    pub(crate) data: wgpu::Buffer,
    pub(crate) count: u32,
    /// Set when every shape has this kind (a specialised pipeline then runs).
    pub(crate) kind: Option<ShapeKind>,
    /// Bit k set when kind k has shapes in the BVH; 0 (no BVH) runs a pipeline without
    /// traversal code, and kinds absent from it are compiled out of the leaf tests.
    pub(crate) bvh_kinds: u32,
    /// Bit k set when kind k has shapes scanned linearly; the other kinds' loops are compiled
    /// out (software adapters would run an empty loop's body once).
    pub(crate) linear_kinds: u32,
    /// The BVH's boxes are oriented (triangles only): `mesh.wgsl` answers, from packed
    /// triangles and nodes (`layout::packed_triangles`, `bvh::pack_oriented`).
    pub(crate) oriented: bool,
    /// An oriented scene's triangles are indexed (`layout::indexed_triangles`): about two
    /// thirds of the bytes of packed records, a dependent load more per triangle test.
    pub(crate) indexed: bool,
    texel_bytes: u64,
}

impl GpuScene {
    pub fn len(&self) -> usize {
        self.count as usize
    }
    /// Bytes it holds on the device.
    pub fn device_bytes(&self) -> u64 {
        self.shapes.size() + self.ranges.size() + self.texel_bytes + self.data.size()
    }
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }
}

/// A scene's records, kind ranges, hierarchies and shape data on the device; `admit` is asked
/// first with the bytes they take.
pub(crate) fn upload<E: From<Error>>(
    gpu: &Context,
    shapes: &[Shape],
    use_bvh: bool,
    admit: impl FnOnce(u64) -> std::result::Result<(), E>,
) -> std::result::Result<GpuScene, E> {
    let bindings = layout::scene_layout(shapes, use_bvh).into_bindings();
    let kind = common_kind(shapes.iter().map(Shape::kind));
    upload_bindings(gpu, bindings, shapes.len(), kind, admit)
}

/// A scene of `count` triangles (`layout::triangle_bindings`) on the device.
pub(crate) fn upload_triangles<E: From<Error>>(
    gpu: &Context,
    count: usize,
    corners: &(dyn Fn(usize) -> [DVec3; 3] + Sync),
    admit: impl FnOnce(u64) -> std::result::Result<(), E>,
) -> std::result::Result<GpuScene, E> {
    check_triangle_count(count)?;
    let bindings = layout::triangle_bindings(count, corners);
    crate::host_memory::return_free_memory();
    upload_bindings(gpu, bindings, count, Some(ShapeKind::Triangle), admit)
}

/// A scene of `count` triangles with indexed records (`layout::indexed_triangle_bindings`).
pub(crate) fn upload_indexed_triangles<E: From<Error>>(
    gpu: &Context,
    count: usize,
    corners: &(dyn Fn(usize) -> [DVec3; 3] + Sync),
    corner_ids: &(dyn Fn(usize) -> [u32; 3] + Sync),
    vertices: Vec<[f32; 3]>,
    admit: impl FnOnce(u64) -> std::result::Result<(), E>,
) -> std::result::Result<GpuScene, E> {
    check_triangle_count(count)?;
    let bindings = layout::indexed_triangle_bindings(count, corners, corner_ids, &vertices);
    drop(vertices);
    crate::host_memory::return_free_memory();
    upload_bindings(gpu, bindings, count, Some(ShapeKind::Triangle), admit)
}

/// mesh.wgsl packs node and leaf indices beside a leaf count.
fn check_triangle_count(count: usize) -> Result<(), Error> {
    let max_triangles = 1usize << (32 - crate::bvh::LEAF_COUNT_BITS);
    if count >= max_triangles {
        return Err(Error::Usage(format!(
            "a triangle scene holds at most {} triangles ({count} given)",
            max_triangles - 1,
        )));
    }
    Ok(())
}

fn upload_bindings<E: From<Error>>(
    gpu: &Context,
    bindings: layout::SceneBindings,
    count: usize,
    kind: Option<ShapeKind>,
    admit: impl FnOnce(u64) -> std::result::Result<(), E>,
) -> std::result::Result<GpuScene, E> {
    if bindings.oriented {
        check_triangle_count(count)?;
    }
    let (bvh_kinds, linear_kinds, oriented, indexed) = (
        bindings.bvh_kinds(),
        bindings.linear_kinds(),
        bindings.oriented,
        bindings.indexed,
    );
    let layout::SceneBindings {
        records,
        ranges,
        nodes,
        data,
        ..
    } = bindings;
    let (texel_words, records) = texel_words(records, nodes, count, oriented, indexed);
    let texels = texel_words.len().div_ceil(4) as u64;
    if texels > gpu.max_texels {
        return Err(Error::Usage(format!(
            "the scene has {count} shapes, whose records and hierarchy take {} bytes, more than \
             a texture holds on this adapter ({} bytes)",
            16 * texels,
            16 * gpu.max_texels,
        ))
        .into());
    }
    let (record_bytes, max) = (records.len() as u64 * 4, gpu.binding_bytes);
    if record_bytes > max {
        return Err(Error::Usage(format!(
            "the scene has {count} shapes, whose records take {record_bytes} bytes, more than \
             one storage binding holds on this adapter ({max} bytes)",
        ))
        .into());
    }
    gpu.check_shape_data(data.len())?;
    let ranges_bytes = std::mem::size_of_val(ranges.as_slice()) as u64;
    admit(record_bytes + ranges_bytes + 16 * texels + data.len() as u64)?;
    // Each host copy shrinks as its buffer or texture fills (`storage_buffer_words`,
    // `texture_texels`): on CPU adapters they are host memory too, and the two copies of a
    // large mesh were its peak.
    let (shapes_buffer, ranges, (texels, texel_bytes), data) = gpu.checked(|| {
        (
            gpu.storage_buffer_words("scene records", records),
            gpu.device
                .create_buffer_init(&wgpu::util::BufferInitDescriptor {
                    label: Some("scene kind ranges"),
                    contents: bytemuck::cast_slice(&ranges),
                    usage: wgpu::BufferUsages::UNIFORM,
                }),
            gpu.texture_texels("scene texels", texel_words),
            gpu.storage_buffer("scene shape data", &data),
        )
    })?;
    Ok(GpuScene {
        shapes: shapes_buffer,
        ranges,
        texels,
        data,
        count: count as u32,
        kind,
        bvh_kinds,
        linear_kinds,
        oriented,
        indexed,
        texel_bytes,
    })
}

/// The words a scene's kernels read as texels (shared/texels.wgsl), and what stays in its
/// records buffer: a scene's shapes then its nodes (a stand-in record left behind); a packed
/// triangle scene's triangles then its nodes (its index tables left behind); an indexed
/// one's nodes alone (its records left whole).
fn texel_words(
    mut records: Vec<u32>,
    nodes: Vec<u32>,
    count: usize,
    oriented: bool,
    indexed: bool,
) -> (Vec<u32>, Vec<u32>) {
    let rest = match (oriented, indexed) {
        (true, true) => return (nodes, records),
        (true, false) => records.split_off(12 * count),
        (false, _) => records[..4].to_vec(),
    };
    records.reserve_exact(nodes.len());
    records.extend_from_slice(&nodes);
    (records, rest)
}

#[cfg(test)]
mod tests {
    use super::texel_words;

    // Records of 12 words a triangle (two triangles), then index tables; nodes of 16 words.
    fn records() -> Vec<u32> {
        (0..24).chain(100..108).collect()
    }

    fn nodes() -> Vec<u32> {
        (200..216).collect()
    }

    #[test]
    fn packed_triangles_go_before_the_nodes_and_leave_their_index_tables() {
        let (texels, rest) = texel_words(records(), nodes(), 2, true, false);
        assert_eq!(texels, (0..24).chain(200..216).collect::<Vec<_>>());
        assert_eq!(rest, (100..108).collect::<Vec<_>>());
    }

    #[test]
    fn indexed_triangles_leave_their_records_whole_and_only_the_nodes_are_texels() {
        let (texels, rest) = texel_words(records(), nodes(), 2, true, true);
        assert_eq!(texels, nodes());
        assert_eq!(rest, records());
    }

    #[test]
    fn scene_shapes_go_before_the_nodes_and_leave_a_stand_in() {
        let (texels, rest) = texel_words(records(), nodes(), 1, false, false);
        assert_eq!(texels, records().into_iter().chain(nodes()).collect::<Vec<_>>());
        assert_eq!(rest, vec![0, 1, 2, 3]);
    }
}
