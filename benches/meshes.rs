//! Mesh queries, the GPU path (`upload_mesh` + `query_mesh`, unsigned and pseudonormal-signed)
//! beside parry3d's `TriMesh` (its BVH, `project_point`, with `ORIENTED` pseudo-normals for the
//! sign) on all cores (rayon), same points, same run, on two workloads per shared mesh:
//! 1,000,000 points uniform over the mesh's box padded by 0.1 of its largest extent, and the
//! 128³ grid `closest sdf --res 128` samples (the same padded box, corners inclusive, C order).
//! Distances are cross-checked before any time counts. Median of 3 runs.
//!
//! `cargo bench --bench meshes`; CLOSEST_BENCH_POINTS, CLOSEST_BENCH_GRID (samples an axis)
//! and CLOSEST_BENCH_REPEATS override; CLOSEST_BENCH_PORTABLE=1 runs the portable kernels
//! (`EngineOptions::portable_kernels`). Open3D and Warp run from `scripts/peers_mesh.py`.

use std::path::Path;
use std::time::{Duration, Instant};

use closest::Engine;
use closest::io::load_mesh;
use closest::mesh::{Mesh, Sign};
use closest::sdf::{Grid, GridRegion};
use parry3d::math::{Pose, Vector};
use parry3d::query::PointQuery;
use parry3d::shape::{TriMesh, TriMeshFlags};
use rayon::prelude::*;

#[allow(dead_code, reason = "this bench uses part of the shared helpers")]
mod common;

use common::{bench_engine, env_count, v};

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

/// One table row: the GPU and parry3d on `points` around `mesh`.
fn compare(engine: &Engine, name: &str, mesh: &Mesh, points: &[[f64; 3]], repeats: usize) {
    let rows = points.len();
    let gpu = engine.upload_mesh(mesh.clone()).expect("upload");
    // Build the pipeline outside the timings.
    engine
        .query_mesh(&gpu, &points[..1000.min(rows)], Sign::None)
        .expect("warm-up");
    let timed = |sign: Sign| {
        let mut hits = Vec::new();
        let times = (0..repeats)
            .map(|_| {
                let started = Instant::now();
                hits = engine.query_mesh(&gpu, points, sign).expect("query");
                started.elapsed()
            })
            .collect();
        (median(times), hits)
    };
    let (unsigned_time, _) = timed(Sign::None);
    let (signed_time, hits) = timed(Sign::Pseudonormal);

    let vertices = mesh.vertices.iter().map(|&p| v(p)).collect();
    let trimesh = TriMesh::with_flags(vertices, mesh.triangles.clone(), TriMeshFlags::ORIENTED)
        .expect("parry builds the mesh");
    let mut signed = vec![0f32; rows];
    let times = (0..repeats)
        .map(|_| {
            let started = Instant::now();
            signed
                .par_iter_mut()
                .zip(points.par_iter())
                .for_each(|(d, p)| {
                    let p = Vector::new(p[0] as f32, p[1] as f32, p[2] as f32);
                    let projection = trimesh.project_point(&Pose::IDENTITY, p, false);
                    let distance = (p - projection.point).length();
                    *d = if projection.is_inside {
                        -distance
                    } else {
                        distance
                    };
                });
            started.elapsed()
        })
        .collect();
    let parry_time = median(times);
    // Same question, same answer: |d| within 1e-4 of the mesh size on every row.
    let (lo, hi) = mesh.bounds();
    let size = (hi - lo).length();
    let disagree = hits
        .iter()
        .zip(&signed)
        .filter(|(h, d)| (h.distance.abs() - d.abs()).abs() as f64 > 1e-4 * size)
        .count();
    assert!(
        disagree == 0,
        "{name}: parry3d and the GPU disagree on {disagree} distances"
    );
    let rate = |t: Duration| rows as f64 / t.as_secs_f64() / 1e6;
    println!(
        "{name:>20} {:>10} {:>10.3} {:>12.3} {:>14.3} {:>10.2}",
        mesh.triangles.len(),
        rate(unsigned_time),
        rate(signed_time),
        rate(parry_time),
        rate(signed_time) / rate(parry_time)
    );
}

fn main() {
    let engine = bench_engine();
    let rows = env_count("CLOSEST_BENCH_POINTS", 1_000_000);
    let grid = env_count("CLOSEST_BENCH_GRID", 128).max(2);
    let repeats = env_count("CLOSEST_BENCH_REPEATS", 3).max(1);
    println!(
        "adapter: {}; kernels: {}; Morton order: {}; median of {repeats}; M queries/s",
        engine.describe(),
        engine.scene_kernels(),
        engine.reorders_queries()
    );
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data/meshes");
    let meshes: Vec<(&str, Mesh)> = ["fandisk.obj", "stanford-bunny.obj", "igea.ply"]
        .into_iter()
        .map(|name| {
            let mesh = load_mesh(&dir.join(name)).expect("the shared meshes load");
            (name, mesh)
        })
        .collect();
    let header = || {
        println!(
            "{:>20} {:>10} {:>10} {:>12} {:>14} {:>10}",
            "mesh", "triangles", "GPU", "GPU signed", "parry3d signed", "GPU/parry"
        )
    };
    println!("{rows} points uniform over the padded box:");
    header();
    for (name, mesh) in &meshes {
        let (lo, hi) = mesh.bounds();
        let points = closest::bench::padded_box_points(lo, hi, rows);
        compare(&engine, name, mesh, &points, repeats);
    }
    println!("the {grid}³ grid of `closest sdf --res {grid}`:");
    header();
    for (name, mesh) in &meshes {
        let grid = Grid::new(mesh, [grid; 3], GridRegion::Pad(0.1)).expect("a grid");
        let points: Vec<[f64; 3]> = (0..grid.len()).map(|row| grid.point(row)).collect();
        compare(&engine, name, mesh, &points, repeats);
    }
}
