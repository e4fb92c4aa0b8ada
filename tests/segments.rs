//! Segment pairs on the GPU against the exact f64 reference: crossing, skew, parallel,
//! collinear, zero-length and near-parallel pairs, near and far from the origin, NaN rows.

mod common;

use closest::reference::closest_segment_pair;
use closest::{DVec3, GpuSegmentHit};
use common::{Rng, TestJobs, engine, within};

fn v(p: [f32; 3]) -> DVec3 {
    DVec3::new(p[0] as f64, p[1] as f64, p[2] as f64)
}

/// Check every row; panics listing the first failures.
fn assert_pairs(cases: &[(String, [DVec3; 2], [DVec3; 2])]) {
    let a: Vec<[DVec3; 2]> = cases.iter().map(|c| c.1).collect();
    let b: Vec<[DVec3; 2]> = cases.iter().map(|c| c.2).collect();
    let hits = engine().segment_hits(&a, &b).expect("segment pairs");
    let mut failures = Vec::new();
    for ((name, a, b), hit) in cases.iter().zip(&hits) {
        if let Err(e) = check(*a, *b, hit) {
            failures.push(format!("{name}: A {a:?} B {b:?}: {e}"));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} pairs fail:\n{}",
        failures.len(),
        cases.len(),
        failures[..failures.len().min(15)].join("\n")
    );
}

fn check(a: [DVec3; 2], b: [DVec3; 2], hit: &GpuSegmentHit) -> Result<(), String> {
    let expected = closest_segment_pair(a[0], a[1], b[0], b[1]);
    if expected.distance.is_nan() {
        let all_nan = [hit.s, hit.t, hit.distance]
            .iter()
            .chain(&hit.point_a)
            .chain(&hit.point_b)
            .all(|x| x.is_nan());
        return if all_nan {
            Ok(())
        } else {
            Err(format!("non-finite row must be NaN, got {hit:?}"))
        };
    }
    let scale = [a[0], a[1], b[0], b[1]]
        .iter()
        .map(|p| p.max_abs())
        .fold(0.0, f64::max);
    let tol = closest::tolerance(scale);
    let (pa, pb) = (v(hit.point_a), v(hit.point_b));
    let (s, t) = (hit.s as f64, hit.t as f64);
    let mut problems = Vec::new();
    if !within((hit.distance as f64 - expected.distance).abs(), tol) {
        problems.push(format!(
            "distance {} vs {} (tol {tol:e})",
            hit.distance, expected.distance
        ));
    }
    if !((0.0..=1.0).contains(&s) && (0.0..=1.0).contains(&t)) {
        problems.push(format!("s = {s}, t = {t} outside [0, 1]"));
    }
    // The points are where s and t say, and are as far apart as the distance.
    let on_a = a[0] + (a[1] - a[0]) * s;
    let on_b = b[0] + (b[1] - b[0]) * t;
    if !within((pa - on_a).length(), tol) || !within((pb - on_b).length(), tol) {
        problems.push(format!(
            "points {pa:?}, {pb:?} are not A(s) = {on_a:?}, B(t) = {on_b:?}"
        ));
    }
    if !within(((pa - pb).length() - expected.distance).abs(), tol) {
        problems.push(format!(
            "|point_a − point_b| = {} vs distance {}",
            (pa - pb).length(),
            expected.distance
        ));
    }
    // An oracle that shares no idea with the twin: the distance from A(s) to B, convex in s,
    // minimised by golden-section search.
    let searched = least_distance_by_search(a, b);
    if !within((hit.distance as f64 - searched).abs(), tol) {
        problems.push(format!(
            "distance {} vs {searched} by search over A (tol {tol:e})",
            hit.distance
        ));
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("; "))
    }
}

/// The distance from `p` to the segment `b`, by clamped projection.
fn point_segment_distance(p: DVec3, b: [DVec3; 2]) -> f64 {
    let d = b[1] - b[0];
    let length_squared = d.length_squared();
    let t = if length_squared > 0.0 {
        ((p - b[0]).dot(d) / length_squared).clamp(0.0, 1.0)
    } else {
        0.0
    };
    (p - (b[0] + d * t)).length()
}

/// min over s in [0, 1] of the distance from A(s) to B: a convex function of s (the distance
/// from a point moving on a line to a convex set), so golden-section search finds it.
fn least_distance_by_search(a: [DVec3; 2], b: [DVec3; 2]) -> f64 {
    let at = |s: f64| point_segment_distance(a[0] + (a[1] - a[0]) * s, b);
    let ratio = (5f64.sqrt() - 1.0) / 2.0;
    let (mut lo, mut hi) = (0.0f64, 1.0f64);
    for _ in 0..200 {
        let (x1, x2) = (hi - ratio * (hi - lo), lo + ratio * (hi - lo));
        if at(x1) <= at(x2) {
            hi = x2;
        } else {
            lo = x1;
        }
    }
    at(0.0).min(at(1.0)).min(at((lo + hi) / 2.0))
}

fn rotate_about(p: DVec3, axis: DVec3, angle: f64) -> DVec3 {
    // Rodrigues' formula.
    let k = axis.normalize_or_zero();
    p * angle.cos() + k.cross(p) * angle.sin() + k * (k.dot(p) * (1.0 - angle.cos()))
}

