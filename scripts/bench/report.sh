#!/usr/bin/env bash
# Every headline figure on the default adapter, in one command (issue 47): builds in release,
# runs each job with a sample of its answers checked against the f64 reference (a wrong but
# fast kernel fails the job instead of posting a figure), prints one markdown table with the
# adapter, driver and commit, and writes it beside the raw output.
#
#   bash scripts/bench/report.sh [--quick] [--prebuilt DIR] [--meshes DIR] [--out DIR]
#
#   --quick      smaller jobs (10^6 rows, 128³ only, 1,000-point service requests)
#   On a CPU adapter (lavapipe) the full report runs 4·10^6 primitives, the 10^7-point mesh
#   job once, 64 requests of 10^5 points and the 512³ grid with pseudonormal signs only.
#   --prebuilt   take closest, meshes, scenes and serve_load from DIR instead of building
#                (a GPU machine without Rust; scripts/bench/gpu_kit.sh makes DIR)
#   --meshes     the shared meshes (default ../shared/data/meshes); torus-2m.ply is added
#                to the mesh rows when it is there (scripts/bench/make_torus_mesh.py 1024 1024)
#   --out        where report-COMMIT.md and report-COMMIT.log go (default target/report)
#   --build-only build the executables into target/report/bin and stop
#   --smoke      tiny jobs, to try the script itself (its figures mean nothing)
#   --table-from LOG   no jobs: the table again from a raw log this script wrote
set -euo pipefail
cd "$(dirname "$0")/../.."

quick=false
smoke=false
table_from=""
build_only=false
bin_dir=""
meshes=../shared/data/meshes
out=target/report
while [ $# -gt 0 ]; do
    case "$1" in
    --quick) quick=true ;;
    --build-only) build_only=true ;;
    --smoke) smoke=true ;;
    --table-from) table_from=$2; shift ;;
    --prebuilt) bin_dir=$2; shift ;;
    --meshes) meshes=$2; shift ;;
    --out) out=$2; shift ;;
    *) echo "report.sh: unknown argument '$1' (see the header of $0)" >&2; exit 2 ;;
    esac
    shift
done
for m in fandisk.obj stanford-bunny.obj igea.ply; do
    [ -f "$meshes/$m" ] || { echo "report.sh: --meshes: no $meshes/$m" >&2; exit 2; }
done

if [ -z "$bin_dir" ] && [ -z "$table_from" ]; then
    cargo build --release --locked --bin closest --example serve_load
    bin_dir=target/report/bin
    mkdir -p "$bin_dir"
    cp target/release/closest target/release/examples/serve_load "$bin_dir/"
    # The bench executables' paths, from cargo's own report of what it built.
    cargo bench --locked --no-run --bench meshes --bench scenes --message-format=json 2>/dev/null |
        python3 -c 'import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] in ("meshes", "scenes") and m.get("executable"):
        print(m["target"]["name"], m["executable"])' |
        while read -r name path; do cp "$path" "$bin_dir/$name"; done
fi
$build_only && exit 0
[ -z "$table_from" ] || [ -f "$table_from" ] || { echo "report.sh: --table-from: no $table_from" >&2; exit 2; }
for b in closest meshes scenes serve_load; do
    [ -n "$table_from" ] || [ -x "$bin_dir/$b" ] || { echo "report.sh: no executable $bin_dir/$b" >&2; exit 2; }
done
if [ -z "${XDG_RUNTIME_DIR:-}" ]; then
    XDG_RUNTIME_DIR="$(mktemp -d)"
    export XDG_RUNTIME_DIR
fi

