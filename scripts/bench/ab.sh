#!/usr/bin/env bash
# Same-run A/B of two `closest` binaries on whole CLI jobs (the guard that a refactor made no
# job slower than noise): each job runs with BEFORE, then AFTER, ROUNDS times (default 3),
# alternated; it prints each side's median wall time and AFTER/BEFORE.
#
#   bash scripts/bench/ab.sh BEFORE AFTER        (two binaries; `scripts/same_outputs.sh REV1
#                                                 REV2` leaves release builds of two revisions
#                                                 in target/same-outputs/closest-REV)
#
# Jobs: 10^6 points against examples/scene.json (every field, and distance only), 10^6
# points against the bunny (pseudonormal signs, distance only), 10^5 against the bunny with
# winding signs, 10^5 sphere contacts, 10^6 segment pairs and fandisk's 128³ SDF grid, on
# the default adapter.
set -euo pipefail
cd "$(dirname "$0")/../.."
[ $# -eq 2 ] || { echo "usage: $0 BEFORE AFTER (two closest binaries)" >&2; exit 2; }
before=$(realpath "$1")
after=$(realpath "$2")
rounds=${ROUNDS:-3}
source scripts/lavapipe.sh
export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-/tmp}"
work=target/ab
mkdir -p "$work"
meshes=../shared/data/meshes

python3 - "$work" <<'EOF'
import random, struct, sys
out = sys.argv[1]
sys.path.insert(0, "scripts")
from write_npy import npy as write_npy
def npy(name, shape, values):
    write_npy(f"{out}/{name}", shape, values)
rng = random.Random(7)
npy("points.npy", (1000000, 3), [rng.uniform(-10, 10) for _ in range(3 * 1000000)])
npy("mesh_points.npy", (1000000, 3), [rng.uniform(-0.12, 0.12) for _ in range(3 * 1000000)])
npy("mesh_points_1e5.npy", (100000, 3), [rng.uniform(-0.12, 0.12) for _ in range(3 * 100000)])
npy("spheres.npy", (100000, 4), [rng.uniform(-8, 8) if k % 4 < 3 else rng.uniform(0, 2) for k in range(4 * 100000)])
npy("a.npy", (1000000, 2, 3), [rng.uniform(-3, 3) for _ in range(6 * 1000000)])
npy("b.npy", (1000000, 2, 3), [rng.uniform(-3, 3) for _ in range(6 * 1000000)])
EOF

jobs=(
    "scene 10^6, every field|query --shapes examples/scene.json --points $work/points.npy"
    "scene 10^6, distance|query --shapes examples/scene.json --points $work/points.npy --fields distance"
    "bunny 10^6, pseudonormal distance|query --mesh $meshes/stanford-bunny.obj --points $work/mesh_points.npy --sign pseudonormal --fields distance"
    "bunny 10^5, winding|query --mesh $meshes/stanford-bunny.obj --points $work/mesh_points_1e5.npy --sign winding"
    "contacts 10^5|contacts --shapes examples/scene.json --spheres $work/spheres.npy"
    "segments 10^6|segments --a $work/a.npy --b $work/b.npy"
    "fandisk sdf 128³|sdf $meshes/fandisk.obj --res 128"
)
median() { sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
printf '| job | before (s) | after (s) | after / before |\n|---|---:|---:|---:|\n'
for job in "${jobs[@]}"; do
    name=${job%%|*}
    args=${job#*|}
    : >"$work/before.times"
    : >"$work/after.times"
    for _ in $(seq "$rounds"); do
        for side in before after; do
            binary=$before
            [ "$side" = after ] && binary=$after
            start=$(date +%s.%N)
            # shellcheck disable=SC2086
            "$binary" $args --out "$work/out.npz" >/dev/null 2>"$work/$side.log" || {
                echo "closest: '$name' failed with $binary:" >&2
                cat "$work/$side.log" >&2
                exit 1
            }
            end=$(date +%s.%N)
            awk -v s="$start" -v e="$end" 'BEGIN { print e - s }' >>"$work/$side.times"
        done
    done
    b=$(median <"$work/before.times")
    a=$(median <"$work/after.times")
    printf '| %s | %.2f | %.2f | %.3f |\n' "$name" "$b" "$a" "$(awk -v a="$a" -v b="$b" 'BEGIN { print a / b }')"
done
