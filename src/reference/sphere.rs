use super::Projection;
use crate::math::DVec3;

/// Ball of `radius` centred at the local origin.
pub fn project_sphere(p: DVec3, radius: f64) -> Projection {
    let len = p.length();
    // At the centre every boundary point is closest: take +X, as the GPU does.
    let dir = if len > 0.0 { p / len } else { DVec3::X };
    Projection {
        point: dir * radius,
        inside: len < radius,
        normal: if radius > 0.0 { dir } else { DVec3::ZERO },
    }
}
