//! Mesh queries, the GPU path (`upload_mesh` + `query_mesh`, unsigned and pseudonormal-signed,
//! every field; and the signed distance alone, a grid's sampled on the device) beside parry3d's `TriMesh` (its BVH, `project_point`, with `ORIENTED` pseudo-normals for the
//! sign) on all cores (rayon), same points, same run, on two workloads per shared mesh:
//! 1,000,000 points uniform over the mesh's box padded by 0.1 of its largest extent, and the
//! 128³ grid `closest sdf --res 128` samples (the same padded box, corners inclusive, C order).
//! Distances are cross-checked before any time counts. Median of 3 runs.
//!
//! A sample of every GPU answer is also checked against a brute-force f64 distance.
//!
//! `cargo bench --bench meshes`; CLOSEST_BENCH_POINTS, CLOSEST_BENCH_GRID (samples an axis; 0
//! skips the grids), CLOSEST_BENCH_REPEATS and CLOSEST_BENCH_MESHES (comma-separated paths)
//! override; CLOSEST_BENCH_PARRY=0 leaves parry3d out (its columns read "–");
//! CLOSEST_BENCH_PORTABLE=1 runs the portable kernels (`EngineOptions::portable_kernels`);
//! CLOSEST_BENCH_MORTON=1 or 0 sorts the queries in Morton order or not (default: the
//! adapter's); CLOSEST_BENCH_CHUNK_ROWS sets the rows a chunk. Open3D and Warp run from `scripts/bench/peers_mesh.py`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use closest::Engine;
use closest::fields::{DISTANCE, Family, Fields};
use closest::io::load_mesh;
use closest::mesh::{Mesh, Sign, closest_feature};
use closest::sdf::{Grid, GridRegion};
use parry3d::math::{Pose, Vector};
use parry3d::query::PointQuery;
use parry3d::shape::{TriMesh, TriMeshFlags};
use rayon::prelude::*;

#[allow(dead_code, reason = "this bench uses part of the shared helpers")]
mod common;

use common::{bench_engine, env_count, env_flag, timed, v};

/// The rows of one workload: query points, or an SDF grid's samples (which the GPU computes
/// itself and parry3d gets as points).
enum Rows<'a> {
    Points(&'a [[f64; 3]]),
    Grid(&'a Grid, &'a [[f64; 3]]),
}

