// Bodies against shapes (SPEC §9), shared by bodies.wgsl (one lane a body) and
// bodies_subgroup.wgsl (the 8 lanes of a subgroup walking together): `nearest_body` finds the
// nearest shape of a resident scene (its BVH walked with the body's box grown by the best
// distance so far, then the kinds scanned linearly), taking its walk decisions through
// shared/walk.wgsl's functions; `target_contact` answers one pair. The narrow phase is closed
// where that is exact (a sphere body or target: its centre's projection; a plane: the body's
// lowest point; capsules and segments against triangles, capsules and segments:
// body_closed_forms.wgsl), else GJK and EPA (gjk.wgsl); lines and rays become the segment of
// them the body can reach. Twin: src/reference/gjk.rs (`target_contact`).
#import query_walk
#import gjk
#import body_closed_forms

// Loop iterations an invocation may run, counted roughly (`loop_work`); 0: no limit. Adapters
// whose probe shows Mesa 22's loop limiter (it leaves every loop once an invocation has run
// 65,535 iterations in all) get one below it: a body that would need more is reported (as a
// traversal overflow) rather than answered from a cut walk.
override LOOP_BUDGET: u32 = 0u;
var<private> loop_work: u32;

// The kinds among the rows' bodies and among their targets (a scene's, or the paired ones), a
// bit each: the narrow phase is compiled for these only, since software adapters run every
// case of a switch on loaded data (a capsule job on a mesh compiles no GJK at all).
override BODY_KINDS: u32 = 0xffffffffu;
override TARGET_KINDS: u32 = 0xffffffffu;
// The kinds a support is taken of: the bodies', the targets', and segments where lines or
// rays stand for them.
override SUPPORT_KINDS: u32 = BODY_KINDS | TARGET_KINDS
    | ((((TARGET_KINDS >> KIND_LINE) | (TARGET_KINDS >> KIND_RAY)) & 1u) << KIND_SEGMENT);

fn has_kind(kinds: u32, kind: u32) -> bool {
    return (kinds & (1u << kind)) != 0u;
}

fn among_bodies(kind: u32) -> bool {
    return has_kind(BODY_KINDS, kind);
}

fn among_targets(kind: u32) -> bool {
    return has_kind(TARGET_KINDS, kind);
}

fn may_support(kind: u32) -> bool {
    return has_kind(SUPPORT_KINDS, kind);
}

// Whether some pair of the job's kinds has no closed form, so GJK and EPA are compiled. Closed:
// sphere bodies against anything; planes (and tori, refused on the host) against any body;
// sphere targets against bodies other than hulls (whose faces a projection would look for in
// the targets' place); capsules and segments against triangles, capsules and segments.
fn needs_gjk() -> bool {
    let closed_for_all = (1u << KIND_PLANE) | (1u << KIND_TORUS);
    let swept = (1u << KIND_CAPSULE) | (1u << KIND_SEGMENT);
    let hull = 1u << KIND_CONVEX_HULL;
    let sphere = 1u << KIND_SPHERE;
    let other_bodies = BODY_KINDS & ~(sphere | swept | hull);
    return ((BODY_KINDS & swept) != 0u
            && (TARGET_KINDS & ~(closed_for_all | sphere | swept | (1u << KIND_TRIANGLE))) != 0u)
        || (other_bodies != 0u && (TARGET_KINDS & ~(closed_for_all | sphere)) != 0u)
        || ((BODY_KINDS & hull) != 0u && (TARGET_KINDS & ~closed_for_all) != 0u);
}

// Candidates a body walk gathers before answering them: closed forms are cheap beside the
// walk, so larger batches; GJK is not, and the best so far culls more in smaller ones
// (docs/PERF.md, "Bodies, against parry3d").
const BODY_BATCH: u32 = 8u;
fn body_batch() -> u32 {
    return select(BODY_BATCH, 2u, needs_gjk());
}

