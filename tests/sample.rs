//! Training samples (SPEC §8, `closest sample`): the same seed gives the same samples, the
//! distributions are what they claim, the sdf is the f64 reference's, and the normal is the
//! reference's gradient by finite differences away from the medial axis.

mod common;

use std::path::Path;
use std::process::Command;

use closest::DVec3;
use closest::mesh::{Mesh, winding_number};
use closest::sample::{SampleKind, SampleSpec, Sampler};
use common::octahedron_sphere;

fn spec(seed: u64) -> SampleSpec {
    SampleSpec {
        surface: 400,
        near: 600,
        sigmas: vec![0.05, 0.005],
        uniform: 300,
        pad: 0.1,
        seed,
    }
}

fn ball() -> Mesh {
    let (v, t) = octahedron_sphere(DVec3::new(10.0, -3.0, 2.0), 1.0, 3);
    Mesh::new(v, t, "ball").unwrap()
}

/// The distance from `p` to the mesh by brute force over the f64 oracle's triangles (not the
/// production `mesh::closest_feature`, which the samples' f64 finish uses).
fn oracle_distance(mesh: &Mesh, p: DVec3) -> f64 {
    use closest::{Mode, Shape, reference};
    (0..mesh.triangles.len())
        .map(|t| {
            let [a, b, c] = mesh.corners(t);
            reference::query_shape(&Shape::Triangle { a, b, c }, t, p, Mode::Surface).distance
        })
        .fold(f64::INFINITY, f64::min)
}

/// The f64 reference: the signed distance by brute force, negative where the winding number
/// exceeds ½.
fn reference_sdf(mesh: &Mesh, p: DVec3) -> f64 {
    let d = oracle_distance(mesh, p);
    if winding_number(mesh, p) > 0.5 { -d } else { d }
}

#[test]
fn the_same_seed_gives_the_same_samples_in_any_order_and_another_seed_others() {
    let mesh = ball();
    let a = Sampler::new(&mesh, spec(3)).unwrap();
    let b = Sampler::new(&mesh, spec(3)).unwrap();
    let forward: Vec<_> = (0..a.len()).map(|r| a.sample(r)).collect();
    let backward: Vec<_> = (0..b.len()).rev().map(|r| b.sample(r)).collect();
    assert!(forward.iter().eq(backward.iter().rev()));
    let other = Sampler::new(&mesh, spec(4)).unwrap();
    let moved = (0..a.len())
        .filter(|&r| other.sample(r).point != forward[r].point)
        .count();
    assert_eq!(moved, a.len());
}

#[test]
fn samples_made_in_batches_are_the_rows_made_one_at_a_time() {
    // `Sampler::columns` and `Sampler::points_into` make rows in steps over batches of 32; the batches must not mix
    // rows' generators or triangles, wherever a range starts and whatever kinds it spans.
    let mesh = ball();
    let sampler = Sampler::new(&mesh, spec(5)).unwrap();
    let one_by_one: Vec<_> = (0..sampler.len()).map(|r| sampler.sample(r)).collect();
    for range in [
        0..sampler.len(),
        7..1000,
        390..410,
        395..400,
        400..405,
        995..1005,
        1299..1300,
        31..33,
    ] {
        let rows = &one_by_one[range.clone()];
        let columns = sampler.columns(range.clone());
        let points: Vec<[f64; 3]> = rows.iter().map(|s| s.point).collect();
        let kinds: Vec<SampleKind> = rows.iter().map(|s| s.kind).collect();
        let face_normals: Vec<[f64; 3]> = rows.iter().map_while(|s| s.face_normal).collect();
        assert_eq!(columns.points, points, "{range:?}");
        assert_eq!(columns.kinds, kinds, "{range:?}");
        assert_eq!(columns.face_normals, face_normals, "{range:?}");
        // Points alone (a distance job's), after rows already held.
        let mut held = vec![[f64::NAN; 3]; 3];
        sampler.points_into(range.clone(), &mut held);
        assert!(held[..3].iter().flatten().all(|x| x.is_nan()), "{range:?}");
        assert_eq!(held[3..], points[..], "{range:?}");
    }
    // A row alone, made in a batch of one: the kinds as laid out.
    assert!(
        one_by_one[..400]
            .iter()
            .all(|s| s.kind == SampleKind::Surface)
    );
    assert!(
        one_by_one[400..1000]
            .iter()
            .all(|s| s.kind == SampleKind::Near)
    );
    assert!(
        one_by_one[1000..]
            .iter()
            .all(|s| s.kind == SampleKind::Uniform)
    );
}

