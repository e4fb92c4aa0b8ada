//! Closest points between two segments, exact in f64: the minimum over the interior critical
//! point (when the lines are not parallel and it lies inside both segments) and each endpoint
//! against the other segment. Parallel, collinear and zero-length segments need no special
//! case: an endpoint candidate is then optimal. Ties keep the first candidate in that order.
//! Twin: shaders/segments.wgsl (a different formulation, steady in f32).

use crate::math::DVec3;

/// Closest points A(s) = a0 + s(a1 − a0) and B(t) = b0 + t(b1 − b0), s, t ∈ [0, 1].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SegmentPair {
    pub point_a: DVec3,
    pub point_b: DVec3,
    pub s: f64,
    pub t: f64,
    pub distance: f64,
}

impl SegmentPair {
    pub const NON_FINITE: SegmentPair = SegmentPair {
        point_a: DVec3::new(f64::NAN, f64::NAN, f64::NAN),
        point_b: DVec3::new(f64::NAN, f64::NAN, f64::NAN),
        s: f64::NAN,
        t: f64::NAN,
        distance: f64::NAN,
    };
}

/// Parameter in [0, 1] of the point of `origin + d·u` nearest `p` (0 for a zero-length `d`).
fn parameter(p: DVec3, origin: DVec3, d: DVec3) -> f64 {
    let dd = d.length_squared();
    if dd > 0.0 {
        ((p - origin).dot(d) / dd).clamp(0.0, 1.0)
    } else {
        0.0
    }
}

pub fn closest_segment_pair(a0: DVec3, a1: DVec3, b0: DVec3, b1: DVec3) -> SegmentPair {
    if !(crate::is_queryable(a0)
        && crate::is_queryable(a1)
        && crate::is_queryable(b0)
        && crate::is_queryable(b1))
    {
        return SegmentPair::NON_FINITE;
    }
    let (da, db, r) = (a1 - a0, b1 - b0, a0 - b0);
    let (aa, ab, bb) = (da.length_squared(), da.dot(db), db.length_squared());
    let (ar, br) = (da.dot(r), db.dot(r));
    let mut candidates = Vec::with_capacity(5);
    // Interior critical point of |A(s) − B(t)|²: solve the 2×2 normal equations.
    let det = aa * bb - ab * ab;
    if det > 0.0 {
        let s = (ab * br - bb * ar) / det;
        let t = (aa * br - ab * ar) / det;
        if (0.0..=1.0).contains(&s) && (0.0..=1.0).contains(&t) {
            candidates.push((s, t));
        }
    }
    candidates.push((0.0, parameter(a0, b0, db)));
    candidates.push((1.0, parameter(a1, b0, db)));
    candidates.push((parameter(b0, a0, da), 0.0));
    candidates.push((parameter(b1, a0, da), 1.0));
    let mut best = SegmentPair {
        distance: f64::INFINITY,
        ..SegmentPair::NON_FINITE
    };
    for (s, t) in candidates {
        let (point_a, point_b) = (a0 + da * s, b0 + db * t);
        let distance = (point_a - point_b).length();
        if distance < best.distance {
            best = SegmentPair {
                point_a,
                point_b,
                s,
                t,
                distance,
            };
        }
    }
    best
}
