//! Mesh queries on the GPU against the f64 brute force (every triangle checked): small meshes
//! whose signed distance is known exactly, the shared meshes on samples of points, signs by
//! pseudonormals against the f64 winding number, and meshes far from the origin.

mod common;

use std::path::Path;

use closest::io::load_mesh;
use closest::mesh::{Feature, Mesh, Sign, winding_number};
use closest::sdf::{Grid, GridRegion};
use closest::{DVec3, GpuHit, Mode, Shape, reference, tolerance};
use closest::{EngineOptions, MeshRecords};
use common::{
    Rng, TestJobs, assert_same_hits, engine, odd_mesh, open_engine, subgroup_and_portable_engines,
    subgroup_and_portable_engines_with, within,
};
use rayon::prelude::*;

/// Nearest distance over every triangle in f64, and the scale of SPEC §3 for that point.
fn brute_force(mesh: &Mesh, p: DVec3) -> (f64, f64) {
    let (lo, hi) = mesh.bounds();
    let scale = p.max_abs().max(lo.max_abs()).max(hi.max_abs());
    let d = (0..mesh.triangles.len())
        .map(|t| {
            let [a, b, c] = mesh.corners(t);
            reference::query_shape(&Shape::Triangle { a, b, c }, t, p, Mode::Surface).distance
        })
        .fold(f64::INFINITY, f64::min);
    (d, scale)
}

fn hit_point(h: &GpuHit) -> DVec3 {
    DVec3::new(h.point[0] as f64, h.point[1] as f64, h.point[2] as f64)
}

/// Every hit's |d| within the bound of the brute force, its point on its triangle and as far
/// as it says; with `signs`, the sign of every point farther than the bound from the surface.
fn check(
    mesh: &Mesh,
    points: &[DVec3],
    hits: &[GpuHit],
    signs: Option<&(dyn Fn(DVec3) -> bool + Sync)>,
) {
    let failures: Vec<String> = points
        .par_iter()
        .zip(hits)
        .enumerate()
        .filter_map(|(i, (&p, hit))| {
            let (d, scale) = brute_force(mesh, p);
            let tol = tolerance(scale);
            let q = hit_point(hit);
            let t = hit.shape as usize;
            let [a, b, c] = mesh.corners(t);
            let on_triangle =
                reference::query_shape(&Shape::Triangle { a, b, c }, t, q, Mode::Surface).distance;
            let mut problems = Vec::new();
            if !within((hit.distance.abs() as f64 - d).abs(), tol) {
                problems.push(format!("|d| {} vs {d}", hit.distance));
            }
            if !within(on_triangle, tol) {
                problems.push(format!("q {q:?} is {on_triangle} off triangle {t}"));
            }
            if !within(((p - q).length() - d).abs(), 2.0 * tol) {
                problems.push(format!("|p - q| {} vs {d}", (p - q).length()));
            }
            if let Some(inside) = signs {
                if d > tol && (hit.distance < 0.0) != inside(p) {
                    problems.push(format!("sign of {} (inside: {})", hit.distance, inside(p)));
                }
            }
            (!problems.is_empty()).then(|| format!("point {i} {p:?}: {}", problems.join("; ")))
        })
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {} points fail, e.g.\n{}",
        failures.len(),
        points.len(),
        failures[..failures.len().min(8)].join("\n")
    );
}

/// `points`' hits on `mesh`, uploaded to the shared engine, signed by `sign`.
fn answered(mesh: &Mesh, points: &[DVec3], sign: Sign) -> Vec<GpuHit> {
    let gpu = engine().upload_mesh(mesh.clone()).unwrap();
    let raw: Vec<[f64; 3]> = points.iter().map(|p| [p.x, p.y, p.z]).collect();
    engine().mesh_hits(&gpu, &raw, sign).unwrap()
}

/// An axis-aligned box as 12 outward-wound triangles.
fn box_mesh(centre: DVec3, h: DVec3) -> Mesh {
    let v: Vec<DVec3> = (0..8)
        .map(|i| {
            centre
                + DVec3::new(
                    if i & 1 == 0 { -h.x } else { h.x },
                    if i & 2 == 0 { -h.y } else { h.y },
                    if i & 4 == 0 { -h.z } else { h.z },
                )
        })
        .collect();
    let quads = [
        [0, 2, 3, 1], // -z
        [4, 5, 7, 6], // +z
        [0, 1, 5, 4], // -y
        [2, 6, 7, 3], // +y
        [0, 4, 6, 2], // -x
        [1, 3, 7, 5], // +x
    ];
    let triangles = quads
        .iter()
        .flat_map(|q| [[q[0], q[1], q[2]], [q[0], q[2], q[3]]])
        .collect();
    Mesh::new(v, triangles, "box").unwrap()
}

/// Exact signed distance to a box.
fn box_sdf(centre: DVec3, h: DVec3, p: DVec3) -> f64 {
    let d = (p - centre).abs() - h;
    let outside = DVec3::new(d.x.max(0.0), d.y.max(0.0), d.z.max(0.0)).length();
    outside + d.x.max(d.y).max(d.z).min(0.0)
}

/// Points around a mesh: random ones, and its vertices, edge midpoints and face centres pushed
/// slightly in and out along the face normal.
fn probe_points(rng: &mut Rng, mesh: &Mesh, random: usize) -> Vec<DVec3> {
    let (lo, hi) = mesh.bounds();
    let pad = (hi - lo) * 0.3;
    let mut points: Vec<DVec3> = (0..random)
        .map(|_| {
            let span = hi - lo + pad * 2.0;
            lo - pad
                + DVec3::new(
                    span.x * rng.range(0.0, 1.0),
                    span.y * rng.range(0.0, 1.0),
                    span.z * rng.range(0.0, 1.0),
                )
        })
        .collect();
    let size = (hi - lo).length();
    for t in (0..mesh.triangles.len()).step_by((mesh.triangles.len() / 200).max(1)) {
        let [a, b, c] = mesh.corners(t);
        let n = reference::triangle_unit_normal(a, b, c);
        for f in [a, (a + b) * 0.5, (a + b + c) * (1.0 / 3.0)] {
            points.push(f);
            points.push(f + n * (size * 1e-3));
            points.push(f - n * (size * 1e-3));
        }
    }
    points
}

#[test]
fn box_mesh_matches_the_exact_sdf_and_the_brute_force() {
    let mut rng = Rng::new(31);
    for (centre, h) in [
        (DVec3::ZERO, DVec3::new(1.0, 2.0, 0.5)),
        // Far from the origin: the upload shifts the mesh to its centre in f64.
        (DVec3::new(1e4, -2e4, 5e3), DVec3::new(0.3, 0.2, 0.1)),
    ] {
        let mesh = box_mesh(centre, h);
        let points = probe_points(&mut rng, &mesh, 2000);
        let hits = answered(&mesh, &points, Sign::Pseudonormal);
        check(
            &mesh,
            &points,
            &hits,
            Some(&|p| box_sdf(centre, h, p) < 0.0),
        );
        for (p, hit) in points.iter().zip(&hits) {
            let exact = box_sdf(centre, h, *p);
            let tol = tolerance(p.max_abs().max(centre.max_abs() + h.max_abs()));
            assert!(
                (hit.distance as f64 - exact).abs() <= tol,
                "{p:?}: {} vs exact {exact}",
                hit.distance
            );
        }
        let unsigned = answered(&mesh, &points, Sign::None);
        assert!(unsigned.iter().all(|h| h.distance >= 0.0));
    }
}

