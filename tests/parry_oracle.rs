//! The kernels against an oracle that shares none of their ideas: parry3d's exact f64 point
//! projections, for every kind parry has (SPEC §2 surface mode: the closest boundary point and
//! the distance, negative inside a solid). The f64 reference twins were written with the
//! kernels' ideas, so a blind spot both share passes `gpu_shapes.rs`; here it would not. Random
//! shapes, random points around them, points exactly on their surfaces (parry's own
//! projections) and points on their axes and at their centres, within SPEC §3's bound. And
//! body contacts (SPEC §9) against parry's `query::distance` and `query::contact`.

mod common;

use closest::reference::{corner_wedge_vertices, wedge_vertices};
use closest::{DVec3, Mode, Shape, ShapeKind};
use common::{Rng, TestJobs, engine, f32_points, within};
use parry3d_f64::math::{Pose, Rotation, Vector};
use parry3d_f64::query::PointProjection;
use parry3d_f64::shape::{
    Ball, Capsule, Cone, ConvexPolyhedron, Cuboid, Cylinder, HalfSpace, Segment, SharedShape,
    Triangle,
};

fn v(p: DVec3) -> Vector {
    Vector::new(p.x, p.y, p.z)
}

fn d(p: Vector) -> DVec3 {
    DVec3::new(p.x, p.y, p.z)
}

/// parry's pose for a shape standing on Y (its cylinders and cones), axis from `a` to `b`.
fn standing_on_y(a: DVec3, b: DVec3) -> (f64, Pose) {
    let (axis, height) = closest::math::cylinder_axis(a, b);
    let rotation = Rotation::from_rotation_arc(Vector::Y, v(axis));
    (height * 0.5, Pose::from_parts(v((a + b) * 0.5), rotation))
}

/// parry's twin of `shape` and its pose, or None where parry has no such shape.
fn parry_shape(shape: &Shape) -> Option<(SharedShape, Pose)> {
    let at = |c: DVec3| Pose::from_translation(v(c));
    let hull = |points: Vec<DVec3>| {
        let points: Vec<Vector> = points.into_iter().map(v).collect();
        SharedShape::new(ConvexPolyhedron::from_convex_hull(&points).expect("a solid hull"))
    };
    let oriented = |center: DVec3, [x, y, z, w]: [f64; 4]| {
        Pose::from_parts(v(center), Rotation::from_xyzw(x, y, z, w).normalize())
    };
    Some(match *shape {
        Shape::Sphere { center, radius } => (SharedShape::new(Ball::new(radius)), at(center)),
        Shape::Aabb { min, max } => (
            SharedShape::new(Cuboid::new(v((max - min) * 0.5))),
            at((min + max) * 0.5),
        ),
        Shape::Box {
            center,
            half_extents,
            rotation,
        } => (
            SharedShape::new(Cuboid::new(v(half_extents))),
            oriented(center, rotation),
        ),
        Shape::Plane { normal, offset } => (
            SharedShape::new(HalfSpace::new(v(normal))),
            at(normal * offset),
        ),
        Shape::Segment { a, b } => (SharedShape::new(Segment::new(v(a), v(b))), Pose::IDENTITY),
        Shape::Triangle { a, b, c } => (
            SharedShape::new(Triangle::new(v(a), v(b), v(c))),
            Pose::IDENTITY,
        ),
        Shape::Capsule { a, b, radius } => (
            SharedShape::new(Capsule::new(v(a), v(b), radius)),
            Pose::IDENTITY,
        ),
        Shape::Cylinder { a, b, radius } => {
            let (half_height, pose) = standing_on_y(a, b);
            (SharedShape::new(Cylinder::new(half_height, radius)), pose)
        }
        Shape::Cone { a, b, radius } => {
            // parry's cone has its base at −Y and its apex at +Y: base at a, apex at b.
            let (half_height, pose) = standing_on_y(a, b);
            (SharedShape::new(Cone::new(half_height, radius)), pose)
        }
        Shape::Wedge {
            center,
            half_extents,
            rotation,
        } => (
            hull(
                wedge_vertices(half_extents)
                    .map(|l| Shape::oriented_point(center, rotation, l))
                    .to_vec(),
            ),
            Pose::IDENTITY,
        ),
        Shape::CornerWedge {
            center,
            half_extents,
            rotation,
        } => (
            hull(
                corner_wedge_vertices(half_extents)
                    .map(|l| Shape::oriented_point(center, rotation, l))
                    .to_vec(),
            ),
            Pose::IDENTITY,
        ),
        Shape::ConvexHull(ref h) => (hull(h.points.clone()), Pose::IDENTITY),
        _ => return None,
    })
}

