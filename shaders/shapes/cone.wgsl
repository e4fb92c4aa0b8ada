// Solid right circular cone: base disk of `radius` centred at the local origin, apex at
// `axis * height` (radius 0: the segment; height 0: a disk). In the half-plane (t along the
// axis, rho from it) the cone is the triangle (0,0), (0,r), (h,0). Twin: src/reference/cone.rs.
fn project_cone(p: vec3<f32>, axis: vec3<f32>, height: f32, radius: f32) -> Projection {
    let seen = axial(p, axis);
    let t = seen.t;
    let radial = seen.radial;
    let rho = seen.rho;
    let dir = seen.dir;
    // The slant's outward unit normal in (t, rho); zero for a point-like cone.
    let slant_length = sqrt(height * height + radius * radius);
    var nt = 0.0;
    var nr = 0.0;
    if slant_length > 0.0 {
        nt = radius / slant_length;
        nr = height / slant_length;
    }
    // Signed gaps to the base plane and the slant line (positive outside each); the face of an
    // inside or boundary point is the larger, the base on ties.
    let base_gap = -t;
    let slant_gap = t * nt + (rho - radius) * nr;
    let on_slant = slant_gap > base_gap;
    let slant_normal = select(vec3<f32>(0.0), axis * nt + dir * nr, radius > 0.0);
    let normal = select(-axis, slant_normal, on_slant);
    let inside = base_gap < 0.0 && slant_gap < 0.0;
    var point: vec3<f32>;
    if inside {
        point = select(radial, axis * (t - slant_gap * nt) + dir * (rho - slant_gap * nr), on_slant);
    } else {
        // Nearest of the base edge and the slant edge, the base on ties.
        let on_base = dir * min(rho, radius);
        var s = 0.0;
        if slant_length > 0.0 {
            s = clamp((t * height - (rho - radius) * radius) / (slant_length * slant_length), 0.0, 1.0);
        }
        let on_side = axis * (s * height) + dir * (radius - s * radius);
        point = select(on_base, on_side, dot(p - on_side, p - on_side) < dot(p - on_base, p - on_base));
    }
    return Projection(point, inside, normal);
}

// Its record (GpuShape::from_shape): p0 = unit axis and height, p1.w = radius.
fn project_cone_record(s: Shape, p: vec3<f32>) -> Projection {
    return project_cone(p, s.p0.xyz, s.p0.w, s.p1.w);
}