#[test]
fn large_meshes_are_answered_and_signed_within_the_bound_up_to_the_span_limit() {
    // The feature tests behind pseudonormal signs multiply four lengths and the winding
    // number's solid angles three: in f32 they overflowed past ~1e9 and ~1e12, and points
    // inside larger meshes came out positive. Up to `SPAN_LIMIT` every answer holds.
    let mut rng = Rng::new(36);
    for scale in [1e10, 1e13, 1e16, 2.5e17] {
        let centre = DVec3::new(-3.0, 1.0, 2.0) * scale;
        let (vertices, triangles) = common::octahedron_sphere(centre, scale, 3);
        let mesh = Mesh::new(vertices, triangles, "ball").unwrap();
        let points = probe_points(&mut rng, &mesh, 500);
        let gpu = engine().upload_mesh(mesh.clone()).unwrap();
        let raw: Vec<[f64; 3]> = points.iter().map(|p| [p.x, p.y, p.z]).collect();
        let inside = |p: DVec3| winding_number(&mesh, p) > 0.5;
        for sign in [Sign::Pseudonormal, Sign::Winding] {
            let hits = engine().mesh_hits(&gpu, &raw, sign).unwrap();
            check(&mesh, &points, &hits, Some(&inside));
        }
    }
    // Beyond it the mesh is refused on load, naming it.
    let h = DVec3::new(1e18, 1e18, 1e18);
    let vertices = vec![-h, DVec3::new(h.x, -h.y, -h.z), DVec3::new(-h.x, h.y, -h.z)];
    // A vertex no triangle uses does not count (it is left out of every answer).
    let mut unused = vec![DVec3::ZERO, DVec3::X, DVec3::Y];
    unused.push(h * 3.0);
    assert!(Mesh::new(unused, vec![[0, 1, 2]], "unused.obj").is_ok());
    let message = Mesh::new(vertices, vec![[0, 1, 2]], "far.obj")
        .unwrap_err()
        .to_string();
    assert!(
        message.contains("far.obj")
            && message.contains("spans 2.828e18")
            && message.contains("1e18"),
        "{message}"
    );
}

fn shared(name: &str) -> closest::mesh::Mesh {
    load_mesh(
        &Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../shared/data/meshes")
            .join(name),
    )
    .unwrap()
}

#[test]
fn fandisk_distances_and_signs_match_the_f64_references() {
    // Watertight: inside is where the f64 winding number is about 1.
    let mesh = shared("fandisk.obj");
    let mut rng = Rng::new(32);
    let mut points = probe_points(&mut rng, &mesh, 1500);
    points.push(DVec3::new(f64::NAN, 0.0, 0.0));
    let gpu = engine().upload_mesh(mesh.clone()).unwrap();
    let raw: Vec<[f64; 3]> = points.iter().map(|p| [p.x, p.y, p.z]).collect();
    let hits = engine().mesh_hits(&gpu, &raw, Sign::Pseudonormal).unwrap();
    let nan = hits.last().unwrap();
    assert!(nan.shape == -1 && nan.distance.is_nan());
    let n = points.len() - 1;
    check(
        &mesh,
        &points[..n],
        &hits[..n],
        Some(&|p| winding_number(&mesh, p) > 0.5),
    );
}

/// A closed cylinder whose caps are fans of slivers from their centres (CAD exports
/// triangulate caps so), turned at random and far from the origin: distances exact and signs
/// the winding number's, through the wedge-shaped boxes such fans get.
#[test]
fn cylinders_with_fan_caps_match_the_f64_references() {
    let mut rng = Rng::new(48);
    let axes = Shape::axes(rng.quaternion());
    let origin = DVec3::new(-700.0, 1200.0, 300.0);
    let at = |x: f64, y: f64, z: f64| origin + axes[0] * x + axes[1] * y + axes[2] * z;
    let mesh = closest::bench::fan_capped_cylinder(3000, |p| at(p.x, p.y, 2.0 * p.z));
    let mut points = probe_points(&mut rng, &mesh, 600);
    // Near the caps' centres, where every sliver meets.
    for _ in 0..200 {
        let near = at(0.0, 0.0, [0.0, 2.0][rng.next_u64() as usize % 2]);
        points.push(near + rng.unit() * 10f64.powf(rng.range(-4.0, -1.0)));
    }
    let hits = answered(&mesh, &points, Sign::Pseudonormal);
    check(
        &mesh,
        &points,
        &hits,
        Some(&|p| winding_number(&mesh, p) > 0.5),
    );
}

#[test]
fn bunny_distances_match_the_brute_force() {
    // The bunny has holes: distances are exact all the same (signs are the winding number's job).
    let mesh = shared("stanford-bunny.obj");
    let mut rng = Rng::new(33);
    let points = probe_points(&mut rng, &mesh, 300);
    let gpu = engine().upload_mesh(mesh.clone()).unwrap();
    let raw: Vec<[f64; 3]> = points.iter().map(|p| [p.x, p.y, p.z]).collect();
    let hits = engine().mesh_hits(&gpu, &raw, Sign::None).unwrap();
    check(&mesh, &points, &hits, None);
}

#[test]
fn winding_signs_follow_the_exact_winding_number_even_with_holes() {
    // The bunny is open at the base: its inside is where the exact winding number passes ½.
    for name in ["stanford-bunny.obj", "fandisk.obj"] {
        let mesh = shared(name);
        let mut rng = Rng::new(34);
        let points = probe_points(&mut rng, &mesh, 400);
        let gpu = engine().upload_mesh(mesh.clone()).unwrap();
        let raw: Vec<[f64; 3]> = points.iter().map(|p| [p.x, p.y, p.z]).collect();
        let hits = engine().mesh_hits(&gpu, &raw, Sign::Winding).unwrap();
        let wrong: Vec<String> = points
            .par_iter()
            .zip(&hits)
            .filter_map(|(&p, hit)| {
                let w = winding_number(&mesh, p);
                // Within the hierarchy's error of ½, or on the surface, the sign may go either way.
                let (lo, hi) = mesh.bounds();
                let tol = tolerance(p.max_abs().max(lo.max_abs()).max(hi.max_abs()));
                let clear = (w - 0.5).abs() > 0.01 && hit.distance.abs() as f64 > tol;
                (clear && (hit.distance < 0.0) != (w > 0.5))
                    .then(|| format!("{p:?}: d {} but w {w}", hit.distance))
            })
            .collect();
        assert!(
            wrong.is_empty(),
            "{name}: {} wrong signs, e.g. {:?}",
            wrong.len(),
            &wrong[..wrong.len().min(5)]
        );
    }
}

/// An icosphere of radius `r` (an icosahedron subdivided `levels` times, vertices on the
/// sphere), wound outwards.
fn icosphere(r: f64, levels: usize) -> Mesh {
    let t = (1.0 + 5f64.sqrt()) / 2.0;
    let mut vertices: Vec<DVec3> = [
        (-1.0, t, 0.0),
        (1.0, t, 0.0),
        (-1.0, -t, 0.0),
        (1.0, -t, 0.0),
        (0.0, -1.0, t),
        (0.0, 1.0, t),
        (0.0, -1.0, -t),
        (0.0, 1.0, -t),
        (t, 0.0, -1.0),
        (t, 0.0, 1.0),
        (-t, 0.0, -1.0),
        (-t, 0.0, 1.0),
    ]
    .iter()
    .map(|&(x, y, z)| DVec3::new(x, y, z).normalize_or_zero() * r)
    .collect();
    let mut triangles: Vec<[u32; 3]> = vec![
        [0, 11, 5],
        [0, 5, 1],
        [0, 1, 7],
        [0, 7, 10],
        [0, 10, 11],
        [1, 5, 9],
        [5, 11, 4],
        [11, 10, 2],
        [10, 7, 6],
        [7, 1, 8],
        [3, 9, 4],
        [3, 4, 2],
        [3, 2, 6],
        [3, 6, 8],
        [3, 8, 9],
        [4, 9, 5],
        [2, 4, 11],
        [6, 2, 10],
        [8, 6, 7],
        [9, 8, 1],
    ];
    for _ in 0..levels {
        let mut midpoints = std::collections::HashMap::new();
        let mut midpoint = |a: u32, b: u32, vertices: &mut Vec<DVec3>| {
            *midpoints.entry((a.min(b), a.max(b))).or_insert_with(|| {
                let m = (vertices[a as usize] + vertices[b as usize]) * 0.5;
                vertices.push(m.normalize_or_zero() * r);
                (vertices.len() - 1) as u32
            })
        };
        triangles = triangles
            .iter()
            .flat_map(|&[a, b, c]| {
                let ab = midpoint(a, b, &mut vertices);
                let bc = midpoint(b, c, &mut vertices);
                let ca = midpoint(c, a, &mut vertices);
                [[a, ab, ca], [b, bc, ab], [c, ca, bc], [ab, bc, ca]]
            })
            .collect();
    }
    Mesh::new(vertices, triangles, "icosphere").unwrap()
}