// Candidates whose cores overlap that a body walk holds before answering them by EPA.
const DEFERRED_LIMIT: u32 = 8u;

// Whether the invocation has spent its loop budget.
fn out_of_loop_budget() -> bool {
    return LOOP_BUDGET != 0u && loop_work >= LOOP_BUDGET;
}

// Each row's body record; `body_paired` reads two a row, the body then its target. Hull faces of
// these records are in `shape_data` (a resident scene's own are in its texels).
@group(0) @binding(1) var<storage, read> bodies: array<Shape>;

// A hull's face entry (plane, a, b, c relative to its anchor): the rows' own in `shape_data`,
// a resident scene's where `load_hull_face` finds them.
fn hull_corners(at: u32, in_shape_data: bool) -> array<vec4<f32>, 4> {
    if in_shape_data {
        return array<vec4<f32>, 4>(shape_data[at], shape_data[at + 1u], shape_data[at + 2u], shape_data[at + 3u]);
    }
    return load_hull_face(at);
}

// `n`, as a loop bound the shader compiler cannot see through (`Params.round_count` is 1 for
// body jobs), so a loop of n support calls is not unrolled into n copies of the kind switch.
// Measured on lavapipe it did not shorten the pipeline build (the EPA arrays set that,
// gjk.wgsl); it stays as the cheap guard it is.
fn rolled(n: u32) -> u32 {
    return n * params.round_count;
}

// A body's answer as it is written: world points, and the target's index (-1: none).
struct BodyHit {
    contact: Contact,
    shape: i32,
}

fn radius_of(s: Shape) -> f32 {
    return select(0.0, s.p0.w, s.kind == KIND_SPHERE || s.kind == KIND_CAPSULE);
}

// `s` as GJK sees it, its anchor made relative to `origin`.
fn convex_of(s: Shape, origin: vec3<f32>, faces_in_shape_data: bool) -> Convex {
    var relative = s;
    relative.anchor = vec4<f32>(s.anchor.xyz - origin, 0.0);
    return Convex(relative, s.kind, radius_of(s), faces_in_shape_data);
}

fn is_finite_record(s: Shape) -> bool {
    return is_finite_vec3(s.anchor.xyz) && is_finite_vec3(s.p0.xyz) && is_finite_f32(s.p0.w)
        && is_finite_vec3(s.p1.xyz) && is_finite_f32(s.p1.w);
}

// A sphere body (centre at the origin): its centre's projection, signed where the target has
// an inside (surface mode), less the radius. Exact, as the point queries are; `near` as for
// `centre_direction`.
fn sphere_contact(kind: u32, other: Shape, radius: f32, near: f32) -> Contact {
    let proj = project_point_among(TARGET_KINDS, kind, other, vec3<f32>(0.0));
    let toward_centre = centre_direction(-proj.point, proj, other.p0.xyz, near);
    let sign = select(1.0, -1.0, proj.inside);
    return Contact(sign * length(proj.point) - radius, -toward_centre * radius, proj.point, toward_centre);
}

// The unit direction from a shape's surface towards a sphere's centre, `delta` from its
// projection `proj` (reversed inside a solid). Within `near` of the surface the offset is
// rounding, so the surface's normal there says which way (where it has one; else a direction
// square to `line`, a segment's, line's or ray's direction).
fn centre_direction(delta: vec3<f32>, proj: Projection, line: vec3<f32>, near: f32) -> vec3<f32> {
    let len = length(delta);
    let has_normal = dot(proj.normal, proj.normal) > 0.0;
    if len > near {
        let direction = delta / len * select(1.0, -1.0, proj.inside);
        // Farther out the offset's direction still carries the rounding of the pair's
        // coordinates (a few ulps of its size: 0.05 near), turned by up to that over its
        // length; a surface normal that agrees with it as closely is the precise direction (a
        // centre 2e-4 off a capsule turned the offset by 3e-4).
        if has_normal {
            let normal = normalize(proj.normal);
            let noise = 0.05 * near / len;
            if noise < 0.5 && dot(normal, direction) >= 1.0 - 0.5 * noise * noise {
                return normal;
            }
        }
        return direction;
    }
    if has_normal {
        return normalize(proj.normal);
    }
    return any_perpendicular(line);
}

