//! Distance and penetration between two convex shapes in f64 (SPEC §9's oracle for bodies):
//! GJK with Johnson's subalgorithm for separated pairs, EPA for overlapping ones.
//!
//! Every convex shape is a core swept by a ball (`Convex`): spheres are a point and a radius,
//! capsules a segment and a radius, the rest have radius 0. GJK runs on the cores and the radii
//! are subtracted after, which is exact and keeps GJK away from curved supports where it can;
//! EPA runs on the whole shapes only when the cores themselves overlap.

use crate::Mode;
use crate::math::{DVec3, quaternion_axes};
use crate::reference::{corner_wedge_vertices, finish, project_point, wedge_vertices};
use crate::shape::Shape;

/// A convex shape as GJK sees it: its core's support mapping, swept by `radius`.
#[derive(Clone, Debug, PartialEq)]
pub struct Convex {
    core: Core,
    radius: f64,
}

#[derive(Clone, Debug, PartialEq)]
enum Core {
    Point(DVec3),
    Segment(DVec3, DVec3),
    /// The hull of these points (triangles, boxes, wedges, hulls).
    Points(Vec<DVec3>),
    /// A solid cylinder: the disk of `radius` about the axis swept from `a` to `b` (a == b: a
    /// disk perpendicular to Z, as SPEC §1 says).
    Cylinder {
        a: DVec3,
        b: DVec3,
        radius: f64,
    },
    /// A solid cone: base disk of `radius` at `a`, apex `b`.
    Cone {
        a: DVec3,
        b: DVec3,
        radius: f64,
    },
    /// A solid ellipsoid: semi-axes `radii` along the unit `axes`.
    Ellipsoid {
        center: DVec3,
        axes: [DVec3; 3],
        radii: DVec3,
    },
}

impl Convex {
    /// The shape as a convex body, or `None` for the kinds that are not bounded and convex
    /// (plane, line, ray, torus).
    pub fn of(shape: &Shape) -> Option<Convex> {
        let (core, radius) = match *shape {
            Shape::Sphere { center, radius } => (Core::Point(center), radius),
            Shape::Capsule { a, b, radius } => (Core::Segment(a, b), radius),
            Shape::Segment { a, b } => (Core::Segment(a, b), 0.0),
            Shape::Triangle { a, b, c } => (Core::Points(vec![a, b, c]), 0.0),
            Shape::Aabb { min, max } => {
                let corners = (0..8)
                    .map(|k| {
                        DVec3::new(
                            if k & 1 == 0 { min.x } else { max.x },
                            if k & 2 == 0 { min.y } else { max.y },
                            if k & 4 == 0 { min.z } else { max.z },
                        )
                    })
                    .collect();
                (Core::Points(corners), 0.0)
            }
            Shape::Box {
                center,
                half_extents: h,
                rotation,
            } => {
                let axes = quaternion_axes(rotation);
                let corners = (0..8)
                    .map(|k| {
                        let s = |bit: usize| if k & bit == 0 { -1.0 } else { 1.0 };
                        center
                            + axes[0] * (s(1) * h.x)
                            + axes[1] * (s(2) * h.y)
                            + axes[2] * (s(4) * h.z)
                    })
                    .collect();
                (Core::Points(corners), 0.0)
            }
            Shape::Wedge {
                center,
                half_extents,
                rotation,
            } => (
                Core::Points(placed(&wedge_vertices(half_extents), center, rotation)),
                0.0,
            ),
            Shape::CornerWedge {
                center,
                half_extents,
                rotation,
            } => (
                Core::Points(placed(
                    &corner_wedge_vertices(half_extents),
                    center,
                    rotation,
                )),
                0.0,
            ),
            Shape::Cylinder { a, b, radius } => (Core::Cylinder { a, b, radius }, 0.0),
            Shape::Cone { a, b, radius } => (Core::Cone { a, b, radius }, 0.0),
            Shape::Ellipsoid {
                center,
                radii,
                rotation,
            } => {
                let axes = quaternion_axes(rotation);
                (
                    Core::Ellipsoid {
                        center,
                        axes,
                        radii,
                    },
                    0.0,
                )
            }
            Shape::ConvexHull(ref hull) => (Core::Points(hull.points.clone()), 0.0),
            Shape::Plane { .. } | Shape::Line { .. } | Shape::Ray { .. } | Shape::Torus { .. } => {
                return None;
            }
        };
        Some(Convex { core, radius })
    }

