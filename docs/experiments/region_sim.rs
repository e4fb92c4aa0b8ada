//! Issue 16 probe (docs/PERF.md, "Shared candidate lists"): how many shapes a group of
//! Morton-consecutive query points would have to test if a workgroup culled the scene once
//! for all of them. Copy into examples/ and `cargo run --release --example region_sim`.

use closest::bench::{sample_points, sample_scene};
use closest::bvh::shape_bounds;
use closest::reference::{project_point};
use closest::DVec3;
fn vmin(a: DVec3, b: DVec3) -> DVec3 { DVec3::new(a.x.min(b.x), a.y.min(b.y), a.z.min(b.z)) }
fn vmax(a: DVec3, b: DVec3) -> DVec3 { DVec3::new(a.x.max(b.x), a.y.max(b.y), a.z.max(b.z)) }

fn spread(v: u32) -> u32 {
    let mut x = v & 0x3ff;
    x = (x | (x << 16)) & 0x030000ff;
    x = (x | (x << 8)) & 0x0300f00f;
    x = (x | (x << 4)) & 0x030c30c3;
    x = (x | (x << 2)) & 0x09249249;
    x
}

fn main() {
    let rows = 1_000_000;
    let mut pts: Vec<[f32; 3]> = sample_points(rows).iter().map(|p| p.map(|x| x * 55.0)).collect();
    let (lo, hi) = (-110.0f32, 110.0f32);
    let code = |p: &[f32; 3]| {
        let q = |x: f32| (((x - lo) / (hi - lo)) * 1023.0) as u32;
        spread(q(p[0])) | spread(q(p[1])) << 1 | spread(q(p[2])) << 2
    };
    pts.sort_by_key(|p| code(p));
    for count in [1000usize, 10000, 100000] {
        let scene = sample_scene(count);
        let boxes: Vec<_> = scene.iter().map(|s| shape_bounds(s).unwrap()).collect();
        for group in [16usize, 32, 64, 128] {
            let groups = rows / group;
            let samples = if count >= 100000 { 10 } else { 60 };
            let (mut c1, mut c2, mut c3) = (0usize, 0usize, 0usize);
            for g in 0..samples {
                let start = (g * 7919 % groups) * group;
                let ps: Vec<DVec3> = pts[start..start + group].iter().map(|p| DVec3::new(p[0] as f64, p[1] as f64, p[2] as f64)).collect();
                let mut rmin = ps[0];
                let mut rmax = ps[0];
                for p in &ps { rmin = vmin(rmin, *p); rmax = vmax(rmax, *p); }
                let far = |b: &closest::bvh::Bounds| {
                    let d = vmax((b.max - rmin).abs(), (rmax - b.min).abs());
                    d.length()
                };
                let near = |b: &closest::bvh::Bounds| {
                    let d = vmax(vmax(b.min - rmax, rmin - b.max), DVec3::new(0.0, 0.0, 0.0));
                    d.length()
                };
                let u1 = boxes.iter().map(far).fold(f64::INFINITY, f64::min);
                let u2 = ps.iter().map(|p| scene.iter().map(|s| (project_point(s, *p).point - *p).length()).fold(f64::INFINITY, f64::min)).fold(0.0, f64::max);
                let c = (rmin + rmax) * 0.5;
                let dist = |s: &closest::Shape, p: DVec3| (project_point(s, p).point - p).length();
                let star = scene.iter().min_by(|a, b| dist(a, c).total_cmp(&dist(b, c))).unwrap();
                let u3 = ps.iter().map(|p| dist(star, *p)).fold(0.0, f64::max);
                c3 += boxes.iter().filter(|b| near(b) <= u3).count();
                c1 += boxes.iter().filter(|b| near(b) <= u1).count();
                c2 += boxes.iter().filter(|b| near(b) <= u2).count();
            }
            println!("{count} shapes, groups of {group}: candidates farthest-bound {:.1}, ideal bound {:.1}, centre-shape bound {:.1}", c1 as f64 / samples as f64, c2 as f64 / samples as f64, c3 as f64 / samples as f64);
        }
    }
}