/// One table row: the GPU and parry3d on the same rows around `mesh`. The GPU's columns: every
/// field unsigned and pseudonormal-signed (`query_mesh`), and the signed distance only
/// (12 bytes up and 4 down a row; a grid's `Engine::sdf`, 4 down).
fn compare(
    engine: &Engine,
    name: &str,
    mesh: &Mesh,
    rows: Rows<'_>,
    repeats: usize,
    with_parry: bool,
) {
    let points = match rows {
        Rows::Points(points) | Rows::Grid(_, points) => points,
    };
    let count = points.len();
    let gpu = engine.upload_mesh(mesh.clone()).expect("upload");
    let distance_only = Fields::from_bits(Family::Hits, DISTANCE);
    // Build the pipelines outside the timings.
    let warm = &points[..1000.min(count)];
    for sign in [Sign::None, Sign::Pseudonormal] {
        mesh_hits(engine, &gpu, warm, sign).expect("warm-up");
        mesh_job(engine, &gpu, warm, sign, distance_only).expect("warm-up");
    }
    let (unsigned_time, _) = timed(repeats, || {
        mesh_hits(engine, &gpu, points, Sign::None).expect("query")
    });
    let (signed_time, _) = timed(repeats, || {
        mesh_hits(engine, &gpu, points, Sign::Pseudonormal).expect("query")
    });
    let (distance_time, distances) = timed(repeats, || match rows {
        // The column is read where the call left it: copying it out is not the call's time.
        Rows::Points(points) => Distances::Columns(
            mesh_job(engine, &gpu, points, Sign::Pseudonormal, distance_only).expect("query"),
        ),
        Rows::Grid(grid, _) => {
            let mut values = Vec::with_capacity(grid.len());
            let job = closest::engine::SdfGrid {
                mesh: &gpu,
                grid,
                sign: Sign::Pseudonormal,
            };
            engine
                .sdf(job, &mut |_first, chunk: &[f32]| {
                    values.extend_from_slice(chunk);
                    Ok(())
                })
                .expect("sdf");
            Distances::Values(values)
        }
    });
    let distances = match &distances {
        Distances::Columns(columns) => columns.f32s("distance").expect("the distance column"),
        Distances::Values(values) => values.as_slice(),
    };

    // Where the distance-only job's time went: the host filling inputs, waiting on the
    // device, draining results, submitting (`Engine::last_timing`, the last run), against the
    // whole call's median.
    let split = engine.last_timing();
    let split = format!(
        "    ({name}, signed distance only: {}; the call {:.1} ms)",
        split.breakdown(),
        distance_time.as_secs_f64() * 1e3
    );
    check_sample(name, mesh, points, distances);
    let parry_time = with_parry.then(|| parry_signed_time(name, mesh, points, distances, repeats));
    let rate = |t: Duration| count as f64 / t.as_secs_f64() / 1e6;
    let peer = |t: Option<Duration>, f: &dyn Fn(f64) -> f64| {
        t.map_or("–".to_string(), |t| format!("{:.3}", f(rate(t))))
    };
    println!(
        "{name:>20} {:>10} {:>10.3} {:>12.3} {:>12.3} {:>14} {:>10} {:>10}",
        mesh.triangles.len(),
        rate(unsigned_time),
        rate(signed_time),
        rate(distance_time),
        peer(parry_time, &|p| p),
        peer(parry_time, &|p| rate(signed_time) / p),
        peer(parry_time, &|p| rate(distance_time) / p),
    );
    println!("{split}");
}

/// 200 rows of `distances` against the brute-force f64 distance to every triangle: a
/// wrong-but-fast kernel cannot post a figure.
fn check_sample(name: &str, mesh: &Mesh, points: &[[f64; 3]], distances: &[f32]) {
    let (lo, hi) = mesh.bounds();
    let rows: Vec<usize> = (0..points.len())
        .step_by((points.len() / 200).max(1))
        .collect();
    rows.into_par_iter().for_each(|row| {
        let p = closest::DVec3::from_array(points[row]);
        let truth = (0..mesh.triangles.len())
            .map(|t| (closest_feature(p, mesh.corners(t)).0 - p).length())
            .fold(f64::INFINITY, f64::min);
        let scale = p.max_abs().max(lo.max_abs()).max(hi.max_abs());
        let got = distances[row].abs() as f64;
        assert!(
            (got - truth).abs() <= closest::tolerance(scale),
            "{name}: row {row}: the GPU's {got} against the f64 brute force {truth}"
        );
    });
}

/// parry3d's signed distances (`TriMesh` with `ORIENTED` pseudo-normals) on all cores: its
/// median time, after checking it answers the same question as the GPU.
fn parry_signed_time(
    name: &str,
    mesh: &Mesh,
    points: &[[f64; 3]],
    distances: &[f32],
    repeats: usize,
) -> Duration {
    let vertices = mesh.vertices.iter().map(v).collect();
    let trimesh = TriMesh::with_flags(vertices, mesh.triangles.clone(), TriMeshFlags::ORIENTED)
        .expect("parry builds the mesh");
    let mut signed = vec![0f32; points.len()];
    let (parry_time, ()) = timed(repeats, || {
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
            })
    });
    // Same question, same answer: |d| within 1e-4 of the mesh size on every row.
    let (lo, hi) = mesh.bounds();
    let size = (hi - lo).length();
    let disagree = distances
        .iter()
        .zip(&signed)
        .filter(|(a, b)| (a.abs() - b.abs()).abs() as f64 > 1e-4 * size)
        .count();
    assert!(
        disagree == 0,
        "{name}: parry3d and the GPU disagree on {disagree} distances"
    );
    parry_time
}

