//! parry3d on one mesh and one points file, for `scripts/bench/mesh_scaling.py`: the mesh read by
//! our loader, parry3d's `TriMesh` built over it (its BVH), and every point projected on all
//! cores (unsigned distance), each phase timed apart. Prints one line:
//! `parry3d load L s, build B s, queries Q s, sum S` (S: the sum of the distances, to compare
//! with the GPU's).
//!
//! `cargo run --release --example parry_mesh MESH POINTS.npy`

use std::path::Path;
use std::time::Instant;

use parry3d::math::{Pose, Vector};
use parry3d::query::PointQuery;
use parry3d::shape::TriMesh;
use rayon::prelude::*;

fn main() -> closest::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [mesh_path, points_path] = args.as_slice() else {
        eprintln!("usage: parry_mesh MESH POINTS.npy");
        std::process::exit(2);
    };
    let points = closest::io::PointFile::open(Path::new(points_path))?.read_all()?;
    let started = Instant::now();
    let mesh = closest::io::load_mesh(Path::new(mesh_path))?;
    let load = started.elapsed();

    let started = Instant::now();
    let vertices = mesh
        .vertices
        .iter()
        .map(|p| Vector::new(p.x as f32, p.y as f32, p.z as f32))
        .collect();
    let triangles = mesh.triangles.clone();
    drop(mesh);
    let trimesh = TriMesh::new(vertices, triangles).expect("parry builds the mesh");
    let build = started.elapsed();

    let started = Instant::now();
    let distances: Vec<f32> = points
        .par_iter()
        .map(|p| {
            let p = Vector::new(p[0] as f32, p[1] as f32, p[2] as f32);
            let projection = trimesh.project_point(&Pose::IDENTITY, p, false);
            (p - projection.point).length()
        })
        .collect();
    let queries = started.elapsed();
    let sum: f64 = distances.iter().map(|&d| d as f64).sum();
    println!(
        "parry3d load {:.3} s, build {:.3} s, queries {:.3} s, sum {sum:.6}",
        load.as_secs_f64(),
        build.as_secs_f64(),
        queries.as_secs_f64()
    );
    Ok(())
}