#[test]
fn icosphere_follows_the_sphere_sdf_within_its_tessellation() {
    let r = 2.0;
    let mesh = icosphere(r, 3);
    // The mesh lies between the sphere and its faces' planes: |mesh SDF − sphere SDF| is at
    // most the largest gap between them.
    let gap = (0..mesh.triangles.len())
        .map(|t| {
            let [a, b, c] = mesh.corners(t);
            r - a.dot(reference::triangle_unit_normal(a, b, c))
        })
        .fold(0.0, f64::max);
    assert!(gap > 0.0 && gap < 0.01, "gap {gap}");
    let mut rng = Rng::new(35);
    let points: Vec<DVec3> = (0..3000).map(|_| rng.vec(-3.0, 3.0)).collect();
    let gpu = engine().upload_mesh(mesh.clone()).unwrap();
    let raw: Vec<[f64; 3]> = points.iter().map(|p| [p.x, p.y, p.z]).collect();
    for sign in [Sign::Pseudonormal, Sign::Winding] {
        let hits = engine().mesh_hits(&gpu, &raw, sign).unwrap();
        for (p, hit) in points.iter().zip(&hits) {
            let exact = p.length() - r;
            let tol = tolerance(3.0);
            assert!(
                (hit.distance as f64 - exact).abs() <= gap + tol,
                "{sign:?} {p:?}: {} vs sphere {exact} (gap {gap})",
                hit.distance
            );
        }
    }
    // And exactly against the mesh itself (inside by the f64 winding number).
    let hits = engine().mesh_hits(&gpu, &raw, Sign::Pseudonormal).unwrap();
    check(
        &mesh,
        &points,
        &hits,
        Some(&|p| winding_number(&mesh, p) > 0.5),
    );
}

#[test]
fn subgroup_mesh_kernel_answers_exactly_as_the_portable_one() {
    // Chunks of 1000 rows: seed rounds restart in every chunk, the last chunk is partial, and
    // so are the last subgroups.
    let [subgroup, portable] = subgroup_and_portable_engines(1000);
    // A coarse grid around fandisk (lanes of a subgroup close together, as in `closest sdf`),
    // with non-finite rows, some of them seed rows, and far points.
    let mesh = shared("fandisk.obj");
    let grid = Grid::new(&mesh, [23, 23, 23], GridRegion::Pad(0.3)).unwrap();
    let mut points: Vec<[f64; 3]> = (0..grid.len()).map(|row| grid.point(row)).collect();
    for row in [0, 7, 64, 999, 1000, 5001, grid.len() - 1] {
        points[row] = [f64::NAN, 1.0, f64::INFINITY];
    }
    points.extend([[1e4, -2e4, 3e3], [-1e6, 0.0, 0.0]]);
    for sign in [Sign::Pseudonormal, Sign::Winding] {
        let answers = [&subgroup, &portable].map(|e| {
            let gpu = e.upload_mesh(mesh.clone()).unwrap();
            e.mesh_hits(&gpu, &points, sign).unwrap()
        });
        assert_same_hits(&answers[0], &answers[1], &format!("fandisk grid, {sign:?}"));
    }
    // The bunny's open base, where winding numbers pass ½ away from the surface too.
    let bunny = shared("stanford-bunny.obj");
    let grid = Grid::new(&bunny, [15, 15, 15], GridRegion::Pad(0.05)).unwrap();
    let points: Vec<[f64; 3]> = (0..grid.len()).map(|row| grid.point(row)).collect();
    let answers = [&subgroup, &portable].map(|e| {
        let gpu = e.upload_mesh(bunny.clone()).unwrap();
        e.mesh_hits(&gpu, &points, Sign::Winding).unwrap()
    });
    assert_same_hits(&answers[0], &answers[1], "bunny grid, winding");

    // Random triangles, each twice (exact ties, which the lower index wins), and random points.
    let mut rng = Rng::new(41);
    let once: Vec<Shape> = (0..1500)
        .map(|_| {
            let a = rng.vec(-20.0, 20.0);
            let b = a + rng.unit() * rng.range(0.02, 2.0);
            let c = a + rng.unit() * rng.range(0.02, 2.0);
            Shape::Triangle { a, b, c }
        })
        .collect();
    let shapes: Vec<Shape> = once.iter().chain(&once).cloned().collect();
    let mut points: Vec<[f32; 3]> = (0..4321).map(|_| rng.vec(-25.0, 25.0).to_f32()).collect();
    points[8] = [f32::NAN; 3];
    let answers = [&subgroup, &portable].map(|e| {
        let scene = e.upload_scene(&shapes).unwrap();
        e.scene_hits(&scene, &points, Mode::Surface).unwrap()
    });
    assert_same_hits(&answers[0], &answers[1], "triangle soup");
    assert!(answers[0].iter().all(|h| h.shape < once.len() as i32));
}

#[test]
fn mesh_walks_in_one_dispatch_answer_as_the_seeded_rounds() {
    // GPUs walk a chunk's rows in one dispatch, CPU adapters in seeded rounds (each row
    // after the first round starting from a neighbour's answer): the same bits either way,
    // with both kernels, in chunks whose rounds restart, on rows in Morton order and not.
    let fandisk = shared("fandisk.obj");
    let grid = Grid::new(&fandisk, [21, 19, 23], GridRegion::Pad(0.3)).unwrap();
    let mut points: Vec<[f64; 3]> = (0..grid.len()).map(|row| grid.point(row)).collect();
    for row in [0, 7, 64, 999, 1000, 5001, grid.len() - 1] {
        points[row] = [f64::NAN, 1.0, f64::INFINITY];
    }
    let mut rng = Rng::new(43);
    points.extend((0..3000).map(|_| rng.vec(-300.0, 300.0).to_array()));
    points.extend([[1e4, -2e4, 3e3], [-1e6, 0.0, 0.0]]);
    let bunny = shared("stanford-bunny.obj");
    let bunny_grid = Grid::new(&bunny, [17, 17, 17], GridRegion::Pad(0.05)).unwrap();
    let cpu = engine().adapter_info().device_type == wgpu::DeviceType::Cpu;
    assert_eq!(
        engine().seeded_mesh_rounds(),
        cpu,
        "the default: rounds on CPU adapters"
    );
    for portable_kernels in [false, true] {
        let [seeded, once] = [true, false].map(|seeded| {
            open_engine(EngineOptions {
                chunk_rows: Some(1000),
                portable_kernels,
                seeded_mesh_rounds: Some(seeded),
                ..Default::default()
            })
        });
        assert!(seeded.seeded_mesh_rounds() && !once.seeded_mesh_rounds());
        for morton in [false, true] {
            for sign in [Sign::None, Sign::Pseudonormal, Sign::Winding] {
                let answers = [&seeded, &once].map(|e| {
                    e.set_reorder_queries(morton);
                    let gpu = e.upload_mesh(fandisk.clone()).unwrap();
                    e.mesh_hits(&gpu, &points, sign).unwrap()
                });
                let what =
                    format!("fandisk, {sign:?}, Morton {morton}, portable {portable_kernels}");
                assert_same_hits(&answers[0], &answers[1], &what);
            }
        }
        // Grids sampled on the device, the bunny's open base signed by winding number.
        let [a, b] = [&seeded, &once].map(|e| {
            let gpu = e.upload_mesh(bunny.clone()).unwrap();
            e.sdf_values(&gpu, &bunny_grid, Sign::Winding).unwrap()
        });
        assert_eq!(
            a.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
            b.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
            "bunny grid, portable {portable_kernels}"
        );
    }
}

