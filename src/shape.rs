//! The user-facing shapes (f64, world space), as SPEC §1 defines them.

use crate::hull::ConvexHull;
use crate::math::{DVec3, quaternion_axes};

/// One shape. Rotations are stored normalised; all fields are finite (see `io::scene`).
#[derive(Clone, Debug, PartialEq)]
pub enum Shape {
    Sphere {
        center: DVec3,
        radius: f64,
    },
    Aabb {
        min: DVec3,
        max: DVec3,
    },
    /// Oriented box; `rotation` is a unit quaternion `[x, y, z, w]`.
    Box {
        center: DVec3,
        half_extents: DVec3,
        rotation: [f64; 4],
    },
    /// Surface `n·x = offset` with unit `normal`.
    Plane {
        normal: DVec3,
        offset: f64,
    },
    Segment {
        a: DVec3,
        b: DVec3,
    },
    Line {
        a: DVec3,
        b: DVec3,
    },
    Ray {
        origin: DVec3,
        direction: DVec3,
    },
    Triangle {
        a: DVec3,
        b: DVec3,
        c: DVec3,
    },
    Capsule {
        a: DVec3,
        b: DVec3,
        radius: f64,
    },
    /// Solid capped cylinder, axis from cap centre `a` to cap centre `b`. With a == b it is a
    /// disk of `radius` centred at `a`, perpendicular to Z.
    Cylinder {
        a: DVec3,
        b: DVec3,
        radius: f64,
    },
    /// Roblox WedgePart: in local space the prism with vertices (±hx,−hy,−hz), (±hx,−hy,+hz),
    /// (±hx,+hy,+hz); `rotation` is a unit quaternion `[x, y, z, w]`.
    Wedge {
        center: DVec3,
        half_extents: DVec3,
        rotation: [f64; 4],
    },
    /// Roblox CornerWedgePart: in local space the pyramid with base (±hx,−hy,±hz) and apex
    /// (+hx,+hy,−hz).
    CornerWedge {
        center: DVec3,
        half_extents: DVec3,
        rotation: [f64; 4],
    },
    /// Solid right circular cone: base disk of `radius` centred at `a`, apex `b`. Radius 0 is
    /// the segment ab; a == b is a disk perpendicular to Z, as for the cylinder.
    Cone {
        a: DVec3,
        b: DVec3,
        radius: f64,
    },
    /// The solid within `minor_radius` of the circle of `major_radius` about unit `axis`
    /// through `center` (0 ≤ minor ≤ major).
    Torus {
        center: DVec3,
        axis: DVec3,
        major_radius: f64,
        minor_radius: f64,
    },
    /// Solid ellipsoid with semi-axes `radii` (each > 0) along the rotated X, Y, Z.
    Ellipsoid {
        center: DVec3,
        radii: DVec3,
        rotation: [f64; 4],
    },
    /// The convex hull of its points, built on load (`hull::ConvexHull`).
    ConvexHull(ConvexHull),
}

/// The GPU's shape tag. The WGSL constants `KIND_*` are generated from this list.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum ShapeKind {
    Sphere = 0,
    Aabb = 1,
    Box = 2,
    Plane = 3,
    Segment = 4,
    Line = 5,
    Ray = 6,
    Triangle = 7,
    Capsule = 8,
    Cylinder = 9,
    Wedge = 10,
    CornerWedge = 11,
    Cone = 12,
    Torus = 13,
    Ellipsoid = 14,
    ConvexHull = 15,
}

impl ShapeKind {
    pub const ALL: [ShapeKind; 16] = [
        ShapeKind::Sphere,
        ShapeKind::Aabb,
        ShapeKind::Box,
        ShapeKind::Plane,
        ShapeKind::Segment,
        ShapeKind::Line,
        ShapeKind::Ray,
        ShapeKind::Triangle,
        ShapeKind::Capsule,
        ShapeKind::Cylinder,
        ShapeKind::Wedge,
        ShapeKind::CornerWedge,
        ShapeKind::Cone,
        ShapeKind::Torus,
        ShapeKind::Ellipsoid,
        ShapeKind::ConvexHull,
    ];

