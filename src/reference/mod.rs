//! The f64 oracle. One file per shape, with the same function names as the WGSL in
//! `shaders/shapes/`; both take the point in the shape's local frame and the same derived
//! parameters (see `gpu::layout::GpuShape::from_shape`). Distance, sign and normal are derived
//! once, in [`finish`], exactly as `shaders/query.wgsl` does.

mod aabb;
mod capsule;
mod cone;
mod convex_hull;
mod cylinder;
mod ellipsoid;
pub mod gjk;
mod line;
mod plane;
mod polyhedron;
mod ray;
mod segment;
mod segment_pair;
mod sphere;
mod torus;
mod triangle;

pub use aabb::project_box;
pub use capsule::project_capsule;
pub use cone::project_cone;
pub use convex_hull::project_convex_hull;
pub use cylinder::project_cylinder;
pub use ellipsoid::project_ellipsoid;
pub use line::project_line;
pub use plane::project_plane;
pub use polyhedron::{
    ConvexSearch, corner_wedge_vertices, project_corner_wedge, project_wedge, wedge_vertices,
};
pub use ray::project_ray;
pub use segment::project_segment;
pub use segment_pair::{SegmentPair, closest_segment_pair};
pub use sphere::project_sphere;
pub use torus::project_torus;
pub use triangle::{project_triangle, triangle_unit_normal};

use crate::Mode;
use crate::math::{DVec3, ellipsoid_frame};
use crate::shape::Shape;

/// Closest point on a shape's boundary (or on the shape, for curves and surfaces).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Projection {
    /// Closest boundary point.
    pub point: DVec3,
    /// The query point is strictly inside the solid (for a plane: on its negative side).
    pub inside: bool,
    /// Outward normal of the feature `point` lies on, used when the query point is on the
    /// boundary itself; zero for curves and where undefined.
    pub normal: DVec3,
}

/// One query's answer, f64 twin of the GPU's `Hit`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Hit {
    pub point: DVec3,
    pub distance: f64,
    pub normal: DVec3,
    /// Shape index; −1 for a non-finite query row.
    pub shape: i64,
}

impl Hit {
    pub const NON_FINITE: Hit = Hit {
        point: DVec3::new(f64::NAN, f64::NAN, f64::NAN),
        distance: f64::NAN,
        normal: DVec3::new(f64::NAN, f64::NAN, f64::NAN),
        shape: -1,
    };
}

/// Boundary projection of world point `p` onto `shape`, in world space.
pub fn project_point(shape: &Shape, p: DVec3) -> Projection {
    let world = |anchor: DVec3, local: Projection| Projection {
        point: anchor + local.point,
        ..local
    };
    match *shape {
        Shape::Sphere { center, radius } => world(center, project_sphere(p - center, radius)),
        Shape::Aabb { min, max } => {
            let center = (min + max) * 0.5;
            world(center, project_box(p - center, (max - min) * 0.5))
        }
        Shape::Box {
            center,
            half_extents,
            rotation,
        } => oriented(center, rotation, p, |l| project_box(l, half_extents)),
        Shape::Wedge {
            center,
            half_extents,
            rotation,
        } => oriented(center, rotation, p, |l| project_wedge(l, half_extents)),
        Shape::CornerWedge {
            center,
            half_extents,
            rotation,
        } => oriented(center, rotation, p, |l| {
            project_corner_wedge(l, half_extents)
        }),
        Shape::Plane { normal, offset } => {
            let anchor = normal * offset;
            world(anchor, project_plane(p - anchor, normal))
        }
        Shape::Segment { a, b } => world(a, project_segment(p - a, b - a)),
        Shape::Line { a, b } => world(a, project_line(p - a, (b - a).normalize_or_zero())),
        Shape::Ray { origin, direction } => world(
            origin,
            project_ray(p - origin, direction.normalize_or_zero()),
        ),
        Shape::Triangle { a, b, c } => world(
            a,
            project_triangle(p - a, b - a, c - a, triangle_unit_normal(a, b, c)),
        ),
        Shape::Capsule { a, b, radius } => world(a, project_capsule(p - a, b - a, radius)),
        Shape::Cylinder { a, b, radius } => {
            let (axis, length) = cylinder_axis(a, b);
            world(a, project_cylinder(p - a, axis, length, radius))
        }
        Shape::Cone { a, b, radius } => {
            let (axis, length) = cylinder_axis(a, b);
            world(a, project_cone(p - a, axis, length, radius))
        }
        Shape::Torus {
            center,
            axis,
            major_radius,
            minor_radius,
        } => world(
            center,
            project_torus(p - center, axis, major_radius, minor_radius),
        ),
        Shape::Ellipsoid {
            center,
            radii,
            rotation,
        } => {
            let (sorted, frame) = ellipsoid_frame(radii, rotation);
            oriented(center, frame, p, |l| project_ellipsoid(l, sorted))
        }
        Shape::ConvexHull(ref hull) => {
            let anchor = hull.anchor;
            let faces: Vec<([DVec3; 4], f64)> = hull
                .faces
                .iter()
                .map(|f| {
                    let a = f.a - anchor;
                    ([f.normal, a, f.b - anchor, f.c - anchor], f.normal.dot(a))
                })
                .collect();
            world(anchor, project_convex_hull(p - anchor, &faces, hull.solid))
        }
    }
}

