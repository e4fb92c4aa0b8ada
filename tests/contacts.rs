//! Sphere contacts: the GPU against the reference, and the collision-response property:
//! pushing an overlapping sphere by depth·normal leaves it touching the shape it was pushed
//! from (centre at distance r) and overlapping it no more.

mod common;

use closest::reference;
use closest::{DVec3, Mode, Shape, ShapeKind};
use common::{Rng, TestJobs, engine, within};

fn scene(rng: &mut Rng) -> Vec<Shape> {
    let mut shapes = Vec::new();
    for (i, kind) in ShapeKind::ALL.iter().cycle().take(48).enumerate() {
        let c = rng.vec(-6.0, 6.0);
        let h = rng.vec(0.3, 1.5);
        let q = rng.quaternion();
        let d = rng.unit() * rng.range(0.5, 2.0);
        shapes.push(match kind {
            ShapeKind::Sphere => Shape::Sphere {
                center: c,
                radius: h.x,
            },
            ShapeKind::Aabb => Shape::Aabb {
                min: c - h,
                max: c + h,
            },
            ShapeKind::Box => Shape::Box {
                center: c,
                half_extents: h,
                rotation: q,
            },
            // One floor far below, so it rarely shadows everything else.
            ShapeKind::Plane if i < ShapeKind::ALL.len() => Shape::Plane {
                normal: DVec3::Z,
                offset: -9.0,
            },
            ShapeKind::Plane => Shape::Sphere {
                center: c,
                radius: h.y,
            },
            ShapeKind::Segment => Shape::Segment { a: c, b: c + d },
            ShapeKind::Line => Shape::Capsule {
                a: c,
                b: c + d,
                radius: h.z,
            },
            ShapeKind::Ray => Shape::Ray {
                origin: c,
                direction: d,
            },
            ShapeKind::Triangle => Shape::Triangle {
                a: c,
                b: c + d,
                c: c + rng.unit(),
            },
            ShapeKind::Capsule => Shape::Capsule {
                a: c,
                b: c + d,
                radius: h.z,
            },
            ShapeKind::Cylinder => Shape::Cylinder {
                a: c,
                b: c + d,
                radius: h.z,
            },
            ShapeKind::Wedge => Shape::Wedge {
                center: c,
                half_extents: h,
                rotation: q,
            },
            ShapeKind::CornerWedge => Shape::CornerWedge {
                center: c,
                half_extents: h,
                rotation: q,
            },
            ShapeKind::Cone => Shape::Cone {
                a: c,
                b: c + d,
                radius: h.z,
            },
            ShapeKind::Torus => Shape::Torus {
                center: c,
                axis: rng.unit(),
                major_radius: h.x,
                minor_radius: h.x * 0.3,
            },
            ShapeKind::Ellipsoid => Shape::Ellipsoid {
                center: c,
                radii: h,
                rotation: q,
            },
            ShapeKind::ConvexHull => Shape::ConvexHull(
                closest::hull::ConvexHull::new((0..8).map(|_| c + rng.vec(-1.0, 1.0)).collect())
                    .expect("a hull"),
            ),
        });
    }
    shapes
}

#[test]
fn contacts_match_reference_and_pushing_resolves_the_overlap() {
    let mut rng = Rng::new(77);
    let shapes = scene(&mut rng);
    let spheres: Vec<[f32; 4]> = (0..3000)
        .map(|_| {
            let c = rng.vec(-8.0, 8.0);
            [
                c.x as f32,
                c.y as f32,
                c.z as f32,
                rng.range(0.1, 1.5) as f32,
            ]
        })
        .collect();
    let gpu_scene = engine().upload_scene(&shapes).unwrap();
    let contacts = engine().contacts(&gpu_scene, &spheres).unwrap();
    let mut overlapping = 0;
    let mut failures = Vec::new();
    for (i, (s, contact)) in spheres.iter().zip(&contacts).enumerate() {
        let c = DVec3::new(s[0] as f64, s[1] as f64, s[2] as f64);
        let r = s[3] as f64;
        let expected = reference::nearest(&shapes, c, Mode::Surface);
        let shape = &shapes[contact.shape as usize];
        let tol = closest::tolerance(shape.scale().max(c.max_abs()).max(r));
        let depth = contact.depth as f64;
        if !within((depth - (r - expected.distance)).abs(), tol) {
            failures.push(format!(
                "sphere {i}: depth {depth} vs {}",
                r - expected.distance
            ));
            continue;
        }
        // The push property needs a convex shape: out of a torus' tube along the normal, the
        // sphere may reach across the hole to the tube's far side.
        if depth <= 10.0 * tol || matches!(shape, Shape::Torus { .. }) {
            continue;
        }
        overlapping += 1;
        let n = DVec3::new(
            contact.normal[0] as f64,
            contact.normal[1] as f64,
            contact.normal[2] as f64,
        );
        let pushed = c + n * depth;
        // Touching: the pushed centre is r from the shape (unsigned distance, since the
        // centre is now outside it), so the sphere overlaps it no more.
        let after = reference::query_shape(shape, 0, pushed, Mode::Surface).distance;
        if !within((after - r).abs(), 10.0 * tol) {
            failures.push(format!(
                "sphere {i} pushed from shape {}: centre now {after} from it, radius {r}",
                contact.shape
            ));
        }
    }
    assert!(
        overlapping > 300,
        "only {overlapping} overlapping spheres: the test lost its teeth"
    );
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures[..failures.len().min(15)].join("\n")
    );
}

#[test]
fn ball_in_a_wall_is_pushed_out_along_the_wall_normal() {
    // A 2-unit-thick wall (x in [0, 2]); a ball of radius 0.5 centred 0.25 inside its face.
    let wall = Shape::Aabb {
        min: DVec3::new(0.0, -5.0, -5.0),
        max: DVec3::new(2.0, 5.0, 5.0),
    };
    let scene = engine().upload_scene(&[wall]).unwrap();
    let contacts = engine()
        .contacts(&scene, &[[0.25, 0.0, 0.0, 0.5], [f32::NAN, 0.0, 0.0, 1.0]])
        .unwrap();
    let c = contacts[0];
    assert_eq!(
        (c.shape, c.normal, c.point),
        (0, [-1.0, 0.0, 0.0], [0.0, 0.0, 0.0])
    );
    assert!((c.depth - 0.75).abs() < 1e-6, "{c:?}");
    assert_eq!(contacts[1].shape, -1);
    assert!(contacts[1].depth.is_nan());
}

#[test]
fn negative_radius_is_an_error_naming_the_row() {
    let scene = engine()
        .upload_scene(&[Shape::Sphere {
            center: DVec3::ZERO,
            radius: 1.0,
        }])
        .unwrap();
    let err = engine()
        .contacts(&scene, &[[0.0, 0.0, 0.0, 1.0], [1.0, 1.0, 1.0, -0.5]])
        .unwrap_err();
    assert_eq!(err.exit_code(), 2);
    assert!(
        err.to_string().contains("row 1") && err.to_string().contains("radius"),
        "{err}"
    );
}
