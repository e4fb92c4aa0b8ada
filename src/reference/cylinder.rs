use super::Projection;
use crate::math::{DVec3, any_perpendicular};

/// Solid capped cylinder from the local origin along unit `axis` for `height`, of `radius`
/// (a zero `height` is a disk).
pub fn project_cylinder(p: DVec3, axis: DVec3, height: f64, radius: f64) -> Projection {
    let t = p.dot(axis);
    // Orthogonalised twice: for a point on or near the axis the first pass leaves a rounding
    // residue along it, which would tilt the radial direction off the side.
    let first = p - axis * t;
    let radial = first - axis * first.dot(axis);
    let rho = radial.length();
    // On the axis every radial direction is closest: take the fixed perpendicular.
    let dir = if rho > 0.0 {
        radial / rho
    } else {
        any_perpendicular(axis)
    };
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
