use super::Projection;
use crate::math::DVec3;

/// Half-line from the local origin along unit `dir` (t ≥ 0); a zero `dir` is the origin.
pub fn project_ray(p: DVec3, dir: DVec3) -> Projection {
    Projection {
        point: dir * p.dot(dir).max(0.0),
        inside: false,
        normal: DVec3::ZERO,
    }
}