    /// The same shape moved by `by`.
    pub fn translated(&self, by: DVec3) -> Convex {
        let core = match &self.core {
            Core::Point(p) => Core::Point(*p + by),
            Core::Segment(a, b) => Core::Segment(*a + by, *b + by),
            Core::Points(points) => Core::Points(points.iter().map(|p| *p + by).collect()),
            Core::Cylinder { a, b, radius } => Core::Cylinder {
                a: *a + by,
                b: *b + by,
                radius: *radius,
            },
            Core::Cone { a, b, radius } => Core::Cone {
                a: *a + by,
                b: *b + by,
                radius: *radius,
            },
            Core::Ellipsoid {
                center,
                axes,
                radii,
            } => Core::Ellipsoid {
                center: *center + by,
                axes: *axes,
                radii: *radii,
            },
        };
        Convex {
            core,
            radius: self.radius,
        }
    }

    /// The farthest point of the whole shape along `d` (any point for d = 0).
    pub fn support(&self, d: DVec3) -> DVec3 {
        self.core_support(d) + d.normalize_or_zero() * self.radius
    }

    /// A point inside the shape (its core's centroid of supports).
    pub fn centre(&self) -> DVec3 {
        match &self.core {
            Core::Point(p) => *p,
            Core::Segment(a, b) => (*a + *b) * 0.5,
            Core::Points(points) => {
                points.iter().fold(DVec3::ZERO, |s, p| s + *p) * (1.0 / points.len() as f64)
            }
            Core::Cylinder { a, b, .. } => (*a + *b) * 0.5,
            Core::Cone { a, b, .. } => *a * 0.75 + *b * 0.25,
            Core::Ellipsoid { center, .. } => *center,
        }
    }

    /// The largest absolute coordinate of the shape's box: the scale of SPEC §3's bound.
    pub fn scale(&self) -> f64 {
        let axes = [DVec3::X, DVec3::Y, DVec3::new(0.0, 0.0, 1.0)];
        axes.iter()
            .flat_map(|&a| [self.support(a), self.support(-a)])
            .fold(0.0, |m, p| m.max(p.max_abs()))
    }

    fn core_support(&self, d: DVec3) -> DVec3 {
        match &self.core {
            Core::Point(p) => *p,
            Core::Segment(a, b) => {
                if (*b - *a).dot(d) > 0.0 {
                    *b
                } else {
                    *a
                }
            }
            Core::Points(points) => farthest(points, d),
            Core::Cylinder { a, b, radius } => {
                let axis = disk_axis(*a, *b);
                let end = if (*b - *a).dot(d) > 0.0 { *b } else { *a };
                end + disk_support(axis, d) * *radius
            }
            Core::Cone { a, b, radius } => {
                let axis = disk_axis(*a, *b);
                let rim = *a + disk_support(axis, d) * *radius;
                if b.dot(d) > rim.dot(d) { *b } else { rim }
            }
            Core::Ellipsoid {
                center,
                axes,
                radii,
            } => {
                // x = R·(r² ∘ d') / |r ∘ d'| with d' = Rᵀd.
                let local = DVec3::new(axes[0].dot(d), axes[1].dot(d), axes[2].dot(d));
                let scaled = DVec3::new(radii.x * local.x, radii.y * local.y, radii.z * local.z);
                let length = scaled.length();
                if length == 0.0 {
                    return *center;
                }
                let x = DVec3::new(radii.x * scaled.x, radii.y * scaled.y, radii.z * scaled.z)
                    * (1.0 / length);
                *center + axes[0] * x.x + axes[1] * x.y + axes[2] * x.z
            }
        }
    }
}

fn placed(local: &[DVec3], center: DVec3, rotation: [f64; 4]) -> Vec<DVec3> {
    let axes = quaternion_axes(rotation);
    local
        .iter()
        .map(|v| center + axes[0] * v.x + axes[1] * v.y + axes[2] * v.z)
        .collect()
}

