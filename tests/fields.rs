//! Output fields (SPEC §5 `--fields`): every subset of every job's fields equals the same
//! columns of the full answer, bit for bit, on scenes (BVH, Morton order, several chunks, NaN
//! rows), paired shapes, meshes with each sign, segment pairs and contacts.

mod common;

use std::path::Path;
use std::sync::OnceLock;

use closest::fields::{Columns, Family, Field, Fields, PackedRows};
use closest::io::load_mesh;
use closest::mesh::Sign;
use closest::{DVec3, Engine, EngineOptions, GpuHit, Mode};
use common::{Rng, TestJobs, f32_points, mixed_scene, open_engine};

/// One engine for every test here, with chunks of 1000 rows (several chunks a job, Morton
/// order restored per chunk): each field set's pipelines are compiled once.
fn chunked_engine() -> &'static Engine {
    static ENGINE: OnceLock<Engine> = OnceLock::new();
    ENGINE.get_or_init(|| {
        open_engine(EngineOptions {
            chunk_rows: Some(1000),
            ..Default::default()
        })
    })
}

/// Every non-empty subset of a family's fields.
fn subsets(family: Family) -> Vec<Fields> {
    let all = Fields::all(family).bits();
    (1..=all)
        .filter(|b| b & !all == 0)
        .map(|b| Fields::from_bits(family, b))
        .collect()
}

/// The full answer's columns, as the subset would list them.
fn columns_of(full: &Columns, fields: Fields) -> Vec<(Field, Vec<u32>)> {
    fields
        .selected()
        .map(|f| (*f, full.get(f.name).unwrap().to_vec()))
        .collect()
}

fn assert_subsets_match(family: Family, what: &str, run: impl Fn(Fields) -> Columns) {
    let full = run(Fields::all(family));
    let rows = full.columns[0].1.len() / full.columns[0].0.width;
    assert!(rows > 0, "{what}: no rows");
    for fields in subsets(family) {
        let got = run(fields);
        let want = columns_of(&full, fields);
        assert_eq!(got.columns.len(), want.len(), "{what} {fields:?}");
        for ((field, values), (_, expected)) in got.columns.iter().zip(&want) {
            // Bits, not values: NaN rows must match too.
            assert!(
                values == expected,
                "{what}: field `{}` with {fields:?} differs from the full answer",
                field.name
            );
        }
    }
}

fn points(rng: &mut Rng, n: usize, spread: f64) -> Vec<[f32; 3]> {
    let mut p: Vec<DVec3> = (0..n).map(|_| rng.vec(-spread, spread)).collect();
    p[3] = DVec3::new(f64::NAN, 0.0, 0.0);
    p[n / 2] = DVec3::new(0.0, f64::INFINITY, 0.0);
    f32_points(&p)
}

#[test]
fn every_subset_of_scene_fields_equals_the_full_answer() {
    let engine = chunked_engine();
    let mut rng = Rng::new(11);
    let scene = engine
        .upload_scene(&mixed_scene(&mut rng, 300, 10.0))
        .unwrap();
    let pts = points(&mut rng, 2500, 12.0);
    for mode in [Mode::Solid, Mode::Surface] {
        assert_subsets_match(Family::Hits, "scene", |fields| {
            engine.scene_columns(&scene, &pts, mode, fields).unwrap()
        });
    }
    // The whole-hit API is the all-fields answer.
    let hits = engine.scene_hits(&scene, &pts, Mode::Solid).unwrap();
    let full = engine
        .scene_columns(&scene, &pts, Mode::Solid, Fields::all(Family::Hits))
        .unwrap();
    let distance: Vec<f32> = hits.iter().map(|h| h.distance).collect();
    assert_eq!(
        bytemuck::cast_slice::<f32, u32>(&distance),
        full.get("distance").unwrap()
    );
}

