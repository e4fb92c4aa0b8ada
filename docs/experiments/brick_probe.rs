//! Issue 16 probe (docs/PERF.md, "Candidate lists for grid bricks"): how many leaves a brick of
//! b × b × b grid samples would test if one cull of the hierarchy served the whole brick.
//! Copy into examples/ and `cargo run --release --example brick_probe MESH [RES]`.
use closest::bvh::{Item, TRIANGLE_LEAF_SIZE, build_with, shape_bounds};
use closest::sdf::{Grid, GridRegion};
use closest::{DVec3, Shape};
use parry3d::math::{Pose, Vector};
use parry3d::query::PointQuery;
use parry3d::shape::TriMesh;
use rayon::prelude::*;
use std::path::Path;

fn main() {
    let path = std::env::args().nth(1).unwrap();
    let res: usize = std::env::args().nth(2).map_or(128, |s| s.parse().unwrap());
    let mesh = closest::io::load_mesh(Path::new(&path)).unwrap();
    let grid = Grid::new(&mesh, [res; 3], GridRegion::Pad(0.1)).unwrap();
    let n = mesh.triangles.len();
    let bvh = build_with(
        n,
        &|i| {
            let [a, b, c] = mesh.corners(i);
            Item {
                bounds: shape_bounds(&Shape::Triangle { a, b, c }).unwrap(),
                kind: 0,
            }
        },
        TRIANGLE_LEAF_SIZE,
        0,
        0,
    );
    let mut leaves = Vec::new();
    for node in &bvh.nodes {
        for c in &node.children {
            if c.count > 0 {
                let w = |v: [f32; 3]| DVec3::new(v[0] as f64, v[1] as f64, v[2] as f64);
                leaves.push((w(c.min), w(c.max), (c.count & 0xff) as usize));
            }
        }
    }
    let vertices = mesh
        .vertices
        .iter()
        .map(|p| Vector::new(p.x as f32, p.y as f32, p.z as f32))
        .collect();
    let tm = TriMesh::new(vertices, mesh.triangles.clone()).unwrap();
    let d: Vec<f64> = (0..grid.len())
        .into_par_iter()
        .map(|r| {
            let p = grid.point(r);
            let v = Vector::new(p[0] as f32, p[1] as f32, p[2] as f32);
            let q = tm.project_point(&Pose::IDENTITY, v, true);
            (v - q.point).length() as f64
        })
        .collect();
    println!("{path}: {n} triangles, {} leaves", leaves.len());
    let box_dist = |lo: DVec3, hi: DVec3, a: DVec3, b: DVec3| {
        let g = |x: f64, y: f64| x.max(y).max(0.0);
        let v = DVec3::new(
            g(a.x - hi.x, lo.x - b.x),
            g(a.y - hi.y, lo.y - b.y),
            g(a.z - hi.z, lo.z - b.z),
        );
        v.length()
    };
    for b in [2usize, 4, 8] {
        let nb = res / b;
        let bricks: Vec<[usize; 3]> = (0..nb * nb * nb)
            .step_by(if b == 2 { 7 } else { 1 })
            .map(|k| [k / (nb * nb), k / nb % nb, k % nb])
            .collect();
        let (ideal, practical, union): (Vec<usize>, Vec<usize>, Vec<usize>) = bricks
            .par_iter()
            .map(|&[i, j, k]| {
                let mut rows = Vec::new();
                for x in 0..b {
                    for y in 0..b {
                        for z in 0..b {
                            rows.push(((i * b + x) * res + j * b + y) * res + k * b + z);
                        }
                    }
                }
                let pt = |r: usize| {
                    let p = grid.point(r);
                    DVec3::new(p[0], p[1], p[2])
                };
                let lo = pt(rows[0]);
                let hi = pt(*rows.last().unwrap());
                let u_ideal = rows.iter().map(|&r| d[r]).fold(0.0, f64::max);
                let u_prac = d[rows[0]] + (hi - lo).length();
                let count = |u: f64| {
                    leaves
                        .iter()
                        .filter(|l| box_dist(l.0, l.1, lo, hi) <= u)
                        .count()
                };
                let un = leaves
                    .iter()
                    .filter(|l| {
                        rows.iter()
                            .any(|&r| box_dist(l.0, l.1, pt(r), pt(r)) <= d[r])
                    })
                    .count();
                (count(u_ideal), count(u_prac), un)
            })
            .collect::<Vec<_>>()
            .into_iter()
            .fold((vec![], vec![], vec![]), |mut acc, (a, p, u)| {
                acc.0.push(a);
                acc.1.push(p);
                acc.2.push(u);
                acc
            });
        let mean = |v: &[usize]| v.iter().sum::<usize>() as f64 / v.len() as f64;
        let mut s = ideal.clone();
        s.sort();
        println!(
            "brick {b}^3: leaves per brick: ideal-bound list {:.1} (median {}, p90 {}), practical-bound {:.1}, per-sample union {:.1}",
            mean(&ideal),
            s[s.len() / 2],
            s[s.len() * 9 / 10],
            mean(&practical),
            mean(&union)
        );
    }
}
