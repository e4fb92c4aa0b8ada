// The point-query machinery shared by query.wgsl and query_subgroup.wgsl: projections on every
// shape kind, the answer rules of SPEC §2, linear scans and the BVH walk of a scene.
// KIND_* and MODE_* come from the generated prelude (src/gpu/shaders.rs).
#import shared/types
#import shared/math
#import shared/rows
#import shared/hits
// Every shape kind's projection, `is_solid` and the per-kind scans, generated from
// ShapeKind (src/gpu/shaders.rs).
#import generated/shapes
#import shared/walk
#import shared/texels
#import shared/point_texels

// Set per pipeline: a paired batch or a scene of one shape kind gets a pipeline with that kind
// baked in, so the compiler drops the other cases (software adapters run every case of a
// switch on loaded data). ANY_KIND keeps the general paths.
override ONLY_KIND: u32 = ANY_KIND;

// The kinds in the scene's BVH, a bit each: leaf tests are compiled for these kinds only, and
// 0 (no BVH) compiles the traversal out.
override BVH_KINDS: u32 = 0xffffffffu;
// A scene of one shape (of ONLY_KIND, no BVH): its query without a loop around it, which
// software adapters pay for (docs/PERF.md: 22–29 % of a one-shape query on lavapipe).
override ONE_SHAPE: u32 = 0u;

// The kinds with shapes scanned linearly, a bit each: the other kinds' loops are compiled out
// (software adapters run an empty loop's body once, masked).
override LINEAR_KINDS: u32 = 0xffffffffu;

@group(0) @binding(0) var<uniform> params: Params;
// A resident scene's shapes (six texels each, at least one) and then its BVH nodes (six texels
// each, of which the first four hold the children) are texels (shared/texels.wgsl); each
// kernel reads them through `load_shape` and `load_children`.
@group(0) @binding(2) var<storage, read> points: array<f32>;
// Shapes scanned linearly are grouped by kind: kind k's are shapes[x .. y) of kind_ranges[k].
// The BVH (all other shapes) is nodes[x .. x + y) rooted at x of kind_ranges[KIND_COUNT].
@group(0) @binding(4) var<uniform> kind_ranges: array<vec4<u32>, KIND_COUNT + 1u>;
// The variable-size parts of shape records: convex hull faces (shapes/convex_hull.wgsl).
@group(0) @binding(7) var<storage, read> shape_data: array<vec4<f32>>;

// Distance, sign and normal from a projection (SPEC §2). Twin: reference::finish.
fn finish(kind: u32, index: u32, p: vec3<f32>, proj: Projection) -> Hit {
    if params.mode == MODE_SOLID && is_solid(kind) && proj.inside {
        // Inside a solid: the point is its own closest point; d is 0 there, so its gradient is 0.
        return Hit(p, 0.0, vec3<f32>(0.0), i32(index));
    }
    let delta = p - proj.point;
    let len = safe_length(delta);
    let sign = select(1.0, -1.0, params.mode == MODE_SURFACE && proj.inside);
    var normal = proj.normal;
    if len > 0.0 {
        normal = delta / len * sign;
    }
    return Hit(proj.point, sign * len, normal, i32(index));
}

fn query_shape(kind: u32, s: Shape, index: u32, p: vec3<f32>) -> Hit {
    return finish(kind, index, p, project_point(kind, s, p));
}

// Nearer by |d|, ties to the lower shape index (SPEC §2); an empty `best` has shape -1.
fn is_nearer(hit: Hit, best: Hit) -> bool {
    let d = abs(hit.distance);
    let b = abs(best.distance);
    return best.shape < 0 || d < b || (d == b && hit.shape < best.shape);
}

// Distance from p to a child's box (0 inside): a lower bound for every shape in it.
fn box_distance(child: BvhChild, p: vec3<f32>) -> f32 {
    return length(max(max(child.min - p, p - child.max), vec3<f32>(0.0)));
}

