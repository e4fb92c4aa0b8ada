// The narrow phase of bodies against shapes (SPEC §9): support mappings of the convex kinds,
// GJK on the shapes' cores (spheres and capsules are a point and a segment swept by a ball) and
// EPA where the cores overlap. Twin: src/reference/gjk.rs, which follows the same steps in f64
// (EPA there rebuilds the hull each round instead of patching it). Every coordinate here is
// relative to the body's anchor (`bodies.wgsl`), so the differences GJK takes keep f32's
// precision at the size of the shapes, wherever they are.
#import shared/types
#import shared/math
// The importer (bodies.wgsl) provides `hull_corners` (a hull's face entries), `rolled` (a
// loop bound the compiler cannot see through), `loop_work` (the invocation's loop count) and
// `may_support` (whether a job's shapes may have a kind).

// A convex shape as GJK sees it: its record with the anchor made relative, the kind its support
// follows (lines and rays become segments), the ball its core is swept by, and where a hull's
// faces are (`bodies.wgsl`'s `hull_corners`).
struct Convex {
    s: Shape,
    kind: u32,
    radius: f32,
    faces_in_shape_data: bool,
}

// A point of the Minkowski difference body − target, and the body's point it came from (the
// target's is body − w).
struct Support {
    w: vec3<f32>,
    body: vec3<f32>,
}

// Where two shapes are nearest or how deep they overlap, relative to the body's anchor.
struct Contact {
    distance: f32,
    point_body: vec3<f32>,
    point_target: vec3<f32>,
    normal: vec3<f32>,
}

const GJK_ITERATIONS: u32 = 64u;
// GJK stops when no support point lies nearer along v than v itself, to this fraction of |v|².
const GJK_RELATIVE: f32 = 1.0e-6;
// Cores within this fraction of the pair's size touch: EPA answers them.
const GJK_TOUCH: f32 = 1.0e-6;
const EPA_VERTICES: u32 = 64u;
const EPA_FACES: u32 = 128u;
const EPA_FACE_WORDS: u32 = EPA_FACES / 32u;
const EPA_EDGES: u32 = 64u;
// EPA stops when the support along the nearest face's normal is no farther out than this
// fraction of the pair's size.
const EPA_RELATIVE: f32 = 2.0e-6;
// The distance `convex_contact` without EPA answers where the cores overlap: EPA decides.
const DEFERRED_DEPTH: f32 = -F32_BIG;
// The distance `convex_contact` answers for a pair it left farther apart than its `beyond`.
const BEYOND_DISTANCE: f32 = F32_BIG;
// Steps of `deepest_descent`, where EPA runs out of room, and its starts (the nearest faces).
const EPA_DESCENT_STEPS: u32 = 24u;
const EPA_DESCENT_STARTS: u32 = 4u;
// Directions sampled over the sphere (a Fibonacci spiral) where EPA stops unconverged: the two
// least depths among them start descents too.
const EPA_SAMPLED_DIRECTIONS: u32 = 64u;
const GOLDEN_ANGLE: f32 = 2.3999632;

fn conjugate(q: vec4<f32>) -> vec4<f32> {
    return vec4<f32>(-q.xyz, q.w);
}

fn farther(a: vec3<f32>, b: vec3<f32>, d: vec3<f32>) -> vec3<f32> {
    return select(a, b, dot(b, d) > dot(a, d));
}

// The unit direction within the disk perpendicular to `axis` farthest along `d`; zero when d
// is along the axis (every rim point is as far). Twin: gjk::disk_support.
fn disk_support(axis: vec3<f32>, d: vec3<f32>) -> vec3<f32> {
    let across = d - axis * dot(axis, d);
    let length_across = length(across);
    if length_across <= 1.0e-6 * length(d) {
        return vec3<f32>(0.0);
    }
    let unit = across / length_across;
    let again = unit - axis * dot(axis, unit);
    return again / max(length(again), 1.0e-30);
}

