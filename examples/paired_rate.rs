//! Paired rows (point i against shape i, `Engine::query_paired`) on 2,000,000 rows (ROWS
//! overrides), every field: spheres alone (one kind) and the bench's mixed shapes, with points
//! and shapes read as texels and from storage (`EngineOptions::storage_points`) in the same
//! run, median of 3.
//!
//! `cargo run --release --example paired_rate`

use closest::bench::{sample_points, sample_scene};
use closest::{DVec3, Engine, EngineOptions, Mode, Shape};
use std::time::Instant;

fn main() -> closest::Result<()> {
    let rows: usize = std::env::var("ROWS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2_000_000);
    let points: Vec<[f32; 3]> = sample_points(rows)
        .iter()
        .map(|p| p.map(|x| x * 55.0))
        .collect();
    let spheres: Vec<Shape> = points
        .iter()
        .enumerate()
        .map(|(k, p)| Shape::Sphere {
            center: DVec3::new(p[0] as f64 + 1.0, p[1] as f64, p[2] as f64 - 0.5),
            radius: 0.5 + (k % 7) as f64 * 0.25,
        })
        .collect();
    let mixed = sample_scene(rows);
    for storage_points in [false, true] {
        let engine = Engine::new(&EngineOptions {
            storage_points,
            ..Default::default()
        })?;
        let source = if engine.point_texels() {
            "texels"
        } else {
            "storage"
        };
        println!("{}; rows read from {source}", engine.describe());
        for (name, shapes) in [("spheres", &spheres), ("mixed shapes", &mixed)] {
            let mut seconds = Vec::new();
            for _ in 0..3 {
                let start = Instant::now();
                let mut hits: Vec<closest::GpuHit> = Vec::with_capacity(points.len());
                let job = closest::engine::PairedQuery {
                    shapes,
                    points: closest::Points::F32(&points),
                    mode: Mode::Solid,
                    fields: closest::Fields::all(closest::Family::Hits),
                };
                engine.query_paired(job, &mut hits)?;
                seconds.push(start.elapsed().as_secs_f64());
            }
            seconds.sort_by(f64::total_cmp);
            println!(
                "  {name:>12}: {:.2} M rows/s",
                rows as f64 / seconds[1] / 1e6
            );
        }
    }
    Ok(())
}
