//! The `closest` binary end to end: a real query job, its outputs, and every kind of bad
//! input (exit 2, a message naming file / index / field, and no output file).

mod common;

use common::TestJobs;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use closest::io::npy;
use closest::sdf::{Grid, GridRegion};
use closest::{DVec3, Mode, reference};

fn closest(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_closest"))
        .args(args)
        .output()
        .expect("the closest binary runs")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Run a job that must succeed and whose summary line must contain every `needle`.
fn closest_ok(args: &[&str], needles: &[&str]) {
    let out = closest(args);
    let msg = stderr(&out);
    assert!(out.status.success(), "{args:?}: {msg}");
    for needle in needles {
        assert!(msg.contains(needle), "{args:?}: `{needle}` not in: {msg}");
    }
}

fn write_npy(path: &Path, descr: &str, shape: &[usize], data: &[u8]) {
    let mut bytes = Vec::new();
    npy::write_header(&mut bytes, descr, shape).unwrap();
    bytes.extend_from_slice(data);
    std::fs::write(path, bytes).unwrap();
}

/// `points` as an (N, 3) float64 `.npy`.
fn write_points(path: &Path, points: &[[f64; 3]]) {
    write_npy(
        path,
        "<f8",
        &[points.len(), 3],
        bytemuck::cast_slice(points),
    );
}

/// Arrays of an .npz: name -> (shape, raw little-endian bytes).
fn read_npz(path: &Path) -> Vec<(String, Vec<usize>, Vec<u8>)> {
    let mut zip = zip::ZipArchive::new(std::fs::File::open(path).unwrap()).unwrap();
    let mut out = Vec::new();
    for i in 0..zip.len() {
        let mut entry = zip.by_index(i).unwrap();
        let name = entry.name().unwrap().trim_end_matches(".npy").to_string();
        let mut bytes = Vec::new();
        entry.read_to_end(&mut bytes).unwrap();
        let header = npy::read_header(&mut bytes.as_slice()).unwrap();
        out.push((
            name,
            header.shape,
            bytes[header.data_offset as usize..].to_vec(),
        ));
    }
    out
}

fn f32s(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
        .collect()
}

const SCENE: &str = r#"{"shapes": [
    {"type": "sphere", "center": [0, 0, 0], "radius": 1},
    {"type": "aabb", "min": [1, 2, -3], "max": [3, 6, 3]},
    {"type": "capsule", "a": [-5, 0, 0], "b": [-5, 4, 0], "radius": 0.5}
]}"#;

struct Dir(tempfile::TempDir);

impl Dir {
    fn new() -> Dir {
        Dir(tempfile::tempdir().unwrap())
    }
    fn file(&self, name: &str, text: &str) -> PathBuf {
        let p = self.0.path().join(name);
        std::fs::write(&p, text).unwrap();
        p
    }
    fn path(&self, name: &str) -> PathBuf {
        self.0.path().join(name)
    }
    fn s(&self, name: &str) -> String {
        self.path(name).display().to_string()
    }
}

#[test]
fn query_writes_npz_matching_the_reference() {
    let dir = Dir::new();
    let scene = dir.file("scene.json", SCENE);
    let points: Vec<[f64; 3]> = vec![
        [2.0, 3.4, 1.0],
        [0.0, 0.0, 3.0],
        [-5.0, 2.0, 0.2],
        [f64::NAN, 0.0, 0.0],
        [9.0, 9.0, 9.0],
    ];
    write_points(&dir.path("p.npy"), &points);
    closest_ok(
        &[
            "query",
            "--shapes",
            &scene.display().to_string(),
            "--points",
            &dir.s("p.npy"),
            "--mode",
            "surface",
            "--out",
            &dir.s("r.npz"),
        ],
        &["5 queries", "1 non-finite"],
    );

    let arrays = read_npz(&dir.path("r.npz"));
    let names: Vec<&str> = arrays.iter().map(|a| a.0.as_str()).collect();
    assert_eq!(names, ["point", "distance", "shape", "normal"]);
    assert_eq!(arrays[0].1, [5, 3]);
    assert_eq!(arrays[1].1, [5]);
    let q = f32s(&arrays[0].2);
    let d = f32s(&arrays[1].2);
    let shape: Vec<i32> = arrays[2]
        .2
        .chunks_exact(4)
        .map(|b| i32::from_le_bytes(b.try_into().unwrap()))
        .collect();
    let shapes = closest::io::parse_scene(SCENE, "scene").unwrap();
    for (i, p) in points.iter().enumerate() {
        let expected = reference::nearest(&shapes, DVec3::from_array(*p), Mode::Surface);
        if i == 3 {
            assert!(d[i].is_nan() && q[3 * i].is_nan() && shape[i] == -1);
            continue;
        }
        assert_eq!(shape[i] as i64, expected.shape, "row {i}");
        assert!(
            common::within(
                (d[i] as f64 - expected.distance).abs(),
                closest::tolerance(10.0)
            ),
            "row {i}: {} vs {}",
            d[i],
            expected.distance
        );
    }
    // The seed example: (2, 3.4, 1) is inside the aabb; in solid mode it is its own closest point.
    closest_ok(
        &[
            "query",
            "--shapes",
            &scene.display().to_string(),
            "--points",
            &dir.s("p.npy"),
            "--out",
            &dir.s("solid.csv"),
        ],
        &[],
    );
    let text = std::fs::read_to_string(dir.path("solid.csv")).unwrap();
    let row1: Vec<&str> = text.lines().nth(1).unwrap().split(',').collect();
    assert_eq!(row1[..5], ["2", "3.4", "1", "0", "1"], "{text}");
}

#[test]
fn csv_points_and_paired_mode() {
    let dir = Dir::new();
    let scene = dir.file("scene.json", SCENE);
    // Point i of `name` (holding `text`) against shape i: the answer as CSV text.
    let paired = |name: &str, text: &str| {
        let points = dir.file(name, text);
        let out = dir.s(&format!("{name}.out.csv"));
        closest_ok(
            &[
                "query",
                "--paired",
                "--shapes",
                &scene.display().to_string(),
                "--points",
                &points.display().to_string(),
                "--out",
                &out,
            ],
            &[],
        );
        std::fs::read_to_string(&out).unwrap()
    };
    let text = paired("p.csv", "x,y,z\n0,0,2\n# a comment\n\n2,10,0\n-5,5,0\n");
    let rows: Vec<Vec<f64>> = text
        .lines()
        .skip(1)
        .map(|l| l.split(',').map(|c| c.parse().unwrap()).collect())
        .collect();
    assert_eq!(rows.len(), 3);
    // Row i against shape i: sphere (d = 1), aabb (top face y = 6, d = 4), capsule cap (d = 0.5).
    for (row, (shape, d)) in rows.iter().zip([(0.0, 1.0), (1.0, 4.0), (2.0, 0.5)]) {
        assert_eq!(row[4], shape);
        assert!((row[3] - d).abs() < 1e-5, "{row:?}");
    }
    // As spreadsheets write them: a byte-order mark, quoted cells (quoted numbers were taken
    // for a header and skipped: 0 rows and exit 0), CRLF. The same three rows.
    for (name, points) in [
        (
            "quoted.csv",
            "\"x\",\"y\",\"z\"\r\n\"0\",\"0\",\"2\"\r\n\"2\",\"10\",\"0\"\r\n\"-5\",\"5\",\"0\"\r\n",
        ),
        (
            "numbers.csv",
            "\"0\",\"0\",\"2\"\n\"2\", \"10\" ,0\n-5,5,\"0\"\n",
        ),
        ("marked.csv", "\u{feff}0,0,2\n2,10,0\n-5,5,0\n"),
        // As numpy.savetxt writes them by default (spaces), and tab-separated.
        (
            "savetxt.csv",
            "# x y z\n0.000000000000000000e+00 0.000000000000000000e+00 2.000000000000000000e+00\n\
             2.000000000000000000e+00 1.000000000000000000e+01 0.000000000000000000e+00\n\
             -5.000000000000000000e+00 5.000000000000000000e+00 0.000000000000000000e+00\n",
        ),
        ("tabs.csv", "x\ty\tz\n0\t0\t2\n 2\t10 \t0\n-5\t5\t0\n"),
        ("savetxt.txt", "0 0 2\n2 10 0\n-5 5 0\n"),
        ("cloud.xyz", "0 0 2\n2 10 0\n-5 5 0\n"),
        // A point cloud's positions lead its rows: normals or colours after them are left.
        (
            "normals.xyz",
            "x y z nx ny nz\n0 0 2 0 0 1\n2 10 0 0 1 0\n-5 5 0 1 0 0\n",
        ),
        // A scan's point cloud: a PLY of vertices alone, with normals and colours.
        (
            "cloud.ply",
            "ply\nformat ascii 1.0\nelement vertex 3\nproperty float x\nproperty float y\n\
             property float z\nproperty float nx\nproperty float ny\nproperty float nz\n\
             property uchar red\nend_header\n0 0 2 0 0 1 255\n2 10 0 0 1 0 0\n-5 5 0 1 0 0 9\n",
        ),
        // Point clouds kept as a mesh format's vertices: an OBJ of `v` lines, an OFF of no
        // faces, a mesh whose faces are left.
        (
            "cloud.obj",
            "# scanned\nv 0 0 2\nv 2 10 0 1.0\nv -5 5 0 0.5 0.5 0.5\n",
        ),
        ("cloud.off", "OFF\n3 0 0\n0 0 2\n2 10 0\n-5 5 0\n"),
        ("faces.obj", "v 0 0 2\nv 2 10 0\nv -5 5 0\nf 1 2 3\n"),
        // PCL's text point cloud: positions after a colour, COUNT left out, comments.
        (
            "cloud.pcd",
            "# .PCD v0.7 - Point Cloud Data file format\nVERSION 0.7\nFIELDS rgb x y z\n\
             SIZE 4 4 4 4\nTYPE U F F F\nWIDTH 3\nHEIGHT 1\nVIEWPOINT 0 0 0 1 0 0 0\n\
             POINTS 3\nDATA ascii\n255 0 0 2\n0 2 10 0\n9 -5 5 0\n",
        ),
    ] {
        assert_eq!(paired(name, points), text, "{name}");
    }
}

/// Run a failing command: exit 2, every `needle` in the message, and no output file.
fn assert_bad_input(dir: &Dir, args: &[&str], needles: &[&str]) {
    let out_path = dir.path("out.npz");
    let mut all = args.to_vec();
    let out_s = out_path.display().to_string();
    if !args.contains(&"--out") {
        all.extend(["--out", &out_s]);
    }
    let out = closest(&all);
    let msg = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {msg}");
    for needle in needles {
        assert!(msg.contains(needle), "{args:?}: `{needle}` not in: {msg}");
    }
    assert!(
        !msg.contains("panicked") && !msg.contains("RUST_BACKTRACE"),
        "{msg}"
    );
    assert!(!out_path.exists(), "{args:?} left an output file");
    let leftovers: Vec<_> = std::fs::read_dir(dir.0.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().contains(".partial"))
        .collect();
    assert!(leftovers.is_empty(), "{args:?} left {leftovers:?}");
}

fn bad_scene(dir: &Dir, json: &str, needles: &[&str]) {
    let scene = dir.file("bad.json", json);
    let points = dir.file("p.csv", "0,0,0\n");
    let (scene, points) = (scene.display().to_string(), points.display().to_string());
    let mut all = vec!["bad.json"];
    all.extend_from_slice(needles);
    assert_bad_input(
        dir,
        &["query", "--shapes", &scene, "--points", &points],
        &all,
    );
}

