//! Points read as texels (`shaders/shared/point_texels.wgsl`) against points read from the
//! storage buffer (`EngineOptions::storage_points`), bit for bit, in both kernels: one-shape
//! and mixed scenes, paired rows, segment pairs and a mesh, with chunks whose points end
//! inside a texel, on a texel row's end, one texel past it, and past a whole layer of rows.

mod common;

use std::path::Path;

use closest::mesh::Sign;
use closest::{DVec3, EngineOptions, GpuHit, GpuSegmentHit, Mode, Shape};
use common::{Rng, TestJobs, assert_same_hits, mixed_scene, subgroup_and_portable_engines_with};

/// Rows whose points fill texel row ends (4,096 texels a row, three words a point): 5,461
/// rows end one word short of a row, 5,462 one texel and a half past it.
const CHUNKS: [usize; 3] = [5_461, 5_462, 1_000];

/// More points than one layer of texels holds (64 rows of 4,096 texels: 349,525⅓ points).
const PAST_A_LAYER: usize = 400_003;

/// Engines reading points as texels (subgroup, portable), then from storage (the same two).
fn engines(chunk_rows: usize) -> Vec<closest::Engine> {
    let [texels, storage] = [false, true].map(|storage_points| {
        subgroup_and_portable_engines_with(EngineOptions {
            chunk_rows: Some(chunk_rows),
            storage_points,
            ..Default::default()
        })
    });
    for engine in &texels {
        assert!(engine.point_texels(), "lavapipe's textures hold texel rows");
    }
    for engine in &storage {
        assert!(!engine.point_texels());
    }
    texels.into_iter().chain(storage).collect()
}

fn points(rng: &mut Rng, count: usize, spread: f64) -> Vec<[f32; 3]> {
    let mut points: Vec<DVec3> = (0..count).map(|_| rng.vec(-spread, spread)).collect();
    // A non-finite row in every texel position (rows 4k .. 4k + 3 start at each word).
    for k in 0..4.min(count) {
        points[count / 2 + k - 2] = DVec3::new(f64::NAN, 0.0, k as f64);
    }
    common::f32_points(&points)
}

/// Every engine's answers equal the first's, bit for bit.
fn assert_all_same(answers: &[Vec<GpuHit>], what: &str) {
    assert!(
        answers[0].iter().any(|h| h.shape >= 0),
        "{what}: no answers"
    );
    for (k, hits) in answers.iter().enumerate().skip(1) {
        assert_same_hits(&answers[0], hits, &format!("{what}, engine {k}"));
    }
}

#[test]
fn scene_rows_read_as_texels_match_rows_read_from_storage_bit_for_bit() {
    let mut rng = Rng::new(71);
    let sphere = vec![Shape::Sphere {
        center: DVec3::new(0.5, -0.25, 2.0),
        radius: 1.5,
    }];
    let mixed = mixed_scene(&mut rng, 300, 20.0);
    for chunk_rows in CHUNKS {
        let engines = engines(chunk_rows);
        let points = points(&mut rng, 3 * chunk_rows + 17, 25.0);
        for (name, shapes) in [("one sphere", &sphere), ("300 mixed shapes", &mixed)] {
            let answers: Vec<Vec<GpuHit>> = engines
                .iter()
                .map(|engine| {
                    let scene = engine.upload_scene(shapes).expect("upload scene");
                    engine
                        .scene_hits(&scene, &points, Mode::Surface)
                        .expect("scene query")
                })
                .collect();
            assert_all_same(&answers, &format!("{name}, chunks of {chunk_rows}"));
        }
        let paired: Vec<Shape> = (0..points.len())
            .map(|k| mixed[k % mixed.len()].clone())
            .collect();
        let answers: Vec<Vec<GpuHit>> = engines
            .iter()
            .map(|engine| {
                engine
                    .paired_hits(&paired, &points, Mode::Solid)
                    .expect("paired query")
            })
            .collect();
        assert_all_same(&answers, &format!("paired rows, chunks of {chunk_rows}"));
    }
}

#[test]
fn chunks_of_more_than_a_layer_of_point_texels_match_storage_bit_for_bit() {
    let mut rng = Rng::new(72);
    let shapes = vec![Shape::Segment {
        a: DVec3::new(-1.0, 0.0, 0.5),
        b: DVec3::new(2.0, 1.0, -0.5),
    }];
    let points = points(&mut rng, PAST_A_LAYER, 4.0);
    let answers: Vec<Vec<GpuHit>> = engines(PAST_A_LAYER)
        .iter()
        .map(|engine| {
            let scene = engine.upload_scene(&shapes).expect("upload scene");
            engine
                .scene_hits(&scene, &points, Mode::Surface)
                .expect("scene query")
        })
        .collect();
    assert_all_same(&answers, "a segment, one chunk past a layer");
}

#[test]
fn mesh_rows_read_as_texels_match_rows_read_from_storage_bit_for_bit() {
    let mesh = closest::io::load_mesh(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data/meshes/fandisk.obj"),
    )
    .expect("fandisk");
    let mut rng = Rng::new(73);
    let chunk_rows = CHUNKS[1];
    let points: Vec<[f64; 3]> = points(&mut rng, 2 * chunk_rows + 5, 3.0)
        .iter()
        .map(|p| p.map(f64::from))
        .collect();
    let answers: Vec<Vec<GpuHit>> = engines(chunk_rows)
        .iter()
        .map(|engine| {
            let gpu = engine.upload_mesh(mesh.clone()).expect("upload fandisk");
            engine
                .mesh_hits(&gpu, &points, Sign::Pseudonormal)
                .expect("mesh query")
        })
        .collect();
    assert_all_same(&answers, "fandisk, pseudonormal signs");
}

#[test]
fn segment_pairs_read_as_texels_match_pairs_read_from_storage_bit_for_bit() {
    let mut rng = Rng::new(74);
    let chunk_rows = CHUNKS[1];
    let rows = 2 * chunk_rows + 9;
    let segment = |rng: &mut Rng| {
        let a = rng.vec(-5.0, 5.0);
        [a, a + rng.vec(-2.0, 2.0)]
    };
    let a: Vec<[DVec3; 2]> = (0..rows).map(|_| segment(&mut rng)).collect();
    let mut b: Vec<[DVec3; 2]> = (0..rows).map(|_| segment(&mut rng)).collect();
    b[rows / 2][1] = DVec3::new(f64::INFINITY, 0.0, 0.0);
    let bits = |hits: &[GpuSegmentHit]| -> Vec<u32> {
        bytemuck::cast_slice::<GpuSegmentHit, u32>(hits).to_vec()
    };
    let answers: Vec<Vec<u32>> = engines(chunk_rows)
        .iter()
        .map(|engine| bits(&engine.segment_hits(&a, &b).expect("segment pairs")))
        .collect();
    assert!(answers[0].iter().any(|&w| w != 0));
    for (k, words) in answers.iter().enumerate().skip(1) {
        let first = words.iter().zip(&answers[0]).position(|(x, y)| x != y);
        assert_eq!(
            first, None,
            "segment pairs, engine {k}: word {first:?} differs"
        );
    }
}