#[test]
fn samples_are_distributed_as_claimed() {
    let mesh = ball();
    let centre = DVec3::new(10.0, -3.0, 2.0);
    let big = SampleSpec {
        surface: 4000,
        near: 8000,
        sigmas: vec![0.05, 0.005],
        uniform: 4000,
        pad: 0.1,
        seed: 11,
    };
    let sampler = Sampler::new(&mesh, big).unwrap();
    let samples: Vec<_> = (0..sampler.len()).map(|r| sampler.sample(r)).collect();
    let (mut up, mut surface) = (0usize, 0usize);
    let mut near_sq = [0.0f64; 2];
    let mut uniform_mean = DVec3::ZERO;
    for (row, s) in samples.iter().enumerate() {
        let p = DVec3::from_array(s.point);
        match s.kind {
            SampleKind::Surface => {
                surface += 1;
                // On the surface: a triangle's plane within rounding, and its face normal.
                let d = reference_sdf(&mesh, p);
                assert!(d.abs() < 1e-9, "row {row}: {d}");
                let n = DVec3::from_array(s.face_normal.unwrap());
                assert!((n.length() - 1.0).abs() < 1e-12);
                assert!(n.dot(p - centre) > 0.9, "outward");
                up += usize::from(p.z > centre.z);
            }
            SampleKind::Near => {
                // The distance to the surface is about the deviate's normal component.
                let d = reference_sdf(&mesh, p);
                near_sq[usize::from(row >= 4000 + 4000)] += d * d;
            }
            SampleKind::Uniform => {
                let pad = 0.2;
                assert!((p - centre).max_abs() <= 1.0 + pad + 1e-12, "row {row}");
                uniform_mean += p * (1.0 / 4000.0);
            }
        }
    }
    assert_eq!(surface, 4000);
    // Area-weighted on a sphere: half above the equator, within 4 standard deviations.
    assert!((up as f64 - 2000.0).abs() < 4.0 * 2000f64.sqrt(), "{up}");
    // A normal deviate of sigma has a normal component of variance sigma² (the sphere's
    // curvature is small at these sigmas).
    for (group, sigma) in [(0, 0.05f64), (1, 0.005)] {
        let variance = near_sq[group] / 4000.0;
        let ratio = variance / (sigma * sigma);
        assert!((0.85..1.15).contains(&ratio), "sigma {sigma}: {ratio}");
    }
    assert!((uniform_mean - centre).max_abs() < 0.06, "{uniform_mean:?}");
}

