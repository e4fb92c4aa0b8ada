//! Scenes resident on the device: records sorted by kind, kind ranges, each kind's hierarchy
//! and the shapes' variable-size parts, uploaded once and queried any number of times.

use wgpu::util::DeviceExt;

use super::context::{Context, common_kind};
use super::scene_layout;
use super::turn::InTurn;
use crate::error::Error;
use crate::math::DVec3;
use crate::shape::{Shape, ShapeKind};

/// A scene uploaded once; query it many times with [`Engine::query_scene`].
pub struct GpuScene {
    /// What the kernels read of the records outside the walk: a triangle scene's index tables
    /// (`scene_layout::packed_triangles`, `scene_layout::indexed_triangles`); a stand-in otherwise.
    pub(crate) shapes: InTurn<wgpu::Buffer>,
    /// Per kind `[start, end, root node, node count]`, a uniform.
    pub(crate) ranges: InTurn<wgpu::Buffer>,
    /// The records the walks read, then every kind's BVH nodes, as texels (`split_records`).
    pub(crate) texels: InTurn<wgpu::TextureView>,
    /// The shapes' variable-size parts (`layout::ShapeData`).
    pub(crate) data: InTurn<wgpu::Buffer>,
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
    /// triangles and nodes (`scene_layout::packed_triangles`, `bvh::pack_oriented`).
    pub(crate) oriented: bool,
    /// An oriented scene's triangles are indexed (`scene_layout::indexed_triangles`): about three
    /// quarters of the bytes of packed records, a dependent texel fetch more per triangle test.
    pub(crate) indexed: bool,
    /// An oriented scene's winding-number clusters (`scene_layout::TriangleHierarchy`), where its
    /// upload asked for them: the sign data of `winding_walk.wgsl`.
    pub(crate) clusters: InTurn<Option<wgpu::Buffer>>,
    /// An oriented scene's top levels on the host: where a walk near a point may start
    /// (`bvh::TopNodes::start_node`).
    pub(crate) top_nodes: crate::bvh::TopNodes,
    /// The ball about its bounded shapes' box (scenes of shapes; body jobs move far bodies
    /// towards it, `engine::bodies`).
    pub(crate) ball: Option<(DVec3, f64)>,
    /// Its unbounded shapes (planes, lines, rays) and their indices: a far body is answered
    /// against them where it is, and against the rest moved (`engine::bodies`).
    pub(crate) unbounded: Vec<(u32, Shape)>,
    /// Where its shapes were moved from before rounding to f32 ([`scene_frame`]): its records,
    /// hierarchy, cells, `ball` and `unbounded` are about it; jobs move their points, bodies
    /// and answers by it. Zero for most scenes.
    pub(crate) frame: DVec3,
    /// Its queries look their shapes up in cell lists (`gpu::cells`) where they can.
    cell_lists: bool,
    texel_bytes: u64,
}

impl GpuScene {
    pub fn len(&self) -> usize {
        self.count as usize
    }
    /// Bytes it holds on the device.
    pub fn device_bytes(&self) -> u64 {
        let clusters = self.clusters.as_ref().map_or(0, wgpu::Buffer::size);
        self.shapes.size() + self.ranges.size() + self.texel_bytes + self.data.size() + clusters
    }
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }
    /// Whether its points in the cell grid are answered from cell lists (`gpu::cells`).
    pub fn has_cell_lists(&self) -> bool {
        self.cell_lists
    }
}

/// What a scene's queries find their shapes by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Hierarchy {
    /// Every shape scanned (the brute-force path, for comparisons).
    None,
    /// The BVH walk.
    Bvh,
    /// Cell lists (`gpu::cells`) where the scene suits them and the engine allows them, the
    /// walk for points outside their grid.
    CellLists,
    /// The BVH with axis-aligned boxes and plain records for every kind, triangles too: what
    /// the body walk reads (`bodies.wgsl`).
    AxisAligned,
}

/// A scene's records, kind ranges, hierarchies and shape data on the device, moved into its
/// frame ([`scene_frame`]); `admit` is asked first with the bytes they take.
pub(crate) fn upload<E: From<Error>>(
    gpu: &Context,
    shapes: &[Shape],
    hierarchy: Hierarchy,
    admit: impl FnOnce(u64) -> std::result::Result<(), E>,
) -> std::result::Result<GpuScene, E> {
    crate::shape::check_spans(shapes)?;
    let frame = scene_frame(crate::bvh::bounded_ball(shapes));
    let moved: Vec<Shape>;
    let shapes = match frame == DVec3::ZERO {
        true => shapes,
        false => {
            moved = shapes.iter().map(|s| s.translated(-frame)).collect();
            &moved
        }
    };
    upload_in_frame(gpu, shapes, frame, hierarchy, admit)
}

