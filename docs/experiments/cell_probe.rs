//! Issue 16 probe (docs/PERF.md, "Candidate lists per grid cell"): how many shapes a query
//! would test if each cell of a uniform grid over the scene kept the shapes that can be nearest
//! to a point in it. Copy into examples/ and `cargo run --release --example cell_probe`.
use closest::DVec3;
use closest::bench::{sample_points, sample_scene};
use closest::bvh::shape_bounds;
use closest::reference::project_point;

fn main() {
    let rows = 1_000_000;
    let mut pts: Vec<DVec3> = sample_points(rows)
        .iter()
        .map(|p| DVec3::new(p[0] as f64 * 55.0, p[1] as f64 * 55.0, p[2] as f64 * 55.0))
        .collect();
    // A quarter of the points (one chunk's worth), in the engine's Morton order.
    pts.truncate(rows / 4);
    pts.sort_by_key(|p| closest::gpu::morton_code([p.x as f32, p.y as f32, p.z as f32], [-110.0; 3], [110.0; 3]));
    let rows = pts.len();
    let (lo, hi) = (-110.0f64, 110.0f64);
    for count in [1000usize, 10000, 100000] {
        let scene = sample_scene(count);
        let boxes: Vec<_> = scene.iter().map(|s| shape_bounds(s).unwrap()).collect();
        for res in [16usize, 32, 64, 128] {
            let cell = (hi - lo) / res as f64;
            let mut lens = Vec::new();
            let samples = if count >= 100000 { 150 } else { 400 };
            let mut cache = std::collections::HashMap::new();
            let mut union_total = 0usize;
            let mut cells_total = 0usize;
            let mut sum_total = 0usize;
            for g in 0..samples {
                // 8 consecutive points of a Morton-sorted set are close: take one point and
                // 7 neighbours within 2.2 units (the bench's mean spacing).
                let first = (g * 7919 * 8) % (rows - 8);
                let first = first - first % 8;
                let group: Vec<DVec3> = pts[first..first + 8].to_vec();
                let mut union = std::collections::BTreeSet::new();
                let mut cells = std::collections::BTreeSet::new();
                for p in &group {
                    let ijk = [p.x, p.y, p.z].map(|x| (((x - lo) / cell).floor().clamp(0.0, res as f64 - 1.0)) as i64);
                    cells.insert(ijk);
                    let list = cache.entry(ijk).or_insert_with(|| {
                        let cmin = DVec3::new(lo + ijk[0] as f64 * cell, lo + ijk[1] as f64 * cell, lo + ijk[2] as f64 * cell);
                        let cmax = cmin + DVec3::new(cell, cell, cell);
                        let centre = (cmin + cmax) * 0.5;
                        let dist = |s: &closest::Shape, q: DVec3| (project_point(s, q).point - q).length();
                        let mut by_centre: Vec<(f64, usize)> = scene.iter().enumerate().map(|(i, s)| (dist(s, centre), i)).collect();
                        by_centre.sort_by(|a, b| a.0.total_cmp(&b.0));
                        let corners: Vec<DVec3> = (0..8).map(|k| DVec3::new(if k & 1 == 0 { cmin.x } else { cmax.x }, if k & 2 == 0 { cmin.y } else { cmax.y }, if k & 4 == 0 { cmin.z } else { cmax.z })).collect();
                        let u = by_centre.iter().take(16).map(|&(_, i)| corners.iter().map(|c| dist(&scene[i], *c)).fold(0.0, f64::max)).fold(f64::INFINITY, f64::min);
                        let near = |b: &closest::bvh::Bounds| {
                            let d = DVec3::new((b.min.x - cmax.x).max(cmin.x - b.max.x).max(0.0), (b.min.y - cmax.y).max(cmin.y - b.max.y).max(0.0), (b.min.z - cmax.z).max(cmin.z - b.max.z).max(0.0));
                            d.length()
                        };
                        boxes.iter().enumerate().filter(|(_, b)| near(b) <= u * 1.0001).map(|(i, _)| i).collect::<Vec<usize>>()
                    });
                    lens.push(list.len());
                    union.extend(list.iter().copied());
                }
                union_total += union.len();
                sum_total += cells.iter().map(|c| cache[c].len()).sum::<usize>();
                cells_total += cells.len();
            }
            let mean = lens.iter().sum::<usize>() as f64 / lens.len() as f64;
            println!(
                "{count:>7} shapes, {res:>3}^3 cells: list {mean:.1} a point, {:.2} cells, {:.1} shapes in their lists and {:.1} distinct a subgroup",
                cells_total as f64 / samples as f64,
                sum_total as f64 / samples as f64,
                union_total as f64 / samples as f64
            );
        }
    }
}