#[test]
fn device_winding_signs_equal_the_host_hierarchy() {
    // winding_walk.wgsl walks the clusters over the scene's own hierarchy in f32, reading its
    // packed or indexed records; its f64 twin, winding::WindingTree, must give the same side
    // wherever the f64 value is not within f32 rounding of ½, and both kernels the same bits.
    // A grid over the bunny (open at the base), and a mesh of one triangle (too small for a
    // hierarchy: the host signs it).
    let bunny = shared("stanford-bunny.obj");
    let one = Mesh::new(
        vec![
            DVec3::new(0.0, 0.0, 0.0),
            DVec3::new(1.0, 0.0, 0.0),
            DVec3::new(0.0, 1.0, 0.0),
        ],
        vec![[0, 1, 2]],
        "one triangle",
    )
    .unwrap();
    for records in [MeshRecords::Packed, MeshRecords::Indexed] {
        let engines = subgroup_and_portable_engines_with(EngineOptions {
            mesh_records: records,
            ..Default::default()
        });
        for (name, mesh, res) in [("bunny", &bunny, 24), ("one triangle", &one, 6)] {
            let grid = Grid::new(mesh, [res; 3], GridRegion::Pad(0.1)).unwrap();
            let points: Vec<[f64; 3]> = (0..grid.len()).map(|row| grid.point(row)).collect();
            let [hits, portable] = engines.each_ref().map(|e| {
                let gpu = e.upload_mesh(mesh.clone()).unwrap();
                e.mesh_hits(&gpu, &points, Sign::Winding).unwrap()
            });
            let what = format!("{name}, {records:?}");
            assert_same_hits(&hits, &portable, &what);
            let tree = closest::winding::WindingTree::new(mesh);
            let (mut inside, mut compared) = (0, 0);
            for (p, hit) in points.iter().zip(&hits) {
                let w = tree.winding_number(mesh, DVec3::new(p[0], p[1], p[2]));
                if (w - 0.5).abs() < 1e-4 || hit.distance == 0.0 {
                    continue;
                }
                compared += 1;
                inside += usize::from(w > 0.5);
                assert_eq!(
                    hit.distance < 0.0,
                    w > 0.5,
                    "{what} at {p:?}: {hit:?}, w {w}"
                );
            }
            assert!(
                compared > grid.len() * 9 / 10,
                "{what}: {compared} compared"
            );
            if name == "bunny" {
                assert!(inside > 1000, "{what}: {inside} inside");
            }
        }
    }
}

/// A mesh in parts signs by winding number on the device too: each part's clusters are walked
/// there and their numbers summed, decided as the f64 twin over the same parts decides
/// (`GpuMesh::host_winding`); both kernels give the same bits, packed and indexed records alike.
#[test]
fn meshes_in_parts_sign_by_winding_number_on_the_device_as_their_twin() {
    let bunny = shared("stanford-bunny.obj");
    let grid = Grid::new(&bunny, [20; 3], GridRegion::Pad(0.1)).unwrap();
    let points: Vec<[f64; 3]> = (0..grid.len()).map(|row| grid.point(row)).collect();
    for records in [MeshRecords::Packed, MeshRecords::Indexed] {
        let engines = subgroup_and_portable_engines_with(EngineOptions {
            max_binding_bytes: Some(64 << 10),
            mesh_records: records,
            ..Default::default()
        });
        let [(hits, gpu), (portable, _)] = engines.each_ref().map(|e| {
            let gpu = e.upload_mesh(bunny.clone()).unwrap();
            (e.mesh_hits(&gpu, &points, Sign::Winding).unwrap(), gpu)
        });
        let what = format!("bunny in {} parts, {records:?}", gpu.part_count());
        assert!(gpu.part_count() >= 4, "{what}");
        assert_same_hits(&hits, &portable, &what);
        let twin = gpu.host_winding();
        let (mut inside, mut compared) = (0, 0);
        for (p, hit) in points.iter().zip(&hits) {
            let p = DVec3::new(p[0], p[1], p[2]);
            if hit.distance == 0.0 || (twin.winding_number(&bunny, p) - 0.5).abs() < 1e-4 {
                continue;
            }
            compared += 1;
            let expected = twin.is_inside(&bunny, p);
            inside += usize::from(expected);
            assert_eq!(hit.distance < 0.0, expected, "{what} at {p:?}: {hit:?}");
        }
        assert!(
            compared > grid.len() * 9 / 10,
            "{what}: {compared} compared"
        );
        assert!(inside > 500, "{what}: {inside} inside");
    }
}

/// The service admits a mesh by the device bytes its upload asks for before any is allocated:
/// the mesh must hold just that once its sign data is built, its winding clusters included,
/// however its records are stored and whether or not it has a hierarchy.
#[test]
fn a_mesh_holds_the_device_bytes_it_was_admitted_with() {
    let fandisk = shared("fandisk.obj");
    let one = icosphere(1.0, 0);
    let rows: Vec<[f64; 3]> = vec![[0.1, 0.2, 0.3], [3.0, 2.0, 1.0]];
    for records in [MeshRecords::Packed, MeshRecords::Indexed] {
        let engine = open_engine(EngineOptions {
            mesh_records: records,
            ..Default::default()
        });
        for (name, mesh) in [("fandisk", &fandisk), ("icosahedron", &one)] {
            let mut admitted = 0;
            let gpu = engine
                .upload_mesh_admitted(mesh.clone(), |bytes| {
                    admitted = bytes;
                    Ok::<(), closest::Error>(())
                })
                .unwrap();
            for sign in [Sign::Winding, Sign::Pseudonormal] {
                engine.mesh_hits(&gpu, &rows, sign).unwrap();
            }
            assert_eq!(
                gpu.device_bytes(),
                admitted,
                "{name}, {records:?}: the bytes it holds, and those it was admitted with"
            );
        }
    }
}

/// A torus of 2·u·v outward-wound triangles about Z (scripts/bench/make_torus_mesh.py's).
fn torus(u: usize, v: usize, major: f64, minor: f64) -> Mesh {
    let mut vertices = Vec::with_capacity(u * v);
    for i in 0..u {
        let theta = std::f64::consts::TAU * i as f64 / u as f64;
        for j in 0..v {
            let phi = std::f64::consts::TAU * j as f64 / v as f64;
            let radius = major + minor * phi.cos();
            vertices.push(DVec3::new(
                radius * theta.cos(),
                radius * theta.sin(),
                minor * phi.sin(),
            ));
        }
    }
    let at = |i: usize, j: usize| ((i % u) * v + j % v) as u32;
    let mut triangles = Vec::with_capacity(2 * u * v);
    for i in 0..u {
        for j in 0..v {
            triangles.push([at(i, j), at(i + 1, j), at(i + 1, j + 1)]);
            triangles.push([at(i, j), at(i + 1, j + 1), at(i, j + 1)]);
        }
    }
    Mesh::new(vertices, triangles, "torus").unwrap()
}

/// Rows `a` and `b` are the same bits, but where two triangles are equally near within f32
/// rounding: parts compare their winners' f32 distances, one walk their squared distances, so
/// such near-ties may go to either triangle. Those rows must agree in distance within SPEC §3's
/// bound, each as far from its own triangle as it says, and be rare off the surface; NaN rows
/// are NaN in both.
fn assert_same_answers(mesh: &Mesh, rows: &[[f64; 3]], a: &[GpuHit], b: &[GpuHit], what: &str) {
    let (lo, hi) = mesh.bounds();
    let mut ties = 0;
    for (i, ((x, y), p)) in a.iter().zip(b).zip(rows).enumerate() {
        if bytemuck::bytes_of(x) == bytemuck::bytes_of(y) {
            continue;
        }
        let p = DVec3::new(p[0], p[1], p[2]);
        let tol = tolerance(p.max_abs().max(lo.max_abs()).max(hi.max_abs()));
        let own_triangle = |h: &GpuHit| {
            let t = h.shape as usize;
            let [a, b, c] = mesh.corners(t);
            let d = reference::query_shape(&Shape::Triangle { a, b, c }, t, p, Mode::Surface);
            within((d.distance - h.distance.abs() as f64).abs(), tol)
        };
        assert!(
            x.shape >= 0
                && y.shape >= 0
                && within((x.distance as f64 - y.distance as f64).abs(), tol)
                && own_triangle(x)
                && own_triangle(y),
            "{what}, row {i}: {x:?} vs {y:?}"
        );
        // On the surface the sign is either (the host and device winding numbers differ
        // there); off it, a differing row is a near-tie.
        ties += usize::from(!within(x.distance.abs() as f64, tol));
    }
    assert!(
        ties * 100 < a.len(),
        "{what}: {ties} of {} rows off the surface differ",
        a.len()
    );
}

