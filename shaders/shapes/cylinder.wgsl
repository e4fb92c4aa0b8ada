// Solid capped cylinder from the local origin along unit `axis` for `height` (0: a disk).
// Twin: src/reference/cylinder.rs.
fn project_cylinder(p: vec3<f32>, axis: vec3<f32>, height: f32, radius: f32) -> Projection {
    let seen = axial(p, axis);
    let t = seen.t;
    let radial = seen.radial;
    let rho = seen.rho;
    let dir = seen.dir;
    // Signed gaps to the bottom cap, the top cap and the side (positive outside each face);
    // the nearest face of an inside point, or the face a boundary point is on, is the largest,
    // first on ties.
    let gaps = vec3<f32>(-t, t - height, rho - radius);
    let is_bottom = gaps.x >= gaps.y && gaps.x >= gaps.z;
    let is_top = !is_bottom && gaps.y >= gaps.z;
    let side_normal = select(vec3<f32>(0.0), dir, radius > 0.0);
    let normal = select(select(side_normal, axis, is_top), -axis, is_bottom);
    let inside = all(gaps < vec3<f32>(0.0));
    var point = axis * clamp(t, 0.0, height) + dir * min(rho, radius);
    if inside {
        point = select(select(axis * t + dir * radius, radial + axis * height, is_top), radial, is_bottom);
    }
    return Projection(point, inside, normal);
}

// Its record (GpuShape::from_shape): p0 = unit axis and length, p1.w = radius.
fn project_cylinder_record(s: Shape, p: vec3<f32>) -> Projection {
    return project_cylinder(p, s.p0.xyz, s.p0.w, s.p1.w);
}
