//! `closest bench`: queries per second for one shape of each type, GPU end to end (host slice
//! in, host results out) beside the f64 reference on all cores and a plain memcpy of the same
//! bytes, all in the same run. Medians of `repeats` runs.

use std::io::Write;
use std::time::{Duration, Instant};

use rayon::prelude::*;

use crate::Engine;
use crate::engine::{SceneQuery, SegmentPairs, SegmentRows};
use crate::error::{Error, Result};
use crate::fields::{self, Family, Fields, PackedRows};
use crate::gpu::GpuHit;
use crate::math::DVec3;
use crate::shape::{Shape, ShapeKind};
use crate::{Mode, reference};

/// One shape of each kind, unit-sized at the origin.
pub fn sample_shapes() -> Vec<Shape> {
    let a = DVec3::new(-0.5, -0.2, 0.1);
    let b = DVec3::new(0.6, 0.3, -0.2);
    ShapeKind::ALL
        .iter()
        .map(|kind| match kind {
            ShapeKind::Sphere => Shape::Sphere {
                center: a,
                radius: 0.7,
            },
            ShapeKind::Aabb => Shape::Aabb {
                min: a,
                max: b + DVec3::new(0.0, 0.0, 0.5),
            },
            ShapeKind::Box => Shape::Box {
                center: a,
                half_extents: DVec3::new(0.5, 0.3, 0.8),
                rotation: [0.2, 0.3, 0.1, 0.93],
            },
            ShapeKind::Plane => Shape::Plane {
                normal: DVec3::new(0.0, 0.6, 0.8),
                offset: 0.3,
            },
            ShapeKind::Segment => Shape::Segment { a, b },
            ShapeKind::Line => Shape::Line { a, b },
            ShapeKind::Ray => Shape::Ray {
                origin: a,
                direction: b,
            },
            ShapeKind::Triangle => Shape::Triangle {
                a,
                b,
                c: DVec3::new(0.1, 0.9, 0.4),
            },
            ShapeKind::Capsule => Shape::Capsule { a, b, radius: 0.3 },
            ShapeKind::Cylinder => Shape::Cylinder { a, b, radius: 0.4 },
            ShapeKind::Wedge => Shape::Wedge {
                center: a,
                half_extents: DVec3::new(0.5, 0.3, 0.8),
                rotation: [0.2, 0.3, 0.1, 0.93],
            },
            ShapeKind::CornerWedge => Shape::CornerWedge {
                center: a,
                half_extents: DVec3::new(0.5, 0.3, 0.8),
                rotation: [0.2, 0.3, 0.1, 0.93],
            },
            ShapeKind::Cone => Shape::Cone { a, b, radius: 0.5 },
            ShapeKind::Torus => Shape::Torus {
                center: a,
                axis: DVec3::new(0.0, 0.6, 0.8),
                major_radius: 0.6,
                minor_radius: 0.2,
            },
            ShapeKind::Ellipsoid => Shape::Ellipsoid {
                center: a,
                radii: DVec3::new(0.8, 0.5, 0.3),
                rotation: [0.2, 0.3, 0.1, 0.93],
            },
            ShapeKind::ConvexHull => Shape::ConvexHull(
                crate::hull::ConvexHull::new(sample_hull_points(32, a, 0.7))
                    .expect("points spanning 3-D"),
            ),
        })
        .collect()
}

/// `n` points on a sphere of `radius` about `center` (a Fibonacci spiral): a hull of about
/// 2n faces.
pub fn sample_hull_points(n: usize, center: DVec3, radius: f64) -> Vec<DVec3> {
    let golden = std::f64::consts::PI * (3.0 - 5f64.sqrt());
    (0..n)
        .map(|i| {
            let y = 1.0 - 2.0 * (i as f64 + 0.5) / n as f64;
            let r = (1.0 - y * y).sqrt();
            let phi = golden * i as f64;
            center + DVec3::new(r * phi.cos(), y, r * phi.sin()) * radius
        })
        .collect()
}

/// `n` deterministic points in the cube [-2, 2]³.
pub fn sample_points(n: usize) -> Vec<[f32; 3]> {
    let mut state = 0x2545_F491_4F6C_DD1Du64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 40) as f32 / (1u64 << 24) as f32 * 4.0 - 2.0
    };
    (0..n).map(|_| [next(), next(), next()]).collect()
}

