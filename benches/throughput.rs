//! Criterion throughput bench: 4,000,000 points (CLOSEST_BENCH_POINTS overrides) against one
//! shape of each type, GPU end to end (host slice in, host results out) beside the f64
//! reference and parry3d, both on all cores via rayon, and a memcpy of the same bytes, all in
//! one run. Throughput is reported in elements (queries) per second.

use std::hint::black_box;
use std::time::Duration;

use closest::bench::{sample_points, sample_shapes};
use closest::fields::{self, Family, Fields, PackedRows};

use closest::{GpuHit, Mode, Shape, reference};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use parry3d::math::{Pose, Rotation, Vector};
use parry3d::query::{PointProjection, PointQuery};
use rayon::prelude::*;

#[allow(dead_code, reason = "this bench uses part of the shared helpers")]
mod common;

use common::{bench_engine, env_count, oriented_pose, v};

/// parry3d's `project_point`, then its `distance_to_point`, for every point on all cores,
/// monomorphised for the shape type (no dynamic dispatch, so parry's code inlines as ours does).
fn bench_parry<S: PointQuery + Sync>(
    group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    points: &[[f32; 3]],
    shape: S,
    pose: Pose,
) {
    let mut out = vec![PointProjection::new(false, Vector::ZERO); points.len()];
    group.bench_function("parry3d, all cores", |b| {
        b.iter(|| {
            out.par_iter_mut()
                .zip(points.par_iter())
                .for_each(|(o, p)| {
                    *o = shape.project_point(&pose, Vector::new(p[0], p[1], p[2]), true);
                });
            black_box(&out);
        })
    });
    // The twin of our distance-only rows: parry's `distance_to_point`, 4 bytes a row.
    let mut distances = vec![0f32; points.len()];
    group.bench_function("parry3d distance, all cores", |b| {
        b.iter(|| {
            distances
                .par_iter_mut()
                .zip(points.par_iter())
                .for_each(|(d, p)| {
                    *d = shape.distance_to_point(&pose, Vector::new(p[0], p[1], p[2]), true);
                });
            black_box(&distances);
        })
    });
}

/// The parry3d twin of a shape, where parry has one.
fn bench_parry_twin(
    group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    points: &[[f32; 3]],
    shape: &Shape,
) {
    use parry3d::shape::{
        Ball, Capsule, Cone, ConvexPolyhedron, Cuboid, Cylinder, HalfSpace, Segment, Triangle,
    };
    let at = |c: closest::DVec3| Pose::from_translation(v(c));
    match *shape {
        Shape::Sphere { center, radius } => {
            bench_parry(group, points, Ball::new(radius as f32), at(center))
        }
        Shape::Aabb { min, max } => bench_parry(
            group,
            points,
            Cuboid::new(v((max - min) * 0.5)),
            at((min + max) * 0.5),
        ),
        Shape::Box {
            center,
            half_extents,
            rotation,
        } => {
            let pose = oriented_pose(center, rotation);
            bench_parry(group, points, Cuboid::new(v(half_extents)), pose)
        }
        Shape::Plane { normal, offset } => bench_parry(
            group,
            points,
            HalfSpace::new(v(normal)),
            at(normal * offset),
        ),
        Shape::Segment { a, b } => {
            bench_parry(group, points, Segment::new(v(a), v(b)), Pose::IDENTITY)
        }
        Shape::Triangle { a, b, c } => bench_parry(
            group,
            points,
            Triangle::new(v(a), v(b), v(c)),
            Pose::IDENTITY,
        ),
        Shape::Capsule { a, b, radius } => bench_parry(
            group,
            points,
            Capsule::new(v(a), v(b), radius as f32),
            Pose::IDENTITY,
        ),
        Shape::Cylinder { a, b, radius } => {
            let (half_height, pose) = standing_on_y(a, b);
            bench_parry(
                group,
                points,
                Cylinder::new(half_height, radius as f32),
                pose,
            )
        }
        Shape::Wedge { .. } | Shape::CornerWedge { .. } => {
            // parry has no wedge: its convex polyhedron over the same vertices.
            let vertices: Vec<Vector> = polyhedron_vertices(shape).into_iter().map(v).collect();
            let hull = ConvexPolyhedron::from_convex_hull(&vertices).expect("a solid part");
            bench_parry(group, points, hull, Pose::IDENTITY)
        }
        Shape::Cone { a, b, radius } => {
            // Apex up, at b.
            let (half_height, pose) = standing_on_y(a, b);
            bench_parry(group, points, Cone::new(half_height, radius as f32), pose)
        }
        Shape::ConvexHull(ref hull) => {
            let vertices: Vec<Vector> = hull.points.iter().map(|&p| v(p)).collect();
            let polyhedron = ConvexPolyhedron::from_convex_hull(&vertices).expect("a solid hull");
            bench_parry(group, points, polyhedron, Pose::IDENTITY)
        }
        // parry3d has no line, ray, torus or ellipsoid point query.
        Shape::Line { .. } | Shape::Ray { .. } | Shape::Torus { .. } | Shape::Ellipsoid { .. } => {}
    }
}

