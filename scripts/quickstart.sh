#!/usr/bin/env bash
# The main job on the default adapter (lavapipe when there is no GPU): 1,000,000 random
# points against examples/scene.json, nearest shape in surface mode, written to results.npz.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lavapipe.sh
cargo build --release --locked
mkdir -p target/quickstart
awk 'BEGIN { srand(42); print "x,y,z"; for (i = 0; i < 1000000; i++) printf "%.6f,%.6f,%.6f\n", rand()*20-10, rand()*20-10, rand()*20-10 }' \
    > target/quickstart/points.csv
./target/release/closest info
./target/release/closest query --shapes examples/scene.json --points target/quickstart/points.csv \
    --mode surface --out results.npz
echo "wrote results.npz (arrays point, distance, shape, normal)"
