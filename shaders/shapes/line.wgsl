// Infinite line through the local origin along unit `dir` (zero: the origin). Twin: src/reference/line.rs.
fn project_line(p: vec3<f32>, dir: vec3<f32>) -> Projection {
    return Projection(dir * dot(p, dir), false, vec3<f32>(0.0));
}

// Its record (GpuShape::from_shape): p0.xyz = unit direction.
fn project_line_record(s: Shape, p: vec3<f32>) -> Projection {
    return project_line(p, s.p0.xyz);
}