/// [`upload`] of shapes already moved by `-frame` (a mesh's triangles as body targets).
pub(crate) fn upload_in_frame<E: From<Error>>(
    gpu: &Context,
    shapes: &[Shape],
    frame: DVec3,
    hierarchy: Hierarchy,
    admit: impl FnOnce(u64) -> std::result::Result<(), E>,
) -> std::result::Result<GpuScene, E> {
    let laid_out = scene_layout::scene_layout_with(
        shapes,
        hierarchy != Hierarchy::None,
        hierarchy != Hierarchy::AxisAligned,
    );
    let cells = (hierarchy == Hierarchy::CellLists && !gpu.walk_only && !laid_out.oriented)
        .then(|| {
            // The BVH's shapes come first in storage order, up to the first linear range.
            let in_bvh = laid_out.ranges[0][0] as usize;
            let users: Vec<u32> = laid_out.shapes[..in_bvh].iter().map(|s| s.index).collect();
            let bvh_kinds = laid_out.ranges.last().map_or(0, |r| r[2]);
            super::cells::cell_lists(shapes, &users, bvh_kinds, gpu.binding_bytes)
        })
        .flatten();
    let bindings = laid_out.into_bindings();
    let kind = common_kind(shapes.iter().map(Shape::kind));
    let mut scene = upload_bindings(gpu, bindings, cells, shapes.len(), kind, admit)?;
    scene.ball = crate::bvh::bounded_ball(shapes);
    scene.unbounded = (shapes.iter().enumerate())
        .filter(|(_, shape)| crate::bvh::shape_bounds(shape).is_none())
        .map(|(i, shape)| (i as u32, shape.clone()))
        .collect();
    scene.frame = frame;
    Ok(scene)
}

/// A scene whose bounded shapes lie more than this many times their ball's radius from the
/// origin is answered in its own frame ([`scene_frame`]).
pub const SCENE_FRAME_RADII: f64 = 4.0;

/// Where a scene of bounded shapes in the ball `bounded` (centre, radius) is answered from: its
/// centre where that is beyond [`SCENE_FRAME_RADII`] radii from the origin, else the origin.
/// Its shapes and queries are moved there in f64 before they are rounded to f32, so that they
/// differ by what f32 holds about the scene's size, not about its distance from the origin
/// (a point 0.59 from a box 10^7 away was answered 1.0). Planes move with it; a scene of
/// unbounded shapes alone keeps the origin.
pub fn scene_frame(bounded: Option<(DVec3, f64)>) -> DVec3 {
    match bounded {
        Some((centre, radius)) if centre.length() > SCENE_FRAME_RADII * radius => centre,
        _ => DVec3::ZERO,
    }
}

/// A scene of `count` triangles (`scene_layout::triangle_bindings`) on the device, with its
/// winding-number `clusters` if asked.
pub(crate) fn upload_triangles<E: From<Error>>(
    gpu: &Context,
    count: usize,
    corners: &(dyn Fn(usize) -> [DVec3; 3] + Sync),
    clusters: bool,
    admit: impl FnOnce(u64) -> std::result::Result<(), E>,
) -> std::result::Result<GpuScene, E> {
    check_triangle_count(count)?;
    let bindings = scene_layout::triangle_bindings(count, corners, clusters)?;
    crate::host_memory::return_free_memory();
    upload_bindings(gpu, bindings, None, count, Some(ShapeKind::Triangle), admit)
}

