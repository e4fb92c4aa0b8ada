//! Mesh loading (SPEC §4): the shared test meshes in every format we read, polygons and strips,
//! and every kind of broken file (an error naming the file and the problem).

mod common;

use std::path::{Path, PathBuf};

use closest::io::load_mesh;
use closest::mesh::Mesh;
use closest::{DVec3, Error};

fn shared(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/data/meshes")
        .join(name)
}

/// Signed volume (positive for outward-facing triangles of a closed mesh).
fn volume(mesh: &Mesh) -> f64 {
    (0..mesh.triangles.len())
        .map(|t| {
            let [a, b, c] = mesh.corners(t);
            a.dot(b.cross(c)) / 6.0
        })
        .sum()
}

/// How many of `mesh`'s vertices some triangle uses.
fn used_vertices(mesh: &Mesh) -> usize {
    let used: std::collections::HashSet<u32> = mesh.triangles.iter().flatten().copied().collect();
    used.len()
}

#[test]
fn shared_meshes_load_with_their_documented_counts() {
    // Counts and volumes from ../shared/data/meshes/SOURCES.md.
    let bunny = load_mesh(&shared("stanford-bunny.obj")).unwrap();
    assert_eq!(bunny.triangles.len(), 69_451);
    // SOURCES.md counts the vertices faces use; the file declares 1,113 more, all kept.
    assert_eq!(used_vertices(&bunny), 34_834);
    assert_eq!(bunny.vertices.len(), 35_947);
    let fandisk = load_mesh(&shared("fandisk.obj")).unwrap();
    assert_eq!(fandisk.triangles.len(), 12_946);
    assert_eq!(fandisk.vertices.len(), 6_475);
    assert_eq!(used_vertices(&fandisk), 6_475);
    assert!(
        (volume(&fandisk) - 20.24).abs() < 0.01,
        "{}",
        volume(&fandisk)
    );
    let igea = load_mesh(&shared("igea.ply")).unwrap();
    assert_eq!(igea.triangles.len(), 268_686);
    assert_eq!(igea.vertices.len(), 134_345);
    let v = volume(&igea);
    assert!(
        (v - 2.785e-4).abs() < 1e-6,
        "igea volume {v}: strips decoded with the wrong winding?"
    );
    assert!(
        (0..igea.triangles.len()).all(|t| {
            let [a, b, c] = igea.triangles[t];
            a != b && b != c && a != c
        }),
        "igea's strips give no degenerate triangle"
    );
}

#[test]
fn vertices_are_kept_in_f32_exactly_where_f32_holds_them() {
    use closest::mesh::{Mesh, Vertices};
    // Binary STL coordinates are f32; the bunny's OBJ has coordinates f32 cannot hold.
    let stl = load_mesh(&shared("stanford-bunny.stl")).unwrap();
    assert!(matches!(stl.vertices, Vertices::F32(_)));
    let obj = load_mesh(&shared("stanford-bunny.obj")).unwrap();
    assert!(matches!(obj.vertices, Vertices::F64(_)));
    let triangles = vec![[0, 1, 2]];
    let exact = vec![
        DVec3::new(0.5, -0.0, 3.0),
        DVec3::new(2f64.powi(50), -2.5e-3_f32 as f64, 1.0),
        DVec3::new(0.0, 1.0, 16_777_216.0),
    ];
    let kept = Mesh::new(exact.clone(), triangles.clone(), "exact").unwrap();
    assert!(matches!(kept.vertices, Vertices::F32(_)));
    assert!(
        kept.vertices.iter().zip(&exact).all(|(a, b)| a == *b
            && a.x.to_bits() == b.x.to_bits()
            && a.y.to_bits() == b.y.to_bits())
    );
    // One coordinate off f32's grid keeps them all in f64, as given.
    let mut inexact = exact.clone();
    inexact[2].z = 16_777_217.0;
    let kept = Mesh::new(inexact.clone(), triangles, "inexact").unwrap();
    assert!(matches!(kept.vertices, Vertices::F64(_)));
    assert!(kept.vertices.iter().eq(inexact.iter().copied()));
    // Equal coordinates are equal vertices, however they are stored.
    assert_eq!(Vertices::F64(exact.clone()), Vertices::from(exact));
}

#[test]
fn stl_copies_hold_the_same_triangles_as_the_obj() {
    for name in ["stanford-bunny", "fandisk"] {
        let obj = load_mesh(&shared(&format!("{name}.obj"))).unwrap();
        let stl = load_mesh(&shared(&format!("{name}.stl"))).unwrap();
        assert_eq!(obj.triangles.len(), stl.triangles.len(), "{name}");
        // The STL's corners are welded back into the OBJ's shared vertices (those its faces
        // use: the bunny's file declares 1,113 that none does).
        assert_eq!(used_vertices(&obj), stl.vertices.len(), "{name}");
        for t in 0..obj.triangles.len() {
            let (a, b) = (obj.triangles[t], stl.triangles[t]);
            for k in 0..3 {
                for j in 0..3 {
                    assert_eq!(a[k] == a[j], b[k] == b[j], "{name} triangle {t}");
                }
            }
        }
        let (lo, hi) = obj.bounds();
        let (slo, shi) = stl.bounds();
        // STL stores f32.
        assert!(
            (lo - slo).max_abs() < 1e-6 && (hi - shi).max_abs() < 1e-6,
            "{name}"
        );
        for t in (0..obj.triangles.len()).step_by(97) {
            let (a, b) = (obj.corners(t), stl.corners(t));
            for k in 0..3 {
                assert!((a[k] - b[k]).max_abs() < 1e-6, "{name} triangle {t}");
            }
        }
    }
}