fn main() {
    let engine = bench_engine();
    // CLOSEST_BENCH_MORTON=1 or 0 overrides the adapter's default query order.
    if std::env::var("CLOSEST_BENCH_MORTON").is_ok() {
        engine.set_reorder_queries(env_flag("CLOSEST_BENCH_MORTON"));
    }
    let rows = env_count("CLOSEST_BENCH_POINTS", 1_000_000);
    let grid = env_count("CLOSEST_BENCH_GRID", 128);
    let repeats = env_count("CLOSEST_BENCH_REPEATS", 3).max(1);
    let with_parry =
        std::env::var("CLOSEST_BENCH_PARRY").map_or(true, |_| env_flag("CLOSEST_BENCH_PARRY"));
    println!(
        "adapter: {}; kernels: {}; Morton order: {}; median of {repeats}; M queries/s",
        engine.describe(),
        engine.scene_kernels(),
        engine.reorders_queries()
    );
    let paths: Vec<PathBuf> = match std::env::var("CLOSEST_BENCH_MESHES") {
        Ok(list) => list.split(',').map(PathBuf::from).collect(),
        Err(_) => {
            let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data/meshes");
            ["fandisk.obj", "stanford-bunny.obj", "igea.ply"]
                .map(|name| dir.join(name))
                .to_vec()
        }
    };
    let meshes: Vec<(String, Mesh)> = paths
        .iter()
        .map(|path| {
            let mesh = load_mesh(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let name = path
                .file_name()
                .map_or_else(String::new, |n| n.to_string_lossy().into());
            (name, mesh)
        })
        .collect();
    let header = || {
        println!(
            "{:>20} {:>10} {:>10} {:>12} {:>12} {:>14} {:>10} {:>10}",
            "mesh",
            "triangles",
            "GPU",
            "GPU signed",
            "signed dist",
            "parry3d signed",
            "signed/pa",
            "dist/pa"
        )
    };
    println!("{rows} points uniform over the padded box:");
    header();
    for (name, mesh) in &meshes {
        let (lo, hi) = mesh.bounds();
        let points = closest::bench::padded_box_points(lo, hi, rows);
        compare(
            &engine,
            name,
            mesh,
            Rows::Points(&points),
            repeats,
            with_parry,
        );
    }
    if grid < 2 {
        return;
    }
    println!("the {grid}³ grid of `closest sdf --res {grid}`:");
    header();
    for (name, mesh) in &meshes {
        let grid = Grid::new(mesh, [grid; 3], GridRegion::Pad(0.1)).expect("a grid");
        let points: Vec<[f64; 3]> = (0..grid.len()).map(|row| grid.point(row)).collect();
        compare(
            &engine,
            name,
            mesh,
            Rows::Grid(&grid, &points),
            repeats,
            with_parry,
        );
    }
}

/// A mesh query of `fields`, collected.
fn mesh_job(
    engine: &Engine,
    mesh: &closest::GpuMesh,
    points: &[[f64; 3]],
    sign: Sign,
    fields: Fields,
) -> closest::Result<closest::Columns> {
    let mut columns = closest::Columns::new(fields, points.len());
    let job = closest::engine::MeshQuery {
        mesh,
        points: closest::Points::F64(points),
        sign,
        fields,
    };
    engine.query_mesh(job, &mut columns).map(|()| columns)
}

/// A distance-only job's answers: a query's columns, or a grid's values.
enum Distances {
    Columns(closest::Columns),
    Values(Vec<f32>),
}

/// A mesh query of every field, as whole hits.
fn mesh_hits(
    engine: &Engine,
    mesh: &closest::GpuMesh,
    points: &[[f64; 3]],
    sign: Sign,
) -> closest::Result<Vec<closest::GpuHit>> {
    let mut hits = Vec::with_capacity(points.len());
    let job = closest::engine::MeshQuery {
        mesh,
        points: closest::Points::F64(points),
        sign,
        fields: Fields::all(Family::Hits),
    };
    engine.query_mesh(job, &mut hits).map(|()| hits)
}