/// parry's projection of `p` onto the boundary of `shape` (solid = false).
fn parry_projection(shape: &Shape, p: DVec3) -> Option<PointProjection> {
    let (twin, pose) = parry_shape(shape)?;
    Some(twin.project_point(&pose, v(p), false))
}

/// A random shape of `kind` of size about `size` near `centre` (`common::random_shape`).
fn random_shape(kind: ShapeKind, rng: &mut Rng, centre: DVec3, size: f64) -> Shape {
    let c = centre + rng.vec(-size, size);
    common::random_shape(kind, rng, c, size)
}

/// Points that matter for `shape`: around it, on its axis (ends, middle, beyond) and centre.
fn points_for(shape: &Shape, rng: &mut Rng, size: f64) -> Vec<DVec3> {
    let around = |rng: &mut Rng, c: DVec3| {
        (0..6)
            .map(move |_| c)
            .map(|c| c + rng.vec(-3.0, 3.0) * size)
            .collect::<Vec<_>>()
    };
    let mut points = match *shape {
        Shape::Capsule { a, b, .. } | Shape::Cylinder { a, b, .. } | Shape::Cone { a, b, .. } => {
            let mut on_axis: Vec<DVec3> = [-0.5, 0.0, 0.25, 0.5, 0.9, 1.0, 1.5]
                .iter()
                .map(|&t| a + (b - a) * t)
                .collect();
            on_axis.extend(around(rng, (a + b) * 0.5));
            on_axis
        }
        Shape::Sphere { center, .. }
        | Shape::Box { center, .. }
        | Shape::Wedge { center, .. }
        | Shape::CornerWedge { center, .. } => {
            let mut p = vec![center];
            p.extend(around(rng, center));
            p
        }
        Shape::Aabb { min, max } => {
            let mut p = vec![(min + max) * 0.5];
            p.extend(around(rng, (min + max) * 0.5));
            p
        }
        Shape::Segment { a, b } => around(rng, (a + b) * 0.5),
        Shape::Triangle { a, b, c } => around(rng, (a + b + c) / 3.0),
        Shape::Plane { normal, offset } => around(rng, normal * offset),
        Shape::ConvexHull(ref h) => around(rng, h.anchor),
        _ => unreachable!(),
    };
    // Points exactly on the surface: parry's own projections of the points so far.
    let on_surface: Vec<DVec3> = points
        .iter()
        .filter_map(|&p| parry_projection(shape, p).map(|q| d(q.point)))
        .filter(|q| q.is_finite())
        .collect();
    // And points just off it, on either side.
    let near: Vec<DVec3> = on_surface
        .iter()
        .map(|&q| q + rng.unit() * (1e-3 * size * rng.range(0.0, 1.0)))
        .collect();
    points.extend(on_surface);
    points.extend(near);
    points
}

#[test]
fn the_kernels_agree_with_parrys_projections() {
    let kinds = [
        ShapeKind::Sphere,
        ShapeKind::Aabb,
        ShapeKind::Box,
        ShapeKind::Plane,
        ShapeKind::Segment,
        ShapeKind::Triangle,
        ShapeKind::Capsule,
        ShapeKind::Cylinder,
        ShapeKind::Cone,
        ShapeKind::Wedge,
        ShapeKind::CornerWedge,
        ShapeKind::ConvexHull,
    ];
    let mut rng = Rng::new(20261129);
    let (mut shapes, mut points) = (Vec::new(), Vec::new());
    for kind in kinds {
        for (centre, size) in [(DVec3::ZERO, 1.0), (DVec3::new(300.0, -200.0, 100.0), 2.0)] {
            for _ in 0..40 {
                let shape = random_shape(kind, &mut rng, centre, size);
                for p in points_for(&shape, &mut rng, size) {
                    shapes.push(shape.clone());
                    points.push(p);
                }
            }
        }
    }
    let hits = engine()
        .paired_hits(&shapes, &f32_points(&points), Mode::Surface)
        .expect("paired query");
    let mut failures = Vec::new();
    let mut checked = [0usize; 2]; // [outside or on, inside]
    let mut skipped = 0;
    for ((shape, &p), hit) in shapes.iter().zip(&points).zip(&hits) {
        // The query is in f32: the oracle answers the point the kernel was given.
        let p = DVec3::new(p.x as f32 as f64, p.y as f32 as f64, p.z as f32 as f64);
        let projection = parry_projection(shape, p).expect("a kind parry has");
        let q_parry = d(projection.point);
        if !q_parry.is_finite() {
            // parry has no answer at a sphere's centre (it normalises a zero vector); edges.rs
            // checks ours there.
            skipped += 1;
            continue;
        }
        let distance = (p - q_parry).length();
        let signed = if projection.is_inside
            && !matches!(shape.kind(), ShapeKind::Segment | ShapeKind::Triangle)
        {
            -distance
        } else {
            distance
        };
        checked[usize::from(signed < 0.0)] += 1;
        let tol = closest::tolerance(shape.scale().max(p.max_abs()));
        let q = DVec3::new(
            hit.point[0] as f64,
            hit.point[1] as f64,
            hit.point[2] as f64,
        );
        let got = hit.distance as f64;
        let mut problems = Vec::new();
        // Signs may differ only within the bound of the surface (SPEC §3).
        let agrees = within((got - signed).abs(), tol)
            || (within(distance, tol) && within((got.abs() - distance).abs(), tol));
        if !agrees {
            problems.push(format!("distance {got} vs parry's {signed}"));
        }
        let same_q = within((q - q_parry).length(), tol);
        let as_close = within(((p - q).length() - distance).abs(), tol);
        if !(same_q || as_close) {
            problems.push(format!("q {q:?} vs parry's {q_parry:?}, not as close to p"));
        }
        if !problems.is_empty() {
            failures.push(format!("{shape:?} p = {p:?}: {}", problems.join("; ")));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} rows disagree with parry:\n{}",
        failures.len(),
        points.len(),
        failures[..failures.len().min(20)].join("\n")
    );
    // Both sides of the surfaces were asked.
    assert!(checked[0] > 1000 && checked[1] > 300, "{checked:?}");
    assert!(skipped <= 80, "parry answered {skipped} rows with NaN");
}