// The farthest point of the core along `d` (any point for d = 0), relative to the body's anchor.
// Each kind's case is compiled only where `may_support` (bodies.wgsl) says a job has it.
fn core_support(c: Convex, d: vec3<f32>) -> vec3<f32> {
    let s = c.s;
    let a = s.anchor.xyz;
    if (may_support(KIND_CAPSULE) || may_support(KIND_SEGMENT)) && (c.kind == KIND_CAPSULE || c.kind == KIND_SEGMENT) {
        return a + select(vec3<f32>(0.0), s.p0.xyz, dot(s.p0.xyz, d) > 0.0);
    }
    if may_support(KIND_TRIANGLE) && c.kind == KIND_TRIANGLE {
        return a + farther(farther(vec3<f32>(0.0), s.p0.xyz, d), s.p1.xyz, d);
    }
    if may_support(KIND_AABB) && c.kind == KIND_AABB {
        return a + select(-s.p0.xyz, s.p0.xyz, d > vec3<f32>(0.0));
    }
    if may_support(KIND_BOX) && c.kind == KIND_BOX {
        let local = rotate(conjugate(s.p1), d);
        return a + rotate(s.p1, select(-s.p0.xyz, s.p0.xyz, local > vec3<f32>(0.0)));
    }
    if may_support(KIND_WEDGE) && c.kind == KIND_WEDGE {
        // Vertices (±x, −y, −z), (±x, −y, +z), (±x, +y, +z) times the half extents.
        let local = rotate(conjugate(s.p1), d);
        let h = s.p0.xyz;
        let x = select(-h.x, h.x, local.x > 0.0);
        var best = vec3<f32>(x, -h.y, -h.z);
        best = farther(best, vec3<f32>(x, -h.y, h.z), local);
        best = farther(best, vec3<f32>(x, h.y, h.z), local);
        return a + rotate(s.p1, best);
    }
    if may_support(KIND_CORNER_WEDGE) && c.kind == KIND_CORNER_WEDGE {
        // The base (±x, −y, ±z) and the apex (+x, +y, −z) times the half extents.
        let local = rotate(conjugate(s.p1), d);
        let h = s.p0.xyz;
        let base = vec3<f32>(select(-h.x, h.x, local.x > 0.0), -h.y, select(-h.z, h.z, local.z > 0.0));
        return a + rotate(s.p1, farther(base, vec3<f32>(h.x, h.y, -h.z), local));
    }
    if may_support(KIND_CYLINDER) && c.kind == KIND_CYLINDER {
        let axis = s.p0.xyz;
        let end = select(vec3<f32>(0.0), axis * s.p0.w, dot(axis, d) > 0.0);
        return a + end + disk_support(axis, d) * s.p1.w;
    }
    if may_support(KIND_CONE) && c.kind == KIND_CONE {
        let axis = s.p0.xyz;
        let rim = disk_support(axis, d) * s.p1.w;
        return a + farther(rim, axis * s.p0.w, d);
    }
    if may_support(KIND_ELLIPSOID) && c.kind == KIND_ELLIPSOID {
        // x = R (r² ∘ d') / |r ∘ d'| with d' = Rᵀ d.
        let local = rotate(conjugate(s.p1), d);
        let scaled = s.p0.xyz * local;
        let length_scaled = length(scaled);
        if length_scaled == 0.0 {
            return a;
        }
        return a + rotate(s.p1, s.p0.xyz * scaled / length_scaled);
    }
    if may_support(KIND_CONVEX_HULL) && c.kind == KIND_CONVEX_HULL {
        let words = bitcast<vec3<u32>>(s.p0.xyz);
        var best = vec3<f32>(0.0);
        var best_dot = -F32_BIG;
        for (var k = 0u; k < words.y; k++) {
            let corners = hull_corners(words.x + 4u * k, c.faces_in_shape_data);
            for (var j = 1u; j < 4u; j++) {
                let dot_j = dot(corners[j].xyz, d);
                if dot_j > best_dot {
                    best_dot = dot_j;
                    best = corners[j].xyz;
                }
            }
        }
        return a + best;
    }
    // Spheres (their core is the centre), and kinds no record has.
    return a;
}

// The farthest point of the whole shape (core and ball) along `d`.
fn whole_support(c: Convex, d: vec3<f32>) -> vec3<f32> {
    return core_support(c, d) + unit_or_zero(d) * c.radius;
}

// A point of body − other along `d`: one support site for both shapes, in a loop `rolled`
// keeps rolled (a compiler inlines every call, and each copy of the kind switch is more for
// software adapters to build).
fn minkowski(body: Convex, other: Convex, d: vec3<f32>, whole: bool) -> Support {
    var points: array<vec3<f32>, 2>;
    for (var k = 0u; k < rolled(2u); k++) {
        var c = body;
        var along = d;
        if k == 1u {
            c = other;
            along = -d;
        }
        points[k] = core_support(c, along);
        if whole {
            points[k] += unit_or_zero(along) * c.radius;
        }
    }
    return Support(points[0] - points[1], points[0]);
}

// The point of a simplex nearest the origin: `count` of its vertices (`index`) with
// barycentric `weight`s; `inside` when the origin is inside a tetrahedron.
struct Nearest {
    count: u32,
    index: vec4<u32>,
    weight: vec4<f32>,
    inside: bool,
}

fn nearest_vertex(i: u32) -> Nearest {
    return Nearest(1u, vec4<u32>(i, 0u, 0u, 0u), vec4<f32>(1.0, 0.0, 0.0, 0.0), false);
}

fn nearest_on_segment(a: vec3<f32>, b: vec3<f32>, ia: u32, ib: u32) -> Nearest {
    let ab = b - a;
    let t = -dot(a, ab);
    let length2 = dot(ab, ab);
    if t <= 0.0 || length2 == 0.0 {
        return nearest_vertex(ia);
    }
    if t >= length2 {
        return nearest_vertex(ib);
    }
    let u = t / length2;
    return Nearest(2u, vec4<u32>(ia, ib, 0u, 0u), vec4<f32>(1.0 - u, u, 0.0, 0.0), false);
}

fn point_of(n: Nearest, w: ptr<function, array<vec3<f32>, 4>>) -> vec3<f32> {
    var p = vec3<f32>(0.0);
    for (var k = 0u; k < n.count; k++) {
        p += (*w)[n.index[k]] * n.weight[k];
    }
    return p;
}

// Ericson's nearest point of a triangle to the origin, by its Voronoi regions. Twin:
// gjk::on_triangle.
fn nearest_on_triangle(w: ptr<function, array<vec3<f32>, 4>>, ia: u32, ib: u32, ic: u32) -> Nearest {
    let a = (*w)[ia];
    let b = (*w)[ib];
    let c = (*w)[ic];
    let ab = b - a;
    let ac = c - a;
    let d1 = dot(ab, -a);
    let d2 = dot(ac, -a);
    if d1 <= 0.0 && d2 <= 0.0 {
        return nearest_vertex(ia);
    }
    let d3 = dot(ab, -b);
    let d4 = dot(ac, -b);
    if d3 >= 0.0 && d4 <= d3 {
        return nearest_vertex(ib);
    }
    let vc = d1 * d4 - d3 * d2;
    if vc <= 0.0 && d1 >= 0.0 && d3 <= 0.0 {
        return nearest_on_segment(a, b, ia, ib);
    }
    let d5 = dot(ab, -c);
    let d6 = dot(ac, -c);
    if d6 >= 0.0 && d5 <= d6 {
        return nearest_vertex(ic);
    }
    let vb = d5 * d2 - d1 * d6;
    if vb <= 0.0 && d2 >= 0.0 && d6 <= 0.0 {
        return nearest_on_segment(a, c, ia, ic);
    }
    let va = d3 * d6 - d5 * d4;
    if va <= 0.0 && d4 - d3 >= 0.0 && d5 - d6 >= 0.0 {
        return nearest_on_segment(b, c, ib, ic);
    }
    let denominator = va + vb + vc;
    if !(denominator > 0.0) {
        // A flat (collinear) triangle: the best of its edges.
        var best = nearest_on_segment(a, b, ia, ib);
        let on_ac = nearest_on_segment(a, c, ia, ic);
        let on_bc = nearest_on_segment(b, c, ib, ic);
        let pa = point_of(best, w);
        let pc = point_of(on_ac, w);
        if dot(pc, pc) < dot(pa, pa) {
            best = on_ac;
        }
        let pb = point_of(best, w);
        let pbc = point_of(on_bc, w);
        if dot(pbc, pbc) < dot(pb, pb) {
            best = on_bc;
        }
        return best;
    }
    let v = vb / denominator;
    let u = vc / denominator;
    return Nearest(3u, vec4<u32>(ia, ib, ic, 0u), vec4<f32>(1.0 - v - u, v, u, 0.0), false);
}

