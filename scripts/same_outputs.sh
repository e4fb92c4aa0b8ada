#!/usr/bin/env bash
# Byte-identical outputs of two builds of `closest` on a fixed set of jobs: the guard of
# refactors that must not change behaviour (issue 13). Jobs: scene queries (both modes, all
# fields and distance only, NaN rows included), paired queries, mesh queries with each sign,
# segment pairs, sphere contacts and SDF grids with both signs, and one scene of each shape
# kind alone (surface mode), on the default adapter.
#
#   bash scripts/same_outputs.sh BEFORE AFTER
#
# BEFORE and AFTER are each a `closest` binary or a git revision (built in release into
# target/same-outputs). Exit 0 when every output file is identical, 1 naming the ones that
# differ.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -eq 2 ] || { echo "usage: $0 BEFORE AFTER (binaries or git revisions)" >&2; exit 2; }
source scripts/lavapipe.sh
export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-/tmp}"
work=target/same-outputs
mkdir -p "$work"
meshes=../shared/data/meshes

binary_of() {
    if [ -x "$1" ] && [ -f "$1" ]; then
        realpath "$1"
        return
    fi
    local rev
    rev=$(git rev-parse --verify "$1^{commit}")
    local tree="$work/tree-$rev" out="$work/closest-$rev"
    if [ ! -x "$out" ]; then
        rm -rf "$tree"
        git worktree prune
        git worktree add --detach "$tree" "$rev" >&2
        cargo build --release --locked --bin closest --manifest-path "$tree/Cargo.toml" \
            --target-dir "$work/target" >&2
        cp "$work/target/release/closest" "$out"
        git worktree remove --force "$tree"
    fi
    realpath "$out"
}

before=$(binary_of "$1")
after=$(binary_of "$2")

inputs="$work/inputs"
mkdir -p "$inputs"
python3 - "$inputs" <<'EOF'
# Deterministic inputs, standard library only (scripts/write_npy.py) and a fixed generator.
import random, struct, sys
out = sys.argv[1]
sys.path.insert(0, "scripts")
from write_npy import npy as write_npy
def npy(name, shape, values):
    write_npy(f"{out}/{name}", shape, values)
rng = random.Random(13)
points = [rng.uniform(-7, 7) for _ in range(3 * 20000)]
points[3 * 17] = float("nan")
npy("points.npy", (20000, 3), points)
npy("paired.npy", (13, 3), points[:39])
npy("mesh_points.npy", (20000, 3), [rng.uniform(-1.5, 1.5) for _ in range(3 * 20000)])
npy("a.npy", (5000, 2, 3), [rng.uniform(-3, 3) for _ in range(6 * 5000)])
npy("b.npy", (5000, 2, 3), [rng.uniform(-3, 3) for _ in range(6 * 5000)])
spheres = [rng.uniform(-6, 6) if k % 4 < 3 else rng.uniform(0, 2) for k in range(4 * 5000)]
npy("spheres.npy", (5000, 4), spheres)
# One scene per shape kind (SPEC §1), each alone, off the origin and turned.
import json
q = [0.1, 0.2, 0.3, 0.9]
kinds = {
    "sphere": {"center": [1, 2, 3], "radius": 1.5},
    "aabb": {"min": [-1, -2, -0.5], "max": [2, 1, 0.5]},
    "box": {"center": [1, 0, -1], "half_extents": [1, 0.5, 2], "rotation": q},
    "plane": {"normal": [1, 1, 0], "offset": 0.5},
    "segment": {"a": [-2, 0, 1], "b": [3, 1, -1]},
    "line": {"a": [-2, 0, 1], "b": [3, 1, -1]},
    "ray": {"origin": [-2, 0, 1], "direction": [1, 1, 1]},
    "triangle": {"a": [0, 0, 0], "b": [3, 1, 0], "c": [1, 3, 2]},
    "capsule": {"a": [-1, -1, 0], "b": [2, 2, 1], "radius": 0.8},
    "cylinder": {"a": [1, 1, 1], "b": [-1, -1, -1], "radius": 0.7},
    "wedge": {"center": [0, 1, 0], "half_extents": [1, 1.5, 2], "rotation": q},
    "corner_wedge": {"center": [0, 1, 0], "half_extents": [1, 1.5, 2], "rotation": q},
    "cone": {"a": [0, 0, 0], "b": [2, 2, 2], "radius": 0.7},
    "torus": {"center": [0, 0, 0], "axis": [1, 1, 0], "major_radius": 1.5, "minor_radius": 0.3},
    "ellipsoid": {"center": [1, 0, 0], "radii": [2, 1, 0.5], "rotation": q},
    "convex_hull": {"points": [[0, 0, 0], [2, 0, 0], [0, 3, 0], [0, 0, 1], [1, 1, 2], [2, 2, -1]]},
}
for kind, fields in kinds.items():
    with open(f"{out}/kind_{kind}.json", "w") as f:
        json.dump({"shapes": [dict(type=kind, **fields)]}, f)
with open(f"{out}/kinds.txt", "w") as f:
    f.write("\n".join(kinds) + "\n")
EOF

jobs=(
    "scene_solid|query --shapes examples/scene.json --points $inputs/points.npy"
    "scene_surface|query --shapes examples/scene.json --points $inputs/points.npy --mode surface"
    "scene_distance|query --shapes examples/scene.json --points $inputs/points.npy --fields distance"
    "paired|query --shapes examples/scene.json --points $inputs/paired.npy --paired --mode surface"
    "mesh_unsigned|query --mesh $meshes/fandisk.obj --points $inputs/mesh_points.npy"
    "mesh_pseudonormal|query --mesh $meshes/fandisk.obj --points $inputs/mesh_points.npy --sign pseudonormal"
    "mesh_winding|query --mesh $meshes/stanford-bunny.obj --points $inputs/mesh_points.npy --sign winding"
    "segments|segments --a $inputs/a.npy --b $inputs/b.npy"
    "contacts|contacts --shapes examples/scene.json --spheres $inputs/spheres.npy"
    "sdf_pseudonormal|sdf $meshes/igea.ply --res 40"
    "sdf_winding|sdf $meshes/stanford-bunny.obj --res 32 --sign winding"
)
while read -r kind; do
    jobs+=("kind_$kind|query --shapes $inputs/kind_$kind.json --points $inputs/points.npy --mode surface")
done <"$inputs/kinds.txt"
differ=()
for job in "${jobs[@]}"; do
    name=${job%%|*}
    args=${job#*|}
    for side in before after; do
        binary=$before
        [ "$side" = after ] && binary=$after
        # shellcheck disable=SC2086
        if ! "$binary" $args --out "$work/$name.$side.npz" 2>"$work/$name.$side.log"; then
            echo "closest: $name failed with the $side build:" >&2
            cat "$work/$name.$side.log" >&2
            exit 2
        fi
    done
    if cmp -s "$work/$name.before.npz" "$work/$name.after.npz"; then
        echo "same    $name"
    else
        echo "DIFFERS $name"
        differ+=("$name")
    fi
done
if [ ${#differ[@]} -gt 0 ]; then
    echo "closest: ${#differ[@]} job(s) answer differently: ${differ[*]}" >&2
    exit 1
fi
echo "closest: every output is byte for byte the same"