#[test]
fn the_sample_job_writes_reference_distances_and_gradients() {
    let dir = tempfile::tempdir().unwrap();
    let mesh = ball();
    let obj: String = mesh
        .vertices
        .iter()
        .map(|v| format!("v {} {} {}\n", v.x, v.y, v.z))
        .chain(
            mesh.triangles
                .iter()
                .map(|t| format!("f {} {} {}\n", t[0] + 1, t[1] + 1, t[2] + 1)),
        )
        .collect();
    let path = dir.path().join("ball.obj");
    std::fs::write(&path, obj).unwrap();
    let out = dir.path().join("s.npz");
    let run = |out: &Path, seed: &str, extra: &[&str]| {
        let status = Command::new(env!("CARGO_BIN_EXE_closest"))
            .args([
                "sample",
                path.to_str().unwrap(),
                "--surface",
                "300",
                "--near",
                "400",
            ])
            .args([
                "--sigma",
                "0.05,0.005",
                "--uniform",
                "300",
                "--seed",
                seed,
                "--out",
            ])
            .arg(out)
            .args(extra)
            .output()
            .unwrap();
        assert!(
            status.status.success(),
            "{}",
            String::from_utf8_lossy(&status.stderr)
        );
        String::from_utf8_lossy(&status.stderr).into_owned()
    };
    let summary = run(&out, "5", &[]);
    assert!(summary.contains("1000 training samples"), "{summary}");
    let arrays = read_npz(&out);
    let points: Vec<f32> = f32s(&arrays["points"]);
    let sdf = f32s(&arrays["sdf"]);
    let normal = f32s(&arrays["normal"]);
    let kind = &arrays["kind"];
    assert_eq!(kind.len(), 1000);
    // The same seed again, through the portable kernels: the same points and kinds, the
    // distances equal within SPEC §3 (the device's rounding may differ).
    let again = dir.path().join("again.npz");
    run(&again, "5", &["--portable-kernels"]);
    let arrays2 = read_npz(&again);
    assert_eq!(arrays["points"], arrays2["points"]);
    assert_eq!(arrays["kind"], arrays2["kind"]);
    let tolerance = closest::tolerance(12.0);
    for (a, b) in sdf.iter().zip(f32s(&arrays2["sdf"])) {
        assert!((a - b).abs() as f64 <= tolerance);
    }
    let mut gradients_checked = 0;
    for row in 0..1000 {
        let p = DVec3::new(
            points[3 * row] as f64,
            points[3 * row + 1] as f64,
            points[3 * row + 2] as f64,
        );
        let n = DVec3::new(
            normal[3 * row] as f64,
            normal[3 * row + 1] as f64,
            normal[3 * row + 2] as f64,
        );
        assert_eq!(kind[row], u8::from(row >= 300) + u8::from(row >= 700));
        if kind[row] == 0 {
            assert_eq!(sdf[row], 0.0);
            continue;
        }
        let reference = reference_sdf(&mesh, p);
        assert!(
            (sdf[row] as f64 - reference).abs() <= tolerance,
            "row {row}: {} against {reference}",
            sdf[row]
        );
        // The gradient by central differences, where the distance is smooth (|∇| ≈ 1: away
        // from the medial axis, and off the surface by more than the step).
        let h = 1e-4;
        if reference.abs() < 10.0 * h {
            continue;
        }
        let axis = |k: usize| {
            let e = DVec3::new(0.0, 0.0, 0.0).with(k, h);
            (reference_sdf(&mesh, p + e) - reference_sdf(&mesh, p - e)) / (2.0 * h)
        };
        let gradient = DVec3::new(axis(0), axis(1), axis(2));
        if (gradient.length() - 1.0).abs() > 1e-3 {
            continue;
        }
        gradients_checked += 1;
        assert!(
            (gradient - n).length() < 2e-3,
            "row {row}: normal {n:?}, gradient {gradient:?}"
        );
    }
    assert!(gradients_checked > 500, "{gradients_checked}");
}

#[test]
fn bad_sample_arguments_exit_2_naming_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    let mesh = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data/meshes/fandisk.obj");
    let out = dir.path().join("s.npz");
    let cases: [(&[&str], &str); 8] = [
        (&["--near", "10", "--sigma", "0"], "--sigma"),
        // Samples that would leave f32's range.
        (&["--near", "10", "--sigma", "1e308"], "--sigma 1e308"),
        (&["--uniform", "10", "--pad", "1e300"], "--pad 1e300"),
        (&["--near", "10", "--sigma", "-1"], "--sigma"),
        (&["--near", "10", "--sigma", "x"], "--sigma"),
        (&["--near", "10"], "--near needs --sigma"),
        (&["--surface", "4294967296"], "2^32"),
        (&[], "ask for samples"),
    ];
    for (args, needle) in cases {
        let result = Command::new(env!("CARGO_BIN_EXE_closest"))
            .args(["sample", mesh.to_str().unwrap(), "--out"])
            .arg(&out)
            .args(args)
            .output()
            .unwrap();
        let message = String::from_utf8_lossy(&result.stderr);
        assert_eq!(result.status.code(), Some(2), "{args:?}: {message}");
        assert!(message.contains(needle), "{args:?}: {message}");
        assert!(!out.exists(), "{args:?} left an output");
    }
    // Uniform samples need a box with a volume: a flat mesh unpadded, or a mesh that is a
    // point, is refused naming the axis; surface samples of the flat one need no box.
    let flat = dir.path().join("flat.obj");
    std::fs::write(&flat, "v 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 3\n").unwrap();
    let point = dir.path().join("point.obj");
    std::fs::write(&point, "v 1 1 1\nv 1 1 1\nv 1 1 1\nf 1 2 3\n").unwrap();
    let run = |mesh: &Path, args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_closest"))
            .arg("sample")
            .arg(mesh)
            .arg("--out")
            .arg(&out)
            .args(args)
            .output()
            .unwrap()
    };
    for (mesh, args, needles) in [
        (
            &flat,
            &["--uniform", "10", "--pad", "0"][..],
            &["no extent along z", "give --pad > 0"][..],
        ),
        (
            &point,
            &["--uniform", "10"][..],
            &["no extent along x", "x = 1.0", "no --uniform samples"][..],
        ),
        // Nothing to sample on, the file named.
        (
            &point,
            &["--near", "10", "--sigma", "0.01"][..],
            &["point.obj: the mesh's triangles have no area"][..],
        ),
    ] {
        let result = run(mesh, args);
        let message = String::from_utf8_lossy(&result.stderr);
        assert_eq!(result.status.code(), Some(2), "{args:?}: {message}");
        for needle in needles {
            assert!(message.contains(needle), "{args:?}: {message}");
        }
        assert!(!out.exists(), "{args:?} left an output");
    }
    let result = run(&flat, &["--surface", "10", "--pad", "0"]);
    assert!(result.status.success(), "{result:?}");
}

