//! The Rust side of `scripts/bench/parity.py`: a distance-only mesh query of the points of a
//! `.npy` file, held in memory, through the library (`Engine::query_mesh` with a distance-only `MeshQuery`), as the
//! Python package runs it. Prints the median of REPEATS runs in seconds and the distance sum.
//!
//! `cargo run --release --example mesh_distances -- MESH POINTS.npy [REPEATS]`

use std::time::Instant;

use closest::fields::{DISTANCE, Family, Fields};
use closest::io::PointFile;
use closest::io::load_mesh;
use closest::mesh::Sign;
use closest::{Engine, EngineOptions};

fn main() -> closest::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [mesh_path, points_path, rest @ ..] = args.as_slice() else {
        return Err(closest::Error::Usage(
            "usage: mesh_distances MESH POINTS.npy [REPEATS]".into(),
        ));
    };
    let repeats: usize = rest.first().and_then(|s| s.parse().ok()).unwrap_or(5);
    let engine = Engine::new(&EngineOptions::default())?;
    let points = PointFile::open(points_path.as_ref())?.read_all()?;
    let mesh = engine.upload_mesh(load_mesh(mesh_path.as_ref())?)?;
    let distance = Fields::from_bits(Family::Hits, DISTANCE);
    let mut times = Vec::new();
    let mut sum = 0.0;
    for _ in 0..repeats {
        let started = Instant::now();
        let mut columns = closest::Columns::new(distance, points.len());
        let job = closest::engine::MeshQuery {
            mesh: &mesh,
            points: (&points).into(),
            sign: Sign::None,
            fields: distance,
        };
        engine.query_mesh(job, &mut columns)?;
        times.push(started.elapsed().as_secs_f64());
        sum = columns
            .f32s("distance")
            .unwrap_or(&[])
            .iter()
            .map(|&d| d as f64)
            .sum();
    }
    times.sort_by(f64::total_cmp);
    println!("{:.4} {sum:.6}", times[times.len() / 2]);
    Ok(())
}
