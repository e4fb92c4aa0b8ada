//! Eberly's robust closest point on an ellipsoid ("Distance from a Point to an Ellipse, an
//! Ellipsoid, or a Hyperellipsoid", 2013): the point is reflected into the first octant and
//! the one root of a monotone function is bracketed and bisected to the last bit, so flat and
//! needle ellipsoids are as exact as round ones. Twin: shaders/shapes/ellipsoid.wgsl.

use super::Projection;
use crate::math::DVec3;

/// Enough halvings to exhaust an f64 bracket (Eberly's bound).
const MAX_BISECTIONS: usize = 1100;

/// Solid ellipsoid centred at the local origin with semi-axes `e` along X, Y, Z, sorted
/// e.x ≥ e.y ≥ e.z > 0 (`math::ellipsoid_frame`).
pub fn project_ellipsoid(p: DVec3, e: DVec3) -> Projection {
    let y = p.abs();
    let x = closest_in_octant([e.x, e.y, e.z], [y.x, y.y, y.z]);
    let signed = |xi: f64, pi: f64| if pi < 0.0 { -xi } else { xi };
    let point = DVec3::new(signed(x[0], p.x), signed(x[1], p.y), signed(x[2], p.z));
    let g = (y.x / e.x).powi(2) + (y.y / e.y).powi(2) + (y.z / e.z).powi(2) - 1.0;
    let normal = DVec3::new(
        point.x / (e.x * e.x),
        point.y / (e.y * e.y),
        point.z / (e.z * e.z),
    )
    .normalize_or_zero();
    Projection {
        point,
        inside: g < 0.0,
        normal,
    }
}

/// max|v| · ‖v / max|v|‖: no overflow or underflow on the way.
fn robust_length(v: &[f64]) -> f64 {
    let m = v.iter().fold(0.0f64, |m, x| m.max(x.abs()));
    if m == 0.0 {
        return 0.0;
    }
    m * v.iter().map(|x| (x / m) * (x / m)).sum::<f64>().sqrt()
}

/// The root t > 0 of Σ (nᵢ / (t + mᵢ))² = 1 by bisection; `g` is its value at t = 1. Eberly
/// solves for s = t − 1; near the medial sheet s → −1 and s + 1 cancels, while t keeps its
/// relative precision, so the closest point stays exact there too.
fn root(m: &[f64], n: &[f64], z_last: f64, g: f64) -> f64 {
    let mut t0 = z_last;
    let mut t1 = if g < 0.0 { 1.0 } else { robust_length(n) };
    let mut t = t0;
    for _ in 0..MAX_BISECTIONS {
        t = 0.5 * (t0 + t1);
        if t == t0 || t == t1 {
            break;
        }
        let value: f64 = n
            .iter()
            .zip(m)
            .map(|(n, m)| (n / (t + m)).powi(2))
            .sum::<f64>()
            - 1.0;
        if value > 0.0 {
            t0 = t;
        } else if value < 0.0 {
            t1 = t;
        } else {
            break;
        }
    }
    t
}

/// (a/b)² − 1 without cancellation.
fn excess(a: f64, b: f64) -> f64 {
    (a - b) * (a + b) / (b * b)
}

/// Closest point on the ellipse with semi-axes e0 ≥ e1 > 0 to (y0, y1), both ≥ 0.
fn closest_on_ellipse(e: [f64; 2], y: [f64; 2]) -> [f64; 2] {
    if y[1] > 0.0 {
        if y[0] > 0.0 {
            let z = [y[0] / e[0], y[1] / e[1]];
            let g = z[0] * z[0] + z[1] * z[1] - 1.0;
            if g == 0.0 {
                return y;
            }
            let r0 = (e[0] / e[1]).powi(2);
            let m0 = excess(e[0], e[1]);
            let t = root(&[m0, 0.0], &[r0 * z[0], z[1]], z[1], g);
            [r0 * y[0] / (t + m0), y[1] / t]
        } else {
            [0.0, e[1]]
        }
    } else {
        let numer = e[0] * y[0];
        let denom = e[0] * e[0] - e[1] * e[1];
        if numer < denom {
            let x0 = numer / denom;
            [e[0] * x0, e[1] * (1.0 - x0 * x0).sqrt()]
        } else {
            [e[0], 0.0]
        }
    }
}

/// Closest point on the ellipsoid with semi-axes e0 ≥ e1 ≥ e2 > 0 to y (every yᵢ ≥ 0).
fn closest_in_octant(e: [f64; 3], y: [f64; 3]) -> [f64; 3] {
    if y[2] > 0.0 {
        if y[1] > 0.0 {
            if y[0] > 0.0 {
                let z = [y[0] / e[0], y[1] / e[1], y[2] / e[2]];
                let g = z[0] * z[0] + z[1] * z[1] + z[2] * z[2] - 1.0;
                if g == 0.0 {
                    return y;
                }
                let r = [(e[0] / e[2]).powi(2), (e[1] / e[2]).powi(2), 1.0];
                let m = [excess(e[0], e[2]), excess(e[1], e[2]), 0.0];
                let n = [r[0] * z[0], r[1] * z[1], z[2]];
                let t = root(&m, &n, z[2], g);
                [r[0] * y[0] / (t + m[0]), r[1] * y[1] / (t + m[1]), y[2] / t]
            } else {
                let [x1, x2] = closest_on_ellipse([e[1], e[2]], [y[1], y[2]]);
                [0.0, x1, x2]
            }
        } else if y[0] > 0.0 {
            let [x0, x2] = closest_on_ellipse([e[0], e[2]], [y[0], y[2]]);
            [x0, 0.0, x2]
        } else {
            [0.0, 0.0, e[2]]
        }
    } else {
        // On the plane of the two longer axes: inside a region near the centre the closest
        // point leaves the plane towards the shortest axis.
        let denom = [e[0] * e[0] - e[2] * e[2], e[1] * e[1] - e[2] * e[2]];
        let numer = [e[0] * y[0], e[1] * y[1]];
        if numer[0] < denom[0] && numer[1] < denom[1] {
            let xde = [numer[0] / denom[0], numer[1] / denom[1]];
            let discr = 1.0 - xde[0] * xde[0] - xde[1] * xde[1];
            if discr > 0.0 {
                return [e[0] * xde[0], e[1] * xde[1], e[2] * discr.sqrt()];
            }
        }
        let [x0, x1] = closest_on_ellipse([e[0], e[1]], [y[0], y[1]]);
        [x0, x1, 0.0]
    }
}