/// `n` deterministic points uniform over the box `lo`..`hi` padded by 0.1 of its largest
/// extent on every side: the points of the mesh benchmarks (`benches/meshes.rs`,
/// `examples/mesh_rate.rs`; `scripts/bench/peers_mesh.py` draws its own over the same box).
pub fn padded_box_points(lo: DVec3, hi: DVec3, n: usize) -> Vec<[f64; 3]> {
    let extent = hi - lo;
    let pad = extent.x.max(extent.y).max(extent.z) * 0.1;
    // sample_points spans [-2, 2]: t = (x + 2) / 4 spans [0, 1].
    let at = |x: f32, lo: f64, span: f64| lo - pad + (span + 2.0 * pad) * (x as f64 + 2.0) / 4.0;
    sample_points(n)
        .iter()
        .map(|p| {
            [
                at(p[0], lo.x, extent.x),
                at(p[1], lo.y, extent.y),
                at(p[2], lo.z, extent.z),
            ]
        })
        .collect()
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

fn timed(repeats: usize, mut f: impl FnMut() -> Result<()>) -> Result<Duration> {
    f()?; // warm-up: pipelines, buffers, page faults
    let mut times = Vec::with_capacity(repeats);
    for _ in 0..repeats {
        let t = Instant::now();
        f()?;
        times.push(t.elapsed());
    }
    Ok(median(times))
}

/// Median time to copy the bytes a query moves (12 in, 32 out per row) with plain memcpy.
pub fn memcpy_time(rows: usize, repeats: usize) -> Duration {
    let src_in = vec![1u8; rows * 12];
    let src_out = vec![2u8; rows * 32];
    let mut dst_in = vec![0u8; rows * 12];
    let mut dst_out = vec![0u8; rows * 32];
    timed(repeats, || {
        dst_in.copy_from_slice(&src_in);
        dst_out.copy_from_slice(&src_out);
        std::hint::black_box((&dst_in, &dst_out));
        Ok(())
    })
    .expect("memcpy cannot fail")
}

/// The reference (nearest of `shapes`) on all cores, f64, for the same points.
pub fn reference_time(shapes: &[Shape], points: &[[f32; 3]], repeats: usize) -> Duration {
    let mut out = vec![reference::Hit::NON_FINITE; points.len()];
    timed(repeats, || {
        out.par_iter_mut()
            .zip(points.par_iter())
            .for_each(|(o, p)| {
                let p = DVec3::new(p[0] as f64, p[1] as f64, p[2] as f64);
                *o = reference::nearest(shapes, p, Mode::Solid);
            });
        std::hint::black_box(&out);
        Ok(())
    })
    .expect("the reference cannot fail")
}

/// Rows checked against the f64 reference in every timed job, so that a wrong-but-fast kernel
/// cannot post a figure.
const CHECKED_ROWS: usize = 1000;

/// Every `rows / CHECKED_ROWS`-th answer of a job against the f64 reference (nearest of
/// `shapes`, solid): the first row whose distance lies beyond SPEC §3's bound, if any.
pub fn check_sample(
    shapes: &[Shape],
    points: &[[f32; 3]],
    distance: impl Fn(usize) -> f32,
) -> Result<()> {
    let step = (points.len() / CHECKED_ROWS).max(1);
    for row in (0..points.len()).step_by(step) {
        let p = DVec3::new(
            points[row][0] as f64,
            points[row][1] as f64,
            points[row][2] as f64,
        );
        let truth = reference::nearest(shapes, p, Mode::Solid);
        let scale = p.max_abs().max(truth.point.max_abs());
        let got = distance(row) as f64;
        let error = (got - truth.distance).abs();
        if error.is_nan() || error > crate::tolerance(scale) {
            return Err(Error::Gpu(format!(
                "wrong answer at row {row}: {got} against the f64 reference {}",
                truth.distance
            )));
        }
    }
    Ok(())
}

/// Print the throughput table.
pub fn run_table(engine: &Engine, rows: usize, repeats: usize, out: &mut dyn Write) -> Result<()> {
    let points = sample_points(rows);
    let w = |e: std::io::Error| Error::Write {
        path: "<stdout>".into(),
        source: e,
    };
    writeln!(
        out,
        "adapter: {}; {rows} points per shape; median of {repeats} runs; CPU: {} threads",
        engine.describe(),
        rayon::current_num_threads()
    )
    .map_err(w)?;
    let copy = memcpy_time(rows, repeats);
    writeln!(
        out,
        "memcpy of the same bytes (12 in + 32 out per row): {:.1} ms",
        copy.as_secs_f64() * 1e3
    )
    .map_err(w)?;
    writeln!(
        out,
        "{:<12} {:>12} {:>12} {:>12} {:>9} {:>10} {:>9} {:>9} {:>9} {:>9} {:>9}",
        "shape",
        "GPU Mq/s",
        "dist Mq/s",
        "ref Mq/s",
        "GPU/ref",
        "GPU/memcpy",
        "fill ms",
        "wait ms",
        "drain ms",
        "submit ms",
        "device ms"
    )
    .map_err(w)?;
    let mut hits = vec![GpuHit::default(); rows];
    let mut distances = vec![0f32; rows];
    // One shape of each kind alone, then all of them as one mixed scene (nearest of 9).
    let mut scenes: Vec<(String, Vec<Shape>)> = sample_shapes()
        .into_iter()
        .map(|s| (s.kind().name().to_string(), vec![s]))
        .collect();
    scenes.push((format!("mixed ({})", ShapeKind::ALL.len()), sample_shapes()));
    for (name, shapes) in &scenes {
        let scene = engine.upload_scene(shapes)?;
        let gpu = timed(repeats, || {
            let job = SceneQuery {
                scene: &scene,
                points: crate::Points::F32(&points),
                mode: Mode::Solid,
                fields: Fields::all(Family::Hits),
            };
            engine.query_scene(job, &mut hits)
        })?;
        let split = engine.last_timing();
        // Distance only: 4 bytes a row come back instead of 32.
        let distance_only = Fields::from_bits(Family::Hits, fields::DISTANCE);
        let gpu_distance = timed(repeats, || {
            let job = SceneQuery {
                scene: &scene,
                points: crate::Points::F32(&points),
                mode: Mode::Solid,
                fields: distance_only,
            };
            engine.query_scene(job, &mut |first: usize, packed: PackedRows<'_>| {
                distances[first..first + packed.len()]
                    .copy_from_slice(bytemuck::cast_slice(packed.words()));
                Ok(())
            })
        })?;
        check_sample(shapes, &points, |row| hits[row].distance)?;
        check_sample(shapes, &points, |row| distances[row])?;
        let cpu = reference_time(shapes, &points, repeats);
        let rate = |d: Duration| rows as f64 / d.as_secs_f64() / 1e6;
        writeln!(
            out,
            "{:<12} {:>12.2} {:>12.2} {:>12.2} {:>9.2} {:>10.2} {:>9.1} {:>9.1} {:>9.1} {:>9.1} {:>9}",
            name,
            rate(gpu),
            rate(gpu_distance),
            rate(cpu),
            cpu.as_secs_f64() / gpu.as_secs_f64(),
            gpu.as_secs_f64() / copy.as_secs_f64(),
            split.fill.as_secs_f64() * 1e3,
            split.wait.as_secs_f64() * 1e3,
            split.drain.as_secs_f64() * 1e3,
            split.submit.as_secs_f64() * 1e3,
            split
                .device
                .map_or("–".to_string(), |d| format!("{:.1}", d.as_secs_f64() * 1e3)),
        )
        .map_err(w)?;
    }
    segment_pairs_row(engine, &points, repeats, out)
}