// The contact of `body` with the scene or paired shape `other`; `target_faces_in_shape_data`
// says where a target hull's faces are. Each support or projection is called from one site
// (see gjk.wgsl's `minkowski`).
fn target_contact(body: Convex, body_size: f32, other: Shape, origin: vec3<f32>, target_faces_in_shape_data: bool, with_epa: bool, beyond: f32) -> Contact {
    var t = convex_of(other, origin, target_faces_in_shape_data);
    // The pair's size sets the tolerances; far from the origin the records' own rounding (a few
    // ulps of the world coordinates) is the floor.
    let world = max(abs(origin.x), max(abs(origin.y), abs(origin.z)));
    let pair_size = max(max(body_size, 0.2 * world), length(t.s.anchor.xyz));
    // A sphere's centre this near a surface is on it, within the rounding of f32 coordinates.
    let near = 1.0e-5 * pair_size;
    if among_bodies(KIND_SPHERE) && body.kind == KIND_SPHERE {
        return sphere_contact(other.kind, t.s, body.radius, near);
    }
    let refused = Contact(bitcast<f32>(params.nan_bits), vec3<f32>(0.0), vec3<f32>(0.0), vec3<f32>(0.0));
    if among_targets(KIND_TORUS) && other.kind == KIND_TORUS {
        // Refused on the host: a torus is not convex.
        return refused;
    }
    let unbounded = (among_targets(KIND_PLANE) || among_targets(KIND_LINE) || among_targets(KIND_RAY))
        && (other.kind == KIND_PLANE || other.kind == KIND_LINE || other.kind == KIND_RAY);
    if unbounded {
        // The body's extremes along the plane's normal or the line: its lowest point decides a
        // plane (the half-space below it); a line or ray is answered as the stretch of it
        // around the extremes, each end pushed out by the body's length along it (the twin's
        // `reachable`): a separated pair's nearest points lie between the extremes, and an
        // overlapping pair's minimal translation never leaves through an end the line lacks.
        let u = t.s.p0.xyz;
        var extremes: array<vec3<f32>, 2>;
        for (var k = 0u; k < rolled(2u); k++) {
            extremes[k] = whole_support(body, select(-u, u, k == 1u));
        }
        if other.kind == KIND_PLANE {
            let height = dot(u, extremes[0] - t.s.anchor.xyz);
            return Contact(height, extremes[0], extremes[0] - u * height, u);
        }
        let extreme_low = dot(extremes[0] - t.s.anchor.xyz, u);
        let extreme_high = dot(extremes[1] - t.s.anchor.xyz, u);
        let span = extreme_high - extreme_low;
        var low = extreme_low - span;
        var high = extreme_high + span;
        if other.kind == KIND_RAY {
            low = max(low, 0.0);
            high = max(high, 0.0);
        }
        t.s.anchor = vec4<f32>(t.s.anchor.xyz + u * low, 0.0);
        t.s.p0 = vec4<f32>(u * (high - low), 0.0);
        t.kind = KIND_SEGMENT;
    }
    // A line or ray's stretch may have moved the target's anchor.
    let size = max(pair_size, length(t.s.anchor.xyz));
    let swept_body = (among_bodies(KIND_CAPSULE) || among_bodies(KIND_SEGMENT))
        && (body.kind == KIND_CAPSULE || body.kind == KIND_SEGMENT);
    if swept_body && among_targets(KIND_TRIANGLE) && other.kind == KIND_TRIANGLE {
        return capsule_triangle_contact(body.s.anchor.xyz, body.s.p0.xyz, body.radius, t.s, size);
    }
    if swept_body && (among_targets(KIND_CAPSULE) || among_targets(KIND_SEGMENT))
        && (other.kind == KIND_CAPSULE || other.kind == KIND_SEGMENT) {
        return capsule_pair_contact(body.s.anchor.xyz, body.s.p0.xyz, body.radius, t.s.anchor.xyz,
            t.s.p0.xyz, t.radius, size);
    }
    if among_targets(KIND_SPHERE) && other.kind == KIND_SPHERE && body.kind != KIND_CONVEX_HULL {
        return sphere_target_contact(body.s, t.s.anchor.xyz, t.radius, near);
    }
    if !needs_gjk() {
        // Every pair of this job's kinds was answered above.
        return refused;
    }
    // Points and normals need GJK's direction straightened; distances do not.
    let directed = has_field(FIELD_POINT_BODY | FIELD_POINT_TARGET | FIELD_BODY_NORMAL);
    return convex_contact(body, t, -t.s.anchor.xyz, size, with_epa, beyond, directed);
}