#[test]
fn meshes_split_over_small_bindings_answer_as_one_binding_does() {
    // 204,800 triangles; bindings of 2 MiB hold 32,768 of them, so the mesh is cut into
    // parts (SPEC §4 "Size") and every block of rows is answered by the parts in turn.
    let mesh = torus(400, 256, 1.0, 0.3);
    let split_engine = open_engine(EngineOptions {
        max_binding_bytes: Some(2 << 20),
        chunk_rows: Some(3000),
        ..Default::default()
    });
    let split = split_engine.upload_mesh(mesh.clone()).unwrap();
    let whole = engine().upload_mesh(mesh.clone()).unwrap();
    assert!(split.part_count() >= 7, "{} parts", split.part_count());
    assert_eq!(whole.part_count(), 1);
    let mut rng = Rng::new(14);
    let mut points = probe_points(&mut rng, &mesh, 20_000);
    // Exactly on vertices, far away, and rows that are not points.
    points.extend(
        (0..mesh.vertices.len())
            .step_by(997)
            .map(|k| mesh.vertices.get(k)),
    );
    points.push(DVec3::new(1e6, -3e5, 2e5));
    let mut rows: Vec<[f64; 3]> = points.iter().map(|p| [p.x, p.y, p.z]).collect();
    rows.insert(17, [f64::NAN, 0.0, 0.0]);
    rows.insert(5000, [0.0, f64::INFINITY, 0.0]);
    // Rows pass over the parts whose boxes are too far to matter: the same bytes as every
    // part asked for every row.
    let every_part_engine = open_engine(EngineOptions {
        max_binding_bytes: Some(2 << 20),
        chunk_rows: Some(3000),
        every_part: true,
        ..Default::default()
    });
    let every_part = every_part_engine.upload_mesh(mesh.clone()).unwrap();
    let bytes = |hits: &[GpuHit]| bytemuck::cast_slice::<GpuHit, u8>(hits).to_vec();
    for sign in [Sign::None, Sign::Pseudonormal, Sign::Winding] {
        let a = engine().mesh_hits(&whole, &rows, sign).unwrap();
        let b = split_engine.mesh_hits(&split, &rows, sign).unwrap();
        assert_same_answers(
            &mesh,
            &rows,
            &a,
            &b,
            &format!("{sign:?}, split vs one binding"),
        );
        let c = every_part_engine
            .mesh_hits(&every_part, &rows, sign)
            .unwrap();
        assert!(bytes(&b) == bytes(&c), "{sign:?}: parts passed over");
    }
    // The split answers against the f64 brute force on a sample, signs against the exact
    // winding number.
    let sample: Vec<DVec3> = points.iter().copied().step_by(83).collect();
    let rows: Vec<[f64; 3]> = sample.iter().map(|p| [p.x, p.y, p.z]).collect();
    let hits = split_engine
        .mesh_hits(&split, &rows, Sign::Pseudonormal)
        .unwrap();
    check(
        &mesh,
        &sample,
        &hits,
        Some(&|p: DVec3| winding_number(&mesh, p) > 0.5),
    );
}

#[test]
fn indexed_mesh_records_match_the_f64_references() {
    // Shared f32 vertices and per-triangle indices (`MeshRecords::Indexed`): the edges are
    // differences of rounded vertices, not rounded differences, so answers may differ from
    // packed records' in the last bits but must meet the same bound. Subgroup and portable
    // kernels still agree bit for bit.
    let options = EngineOptions {
        chunk_rows: Some(1000),
        mesh_records: MeshRecords::Indexed,
        ..Default::default()
    };
    let [subgroup, portable] = subgroup_and_portable_engines_with(options.clone());
    let far = DVec3::new(1234.567, -2345.678, 345.6789);
    let moved = |mesh: Mesh, by: DVec3| {
        let vertices: Vec<DVec3> = mesh.vertices.iter().map(|v| v + by).collect();
        Mesh::new(vertices, mesh.triangles.clone(), "moved").unwrap()
    };
    let meshes = [
        ("fandisk", shared("fandisk.obj")),
        ("bunny", shared("stanford-bunny.obj")),
        // Vertices no f32 holds, far from the origin.
        ("icosphere far away", moved(icosphere(0.7, 3), far)),
        ("fandisk far away", moved(shared("fandisk.obj"), far)),
    ];
    let mut rng = Rng::new(44);
    for (name, mesh) in meshes {
        let points = probe_points(&mut rng, &mesh, if name == "bunny" { 300 } else { 800 });
        let mut rows: Vec<[f64; 3]> = points.iter().map(|p| [p.x, p.y, p.z]).collect();
        rows.push([f64::NAN, 0.0, 0.0]);
        let answers = [&subgroup, &portable].map(|e| {
            let gpu = e.upload_mesh(mesh.clone()).unwrap();
            assert_eq!(gpu.records(), MeshRecords::Indexed, "{name}");
            e.mesh_hits(&gpu, &rows, Sign::Pseudonormal).unwrap()
        });
        assert_same_hits(&answers[0], &answers[1], &format!("{name}, indexed"));
        let hits = &answers[0];
        let nan = hits.last().unwrap();
        assert!(nan.shape == -1 && nan.distance.is_nan(), "{name}: {nan:?}");
        let closed = name != "bunny";
        let inside = |p: DVec3| winding_number(&mesh, p) > 0.5;
        check(
            &mesh,
            &points,
            &hits[..points.len()],
            closed.then_some(&inside as &(dyn Fn(DVec3) -> bool + Sync)),
        );
    }

    // Parts of a mesh cut over small bindings number their own vertices.
    let mesh = torus(160, 90, 1.0, 0.3);
    let split = open_engine(EngineOptions {
        max_binding_bytes: Some(64 << 10),
        ..options
    });
    let gpu = split.upload_mesh(mesh.clone()).unwrap();
    assert!(gpu.part_count() >= 10, "{} parts", gpu.part_count());
    assert_eq!(gpu.records(), MeshRecords::Indexed);
    let points = probe_points(&mut rng, &mesh, 800);
    let rows: Vec<[f64; 3]> = points.iter().map(|p| [p.x, p.y, p.z]).collect();
    let hits = split.mesh_hits(&gpu, &rows, Sign::Pseudonormal).unwrap();
    check(
        &mesh,
        &points,
        &hits,
        Some(&|p: DVec3| winding_number(&mesh, p) > 0.5),
    );
}

#[test]
fn meshes_go_up_indexed_where_only_indexed_records_fit_the_memory() {
    // The least memory (found by bisection) in which `Auto` uploads fandisk: packed records
    // are refused there, and the mesh answers as indexed records do.
    let mesh = shared("fandisk.obj");
    let upload = |records, memory| {
        open_engine(EngineOptions {
            memory_bytes: Some(memory),
            mesh_records: records,
            ..Default::default()
        })
        .upload_mesh(mesh.clone())
    };
    let (mut refused, mut fits) = (1u64, 1u64 << 30);
    assert!(upload(MeshRecords::Auto, fits).is_ok());
    while fits - refused > 1 {
        let mid = (refused + fits) / 2;
        match upload(MeshRecords::Auto, mid) {
            Ok(_) => fits = mid,
            Err(e) => {
                assert!(matches!(e, closest::Error::OutOfMemory(_)), "{e}");
                refused = mid;
            }
        }
    }
    let auto = upload(MeshRecords::Auto, fits).unwrap();
    assert_eq!(auto.records(), MeshRecords::Indexed);
    let packed = upload(MeshRecords::Packed, fits);
    assert!(matches!(packed, Err(closest::Error::OutOfMemory(_))));
    // With room for packed records, `Auto` keeps them.
    assert_eq!(
        upload(MeshRecords::Auto, 1 << 30).unwrap().records(),
        MeshRecords::Packed
    );
}

