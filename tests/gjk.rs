//! The f64 body oracle (`reference::gjk`, SPEC §9) against closed forms built on other ideas
//! (sphere pairs, a sphere against every convex kind by the point query, capsule pairs by the
//! segment-pair reference, box pairs by their axes), and checks that need no twin: the
//! witnesses realise the distance, no sampled pair of surface points is nearer, and the
//! minimal translation separates and is minimal.

mod common;

use closest::Mode;
use closest::reference::gjk::{BodyContact, Convex, body_contact};
use closest::reference::{closest_segment_pair, query_shape};
use closest::shape::Shape;
use closest::{DVec3, tolerance};
use common::{Rng, convex_kinds};

fn convex(shape: &Shape) -> Convex {
    Convex::of(shape).expect("a convex kind")
}

fn contact(body: &Shape, target: &Shape) -> BodyContact {
    body_contact(&convex(body), &convex(target))
}

/// SPEC §3's bound for a pair, and §9's for depths and normals.
fn bounds(body: &Shape, target: &Shape) -> (f64, f64) {
    let scale = convex(body).scale().max(convex(target).scale());
    (tolerance(scale), 1e-4 * scale.max(1e-3))
}

#[test]
fn sphere_pairs_are_their_closed_form_separated_touching_overlapping_and_nested() {
    let mut rng = Rng::new(1);
    for &offset in &[DVec3::ZERO, DVec3::new(1e4, -3e4, 2e4)] {
        for &(gap, r1, r2) in &[
            (2.0, 1.0, 0.5),
            (1.5, 1.0, 0.5),
            (1.0, 1.0, 0.5),
            (0.2, 1.0, 0.5),
            (1e-3, 1e-3, 2e-3),
        ] {
            let (c1, c2) = (offset + rng.unit() * gap, offset);
            let body = Shape::Sphere {
                center: c1,
                radius: r1,
            };
            let target = Shape::Sphere {
                center: c2,
                radius: r2,
            };
            let got = contact(&body, &target);
            let (tol, _) = bounds(&body, &target);
            let expected = gap - r1 - r2;
            assert!(
                (got.distance - expected).abs() <= tol,
                "{gap} {r1} {r2}: {got:?}"
            );
            // The rounded centres' own direction (at 3·10^4, rounding moves a 10^-3 gap's
            // direction by ~10^-9).
            let exact_direction = (c1 - c2).normalize_or_zero();
            assert!((got.normal - exact_direction).length() <= 1e-9, "{got:?}");
            assert!((got.point_body - (c1 - exact_direction * r1)).length() <= tol);
            assert!((got.point_target - (c2 + exact_direction * r2)).length() <= tol);
        }
    }
}

#[test]
fn a_sphere_against_every_convex_kind_is_the_point_query_less_its_radius() {
    // The point query (`reference::project_*`) is another idea: per-kind projections, not
    // supports. Outside: distance = d(centre) − r along the query's normal; inside a solid:
    // depth = r + the centre's depth, out through the nearest face.
    let mut rng = Rng::new(2);
    for round in 0..40 {
        let (centre, size) = match round % 4 {
            0 => (DVec3::ZERO, 1.0),
            1 => (rng.vec(-1e4, 1e4), 1.0),
            2 => (rng.vec(-1.0, 1.0), 1e-3),
            _ => (rng.vec(-1e3, 1e3), 1e3),
        };
        for target in convex_kinds(&mut rng, centre, size) {
            for _ in 0..6 {
                let p = centre + rng.vec(-1.2, 1.2) * size;
                let r = rng.range(0.01, 0.3) * size;
                let body = Shape::Sphere {
                    center: p,
                    radius: r,
                };
                let hit = query_shape(&target, 0, p, Mode::Surface);
                let got = contact(&body, &target);
                let (tol, loose) = bounds(&body, &target);
                let expected = hit.distance - r;
                if hit.distance > tol {
                    assert!(
                        (got.distance - expected).abs() <= tol,
                        "{target:?} p {p:?} r {r}: {} vs {expected}",
                        got.distance
                    );
                    // Points within `tol` of each other: directions within ~tol / distance.
                    let angle = 1e-6 + 2.0 * tol / hit.distance;
                    assert!(
                        (got.normal - hit.normal).length() <= angle,
                        "{target:?}: {got:?} vs {hit:?}"
                    );
                } else if hit.distance < -loose && is_solid(&target) {
                    assert!(
                        (got.distance - expected).abs() <= loose,
                        "{target:?} p {p:?} r {r}: depth {} vs {}",
                        -got.distance,
                        -expected
                    );
                }
                check_witnesses(&body, &target, &got);
            }
        }
    }
}

