// Half-line from the local origin along unit `dir` (zero: the origin). Twin: src/reference/ray.rs.
fn project_ray(p: vec3<f32>, dir: vec3<f32>) -> Projection {
    return Projection(dir * max(dot(p, dir), 0.0), false, vec3<f32>(0.0));
}

// Its record (GpuShape::from_shape): p0.xyz = unit direction.
fn project_ray_record(s: Shape, p: vec3<f32>) -> Projection {
    return project_ray(p, s.p0.xyz);
}