// The origin inside the tetrahedron, or the nearest point of its four faces (all of them, as
// the twin: a nearly flat tetrahedron gets the "which faces see it" signs wrong).
fn nearest_on_tetrahedron(w: ptr<function, array<vec3<f32>, 4>>) -> Nearest {
    let faces = array<vec4<u32>, 4>(vec4<u32>(0u, 1u, 2u, 3u), vec4<u32>(0u, 1u, 3u, 2u),
        vec4<u32>(0u, 2u, 3u, 1u), vec4<u32>(1u, 2u, 3u, 0u));
    let w0 = (*w)[0];
    let volume = dot(cross((*w)[1] - w0, (*w)[2] - w0), (*w)[3] - w0);
    var size = 0.0;
    for (var k = 1u; k < 4u; k++) {
        size = max(size, length((*w)[k] - w0));
    }
    var inside = abs(volume) > 1.0e-6 * size * size * size;
    for (var f = 0u; f < 4u; f++) {
        let face = faces[f];
        let a = (*w)[face.x];
        let n = cross((*w)[face.y] - a, (*w)[face.z] - a);
        inside = inside && dot(n, -a) * dot(n, (*w)[face.w] - a) > 0.0;
    }
    if inside {
        var n = nearest_vertex(0u);
        n.inside = true;
        return n;
    }
    var best = nearest_on_triangle(w, 0u, 1u, 2u);
    var best_p = point_of(best, w);
    for (var f = 1u; f < 4u; f++) {
        let face = faces[f];
        let candidate = nearest_on_triangle(w, face.x, face.y, face.z);
        let p = point_of(candidate, w);
        if dot(p, p) < dot(best_p, best_p) {
            best = candidate;
            best_p = p;
        }
    }
    return best;
}

// GJK's outcome: the simplex it ended on (`count` vertices, their weights), and whether the
// origin is inside it or within touching distance.
struct Simplex {
    count: u32,
    w: array<vec3<f32>, 4>,
    body: array<vec3<f32>, 4>,
    weight: vec4<f32>,
    overlapping: bool,
    // Left early: the cores are farther apart than the caller's `beyond`.
    beyond: bool,
    // The direction the last vertex was the support along: the difference lies behind it.
    direction: vec3<f32>,
}

// The simplex reduced to its point `v` (weights applied), as one vertex.
fn collapsed(sx: Simplex, v: vec3<f32>) -> Simplex {
    var one = sx;
    var body = vec3<f32>(0.0);
    for (var k = 0u; k < sx.count; k++) {
        body += sx.body[k] * sx.weight[k];
    }
    one.count = 1u;
    one.w[0] = v;
    one.body[0] = body;
    one.weight = vec4<f32>(1.0, 0.0, 0.0, 0.0);
    return one;
}