// The body's box relative to its anchor (min, max): six supports from one site.
fn body_box(body: Convex) -> array<vec3<f32>, 2> {
    var extent: array<vec3<f32>, 2>;
    for (var k = 0u; k < rolled(6u); k++) {
        var d = vec3<f32>(0.0);
        d[k % 3u] = select(-1.0, 1.0, k >= 3u);
        let p = whole_support(body, d);
        extent[k / 3u][k % 3u] = p[k % 3u];
    }
    return extent;
}

fn no_body_hit() -> BodyHit {
    let nan = bitcast<f32>(params.nan_bits);
    return BodyHit(Contact(nan, vec3<f32>(nan), vec3<f32>(nan), vec3<f32>(nan)), -1);
}

// Packed as the `Bodies` fields (src/fields.rs): point_body, point_target, distance, shape,
// normal, each only where `FIELDS` has it.
fn write_body_hit(row: u32, hit: BodyHit, origin: vec3<f32>) {
    var at = row * body_field_words(0x1fu);
    var c = hit.contact;
    var point_body = c.point_body + origin;
    var point_target = c.point_target + origin;
    var distance = c.distance;
    var normal = c.normal;
    var shape = hit.shape;
    if shape == TRAVERSAL_OVERFLOW || loops_were_cut() {
        shape = TRAVERSAL_OVERFLOW;
        let marked = bitcast<f32>(OVERFLOW_BITS);
        point_body = vec3<f32>(marked);
        point_target = point_body;
        distance = marked;
        normal = point_body;
    }
    if has_field(FIELD_POINT_BODY) {
        hits[at] = bitcast<u32>(point_body.x);
        hits[at + 1u] = bitcast<u32>(point_body.y);
        hits[at + 2u] = bitcast<u32>(point_body.z);
        at += 3u;
    }
    if has_field(FIELD_POINT_TARGET) {
        hits[at] = bitcast<u32>(point_target.x);
        hits[at + 1u] = bitcast<u32>(point_target.y);
        hits[at + 2u] = bitcast<u32>(point_target.z);
        at += 3u;
    }
    if has_field(FIELD_BODY_DISTANCE) {
        hits[at] = bitcast<u32>(distance);
        at += 1u;
    }
    if has_field(FIELD_SHAPE) {
        hits[at] = bitcast<u32>(shape);
        at += 1u;
    }
    if has_field(FIELD_BODY_NORMAL) {
        hits[at] = bitcast<u32>(normal.x);
        hits[at + 1u] = bitcast<u32>(normal.y);
        hits[at + 2u] = bitcast<u32>(normal.z);
    }
}