// Whether a box at `distance` may hold a shape nearer than `best` (or tied with it: ties go
// by index).
fn may_hold_nearer(distance: f32, best: Hit) -> bool {
    return best.shape < 0 || distance <= abs(best.distance);
}

// `s`'s projection `proj` taken as the best answer if it is nearer.
fn offer(kind: u32, s: Shape, proj: Projection, p: vec3<f32>, best: ptr<function, Hit>) {
    let hit = finish(kind, s.index, p, proj);
    if is_nearer(hit, *best) {
        *best = hit;
    }
}

// A traversal stack entry: a child to open (first, count as in BvhChild).
struct StackEntry {
    first: u32,
    count: u32,
    // The child box's distance when pushed; checked again when popped, as `best` may have
    // improved since.
    distance: f32,
}

// The first texel of node `node` (after the shapes, at least one record).
fn node_texel(node: u32) -> u32 {
    return 6u * (max(params.shape_count, 1u) + node);
}

// A child from its two texels: (min, first) and (max, count).
fn child_of(min_first: vec4<u32>, max_count: vec4<u32>) -> BvhChild {
    return BvhChild(bitcast<vec3<f32>>(min_first.xyz), min_first.w, bitcast<vec3<f32>>(max_count.xyz), max_count.w);
}

// How many shapes of `kind` (a literal) `leaf` holds: all of them if it is of that kind, else
// none. The per-kind loops over linear ranges and leaves (`scan_every_kind`,
// `scan_leaf_every_kind`) are generated: each calls its kind's projection directly, as a
// compiler inlines every call before it folds a constant switch (a switch in each loop made
// the scene kernels' pipelines take seconds to build on lavapipe).
fn leaf_count(kind: u32, leaf: StackEntry) -> u32 {
    let leaf_kind = leaf.count >> LEAF_KIND_SHIFT;
    return select(0u, leaf.count & ((1u << LEAF_KIND_SHIFT) - 1u), leaf_kind == kind);
}

// Push the children `chosen` (vote_step's answer) opens, the one to open first on top.
fn push_children(chosen: u32, left: StackEntry, right: StackEntry,
    stack: ptr<function, array<StackEntry, STACK_SIZE>>, top: ptr<function, u32>) {
    var near = right;
    var far = left;
    var open_near = (chosen & OPEN_RIGHT) != 0u;
    var open_far = (chosen & OPEN_LEFT) != 0u;
    if (chosen & LEFT_FIRST) != 0u {
        near = left;
        far = right;
        open_near = (chosen & OPEN_LEFT) != 0u;
        open_far = (chosen & OPEN_RIGHT) != 0u;
    }
    if open_far {
        (*stack)[*top] = far;
        *top += 1u;
    }
    if open_near {
        (*stack)[*top] = near;
        *top += 1u;
    }
}

// The BVH: the traversal opens the nearer child first and never pushes a box farther than the
// best answer so far. A stack overflow marks the row instead of answering it. The stack is
// the caller's (WGSL zero-fills every local array).
// Inner nodes are walked in a loop of their own that stops at the next leaf worth opening; its
// shapes are tested outside that loop. Software adapters run every statement of a loop body on
// every step, so a leaf test inside the node loop would cost each node step as much as a leaf.
fn scan_bvh(p: vec3<f32>, best: ptr<function, Hit>, stack: ptr<function, array<StackEntry, STACK_SIZE>>) {
    let root = kind_ranges[KIND_COUNT];
    if BVH_KINDS == 0u || root.y == 0u {
        return;
    }
    // The root is an inner node.
    (*stack)[0] = StackEntry(root.x, 0u, 0.0);
    var top = 1u;
    loop {
        var leaf = StackEntry(0u, 0u, 0.0);
        while top > 0u {
            top -= 1u;
            let entry = (*stack)[top];
            // A query whose best is nearer than this entry's box wants nothing in it.
            let wants = may_hold_nearer(entry.distance, *best);
            let inner = entry.count == 0u;
            var left = StackEntry(0u, 0u, 0.0);
            var right = left;
            if inner && step_node(wants) {
                let children = load_children(entry.first);
                left = StackEntry(children[0].first, children[0].count, box_distance(children[0], p));
                right = StackEntry(children[1].first, children[1].count, box_distance(children[1], p));
            }
            // One vote a step: which children to open, or whether any query wants the leaf.
            // Boxes too far to matter are never pushed, so they cost no step.
            let chosen = vote_step(
                wants,
                inner && wants && may_hold_nearer(left.distance, *best),
                inner && wants && may_hold_nearer(right.distance, *best),
                left.distance <= right.distance,
            );
            if !inner {
                if (chosen & WANTED) != 0u {
                    leaf = entry;
                    break;
                }
                continue;
            }
            // Only a node that pushes a child can overflow (a stale one pushes nothing).
            if (chosen & (OPEN_LEFT | OPEN_RIGHT)) != 0u && top + 2u > STACK_LIMIT {
                (*best).shape = TRAVERSAL_OVERFLOW;
                return;
            }
            push_children(chosen, left, right, stack, &top);
        }
        if leaf.count == 0u {
            return;
        }
        scan_leaf_every_kind(leaf, p, best);
    }
}

