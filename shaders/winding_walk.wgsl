// Winding-number signs of a mesh on the device (`--sign winding`): the hierarchy of
// winding::WindingTree, which is this walk's f64 twin. A cluster farther than `accuracy`
// radii from the point counts as its dipole, a nearer one term by term, so the answers match
// the host's up to f32 rounding; signs take the coarse accuracy first (`sign_winding_number`).
// Like the nearest-triangle walk it reads its records through hooks (`load_winding_node`,
// `load_winding_triangle_pair`) and decides through `any_lane` (shared/walk.wgsl), so mesh.wgsl
// and mesh_subgroup.wgsl each have an entry.
#import mesh_walk

// `sign_data` (mesh_walk.wgsl) holds WindingTree::gpu_words: a header (node count, first
// triangle word, triangle count), per node its clusters as (centre, radius) × 2 then (normal,
// first << LEAF_COUNT_BITS | count) × 2, then the triangles as (a, b, c), all moved like the
// mesh.

const INV_2PI: f32 = 0.15915494309189535;

// Where the triangles start (vec4 index), for the `load_winding_triangle_pair` hooks.
var<private> winding_triangles: u32;

// A node whose clusters some lanes still need, and whether this lane does.
struct WindingEntry {
    node: u32,
    need: bool,
}

// One triangle's signed solid angle at the origin over 4π (mesh::triangle_winding_number).
fn triangle_winding(a: vec3<f32>, b: vec3<f32>, c: vec3<f32>) -> f32 {
    let la = length(a);
    let lb = length(b);
    let lc = length(c);
    let numerator = dot(a, cross(b, c));
    let denominator = la * lb * lc + dot(a, b) * lc + dot(b, c) * la + dot(c, a) * lb;
    return atan2(numerator, denominator) * INV_2PI;
}

// Triangles first .. first + count of the tree's order, two at a time, at p; for lanes that
// `need` them.
fn add_triangles(first: u32, count: u32, need: bool, p: vec3<f32>, total: ptr<function, f32>) {
    for (var k = 0u; k < count; k += 2u) {
        let both = k + 1u < count;
        let t = load_winding_triangle_pair(first + k, both);
        var sum = triangle_winding(t[0].xyz - p, t[1].xyz - p, t[2].xyz - p);
        if both {
            sum += triangle_winding(t[3].xyz - p, t[4].xyz - p, t[5].xyz - p);
        }
        if need {
            *total += sum;
        }
    }
}

// One cluster (`sphere`: centre, radius; `head`: normal, reference) for the lanes that `need`
// it: its dipole where it is far, else its triangles or its node (pushed). False when the
// stack is full.
fn open_cluster(
    accuracy: f32,
    sphere: vec4<f32>,
    head: vec4<u32>,
    need: bool,
    p: vec3<f32>,
    total: ptr<function, f32>,
    stack: ptr<function, array<WindingEntry, STACK_SIZE>>,
    top: ptr<function, u32>,
) -> bool {
    let r = sphere.xyz - p;
    let distance = length(r);
    let far = distance > accuracy * sphere.w;
    if need && far {
        *total += dot(r, bitcast<vec3<f32>>(head.xyz)) * INV_2PI * 0.5
            / (distance * distance * distance);
    }
    let exact = need && !far;
    if !any_lane(exact) {
        return true;
    }
    let first = head.w >> LEAF_COUNT_BITS;
    let count = head.w & ((1u << LEAF_COUNT_BITS) - 1u);
    if count > 0u {
        add_triangles(first, count, exact, p, total);
        return true;
    }
    if *top >= STACK_LIMIT {
        return false;
    }
    (*stack)[*top] = WindingEntry(first, exact);
    *top += 1u;
    return true;
}

// The winding number at p with clusters taken whole past `accuracy` radii (NaN when the walk
// outgrows its stack); lanes that are not `wanted` walk along.
fn winding_number(p: vec3<f32>, wanted: bool, accuracy: f32) -> f32 {
    let header = sign_data[0];
    winding_triangles = header.y;
    var total = 0.0;
    if header.x == 0u {
        // A single triangle: no hierarchy.
        add_triangles(0u, header.z, true, p, &total);
        return total;
    }
    var stack: array<WindingEntry, STACK_SIZE>;
    stack[0] = WindingEntry(0u, wanted);
    var top = 1u;
    while top > 0u {
        top -= 1u;
        let entry = stack[top];
        if !any_lane(entry.need) {
            continue;
        }
        let node = load_winding_node(entry.node);
        if !open_cluster(accuracy, bitcast<vec4<f32>>(node[0]), node[2], entry.need, p, &total, &stack, &top)
            || !open_cluster(accuracy, bitcast<vec4<f32>>(node[1]), node[3], entry.need, p, &total, &stack, &top) {
            return bitcast<f32>(params.nan_bits);
        }
    }
    return total;
}

// The winding number that signs p, as WindingTree::is_inside decides: at
// WINDING_COARSE_ACCURACY, and again at WINDING_ACCURACY for the lanes whose coarse number is
// within WINDING_SIGN_MARGIN of ½ (or NaN).
fn sign_winding_number(p: vec3<f32>, wanted: bool) -> f32 {
    var w = winding_number(p, wanted, WINDING_COARSE_ACCURACY);
    let unsure = wanted && !(abs(w - 0.5) > WINDING_SIGN_MARGIN);
    if any_lane(unsure) {
        let fine = winding_number(p, unsure, WINDING_ACCURACY);
        if unsure {
            w = fine;
        }
    }
    return w;
}

// Signs `row` inside where the winding number passes ½, as GpuMesh::finish signs on the
// host: the distance negative (−0 on the surface), the normal flipped off the surface (a
// surface row keeps its face normal). A NaN winding number (stack overflow) makes the row an
// overflow row. Jobs with a winding sign always select the distance.
fn sign_row(row: u32, w: f32) {
    if w != w {
        write_hit(row, Hit(vec3<f32>(0.0), 0.0, vec3<f32>(0.0), TRAVERSAL_OVERFLOW));
    } else if w > 0.5 {
        let distance = hit_distance(row);
        set_hit_distance(row, -abs(distance));
        if has_field(FIELD_NORMAL) && distance != 0.0 {
            set_hit_normal(row, -hit_normal(row));
        }
    }
}
