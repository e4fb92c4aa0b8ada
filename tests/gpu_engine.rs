//! Engine behaviour: chunking (dozens of chunks, every row checked), nearest over mixed
//! scenes against the reference, and the degenerate inputs of a job.

mod common;

use closest::{DVec3, EngineOptions, Mode, Shape};
use common::{Rng, TestJobs, assert_nearest, engine, f32_points, mixed_scene, open_engine};

#[test]
fn nearest_over_a_mixed_scene_matches_reference() {
    let mut rng = Rng::new(7);
    let shapes = mixed_scene(&mut rng, 45, 5.0);
    let mut points: Vec<DVec3> = (0..3000).map(|_| rng.vec(-8.0, 8.0)).collect();
    points.push(DVec3::new(f64::NAN, 0.0, 0.0));
    points.push(DVec3::new(0.0, 0.0, f64::INFINITY));
    for mode in [Mode::Solid, Mode::Surface] {
        assert_nearest(engine(), &shapes, &points, mode);
    }
}

#[test]
fn an_engine_opened_on_another_thread_answers_as_one_opened_here() {
    // The CLI opens its engine while a job reads its inputs (`EngineOpening`).
    let options = EngineOptions::default();
    let here = engine();
    let opened = closest::EngineOpening::start(&options)
        .engine()
        .expect("the default adapter opens on another thread");
    assert_eq!(opened.adapter_info().name, here.adapter_info().name);
    let mut rng = Rng::new(11);
    let shapes = mixed_scene(&mut rng, 40, 5.0);
    let points: Vec<DVec3> = (0..500).map(|_| rng.vec(-8.0, 8.0)).collect();
    assert_nearest(&opened, &shapes, &points, Mode::Solid);
    // A job that fails before it asks for its engine drops the opening: it is waited for, not
    // left inside the driver. An adapter that does not exist answers as `Engine::new` does.
    drop(closest::EngineOpening::start(&options));
    let missing = EngineOptions {
        adapter: Some("no adapter has this name".into()),
        ..Default::default()
    };
    let (on_thread, here) = (
        closest::EngineOpening::start(&missing).engine().err(),
        closest::Engine::new(&missing).err(),
    );
    assert_eq!(
        on_thread.map(|e| e.to_string()),
        here.map(|e| e.to_string()),
        "the same refusal"
    );
}

#[test]
fn nearest_ties_go_to_the_lowest_index() {
    // Two identical spheres: every point is at a tie, so shape 0 must win.
    let s = Shape::Sphere {
        center: DVec3::new(1.0, 1.0, 1.0),
        radius: 0.5,
    };
    let scene = engine().upload_scene(&[s.clone(), s]).unwrap();
    let hits = engine()
        .scene_hits(
            &scene,
            &[[3.0, 1.0, 1.0], [1.0, 1.0, 1.0], [-2.0, 0.0, 5.0]],
            Mode::Surface,
        )
        .unwrap();
    assert!(hits.iter().all(|h| h.shape == 0), "{hits:?}");
}

#[test]
fn ties_across_kinds_go_to_the_lowest_index() {
    // Scenes are uploaded sorted by kind (spheres first), yet the segment at index 0 must win
    // its exact tie with the zero-radius sphere at index 1 at the same point.
    let c = DVec3::new(2.0, -1.0, 0.5);
    let shapes = [
        Shape::Segment { a: c, b: c },
        Shape::Sphere {
            center: c,
            radius: 0.0,
        },
    ];
    let scene = engine().upload_scene(&shapes).unwrap();
    let hits = engine()
        .scene_hits(&scene, &[[5.0, 1.0, 1.0], [2.0, -1.0, 0.5]], Mode::Surface)
        .unwrap();
    assert!(hits.iter().all(|h| h.shape == 0), "{hits:?}");
    // And a nearer shape of a later kind still beats an earlier one.
    let shapes = [
        Shape::Capsule {
            a: DVec3::ZERO,
            b: DVec3::X,
            radius: 0.1,
        },
        Shape::Sphere {
            center: DVec3::new(0.0, 5.0, 0.0),
            radius: 1.0,
        },
    ];
    let scene = engine().upload_scene(&shapes).unwrap();
    let hits = engine()
        .scene_hits(&scene, &[[0.5, 0.5, 0.0]], Mode::Solid)
        .unwrap();
    assert_eq!(hits[0].shape, 0, "{hits:?}");
}

#[test]
fn dozens_of_chunks_give_every_row() {
    many_chunks(false);
}

#[test]
fn dozens_of_chunks_through_staging_buffers_give_every_row() {
    // The discrete-GPU path: staging uploads and readback copies.
    many_chunks(true);
}

