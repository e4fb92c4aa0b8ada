//! Ties and degenerate points of every kind (issue 43), near the origin and 10^4 away: points
//! on the axis of cylinders (Roblox parts' among them), cones, tori and capsules whose axes are
//! not coordinate axes; at the centres of spheres, ellipsoids and tori; on the medial planes of
//! boxes and wedges; at the vertices, edges, faces and centres of aabbs, corner wedges and
//! hulls; on, beside and beyond triangles, segments, lines and rays (degenerate ones too) and
//! planes. Each answer is checked twice: against
//! the f64 twin (`common::check_hit`), and by what needs no twin, so that a blind spot the
//! twin shares with its kernel still fails:
//! - the returned point lies on the shape: asked again (surface mode), its distance is 0;
//! - it realises the returned distance: |p − q| = |d|;
//! - no point sampled on the surface (parametrised here, from the shape's definition) is
//!   nearer than |d|, beyond SPEC §3's bound;
//! - the normal is unit, or zero where SPEC says.

mod common;

use closest::hull::ConvexHull;
use closest::math::quaternion_axes;
use closest::reference;
use closest::shape::Shape;
use closest::{DVec3, Mode};
use common::{Rng, TestJobs, check_hit, engine, f32_points};

/// Axes along and off the coordinate axes, the among them.
fn axes() -> Vec<DVec3> {
    [
        [1.0, 1.0, 0.0],
        [1.0, 1.0, 1.0],
        [3.0, 4.0, 0.0],
        [1.0, 1e-7, 0.0],
        [0.0, 0.0, 1.0],
        [-2.0, 1.0, 5.0],
    ]
    .iter()
    .map(|&[x, y, z]| DVec3::new(x, y, z).normalize_or_zero())
    .collect()
}

/// Two unit vectors completing `axis` to an orthonormal frame (the test's own, not the
/// engine's `any_perpendicular`).
fn frame(axis: DVec3) -> (DVec3, DVec3) {
    let helper = if axis.x.abs() < 0.6 {
        DVec3::X
    } else {
        DVec3::Y
    };
    let e1 = helper.cross(axis).normalize_or_zero();
    (e1, axis.cross(e1))
}