/// parry's cylinders and cones stand on Y, centred at their pose: the half height and pose of
/// one whose axis runs from `a` to `b`.
fn standing_on_y(a: closest::DVec3, b: closest::DVec3) -> (f32, Pose) {
    let (axis, height) = closest::math::cylinder_axis(a, b);
    let pose = Pose::from_parts(
        v((a + b) * 0.5),
        Rotation::from_rotation_arc(Vector::Y, v(axis)),
    );
    (height as f32 * 0.5, pose)
}

/// World-space vertices of a wedge or corner wedge (SPEC §1).
fn polyhedron_vertices(shape: &Shape) -> Vec<closest::DVec3> {
    use closest::reference::{corner_wedge_vertices, wedge_vertices};
    match *shape {
        Shape::Wedge {
            center,
            half_extents,
            rotation,
        } => wedge_vertices(half_extents)
            .map(|v| Shape::oriented_point(center, rotation, v))
            .to_vec(),
        Shape::CornerWedge {
            center,
            half_extents,
            rotation,
        } => corner_wedge_vertices(half_extents)
            .map(|v| Shape::oriented_point(center, rotation, v))
            .to_vec(),
        _ => unreachable!("only wedges"),
    }
}

fn throughput(c: &mut Criterion) {
    let n = env_count("CLOSEST_BENCH_POINTS", 4_000_000);
    let engine = bench_engine();
    eprintln!(
        "adapter: {}; {n} points per shape; {} CPU threads",
        engine.describe(),
        rayon::current_num_threads()
    );
    let points = sample_points(n);
    let mut hits = vec![GpuHit::default(); n];
    let mut distances = vec![0f32; n];

    let mut group = c.benchmark_group("memcpy");
    group
        .throughput(Throughput::Elements(n as u64))
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1));
    let (src_in, src_out) = (vec![1u8; n * 12], vec![2u8; n * 32]);
    let (mut dst_in, mut dst_out) = (vec![0u8; n * 12], vec![0u8; n * 32]);
    group.bench_function("12 in + 32 out bytes per row", |b| {
        b.iter(|| {
            dst_in.copy_from_slice(&src_in);
            dst_out.copy_from_slice(&src_out);
            black_box((&dst_in, &dst_out));
        })
    });
    group.finish();

    for shape in sample_shapes() {
        let mut group = c.benchmark_group(shape.kind().name());
        group
            .throughput(Throughput::Elements(n as u64))
            .sample_size(10)
            .warm_up_time(Duration::from_secs(1));
        let scene = engine.upload_scene(std::slice::from_ref(&shape)).unwrap();
        group.bench_function("closest GPU", |b| {
            b.iter(|| {
                let job = closest::engine::SceneQuery {
                    scene: &scene,
                    points: closest::Points::F32(&points),
                    mode: Mode::Solid,
                    fields: Fields::all(Family::Hits),
                };
                engine.query_scene(job, &mut hits).unwrap();
                black_box(&hits);
            })
        });
        // Distance only: 4 bytes a row come back instead of 32.
        let distance_only = Fields::from_bits(Family::Hits, fields::DISTANCE);
        group.bench_function("closest GPU, distance only", |b| {
            b.iter(|| {
                let job = closest::engine::SceneQuery {
                    scene: &scene,
                    points: closest::Points::F32(&points),
                    mode: Mode::Solid,
                    fields: distance_only,
                };
                engine
                    .query_scene(job, &mut |first: usize, rows: PackedRows<'_>| {
                        distances[first..first + rows.len()]
                            .copy_from_slice(bytemuck::cast_slice(rows.words()));
                        Ok(())
                    })
                    .unwrap();
                black_box(&distances);
            })
        });
        let mut ref_out = vec![reference::Hit::NON_FINITE; n];
        group.bench_function("reference f64, all cores", |b| {
            b.iter(|| {
                ref_out
                    .par_iter_mut()
                    .zip(points.par_iter())
                    .for_each(|(o, p)| {
                        let p = closest::DVec3::new(p[0] as f64, p[1] as f64, p[2] as f64);
                        *o = reference::query_shape(&shape, 0, p, Mode::Solid);
                    });
                black_box(&ref_out);
            })
        });
        bench_parry_twin(&mut group, &points, &shape);
        group.finish();
    }
}

criterion_group!(benches, throughput);
criterion_main!(benches);
