//! Cylinders, wedges and corner wedges against a brute-force search over densely sampled
//! surface points, for random parts of very different proportions; the seeds' shortcuts
//! (per-axis clamps, shared/seeds/004) against the exact answers.

mod common;

use closest::math::DVec3;
use closest::reference::{self, Hit, corner_wedge_vertices, wedge_vertices};
use closest::{Mode, Shape};
use common::Rng;

/// Triangles covering a shape's boundary, in world space.
fn boundary_triangles(shape: &Shape) -> Vec<[DVec3; 3]> {
    match *shape {
        Shape::Wedge {
            center,
            half_extents: h,
            rotation,
        } => {
            let [a, b, c, d, e, f] =
                wedge_vertices(h).map(|v| Shape::oriented_point(center, rotation, v));
            vec![
                [a, b, d],
                [a, d, c],
                [c, d, f],
                [c, f, e],
                [a, e, f],
                [a, f, b],
                [a, c, e],
                [b, f, d],
            ]
        }
        Shape::CornerWedge {
            center,
            half_extents: h,
            rotation,
        } => {
            let [b1, b2, b3, b4, apex] =
                corner_wedge_vertices(h).map(|v| Shape::oriented_point(center, rotation, v));
            vec![
                [b1, b2, b3],
                [b1, b3, b4],
                [b2, apex, b3],
                [b1, apex, b2],
                [b1, b4, apex],
                [b4, b3, apex],
            ]
        }
        Shape::Cylinder { a, b, radius } => {
            // Caps as fans and the side as a band of thin triangles (chord error radius·(1−cos(π/n))).
            let (axis, _) = reference::cylinder_axis(a, b);
            let u = closest::math::any_perpendicular(axis);
            let w = axis.cross(u);
            let n = 720;
            let rim = |c: DVec3, k: usize| {
                let t = std::f64::consts::TAU * k as f64 / n as f64;
                c + (u * t.cos() + w * t.sin()) * radius
            };
            let mut tris = Vec::new();
            for k in 0..n {
                tris.push([a, rim(a, k), rim(a, k + 1)]);
                tris.push([b, rim(b, k), rim(b, k + 1)]);
                tris.push([rim(a, k), rim(a, k + 1), rim(b, k)]);
                tris.push([rim(a, k + 1), rim(b, k + 1), rim(b, k)]);
            }
            tris
        }
        _ => unreachable!("only parts are sampled"),
    }
}

/// Points on a grid over each triangle, spaced at most `spacing` apart.
fn samples(tris: &[[DVec3; 3]], spacing: f64) -> Vec<DVec3> {
    let mut out = Vec::new();
    for [a, b, c] in tris {
        let longest = (*b - *a)
            .length()
            .max((*c - *a).length())
            .max((*c - *b).length());
        let n = ((longest / spacing).ceil() as usize).clamp(1, 2000);
        for i in 0..=n {
            for j in 0..=(n - i) {
                let (s, t) = (i as f64 / n as f64, j as f64 / n as f64);
                out.push(*a + (*b - *a) * s + (*c - *a) * t);
            }
        }
    }
    out
}

fn nearest_sample(samples: &[DVec3], p: DVec3) -> f64 {
    use rayon::prelude::*;
    samples
        .par_iter()
        .map(|s| (*s - p).length_squared())
        .reduce(|| f64::INFINITY, f64::min)
        .sqrt()
}

/// Random parts of very different proportions (extents 0.05 to 20, log-uniform).
fn random_parts(rng: &mut Rng, count: usize) -> Vec<Shape> {
    let extent = |rng: &mut Rng| 0.05 * 400f64.powf(rng.range(0.0, 1.0));
    (0..count)
        .map(|i| {
            let center = rng.vec(-5.0, 5.0);
            let half_extents = DVec3::new(extent(rng), extent(rng), extent(rng));
            let rotation = rng.quaternion();
            match i % 3 {
                0 => Shape::Wedge {
                    center,
                    half_extents,
                    rotation,
                },
                1 => Shape::CornerWedge {
                    center,
                    half_extents,
                    rotation,
                },
                _ => {
                    let axis = rng.unit() * extent(rng);
                    Shape::Cylinder {
                        a: center - axis,
                        b: center + axis,
                        radius: extent(rng),
                    }
                }
            }
        })
        .collect()
}

#[test]
fn reference_matches_brute_force_on_parts_of_many_proportions() {
    let mut rng = Rng::new(2024);
    for shape in random_parts(&mut rng, 12) {
        let size = shape.scale();
        let tris = boundary_triangles(&shape);
        let longest = tris
            .iter()
            .flat_map(|t| [(t[1] - t[0]).length(), (t[2] - t[0]).length()])
            .fold(0.0, f64::max);
        let spacing = (longest / 150.0).max(1e-3);
        let surface = samples(&tris, spacing);
        // Sampling error bound: grid spacing, plus the cylinder's chord error.
        let slack = 2.0 * spacing
            + if let Shape::Cylinder { radius, .. } = shape {
                radius * 1e-4
            } else {
                0.0
            };
        let centre = match shape {
            Shape::Cylinder { a, b, .. } => (a + b) * 0.5,
            Shape::Wedge { center, .. } | Shape::CornerWedge { center, .. } => center,
            _ => unreachable!(),
        };
        for _ in 0..25 {
            let p = centre + rng.vec(-1.5, 1.5) * size.min(25.0);
            let hit: Hit = reference::query_shape(&shape, 0, p, Mode::Surface);
            let brute = nearest_sample(&surface, p);
            // The exact distance is at most any sample's, and within the sampling error of the nearest.
            assert!(
                hit.distance.abs() <= brute + 1e-9 * size,
                "{shape:?} p = {p:?}: |d| = {} > brute {brute}",
                hit.distance.abs()
            );
            assert!(
                brute <= hit.distance.abs() + slack,
                "{shape:?} p = {p:?}: brute {brute} > |d| = {} + {slack}",
                hit.distance.abs()
            );
            // q is on the boundary: within the sampling error of some sample.
            assert!(
                nearest_sample(&surface, hit.point) <= slack,
                "{shape:?} p = {p:?}: q = {:?} off the surface",
                hit.point
            );
        }
    }
}

