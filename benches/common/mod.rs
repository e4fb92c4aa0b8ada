//! What the benchmarks share: their environment overrides and the conversions of our shapes'
//! placements into parry3d's types.

use std::time::{Duration, Instant};

use closest::{DVec3, Shape};
use parry3d::math::{Pose, Rotation, Vector};
use parry3d::shape::SharedShape;

/// `name` from the environment as a count, else `default` (CLOSEST_BENCH_POINTS and friends).
pub fn env_count(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// Whether a switch like CLOSEST_BENCH_PORTABLE is on: set, and neither empty nor "0".
pub fn env_flag(name: &str) -> bool {
    std::env::var(name).is_ok_and(|s| !s.is_empty() && s != "0")
}

/// The default adapter's engine, held to the portable kernels when CLOSEST_BENCH_PORTABLE is
/// on (`EngineOptions::portable_kernels`), with CLOSEST_BENCH_CHUNK_ROWS rows a chunk if set.
pub fn bench_engine() -> closest::Engine {
    closest::Engine::new(&closest::EngineOptions {
        portable_kernels: env_flag("CLOSEST_BENCH_PORTABLE"),
        chunk_rows: std::env::var("CLOSEST_BENCH_CHUNK_ROWS")
            .ok()
            .and_then(|s| s.parse().ok()),
        ..Default::default()
    })
    .expect("a GPU adapter (or lavapipe)")
}

pub fn v(p: DVec3) -> Vector {
    Vector::new(p.x as f32, p.y as f32, p.z as f32)
}

/// The pose of an oriented shape: its centre and its quaternion `[x, y, z, w]`, normalised.
pub fn oriented_pose(center: DVec3, rotation: [f64; 4]) -> Pose {
    let [x, y, z, w] = rotation.map(|c| c as f32);
    Pose::from_parts(v(center), Rotation::from_xyzw(x, y, z, w).normalize())
}

pub fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

/// The median time of `repeats` runs of `run`, and its last answer.
pub fn timed<T>(repeats: usize, mut run: impl FnMut() -> T) -> (Duration, T) {
    let mut answer = None;
    let times = (0..repeats)
        .map(|_| {
            // The previous answer is freed before the clock starts: freeing 10^7 rows took
            // milliseconds, which are not the next call's.
            answer = None;
            let started = Instant::now();
            answer = Some(run());
            started.elapsed()
        })
        .collect();
    (median(times), answer.expect("at least one run"))
}

/// A part of `closest::bench::sample_scene` as parry3d's pose and shape.
pub fn parry_part(shape: &Shape) -> (Pose, SharedShape) {
    match *shape {
        Shape::Sphere { center, radius } => (
            Pose::from_translation(v(center)),
            SharedShape::ball(radius as f32),
        ),
        Shape::Box {
            center,
            half_extents,
            rotation,
        } => {
            let h = v(half_extents);
            (
                oriented_pose(center, rotation),
                SharedShape::cuboid(h.x, h.y, h.z),
            )
        }
        Shape::Capsule { a, b, radius } => (
            Pose::IDENTITY,
            SharedShape::capsule(v(a), v(b), radius as f32),
        ),
        Shape::Triangle { a, b, c } => (Pose::IDENTITY, SharedShape::triangle(v(a), v(b), v(c))),
        ref other => panic!("the benches have no parry twin for {other:?}"),
    }
}