#[test]
fn bad_scenes_name_the_shape_and_field() {
    let dir = Dir::new();
    // (scene, what the message must name)
    let cases: &[(&str, &[&str])] = &[
        (
            r#"{"shapes": [ {"type": "sphere", "center": [0,0,0], "radius": 1}, "#,
            &["malformed JSON"],
        ),
        (
            r#"{"shapes": [ {"type": "sphere", "center": [0,0,0], "radius": 1}, {"type": "teapot"} ]}"#,
            &["shape 1", "`type`", "teapot", "convex_hull"],
        ),
        (
            r#"{"shapes": [ {"type": "sphere", "center": [0,0,0]} ]}"#,
            &["shape 0", "`radius`", "missing"],
        ),
        // A key given twice: refused, where the last value was taken without a word.
        (
            r#"{"shapes": [ {"type": "sphere", "center": [0,0,0], "radius": 1, "radius": 2} ]}"#,
            &["malformed JSON", "`radius` given twice"],
        ),
        (
            r#"{"shapes": [ {"type": "sphere", "center": [0,1e999,0], "radius": 1} ]}"#,
            &["shape 0", "`center`", "finite"],
        ),
        (
            r#"{"shapes": [ {"type": "sphere", "center": [0,0], "radius": 1} ]}"#,
            &["shape 0", "`center`", "3 numbers"],
        ),
        (
            r#"{"shapes": [ {"type": "capsule", "a": [0,0,0], "b": [1,0,0], "radius": -1} ]}"#,
            &["shape 0", "`radius`", "≥ 0"],
        ),
        (
            r#"{"shapes": [ {"type": "box", "center": [0,0,0], "half_extents": [1,-1,1], "rotation": [0,0,0,1]} ]}"#,
            &["shape 0", "`half_extents`"],
        ),
        (
            r#"{"shapes": [ {"type": "aabb", "min": [0,0,5], "max": [1,1,1]} ]}"#,
            &["shape 0", "`min`", "min.z"],
        ),
        (
            r#"{"shapes": [ {"type": "plane", "normal": [0,0,0], "offset": 1} ]}"#,
            &["shape 0", "`normal`", "non-zero"],
        ),
        (
            r#"{"shapes": [ {"type": "sphere", "center": [0,0,0], "radius": 1}, {"type": "box", "center": [0,0,0], "half_extents": [1,1,1], "rotation": [0,0,0,0]} ]}"#,
            &["shape 1", "`rotation`", "non-zero"],
        ),
        (
            r#"{"shapes": [ {"type": "sphere", "center": [0,0,0], "radius": 1e200} ]}"#,
            &["shape 0", "`radius`", "f32 range"],
        ),
        (
            r#"{"shapes": [ {"type": "sphere", "center": [0,0,0], "radius": 1}, {"type": "capsule", "a": [1e30,0,0], "b": [1e30,2e18,0], "radius": 1} ]}"#,
            &["shape 1", "`b`", "spans 2.000e18", "1e18"],
        ),
        (r#"{"objects": []}"#, &["`shapes`"]),
        (
            r#"{"shapes": [ {"type": "torus", "center": [0,0,0], "axis": [0,0,1], "major_radius": 1, "minor_radius": 2} ]}"#,
            &["shape 0", "`minor_radius`", "major_radius"],
        ),
        (
            r#"{"shapes": [ {"type": "sphere", "center": [0,0,0], "radius": 1}, {"type": "torus", "center": [0,0,0], "axis": [0,0,0], "major_radius": 2, "minor_radius": 1} ]}"#,
            &["shape 1", "`axis`", "non-zero"],
        ),
        (
            r#"{"shapes": [ {"type": "ellipsoid", "center": [0,0,0], "radii": [1,0,1], "rotation": [0,0,0,1]} ]}"#,
            &["shape 0", "`radii`", "> 0"],
        ),
        (
            r#"{"shapes": [ {"type": "ellipsoid", "center": [0,0,0], "radii": [1,-2,1], "rotation": [0,0,0,1]} ]}"#,
            &["shape 0", "`radii`", "> 0"],
        ),
        (
            r#"{"shapes": [ {"type": "convex_hull", "points": []} ]}"#,
            &["shape 0", "`points`", "at least one"],
        ),
        (
            r#"{"shapes": [ {"type": "convex_hull", "points": [[0,0,0], [1,0,0], [0,1]]} ]}"#,
            &["shape 0", "`points[2]`", "3 numbers"],
        ),
        (
            r#"{"shapes": [ {"type": "cone", "a": [0,0,0], "b": [0,0,1], "radius": -0.5} ]}"#,
            &["shape 0", "`radius`", "≥ 0"],
        ),
        (
            r#"{"shapes": [ {"type": "sphere", "center": [0,0,0], "radius": 1}, {"type": "part", "shape": "Block", "size": [1,1,1], "cframe": [0,0,0, 1,0,0, 0,1,0, 0,0.5,1]} ]}"#,
            &["shape 1", "`cframe`", "orthonormal"],
        ),
        (
            r#"{"shapes": [ {"type": "part", "shape": "Block", "size": [1,1,1], "cframe": [0,0,0, -1,0,0, 0,1,0, 0,0,1]} ]}"#,
            &["shape 0", "`cframe`", "reflection"],
        ),
        (
            r#"{"shapes": [ {"type": "part", "shape": "Truss", "size": [1,1,1], "cframe": [0,0,0, 1,0,0, 0,1,0, 0,0,1]} ]}"#,
            &["shape 0", "`shape`", "Truss"],
        ),
        (
            r#"{"shapes": [ {"type": "part", "shape": "Ball", "size": [1,-1,1], "cframe": [0,0,0, 1,0,0, 0,1,0, 0,0,1]} ]}"#,
            &["shape 0", "`size`"],
        ),
    ];
    for (json, needles) in cases {
        bad_scene(&dir, json, needles);
    }
}

#[test]
fn bad_points_name_the_file_row_and_field() {
    let dir = Dir::new();
    let scene = dir.file("scene.json", SCENE).display().to_string();
    // A query of the scene with `--points` the file `name` in the test's folder.
    let bad_points = |name: &str, needles: &[&str]| {
        assert_bad_input(
            &dir,
            &["query", "--shapes", &scene, "--points", &dir.s(name)],
            needles,
        );
    };
    write_npy(&dir.path("two.npy"), "<f4", &[2, 2], &[0u8; 16]);
    bad_points("two.npy", &["two.npy", "(N, 3)"]);
    write_npy(&dir.path("int.npy"), "<i4", &[2, 3], &[0u8; 24]);
    bad_points("int.npy", &["int.npy", "<i4"]);
    write_npy(&dir.path("short.npy"), "<f8", &[4, 3], &[0u8; 24]);
    bad_points("short.npy", &["short.npy", "truncated"]);
    write_npy(
        &dir.path("huge.npy"),
        "<f8",
        &[1_000_000_000_000_000_000, 3],
        &[0u8; 24],
    );
    bad_points("huge.npy", &["huge.npy", "implausible"]);
    std::fs::write(dir.path("junk.npy"), b"hello").unwrap();
    bad_points("junk.npy", &["junk.npy", "not a .npy"]);
    // A binary STL saved as `.obj` read as points: no vertices, and what its bytes look like
    // (it was read as zero points).
    let mut stl = vec![0u8; 84 + 50];
    stl[80] = 1;
    std::fs::write(dir.path("binary.obj"), stl).unwrap();
    bad_points("binary.obj", &["binary.obj", "no vertices", "STL, not OBJ"]);
    // `.npz` archives: the array is named, and a broken one is refused by what broke.
    let row = [0u8; 24];
    write_npy(&dir.path("row.npy"), "<f8", &[1, 3], &row);
    let one_row = std::fs::read(dir.path("row.npy")).unwrap();
    write_npz(
        &dir.path("two.npz"),
        &[("a", &one_row), ("b", &one_row)],
        false,
    );
    write_npy(&dir.path("short.npy"), "<f8", &[4, 3], &row);
    let short = std::fs::read(dir.path("short.npy")).unwrap();
    write_npz(&dir.path("short.npz"), &[("arr_0", &short)], true);
    write_npz(&dir.path("garbled.npz"), &[("arr_0", &one_row)], true);
    let mut garbled = std::fs::read(dir.path("garbled.npz")).unwrap();
    // The deflate stream starts after the 30-byte local header and the name `arr_0.npy`:
    // all ones make a block of the reserved type.
    garbled[39..49].fill(0xff);
    std::fs::write(dir.path("garbled.npz"), garbled).unwrap();
    std::fs::write(dir.path("junk.npz"), b"hello").unwrap();
    // A bit flipped in a stored array's values: the archive's CRC-32 tells, as numpy's load.
    write_npz(&dir.path("flipped.npz"), &[("points", &one_row)], false);
    let mut flipped = std::fs::read(dir.path("flipped.npz")).unwrap();
    let values = 30 + "points.npy".len() + one_row.len() - 1;
    flipped[values] ^= 1;
    std::fs::write(dir.path("flipped.npz"), flipped).unwrap();
    // So too in a Fortran-ordered array, whose columns are read each through its own cursor
    // (checked below): a bit flipped in the middle column.
    let columns: Vec<u8> = (0..3 * 2500)
        .flat_map(|k| (k as f64).to_le_bytes())
        .collect();
    write_npy_ordered(&dir.path("fortran.npy"), "<f8", true, &[2500, 3], &columns);
    let fortran = std::fs::read(dir.path("fortran.npy")).unwrap();
    write_npz(
        &dir.path("fortran_flipped.npz"),
        &[("points", &fortran)],
        false,
    );
    let mut fortran_flipped = std::fs::read(dir.path("fortran_flipped.npz")).unwrap();
    let middle_column = 30 + "points.npy".len() + (fortran.len() - columns.len()) + 8 * 3750;
    fortran_flipped[middle_column] ^= 1;
    std::fs::write(dir.path("fortran_flipped.npz"), fortran_flipped).unwrap();
    for (file, needles) in [
        ("two.npz", &["two.npz", "a, b", "`points`"][..]),
        ("short.npz", &["short.npz (array `arr_0`)", "truncated"]),
        (
            "garbled.npz",
            &["garbled.npz (array `arr_0`)", "cannot inflate"],
        ),
        ("junk.npz", &["junk.npz", "not a .npz"]),
        ("flipped.npz", &["flipped.npz", "CRC-32", "damaged"]),
    ] {
        assert_bad_input(
            &dir,
            &["query", "--shapes", &scene, "--points", &dir.s(file)],
            needles,
        );
    }
    // Read over three chunks, and whole in one; the intact array reads.
    for chunk_rows in ["1000", "262144"] {
        let args = [
            "--chunk-rows",
            chunk_rows,
            "query",
            "--shapes",
            &scene,
            "--points",
        ];
        let file = dir.s("fortran_flipped.npz");
        let flipped_args = [&args[..], &[file.as_str()]].concat();
        assert_bad_input(
            &dir,
            &flipped_args,
            &["fortran_flipped.npz", "CRC-32", "damaged"],
        );
        write_npz(&dir.path("fortran.npz"), &[("points", &fortran)], false);
        let file = dir.s("fortran.npz");
        let out = dir.s("fortran_out.npz");
        let intact = closest(&[&args[..], &[file.as_str(), "--out", out.as_str()]].concat());
        assert!(intact.status.success(), "{}", stderr(&intact));
        std::fs::remove_file(dir.path("fortran_out.npz")).unwrap();
    }
    // A folder is named as one (its first read's error read as "too short" or cut off).
    for name in ["folder.npy", "folder.csv", "folder.obj"] {
        std::fs::create_dir(dir.path(name)).unwrap();
    }
    let mesh = dir.file("cube.obj", CUBE_OBJ).display().to_string();
    for args in [
        [
            "query",
            "--shapes",
            &scene,
            "--points",
            &dir.s("folder.npy"),
        ],
        [
            "query",
            "--shapes",
            &scene,
            "--points",
            &dir.s("folder.csv"),
        ],
        ["query", "--mesh", &dir.s("folder.obj"), "--points", &mesh],
    ] {
        assert_bad_input(&dir, &args, &["folder.", "it is a folder, not a file"]);
    }
    let csv = dir
        .file("bad.csv", "1,2,3\n4,five,6\n")
        .display()
        .to_string();
    assert_bad_input(
        &dir,
        &["query", "--shapes", &scene, "--points", &csv],
        &["bad.csv", "row 1", "line 2", "column 2 (y)", "five"],
    );
    let csv = dir.file("wide.csv", "1,2,3,4\n").display().to_string();
    assert_bad_input(
        &dir,
        &["query", "--shapes", &scene, "--points", &csv],
        &["wide.csv", "row 0", "line 1", "found 4"],
    );
    // A one-line file in another format is not a header to skip: it was 0 rows and exit 0.
    let csv = dir.file("semicolons.csv", "1;2;3\n").display().to_string();
    assert_bad_input(
        &dir,
        &["query", "--shapes", &scene, "--points", &csv],
        &["semicolons.csv", "row 0", "line 1", "found 1"],
    );
    bad_points("missing.npy", &["missing.npy"]);
    assert_bad_input(
        &dir,
        &[
            "query",
            "--shapes",
            &dir.s("missing.json"),
            "--points",
            &csv,
        ],
        &["missing.json"],
    );
    let ok = dir.file("ok.csv", "1,2,3\n").display().to_string();
    assert_bad_input(
        &dir,
        &["query", "--paired", "--shapes", &scene, "--points", &ok],
        &["--paired", "3 shapes", "1 points"],
    );
}

#[test]
fn unwritable_output_fails_before_any_work() {
    let dir = Dir::new();
    let scene = dir.file("scene.json", SCENE).display().to_string();
    let ok = dir.file("ok.csv", "1,2,3\n").display().to_string();
    let target = dir.path("no/such/dir/out.npz").display().to_string();
    assert_bad_input(
        &dir,
        &[
            "query", "--shapes", &scene, "--points", &ok, "--out", &target,
        ],
        &["out.npz", "its folder does not exist"],
    );
    assert_bad_input(
        &dir,
        &[
            "query",
            "--shapes",
            &scene,
            "--points",
            &ok,
            "--out",
            &dir.s("out.txt"),
        ],
        &["out.txt", ".npz or .csv"],
    );
    // Every job names a misnamed output before it reads its inputs (a large mesh's load
    // would come first otherwise): each input here is broken, and the output is named.
    let broken = dir.file("broken.obj", "v 1 2\n").display().to_string();
    let bad_out = dir.s("out.txt");
    let jobs: [(Vec<&str>, &str); 10] = [
        (
            vec!["query", "--shapes", &broken, "--points", &broken],
            ".npz or .csv",
        ),
        (
            vec!["query", "--mesh", &broken, "--points", &broken],
            ".npz or .csv",
        ),
        (
            vec!["segments", "--a", &broken, "--b", &broken],
            ".npz or .csv",
        ),
        (
            vec!["contacts", "--shapes", &broken, "--spheres", &broken],
            ".npz or .csv",
        ),
        (
            vec!["contacts", "--mesh", &broken, "--bodies", &broken],
            ".npz or .csv",
        ),
        (vec!["sample", &broken, "--surface", "10"], ".npz or .csv"),
        (
            vec!["sample", &broken, "--surface", "10", "--layout", "deepsdf"],
            "deepsdf writes an .npz",
        ),
        (vec!["sdf", &broken, "--res", "8"], ".npz, .zarr or .csv"),
        (
            vec!["sdf", &broken, "--res", "8", "--band", "1"],
            "band grid",
        ),
        (vec!["distance", &broken, &broken], "are an .npz"),
    ];
    for (mut args, problem) in jobs {
        args.extend(["--out", &bad_out]);
        assert_bad_input(&dir, &args, &["out.txt", problem]);
    }
}

/// Outputs are written through symbolic links (as numpy and zarr write), so the link stays and
/// the file it names is replaced; a target that is a folder, a device or a loop of links is
/// refused before any work, never replaced.
#[cfg(unix)]
#[test]
fn outputs_are_written_through_links_and_folders_or_devices_are_not_replaced() {
    use std::os::unix::fs::symlink;
    let dir = Dir::new();
    let scene = dir.file("scene.json", SCENE).display().to_string();
    let points = dir.file("p.csv", "1,2,3\n4,5,6\n").display().to_string();
    std::fs::create_dir(dir.path("real")).unwrap();
    let query = |out: &str| {
        closest(&[
            "query", "--shapes", &scene, "--points", &points, "--out", out,
        ])
    };
    symlink("real/table.npz", dir.path("table.npz")).unwrap();
    let written = query(&dir.s("table.npz"));
    assert_eq!(written.status.code(), Some(0), "{}", stderr(&written));
    assert!(dir.path("table.npz").is_symlink(), "the link was replaced");
    assert_eq!(read_npz(&dir.path("real/table.npz"))[1].1, vec![2]);
    let mesh = dir.file("cube.obj", CUBE_OBJ).display().to_string();
    symlink(dir.path("real/grid.zarr"), dir.path("grid.zarr")).unwrap();
    for _ in 0..2 {
        let grid = closest(&["sdf", &mesh, "--res", "4", "--out", &dir.s("grid.zarr")]);
        assert_eq!(grid.status.code(), Some(0), "{}", stderr(&grid));
        assert!(dir.path("grid.zarr").is_symlink());
        assert!(dir.path("real/grid.zarr/zarr.json").is_file());
    }
    std::fs::create_dir(dir.path("folder.npz")).unwrap();
    symlink("/dev/null", dir.path("device.npz")).unwrap();
    symlink("loop_b.npz", dir.path("loop_a.npz")).unwrap();
    symlink("loop_a.npz", dir.path("loop_b.npz")).unwrap();
    symlink("nowhere/x.npz", dir.path("dangling.npz")).unwrap();
    for (name, problem) in [
        ("folder.npz", "is a folder: not replaced"),
        ("device.npz", "is not a regular file"),
        ("loop_a.npz", "more than 40 symbolic links"),
        ("dangling.npz", "its folder does not exist"),
    ] {
        let out = query(&dir.s(name));
        let message = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{name}: {message}");
        assert!(
            message.contains(name) && message.contains(problem),
            "{message}"
        );
    }
    assert!(dir.path("folder.npz").is_dir());
    assert!(std::path::Path::new("/dev/null").exists());
}

#[test]
fn bad_usage_exits_2() {
    let out = closest(&["query", "--shapes"]);
    assert_eq!(out.status.code(), Some(2));
    let out = closest(&[
        "query", "--shapes", "a.json", "--points", "p.csv", "--out", "o.npz", "--mode", "hollow",
    ]);
    assert_eq!(out.status.code(), Some(2));
}

/// No adapter at all (Vulkan's and EGL's drivers hidden from the loaders): exit 3 with what
/// to install. A name that matches none of those present: exit 3 naming them, without the
/// install hint, which is no remedy there. Neither writes an output.
#[test]
fn no_adapter_exits_3_with_the_install_hint_and_a_name_matching_none_with_the_names() {
    let dir = Dir::new();
    let scene = dir.file("scene.json", SCENE).display().to_string();
    let ok = dir.file("ok.csv", "1,2,3\n").display().to_string();
    let hidden = dir.path("no-driver.json");
    let out_path = dir.s("o.npz");
    let run = |env: &[(&str, &std::ffi::OsStr)]| {
        Command::new(env!("CARGO_BIN_EXE_closest"))
            .args([
                "query", "--shapes", &scene, "--points", &ok, "--out", &out_path,
            ])
            .envs(env.iter().copied())
            .output()
            .unwrap()
    };
    let out = run(&[
        ("VK_ICD_FILENAMES", hidden.as_os_str()),
        ("__EGL_VENDOR_LIBRARY_FILENAMES", hidden.as_os_str()),
        ("CLOSEST_ADAPTER", "".as_ref()),
    ]);
    let msg = stderr(&out);
    assert_eq!(out.status.code(), Some(3), "{msg}");
    assert!(msg.contains("mesa-vulkan-drivers"), "{msg}");
    let out = run(&[("CLOSEST_ADAPTER", "no-such-adapter-anywhere".as_ref())]);
    let msg = stderr(&out);
    assert_eq!(out.status.code(), Some(3), "{msg}");
    assert!(
        msg.contains("no-such-adapter-anywhere") && msg.contains("available: llvmpipe"),
        "{msg}"
    );
    assert!(!msg.contains("mesa-vulkan-drivers"), "{msg}");
    assert!(!dir.path("o.npz").exists());
}

#[test]
fn info_lists_the_chosen_adapter_and_limits() {
    let out = closest(&["info"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        text.contains("chosen:") && text.contains("max_storage_buffer_binding_size"),
        "{text}"
    );
}

/// `closest info | head -1`: a reader that leaves early ends the job as it ends `cat` (by
/// SIGPIPE), never with a panic.
#[cfg(unix)]
#[test]
fn a_closed_stdout_ends_info_without_a_panic() {
    use std::os::unix::process::ExitStatusExt;
    use std::process::Stdio;
    let mut child = Command::new(env!("CARGO_BIN_EXE_closest"))
        .arg("info")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the closest binary runs");
    // Closed before the adapters are listed (opening the GPU instance takes far longer).
    drop(child.stdout.take());
    let out = child.wait_with_output().expect("it ends");
    let msg = stderr(&out);
    assert!(!msg.contains("panicked"), "{msg}");
    assert_eq!(
        out.status.signal(),
        Some(libc::SIGPIPE),
        "{:?}: {msg}",
        out.status
    );
}

/// Standard output or error on a full disk (`/dev/full`): `info`'s listing fails as an error
/// naming standard output (exit 2), and a job's summary on stderr never ends the job
/// (`println!` and `eprintln!` panicked, exit 101).
#[cfg(target_os = "linux")]
#[test]
fn a_full_stdout_or_stderr_is_no_panic() {
    use std::process::Stdio;
    let full = || {
        std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap()
    };
    let out = Command::new(env!("CARGO_BIN_EXE_closest"))
        .arg("info")
        .stdout(full())
        .output()
        .unwrap();
    let msg = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{msg}");
    assert!(msg.contains("cannot write standard output"), "{msg}");
    let dir = Dir::new();
    let grid = dir.path("grid.npz");
    let fandisk = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data/meshes/fandisk.obj");
    let out = Command::new(env!("CARGO_BIN_EXE_closest"))
        .arg("sdf")
        .arg(&fandisk)
        .args(["--res", "8", "--out"])
        .arg(&grid)
        .stdout(Stdio::null())
        .stderr(full())
        .output()
        .unwrap();
    assert!(out.status.success(), "{:?}", out.status);
    assert!(grid.exists());
}

/// A panic mid-job (a defect: the tests' `CLOSEST_TEST_FAULT` stands in for one) leaves no
/// partial output, also where a second panic while unwinding aborts the process before any
/// guard's drop runs (the partial `.npz` was left then).
#[test]
fn a_panic_mid_job_leaves_no_partial_output() {
    let dir = Dir::new();
    let points: Vec<[f64; 3]> = (0..300_000)
        .map(|k| {
            [
                (k % 97) as f64 * 0.01,
                (k % 89) as f64 * 0.01,
                (k % 83) as f64 * 0.01,
            ]
        })
        .collect();
    write_points(&dir.path("p.npy"), &points);
    let fandisk = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data/meshes/fandisk.obj");
    for fault in ["panic-mid-job", "double-panic-mid-job"] {
        let out = Command::new(env!("CARGO_BIN_EXE_closest"))
            .env("CLOSEST_TEST_FAULT", fault)
            .args(["--chunk-rows", "65536", "query", "--mesh"])
            .arg(&fandisk)
            .arg("--points")
            .arg(dir.path("p.npy"))
            .arg("--out")
            .arg(dir.path("o.npz"))
            .output()
            .unwrap();
        let msg = stderr(&out);
        assert!(
            !out.status.success() && msg.contains("a panic mid-job"),
            "{fault}: {msg}"
        );
        let left: Vec<_> = std::fs::read_dir(dir.0.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .filter(|name| name != "p.npy")
            .collect();
        assert!(left.is_empty(), "{fault}: left {left:?}");
    }
}

#[test]
fn segments_job_writes_every_array() {
    let dir = Dir::new();
    // Pair 0 crosses at right angles 2 apart; pair 1 has a NaN.
    let a: [[f64; 3]; 4] = [
        [-1.0, 0.0, 0.0],
        [1.0, 0.0, 0.0],
        [f64::NAN, 0.0, 0.0],
        [1.0, 0.0, 0.0],
    ];
    let b: [[f64; 3]; 4] = [
        [0.0, -1.0, 2.0],
        [0.0, 1.0, 2.0],
        [0.0, 0.0, 0.0],
        [0.0, 1.0, 0.0],
    ];
    write_npy(
        &dir.path("a.npy"),
        "<f8",
        &[2, 2, 3],
        bytemuck::cast_slice(&a),
    );
    write_npy(
        &dir.path("b.npy"),
        "<f8",
        &[2, 2, 3],
        bytemuck::cast_slice(&b),
    );
    closest_ok(
        &[
            "segments",
            "--a",
            &dir.s("a.npy"),
            "--b",
            &dir.s("b.npy"),
            "--out",
            &dir.s("s.npz"),
        ],
        &["2 segment pairs", "1 non-finite"],
    );
    let arrays = read_npz(&dir.path("s.npz"));
    let names: Vec<&str> = arrays.iter().map(|a| a.0.as_str()).collect();
    assert_eq!(names, ["point_a", "point_b", "s", "t", "distance"]);
    assert_eq!(arrays[0].1, [2, 3]);
    assert_eq!(f32s(&arrays[0].2)[..3], [0.0, 0.0, 0.0]);
    assert_eq!(f32s(&arrays[1].2)[..3], [0.0, 0.0, 2.0]);
    assert_eq!(
        (
            f32s(&arrays[2].2)[0],
            f32s(&arrays[3].2)[0],
            f32s(&arrays[4].2)[0]
        ),
        (0.5, 0.5, 2.0)
    );
    assert!(f32s(&arrays[4].2)[1].is_nan());
    // CSV in, CSV out.
    let a = dir.file("a.csv", "0,0,0,4,0,0\n");
    let b = dir.file("b.csv", "2,1,0,6,1,0\n");
    closest_ok(
        &[
            "segments",
            "--a",
            &a.display().to_string(),
            "--b",
            &b.display().to_string(),
            "--out",
            &dir.s("s.csv"),
        ],
        &[],
    );
    let text = std::fs::read_to_string(dir.path("s.csv")).unwrap();
    assert!(
        text.starts_with(
            "point_a_x,point_a_y,point_a_z,point_b_x,point_b_y,point_b_z,s,t,distance\n"
        ),
        "{text}"
    );
    assert!(text.lines().nth(1).unwrap().ends_with(",1"), "{text}");
}

#[test]
fn contacts_job_writes_every_array() {
    let dir = Dir::new();
    let scene = dir.file("scene.json", SCENE).display().to_string();
    // A ball overlapping the unit sphere at the origin, and one clear of everything.
    let spheres: [[f32; 4]; 2] = [[1.25, 0.0, 0.0, 0.5], [0.0, -20.0, 0.0, 1.0]];
    write_npy(
        &dir.path("s.npy"),
        "<f4",
        &[2, 4],
        bytemuck::cast_slice(&spheres),
    );
    closest_ok(
        &[
            "contacts",
            "--shapes",
            &scene,
            "--spheres",
            &dir.s("s.npy"),
            "--out",
            &dir.s("c.npz"),
        ],
        &[],
    );
    let arrays = read_npz(&dir.path("c.npz"));
    let names: Vec<&str> = arrays.iter().map(|a| a.0.as_str()).collect();
    assert_eq!(names, ["point", "depth", "normal", "shape"]);
    let depth = f32s(&arrays[1].2);
    assert!(
        (depth[0] - 0.25).abs() < 1e-6 && depth[1] < 0.0,
        "{depth:?}"
    );
    assert_eq!(f32s(&arrays[2].2)[..3], [1.0, 0.0, 0.0]);
}

#[test]
fn body_contacts_against_a_scene_a_mesh_and_paired() {
    let dir = Dir::new();
    let scene = dir.file("scene.json", SCENE).display().to_string();
    // A box whose bottom face is 0.5 above the unit sphere; a capsule sunk 0.25 into the aabb's
    // top (y = 6).
    let bodies = dir
        .file(
            "bodies.json",
            r#"{"shapes": [
                {"type": "box", "center": [0, 2, 0], "half_extents": [0.5, 0.5, 0.5], "rotation": [0, 0, 0, 1]},
                {"type": "capsule", "a": [1.5, 6.25, 0], "b": [2.5, 6.25, 0], "radius": 0.5},
                {"type": "sphere", "center": [0, 0, 40], "radius": 1}
            ]}"#,
        )
        .display()
        .to_string();
    closest_ok(
        &[
            "contacts",
            "--shapes",
            &scene,
            "--bodies",
            &bodies,
            "--out",
            &dir.s("b.npz"),
        ],
        &["3 body contacts"],
    );
    let arrays = read_npz(&dir.path("b.npz"));
    let names: Vec<&str> = arrays.iter().map(|a| a.0.as_str()).collect();
    assert_eq!(
        names,
        ["distance", "point_body", "point_target", "normal", "shape"]
    );
    let distance = f32s(&arrays[0].2);
    let shape: Vec<i32> = bytemuck::pod_collect_to_vec(&arrays[4].2);
    assert!(
        (distance[0] - 0.5).abs() < 1e-6 && shape[0] == 0,
        "{distance:?} {shape:?}"
    );
    assert!(
        (distance[1] + 0.25).abs() < 1e-5 && shape[1] == 1,
        "{distance:?} {shape:?}"
    );
    assert_eq!(f32s(&arrays[3].2)[3..6], [0.0, 1.0, 0.0]);
    // Paired: body i against shape i only.
    closest_ok(
        &[
            "contacts",
            "--shapes",
            &scene,
            "--bodies",
            &bodies,
            "--paired",
            "--fields",
            "distance,shape",
            "--out",
            &dir.s("p.npz"),
        ],
        &[],
    );
    let paired = read_npz(&dir.path("p.npz"));
    let names: Vec<&str> = paired.iter().map(|a| a.0.as_str()).collect();
    assert_eq!(names, ["distance", "shape"]);
    let shape: Vec<i32> = bytemuck::pod_collect_to_vec(&paired[1].2);
    assert_eq!(shape, [0, 1, 2]);
    // A mesh: the nearest triangle of the bunny to a sphere beside it, as the point query says.
    let bunny = "../shared/data/meshes/stanford-bunny.obj";
    let ball = dir
        .file(
            "ball.json",
            r#"{"shapes": [{"type": "sphere", "center": [0.3, 0.1, 0.0], "radius": 0.01}]}"#,
        )
        .display()
        .to_string();
    closest_ok(
        &[
            "contacts",
            "--mesh",
            bunny,
            "--bodies",
            &ball,
            "--out",
            &dir.s("m.npz"),
        ],
        &["1 body contacts"],
    );
    let mesh = closest::io::load_mesh(Path::new(bunny)).unwrap();
    let expected = (0..mesh.triangles.len())
        .map(|t| {
            let [a, b, c] = mesh.corners(t);
            let triangle = closest::Shape::Triangle { a, b, c };
            reference::query_shape(&triangle, t, DVec3::new(0.3, 0.1, 0.0), Mode::Surface).distance
        })
        .fold(f64::MAX, f64::min);
    let got = f32s(&read_npz(&dir.path("m.npz"))[0].2)[0] as f64;
    assert!(
        (got - (expected - 0.01)).abs() < 1e-5,
        "{got} vs {expected}"
    );
}

#[test]
fn bad_bodies_exit_2_naming_the_file_shape_and_field() {
    let dir = Dir::new();
    let scene = dir.file("scene.json", SCENE).display().to_string();
    let planes = dir
        .file(
            "planes.json",
            r#"{"shapes": [
                {"type": "sphere", "center": [0, 0, 0], "radius": 1},
                {"type": "plane", "normal": [0, 0, 1], "offset": 0}
            ]}"#,
        )
        .display()
        .to_string();
    assert_bad_input(
        &dir,
        &["contacts", "--shapes", &scene, "--bodies", &planes],
        &["planes.json", "shape 1", "`type`", "plane"],
    );
    let boxes = dir
        .file(
            "boxes.json",
            r#"{"shapes": [{"type": "aabb", "min": [0, 0, 0], "max": [1, 1, 1]}]}"#,
        )
        .display()
        .to_string();
    let ring = dir
        .file(
            "ring.json",
            r#"{"shapes": [{"type": "sphere", "center": [0, 0, 0], "radius": 1},
                {"type": "torus", "center": [0, 0, 0], "axis": [0, 0, 1], "major_radius": 2, "minor_radius": 0.5}]}"#,
        )
        .display()
        .to_string();
    assert_bad_input(
        &dir,
        &["contacts", "--shapes", &ring, "--bodies", &boxes],
        &["ring.json", "shape 1", "torus", "body 0"],
    );
    assert_bad_input(
        &dir,
        &[
            "contacts", "--shapes", &scene, "--bodies", &boxes, "--paired",
        ],
        &["scene.json", "3 shapes for 1 bodies"],
    );
    let missing = dir
        .file(
            "missing.json",
            r#"{"shapes": [{"type": "box", "center": [0, 0, 0]}]}"#,
        )
        .display()
        .to_string();
    assert_bad_input(
        &dir,
        &["contacts", "--shapes", &scene, "--bodies", &missing],
        &["missing.json", "shape 0", "half_extents"],
    );
    assert_bad_input(
        &dir,
        &[
            "contacts", "--shapes", &scene, "--bodies", &boxes, "--fields", "depth",
        ],
        &["depth", "distance, point_body"],
    );
    // Beyond the body jobs' scale (1e9): the file, list and index of the shape, no output.
    let far = r#"{"shapes": [{"type": "aabb", "min": [0, 0, 0], "max": [1, 1, 1]},
        {"type": "sphere", "center": [0, 2e10, 0], "radius": 1}]}"#;
    let far_bodies = dir.file("far_bodies.json", far).display().to_string();
    assert_bad_input(
        &dir,
        &["contacts", "--shapes", &scene, "--bodies", &far_bodies],
        &["far_bodies.json", "bodies: shape 1", "1e9"],
    );
    let far_scene = dir.file("far_scene.json", far).display().to_string();
    assert_bad_input(
        &dir,
        &["contacts", "--shapes", &far_scene, "--bodies", &boxes],
        &["far_scene.json", "shapes: shape 1", "1e9"],
    );
    let far_mesh = dir
        .file(
            "far.obj",
            "v 0 0 0\nv 1 0 0\nv 0 1 0\nv 3e10 0 0\nf 1 2 3\nf 1 2 4\n",
        )
        .display()
        .to_string();
    assert_bad_input(
        &dir,
        &["contacts", "--mesh", &far_mesh, "--bodies", &boxes],
        &["far.obj", "mesh triangles: shape 1", "1e9"],
    );
}