fn farthest(points: &[DVec3], d: DVec3) -> DVec3 {
    let mut best = points[0];
    let mut best_dot = best.dot(d);
    for &p in &points[1..] {
        let dot = p.dot(d);
        if dot > best_dot {
            best = p;
            best_dot = dot;
        }
    }
    best
}

/// The unit axis of a cylinder or cone from `a` to `b` (Z where they coincide).
fn disk_axis(a: DVec3, b: DVec3) -> DVec3 {
    let axis = (b - a).normalize_or_zero();
    if axis == DVec3::ZERO {
        DVec3::new(0.0, 0.0, 1.0)
    } else {
        axis
    }
}

/// The unit direction within the disk perpendicular to `axis` farthest along `d`; zero when d
/// is along the axis (every point of the disk is as far, its centre too), which takes a
/// relative test: the rounding left of d's axial part would point anywhere, the axis included.
fn disk_support(axis: DVec3, d: DVec3) -> DVec3 {
    let across = d - axis * axis.dot(d);
    if across.length() <= 1e-12 * d.length() {
        return DVec3::ZERO;
    }
    let across = across.normalize_or_zero();
    (across - axis * axis.dot(across)).normalize_or_zero()
}

/// Where two convex shapes are nearest, or how deep they overlap.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BodyContact {
    /// The separation (≥ 0), or minus the penetration depth.
    pub distance: f64,
    /// The witness on the body (the first shape) and on the target.
    pub point_body: DVec3,
    pub point_target: DVec3,
    /// Unit, from the target towards the body: moving the body by −distance·normal makes the
    /// two touch (the minimal translation when they overlap).
    pub normal: DVec3,
}

/// The contact of `body` (a convex kind) with any `target` (SPEC §9), the twin of
/// `bodies.wgsl`'s `target_contact`: a sphere body by its centre's projection (signed where the
/// target has an inside, less the radius), and a sphere target likewise with the roles swapped;
/// capsules and segments whose cores cross by their radii; a plane as the half-space below it,
/// by the body's lowest point; a line or ray as the stretch of it around the body's extremes
/// along it; the rest by GJK and EPA. The kernel's closed forms for capsules against triangles
/// (`body_closed_forms.wgsl`) have no twin of their own here: GJK and EPA judge them. `None` where the pair has no answer: a body that is not convex, or a
/// torus against a body other than a sphere.
pub fn target_contact(body: &Shape, target: &Shape) -> Option<BodyContact> {
    let convex = Convex::of(body)?;
    if let Shape::Sphere { center, radius } = *body {
        let (point, distance, normal) = centre_projection(target, center);
        return Some(BodyContact {
            distance: distance - radius,
            point_body: center - normal * radius,
            point_target: point,
            normal,
        });
    }
    if let Shape::Sphere { center, radius } = *target {
        // The same with the roles swapped: exact, where EPA on a ball is not (to about 1e-3
        // of the radius where the centre lies on the body's surface).
        let (point, distance, outward) = centre_projection(body, center);
        return Some(BodyContact {
            distance: distance - radius,
            point_body: point,
            point_target: center - outward * radius,
            normal: -outward,
        });
    }
    if let Some(contact) = crossing_swept_segments(body, target) {
        return Some(contact);
    }
    // The body's extremes along the line, each end pushed out by the body's length along it:
    // a separated pair's nearest points lie between the extremes, and an overlapping pair's
    // minimal translation never leaves through the ends (an unbounded line has none).
    let reachable = |a: DVec3, u: DVec3, from_zero: bool| {
        let along = |p: DVec3| (p - a).dot(u);
        let (low, high) = (along(convex.support(-u)), along(convex.support(u)));
        let span = high - low;
        let (mut low, mut high) = (low - span, high + span);
        if from_zero {
            (low, high) = (low.max(0.0), high.max(0.0));
        }
        Shape::Segment {
            a: a + u * low,
            b: a + u * high,
        }
    };
    let target = match *target {
        Shape::Plane { normal, offset } => {
            let lowest = convex.support(-normal);
            let height = normal.dot(lowest) - offset;
            return Some(BodyContact {
                distance: height,
                point_body: lowest,
                point_target: lowest - normal * height,
                normal,
            });
        }
        Shape::Line { a, b } => reachable(a, (b - a).normalize_or_zero(), false),
        Shape::Ray { origin, direction } => reachable(origin, direction.normalize_or_zero(), true),
        Shape::Torus { .. } => return None,
        ref convex_target => convex_target.clone(),
    };
    Some(body_contact(&convex, &Convex::of(&target)?))
}

