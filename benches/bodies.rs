//! Bodies against meshes and scenes (SPEC §9), the GPU beside parry3d on all cores (rayon),
//! same bodies, same run: capsules about each shared mesh's surface, 1 % of its size (parry3d's
//! `TriMesh`), and boxes
//! against a scene of 10^4 mixed shapes (parry3d's `Compound`), both BVH-backed on its side.
//! The GPU runs `Engine::body_contacts` with every field (distance, both witness points,
//! normal, shape) and with the distance alone. parry3d answers the same question the way a
//! user asks it: `query::distance` for the separation (0 where they overlap), then
//! `query::contact` within that distance for the witness points, the normal and the depth.
//! Target uploads are outside the timings on both sides (parry3d's BVH build too). A sample of
//! rows is cross-checked between the two before any time counts. Median of 3 runs.
//!
//! `cargo bench --bench bodies`; CLOSEST_BENCH_BODIES (10^6), CLOSEST_BENCH_REPEATS (3),
//! CLOSEST_BENCH_MESHES (comma-separated paths; empty: the boxes' row alone) and
//! CLOSEST_BENCH_PARRY=0 override.

use std::path::{Path, PathBuf};
use std::time::Duration;

use closest::engine::BodyContacts;
use closest::fields::{BODY_DISTANCE, Family, Fields};
use closest::io::load_mesh;
use closest::{Columns, DVec3, Engine, GpuScene, Shape};
use parry3d::math::Pose;
use parry3d::query;
use parry3d::shape::{Capsule, Compound, Cuboid, SharedShape, TriMesh};
use rayon::prelude::*;

#[allow(dead_code, reason = "this bench uses part of the shared helpers")]
mod common;

use common::{bench_engine, env_count, env_flag, oriented_pose, parry_part, timed, v};

/// A small deterministic generator (the same bodies every run).
struct Lcg(u64);

impl Lcg {
    fn unit(&mut self) -> f64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
    fn within(&mut self, lo: DVec3, hi: DVec3) -> DVec3 {
        DVec3::new(
            lo.x + (hi.x - lo.x) * self.unit(),
            lo.y + (hi.y - lo.y) * self.unit(),
            lo.z + (hi.z - lo.z) * self.unit(),
        )
    }
    fn direction(&mut self) -> DVec3 {
        let one = DVec3::new(1.0, 1.0, 1.0);
        loop {
            let d = self.within(-one, one);
            if d.length() > 0.1 && d.length() <= 1.0 {
                return d.normalize_or_zero();
            }
        }
    }
    fn quaternion(&mut self) -> [f64; 4] {
        let d = self.direction();
        let w = self.unit();
        let n = (d.length_squared() + w * w).sqrt();
        [d.x / n, d.y / n, d.z / n, w / n]
    }
}

/// `count` capsules `size` long (radius size / 2) about the surface of `mesh`, as collision
/// bodies are: centred within `size` of a random triangle's centroid, turned at random.
fn capsules(count: usize, mesh: &closest::mesh::Mesh, size: f64) -> Vec<Shape> {
    let mut rng = Lcg(7);
    let one = DVec3::new(1.0, 1.0, 1.0);
    (0..count)
        .map(|_| {
            let t =
                ((rng.unit() * mesh.triangles.len() as f64) as usize).min(mesh.triangles.len() - 1);
            let [a, b, c] = mesh.corners(t);
            let centre = (a + b + c) * (1.0 / 3.0) + rng.within(-one, one) * size;
            let half = rng.direction() * (size / 2.0);
            Shape::Capsule {
                a: centre - half,
                b: centre + half,
                radius: size / 2.0,
            }
        })
        .collect()
}

/// `count` boxes over [-100, 100]³ (the sample scene's cube), 0.2–1.2 across, turned.
fn boxes(count: usize) -> Vec<Shape> {
    let mut rng = Lcg(11);
    let corner = DVec3::new(100.0, 100.0, 100.0);
    (0..count)
        .map(|_| Shape::Box {
            center: rng.within(-corner, corner),
            half_extents: rng.within(DVec3::new(0.1, 0.1, 0.1), DVec3::new(0.6, 0.6, 0.6)),
            rotation: rng.quaternion(),
        })
        .collect()
}