    /// The `type` string of the scene file.
    pub fn name(self) -> &'static str {
        match self {
            ShapeKind::Sphere => "sphere",
            ShapeKind::Aabb => "aabb",
            ShapeKind::Box => "box",
            ShapeKind::Plane => "plane",
            ShapeKind::Segment => "segment",
            ShapeKind::Line => "line",
            ShapeKind::Ray => "ray",
            ShapeKind::Triangle => "triangle",
            ShapeKind::Capsule => "capsule",
            ShapeKind::Cylinder => "cylinder",
            ShapeKind::Wedge => "wedge",
            ShapeKind::CornerWedge => "corner_wedge",
            ShapeKind::Cone => "cone",
            ShapeKind::Torus => "torus",
            ShapeKind::Ellipsoid => "ellipsoid",
            ShapeKind::ConvexHull => "convex_hull",
        }
    }

    /// Solids collapse to `q = p, d = 0` inside them in solid mode (the WGSL `is_solid` is
    /// generated from this).
    pub fn is_solid(self) -> bool {
        match self {
            ShapeKind::Sphere
            | ShapeKind::Aabb
            | ShapeKind::Box
            | ShapeKind::Capsule
            | ShapeKind::Cylinder
            | ShapeKind::Wedge
            | ShapeKind::CornerWedge
            | ShapeKind::Cone
            | ShapeKind::Torus
            | ShapeKind::Ellipsoid
            | ShapeKind::ConvexHull => true,
            ShapeKind::Plane | ShapeKind::Segment | ShapeKind::Line | ShapeKind::Ray => false,
            ShapeKind::Triangle => false,
        }
    }

    /// The file under `shaders/shapes/` with its projection and its record's reader,
    /// `project_<name>_record` (the WGSL kind switch is generated from this).
    pub fn wgsl_file(self) -> &'static str {
        match self {
            ShapeKind::Aabb | ShapeKind::Box => "aabb",
            ShapeKind::Wedge | ShapeKind::CornerWedge => "polyhedron",
            ShapeKind::Sphere
            | ShapeKind::Plane
            | ShapeKind::Segment
            | ShapeKind::Line
            | ShapeKind::Ray
            | ShapeKind::Triangle
            | ShapeKind::Capsule
            | ShapeKind::Cylinder
            | ShapeKind::Cone
            | ShapeKind::Torus
            | ShapeKind::Ellipsoid
            | ShapeKind::ConvexHull => self.name(),
        }
    }
}

impl Shape {
    pub fn kind(&self) -> ShapeKind {
        match self {
            Shape::Sphere { .. } => ShapeKind::Sphere,
            Shape::Aabb { .. } => ShapeKind::Aabb,
            Shape::Box { .. } => ShapeKind::Box,
            Shape::Plane { .. } => ShapeKind::Plane,
            Shape::Segment { .. } => ShapeKind::Segment,
            Shape::Line { .. } => ShapeKind::Line,
            Shape::Ray { .. } => ShapeKind::Ray,
            Shape::Triangle { .. } => ShapeKind::Triangle,
            Shape::Capsule { .. } => ShapeKind::Capsule,
            Shape::Cylinder { .. } => ShapeKind::Cylinder,
            Shape::Wedge { .. } => ShapeKind::Wedge,
            Shape::CornerWedge { .. } => ShapeKind::CornerWedge,
            Shape::Cone { .. } => ShapeKind::Cone,
            Shape::Torus { .. } => ShapeKind::Torus,
            Shape::Ellipsoid { .. } => ShapeKind::Ellipsoid,
            Shape::ConvexHull(_) => ShapeKind::ConvexHull,
        }
    }

    /// The largest absolute coordinate among the shape's defining points and extents
    /// (SPEC §3's `scale`, shape side).
    pub fn scale(&self) -> f64 {
        let m = |v: &[DVec3], s: &[f64]| {
            v.iter()
                .map(|p| p.max_abs())
                .chain(s.iter().map(|x| x.abs()))
                .fold(0.0, f64::max)
        };
        match self {
            Shape::Sphere { center, radius } => m(&[*center], &[*radius]),
            Shape::Aabb { min, max } => m(&[*min, *max], &[]),
            Shape::Plane { normal, offset } => m(&[*normal], &[*offset]),
            Shape::Segment { a, b } | Shape::Line { a, b } => m(&[*a, *b], &[]),
            Shape::Ray { origin, direction } => m(&[*origin, *direction], &[]),
            Shape::Triangle { a, b, c } => m(&[*a, *b, *c], &[]),
            Shape::Capsule { a, b, radius }
            | Shape::Cylinder { a, b, radius }
            | Shape::Cone { a, b, radius } => m(&[*a, *b], &[*radius]),
            Shape::Torus {
                center,
                major_radius,
                minor_radius,
                ..
            } => m(&[*center], &[*major_radius + *minor_radius]),
            Shape::Ellipsoid { center, radii, .. } => m(&[*center, *radii], &[]),
            Shape::ConvexHull(hull) => m(&hull.points, &[]),
            Shape::Box {
                center,
                half_extents,
                ..
            }
            | Shape::Wedge {
                center,
                half_extents,
                ..
            }
            | Shape::CornerWedge {
                center,
                half_extents,
                ..
            } => m(&[*center, *half_extents], &[]),
        }
    }