fn read_npz(path: &Path) -> std::collections::HashMap<String, Vec<u8>> {
    let mut zip = zip::ZipArchive::new(std::fs::File::open(path).unwrap()).unwrap();
    let mut arrays = std::collections::HashMap::new();
    for i in 0..zip.len() {
        let mut entry = zip.by_index(i).unwrap();
        let name = entry.name().unwrap().trim_end_matches(".npy").to_string();
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut entry, &mut bytes).unwrap();
        let header = closest::io::npy::read_header(&mut &bytes[..]).unwrap();
        arrays.insert(name, bytes[header.data_offset as usize..].to_vec());
    }
    arrays
}

fn f32s(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
        .collect()
}

#[test]
fn the_deepsdf_layout_is_the_columns_split_by_sign() {
    let dir = tempfile::tempdir().unwrap();
    let mesh = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data/meshes/fandisk.obj");
    let run = |layout: &str, out: &Path| {
        let result = Command::new(env!("CARGO_BIN_EXE_closest"))
            .args([
                "sample",
                mesh.to_str().unwrap(),
                "--near",
                "2000",
                "--sigma",
                "0.05",
            ])
            .args([
                "--uniform",
                "500",
                "--seed",
                "2",
                "--layout",
                layout,
                "--out",
            ])
            .arg(out)
            .output()
            .unwrap();
        assert!(
            result.status.success(),
            "{}",
            String::from_utf8_lossy(&result.stderr)
        );
    };
    let (columns, deepsdf) = (dir.path().join("c.npz"), dir.path().join("d.npz"));
    run("columns", &columns);
    run("deepsdf", &deepsdf);
    let c = read_npz(&columns);
    let d = read_npz(&deepsdf);
    let (points, sdf) = (f32s(&c["points"]), f32s(&c["sdf"]));
    let (mut pos, mut neg) = (Vec::new(), Vec::new());
    for (p, &s) in points.chunks_exact(3).zip(&sdf) {
        let row = [p[0], p[1], p[2], s];
        if s < 0.0 {
            neg.extend(row)
        } else {
            pos.extend(row)
        }
    }
    assert!(!pos.is_empty() && !neg.is_empty());
    assert_eq!(f32s(&d["pos"]), pos);
    assert_eq!(f32s(&d["neg"]), neg);
    let csv = dir.path().join("d.csv");
    let result = Command::new(env!("CARGO_BIN_EXE_closest"))
        .args([
            "sample",
            mesh.to_str().unwrap(),
            "--uniform",
            "10",
            "--layout",
            "deepsdf",
        ])
        .arg("--out")
        .arg(&csv)
        .output()
        .unwrap();
    assert_eq!(result.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&result.stderr).contains("deepsdf writes an .npz"));
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().contains(".partial"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

/// An open mesh signed by winding number: where the holes' caps say the pseudonormal sign is
/// the winding number's, the job takes it and walks no winding number; elsewhere (samples
/// near the hole, or nearest to its rim) it walks one. Every sample's sign is judged by the
/// f64 winding number (which shares nothing with either), away from the surface and from ½,
/// and both ways of signing must have been taken often.
/// A ball about (10, −3, 2) with a round hole at the top, and its caps (closed when capped).
fn open_ball() -> (Mesh, closest::auto_sign::HoleCaps) {
    let centre = DVec3::new(10.0, -3.0, 2.0);
    let (v, t) = octahedron_sphere(centre, 1.0, 4);
    let t: Vec<[u32; 3]> = t
        .into_iter()
        .filter(|tri| {
            let z = tri.iter().map(|&k| v[k as usize].z).sum::<f64>() / 3.0;
            z - centre.z < 0.6
        })
        .collect();
    let mesh = Mesh::new(v, t, "open ball").unwrap();
    let caps = closest::auto_sign::HoleCaps::of(&mesh);
    (mesh, caps)
}

/// The same for a dense grid signed by winding number (`Engine::sdf`: a pseudonormal grid, its
/// doubtful samples walked again).
#[test]
fn an_open_mesh_grid_signed_by_winding_number_takes_pseudonormals_only_where_the_caps_allow() {
    let (mesh, caps) = open_ball();
    assert!(caps.capped_closed());
    let grid =
        closest::sdf::Grid::new(&mesh, [28, 28, 28], closest::sdf::GridRegion::Pad(0.1)).unwrap();
    let engine = common::engine();
    let gpu = engine.upload_mesh(mesh.clone()).unwrap();
    let mut sdf = vec![f32::NAN; grid.len()];
    let job = closest::engine::SdfGrid {
        mesh: &gpu,
        grid: &grid,
        sign: closest::mesh::Sign::Winding,
    };
    engine
        .sdf(job, &mut |first, values| {
            sdf[first..first + values.len()].copy_from_slice(values);
            Ok(())
        })
        .unwrap();
    let (judged, stood_in, walked) = judge_open_signs(
        &mesh,
        &caps,
        sdf.iter()
            .enumerate()
            .map(|(row, &d)| (DVec3::from_array(grid.point(row)), d)),
    );
    assert!(
        judged > 20_000 && stood_in > 10_000 && walked > 1_000,
        "{judged} judged, {stood_in} signed by pseudonormal, {walked} walked"
    );
}

#[test]
fn an_open_mesh_signed_by_winding_number_takes_pseudonormals_only_where_the_caps_allow() {
    let (mesh, caps) = open_ball();
    assert!(caps.capped_closed(), "a ball with one round hole, capped");
    let spec = SampleSpec {
        surface: 0,
        near: 6000,
        sigmas: vec![0.05, 0.005],
        uniform: 2000,
        pad: 0.1,
        seed: 3,
    };
    let sampler = Sampler::new(&mesh, spec).unwrap();
    let engine = common::engine();
    let gpu = engine.upload_mesh(mesh.clone()).unwrap();
    let mut sdf = Vec::new();
    let job = closest::engine::MeshSamples {
        mesh: &gpu,
        sampler: &sampler,
        sign: closest::mesh::Sign::Winding,
    };
    engine
        .mesh_samples(job, &mut |_, chunk| {
            sdf.extend_from_slice(&chunk.sdf);
            Ok(())
        })
        .unwrap();
    assert_eq!(sdf.len(), sampler.len());
    let (judged, stood_in, walked) = judge_open_signs(
        &mesh,
        &caps,
        sdf.iter()
            .enumerate()
            .map(|(row, &d)| (DVec3::from_array(sampler.sample(row).point), d)),
    );
    assert!(
        judged > 7000 && stood_in > 3000 && walked > 300,
        "{judged} judged, {stood_in} signed by pseudonormal, {walked} walked"
    );
}

/// Each answered point's sign against the f64 winding number (away from the surface and from
/// ½): how many were judged, and how many the caps let take the pseudonormal sign or not.
fn judge_open_signs(
    mesh: &Mesh,
    caps: &closest::auto_sign::HoleCaps,
    answers: impl Iterator<Item = (DVec3, f32)>,
) -> (usize, usize, usize) {
    let (mut judged, mut stood_in, mut walked) = (0, 0, 0);
    for (row, (p, d)) in answers.enumerate() {
        let distance = oracle_distance(mesh, p);
        let w = winding_number(mesh, p);
        if caps.pseudonormal_sign_holds(p, 0.0, distance, closest::tolerance(12.0)) {
            stood_in += 1;
        } else {
            walked += 1;
        }
        if distance < 1e-4 || (w - 0.5).abs() < 0.02 {
            continue;
        }
        judged += 1;
        assert_eq!(
            d < 0.0,
            w > 0.5,
            "row {row} at {p:?}: answer {d}, winding number {w}"
        );
    }
    (judged, stood_in, walked)
}

/// The walk's mark of a unique nearest triangle (`Fields::with_unique_nearest`, which lets the
/// sample job keep the device's triangle without settling it in f64) is never set where
/// another triangle comes within f32's rounding of the nearest distance, checked by brute
/// force in f64 with no twin of the walk, and it is set on most rows away from ties. Exact
/// ties (points out from vertices and from edges' midpoints, whose nearest point several
/// triangles share) are never marked. Both kernels, near and far from the origin, and on a
/// mesh with doubled and degenerate triangles.
#[test]
fn rows_marked_unique_have_no_near_tied_triangle() {
    use closest::engine::{MeshQuery, sample_fields};
    use closest::fields::UNIQUE_NEAREST_SHAPE_BIT;
    let mut rng = common::Rng::new(0x5eed);
    let far = DVec3::new(-4e3, 2e3, 1e3);
    for (centre, messy) in [
        (DVec3::new(3.0, -2.0, 1.0), false),
        (far, false),
        (far, true),
    ] {
        let (v, mut t) = octahedron_sphere(centre, 2.0, 4);
        if messy {
            // Every fifth triangle doubled (flipped), and degenerate ones on some edges:
            // exact ties at every distance.
            let doubled: Vec<[u32; 3]> = t.iter().step_by(5).map(|&[a, b, c]| [a, c, b]).collect();
            let degenerate: Vec<[u32; 3]> =
                t.iter().step_by(7).map(|&[a, b, _]| [a, b, b]).collect();
            t.extend(doubled);
            t.extend(degenerate);
        }
        let mesh = Mesh::new(v, t, "ball").unwrap();
        let extent = 2.0;
        let mut points: Vec<DVec3> = Vec::new();
        for _ in 0..3000 {
            let [a, b, c] = mesh.corners((rng.next_u64() % mesh.triangles.len() as u64) as usize);
            let (u, w) = (rng.range(0.0, 1.0), rng.range(0.0, 1.0));
            let (u, w) = if u + w > 1.0 {
                (1.0 - u, 1.0 - w)
            } else {
                (u, w)
            };
            let on = a + (b - a) * u + (c - a) * w;
            points.push(centre + (on - centre) * rng.range(0.9, 1.1));
        }
        let ties = mesh.vertices.len().min(400);
        for (k, vertex) in mesh.vertices.iter().take(ties).enumerate() {
            let [a, b, _] = mesh.corners(k % mesh.triangles.len());
            points.push(centre + (vertex - centre) * 1.05);
            points.push(centre + ((a + b) * 0.5 - centre) * 1.05);
        }
        let fields = sample_fields().with_unique_nearest();
        let distances: Vec<Vec<f64>> = points
            .iter()
            .map(|&p| {
                (0..mesh.triangles.len())
                    .map(|t| (p - closest::mesh::closest_feature(p, mesh.corners(t)).0).length())
                    .collect()
            })
            .collect();
        for engine in common::subgroup_and_portable_engines(1 << 12) {
            let gpu = engine.upload_mesh(mesh.clone()).unwrap();
            let asked: Vec<[f64; 3]> = points.iter().map(|p| p.to_array()).collect();
            let query = MeshQuery {
                mesh: &gpu,
                points: closest::Points::F64(&asked),
                sign: closest::mesh::Sign::None,
                fields,
            };
            let columns = closest::Columns::collect(fields, asked.len(), |sink| {
                engine.query_mesh(query, sink)
            })
            .unwrap();
            let shapes = columns.i32s("shape").unwrap();
            let mut unique_random = 0;
            for (row, &shape) in shapes.iter().enumerate() {
                let shape = shape as u32;
                if shape & UNIQUE_NEAREST_SHAPE_BIT == 0 {
                    continue;
                }
                let found = (shape & !UNIQUE_NEAREST_SHAPE_BIT) as usize;
                assert!(row < 3000, "{centre:?}: tie row {row} marked unique");
                unique_random += 1;
                let d = &distances[row];
                let rival = (0..d.len())
                    .filter(|&t| t != found)
                    .map(|t| d[t])
                    .fold(f64::INFINITY, f64::min);
                assert!(
                    rival > d[found] + 1e-6 * extent,
                    "{centre:?}: row {row} marked unique at triangle {found} ({}), another at {rival}",
                    d[found]
                );
            }
            // A doubled triangle ties every point near it.
            let wanted = if messy { 3000 * 4 / 10 } else { 3000 * 8 / 10 };
            assert!(
                unique_random > wanted,
                "{centre:?}: {unique_random} of 3000 rows away from ties marked unique"
            );
        }
    }
}