#[test]
fn meshes_uploaded_at_once_share_the_memory_one_check_granted() {
    // Two clients of a service uploading at once: each build's memory is reserved from its
    // check until its upload ends, so a second upload while the first builds sees what is
    // left, not the whole; after it, the whole again. The second is asked from the first's
    // interrupt check, which its build asks every 20 ms once its memory is reserved.
    let mesh = torus(256, 256, 1.0, 0.3);
    let need_mib: u64 = {
        let tiny = open_engine(EngineOptions {
            memory_bytes: Some(1),
            ..Default::default()
        });
        let refused = tiny
            .upload_mesh(mesh.clone())
            .err()
            .expect("refused")
            .to_string();
        let mib = refused
            .split("needs about ")
            .nth(1)
            .and_then(|rest| rest.split(" MiB").next())
            .and_then(|n| n.parse().ok());
        mib.unwrap_or_else(|| panic!("{refused}"))
    };
    assert!(need_mib >= 8, "{need_mib} MiB");
    let engine = std::sync::Arc::new(open_engine(EngineOptions {
        memory_bytes: Some((need_mib * 3 / 2) << 20),
        ..Default::default()
    }));
    let during = std::sync::Arc::new(std::sync::Mutex::new(None::<String>));
    let check = {
        let (engine, during, mesh) = (engine.clone(), during.clone(), mesh.clone());
        Box::new(move || {
            let mut during = during.lock().unwrap();
            if during.is_none() {
                let second = engine.upload_mesh(mesh.clone());
                *during = Some(second.err().map_or("uploaded".into(), |e| e.to_string()));
            }
            false
        })
    };
    let first = closest::interrupt::checking_interrupts(check, || engine.upload_mesh(mesh.clone()));
    assert!(first.is_ok(), "{:?}", first.err());
    let during = during
        .lock()
        .unwrap()
        .clone()
        .expect("asked during the build");
    assert!(
        during.contains("MiB are available beside the")
            && during.contains("that uploads under way hold"),
        "{during}"
    );
    assert!(engine.upload_mesh(mesh).is_ok());
}

#[test]
fn auto_stores_meshes_of_a_million_triangles_or_more_indexed_where_device_memory_is_the_hosts() {
    // There every device byte is a host byte: `Auto` takes indexed records from 2^20
    // triangles up whatever the memory, packed ones below; a discrete GPU keeps packed ones.
    let engine = open_engine(EngineOptions::default());
    let shared = matches!(
        engine.adapter_info().device_type,
        wgpu::DeviceType::Cpu | wgpu::DeviceType::IntegratedGpu
    );
    let records = |mesh: Mesh| engine.upload_mesh(mesh).unwrap().records();
    let at = torus(1024, 512, 1.0, 0.3);
    assert_eq!(at.triangles.len(), MeshRecords::AUTO_INDEXED_TRIANGLES);
    let large = if shared {
        MeshRecords::Indexed
    } else {
        MeshRecords::Packed
    };
    assert_eq!(records(at), large);
    let below = torus(1023, 512, 1.0, 0.3);
    assert!(below.triangles.len() < MeshRecords::AUTO_INDEXED_TRIANGLES);
    assert_eq!(records(below), MeshRecords::Packed);
}

/// `mesh` with `other`'s triangles beside it, moved by `by`.
fn with_beside(mesh: &Mesh, other: &Mesh, by: DVec3) -> Mesh {
    let base = mesh.vertices.len() as u32;
    let vertices: Vec<DVec3> = mesh
        .vertices
        .iter()
        .chain(other.vertices.iter().map(|v| v + by))
        .collect();
    let triangles = mesh
        .triangles
        .iter()
        .copied()
        .chain(other.triangles.iter().map(|t| t.map(|v| v + base)))
        .collect();
    Mesh::new(vertices, triangles, "beside").unwrap()
}

/// Points where signs are hard: on vertices, edges and faces, just off them along the face
/// normal, and beyond each edge in the triangle's plane (creases, holes' rims).
fn feature_points(mesh: &Mesh, stride: usize) -> Vec<DVec3> {
    let (lo, hi) = mesh.bounds();
    let size = (hi - lo).length();
    let mut points = Vec::new();
    for t in (0..mesh.triangles.len()).step_by(stride) {
        let [a, b, c] = mesh.corners(t);
        let n = reference::triangle_unit_normal(a, b, c);
        let centroid = (a + b + c) * (1.0 / 3.0);
        for f in [
            a,
            b,
            c,
            (a + b) * 0.5,
            (b + c) * 0.5,
            (c + a) * 0.5,
            centroid,
        ] {
            points.push(f);
            for h in [1e-7, 1e-4, 2e-2] {
                points.push(f + n * (size * h));
                points.push(f - n * (size * h));
            }
        }
        for m in [(a + b) * 0.5, (b + c) * 0.5, (c + a) * 0.5] {
            for h in [1e-4, 2e-2] {
                points.push(m + (m - centroid).normalize_or_zero() * (size * h));
            }
        }
    }
    points
}

fn all_features() -> [Feature; 7] {
    [
        Feature::Face,
        Feature::Vertex(0),
        Feature::Vertex(1),
        Feature::Vertex(2),
        Feature::Edge(0, 1),
        Feature::Edge(1, 2),
        Feature::Edge(0, 2),
    ]
}

#[test]
fn device_pseudonormal_signs_equal_the_f64_twin() {
    // The device finds the nearest feature in f32 and reads its pseudonormal from a table
    // (shaders/pseudonormal.wgsl); the host's f64 `Pseudonormals::sign` on the same triangle
    // is its twin. Fandisk (sharp creases), the bunny (holes: boundary edges), and the odd mesh
    // beside fandisk (a stored crowded-edge sum, a collinear and a repeated-vertex triangle,
    // boundary edges); packed and indexed records, subgroup and portable kernels.
    let odd = odd_mesh();
    let fandisk = shared("fandisk.obj");
    let (lo, hi) = fandisk.bounds();
    let meshes = [
        ("fandisk", fandisk.clone(), 7),
        ("bunny", shared("stanford-bunny.obj"), 97),
        (
            "fandisk and the odd mesh",
            with_beside(&fandisk, &odd, DVec3::new(hi.x - lo.x, 0.0, 0.0) * 1.5),
            29,
        ),
    ];
    let mut rng = Rng::new(45);
    for (name, mesh, stride) in meshes {
        let normals = closest::mesh::Pseudonormals::new(&mesh);
        let mut points = feature_points(&mesh, stride);
        points.extend(probe_points(&mut rng, &mesh, 500));
        if name == "fandisk and the odd mesh" {
            let odd_only = Mesh {
                vertices: mesh
                    .vertices
                    .iter()
                    .skip(fandisk.vertices.len())
                    .collect::<Vec<_>>()
                    .into(),
                triangles: odd.triangles.clone(),
            };
            points.extend(feature_points(&odd_only, 1));
        }
        let rows: Vec<[f64; 3]> = points.iter().map(|p| [p.x, p.y, p.z]).collect();
        for records in [MeshRecords::Packed, MeshRecords::Indexed] {
            let options = EngineOptions {
                mesh_records: records,
                ..Default::default()
            };
            let answers = subgroup_and_portable_engines_with(options).map(|e| {
                let gpu = e.upload_mesh(mesh.clone()).unwrap();
                e.mesh_hits(&gpu, &rows, Sign::Pseudonormal).unwrap()
            });
            let what = format!("{name}, {records:?}");
            assert_same_hits(&answers[0], &answers[1], &what);
            let (lo, hi) = mesh.bounds();
            let wrong: Vec<String> = points
                .iter()
                .zip(&answers[0])
                .filter_map(|(&p, hit)| {
                    let (sign, normal) = normals.sign(&mesh, hit.shape as usize, p);
                    let tol = tolerance(p.max_abs().max(lo.max_abs()).max(hi.max_abs()));
                    let device = if hit.distance < 0.0 { -1.0 } else { 1.0 };
                    // Where moving p by the bound changes the f64 sign (its closest point on a
                    // boundary between features whose pseudonormals disagree: folds, holes'
                    // rims), rounding decides, and the sign may go either way.
                    let t = hit.shape as usize;
                    let stable = (0..6).all(|k| {
                        let mut moved = [p.x, p.y, p.z];
                        moved[k / 2] += if k % 2 == 0 { tol } else { -tol };
                        normals.sign(&mesh, t, DVec3::from_array(moved)).0 == sign
                    });
                    let sign_differs = hit.distance.abs() as f64 > tol && stable && device != sign;
                    // On the surface the normal is the feature's pseudonormal.
                    let device_normal = DVec3::new(
                        hit.normal[0] as f64,
                        hit.normal[1] as f64,
                        hit.normal[2] as f64,
                    );
                    // On the surface the nearest feature is a matter of rounding: the normal
                    // must be the pseudonormal of one of the triangle's seven.
                    let normal_differs = hit.distance == 0.0
                        && all_features().iter().all(|&feature| {
                            let normal = normals.feature_normal(&mesh, hit.shape as usize, feature);
                            (device_normal - normal).length() > 1e-5
                        });
                    (sign_differs || normal_differs).then(|| {
                        format!("{p:?}: device {hit:?}, host sign {sign} normal {normal:?}")
                    })
                })
                .collect();
            assert!(
                wrong.is_empty(),
                "{what}: {} of {} rows differ, e.g.\n{}",
                wrong.len(),
                points.len(),
                wrong[..wrong.len().min(6)].join("\n")
            );
        }
    }
}