/// A sphere's centre projected onto `shape` (surface mode): the nearest point, the signed
/// distance and the unit direction from the shape towards the centre (its surface normal there
/// where the centre lies on it; any direction where that has none).
fn centre_projection(shape: &Shape, center: DVec3) -> (DVec3, f64, DVec3) {
    let (point, distance, normal) =
        finish(shape, center, project_point(shape, center), Mode::Surface);
    let normal = if normal == DVec3::ZERO {
        DVec3::new(0.0, 0.0, 1.0)
    } else {
        normal
    };
    (point, distance, normal)
}

/// Two capsules or segments whose cores meet overlap by their radii exactly: the Minkowski
/// difference of the cores is flat and holds the origin, so the shortest push is across its
/// plane (d × e; any direction square to collinear cores). EPA on the balls only
/// approximates that. `None` for other pairs and for cores apart (GJK is exact there).
fn crossing_swept_segments(body: &Shape, target: &Shape) -> Option<BodyContact> {
    let core = |s: &Shape| match *s {
        Shape::Capsule { a, b, radius } => Some((a, b, radius)),
        Shape::Segment { a, b } => Some((a, b, 0.0)),
        _ => None,
    };
    let ((a0, a1, r1), (b0, b1, r2)) = (core(body)?, core(target)?);
    let pair = crate::reference::closest_segment_pair(a0, a1, b0, b1);
    let scale = [a0, a1, b0, b1]
        .iter()
        .fold(0.0f64, |m, p| m.max(p.max_abs()));
    if pair.distance > 1e-12 * scale.max(1e-300) {
        return None;
    }
    let (d, e) = (a1 - a0, b1 - b0);
    let across = d.cross(e).normalize_or_zero();
    let normal = if across != DVec3::ZERO {
        across
    } else {
        crate::math::any_perpendicular(if d == DVec3::ZERO { e } else { d })
    };
    Some(BodyContact {
        distance: -(r1 + r2),
        point_body: pair.point_a - normal * r1,
        point_target: pair.point_b + normal * r2,
        normal,
    })
}

/// The nearest of `targets` to `body` (the smallest distance: the deepest overlap; ties to the
/// lowest index), with its index; `None` where a pair has no answer or there are no targets.
pub fn nearest_target(body: &Shape, targets: &[Shape]) -> Option<(usize, BodyContact)> {
    let mut best: Option<(usize, BodyContact)> = None;
    for (i, target) in targets.iter().enumerate() {
        let contact = target_contact(body, target)?;
        if best.is_none_or(|(_, b)| contact.distance < b.distance) {
            best = Some((i, contact));
        }
    }
    best
}

/// A support point of the Minkowski difference body − target, with the two points it came from.
#[derive(Clone, Copy, Debug)]
struct Vertex {
    w: DVec3,
    body: DVec3,
    target: DVec3,
}

const MAX_ITERATIONS: usize = 256;

/// The contact between `body` and `target` (SPEC §9), exact within SPEC §3 for separated pairs
/// and within 1e-4 of the scale in depth and normal for overlapping ones.
pub fn body_contact(body: &Convex, target: &Convex) -> BodyContact {
    let scale = body.scale().max(target.scale()).max(1e-300);
    let support = |d: DVec3| {
        let (b, t) = (body.core_support(d), target.core_support(-d));
        Vertex {
            w: b - t,
            body: b,
            target: t,
        }
    };
    let radii = body.radius + target.radius;
    match gjk(&support, body.centre() - target.centre(), scale) {
        Gjk::Separated {
            v,
            body: pb,
            target: pt,
        } => {
            let gap = v.length();
            let normal = v * (1.0 / gap);
            BodyContact {
                distance: gap - radii,
                point_body: pb - normal * body.radius,
                point_target: pt + normal * target.radius,
                normal,
            }
        }
        Gjk::Overlapping(simplex) => {
            let whole = |d: DVec3| {
                let (b, t) = (body.support(d), target.support(-d));
                Vertex {
                    w: b - t,
                    body: b,
                    target: t,
                }
            };
            epa(&whole, simplex, scale)
        }
    }
}

