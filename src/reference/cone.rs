//! Twin: shaders/shapes/cone.wgsl.

use super::Projection;
use crate::math::{Axial, DVec3, axial};

/// Solid right circular cone: base disk of `radius` centred at the local origin, apex at
/// `axis * height`. A zero `radius` is the segment to the apex, a zero `height` a disk.
/// In the half-plane (t along the axis, ρ from it) the cone is the triangle (0,0), (0,r),
/// (h,0); its boundary is the base edge and the slant edge.
pub fn project_cone(p: DVec3, axis: DVec3, height: f64, radius: f64) -> Projection {
    let Axial {
        t,
        radial,
        rho,
        dir,
    } = axial(p, axis);
    // The slant's outward unit normal in (t, ρ); zero for a point-like cone.
    let slant_length = (height * height + radius * radius).sqrt();
    let (nt, nr) = if slant_length > 0.0 {
        (radius / slant_length, height / slant_length)
    } else {
        (0.0, 0.0)
    };
    // Signed gaps to the base plane and the slant line (positive outside each); the face of
    // an inside or boundary point is the larger, the base on ties.
    let base_gap = -t;
    let slant_gap = t * nt + (rho - radius) * nr;
    let on_slant = slant_gap > base_gap;
    let slant_normal = if radius > 0.0 {
        axis * nt + dir * nr
    } else {
        DVec3::ZERO
    };
    let normal = if on_slant { slant_normal } else { -axis };
    let inside = base_gap < 0.0 && slant_gap < 0.0;
    let point = if inside {
        if on_slant {
            axis * (t - slant_gap * nt) + dir * (rho - slant_gap * nr)
        } else {
            radial
        }
    } else {
        // Nearest of the base edge and the slant edge, the base on ties.
        let on_base = dir * rho.min(radius);
        let s = if slant_length > 0.0 {
            ((t * height - (rho - radius) * radius) / (slant_length * slant_length)).clamp(0.0, 1.0)
        } else {
            0.0
        };
        let on_side = axis * (s * height) + dir * (radius - s * radius);
        if (p - on_side).length_squared() < (p - on_base).length_squared() {
            on_side
        } else {
            on_base
        }
    };
    Projection {
        point,
        inside,
        normal,
    }
}
