use super::Projection;
use crate::math::DVec3;

/// Infinite line through the local origin along unit `dir`; a zero `dir` is the point at the origin.
pub fn project_line(p: DVec3, dir: DVec3) -> Projection {
    Projection {
        point: dir * p.dot(dir),
        inside: false,
        normal: DVec3::ZERO,
    }
}