#[test]
fn every_subset_of_paired_and_contact_fields_equals_the_full_answer() {
    let engine = chunked_engine();
    let mut rng = Rng::new(12);
    let shapes = mixed_scene(&mut rng, 1500, 3.0);
    let pts = points(&mut rng, 1500, 4.0);
    assert_subsets_match(Family::Hits, "paired", |fields| {
        engine
            .paired_columns(&shapes, &pts, Mode::Surface, fields)
            .unwrap()
    });
    let scene = engine.upload_scene(&shapes[..200]).unwrap();
    let mut spheres: Vec<[f32; 4]> = pts
        .iter()
        .map(|p| [p[0], p[1], p[2], rng.range(0.0, 1.0) as f32])
        .collect();
    spheres[5][3] = f32::NAN;
    assert_subsets_match(Family::Contacts, "contacts", |fields| {
        engine.contact_columns(&scene, &spheres, fields).unwrap()
    });
    // The all-fields contacts are those of the whole-contact API.
    let contacts = engine.contacts(&scene, &spheres).unwrap();
    let full = engine
        .contact_columns(&scene, &spheres, Fields::all(Family::Contacts))
        .unwrap();
    let depth: Vec<f32> = contacts.iter().map(|c| c.depth).collect();
    assert_eq!(
        bytemuck::cast_slice::<f32, u32>(&depth),
        full.get("depth").unwrap()
    );
}

#[test]
fn every_subset_of_mesh_fields_equals_the_full_answer_for_each_sign() {
    let engine = chunked_engine();
    let mesh =
        load_mesh(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data/meshes/fandisk.obj"))
            .unwrap();
    let (lo, hi) = mesh.bounds();
    let gpu = engine.upload_mesh(mesh).unwrap();
    let mut rng = Rng::new(13);
    let mut pts: Vec<[f64; 3]> = (0..3000)
        .map(|_| {
            let t = [0; 3].map(|_| rng.range(-0.1, 1.1));
            [
                lo.x + (hi.x - lo.x) * t[0],
                lo.y + (hi.y - lo.y) * t[1],
                lo.z + (hi.z - lo.z) * t[2],
            ]
        })
        .collect();
    pts[7] = [f64::NAN, 0.0, 0.0];
    for sign in [Sign::None, Sign::Pseudonormal, Sign::Winding] {
        assert_subsets_match(Family::Hits, &format!("mesh {sign:?}"), |fields| {
            engine.mesh_columns(&gpu, &pts, sign, fields).unwrap()
        });
        let hits: Vec<GpuHit> = engine.mesh_hits(&gpu, &pts, sign).unwrap();
        let full = engine
            .mesh_columns(&gpu, &pts, sign, Fields::all(Family::Hits))
            .unwrap();
        let shape: Vec<i32> = hits.iter().map(|h| h.shape).collect();
        assert_eq!(full.i32s("shape").unwrap(), shape);
    }
}

#[test]
fn every_subset_of_segment_fields_equals_the_full_answer() {
    let engine = chunked_engine();
    let mut rng = Rng::new(14);
    let mut segment = || [rng.vec(-5.0, 5.0), rng.vec(-5.0, 5.0)];
    let mut a: Vec<[DVec3; 2]> = (0..2000).map(|_| segment()).collect();
    let b: Vec<[DVec3; 2]> = (0..2000).map(|_| segment()).collect();
    a[9][1] = DVec3::new(f64::NAN, 1.0, 1.0);
    assert_subsets_match(Family::Segments, "segments", |fields| {
        engine.segment_columns(&a, &b, fields).unwrap()
    });
    let whole = engine.segment_hits(&a, &b).unwrap();
    let t: Vec<f32> = whole.iter().map(|h| h.t).collect();
    let full = engine
        .segment_columns(&a, &b, Fields::all(Family::Segments))
        .unwrap();
    assert_eq!(bytemuck::cast_slice::<f32, u32>(&t), full.get("t").unwrap());
}

#[test]
fn a_distance_only_row_is_one_word() {
    let rows = [1.5f32.to_bits(), 2.5f32.to_bits()];
    let distance = Fields::parse(Family::Hits, "distance").unwrap();
    let packed = PackedRows::new(distance, &rows);
    assert_eq!((distance.row_words(), packed.len()), (1, 2));
    assert_eq!(packed.hit(1).distance, 2.5);
}