    /// How far the shape spans, and the field that sets it, for the kinds whose kernels square
    /// one of its own lengths ([`crate::semantics::SPAN_LIMIT`]); `None` for the others, which
    /// are answered at any size f32 holds.
    pub fn limited_span(&self) -> Option<(f64, &'static str)> {
        let line = |a: DVec3, b: DVec3, radius: f64| {
            let length = (b - a).length();
            (
                length + 2.0 * radius,
                if 2.0 * radius > length { "radius" } else { "b" },
            )
        };
        match self {
            Shape::Segment { a, b } => Some(line(*a, *b, 0.0)),
            Shape::Capsule { a, b, radius } | Shape::Cone { a, b, radius } => {
                Some(line(*a, *b, *radius))
            }
            Shape::Triangle { a, b, c } => {
                let (ab, ac, bc) = ((*b - *a).length(), (*c - *a).length(), (*c - *b).length());
                Some((ab.max(ac).max(bc), if ab > ac.max(bc) { "b" } else { "c" }))
            }
            Shape::Ellipsoid { radii, .. } => Some((2.0 * radii.max_abs(), "radii")),
            // A hull built by hand may have no points: then it spans nothing.
            Shape::ConvexHull(hull) => {
                let first = *hull.points.first()?;
                let lo = hull.points.iter().fold(first, |m, p| m.min(*p));
                let hi = hull.points.iter().fold(first, |m, p| m.max(*p));
                Some(((hi - lo).length(), "points"))
            }
            _ => None,
        }
    }

    /// The field that makes the shape span past [`crate::semantics::SPAN_LIMIT`], and why
    /// that is refused, for the kinds `limited_span` names.
    pub fn span_problem(&self) -> Option<(&'static str, String)> {
        let (span, field) = self.limited_span()?;
        (span > crate::semantics::SPAN_LIMIT).then(|| {
            (
                field,
                format!(
                    "the {} spans {span:.3e}, beyond the {:e} its f32 kernel holds (its squares \
                     overflow past ~1.8e19); give the scene in larger units",
                    self.kind().name(),
                    crate::semantics::SPAN_LIMIT
                ),
            )
        })
    }

    /// World position of `local`, a point in the frame of an oriented shape at `center`.
    pub fn oriented_point(center: DVec3, rotation: [f64; 4], local: DVec3) -> DVec3 {
        let axes = quaternion_axes(rotation);
        center + axes[0] * local.x + axes[1] * local.y + axes[2] * local.z
    }

    /// Rotation axes (local X, Y, Z in world space) of an oriented shape.
    pub fn axes(rotation: [f64; 4]) -> [DVec3; 3] {
        quaternion_axes(rotation)
    }

    /// The shape moved by `by`, in f64 (a scene answered in its own frame, `gpu::scene`). A
    /// plane keeps its normal and takes the offset of its moved points, and a line is given
    /// from its moved point nearest the origin (the same direction and length to `b`): their
    /// records, anchored there, then lie near a scene moved to the origin.
    pub fn translated(&self, by: DVec3) -> Shape {
        if let Shape::ConvexHull(hull) = self {
            return Shape::ConvexHull(hull.translated(by));
        }
        let mut moved = self.clone();
        match &mut moved {
            Shape::Sphere { center, .. }
            | Shape::Box { center, .. }
            | Shape::Wedge { center, .. }
            | Shape::CornerWedge { center, .. }
            | Shape::Torus { center, .. }
            | Shape::Ellipsoid { center, .. } => *center += by,
            Shape::Aabb { min, max } => {
                *min += by;
                *max += by;
            }
            Shape::Plane { normal, offset } => *offset += normal.dot(by),
            Shape::Line { a, b } => {
                let (along, moved) = (*b - *a, *a + by);
                let unit = along.normalize_or_zero();
                *a = moved - unit * moved.dot(unit);
                *b = *a + along;
            }
            Shape::Segment { a, b }
            | Shape::Capsule { a, b, .. }
            | Shape::Cylinder { a, b, .. }
            | Shape::Cone { a, b, .. } => {
                *a += by;
                *b += by;
            }
            Shape::Ray { origin, .. } => *origin += by,
            Shape::Triangle { a, b, c } => {
                *a += by;
                *b += by;
                *c += by;
            }
            // Moved above, without cloning its points first.
            Shape::ConvexHull(_) => {}
        }
        moved
    }
}

/// Shapes built by hand (the API's `Shape` values) are refused as a scene file's are when one
/// spans past [`crate::semantics::SPAN_LIMIT`]: its kernel would answer it wrongly.
pub fn check_spans(shapes: &[Shape]) -> crate::error::Result<()> {
    for (index, shape) in shapes.iter().enumerate() {
        if let Some((field, problem)) = shape.span_problem() {
            return Err(crate::error::Error::BadShape {
                file: "shapes".into(),
                index,
                field: field.into(),
                problem,
            });
        }
    }
    Ok(())
}
