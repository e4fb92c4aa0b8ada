#import shapes/triangle

// Exact closest points on the convex polyhedra of SPEC §1 (wedge, corner wedge), from their
// faces: an inside point projects onto the nearest face plane; an outside point onto the
// nearest of the faces' triangles. Twin: src/reference/polyhedron.rs.

const F32_BIG: f32 = 3.0e38;

struct ConvexSearch {
    point: vec3<f32>,
    dist2: f32,
    normal: vec3<f32>,
    plane: f32,
}

fn convex_start() -> ConvexSearch {
    return ConvexSearch(vec3<f32>(0.0), F32_BIG, vec3<f32>(0.0), -F32_BIG);
}

// Unit normal of the triangle a->b->c (right-handed), zero when degenerate.
fn unit_normal(a: vec3<f32>, b: vec3<f32>, c: vec3<f32>) -> vec3<f32> {
    let n = cross(b - a, c - a);
    let len = length(n);
    return select(vec3<f32>(0.0), n / len, len > 0.0);
}

fn convex_triangle(s: ptr<function, ConvexSearch>, p: vec3<f32>, n: vec3<f32>, a: vec3<f32>, b: vec3<f32>, c: vec3<f32>) {
    let q = a + project_triangle(p - a, b - a, c - a, n).point;
    let d2 = dot(p - q, p - q);
    if d2 < (*s).dist2 {
        (*s).dist2 = d2;
        (*s).point = q;
    }
}

fn convex_plane(s: ptr<function, ConvexSearch>, p: vec3<f32>, n: vec3<f32>, a: vec3<f32>) {
    let d = dot(p - a, n);
    if d > (*s).plane {
        (*s).plane = d;
        (*s).normal = n;
    }
}

// A triangular face, vertices counter-clockwise seen from outside.
fn convex_triangle_face(s: ptr<function, ConvexSearch>, p: vec3<f32>, a: vec3<f32>, b: vec3<f32>, c: vec3<f32>) {
    let n = unit_normal(a, b, c);
    convex_plane(s, p, n, a);
    convex_triangle(s, p, n, a, b, c);
}

// A planar quadrilateral face, vertices counter-clockwise seen from outside.
fn convex_quad_face(s: ptr<function, ConvexSearch>, p: vec3<f32>, a: vec3<f32>, b: vec3<f32>, c: vec3<f32>, d: vec3<f32>) {
    // The normal of a non-degenerate half, so a quad with one collapsed half keeps its plane.
    let n1 = unit_normal(a, b, c);
    let n = select(n1, unit_normal(a, c, d), all(n1 == vec3<f32>(0.0)));
    convex_plane(s, p, n, a);
    convex_triangle(s, p, n, a, b, c);
    convex_triangle(s, p, n, a, c, d);
}

fn convex_finish(s: ConvexSearch, p: vec3<f32>) -> Projection {
    let inside = s.plane < 0.0;
    return Projection(select(s.point, p - s.normal * s.plane, inside), inside, s.normal);
}

// Their faces' unit normals multiply four lengths: a large polyhedron is measured in units
// of `size_exponent` of its largest half extent.
fn project_wedge(p: vec3<f32>, h: vec3<f32>) -> Projection {
    let e = size_exponent(max_abs(h));
    return scaled_projection(project_wedge_scaled(p * pow2(-e), h * pow2(-e)), e);
}

fn project_corner_wedge(p: vec3<f32>, h: vec3<f32>) -> Projection {
    let e = size_exponent(max_abs(h));
    return scaled_projection(project_corner_wedge_scaled(p * pow2(-e), h * pow2(-e)), e);
}

fn scaled_projection(unit: Projection, e: i32) -> Projection {
    return Projection(unit.point * pow2(e), unit.inside, unit.normal);
}

// Roblox WedgePart in its local frame: the prism with vertices (±hx,−hy,−hz), (±hx,−hy,+hz),
// (±hx,+hy,+hz).
fn project_wedge_scaled(p: vec3<f32>, h: vec3<f32>) -> Projection {
    let a = h * vec3<f32>(-1.0, -1.0, -1.0);
    let b = h * vec3<f32>(1.0, -1.0, -1.0);
    let c = h * vec3<f32>(-1.0, -1.0, 1.0);
    let d = h * vec3<f32>(1.0, -1.0, 1.0);
    let e = h * vec3<f32>(-1.0, 1.0, 1.0);
    let f = h;
    var s = convex_start();
    convex_quad_face(&s, p, a, b, d, c); // bottom, -Y
    convex_quad_face(&s, p, c, d, f, e); // back, +Z
    convex_quad_face(&s, p, a, e, f, b); // slope
    convex_triangle_face(&s, p, a, c, e); // -X
    convex_triangle_face(&s, p, b, f, d); // +X
    return convex_finish(s, p);
}

// Roblox CornerWedgePart in its local frame: the pyramid with base (±hx,−hy,±hz) and apex
// (+hx,+hy,−hz).
fn project_corner_wedge_scaled(p: vec3<f32>, h: vec3<f32>) -> Projection {
    let b1 = h * vec3<f32>(-1.0, -1.0, -1.0);
    let b2 = h * vec3<f32>(1.0, -1.0, -1.0);
    let b3 = h * vec3<f32>(1.0, -1.0, 1.0);
    let b4 = h * vec3<f32>(-1.0, -1.0, 1.0);
    let apex = h * vec3<f32>(1.0, 1.0, -1.0);
    var s = convex_start();
    convex_quad_face(&s, p, b1, b2, b3, b4); // base, -Y
    convex_triangle_face(&s, p, b2, apex, b3); // +X
    convex_triangle_face(&s, p, b1, apex, b2); // -Z
    convex_triangle_face(&s, p, b1, b4, apex); // slope over the -X edge
    convex_triangle_face(&s, p, b4, b3, apex); // slope over the +Z edge
    return convex_finish(s, p);
}

// Their records (GpuShape::from_shape): p0.xyz = half extents, p1 = rotation.
fn project_wedge_record(s: Shape, p: vec3<f32>) -> Projection {
    let q = s.p1;
    return rotated_projection(q, project_wedge(rotate(vec4<f32>(-q.xyz, q.w), p), s.p0.xyz));
}

fn project_corner_wedge_record(s: Shape, p: vec3<f32>) -> Projection {
    let q = s.p1;
    return rotated_projection(q, project_corner_wedge(rotate(vec4<f32>(-q.xyz, q.w), p), s.p0.xyz));
}