/// Ray:ClosestPoint of Roblox: origin + dir·max(0, (p − origin)·dir), dir unit.
fn ray_closest(origin: DVec3, dir: DVec3, p: DVec3) -> DVec3 {
    origin + dir * (p - origin).dot(dir).max(0.0)
}

/// The corner-wedge shortcut of shared/seeds/004, in local coordinates.
fn seed_corner_wedge(t: DVec3, size: DVec3) -> DVec3 {
    let h = size * 0.5;
    let (xz, xy, zy) = (-h.z / h.x, h.y / h.x, -h.y / h.z);
    if t.z <= t.x * xz {
        let r = ray_closest(-h, DVec3::new(size.x, size.y, 0.0).normalize_or_zero(), t);
        DVec3::new(
            t.x.max(r.x).clamp(-h.x, h.x),
            t.y.min(r.y).min(r.x * xy).clamp(-h.y, h.y),
            t.z.min(r.y / zy).clamp(-h.z, h.z),
        )
    } else {
        let r = ray_closest(
            DVec3::new(h.x, -h.y, h.z),
            DVec3::new(0.0, size.y, -size.z).normalize_or_zero(),
            t,
        );
        DVec3::new(
            t.x.max(r.y / xy).clamp(-h.x, h.x),
            t.y.min(r.y).min(r.z * zy).clamp(-h.y, h.y),
            t.z.min(r.z).clamp(-h.z, h.z),
        )
    }
}

/// The wedge shortcut of shared/seeds/004, in local coordinates.
fn seed_wedge(t: DVec3, size: DVec3) -> DVec3 {
    let h = size * 0.5;
    let offset = DVec3::new(0.0, h.y, h.z);
    let r = ray_closest(-offset, offset.normalize_or_zero(), t);
    DVec3::new(
        t.x.clamp(-h.x, h.x),
        t.y.min(r.y).clamp(-h.y, h.y),
        t.z.max(r.z).clamp(-h.z, h.z),
    )
}

fn local_part(kind: &str, size: DVec3) -> Shape {
    let (center, half_extents, rotation) = (DVec3::ZERO, size * 0.5, [0.0, 0.0, 0.0, 1.0]);
    match kind {
        "wedge" => Shape::Wedge {
            center,
            half_extents,
            rotation,
        },
        _ => Shape::CornerWedge {
            center,
            half_extents,
            rotation,
        },
    }
}

#[test]
fn seed_corner_wedge_shortcut_is_off_by_more_than_a_unit_for_some_points() {
    // SPEC §1 says about one random point in nine; how many depends on where the points are
    // drawn. Uniform in [-4, 4]³ around a 2×2×4 part we measure about one in seventeen.
    let size = DVec3::new(2.0, 2.0, 4.0);
    let shape = local_part("corner", size);
    let surface = samples(&boundary_triangles(&shape), 0.01);
    let mut rng = Rng::new(9);
    let (mut wrong, total) = (0, 900);
    let mut example = None;
    for _ in 0..total {
        let p = rng.vec(-4.0, 4.0);
        let exact = reference::query_shape(&shape, 0, p, Mode::Solid);
        let shortcut = seed_corner_wedge(p, size);
        let off = (shortcut - exact.point).length();
        if off > 1.0 {
            wrong += 1;
            example.get_or_insert((p, shortcut, exact.point));
        }
        // The exact answer agrees with brute force wherever p is outside.
        if exact.distance > 0.0 {
            assert!(
                (nearest_sample(&surface, p) - exact.distance).abs() <= 0.03,
                "p = {p:?}"
            );
        }
    }
    let share = wrong as f64 / total as f64;
    let (p, shortcut, exact) = example.expect("the shortcut fails somewhere");
    eprintln!(
        "corner wedge 2×2×4: shortcut off by > 1 unit for {wrong}/{total} points, e.g. p = {p:?}: shortcut {shortcut:?}, exact {exact:?}"
    );
    assert!((0.03..0.2).contains(&share), "{wrong}/{total} points");
}

#[test]
fn seed_wedge_shortcut_agrees_with_the_exact_wedge_in_solid_mode() {
    // Also pins our wedge's orientation to Roblox's: the slope rises towards +Z.
    let mut rng = Rng::new(10);
    for size in [
        DVec3::new(2.0, 2.0, 4.0),
        DVec3::new(1.0, 6.0, 0.5),
        DVec3::new(8.0, 0.3, 3.0),
    ] {
        let shape = local_part("wedge", size);
        for _ in 0..2000 {
            let p = rng.vec(-5.0, 5.0);
            let exact = reference::query_shape(&shape, 0, p, Mode::Solid);
            let shortcut = seed_wedge(p, size);
            assert!(
                (shortcut - exact.point).length() < 1e-9,
                "size {size:?} p = {p:?}: shortcut {shortcut:?}, exact {:?}",
                exact.point
            );
        }
    }
}