/// Points on the surface of `shape`, from its definition: `n` around, `m` along.
fn surface_samples(shape: &Shape) -> Vec<DVec3> {
    let (n, m) = (96, 48);
    let around = |c: DVec3, axis: DVec3, r: f64| -> Vec<DVec3> {
        let (e1, e2) = frame(axis);
        (0..n)
            .map(|k| {
                let a = std::f64::consts::TAU * k as f64 / n as f64;
                c + (e1 * a.cos() + e2 * a.sin()) * r
            })
            .collect()
    };
    let disk = |c: DVec3, axis: DVec3, r: f64| -> Vec<DVec3> {
        (0..=m / 4)
            .flat_map(|j| around(c, axis, r * j as f64 / (m / 4) as f64))
            .collect()
    };
    let mut out = Vec::new();
    match *shape {
        Shape::Cylinder { a, b, radius } => {
            let axis = (b - a).normalize_or_zero();
            for j in 0..=m {
                out.extend(around(a + (b - a) * (j as f64 / m as f64), axis, radius));
            }
            out.extend(disk(a, axis, radius));
            out.extend(disk(b, axis, radius));
        }
        Shape::Cone { a, b, radius } => {
            let axis = (b - a).normalize_or_zero();
            for j in 0..=m {
                let s = j as f64 / m as f64;
                out.extend(around(a + (b - a) * s, axis, radius * (1.0 - s)));
            }
            out.extend(disk(a, axis, radius));
        }
        Shape::Capsule { a, b, radius } => {
            let axis = (b - a).normalize_or_zero();
            let (e1, e2) = frame(axis);
            for j in 0..=m {
                out.extend(around(a + (b - a) * (j as f64 / m as f64), axis, radius));
            }
            // The two hemispheres.
            for j in 0..=m / 2 {
                let polar = std::f64::consts::FRAC_PI_2 * j as f64 / (m / 2) as f64;
                for k in 0..n {
                    let a2 = std::f64::consts::TAU * k as f64 / n as f64;
                    let side = (e1 * a2.cos() + e2 * a2.sin()) * polar.cos();
                    out.push(b + (side + axis * polar.sin()) * radius);
                    out.push(a + (side - axis * polar.sin()) * radius);
                }
            }
        }
        Shape::Torus {
            center,
            axis,
            major_radius,
            minor_radius,
        } => {
            let (e1, e2) = frame(axis);
            for k in 0..n {
                let u = std::f64::consts::TAU * k as f64 / n as f64;
                let out_dir = e1 * u.cos() + e2 * u.sin();
                for j in 0..m {
                    let v = std::f64::consts::TAU * j as f64 / m as f64;
                    out.push(
                        center
                            + out_dir * (major_radius + minor_radius * v.cos())
                            + axis * (minor_radius * v.sin()),
                    );
                }
            }
        }
        Shape::Sphere { center, radius } => {
            for j in 0..=m {
                let polar = std::f64::consts::PI * j as f64 / m as f64;
                out.extend(around(
                    center + DVec3::Z * (radius * polar.cos()),
                    DVec3::Z,
                    radius * polar.sin(),
                ));
            }
        }
        Shape::Box {
            center,
            half_extents: h,
            rotation,
        } => {
            let [ex, ey, ez] = quaternion_axes(rotation);
            let h = [h.x, h.y, h.z];
            let e = [ex, ey, ez];
            // Each face as a grid: axis k fixed at ±h[k], the other two swept.
            for k in 0..3 {
                let (i, j) = ((k + 1) % 3, (k + 2) % 3);
                for sign in [-1.0, 1.0] {
                    for a in 0..=m {
                        for b in 0..=m {
                            let u = -1.0 + 2.0 * a as f64 / m as f64;
                            let v = -1.0 + 2.0 * b as f64 / m as f64;
                            out.push(
                                center
                                    + e[k] * (sign * h[k])
                                    + e[i] * (u * h[i])
                                    + e[j] * (v * h[j]),
                            );
                        }
                    }
                }
            }
        }
        Shape::Ellipsoid {
            center,
            radii,
            rotation,
        } => {
            let [ex, ey, ez] = quaternion_axes(rotation);
            for j in 0..=2 * m {
                let polar = std::f64::consts::PI * j as f64 / (2 * m) as f64;
                for k in 0..2 * n {
                    let a = std::f64::consts::TAU * k as f64 / (2 * n) as f64;
                    out.push(
                        center
                            + ex * (radii.x * a.cos() * polar.sin())
                            + ey * (radii.y * a.sin() * polar.sin())
                            + ez * (radii.z * polar.cos()),
                    );
                }
            }
        }
        Shape::Wedge {
            center,
            half_extents: h,
            rotation,
        } => {
            // The prism (±hx, −hy, −hz), (±hx, −hy, +hz), (±hx, +hy, +hz): its bottom, back
            // and slope as grids across x, its two ends as triangles.
            let [ex, ey, ez] = quaternion_axes(rotation);
            let at = |x: f64, y: f64, z: f64| center + ex * x + ey * y + ez * z;
            for a in 0..=m {
                let x = -h.x + 2.0 * h.x * a as f64 / m as f64;
                for b in 0..=m {
                    let t = b as f64 / m as f64;
                    out.push(at(x, -h.y, -h.z + 2.0 * h.z * t));
                    out.push(at(x, -h.y + 2.0 * h.y * t, h.z));
                    out.push(at(x, -h.y + 2.0 * h.y * t, -h.z + 2.0 * h.z * t));
                }
            }
            for x in [-h.x, h.x] {
                for a in 0..=m {
                    for b in 0..=(m - a) {
                        let (u, v) = (a as f64 / m as f64, b as f64 / m as f64);
                        out.push(at(x, -h.y + 2.0 * h.y * v, -h.z + 2.0 * h.z * (u + v)));
                    }
                }
            }
        }
        Shape::Aabb { min, max } => {
            let corners = (0..8).map(|k| {
                DVec3::new(
                    if k & 1 == 0 { min.x } else { max.x },
                    if k & 2 == 0 { min.y } else { max.y },
                    if k & 4 == 0 { min.z } else { max.z },
                )
            });
            out.extend(hull_face_samples(&corners.collect::<Vec<_>>(), m));
        }
        Shape::CornerWedge {
            center,
            half_extents: h,
            rotation,
        } => out.extend(hull_face_samples(
            &corner_wedge_vertices(center, h, rotation),
            m,
        )),
        Shape::ConvexHull(ref hull) => {
            for f in &hull.faces {
                out.extend(triangle_samples(f.a, f.b, f.c, m));
            }
        }
        Shape::Triangle { a, b, c } => out.extend(triangle_samples(a, b, c, 2 * m)),
        Shape::Segment { a, b } => {
            out.extend((0..=16 * m).map(|j| a + (b - a) * (j as f64 / (16 * m) as f64)))
        }
        // The infinite kinds: sampled over ±LONG about their anchor, which every case's
        // points stay near.
        Shape::Line { a, b } => {
            let dir = (b - a).normalize_or_zero();
            out.extend((-LONG_STEPS..=LONG_STEPS).map(|j| a + dir * (j as f64 * LONG_STEP)))
        }
        Shape::Ray { origin, direction } => {
            let dir = direction.normalize_or_zero();
            out.extend((0..=LONG_STEPS).map(|j| origin + dir * (j as f64 * LONG_STEP)))
        }
        Shape::Plane { normal, offset } => {
            let (e1, e2) = frame(normal);
            let anchor = normal * offset;
            for a in -LONG_STEPS / 8..=LONG_STEPS / 8 {
                for b in -LONG_STEPS / 8..=LONG_STEPS / 8 {
                    out.push(anchor + (e1 * a as f64 + e2 * b as f64) * (8.0 * LONG_STEP));
                }
            }
        }
    }
    out
}

/// Half the sampled length of lines, rays and planes, in steps of `LONG_STEP`.
const LONG_STEPS: i32 = 4000;
const LONG_STEP: f64 = 0.0025;

/// A barycentric grid of `m + 1` points a side over triangle abc (degenerate ones included).
fn triangle_samples(a: DVec3, b: DVec3, c: DVec3, m: usize) -> Vec<DVec3> {
    let mut out = Vec::new();
    for i in 0..=m {
        for j in 0..=(m - i) {
            let (u, v) = (i as f64 / m as f64, j as f64 / m as f64);
            out.push(a + (b - a) * u + (c - a) * v);
        }
    }
    out
}

/// Samples over the faces of the convex hull of `vertices` (hulls built by `closest::hull`
/// from parry's quickhull, not by the kernels' own face tests).
fn hull_face_samples(vertices: &[DVec3], m: usize) -> Vec<DVec3> {
    let hull = ConvexHull::new(vertices.to_vec()).expect("hull of the corners");
    hull.faces
        .iter()
        .flat_map(|f| triangle_samples(f.a, f.b, f.c, m))
        .collect()
}

/// The corner wedge's five corners in world space, from SPEC §1's definition: the base
/// (±hx, −hy, ±hz) and the apex (+hx, +hy, −hz).
fn corner_wedge_vertices(center: DVec3, h: DVec3, rotation: [f64; 4]) -> Vec<DVec3> {
    let [ex, ey, ez] = quaternion_axes(rotation);
    let at = |x: f64, y: f64, z: f64| center + ex * x + ey * y + ez * z;
    vec![
        at(-h.x, -h.y, -h.z),
        at(h.x, -h.y, -h.z),
        at(-h.x, -h.y, h.z),
        at(h.x, -h.y, h.z),
        at(h.x, h.y, -h.z),
    ]
}

