use super::Projection;
use crate::math::{DVec3, any_perpendicular, is_on_axis};

/// Segment from the local origin to `d` swept by a ball of `radius`.
pub fn project_capsule(p: DVec3, d: DVec3, radius: f64) -> Projection {
    let dd = d.length_squared();
    let t = if dd > 0.0 {
        (p.dot(d) / dd).clamp(0.0, 1.0)
    } else {
        0.0
    };
    let on_axis = d * t;
    let mut offset = p - on_axis;
    // In the side's Voronoi region the offset is perpendicular to the axis, and in a cap's it
    // points away from the segment; a rounding residue that breaks this is removed, which
    // keeps q on the surface for points on or near the axis.
    let along = offset.dot(d);
    let in_cap = (t >= 1.0 && along > 0.0) || (t <= 0.0 && along < 0.0);
    if dd > 0.0 && !in_cap {
        offset = offset - d * (along / dd);
    }
    let len = offset.length();
    // On the axis (within ON_AXIS of the magnitudes it came from: `is_on_axis`) every
    // direction around it is closest: take the fixed perpendicular.
    let dir = if is_on_axis(len, p.length() + on_axis.length()) {
        any_perpendicular(d)
    } else {
        offset / len
    };
    Projection {
        point: on_axis + dir * radius,
        inside: (p - on_axis).length() < radius,
        normal: if radius > 0.0 { dir } else { DVec3::ZERO },
    }
}