// Words of the selected body fields among `bits`.
fn body_field_words(bits: u32) -> u32 {
    let f = FIELDS & bits;
    return select(0u, 3u, (f & FIELD_POINT_BODY) != 0u) + select(0u, 3u, (f & FIELD_POINT_TARGET) != 0u)
        + select(0u, 1u, (f & FIELD_BODY_DISTANCE) != 0u) + select(0u, 1u, (f & FIELD_SHAPE) != 0u)
        + select(0u, 3u, (f & FIELD_BODY_NORMAL) != 0u);
}

// Nearer: the smaller distance (the deeper overlap), ties to the lower shape index.
fn offer_body(c: Contact, index: u32, best: ptr<function, BodyHit>) {
    let d = c.distance;
    let b = (*best).contact.distance;
    if !(d == d) {
        return;
    }
    if (*best).shape < 0 || d < b || (d == b && i32(index) < (*best).shape) {
        *best = BodyHit(c, i32(index));
    }
}

// Distance between the body's box (lo, hi) and a child's box, 0 where they meet: a lower bound
// for every shape in the child.
fn box_gap(child: BvhChild, lo: vec3<f32>, hi: vec3<f32>) -> f32 {
    return length(max(max(child.min - hi, lo - child.max), vec3<f32>(0.0)));
}

// A ball around the body of record `s` (centre, radius), from its record alone and without
// a loop; radius -1 where there is none cheaply (hulls). Only the cases of `kinds` (the
// override BODY_KINDS) are compiled; every ball's centre lies in its body.
fn bounding_ball(kinds: u32, s: Shape) -> vec4<f32> {
    let a = s.anchor.xyz;
    let k = s.kind;
    if has_kind(kinds, KIND_SPHERE) && k == KIND_SPHERE {
        return vec4<f32>(a, s.p0.w);
    }
    if (has_kind(kinds, KIND_CAPSULE) || has_kind(kinds, KIND_SEGMENT)) && (k == KIND_CAPSULE || k == KIND_SEGMENT) {
        return vec4<f32>(a + s.p0.xyz * 0.5, length(s.p0.xyz) * 0.5 + radius_of(s));
    }
    if has_kind(kinds, KIND_TRIANGLE) && k == KIND_TRIANGLE {
        let centroid = (s.p0.xyz + s.p1.xyz) / 3.0;
        let far = max(length(centroid), max(length(s.p0.xyz - centroid), length(s.p1.xyz - centroid)));
        return vec4<f32>(a + centroid, far);
    }
    let boxes = (1u << KIND_AABB) | (1u << KIND_BOX) | (1u << KIND_WEDGE) | (1u << KIND_CORNER_WEDGE);
    if (kinds & boxes) != 0u && (boxes & (1u << k)) != 0u {
        return vec4<f32>(a, length(s.p0.xyz));
    }
    if (has_kind(kinds, KIND_CYLINDER) || has_kind(kinds, KIND_CONE)) && (k == KIND_CYLINDER || k == KIND_CONE) {
        let half = s.p0.w * 0.5;
        return vec4<f32>(a + s.p0.xyz * half, sqrt(half * half + s.p1.w * s.p1.w));
    }
    if has_kind(kinds, KIND_ELLIPSOID) && k == KIND_ELLIPSOID {
        return vec4<f32>(a, max(s.p0.x, max(s.p0.y, s.p0.z)));
    }
    return vec4<f32>(a, -1.0);
}

// How far the shape of record `s` lies from `centre`: the distance (0 inside a solid or below a
// plane), and a margin that covers its f32 error (SPEC §3's bound on the point queries) and
// the centre's rounding.
struct ShapeDistance {
    distance: f32,
    margin: f32,
}

fn shape_distance(s: Shape, centre: vec3<f32>, reach: f32) -> ShapeDistance {
    let proj = project_point_among(TARGET_KINDS, s.kind, s, centre);
    // A plane target is the half-space below it (SPEC §9).
    let inside = proj.inside && (is_solid(s.kind) || s.kind == KIND_PLANE);
    let d = select(length(proj.point - centre), 0.0, inside);
    let a = abs(centre);
    let b = abs(s.anchor.xyz);
    return ShapeDistance(d, 1.0e-5 * (max(a.x, max(a.y, a.z)) + max(b.x, max(b.y, b.z)) + reach + d));
}