fn write(dir: &tempfile::TempDir, name: &str, bytes: &[u8]) -> PathBuf {
    let path = dir.path().join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

#[test]
fn polygons_are_fans_and_every_format_reads_a_small_mesh() {
    let dir = tempfile::tempdir().unwrap();
    let quad_obj = write(
        &dir,
        "quad.obj",
        b"# a unit quad and a triangle\nv 0 0 0\nv 1 0 0\nv 1 1 0\nv 0 1 0\nf 1 2 3 4\nf 1/1/1 2/2/2 4/4/4\n",
    );
    let m = load_mesh(&quad_obj).unwrap();
    assert_eq!(m.triangles, [[0, 1, 2], [0, 2, 3], [0, 1, 3]]);
    // A byte-order mark before the first line (it hid that vertex: an index out of range).
    let marked = write(
        &dir,
        "bom.obj",
        b"\xEF\xBB\xBFv 0 0 0\nv 1 0 0\nv 1 1 0\nf 1 2 3\n",
    );
    assert_eq!(load_mesh(&marked).unwrap().triangles, [[0, 1, 2]]);
    // Line continuations (a backslash ending a line), which tobj refused.
    let continued = write(
        &dir,
        "continued.obj",
        b"v 0 0 \\\n0\nv 1 0 0\r\nv 1 1 0\nv 0 1 0\nf 1 2 \\\r\n 3 \\\n4\n",
    );
    let m = load_mesh(&continued).unwrap();
    assert_eq!(m.triangles, [[0, 1, 2], [0, 2, 3]]);
    assert_eq!(m.vertices.get(0), DVec3::ZERO);
    let ply = write(
        &dir,
        "quad.ply",
        b"ply\nformat ascii 1.0\nelement vertex 4\nproperty float x\nproperty float y\nproperty float z\n\
          element face 1\nproperty list uchar int vertex_indices\nend_header\n\
          0 0 0\n1 0 0\n1 1 0\n0 1 0\n4 0 1 2 3\n",
    );
    let m = load_mesh(&ply).unwrap();
    assert_eq!(m.triangles, [[0, 1, 2], [0, 2, 3]]);
    assert_eq!(m.vertices.get(2), DVec3::new(1.0, 1.0, 0.0));
    let stl = write(
        &dir,
        "tri.stl",
        b"solid t\nfacet normal 0 0 1\nouter loop\nvertex 0 0 0\nvertex 2 0 0\nvertex 0 2 0\nendloop\nendfacet\nendsolid t\n",
    );
    let m = load_mesh(&stl).unwrap();
    assert_eq!(m.triangles.len(), 1);
    assert_eq!(m.corners(0)[1], DVec3::new(2.0, 0.0, 0.0));
    // ASCII STL as exporters write it: no solid name, upper-case keywords, CRLF, two solids,
    // corners shared between facets welded (−0 as +0).
    let exported = write(
        &dir,
        "exported.stl",
        b"solid\r\nFACET NORMAL 0 0 1\r\n OUTER LOOP\r\n  VERTEX 0 0 0\r\n  VERTEX 2 0 0\r\n  \
          VERTEX 0 2 0\r\n ENDLOOP\r\nENDFACET\r\nENDSOLID\r\nsolid second\nfacet normal 0 0 1\n\
          outer loop\nvertex 2 0 0\nvertex 2 2 -0\nvertex 0 2 0\nendloop\nendfacet\nendsolid second\n",
    );
    let m = load_mesh(&exported).unwrap();
    assert_eq!(m.triangles, [[0, 1, 2], [1, 3, 2]]);
    assert_eq!(m.vertices.get(3), DVec3::new(2.0, 2.0, 0.0));
    // Degenerate triangles are kept.
    let degenerate = write(&dir, "d.obj", b"v 0 0 0\nv 1 1 1\nf 1 1 2\nf 1 2 2\n");
    assert_eq!(load_mesh(&degenerate).unwrap().triangles.len(), 2);
}

/// OFF as ModelNet and other exporters write it reads as the OBJ of the same mesh: the
/// counts on their own line or run on to the keyword, comments, colours after a face's
/// corners or a vertex's position (COFF), normals (NOFF), polygons as fans.
#[test]
fn off_files_read_as_the_same_mesh_in_obj() {
    let dir = tempfile::tempdir().unwrap();
    let quad_obj = write(
        &dir,
        "quad.obj",
        b"v 0 0 0\nv 1 0 0\nv 1 1 0\nv 0 1 0\nv 0.5 0.5 1\nf 1 2 3 4\nf 1 2 5\n",
    );
    let expected = load_mesh(&quad_obj).unwrap();
    for (name, text) in [
        (
            "plain.off",
            &b"OFF\n# a quad and a triangle\n5 2 0\n0 0 0\n1 0 0\n1 1 0\n0 1 0\n0.5 0.5 1\n\
               4 0 1 2 3\n3 0 1 4\n"[..],
        ),
        (
            "modelnet.off",
            b"OFF5 2 0\n0 0 0\n1 0 0\n1 1 0\n0 1 0\n0.5 0.5 1\n4 0 1 2 3\n3 0 1 4\n",
        ),
        (
            "coloured.off",
            b"\xEF\xBB\xBFCOFF\r\n\r\n5 2 7\r\n0 0 0 255 0 0 255\r\n1 0 0 255 0 0 255\r\n\
              1 1 0 0 0 0 0\r\n0 1 0 1 1 1 1\r\n0.5 0.5 1 0 0 0 0\r\n  4  0 1 2 3 0.5 0.5 0.5\r\n\
              3 0 1 4 # and a comment\r\n",
        ),
        (
            "normals.OFF",
            b"NOFF 5 2 0\n0 0 0 0 0 1\n1 0 0 0 0 1\n1 1 0 0 0 1\n0 1 0 0 0 1\n0.5 0.5 1 0 0 1\n\
              4 0 1 2 3\n3 0 1 4\n",
        ),
    ] {
        let m = load_mesh(&write(&dir, name, text)).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(m.triangles, expected.triangles, "{name}");
        assert_eq!(m.vertices, expected.vertices, "{name}");
    }
    // Numbers in every notation.
    let scaled = write(
        &dir,
        "big.off",
        b"OFF\n3 1 0\n-1.5e2 2.25 3E-1\n1 0 0\n0 1 0\n3 0 1 2\n",
    );
    let m = load_mesh(&scaled).unwrap();
    assert_eq!(m.vertices.get(0), DVec3::new(-150.0, 2.25, 0.3));
}

#[test]
fn broken_off_files_name_the_line_and_the_problem() {
    let dir = tempfile::tempdir().unwrap();
    for (name, text, needles) in [
        ("empty.off", &b""[..], &["OFF", "empty"][..]),
        (
            "keyword.off",
            b"OFX\n3 1 0\n",
            &["line 1", "keyword OFF", "OFX"],
        ),
        (
            "counts.off",
            b"OFF\nthree 1 0\n",
            &["line 2", "vertex count"],
        ),
        (
            "no-counts.off",
            b"OFF\n# nothing else\n",
            &["ends before its counts"],
        ),
        (
            "short.off",
            b"OFF\n4 1 0\n0 0 0\n1 0 0\n",
            &["declares 4 vertices", "after 2"],
        ),
        (
            "vertex.off",
            b"OFF\n3 1 0\n0 0 0\n1 0\n0 1 0\n3 0 1 2\n",
            &["line 4", "vertex 1", "three numbers"],
        ),
        (
            "faces.off",
            b"OFF\n3 2 0\n0 0 0\n1 0 0\n0 1 0\n3 0 1 2\n",
            &["declares 2 faces", "after 1"],
        ),
        (
            "index.off",
            b"OFF\n3 1 0\n0 0 0\n1 0 0\n0 1 0\n3 0 1 3\n",
            &["line 6", "face 0", "`3`", "below 3"],
        ),
        (
            "negative.off",
            b"OFF\n3 1 0\n0 0 0\n1 0 0\n0 1 0\n3 0 1 -1\n",
            &["face 0", "`-1`"],
        ),
        (
            "corners.off",
            b"OFF\n3 1 0\n0 0 0\n1 0 0\n0 1 0\n2 0 1\n",
            &["face 0", "at least three corners"],
        ),
        (
            "listed.off",
            b"OFF\n3 1 0\n0 0 0\n1 0 0\n0 1 0\n4 0 1 2\n",
            &["face 0", "declares 4 and lists 3"],
        ),
        (
            "binary.off",
            b"OFF BINARY\n\0\0\0\x03",
            &["binary OFF", "text"],
        ),
        (
            "nan.off",
            b"OFF\n3 1 0\nnan 0 0\n1 0 0\n0 1 0\n3 0 1 2\n",
            &["vertex 0", "finite"],
        ),
        // A count far beyond the file is refused at its end, not allocated.
        (
            "huge.off",
            b"OFF\n18446744073709551615 1 0\n0 0 0\n",
            &["declares 18446744073709551615 vertices"],
        ),
    ] {
        assert_bad(&write(&dir, name, text), needles);
    }
}

/// A `.glb` of `document` and its binary chunk, as exporters write one.
fn glb(document: &serde_json::Value, binary: &[u8]) -> Vec<u8> {
    let mut text = serde_json::to_vec(document).unwrap();
    text.resize(text.len().next_multiple_of(4), b' ');
    let mut binary = binary.to_vec();
    binary.resize(binary.len().next_multiple_of(4), 0);
    let mut chunks = Vec::new();
    for (kind, data) in [(0x4E4F_534Au32, &text), (0x004E_4942, &binary)] {
        chunks.extend((data.len() as u32).to_le_bytes());
        chunks.extend(kind.to_le_bytes());
        chunks.extend(data);
    }
    let mut out = b"glTF".to_vec();
    out.extend(2u32.to_le_bytes());
    out.extend((12 + chunks.len() as u32).to_le_bytes());
    out.extend(chunks);
    out
}

/// A unit square's four corners (f32), its two triangles' u16 indices, a strip's and a fan's
/// u8 indices, and the corners as normalized i16 (KHR_mesh_quantization), in one buffer.
fn square_buffer() -> (Vec<u8>, serde_json::Value) {
    let corners: [[f32; 3]; 4] = [
        [0.0, 0.0, 0.0],
        [1.0, 0.0, 0.0],
        [1.0, 1.0, 0.0],
        [0.0, 1.0, 0.0],
    ];
    let mut bytes: Vec<u8> = corners
        .iter()
        .flatten()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    bytes.extend([0u16, 1, 2, 0, 2, 3].iter().flat_map(|i| i.to_le_bytes()));
    bytes.extend([0u8, 1, 3, 2, 0, 1, 2, 3, 0, 0, 0, 0]); // strip (4), fan (4), padding
    // Quantized corners at a stride of 8 bytes (6 used), as quantizers align them.
    for c in corners {
        for v in c {
            bytes.extend(((v * 32767.0) as i16).to_le_bytes());
        }
        bytes.extend([0, 0]);
    }
    let views = serde_json::json!([
        {"buffer": 0, "byteLength": 48},
        {"buffer": 0, "byteOffset": 48, "byteLength": 12},
        {"buffer": 0, "byteOffset": 60, "byteLength": 8},
        {"buffer": 0, "byteOffset": 72, "byteLength": 32, "byteStride": 8},
    ]);
    (bytes, views)
}

#[test]
fn gltf_files_place_their_nodes_meshes_as_the_same_triangles() {
    let dir = tempfile::tempdir().unwrap();
    let (binary, views) = square_buffer();
    let half = std::f64::consts::FRAC_1_SQRT_2;
    let document = serde_json::json!({
        "asset": {"version": "2.0"},
        "scene": 0,
        "scenes": [{"nodes": [0, 2]}],
        "nodes": [
            {"translation": [10.0, 0.0, 0.0], "children": [1]},
            {"mesh": 0, "rotation": [0.0, 0.0, half, half], "scale": [2.0, 2.0, 2.0]},
            {"mesh": 1, "matrix": [1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 5, 1]},
            {"mesh": 0, "translation": [99.0, 0.0, 0.0]},
        ],
        "meshes": [
            {"primitives": [
                {"attributes": {"POSITION": 0}, "indices": 1},
                {"attributes": {"POSITION": 0}, "indices": 2, "mode": 5},
                {"attributes": {"POSITION": 0}, "mode": 1},
            ]},
            {"primitives": [
                {"attributes": {"POSITION": 4}, "indices": 3, "mode": 6},
            ]},
        ],
        "accessors": [
            {"bufferView": 0, "componentType": 5126, "count": 4, "type": "VEC3"},
            {"bufferView": 1, "componentType": 5123, "count": 6, "type": "SCALAR"},
            {"bufferView": 2, "componentType": 5121, "count": 4, "type": "SCALAR"},
            {"bufferView": 2, "byteOffset": 4, "componentType": 5121, "count": 4, "type": "SCALAR"},
            {"bufferView": 3, "componentType": 5122, "normalized": true, "count": 4, "type": "VEC3"},
        ],
        "bufferViews": views,
        "buffers": [{"byteLength": binary.len()}],
    });
    // Node 1: x → 10 + 2·(−y), y → 2·x (a quarter turn about z after doubling); node 2: z + 5
    // (a mesh node 3 would place is in no scene). The strip's second triangle turns back.
    let obj = b"v 10 0 0\nv 10 2 0\nv 8 2 0\nv 8 0 0\n\
                v 0 0 5\nv 1 0 5\nv 1 1 5\nv 0 1 5\n\
                f 1 2 3\nf 1 3 4\nf 1 2 4\nf 2 3 4\nf 6 7 5\nf 7 8 5\n";
    let expected = load_mesh(&write(&dir, "expected.obj", obj)).unwrap();
    let check = |m: &Mesh, name: &str| {
        assert_eq!(m.triangles, expected.triangles, "{name}");
        assert_eq!(m.vertices.len(), expected.vertices.len(), "{name}");
        for k in 0..m.vertices.len() {
            let (got, want) = (m.vertices.get(k), expected.vertices.get(k));
            assert!(
                (got - want).length() < 1e-12,
                "{name}: vertex {k}: {got:?}, not {want:?}"
            );
        }
    };
    let binary_file = write(&dir, "square.glb", &glb(&document, &binary));
    check(&load_mesh(&binary_file).unwrap(), "square.glb");
    // The same as text, its buffer a base64 data: URI (Python's base64 writes it so).
    let mut text = document.clone();
    text["buffers"][0]["uri"] =
        format!("data:application/octet-stream;base64,{}", base64(&binary)).into();
    let mut text_bytes = b"\xEF\xBB\xBF".to_vec(); // a byte-order mark, as some exporters write
    text_bytes.extend(serde_json::to_vec(&text).unwrap());
    let text_file = write(&dir, "square.gltf", &text_bytes);
    check(&load_mesh(&text_file).unwrap(), "square.gltf");
    // And with its buffer in a file beside it, the URI %-escaped (as Sketchfab's scene.bin).
    write(&dir, "square data.bin", &binary);
    text["buffers"][0]["uri"] = "square%20data.bin".into();
    let beside = write(&dir, "beside.gltf", &serde_json::to_vec(&text).unwrap());
    check(&load_mesh(&beside).unwrap(), "beside.gltf");
    // Without scenes, every root node is placed (node 3 too).
    let mut bare = document.clone();
    bare.as_object_mut().unwrap().remove("scenes");
    bare.as_object_mut().unwrap().remove("scene");
    let m = load_mesh(&write(&dir, "bare.glb", &glb(&bare, &binary))).unwrap();
    assert_eq!(m.triangles.len(), expected.triangles.len() + 4);
    assert_eq!(m.vertices.get(8), DVec3::new(99.0, 0.0, 0.0));
}

/// A unit tetrahedron's corners (f32) and its triangles, facing out.
const TETRA_CORNERS: [f32; 12] = [0., 0., 0., 1., 0., 0., 0., 1., 0., 0., 0., 1.];
const TETRA_INDICES: [u16; 12] = [0, 2, 1, 0, 1, 3, 0, 3, 2, 1, 2, 3];

fn le_bytes(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

/// A mirrored placement (a negative scale, as exporters write a mirrored half) turns its
/// triangles round, as glTF says: a closed tetrahedron placed plain, mirrored in x, and turned
/// inside out by a matrix (−I) keeps its volume positive each time, so its signs hold.
#[test]
fn mirrored_gltf_nodes_keep_their_triangles_facing_out() {
    let dir = tempfile::tempdir().unwrap();
    let mut binary = le_bytes(&TETRA_CORNERS);
    binary.extend(TETRA_INDICES.iter().flat_map(|i| i.to_le_bytes()));
    let document = |roots: &[u32], nodes: serde_json::Value| {
        serde_json::json!({
            "asset": {"version": "2.0"},
            "scenes": [{"nodes": roots}],
            "nodes": nodes,
            "meshes": [{"primitives": [{"attributes": {"POSITION": 0}, "indices": 1}]}],
            "accessors": [
                {"bufferView": 0, "componentType": 5126, "count": 4, "type": "VEC3"},
                {"bufferView": 1, "componentType": 5123, "count": 12, "type": "SCALAR"},
            ],
            "bufferViews": [
                {"buffer": 0, "byteLength": 48},
                {"buffer": 0, "byteOffset": 48, "byteLength": 24},
            ],
            "buffers": [{"byteLength": binary.len()}],
        })
    };
    let plain = document(&[0], serde_json::json!([{"mesh": 0}]));
    let one = volume(&load_mesh(&write(&dir, "plain.glb", &glb(&plain, &binary))).unwrap());
    assert!((one - 1.0 / 6.0).abs() < 1e-12, "{one}");
    // Node 3's mirror and its child's undo each other.
    let placed = document(
        &[0, 1, 2, 3],
        serde_json::json!([
            {"mesh": 0},
            {"mesh": 0, "scale": [-1, 1, 1], "translation": [5, 0, 0]},
            {"mesh": 0, "matrix": [-1, 0, 0, 0, 0, -1, 0, 0, 0, 0, -1, 0, 0, 9, 0, 1]},
            {"scale": [1, -1, 1], "children": [4]},
            {"mesh": 0, "scale": [1, -1, 1], "translation": [0, 0, 7]},
        ]),
    );
    let m = load_mesh(&write(&dir, "mirrored.glb", &glb(&placed, &binary))).unwrap();
    assert_eq!(m.triangles.len(), 16);
    for part in 0..4 {
        let mut alone = m.clone();
        alone.triangles = m.triangles[4 * part..4 * part + 4].to_vec();
        let v = volume(&alone);
        assert!(
            (v - 1.0 / 6.0).abs() < 1e-12,
            "placement {part}: volume {v}"
        );
    }
}

/// `EXT_mesh_gpu_instancing` (gltfpack's `-mi` writes it): a node's mesh placed once per
/// instance, each instance's translation · rotation · scale under the node's transform.
#[test]
fn instanced_gltf_nodes_place_their_mesh_once_per_instance() {
    let dir = tempfile::tempdir().unwrap();
    let translations: [f32; 9] = [0., 0., 0., 10., 0., 0., 0., 20., 0.];
    // Identity, a quarter turn about z, and identity.
    let half = std::f32::consts::FRAC_1_SQRT_2;
    let rotations: [f32; 12] = [0., 0., 0., 1., 0., 0., half, half, 0., 0., 0., 1.];
    let scales: [f32; 9] = [1., 1., 1., 2., 2., 2., -1., 1., 1.];
    let mut binary = le_bytes(&[&TETRA_CORNERS[..], &translations, &rotations, &scales].concat());
    binary.extend(TETRA_INDICES.iter().flat_map(|i| i.to_le_bytes()));
    let document = serde_json::json!({
        "asset": {"version": "2.0"},
        "extensionsUsed": ["EXT_mesh_gpu_instancing"],
        "scenes": [{"nodes": [0]}],
        "nodes": [{"mesh": 0, "translation": [0, 0, 100], "extensions": {"EXT_mesh_gpu_instancing":
            {"attributes": {"TRANSLATION": 2, "ROTATION": 3, "SCALE": 4}}}}],
        "meshes": [{"primitives": [{"attributes": {"POSITION": 0}, "indices": 1}]}],
        "accessors": [
            {"bufferView": 0, "componentType": 5126, "count": 4, "type": "VEC3"},
            {"bufferView": 4, "componentType": 5123, "count": 12, "type": "SCALAR"},
            {"bufferView": 1, "componentType": 5126, "count": 3, "type": "VEC3"},
            {"bufferView": 2, "componentType": 5126, "count": 3, "type": "VEC4"},
            {"bufferView": 3, "componentType": 5126, "count": 3, "type": "VEC3"},
        ],
        "bufferViews": [
            {"buffer": 0, "byteLength": 48},
            {"buffer": 0, "byteOffset": 48, "byteLength": 36},
            {"buffer": 0, "byteOffset": 84, "byteLength": 48},
            {"buffer": 0, "byteOffset": 132, "byteLength": 36},
            {"buffer": 0, "byteOffset": 168, "byteLength": 24},
        ],
        "buffers": [{"byteLength": binary.len()}],
    });
    let m = load_mesh(&write(&dir, "instanced.glb", &glb(&document, &binary))).unwrap();
    assert_eq!((m.vertices.len(), m.triangles.len()), (12, 12));
    let expected = [
        [0., 0., 100.],
        [1., 0., 100.],
        [0., 1., 100.],
        [0., 0., 101.],
        // Doubled, turned a quarter about z (x → y, y → −x), moved by 10 in x.
        [10., 0., 100.],
        [10., 2., 100.],
        [8., 0., 100.],
        [10., 0., 102.],
        // Mirrored in x, moved by 20 in y.
        [0., 20., 100.],
        [-1., 20., 100.],
        [0., 21., 100.],
        [0., 20., 101.],
    ];
    for (k, want) in expected.iter().enumerate() {
        let got = m.vertices.get(k);
        assert!(
            (got - DVec3::new(want[0], want[1], want[2])).length() < 1e-6,
            "vertex {k}: {got:?}, not {want:?}"
        );
    }
    for part in 0..3 {
        let mut alone = m.clone();
        alone.triangles = m.triangles[4 * part..4 * part + 4].to_vec();
        assert!(volume(&alone) > 0.0, "instance {part} faces in");
    }
    // Counts that differ are refused by name.
    let mut uneven = document.clone();
    uneven["accessors"][4]["count"] = 2.into();
    let err = load_mesh(&write(&dir, "uneven.glb", &glb(&uneven, &binary))).unwrap_err();
    assert!(
        err.to_string().contains("EXT_mesh_gpu_instancing") && err.to_string().contains("counts"),
        "{err}"
    );
}

fn base64(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for group in bytes.chunks(3) {
        let word = group
            .iter()
            .enumerate()
            .fold(0u32, |w, (k, &b)| w | (b as u32) << (16 - 8 * k));
        for k in 0..=group.len() {
            out.push(DIGITS[(word >> (18 - 6 * k) & 63) as usize] as char);
        }
    }
    while !out.len().is_multiple_of(4) {
        out.push('=');
    }
    out
}

#[test]
fn broken_gltf_files_name_the_field_and_the_problem() {
    let dir = tempfile::tempdir().unwrap();
    let (binary, views) = square_buffer();
    let good = serde_json::json!({
        "asset": {"version": "2.0"},
        "scenes": [{"nodes": [0]}],
        "nodes": [{"mesh": 0}],
        "meshes": [{"primitives": [{"attributes": {"POSITION": 0}, "indices": 1}]}],
        "accessors": [
            {"bufferView": 0, "componentType": 5126, "count": 4, "type": "VEC3"},
            {"bufferView": 1, "componentType": 5123, "count": 6, "type": "SCALAR"},
        ],
        "bufferViews": views,
        "buffers": [{"byteLength": binary.len()}],
    });
    load_mesh(&write(&dir, "good.glb", &glb(&good, &binary))).expect("the base case reads");
    // The base case with `value` set at `path` (a JSON pointer; its last key may be new).
    let changed = |path: &str, value: serde_json::Value| {
        let mut document = good.clone();
        let (parent, key) = path.rsplit_once('/').unwrap();
        match document
            .pointer_mut(parent)
            .unwrap_or_else(|| panic!("{path}"))
        {
            serde_json::Value::Array(items) => items[key.parse::<usize>().unwrap()] = value,
            object => object[key] = value,
        }
        glb(&document, &binary)
    };
    let whole = glb(&good, &binary);
    let mut version_1 = whole.clone();
    version_1[4] = 1;
    let mut long = whole.clone();
    long[8..12].copy_from_slice(&(whole.len() as u32 + 4).to_le_bytes());
    let json = serde_json::json!({"buffers": [{"byteLength": 4}]});
    let external = serde_json::json!([{"byteLength": 104, "uri": "square.bin"}]);
    let cases: Vec<(&str, Vec<u8>, &[&str])> = vec![
        (
            "header.glb",
            b"glTF\x02\0".to_vec(),
            &["GLB", "12-byte header"],
        ),
        ("version.glb", version_1, &["version 1"]),
        ("cut.glb", long, &["cut short", "says"]),
        (
            "json.glb",
            b"glTF\x02\0\0\0\x14\0\0\0\x00\0\0\0JSON".to_vec(),
            &["JSON"],
        ),
        (
            "text.gltf",
            b"{\"asset\": ".to_vec(),
            &["not a valid glTF file", "JSON"],
        ),
        (
            "count.glb",
            changed("/accessors/0/count", 5.into()),
            &["accessors[0]", "do not fit", "bufferViews[0]"],
        ),
        (
            "index.glb",
            changed("/accessors/1/count", 9.into()),
            &["accessors[1]", "do not fit"],
        ),
        (
            "past.glb",
            changed("/accessors/0/count", 2.into()),
            &[
                "accessors[1]",
                "element 2 is vertex 2",
                "past the 2 positions",
            ],
        ),
        (
            "whole.glb",
            changed("/accessors/1/count", 5.into()),
            &["meshes[0].primitives[0]", "5 corners", "whole triangles"],
        ),
        (
            "cycle.glb",
            changed("/nodes/0/children", serde_json::json!([0])),
            &["nodes[0]", "reached twice"],
        ),
        (
            "node.glb",
            changed("/scenes/0/nodes", serde_json::json!([7])),
            &["nodes[7]", "no such node"],
        ),
        (
            "mesh.glb",
            changed("/nodes/0/mesh", 3.into()),
            &["meshes[3]", "no such mesh"],
        ),
        (
            "turn.glb",
            changed("/nodes/0/rotation", serde_json::json!([0, 0, 0, 0])),
            &["nodes[0].rotation", "zero quaternion"],
        ),
        (
            "matrix.glb",
            changed("/nodes/0/matrix", serde_json::json!([1, 2])),
            &["nodes[0].matrix", "16 finite numbers"],
        ),
        (
            "mode.glb",
            changed("/meshes/0/primitives/0/mode", 9.into()),
            &["primitives[0].mode", "9"],
        ),
        (
            "kind.glb",
            changed("/accessors/0/type", "VEC2".into()),
            &["accessors[0]", "VEC3"],
        ),
        (
            "stride.glb",
            changed("/bufferViews/0/byteStride", 4.into()),
            &["bufferViews[0].byteStride", "12-byte elements"],
        ),
        (
            "sparse.glb",
            changed("/accessors/0/sparse", serde_json::json!({"count": 1})),
            &["accessors[0].sparse", "not read"],
        ),
        (
            "draco.glb",
            changed(
                "/extensionsRequired",
                serde_json::json!(["KHR_draco_mesh_compression"]),
            ),
            &["KHR_draco_mesh_compression", "compressed geometry"],
        ),
        (
            "external.glb",
            changed("/buffers", external),
            &["buffers[0].uri", "cannot read", "square.bin"],
        ),
        (
            "short.glb",
            glb(&good, &binary[..40]),
            &["buffers[0]", "byteLength 104", "holds 40 bytes"],
        ),
        (
            "view.glb",
            changed("/bufferViews/0/byteLength", 4000.into()),
            &["bufferViews[0]", "past its buffer"],
        ),
        (
            "buffer.gltf",
            serde_json::to_vec(&json).unwrap(),
            &["buffers[0]", "no uri"],
        ),
        (
            "points.glb",
            changed("/meshes/0/primitives/0/mode", 0.into()),
            &["no triangles"],
        ),
        (
            "zeros.glb",
            changed(
                "/accessors/0",
                serde_json::json!({"componentType": 5126, "count": 4000000000u64, "type": "VEC3"}),
            ),
            &["accessors[0] (POSITION of meshes[0].primitives[0]): no bufferView"],
        ),
    ];
    for (name, bytes, needles) in cases {
        assert_bad(&write(&dir, name, &bytes), needles);
    }
    // A long wrong value is shown cut, not whole.
    let long = changed("/nodes/0/matrix", serde_json::json!(vec![1; 100_000]));
    let message = load_mesh(&write(&dir, "long.glb", &long))
        .unwrap_err()
        .to_string();
    assert!(
        message.contains("16 finite numbers") && message.len() < 400,
        "{message}"
    );
    // A file that came alone (the service's upload) may place its meshes at most 16 times its
    // own bytes over: 1,000 nodes placing one 10,000-vertex mesh would be 240 MB from 140 kB.
    let vertices: Vec<u8> = (0..10_000u32)
        .flat_map(|k| [k as f32, (k % 7) as f32, 0.0])
        .flat_map(f32::to_le_bytes)
        .collect();
    let nodes: Vec<serde_json::Value> = (0..1000).map(|_| serde_json::json!({"mesh": 0})).collect();
    let many = serde_json::json!({
        "asset": {"version": "2.0"},
        "nodes": nodes,
        "meshes": [{"primitives": [{"attributes": {"POSITION": 0}}]}],
        "accessors": [{"bufferView": 0, "componentType": 5126, "count": 9999, "type": "VEC3"}],
        "bufferViews": [{"buffer": 0, "byteLength": vertices.len()}],
        "buffers": [{"byteLength": vertices.len()}],
    });
    let bytes = glb(&many, &vertices);
    let upload = closest::io::read_mesh(
        &mut std::io::Cursor::new(&bytes),
        closest::io::MeshFormat::Gltf,
        "body",
    )
    .expect_err("an upload placing 240 MB");
    assert!(
        upload.to_string().contains("16 times its own size"),
        "{upload}"
    );
    // From a file, the same scene is read.
    let m = load_mesh(&write(&dir, "many.glb", &bytes)).unwrap();
    assert_eq!(m.triangles.len(), 3333 * 1000);
    // Instancing accessors may be shared: 2,000 nodes each placing the mesh at the 10,000
    // positions of one accessor would be 2·10^7 placements (2 GB of transforms alone) from
    // 240 kB. Refused before they are made, naming the node.
    let instanced: Vec<serde_json::Value> = (0..2000)
        .map(|_| {
            serde_json::json!({"mesh": 0, "extensions": {"EXT_mesh_gpu_instancing":
                {"attributes": {"TRANSLATION": 1}}}})
        })
        .collect();
    let mut shared = many.clone();
    shared["nodes"] = instanced.into();
    shared["accessors"] = serde_json::json!([
        {"bufferView": 0, "componentType": 5126, "count": 3, "type": "VEC3"},
        {"bufferView": 0, "componentType": 5126, "count": 10_000, "type": "VEC3"},
    ]);
    let upload = closest::io::read_mesh(
        &mut std::io::Cursor::new(glb(&shared, &vertices)),
        closest::io::MeshFormat::Gltf,
        "body",
    )
    .expect_err("an upload placing a mesh 2·10^7 times");
    assert!(
        upload.to_string().contains("placements") && upload.to_string().contains("nodes["),
        "{upload}"
    );
}

#[test]
fn a_text_line_too_long_for_any_statement_is_refused_not_held() {
    // A file of one endless line (a comment, or a line continued forever) was read whole
    // into memory; lines are now read up to 64 MiB, far beyond any real statement.
    let dir = tempfile::tempdir().unwrap();
    let long = |head: &str, filler: u8, tail: &str| {
        let mut bytes = head.as_bytes().to_vec();
        bytes.resize(bytes.len() + (64 << 20) + 10, filler);
        bytes.extend_from_slice(tail.as_bytes());
        bytes
    };
    let cases: [(&str, Vec<u8>, &str); 5] = [
        (
            "comment.obj",
            long("v 0 0 0\nv 1 0 0\nv 0 1 0\n# ", b'a', "\nf 1 2 3\n"),
            "not a valid OBJ file: line 4 is longer than 64 MiB",
        ),
        // Each continued line adds two bytes to the statement (its backslash becomes a space).
        (
            "continued.obj",
            [
                b"v 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 3 \\\n".to_vec(),
                b" \\\n".repeat(33 << 20),
            ]
            .concat(),
            "not a valid OBJ file: line 4 is longer than 64 MiB",
        ),
        (
            "long.stl",
            long("solid s\nfacet normal 0 0 1 ", b' ', "\nendsolid s\n"),
            "not a valid ASCII STL file: line 2 is longer than 64 MiB",
        ),
        (
            "header.ply",
            long("ply\nformat ascii 1.0\ncomment ", b'a', "\nend_header\n"),
            "not a valid PLY file",
        ),
        (
            "payload.ply",
            long(
                "ply\nformat ascii 1.0\nelement vertex 3\nproperty float x\nproperty float y\n\
                 property float z\nelement face 1\nproperty list uchar int vertex_indices\n\
                 end_header\n0 0 0 ",
                b' ',
                "\n1 0 0\n0 1 0\n3 0 1 2\n",
            ),
            "not a valid PLY file",
        ),
    ];
    for (name, bytes, needle) in cases {
        let path = write(&dir, name, &bytes);
        let message = load_mesh(&path)
            .err()
            .unwrap_or_else(|| panic!("{name}: read"))
            .to_string();
        assert!(message.contains(&format!("{name}: {needle}")), "{message}");
        assert!(message.contains("longer than 64 MiB"), "{message}");
    }
    // A long line below the cap is read as before.
    let fine = write(
        &dir,
        "fine.obj",
        &[
            b"v 0 0 0\nv 1 0 0\nv 0 1 0\n# ".to_vec(),
            vec![b'a'; 1 << 20],
            b"\nf 1 2 3\n".to_vec(),
        ]
        .concat(),
    );
    assert_eq!(load_mesh(&fine).unwrap().triangles, [[0, 1, 2]]);
}

#[test]
fn obj_vertices_keep_the_files_indices() {
    // Per-vertex outputs (`closest distance`'s deviations) are indexed as the file's vertices.
    // tobj numbered them by first use within each group and object: vertices used out of
    // order came back reordered, unused ones dropped and those shared by two groups doubled.
    let dir = tempfile::tempdir().unwrap();
    let text = b"v 0 0 0\nv 1 0 0\nv 0 1 0\nv 0 0 9\nv 7 7 7 # unused\ng top\nf 3 2 4\n\
                 o bottom\nf 1 2 3 # a comment\nf -5 -4 -3\n";
    let m = load_mesh(&write(&dir, "order.obj", text)).unwrap();
    assert_eq!(m.vertices.len(), 5);
    for (k, v) in [
        [0., 0., 0.],
        [1., 0., 0.],
        [0., 1., 0.],
        [0., 0., 9.],
        [7., 7., 7.],
    ]
    .iter()
    .enumerate()
    {
        assert_eq!(m.vertices.get(k), DVec3::from_array(*v), "vertex {k}");
    }
    assert_eq!(m.triangles, [[2, 1, 3], [0, 1, 2], [0, 1, 2]]);
}

fn assert_bad(path: &Path, needles: &[&str]) {
    let err = load_mesh(path).expect_err("a broken mesh must not load");
    assert_eq!(err.exit_code(), 2, "{err}");
    let msg = err.to_string();
    assert!(
        msg.contains(&path.display().to_string()),
        "no file name in: {msg}"
    );
    for needle in needles {
        assert!(msg.contains(needle), "`{needle}` not in: {msg}");
    }
    assert!(
        matches!(err, Error::BadFile { .. } | Error::Read { .. }),
        "{err:?}"
    );
}

/// A mesh saved under another format's extension (a binary STL as `.obj` reads as an OBJ of no
/// triangles) is refused as before, and the message says what its bytes look like; a file
/// that is broken in its own format gets no such hint.
#[test]
fn a_mesh_under_another_formats_extension_says_what_its_bytes_look_like() {
    let dir = tempfile::tempdir().unwrap();
    let read = |name: &str| std::fs::read(shared(name)).unwrap();
    let off = b"OFF\n3 1 0\n0 0 0\n1 0 0\n0 1 0\n3 0 1 2\n".to_vec();
    let ply = b"ply\nformat ascii 1.0\nelement vertex 3\nproperty float x\nproperty float y\n\
                property float z\nelement face 1\nproperty list uchar int vertex_indices\n\
                end_header\n0 0 0\n1 0 0\n0 1 0\n3 0 1 2\n"
        .to_vec();
    let ascii_stl = b"solid t\nfacet normal 0 0 1\nouter loop\nvertex 0 0 0\nvertex 2 0 0\n\
                      vertex 0 2 0\nendloop\nendfacet\nendsolid t\n"
        .to_vec();
    let glb = glb(
        &serde_json::json!({"asset": {"version": "2.0"}, "meshes": []}),
        &[],
    );
    for (name, bytes, looks) in [
        ("binary-stl.obj", read("fandisk.stl"), "STL, not OBJ"),
        ("ascii-stl.obj", ascii_stl, "STL, not OBJ"),
        ("obj.stl", read("fandisk.obj"), "OBJ, not STL"),
        ("ply.obj", ply, "PLY, not OBJ"),
        ("off.stl", off, "OFF, not STL"),
        ("glb.ply", glb, "glTF, not PLY"),
    ] {
        assert_bad(&write(&dir, name, &bytes), &[looks]);
    }
    let own = load_mesh(&write(&dir, "empty.obj", b"v 0 0 0\nv 1 0 0\n")).unwrap_err();
    assert!(!own.to_string().contains("look like"), "{own}");
}

#[test]
fn broken_meshes_name_the_file_and_the_problem() {
    let dir = tempfile::tempdir().unwrap();
    assert_bad(
        &write(&dir, "range.obj", b"v 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 9\n"),
        &["OBJ"],
    );
    assert_bad(
        &write(&dir, "empty.obj", b"v 0 0 0\nv 1 0 0\n"),
        &[
            "no triangles",
            "only 2 vertices: a point cloud",
            "`--points`",
        ],
    );
    // Indices that cannot be (a panic the OBJ fuzzer found in tobj) are refused as the file is
    // read, naming the line: 0, a relative index before the first element, one past u32;
    // forward references are judged at the end (they may be declared later).
    for (name, text, needles) in [
        (
            "zero.obj",
            &b"v 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 0\n"[..],
            ["line 4", "position index 0"],
        ),
        (
            "before.obj",
            b"v 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2/-1 3\n",
            ["line 4", "texture coordinate index -1"],
        ),
        (
            "far.obj",
            b"v 0 0 0\nv 1 0 0\nv 0 1 0\nl 1 2//9999999999\n",
            ["line 4", "normal index 9999999999"],
        ),
    ] {
        assert_bad(&write(&dir, name, text), &needles);
    }
    let forward = write(&dir, "forward.obj", b"f 1 2 3\nv 0 0 0\nv 1 0 0\nv 0 1 0\n");
    assert_eq!(load_mesh(&forward).unwrap().triangles.len(), 1);
    assert_bad(
        &write(
            &dir,
            "never.obj",
            b"f 1 2 3\nf 1 2 4\nv 0 0 0\nv 1 0 0\nv 0 1 0\n",
        ),
        &["line 2", "position index 4", "3 positions"],
    );
    assert_bad(
        &write(&dir, "short.obj", b"v 0 0 0\nv 1 0 0\nf 1 2\n"),
        &["line 3", "at least three vertices"],
    );
    assert_bad(
        &write(&dir, "flat.obj", b"v 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 3\n"),
        &["line 1", "three numbers"],
    );
    assert_bad(
        &write(&dir, "word.obj", b"v 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 two 3\n"),
        &["line 4", "`two` is no position index"],
    );
    assert_bad(
        &write(&dir, "garbage.obj", b"v 0 zero 0\nf 1 2 3\n"),
        &["OBJ"],
    );
    // A binary STL that promises 3 triangles and holds one.
    let mut stl = vec![0u8; 80];
    stl.extend_from_slice(&3u32.to_le_bytes());
    stl.extend_from_slice(&[0u8; 50]);
    assert_bad(
        &write(&dir, "short.stl", &stl),
        &["STL", "3 triangles", "234 bytes", "134"],
    );
    // One that holds more than it promises, as exporters pad files: the records it promises,
    // the rest left (it was refused), even when its header starts with `solid`.
    let mut padded = b"solid exported".to_vec();
    padded.resize(80, b' ');
    padded.extend_from_slice(&1u32.to_le_bytes());
    let corners = [[0f32; 3], [0.0, 0.0, 0.0], [2.0, 0.0, 0.0], [0.0, 2.0, 0.0]];
    padded.extend(corners.iter().flatten().flat_map(|c| c.to_le_bytes()));
    padded.extend_from_slice(&[0, 0, b'\n', 0, 0, 0, 0]);
    let m = load_mesh(&write(&dir, "padded.stl", &padded)).unwrap();
    assert_eq!(m.triangles.len(), 1);
    assert_eq!(m.corners(0)[1], DVec3::new(2.0, 0.0, 0.0));
    // A header that claims 2^32 − 1 triangles is refused by the file's size, before any
    // allocation for them.
    let mut stl = vec![0u8; 80];
    stl.extend_from_slice(&u32::MAX.to_le_bytes());
    stl.extend_from_slice(&[0u8; 150]);
    assert_bad(
        &write(&dir, "huge.stl", &stl),
        &["STL", "4294967295 triangles"],
    );
    let ply_range = b"ply\nformat ascii 1.0\nelement vertex 3\nproperty float x\nproperty float y\nproperty float z\n\
          element face 1\nproperty list uchar int vertex_indices\nend_header\n\
          0 0 0\n1 0 0\n0 1 0\n3 0 1 7\n";
    assert_bad(
        &write(&dir, "range.ply", ply_range),
        &["triangle 0", "vertex 7"],
    );
    let ply_truncated = b"ply\nformat binary_little_endian 1.0\nelement vertex 3\nproperty float x\nproperty float y\nproperty float z\nend_header\n\x00\x00";
    assert_bad(&write(&dir, "cut.ply", ply_truncated), &["PLY"]);
    // Counts the file cannot hold are refused from the header (the reader would otherwise
    // grow a list of 2^62 property-less elements: a crash the PLY fuzzer found).
    let ply_huge = b"ply\nformat binary_little_endian 1.0\nelement vertex 4611686018427387904\n\
          property float x\nproperty float y\nproperty float z\nend_header\n";
    assert_bad(
        &write(&dir, "huge.ply", ply_huge),
        &["PLY", "4611686018427387904 `vertex` elements"],
    );
    let ply_empty_elements =
        b"ply\nformat binary_little_endian 1.0\nelement nothing 99999999\nend_header\n";
    assert_bad(
        &write(&dir, "nothing.ply", ply_empty_elements),
        &["99999999 `nothing` elements", "bytes"],
    );
    let ply_nan = b"ply\nformat ascii 1.0\nelement vertex 3\nproperty float x\nproperty float y\nproperty float z\n\
          element face 1\nproperty list uchar int vertex_indices\nend_header\n\
          0 0 0\nnan 0 0\n0 1 0\n3 0 1 2\n";
    assert_bad(
        &write(&dir, "nan.ply", ply_nan),
        &["PLY", "line 11", "`nan` is not a PLY float"],
    );
    assert_bad(
        &write(&dir, "huge.obj", b"v 0 0 0\nv 1e39 0 0\nv 0 1 0\nf 1 2 3\n"),
        &["vertex 1 is (1e39, 0.0, 0.0)", "finite f32"],
    );
    // ASCII STL facets that are not triangles, and lines that are not STL, name their line.
    for (name, text, needles) in [
        (
            "quad.stl",
            &b"solid q\nfacet normal 0 0 1\nouter loop\nvertex 0 0 0\nvertex 1 0 0\nvertex 1 1 0\nvertex 0 1 0\n"[..],
            ["line 7", "more than three vertices"],
        ),
        (
            "pair.stl",
            b"solid p\nfacet normal 0 0 1\nouter loop\nvertex 0 0 0\nvertex 1 0 0\nendloop\nendfacet\n",
            ["line 7", "2 vertices"],
        ),
        (
            "word.stl",
            b"solid w\nfacet normal 0 0 1\nouter loop\nvertex 0 zero 0\n",
            ["line 4", "three numbers"],
        ),
        ("prose.stl", b"solid ground\nthis is not a mesh\n", ["line 2", "`this`"]),
        (
            "open.stl",
            b"solid o\nfacet normal 0 0 1\nouter loop\nvertex 0 0 0\n",
            ["last facet", "no `endfacet`"],
        ),
    ] {
        assert_bad(&write(&dir, name, text), &needles);
    }
    assert_bad(
        &write(&dir, "mesh.dxf", b"0\nSECTION\n"),
        &[".obj, .stl, .ply, .off, .glb or .gltf"],
    );
    assert_bad(&dir.path().join("missing.stl"), &[]);
}

/// Binary PLY is streamed by our own reader, ASCII read by ply-rs: the same mesh in ASCII,
/// binary little-endian and binary big-endian, with properties and elements a mesh reader must
/// step over (normals, a colour, an `edge` element before the faces, strips before faces),
/// mixed scalar types, a quad and a −1 strip restart, loads to the same vertices and triangles.
#[test]
fn binary_ply_streams_to_what_the_ascii_reader_reads() {
    let dir = tempfile::tempdir().unwrap();
    let vertices: [[f64; 3]; 5] = [
        [0.0, 0.0, 0.0],
        [1.0, 0.0, 0.0],
        [1.0, 1.0, 0.5],
        [0.0, 1.0, 0.25],
        [0.5, 0.5, 2.0],
    ];
    let faces: [&[i32]; 2] = [&[0, 1, 2, 3], &[0, 1, 4]];
    let strip: &[i32] = &[1, 2, 4, -1, 3, 0, 4];
    let header = |format: &str| {
        format!(
            "ply\nformat {format} 1.0\ncomment made by a test\nelement vertex 5\nproperty double x\n\
             property float y\nproperty float z\nproperty float nx\nproperty uchar red\n\
             element edge 1\nproperty int vertex1\nproperty int vertex2\n\
             element tristrips 1\nproperty list int int vertex_indices\n\
             element face 2\nproperty uchar flags\nproperty list uchar uint vertex_indices\nend_header\n"
        )
        .into_bytes()
    };
    let mut ascii = header("ascii");
    for v in vertices {
        ascii.extend(format!("{} {} {} 0.5 200\n", v[0], v[1], v[2]).bytes());
    }
    ascii.extend(b"0 1\n");
    let joined = |ks: &[i32]| {
        ks.iter()
            .map(|k| k.to_string())
            .collect::<Vec<_>>()
            .join(" ")
    };
    ascii.extend(format!("{} {}\n", strip.len(), joined(strip)).bytes());
    for f in faces {
        ascii.extend(format!("7 {} {}\n", f.len(), joined(f)).bytes());
    }
    let binary = |big: bool| {
        let mut out = header(if big {
            "binary_big_endian"
        } else {
            "binary_little_endian"
        });
        let mut put = |bytes: &[u8]| {
            let mut b = bytes.to_vec();
            if big {
                b.reverse();
            }
            out.extend(b);
        };
        for v in vertices {
            put(&v[0].to_le_bytes());
            put(&(v[1] as f32).to_le_bytes());
            put(&(v[2] as f32).to_le_bytes());
            put(&0.5f32.to_le_bytes());
            put(&[200]);
        }
        put(&0i32.to_le_bytes());
        put(&1i32.to_le_bytes());
        put(&(strip.len() as i32).to_le_bytes());
        for &k in strip {
            put(&k.to_le_bytes());
        }
        for f in faces {
            put(&[7]);
            put(&[f.len() as u8]);
            for &k in f {
                put(&(k as u32).to_le_bytes());
            }
        }
        out
    };
    let expected = load_mesh(&write(&dir, "a.ply", &ascii)).unwrap();
    // Faces first (a fan of the quad, then the triangle), then the strips' triangles.
    assert_eq!(
        expected.triangles,
        [[0, 1, 2], [0, 2, 3], [0, 1, 4], [1, 2, 4], [3, 0, 4]]
    );
    for (name, big) in [("le.ply", false), ("be.ply", true)] {
        let m = load_mesh(&write(&dir, name, &binary(big))).unwrap();
        assert_eq!(m.vertices, expected.vertices, "{name}");
        assert_eq!(m.triangles, expected.triangles, "{name}");
    }
    // Cut inside the last face: an error naming the element, never a partial mesh.
    let mut cut = binary(false);
    cut.truncate(cut.len() - 3);
    assert_bad(&write(&dir, "cut2.ply", &cut), &["PLY", "`face` element 1"]);
}

/// Pseudonormals as they were once stored: every vertex's angle-weighted sum and every edge's
/// sum of face normals, each added in triangle order. `Pseudonormals` keeps only the vertex
/// sums and recomputes the rest; its answers must be these bits.
struct StoredPseudonormals {
    vertex: Vec<DVec3>,
    edge: std::collections::BTreeMap<(u32, u32), DVec3>,
}

impl StoredPseudonormals {
    fn new(mesh: &Mesh) -> StoredPseudonormals {
        use closest::mesh::face_normal;
        let mut vertex = vec![DVec3::ZERO; mesh.vertices.len()];
        let mut edge = std::collections::BTreeMap::new();
        for (s, tri) in mesh.triangles.iter().enumerate() {
            let corners = mesh.corners(s);
            for k in 0..3 {
                let (u, v) = (
                    corners[(k + 1) % 3] - corners[k],
                    corners[(k + 2) % 3] - corners[k],
                );
                let angle = u.cross(v).length().atan2(u.dot(v));
                vertex[tri[k] as usize] += face_normal(mesh, s) * angle;
                let (i, j) = (tri[k], tri[(k + 1) % 3]);
                let sum = edge.entry((i.min(j), i.max(j))).or_insert(DVec3::ZERO);
                *sum += face_normal(mesh, s);
            }
        }
        StoredPseudonormals { vertex, edge }
    }

    fn sign(&self, mesh: &Mesh, t: usize, p: DVec3) -> (f64, DVec3) {
        use closest::mesh::{Feature, closest_feature, face_normal};
        let (q, feature) = closest_feature(p, mesh.corners(t));
        let tri = mesh.triangles[t];
        let normal = match feature {
            Feature::Face => face_normal(mesh, t),
            Feature::Vertex(k) => self.vertex[tri[k] as usize],
            Feature::Edge(i, j) => {
                let (i, j) = (tri[i], tri[j]);
                self.edge[&(i.min(j), i.max(j))]
            }
        }
        .normalize_or_zero();
        (if (p - q).dot(normal) < 0.0 { -1.0 } else { 1.0 }, normal)
    }
}

#[test]
fn pseudonormals_are_the_bits_of_stored_sums() {
    // Fandisk (closed), the bunny (with holes), and a small mesh with five faces on edge 0–1
    // (four whose normals sum to other bits in another order, and one whose corners lie on a
    // line), boundary edges and a triangle listing one vertex twice.
    let v = |x: f64, y: f64, z: f64| DVec3::new(x, y, z);
    let odd = common::odd_mesh();
    let fandisk = load_mesh(&shared("fandisk.obj")).unwrap();
    for mesh in [
        odd,
        fandisk,
        load_mesh(&shared("stanford-bunny.obj")).unwrap(),
    ] {
        let normals = closest::mesh::Pseudonormals::new(&mesh);
        let stored = StoredPseudonormals::new(&mesh);
        let mut checked = 0;
        for t in (0..mesh.triangles.len()).step_by(if mesh.triangles.len() < 100 { 1 } else { 7 }) {
            let [a, b, c] = mesh.corners(t);
            let n = closest::mesh::face_normal(&mesh, t) + v(0.01, 0.02, 0.03);
            // Near each corner, edge and the face, on both sides.
            let near = [
                a,
                b,
                c,
                (a + b) * 0.5,
                (b + c) * 0.5,
                (c + a) * 0.5,
                (a + b + c) / 3.0,
            ];
            for base in near {
                for side in [-0.05, 0.05] {
                    let p = base + n * side + (base - (a + b + c) / 3.0) * 0.1;
                    let (sign, normal) = normals.sign(&mesh, t, p);
                    let (want_sign, want) = stored.sign(&mesh, t, p);
                    assert_eq!(sign, want_sign, "triangle {t}, point {p:?}");
                    assert_eq!(
                        [normal.x, normal.y, normal.z].map(f64::to_bits),
                        [want.x, want.y, want.z].map(f64::to_bits),
                        "triangle {t}, point {p:?}"
                    );
                    checked += 1;
                }
            }
        }
        assert!(checked >= 14);
    }
}

#[test]
fn pseudonormal_tables_built_in_bands_are_the_same_words() {
    // Large meshes build the device's table a band of vertex sums and of half-edges at a time
    // (`Pseudonormals::gpu_words`); these meshes are one band each there, so bands are forced
    // here: 2, 5 and 37 of them (one vertex a band on the small mesh).
    use closest::mesh::Pseudonormals;
    for mesh in [
        common::odd_mesh(),
        load_mesh(&shared("fandisk.obj")).unwrap(),
        load_mesh(&shared("stanford-bunny.obj")).unwrap(),
    ] {
        for vertex_indices in [true, false] {
            let whole = Pseudonormals::gpu_words(&mesh, vertex_indices);
            for bands in [2, 5, 37] {
                let band = mesh.vertices.len().div_ceil(bands);
                let banded = Pseudonormals::gpu_words_in_bands(&mesh, vertex_indices, band);
                assert!(
                    banded == whole,
                    "{} triangles, bands of {band} vertices",
                    mesh.triangles.len()
                );
            }
        }
    }
}

/// ASCII PLY payloads stream a line at a time (ply-rs held a map per element: a 110 MB point
/// cloud took 1.7 GB). Every layout PLY writers use reads as the same file written in binary,
/// and a broken line is named.
#[test]
fn ascii_ply_reads_as_its_binary_twin() {
    let dir = tempfile::tempdir().unwrap();
    // Faces before vertices, colours and normals beside positions, integer and double
    // coordinates, `vertex_index` lists, strips with restarts, an element no reader knows.
    let header = |format: &str| {
        format!(
            "ply\nformat {format} 1.0\ncomment made by a test\nelement face 2\n\
             property list uchar int vertex_index\nproperty uchar flags\n\
             element vertex 5\nproperty double x\nproperty short y\nproperty float z\n\
             property uchar red\nproperty float nx\n\
             element tristrips 1\nproperty list int int vertex_indices\n\
             element camera 1\nproperty list ushort char params\nproperty int id\nend_header\n"
        )
    };
    let faces: [&[u32]; 2] = [&[0, 1, 2, 3], &[2, 3, 4]];
    let flags = [7u8, 255];
    let vertices = [
        (0.1f64, -3i16, 0.25f32, 9u8, 1.5f32),
        (1.0, 0, -2.5e-3, 0, 0.0),
        (1e-300, 32767, 1e5, 255, -1.0),
        (-7.75, -32768, 3.0, 1, 0.5),
        (2.0, 5, 0.1, 2, 2.0),
    ];
    let strips: [i32; 6] = [4, 3, 2, -1, 0, 1];
    let mut ascii = header("ascii").into_bytes();
    for (face, flag) in faces.iter().zip(flags) {
        let ks: Vec<String> = face.iter().map(u32::to_string).collect();
        ascii.extend(format!("{} {} {flag}\r\n", face.len(), ks.join("  ")).bytes());
    }
    for (x, y, z, red, nx) in vertices {
        ascii.extend(format!("\t{x:e} {y} {z} {red} {nx}  \n").bytes());
    }
    let ks: Vec<String> = strips.iter().map(i32::to_string).collect();
    ascii.extend(format!("{} {}\n", strips.len(), ks.join(" ")).bytes());
    ascii.extend(b"3 1 -2 3 42\n");
    let mut binary = header("binary_big_endian").into_bytes();
    for (face, flag) in faces.iter().zip(flags) {
        binary.push(face.len() as u8);
        face.iter()
            .for_each(|&k| binary.extend((k as i32).to_be_bytes()));
        binary.push(flag);
    }
    for (x, y, z, red, nx) in vertices {
        binary.extend(x.to_be_bytes());
        binary.extend(y.to_be_bytes());
        binary.extend(z.to_be_bytes());
        binary.push(red);
        binary.extend(nx.to_be_bytes());
    }
    binary.extend((strips.len() as i32).to_be_bytes());
    strips.iter().for_each(|&k| binary.extend(k.to_be_bytes()));
    binary.extend(3u16.to_be_bytes());
    binary.extend([1u8, 254, 3]);
    binary.extend(42i32.to_be_bytes());
    let from_ascii = load_mesh(&write(&dir, "a.ply", &ascii)).unwrap();
    let from_binary = load_mesh(&write(&dir, "b.ply", &binary)).unwrap();
    assert_eq!(from_ascii.triangles, from_binary.triangles);
    assert_eq!(from_ascii.triangles.len(), 3 + 1);
    for k in 0..5 {
        assert_eq!(
            from_ascii.vertices.get(k),
            from_binary.vertices.get(k),
            "vertex {k}"
        );
    }
    // A float property is read as f32, as the binary file holds it.
    assert_eq!(from_ascii.vertices.get(4).z, 0.1f32 as f64);
    // Broken lines, named by their line in the file (the header's are 18).
    let text = String::from_utf8(ascii).unwrap();
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let with_line = |k: usize, replaced: &str| {
        let mut changed = lines.clone();
        changed[k - 1] = replaced;
        changed.concat()
    };
    for (name, bytes, needles) in [
        (
            "short.ply",
            with_line(22, "0.5 1\n"),
            &[
                "line 22",
                "`vertex` element 1",
                "ends before all its values",
            ][..],
        ),
        (
            "range.ply",
            with_line(21, "0 0 0 256 0\n"),
            &[
                "line 21",
                "`vertex` element 0",
                "`256` is not a PLY uchar value",
            ],
        ),
        (
            "word.ply",
            with_line(23, "1 inf 0 0 0\n"),
            &["line 23", "`inf` is not a PLY short value"],
        ),
        (
            "fraction.ply",
            with_line(20, "3 0 1.5 2 0\n"),
            &[
                "line 20",
                "`face` element 1",
                "`1.5` is not a PLY int value",
            ],
        ),
        (
            "ends.ply",
            lines[..24].concat(),
            &["ends before `vertex` element 4 (line 25)"],
        ),
    ] {
        assert_bad(&write(&dir, name, bytes.as_bytes()), needles);
    }
}