// GJK on the cores (`whole` false) or the whole shapes, from the direction `start`. `size` is
// the pair's size, the scale of its tolerances. Twin: gjk::gjk.
// `beyond`: a core distance past which the caller has no use for the answer (F32_BIG: none);
// GJK leaves as soon as a support plane shows the cores are farther apart than that.
fn gjk(body: Convex, other: Convex, whole: bool, start: vec3<f32>, size: f32, beyond: f32) -> Simplex {
    let touch = (GJK_TOUCH * size) * (GJK_TOUCH * size);
    // Stored, not declared zero: a compiler that inlines this function may zero a declared
    // variable once per invocation rather than once per call (lavapipe did, and the walk's
    // second target started from the first one's simplex).
    var sx: Simplex;
    sx.count = 0u;
    sx.overlapping = false;
    sx.beyond = false;
    // The first support is along -start (one support site in the loop: see `minkowski`).
    var v = start;
    if dot(start, start) == 0.0 {
        v = vec3<f32>(-1.0, 0.0, 0.0);
    }
    for (var iteration = 0u; iteration < GJK_ITERATIONS; iteration++) {
        // This iteration's loops (supports, the simplex's small loops), for the budget: about
        // a hundred Mesa loop passes a GJK (measured: 600 in a row were cut short, 500 not).
        loop_work += 14u;
        let vv = dot(v, v);
        if sx.count > 0u && vv <= touch {
            sx.overlapping = true;
            return sx;
        }
        let next = minkowski(body, other, -v, whole);
        // Every point x of the difference has x · v ≥ next.w · v: a lower bound of the distance.
        if dot(next.w, v) > beyond * sqrt(vv) {
            sx.beyond = true;
            return sx;
        }
        if sx.count == 0u {
            sx.count = 1u;
            sx.w[0] = next.w;
            sx.body[0] = next.body;
            sx.weight = vec4<f32>(1.0, 0.0, 0.0, 0.0);
            sx.direction = -v;
            v = next.w;
            continue;
        }
        // No point of the difference is nearer along v than v itself: v is the nearest.
        if vv - dot(v, next.w) <= GJK_RELATIVE * vv {
            break;
        }
        var repeated = false;
        for (var k = 0u; k < sx.count; k++) {
            repeated = repeated || all(sx.w[k] == next.w);
        }
        if repeated {
            if sx.count == 1u {
                break;
            }
            sx = collapsed(sx, v);
            continue;
        }
        var w = sx.w;
        var b = sx.body;
        w[sx.count] = next.w;
        b[sx.count] = next.body;
        let grown = sx.count + 1u;
        var nearest: Nearest;
        if grown == 2u {
            nearest = nearest_on_segment(w[0], w[1], 0u, 1u);
        } else if grown == 3u {
            nearest = nearest_on_triangle(&w, 0u, 1u, 2u);
        } else {
            nearest = nearest_on_tetrahedron(&w);
        }
        if nearest.inside {
            sx.count = 4u;
            sx.w = w;
            sx.body = b;
            sx.overlapping = true;
            return sx;
        }
        let nearer = point_of(nearest, &w);
        var uses_next = false;
        for (var k = 0u; k < nearest.count; k++) {
            uses_next = uses_next || nearest.index[k] == sx.count;
        }
        // A step that keeps the new support point goes on where rounding hides its gain (or
        // shows a loss below GJK_RELATIVE): near a curved edge the gain of one step is below
        // f32's resolution, while the next supports, around the nearest point, gain again.
        let gain = vv - dot(nearer, nearer);
        if gain < -GJK_RELATIVE * vv || (gain <= 0.0 && !uses_next) {
            if sx.count == 1u {
                break;
            }
            // Rounding keeps this simplex from improving on v (a nearly flat one, where the
            // shapes are curved): go on from v alone, a point of the difference with its
            // body's point, so the next step is at worst a line search towards the support.
            sx = collapsed(sx, v);
            continue;
        }
        for (var k = 0u; k < nearest.count; k++) {
            sx.w[k] = w[nearest.index[k]];
            sx.body[k] = b[nearest.index[k]];
        }
        sx.count = nearest.count;
        sx.weight = nearest.weight;
        sx.direction = -v;
        v = nearer;
    }
    var mixed = vec3<f32>(0.0);
    for (var k = 0u; k < sx.count; k++) {
        mixed += sx.w[k] * sx.weight[k];
    }
    sx.overlapping = dot(mixed, mixed) <= touch;
    return sx;
}

// A face's outward unit normal and distance from the origin (plane = (n, d)); a degenerate
// face gets d = F32_BIG, never the nearest.
fn face_plane(a: vec3<f32>, b: vec3<f32>, c: vec3<f32>) -> vec4<f32> {
    let n = cross(b - a, c - a);
    let len = length(n);
    if !(len > 0.0) {
        return vec4<f32>(0.0, 0.0, 0.0, F32_BIG);
    }
    let unit = n / len;
    return vec4<f32>(unit, dot(unit, a));
}

// Whether a face (its plane, a corner) sees the point `p` from outside, by more than
// `margin`: a point within rounding of a face's plane (the flat ends of cylinders and boxes
// give many) must not remove it, or the horizon stops being a simple loop.
fn sees(plane: vec4<f32>, corner: vec3<f32>, p: vec3<f32>, margin: f32) -> bool {
    return dot(plane.xyz, p - corner) > margin;
}

// Two shapes that touch without depth (a flat difference): the body's point, zero distance.
// Twin: gjk::touching.
fn touching(point: vec3<f32>) -> Contact {
    return Contact(0.0, point, point, vec3<f32>(0.0, 0.0, 1.0));
}

