//! How many steps a nearest-first walk of a mesh's axis-aligned hierarchy takes for band-like
//! points (grid samples of a 512³ grid within about 3 voxels of the surface), from the root and from the deepest
//! node whose subtree holds every triangle within R = min(d + 2r, w + r) of the point's cell
//! centre (d that centre's distance, r a 2³ cell's half-diagonal, w the band): what a per-cell
//! start node would save the band's sample walks (docs/perf-history.md, "Issue 45: seventeenth
//! session"). Each point's distance is asserted the same from both starts.
//!
//!     cargo run --release --example start_node_steps -- MESH [POINTS]
use closest::DVec3;
use closest::bvh::{GpuBvhChild, GpuBvhNode, Item, LEAF_KIND_SHIFT, TRIANGLE_LEAF_SIZE};
use closest::mesh::closest_feature;
use closest::shape::{Shape, ShapeKind};

/// Squared distance from `p` to a child's box.
fn box_distance2(child: &GpuBvhChild, p: DVec3) -> f64 {
    (0..3)
        .map(|k| {
            let (x, lo, hi) = (p.get(k), f64::from(child.min[k]), f64::from(child.max[k]));
            let d = (lo - x).max(x - hi).max(0.0);
            d * d
        })
        .sum()
}

fn leaf_len(child: &GpuBvhChild) -> usize {
    (child.count & ((1 << LEAF_KIND_SHIFT) - 1)) as usize
}

/// The root as a child word: inner node 0.
const ROOT: GpuBvhChild = GpuBvhChild {
    min: [0.0; 3],
    first: 0,
    max: [0.0; 3],
    count: 0,
};

struct Walk<'a> {
    nodes: &'a [GpuBvhNode],
    order: &'a [u32],
    mesh: &'a closest::mesh::Mesh,
}

impl Walk<'_> {
    /// The squared distance to the nearest triangle under `start`, and the steps taken (each
    /// child taken off the stack, leaves included).
    fn nearest(&self, p: DVec3, start: GpuBvhChild) -> (f64, usize) {
        let (mut best, mut steps) = (f64::INFINITY, 0);
        let mut stack = vec![(start, 0.0)];
        while let Some((child, distance2)) = stack.pop() {
            steps += 1;
            if distance2 > best {
                continue;
            }
            let n = leaf_len(&child);
            if n > 0 {
                for &t in &self.order[child.first as usize..child.first as usize + n] {
                    let q = closest_feature(p, self.mesh.corners(t as usize)).0;
                    best = best.min((q - p).length_squared());
                }
                continue;
            }
            let [a, b] = self.nodes[child.first as usize].children;
            let (da, db) = (box_distance2(&a, p), box_distance2(&b, p));
            let ((near, dn), (far, df)) = if da <= db {
                ((a, da), (b, db))
            } else {
                ((b, db), (a, da))
            };
            for (c, d) in [(far, df), (near, dn)] {
                if d <= best {
                    stack.push((c, d));
                }
            }
        }
        (best, steps)
    }

    /// The deepest child holding every triangle whose box lies within `radius` of `centre`,
    /// and its depth.
    fn start(&self, centre: DVec3, radius: f64) -> (GpuBvhChild, usize) {
        let (mut at, mut depth) = (ROOT, 0);
        while leaf_len(&at) == 0 {
            let [a, b] = self.nodes[at.first as usize].children;
            let within = |c: &GpuBvhChild| box_distance2(c, centre) <= radius * radius;
            match (within(&a), within(&b)) {
                (true, false) => at = a,
                (false, true) => at = b,
                _ => break,
            }
            depth += 1;
        }
        (at, depth)
    }
}

/// A small generator for the sample points (xorshift64*).
struct Random(u64);

impl Random {
    fn unit(&mut self) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11) as f64 / (1u64 << 53) as f64
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let path = args.next().expect("usage: start_node_steps MESH [POINTS]");
    let points: usize = args
        .next()
        .map_or(20_000, |n| n.parse().expect("POINTS is a count"));
    let mesh = closest::io::load_mesh(std::path::Path::new(&path)).expect("a mesh file");
    let count = mesh.triangles.len();
    let item = |i: usize| {
        let [a, b, c] = mesh.corners(i);
        Item {
            bounds: closest::bvh::shape_bounds(&Shape::Triangle { a, b, c }).expect("bounded"),
            kind: ShapeKind::Triangle as u32,
        }
    };
    let bvh = closest::bvh::build_with(count, &item, TRIANGLE_LEAF_SIZE, 0, 0);
    let walk = Walk {
        nodes: &bvh.nodes,
        order: &bvh.order,
        mesh: &mesh,
    };
    // The grid of `closest sdf --res 512` (pad 0.1 a side) and a band of 3 voxels.
    let (lo, hi) = mesh.bounds();
    let extent = (hi - lo).x.max((hi - lo).y).max((hi - lo).z);
    let spacing = extent * 1.2 / 511.0;
    let band = 3.0 * spacing;
    let cell_radius = 3f64.sqrt() / 2.0 * spacing;
    let mut area_sums = Vec::with_capacity(count);
    let mut total = 0.0;
    for t in 0..count {
        let [a, b, c] = mesh.corners(t);
        total += 0.5 * (b - a).cross(c - a).length();
        area_sums.push(total);
    }
    let mut random = Random(0x9e37_79b9_7f4a_7c15);
    let (mut from_root, mut from_start, mut depths) = (0, 0, 0);
    for _ in 0..points {
        // A surface point (area-weighted), pushed up to the band's width off it.
        let target = random.unit() * total;
        let t = area_sums.partition_point(|&s| s < target).min(count - 1);
        let [a, b, c] = mesh.corners(t);
        let (mut u, mut v) = (random.unit(), random.unit());
        if u + v > 1.0 {
            (u, v) = (1.0 - u, 1.0 - v);
        }
        let direction = DVec3::new(
            random.unit() - 0.5,
            random.unit() - 0.5,
            random.unit() - 0.5,
        )
        .normalize_or_zero();
        let off = a + (b - a) * u + (c - a) * v + direction * (random.unit() * band);
        // The grid sample nearest it (the band's rows are samples), and the centre of its
        // cell of 2³ samples.
        let sample = |x: f64| (x / spacing).round() * spacing;
        let p = DVec3::new(sample(off.x), sample(off.y), sample(off.z));
        let cell = |x: f64| {
            let i = (x / spacing).round();
            (i - i.rem_euclid(2.0) + 0.5) * spacing
        };
        let centre = DVec3::new(cell(p.x), cell(p.y), cell(p.z));
        let centre_distance = walk.nearest(centre, ROOT).0.sqrt();
        let radius = (centre_distance + 2.0 * cell_radius).min(band + cell_radius) * 1.000_01;
        let (start, depth) = walk.start(centre, radius);
        let (root_best, root_steps) = walk.nearest(p, ROOT);
        let (start_best, start_steps) = walk.nearest(p, start);
        if root_best.sqrt() <= band {
            assert_eq!(
                root_best, start_best,
                "the same nearest distance from either start"
            );
        }
        from_root += root_steps;
        from_start += start_steps;
        depths += depth;
    }
    let mean = |n: usize| n as f64 / points as f64;
    println!(
        "{path}: {count} triangles, hierarchy depth {}; {points} band-like points: {:.1} steps from \
         the root, {:.1} from the start node (its depth {:.1} on average): {:.0} % fewer",
        bvh.depth,
        mean(from_root),
        mean(from_start),
        mean(depths),
        100.0 * (1.0 - from_start as f64 / from_root as f64)
    );
}
