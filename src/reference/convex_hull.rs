//! Twin: shaders/shapes/convex_hull.wgsl.

use super::{ConvexSearch, Projection};
use crate::math::DVec3;

/// A convex hull from its face triangles `[a, b, c, normal]` in the local frame (the hull's
/// anchor at the origin): as for the wedges, an inside point projects onto the nearest face
/// plane and an outside one onto the nearest triangle. A hull without interior (`solid`
/// false: a polygon, segment or point) is never inside; its normal is its first face's.
pub fn project_convex_hull(
    p: DVec3,
    faces: impl Iterator<Item = [DVec3; 4]>,
    solid: bool,
) -> Projection {
    let mut search = ConvexSearch::new();
    let mut flat_normal = None;
    for [a, b, c, n] in faces {
        if solid {
            search.plane(p, n, a);
        }
        flat_normal.get_or_insert(n);
        search.triangle(p, n, a, b, c);
    }
    if solid {
        search.finish(p)
    } else {
        Projection {
            point: search.point,
            inside: false,
            normal: flat_normal.unwrap_or(DVec3::ZERO),
        }
    }
}