// EPA from a tetrahedron around the origin: the face of the difference nearest the origin, its
// depth and normal. Twin: gjk::epa.
fn epa(body: Convex, other: Convex, start: Simplex, size: f32) -> Contact {
    // Few and small arrays: a lane's arrays indexed at run time cost software adapters
    // pipeline build time in proportion to their words (96 vertices took a minute on
    // lavapipe), so faces are packed (`face_of`), and only their distances are kept.
    var w: array<vec3<f32>, EPA_VERTICES>;
    var b: array<vec3<f32>, EPA_VERTICES>;
    var faces: array<u32, EPA_FACES>;
    var distances: array<f32, EPA_FACES>;
    var edges: array<u32, EPA_EDGES>;
    for (var k = 0u; k < start.count; k++) {
        w[k] = start.w[k];
        b[k] = start.body[k];
    }
    // The first polytope holds GJK's last simplex, which holds the origin: a tetrahedron as it
    // is; a triangle with the supports on both sides of it (a double pyramid); a segment made a
    // triangle by a support off its line first. A lone vertex is a point of the boundary: they
    // touch.
    var vertex_count = start.count;
    var face_count = 0u;
    if start.count == 1u {
        return Contact(0.0, b[0], b[0] - w[0], -unit_or_zero(start.direction));
    }
    // One support site for every added vertex (see `minkowski`): for a segment, four around
    // it, the one farthest off its line kept (a triangle with the origin on its edge); for a
    // triangle, one on each side of it.
    for (var k = select(4u, 0u, start.count == 2u); k < rolled(6u) && start.count < 4u; k++) {
        var d: vec3<f32>;
        let along = unit_or_zero(w[1] - w[0]);
        if k < 4u {
            let side = any_perpendicular(along);
            let around = array<vec3<f32>, 4>(side, cross(along, side), -side, -cross(along, side));
            d = around[k];
        } else {
            let n = cross(w[1] - w[0], w[2] - w[0]);
            d = select(n, -n, k == 5u);
        }
        let next = minkowski(body, other, d, true);
        if k < 4u {
            let off = next.w - w[0];
            let off_line = length(off - along * dot(off, along));
            if k == 0u || off_line > length((w[2] - w[0]) - along * dot(w[2] - w[0], along)) {
                w[2] = next.w;
                b[2] = next.body;
            }
        } else {
            w[k - 1u] = next.w;
            b[k - 1u] = next.body;
        }
    }
    var first_faces = array<vec3<u32>, 6>(vec3<u32>(0u, 1u, 2u), vec3<u32>(0u, 3u, 1u),
        vec3<u32>(0u, 2u, 3u), vec3<u32>(1u, 3u, 2u), vec3<u32>(0u, 0u, 0u), vec3<u32>(0u, 0u, 0u));
    if start.count < 4u {
        for (var k = 0u; k < 2u; k++) {
            for (var e = 0u; e < 3u; e++) {
                first_faces[3u * k + e] = vec3<u32>(e, (e + 1u) % 3u, 3u + k);
            }
        }
        vertex_count = 5u;
        face_count = 6u;
    } else {
        face_count = 4u;
    }
    var centroid = vec3<f32>(0.0);
    for (var k = 0u; k < vertex_count; k++) {
        centroid += w[k];
    }
    centroid /= f32(vertex_count);
    for (var f = 0u; f < face_count; f++) {
        var face = first_faces[f];
        if dot(cross(w[face.y] - w[face.x], w[face.z] - w[face.x]), w[face.x] - centroid) < 0.0 {
            face = face.xzy;
        }
        faces[f] = pack_face(face);
        distances[f] = face_plane(w[face.x], w[face.y], w[face.z]).w;
    }
    let margin = 0.25 * EPA_RELATIVE * size;
    var nearest = 0u;
    var converged = false;
    loop {
        loop_work += 8u + 3u * face_count;
        nearest = 0u;
        for (var f = 1u; f < face_count; f++) {
            if distances[f] < distances[nearest] {
                nearest = f;
            }
        }
        let corners = face_of(faces[nearest]);
        let plane = face_plane(w[corners.x], w[corners.y], w[corners.z]);
        if plane.w == F32_BIG || vertex_count == EPA_VERTICES {
            break;
        }
        let next = minkowski(body, other, plane.xyz, true);
        if dot(next.w, plane.xyz) - plane.w <= EPA_RELATIVE * size {
            converged = true;
            break;
        }
        // The faces the new vertex sees go; the edges they leave unshared form the horizon.
        // Which faces see it is decided once (`seen_faces`, a bit each).
        var seen_faces: array<u32, EPA_FACE_WORDS>;
        for (var k = 0u; k < EPA_FACE_WORDS; k++) {
            seen_faces[k] = 0u;
        }
        var edge_count = 0u;
        var seen = 0u;
        var overflow = false;
        for (var f = 0u; f < face_count; f++) {
            let face = face_of(faces[f]);
            if !sees(face_plane(w[face.x], w[face.y], w[face.z]), w[face.x], next.w, margin) {
                continue;
            }
            seen_faces[f / 32u] |= 1u << (f % 32u);
            seen += 1u;
            for (var e = 0u; e < 3u; e++) {
                let edge = pack_edge(face[e], face[(e + 1u) % 3u]);
                let reverse = pack_edge(face[(e + 1u) % 3u], face[e]);
                var shared_at = EPA_EDGES;
                for (var k = 0u; k < edge_count; k++) {
                    if edges[k] == reverse {
                        shared_at = k;
                    }
                }
                if shared_at < EPA_EDGES {
                    edge_count -= 1u;
                    edges[shared_at] = edges[edge_count];
                } else if edge_count < EPA_EDGES {
                    edges[edge_count] = edge;
                    edge_count += 1u;
                } else {
                    overflow = true;
                }
            }
        }
        let kept = face_count - seen;
        // The faces seen must form a disk (its rim then has two edges more than it has
        // faces), and each new face must have an area and the origin behind it: otherwise
        // rounding has bent the polytope, and the nearest face found stands.
        var sound = !overflow && kept + edge_count <= EPA_FACES && edge_count == seen + 2u;
        for (var k = 0u; k < edge_count && sound; k++) {
            let edge = edges[k];
            let new_plane = face_plane(w[edge & 0xffu], w[edge >> 8u], next.w);
            sound = new_plane.w != F32_BIG && new_plane.w >= -margin;
        }
        if !sound {
            break;
        }
        var at = 0u;
        for (var f = 0u; f < face_count; f++) {
            if (seen_faces[f / 32u] & (1u << (f % 32u))) == 0u {
                faces[at] = faces[f];
                distances[at] = distances[f];
                at += 1u;
            }
        }
        w[vertex_count] = next.w;
        b[vertex_count] = next.body;
        for (var k = 0u; k < edge_count; k++) {
            let edge = edges[k];
            let face = vec3<u32>(edge & 0xffu, edge >> 8u, vertex_count);
            faces[kept + k] = pack_face(face);
            distances[kept + k] = face_plane(w[face.x], w[face.y], w[face.z]).w;
        }
        vertex_count += 1u;
        face_count = kept + edge_count;
    }
    // The nearest face found (the loop leaves the polytope as it chose it).
    let face = face_of(faces[nearest]);
    let plane = face_plane(w[face.x], w[face.y], w[face.z]);
    if plane.w == F32_BIG {
        return touching(b[0]);
    }
    if !converged {
        // Out of room before the face's support met it (curved shapes), or stopped where
        // rounding bent the polytope: its nearest faces' normals only start descents of the
        // depth along a direction, and the least depth found stands. The depth along a
        // direction has a local minimum at every face of a polytope: one start is not enough.
        // Two listed polytopes need no descent: their separating axes give the exact depth.
        var found = least_of_listed_axes(body, other, size);
        let descents = select(0u, EPA_DESCENT_STARTS + 2u, found.distance == -F32_BIG);
        // A stalled polytope's faces may all lie in the basin of a local minimum (a large
        // body against a tiny triangle: the triangle's own face), so the two least depths
        // among directions spread over the sphere start descents too.
        var sampled = array<vec3<f32>, 2>(plane.xyz, plane.xyz);
        var sampled_depth = array<f32, 2>(F32_BIG, F32_BIG);
        for (var k = 0u; k < rolled(select(0u, EPA_SAMPLED_DIRECTIONS, descents > 0u)); k++) {
            let z = 1.0 - 2.0 * (f32(k) + 0.5) / f32(EPA_SAMPLED_DIRECTIONS);
            let r = sqrt(max(1.0 - z * z, 0.0));
            let turn = GOLDEN_ANGLE * f32(k);
            let u = vec3<f32>(r * cos(turn), r * sin(turn), z);
            let depth = dot(minkowski(body, other, u, true).w, u);
            if depth < sampled_depth[0] {
                sampled[1] = sampled[0];
                sampled_depth[1] = sampled_depth[0];
                sampled[0] = u;
                sampled_depth[0] = depth;
            } else if depth < sampled_depth[1] {
                sampled[1] = u;
                sampled_depth[1] = depth;
            }
        }
        var last = nearest;
        var direction = plane.xyz;
        // One call site: each inlined copy of the descent costs software adapters build time.
        for (var start = 0u; start < rolled(descents); start++) {
            if start >= EPA_DESCENT_STARTS {
                direction = sampled[start - EPA_DESCENT_STARTS];
            } else if start > 0u {
                // The next face in (distance, index) order after `last`.
                var next_face = face_count;
                for (var f = 0u; f < face_count; f++) {
                    let after_last = distances[f] > distances[last]
                        || (distances[f] == distances[last] && f > last);
                    if after_last && (next_face == face_count || distances[f] < distances[next_face]) {
                        next_face = f;
                    }
                }
                if next_face == face_count {
                    continue; // no face left: on to the sampled starts
                }
                last = next_face;
                let corners = face_of(faces[next_face]);
                direction = face_plane(w[corners.x], w[corners.y], w[corners.z]).xyz;
            }
            let descended = deepest_descent(body, other, direction, size);
            if start == 0u || descended.distance > found.distance {
                found = descended;
            }
        }
        return found;
    }
    // The origin's projection on the face, in barycentric weights, gives the witnesses. Far
    // from the origin rounding can leave that projection off the face (the origin a hair
    // outside a polytope GJK said holds it): weights clamped to the face keep the witnesses
    // on their shapes, where extrapolated ones strayed by a whole unit at 3e4.
    let weights = clamped_weights(barycentric(plane.xyz * plane.w, w[face.x], w[face.y], w[face.z]));
    let point_body = b[face.x] * weights.x + b[face.y] * weights.y + b[face.z] * weights.z;
    let difference = w[face.x] * weights.x + w[face.y] * weights.y + w[face.z] * weights.z;
    // The face's normal n points out of body − other; the body leaves along −n.
    return Contact(-max(plane.w, 0.0), point_body, point_body - difference, -plane.xyz);
}

