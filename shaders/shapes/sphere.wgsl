// Ball of `radius` centred at the local origin. Twin: src/reference/sphere.rs.
fn project_sphere(p: vec3<f32>, radius: f32) -> Projection {
    // Scaled where |p|² overflows (far points), so the point stays on the sphere.
    let len = safe_length(p);
    // At the centre every boundary point is closest: take +X, as the reference does.
    var dir = vec3<f32>(1.0, 0.0, 0.0);
    if len > 0.0 {
        dir = p / len;
    }
    return Projection(dir * radius, len < radius, select(vec3<f32>(0.0), dir, radius > 0.0));
}

// Its record (GpuShape::from_shape): p0.w = radius.
fn project_sphere_record(s: Shape, p: vec3<f32>) -> Projection {
    return project_sphere(p, s.p0.w);
}
