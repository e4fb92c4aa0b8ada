// Plane through the local origin with unit `normal`. Twin: src/reference/plane.rs.
fn project_plane(p: vec3<f32>, normal: vec3<f32>) -> Projection {
    let side = dot(p, normal);
    return Projection(p - normal * side, side < 0.0, normal);
}

// Its record (GpuShape::from_shape): p0.xyz = unit normal.
fn project_plane_record(s: Shape, p: vec3<f32>) -> Projection {
    return project_plane(p, s.p0.xyz);
}
