//! Twin: shaders/shapes/convex_hull.wgsl.

use super::{ConvexSearch, Projection};
use crate::math::DVec3;

/// A convex hull from its faces `[normal, a, b, c]` and plane offsets `normal · a`, in the
/// local frame (the hull's anchor at the origin): as for the wedges, an inside point projects
/// onto the nearest face plane and an outside one onto the nearest triangle, tested only on
/// faces that see the point and whose plane is nearer than the best triangle so far. A hull
/// without interior (`solid` false: a polygon, segment or point) is never inside; its normal is
/// its first face's.
pub fn project_convex_hull(p: DVec3, faces: &[([DVec3; 4], f64)], solid: bool) -> Projection {
    let mut search = ConvexSearch::new();
    if solid {
        for ([n, ..], offset) in faces {
            search.plane_at(p.dot(*n) - offset, *n);
        }
        if search.plane < 0.0 {
            return search.finish(p);
        }
    }
    for ([n, a, b, c], offset) in faces {
        let d = p.dot(*n) - offset;
        if solid && (d < 0.0 || d * d >= search.dist2) {
            continue;
        }
        search.triangle(p, *n, *a, *b, *c);
    }
    if solid {
        search.finish(p)
    } else {
        Projection {
            point: search.point,
            inside: false,
            normal: faces.first().map_or(DVec3::ZERO, |([n, ..], _)| *n),
        }
    }
}