/// Points at a polytope's features and beyond them: every vertex, edge midpoint and face
/// centroid, on it, halfway to the centre, and out at 1.5× and 3× from the centre; and the
/// centre itself, where the faces tie.
fn feature_points(hull: &ConvexHull) -> Vec<(DVec3, String)> {
    let centre = hull.anchor;
    let mut features: Vec<(DVec3, &str)> = Vec::new();
    for f in &hull.faces {
        features.push(((f.a + f.b + f.c) / 3.0, "face centroid"));
        for (u, v) in [(f.a, f.b), (f.b, f.c), (f.c, f.a)] {
            features.push(((u + v) / 2.0, "edge midpoint"));
        }
    }
    for v in hull.vertices() {
        features.push((v, "vertex"));
    }
    let mut out = vec![(centre, "the centre".to_string())];
    for (f, what) in features {
        for s in [1.0, 0.5, 1.5, 3.0] {
            out.push((centre + (f - centre) * s, format!("{s}× out to a {what}")));
        }
    }
    out
}

/// Every adversarial case: the axial kinds, then the flat ones.
fn cases() -> Vec<(Shape, DVec3, String)> {
    let mut out = axial_cases();
    out.extend(flat_cases());
    out
}

/// The two places every family is tried: near the origin and 10^4 away.
fn offsets() -> [DVec3; 2] {
    [DVec3::ZERO, DVec3::new(1e4, -2e4, 3e4) * (1.0 / 3.0)]
}

/// The flat and polyhedral kinds on every axis (as their normal or direction), near the origin
/// and 10^4 away: triangles (and degenerate ones) at their vertices, edges, centroid, above
/// and beside them and on their edges' extensions; segments, lines and rays on themselves,
/// beyond their ends and beside them (and degenerate ones); planes on and off; aabbs, corner
/// wedges and hulls at every vertex, edge and face, inside and out, and at their centres.
fn flat_cases() -> Vec<(Shape, DVec3, String)> {
    let mut out = Vec::new();
    let mut add = |shape: &Shape, points: Vec<(DVec3, String)>| {
        for (p, what) in points {
            out.push((shape.clone(), p, format!("{} {what}", shape.kind().name())));
        }
    };
    for offset in offsets() {
        for axis in axes() {
            let (e1, e2) = frame(axis);
            // Triangles with normal `axis`, and degenerate ones.
            let (a, b, c) = (
                offset + e1,
                offset + e2 * 1.2 - e1 * 0.3,
                offset - e1 * 0.8 - e2 * 0.5,
            );
            for (triangle, what) in [
                ((a, b, c), "proper"),
                ((a, b, (a + b) / 2.0), "collinear"),
                ((a, a, c), "with two corners equal"),
                ((a, a, a), "a point"),
                ((a, b, (a + b) / 2.0 + axis * 1e-7), "sliver"),
            ] {
                let (a, b, c) = triangle;
                let centroid = (a + b + c) / 3.0;
                let mut points = vec![(centroid, format!("{what}: the centroid"))];
                for (u, v) in [(a, b), (b, c), (c, a)] {
                    for t in [-1.0, -0.5, 0.0, 0.5, 1.5, 2.0] {
                        points.push((u + (v - u) * t, format!("{what}: on edge line at {t}")));
                    }
                    let mid = (u + v) / 2.0;
                    points.push((
                        mid + (mid - centroid) * 0.7,
                        format!("{what}: beside an edge"),
                    ));
                    points.push((u + (u - centroid), format!("{what}: beyond a vertex")));
                }
                for s in [0.5, -0.5] {
                    for (q, at) in [
                        (centroid, "centroid"),
                        (a, "vertex"),
                        ((a + b) / 2.0, "edge"),
                    ] {
                        points.push((q + axis * s, format!("{what}: {s} above its {at}")));
                    }
                }
                add(&Shape::Triangle { a, b, c }, points);
            }
            // Segments, lines and rays along `axis`, and degenerate ones.
            let along = |a: DVec3| -> Vec<(DVec3, String)> {
                let mut points = Vec::new();
                for k in -8..=8 {
                    let t = k as f64 * 0.25;
                    points.push((a + axis * t, format!("on its line at {t}")));
                    points.push((a + axis * t + e1 * 0.5, format!("beside it at {t}")));
                    points.push((a + axis * t - e2 * 1e-7, format!("1e-7 off it at {t}")));
                }
                points
            };
            for (a, b) in [(offset - axis, offset + axis), (offset, offset)] {
                add(&Shape::Segment { a, b }, along(offset));
                add(&Shape::Line { a, b }, along(offset));
            }
            for direction in [axis, DVec3::ZERO] {
                add(
                    &Shape::Ray {
                        origin: offset,
                        direction,
                    },
                    along(offset),
                );
            }
            // The plane through `offset` with normal `axis`.
            let plane = Shape::Plane {
                normal: axis,
                offset: offset.dot(axis),
            };
            let mut points = Vec::new();
            for s in [-1.0, -1e-7, 0.0, 1e-7, 1.0] {
                for t in [-2.0, 0.0, 0.7] {
                    points.push((
                        offset + axis * s + e1 * t - e2 * (t * 0.5),
                        format!("{s} off the plane at {t}"),
                    ));
                }
            }
            add(&plane, points);
        }
        // Aabbs (a flat one among them), corner wedges and hulls, rotated and not.
        for (min, max) in [
            (DVec3::new(-1.0, -0.5, -0.5), DVec3::new(1.0, 0.5, 0.5)),
            (DVec3::new(-1.0, -0.5, 0.0), DVec3::new(1.0, 0.5, 0.0)),
        ] {
            let corners: Vec<DVec3> = (0..8)
                .map(|k| {
                    offset
                        + DVec3::new(
                            if k & 1 == 0 { min.x } else { max.x },
                            if k & 2 == 0 { min.y } else { max.y },
                            if k & 4 == 0 { min.z } else { max.z },
                        )
                })
                .collect();
            let hull = ConvexHull::new(corners).expect("box hull");
            add(
                &Shape::Aabb {
                    min: offset + min,
                    max: offset + max,
                },
                feature_points(&hull),
            );
        }
        for rotation in [
            [0.0, 0.0, 0.0, 1.0],
            [0.1, 0.2, 0.3, 0.9],
            [0.0, 0.0, 0.38268343, 0.92387953],
        ] {
            let rotation = normalized(rotation);
            let h = DVec3::new(1.0, 0.5, 2.0);
            let corners = corner_wedge_vertices(offset, h, rotation);
            let hull = ConvexHull::new(corners).expect("corner wedge hull");
            add(
                &Shape::CornerWedge {
                    center: offset,
                    half_extents: h,
                    rotation,
                },
                feature_points(&hull),
            );
            // A hull of a rotated, irregular polytope: an octahedron stretched and turned,
            // with a cap cut off.
            let [ex, ey, ez] = quaternion_axes(rotation);
            let mut vertices = Vec::new();
            for (axis, r) in [(ex, 1.3), (ey, 0.6), (ez, 0.9)] {
                vertices.push(offset + axis * r);
                vertices.push(offset - axis * r);
            }
            vertices.push(offset + (ex + ey + ez) * 0.45);
            let hull = ConvexHull::new(vertices).expect("polytope hull");
            add(&Shape::ConvexHull(hull.clone()), feature_points(&hull));
        }
    }
    out
}

