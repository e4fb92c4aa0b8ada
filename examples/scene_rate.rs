//! The BVH column of `cargo bench --bench scenes` alone (no peer, no other order), for quick
//! A/B runs of the scene kernels: 1,000,000 points (ROWS overrides) against the bench's mixed
//! scenes of 10^3, 10^4 and 10^5 shapes, median of 3, PORTABLE=1 for the portable kernels.
//! With COUNTS=1 it also prints the mean of the three normal words over the rows, where
//! the branch experiments/walk_counts makes the subgroup kernel write its walk's step counts.
//! WALK_ONLY=1 answers by the BVH walk alone (no cell lists); DUMP=DIR writes each scene's
//! hits to DIR/hits_COUNT.bin, for byte comparisons.
//! SURFACE=1 queries in surface mode (the bench's is solid).
//! PARTS=1 turns each scene into six kinds of parts (blocks, wedges, corner wedges, cylinders,
//! spheres, axis-aligned boxes) in the same places, for cell lists of more than four kinds.
//! With TIMING=1 it prints the host's share of the last run (`Engine::last_timing`): filling
//! the point buffers (the Morton sort), waiting on the device, draining the answers.
//!
//! `cargo run --release --example scene_rate`

use closest::bench::{sample_points, sample_scene};
use closest::gpu::GpuHit;
use closest::{Engine, EngineOptions, Mode, Shape};
use std::time::Instant;

fn main() -> closest::Result<()> {
    let engine = Engine::new(&EngineOptions {
        portable_kernels: std::env::var("PORTABLE").is_ok_and(|v| v == "1"),
        walk_only: std::env::var("WALK_ONLY").is_ok_and(|v| v == "1"),
        ..Default::default()
    })?;
    let rows: usize = std::env::var("ROWS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000_000);
    let points: Vec<[f32; 3]> = sample_points(rows)
        .iter()
        .map(|p| p.map(|x| x * 55.0))
        .collect();
    let mut hits = vec![GpuHit::default(); rows];
    // The bench's mode; SURFACE=1 for surface distances (no zero inside solids).
    let mode = if std::env::var("SURFACE").is_ok_and(|v| v == "1") {
        Mode::Surface
    } else {
        Mode::Solid
    };
    println!(
        "adapter: {}; kernels: {}",
        engine.describe(),
        engine.scene_kernels()
    );
    for count in [1_000usize, 10_000, 100_000] {
        let mut shapes = sample_scene(count);
        if std::env::var("PARTS").is_ok_and(|v| v == "1") {
            shapes = as_parts(&shapes);
        }
        let upload = Instant::now();
        let scene = engine.upload_scene(&shapes)?;
        let upload = upload.elapsed().as_secs_f64();
        let mut seconds = Vec::new();
        for _ in 0..3 {
            let start = Instant::now();
            let job = closest::engine::SceneQuery {
                scene: &scene,
                points: closest::Points::F32(&points),
                mode,
                fields: closest::Fields::all(closest::Family::Hits),
            };
            engine.query_scene(job, &mut hits)?;
            seconds.push(start.elapsed().as_secs_f64());
        }
        seconds.sort_by(f64::total_cmp);
        let rate = rows as f64 / seconds[1] / 1e6;
        print!("{count:>7} shapes: {rate:.3} Mq/s, upload {upload:.2} s");
        if let Ok(dir) = std::env::var("DUMP") {
            std::fs::write(
                format!("{dir}/hits_{count}.bin"),
                bytemuck::cast_slice(&hits),
            )
            .unwrap();
        }
        if std::env::var("TIMING").is_ok_and(|v| v == "1") {
            print!("; {}", engine.last_timing().breakdown());
        }
        if std::env::var("COUNTS").is_ok_and(|v| v == "1") {
            let mean =
                |k: usize| hits.iter().map(|h| h.normal[k] as f64).sum::<f64>() / rows as f64;
            print!(
                "; normal words' means {:.2} {:.2} {:.2}",
                mean(0),
                mean(1),
                mean(2)
            );
        }
        println!();
    }
    Ok(())
}

/// Each shape as a part of one of six kinds, in its box (the bench's shapes are small).
fn as_parts(shapes: &[Shape]) -> Vec<Shape> {
    let rotation = [0.1, 0.2, 0.3, 0.9];
    shapes
        .iter()
        .enumerate()
        .map(|(i, shape)| {
            let b = closest::bvh::shape_bounds(shape).expect("bounded");
            let (center, half_extents) = ((b.min + b.max) * 0.5, (b.max - b.min) * 0.5);
            match i % 6 {
                0 => Shape::Box {
                    center,
                    half_extents,
                    rotation,
                },
                1 => Shape::Wedge {
                    center,
                    half_extents,
                    rotation,
                },
                2 => Shape::CornerWedge {
                    center,
                    half_extents,
                    rotation,
                },
                3 => Shape::Cylinder {
                    a: center - half_extents * 0.5,
                    b: center + half_extents * 0.5,
                    radius: half_extents.x.min(half_extents.y).min(half_extents.z) * 0.5,
                },
                4 => Shape::Sphere {
                    center,
                    radius: half_extents.x.min(half_extents.y).min(half_extents.z),
                },
                _ => Shape::Aabb {
                    min: b.min,
                    max: b.max,
                },
            }
        })
        .collect()
}
