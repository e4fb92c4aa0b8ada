// The nearest-triangle walk shared by mesh.wgsl and mesh_subgroup.wgsl: triangle-only scenes
// with an oriented BVH (meshes, triangle soups), the answers of `nearest` in query.wgsl with
// far fewer memory operations per step. Software adapters load storage buffers lane by lane,
// one loop per 32-bit word, so a step costs about what it loads: records and nodes here are
// whole texels (shared/texels.wgsl), the stack holds two words per entry, and leaves compare
// squared distances (the full answer is computed once, for the winner).
#import shared/types
#import shared/math
#import shared/rows
#import shared/hits
#import shapes/triangle
#import shared/walk
#import shared/texels
#import shared/point_texels
#import grid_samples

@group(0) @binding(0) var<uniform> params: Params;
// Packed (TRIANGLE_RECORDS = 0): triangle t of the BVH's leaf order is texels 3t .. 3t + 3
// (shared/texels.wgsl): (a, n.x), (b − a, n.y), (c − a, n.z), n its unit normal (zero when
// degenerate); `triangles` holds the scene index of triangle t as word t % 4 of
// triangles[t / 4], and after those the slot of each scene index (layout::packed_triangles).
// Indexed (TRIANGLE_RECORDS = 1): words 6t .. 6t + 6 of the texels are triangle t's vertex
// indices and n (layout::indexed_triangles), the vertices are texels after the nodes, one each
// (layout::vertex_texels), and `triangles` holds the same two tables. The hierarchy's nodes
// follow the records' texels, four texels each (`load_node`).
@group(0) @binding(1) var<storage, read> triangles: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> points: array<f32>;
@group(0) @binding(4) var<uniform> kind_ranges: array<vec4<u32>, KIND_COUNT + 1u>;
// The mesh's sign data, for the jobs that sign on the device: the winding-number dipoles
// over its hierarchy (winding_walk.wgsl) or its pseudonormal table (pseudonormal.wgsl).
@group(0) @binding(6) var<storage, read> sign_data: array<vec4<u32>>;

// Word `i` of the sign data, and the three from `i` as a vector.
fn sign_word(i: u32) -> u32 {
    return sign_data[i >> 2u][i & 3u];
}

fn sign_vec3(i: u32) -> vec3<f32> {
    return bitcast<vec3<f32>>(vec3<u32>(sign_word(i), sign_word(i + 1u), sign_word(i + 2u)));
}

// A child to open: `first << 3 | leaf count` (0 for an inner node) and its squared distance.
struct MeshStackEntry {
    child: u32,
    distance2: f32,
}


fn load_point(row: u32) -> vec3<f32> {
    if GRID_SAMPLES != 0u {
        return grid_point(row);
    }
    if POINT_TEXELS != 0u {
        return texel_point(row);
    }
    return vec3<f32>(points[3u * row], points[3u * row + 1u], points[3u * row + 2u]);
}

// How the triangles are stored, a pipeline override: 0 packed, 1 indexed.
override TRIANGLE_RECORDS: u32 = 0u;
const INDEXED_RECORDS: u32 = 1u;
const INDEXED_RECORD_WORDS: u32 = 6u;

// Word `i` of `triangles`, indexed through the reference so only the one word is loaded.
fn triangle_word(i: u32) -> u32 {
    return bitcast<u32>(triangles[i >> 2u][i & 3u]);
}

fn round_up_4(words: u32) -> u32 {
    return (words + 3u) & ~3u;
}

// The first texel of node `node` (bvh::pack_oriented: both children's centres and leaf words,
// then their packed half extents and rotations), after the records' texels.
fn node_texel(node: u32) -> u32 {
    let records = select(3u * params.shape_count, round_up_4(INDEXED_RECORD_WORDS * params.shape_count) >> 2u,
        TRIANGLE_RECORDS == INDEXED_RECORDS);
    return records + 4u * node;
}

// The scene index of each slot is word `slot` of `triangles`; the slot of each index follows.
fn scene_index(slot: u32) -> u32 {
    return triangle_word(slot);
}

// The texel of vertex `v` of indexed records: after the nodes.
fn vertex_texel(v: u32) -> u32 {
    return node_texel(kind_ranges[KIND_COUNT].y) + v;
}