/// A Roblox cylinder part (SPEC §1) centred at `center`, its axis (the part's X) along `axis`,
/// 2 long and 1.4 across, as the scene loader builds it from its size and CFrame.
fn part_cylinder(center: DVec3, axis: DVec3) -> Shape {
    let (e1, e2) = frame(axis);
    let columns = [axis, e1, e2];
    let mut cframe = vec![center.x, center.y, center.z];
    for row in 0..3 {
        cframe.extend(columns.iter().map(|c| c.to_array()[row]));
    }
    let json = serde_json::json!({"shapes": [
        {"type": "part", "shape": "Cylinder", "size": [2.0, 1.4, 1.4], "cframe": cframe}
    ]});
    let mut shapes = closest::io::parse_scene(&json.to_string(), "part.json").expect("part");
    shapes.remove(0)
}

/// `q` as a unit quaternion (the shapes store theirs normalised, as the loader does).
fn normalized(q: [f64; 4]) -> [f64; 4] {
    let n = q.iter().map(|x| x * x).sum::<f64>().sqrt();
    q.map(|x| x / n)
}

/// The axial cases: each axial kind on every axis, near the origin and 10^4 away, with
/// points on its axis (inside, at the ends, beyond both) and at its centre.
fn axial_cases() -> Vec<(Shape, DVec3, String)> {
    let mut out = Vec::new();
    for offset in offsets() {
        for axis in axes() {
            let length = 2.0;
            let a = offset - axis * (length / 2.0);
            let b = offset + axis * (length / 2.0);
            let shapes = [
                Shape::Cylinder { a, b, radius: 0.7 },
                Shape::Cylinder {
                    a: b,
                    b: a,
                    radius: 0.7,
                },
                Shape::Cone { a, b, radius: 0.7 },
                Shape::Capsule { a, b, radius: 0.4 },
                Shape::Torus {
                    center: offset,
                    axis,
                    major_radius: 1.5,
                    minor_radius: 0.3,
                },
            ];
            for shape in shapes.into_iter().chain([part_cylinder(offset, axis)]) {
                for k in -12..=12 {
                    let t = k as f64 * 0.25;
                    let p = offset + axis * t;
                    out.push((
                        shape.clone(),
                        p,
                        format!("{} on its axis at t = {t}", shape.kind().name()),
                    ));
                }
            }
        }
        out.push((
            Shape::Sphere {
                center: offset,
                radius: 0.8,
            },
            offset,
            "sphere at its centre".into(),
        ));
    }
    // Boxes on their medial planes (equidistant from two opposite faces) and ellipsoids at
    // their centres and on their axes, rotated and not, near the origin and 10^4 away.
    for offset in offsets() {
        for rotation in [
            [0.0, 0.0, 0.0, 1.0],
            [0.1, 0.2, 0.3, 0.9],
            [0.0, 0.0, 0.38268343, 0.92387953],
        ] {
            let [ex, ey, ez] = quaternion_axes(rotation);
            let boxed = Shape::Box {
                center: offset,
                half_extents: DVec3::new(1.0, 0.5, 0.5),
                rotation,
            };
            let ellipsoid = Shape::Ellipsoid {
                center: offset,
                radii: DVec3::new(1.5, 0.5, 0.5),
                rotation,
            };
            let wedge = Shape::Wedge {
                center: offset,
                half_extents: DVec3::new(0.5, 0.5, 1.0),
                rotation,
            };
            for k in -8..=8 {
                let t = k as f64 * 0.25;
                // The wedge's medial planes: x = 0 (between its ends) and the plane that
                // bisects its bottom and back (y + hy = hz − z, inside).
                for (what, p) in [
                    (
                        "on the medial plane x = 0",
                        offset + ey * (t * 0.2) + ez * (t * 0.3),
                    ),
                    (
                        "on the bisector of bottom and back",
                        offset
                            + ex * (t * 0.2)
                            + ey * (-0.5 + 0.25 + t.abs() * 0.1)
                            + ez * (1.0 - 0.25 - t.abs() * 0.1),
                    ),
                    ("on the x axis", offset + ex * t),
                ] {
                    out.push((wedge.clone(), p, format!("wedge {what} at {t}")));
                }
                for (what, p) in [
                    (
                        "on the medial plane x = 0",
                        offset + ey * (t * 0.25) + ez * (t * 0.1),
                    ),
                    (
                        "on the diagonal medial plane y = z",
                        offset + ex * (t * 0.3) + (ey + ez) * (t * 0.15),
                    ),
                    ("on the x axis", offset + ex * t),
                    ("on the y axis", offset + ey * t),
                ] {
                    out.push((boxed.clone(), p, format!("box {what} at {t}")));
                    out.push((ellipsoid.clone(), p, format!("ellipsoid {what} at {t}")));
                }
            }
        }
    }
    // The examples, as written there.
    let diagonal = DVec3::new(1.0, 1.0, 0.0).normalize_or_zero();
    for k in -6..=6 {
        let t = k as f64 * 0.5;
        out.push((
            Shape::Torus {
                center: DVec3::ZERO,
                axis: diagonal,
                major_radius: 1.5,
                minor_radius: 0.3,
            },
            diagonal * t,
            format!("the issue's torus at t = {t}"),
        ));
    }
    for p in [
        [-1.0, -1.0, -1.0],
        [0.0, 0.0, 0.0],
        [0.5, 0.5, 0.5],
        [1.0, 1.0, 1.0],
        [3.0, 3.0, 3.0],
    ] {
        let p = DVec3::new(p[0], p[1], p[2]);
        out.push((
            Shape::Cone {
                a: DVec3::ZERO,
                b: DVec3::new(2.0, 2.0, 2.0),
                radius: 0.7,
            },
            p,
            format!("the issue's cone at {p:?}"),
        ));
        out.push((
            Shape::Cylinder {
                a: DVec3::new(1.0, 1.0, 1.0),
                b: DVec3::new(-1.0, -1.0, -1.0),
                radius: 0.7,
            },
            p,
            format!("the issue's cylinder at {p:?}"),
        ));
    }
    out
}

