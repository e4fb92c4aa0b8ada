// Host-shared structs. Their Rust twins live in src/gpu/layout.rs; a test compares the
// offsets naga computes with the Rust ones, so neither side can drift.

// One shape in its local frame: `anchor` is the world position of the local origin and
// p0..p3 hold the per-kind parameters listed in src/gpu/layout.rs (GpuShape::from_shape).
struct Shape {
    kind: u32,
    // Index in the user's scene (scenes are uploaded sorted by kind).
    index: u32,
    _pad0: u32,
    _pad1: u32,
    anchor: vec4<f32>,
    p0: vec4<f32>,
    p1: vec4<f32>,
    p2: vec4<f32>,
    p3: vec4<f32>,
}

struct Hit {
    point: vec3<f32>,
    distance: f32,
    normal: vec3<f32>,
    // Shape index (scene or paired row); -1 for a non-finite query row.
    shape: i32,
}

struct Params {
    row_count: u32,
    shape_count: u32,
    mode: u32,
    // 0x7fc00000, passed at run time because WGSL forbids NaN constants.
    nan_bits: u32,
    // Global index of this chunk's first row (paired mode reports it as the shape index).
    first_row: u32,
    // The round of a job dispatched in rounds (mesh.wgsl).
    round: u32,
    round_count: u32,
    // First word of the chunk's shapes kept on the device only (rows without the shape
    // field whose later rounds or passes read it); 0 where none are kept.
    kept_shapes: u32,
    // The chunk's grid header (grid_samples.wgsl), when rows are an SDF grid's samples.
    grid: array<vec4<u32>, 4>,
}

// Boundary projection in the shape's local frame; see src/reference/mod.rs (Projection).
struct Projection {
    point: vec3<f32>,
    inside: bool,
    normal: vec3<f32>,
}

// One child of a BVH node (src/bvh.rs, GpuBvhChild): a leaf (count > 0) holds shapes
// first .. first + count; an inner child (count == 0) is node first.
struct BvhChild {
    min: vec3<f32>,
    first: u32,
    max: vec3<f32>,
    count: u32,
}

// An inner BVH node: both children's boxes (src/bvh.rs, GpuBvhNode), the layout of a scene's
// nodes in its texels (query_walk.wgsl reads the children, `child_of`, and never the
// rotations, which are zero here); oriented hierarchies (triangles) reach mesh.wgsl packed by
// bvh::pack_oriented.
struct BvhNode {
    left: BvhChild,
    right: BvhChild,
    left_rotation: vec4<f32>,
    right_rotation: vec4<f32>,
}
