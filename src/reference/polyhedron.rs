//! Exact closest points on the convex polyhedra of SPEC §1 (wedge, corner wedge), from their
//! faces: an inside point projects onto the nearest face plane; an outside point onto the
//! nearest of the faces' triangles. Twin: shaders/shapes/polyhedron.wgsl.

use super::{Projection, project_triangle};
use crate::math::DVec3;

/// Running state of the search over faces.
pub struct ConvexSearch {
    pub(super) point: DVec3,
    pub(super) dist2: f64,
    pub(super) plane: f64,
    normal: DVec3,
}

/// Unit normal of the triangle a→b→c (right-handed), zero when degenerate.
pub fn unit_normal(a: DVec3, b: DVec3, c: DVec3) -> DVec3 {
    (b - a).cross(c - a).normalize_or_zero()
}

impl ConvexSearch {
    pub fn new() -> ConvexSearch {
        ConvexSearch {
            point: DVec3::ZERO,
            dist2: f64::INFINITY,
            plane: f64::NEG_INFINITY,
            normal: DVec3::ZERO,
        }
    }

    pub(super) fn triangle(&mut self, p: DVec3, n: DVec3, a: DVec3, b: DVec3, c: DVec3) {
        let q = a + project_triangle(p - a, b - a, c - a, n).point;
        let d2 = (p - q).length_squared();
        if d2 < self.dist2 {
            self.dist2 = d2;
            self.point = q;
        }
    }

    fn plane(&mut self, p: DVec3, n: DVec3, a: DVec3) {
        self.plane_at((p - a).dot(n), n);
    }

    /// A face plane with normal `n` at signed distance `d` from the point.
    pub(super) fn plane_at(&mut self, d: f64, n: DVec3) {
        if d > self.plane {
            self.plane = d;
            self.normal = n;
        }
    }

    /// A triangular face, vertices counter-clockwise seen from outside.
    pub fn triangle_face(&mut self, p: DVec3, a: DVec3, b: DVec3, c: DVec3) {
        let n = unit_normal(a, b, c);
        self.plane(p, n, a);
        self.triangle(p, n, a, b, c);
    }

    /// A planar quadrilateral face, vertices counter-clockwise seen from outside.
    pub fn quad_face(&mut self, p: DVec3, a: DVec3, b: DVec3, c: DVec3, d: DVec3) {
        // The normal of the larger half, so a quad with one collapsed half keeps its plane.
        let (n1, n2) = (unit_normal(a, b, c), unit_normal(a, c, d));
        let n = if n1 == DVec3::ZERO { n2 } else { n1 };
        self.plane(p, n, a);
        self.triangle(p, n, a, b, c);
        self.triangle(p, n, a, c, d);
    }

    /// Inside (every face plane strictly above p): the nearest face plane's projection;
    /// outside: the nearest face point. The normal is the nearest (or containing) face's.
    pub fn finish(self, p: DVec3) -> Projection {
        let inside = self.plane < 0.0;
        Projection {
            point: if inside {
                p - self.normal * self.plane
            } else {
                self.point
            },
            inside,
            normal: self.normal,
        }
    }
}

impl Default for ConvexSearch {
    fn default() -> Self {
        ConvexSearch::new()
    }
}

/// Roblox WedgePart in its local frame: the prism with vertices (±hx,−hy,−hz), (±hx,−hy,+hz),
/// (±hx,+hy,+hz).
pub fn project_wedge(p: DVec3, h: DVec3) -> Projection {
    let [a, b, c, d, e, f] = wedge_vertices(h);
    let mut search = ConvexSearch::new();
    search.quad_face(p, a, b, d, c); // bottom, −Y
    search.quad_face(p, c, d, f, e); // back, +Z
    search.quad_face(p, a, e, f, b); // slope
    search.triangle_face(p, a, c, e); // −X
    search.triangle_face(p, b, f, d); // +X
    search.finish(p)
}

/// The wedge's vertices in its local frame: (−,−,−), (+,−,−), (−,−,+), (+,−,+), (−,+,+), (+,+,+)
/// times the half extents.
pub fn wedge_vertices(h: DVec3) -> [DVec3; 6] {
    [
        [-1.0, -1.0, -1.0],
        [1.0, -1.0, -1.0],
        [-1.0, -1.0, 1.0],
        [1.0, -1.0, 1.0],
        [-1.0, 1.0, 1.0],
        [1.0, 1.0, 1.0],
    ]
    .map(|[x, y, z]| DVec3::new(x * h.x, y * h.y, z * h.z))
}

/// The corner wedge's vertices in its local frame: the base (−,−,−), (+,−,−), (+,−,+), (−,−,+)
/// and the apex (+,+,−), times the half extents.
pub fn corner_wedge_vertices(h: DVec3) -> [DVec3; 5] {
    [
        [-1.0, -1.0, -1.0],
        [1.0, -1.0, -1.0],
        [1.0, -1.0, 1.0],
        [-1.0, -1.0, 1.0],
        [1.0, 1.0, -1.0],
    ]
    .map(|[x, y, z]| DVec3::new(x * h.x, y * h.y, z * h.z))
}

/// Roblox CornerWedgePart in its local frame: the pyramid with base (±hx,−hy,±hz) and apex
/// (+hx,+hy,−hz).
pub fn project_corner_wedge(p: DVec3, h: DVec3) -> Projection {
    let [b1, b2, b3, b4, apex] = corner_wedge_vertices(h);
    let mut search = ConvexSearch::new();
    search.quad_face(p, b1, b2, b3, b4); // base, −Y
    search.triangle_face(p, b2, apex, b3); // +X
    search.triangle_face(p, b1, apex, b2); // −Z
    search.triangle_face(p, b1, b4, apex); // slope over the −X edge
    search.triangle_face(p, b4, b3, apex); // slope over the +Z edge
    search.finish(p)
}
