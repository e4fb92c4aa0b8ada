#!/usr/bin/env bash
# Peak resident memory of `closest query` at 10^6, 10^7 and 10^8 points (a benchmark, not a
# test): points are streamed in and results streamed out, so the peak should not grow with N.
# Usage: bash scripts/bench/rss_bench.sh [DIR] [COUNTS...]   (DIR holds the inputs and outputs:
# 1.2 GB in and 3.2 GB out at 10^8; default target/rss)
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/lavapipe.sh
command -v /usr/bin/time > /dev/null || apt-get install -y time  # GNU time, for the peak RSS
dir=${1:-target/rss}
shift || true
counts=("$@")
[ ${#counts[@]} -gt 0 ] || counts=(1000000 10000000 100000000)
mkdir -p "$dir"
cargo build --release --locked --example random_points
cargo build --release --locked
printf '%12s %10s %14s %10s\n' points seconds "peak RSS MiB" "out MB"
for n in "${counts[@]}"; do
    points="$dir/points_$n.npy"
    [ -f "$points" ] || ./target/release/examples/random_points "$n" "$points"
    log="$dir/time_$n.txt"
    /usr/bin/time -v ./target/release/closest query --shapes examples/scene.json \
        --points "$points" --out "$dir/out_$n.npz" 2> "$log" > /dev/null
    rss_kb=$(awk -F': ' '/Maximum resident set size/ { print $2 }' "$log")
    wall=$(awk -F': ' '/Elapsed \(wall clock\)/ { print $2 }' "$log")
    out_mb=$(( $(stat -c %s "$dir/out_$n.npz") / 1000000 ))
    printf '%12s %10s %14s %10s\n' "$n" "$wall" "$(( rss_kb / 1024 ))" "$out_mb"
    grep '^closest:' "$log" || true
    rm -f "$dir/out_$n.npz"
done
