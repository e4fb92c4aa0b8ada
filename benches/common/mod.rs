//! What the benchmarks share: their environment overrides and the conversions of our shapes'
//! placements into parry3d's types.

use closest::DVec3;
use parry3d::math::{Pose, Rotation, Vector};

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
