// Box [-half, half] in its local frame (aabb, and box after rotation). Twin: src/reference/aabb.rs.
// Written with selects rather than a dynamic component index, which SIMD compilers spill.
fn project_box(p: vec3<f32>, half: vec3<f32>) -> Projection {
    // Nearest face of an inside point, or the face a boundary point is on: largest |p| - half,
    // first axis on ties.
    let gap = abs(p) - half;
    let is_x = gap.x >= gap.y && gap.x >= gap.z;
    let is_y = !is_x && gap.y >= gap.z;
    let axis = vec3<bool>(is_x, is_y, !is_x && !is_y);
    let side = select(vec3<f32>(-1.0), vec3<f32>(1.0), p >= vec3<f32>(0.0));
    let inside = all(gap < vec3<f32>(0.0));
    // Inside: push the point out along the nearest face's axis; outside: clamp.
    let point = select(clamp(p, -half, half), select(p, side * half, axis), inside);
    return Projection(point, inside, select(vec3<f32>(0.0), side, axis));
}

// Its records (GpuShape::from_shape): p0.xyz = half extents; a box's p1 = its rotation.
fn project_aabb_record(s: Shape, p: vec3<f32>) -> Projection {
    return project_box(p, s.p0.xyz);
}

fn project_box_record(s: Shape, p: vec3<f32>) -> Projection {
    let q = s.p1;
    return rotated_projection(q, project_box(rotate(vec4<f32>(-q.xyz, q.w), p), s.p0.xyz));
}
