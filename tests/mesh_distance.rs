//! Mesh-to-mesh distance (SPEC §9): every point's deviation against brute force in f64, the
//! figures against their definitions, bounds that need no twin, and `closest distance` end to
//! end with its bad input.

mod common;

use std::path::Path;
use std::process::Command;

use closest::auto_sign::SignChoice;
use closest::engine::{Direction, MeshDistance, surface_samples};
use closest::mesh::{Mesh, Sign, closest_feature};
use closest::sample::Sampler;
use closest::{DVec3, EngineOptions, tolerance};
use common::{Rng, npz_array, octahedron_sphere, open_engine};

fn mesh_of((vertices, triangles): (Vec<DVec3>, Vec<[u32; 3]>)) -> Mesh {
    Mesh {
        vertices: vertices.into(),
        triangles,
    }
}

/// A lumpy closed sphere: an octahedron sphere whose vertices are pushed in and out.
fn lumpy(centre: DVec3, radius: f64, seed: u64) -> Mesh {
    let (vertices, triangles) = octahedron_sphere(DVec3::ZERO, 1.0, 3);
    let mut rng = Rng::new(seed);
    let vertices = vertices
        .into_iter()
        .map(|v| centre + v * radius * rng.range(0.9, 1.1))
        .collect();
    mesh_of((vertices, triangles))
}

/// The f64 distance from `p` to `mesh`, by every triangle.
fn brute_distance(mesh: &Mesh, p: DVec3) -> f64 {
    (0..mesh.triangles.len())
        .map(|t| (closest_feature(p, mesh.corners(t)).0 - p).length())
        .fold(f64::INFINITY, f64::min)
}

/// Inside a closed, outward-wound mesh by the f64 winding number.
fn inside(mesh: &Mesh, p: DVec3) -> bool {
    closest::mesh::winding_number(mesh, p) > 0.5
}

/// The points a direction measures: the vertices, then the samples.
fn points_of(mesh: &Mesh, samples: usize, seed: u64) -> Vec<DVec3> {
    let sampler = Sampler::new(mesh, surface_samples(samples, seed).unwrap()).unwrap();
    let mut points: Vec<DVec3> = mesh.vertices.iter().collect();
    points.extend((0..samples).map(|k| DVec3::from_array(sampler.sample(k).point)));
    points
}

#[test]
fn deviations_and_figures_equal_brute_force_in_both_directions_signed_and_not() {
    // Small chunks: a direction spans several, and its vertices and samples share one.
    let engine = open_engine(EngineOptions {
        chunk_rows: Some(700),
        ..EngineOptions::default()
    });
    let far = DVec3::new(1.0e4, -2.0e4, 3.0e3);
    let (a, b) = (
        lumpy(far, 2.0, 1),
        lumpy(far + DVec3::new(0.4, 0.1, -0.2), 1.7, 2),
    );
    let (samples, seed) = (1500, 7);
    let gpu = [
        engine.upload_mesh(a.clone()).unwrap(),
        engine.upload_mesh(b.clone()).unwrap(),
    ];
    for sign in [Sign::None, Sign::Pseudonormal] {
        let mut got = [Vec::new(), Vec::new()];
        let job = MeshDistance {
            a: &gpu[0],
            b: &gpu[1],
            samples,
            seed,
            sign: SignChoice::Method(sign),
        };
        let summary = engine
            .mesh_distance(job, &mut |direction, first, values| {
                let side = &mut got[direction as usize];
                assert_eq!(first, side.len(), "chunks in order");
                side.extend_from_slice(values);
                Ok(())
            })
            .unwrap();
        for (direction, from, to) in [(Direction::AToB, &a, &b), (Direction::BToA, &b, &a)] {
            let points = points_of(from, samples, seed);
            let got = &got[direction as usize];
            assert_eq!(got.len(), points.len());
            let (mut max, mut sum, mut sum_squared) = (0.0f64, 0.0, 0.0);
            for (k, (&p, &d)) in points.iter().zip(got).enumerate() {
                let exact = brute_distance(to, p);
                let expected = if sign != Sign::None && inside(to, p) {
                    -exact
                } else {
                    exact
                };
                let tol = tolerance(far.max_abs() + 3.0);
                assert!(
                    (f64::from(d) - expected).abs() <= tol
                        || (exact <= tol && f64::from(d).abs() <= tol),
                    "{sign:?} {direction:?} point {k}: {d} vs {expected}"
                );
                max = max.max(exact);
                sum += exact;
                sum_squared += exact * exact;
            }
            let n = points.len() as f64;
            let figures = match direction {
                Direction::AToB => summary.a_to_b,
                Direction::BToA => summary.b_to_a,
            };
            assert_eq!(figures.points, points.len());
            assert_eq!(figures.sign, sign);
            let tol = tolerance(far.max_abs() + 3.0);
            assert!((figures.max - max).abs() <= tol, "{} vs {max}", figures.max);
            assert!((figures.mean - sum / n).abs() <= tol);
            assert!((figures.mean_squared - sum_squared / n).abs() <= 4.0 * tol * max);
            // The largest deviation is one of the points' own (the figure is realised).
            assert!(got.iter().any(|d| f64::from(d.abs()) == figures.max));
        }
        assert_eq!(
            summary.hausdorff(),
            summary.a_to_b.max.max(summary.b_to_a.max)
        );
        assert_eq!(summary.chamfer(), summary.a_to_b.mean + summary.b_to_a.mean);
        assert!(
            summary.hausdorff() > 0.2,
            "the meshes are apart: {}",
            summary.hausdorff()
        );
    }
}