fn indexed_vertex(v: u32) -> vec3<f32> {
    return bitcast<vec3<f32>>(texel(vertex_texel(v)).xyz);
}

// The indexed record of `slot` (vertex indices, then the normal's bits): words 6 slot .. + 6 of
// the texels, so two texels, from the first word of one (even slots) or its third (odd).
fn indexed_record(slot: u32) -> array<u32, 6> {
    let first = (3u * slot) >> 1u;
    let t0 = texel(first);
    let t1 = texel(first + 1u);
    if (slot & 1u) == 0u {
        return array<u32, 6>(t0.x, t0.y, t0.z, t0.w, t1.x, t1.y);
    }
    return array<u32, 6>(t0.z, t0.w, t1.x, t1.y, t1.z, t1.w);
}

// An indexed triangle's corners and normal as packed records: (a, n.x), (b − a, n.y),
// (c − a, n.z).
fn packed_from_corners(a: vec3<f32>, b: vec3<f32>, c: vec3<f32>, n: vec3<f32>) -> array<vec4<f32>, 3> {
    return array<vec4<f32>, 3>(vec4<f32>(a, n.x), vec4<f32>(b - a, n.y), vec4<f32>(c - a, n.z));
}

// Triangle `slot` as packed records, whichever way it is stored.
fn triangle_records(slot: u32) -> array<vec4<f32>, 3> {
    if TRIANGLE_RECORDS == INDEXED_RECORDS {
        let r = indexed_record(slot);
        let n = bitcast<vec3<f32>>(vec3<u32>(r[3], r[4], r[5]));
        return packed_from_corners(indexed_vertex(r[0]), indexed_vertex(r[1]), indexed_vertex(r[2]), n);
    }
    return array<vec4<f32>, 3>(bitcast<vec4<f32>>(texel(3u * slot)), bitcast<vec4<f32>>(texel(3u * slot + 1u)),
        bitcast<vec4<f32>>(texel(3u * slot + 2u)));
}

// The projection of `p` on triangle `slot`, in world space (query.wgsl: project_point).
fn triangle_point(slot: u32, p: vec3<f32>) -> Projection {
    let r = triangle_records(slot);
    var proj = project_triangle(p - r[0].xyz, r[1].xyz, r[2].xyz, vec3<f32>(r[0].w, r[1].w, r[2].w));
    proj.point = proj.point + r[0].xyz;
    return proj;
}

// A child's half extents, from its packed box words `shape` (bvh::pack_oriented).
fn child_half_extents(shape: vec4<u32>, half_scale: f32) -> vec3<f32> {
    // Normal f16 (the host keeps them normal) to f32: move the fields, rebias the exponent.
    let half_bits = vec3<u32>(shape.x & 0xffffu, shape.x >> 16u, shape.y);
    return bitcast<vec3<f32>>((half_bits << vec3<u32>(13u)) + vec3<u32>(112u << 23u)) * half_scale;
}

// A child's entry: its squared distance from p (0 inside its oriented box).
fn child_entry(head: vec4<u32>, shape: vec4<u32>, half_scale: f32, p: vec3<f32>) -> MeshStackEntry {
    // Of norm at most 1, used as it is: the map never lengthens vectors (bvh::kernel_rotate).
    let q_bits = bitcast<vec4<i32>>(vec4<u32>(shape.z << 16u, shape.z, shape.w << 16u, shape.w));
    let q = vec4<f32>(q_bits >> vec4<u32>(16u)) * (1.0 / 32767.0);
    let half = child_half_extents(shape, half_scale);
    let local = rotate(vec4<f32>(-q.xyz, q.w), p - bitcast<vec3<f32>>(head.xyz));
    let outside = max(abs(local) - half, vec3<f32>(0.0));
    return MeshStackEntry(head.w, dot(outside, outside));
}

// nearest_slot's answers besides a slot.
const NO_SLOT: u32 = 0xffffffffu;
const OVERFLOW_SLOT: u32 = 0xfffffffeu;
// `MeshStackEntry::child` once the stack is empty.
const TRAVERSAL_END: u32 = 0xffffffffu;