// The nearest shape of the resident scene to the body of record `record`, as answered at its
// anchor `origin`. A body that is not `wanted` (no row, or a non-finite record, in
// bodies_subgroup.wgsl) takes part in the walk asking for nothing; its answer is not used.
// Which shapes and nodes the walk visits is decided for all its lanes together (any_lane,
// vote_step); which of them a lane tests, and how near, is its own.
fn nearest_body(record: Shape, origin: vec3<f32>, wanted: bool) -> BodyHit {
    let body = convex_of(record, origin, true);
    let extent = body_box(body);
    let body_size = max(length(extent[0]), length(extent[1]));
    let lo = extent[0] + origin;
    let hi = extent[1] + origin;
    // The body lies within `reach` of `centre`: its own ball where that is tighter than its
    // box's (a capsule's is about 0.6 of the box's, so a third of the triangles of a surface
    // it lies on are candidates).
    var centre = (lo + hi) * 0.5;
    var reach = length(hi - lo) * 0.5;
    let ball = bounding_ball(BODY_KINDS, record);
    if ball.w >= 0.0 && ball.w < reach {
        centre = ball.xyz;
        reach = ball.w;
    }
    // The body holds its ball's centre (every kind with a ball does; hulls have none), so no
    // shape is farther from the body than from that point: each shape's record bounds the
    // nearest distance from above before any narrow phase, and shapes and boxes beyond that
    // bound are culled from the start.
    let inner_offset = select(F32_BIG, length(ball.xyz - centre), ball.w >= 0.0);
    var bound = F32_BIG;
    var best = no_body_hit();
    // The BVH's leaves, then each kind's linear range, as runs of shapes [next, end) tested
    // at one site (see gjk.wgsl's `minkowski`).
    var stack: array<StackEntry, STACK_SIZE>;
    var top = 0u;
    let root = kind_ranges[KIND_COUNT];
    if root.y != 0u {
        stack[0] = StackEntry(root.x, 0u, 0.0);
        top = 1u;
    }
    var linear_kind = 0u;
    var next = 0u;
    var end = 0u;
    var walked = false;
    var overflowed = false;
    loop_work = 0u;
    // Candidates are gathered a batch at a time by a walk whose loop holds no other loop, then
    // answered by GJK: software adapters run every loop nested in a loop's body at least once
    // a step, masked (and Mesa counts each such pass towards its loop limiter), so a walk step
    // beside the narrow phase would cost as much as dozens. `asked` has bit k where this lane
    // wants batch[k] answered.
    var batch: array<u32, BODY_BATCH>;
    // Candidates whose cores overlap, answered by EPA once the walk ends or the list fills:
    // EPA's code in the batch loop would run, masked, for every candidate on software
    // adapters, where few need it (docs/PERF.md). Pruning needs only to know that some overlap
    // exists, not how deep. Each lane's own.
    var deferred: array<u32, DEFERRED_LIMIT>;
    var deferred_count = 0u;
    loop {
        loop {
            loop_work += 64u;
            // The lanes walk together, so they run out of budget together.
            if any_lane(out_of_loop_budget()) {
                overflowed = true;
                break;
            }
            // A shape or box farther than this cannot be nearer than what is known: the best
            // distance, 0 once any overlap is (an overlap may be of any depth), the records'
            // bound before any narrow phase has answered.
            var level = bound;
            if best.shape >= 0 {
                level = min(level, max(best.contact.distance, 0.0));
            }
            if deferred_count > 0u {
                level = 0.0;
            }
            var gathered = 0u;
            var asked = 0u;
            loop {
                loop_work += 2u;
                if next < end {
                    let s = load_shape(next);
                    next += 1u;
                    let to = shape_distance(s, centre, reach);
                    bound = min(bound, to.distance + inner_offset + to.margin);
                    level = min(level, bound);
                    // The body lies within `reach` of `centre`: a shape farther than the level
                    // plus the reach cannot be nearer.
                    let asks = wanted && to.distance - reach - to.margin <= level;
                    if !any_lane(asks) {
                        continue;
                    }
                    batch[gathered] = next - 1u;
                    asked |= select(0u, 1u << gathered, asks);
                    gathered += 1u;
                    if gathered == body_batch() {
                        break;
                    }
                    continue;
                }
                if top > 0u {
                    top -= 1u;
                    let entry = stack[top];
                    let wants = wanted && entry.distance <= level;
                    let inner = entry.count == 0u;
                    var left = StackEntry(0u, 0u, 0.0);
                    var right = left;
                    if inner && step_node(wants) {
                        let children = load_children(entry.first);
                        left = StackEntry(children[0].first, children[0].count, box_gap(children[0], lo, hi));
                        right = StackEntry(children[1].first, children[1].count, box_gap(children[1], lo, hi));
                    }
                    // One vote a step: which children to open, or whether any lane wants the
                    // leaf. Boxes too far to matter are never pushed.
                    let chosen = vote_step(
                        wants,
                        inner && wants && left.distance <= level,
                        inner && wants && right.distance <= level,
                        left.distance <= right.distance,
                    );
                    if !inner {
                        if (chosen & WANTED) != 0u {
                            next = entry.first;
                            end = entry.first + (entry.count & ((1u << LEAF_KIND_SHIFT) - 1u));
                        }
                        continue;
                    }
                    if (chosen & (OPEN_LEFT | OPEN_RIGHT)) != 0u && top + 2u > STACK_LIMIT {
                        overflowed = true;
                        break;
                    }
                    push_children(chosen, left, right, &stack, &top);
                    continue;
                }
                // LINEAR_KINDS (query_walk.wgsl): a mesh's triangles are all in the BVH, and
                // this branch, run masked at every step on software adapters, is compiled out.
                if LINEAR_KINDS != 0u && linear_kind < KIND_COUNT {
                    let range = kind_ranges[linear_kind];
                    next = range.x;
                    end = range.y;
                    linear_kind += 1u;
                    continue;
                }
                walked = true;
                break;
            }
            if overflowed {
                break;
            }
            for (var k = 0u; k < gathered; k++) {
                // Loaded by all lanes together, answered by those that asked.
                let s = load_shape(batch[k]);
                if (asked & (1u << k)) != 0u {
                    // GJK leaves a pair as soon as it is seen to be farther than the best so
                    // far (or than 0, once an overlap is deferred).
                    var beyond = F32_BIG;
                    if best.shape >= 0 {
                        beyond = max(best.contact.distance, 0.0);
                    }
                    if deferred_count > 0u {
                        beyond = 0.0;
                    }
                    let c = target_contact(body, body_size, s, origin, false, false, beyond);
                    if c.distance == DEFERRED_DEPTH {
                        deferred[deferred_count] = batch[k];
                        deferred_count += 1u;
                    } else if c.distance != BEYOND_DISTANCE {
                        offer_body(c, s.index, &best);
                    }
                }
            }
            if walked || any_lane(deferred_count + body_batch() > DEFERRED_LIMIT) {
                break;
            }
        }
        if overflowed {
            break;
        }
        for (var j = 0u; j < deferred_count; j++) {
            let s = load_own_shape(deferred[j]);
            offer_body(target_contact(body, body_size, s, origin, false, true, F32_BIG), s.index, &best);
        }
        deferred_count = 0u;
        if walked {
            break;
        }
    }
    if overflowed {
        best.shape = TRAVERSAL_OVERFLOW;
    }
    return best;
}