#[test]
fn no_deviation_exceeds_the_distance_to_the_other_mesh_s_own_points() {
    // Needs no twin: every vertex and sample of B lies on B, so a point's distance to B is at
    // most its distance to the nearest of them; and identical meshes deviate by 0.
    let engine = common::engine();
    let mut rng = Rng::new(3);
    let a = lumpy(DVec3::ZERO, 1.0, 4);
    let b = lumpy(rng.vec(-0.2, 0.2), 1.2, 5);
    let on_b = points_of(&b, 3000, 1);
    let gpu = [a.clone(), b.clone(), a.clone()].map(|m| engine.upload_mesh(m).unwrap());
    let mut deviations = Vec::new();
    let job = MeshDistance {
        a: &gpu[0],
        b: &gpu[1],
        samples: 500,
        seed: 2,
        sign: SignChoice::Method(Sign::None),
    };
    engine
        .mesh_distance(job, &mut |direction, _, values| {
            if direction == Direction::AToB {
                deviations.extend_from_slice(values);
            }
            Ok(())
        })
        .unwrap();
    for (p, d) in points_of(&a, 500, 2).into_iter().zip(deviations) {
        let nearest = on_b
            .iter()
            .map(|q| (*q - p).length())
            .fold(f64::INFINITY, f64::min);
        assert!(
            f64::from(d) <= nearest + tolerance(2.0),
            "{p:?}: {d} > {nearest}"
        );
    }
    let same = MeshDistance {
        a: &gpu[0],
        b: &gpu[2],
        samples: 2000,
        seed: 9,
        sign: SignChoice::Method(Sign::None),
    };
    let summary = engine.mesh_distance(same, &mut |_, _, _| Ok(())).unwrap();
    assert!(
        summary.hausdorff() <= tolerance(1.2),
        "{}",
        summary.hausdorff()
    );
}

#[test]
fn meshes_built_beside_the_first_direction_answer_as_meshes_uploaded_first() {
    // `mesh_distance_uploading` builds A on another thread while A's points are answered
    // against B: the same deviations, figures and progress as the two uploads one after the
    // other, signed or not; and a failure on either side is the answer, nothing left running.
    let engine = open_engine(EngineOptions {
        chunk_rows: Some(700),
        ..EngineOptions::default()
    });
    let (a, b) = (
        lumpy(DVec3::new(5.0, 0.0, 0.0), 1.0, 8),
        lumpy(DVec3::new(5.1, 0.1, 0.0), 1.1, 9),
    );
    let (samples, seed) = (1200, 3);
    for sign in [SignChoice::Method(Sign::None), SignChoice::Auto] {
        let gpu = [a.clone(), b.clone()].map(|m| engine.upload_mesh(m).unwrap());
        let job = MeshDistance {
            a: &gpu[0],
            b: &gpu[1],
            samples,
            seed,
            sign,
        };
        let mut told_before = Vec::new();
        let (want, want_deviations) = engine
            .mesh_distance_vertices(job, &mut |done, total| told_before.push((done, total)))
            .unwrap();
        let mut told = Vec::new();
        let (got, got_deviations, [got_a, got_b]) = engine
            .mesh_distance_uploading(
                (a.clone(), b.clone()),
                (samples, seed, sign),
                &mut |done, total| told.push((done, total)),
            )
            .unwrap();
        assert_eq!(got, want, "{sign:?}");
        assert_eq!(got_deviations, want_deviations, "{sign:?}");
        assert_eq!(told, told_before, "{sign:?}");
        assert_eq!(
            told.last().map(|t| t.0),
            Some(got.a_to_b.points + got.b_to_a.points)
        );
        assert_eq!(got_a.mesh().triangles, a.triangles);
        assert_eq!(got_b.mesh().triangles, b.triangles);
    }
    let no_triangles = Mesh {
        vertices: vec![DVec3::ZERO; 3].into(),
        triangles: Vec::new(),
    };
    // B refused before a large A builds; A's points refused while it builds (an A of no area
    // has nothing to sample): its build is stopped, the refusal answers.
    let (vertices, triangles) = octahedron_sphere(DVec3::ZERO, 1.0, 7);
    let large = mesh_of((vertices.clone(), triangles.clone()));
    let asked = (10, 0, SignChoice::Method(Sign::None));
    let refused = engine
        .mesh_distance_uploading((large, no_triangles.clone()), asked, &mut |_, _| {})
        .err()
        .expect("B has no triangles");
    assert!(refused.to_string().contains("no triangles"), "{refused}");
    // Every vertex on the x axis: every triangle degenerate.
    let on_a_line = vertices.iter().map(|p| DVec3::new(p.x, 0.0, 0.0)).collect();
    let flat = mesh_of((on_a_line, triangles));
    let refused = engine
        .mesh_distance_uploading((flat, b.clone()), asked, &mut |_, _| {})
        .err()
        .expect("an A of no area");
    assert!(refused.to_string().contains("no area"), "{refused}");
    // A refused after B's direction: its own build's refusal.
    let refused = engine
        .mesh_distance_uploading((no_triangles, b.clone()), asked, &mut |_, _| {})
        .err()
        .expect("A has no triangles");
    assert!(refused.to_string().contains("no triangles"), "{refused}");
    // The engine answers as before.
    let again = engine
        .mesh_distance_uploading(
            (a, b),
            (samples, seed, SignChoice::Method(Sign::None)),
            &mut |_, _| {},
        )
        .unwrap();
    assert!(again.0.hausdorff() > 0.0);
}

