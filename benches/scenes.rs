//! Nearest-shape queries over scenes of 10^3–10^5 mixed shapes (spheres, boxes, capsules,
//! triangles): the GPU BVH path, the GPU brute-force path and parry3d's BVH-backed `Compound`
//! on all cores (rayon), same points, same run. Each peer's distances are cross-checked
//! against ours before its time counts.
//!
//! `cargo bench --bench scenes` (1,000,000 points, median of 3);
//! CLOSEST_BENCH_POINTS and CLOSEST_BENCH_REPEATS override; CLOSEST_BENCH_PORTABLE=1 runs the portable kernels
//! (`EngineOptions::portable_kernels`).

use closest::Shape;
use closest::bench::{ScenePeer, run_scene_table};
use parry3d::math::{Pose, Vector};
use parry3d::query::PointQuery;
use parry3d::shape::Compound;
use rayon::prelude::*;

#[allow(dead_code, reason = "this bench uses part of the shared helpers")]
mod common;

use common::{bench_engine, env_count, parry_part};

/// parry3d's compound shape: its own BVH over the parts, best-first point projection.
#[derive(Default)]
struct ParryCompound {
    compound: Option<Compound>,
}

impl ScenePeer for ParryCompound {
    fn name(&self) -> &str {
        "parry3d"
    }

    fn prepare(&mut self, shapes: &[Shape]) {
        let parts = shapes.iter().map(parry_part).collect();
        self.compound = Some(Compound::new(parts));
    }

    fn query(&self, points: &[[f32; 3]], distances: &mut [f32]) {
        let compound = self.compound.as_ref().expect("prepared");
        distances
            .par_iter_mut()
            .zip(points.par_iter())
            .for_each(|(d, p)| {
                let p = Vector::new(p[0], p[1], p[2]);
                let projection = compound.project_point(&Pose::IDENTITY, p, true);
                *d = if projection.is_inside {
                    0.0
                } else {
                    (p - projection.point).length()
                };
            });
    }
}

fn main() {
    // `cargo bench` passes `--bench`; nothing else is taken from the command line.
    let engine = bench_engine();
    let rows = env_count("CLOSEST_BENCH_POINTS", 1_000_000);
    let repeats = env_count("CLOSEST_BENCH_REPEATS", 3);
    let mut peer = ParryCompound::default();
    run_scene_table(
        &engine,
        rows,
        repeats,
        Some(&mut peer),
        &mut std::io::stdout(),
    )
    .expect("the scenes benchmark");
}
