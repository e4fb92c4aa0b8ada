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
    /// Shapes sorted by kind (see `layout::scene_layout`).
    pub(crate) shapes: wgpu::Buffer,
    /// Per kind `[start, end, root node, node count]`, a uniform.
    pub(crate) ranges: wgpu::Buffer,
    /// Every kind's BVH nodes (`bvh::GpuBvhNode`).
    pub(crate) nodes: wgpu::Buffer,
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
    /// A packed triangle scene's nodes, then its triangle records, as texels (`texels`).
    pub(crate) texels: Option<wgpu::TextureView>,
}

/// Texels a row of a texel texture holds, as a power of two.
pub(crate) const TEXEL_ROW_BITS: u32 = 13;

/// `words` (four a texel) in an Rgba32Uint texture `1 << TEXEL_ROW_BITS` texels wide.
pub(crate) fn texels(device: &wgpu::Device, queue: &wgpu::Queue, words: &[u32]) -> wgpu::TextureView {
    use wgpu::util::DeviceExt;
    let count = words.len().div_ceil(4).max(1);
    let width = 1usize << TEXEL_ROW_BITS;
    let (w, h) = if count <= width { (count, 1) } else { (width, count.div_ceil(width)) };
    let mut padded = words.to_vec();
    padded.resize(4 * w * h, 0);
    let texture = device.create_texture_with_data(
        queue,
        &wgpu::TextureDescriptor {
            label: Some("texels"),
            size: wgpu::Extent3d {
                width: w as u32,
                height: h as u32,
                depth_or_array_layers: 1,
            },
            mip_level_count: 1,
            sample_count: 1,
            dimension: wgpu::TextureDimension::D2,
            format: wgpu::TextureFormat::Rgba32Uint,
            usage: wgpu::TextureUsages::TEXTURE_BINDING,
            view_formats: &[],
        },
        wgpu::util::TextureDataOrder::LayerMajor,
        bytemuck::cast_slice(&padded),
    );
    texture.create_view(&Default::default())
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
    let texel_words = if oriented {
        (!indexed).then(|| {
            let mut words = nodes.clone();
            words.extend_from_slice(&records[..12 * count]);
            words
        })
    } else {
        let mut words = records.clone();
        words.extend_from_slice(&nodes);
        Some(words)
    };
    let (record_bytes, node_bytes) = (records.len() * 4, nodes.len() * 4);
    let max = gpu.binding_bytes;
    for (what, size) in [("shapes", record_bytes), ("hierarchy", node_bytes)] {
        if size as u64 > max {
            return Err(Error::Usage(format!(
                "the scene has {count} shapes, whose {what} take {size} bytes, more than one \
                 storage binding holds on this adapter ({max} bytes)",
            ))
            .into());
        }
    }
    gpu.check_shape_data(data.len())?;
    let ranges_bytes = std::mem::size_of_val(ranges.as_slice());
    admit((record_bytes + ranges_bytes + node_bytes + data.len()) as u64)?;
    // Each host copy shrinks as its buffer fills (`storage_buffer_words`): on CPU adapters the
    // buffers are host memory too, and the two copies of a large mesh were its peak.
    let (shapes_buffer, ranges, nodes, data) = gpu.checked(|| {
        (
            gpu.storage_buffer_words("scene shapes", records),
            gpu.device
                .create_buffer_init(&wgpu::util::BufferInitDescriptor {
                    label: Some("scene kind ranges"),
                    contents: bytemuck::cast_slice(&ranges),
                    usage: wgpu::BufferUsages::UNIFORM,
                }),
            gpu.storage_buffer_words("scene bvh nodes", nodes),
            gpu.storage_buffer("scene shape data", &data),
        )
    })?;
    Ok(GpuScene {
        shapes: shapes_buffer,
        ranges,
        nodes,
        data,
        count: count as u32,
        kind,
        bvh_kinds,
        linear_kinds,
        oriented,
        indexed,
        texels: texel_words.map(|words| texels(&gpu.device, &gpu.queue, &words)),
    })
}