#[test]
fn points_on_axes_and_at_centres_are_answered_exactly() {
    assert_answered_exactly(&cases());
}

#[test]
fn shapes_spanning_up_to_the_limit_are_answered_exactly() {
    // Wedges' face normals multiply four lengths: in f32 they overflowed once a side passed
    // ~1e9, and points got a far face's answer. Every kind, up to `SPAN_LIMIT`, at random
    // points and on its surface.
    let mut rng = common::Rng::new(43);
    let mut cases = Vec::new();
    for size in [1e9, 1e12, 1e15, 1.2e17] {
        for kind in closest::shape::ShapeKind::ALL {
            for _ in 0..6 {
                let c = rng.vec(-size, size);
                let shape = common::random_shape(kind, &mut rng, c, size);
                let on_surface = surface_samples(&shape);
                let label = format!("{kind:?} of size {size:e}");
                for p in [
                    c + rng.vec(-2.0 * size, 2.0 * size),
                    on_surface[0],
                    on_surface[on_surface.len() / 2],
                ] {
                    cases.push((shape.clone(), p, label.clone()));
                }
            }
        }
    }
    assert!(cases.iter().all(|(shape, ..)| {
        shape
            .limited_span()
            .is_none_or(|(span, _)| span <= closest::semantics::SPAN_LIMIT)
    }));
    assert_answered_exactly(&cases);
}

#[test]
fn shapes_and_meshes_built_by_hand_are_checked_on_upload() {
    // The API's `Shape` and `Mesh` have public fields: what a file's reader refuses must not
    // reach the kernels (answered wrongly past the span limit) or the host (an index out of
    // range would panic) when they are built by hand.
    let capsule = Shape::Capsule {
        a: DVec3::new(0.0, 0.0, 0.0),
        b: DVec3::new(2e18, 0.0, 0.0),
        radius: 1.0,
    };
    let sphere = Shape::Sphere {
        center: DVec3::new(0.0, 0.0, 0.0),
        radius: 1.0,
    };
    let shapes = [sphere, capsule];
    let message = |error: closest::Error| error.to_string();
    let refused = message(engine().upload_scene(&shapes).err().expect("refused"));
    assert!(
        refused.starts_with("shapes: shape 1: field `b`: the capsule spans 2.000e18"),
        "{refused}"
    );
    let refused = engine()
        .paired_hits(
            &shapes,
            &f32_points(&[DVec3::new(0.0, 0.0, 0.0); 2]),
            Mode::Surface,
        )
        .err()
        .map(message)
        .expect("refused");
    assert!(
        refused.starts_with("shapes: shape 1: field `b`"),
        "{refused}"
    );

    let corners = vec![
        DVec3::new(0.0, 0.0, 0.0),
        DVec3::new(1.0, 0.0, 0.0),
        DVec3::new(0.0, 1.0, 0.0),
    ];
    let by_hand = |vertices: Vec<DVec3>, triangles: Vec<[u32; 3]>| closest::mesh::Mesh {
        vertices: closest::mesh::Vertices::F64(vertices),
        triangles,
    };
    for (mesh, problem) in [
        (
            by_hand(corners.clone(), vec![[0, 1, 3]]),
            "the mesh: triangle 0 uses vertex 3, but there are only 3 vertices",
        ),
        (
            by_hand(
                vec![corners[0], corners[1], DVec3::new(0.0, 3e18, 0.0)],
                vec![[0, 1, 2]],
            ),
            "the mesh: the mesh spans 3.000e18",
        ),
        (
            by_hand(corners.clone(), Vec::new()),
            "the mesh: the mesh has no triangles",
        ),
    ] {
        let refused = engine().upload_mesh(mesh.clone()).err().map(message);
        assert!(
            refused.as_deref().is_some_and(|m| m.starts_with(problem)),
            "{refused:?}"
        );
        let refused = engine().upload_mesh_body_targets(&mesh).err().map(message);
        assert!(
            refused.as_deref().is_some_and(|m| m.starts_with(problem)),
            "{refused:?}"
        );
    }
    // The same corners in range are answered.
    assert!(
        engine()
            .upload_mesh(by_hand(corners, vec![[0, 1, 2]]))
            .is_ok()
    );
}

