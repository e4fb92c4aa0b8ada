use super::{Projection, project_segment};
use crate::math::DVec3;

pub use crate::math::triangle_unit_normal;

/// Triangle with vertices at the local origin, `e0` and `e1`, and unit normal `n` (zero when
/// degenerate: then the triangle is the union of its three edges).
pub fn project_triangle(p: DVec3, e0: DVec3, e1: DVec3, n: DVec3) -> Projection {
    let edge_bc = e1 - e0;
    // Face region: the foot of the perpendicular lies inside all three edges.
    let in_face = n != DVec3::ZERO
        && e0.cross(p).dot(n) >= 0.0
        && edge_bc.cross(p - e0).dot(n) >= 0.0
        && (-e1).cross(p - e1).dot(n) >= 0.0;
    if in_face {
        return Projection {
            point: p - n * p.dot(n),
            inside: false,
            normal: n,
        };
    }
    // Edge regions: nearest of ab, bc, ca (first on ties).
    let candidates = [
        project_segment(p, e0).point,
        e0 + project_segment(p - e0, edge_bc).point,
        e1 + project_segment(p - e1, -e1).point,
    ];
    let mut best = candidates[0];
    for q in &candidates[1..] {
        if (p - *q).length_squared() < (p - best).length_squared() {
            best = *q;
        }
    }
    Projection {
        point: best,
        inside: false,
        normal: n,
    }
}