// Rows are answered in params.round_count rounds (one dispatch each, see `round_row`), every
// row after the first round starting from the answer of an earlier row just before it.
// Queries arrive in Morton order, so that triangle is near and its distance a tight bound
// from the first step.
//
// Each kernel defines the loads, `load_node` and `load_triangle_pair`, and imports the walk's
// decisions (shared/walk.wgsl): mesh.wgsl for its own lane, mesh_subgroup.wgsl for its whole
// subgroup.

// Squared distance from p to the triangle of records r0, r1, r2.
fn triangle_distance2(r0: vec4<f32>, r1: vec4<f32>, r2: vec4<f32>, p: vec3<f32>) -> f32 {
    let proj = project_triangle(p - r0.xyz, r1.xyz, r2.xyz, vec3<f32>(r0.w, r1.w, r2.w));
    let delta = p - (proj.point + r0.xyz);
    return dot(delta, delta);
}

// Whether the last `nearest_slot` met no other triangle within `near_tie_slack` of its
// answer's distance, for jobs that ask (FIELD_UNIQUE_NEAREST): such a row has that answer on
// every adapter, and the host settles the others in f64 (engine::samples).
var<private> nearest_is_unique: bool;

// How near another triangle's distance may come to the nearest's before the row counts as a
// near-tie that another adapter's f32 rounding could decide the other way: 2^-18 of the
// coordinates' magnitude (the point's, and the mesh's extent, 2^14 half scales), far above
// the few ulps by which adapters' distances differ.
fn near_tie_slack(p: vec3<f32>, half_scale: f32) -> f32 {
    return (max_abs(p) + 16384.0 * half_scale) * (1.0 / 262144.0);
}

// The squared distance within which a walk looks, for a best of `distance2`: that distance
// grown by `slack` (a negative one, a lane that wants nothing, stays as it is).
fn reach_of(distance2: f32, slack: f32) -> f32 {
    if !has_field(FIELD_UNIQUE_NEAREST) || distance2 < 0.0 {
        return distance2;
    }
    let reach = sqrt(distance2) + slack;
    return reach * reach;
}

