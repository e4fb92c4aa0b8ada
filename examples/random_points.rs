//! Write N random points as a float32 `.npy` of shape (N, 3), uniform in [-S, S]³, in
//! constant memory (for streaming and peak-memory benchmarks of jobs of any size).
//!
//! `cargo run --release --example random_points -- N OUT.npy [S=10] [SEED=1]`

use std::io::{BufWriter, Write};

fn main() -> std::io::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 3 {
        eprintln!("usage: random_points N OUT.npy [SPREAD=10] [SEED=1]");
        std::process::exit(2);
    }
    let count: usize = args[1].parse().expect("N is a whole number");
    let spread: f32 = args
        .get(3)
        .map_or(10.0, |s| s.parse().expect("SPREAD is a number"));
    let mut state: u64 = args
        .get(4)
        .map_or(1, |s| s.parse().expect("SEED is a number"));
    let mut out = BufWriter::with_capacity(1 << 20, std::fs::File::create(&args[2])?);
    closest::io::npy::write_header(&mut out, "<f4", &[count, 3])?;
    // splitmix64: fast, and the same points on every machine.
    let mut next = || {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    for _ in 0..count * 3 {
        let unit = (next() >> 40) as f32 / (1u64 << 24) as f32;
        out.write_all(&((unit * 2.0 - 1.0) * spread).to_le_bytes())?;
    }
    out.flush()
}