fn is_solid(shape: &Shape) -> bool {
    !matches!(shape, Shape::Segment { .. } | Shape::Triangle { .. })
        && !matches!(shape, Shape::ConvexHull(h) if !h.solid)
}

#[test]
fn capsule_pairs_are_the_segment_pair_reference_less_their_radii() {
    let mut rng = Rng::new(3);
    for round in 0..40 {
        let offset = if round % 2 == 0 {
            DVec3::ZERO
        } else {
            DVec3::new(-2e4, 1e4, 5e3)
        };
        let (a0, a1) = (offset + rng.vec(-1.0, 1.0), offset + rng.vec(-1.0, 1.0));
        let (b0, b1) = match round % 3 {
            // Parallel, and degenerate (a point).
            0 => {
                let shift = rng.vec(-0.5, 0.5);
                (a0 + shift, a1 + shift)
            }
            1 => {
                let p = offset + rng.vec(-1.0, 1.0);
                (p, p)
            }
            _ => (offset + rng.vec(-1.0, 1.0), offset + rng.vec(-1.0, 1.0)),
        };
        let (ra, rb) = (rng.range(0.0, 0.2), rng.range(0.0, 0.2));
        let body = Shape::Capsule {
            a: a0,
            b: a1,
            radius: ra,
        };
        let target = Shape::Capsule {
            a: b0,
            b: b1,
            radius: rb,
        };
        let pair = closest_segment_pair(a0, a1, b0, b1);
        let got = contact(&body, &target);
        let (tol, _) = bounds(&body, &target);
        if pair.distance > tol {
            assert!(
                (got.distance - (pair.distance - ra - rb)).abs() <= tol,
                "round {round}: {} vs {}",
                got.distance,
                pair.distance - ra - rb
            );
        }
        check_witnesses(&body, &target, &got);
    }
}