// The minimal translation by descent from the unit direction `start`: the depth along a
// direction n, h(n) = n · s(n) with s the difference's support, is at least the penetration
// depth, equal to it at the minimal translation's direction, and its gradient on the sphere is
// s's part across n. Steps shrink where h does not fall, and grow by the Barzilai-Borwein rule
// where it does; the smallest h found stands (moving by it separates the pair). Twin: the
// oracle's EPA, run to convergence.
fn deepest_descent(body: Convex, other: Convex, start: vec3<f32>, size: f32) -> Contact {
    var n = start;
    var best = minkowski(body, other, n, true);
    var depth = dot(best.w, n);
    var across = best.w - n * depth;
    var step = 1.0 / max(length(best.w), 1.0e-30);
    for (var k = 0u; k < EPA_DESCENT_STEPS; k++) {
        if length(across) <= GJK_RELATIVE * size {
            break;
        }
        let candidate = unit_or_zero(n - across * step);
        let next = minkowski(body, other, candidate, true);
        let next_depth = dot(next.w, candidate);
        if next_depth < depth {
            let next_across = next.w - candidate * next_depth;
            let moved = candidate - n;
            let turned = dot(moved, next_across - across);
            step = select(step * 2.0, dot(moved, moved) / turned, turned > 0.0);
            n = candidate;
            best = next;
            depth = next_depth;
            across = next_across;
        } else {
            step *= 0.25;
        }
    }
    return Contact(-max(depth, 0.0), best.body, best.body - best.w, -n);
}

// An EPA face's three vertex indices in one word, a byte each (EPA_VERTICES ≤ 256).
fn pack_face(face: vec3<u32>) -> u32 {
    return face.x | (face.y << 8u) | (face.z << 16u);
}

fn face_of(packed: u32) -> vec3<u32> {
    return vec3<u32>(packed & 0xffu, (packed >> 8u) & 0xffu, packed >> 16u);
}

// A directed edge's two vertex indices in one word.
fn pack_edge(tail: u32, head: u32) -> u32 {
    return tail | (head << 8u);
}

// Barycentric weights made those of a point of the triangle: negatives dropped, the rest
// scaled to sum to one.
fn clamped_weights(weights: vec3<f32>) -> vec3<f32> {
    let kept = max(weights, vec3<f32>(0.0));
    let sum = kept.x + kept.y + kept.z;
    if !(sum > 0.0) {
        return vec3<f32>(1.0, 0.0, 0.0);
    }
    return kept / sum;
}