fn many_chunks(force_staging: bool) {
    // 37 rows per chunk forces ~80 chunks through the two slots, with a ragged last chunk.
    let small = open_engine(EngineOptions {
        chunk_rows: Some(37),
        force_staging,
        ..Default::default()
    });
    if force_staging {
        assert!(!small.unified_memory());
    }
    assert_eq!(small.chunk_rows(), 37);
    let mut rng = Rng::new(11);
    let shapes = mixed_scene(&mut rng, 12, 3.0);
    let points: Vec<DVec3> = (0..2953).map(|_| rng.vec(-5.0, 5.0)).collect();
    assert_nearest(&small, &shapes, &points, Mode::Surface);

    // Paired mode streams the shapes too; the shape index is the global row.
    let paired_shapes: Vec<Shape> = (0..points.len())
        .map(|i| shapes[i % shapes.len()].clone())
        .collect();
    let hits = small
        .paired_hits(&paired_shapes, &f32_points(&points), Mode::Solid)
        .unwrap();
    for (i, (hit, (shape, p))) in hits
        .iter()
        .zip(paired_shapes.iter().zip(&points))
        .enumerate()
    {
        assert_eq!(hit.shape, i as i32);
        let expected = closest::reference::query_shape(shape, i, *p, Mode::Solid);
        common::check_hit(shape, *p, hit, &expected, Mode::Solid)
            .unwrap_or_else(|e| panic!("row {i}: {e}"));
    }
    assert!(
        small.last_timing().chunks >= 80,
        "{:?}",
        small.last_timing()
    );
}

#[test]
fn jobs_from_several_threads_answer_as_they_do_alone() {
    // Two jobs at once, each through its own slots (hardware GPUs run four; set here so that
    // lavapipe runs it too), and 37-row chunks so that every job streams dozens of chunks
    // while the others run. Scene and mesh jobs of different sizes, four threads.
    let small = open_engine(EngineOptions {
        chunk_rows: Some(37),
        ..Default::default()
    });
    small.set_jobs_at_once(2);
    assert_eq!(small.jobs_at_once(), 2);
    let mut rng = Rng::new(29);
    let scene = small.upload_scene(&mixed_scene(&mut rng, 12, 3.0)).unwrap();
    let mesh = small.upload_mesh(common::odd_mesh()).unwrap();
    let point_sets: Vec<Vec<[f32; 3]>> = (0..4)
        .map(|k| {
            let points: Vec<DVec3> = (0..900 + 211 * k).map(|_| rng.vec(-5.0, 5.0)).collect();
            f32_points(&points)
        })
        .collect();
    let sign = closest::mesh::Sign::Pseudonormal;
    let alone: Vec<_> = point_sets
        .iter()
        .map(|points| {
            (
                small.scene_hits(&scene, &points[..], Mode::Solid).unwrap(),
                small.mesh_hits(&mesh, &points[..], sign).unwrap(),
            )
        })
        .collect();
    std::thread::scope(|threads| {
        for (k, (points, (scene_alone, mesh_alone))) in point_sets.iter().zip(&alone).enumerate() {
            let (small, scene, mesh) = (&small, &scene, &mesh);
            threads.spawn(move || {
                for round in 0..3 {
                    let scene_hits = small.scene_hits(scene, &points[..], Mode::Solid).unwrap();
                    assert!(
                        scene_hits == *scene_alone,
                        "thread {k}, round {round}: scene"
                    );
                    let mesh_hits = small.mesh_hits(mesh, &points[..], sign).unwrap();
                    assert!(mesh_hits == *mesh_alone, "thread {k}, round {round}: mesh");
                }
            });
        }
    });
}

#[test]
fn the_same_engine_serves_jobs_of_different_sizes() {
    let shapes = [Shape::Sphere {
        center: DVec3::ZERO,
        radius: 1.0,
    }];
    let scene = engine().upload_scene(&shapes).unwrap();
    for n in [1usize, 0, 5000, 3] {
        let points: Vec<[f32; 3]> = (0..n).map(|i| [i as f32 + 2.0, 0.0, 0.0]).collect();
        let hits = engine().scene_hits(&scene, &points, Mode::Solid).unwrap();
        assert_eq!(hits.len(), n);
        for (i, h) in hits.iter().enumerate() {
            assert!(
                (h.distance - (i as f32 + 1.0)).abs() <= 1e-5 * (i as f32 + 2.0),
                "row {i}: {h:?}"
            );
        }
    }
}