fn closest_bin(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_closest"))
        .args(args)
        .output()
        .expect("the closest binary runs")
}

fn write_obj(path: &Path, mesh: &Mesh) {
    let mut text = String::new();
    for v in mesh.vertices.iter() {
        text += &format!("v {} {} {}\n", v.x, v.y, v.z);
    }
    for t in &mesh.triangles {
        text += &format!("f {} {} {}\n", t[0] + 1, t[1] + 1, t[2] + 1);
    }
    std::fs::write(path, text).unwrap();
}

#[test]
fn the_cli_writes_the_figures_the_vertex_deviations_and_a_turntable() {
    let dir = tempfile::tempdir().unwrap();
    let (a_path, b_path) = (dir.path().join("a.obj"), dir.path().join("b.obj"));
    let (a, b) = (
        lumpy(DVec3::ZERO, 1.0, 1),
        lumpy(DVec3::new(0.3, 0.0, 0.0), 1.0, 2),
    );
    write_obj(&a_path, &a);
    write_obj(&b_path, &b);
    let (out, png) = (dir.path().join("d.npz"), dir.path().join("d.png"));
    let s = |p: &Path| p.display().to_string();
    let run = closest_bin(&[
        "distance",
        &s(&a_path),
        &s(&b_path),
        "--out",
        &s(&out),
        "--preview",
        &s(&png),
        "--sign",
        "pseudonormal",
    ]);
    let message = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{message}");
    assert!(
        message.contains("Hausdorff") && message.contains("Chamfer"),
        "{message}"
    );
    let floats = |name: &str| -> Vec<f64> {
        let bytes = npz_array(&out, name);
        match bytes.len() / 8 {
            1 => vec![f64::from_le_bytes(bytes.try_into().unwrap())],
            _ => bytes
                .chunks_exact(4)
                .map(|b| f64::from(f32::from_le_bytes(b.try_into().unwrap())))
                .collect(),
        }
    };
    let (a_to_b, b_to_a) = (floats("a_to_b"), floats("b_to_a"));
    assert_eq!(
        (a_to_b.len(), b_to_a.len()),
        (a.vertices.len(), b.vertices.len())
    );
    // Without samples the figures are the vertices' own: exactly their largest |deviation|.
    let largest = |d: &[f64]| d.iter().fold(0.0f64, |m, x| m.max(x.abs()));
    assert_eq!(floats("hausdorff_a_to_b")[0], largest(&a_to_b));
    assert_eq!(floats("hausdorff_b_to_a")[0], largest(&b_to_a));
    assert_eq!(
        floats("hausdorff")[0],
        largest(&a_to_b).max(largest(&b_to_a))
    );
    assert!(
        a_to_b.iter().any(|d| *d < 0.0),
        "signed: some of A is inside B"
    );
    let mean = |d: &[f64]| d.iter().map(|x| x.abs()).sum::<f64>() / d.len() as f64;
    let chamfer = floats("chamfer")[0];
    assert!(
        (chamfer - (mean(&a_to_b) + mean(&b_to_a))).abs() < 1e-6,
        "{chamfer}"
    );
    let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(&png).unwrap()));
    let info = decoder.read_info().unwrap().info().clone();
    assert_eq!((info.width, info.height), (1080, 360));
}