#[test]
fn grids_sampled_on_the_device_match_the_host_samples() {
    // `Engine::sdf` computes each sample on the device from the grid's corner and spacing
    // (gpu::grid): chunks of whole planes (chunk_rows 5000: four planes, partial bricks) or of
    // z-rows of one plane (chunk_rows 100), against the same grid sampled on the host and
    // answered as query points. Sample positions differ by f32 rounding, so distances agree
    // within the bound and signs wherever |d| exceeds it; subgroup and portable kernels agree
    // bit for bit; a sample of rows against the f64 brute force.
    let fandisk = shared("fandisk.obj");
    let bunny = shared("stanford-bunny.obj");
    let (lo, hi) = fandisk.bounds();
    let corner_box = [lo.x, lo.y, lo.z, (lo.x + hi.x) / 2.0, hi.y, hi.z + 1.0];
    let cases = [
        (
            "fandisk 37×41×29",
            &fandisk,
            [37, 41, 29],
            GridRegion::Pad(0.1),
        ),
        (
            "fandisk half box",
            &fandisk,
            [9, 33, 70],
            GridRegion::Bounds(corner_box),
        ),
        ("bunny 16³", &bunny, [16, 16, 16], GridRegion::Pad(0.05)),
    ];
    for chunk_rows in [100, 5000] {
        let engines = subgroup_and_portable_engines_with(EngineOptions {
            chunk_rows: Some(chunk_rows),
            ..Default::default()
        });
        for (name, mesh, res, region) in &cases {
            let grid = Grid::new(mesh, *res, *region).unwrap();
            let (lo, hi) = mesh.bounds();
            for sign in [Sign::None, Sign::Pseudonormal, Sign::Winding] {
                let what = format!("{name}, {sign:?}, chunks of {chunk_rows}");
                let [device, portable] = [&engines[0], &engines[1]].map(|e| {
                    e.set_grid_on_device(true);
                    let gpu = e.upload_mesh((*mesh).clone()).unwrap();
                    e.sdf_values(&gpu, &grid, sign).unwrap()
                });
                assert_eq!(
                    device.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
                    portable.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
                    "{what}: subgroup vs portable"
                );
                let e = &engines[0];
                e.set_grid_on_device(false);
                let gpu = e.upload_mesh((*mesh).clone()).unwrap();
                let host = e.sdf_values(&gpu, &grid, sign).unwrap();
                e.set_grid_on_device(true);
                assert_eq!(device.len(), grid.len(), "{what}");
                let wrong: Vec<String> = (0..grid.len())
                    .filter_map(|row| {
                        let p = DVec3::from_array(grid.point(row));
                        let tol = tolerance(p.max_abs().max(lo.max_abs()).max(hi.max_abs()));
                        let (a, b) = (device[row] as f64, host[row] as f64);
                        let differs = !within((a.abs() - b.abs()).abs(), tol)
                            || (a.abs() > tol && (a < 0.0) != (b < 0.0))
                            || (sign == Sign::None && a < 0.0);
                        let exact = (row % 61 == 0).then(|| brute_force(mesh, p).0);
                        let off = exact.is_some_and(|d| !within((a.abs() - d).abs(), tol));
                        (differs || off).then(|| {
                            format!("row {row} {p:?}: device {a}, host {b}, f64 {exact:?}")
                        })
                    })
                    .collect();
                assert!(
                    wrong.is_empty(),
                    "{what}: {} of {} samples differ, e.g.\n{}",
                    wrong.len(),
                    grid.len(),
                    wrong[..wrong.len().min(6)].join("\n")
                );
            }
        }
    }
}

/// A unit cube without its top face, each face an `n` × `n` grid of quads (outward normals):
/// the winding number passes ½ smoothly across the opening.
fn open_box(n: usize) -> Mesh {
    let faces = [
        (DVec3::ZERO, DVec3::Y, DVec3::X),
        (DVec3::ZERO, DVec3::X, DVec3::Z),
        (DVec3::Y, DVec3::Z, DVec3::X),
        (DVec3::ZERO, DVec3::Z, DVec3::Y),
        (DVec3::X, DVec3::Y, DVec3::Z),
    ];
    let mut vertices = Vec::new();
    let mut triangles = Vec::new();
    for (origin, u, v) in faces {
        let first = vertices.len() as u32;
        let at = |i: usize, j: usize| first + (i * (n + 1) + j) as u32;
        for i in 0..=n {
            for j in 0..=n {
                vertices.push(origin + u * (i as f64 / n as f64) + v * (j as f64 / n as f64));
            }
        }
        for i in 0..n {
            for j in 0..n {
                triangles.push([at(i, j), at(i + 1, j), at(i + 1, j + 1)]);
                triangles.push([at(i, j), at(i + 1, j + 1), at(i, j + 1)]);
            }
        }
    }
    Mesh::new(vertices, triangles, "open box").unwrap()
}

/// Winding signs take clusters whole past `COARSE_ACCURACY` radii, then evaluate again at
/// `ACCURACY` the points whose coarse number is near ½. Around an open box's opening the coarse
/// number puts some points on the wrong side of ½; the signs must be the fine number's there
/// too: the device's (both kernels), and the host's for a mesh cut into parts.
#[test]
fn device_winding_signs_near_one_half_are_the_fine_numbers() {
    use closest::winding::{COARSE_ACCURACY, WindingTree};
    let mesh = open_box(12);
    let tree = WindingTree::new(&mesh);
    let mut points = Vec::new();
    for i in 0..9 {
        for j in 0..9 {
            for k in -12..=12 {
                let (x, y) = (0.15 + 0.0875 * i as f64, 0.15 + 0.0875 * j as f64);
                points.push([x, y, 1.0 + 0.004 * k as f64]);
            }
        }
    }
    let fine: Vec<f64> = points
        .iter()
        .map(|p| tree.winding_number(&mesh, DVec3::new(p[0], p[1], p[2])))
        .collect();
    let decided = |w: f64| (w - 0.5).abs() > 1e-4;
    let coarse_wrong = points
        .iter()
        .zip(&fine)
        .filter(|&(p, &w)| {
            let coarse =
                tree.winding_number_within(&mesh, DVec3::new(p[0], p[1], p[2]), COARSE_ACCURACY);
            decided(w) && (coarse > 0.5) != (w > 0.5)
        })
        .count();
    assert!(
        coarse_wrong > 0,
        "no point where the coarse number alone would sign wrong"
    );
    let [subgroup, portable] = subgroup_and_portable_engines(4096);
    let split = open_engine(EngineOptions {
        max_binding_bytes: Some(16 << 10),
        ..Default::default()
    });
    for engine in [subgroup, portable, split] {
        let gpu = engine.upload_mesh(mesh.clone()).unwrap();
        let hits = engine.mesh_hits(&gpu, &points, Sign::Winding).unwrap();
        // A mesh in parts sums its parts' numbers: the fine ones of its own twin.
        let twin = gpu.host_winding();
        let fine: Vec<f64> = points
            .iter()
            .map(|p| twin.winding_number(&mesh, DVec3::new(p[0], p[1], p[2])))
            .collect();
        let wrong: Vec<String> = points
            .iter()
            .zip(&fine)
            .zip(&hits)
            .filter(|&((_, &w), hit)| {
                decided(w) && hit.distance != 0.0 && (hit.distance < 0.0) != (w > 0.5)
            })
            .map(|((p, w), hit)| format!("{p:?}: w {w}, {hit:?}"))
            .collect();
        assert!(
            wrong.is_empty(),
            "{} of {} signs differ from the fine winding number ({coarse_wrong} coarse ones would; \
             {} parts):\n{}",
            wrong.len(),
            points.len(),
            gpu.part_count(),
            wrong[..wrong.len().min(10)].join("\n")
        );
    }
}