#[test]
fn paired_needs_equal_counts() {
    let shapes = [Shape::Sphere {
        center: DVec3::ZERO,
        radius: 1.0,
    }];
    let err = engine()
        .paired_hits(&shapes, &[[0.0; 3], [1.0; 3]], Mode::Solid)
        .unwrap_err();
    assert_eq!(err.exit_code(), 2, "{err}");
}

/// A reader that gives a chunk one row more or fewer than asked.
struct Lying(usize, isize);

impl closest::PointReader for Lying {
    fn rows(&self) -> usize {
        self.0
    }
    fn read(
        &mut self,
        range: std::ops::Range<usize>,
        chunk: &mut closest::PointChunk,
    ) -> closest::Result<()> {
        let given = (range.len() as isize + self.1).max(0) as usize;
        chunk
            .f32_rows()
            .extend((0..given).map(|i| [i as f32, 0.0, 0.0]));
        Ok(())
    }
}

impl closest::engine::SphereReader for Lying {
    fn rows(&self) -> usize {
        self.0
    }
    fn read(
        &mut self,
        range: std::ops::Range<usize>,
        spheres: &mut Vec<[f64; 4]>,
    ) -> closest::Result<()> {
        let given = (range.len() as isize + self.1).max(0) as usize;
        spheres.clear();
        spheres.extend((0..given).map(|i| [i as f64, 0.0, 0.0, 0.5]));
        Ok(())
    }
}

/// A library user's reader that miscounts its rows gets an error naming it, never a panic
/// or rows copied past a buffer (scene, mesh and sphere-contact jobs alike).
#[test]
fn a_reader_that_gives_the_wrong_number_of_rows_is_an_error() {
    use closest::engine::{MeshQuery, SceneQuery, SphereContacts, Spheres};
    use closest::{Columns, Family, Fields, Points};
    let engine = engine();
    let scene = engine
        .upload_scene(&[Shape::Sphere {
            center: DVec3::ZERO,
            radius: 1.0,
        }])
        .unwrap();
    let mesh = engine.upload_mesh(common::odd_mesh()).unwrap();
    for miscount in [-1, 1] {
        let fields = Fields::all(Family::Hits);
        let mut out = Columns::new(fields, 100);
        let job = SceneQuery {
            scene: &scene,
            points: Points::Read(&mut Lying(100, miscount)),
            mode: Mode::Solid,
            fields,
        };
        let err = engine.query_scene(job, &mut out).unwrap_err().to_string();
        assert!(err.contains("point reader"), "{err}");
        let job = MeshQuery {
            mesh: &mesh,
            points: Points::Read(&mut Lying(100, miscount)),
            sign: closest::mesh::Sign::Pseudonormal,
            fields,
        };
        let err = engine.query_mesh(job, &mut out).unwrap_err().to_string();
        assert!(err.contains("point reader"), "{err}");
        let fields = Fields::all(Family::Contacts);
        let mut out = Columns::new(fields, 100);
        let job = SphereContacts {
            scene: &scene,
            spheres: Spheres::Read(&mut Lying(100, miscount)),
            fields,
        };
        let err = engine
            .sphere_contacts(job, &mut out)
            .unwrap_err()
            .to_string();
        assert!(err.contains("sphere reader"), "{err}");
    }
    // The engine is fine after: a plain query answers.
    let hits = engine
        .scene_hits(&scene, &[[2.0f32, 0.0, 0.0]], Mode::Solid)
        .unwrap();
    assert!((hits[0].distance - 1.0).abs() < 1e-6);
}

#[test]
fn device_time_total_sums_every_job() {
    // A job of several queries (a band grid's levels) reports the difference of the total
    // across it, so the total must grow by each job's own device time, exactly.
    let fresh = open_engine(EngineOptions::default());
    let mut rng = Rng::new(5);
    let shapes = mixed_scene(&mut rng, 20, 3.0);
    let scene = fresh.upload_scene(&shapes).unwrap();
    let points: Vec<[f32; 3]> = (0..5000)
        .map(|_| {
            let p = rng.vec(-4.0, 4.0);
            [p.x as f32, p.y as f32, p.z as f32]
        })
        .collect();
    assert_eq!(fresh.device_time_total(), None, "no job has run yet");
    let mut expected = std::time::Duration::ZERO;
    for _ in 0..3 {
        fresh.scene_hits(&scene, &points, Mode::Surface).unwrap();
        let Some(device) = fresh.last_timing().device else {
            // An adapter without timestamp queries has no device time to sum.
            assert_eq!(fresh.device_time_total(), None);
            return;
        };
        assert!(device > std::time::Duration::ZERO);
        expected += device;
        assert_eq!(fresh.device_time_total(), Some(expected));
    }
}