#[test]
fn vertex_deviations_follow_the_files_vertices_and_unused_ones_are_left_out() {
    // A's file lists its vertices backwards (the faces use them out of order) and ends with a
    // vertex no face uses, far from B. Its deviations must be the plain file's, reversed, and
    // NaN for the unused vertex, which no figure counts (it is not on A's surface).
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (
        lumpy(DVec3::ZERO, 1.0, 3),
        lumpy(DVec3::new(0.2, 0.0, 0.0), 1.0, 4),
    );
    let s = |p: &Path| p.display().to_string();
    let (plain, odd, b_path) = (
        dir.path().join("a.obj"),
        dir.path().join("odd.obj"),
        dir.path().join("b.obj"),
    );
    write_obj(&plain, &a);
    write_obj(&b_path, &b);
    let last = a.vertices.len() as u32 - 1;
    let mut reversed: Vec<DVec3> = a.vertices.iter().collect();
    reversed.reverse();
    reversed.push(DVec3::new(50.0, 0.0, 0.0));
    let triangles = a.triangles.iter().map(|t| t.map(|v| last - v)).collect();
    write_obj(&odd, &mesh_of((reversed, triangles)));
    let deviations = |a_path: &Path, name: &str| {
        let out = dir.path().join(format!("{name}.npz"));
        let run = closest_bin(&["distance", &s(a_path), &s(&b_path), "--out", &s(&out)]);
        let message = String::from_utf8_lossy(&run.stderr).to_string();
        assert!(run.status.success(), "{message}");
        let a_to_b: Vec<f32> = npz_array(&out, "a_to_b")
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
            .collect();
        let hausdorff = f64::from_le_bytes(npz_array(&out, "hausdorff").try_into().unwrap());
        (a_to_b, hausdorff, message)
    };
    let (want, hausdorff, _) = deviations(&plain, "plain");
    let (got, odd_hausdorff, message) = deviations(&odd, "odd");
    assert_eq!(got.len(), want.len() + 1);
    assert!(got[want.len()].is_nan(), "{}", got[want.len()]);
    for (k, w) in want.iter().enumerate() {
        assert_eq!(got[want.len() - 1 - k], *w, "vertex {k}");
    }
    assert_eq!(
        odd_hausdorff, hausdorff,
        "the unused vertex (50 away) is left out"
    );
    assert!(hausdorff < 1.0, "{hausdorff}");
    assert!(message.contains("1 vertices on no triangle"), "{message}");
}

#[test]
fn bad_distance_input_exits_2_naming_the_file_or_flag_and_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let a_path = dir.path().join("a.obj");
    write_obj(&a_path, &lumpy(DVec3::ZERO, 1.0, 1));
    // A mesh of one degenerate triangle has no area to sample.
    let flat = dir.path().join("flat.obj");
    std::fs::write(&flat, "v 0 0 0\nv 1 0 0\nv 2 0 0\nf 1 2 3\n").unwrap();
    let s = |p: &Path| p.display().to_string();
    let (a, out) = (s(&a_path), s(&dir.path().join("d.npz")));
    let missing = s(&dir.path().join("missing.obj"));
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec![&a, &missing, "--out", &out], "missing.obj"),
        (vec![&a, &a], "--out"),
        (vec![&a, &a, "--out", "d.csv"], "d.csv"),
        (
            vec![
                &a,
                &flat.to_str().unwrap(),
                "--samples",
                "10",
                "--out",
                &out,
            ],
            "flat.obj",
        ),
        (
            vec![&a, &a, "--samples", "8589934592", "--out", &out],
            "--samples",
        ),
        (vec![&a, &a, "--out", "no/such/dir/d.npz"], "d.npz"),
        // Checked before the meshes are read, not after the job: a PNG by name, in a folder.
        (vec![&a, &missing, "--preview", "p.txt"], "end it in .png"),
        (
            vec![&a, &a, "--out", &out, "--preview", "no/such/dir/p.png"],
            "its folder does not exist",
        ),
    ];
    for (args, needle) in cases {
        let mut all = vec!["distance"];
        all.extend(args.iter().copied());
        let run = closest_bin(&all);
        let message = String::from_utf8_lossy(&run.stderr);
        assert_eq!(run.status.code(), Some(2), "{all:?}: {message}");
        assert!(
            message.contains(needle),
            "{all:?}: `{needle}` not in {message}"
        );
        assert!(!message.contains("panicked"), "{message}");
    }
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left.len(), 2, "only the two meshes: {left:?}");
}