#[test]
fn bad_segment_and_sphere_inputs_exit_2() {
    let dir = Dir::new();
    let scene = dir.file("scene.json", SCENE).display().to_string();
    let spheres = dir
        .file("s.csv", "0,0,0,1\n1,2,3,-0.5\n")
        .display()
        .to_string();
    assert_bad_input(
        &dir,
        &["contacts", "--shapes", &scene, "--spheres", &spheres],
        &["s.csv", "row 1", "radius"],
    );
    write_npy(&dir.path("s3.npy"), "<f4", &[2, 3], &[0u8; 24]);
    assert_bad_input(
        &dir,
        &[
            "contacts",
            "--shapes",
            &scene,
            "--spheres",
            &dir.s("s3.npy"),
        ],
        &["s3.npy", "(N, 4)"],
    );
    let a = dir
        .file("a.csv", "0,0,0,1,0,0\n0,0,0,1,0,0\n")
        .display()
        .to_string();
    let b = dir.file("b.csv", "0,0,0,1,0,0\n").display().to_string();
    assert_bad_input(
        &dir,
        &["segments", "--a", &a, "--b", &b],
        &["2 segments", "has 1"],
    );
    write_npy(&dir.path("flat.npy"), "<f8", &[2, 6], &[0u8; 96]);
    assert_bad_input(
        &dir,
        &["segments", "--a", &dir.s("flat.npy"), "--b", &b],
        &["flat.npy", "(N, 2, 3)"],
    );
}

