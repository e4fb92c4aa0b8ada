//! Small engine calls, one at a time and from several threads at once: where a served batch's
//! time goes (issue 47's service goal, docs/perf-history.md "The service's host side on an
//! H200"). The bunny resident, signed distance-only queries of ROWS points (the service's
//! batches), for each caller count: the median call, the calls' rate in rows, and the phases
//! of a lone call (`Engine::last_timing`). Calls from several threads either run as the engine
//! lets them (`Engine::jobs_at_once`) or one at a time behind a mutex of this example's own:
//! if the mutex is faster, concurrent calls cost each other more than they overlap.
//!
//! `cargo run --release --example concurrent_calls [MESH]`; ROWS (default
//! 1000,16000,65536,262144), CALLERS (default 1,2,4,8), CALLS a caller (default 40).

use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use closest::fields::{DISTANCE, Family, Fields};
use closest::io::load_mesh;
use closest::mesh::Sign;
use closest::{Engine, EngineOptions, GpuMesh};

fn counts(name: &str, default: &str) -> Vec<usize> {
    std::env::var(name)
        .unwrap_or_else(|_| default.into())
        .split(',')
        .map(|v| v.parse().expect("a comma-separated list of counts"))
        .collect()
}

fn call(engine: &Engine, mesh: &GpuMesh, points: &[[f32; 3]]) -> Duration {
    let fields = Fields::from_bits(Family::Hits, DISTANCE);
    let mut columns = closest::Columns::new(fields, points.len());
    let job = closest::engine::MeshQuery {
        mesh,
        points: closest::Points::F32(points),
        sign: Sign::Pseudonormal,
        fields,
    };
    let started = Instant::now();
    engine.query_mesh(job, &mut columns).expect("a query");
    started.elapsed()
}

fn median_ms(times: &mut [Duration]) -> f64 {
    times.sort();
    times[times.len() / 2].as_secs_f64() * 1e3
}

fn main() -> closest::Result<()> {
    let path = std::env::args().nth(1).map_or_else(
        || {
            PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("../shared/data/meshes/stanford-bunny.obj")
        },
        PathBuf::from,
    );
    let engine = Engine::new(&EngineOptions::default())?;
    let mesh = load_mesh(&path)?;
    let (lo, hi) = mesh.bounds();
    let gpu = engine.upload_mesh(mesh)?;
    let calls = counts("CALLS", "40")[0];
    println!(
        "{}; jobs at once {}; {}; median of {calls} calls a caller",
        engine.describe(),
        engine.jobs_at_once(),
        path.display()
    );
    println!("    rows callers  how         call ms   M rows/s  (a lone call: phases)");
    for rows in counts("ROWS", "1000,16000,65536,262144") {
        let points: Vec<[f32; 3]> = closest::bench::padded_box_points(lo, hi, rows)
            .iter()
            .map(|p| p.map(|x| x as f32))
            .collect();
        call(&engine, &gpu, &points);
        for callers in counts("CALLERS", "1,2,4,8") {
            let one_at_a_time = Mutex::new(());
            for serialised in [false, true] {
                if callers == 1 && serialised {
                    continue;
                }
                let started = Instant::now();
                let mut times: Vec<Duration> = std::thread::scope(|s| {
                    let workers: Vec<_> = (0..callers)
                        .map(|_| {
                            s.spawn(|| {
                                (0..calls)
                                    .map(|_| {
                                        let _turn = serialised.then(|| one_at_a_time.lock());
                                        call(&engine, &gpu, &points)
                                    })
                                    .collect::<Vec<_>>()
                            })
                        })
                        .collect();
                    workers
                        .into_iter()
                        .flat_map(|w| w.join().expect("a caller"))
                        .collect()
                });
                let rate = (rows * callers * calls) as f64 / started.elapsed().as_secs_f64();
                let phases = if callers == 1 {
                    engine.last_timing().breakdown()
                } else {
                    String::new()
                };
                println!(
                    "{rows:>8} {callers:>7}  {:<10} {:8.3} {:10.2}  {phases}",
                    if serialised { "mutex" } else { "engine" },
                    median_ms(&mut times),
                    rate / 1e6
                );
            }
        }
    }
    Ok(())
}