/// Segment pairs: the sample points taken four at a time as (a0, a1, b0, b1), so the row
/// count matches the point rows; GPU end to end beside the f64 reference on all cores.
fn segment_pairs_row(
    engine: &Engine,
    points: &[[f32; 3]],
    repeats: usize,
    out: &mut dyn Write,
) -> Result<()> {
    let v = |p: [f32; 3]| DVec3::new(p[0] as f64, p[1] as f64, p[2] as f64);
    let quads: Vec<[DVec3; 4]> = points
        .chunks_exact(4)
        .map(|q| [v(q[0]), v(q[1]), v(q[2]), v(q[3])])
        .collect();
    let a: Vec<[DVec3; 2]> = quads.iter().map(|q| [q[0], q[1]]).collect();
    let b: Vec<[DVec3; 2]> = quads.iter().map(|q| [q[2], q[3]]).collect();
    let rows = quads.len();
    let mut pairs_out: Vec<crate::GpuSegmentHit> = Vec::new();
    let gpu = timed(repeats, || {
        let job = SegmentPairs {
            pairs: SegmentRows::Slices(&a, &b),
            fields: Fields::all(Family::Segments),
        };
        engine.segment_pairs(job, &mut pairs_out)
    })?;
    let mut reference_out = vec![reference::SegmentPair::NON_FINITE; rows];
    let cpu = timed(repeats, || {
        reference_out
            .par_iter_mut()
            .zip(quads.par_iter())
            .for_each(|(o, q)| {
                *o = reference::closest_segment_pair(q[0], q[1], q[2], q[3]);
            });
        std::hint::black_box(&reference_out);
        Ok(())
    })?;
    let rate = |d: Duration| rows as f64 / d.as_secs_f64() / 1e6;
    writeln!(
        out,
        "{:<12} {:>12.2} {:>12.2} {:>9.2}   ({rows} pairs; GPU includes building the records from f64)",
        "seg pairs",
        rate(gpu),
        rate(cpu),
        cpu.as_secs_f64() / gpu.as_secs_f64(),
    )
    .map_err(|e| Error::Write {
        path: "<stdout>".into(),
        source: e,
    })
}