enum Gjk {
    /// The cores are apart: `v` is the nearest point of their difference to the origin.
    Separated {
        v: DVec3,
        body: DVec3,
        target: DVec3,
    },
    /// The cores meet (or come within rounding of it): the last simplex, for EPA.
    Overlapping(Vec<Vertex>),
}

fn gjk(support: &dyn Fn(DVec3) -> Vertex, start: DVec3, scale: f64) -> Gjk {
    let touch = (1e-13 * scale).powi(2);
    let first = support(if start.length_squared() > 0.0 {
        -start
    } else {
        DVec3::X
    });
    let mut simplex = vec![first];
    let mut weights = vec![1.0];
    let mut v = first.w;
    for _ in 0..MAX_ITERATIONS {
        let vv = v.length_squared();
        if vv <= touch {
            return Gjk::Overlapping(simplex);
        }
        let next = support(-v);
        // No point of the difference is nearer along v than v itself: v is the nearest.
        if vv - v.dot(next.w) <= 1e-14 * vv.max(touch) || simplex.iter().any(|s| s.w == next.w) {
            break;
        }
        let mut grown = simplex.clone();
        grown.push(next);
        let Some((kept, w)) = closest_on_simplex(&grown) else {
            return Gjk::Overlapping(grown);
        };
        let candidate: Vec<Vertex> = kept.iter().map(|&k| grown[k]).collect();
        let nearer = candidate
            .iter()
            .zip(&w)
            .fold(DVec3::ZERO, |s, (p, l)| s + p.w * *l);
        if nearer.length_squared() >= vv {
            // No progress (rounding): the last simplex and v stand.
            break;
        }
        (simplex, weights, v) = (candidate, w, nearer);
    }
    let mix = |f: fn(&Vertex) -> DVec3| {
        simplex
            .iter()
            .zip(&weights)
            .fold(DVec3::ZERO, |s, (p, l)| s + f(p) * *l)
    };
    let v = mix(|p| p.w);
    if v.length_squared() <= touch {
        return Gjk::Overlapping(simplex);
    }
    Gjk::Separated {
        v: mix(|p| p.body) - mix(|p| p.target),
        body: mix(|p| p.body),
        target: mix(|p| p.target),
    }
}

/// A face of a simplex and barycentric weights on it: a point of the simplex.
type Barycentric = (Vec<usize>, Vec<f64>);

/// The point of the simplex nearest the origin, or `None` when the origin is inside a
/// tetrahedron.
fn closest_on_simplex(simplex: &[Vertex]) -> Option<Barycentric> {
    let w: Vec<DVec3> = simplex.iter().map(|s| s.w).collect();
    match w.len() {
        1 => Some((vec![0], vec![1.0])),
        2 => Some(on_segment(w[0], w[1])),
        3 => Some(on_triangle(w[0], w[1], w[2])),
        _ => on_tetrahedron(&w),
    }
}

/// The point `found` names among `points`.
fn point_of(points: &[DVec3], found: &Barycentric) -> DVec3 {
    found
        .0
        .iter()
        .zip(&found.1)
        .fold(DVec3::ZERO, |s, (&k, &l)| s + points[k] * l)
}

/// `found` with its indices `k` renamed `names[k]`.
fn renamed(found: Barycentric, names: &[usize]) -> Barycentric {
    (found.0.iter().map(|&k| names[k]).collect(), found.1)
}

fn on_segment(a: DVec3, b: DVec3) -> Barycentric {
    let ab = b - a;
    let t = -a.dot(ab);
    let length = ab.length_squared();
    if t <= 0.0 || length == 0.0 {
        (vec![0], vec![1.0])
    } else if t >= length {
        (vec![1], vec![1.0])
    } else {
        let t = t / length;
        (vec![0, 1], vec![1.0 - t, t])
    }
}