fn barycentric(p: vec3<f32>, a: vec3<f32>, b: vec3<f32>, c: vec3<f32>) -> vec3<f32> {
    let v0 = b - a;
    let v1 = c - a;
    let v2 = p - a;
    let d00 = dot(v0, v0);
    let d01 = dot(v0, v1);
    let d11 = dot(v1, v1);
    let d20 = dot(v2, v0);
    let d21 = dot(v2, v1);
    let denominator = d00 * d11 - d01 * d01;
    if denominator == 0.0 {
        return vec3<f32>(1.0, 0.0, 0.0);
    }
    let v = (d11 * d20 - d01 * d21) / denominator;
    let u = (d00 * d21 - d01 * d20) / denominator;
    return vec3<f32>(1.0 - v - u, v, u);
}

// The contact of two convex shapes: GJK on the cores, their radii subtracted (exact for swept
// shapes, the depth too while the cores are apart); EPA on the whole shapes where the cores
// overlap, or, `with_epa` false, DEFERRED_DEPTH there. A pair found farther apart than
// `beyond` (F32_BIG: never) is left there, answered BEYOND_DISTANCE. `directed` false: the
// caller keeps only the distance, so GJK's direction is not straightened. Twin: gjk::body_contact.
fn convex_contact(body: Convex, other: Convex, start: vec3<f32>, size: f32, with_epa: bool, beyond: f32,
    directed: bool) -> Contact {
    // Every loop below runs at least once a call on software adapters, masked, taken or not.
    loop_work += 64u;
    let radii = body.radius + other.radius;
    var around: Simplex;
    // The cores first, then (where they overlap and are swept) the whole shapes: one GJK site.
    for (var round = 0u; round < 2u; round++) {
        // Past `beyond` by more than the rounding of a support plane's distance.
        let core_beyond = select(F32_BIG, beyond + radii + 1.0e-5 * size, round == 0u && beyond < F32_BIG);
        around = gjk(body, other, round == 1u, start, size, core_beyond);
        if around.beyond {
            return Contact(BEYOND_DISTANCE, vec3<f32>(0.0), vec3<f32>(0.0), vec3<f32>(0.0));
        }
        if round == 0u && !around.overlapping {
            var v = vec3<f32>(0.0);
            var point_body = vec3<f32>(0.0);
            for (var k = 0u; k < around.count; k++) {
                v += around.w[k] * around.weight[k];
                point_body += around.body[k] * around.weight[k];
            }
            let gap = length(v);
            var normal = v / gap;
            if directed {
                normal = unit_or_zero(straightened(body, other, around, v, size));
            }
            return Contact(gap - radii, point_body - normal * body.radius,
                point_body - v + normal * other.radius, normal);
        }
        if !with_epa {
            // The cores overlap: EPA is the caller's to run, later (bodies.wgsl defers it).
            return Contact(DEFERRED_DEPTH, vec3<f32>(0.0), vec3<f32>(0.0), vec3<f32>(0.0));
        }
        if radii == 0.0 {
            break;
        }
    }
    return epa(body, other, around, size);
}

// Whether `c`'s core is a point, a segment or a polyhedron: its support points are its
// vertices, so two of them that both weigh in GJK's last simplex span a line of its surface.
fn core_is_polytope(c: Convex) -> bool {
    return c.kind == KIND_SPHERE || c.kind == KIND_CAPSULE || c.kind == KIND_SEGMENT
        || c.kind == KIND_TRIANGLE || c.kind == KIND_AABB || c.kind == KIND_BOX
        || c.kind == KIND_WEDGE || c.kind == KIND_CORNER_WEDGE || c.kind == KIND_CONVEX_HULL;
}

// GJK's direction `v` between separate cores, made normal to the lines of the polytope cores'
// surfaces their witnesses lie on: where two vertices of such a core both weigh in the last
// simplex, its witness lies between them, and the exact direction is normal to that line.
// GJK's stop (|v|²'s relative gain) bounds the distance, not the direction (about
// √GJK_RELATIVE off), and where a witness lies on an edge the depth along a direction grows
// linearly away from the exact one: a cylinder on a capsule at size 1000 was 0.05° off, and
// a push by its depth left 0.475 of overlap. A correction larger than that bound would be a
// witness at a vertex, weighed by rounding, and is not made. Twin: none (gjk.rs stops in f64).
fn straightened(body: Convex, other: Convex, s: Simplex, v: vec3<f32>, size: f32) -> vec3<f32> {
    var simplex = s;
    var basis = array<vec3<f32>, 2>(vec3<f32>(0.0), vec3<f32>(0.0));
    var rank = 0u;
    let exact = vec2<bool>(core_is_polytope(body), core_is_polytope(other));
    // Pairs (i, j) of the simplex's vertices, each on the body's side then the target's.
    var first = array<u32, 6>(0u, 0u, 0u, 1u, 1u, 2u);
    var second = array<u32, 6>(1u, 2u, 3u, 2u, 3u, 3u);
    for (var pair = 0u; pair < rolled(12u); pair++) {
        let i = first[pair / 2u];
        let j = second[pair / 2u];
        let side = pair % 2u;
        if j >= simplex.count || simplex.weight[i] <= 0.0 || simplex.weight[j] <= 0.0 || !exact[side] {
            continue;
        }
        var d = simplex.body[i] - simplex.body[j];
        if side == 1u {
            d -= simplex.w[i] - simplex.w[j];
        }
        if length(d) <= GJK_TOUCH * size {
            continue;
        }
        let whole = length(d);
        for (var k = 0u; k < 2u; k++) {
            if k < rank {
                d -= basis[k] * dot(d, basis[k]);
            }
        }
        if length(d) <= 1.0e-3 * whole {
            continue;
        }
        if rank == 2u {
            return v; // three directions: the witnesses are vertices against a solid's inside
        }
        basis[rank] = d / length(d);
        rank += 1u;
    }
    var straight = v;
    for (var k = 0u; k < 2u; k++) {
        if k < rank {
            straight -= basis[k] * dot(straight, basis[k]);
        }
    }
    // cos² of the turn at least 1 − 1e-5: a turn of at most 0.18°.
    if dot(straight, straight) < (1.0 - 1.0e-5) * dot(v, v) {
        return v;
    }
    return straight;
}

