use super::Projection;
use crate::math::{Axial, DVec3, axial};

/// Solid capped cylinder from the local origin along unit `axis` for `height`, of `radius`
/// (a zero `height` is a disk).
pub fn project_cylinder(p: DVec3, axis: DVec3, height: f64, radius: f64) -> Projection {
    let Axial {
        t,
        radial,
        rho,
        dir,
    } = axial(p, axis);
    // Signed gaps to the bottom cap, the top cap and the side (positive outside each face);
    // the nearest face of an inside point, or the face a boundary point is on, is the largest,
    // first on ties.
    let gaps = [-t, t - height, rho - radius];
    let normals = [-axis, axis, if radius > 0.0 { dir } else { DVec3::ZERO }];
    let mut face = 0;
    for k in 1..3 {
        if gaps[k] > gaps[face] {
            face = k;
        }
    }
    let inside = gaps.iter().all(|g| *g < 0.0);
    let point = if !inside {
        axis * t.clamp(0.0, height) + dir * rho.min(radius)
    } else {
        match face {
            0 => radial,
            1 => radial + axis * height,
            _ => axis * t + dir * radius,
        }
    };
    Projection {
        point,
        inside,
        normal: normals[face],
    }
}