#[test]
fn streamed_job_writes_what_the_library_answers_in_memory() {
    // 10,007 points through 11 chunks of 1,000 rows (the last one partial) against a scene big
    // enough for a BVH (so chunks are also reordered): the file must hold, bit for bit, the
    // hits of one in-memory call.
    let dir = Dir::new();
    let mut rng = common::Rng::new(21);
    let mut shapes = Vec::new();
    for i in 0..300 {
        let c = rng.vec(-20.0, 20.0);
        shapes.push(match i % 3 {
            0 => format!(
                r#"{{"type": "sphere", "center": [{}, {}, {}], "radius": 0.5}}"#,
                c.x, c.y, c.z
            ),
            1 => format!(
                r#"{{"type": "capsule", "a": [{}, {}, {}], "b": [{}, {}, {}], "radius": 0.3}}"#,
                c.x,
                c.y,
                c.z,
                c.x + 1.0,
                c.y,
                c.z
            ),
            _ => format!(
                r#"{{"type": "aabb", "min": [{}, {}, {}], "max": [{}, {}, {}]}}"#,
                c.x,
                c.y,
                c.z,
                c.x + 0.7,
                c.y + 0.2,
                c.z + 0.4
            ),
        });
    }
    shapes.push(r#"{"type": "plane", "normal": [0, 0, 1], "offset": -22}"#.into());
    let scene_text = format!(r#"{{"shapes": [{}]}}"#, shapes.join(",\n"));
    let scene = dir.file("scene.json", &scene_text);
    let mut points: Vec<[f32; 3]> = (0..10_007).map(|_| rng.vec(-25.0, 25.0).to_f32()).collect();
    points[4321] = [f32::NAN, 1.0, 2.0];
    write_npy(
        &dir.path("p.npy"),
        "<f4",
        &[points.len(), 3],
        bytemuck::cast_slice(&points),
    );
    closest_ok(
        &[
            "query",
            "--chunk-rows",
            "1000",
            "--shapes",
            &scene.display().to_string(),
            "--points",
            &dir.s("p.npy"),
            "--out",
            &dir.s("streamed.npz"),
        ],
        &["10007 queries", "1 non-finite"],
    );

    let parsed = closest::io::parse_scene(&scene_text, "scene.json").unwrap();
    let engine = common::engine();
    let uploaded = engine.upload_scene(&parsed).unwrap();
    let hits = engine.scene_hits(&uploaded, &points, Mode::Solid).unwrap();
    assert_file_holds_hits(&dir.path("streamed.npz"), &hits, "streamed");
}

/// The `.npz` at `path` holds `hits`' four arrays bit for bit.
fn assert_file_holds_hits(path: &Path, hits: &[closest::GpuHit], what: &str) {
    let arrays = read_npz(path);
    let column = |name: &str| &arrays.iter().find(|a| a.0 == name).unwrap().2;
    let expect =
        |f: &dyn Fn(&closest::GpuHit) -> Vec<u8>| -> Vec<u8> { hits.iter().flat_map(f).collect() };
    let bytes = |v: &[f32]| -> Vec<u8> { bytemuck::cast_slice(v).to_vec() };
    assert!(*column("point") == expect(&|h| bytes(&h.point)), "{what}");
    assert!(
        *column("distance") == expect(&|h| bytes(&[h.distance])),
        "{what}"
    );
    assert!(
        *column("shape") == expect(&|h| h.shape.to_le_bytes().to_vec()),
        "{what}"
    );
    assert!(*column("normal") == expect(&|h| bytes(&h.normal)), "{what}");
}

#[test]
fn mesh_jobs_write_what_the_library_answers_for_every_sign() {
    // Query and grid jobs build the sign data with the mesh and answer with the host's copy
    // of the mesh released (fandisk: one part, signed on the device): the files must hold,
    // bit for bit, what an engine keeping its mesh answers.
    let dir = Dir::new();
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data/meshes/fandisk.obj");
    let mesh = closest::io::load_mesh(&path).unwrap();
    let (lo, hi) = mesh.bounds();
    let mut rng = common::Rng::new(5);
    let points: Vec<[f64; 3]> = (0..3000)
        .map(|_| {
            let t = rng.vec(-0.2, 1.2);
            let at = |l: f64, h: f64, t: f64| l + (h - l) * t;
            [
                at(lo.x, hi.x, t.x),
                at(lo.y, hi.y, t.y),
                at(lo.z, hi.z, t.z),
            ]
        })
        .collect();
    write_points(&dir.path("p.npy"), &points);
    let engine = common::engine();
    let uploaded = engine.upload_mesh(mesh).unwrap();
    for (name, sign) in [
        ("none", closest::mesh::Sign::None),
        ("pseudonormal", closest::mesh::Sign::Pseudonormal),
        ("winding", closest::mesh::Sign::Winding),
    ] {
        closest_ok(
            &[
                "query",
                "--mesh",
                &path.display().to_string(),
                "--sign",
                name,
                "--points",
                &dir.s("p.npy"),
                "--out",
                &dir.s("m.npz"),
            ],
            &["3000 queries"],
        );
        let hits = engine.mesh_hits(&uploaded, &points, sign).unwrap();
        assert_file_holds_hits(&dir.path("m.npz"), &hits, name);
        if sign != closest::mesh::Sign::None {
            assert!(
                hits.iter().any(|h| h.distance < 0.0),
                "{name}: some rows inside"
            );
        }
        // A grid job likewise (its samples made on the device).
        closest_ok(
            &[
                "sdf",
                &path.display().to_string(),
                "--res",
                "12,13,14",
                "--pad",
                "0.1",
                "--sign",
                name,
                "--out",
                &dir.s("g.npz"),
            ],
            &["2184 grid samples"],
        );
        let grid = Grid::new(uploaded.mesh(), [12, 13, 14], GridRegion::Pad(0.1)).unwrap();
        let sdf = engine.sdf_values(&uploaded, &grid, sign).unwrap();
        let arrays = read_npz(&dir.path("g.npz"));
        let column = &arrays.iter().find(|a| a.0 == "sdf").unwrap().2;
        assert!(
            *column == bytemuck::cast_slice::<f32, u8>(&sdf),
            "{name}: grid"
        );
    }
}

#[test]
fn mesh_query_writes_signed_distances_to_triangles() {
    // A tetrahedron wound outwards; one point inside, one outside, one NaN row.
    let dir = Dir::new();
    let mesh = dir.file(
        "tet.obj",
        "v 0 0 0\nv 1 0 0\nv 0 1 0\nv 0 0 1\nf 1 3 2\nf 1 2 4\nf 1 4 3\nf 2 3 4\n",
    );
    let points: Vec<[f64; 3]> = vec![[0.1, 0.1, 0.1], [-1.0, 0.2, 0.2], [f64::NAN, 0.0, 0.0]];
    write_points(&dir.path("p.npy"), &points);
    let mesh_s = mesh.display().to_string();
    closest_ok(
        &[
            "query",
            "--mesh",
            &mesh_s,
            "--sign",
            "pseudonormal",
            "--points",
            &dir.s("p.npy"),
            "--out",
            &dir.s("m.npz"),
        ],
        &["3 queries", "1 non-finite"],
    );
    let arrays = read_npz(&dir.path("m.npz"));
    let d = f32s(&arrays[1].2);
    let shape: Vec<i32> = arrays[2]
        .2
        .chunks_exact(4)
        .map(|b| i32::from_le_bytes(b.try_into().unwrap()))
        .collect();
    // Inside: 0.1 from the three coordinate faces (triangles 0, 1, 2; the lowest index wins).
    assert!((d[0] + 0.1).abs() < 1e-6, "{d:?}");
    assert_eq!(shape[0], 0);
    // Outside, nearest the face x = 0 (triangle 2).
    assert!((d[1] - 1.0).abs() < 1e-6, "{d:?}");
    assert_eq!(shape[1], 2);
    assert!(d[2].is_nan() && shape[2] == -1);

    let p = dir.s("p.npy");
    assert_bad_input(
        &dir,
        &["query", "--mesh", &mesh_s, "--points", &p, "--paired"],
        &["--paired"],
    );
    assert_bad_input(
        &dir,
        &[
            "query", "--shapes", &mesh_s, "--mesh", &mesh_s, "--points", &p,
        ],
        &["cannot be used with"],
    );
    let scene = dir.file("scene.json", SCENE).display().to_string();
    assert_bad_input(
        &dir,
        &[
            "query",
            "--shapes",
            &scene,
            "--sign",
            "pseudonormal",
            "--points",
            &p,
        ],
        &["--sign"],
    );
    let broken = dir.file("broken.obj", "v 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 5\n");
    assert_bad_input(
        &dir,
        &[
            "query",
            "--mesh",
            &broken.display().to_string(),
            "--points",
            &p,
        ],
        &["broken.obj"],
    );
    let empty = dir.file("empty.stl", "solid e\nendsolid e\n");
    assert_bad_input(
        &dir,
        &[
            "query",
            "--mesh",
            &empty.display().to_string(),
            "--points",
            &p,
        ],
        &["empty.stl", "no triangles"],
    );
}

/// A cube [-1, 1]³ as 12 outward-wound triangles (OBJ text).
const CUBE_OBJ: &str = "v -1 -1 -1\nv 1 -1 -1\nv -1 1 -1\nv 1 1 -1\nv -1 -1 1\nv 1 -1 1\nv -1 1 1\nv 1 1 1\n\
f 1 3 4\nf 1 4 2\nf 5 6 8\nf 5 8 7\nf 1 2 6\nf 1 6 5\nf 3 7 8\nf 3 8 4\nf 1 5 7\nf 1 7 3\nf 2 4 8\nf 2 8 6\n";

fn cube_sdf(p: [f64; 3]) -> f64 {
    let d = p.map(|x| x.abs() - 1.0);
    let outside = d.map(|x| x.max(0.0));
    (outside[0] * outside[0] + outside[1] * outside[1] + outside[2] * outside[2]).sqrt()
        + d[0].max(d[1]).max(d[2]).min(0.0)
}

#[test]
fn sdf_grid_of_a_cube_matches_the_exact_sdf() {
    let dir = Dir::new();
    let cube = dir.file("cube.obj", CUBE_OBJ).display().to_string();
    closest_ok(
        &["sdf", &cube, "--res", "9,10,11", "--out", &dir.s("g.npz")],
        &["990 grid samples"],
    );
    let arrays = read_npz(&dir.path("g.npz"));
    let get = |name: &str| arrays.iter().find(|a| a.0 == name).unwrap();
    let f64s = |b: &[u8]| -> Vec<f64> {
        b.chunks_exact(8)
            .map(|x| f64::from_le_bytes(x.try_into().unwrap()))
            .collect()
    };
    // Default pad: 0.1 of the largest extent (2) on each side.
    let origin = f64s(&get("origin").2);
    let spacing = f64s(&get("spacing").2);
    assert_eq!(origin, [-1.2, -1.2, -1.2]);
    for (k, n) in [9.0, 10.0, 11.0].iter().enumerate() {
        assert!((spacing[k] - 2.4 / (n - 1.0)).abs() < 1e-12, "{spacing:?}");
    }
    let (shape, sdf) = (&get("sdf").1, f32s(&get("sdf").2));
    assert_eq!(shape, &[9, 10, 11]);
    let mut inside = 0;
    for i in 0..9 {
        for j in 0..10 {
            for k in 0..11 {
                let p = [
                    origin[0] + i as f64 * spacing[0],
                    origin[1] + j as f64 * spacing[1],
                    origin[2] + k as f64 * spacing[2],
                ];
                let got = sdf[(i * 10 + j) * 11 + k] as f64;
                assert!(
                    (got - cube_sdf(p)).abs() < 1e-5,
                    "{p:?}: {got} vs {}",
                    cube_sdf(p)
                );
                inside += usize::from(got < 0.0);
            }
        }
    }
    assert!(inside > 0);

    // The same grid as VTK ImageData (x fastest) and a preview of the middle z-slice.
    closest_ok(
        &[
            "sdf",
            &cube,
            "--res",
            "9,10,11",
            "--out",
            &dir.s("g2.npz"),
            "--vti",
            &dir.s("g.vti"),
            "--preview",
            &dir.s("g.png"),
        ],
        &["990 grid samples"],
    );
    let vti = std::fs::read(dir.path("g.vti")).unwrap();
    let text = String::from_utf8_lossy(&vti);
    assert!(
        text.contains(r#"WholeExtent="0 8 0 9 0 10""#),
        "{text:.600}"
    );
    assert!(text.contains(r#"Origin="-1.2 -1.2 -1.2""#), "{text:.600}");
    let marker = b"<AppendedData encoding=\"raw\">\n_";
    let start = vti.windows(marker.len()).position(|w| w == marker).unwrap() + marker.len();
    let bytes = u64::from_le_bytes(vti[start..start + 8].try_into().unwrap());
    assert_eq!(bytes, 990 * 4);
    let values = f32s(&vti[start + 8..start + 8 + 990 * 4]);
    for i in 0..9 {
        for j in 0..10 {
            for k in 0..11 {
                assert_eq!(values[(k * 10 + j) * 9 + i], sdf[(i * 10 + j) * 11 + k]);
            }
        }
    }
    let decoder = png::Decoder::new(std::io::BufReader::new(
        std::fs::File::open(dir.path("g.png")).unwrap(),
    ));
    let mut reader = decoder.read_info().unwrap();
    let mut pixels = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut pixels).unwrap();
    // 9 × 10 samples, each a 51-pixel square (at least 512 pixels on the long side).
    assert_eq!((info.width, info.height), (9 * 51, 10 * 51));
    let pixel = |x: u32, y: u32| {
        let at = ((y * info.width + x) * 3) as usize;
        [pixels[at], pixels[at + 1], pixels[at + 2]]
    };
    let centre = pixel(info.width / 2, info.height / 2);
    assert!(centre[2] > centre[0], "inside is blue: {centre:?}");
    let corner = pixel(0, 0);
    assert!(corner[0] > corner[2], "outside is red: {corner:?}");
    let contour = (0..info.width).any(|x| pixel(x, info.height / 2) == [0, 0, 0]);
    assert!(contour, "the zero contour is drawn");

    // CSV: one row per sample, and explicit bounds.
    closest_ok(
        &[
            "sdf",
            &cube,
            "--res",
            "3",
            "--bounds",
            "-2,-2,-2,2,2,2",
            "--sign",
            "none",
            "--out",
            &dir.s("g.csv"),
        ],
        &["27 grid samples"],
    );
    let text = std::fs::read_to_string(dir.path("g.csv")).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "x,y,z,sdf");
    assert_eq!(lines.len(), 28);
    // Sample (1, 1, 1) is the centre: unsigned distance 1.
    assert_eq!(lines[1 + 13], "0,0,0,1");

    for (args, needle) in [
        (vec!["--res", "1"], "at least 2"),
        (
            vec!["--res", "4,4"],
            "one number of samples an axis, or three",
        ),
        (vec!["--res", "2.5"], "whole numbers"),
        (vec!["--res", "4", "--bounds", "1,0,0,0,1,1"], "--bounds"),
        (vec!["--res", "4", "--pad", "-1"], "--pad"),
        // Grid samples beyond f32's range.
        (vec!["--res", "4", "--pad", "1e300"], "--pad 1e300"),
        (
            vec!["--res", "4", "--bounds", "-1e39,0,0,1,1,1"],
            "--bounds",
        ),
        (
            vec!["--res", "4", "--pad", "0.1", "--bounds", "0,0,0,1,1,1"],
            "cannot be used with",
        ),
    ] {
        let mut all = vec!["sdf", cube.as_str()];
        all.extend(args);
        assert_bad_input(&dir, &all, &[needle]);
    }
    // A grid box without extent along an axis (a flat mesh unpadded, a mesh that is a point)
    // is refused, naming the axis; padded, the flat one has a grid.
    let flat = dir.file("flat.obj", "v 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 3\n");
    let point = dir.file("point.obj", "v 2 2 2\nv 2 2 2\nv 2 2 2\nf 1 2 3\n");
    let (flat, point) = (flat.display().to_string(), point.display().to_string());
    let out = dir.s("flat.npz");
    assert_bad_input(
        &dir,
        &["sdf", &flat, "--res", "4", "--pad", "0", "--out", &out],
        &[
            "no extent along z: every vertex of the mesh has z = 0.0",
            "--pad",
        ],
    );
    assert_bad_input(
        &dir,
        &["sdf", &point, "--res", "4", "--out", &out],
        &[
            "no extent along x: every vertex of the mesh has x = 2.0",
            "give --bounds",
        ],
    );
    closest_ok(
        &["sdf", &flat, "--res", "4", "--out", &out],
        &["64 grid samples"],
    );
}

#[test]
fn portable_kernels_write_the_same_files() {
    // `--portable-kernels` swaps query_subgroup.wgsl / mesh_subgroup.wgsl (lavapipe's default)
    // for query.wgsl / mesh.wgsl: same bytes out, for a scene query and an SDF grid.
    let dir = Dir::new();
    let scene = dir.file("scene.json", SCENE).display().to_string();
    let cube = dir.file("cube.obj", CUBE_OBJ).display().to_string();
    let points: Vec<[f64; 3]> = (0..3000)
        .map(|i| {
            let t = i as f64 * 0.37;
            [8.0 * t.sin(), 6.0 * (1.3 * t).cos(), 0.01 * i as f64 - 12.0]
        })
        .collect();
    write_points(&dir.path("p.npy"), &points);
    for (name, portable) in [("a", false), ("b", true)] {
        let flag: &[&str] = if portable {
            &["--portable-kernels"]
        } else {
            &[]
        };
        let query = [
            "query",
            "--shapes",
            &scene,
            "--points",
            &dir.s("p.npy"),
            "--out",
            &dir.s(&format!("{name}.npz")),
        ];
        closest_ok(&[&query[..], flag].concat(), &["3000 queries"]);
        let grid = [
            "sdf",
            &cube,
            "--res",
            "17,18,19",
            "--out",
            &dir.s(&format!("{name}_grid.npz")),
        ];
        closest_ok(&[&grid[..], flag].concat(), &["5814 grid samples"]);
    }
    for file in ["", "_grid"] {
        let a = std::fs::read(dir.path(&format!("a{file}.npz"))).unwrap();
        let b = std::fs::read(dir.path(&format!("b{file}.npz"))).unwrap();
        assert!(a == b, "a{file}.npz and b{file}.npz differ");
    }
}

#[test]
fn fields_write_only_the_arrays_named_with_the_full_answers_bits() {
    let dir = Dir::new();
    let scene = dir.file("scene.json", SCENE).display().to_string();
    let cube = dir.file("cube.obj", CUBE_OBJ).display().to_string();
    let points: Vec<[f64; 3]> = (0..500)
        .map(|i| {
            let t = i as f64 * 0.41;
            [5.0 * t.sin(), 4.0 * (0.7 * t).cos(), 0.02 * i as f64 - 5.0]
        })
        .collect();
    write_points(&dir.path("p.npy"), &points);
    let p = dir.s("p.npy");
    for (target, what) in [(["--shapes", &scene], "scene"), (["--mesh", &cube], "mesh")] {
        let run = |out: &str, fields: &[&str]| {
            let args = [
                &["query", target[0], target[1], "--points", &p, "--out", out][..],
                fields,
            ];
            closest_ok(&args.concat(), &["500 queries"]);
            read_npz(Path::new(out))
        };
        let full = run(&dir.s("full.npz"), &[]);
        // Named out of order: written in the default order.
        let some = run(&dir.s("some.npz"), &["--fields", "shape,distance"]);
        let names: Vec<&str> = some.iter().map(|a| a.0.as_str()).collect();
        assert_eq!(names, ["distance", "shape"], "{what}");
        for array in &some {
            let whole = full.iter().find(|a| a.0 == array.0).unwrap();
            assert_eq!(array, whole, "{what}: {}", array.0);
        }
        let csv = dir.s("d.csv");
        let args = ["query", target[0], target[1], "--points", &p, "--out", &csv];
        closest_ok(&[&args[..], &["--fields", "normal"]].concat(), &[]);
        let text = std::fs::read_to_string(&csv).unwrap();
        assert!(text.starts_with("normal_x,normal_y,normal_z\n"), "{text}");
    }
    assert_bad_input(
        &dir,
        &[
            "query",
            "--shapes",
            &scene,
            "--points",
            &p,
            "--out",
            &dir.s("x.npz"),
            "--fields",
            "distance,depth",
        ],
        &["--fields", "`depth`", "point, distance, shape, normal"],
    );
}

#[test]
fn no_loader_message_when_xdg_runtime_dir_is_unset() {
    // Mesa's loader prints "error: XDG_RUNTIME_DIR is invalid or not set" without it; the
    // CLI gives the driver a private directory instead.
    let out = Command::new(env!("CARGO_BIN_EXE_closest"))
        .arg("info")
        .env_remove("XDG_RUNTIME_DIR")
        .output()
        .unwrap();
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    assert!(!err.contains("XDG_RUNTIME_DIR"), "{err}");
}

/// A mesh that needs more memory than there is is refused before its build, with the sizes
/// named (SPEC §4 "Size"); `--memory-bytes` stands in for a small machine. So are a mesh's
/// triangles as body targets (about 400 bytes each while they build: a 16.7M-triangle mesh's
/// would have taken about 6 GB unchecked).
#[test]
fn a_mesh_and_its_body_targets_larger_than_memory_are_refused_before_their_build() {
    let dir = Dir::new();
    let mesh = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data/meshes/fandisk.obj");
    let mesh = mesh.display().to_string();
    write_npy(
        &dir.path("p.npy"),
        "<f8",
        &[1, 3],
        bytemuck::cast_slice(&[0.0f64; 3]),
    );
    let bodies = dir.file(
        "bodies.json",
        r#"{"shapes": [{"type": "capsule", "a": [0, 0, 0], "b": [0.1, 0, 0], "radius": 0.05}]}"#,
    );
    let (points, bodies) = (dir.s("p.npy"), bodies.display().to_string());
    let jobs = [
        (
            ["query", "--mesh", &mesh, "--points", &points],
            "a mesh of 12946 triangles",
        ),
        (
            ["contacts", "--mesh", &mesh, "--bodies", &bodies],
            "body targets of 12946 triangles",
        ),
    ];
    for (k, (job, what)) in jobs.iter().enumerate() {
        let run = |memory: &str, out: &str| {
            let out = dir.s(&format!("{k}-{out}"));
            let mut args = vec!["--memory-bytes", memory];
            args.extend(job);
            args.extend(["--out", &out]);
            closest(&args)
        };
        let refused = run("1048576", "small.npz");
        let msg = stderr(&refused);
        assert_eq!(refused.status.code(), Some(1), "{msg}");
        for needle in [
            "out of memory",
            what,
            "MiB to build",
            "but 1 MiB are available",
        ] {
            assert!(msg.contains(needle), "`{needle}` not in: {msg}");
        }
        assert!(
            !dir.path(&format!("{k}-small.npz")).exists(),
            "no output on refusal"
        );
        // Below a MiB, in bytes (1000 bytes read "1 MiB are available").
        let tiny = stderr(&run("1000", "tiny.npz"));
        assert!(tiny.contains("but 1000 bytes are available"), "{tiny}");
        let answered = run("1000000000", "large.npz");
        assert!(answered.status.success(), "{}", stderr(&answered));
    }
}

/// A convex hull of many points is built when the scene is read, before any engine: its
/// build (~1.3 KB a point where every point is a vertex) is checked against the memory the
/// process may take, `--memory-bytes` included; refused with exit 1, the file, shape and
/// field named, no output.
#[test]
fn a_hull_larger_than_memory_is_refused_before_its_build() {
    let dir = Dir::new();
    // 100,000 points inside a ball (a fast build when it is allowed).
    let mut seed = 7u64;
    let mut unit = move || {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (seed >> 11) as f64 / (1u64 << 53) as f64 - 0.5
    };
    let points: Vec<String> = (0..100_000)
        .map(|_| format!("[{:.5}, {:.5}, {:.5}]", unit(), unit(), unit()))
        .collect();
    let scene = dir.file(
        "hull.json",
        &format!(
            r#"{{"shapes": [{{"type": "convex_hull", "points": [{}]}}]}}"#,
            points.join(", ")
        ),
    );
    let query_points = dir.file("p.csv", "2,0,0\n");
    let (scene, query_points) = (
        scene.display().to_string(),
        query_points.display().to_string(),
    );
    let run = |memory: &str, out: &str| {
        let out = dir.s(out);
        closest(&[
            "--memory-bytes",
            memory,
            "query",
            "--shapes",
            &scene,
            "--points",
            &query_points,
            "--out",
            &out,
        ])
    };
    let refused = run("1048576", "small.npz");
    let msg = stderr(&refused);
    assert_eq!(refused.status.code(), Some(1), "{msg}");
    for needle in [
        "out of memory",
        "hull.json",
        "shape 0",
        "`points`",
        "100000 points",
        "but 1 MiB are available",
    ] {
        assert!(msg.contains(needle), "`{needle}` not in: {msg}");
    }
    assert!(!dir.path("small.npz").exists(), "no output on refusal");
    let answered = run("1000000000", "large.npz");
    assert!(answered.status.success(), "{}", stderr(&answered));
}

#[test]
fn sdf_signs_by_auto_and_names_the_method_it_picked() {
    let dir = Dir::new();
    let cube = dir.file("cube.obj", CUBE_OBJ).display().to_string();
    closest_ok(
        &["sdf", &cube, "--res", "4", "--out", &dir.s("closed.npz")],
        &["signs: pseudonormal (auto: closed and consistently oriented)"],
    );
    // The cube without its last face: two open edges' worth of hole.
    let open = CUBE_OBJ.trim_end().rsplit_once('\n').unwrap().0.to_string() + "\n";
    let open = dir.file("open.obj", &open).display().to_string();
    closest_ok(
        &["sdf", &open, "--res", "4", "--out", &dir.s("open.npz")],
        &["signs: winding (auto: 3 open edge(s): the mesh has holes)"],
    );
    closest_ok(
        &[
            "sdf",
            &open,
            "--res",
            "4",
            "--sign",
            "pseudonormal",
            "--out",
            &dir.s("chosen.npz"),
        ],
        &["signs: pseudonormal;"],
    );
}

#[test]
fn band_grid_writes_the_dense_grid_and_the_sparse_band() {
    let dir = Dir::new();
    let cube = dir.file("cube.obj", CUBE_OBJ).display().to_string();
    closest_ok(
        &[
            "sdf",
            &cube,
            "--res",
            "33",
            "--band",
            "0.2",
            "--band-units",
            "world",
            "--out",
            &dir.s("dense.npz"),
            "--sparse",
            &dir.s("band.npz"),
        ],
        &["35937 grid samples", "within the band", "near bricks"],
    );
    let dense = read_npz(&dir.path("dense.npz"));
    let sparse = read_npz(&dir.path("band.npz"));
    let get = |arrays: &[(String, Vec<usize>, Vec<u8>)], name: &str| {
        arrays.iter().find(|a| a.0 == name).unwrap().clone()
    };
    let values = f32s(&get(&dense, "sdf").2);
    let (index_shape, index_bytes) = {
        let (_, shape, bytes) = get(&sparse, "index");
        (shape, bytes)
    };
    let index: Vec<i32> = index_bytes
        .chunks_exact(4)
        .map(|b| i32::from_le_bytes(b.try_into().unwrap()))
        .collect();
    let band_values = f32s(&get(&sparse, "sdf").2);
    let m = band_values.len();
    assert_eq!(index_shape, vec![m, 3]);
    assert!(m > 1000, "{m} band samples");
    let shape: Vec<i64> = get(&sparse, "shape")
        .2
        .chunks_exact(8)
        .map(|b| i64::from_le_bytes(b.try_into().unwrap()))
        .collect();
    assert_eq!(shape, [33, 33, 33]);
    assert_eq!(get(&sparse, "band").2, 0.2f64.to_le_bytes());
    // Every band sample is the dense grid's, within 0.2 of the cube and exact there; every
    // dense sample within the band (by the exact SDF) is among them.
    let grid_point = |i: usize| -1.2 + i as f64 * 2.4 / 32.0;
    let mut rows = Vec::new();
    for (k, ijk) in index.chunks_exact(3).enumerate() {
        let [i, j, l] = [0, 1, 2].map(|a| ijk[a] as usize);
        let row = (i * 33 + j) * 33 + l;
        rows.push(row);
        assert_eq!(band_values[k], values[row]);
        let exact = cube_sdf([grid_point(i), grid_point(j), grid_point(l)]);
        assert!((band_values[k] as f64 - exact).abs() < 1e-5, "{ijk:?}");
        assert!(band_values[k].abs() <= 0.2);
    }
    assert!(rows.windows(2).all(|p| p[0] < p[1]), "C order");
    for (row, &v) in values.iter().enumerate() {
        let (i, j, l) = (row / (33 * 33), (row / 33) % 33, row % 33);
        let exact = cube_sdf([grid_point(i), grid_point(j), grid_point(l)]);
        if exact.abs() < 0.2 - 1e-5 {
            assert!(
                rows.binary_search(&row).is_ok(),
                "row {row} ({exact}) not in the band"
            );
        } else if exact.abs() > 0.2 + 1e-5 {
            assert_eq!(v, if exact < 0.0 { -0.2 } else { 0.2 }, "row {row}");
        }
    }
}

/// A Zarr store's `sdf` array read back whole (C order), with its metadata, and how many of
/// its chunks were written: chunks that are absent read as the fill value, as Zarr says.
fn read_zarr_grid(store: &Path) -> (Vec<f32>, serde_json::Value, usize) {
    let meta: serde_json::Value =
        serde_json::from_slice(&std::fs::read(store.join("sdf/zarr.json")).unwrap()).unwrap();
    let shape: Vec<usize> = serde_json::from_value(meta["shape"].clone()).unwrap();
    let chunk: Vec<usize> =
        serde_json::from_value(meta["chunk_grid"]["configuration"]["chunk_shape"].clone()).unwrap();
    let fill = match &meta["fill_value"] {
        serde_json::Value::String(s) if s == "NaN" => f32::NAN,
        v => v.as_f64().unwrap() as f32,
    };
    let mut values = vec![fill; shape.iter().product()];
    let mut written = 0;
    let chunks: Vec<usize> = (0..3).map(|a| shape[a].div_ceil(chunk[a])).collect();
    for ci in 0..chunks[0] {
        for cj in 0..chunks[1] {
            for ck in 0..chunks[2] {
                let Ok(bytes) = std::fs::read(store.join(format!("sdf/c/{ci}/{cj}/{ck}"))) else {
                    continue;
                };
                written += 1;
                let chunk_values = f32s(&zstd::stream::decode_all(&bytes[..]).unwrap());
                assert_eq!(chunk_values.len(), chunk.iter().product::<usize>());
                for (n, v) in chunk_values.into_iter().enumerate() {
                    let local = [
                        n / (chunk[1] * chunk[2]),
                        (n / chunk[2]) % chunk[1],
                        n % chunk[2],
                    ];
                    let at = [
                        ci * chunk[0] + local[0],
                        cj * chunk[1] + local[1],
                        ck * chunk[2] + local[2],
                    ];
                    if (0..3).all(|a| at[a] < shape[a]) {
                        values[(at[0] * shape[1] + at[1]) * shape[2] + at[2]] = v;
                    }
                }
            }
        }
    }
    (values, meta, written)
}

#[test]
fn zarr_grids_hold_the_npz_grids_and_leave_out_chunks_at_plus_w() {
    let dir = Dir::new();
    let cube = dir.file("cube.obj", CUBE_OBJ).display().to_string();
    let common = [
        "sdf",
        &cube,
        "--res",
        "33,20,17",
        "--bounds",
        "-3,-3,-3,3,3,3",
    ];
    let run = |extra: &[&str]| {
        let args: Vec<&str> = common.iter().chain(extra).copied().collect();
        closest_ok(&args, &["grid samples"]);
    };
    run(&["--out", &dir.s("dense.npz")]);
    run(&["--out", &dir.s("dense.zarr"), "--chunk", "8"]);
    let band = ["--band", "0.5", "--band-units", "world"];
    run(&[&band[..], &["--out", &dir.s("band.npz")]].concat());
    run(&[&band[..], &["--out", &dir.s("band.zarr"), "--chunk", "8"]].concat());

    let npz_values = |name: &str| f32s(&common::npz_array(&dir.path(name), "sdf"));
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    let (dense, meta, written) = read_zarr_grid(&dir.path("dense.zarr"));
    assert_eq!(bits(&dense), bits(&npz_values("dense.npz")));
    assert_eq!(written, 5 * 3 * 3, "every chunk of a dense grid is written");
    assert_eq!(meta["shape"], serde_json::json!([33, 20, 17]));
    assert_eq!(meta["data_type"], "float32");
    assert_eq!(meta["codecs"][1]["name"], "zstd");
    let attributes = &meta["attributes"];
    assert_eq!(attributes["sign"], "pseudonormal");
    assert!(attributes["band"].is_null());
    assert_eq!(attributes["origin"], serde_json::json!([-3.0, -3.0, -3.0]));
    assert_eq!(attributes["spacing"][0].as_f64().unwrap(), 6.0 / 32.0);
    let group: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path("dense.zarr/zarr.json")).unwrap()).unwrap();
    assert_eq!(group["node_type"], "group");
    assert_eq!(&group["attributes"], attributes);

    let (banded, meta, written) = read_zarr_grid(&dir.path("band.zarr"));
    assert_eq!(bits(&banded), bits(&npz_values("band.npz")));
    assert_eq!(meta["fill_value"].as_f64().unwrap() as f32, 0.5);
    assert_eq!(meta["attributes"]["band"].as_f64().unwrap(), 0.5);
    // The corners of the box are farther than 0.5 from the cube: their chunks are not written.
    assert!(written < 5 * 3 * 3, "{written} chunks written");
    assert!(!dir.path("band.zarr/sdf/c/0/0/0").exists());
}

#[test]
fn bad_zarr_outputs_exit_2_and_leave_nothing() {
    let dir = Dir::new();
    let cube = dir.file("cube.obj", CUBE_OBJ).display().to_string();
    let store = dir.s("g.zarr");
    for chunk in ["0", "257"] {
        assert_bad_input(
            &dir,
            &[
                "sdf", &cube, "--res", "8", "--out", &store, "--chunk", chunk,
            ],
            &["--chunk", chunk],
        );
    }
    assert_bad_input(
        &dir,
        &[
            "sdf",
            &cube,
            "--res",
            "8",
            "--out",
            &store,
            "--preview",
            &dir.s("p.png"),
        ],
        &["--preview", ".npz"],
    );
    // A preview or VTK file that could not be written is refused before the grid is made.
    let out = dir.s("g.npz");
    for (flag, path, needle) in [
        ("--preview", "p.txt", "end it in .png"),
        (
            "--preview",
            "no/such/dir/p.png",
            "its folder does not exist",
        ),
        ("--vti", "g.vtk", "end it in .vti"),
    ] {
        assert_bad_input(
            &dir,
            &["sdf", &cube, "--res", "8", "--out", &out, flag, path],
            &[path, needle],
        );
    }
    assert!(!dir.path("g.zarr").exists());
    // A folder that is not a Zarr store is not replaced.
    std::fs::create_dir(dir.path("mine.zarr")).unwrap();
    std::fs::write(dir.path("mine.zarr/notes.txt"), "keep").unwrap();
    let mine = dir.s("mine.zarr");
    assert_bad_input(
        &dir,
        &["sdf", &cube, "--res", "8", "--out", &mine],
        &["mine.zarr", "not a Zarr store"],
    );
    assert!(dir.path("mine.zarr/notes.txt").is_file());
    // A failure after the store was started (an unwritable --sparse) leaves no store.
    let out = closest(&[
        "sdf",
        &cube,
        "--res",
        "8",
        "--band",
        "1",
        "--out",
        &store,
        "--sparse",
        &dir.s("no/such/dir/b.npz"),
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let entries: Vec<_> = std::fs::read_dir(dir.0.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(entries.len(), 2, "only the mesh and mine.zarr: {entries:?}");
}

#[test]
fn an_open_mesh_s_band_through_the_cli_has_the_dense_grid_s_signs() {
    // The CLI releases the host mesh after the upload: what the band's sign needs (the holes'
    // caps for winding numbers, whether the mesh is a closed cycle for pseudonormals) must be
    // made before, and an unsigned job needs neither.
    let dir = Dir::new();
    let bunny =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data/meshes/stanford-bunny.obj");
    let bunny = bunny.to_str().unwrap();
    for (sign, described) in [
        ("auto", "signs: winding"),
        ("pseudonormal", "signs: pseudonormal"),
        ("none", "signs: none"),
    ] {
        let band = format!("band-{sign}.npz");
        let dense = format!("dense-{sign}.npz");
        closest_ok(
            &[
                "sdf",
                bunny,
                "--res",
                "40",
                "--band",
                "2",
                "--sign",
                sign,
                "--out",
                &dir.s(&band),
            ],
            &[described, "within the band"],
        );
        closest_ok(
            &[
                "sdf",
                bunny,
                "--res",
                "40",
                "--sign",
                sign,
                "--out",
                &dir.s(&dense),
            ],
            &[described],
        );
        let sdf = |name: &str| f32s(&common::npz_array(&dir.path(name), "sdf"));
        let spacing = common::npz_array(&dir.path(&dense), "spacing")
            .chunks_exact(8)
            .map(|b| f64::from_le_bytes(b.try_into().unwrap()))
            .fold(0.0, f64::max);
        let width = (2.0 * spacing) as f32;
        let (band, dense) = (sdf(&band), sdf(&dense));
        let far: Vec<usize> = (0..dense.len())
            .filter(|&k| dense[k].abs() > width * 1.001)
            .collect();
        assert!(far.len() > 40_000, "{sign}: {} far samples", far.len());
        for k in far {
            assert_eq!(
                band[k].is_sign_negative(),
                dense[k].is_sign_negative(),
                "{sign}: sample {k}"
            );
        }
    }
}

#[test]
fn bad_band_arguments_exit_2_naming_the_flag_and_leave_nothing() {
    let dir = Dir::new();
    let cube = dir.file("cube.obj", CUBE_OBJ).display().to_string();
    for width in ["0", "-1", "nan", "inf"] {
        assert_bad_input(
            &dir,
            &["sdf", &cube, "--res", "8", "--band", width],
            &["--band", "finite width > 0"],
        );
    }
    let sparse = dir.s("band.npz");
    assert_bad_input(
        &dir,
        &["sdf", &cube, "--res", "8", "--sparse", &sparse],
        &["--band"],
    );
    assert_bad_input(
        &dir,
        &[
            "sdf",
            &cube,
            "--res",
            "8",
            "--band",
            "1",
            "--sparse",
            &dir.s("band.csv"),
        ],
        &["band.csv", "--sparse writes an .npz"],
    );
    assert_bad_input(
        &dir,
        &[
            "sdf",
            &cube,
            "--res",
            "8",
            "--band",
            "1",
            "--out",
            &dir.s("g.csv"),
        ],
        &["g.csv", "band grid"],
    );
    assert_bad_input(
        &dir,
        &[
            "sdf",
            &cube,
            "--res",
            "8",
            "--band",
            "1",
            "--band-units",
            "parsecs",
        ],
        &["parsecs"],
    );
    // A failure after the band's files were started (an unwritable dense output) leaves
    // neither of them.
    let missing = dir.path("no/such/dir/g.npz").display().to_string();
    let out = closest(&[
        "sdf", &cube, "--res", "8", "--band", "1", "--sparse", &sparse, "--out", &missing,
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(!dir.path("band.npz").exists());
    let leftovers: Vec<_> = std::fs::read_dir(dir.0.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().contains(".partial"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn many_meshes_to_an_out_dir_skip_and_report_the_broken_one() {
    let dir = Dir::new();
    let inputs = dir.path("meshes");
    std::fs::create_dir(&inputs).unwrap();
    std::fs::write(inputs.join("cube.obj"), CUBE_OBJ).unwrap();
    std::fs::write(inputs.join("box.obj"), CUBE_OBJ.replace("v 1", "v 2")).unwrap();
    std::fs::write(inputs.join("broken.obj"), "v 0 0 0\nf 1 2 3\n").unwrap();
    std::fs::write(inputs.join("notes.txt"), "not a mesh").unwrap();
    // A macOS resource fork copied with a dataset is hidden and left out; a link to a mesh
    // that is gone is reported as failed (it was skipped without a word).
    std::fs::write(inputs.join("._cube.obj"), b"\0\x05\x16\x07 not a mesh").unwrap();
    #[cfg(unix)]
    std::os::unix::fs::symlink(dir.path("gone.obj"), inputs.join("gone.obj")).unwrap();
    let (meshes, failed) = if cfg!(unix) {
        (5, "2 of 5 meshes failed: broken.obj, gone.obj")
    } else {
        (4, "1 of 4 meshes failed: broken.obj")
    };
    let extra = dir.file("extra.obj", CUBE_OBJ);
    let out_dir = dir.path("out");
    for (command, args) in [
        ("sdf", &["--res", "6"][..]),
        ("sample", &["--uniform", "50", "--surface", "20"][..]),
    ] {
        let out = closest(
            &[
                &[command, inputs.to_str().unwrap(), extra.to_str().unwrap()][..],
                args,
                &["--out-dir", out_dir.to_str().unwrap()],
            ]
            .concat(),
        );
        let msg = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{command}: {msg}");
        assert!(
            msg.contains(&format!("[1/{meshes}] box.obj")),
            "{command}: {msg}"
        );
        assert!(
            msg.contains(&format!("[2/{meshes}] broken.obj: failed: ")),
            "{command}: {msg}"
        );
        assert!(msg.contains(failed), "{command}: {msg}");
        assert!(!msg.contains("._cube"), "{command}: {msg}");
        for name in ["box", "cube", "extra"] {
            assert!(
                out_dir.join(format!("{name}.npz")).exists(),
                "{command}: {name}"
            );
        }
        assert!(!out_dir.join("broken.npz").exists());
        let leftovers: Vec<_> = std::fs::read_dir(&out_dir)
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().contains(".partial"))
            .collect();
        assert!(leftovers.is_empty(), "{leftovers:?}");
        std::fs::remove_dir_all(&out_dir).unwrap();
    }
    // Grids to Zarr stores, one a mesh.
    let out = closest(&[
        "sdf",
        inputs.to_str().unwrap(),
        "--res",
        "6",
        "--out-dir",
        out_dir.to_str().unwrap(),
        "--out-format",
        "zarr",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let mut written: Vec<String> = std::fs::read_dir(&out_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    written.sort();
    assert_eq!(written, ["box.zarr", "cube.zarr"]);
    assert!(out_dir.join("cube.zarr/sdf/zarr.json").is_file());
    // All good: exit 0. Two meshes of one name, or several without --out-dir: exit 2.
    closest_ok(
        &[
            "sdf",
            extra.to_str().unwrap(),
            "--res",
            "4",
            "--out-dir",
            out_dir.to_str().unwrap(),
        ],
        &["1 meshes, all written"],
    );
    std::fs::write(dir.path("extra.stl"), b"solid x\nendsolid x\n").unwrap();
    let twice = dir.s("extra.stl");
    let out = closest(&[
        "sdf",
        extra.to_str().unwrap(),
        &twice,
        "--res",
        "4",
        "--out-dir",
        out_dir.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("would both write extra.npz"),
        "{}",
        stderr(&out)
    );
    assert_bad_input(
        &dir,
        &[
            "sdf",
            extra.to_str().unwrap(),
            extra.to_str().unwrap(),
            "--res",
            "4",
        ],
        &["several meshes need --out-dir"],
    );
}

/// Meshes whose names differ only in bytes that are not UTF-8 each get their own output: their
/// stems were made lossy (U+FFFD for each such byte), so both wrote one file, the second
/// mesh's grid over the first's, and the run said "2 meshes, all written".
#[cfg(unix)]
#[test]
fn names_that_are_not_utf8_keep_their_own_outputs() {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;
    let dir = Dir::new();
    let inputs = dir.path("inputs");
    std::fs::create_dir(&inputs).unwrap();
    // A unit cube, and one of half its size.
    let cube = |side: f64| {
        let mut text = String::new();
        for corner in [
            [0, 0, 0],
            [1, 0, 0],
            [1, 1, 0],
            [0, 1, 0],
            [0, 0, 1],
            [1, 0, 1],
            [1, 1, 1],
            [0, 1, 1],
        ] {
            let [x, y, z] = corner.map(|c| c as f64 * side);
            text += &format!("v {x} {y} {z}\n");
        }
        text + "f 1 4 3\nf 1 3 2\nf 5 6 7\nf 5 7 8\nf 1 2 6\nf 1 6 5\nf 4 8 7\nf 4 7 3\n\
                f 1 5 8\nf 1 8 4\nf 2 3 7\nf 2 7 6\n"
    };
    let names = [&b"m\xffx"[..], &b"m\xfex"[..]];
    for (name, text) in names.iter().zip([cube(1.0), cube(0.5)]) {
        let mut file = name.to_vec();
        file.extend_from_slice(b".obj");
        std::fs::write(inputs.join(OsStr::from_bytes(&file)), text).unwrap();
    }
    let out_dir = dir.path("out");
    let out = Command::new(env!("CARGO_BIN_EXE_closest"))
        .arg("sdf")
        .arg(&inputs)
        .args(["--res", "4", "--bounds", "-1,-1,-1,2,2,2", "--out-dir"])
        .arg(&out_dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let grids: Vec<Vec<u8>> = names
        .iter()
        .map(|name| {
            let mut file = name.to_vec();
            file.extend_from_slice(b".npz");
            common::npz_array(&out_dir.join(OsStr::from_bytes(&file)), "sdf")
        })
        .collect();
    assert_eq!(std::fs::read_dir(&out_dir).unwrap().count(), 2);
    assert_ne!(grids[0], grids[1], "both outputs hold one mesh's grid");
}

/// `closest sdf igea.ply --res 320 --out OUT`, spawned and waited for (bounded) until its
/// temporary output holds written samples (a chunk folder, or a megabyte of file), so that a
/// signal lands mid-job; with the temporary output's name.
#[cfg(unix)]
fn igea_grid_caught_writing(
    out: &Path,
    stderr: std::process::Stdio,
) -> (std::process::Child, String) {
    let igea = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data/meshes/igea.ply");
    let mut child = Command::new(env!("CARGO_BIN_EXE_closest"))
        .args(["sdf", igea.to_str().unwrap(), "--res", "320", "--out"])
        .arg(out)
        .stderr(stderr)
        .spawn()
        .unwrap();
    let dir = out.parent().unwrap();
    let started = std::time::Instant::now();
    loop {
        let written = std::fs::read_dir(dir).unwrap().find_map(|e| {
            let e = e.unwrap();
            let name = e.file_name().to_string_lossy().into_owned();
            let samples = if e.path().is_dir() {
                e.path().join("sdf").join("c").exists()
            } else {
                e.metadata().is_ok_and(|m| m.len() > 1 << 20)
            };
            (name.contains("partial") && samples).then_some(name)
        });
        if let Some(name) = written {
            return (child, name);
        }
        assert!(
            child.try_wait().unwrap().is_none(),
            "{}: the job ended before it was caught writing",
            out.display()
        );
        assert!(
            started.elapsed().as_secs() < 120,
            "{}: no partial output",
            out.display()
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// A job interrupted by SIGTERM or SIGINT while it writes (a `.zarr` store, an `.npz`) exits
/// with 128 + the signal and leaves neither its target nor its temporary output behind.
#[cfg(unix)]
#[test]
fn an_interrupted_job_leaves_no_partial_output() {
    for (target, signal) in [("g.zarr", libc::SIGTERM), ("g.npz", libc::SIGINT)] {
        let dir = tempfile::tempdir().unwrap();
        let (child, _) =
            igea_grid_caught_writing(&dir.path().join(target), std::process::Stdio::piped());
        // SAFETY: signalling our own child, which has not been waited for.
        assert_eq!(unsafe { libc::kill(child.id() as i32, signal) }, 0);
        let output = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(
            output.status.code(),
            Some(128 + signal),
            "{target}: {stderr}"
        );
        assert!(stderr.contains("partial outputs removed"), "{stderr}");
        let left: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(left.is_empty(), "{target}: left {left:?}");
    }
}

/// A target's temporary sibling is named after it: a name near the 255 bytes filesystems allow
/// once left no room for `.NAME.partial-HOST-PID`, and such a target could not be written.
#[test]
fn outputs_named_near_the_longest_name_are_written_and_replaced() {
    let fandisk = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data/meshes/fandisk.obj");
    let dir = tempfile::tempdir().unwrap();
    for ext in ["npz", "csv", "zarr"] {
        let name = format!("{}.{ext}", "é".repeat(124) + "ab");
        assert_eq!(name.len(), 254 + ext.len() - 3);
        let out = dir.path().join(&name);
        // Written, then replaced (a store's old copy is a sibling too).
        for _ in 0..2 {
            closest_ok(
                &[
                    "sdf",
                    fandisk.to_str().unwrap(),
                    "--res",
                    "8",
                    "--out",
                    out.to_str().unwrap(),
                ],
                &[],
            );
            assert!(out.exists(), "{name}");
        }
    }
    let mut left: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left.len(), 3, "{left:?}");
    assert!(left.iter().all(|n| !n.starts_with('.')), "{left:?}");
}

/// SIGKILL (the OOM killer's) cannot be caught: the killed job's temporary store stays, named
/// with its host and process id, and the next job writing that target on this host removes it,
/// and any other such leftover of a process no longer running; a running process's, or another
/// host's (a shared folder), it leaves alone.
#[cfg(unix)]
#[test]
fn what_a_killed_job_left_the_next_job_on_its_target_removes() {
    let fandisk = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data/meshes/fandisk.obj");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("g.zarr");
    let (mut child, partial) = igea_grid_caught_writing(&out, std::process::Stdio::null());
    let pid = child.id();
    let left = || -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    };
    child.kill().unwrap();
    child.wait().unwrap();
    // `.g.zarr.partial-HOST-PID-0`
    let host = partial
        .strip_prefix(".g.zarr.partial-")
        .and_then(|rest| rest.strip_suffix(&format!("-{pid}-0")))
        .unwrap_or_else(|| panic!("{partial}: not named with a host and pid {pid}"))
        .to_string();
    assert!(!host.is_empty());
    // Beside it: a leftover of this (running) test process, one of another host, and one of
    // the killed process for the `.npz` of the same name (not this target: kept).
    let running = format!(".g.zarr.partial-{host}-{}-0", std::process::id());
    let elsewhere = format!(".g.zarr.partial-{host}x-{pid}-0");
    let other_target = format!(".g.npz.partial-{host}-{pid}");
    for name in [&running, &elsewhere] {
        std::fs::create_dir(dir.path().join(name)).unwrap();
    }
    std::fs::write(dir.path().join(&other_target), b"x").unwrap();
    closest_ok(
        &[
            "sdf",
            fandisk.to_str().unwrap(),
            "--res",
            "16",
            "--out",
            out.to_str().unwrap(),
        ],
        &[],
    );
    let mut expected = vec![running, elsewhere, other_target, "g.zarr".to_string()];
    expected.sort();
    assert_eq!(left(), expected);
}

/// The values of a C-ordered (N, dims…) array of `values` as numpy saves it in Fortran order
/// (the first index fastest), `size` bytes each, in `big_endian` order or not.
fn fortran_bytes(values: &[f64], dims: &[usize], f32_values: bool, big_endian: bool) -> Vec<u8> {
    let row: usize = dims[1..].iter().product();
    let rows = dims[0];
    let mut order: Vec<usize> = Vec::with_capacity(values.len());
    // Fortran order: the file's flat index i + N (j + d1 l) holds C's value (i, j d2 + l).
    for c in 0..row {
        let (mut rest, mut k, mut stride) = (c, 0, row);
        for &d in &dims[1..] {
            stride /= d;
            k += (rest % d) * stride;
            rest /= d;
        }
        order.extend((0..rows).map(|i| i * row + k));
    }
    order
        .iter()
        .flat_map(|&at| match (f32_values, big_endian) {
            (true, true) => (values[at] as f32).to_be_bytes().to_vec(),
            (true, false) => (values[at] as f32).to_le_bytes().to_vec(),
            (false, true) => values[at].to_be_bytes().to_vec(),
            (false, false) => values[at].to_le_bytes().to_vec(),
        })
        .collect()
}

/// PCL's and Open3D's binary point clouds, records one after another and fields' values
/// together LZF-compressed (a float64 `x`, a float32 `y`, `z` and other fields between): the
/// same answers as the float64 `.npy` of the same positions.
#[test]
fn binary_and_compressed_pcd_clouds_read_as_the_npy() {
    let dir = Dir::new();
    let scene = dir.file("scene.json", SCENE).display().to_string();
    let mut rng = common::Rng::new(7);
    let n = 2000;
    // A grid's repeats give LZF references; a NaN row as an organised cloud's hole.
    let points: Vec<[f64; 3]> = (0..n)
        .map(|k| {
            if k == 17 {
                [f64::NAN; 3]
            } else {
                [
                    rng.range(-8.0, 8.0),
                    f64::from((k % 10) as f32 * 0.5),
                    f64::from((k / 100) as f32),
                ]
            }
        })
        .collect();
    let flat: Vec<f64> = points.iter().flatten().copied().collect();
    write_npy(
        &dir.path("p.npy"),
        "<f8",
        &[n, 3],
        &flat
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect::<Vec<u8>>(),
    );
    let run = |file: &str| {
        let out = dir.s(&format!("{file}.npz"));
        let result = closest(&[
            "query",
            "--shapes",
            &scene,
            "--points",
            &dir.s(file),
            "--out",
            &out,
        ]);
        assert!(result.status.success(), "{file}: {}", stderr(&result));
        std::fs::read(&out).unwrap()
    };
    let expected = run("p.npy");
    let header = |data: &str| {
        format!(
            "# .PCD v0.7\nVERSION 0.7\nFIELDS x normal y z label\nSIZE 8 4 4 4 2\n\
             TYPE F F F F U\nCOUNT 1 3 1 1 1\nWIDTH 100\nHEIGHT {}\nVIEWPOINT 0 0 0 1 0 0 0\n\
             POINTS {n}\nDATA {data}\n",
            n / 100
        )
        .into_bytes()
    };
    // Each field's bytes for every point, in field order.
    let fields: Vec<Vec<Vec<u8>>> = points
        .iter()
        .map(|p| {
            vec![
                p[0].to_le_bytes().to_vec(),
                [0.25f32, 0.5, 1.0]
                    .iter()
                    .flat_map(|v| v.to_le_bytes())
                    .collect(),
                (p[1] as f32).to_le_bytes().to_vec(),
                (p[2] as f32).to_le_bytes().to_vec(),
                7u16.to_le_bytes().to_vec(),
            ]
        })
        .collect();
    let mut binary = header("binary");
    binary.extend(fields.iter().flatten().flatten());
    std::fs::write(dir.path("binary.pcd"), &binary).unwrap();
    assert!(run("binary.pcd") == expected, "binary .pcd: other bytes");
    let columns: Vec<u8> = (0..5)
        .flat_map(|f| fields.iter().flat_map(move |p| p[f].clone()))
        .collect();
    let packed = closest::io::fuzz::lzf_compress(&columns);
    assert!(
        packed.len() < columns.len() / 2,
        "the test's LZF made no references"
    );
    let mut compressed = header("binary_compressed");
    compressed.extend((packed.len() as u32).to_le_bytes());
    compressed.extend((columns.len() as u32).to_le_bytes());
    compressed.extend(&packed);
    std::fs::write(dir.path("compressed.pcd"), &compressed).unwrap();
    assert!(
        run("compressed.pcd") == expected,
        "compressed .pcd: other bytes"
    );
    // Broken ones name the problem: cut short, a reference before the start, no `z`.
    std::fs::write(dir.path("short.pcd"), &binary[..binary.len() - 5]).unwrap();
    // Literal runs of 448 bytes, then a reference 8 KiB back.
    let mut far_packed: Vec<u8> = (0..14)
        .flat_map(|_| [&[31u8][..], &[0; 32]].concat())
        .collect();
    far_packed.extend([0x3f, 0xff]);
    let mut far = header("binary_compressed");
    far.extend((far_packed.len() as u32).to_le_bytes());
    far.extend((columns.len() as u32).to_le_bytes());
    far.extend(&far_packed);
    std::fs::write(dir.path("far.pcd"), &far).unwrap();
    let no_z = String::from_utf8(header("ascii"))
        .unwrap()
        .replace("normal y z label", "normal y w label");
    std::fs::write(dir.path("no_z.pcd"), no_z).unwrap();
    for (file, needles) in [
        ("short.pcd", &["short.pcd", "truncated"][..]),
        ("far.pcd", &["far.pcd", "not LZF"]),
        (
            "no_z.pcd",
            &["no_z.pcd", "no `z` field", "x, normal, y, w, label"],
        ),
    ] {
        assert_bad_input(
            &dir,
            &["query", "--shapes", &scene, "--points", &dir.s(file)],
            needles,
        );
    }
}

/// An `.npz` of the given `.npy` files, as numpy's `savez` (stored) or `savez_compressed`.
fn write_npz(path: &Path, arrays: &[(&str, &[u8])], deflated: bool) {
    use std::io::Write;
    let method = if deflated {
        zip::CompressionMethod::Deflated
    } else {
        zip::CompressionMethod::Stored
    };
    let mut zip = zip::ZipWriter::new(std::fs::File::create(path).unwrap());
    for (name, npy) in arrays {
        let options = zip::write::SimpleFileOptions::default().compression_method(method);
        zip.start_file(format!("{name}.npy"), options).unwrap();
        zip.write_all(npy).unwrap();
    }
    zip.finish().unwrap();
}

fn write_npy_ordered(path: &Path, descr: &str, fortran: bool, shape: &[usize], data: &[u8]) {
    let mut bytes = Vec::new();
    npy::write_header(&mut bytes, descr, shape).unwrap();
    if fortran {
        // "True " keeps the header's length, and its padding.
        let at = bytes.windows(5).position(|w| w == b"False").unwrap();
        bytes[at..at + 5].copy_from_slice(b"True ");
    }
    bytes.extend_from_slice(data);
    std::fs::write(path, bytes).unwrap();
}

#[test]
fn fortran_ordered_big_endian_and_half_npy_rows_are_read_as_numpy_wrote_them() {
    // pandas' `to_numpy()` of a float frame is Fortran-ordered, and `numpy.save` keeps that;
    // byte-swapped arrays save as `>f8`. Points, spheres and segments in every such layout
    // give the same bytes out as the C-ordered little-endian file, over several chunks.
    let dir = Dir::new();
    let scene = dir.file("scene.json", SCENE).display().to_string();
    let mut rng = common::Rng::new(61);
    let cases: [(&str, &[usize]); 3] = [
        ("points", &[2501, 3]),
        ("spheres", &[2501, 4]),
        ("a", &[2501, 2, 3]),
    ];
    for (what, dims) in cases {
        let values: Vec<f64> = (0..dims.iter().product::<usize>())
            .map(|k| {
                if what == "spheres" && k % 4 == 3 {
                    rng.range(0.0, 2.0)
                } else {
                    rng.range(-8.0, 8.0)
                }
            })
            .collect();
        let run = |file: &str, out: &str| {
            let job = match what {
                "points" => ["query", "--shapes", &scene, "--points", file],
                "spheres" => ["contacts", "--shapes", &scene, "--spheres", file],
                _ => ["segments", "--a", file, "--b", file],
            };
            let args: Vec<String> = ["--chunk-rows", "1000"]
                .into_iter()
                .chain(job)
                .map(String::from)
                .chain(["--out".into(), dir.s(out)])
                .collect();
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let result = closest(&args);
            assert!(
                result.status.success(),
                "{what} {file}: {}",
                stderr(&result)
            );
            std::fs::read(dir.path(out)).unwrap()
        };
        let plain: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        write_npy_ordered(&dir.path("c.npy"), "<f8", false, dims, &plain);
        let expected = run(&dir.s("c.npy"), "c.npz");
        // numpy's `savez` (one array, stored) and `savez_compressed` give the same rows.
        let npy = std::fs::read(dir.path("c.npy")).unwrap();
        for deflated in [false, true] {
            write_npz(&dir.path("c_in.npz"), &[("arr_0", &npy)], deflated);
            assert!(
                run(&dir.s("c_in.npz"), "c_out.npz") == expected,
                "{what} in a .npz (deflated {deflated}): other bytes"
            );
        }
        let plain32: Vec<u8> = values
            .iter()
            .flat_map(|v| (*v as f32).to_le_bytes())
            .collect();
        write_npy_ordered(&dir.path("c4.npy"), "<f4", false, dims, &plain32);
        let expected32 = run(&dir.s("c4.npy"), "c4.npz");
        for (descr, fortran) in [
            ("<f8", true),
            (">f8", false),
            (">f8", true),
            ("<f4", true),
            (">f4", false),
            (">f4", true),
        ] {
            let f32_values = descr.ends_with('4');
            let data = if fortran {
                fortran_bytes(&values, dims, f32_values, descr.starts_with('>'))
            } else {
                values
                    .iter()
                    .flat_map(|v| {
                        if f32_values {
                            (*v as f32).to_be_bytes().to_vec()
                        } else {
                            v.to_be_bytes().to_vec()
                        }
                    })
                    .collect()
            };
            write_npy_ordered(&dir.path("x.npy"), descr, fortran, dims, &data);
            let got = run(&dir.s("x.npy"), "x.npz");
            let want = if f32_values { &expected32 } else { &expected };
            assert!(
                &got == want,
                "{what} {descr} fortran {fortran}: other bytes"
            );
            // The same array in numpy's `savez_compressed`: a Fortran array's columns each
            // inflate forward over the chunks.
            if fortran {
                let npy = std::fs::read(dir.path("x.npy")).unwrap();
                let rows_name = match what {
                    "a" => "segments",
                    other => other,
                };
                write_npz(
                    &dir.path("x_in.npz"),
                    &[("sdf", &npy[..64]), (rows_name, &npy)],
                    true,
                );
                assert!(
                    &run(&dir.s("x_in.npz"), "x_out.npz") == want,
                    "{what} {descr} fortran in a deflated .npz: other bytes"
                );
            }
        }
        // Half floats (ML pipelines store points so) widen exactly: the same bytes out as
        // the float64 file of the same values, in either byte order.
        let halves: Vec<half::f16> = values.iter().map(|&v| half::f16::from_f64(v)).collect();
        let widened: Vec<u8> = halves
            .iter()
            .flat_map(|h| h.to_f64().to_le_bytes())
            .collect();
        write_npy_ordered(&dir.path("h8.npy"), "<f8", false, dims, &widened);
        let expected_half = run(&dir.s("h8.npy"), "h8.npz");
        for descr in ["<f2", ">f2"] {
            let data: Vec<u8> = halves
                .iter()
                .flat_map(|h| match descr {
                    "<f2" => h.to_le_bytes(),
                    _ => h.to_be_bytes(),
                })
                .collect();
            write_npy_ordered(&dir.path("h.npy"), descr, false, dims, &data);
            assert!(
                run(&dir.s("h.npy"), "h.npz") == expected_half,
                "{what} {descr}: other bytes"
            );
        }
    }
}

/// `SCENE` with a ground plane, and bodies about it, moved by `by`.
fn scene_and_bodies_at(by: [f64; 3]) -> (String, String) {
    let p = |x: f64, y: f64, z: f64| format!("[{}, {}, {}]", x + by[0], y + by[1], z + by[2]);
    let scene = format!(
        r#"{{"shapes": [
            {{"type": "sphere", "center": {}, "radius": 1}},
            {{"type": "aabb", "min": {}, "max": {}}},
            {{"type": "capsule", "a": {}, "b": {}, "radius": 0.5}},
            {{"type": "plane", "normal": [0, 1, 0], "offset": {}}}
        ]}}"#,
        p(0.0, 0.0, 0.0),
        p(1.0, 2.0, -3.0),
        p(3.0, 6.0, 3.0),
        p(-5.0, 0.0, 0.0),
        p(-5.0, 4.0, 0.0),
        by[1] - 2.0
    );
    let bodies = format!(
        r#"{{"shapes": [
            {{"type": "box", "center": {}, "half_extents": [0.5, 0.5, 0.5], "rotation": [0, 0, 0, 1]}},
            {{"type": "capsule", "a": {}, "b": {}, "radius": 0.5}},
            {{"type": "sphere", "center": {}, "radius": 0.3}}
        ]}}"#,
        p(0.1, 1.9, 0.2),
        p(1.5, 6.25, 0.0),
        p(2.5, 6.3, 0.1),
        p(-3.9, -1.4, 0.6)
    );
    (scene, bodies)
}

#[test]
fn a_scene_far_from_the_origin_answers_as_it_does_there() {
    // Its shapes and queries are moved into its own frame before they are rounded to f32:
    // 10^6 from the origin (georeferenced coordinates) the query, sphere and body jobs give
    // the distances they give at the origin, where before f32's ±0.06 there showed in each.
    let dir = Dir::new();
    let mut rng = common::Rng::new(7);
    let relative: Vec<[f64; 3]> = (0..200)
        .map(|_| {
            let p = rng.vec(-7.0, 7.0);
            [p.x, p.y, p.z]
        })
        .collect();
    let mut answers = Vec::new();
    for (name, by) in [("near", [0.0; 3]), ("far", [3.1e6, -2.2e6, 1.3e6])] {
        let (scene, bodies) = scene_and_bodies_at(by);
        let scene = dir
            .file(&format!("{name}.json"), &scene)
            .display()
            .to_string();
        let bodies = dir
            .file(&format!("{name}-bodies.json"), &bodies)
            .display()
            .to_string();
        let moved = |r: &[f64; 3]| [r[0] + by[0], r[1] + by[1], r[2] + by[2]];
        let points: Vec<[f64; 3]> = relative.iter().map(moved).collect();
        write_points(&dir.path(&format!("{name}-p.npy")), &points);
        let spheres: Vec<[f64; 4]> = (relative.iter())
            .map(|r| {
                let [x, y, z] = moved(r);
                [x, y, z, 0.5]
            })
            .collect();
        write_npy(
            &dir.path(&format!("{name}-s.npy")),
            "<f8",
            &[spheres.len(), 4],
            bytemuck::cast_slice(&spheres),
        );
        let jobs: [(&str, Vec<String>); 3] = [
            (
                "query",
                vec!["--points".into(), dir.s(&format!("{name}-p.npy"))],
            ),
            (
                "contacts",
                vec!["--spheres".into(), dir.s(&format!("{name}-s.npy"))],
            ),
            ("contacts", vec!["--bodies".into(), bodies]),
        ];
        let mut arrays = Vec::new();
        for (k, (job, input)) in jobs.iter().enumerate() {
            let out = dir.s(&format!("{name}-{k}.npz"));
            let mut args = vec![*job, "--shapes", &scene];
            args.extend(input.iter().map(String::as_str));
            args.extend(["--out", &out]);
            closest_ok(&args, &[]);
            arrays.push(read_npz(Path::new(&out)));
        }
        answers.push(arrays);
    }
    for (k, field) in ["distance", "depth", "distance"].iter().enumerate() {
        let column = |arrays: &Vec<(String, Vec<usize>, Vec<u8>)>, name: &str| {
            arrays.iter().find(|a| a.0 == name).expect(name).2.clone()
        };
        let (near, far) = (&answers[0][k], &answers[1][k]);
        assert_eq!(
            column(near, "shape"),
            column(far, "shape"),
            "job {k}: shapes"
        );
        let (near, far) = (f32s(&column(near, field)), f32s(&column(far, field)));
        for (row, (a, b)) in near.iter().zip(&far).enumerate() {
            assert!(
                (a - b).abs() <= 1e-4,
                "job {k} row {row}: {field} {b} 10^6 from the origin, {a} at it"
            );
        }
    }
}