/// Ericson's closest point of a triangle to the origin, by its Voronoi regions.
fn on_triangle(a: DVec3, b: DVec3, c: DVec3) -> Barycentric {
    let (ab, ac) = (b - a, c - a);
    let (d1, d2) = (ab.dot(-a), ac.dot(-a));
    if d1 <= 0.0 && d2 <= 0.0 {
        return (vec![0], vec![1.0]);
    }
    let (d3, d4) = (ab.dot(-b), ac.dot(-b));
    if d3 >= 0.0 && d4 <= d3 {
        return (vec![1], vec![1.0]);
    }
    let vc = d1 * d4 - d3 * d2;
    if vc <= 0.0 && d1 >= 0.0 && d3 <= 0.0 {
        return renamed(on_segment(a, b), &[0, 1]);
    }
    let (d5, d6) = (ab.dot(-c), ac.dot(-c));
    if d6 >= 0.0 && d5 <= d6 {
        return (vec![2], vec![1.0]);
    }
    let vb = d5 * d2 - d1 * d6;
    if vb <= 0.0 && d2 >= 0.0 && d6 <= 0.0 {
        return renamed(on_segment(a, c), &[0, 2]);
    }
    let va = d3 * d6 - d5 * d4;
    if va <= 0.0 && d4 - d3 >= 0.0 && d5 - d6 >= 0.0 {
        return renamed(on_segment(b, c), &[1, 2]);
    }
    let denominator = va + vb + vc;
    if denominator.is_nan() || denominator <= 0.0 {
        // A flat (collinear) triangle: the best of its edges.
        let points = [a, b, c];
        return [[0, 1], [0, 2], [1, 2]]
            .map(|[i, j]| renamed(on_segment(points[i], points[j]), &[i, j]))
            .into_iter()
            .min_by(|x, y| {
                let at = |found: &Barycentric| point_of(&points, found).length_squared();
                at(x).total_cmp(&at(y))
            })
            .expect("three edges");
    }
    let (v, w) = (vb / denominator, vc / denominator);
    (vec![0, 1, 2], vec![1.0 - v - w, v, w])
}

/// The origin inside the tetrahedron: `None`; else the nearest point of its four faces (all of
/// them: which faces the origin "sees" is a sign test that a nearly flat tetrahedron, GJK's
/// usual last step, gets wrong).
fn on_tetrahedron(w: &[DVec3]) -> Option<Barycentric> {
    const FACES: [[usize; 4]; 4] = [[0, 1, 2, 3], [0, 1, 3, 2], [0, 2, 3, 1], [1, 2, 3, 0]];
    let volume = (w[1] - w[0]).cross(w[2] - w[0]).dot(w[3] - w[0]);
    let size = w.iter().fold(0.0f64, |m, p| m.max((*p - w[0]).length()));
    let solid = volume.abs() > 1e-9 * size.powi(3);
    let inside = solid
        && FACES.iter().all(|&[i, j, k, opposite]| {
            let n = (w[j] - w[i]).cross(w[k] - w[i]);
            n.dot(-w[i]) * n.dot(w[opposite] - w[i]) > 0.0
        });
    if inside {
        return None;
    }
    FACES
        .iter()
        .map(|&[i, j, k, _]| renamed(on_triangle(w[i], w[j], w[k]), &[i, j, k]))
        .min_by(|x, y| {
            let at = |found: &Barycentric| point_of(w, found).length_squared();
            at(x).total_cmp(&at(y))
        })
}

