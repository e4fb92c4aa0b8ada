use super::Projection;
use crate::math::DVec3;

/// Segment from the local origin to `d`; a zero-length segment is the point at the origin.
pub fn project_segment(p: DVec3, d: DVec3) -> Projection {
    let dd = d.length_squared();
    let t = if dd > 0.0 {
        (p.dot(d) / dd).clamp(0.0, 1.0)
    } else {
        0.0
    };
    Projection {
        point: d * t,
        inside: false,
        normal: DVec3::ZERO,
    }
}