#[test]
fn box_pairs_separate_by_their_axes_with_parallel_faces_and_crossed_edges() {
    let mut rng = Rng::new(4);
    for round in 0..200 {
        let offset = if round % 2 == 0 {
            DVec3::ZERO
        } else {
            DVec3::new(3e3, 3e3, -3e3)
        };
        let h1 = rng.vec(0.1, 1.0);
        let h2 = rng.vec(0.1, 1.0);
        let c1 = offset + rng.vec(-2.0, 2.0);
        let c2 = offset + rng.vec(-2.0, 2.0);
        let body = Shape::Aabb {
            min: c1 - h1,
            max: c1 + h1,
        };
        let target = Shape::Aabb {
            min: c2 - h2,
            max: c2 + h2,
        };
        let gaps = DVec3::new(
            (c1.x - c2.x).abs() - h1.x - h2.x,
            (c1.y - c2.y).abs() - h1.y - h2.y,
            (c1.z - c2.z).abs() - h1.z - h2.z,
        );
        let got = contact(&body, &target);
        let (tol, loose) = bounds(&body, &target);
        if gaps.x.max(gaps.y).max(gaps.z) > 0.0 {
            let expected = DVec3::new(gaps.x.max(0.0), gaps.y.max(0.0), gaps.z.max(0.0)).length();
            assert!(
                (got.distance - expected).abs() <= tol,
                "{round}: {} vs {expected}",
                got.distance
            );
        } else {
            // Overlapping: the least overlap's axis, out of the target.
            let depth = -gaps.x.max(gaps.y).max(gaps.z);
            assert!(
                (got.distance + depth).abs() <= loose,
                "{round}: depth {} vs {depth}",
                -got.distance
            );
            let axis = [gaps.x, gaps.y, gaps.z]
                .iter()
                .enumerate()
                .max_by(|a, b| a.1.total_cmp(b.1))
                .unwrap()
                .0;
            let side = (c1.get(axis) - c2.get(axis)).signum();
            let expected_normal = [DVec3::X, DVec3::Y, DVec3::new(0.0, 0.0, 1.0)][axis] * side;
            let runner_up = {
                let mut g = [gaps.x, gaps.y, gaps.z];
                g.sort_by(|a, b| b.total_cmp(a));
                g[1]
            };
            // A tie between two axes leaves either normal right.
            if -runner_up - depth > loose {
                assert!(
                    (got.normal - expected_normal).length() <= 1e-4,
                    "{round}: {got:?}"
                );
            }
        }
        check_witnesses(&body, &target, &got);
    }
    // Face to face and edge across edge, turned boxes.
    let q = [
        0.0,
        0.0,
        (std::f64::consts::FRAC_PI_8).sin(),
        (std::f64::consts::FRAC_PI_8).cos(),
    ];
    let bottom = Shape::Box {
        center: DVec3::ZERO,
        half_extents: DVec3::new(1.0, 1.0, 1.0),
        rotation: q,
    };
    let top = Shape::Box {
        center: DVec3::new(0.0, 0.0, 2.5),
        half_extents: DVec3::new(1.0, 1.0, 1.0),
        rotation: q,
    };
    let got = contact(&top, &bottom);
    assert!(
        (got.distance - 0.5).abs() <= 1e-9 && (got.normal.z - 1.0).abs() <= 1e-9,
        "{got:?}"
    );
    let ridge = |centre: DVec3, about_x: bool| {
        let s = (std::f64::consts::FRAC_PI_8).sin();
        let c = (std::f64::consts::FRAC_PI_8).cos();
        let rotation = if about_x {
            [s, 0.0, 0.0, c]
        } else {
            [0.0, s, 0.0, c]
        };
        Shape::Box {
            center: centre,
            half_extents: DVec3::new(1.0, 1.0, 1.0),
            rotation,
        }
    };
    // Two boxes turned 45° about x and y: their ridges cross, √2 from each centre.
    let (lower, upper) = (
        ridge(DVec3::ZERO, true),
        ridge(DVec3::new(0.0, 0.0, 3.0), false),
    );
    let got = contact(&upper, &lower);
    let expected = 3.0 - 2.0 * std::f64::consts::SQRT_2;
    assert!(
        (got.distance - expected).abs() <= 1e-9,
        "{got:?} vs {expected}"
    );
}

