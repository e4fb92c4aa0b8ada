// Segment from the local origin to `d` swept by a ball. Twin: src/reference/capsule.rs.
fn project_capsule(p: vec3<f32>, d: vec3<f32>, radius: f32) -> Projection {
    let dd = dot(d, d);
    var t = 0.0;
    if dd > 0.0 {
        t = clamp(dot(p, d) / dd, 0.0, 1.0);
    }
    let on_axis = d * t;
    var offset = p - on_axis;
    // In the side's Voronoi region the offset is perpendicular to the axis, and in a cap's it
    // points away from the segment; a rounding residue that breaks this is removed, which
    // keeps q on the surface for points on or near the axis.
    let along = dot(offset, d);
    let in_cap = (t >= 1.0 && along > 0.0) || (t <= 0.0 && along < 0.0);
    if dd > 0.0 && !in_cap {
        offset = offset - d * (along / dd);
    }
    let len = length(offset);
    // On the axis (within ON_AXIS of the magnitudes it came from: `is_on_axis`) every
    // direction around it is closest: take the fixed perpendicular.
    var dir = any_perpendicular(d);
    if !is_on_axis(len, length(p) + length(on_axis)) {
        dir = offset / len;
    }
    return Projection(on_axis + dir * radius, length(p - on_axis) < radius, select(vec3<f32>(0.0), dir, radius > 0.0));
}

// Its record (GpuShape::from_shape): p0.xyz = b - a, p0.w = radius.
fn project_capsule_record(s: Shape, p: vec3<f32>) -> Projection {
    return project_capsule(p, s.p0.xyz, s.p0.w);
}
