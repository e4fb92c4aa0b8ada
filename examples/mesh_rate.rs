//! GPU mesh-query rate alone, for quick A/B runs while tuning the mesh kernel: the points of
//! `cargo bench --bench meshes` (uniform over each shared mesh's box padded by 0.1 of its
//! largest extent), unsigned, median of 3, no peers. The sum of the distances tells whether
//! two builds answer alike.
//!
//! `cargo run --release --example mesh_rate [MESH …]` (default: the three shared meshes);
//! N sets the point count (default 300,000); PORTABLE=1 runs mesh.wgsl where the adapter would
//! run mesh_subgroup.wgsl (`EngineOptions::portable_kernels`).

use std::path::Path;
use std::time::Instant;

use closest::io::load_mesh;
use closest::mesh::Sign;
use closest::{Engine, EngineOptions};

fn main() -> closest::Result<()> {
    let engine = Engine::new(&EngineOptions {
        portable_kernels: std::env::var("PORTABLE").is_ok_and(|s| !s.is_empty() && s != "0"),
        ..Default::default()
    })?;
    let rows: usize = std::env::var("N")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(300_000);
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data/meshes");
    let mut names: Vec<String> = std::env::args().skip(1).collect();
    if names.is_empty() {
        names = ["fandisk.obj", "stanford-bunny.obj", "igea.ply"]
            .map(String::from)
            .to_vec();
    }
    println!(
        "{}; {}; {rows} points; M queries/s, median of 3",
        engine.describe(),
        engine.scene_kernels()
    );
    for name in names {
        let mesh = load_mesh(&dir.join(&name))?;
        let (lo, hi) = mesh.bounds();
        let points = closest::bench::padded_box_points(lo, hi, rows);
        let started = Instant::now();
        let gpu = engine.upload_mesh(mesh)?;
        let upload = started.elapsed().as_secs_f64();
        let hits_of = |points: &[[f64; 3]]| -> closest::Result<Vec<closest::GpuHit>> {
            let mut hits = Vec::with_capacity(points.len());
            let job = closest::engine::MeshQuery {
                mesh: &gpu,
                points: closest::Points::F64(points),
                sign: Sign::None,
                fields: closest::Fields::all(closest::Family::Hits),
            };
            engine.query_mesh(job, &mut hits).map(|()| hits)
        };
        hits_of(&points[..1000.min(rows)])?;
        let mut times = Vec::new();
        let mut sum = 0.0;
        for _ in 0..3 {
            let started = Instant::now();
            let hits = hits_of(&points)?;
            times.push(started.elapsed().as_secs_f64());
            sum = hits.iter().map(|h| h.distance as f64).sum();
        }
        times.sort_by(f64::total_cmp);
        println!(
            "{name:>20}  upload {upload:.3} s  {:.3} M/s  (distance sum {sum:.6})",
            rows as f64 / times[1] / 1e6
        );
    }
    Ok(())
}
