// Segment from the local origin to `d`; zero length is the origin. Twin: src/reference/segment.rs.
fn project_segment(p: vec3<f32>, d: vec3<f32>) -> Projection {
    let dd = dot(d, d);
    var t = 0.0;
    if dd > 0.0 {
        t = clamp(dot(p, d) / dd, 0.0, 1.0);
    }
    return Projection(d * t, false, vec3<f32>(0.0));
}

// Its record (GpuShape::from_shape): p0.xyz = b - a.
fn project_segment_record(s: Shape, p: vec3<f32>) -> Projection {
    return project_segment(p, s.p0.xyz);
}