#[test]
fn body_contacts_agree_with_parrys_distance_and_contact() {
    // SPEC §9, paired: every convex body kind parry has against every target kind it has,
    // separated, touching and overlapping. Separations within SPEC §3's bound of parry's
    // `query::distance`; depths within §9's 1e-4·scale of parry's `query::contact`.
    use closest::engine::BodyPairs;
    use closest::fields::{Family, Fields, GpuBodyHit};
    let body_kinds = [
        ShapeKind::Sphere,
        ShapeKind::Capsule,
        ShapeKind::Box,
        ShapeKind::Cylinder,
        ShapeKind::Cone,
        ShapeKind::Wedge,
        ShapeKind::ConvexHull,
    ];
    let target_kinds = [
        ShapeKind::Sphere,
        ShapeKind::Aabb,
        ShapeKind::Box,
        ShapeKind::Segment,
        ShapeKind::Triangle,
        ShapeKind::Capsule,
        ShapeKind::Cylinder,
        ShapeKind::Cone,
        ShapeKind::CornerWedge,
        ShapeKind::ConvexHull,
    ];
    let mut rng = Rng::new(9);
    let (mut bodies, mut targets) = (Vec::new(), Vec::new());
    for body in body_kinds {
        for target in target_kinds {
            for k in 0..12 {
                // Near each other: half the pairs overlap, more or less.
                let centre = DVec3::new(40.0, -10.0, 5.0) * (k % 2) as f64;
                bodies.push(random_shape(body, &mut rng, centre, 1.0));
                targets.push(random_shape(target, &mut rng, centre, 1.0));
            }
        }
    }
    let mut rows: Vec<GpuBodyHit> = Vec::new();
    engine()
        .body_pairs(
            BodyPairs {
                bodies: &bodies,
                targets: &targets,
                fields: Fields::all(Family::Bodies),
            },
            &mut rows,
        )
        .expect("body pairs");
    let mut failures = Vec::new();
    let mut seen = [0usize; 2]; // [separated, overlapping]
    for ((body, target), row) in bodies.iter().zip(&targets).zip(&rows) {
        let (b, body_pose) = parry_shape(body).unwrap();
        let (t, target_pose) = parry_shape(target).unwrap();
        let separation = parry3d_f64::query::distance(&body_pose, &*b, &target_pose, &*t)
            .expect("a pair parry answers")
            .distance;
        let expected = if separation > 0.0 {
            separation
        } else {
            let contact = parry3d_f64::query::contact(&body_pose, &*b, &target_pose, &*t, 0.0)
                .expect("a pair parry answers")
                .expect("overlapping shapes are in contact");
            contact.dist
        };
        seen[usize::from(expected <= 0.0)] += 1;
        let scale = body.scale().max(target.scale());
        let bound = if expected < 0.0 {
            1e-4 * scale.max(1e-3)
        } else {
            closest::tolerance(scale)
        };
        let got = row.distance as f64;
        if !within((got - expected).abs(), bound) {
            failures.push(format!(
                "{body:?} against {target:?}: {got} vs parry's {expected} (|diff| {:e} > {bound:e})",
                (got - expected).abs()
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} pairs disagree with parry:\n{}",
        failures.len(),
        rows.len(),
        failures[..failures.len().min(12)].join("\n")
    );
    assert!(seen[0] > 150 && seen[1] > 150, "{seen:?}");
}
