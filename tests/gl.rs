//! The GL backend (wgpu's EGL path; Mesa's llvmpipe here): the same kernels as on Vulkan, their
//! scenes, points and paired shapes read from GL textures. Every answer there was wrong: wgpu's
//! GL backend takes a one-layer texture for a 2-D one, and the kernels' `texture_2d_array`
//! read zeros from it (`gpu::texels::layers_on`). No test ran on GL, and a machine with Mesa's
//! GL but not its Vulkan driver got those answers by default. Scenes are checked against the
//! f64 reference; the other jobs against the Vulkan engine's answers, which every other test
//! checks against the reference. Without a GL adapter these tests fail with the install hint.

mod common;

use closest::fields::{Family, Fields};
use closest::mesh::Sign;
use closest::sdf::{Grid, GridRegion};
use closest::{DVec3, Engine, EngineOptions, Mode, Shape, tolerance};
use common::{Rng, TestJobs, assert_nearest, engine, mixed_scene, within};

fn gl_engine() -> Engine {
    let engine = Engine::new(&EngineOptions {
        adapter: Some("gl".into()),
        ..Default::default()
    })
    .unwrap_or_else(|e| {
        panic!(
            "the GL tests need a GL adapter and found none.\n{e}\n\
             On Debian/Ubuntu: `sudo apt-get install -y libegl1 libegl-mesa0 libgl1-mesa-dri` \
             (Mesa's llvmpipe through EGL)."
        )
    });
    assert_eq!(engine.adapter_info().backend, wgpu::Backend::Gl);
    engine
}

fn points(rng: &mut Rng, count: usize, spread: f64) -> Vec<[f32; 3]> {
    (0..count)
        .map(|_| {
            let p = rng.vec(-spread, spread);
            [p.x as f32, p.y as f32, p.z as f32]
        })
        .collect()
}

/// `gl` and `vulkan` within SPEC §3's bound for values of `scale`, row by row.
fn assert_close(what: &str, gl: &[f32], vulkan: &[f32], scale: f64) {
    assert_eq!(gl.len(), vulkan.len(), "{what}");
    let tol = tolerance(scale);
    let wrong: Vec<String> = gl
        .iter()
        .zip(vulkan)
        .enumerate()
        .filter(|(_, (g, v))| !within((**g as f64 - **v as f64).abs(), tol))
        .map(|(i, (g, v))| format!("row {i}: {g} on GL, {v} on Vulkan"))
        .take(8)
        .collect();
    assert!(wrong.is_empty(), "{what}:\n{}", wrong.join("\n"));
}

/// The shared fandisk, and the scale of SPEC §3's bound for its queries.
fn fandisk() -> (closest::mesh::Mesh, f64) {
    let mesh = closest::io::load_mesh(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data/meshes/fandisk.obj"),
    )
    .unwrap();
    let (low, high) = mesh.bounds();
    let scale = (high - low).max_abs() + mesh.centre().max_abs();
    (mesh, scale)
}

#[test]
fn scenes_of_every_kind_answer_as_the_reference_on_gl() {
    let gl = gl_engine();
    let mut rng = Rng::new(47);
    for count in [1, 60] {
        let shapes = mixed_scene(&mut rng, count, 3.0);
        let points: Vec<DVec3> = (0..1500).map(|_| rng.vec(-4.0, 4.0)).collect();
        for mode in [Mode::Solid, Mode::Surface] {
            assert_nearest(&gl, &shapes, &points, mode);
        }
    }
}