/// Each case's answer in both modes, against the twin and by the checks that need none.
fn assert_answered_exactly(cases: &[(Shape, DVec3, String)]) {
    let shapes: Vec<Shape> = cases.iter().map(|c| c.0.clone()).collect();
    // The rows as the engine reads them: f32.
    let rows = f32_points(&cases.iter().map(|c| c.1).collect::<Vec<_>>());
    let points: Vec<DVec3> = rows
        .iter()
        .map(|p| DVec3::new(p[0] as f64, p[1] as f64, p[2] as f64))
        .collect();
    let mut failures = Vec::new();
    for mode in [Mode::Surface, Mode::Solid] {
        let hits = engine()
            .paired_hits(&shapes, &rows, mode)
            .expect("paired query");
        // The returned points, asked again on the surface.
        let returned: Vec<DVec3> = hits
            .iter()
            .map(|h| DVec3::new(h.point[0] as f64, h.point[1] as f64, h.point[2] as f64))
            .collect();
        let again = engine()
            .paired_hits(&shapes, &f32_points(&returned), Mode::Surface)
            .expect("paired query");
        for (i, (shape, p)) in shapes.iter().zip(&points).enumerate() {
            let (hit, q, label) = (&hits[i], returned[i], &cases[i].2);
            let tol = closest::tolerance(shape.scale().max(p.max_abs()));
            let d = hit.distance as f64;
            let n = DVec3::new(
                hit.normal[0] as f64,
                hit.normal[1] as f64,
                hit.normal[2] as f64,
            );
            let mut problems = Vec::new();
            // Solid mode inside a solid: q = p, d = 0, no normal (SPEC §2).
            let inside_solid = mode == Mode::Solid && d == 0.0;
            if inside_solid {
                if q != *p {
                    problems.push(format!("d = 0 but q = {q:?} is not p"));
                }
            } else {
                if again[i].distance.abs() as f64 > tol || again[i].distance.is_nan() {
                    problems.push(format!(
                        "q = {q:?} is {} off the surface",
                        again[i].distance
                    ));
                }
                if (((*p - q).length() - d.abs()).abs() > tol) || d.is_nan() {
                    problems.push(format!("|p - q| = {} but d = {d}", (*p - q).length()));
                }
                let nearest_sample = surface_samples(shape)
                    .iter()
                    .map(|s| (*s - *p).length())
                    .fold(f64::INFINITY, f64::min);
                if d.abs() > nearest_sample + tol || d.is_nan() {
                    problems.push(format!(
                        "a surface sample is {nearest_sample} away, nearer than |d| = {}",
                        d.abs()
                    ));
                }
                // Unit, or zero on a curve or degenerate shape (SPEC §2); off the surface,
                // the gradient (p − q)/d.
                let unit = (n.length() - 1.0).abs() <= 1e-4;
                let may_be_zero = !shape.kind().is_solid() && d.abs() <= tol;
                if !(unit || may_be_zero && n == DVec3::ZERO) {
                    problems.push(format!("normal {n:?} is not unit"));
                }
                if d.abs() > 100.0 * tol && ((*p - q) / d - n).length() > 1e-3 {
                    problems.push(format!("normal {n:?} is not (p - q)/d"));
                }
            }
            let expected = reference::query_shape(shape, i, *p, mode);
            if let Err(e) = check_hit(shape, *p, hit, &expected, mode) {
                problems.push(format!("against the twin: {e}"));
            }
            if !problems.is_empty() {
                failures.push(format!(
                    "[{mode:?}] {label} ({shape:?}, p = {p:?}): {}",
                    problems.join("; ")
                ));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} rows wrong:\n{}",
        failures.len(),
        2 * cases.len(),
        failures
            .iter()
            .take(20)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// The twins alone, in f64: the same independent checks (on the shape, realising the
/// distance, no sample nearer), since a twin with the kernel's blind spot fails them too.
#[test]
fn the_twins_answer_points_on_axes_exactly() {
    let mut failures = Vec::new();
    for (i, (shape, p, label)) in cases().into_iter().enumerate() {
        let hit = reference::query_shape(&shape, i, p, Mode::Surface);
        let tol = 1e-9 * shape.scale().max(p.max_abs()).max(1.0);
        let again = reference::query_shape(&shape, i, hit.point, Mode::Surface).distance;
        let nearest_sample = surface_samples(&shape)
            .iter()
            .map(|s| (*s - p).length())
            .fold(f64::INFINITY, f64::min);
        if !(again.abs() <= tol
            && ((p - hit.point).length() - hit.distance.abs()).abs() <= tol
            && hit.distance.abs() <= nearest_sample + tol)
        {
            failures.push(format!(
                "{label}: q = {:?} ({again:e} off), d = {}, nearest sample {nearest_sample}",
                hit.point, hit.distance
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The samplers themselves: every sample lies on its shape's surface (by the twin; a sampler
/// and a twin that disagree mean one of them is wrong, and the checks above would be void).
#[test]
fn the_surface_samplers_sample_the_surface() {
    let mut seen = Vec::new();
    for (shape, _, label) in cases() {
        let key = format!("{shape:?}");
        if seen.contains(&key) {
            continue;
        }
        seen.push(key);
        let tol = 1e-9 * shape.scale().max(1.0);
        let off = surface_samples(&shape)
            .iter()
            .map(|s| {
                reference::query_shape(&shape, 0, *s, Mode::Surface)
                    .distance
                    .abs()
            })
            .fold(0.0, f64::max);
        assert!(
            off <= tol,
            "{label}: a sample {off:e} off the surface of {shape:?}"
        );
    }
}

/// Points so far that their squared distance overflows f32 (beyond ~1.8e19): every kind
/// answers a finite distance within SPEC §3's bound of the f64 twin's, and a unit normal, where
/// the overflowing length answered +∞ and a zero normal. Without a twin: the bounded kinds lie
/// within 10^4 of the origin, far inside the bound, so their distance is |p| within it.
#[test]
fn points_beyond_f32_squares_are_answered_within_the_bound() {
    let mut shapes = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for (shape, _, _) in cases() {
        if seen.insert(format!("{:?}", shape.kind())) {
            shapes.push(shape);
        }
    }
    let unbounded = |shape: &Shape| {
        matches!(
            shape,
            Shape::Line { .. } | Shape::Ray { .. } | Shape::Plane { .. }
        )
    };
    let directions = [
        DVec3::new(1.0, 0.0, 0.0),
        DVec3::new(-0.3, 0.8, 0.52),
        DVec3::new(0.0, 0.0, -1.0),
    ];
    let mut failures = Vec::new();
    for far in [1e20, 1e30] {
        for direction in directions {
            let p = direction.normalize_or_zero() * far;
            let rows = f32_points(&vec![p; shapes.len()]);
            let p = DVec3::new(rows[0][0] as f64, rows[0][1] as f64, rows[0][2] as f64);
            let hits = engine()
                .paired_hits(&shapes, &rows, Mode::Surface)
                .expect("paired query");
            for (i, (shape, hit)) in shapes.iter().zip(&hits).enumerate() {
                let tol = closest::tolerance(p.max_abs());
                let d = hit.distance as f64;
                let n = DVec3::new(
                    hit.normal[0] as f64,
                    hit.normal[1] as f64,
                    hit.normal[2] as f64,
                );
                let twin = reference::query_shape(shape, i, p, Mode::Surface).distance;
                let unit = (n.length() - 1.0).abs() <= 1e-4;
                let by_size = unbounded(shape) || (d.abs() - p.length()).abs() <= tol;
                // The point lies on the shape by its own scale (the shape's and the point's),
                // stricter than SPEC §3, whose scale includes the query point's: a far point's
                // answer is still a point of the shape, not its centre.
                let q = DVec3::new(
                    hit.point[0] as f64,
                    hit.point[1] as f64,
                    hit.point[2] as f64,
                );
                let off_shape = reference::query_shape(shape, i, q, Mode::Surface).distance;
                let on_shape =
                    off_shape.abs() <= closest::tolerance(shape.scale().max(q.max_abs()));
                if !((d - twin).abs() <= tol && unit && by_size && on_shape) {
                    failures.push(format!(
                        "{:?} at {p:?}: d = {d} (twin {twin}), n = {n:?}, point {q:?} \
                         ({off_shape:e} off the shape)",
                        shape.kind()
                    ));
                }
            }
        }
    }
    // Sphere contacts whose centres lie that far: depth −(distance − radius), a unit normal,
    // a contact point on the shape (by its own scale and the point's), each shape of a scene.
    let scene = engine().upload_scene(&shapes).unwrap();
    for far in [1e20, 1e30] {
        for direction in directions {
            let c = direction.normalize_or_zero() * far;
            let sphere = [c.x as f32, c.y as f32, c.z as f32, 2.0];
            let c = DVec3::new(sphere[0] as f64, sphere[1] as f64, sphere[2] as f64);
            let contact = engine().contacts(&scene, &[sphere]).unwrap()[0];
            let tol = closest::tolerance(c.max_abs());
            let expected = reference::nearest(&shapes, c, Mode::Solid).distance - 2.0;
            let q = DVec3::new(
                contact.point[0] as f64,
                contact.point[1] as f64,
                contact.point[2] as f64,
            );
            let n = DVec3::new(
                contact.normal[0] as f64,
                contact.normal[1] as f64,
                contact.normal[2] as f64,
            );
            let shape = &shapes[contact.shape.max(0) as usize];
            let off_shape = reference::query_shape(shape, 0, q, Mode::Surface).distance;
            let on_shape = off_shape.abs() <= closest::tolerance(shape.scale().max(q.max_abs()));
            if !((f64::from(-contact.depth) - expected).abs() <= tol
                && (n.length() - 1.0).abs() <= 1e-4
                && on_shape)
            {
                failures.push(format!(
                    "a sphere contact at {c:?}: {contact:?} (distance {expected} expected)"
                ));
            }
        }
    }
    // A mesh's rows likewise, unsigned. (Signed, such rows may take an inside sign: at 1e20
    // every triangle of a small mesh is as near as any other in f32, so the tie's triangle
    // and its pseudonormal are arbitrary.)
    let (vertices, triangles) = common::octahedron_sphere(DVec3::ZERO, 1.0, 2);
    let fandisk =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data/meshes/fandisk.obj");
    let meshes = [
        closest::mesh::Mesh::new(vertices, triangles, "ball").unwrap(),
        closest::io::load_mesh(&fandisk).unwrap(),
    ];
    let points: Vec<[f64; 3]> = [1e20, 1e30]
        .into_iter()
        .flat_map(|far| directions.map(|d| (d.normalize_or_zero() * far).to_array()))
        .collect();
    let fields = closest::Fields::from_bits(
        closest::fields::Family::Hits,
        closest::fields::DISTANCE | closest::fields::NORMAL,
    );
    for mesh in meshes {
        let gpu = engine().upload_mesh(mesh).unwrap();
        let query = closest::engine::MeshQuery {
            mesh: &gpu,
            points: closest::Points::F64(&points),
            sign: closest::mesh::Sign::None,
            fields,
        };
        let mut columns = closest::Columns::collect(fields, points.len(), |sink| {
            engine().query_mesh(query, sink)
        })
        .unwrap();
        let distances = columns.take_f32s("distance").unwrap();
        for (p, d) in points.iter().zip(distances) {
            let p = DVec3::from_array(*p);
            let tol = closest::tolerance(p.max_abs());
            let off = (f64::from(d) - p.length()).abs();
            if off.is_nan() || off > tol {
                failures.push(format!("a mesh at {p:?}: d = {d}"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Points near (not on) the axes of thin, short, wide and horn-shaped solids, and inside
/// flattened and needle ellipsoids near their medial planes: where cancellation, not a tie, is
/// the danger.
#[test]
fn points_near_axes_of_thin_and_flat_shapes_are_answered_exactly() {
    let mut rng = Rng::new(0x9e3779b97f4a7c15);
    let mut rnd = move || rng.range(0.0, 1.0);
    let mut out = Vec::new();
    for offset in offsets() {
        for axis in axes() {
            let (u, v) = frame(axis);
            for (length, radius) in [(2.0, 0.7), (2.0, 1e-3), (1e-3, 0.7), (50.0, 20.0)] {
                let a = offset - axis * (length / 2.0);
                let b = offset + axis * (length / 2.0);
                let shapes = [
                    Shape::Cylinder { a, b, radius },
                    Shape::Cone { a, b, radius },
                    Shape::Cone { a: b, b: a, radius },
                    Shape::Capsule { a, b, radius },
                    Shape::Torus {
                        center: offset,
                        axis,
                        major_radius: radius,
                        minor_radius: radius * 0.99,
                    },
                    Shape::Torus {
                        center: offset,
                        axis,
                        major_radius: radius,
                        minor_radius: radius * 0.01,
                    },
                    Shape::Torus {
                        center: offset,
                        axis,
                        major_radius: radius,
                        minor_radius: radius * 1.0,
                    },
                ];
                for shape in shapes {
                    for _ in 0..24 {
                        let t = (rnd() * 2.0 - 1.0) * length;
                        let eps = 10f64.powf(-1.0 - rnd() * 7.0) * radius.max(length);
                        let ang = rnd() * std::f64::consts::TAU;
                        let p = offset + axis * t + (u * ang.cos() + v * ang.sin()) * eps;
                        out.push((
                            shape.clone(),
                            p,
                            format!("{} near axis t={t} eps={eps}", shape.kind().name()),
                        ));
                    }
                }
            }
        }
        for rotation in [[0.0, 0.0, 0.0, 1.0], [0.1, 0.2, 0.3, 0.9]] {
            let rotation = normalized(rotation);
            let [ex, ey, ez] = quaternion_axes(rotation);
            for radii in [
                DVec3::new(1.5, 0.5, 0.5),
                DVec3::new(10.0, 1.0, 0.1),
                DVec3::new(1.0, 1.0, 1e-3),
                DVec3::new(1.0, 0.999, 0.998),
                DVec3::new(100.0, 1.0, 1.0),
            ] {
                let shape = Shape::Ellipsoid {
                    center: offset,
                    radii,
                    rotation,
                };
                for _ in 0..60 {
                    let s = 10f64.powf(-rnd() * 6.0);
                    let p = offset
                        + ex * (rnd() * 2.0 - 1.0) * radii.x * 1.2
                        + ey * (rnd() * 2.0 - 1.0) * radii.y * s
                        + ez * (rnd() * 2.0 - 1.0) * radii.z * s;
                    out.push((shape.clone(), p, format!("ellipsoid {radii:?} s={s}")));
                }
            }
        }
    }
    assert_answered_exactly(&out);
}

/// Random rotations, extents and points (some crowded near the shape) for the polyhedral and
/// flat kinds, at 10^-3, 1 and 300 units, near the origin and 10^4 away.
#[test]
fn random_shapes_at_three_scales_are_answered_exactly() {
    let mut rng = Rng::new(0x1234_5678_9abc_def1);
    let mut rnd = move || rng.range(0.0, 1.0);
    let mut out = Vec::new();
    for offset in offsets() {
        for scale in [1e-3, 1.0, 300.0] {
            for _ in 0..6 {
                let rotation = normalized([rnd() - 0.5, rnd() - 0.5, rnd() - 0.5, rnd() - 0.5]);
                let he = DVec3::new(rnd() + 0.01, rnd() * 0.1 + 1e-3, rnd() + 0.3) * scale;
                let c = offset + DVec3::new(rnd(), rnd(), rnd()) * scale;
                let tri = [0, 1, 2]
                    .map(|_| c + DVec3::new(rnd() - 0.5, rnd() - 0.5, rnd() - 0.5) * scale);
                let shapes = [
                    Shape::Box {
                        center: c,
                        half_extents: he,
                        rotation,
                    },
                    Shape::Wedge {
                        center: c,
                        half_extents: he,
                        rotation,
                    },
                    Shape::CornerWedge {
                        center: c,
                        half_extents: he,
                        rotation,
                    },
                    Shape::Wedge {
                        center: c,
                        half_extents: DVec3::new(he.y, he.z, he.x),
                        rotation,
                    },
                    Shape::CornerWedge {
                        center: c,
                        half_extents: DVec3::new(he.z, he.x, he.y),
                        rotation,
                    },
                    Shape::Triangle {
                        a: tri[0],
                        b: tri[1],
                        c: tri[2],
                    },
                    Shape::Triangle {
                        a: tri[0],
                        b: tri[1],
                        c: tri[1] + (tri[1] - tri[0]) * 1e-4,
                    },
                    Shape::Segment {
                        a: tri[0],
                        b: tri[1],
                    },
                    Shape::Aabb {
                        min: c - he,
                        max: c + he,
                    },
                    Shape::ConvexHull(
                        ConvexHull::new(
                            (0..12)
                                .map(|_| {
                                    c + DVec3::new(rnd() - 0.5, rnd() - 0.5, (rnd() - 0.5) * 0.01)
                                        * scale
                                })
                                .collect(),
                        )
                        .unwrap(),
                    ),
                    Shape::ConvexHull(
                        ConvexHull::new(
                            (0..30)
                                .map(|_| {
                                    c + DVec3::new(rnd() - 0.5, rnd() - 0.5, rnd() - 0.5) * scale
                                })
                                .collect(),
                        )
                        .unwrap(),
                    ),
                ];
                for shape in shapes {
                    for _ in 0..40 {
                        let w = if rnd() < 0.5 {
                            1.0
                        } else {
                            10f64.powf(-rnd() * 6.0)
                        };
                        let p = c + DVec3::new(rnd() - 0.5, rnd() - 0.5, rnd() - 0.5)
                            * (3.0 * scale * w);
                        out.push((shape.clone(), p, format!("{} random", shape.kind().name())));
                    }
                }
            }
        }
    }
    assert_answered_exactly(&out);
}