/// A scene of `count` triangles with indexed records (`scene_layout::indexed_triangle_bindings`).
pub(crate) fn upload_indexed_triangles<E: From<Error>>(
    gpu: &Context,
    count: usize,
    corners: &(dyn Fn(usize) -> [DVec3; 3] + Sync),
    corner_ids: &(dyn Fn(usize) -> [u32; 3] + Sync),
    vertices: Vec<[f32; 3]>,
    clusters: bool,
    admit: impl FnOnce(u64) -> std::result::Result<(), E>,
) -> std::result::Result<GpuScene, E> {
    check_triangle_count(count)?;
    let bindings =
        scene_layout::indexed_triangle_bindings(count, corners, corner_ids, &vertices, clusters)?;
    drop(vertices);
    crate::host_memory::return_free_memory();
    upload_bindings(gpu, bindings, None, count, Some(ShapeKind::Triangle), admit)
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

/// `cells`: the scene's cell lists (`gpu::cells`), read from `shape_data`; a scene with
/// hulls then keeps their faces among its texels only.
fn upload_bindings<E: From<Error>>(
    gpu: &Context,
    bindings: scene_layout::SceneBindings,
    cells: Option<Vec<u32>>,
    count: usize,
    kind: Option<ShapeKind>,
    admit: impl FnOnce(u64) -> std::result::Result<(), E>,
) -> std::result::Result<GpuScene, E> {
    // Ctrl-C during the records' packing is heard before the upload, which cannot stop (a
    // 2M-triangle mesh: 0.25 s of packing, 0.15 s of upload).
    if crate::interrupt::interrupted() {
        return Err(Error::Interrupted.into());
    }
    if bindings.oriented {
        check_triangle_count(count)?;
    }
    let (bvh_kinds, linear_kinds, oriented, indexed) = (
        bindings.bvh_kinds(),
        bindings.linear_kinds(),
        bindings.oriented,
        bindings.indexed,
    );
    let scene_layout::SceneBindings {
        records,
        mut ranges,
        mut nodes,
        data,
        clusters,
        top_nodes,
        ..
    } = bindings;
    let SplitRecords {
        mut stored,
        from,
        texels: texel_records,
    } = split_records(records, count, oriented, indexed);
    // A scene's hull faces follow its nodes as texels (the hull walk reads every face), the
    // first one's texel in the hull kind's range (`hull_faces_texel` in query_walk.wgsl).
    let hull_bit = 1u32 << ShapeKind::ConvexHull as u32;
    let hull_faces = !oriented && (bvh_kinds | linear_kinds) & hull_bit != 0;
    if hull_faces {
        let first_texel = (texel_records.len() + nodes.len()) / 4;
        ranges[ShapeKind::ConvexHull as usize][2] = first_texel as u32;
        nodes.extend(bytemuck::cast_slice::<u8, u32>(&data));
    }
    let texel_words = texel_records.len() + from + nodes.len();
    check_texels(count, texel_words, gpu.max_texels)?;
    let texel_bytes = super::texels::texel_texture_bytes(texel_words, gpu.info.backend);
    let (record_bytes, max) = (4 * (stored.len() - from) as u64, gpu.binding_bytes);
    if record_bytes > max {
        return Err(Error::Usage(format!(
            "the scene has {count} shapes, whose records take {record_bytes} bytes, more than \
             one storage binding holds on this adapter ({max} bytes)",
        ))
        .into());
    }
    let ranges_bytes = std::mem::size_of_val(ranges.as_slice()) as u64;
    // The shape data's binding holds the cell lists, or its own bytes unless hull faces are
    // texels (the binding is then a shared stand-in).
    let data_bytes = match &cells {
        Some(words) => 4 * words.len() as u64,
        None if hull_faces => 0,
        None => data.len() as u64,
    };
    let cell_lists = cells.is_some();
    let cluster_bytes = 4 * clusters.len() as u64;
    admit(record_bytes + ranges_bytes + texel_bytes + data_bytes + cluster_bytes)?;
    // Each host copy shrinks as its buffer or texture fills (`storage_buffer_words`,
    // `texture_texels`): on CPU adapters they are host memory too, and the two copies of a
    // large mesh were its peak.
    let (shapes_buffer, ranges, texels, data, clusters) = gpu.checked(|| {
        (
            gpu.storage_buffer_tail("scene records", &mut stored, from),
            gpu.device
                .create_buffer_init(&wgpu::util::BufferInitDescriptor {
                    label: Some("scene kind ranges"),
                    contents: bytemuck::cast_slice(&ranges),
                    usage: wgpu::BufferUsages::UNIFORM,
                }),
            // `stored` is now cut back to the packed triangles the walks read (or emptied).
            gpu.texture_texels(
                "scene texels",
                [
                    if texel_records.is_empty() {
                        stored
                    } else {
                        texel_records
                    },
                    nodes,
                ],
            ),
            match cells {
                Some(words) => gpu.storage_buffer_words("scene cell lists", words),
                None if hull_faces => gpu.unused_shape_data.clone(),
                None => gpu.storage_buffer("scene shape data", &data),
            },
            (!clusters.is_empty()).then(|| gpu.storage_buffer_words("winding clusters", clusters)),
        )
    })?;
    let in_turn = |buffer| InTurn::new(buffer, &gpu.turn);
    Ok(GpuScene {
        shapes: in_turn(shapes_buffer),
        ranges: in_turn(ranges),
        texels: InTurn::new(texels, &gpu.turn),
        data: in_turn(data),
        count: count as u32,
        kind,
        bvh_kinds,
        linear_kinds,
        oriented,
        indexed,
        clusters: InTurn::new(clusters, &gpu.turn),
        top_nodes,
        ball: None,
        unbounded: Vec::new(),
        frame: DVec3::ZERO,
        cell_lists,
        texel_bytes,
    })
}

/// A usage error naming the sizes where a scene's `texel_words` exceed the `max_texels` of a
/// texture on this adapter.
fn check_texels(count: usize, texel_words: usize, max_texels: u64) -> Result<(), Error> {
    let texels = texel_words.div_ceil(4) as u64;
    if texels > max_texels {
        return Err(Error::Usage(format!(
            "the scene has {count} shapes, whose records and hierarchy take {} bytes, more than \
             a texture holds on this adapter ({} bytes)",
            16 * texels,
            16 * max_texels,
        )));
    }
    Ok(())
}

/// A scene's records as its kernels read them: `stored[from..]` stays in its records buffer
/// (a triangle scene's index tables, a scene's stand-in record), and the words read as texels
/// before its nodes are `stored[..from]` (a triangle scene's packed or indexed records) or
/// `texels` (a scene's shapes).
struct SplitRecords {
    stored: Vec<u32>,
    from: usize,
    texels: Vec<u32>,
}

fn split_records(records: Vec<u32>, count: usize, oriented: bool, indexed: bool) -> SplitRecords {
    match (oriented, indexed) {
        (true, indexed) => SplitRecords {
            stored: records,
            from: scene_layout::triangle_record_words(count, indexed),
            texels: Vec::new(),
        },
        (false, _) => SplitRecords {
            stored: records[..4].to_vec(),
            from: 0,
            texels: records,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::{SplitRecords, check_texels, split_records};

    // Records of 12 words a triangle (two triangles), then index tables.
    fn records() -> Vec<u32> {
        (0..24).chain(100..108).collect()
    }

    // Indexed records of 6 words a triangle (three triangles, two words of padding), then
    // index tables.
    fn indexed_records() -> Vec<u32> {
        (0..20).chain(100..108).collect()
    }

    /// The words that stay in the records buffer, and those read as texels before the nodes.
    fn split(count: usize, oriented: bool, indexed: bool) -> (Vec<u32>, Vec<u32>) {
        let SplitRecords {
            stored,
            from,
            texels,
        } = split_records(records(), count, oriented, indexed);
        let head = if texels.is_empty() {
            stored[..from].to_vec()
        } else {
            texels
        };
        (stored[from..].to_vec(), head)
    }

    #[test]
    fn scenes_larger_than_a_texture_are_refused_naming_both_sizes() {
        assert!(check_texels(3, 4 * 100, 100).is_ok());
        let error = check_texels(3, 4 * 100 + 1, 100).unwrap_err().to_string();
        assert!(error.contains("3 shapes"), "{error}");
        assert!(error.contains("1616 bytes"), "{error}");
        assert!(error.contains("(1600 bytes)"), "{error}");
    }

    #[test]
    fn texture_bytes_are_whole_layers() {
        use crate::gpu::texels::texel_texture_bytes;
        // One texel at least; a short row; a layer of 64 rows of 4,096 texels, then two.
        let vulkan = wgpu::Backend::Vulkan;
        assert_eq!(texel_texture_bytes(0, vulkan), 16);
        assert_eq!(texel_texture_bytes(4 * 10, vulkan), 160);
        assert_eq!(texel_texture_bytes(4 * 4096 * 3, vulkan), 16 * 4096 * 3);
        assert_eq!(
            texel_texture_bytes(4 * 4096 * 64 + 4, vulkan),
            2 * 16 * 4096 * 64
        );
        // GL takes a layer more where it would guess another kind of texture (`layers_on`).
        assert_eq!(texel_texture_bytes(4 * 10, wgpu::Backend::Gl), 2 * 160);
        let six_layers = 4 * 4096 * 64 * 6;
        assert_eq!(
            texel_texture_bytes(six_layers, wgpu::Backend::Gl),
            7 * 16 * 4096 * 64
        );
    }

    #[test]
    fn packed_triangles_are_texels_and_leave_their_index_tables() {
        let (stored, texels) = split(2, true, false);
        assert_eq!(stored, (100..108).collect::<Vec<_>>());
        assert_eq!(texels, (0..24).collect::<Vec<_>>());
    }

    #[test]
    fn indexed_triangles_are_texels_and_leave_their_index_tables() {
        let SplitRecords { stored, from, .. } = split_records(indexed_records(), 3, true, true);
        assert_eq!(stored[from..], (100..108).collect::<Vec<_>>());
        assert_eq!(stored[..from], (0..20).collect::<Vec<_>>());
    }

    #[test]
    fn scene_shapes_are_texels_and_leave_a_stand_in() {
        let (stored, texels) = split(1, false, false);
        assert_eq!(texels, records());
        assert_eq!(stored, vec![0, 1, 2, 3]);
    }
}