#[test]
fn paired_segment_and_contact_jobs_answer_as_on_vulkan() {
    let gl = gl_engine();
    let mut rng = Rng::new(48);
    let shapes = mixed_scene(&mut rng, 900, 2.0);
    let queries = points(&mut rng, shapes.len(), 3.0);
    let distances = |engine: &Engine| {
        let hits = engine.paired_hits(&shapes, &queries, Mode::Solid).unwrap();
        hits.iter().map(|h| h.distance).collect::<Vec<_>>()
    };
    assert_close(
        "paired distances",
        &distances(&gl),
        &distances(engine()),
        5.0,
    );

    let segments = |rng: &mut Rng| -> Vec<[DVec3; 2]> {
        (0..700)
            .map(|_| [rng.vec(-2.0, 2.0), rng.vec(-2.0, 2.0)])
            .collect()
    };
    let (a, b) = (segments(&mut rng), segments(&mut rng));
    let pairs = |engine: &Engine| {
        let hits = engine.segment_hits(&a, &b).unwrap();
        hits.iter().map(|h| h.distance).collect::<Vec<_>>()
    };
    assert_close("segment distances", &pairs(&gl), &pairs(engine()), 4.0);

    let scene_shapes = mixed_scene(&mut rng, 80, 3.0);
    let spheres: Vec<[f32; 4]> = points(&mut rng, 1000, 4.0)
        .into_iter()
        .map(|[x, y, z]| [x, y, z, rng.range(0.0, 0.5) as f32])
        .collect();
    let depths = |engine: &Engine| {
        let scene = engine.upload_scene(&scene_shapes).unwrap();
        let contacts = engine.contacts(&scene, &spheres).unwrap();
        contacts.iter().map(|c| c.depth).collect::<Vec<_>>()
    };
    assert_close(
        "sphere contact depths",
        &depths(&gl),
        &depths(engine()),
        5.0,
    );

    let bodies: Vec<Shape> = mixed_scene(&mut rng, 60, 4.0)
        .into_iter()
        .filter(|s| closest::engine::check_bodies(std::slice::from_ref(s), "bodies").is_ok())
        .collect();
    // Bodies other than spheres are answered against convex targets only.
    let convex_targets: Vec<Shape> = scene_shapes
        .iter()
        .filter(|s| !matches!(s, Shape::Torus { .. }))
        .cloned()
        .collect();
    let separations = |engine: &Engine| {
        let targets = engine.upload_body_targets(&convex_targets).unwrap();
        let fields = Fields::all(Family::Bodies);
        let job = closest::engine::BodyContacts {
            targets: &targets,
            bodies: &bodies,
            fields,
        };
        let columns =
            closest::Columns::collect(fields, bodies.len(), |sink| engine.body_contacts(job, sink))
                .unwrap();
        columns.f32s("distance").unwrap().to_vec()
    };
    assert_close(
        "body distances",
        &separations(&gl),
        &separations(engine()),
        5.0,
    );
}

#[test]
fn meshes_and_their_grids_answer_as_on_vulkan() {
    let gl = gl_engine();
    let (mesh, scale) = fandisk();
    let mut rng = Rng::new(49);
    let queries = points(&mut rng, 1200, 1.2 * scale);
    let grid = Grid::new(&mesh, [13, 12, 11], GridRegion::Pad(0.1)).unwrap();
    let answers = |engine: &Engine, sign: Sign| {
        let uploaded = engine.upload_mesh(mesh.clone()).unwrap();
        let hits = engine.mesh_hits(&uploaded, &queries, sign).unwrap();
        let grid = engine.sdf_values(&uploaded, &grid, sign).unwrap();
        (hits.iter().map(|h| h.distance).collect::<Vec<_>>(), grid)
    };
    for sign in [Sign::Pseudonormal, Sign::Winding] {
        let (gl_hits, gl_grid) = answers(&gl, sign);
        let (vulkan_hits, vulkan_grid) = answers(engine(), sign);
        assert_close(
            &format!("{sign:?} distances"),
            &gl_hits,
            &vulkan_hits,
            scale,
        );
        assert_close(&format!("{sign:?} grid"), &gl_grid, &vulkan_grid, scale);
    }
}

/// SPEC §8: the same seed gives the same file on any adapter. The device finds each sample's
/// nearest triangle and its sign, the host measures the distance and its gradient to that
/// triangle in f64 (`engine::samples`): GL and Vulkan write the same bits, except where they
/// find different triangles within f32's rounding of a tie (a few rows in 10^4; the two
/// answers then agree within SPEC §3). Before, the device's own f32 distances differed in
/// 5 % of the rows.
#[test]
fn training_samples_are_the_same_bits_as_on_vulkan() {
    use closest::engine::{MeshSamples, SampleRows};
    use closest::sample::{SampleSpec, Sampler};
    let gl = gl_engine();
    let (mesh, scale) = fandisk();
    let spec = SampleSpec {
        surface: 1000,
        near: 20_000,
        sigmas: vec![0.01 * scale, 0.001 * scale],
        uniform: 4000,
        pad: 0.1,
        seed: 11,
    };
    let sampler = Sampler::new(&mesh, spec).unwrap();
    let samples = |engine: &Engine, sign: Sign| {
        let uploaded = engine.upload_mesh(mesh.clone()).unwrap();
        let mut rows = SampleRows::default();
        let job = MeshSamples {
            mesh: &uploaded,
            sampler: &sampler,
            sign,
        };
        engine
            .mesh_samples(job, &mut |_, chunk: SampleRows| {
                rows.append(chunk);
                Ok(())
            })
            .unwrap();
        rows
    };
    for sign in [Sign::Pseudonormal, Sign::Winding] {
        let (on_gl, on_vulkan) = (samples(&gl, sign), samples(engine(), sign));
        assert!(on_gl.points == on_vulkan.points && on_gl.kind == on_vulkan.kind);
        let differing: Vec<usize> = (0..sampler.len())
            .filter(|&row| {
                on_gl.sdf[row].to_bits() != on_vulkan.sdf[row].to_bits()
                    || on_gl.normal[row].map(f32::to_bits)
                        != on_vulkan.normal[row].map(f32::to_bits)
            })
            .collect();
        assert!(
            differing.is_empty(),
            "{sign:?}: {} of {} rows differ (the first: {:?})",
            differing.len(),
            sampler.len(),
            &differing[..differing.len().min(8)]
        );
    }
}

