// Box [-half, half] in its local frame (aabb, and box after rotation). Twin: src/reference/aabb.rs.
fn project_box(p: vec3<f32>, half: vec3<f32>) -> Projection {
    // Nearest face of an inside point, or the face a boundary point is on: largest |p| - half,
    // first axis on ties.
    let gap = abs(p) - half;
    var axis = 0u;
    if gap.y > gap[axis] {
        axis = 1u;
    }
    if gap.z > gap[axis] {
        axis = 2u;
    }
    let side = select(-1.0, 1.0, p[axis] >= 0.0);
    let inside = all(gap < vec3<f32>(0.0));
    var point = clamp(p, -half, half);
    if inside {
        point = p;
        point[axis] = side * half[axis];
    }
    var normal = vec3<f32>(0.0);
    normal[axis] = side;
    return Projection(point, inside, normal);
}