#[test]
fn segment_pairs_match_reference() {
    let mut rng = Rng::new(31);
    let mut cases = Vec::new();
    for (place, offset, size) in [
        ("unit", 0.0, 1.0),
        ("far 1e4", 1e4, 1.0),
        ("mm at 1e4", 1e4, 1e-3),
        ("huge", 0.0, 1e4),
        // Beyond f32's squares (~1.8e19): far apart, and segments that long.
        ("far 1e20", 1e20, 1.0),
        ("1e20 long", 0.0, 1e20),
        ("1e30 long at 1e30", 1e30, 1e30),
    ] {
        for _ in 0..200 {
            let c = rng.vec(-offset, offset);
            let seg = |rng: &mut Rng| [c + rng.vec(-size, size), c + rng.vec(-size, size)];
            cases.push((format!("{place}: random"), seg(&mut rng), seg(&mut rng)));
        }
        for _ in 0..60 {
            let c = rng.vec(-offset, offset);
            let dir = rng.unit() * size;
            let perp = closest::math::any_perpendicular(dir) * size;
            let a = [c - dir, c + dir];
            // Crossing (touching) at the midpoints, skew by a small gap, parallel, collinear
            // overlapping and disjoint, zero-length, and near-parallel at shrinking angles.
            let cross_dir = rotate_about(dir, perp, 0.7);
            cases.push((
                format!("{place}: crossing"),
                a,
                [c - cross_dir, c + cross_dir],
            ));
            let skew = dir.cross(perp).normalize_or_zero() * (0.01 * size);
            cases.push((
                format!("{place}: skew"),
                a,
                [c + skew - cross_dir, c + skew + cross_dir],
            ));
            cases.push((
                format!("{place}: parallel"),
                a,
                [c + perp * 0.3 - dir * 0.5, c + perp * 0.3 + dir * 1.7],
            ));
            cases.push((
                format!("{place}: collinear overlapping"),
                a,
                [c + dir * 0.5, c + dir * 3.0],
            ));
            cases.push((
                format!("{place}: collinear disjoint"),
                a,
                [c + dir * 1.5, c + dir * 3.0],
            ));
            cases.push((
                format!("{place}: anti-parallel"),
                a,
                [c + perp * 0.2 + dir * 2.0, c + perp * 0.2 - dir * 0.5],
            ));
            cases.push((format!("{place}: zero-length B"), a, [c + perp, c + perp]));
            cases.push((
                format!("{place}: both zero-length"),
                [c, c],
                [c + perp, c + perp],
            ));
            for angle in [1e-2, 1e-3, 1e-4, 1e-5, 1e-6] {
                let near = rotate_about(dir, perp, angle);
                let lift = perp * (rng.range(-0.1, 0.1));
                cases.push((
                    format!("{place}: near-parallel crossing {angle:e}"),
                    a,
                    [c + lift - near * 0.9, c + lift + near * 1.1],
                ));
                let shift = dir * rng.range(-1.5, 1.5);
                cases.push((
                    format!("{place}: near-parallel offset {angle:e}"),
                    a,
                    [
                        c + perp * 0.05 + shift - near,
                        c + perp * 0.05 + shift + near,
                    ],
                ));
            }
        }
    }
    // Near-parallel stress: unit segments at random angles 1e-2 … 1e-6, random along-axis
    // overlap and small perpendicular offsets, away from the origin.
    for _ in 0..4000 {
        let c = rng.vec(-2.0, 2.0);
        let dir = rng.unit();
        let axis = closest::math::any_perpendicular(dir);
        let angle = 10f64.powf(rng.range(-6.0, -2.0));
        let near = rotate_about(dir, rotate_about(axis, dir, rng.range(0.0, 6.3)), angle);
        let offset =
            rotate_about(axis, dir, rng.range(0.0, 6.3)) * 10f64.powf(rng.range(-4.0, -1.0));
        let along = dir * rng.range(-1.2, 1.2);
        let (la, lb) = (rng.range(0.3, 1.0), rng.range(0.3, 1.0));
        cases.push((
            "near-parallel stress".into(),
            [c, c + dir * la],
            [c + along + offset, c + along + offset + near * lb],
        ));
    }
    cases.push((
        "NaN row".into(),
        [DVec3::new(f64::NAN, 0.0, 0.0), DVec3::X],
        [DVec3::Y, DVec3::Z],
    ));
    cases.push((
        "infinite row".into(),
        [DVec3::ZERO, DVec3::X],
        [DVec3::Y, DVec3::new(0.0, f64::INFINITY, 0.0)],
    ));
    assert_pairs(&cases);
}

#[test]
fn known_pairs() {
    // Crossing at right angles 2 apart, and parallel overlapping 1 apart.
    let hits = engine()
        .segment_hits(
            &[
                [DVec3::new(-1.0, 0.0, 0.0), DVec3::new(1.0, 0.0, 0.0)],
                [DVec3::ZERO, DVec3::new(4.0, 0.0, 0.0)],
            ],
            &[
                [DVec3::new(0.0, -1.0, 2.0), DVec3::new(0.0, 1.0, 2.0)],
                [DVec3::new(2.0, 1.0, 0.0), DVec3::new(6.0, 1.0, 0.0)],
            ],
        )
        .unwrap();
    assert_eq!(hits[0].point_a, [0.0, 0.0, 0.0]);
    assert_eq!(hits[0].point_b, [0.0, 0.0, 2.0]);
    assert_eq!((hits[0].s, hits[0].t, hits[0].distance), (0.5, 0.5, 2.0));
    assert_eq!(hits[1].distance, 1.0);
}