/// A body as parry3d's shape and pose.
fn parry_body(body: &Shape) -> (Pose, SharedShape) {
    match *body {
        Shape::Capsule { a, b, radius } => (
            Pose::IDENTITY,
            SharedShape::new(Capsule::new(v(a), v(b), radius as f32)),
        ),
        Shape::Box {
            center,
            half_extents,
            rotation,
        } => (
            oriented_pose(center, rotation),
            SharedShape::new(Cuboid::new(v(half_extents))),
        ),
        ref other => panic!("the bodies bench has no parry twin for {other:?}"),
    }
}

/// parry3d's answer for each body against `target`: distance, then contact within it.
fn parry_contacts(bodies: &[(Pose, SharedShape)], target: &dyn parry3d::shape::Shape) -> Vec<f32> {
    bodies
        .par_iter()
        .map(|(pose, shape)| {
            let apart = query::distance(pose, shape.as_ref(), &Pose::IDENTITY, target)
                .expect("supported")
                .distance;
            let contact = query::contact(
                pose,
                shape.as_ref(),
                &Pose::IDENTITY,
                target,
                apart * 1.0001 + 1e-6,
            )
            .expect("supported");
            contact.map_or(apart, |c| c.dist)
        })
        .collect()
}

fn gpu_contacts(engine: &Engine, targets: &GpuScene, bodies: &[Shape], fields: Fields) -> Columns {
    Columns::collect(fields, bodies.len(), |sink| {
        let job = BodyContacts {
            targets,
            bodies,
            fields,
        };
        engine.body_contacts(job, sink)
    })
    .expect("body contacts")
}

/// One table row: the GPU and parry3d on the same bodies against one target.
fn compare(
    engine: &Engine,
    name: &str,
    targets: &GpuScene,
    shapes: &[Shape],
    bodies: &[Shape],
    parry_target: Option<&dyn parry3d::shape::Shape>,
    repeats: usize,
) {
    let all = Fields::all(Family::Bodies);
    let distance_only = Fields::from_bits(Family::Bodies, BODY_DISTANCE);
    // Build the pipelines outside the timings.
    gpu_contacts(engine, targets, &bodies[..1000.min(bodies.len())], all);
    gpu_contacts(
        engine,
        targets,
        &bodies[..1000.min(bodies.len())],
        distance_only,
    );
    let (all_time, columns) = timed(repeats, || gpu_contacts(engine, targets, bodies, all));
    let (distance_time, _) = timed(repeats, || {
        gpu_contacts(engine, targets, bodies, distance_only)
    });
    let ours = columns.f32s("distance").expect("distance").to_vec();
    let rate = |t: Duration| bodies.len() as f64 / t.as_secs_f64() / 1e6;
    let (peer, ratio_all, ratio_distance) = match parry_target {
        Some(target) => {
            let parry_bodies: Vec<(Pose, SharedShape)> = bodies.iter().map(parry_body).collect();
            let (time, theirs) = timed(repeats, || parry_contacts(&parry_bodies, target));
            check_sample(name, bodies, shapes, &ours, &theirs);
            let peer = rate(time);
            (
                format!("{peer:.3}"),
                format!("{:.2}", rate(all_time) / peer),
                format!("{:.2}", rate(distance_time) / peer),
            )
        }
        None => ("–".into(), "–".into(), "–".into()),
    };
    let overlapping = ours.iter().filter(|d| **d < 0.0).count();
    println!(
        "{name:>22} {:>9} {:>9} {:>10.3} {:>12.3} {:>12} {:>10} {:>10}",
        bodies.len(),
        overlapping,
        rate(all_time),
        rate(distance_time),
        peer,
        ratio_all,
        ratio_distance
    );
}