// The slot of the triangle nearest to p, starting from triangle `seed` (or NO_SLOT). A row
// that is not `wanted` (no row, or a non-finite point) asks for nothing. Where the row's walk is
// bounded (`bound2` > 0, the square of the bound: a band's rows need only distances within
// it), nothing farther is opened and NO_SLOT answers a row with no triangle that near. The
// walk starts at node `start` from the root (0: the root), whose subtree holds every triangle
// within the bound (`box_start_node`).
fn nearest_slot(p: vec3<f32>, seed: u32, wanted: bool, start: u32, bound2: f32) -> u32 {
    // `found` stays false until the first triangle is tested: no squared distance is too
    // large to be the answer (it may overflow to infinity far away).
    var found = false;
    var best_slot = 0u;
    var best_distance2 = 0.0;
    if !wanted {
        found = true;
        best_distance2 = -1.0;
    } else if seed != NO_SLOT {
        let delta = p - triangle_point(seed, p).point;
        found = true;
        best_slot = seed;
        best_distance2 = dot(delta, delta);
    }
    if wanted && bound2 > 0.0 && (!found || best_distance2 > bound2) {
        found = true;
        best_slot = NO_SLOT;
        best_distance2 = bound2;
    }
    var stack: array<MeshStackEntry, STACK_SIZE>;
    var top = 0u;
    // The child being opened; the nearer child of an opened node is opened next without a
    // trip through the stack.
    var current = MeshStackEntry((kind_ranges[KIND_COUNT].x + start) << LEAF_COUNT_BITS, 0.0);
    let half_scale = bitcast<f32>(kind_ranges[KIND_COUNT].w);
    // Where near-ties are asked for, boxes and leaves are opened within the best's distance
    // grown by the slack, so no triangle that near is left unseen, and the nearest of the
    // others (`rival_distance2`) is kept.
    var slack = 0.0;
    if has_field(FIELD_UNIQUE_NEAREST) {
        slack = near_tie_slack(p, half_scale);
    }
    var reach2 = reach_of(best_distance2, slack);
    var rival_distance2 = bitcast<f32>(0x7f800000u);
    loop {
        // Inner nodes are walked in a loop of their own that stops at the next leaf: software
        // adapters run every statement of a loop body on every step, so a leaf test inside
        // it would cost each node step as much as a leaf.
        while current.child != TRAVERSAL_END && (current.child & ((1u << LEAF_COUNT_BITS) - 1u)) == 0u {
            var pop = true;
            // A lane whose best is nearer than this node's box wants neither child: the box
            // holds both children's triangles.
            let wants_node = !found || current.distance2 <= reach2;
            if step_node(wants_node) {
                let node = load_node(current.child >> LEAF_COUNT_BITS);
                let left = child_entry(node[0], node[2], half_scale, p);
                let right = child_entry(node[1], node[3], half_scale, p);
                // Boxes too far to matter are never pushed, so they cost no step.
                let chosen = choose_children(
                    wants_node && (!found || left.distance2 <= reach2),
                    wants_node && (!found || right.distance2 <= reach2),
                    left.distance2 <= right.distance2,
                );
                let open_left = (chosen & OPEN_LEFT) != 0u;
                let open_right = (chosen & OPEN_RIGHT) != 0u;
                if open_left || open_right {
                    var near = left;
                    var far = right;
                    var open_far = open_right;
                    if !open_left || (open_right && (chosen & LEFT_FIRST) == 0u) {
                        near = right;
                        far = left;
                        open_far = open_left;
                    }
                    if open_far {
                        if top >= STACK_LIMIT {
                            return OVERFLOW_SLOT;
                        }
                        stack[top] = far;
                        top += 1u;
                    }
                    current = near;
                    pop = false;
                }
            }
            if pop {
                if top == 0u {
                    current.child = TRAVERSAL_END;
                } else {
                    top -= 1u;
                    current = stack[top];
                }
            }
        }
        if current.child == TRAVERSAL_END {
            break;
        }
        // `current` is a leaf.
        if any_lane(!found || current.distance2 <= reach2) {
            let first = current.child >> LEAF_COUNT_BITS;
            let count = current.child & ((1u << LEAF_COUNT_BITS) - 1u);
            // A leaf's triangles are in scene order (bvh::build), so its nearest with ties
            // to the lower index is the first strictly nearest; the scene indices are read
            // once per leaf, for a tie with the best so far (SPEC §2: the lower index wins).
            var leaf_slot = first;
            var leaf_distance2 = 0.0;
            // The leaf's second nearest, where near-ties are asked for.
            var leaf_second2 = bitcast<f32>(0x7f800000u);
            for (var k = 0u; k < count; k += 2u) {
                let both = k + 1u < count;
                let t = load_triangle_pair(first + k, both);
                let a = triangle_distance2(t[0], t[1], t[2], p);
                if has_field(FIELD_UNIQUE_NEAREST) && k != 0u {
                    leaf_second2 = min(leaf_second2, max(a, leaf_distance2));
                }
                if k == 0u || a < leaf_distance2 {
                    leaf_slot = first + k;
                    leaf_distance2 = a;
                }
                if both {
                    let b = triangle_distance2(t[3], t[4], t[5], p);
                    if has_field(FIELD_UNIQUE_NEAREST) {
                        leaf_second2 = min(leaf_second2, max(b, leaf_distance2));
                    }
                    if b < leaf_distance2 {
                        leaf_slot = first + k + 1u;
                        leaf_distance2 = b;
                    }
                }
            }
            // A walk's bound (best_slot NO_SLOT) gives way to a triangle at it, not beyond.
            let leaf_wins = !found || leaf_distance2 < best_distance2
                || (leaf_distance2 == best_distance2
                    && (best_slot == NO_SLOT || scene_index(leaf_slot) < scene_index(best_slot)));
            if has_field(FIELD_UNIQUE_NEAREST) {
                // The loser of the leaf's nearest and the best so far is a rival, unless
                // both are one triangle (the seed met again) or the best is no triangle.
                var loser2 = bitcast<f32>(0x7f800000u);
                if leaf_wins && found && best_slot < OVERFLOW_SLOT && best_slot != leaf_slot {
                    loser2 = best_distance2;
                } else if !leaf_wins && leaf_slot != best_slot {
                    loser2 = leaf_distance2;
                }
                rival_distance2 = min(rival_distance2, min(loser2, leaf_second2));
            }
            if leaf_wins {
                found = true;
                best_slot = leaf_slot;
                best_distance2 = leaf_distance2;
                reach2 = reach_of(best_distance2, slack);
            }
        }
        if top == 0u {
            break;
        }
        top -= 1u;
        current = stack[top];
    }
    nearest_is_unique = found && best_slot < OVERFLOW_SLOT && rival_distance2 > reach2;
    return best_slot;
}