pub use crate::math::cylinder_axis;

/// Project in the local frame of a shape at `center` rotated by `rotation`, back to world.
fn oriented(
    center: DVec3,
    rotation: [f64; 4],
    p: DVec3,
    project_local: impl Fn(DVec3) -> Projection,
) -> Projection {
    let axes = Shape::axes(rotation);
    let rel = p - center;
    let local = DVec3::new(rel.dot(axes[0]), rel.dot(axes[1]), rel.dot(axes[2]));
    let proj = project_local(local);
    let to_world = |v: DVec3| axes[0] * v.x + axes[1] * v.y + axes[2] * v.z;
    Projection {
        point: center + to_world(proj.point),
        inside: proj.inside,
        normal: to_world(proj.normal),
    }
}

/// Distance, sign and normal from a projection (SPEC §2). The WGSL `finish` is its twin.
pub fn finish(shape: &Shape, p: DVec3, proj: Projection, mode: Mode) -> (DVec3, f64, DVec3) {
    if mode == Mode::Solid && shape.kind().is_solid() && proj.inside {
        // Inside a solid: the point is its own closest point; d ≡ 0 there, so its gradient is 0.
        return (p, 0.0, DVec3::ZERO);
    }
    let delta = p - proj.point;
    let len = delta.length();
    let sign = if mode == Mode::Surface && proj.inside {
        -1.0
    } else {
        1.0
    };
    let normal = if len > 0.0 {
        delta / len * sign
    } else {
        proj.normal
    };
    (proj.point, sign * len, normal)
}

/// Query one shape; the hit carries `index` as its shape index.
pub fn query_shape(shape: &Shape, index: usize, p: DVec3, mode: Mode) -> Hit {
    if !crate::is_queryable(p) {
        return Hit::NON_FINITE;
    }
    let (point, distance, normal) = finish(shape, p, project_point(shape, p), mode);
    Hit {
        point,
        distance,
        normal,
        shape: index as i64,
    }
}

/// Nearest shape of a scene: smallest unsigned distance, ties to the lowest index.
pub fn nearest(shapes: &[Shape], p: DVec3, mode: Mode) -> Hit {
    if !crate::is_queryable(p) || shapes.is_empty() {
        return Hit::NON_FINITE;
    }
    let mut best = query_shape(&shapes[0], 0, p, mode);
    for (i, shape) in shapes.iter().enumerate().skip(1) {
        let hit = query_shape(shape, i, p, mode);
        if hit.distance.abs() < best.distance.abs() {
            best = hit;
        }
    }
    best
}
