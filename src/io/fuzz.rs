//! The loaders as the fuzz targets in `fuzz/` drive them, one entry each, so that the stable
//! suite (`tests/fuzz_corpus.rs`) replays the kept corpus and crashes through the same code.
//! Any input may be refused with an error; a panic, a hang or an allocation out of proportion
//! to the input is a defect. What a loaded file is then used for (a mesh's sign tables and
//! hierarchy, a scene's device layout) is built too: a loader that lets through what those
//! cannot handle is as much a defect.

use std::io::{Cursor, Write};
use std::path::PathBuf;

use super::mesh_file::{MeshFormat, read_mesh};
use super::row_files::{POINTS, RowFile};
use crate::mesh::Mesh;

/// One fuzzed reader.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Loader {
    Obj,
    Stl,
    Ply,
    Off,
    Gltf,
    Scene,
    Npy,
    Npz,
    Pcd,
    Csv,
}

impl Loader {
    pub const ALL: [Loader; 10] = [
        Loader::Obj,
        Loader::Stl,
        Loader::Ply,
        Loader::Off,
        Loader::Gltf,
        Loader::Scene,
        Loader::Npy,
        Loader::Npz,
        Loader::Pcd,
        Loader::Csv,
    ];

    /// The fuzz target's name, which is also its corpus folder's (`fuzz/corpus/<name>`) and
    /// the extension of the files it reads.
    pub fn name(self) -> &'static str {
        match self {
            Loader::Obj => "obj",
            Loader::Stl => "stl",
            Loader::Ply => "ply",
            Loader::Off => "off",
            Loader::Gltf => "glb",
            Loader::Scene => "scene",
            Loader::Npy => "npy",
            Loader::Npz => "npz",
            Loader::Pcd => "pcd",
            Loader::Csv => "csv",
        }
    }

    /// Read `data` as a file of this kind and build what the engine would build from it.
    /// Returns whether the input was accepted (errors are answers, not failures).
    pub fn feed(self, data: &[u8]) -> bool {
        match self {
            Loader::Obj => feed_mesh(data, MeshFormat::Obj),
            Loader::Stl => feed_mesh(data, MeshFormat::Stl),
            Loader::Ply => feed_mesh(data, MeshFormat::Ply),
            Loader::Off => feed_mesh(data, MeshFormat::Off),
            Loader::Gltf => feed_mesh(data, MeshFormat::Gltf),
            Loader::Scene => feed_scene(data),
            Loader::Npy | Loader::Npz | Loader::Pcd | Loader::Csv => feed_points(data, self.name()),
        }
    }
}

fn feed_mesh(data: &[u8], format: MeshFormat) -> bool {
    let Ok(mesh) = read_mesh(&mut Cursor::new(data), format, "fuzz input") else {
        return false;
    };
    build_mesh_tables(&mesh);
    true
}

/// The host-side structures of a mesh query: pseudonormals, the winding hierarchy and the
/// triangles' scene bindings, built as `Engine::upload_mesh` builds them.
fn build_mesh_tables(mesh: &Mesh) {
    let normals = crate::mesh::Pseudonormals::new(mesh);
    std::hint::black_box(normals.sign(mesh, 0, mesh.vertices.get(0)));
    std::hint::black_box(crate::winding::WindingTree::new(mesh));
    let offset = mesh.centre();
    // No interrupt check is set here: the build runs to its end.
    let _ = std::hint::black_box(crate::gpu::scene_layout::triangle_bindings(
        mesh.triangles.len(),
        &|t| mesh.shifted_corners(t, offset),
        true,
    ));
}

fn feed_scene(data: &[u8]) -> bool {
    // `load_scene` refuses a file that is not UTF-8 before parsing.
    let Ok(text) = std::str::from_utf8(data) else {
        return false;
    };
    let Ok(shapes) = super::parse_scene(text, "fuzz input") else {
        return false;
    };
    if !shapes.is_empty() {
        std::hint::black_box(crate::gpu::scene_layout::scene_layout(&shapes, true).into_bindings());
    }
    true
}

/// Points files are read from a path (`.npy` is streamed by seeking), so the input is written
/// to a file of this process and thread first.
fn feed_points(data: &[u8], extension: &str) -> bool {
    let path = scratch_path(extension);
    let written = std::fs::File::create(&path).and_then(|mut f| f.write_all(data));
    let accepted = written.is_ok()
        && RowFile::open_as(&path, POINTS)
            .and_then(|mut rows| rows.read_all())
            .is_ok();
    let _ = std::fs::remove_file(&path);
    accepted
}

fn scratch_path(extension: &str) -> PathBuf {
    // tmpfs where there is one: the fuzzer writes a file per input.
    let shm = std::path::Path::new("/dev/shm");
    let dir = if shm.is_dir() {
        shm.to_path_buf()
    } else {
        std::env::temp_dir()
    };
    let thread = format!("{:?}", std::thread::current().id());
    let thread: String = thread.chars().filter(char::is_ascii_digit).collect();
    dir.join(format!(
        "closest-fuzz-{}-{thread}.{extension}",
        std::process::id()
    ))
}

/// LZF as liblzf writes it (greedy, references up to 8 KiB back): `.pcd` files with
/// `binary_compressed` data for the tests and fuzz seeds.
pub fn lzf_compress(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut literal: Vec<u8> = Vec::new();
    let flush = |literal: &mut Vec<u8>, out: &mut Vec<u8>| {
        for run in literal.chunks(32) {
            out.push(run.len() as u8 - 1);
            out.extend_from_slice(run);
        }
        literal.clear();
    };
    let mut at = 0;
    while at < data.len() {
        let (mut best, mut distance) = (0, 0);
        for from in at.saturating_sub(super::lzf::FARTHEST)..at {
            let mut n = 0;
            while at + n < data.len() && n < 264 && data[from + n] == data[at + n] {
                n += 1;
            }
            if n > best {
                (best, distance) = (n, at - from);
            }
        }
        if best >= 3 {
            flush(&mut literal, &mut out);
            let (run, back) = (best - 2, distance - 1);
            if run < 7 {
                out.push(((run << 5) | (back >> 8)) as u8);
            } else {
                out.push(((7 << 5) | (back >> 8)) as u8);
                out.push((run - 7) as u8);
            }
            out.push((back & 0xff) as u8);
            at += best;
        } else {
            literal.push(data[at]);
            at += 1;
        }
    }
    flush(&mut literal, &mut out);
    out
}