// A resident scene's cell lists (src/gpu/cells.rs) are in `shape_data`, after a header whose
// first word is CELLS_MAGIC; a cell whose list would be too long starts with WALK_CELL (its
// points walk the BVH). Both, and CELL_INDEX_BITS, come from the generated prelude.

// A shape this lane alone reads (a cell's list; every shape in query.wgsl): six texels.
fn load_own_shape(i: u32) -> Shape {
    let head = texel(6u * i);
    return Shape(head.x, head.y, 0u, 0u,
        bitcast<vec4<f32>>(texel(6u * i + 1u)),
        bitcast<vec4<f32>>(texel(6u * i + 2u)),
        bitcast<vec4<f32>>(texel(6u * i + 3u)),
        bitcast<vec4<f32>>(texel(6u * i + 4u)),
        bitcast<vec4<f32>>(texel(6u * i + 5u)));
}

fn cell_word(i: u32) -> u32 {
    return bitcast<u32>(shape_data[i >> 2u][i & 3u]);
}

// A cell's list: its entries' first word, where each kind's run ends (a byte each, four to a
// word; the second word only for a BVH of more than four kinds), and the unit of its
// entries' distance bounds.
struct CellList {
    first: u32,
    ends: vec2<u32>,
    unit: f32,
}

// Words a cell takes: its first entry and its runs' ends (cells::words_per_cell).
fn cell_stride() -> u32 {
    return select(2u, 3u, countOneBits(BVH_KINDS) > 4u);
}

// Where the run of the BVH's `slot`th kind ends, counted from the list's first entry.
fn run_end(slot: u32, list: CellList) -> u32 {
    return extractBits(list.ends[slot / 4u], 8u * (slot % 4u), 8u);
}

// An entry is a shape's storage index in its low bits and, above them, a lower bound on its
// distance from any point of the cell in `unit`s; a kind's run is sorted by that bound.
const CELL_INDEX_MASK: u32 = (1u << CELL_INDEX_BITS) - 1u;

// Whether `entry`, and so every later entry of its run, is farther than `best` (strictly:
// a tie may still go to the lower index).
fn beyond_best(entry: u32, list: CellList, best: Hit) -> bool {
    return best.shape >= 0 && f32(entry >> CELL_INDEX_BITS) * list.unit > abs(best.distance);
}

// Where the run of the BVH's kind `kind` (a literal) lies in `list`, as entry words.
fn cell_run(kind: u32, list: CellList) -> vec2<u32> {
    let slot = countOneBits(BVH_KINDS & ((1u << kind) - 1u));
    // max: the index stays in range where the select discards it.
    let start = select(0u, run_end(max(slot, 1u) - 1u, list), slot > 0u);
    return list.first + vec2<u32>(start, run_end(slot, list));
}

