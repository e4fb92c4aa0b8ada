use super::Projection;
use crate::math::DVec3;

/// Plane through the local origin with unit `normal`; `p` is relative to `normal * offset`.
pub fn project_plane(p: DVec3, normal: DVec3) -> Projection {
    let side = p.dot(normal);
    Projection {
        point: p - normal * side,
        inside: side < 0.0,
        normal,
    }
}
