#import shapes/segment

// Triangle (origin, e0, e1) with its unit normal `n` computed in f64 on the host (zero when
// degenerate: then the edges answer). Twin: src/reference/triangle.rs.
fn project_triangle(p: vec3<f32>, e0: vec3<f32>, e1: vec3<f32>, n: vec3<f32>) -> Projection {
    let edge_bc = e1 - e0;
    // Face region: the foot of the perpendicular lies inside all three edges.
    let in_face = any(n != vec3<f32>(0.0))
        && dot(cross(e0, p), n) >= 0.0
        && dot(cross(edge_bc, p - e0), n) >= 0.0
        && dot(cross(-e1, p - e1), n) >= 0.0;
    if in_face {
        return Projection(p - n * dot(p, n), false, n);
    }
    // Edge regions: nearest of ab, bc, ca (first on ties).
    var best = project_segment(p, e0).point;
    let on_bc = e0 + project_segment(p - e0, edge_bc).point;
    if dot(p - on_bc, p - on_bc) < dot(p - best, p - best) {
        best = on_bc;
    }
    let on_ca = e1 + project_segment(p - e1, -e1).point;
    if dot(p - on_ca, p - on_ca) < dot(p - best, p - best) {
        best = on_ca;
    }
    return Projection(best, false, n);
}

// Its record (GpuShape::from_shape): p0.xyz = b - a, p1.xyz = c - a, p2.xyz = unit normal.
fn project_triangle_record(s: Shape, p: vec3<f32>) -> Projection {
    return project_triangle(p, s.p0.xyz, s.p1.xyz, s.p2.xyz);
}
