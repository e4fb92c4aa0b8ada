#!/bin/bash
# Packed against indexed mesh records (docs/perf-history.md, issue 14 third session): 128³ grids of the
# shared meshes and 10^6 points against a 1M-triangle torus, alternating, three rounds.
# Usage: bash scripts/bench/mesh_records_ab.sh TORUS_1M.stl POINTS_1M.npy   (release build first;
# `python3 scripts/bench/make_torus_mesh.py 1024 512 TORUS_1M.stl` makes the torus)
set -euo pipefail
torus=$(realpath "$1") points=$(realpath "$2") out=$(mktemp -d)
cd "$(dirname "$0")/../.."
source scripts/lavapipe.sh
meshes=../shared/data/meshes
for round in 1 2 3; do
  for mesh in fandisk.obj stanford-bunny.obj igea.ply; do
    for records in packed indexed; do
      target/release/closest sdf "$meshes/$mesh" --res 128 --mesh-records $records \
        --out "$out/grid.npz" 2>&1 | tail -1 | sed "s|^|sdf $mesh $records |"
    done
  done
  for records in packed indexed; do
    target/release/closest query --mesh "$torus" --points "$points" --sign pseudonormal \
      --fields distance --mesh-records $records --out "$out/rows.npz" 2>&1 | tail -1 \
      | sed "s|^|query torus $records |"
  done
done
rm -r "$out"