// The shapes of p's cell, each kind in a loop of its own; false where p lies outside the
// grid (or is not wanted), whose answer is then the walk's.
fn scan_cells(p: vec3<f32>, wanted: bool, best: ptr<function, Hit>) -> bool {
    let lo = bitcast<vec3<f32>>(vec3<u32>(cell_word(1u), cell_word(2u), cell_word(3u)));
    let per_unit = bitcast<f32>(cell_word(4u));
    let dims = vec3<u32>(cell_word(5u), cell_word(6u), cell_word(7u));
    let g = (p - lo) * per_unit;
    if !wanted || any(g < vec3<f32>(0.0)) || any(g >= vec3<f32>(dims)) {
        return false;
    }
    let ijk = min(vec3<u32>(g), dims - 1u);
    let cell = cell_word(8u) + cell_stride() * ((ijk.x * dims.y + ijk.y) * dims.z + ijk.z);
    let first = cell_word(cell);
    if first == WALK_CELL {
        return false;
    }
    var ends = vec2<u32>(cell_word(cell + 1u), 0u);
    if cell_stride() == 3u {
        ends.y = cell_word(cell + 2u);
    }
    let list = CellList(cell_word(9u) + first, ends, bitcast<f32>(cell_word(10u)));
    scan_cell_every_kind(list, p, best);
    return true;
}

fn non_finite_hit() -> Hit {
    let nan = bitcast<f32>(params.nan_bits);
    return Hit(vec3<f32>(nan), nan, vec3<f32>(nan), -1);
}

// The texel of a resident scene's first hull face entry (scene::upload_bindings); 0 for paired
// rows, whose faces stay in `shape_data`.
fn hull_faces_texel() -> u32 {
    return kind_ranges[KIND_CONVEX_HULL].z;
}

fn load_point(row: u32) -> vec3<f32> {
    if POINT_TEXELS != 0u {
        return texel_point(row);
    }
    return vec3<f32>(points[3u * row], points[3u * row + 1u], points[3u * row + 2u]);
}

// The nearest shape to `p`. A query that is not `wanted` (no row, or a non-finite point, in
// query_subgroup.wgsl) takes part in the walk but asks for nothing; its answer is not used.
fn nearest_hit(p: vec3<f32>, wanted: bool) -> Hit {
    if ONE_SHAPE != 0u {
        return query_shape(ONLY_KIND, load_shape(0u), 0u, p);
    }
    if ONLY_KIND != ANY_KIND && BVH_KINDS == 0u {
        // A small scene of one kind: one loop compiled for that kind, shapes in scene order.
        var nearest: Hit;
        for (var i = 0u; i < params.shape_count; i++) {
            let hit = query_shape(ONLY_KIND, load_shape(i), i, p);
            // Strictly nearer: ties keep the lower index.
            if i == 0u || abs(hit.distance) < abs(nearest.distance) {
                nearest = hit;
            }
        }
        return nearest;
    }
    // A NaN distance that is not "no answer yet": no box or shape is ever nearer.
    var best = non_finite_hit();
    if !wanted {
        best.shape = 0;
    }
    var stack: array<StackEntry, STACK_SIZE>;
    if BVH_KINDS != 0u && cell_word(0u) == CELLS_MAGIC {
        let in_grid = scan_cells(p, wanted, &best);
        if any_lane(wanted && !in_grid) {
            // Lanes answered by their cells take part in the walk asking for nothing.
            var walked = best;
            if in_grid {
                walked = non_finite_hit();
                walked.shape = 0;
            }
            scan_bvh(p, &walked, &stack);
            if !in_grid {
                best = walked;
            }
        }
    } else {
        scan_bvh(p, &best, &stack);
    }
    // An overflow mark is final: the linear scans must not overwrite it with an answer.
    if best.shape == TRAVERSAL_OVERFLOW {
        return best;
    }
    // LINEAR_KINDS leaves the loops of the scene's kinds only.
    scan_every_kind(p, &best);
    return best;
}
