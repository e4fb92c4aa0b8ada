//! Scratch: GPU mesh query timing (unsigned), median of 3.
use std::path::Path;
use std::time::Instant;

use closest::mesh::{Sign, load_mesh};
use closest::{Engine, EngineOptions};

fn main() {
    let engine = Engine::new(&EngineOptions::default()).unwrap();
    let rows: usize = std::env::var("N")
        .ok()
        .map(|s| s.parse().unwrap())
        .unwrap_or(300_000);
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data/meshes");
    let names: Vec<String> = std::env::args().skip(1).collect();
    let names = if names.is_empty() {
        vec![
            "fandisk.obj".into(),
            "stanford-bunny.obj".into(),
            "igea.ply".into(),
        ]
    } else {
        names
    };
    for name in names {
        let mesh = load_mesh(&dir.join(&name)).unwrap();
        let (lo, hi) = mesh.bounds();
        let extent = hi - lo;
        let pad = extent.x.max(extent.y).max(extent.z) * 0.1;
        let points: Vec<[f64; 3]> = closest::bench::sample_points(rows)
            .iter()
            .map(|p| {
                let at = |k: usize, lo: f64, span: f64| {
                    lo - pad + (span + 2.0 * pad) * (p[k] as f64 + 1.0) * 0.5
                };
                [
                    at(0, lo.x, extent.x),
                    at(1, lo.y, extent.y),
                    at(2, lo.z, extent.z),
                ]
            })
            .collect();
        let t = Instant::now();
        let gpu = engine.upload_mesh(mesh.clone()).unwrap();
        let upload = t.elapsed();
        let t = Instant::now();
        engine
            .query_mesh(&gpu, &points[..1000], Sign::None)
            .unwrap();
        let warm = t.elapsed();
        let mut times = Vec::new();
        let mut sum = 0f64;
        for _ in 0..3 {
            let t = Instant::now();
            let hits = engine.query_mesh(&gpu, &points, Sign::None).unwrap();
            times.push(t.elapsed().as_secs_f64());
            sum = hits.iter().map(|h| h.distance as f64).sum();
            if std::env::var("STATS").is_ok() {
                stats(&hits);
            }
        }
        times.sort_by(f64::total_cmp);
        println!(
            "{name:>20} upload {:.3}s warm {:.3}s  {:.3} M/s  (sum {sum:.6})",
            upload.as_secs_f64(),
            warm.as_secs_f64(),
            rows as f64 / times[1] / 1e6
        );
    }
}
#[allow(dead_code)]
fn stats(hits: &[closest::GpuHit]) {
    let n = hits.len() as f64;
    let steps: f64 = hits.iter().map(|h| h.normal[0] as f64).sum::<f64>() / n;
    let leaves: f64 = hits.iter().map(|h| h.normal[1] as f64).sum::<f64>() / n;
    println!("steps {steps:.1} leaves {leaves:.1}");
}
