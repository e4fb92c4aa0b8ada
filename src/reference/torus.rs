//! Twin: shaders/shapes/torus.wgsl.

use super::Projection;
use crate::math::{Axial, DVec3, axial};

/// Solid torus centred at the local origin about unit `axis`: the points within `minor` of
/// the circle of radius `major` (0 ≤ minor ≤ major). In the half-plane (t along the axis, ρ
/// from it) it is the disk of radius `minor` about (0, major).
pub fn project_torus(p: DVec3, axis: DVec3, major: f64, minor: f64) -> Projection {
    let Axial { t, rho, dir, .. } = axial(p, axis);
    let (dt, dr) = (t, rho - major);
    let off_core = dt.hypot(dr);
    // On the core circle every direction in the half-plane is closest: take the outward one.
    let (ut, ur) = if off_core > 0.0 {
        (dt / off_core, dr / off_core)
    } else {
        (0.0, 1.0)
    };
    let normal = if minor > 0.0 {
        axis * ut + dir * ur
    } else {
        DVec3::ZERO
    };
    Projection {
        point: axis * (ut * minor) + dir * (major + ur * minor),
        inside: off_core < minor,
        normal,
    }
}
