// Segment from the local origin to `d`; zero length is the origin. Twin: src/reference/segment.rs.
fn project_segment(p: vec3<f32>, d: vec3<f32>) -> Projection {
    let dd = dot(d, d);
    var t = 0.0;
    if dd > 0.0 {
        t = clamp(dot(p, d) / dd, 0.0, 1.0);
    }
    return Projection(d * t, false, vec3<f32>(0.0));
}