/// A closed cylinder of radius 1 from z = 0 to 1, its caps fans of `segments` slivers from
/// their centres (as CAD exports triangulate them) and its side `segments` quads, outward
/// wound, each vertex moved by `place`: an input whose slivers meet at a point.
pub fn fan_capped_cylinder(segments: u32, place: impl Fn(DVec3) -> DVec3) -> crate::mesh::Mesh {
    let mut vertices = vec![place(DVec3::ZERO), place(DVec3::new(0.0, 0.0, 1.0))];
    for z in [0.0, 1.0] {
        vertices.extend((0..segments).map(|k| {
            let angle = std::f64::consts::TAU * k as f64 / segments as f64;
            place(DVec3::new(angle.cos(), angle.sin(), z))
        }));
    }
    let (bottom, top) = (
        |k: u32| 2 + k % segments,
        |k: u32| 2 + segments + k % segments,
    );
    let triangles = (0..segments)
        .flat_map(|k| {
            [
                [0, bottom(k + 1), bottom(k)],
                [1, top(k), top(k + 1)],
                [bottom(k), bottom(k + 1), top(k + 1)],
                [bottom(k), top(k + 1), top(k)],
            ]
        })
        .collect();
    crate::mesh::Mesh::new(vertices, triangles, "a fan-capped cylinder")
        .expect("a cylinder of finite vertices")
}

/// A random mixed scene of bounded shapes (spheres, boxes, capsules, triangles) in
/// [-100, 100]³, the same for every run.
pub fn sample_scene(count: usize) -> Vec<Shape> {
    let points = sample_points(count * 3);
    (0..count)
        .map(|i| {
            let v = |k: usize| {
                let p = points[3 * i + k];
                DVec3::new(p[0] as f64, p[1] as f64, p[2] as f64)
            };
            let c = v(0) * 50.0;
            let h = v(1).abs() * 0.5 + DVec3::new(0.1, 0.1, 0.1);
            match i % 4 {
                0 => Shape::Sphere {
                    center: c,
                    radius: h.x,
                },
                1 => Shape::Box {
                    center: c,
                    half_extents: h,
                    rotation: [0.1, 0.2, 0.3, 0.9],
                },
                2 => Shape::Capsule {
                    a: c,
                    b: c + v(2) * 0.5,
                    radius: h.y,
                },
                _ => Shape::Triangle {
                    a: c,
                    b: c + v(1) * 0.5,
                    c: c + v(2) * 0.5,
                },
            }
        })
        .collect()
}

/// A CPU library answering the same nearest-shape queries, for the scenes table (the
/// benchmark binary plugs parry3d in; the CLI has none).
pub trait ScenePeer {
    fn name(&self) -> &str;
    /// Build the peer's structure for `shapes` (not timed).
    fn prepare(&mut self, shapes: &[Shape]);
    /// Answer every point; the distances are returned for a cross-check.
    fn query(&self, points: &[[f32; 3]], distances: &mut [f32]);
}

