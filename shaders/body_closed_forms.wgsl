// Closed forms of the narrow phase (SPEC §9) where they are exact and need no loop, which
// software adapters would run masked for every lane: a capsule (or segment) body against a
// triangle, a capsule or a segment, and any body but a hull against a sphere. Twin: the GJK and
// EPA of src/reference/gjk.rs (`target_contact`), a different method, so a blind spot here is
// not shared there. Coordinates are relative to the body's anchor, as in gjk.wgsl, whose
// `Contact` and tolerances these answers use.
#import shared/types
#import shared/math
#import shared/segment_pair
#import shapes/triangle

// A pair of points, one on each shape, and the square of their distance.
struct PointPair {
    on_segment: vec3<f32>,
    on_triangle: vec3<f32>,
    gap2: f32,
}

// `best`, or the pair (on_segment, on_triangle) where it is strictly nearer.
fn nearer_pair(best: PointPair, on_segment: vec3<f32>, on_triangle: vec3<f32>) -> PointPair {
    let gap2 = dot(on_segment - on_triangle, on_segment - on_triangle);
    if gap2 < best.gap2 {
        return PointPair(on_segment, on_triangle, gap2);
    }
    return best;
}

// The pair of segment [p, p + d] and edge [a, a + e] nearest each other.
fn nearer_edge_pair(best: PointPair, p: vec3<f32>, d: vec3<f32>, a: vec3<f32>, e: vec3<f32>) -> PointPair {
    let st = closest_parameters(d, a - p, e);
    return nearer_pair(best, p + d * st.x, a + e * st.y);
}

// The closest points of segment [p, p + d] and the triangle of record `t`, as (on the
// segment, on the triangle). The nearest pair has the segment's point at an end, the
// triangle's on an edge, or both where the segment crosses the face; each candidate is a
// pair of points on the two, so the nearest of them is the answer. Ties keep the first.
// Written out, not as a loop over an array, which SIMD compilers keep in memory.
fn segment_triangle_closest(p: vec3<f32>, d: vec3<f32>, t: Shape) -> array<vec3<f32>, 2> {
    let a = t.anchor.xyz;
    let e0 = t.p0.xyz;
    let e1 = t.p1.xyz;
    let n = t.p2.xyz;
    let end = p + d;
    var best = PointPair(p, p, F32_BIG);
    best = nearer_pair(best, p, a + project_triangle(p - a, e0, e1, n).point);
    best = nearer_pair(best, end, a + project_triangle(end - a, e0, e1, n).point);
    // Where the segment crosses the face's plane (a degenerate triangle has n = 0: no plane).
    let hp = dot(p - a, n);
    let hq = dot(end - a, n);
    if hp * hq <= 0.0 && hp != hq {
        let x = p + d * (hp / (hp - hq));
        best = nearer_pair(best, x, a + project_triangle(x - a, e0, e1, n).point);
    }
    best = nearer_edge_pair(best, p, d, a, e0);
    best = nearer_edge_pair(best, p, d, a + e0, e1 - e0);
    best = nearer_edge_pair(best, p, d, a + e1, -e1);
    return array<vec3<f32>, 2>(best.on_segment, best.on_triangle);
}

// `deepest` (xyz: the unit direction the body is pushed along, w: how far) or, if shorter,
// the push along `axis` (either way) that separates segment [p, p + d] from triangle `t`.
fn shorter_push(deepest: vec4<f32>, axis: vec3<f32>, p: vec3<f32>, d: vec3<f32>, t: Shape) -> vec4<f32> {
    let len = length(axis);
    if !(len > 0.0) {
        return deepest;
    }
    let u = axis / len;
    let s0 = dot(p, u);
    let s1 = dot(p + d, u);
    let a = t.anchor.xyz;
    let t0 = dot(a, u);
    let t1 = dot(a + t.p0.xyz, u);
    let t2 = dot(a + t.p1.xyz, u);
    let up = max(t0, max(t1, t2)) - min(s0, s1);
    let down = max(s0, s1) - min(t0, min(t1, t2));
    var best = deepest;
    if up < best.w {
        best = vec4<f32>(u, up);
    }
    if down < best.w {
        best = vec4<f32>(-u, down);
    }
    return best;
}