commit=${CLOSEST_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
mkdir -p "$out"
log="$out/report-$commit.log"
table="$out/report-$commit.md"
[ -n "$table_from" ] || : >"$log"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

serve_requests_large=640; mesh_large_repeats=3; grid_large_signs="pseudonormal winding"
if $smoke; then
    primitive_rows=20000; scene_rows=20000; mesh_rows=(20000 40000); grids=(16 24)
    serve_rows=1000; python_rows=20000
elif $quick; then
    primitive_rows=1000000; scene_rows=1000000; mesh_rows=(1000000); grids=(128)
    serve_rows=1000; python_rows=1000000
else
    primitive_rows=10000000; scene_rows=4000000; mesh_rows=(1000000 10000000); grids=(128 512)
    serve_rows=100000; python_rows=10000000
fi
mesh_list="$meshes/fandisk.obj,$meshes/stanford-bunny.obj,$meshes/igea.ply"
[ -f "$meshes/torus-2m.ply" ] && mesh_list="$mesh_list,$meshes/torus-2m.ply"

# Runs a command and prints its wall time in seconds.
timed_wall() {
    local started
    started=$(date +%s%N)
    "$@"
    echo "wall $(( ($(date +%s%N) - started) / 1000000 )) ms"
}

# Runs one job, its output into the log under a heading; a failed job is named in the table.
failed=()
job() {
    local name=$1
    shift
    local started=$SECONDS
    echo "## $name" | tee -a "$log"
    if "$@" 2>&1 | tee "$work/$name.out" >>"$log"; then
        echo "($((SECONDS - started)) s)" >>"$log"
    else
        echo "FAILED: $name (exit ${PIPESTATUS[0]})" | tee -a "$log"
        failed+=("$name")
    fi
}

if [ -z "$table_from" ]; then
job info "$bin_dir/closest" info
# On a CPU adapter (lavapipe) the device is the host's own cores: smaller jobs, so that the
# whole report stays within 20 minutes there (docs/perf-history.md, the lavapipe baseline).
if grep -q '^chosen: .*Cpu)' "$work/info.out" && ! $smoke && ! $quick; then
    primitive_rows=4000000; serve_requests_large=64; mesh_large_repeats=1; grid_large_signs=pseudonormal
fi
job primitives "$bin_dir/closest" bench --points "$primitive_rows" --repeats 3
job scenes "$bin_dir/closest" bench --scenes --points "$scene_rows" --repeats 3
# Cheapest first, so that a machine taken back early still leaves the most figures.
mesh_job() {
    local rows=$1 parry=$2 grid=$3 repeats=${4:-3}
    job "meshes-$rows" env CLOSEST_BENCH_POINTS="$rows" CLOSEST_BENCH_PARRY="$parry" \
        CLOSEST_BENCH_GRID="$grid" CLOSEST_BENCH_MESHES="$mesh_list" \
        CLOSEST_BENCH_REPEATS="$repeats" "$bin_dir/meshes"
}
grid_jobs() {
    local res=$1 signs=${2:-pseudonormal winding} sign
    for sign in $signs; do
        job "sdf-igea-$res-$sign" timed_wall "$bin_dir/closest" sdf "$meshes/igea.ply" \
            --res "$res" --sign "$sign" --out "$work/grid.npz"
        rm -f "$work/grid.npz"
    done
}
# parry3d and the 128³ grids beside it with the first size only: the larger one is the
# GPU's rate alone.
mesh_job "${mesh_rows[0]}" 1 "${grids[0]}"
grid_jobs "${grids[0]}"
job serve "$bin_dir/serve_load" --server "$bin_dir/closest" --mesh "$meshes/stanford-bunny.obj" \
    --clients 64 --rows 1000 --requests "$($smoke && echo 64 || echo 640)"
if [ "$serve_rows" != 1000 ]; then
    job serve-large "$bin_dir/serve_load" --server "$bin_dir/closest" \
        --mesh "$meshes/stanford-bunny.obj" --clients 64 --rows 100000 --requests "$serve_requests_large"
fi
# p99 of 16 clients alone and beside 500 half-open connections (issue 42's goal: within 1.5×).
job serve-idle "$bin_dir/serve_load" --server "$bin_dir/closest" --mesh "$meshes/stanford-bunny.obj" \
    --clients 16 --rows 1000 --requests "$($smoke && echo 64 || echo 1600)" --idle 500
for rows in "${mesh_rows[@]:1}"; do
    mesh_job "$rows" 0 0 "$mesh_large_repeats"
done
for res in "${grids[@]:1}"; do
    grid_jobs "$res" "$grid_large_signs"
done
# The package as `source scripts/python_env.sh` installs it, else whatever python3 imports.
python=""
for candidate in "${PYTHON:-}" target/py-venv/bin/python target/py-test/bin/python python3; do
    if [ -n "$candidate" ] && "$candidate" -c 'import closest, numpy' 2>/dev/null; then
        python=$candidate
        break
    fi
done
if [ -n "$python" ]; then
    job python "$python" scripts/bench/python_rate.py "$meshes/stanford-bunny.obj" "$python_rows"
else
    echo "## python: skipped (no 'closest' package importable here: source scripts/python_env.sh)" | tee -a "$log"
fi

else
    # Each job's output is the text under its "## name" heading.
    awk -v dir="$work" '/^## / { name = $2; sub(/:$/, "", name); next } name { print > (dir "/" name ".out") }' "$table_from"
fi

# The table, from the jobs' outputs.
adapter=$(sed -n 's/^chosen: //p' "$work/info.out" 2>/dev/null || true)
driver=$(grep -F -m1 "${adapter%% (*}" "$work/info.out" 2>/dev/null | awk -F'|' '{print $4}' | sed 's/^ *driver *//' || true)
{
    echo "Adapter: $adapter; driver: ${driver:-unknown}; commit $commit; $(date -u +%F); $(nproc) CPU threads$($quick && echo "; --quick")"
    echo
    echo "| job | rows | figure |"
    echo "|---|---:|---|"
    awk -v rows="$primitive_rows" '
        /^memcpy/ { ms = $(NF-1) }
        $1 ~ /^(sphere|aabb|box|plane|segment|line|ray|triangle|capsule|cylinder|cone|wedge|corner_wedge|ellipsoid|torus|convex_hull|part)$/ {
            if (!n || $2 < alo) alo = $2; if (!n || $2 > ahi) ahi = $2
            if (!n || $3 < dlo) dlo = $3; if (!n || $3 > dhi) dhi = $3
            n++ }
        /^mixed/ { mixed = $3 " (all fields), " $4 " (distance)" }
        END {
            if (!n) exit
            printf "| one-shape primitives, all fields (M/s, %d kinds) | %d | %s–%s |\n", n, rows, alo, ahi
            printf "| one-shape primitives, distance only (M/s) | %d | %s–%s, i.e. %.1f–%.1f GB/s at 16 B a row |\n", rows, dlo, dhi, dlo * 0.016, dhi * 0.016
            if (ms) printf "| host memcpy, 44 B a row (GB/s, read + write) | %d | %.1f |\n", rows, rows * 88 / ms / 1e6
            if (mixed) printf "| all kinds in one scene (M/s) | %d | %s |\n", rows, mixed
        }' "$work/primitives.out" 2>/dev/null || true
    awk -v rows="$scene_rows" '$1 ~ /^[0-9]+$/ && NF >= 3 {
        printf "| scene of %d shapes, BVH, default order (M/s) | %d | %s (other order %s) |\n", $1, rows, $2, $3 }' \
        "$work/scenes.out" 2>/dev/null || true
    for f in "$work"/meshes-*.out; do
        [ -f "$f" ] || continue
        rows=${f##*/meshes-}; rows=${rows%.out}
        # A mesh's row, then its timing line: the device's own time, where the adapter has
        # timestamp queries, goes in the row.
        awk -v rows="$rows" '
            function flush() { if (row) printf "%s%s |\n", row, device; row = ""; device = "" }
            /grid of/ { flush(); grid = $2; sub(/³/, "", grid) }
            $2 ~ /^[0-9]+$/ && NF == 8 {
                flush()
                what = grid ? grid "³ grid" : "uniform points"
                parry = ($6 == "–") ? "" : sprintf("; signed %s× parry3d, distance %s×", $7, $8)
                row = sprintf("| mesh %s (%s tris), %s: unsigned / signed / signed distance only (M/s) | %s | %s / %s / %s%s", $1, $2, what, grid ? grid * grid * grid : rows, $3, $4, $5, parry) }
            row && match($0, /device [0-9.]+ ms/) {
                device = "; signed distance only, device time " substr($0, RSTART + 7, RLENGTH - 7) " (timestamps)" }
            END { flush() }' "$f"
    done
    for f in "$work"/sdf-*.out; do
        [ -f "$f" ] || continue
        name=${f##*/sdf-}; name=${name%.out}
        wall=$(sed -n 's/^wall //p' "$f")
        device=$(grep -o 'device [0-9.]* ms' "$f" | head -1 | sed 's/^device //')
        echo "| \`closest sdf\` $name, whole job (wall) | | ${wall:-failed}${device:+; device time $device (timestamps)} |"
    done
    cat "$work/serve.out" "$work/serve-large.out" "$work/serve-idle.out" 2>/dev/null | awk '$1 ~ /^[0-9]+$/ && NF == 9 {
        printf "| service, %s clients × %s-point requests, %s half-open beside: rows/s, p50/p99 ms, served/in-process | %s | %s, %s/%s, %s× |\n", $2, $1, $3, $1 * $4, $5, $6, $7, $9 }' || true
    awk '/^python/ { printf "| Python `mesh.query`, distance only (M/s) | %s | %s |\n", $2, $3 }' \
        "$work/python.out" 2>/dev/null || true
    if [ ${#failed[@]} -gt 0 ]; then
        echo
        echo "FAILED (no figure posted): ${failed[*]}"
    fi
} | tee "$table"
echo "report: $table (raw output: $log)"
[ ${#failed[@]} -eq 0 ]