// How many face normals and edge directions `polytope_direction` lists for `c` (x, y): the
// kinds whose core is a polytope with fixed faces (hulls' faces vary, so they are not listed).
fn polytope_counts(c: Convex) -> vec2<u32> {
    if ((may_support(KIND_AABB) && c.kind == KIND_AABB) || (may_support(KIND_BOX) && c.kind == KIND_BOX)) {
        return vec2<u32>(3u, 3u);
    }
    if may_support(KIND_WEDGE) && c.kind == KIND_WEDGE {
        return vec2<u32>(4u, 4u);
    }
    if may_support(KIND_CORNER_WEDGE) && c.kind == KIND_CORNER_WEDGE {
        return vec2<u32>(5u, 6u);
    }
    if may_support(KIND_TRIANGLE) && c.kind == KIND_TRIANGLE {
        return vec2<u32>(1u, 3u);
    }
    if may_support(KIND_SEGMENT) && c.kind == KIND_SEGMENT {
        return vec2<u32>(0u, 1u);
    }
    return vec2<u32>(0u, 0u);
}

// The k-th of `c`'s face normals then edge directions (not unit; zero where the shape is
// degenerate). A wrong one would only be ignored: the depth along any direction is at least
// the penetration depth.
fn polytope_direction(c: Convex, k: u32) -> vec3<f32> {
    let s = c.s;
    let h = s.p0.xyz;
    if may_support(KIND_TRIANGLE) && c.kind == KIND_TRIANGLE {
        let directions = array<vec3<f32>, 4>(cross(s.p0.xyz, s.p1.xyz), s.p0.xyz, s.p1.xyz, s.p1.xyz - s.p0.xyz);
        return directions[min(k, 3u)];
    }
    if may_support(KIND_SEGMENT) && c.kind == KIND_SEGMENT {
        return s.p0.xyz;
    }
    // The boxes and wedges, in their local frames: the axes, then the slopes.
    var local = vec3<f32>(0.0);
    let faces = polytope_counts(c).x;
    let along = select(k, k - faces, k >= faces);
    if along < 3u {
        local[along] = 1.0;
    } else if may_support(KIND_WEDGE) && c.kind == KIND_WEDGE {
        // The slope through the edges (·, −y, −z) and (·, +y, +z): its normal, its direction.
        local = select(vec3<f32>(0.0, h.y, h.z), vec3<f32>(0.0, h.z, -h.y), k < faces);
    } else if may_support(KIND_CORNER_WEDGE) && c.kind == KIND_CORNER_WEDGE {
        // The sides through the apex (+x, +y, −z) and the base's far edges; the apex's edges
        // to the base corners off its own axes.
        let slopes = array<vec3<f32>, 5>(vec3<f32>(0.0, h.z, h.y), vec3<f32>(-h.y, h.x, 0.0),
            vec3<f32>(h.x, h.y, 0.0), vec3<f32>(0.0, h.y, -h.z), vec3<f32>(h.x, h.y, -h.z));
        local = slopes[min(select(along - 1u, along - 3u, k < faces), 4u)];
    }
    if may_support(KIND_AABB) && c.kind == KIND_AABB {
        return local;
    }
    return rotate(s.p1, local);
}

// Where both cores are listed polytopes (`polytope_counts`) and overlap, the penetration depth
// is the least depth along their face normals and the crosses of their edge directions (the
// separating-axis test: the facets of a difference of polytopes have those normals), with the
// two supports along that axis as witnesses; distance −F32_BIG where no axis is listed. EPA
// asks for it where it stops unconverged on a polytope rounding bent: descents of the depth
// stall at its kinks there (two wedge pairs of 7,446 answered 6 % deep). Twin: the oracle's
// EPA in f64 (it rebuilds the hull each round and converges).
fn least_of_listed_axes(body: Convex, other: Convex, size: f32) -> Contact {
    let counts_body = polytope_counts(body);
    let counts_other = polytope_counts(other);
    let listed = counts_body.x + counts_body.y > 0u && counts_other.x + counts_other.y > 0u;
    let faces = counts_body.x + counts_other.x;
    let axes = select(0u, faces + counts_body.y * counts_other.y, listed);
    var best = Contact(-F32_BIG, vec3<f32>(0.0), vec3<f32>(0.0), vec3<f32>(0.0));
    // Each axis both ways; one support site (see `minkowski`).
    for (var k = 0u; k < rolled(2u * axes); k++) {
        let i = k / 2u;
        var first = body;
        var first_at = i;
        var second_at = counts_other.x;
        if i >= counts_body.x && i < faces {
            first = other;
            first_at = i - counts_body.x;
        } else if i >= faces {
            first_at = counts_body.x + (i - faces) / counts_other.y;
            second_at += (i - faces) % counts_other.y;
        }
        var axis = polytope_direction(first, first_at);
        if i >= faces {
            axis = cross(axis, polytope_direction(other, second_at));
        }
        let u = unit_or_zero(axis) * select(1.0, -1.0, k % 2u == 1u);
        if all(u == vec3<f32>(0.0)) {
            continue;
        }
        let s = minkowski(body, other, u, true);
        let depth = dot(s.w, u);
        if depth < -best.distance - EPA_RELATIVE * size {
            best = Contact(-max(depth, 0.0), s.body, s.body - s.w, -u);
        }
    }
    return best;
}