// A capsule (core [p, p + d], `radius`; a segment has radius 0) against triangle `t`; `size`
// is the pair's size, the scale of gjk.wgsl's touching tolerance. Cores apart: their closest
// points, the radius subtracted. Cores that meet: the penetration depth of the core and the
// triangle is the shortest push along a face normal of their Minkowski difference (the
// triangle's normal, and d × each edge; any other direction only bounds it from above), and
// the capsule's depth is that plus the radius; the witnesses are where the pushed core touches.
fn capsule_triangle_contact(p: vec3<f32>, d: vec3<f32>, radius: f32, t: Shape, size: f32) -> Contact {
    let closest = segment_triangle_closest(p, d, t);
    let between = closest[0] - closest[1];
    let gap = length(between);
    if gap > GJK_TOUCH * size {
        let normal = between / gap;
        return Contact(gap - radius, closest[0] - normal * radius, closest[1], normal);
    }
    let e0 = t.p0.xyz;
    let e1 = t.p1.xyz;
    // A direction that always counts (degenerate pairs have no face normal: any is as deep).
    var deepest = shorter_push(vec4<f32>(0.0, 0.0, 1.0, F32_BIG), any_perpendicular(d), p, d, t);
    deepest = shorter_push(deepest, t.p2.xyz, p, d, t);
    deepest = shorter_push(deepest, cross(d, e0), p, d, t);
    deepest = shorter_push(deepest, cross(d, e1 - e0), p, d, t);
    deepest = shorter_push(deepest, cross(d, e1), p, d, t);
    let u = deepest.xyz;
    let depth = max(deepest.w, 0.0);
    let touching = segment_triangle_closest(p + u * depth, d, t);
    return Contact(-(depth + radius), touching[0] - u * (depth + radius), touching[1], u);
}

// A capsule or segment body (core [p, p + d], `radius`) against a capsule or segment target
// (core [q, q + e], `target_radius`): the closest points of the cores, the radii subtracted.
// Cores that meet overlap by the two radii exactly (their Minkowski difference is flat, so the
// shortest push is across its plane, d × e, or any direction square to collinear cores).
fn capsule_pair_contact(p: vec3<f32>, d: vec3<f32>, radius: f32, q: vec3<f32>, e: vec3<f32>, target_radius: f32, size: f32) -> Contact {
    let st = closest_parameters(d, q - p, e);
    let on_body = p + d * st.x;
    let on_target = q + e * st.y;
    let between = on_body - on_target;
    let gap = length(between);
    var normal = between / gap;
    var distance = gap - radius - target_radius;
    if !(gap > GJK_TOUCH * size) {
        // Made square to a core exactly: for cores nearly parallel `across` is mostly rounding,
        // which may lean along them and lengthen the push (collinear capsules at size 1e-3
        // were pushed 20 % too little along such a normal to separate).
        let axis = select(d, e, dot(d, d) == 0.0);
        let across = cross(d, e);
        var square = across;
        if dot(axis, axis) > 0.0 {
            square = across - axis * (dot(across, axis) / dot(axis, axis));
        }
        normal = select(any_perpendicular(axis), normalize(square), dot(square, square) > 0.0);
        distance = -(radius + target_radius);
    }
    return Contact(distance, on_body - normal * radius, on_target + normal * target_radius, normal);
}

// A sphere target (centre `centre`, `target_radius`) against a body of any kind whose
// projection reads nothing beside its record (hulls excluded): the centre's projection onto
// the body, signed inside it, less the radius; `sphere_contact` (bodies.wgsl) with the roles
// swapped, `near` as there.
fn sphere_target_contact(body: Shape, centre: vec3<f32>, target_radius: f32, near: f32) -> Contact {
    let proj = project_point_among(BODY_KINDS, body.kind, body, centre);
    let delta = centre - proj.point;
    let toward_centre = centre_direction(delta, proj, body.p0.xyz, near);
    let sign = select(1.0, -1.0, proj.inside);
    return Contact(sign * length(delta) - target_radius, proj.point, centre - toward_centre * target_radius, -toward_centre);
}