/// Nearest-shape throughput over scenes of 10^3, 10^4 and 10^5 shapes: the BVH path (queries
/// dispatched in Morton order, the default), the BVH path in row order, the brute-force GPU
/// path where it finishes in reasonable time, and a CPU peer if one is given.
pub fn run_scene_table(
    engine: &Engine,
    rows: usize,
    repeats: usize,
    mut peer: Option<&mut dyn ScenePeer>,
    out: &mut dyn Write,
) -> Result<()> {
    let w = |e: std::io::Error| Error::Write {
        path: "<stdout>".into(),
        source: e,
    };
    // Points over a slightly larger cube than the scene.
    let points: Vec<[f32; 3]> = sample_points(rows)
        .iter()
        .map(|p| p.map(|x| x * 55.0))
        .collect();
    writeln!(
        out,
        "adapter: {}; kernels: {}; {rows} points; median of {repeats} runs; Mq/s",
        engine.describe(),
        engine.scene_kernels()
    )
    .map_err(w)?;
    let peer_name = peer.as_ref().map_or("peer", |p| p.name()).to_string();
    writeln!(
        out,
        "{:>8} {:>10} {:>12} {:>10} {:>10} {:>10} {:>10}",
        "shapes", "BVH", "other order", "brute", "BVH/brute", peer_name, "BVH/peer"
    )
    .map_err(w)?;
    // "BVH" is the engine's default dispatch order; "other order" the other one.
    let default_order = engine.reorders_queries();
    let [bvh_order, other] = if default_order {
        ["Morton order", "row order"]
    } else {
        ["row order", "Morton order"]
    };
    writeln!(out, "(BVH: {bvh_order}; other order: {other})").map_err(w)?;
    let mut hits = vec![GpuHit::default(); rows];
    let mut peer_distances = vec![0f32; rows];
    for count in [1_000, 10_000, 100_000] {
        let shapes = sample_scene(count);
        let mut rate = |scene: &crate::gpu::GpuScene| -> Result<f64> {
            let t = timed(repeats, || {
                let job = SceneQuery {
                    scene,
                    points: crate::Points::F32(&points),
                    mode: Mode::Solid,
                    fields: Fields::all(Family::Hits),
                };
                engine.query_scene(job, &mut hits)
            })?;
            check_sample(&shapes, &points, |row| hits[row].distance)?;
            Ok(rows as f64 / t.as_secs_f64() / 1e6)
        };
        let scene = engine.upload_scene(&shapes)?;
        engine.set_reorder_queries(!default_order);
        let other_order = rate(&scene);
        engine.set_reorder_queries(default_order);
        let other_order = other_order?;
        let bvh = rate(&scene)?;
        // Brute force costs rows × shapes shape tests: skip it past 10^9.
        let brute = if rows * count <= 1_000_000_000 {
            Some(rate(&engine.upload_scene_brute_force(&shapes)?)?)
        } else {
            None
        };
        let peer_rate = match peer.as_deref_mut() {
            Some(peer) => {
                peer.prepare(&shapes);
                let t = timed(repeats, || {
                    peer.query(&points, &mut peer_distances);
                    Ok(())
                })?;
                check_peer(&hits, &peer_distances, &points)?;
                Some(rows as f64 / t.as_secs_f64() / 1e6)
            }
            None => None,
        };
        let cell = |v: Option<f64>| v.map_or("–".to_string(), |v| format!("{v:.3}"));
        let ratio = |v: Option<f64>| v.map_or("–".to_string(), |v| format!("{:.2}", bvh / v));
        writeln!(
            out,
            "{count:>8} {bvh:>10.3} {other_order:>12.3} {:>10} {:>10} {:>10} {:>10}",
            cell(brute),
            ratio(brute),
            cell(peer_rate),
            ratio(peer_rate),
        )
        .map_err(w)?;
    }
    Ok(())
}

/// The peer must answer the same question: on every row its distance and ours are both within
/// SPEC §3's bound of the truth, so within twice it of each other (else the comparison is void).
fn check_peer(hits: &[GpuHit], peer: &[f32], points: &[[f32; 3]]) -> Result<()> {
    for (i, (hit, &d)) in hits.iter().zip(peer).enumerate() {
        // The scene spans [-50, 50]³ plus the shapes' sizes.
        let scale = points[i].iter().fold(51f64, |m, x| m.max(x.abs() as f64));
        if (hit.distance as f64 - d as f64).abs() > 2.0 * crate::tolerance(scale) {
            return Err(Error::Gpu(format!(
                "peer disagrees at row {i}: {} vs {d}",
                hit.distance
            )));
        }
    }
    Ok(())
}
