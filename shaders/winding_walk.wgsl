// Winding-number signs of a mesh on the device (`--sign winding`), over the scene's own
// hierarchy (Barill et al. 2018): each child of a node is a cluster, whose area-weighted
// centroid and dipole (Σ ½ (b − a) × (c − a) of its triangles, layout::winding_clusters) are in
// `sign_data` and whose box bounds its radius. A cluster farther than `accuracy` radii from the
// point counts as its dipole, a nearer one term by term from the scene's records, so the
// answers match winding::WindingTree's, this walk's f64 twin over the same hierarchy, up to f32
// rounding; signs take the coarse accuracy first (`sign_winding_number`). Like the
// nearest-triangle walk it reads through hooks (`load_node`, `load_triangle_pair`,
// `load_clusters`) and decides through `any_lane` (shared/walk.wgsl), so mesh.wgsl and
// mesh_subgroup.wgsl each have an entry.
#import mesh_walk

// `sign_data` (mesh_walk.wgsl) holds twelve words a node: its left child's centroid and
// dipole, then its right child's, three f32 each.

// A child's cluster: its triangles' area-weighted centroid and dipole.
struct Cluster {
    centroid: vec3<f32>,
    dipole: vec3<f32>,
}

// A node's two clusters from its twelve words of `sign_data`.
fn node_clusters(v: array<vec4<f32>, 3>) -> array<Cluster, 2> {
    return array<Cluster, 2>(Cluster(v[0].xyz, vec3<f32>(v[0].w, v[1].xy)), Cluster(vec3<f32>(v[1].zw, v[2].x), v[2].yzw));
}

const INV_2PI: f32 = 0.15915494309189535;

// A node whose clusters some lanes still need, and whether this lane does.
struct WindingEntry {
    node: u32,
    need: bool,
}

// One triangle's signed solid angle at the origin over 4π (mesh::triangle_winding_number).
// Van Oosterom and Strackee's formula with a, b and c scaled to unit length, which leaves it
// unchanged: as written it multiplies three lengths, past f32's range once a side passes ~1e12.
fn triangle_winding(a: vec3<f32>, b: vec3<f32>, c: vec3<f32>) -> f32 {
    let ua = unit_or_zero(a);
    let ub = unit_or_zero(b);
    let uc = unit_or_zero(c);
    let numerator = dot(ua, cross(ub, uc));
    let denominator = 1.0 + dot(ua, ub) + dot(ub, uc) + dot(uc, ua);
    return atan2(numerator, denominator) * INV_2PI;
}

// The winding number at p of the triangle of records r0, r1, r2: (a, ·), (b − a, ·), (c − a, ·).
fn record_winding(r0: vec4<f32>, r1: vec4<f32>, r2: vec4<f32>, p: vec3<f32>) -> f32 {
    let a = r0.xyz - p;
    return triangle_winding(a, a + r1.xyz, a + r2.xyz);
}

// Triangles first .. first + count of the scene's leaf order, two at a time, at p; for lanes
// that `need` them.
fn add_triangles(first: u32, count: u32, need: bool, p: vec3<f32>, total: ptr<function, f32>) {
    for (var k = 0u; k < count; k += 2u) {
        let both = k + 1u < count;
        let t = load_triangle_pair(first + k, both);
        var sum = record_winding(t[0], t[1], t[2], p);
        if both {
            sum += record_winding(t[3], t[4], t[5], p);
        }
        if need {
            *total += sum;
        }
    }
}

// One child of a node (`head`: its box's centre and packed reference; `shape`: its packed box)
// with its `cluster`, for the lanes that `need` it: the dipole where it is far, else its
// triangles or its node (pushed). False when the stack is full.
fn open_cluster(
    accuracy: f32,
    head: vec4<u32>,
    shape: vec4<u32>,
    cluster: Cluster,
    need: bool,
    p: vec3<f32>,
    total: ptr<function, f32>,
    stack: ptr<function, array<WindingEntry, STACK_SIZE>>,
    top: ptr<function, u32>,
) -> bool {
    let r = cluster.centroid - p;
    let distance = length(r);
    // The box holds the triangles: none is farther from the centroid than this.
    let radius = length(cluster.centroid - bitcast<vec3<f32>>(head.xyz))
        + length(child_half_extents(shape, bitcast<f32>(kind_ranges[KIND_COUNT].w)));
    let far = distance > accuracy * radius;
    if need && far {
        // Divided a length at a time: the cube of a distance past ~1e12 overflows f32.
        *total += dot(r / distance, cluster.dipole) / distance / distance * (INV_2PI * 0.5);
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
// outgrows its stack); lanes that are not `wanted` walk along. The scene has a hierarchy:
// meshes too small for one are signed on the host.
fn winding_number(p: vec3<f32>, wanted: bool, accuracy: f32) -> f32 {
    var total = 0.0;
    var stack: array<WindingEntry, STACK_SIZE>;
    stack[0] = WindingEntry(kind_ranges[KIND_COUNT].x, wanted);
    var top = 1u;
    while top > 0u {
        top -= 1u;
        let entry = stack[top];
        if !any_lane(entry.need) {
            continue;
        }
        let node = load_node(entry.node);
        let clusters = load_clusters(entry.node);
        if !open_cluster(accuracy, node[0], node[2], clusters[0], entry.need, p, &total, &stack, &top)
            || !open_cluster(accuracy, node[1], node[3], clusters[1], entry.need, p, &total, &stack, &top) {
            return bitcast<f32>(params.nan_bits);
        }
    }
    return total;
}

// The accuracy of `winding_numbers` (a mesh in parts): 0 coarse, 1 fine.
override FINE_WINDING: u32 = 0u;

fn parts_accuracy() -> f32 {
    return select(WINDING_COARSE_ACCURACY, WINDING_ACCURACY, FINE_WINDING != 0u);
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