#[test]
fn a_chunk_longer_than_the_gl_context_lock_timeout_stalls_no_other_thread() {
    // wgpu's GL backend holds its context's lock through each call and panics when a thread
    // waits 6 s for it: beside a chunk that long, other threads' uploads, queries and drops
    // panicked, and the process aborted (body tests on two threads). They now wait for the
    // device's turn (`gpu::turn`), and a drop meanwhile is left to the thread holding it.
    let gl = gl_engine();
    let mut rng = Rng::new(49);
    let spheres = |rng: &mut Rng, count: usize| -> Vec<Shape> {
        (0..count)
            .map(|_| Shape::Sphere {
                center: rng.vec(-50.0, 50.0),
                radius: rng.range(0.1, 1.0),
            })
            .collect()
    };
    // Spheres scanned without a hierarchy: every row tests every shape, so a scene's size sets
    // a chunk's time. Sized from this machine's speed (the pipeline built first) for one
    // chunk of about 12 s.
    let rows = 1 << 16;
    let probe_shapes = spheres(&mut rng, 4096);
    let probe = gl.upload_scene_brute_force(&probe_shapes).unwrap();
    let probe_points = points(&mut rng, 8192, 60.0);
    gl.scene_hits(&probe, &probe_points[..64], Mode::Solid)
        .unwrap();
    let started = std::time::Instant::now();
    gl.scene_hits(&probe, &probe_points, Mode::Solid).unwrap();
    let tests_per_second = (4096.0 * 8192.0) / started.elapsed().as_secs_f64();
    let count = ((12.0 * tests_per_second / rows as f64).ceil() as usize).max(4096);
    let long_shapes = spheres(&mut rng, count);
    let long_scene = gl.upload_scene_brute_force(&long_shapes).unwrap();
    let long_points = points(&mut rng, rows, 60.0);
    let small_shapes = mixed_scene(&mut rng, 40, 3.0);
    let small_points: Vec<DVec3> = (0..500).map(|_| rng.vec(-4.0, 4.0)).collect();
    let (long_hits, waited) = std::thread::scope(|scope| {
        let long = scope.spawn(|| gl.scene_hits(&long_scene, &long_points, Mode::Solid));
        // Inside the long chunk: a drop, then an upload and a query, each of which waited
        // on the context's lock before.
        std::thread::sleep(std::time::Duration::from_secs(1));
        let started = std::time::Instant::now();
        drop(probe);
        assert_nearest(&gl, &small_shapes, &small_points, Mode::Solid);
        let waited = started.elapsed();
        (
            long.join().expect("the long job").expect("long hits"),
            waited,
        )
    });
    // The long job really held the device that long (else this test proves nothing).
    assert!(
        waited.as_secs_f64() > 6.0,
        "the small job waited only {waited:?}: the long chunk was too short to test the turn"
    );
    let mut failures = Vec::new();
    for (i, hit) in long_hits.iter().enumerate().step_by(rows / 64) {
        let p = long_points[i];
        let p = DVec3::new(p[0] as f64, p[1] as f64, p[2] as f64);
        let expected = closest::reference::nearest(&long_shapes, p, Mode::Solid);
        if !within(hit.distance as f64 - expected.distance, tolerance(60.0)) {
            failures.push(format!(
                "row {i}: {} on GL, {} by the reference",
                hit.distance, expected.distance
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