fn write_nan_row(row: u32) {
    let nan = bitcast<f32>(params.nan_bits);
    write_hit(row, Hit(vec3<f32>(nan), nan, vec3<f32>(nan), -1));
}

// Writes the answer of `row` at `p`, whose walk (`walk_for`) found `slot`.
fn write_row(row: u32, p: vec3<f32>, walk: Walk, slot: u32) {
    if slot == OVERFLOW_SLOT {
        write_hit(row, Hit(p, 0.0, vec3<f32>(0.0), TRAVERSAL_OVERFLOW));
        return;
    }
    if slot == NO_SLOT {
        // No triangle within the walk's bound: farther than it, unsigned, no shape.
        write_hit(row, Hit(p, bitcast<f32>(0x7f800000u), vec3<f32>(0.0), -1));
        return;
    }
    // The winner's answer as query.wgsl's `finish` gives it for a triangle.
    let r = triangle_records(slot);
    let local = p - r[0].xyz;
    var proj = project_triangle(local, r[1].xyz, r[2].xyz, vec3<f32>(r[0].w, r[1].w, r[2].w));
    proj.point = proj.point + r[0].xyz;
    let delta = p - proj.point;
    let len = safe_length(delta);
    var normal = proj.normal;
    if len > 0.0 {
        normal = delta / len;
    }
    if walk.far && walk.bound2 > 0.0 && len * len > walk.bound2 {
        // A far row's walk was not bounded: its bound still answers as the walk's would.
        write_hit(row, Hit(p, bitcast<f32>(0x7f800000u), vec3<f32>(0.0), -1));
        return;
    }
    let index = scene_index(slot);
    var shape = index;
    if has_field(FIELD_UNIQUE_NEAREST) && nearest_is_unique && !walk.far {
        shape |= UNIQUE_NEAREST_SHAPE_BIT;
    }
    var distance = len;
    if PSEUDONORMAL_SIGNS != 0u {
        // As the host signs (GpuMesh::finish): a surface row (−0 inside) takes the
        // pseudonormal itself.
        let signed = pseudonormal_sign(index, slot, r, walk.point - r[0].xyz);
        distance = signed.sign * len;
        normal = select(signed.normal, signed.sign * normal, distance != 0.0);
    }
    write_hit(row, Hit(proj.point, distance, normal, i32(shape)));
}

fn slot_of(index: i32) -> u32 {
    if index < 0 {
        return NO_SLOT;
    }
    var scene = u32(index);
    if has_field(FIELD_UNIQUE_NEAREST) {
        scene &= ~UNIQUE_NEAREST_SHAPE_BIT;
    }
    return triangle_word(round_up_4(params.shape_count) + scene);
}

// Round r answers the multiples of SEED_STRIDE^(last round - r) that no earlier round
// answered, each seeded by the row an earlier round answered just before it.
fn round_row(thread: u32) -> u32 {
    var stride = 1u;
    for (var r = params.round + 1u; r < params.round_count; r++) {
        stride *= SEED_STRIDE;
    }
    if params.round > 0u {
        return (thread + thread / (SEED_STRIDE - 1u) + 1u) * stride;
    }
    return thread * stride;
}

// The slot of the triangle an earlier round found for the seed row of `row` (NO_SLOT in the
// first round).
fn round_seed(row: u32) -> u32 {
    if params.round == 0u {
        return NO_SLOT;
    }
    var seed_stride = SEED_STRIDE;
    for (var r = params.round + 1u; r < params.round_count; r++) {
        seed_stride *= SEED_STRIDE;
    }
    let seed = row - row % seed_stride;
    if !row_in_chunk(seed) {
        return NO_SLOT;
    }
    return slot_of(hit_shape(output_row(seed)));
}

