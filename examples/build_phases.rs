//! Where a mesh's fixed cost goes on the host, before any query: the file's load, `--sign
//! auto`'s check, the hierarchy alone (`bvh::build_with`) and the whole device layout
//! (hierarchy, oriented boxes, records), without and with winding clusters; and a hash of the
//! layout's bytes, so that a change meant to keep the trees can be checked to (same hash).
//!
//!     cargo run --release --example build_phases -- MESH [ROUNDS]
use closest::auto_sign::SignChoice;
use closest::bvh::{Item, TRIANGLE_LEAF_SIZE, build_with, shape_bounds};
use closest::gpu::scene_layout::triangle_bindings;
use closest::shape::{Shape, ShapeKind};
use std::hash::{Hash, Hasher};
use std::time::Instant;

fn main() {
    let mut args = std::env::args().skip(1);
    let path = args.next().expect("usage: build_phases MESH [ROUNDS]");
    let rounds: usize = args
        .next()
        .map_or(3, |r| r.parse().expect("ROUNDS is a count"));
    let ms = |t: Instant| t.elapsed().as_secs_f64() * 1e3;
    for _ in 0..rounds {
        let t = Instant::now();
        let mesh = closest::io::mesh_file::load_mesh(std::path::Path::new(&path))
            .unwrap_or_else(|e| panic!("{path}: {e}"));
        let load = ms(t);
        let t = Instant::now();
        let (sign, _) = SignChoice::Auto.resolve(&mesh);
        let auto = ms(t);
        let offset = mesh.centre();
        let corners = |k: usize| mesh.shifted_corners(k, offset);
        let count = mesh.triangles.len();
        let item = |i: usize| {
            let [a, b, c] = corners(i);
            Item {
                bounds: shape_bounds(&Shape::Triangle { a, b, c }).expect("a triangle is bounded"),
                kind: ShapeKind::Triangle as u32,
            }
        };
        let t = Instant::now();
        drop(build_with(count, &item, TRIANGLE_LEAF_SIZE, 0, 0));
        let hierarchy = ms(t);
        let t = Instant::now();
        let bindings =
            triangle_bindings(count, &corners, false).expect("no interrupt check is set");
        let layout = ms(t);
        let mut hash = std::collections::hash_map::DefaultHasher::new();
        bindings.records.hash(&mut hash);
        bindings.nodes.hash(&mut hash);
        drop(bindings);
        let t = Instant::now();
        drop(triangle_bindings(count, &corners, true));
        let clustered = ms(t);
        println!(
            "load {load:.1} ms, auto {auto:.1} ms ({}), hierarchy {hierarchy:.1} ms, layout {layout:.1} ms, with clusters {clustered:.1} ms, layout hash {:016x}",
            sign.name(),
            hash.finish()
        );
    }
}
