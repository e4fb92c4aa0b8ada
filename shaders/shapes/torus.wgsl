// Solid torus centred at the local origin about unit `axis`: the points within `minor` of the
// circle of radius `major`. In the half-plane (t along the axis, rho from it) it is the disk
// of radius `minor` about (0, major). Twin: src/reference/torus.rs.
fn project_torus(p: vec3<f32>, axis: vec3<f32>, major: f32, minor: f32) -> Projection {
    let seen = axial(p, axis);
    let t = seen.t;
    let rho = seen.rho;
    let dir = seen.dir;
    let off = vec2<f32>(t, rho - major);
    let off_core = safe_length(vec3<f32>(off, 0.0));
    // On the core circle every direction in the half-plane is closest: take the outward one.
    var u = vec2<f32>(0.0, 1.0);
    if off_core > 0.0 {
        u = off / off_core;
    }
    let normal = select(vec3<f32>(0.0), axis * u.x + dir * u.y, minor > 0.0);
    return Projection(axis * (u.x * minor) + dir * (major + u.y * minor), off_core < minor, normal);
}

// Its record (GpuShape::from_shape): p0 = unit axis and major radius, p1.w = minor radius.
fn project_torus_record(s: Shape, p: vec3<f32>) -> Projection {
    return project_torus(p, s.p0.xyz, s.p0.w, s.p1.w);
}
