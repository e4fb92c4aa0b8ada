#!/usr/bin/env bash
# Same-run A/B of the scene and mesh benches (`cargo bench --bench scenes|meshes`) at two
# revisions, alternated ROUNDS times (default 2): the guard that a refactor slowed no row of
# them (issue 44). Each revision is built from a worktree into the shared target directory.
#
#   bash scripts/bench/bench_ab.sh BEFORE AFTER
#
# CLOSEST_BENCH_POINTS (default 400000), CLOSEST_BENCH_REPEATS (default 3) and
# CLOSEST_BENCH_PARRY (default 0) go to both.
set -euo pipefail
cd "$(dirname "$0")/../.."
[ $# -eq 2 ] || { echo "usage: $0 BEFORE AFTER (two revisions)" >&2; exit 2; }
root=$PWD
rounds=${ROUNDS:-2}
export CLOSEST_BENCH_POINTS=${CLOSEST_BENCH_POINTS:-400000}
export CLOSEST_BENCH_REPEATS=${CLOSEST_BENCH_REPEATS:-3}
export CLOSEST_BENCH_PARRY=${CLOSEST_BENCH_PARRY:-0}
export CLOSEST_BENCH_GRID=${CLOSEST_BENCH_GRID:-64}
meshes=$root/../shared/data/meshes
export CLOSEST_BENCH_MESHES=${CLOSEST_BENCH_MESHES:-$meshes/fandisk.obj,$meshes/stanford-bunny.obj,$meshes/igea.ply}
source scripts/lavapipe.sh
export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-/tmp}"
bins=$root/target/bench-ab
mkdir -p "$bins"
for rev in "$1" "$2"; do
    src=$root/target/bench-ab/src-$rev
    [ -d "$src" ] || git worktree add --detach -q "$src" "$rev"
    for bench in scenes meshes; do
        exe=$(cd "$src" && CARGO_TARGET_DIR=$root/target cargo bench --locked --bench "$bench" --no-run 2>&1 |
            sed -n 's/.*Executable .*(\(.*\))/\1/p' | tail -1)
        cp "$exe" "$bins/$bench-$rev"
    done
done
for round in $(seq "$rounds"); do
    for rev in "$1" "$2"; do
        for bench in scenes meshes; do
            echo "## round $round, $rev, $bench"
            "$bins/$bench-$rev" --bench 2>&1 | grep -E "^ *[0-9]+ |\.(obj|ply) " || true
        done
    done
done