/// A sample of rows: where the GPU and parry3d disagree, the f64 oracle decides, and the GPU
/// must agree with it (parry3d's disagreements are counted and printed).
fn check_sample(name: &str, bodies: &[Shape], targets: &[Shape], ours: &[f32], theirs: &[f32]) {
    let step = (bodies.len() / 500).max(1);
    let mut parry_off = 0;
    let mut checked = 0;
    for row in (0..bodies.len()).step_by(step) {
        checked += 1;
        let allowed = 1e-4 * bodies[row].scale().max(1.0);
        if (ours[row] - theirs[row]).abs() as f64 <= allowed {
            continue;
        }
        let (_, truth) =
            closest::reference::gjk::nearest_target(&bodies[row], targets).expect("an answer");
        assert!(
            (ours[row] as f64 - truth.distance).abs() <= allowed,
            "{name}: row {row}: the GPU's {} against the f64 oracle's {} ({:?})",
            ours[row],
            truth.distance,
            bodies[row]
        );
        parry_off += 1;
    }
    if parry_off > 0 {
        println!(
            "    ({name}: parry3d differs from the f64 oracle on {parry_off} of {checked} sampled rows; the GPU agrees with it)"
        );
    }
}

fn meshes() -> Vec<PathBuf> {
    match std::env::var("CLOSEST_BENCH_MESHES") {
        Ok(list) => list
            .split(',')
            .filter(|m| !m.is_empty())
            .map(PathBuf::from)
            .collect(),
        Err(_) => ["fandisk.obj", "stanford-bunny.obj", "igea.ply"]
            .iter()
            .map(|m| {
                Path::new(env!("CARGO_MANIFEST_DIR"))
                    .join("../shared/data/meshes")
                    .join(m)
            })
            .collect(),
    }
}

fn main() {
    let engine = bench_engine();
    let count = env_count("CLOSEST_BENCH_BODIES", 1_000_000);
    let repeats = env_count("CLOSEST_BENCH_REPEATS", 3);
    let with_parry =
        std::env::var("CLOSEST_BENCH_PARRY").map_or(true, |_| env_flag("CLOSEST_BENCH_PARRY"));
    println!(
        "# bodies, {} ({})",
        engine.describe(),
        if with_parry {
            "parry3d on all cores"
        } else {
            "no parry3d"
        }
    );
    println!(
        "{:>22} {:>9} {:>9} {:>10} {:>12} {:>12} {:>10} {:>10}",
        "target", "bodies", "overlap", "M/s all", "M/s dist", "parry3d M/s", "× all", "× dist"
    );
    for path in meshes() {
        let mesh = load_mesh(&path).expect("a shared mesh");
        let (lo, hi) = mesh.bounds();
        let extent = hi - lo;
        let bodies = capsules(count, &mesh, extent.x.max(extent.y).max(extent.z) * 0.01);
        let targets = engine.upload_mesh_body_targets(&mesh).expect("upload");
        let trimesh = with_parry.then(|| {
            let vertices = mesh.vertices.iter().map(v).collect();
            TriMesh::new(vertices, mesh.triangles.clone()).expect("parry builds the mesh")
        });
        let name = format!(
            "capsules / {}",
            path.file_stem()
                .map_or("mesh".into(), |s| s.to_string_lossy().into_owned())
        );
        let triangles: Vec<Shape> = (0..mesh.triangles.len())
            .map(|t| {
                let [a, b, c] = mesh.corners(t);
                Shape::Triangle { a, b, c }
            })
            .collect();
        compare(
            &engine,
            &name,
            &targets,
            &triangles,
            &bodies,
            trimesh.as_ref().map(|t| t as &dyn parry3d::shape::Shape),
            repeats,
        );
    }
    let scene = closest::bench::sample_scene(10_000);
    let targets = engine.upload_body_targets(&scene).expect("upload");
    let compound = with_parry.then(|| {
        let parts = scene.iter().map(parry_part).collect();
        Compound::new(parts)
    });
    compare(
        &engine,
        "boxes / 10^4 shapes",
        &targets,
        &scene,
        &boxes(count),
        compound.as_ref().map(|c| c as &dyn parry3d::shape::Shape),
        repeats,
    );
}