/// EPA: the face of the Minkowski difference nearest the origin, grown from `simplex` (which
/// holds the origin). Each round rebuilds the hull of the support points found so far with
/// parry's quickhull rather than patching a polytope face by face: an oracle can afford it,
/// and nearly coplanar faces (a flat target, a curved body) cannot fold it.
fn epa(support: &dyn Fn(DVec3) -> Vertex, simplex: Vec<Vertex>, scale: f64) -> BodyContact {
    let mut points = simplex;
    let axes = [DVec3::X, DVec3::Y, DVec3::new(0.0, 0.0, 1.0)];
    let extent = axes
        .iter()
        .map(|&d| (support(d).w - support(-d).w).length())
        .fold(0.0f64, f64::max);
    let distinct =
        |points: &[Vertex], w: DVec3| points.iter().all(|p| (p.w - w).length() > 1e-12 * extent);
    for d in axes.iter().flat_map(|&d| [d, -d]) {
        let candidate = support(d);
        if distinct(&points, candidate.w) {
            points.push(candidate);
        }
    }
    let tolerance = 1e-9 * scale;
    let mut nearest = None;
    for _ in 0..MAX_ITERATIONS {
        let Some(face) = nearest_face(&points) else {
            return touching(&points);
        };
        nearest = Some(face);
        let (_, n, d) = face;
        let next = support(n);
        if next.w.dot(n) - d <= tolerance || !distinct(&points, next.w) {
            break;
        }
        points.push(next);
    }
    let Some((f, n, d)) = nearest else {
        return touching(&points);
    };
    // The origin's projection on the face, in barycentric weights, gives the witnesses.
    let (a, b, c) = (points[f[0]], points[f[1]], points[f[2]]);
    let weights = barycentric(n * d, a.w, b.w, c.w);
    let mix = |get: fn(&Vertex) -> DVec3| {
        get(&a) * weights[0] + get(&b) * weights[1] + get(&c) * weights[2]
    };
    BodyContact {
        distance: -d.max(0.0),
        point_body: mix(|v| v.body),
        point_target: mix(|v| v.target),
        // The face's normal n points out of body − target, whose nearest boundary point d·n
        // moves to the origin when the body moves by −d·n: the body leaves along −n.
        normal: -n,
    }
}

/// The hull face of `points` nearest the origin (inside the hull): its corners' indices, its
/// outward unit normal and its distance; `None` for a flat or degenerate set.
fn nearest_face(points: &[Vertex]) -> Option<([usize; 3], DVec3, f64)> {
    let input: Vec<parry3d_f64::math::Vector3> = points
        .iter()
        .map(|p| parry3d_f64::math::Vector3::new(p.w.x, p.w.y, p.w.z))
        .collect();
    let (vertices, triangles) = parry3d_f64::transformation::try_convex_hull(&input).ok()?;
    // Back from the hull's vertices to ours (the hull keeps the input's coordinates).
    let index_of = |i: u32| {
        let v = vertices[i as usize];
        points
            .iter()
            .position(|p| p.w.x == v.x && p.w.y == v.y && p.w.z == v.z)
    };
    let centroid = points.iter().fold(DVec3::ZERO, |s, p| s + p.w) * (1.0 / points.len() as f64);
    let mut best: Option<([usize; 3], DVec3, f64)> = None;
    for &[i, j, k] in &triangles {
        let (Some(i), Some(j), Some(k)) = (index_of(i), index_of(j), index_of(k)) else {
            continue;
        };
        let (a, b, c) = (points[i].w, points[j].w, points[k].w);
        let mut n = (b - a).cross(c - a).normalize_or_zero();
        if n == DVec3::ZERO {
            continue;
        }
        if n.dot(centroid - a) > 0.0 {
            n = -n;
        }
        let d = n.dot(a);
        if best.is_none_or(|(_, _, best_d)| d < best_d) {
            best = Some(([i, j, k], n, d));
        }
    }
    best
}

/// A difference without volume (a flat body on a flat target): they touch, with no depth.
fn touching(points: &[Vertex]) -> BodyContact {
    let point_body = points[0].body;
    BodyContact {
        distance: 0.0,
        point_body,
        point_target: point_body,
        normal: DVec3::new(0.0, 0.0, 1.0),
    }
}

fn barycentric(p: DVec3, a: DVec3, b: DVec3, c: DVec3) -> [f64; 3] {
    let (v0, v1, v2) = (b - a, c - a, p - a);
    let (d00, d01, d11) = (v0.dot(v0), v0.dot(v1), v1.dot(v1));
    let (d20, d21) = (v2.dot(v0), v2.dot(v1));
    let denominator = d00 * d11 - d01 * d01;
    if denominator == 0.0 {
        return [1.0, 0.0, 0.0];
    }
    let v = (d11 * d20 - d01 * d21) / denominator;
    let w = (d00 * d21 - d01 * d20) / denominator;
    [1.0 - v - w, v, w]
}
