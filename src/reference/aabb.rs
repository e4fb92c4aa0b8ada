use super::Projection;
use crate::math::DVec3;

/// Box `[-half, half]` in its local frame (used for `aabb` and, after rotation, `box`).
pub fn project_box(p: DVec3, half: DVec3) -> Projection {
    // The face nearest an inside point, or the face a boundary point lies on:
    // the axis where |p| − half is largest, first axis on ties.
    let gap = p.abs() - half;
    let mut axis = 0;
    for k in 1..3 {
        if gap.get(k) > gap.get(axis) {
            axis = k;
        }
    }
    let side = if p.get(axis) >= 0.0 { 1.0 } else { -1.0 };
    let inside = gap.x < 0.0 && gap.y < 0.0 && gap.z < 0.0;
    let point = if inside {
        // Voronoi region of the nearest face: push the point out along that axis.
        p.with(axis, side * half.get(axis))
    } else {
        p.clamp(-half, half)
    };
    Projection {
        point,
        inside,
        normal: DVec3::ZERO.with(axis, side),
    }
}
