#!/usr/bin/env bash
# Narrow-band grids against the dense grid (issue 45): for each shared mesh and sign method
# (auto, pseudonormal), the whole `closest sdf` job at 128³ dense, at 512³ with a 3-voxel band
# to a sparse .npz, and the same to the dense 512³ .npz; wall time and peak memory each,
# ROUNDS times (default 2). Release build on the default adapter.
#
#   bash scripts/bench/band_vs_dense.sh [RES_DENSE RES_BAND BAND]   (default 128 512 3)
set -euo pipefail
cd "$(dirname "$0")/../.."
dense=${1:-128} res=${2:-512} band=${3:-3} rounds=${ROUNDS:-2}
cargo build --release --locked --bin closest 2>&1 | tail -1
source scripts/lavapipe.sh
export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-/tmp}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
meshes=../shared/data/meshes
run() {
    local what=$1
    shift
    /usr/bin/time -f "%e s %M KB" -o "$work/time" ./target/release/closest "$@" 2>"$work/err" >/dev/null
    printf '%-44s %s  %s\n' "$what" "$(cat "$work/time")" "$(grep -o 'signs: [a-z]*\|band: [0-9]* of [0-9]* samples computed[^;]*' "$work/err" | tr '\n' ' ')"
}
for m in fandisk.obj stanford-bunny.obj igea.ply; do
    for sign in auto pseudonormal; do
        for _ in $(seq "$rounds"); do
            run "$m $sign dense ${dense}³" sdf "$meshes/$m" --res "$dense" --sign "$sign" --out "$work/d.npz"
            run "$m $sign band ${res}³ sparse" sdf "$meshes/$m" --res "$res" --band "$band" --sign "$sign" --sparse "$work/s.npz"
            run "$m $sign band ${res}³ dense out" sdf "$meshes/$m" --res "$res" --band "$band" --sign "$sign" --out "$work/b.npz"
        done
    done
done