/// What needs no twin: the witnesses lie on (within) their shapes and realise the distance; for
/// a separated pair no two sampled boundary points are nearer; for an overlap, moving the body
/// by the translation makes them touch, and no random direction separates them sooner.
fn check_witnesses(body: &Shape, target: &Shape, got: &BodyContact) {
    let (b, t) = (convex(body), convex(target));
    let (tol, loose) = bounds(body, target);
    let mut rng = Rng::new(99);
    // Within a convex shape: not beyond its support along any of these directions.
    let directions: Vec<DVec3> = (0..48).map(|_| rng.unit()).collect();
    let within = |shape: &Convex, p: DVec3, slack: f64| {
        directions
            .iter()
            .all(|&d| p.dot(d) <= shape.support(d).dot(d) + slack)
    };
    assert!((got.normal.length() - 1.0).abs() <= 1e-9, "{got:?}");
    if got.distance >= 0.0 {
        assert!(within(&b, got.point_body, tol), "{body:?}: {got:?}");
        assert!(within(&t, got.point_target, tol), "{target:?}: {got:?}");
        let realised = (got.point_body - got.point_target).length();
        assert!((realised - got.distance).abs() <= tol, "{got:?}");
        for _ in 0..200 {
            let (u, v) = (rng.unit(), rng.unit());
            let (p, q) = (b.support(u), t.support(v));
            assert!(
                (p - q).length() >= got.distance - tol,
                "{body:?} {target:?}: {got:?}"
            );
        }
    } else {
        let moved = |by: f64| translated(&b, got.normal * (-got.distance * by));
        let apart = body_contact(&moved(1.0 + 1e-6), &t);
        assert!(
            apart.distance.abs() <= loose,
            "{body:?} {target:?}: {got:?} then {apart:?}"
        );
        // The depth is the least of the difference's support function h(n) = h_body(n) +
        // h_target(−n) over directions (the origin is inside body − target), reached at
        // −normal: no sampled direction goes lower, and that one gives the depth.
        let h = |n: DVec3| b.support(n).dot(n) - t.support(-n).dot(n);
        let depth = -got.distance;
        assert!(
            (h(-got.normal) - depth).abs() <= loose,
            "{body:?} {target:?}: {got:?}"
        );
        for _ in 0..2000 {
            let n = rng.unit();
            assert!(
                h(n) >= depth - loose,
                "{body:?} {target:?}: {got:?} but {} along {n:?}",
                h(n)
            );
        }
        for _ in 0..10 {
            let u = rng.unit();
            // Along u, a translation shorter than the depth leaves them overlapping.
            let shorter = translated(&b, u * (depth - loose));
            assert!(
                body_contact(&shorter, &t).distance <= loose,
                "{body:?} {target:?}: {got:?} along {u:?}"
            );
        }
    }
}

fn translated(shape: &Convex, by: DVec3) -> Convex {
    shape.translated(by)
}

#[test]
fn every_pair_of_convex_kinds_separated_or_overlapping_passes_the_checks_without_a_twin() {
    // Random pairs of every kind, from far apart to deeply nested, and degenerate bodies (a
    // capsule of radius 0, a flat box, a disk, a cone of radius 0), near and far from the
    // origin: the witnesses realise the distance and no sampled pair is nearer; an overlap's
    // translation makes them touch and no direction separates them in less.
    let mut rng = Rng::new(5);
    let mut overlapping = 0;
    for round in 0..40 {
        let (centre, size) = match round % 3 {
            0 => (DVec3::ZERO, 1.0),
            1 => (rng.vec(-1e4, 1e4), 1.0),
            _ => (rng.vec(-1.0, 1.0), 1e-2),
        };
        let mut bodies = convex_kinds(&mut rng, centre, size);
        bodies.extend([
            Shape::Capsule {
                a: centre,
                b: centre + rng.vec(-0.5, 0.5) * size,
                radius: 0.0,
            },
            Shape::Box {
                center: centre,
                half_extents: DVec3::new(0.4, 0.3, 0.0) * size,
                rotation: rng.quaternion(),
            },
            Shape::Cylinder {
                a: centre,
                b: centre,
                radius: 0.3 * size,
            },
            Shape::Cone {
                a: centre,
                b: centre + rng.vec(-0.5, 0.5) * size,
                radius: 0.0,
            },
        ]);
        let target_centre = centre + rng.vec(-0.6, 0.6) * size;
        let targets = convex_kinds(&mut rng, target_centre, size);
        for body in &bodies {
            for target in &targets {
                let got = contact(body, target);
                assert!(got.distance.is_finite(), "{body:?} {target:?}: {got:?}");
                if got.distance < 0.0 {
                    overlapping += 1;
                }
                check_witnesses(body, target, &got);
            }
        }
    }
    assert!(
        overlapping > 500,
        "{overlapping} overlapping pairs: the test must reach EPA"
    );
}