/// Points 10 to 1e18 radii from a mesh, along axes and random directions from its centre.
fn far_points(rng: &mut Rng, mesh: &Mesh) -> Vec<DVec3> {
    let (lo, hi) = mesh.bounds();
    let (centre, radius) = ((lo + hi) * 0.5, (hi - lo).length() * 0.5);
    let mut directions = vec![
        DVec3::X,
        DVec3::Y,
        DVec3::Z,
        -DVec3::X,
        -DVec3::Y,
        -DVec3::Z,
    ];
    directions.extend((0..10).map(|_| rng.unit()));
    (1..=18)
        .flat_map(|k| {
            directions
                .iter()
                .map(move |&u| centre + u * (radius * 10f64.powi(k)))
        })
        .collect()
}

/// The f64 twin's pseudonormal sign at p: the nearest triangle's (the first on ties), every
/// triangle checked.
fn twin_pseudonormal_inside(mesh: &Mesh, normals: &closest::mesh::Pseudonormals, p: DVec3) -> bool {
    let distance = |t: usize| (p - closest::mesh::closest_feature(p, mesh.corners(t)).0).length();
    let nearest = (0..mesh.triangles.len()).fold(0, |best, t| {
        if distance(t) < distance(best) {
            t
        } else {
            best
        }
    });
    normals.sign(mesh, nearest, p).0 < 0.0
}

#[test]
fn points_far_from_a_mesh_are_signed_by_pseudonormal_as_the_references() {
    // Far from a mesh every triangle lies at nearly one distance: the f32 walk's nearest was a
    // tie among triangles on every side, and one facing away signed points a million radii
    // from a closed mesh inside (12 of 16 directions at 1e7 radii from a cube, every sample of
    // a grid 1e7 from the bunny). Closed meshes: the exact winding number says outside, an
    // oracle that shares nothing with the kernel; open ones: the f64 twin, up to 1e6 radii
    // (beyond, f64 ties too: across a flat face the distance varies by R² / 2D). The cube is
    // scanned linearly and signed on the host, the others walk their hierarchy and sign on the
    // device (subgroup and portable kernels), or in parts (small bindings) on the host.
    let mut rng = Rng::new(47);
    let closed = [
        box_mesh(DVec3::new(3.0, -1.0, 2.0), DVec3::new(1.0, 0.5, 2.0)),
        shared("fandisk.obj"),
    ];
    let [subgroup, portable] = subgroup_and_portable_engines(1 << 16);
    let split = open_engine(EngineOptions {
        max_binding_bytes: Some(128 << 10),
        ..Default::default()
    });
    let engines = [subgroup, portable, split];
    let fandisk_parts = engines[2]
        .upload_mesh(closed[1].clone())
        .unwrap()
        .part_count();
    assert!(fandisk_parts >= 2, "{fandisk_parts} parts");
    for mesh in &closed {
        let points = far_points(&mut rng, mesh);
        let raw: Vec<[f64; 3]> = points.iter().map(|p| p.to_array()).collect();
        for engine in &engines {
            let gpu = engine.upload_mesh(mesh.clone()).unwrap();
            let hits = engine.mesh_hits(&gpu, &raw, Sign::Pseudonormal).unwrap();
            check(
                mesh,
                &points,
                &hits,
                Some(&|p| winding_number(mesh, p) > 0.5),
            );
        }
    }
    for mesh in [shared("stanford-bunny.obj"), open_box(6)] {
        let normals = closest::mesh::Pseudonormals::new(&mesh);
        let (lo, hi) = mesh.bounds();
        let radius = (hi - lo).length() * 0.5;
        let points: Vec<DVec3> = far_points(&mut rng, &mesh)
            .into_iter()
            .filter(|p| (*p - (lo + hi) * 0.5).length() <= 1.001e6 * radius)
            .collect();
        let raw: Vec<[f64; 3]> = points.iter().map(|p| p.to_array()).collect();
        for engine in &engines {
            let gpu = engine.upload_mesh(mesh.clone()).unwrap();
            let hits = engine.mesh_hits(&gpu, &raw, Sign::Pseudonormal).unwrap();
            check(
                &mesh,
                &points,
                &hits,
                Some(&|p| twin_pseudonormal_inside(&mesh, &normals, p)),
            );
        }
    }
}

#[test]
fn grids_far_from_a_closed_mesh_are_outside() {
    // The same far rows as SDF grids, dense and banded, whose samples are made on the device.
    let fandisk = shared("fandisk.obj");
    let (lo, hi) = fandisk.bounds();
    let radius = (hi - lo).length() * 0.5;
    for distance in [1e4, 1e7, 1e12] {
        let far = radius * distance;
        let bounds = [far, -far, -far, 3.0 * far, far, far];
        let grid = Grid::new(&fandisk, [6, 5, 4], GridRegion::Bounds(bounds)).unwrap();
        for sign in [Sign::Pseudonormal, Sign::Winding] {
            let gpu = engine().upload_mesh(fandisk.clone()).unwrap();
            let values = engine().sdf_values(&gpu, &grid, sign).unwrap();
            assert!(
                values.iter().all(|&d| d > 0.0),
                "{sign:?} at {distance} radii: {} of {} samples inside",
                values.iter().filter(|&&d| d <= 0.0).count(),
                values.len()
            );
        }
    }
}

/// The centre of a dense sphere walks every leaf, more loop passes than Mesa 22's limiter lets
/// an invocation run (it then ends every loop silently): there the rows of its vector are
/// refused, naming the limiter, and wherever loops run to their end every row is answered as
/// the brute force answers it (a point near the surface beside it in the same subgroup too).
#[test]
fn the_centre_of_a_dense_sphere_is_answered_or_refused_never_answered_from_a_cut_walk() {
    let r = 1.0;
    let mesh = icosphere(r, 7);
    assert_eq!(mesh.triangles.len(), 327_680);
    let points = [
        DVec3::ZERO,
        DVec3::new(0.0, 0.0, 0.5),
        DVec3::new(0.001, 0.0, 0.0),
        DVec3::new(0.3, 0.1, 0.0),
    ];
    let raw: Vec<[f64; 3]> = points.iter().map(|p| [p.x, p.y, p.z]).collect();
    for engine in subgroup_and_portable_engines(1024) {
        let gpu = engine.upload_mesh(mesh.clone()).unwrap();
        match engine.mesh_hits(&gpu, &raw, Sign::Pseudonormal) {
            Ok(hits) => {
                for (p, hit) in points.iter().zip(&hits) {
                    let (d, scale) = brute_force(&mesh, *p);
                    assert!(
                        within((hit.distance.abs() as f64 - d).abs(), tolerance(scale)),
                        "{p:?}: {} vs the brute force's {d}",
                        hit.distance
                    );
                    assert!(hit.distance < 0.0, "{p:?} is inside: {}", hit.distance);
                }
            }
            Err(e) => {
                assert!(engine.body_loop_budget() != 0, "{e}");
                assert!(e.to_string().contains("loop limiter"), "{e}");
            }
        }
    }
}
