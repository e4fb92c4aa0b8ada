#!/usr/bin/env bash
# The jobs of issues 45 and 46 that report.sh leaves out, on a GPU machine from the kit
# (scripts/bench/gpu_kit.sh): dense 128³ against 512³ narrow-band grids and training samples of
# the shared meshes (whole `closest sdf` / `closest sample` jobs, wall time), the service's
# batching (serve_latency.sh), then the bodies bench against parry3d on the machine's cores
# (BODIES bodies, 10^6 by default; 0: none). Run after the report:
#   bash scripts/bench/gpu_run.sh --exec bash scripts/bench/gpu_extra.sh
set -uo pipefail
bin=$KIT/bin meshes=$KIT/meshes
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Runs one closest job, prints its wall time and the summary lines naming signs and band.
run() {
    local what=$1 start end status
    shift
    start=$(date +%s.%N)
    timeout 120 "$bin/closest" "$@" >/dev/null 2>"$work/err"
    status=$?
    end=$(date +%s.%N)
    printf '%-40s %6.2f s  exit %s  %s\n' "$what" "$(awk "BEGIN{print $end - $start}")" "$status" \
        "$(grep -o 'signs: [a-z]*\|band: [0-9]* of [0-9]* samples computed[^;]*' "$work/err" | tr '\n' ' ')"
    [ "$status" = 0 ] || tail -3 "$work/err"
}
for m in fandisk.obj stanford-bunny.obj igea.ply; do
    for round in 1 2; do
        run "$m dense 128³ #$round" sdf "$meshes/$m" --res 128 --out "$work/d.npz"
        run "$m band 512³ sparse #$round" sdf "$meshes/$m" --res 512 --band 3 --sparse "$work/s.npz"
        run "$m dense 512³ #$round" sdf "$meshes/$m" --res 512 --out "$work/d.npz"
        run "$m 10^6 samples #$round" sample "$meshes/$m" --near 950000 --uniform 50000 \
            --sigma 0.0025,0.00025 --out "$work/t.npz"
    done
done
# The service's batches: small engine calls alone and four at once, then 64 clients with the
# default batching and with a 2 ms delay for company, the access log summed
# (docs/perf-history.md "The service's host side on an H200").
echo "small engine calls (bunny):"
CALLERS=1,4 CALLS=40 timeout 60 "$bin/concurrent_calls" "$meshes/stanford-bunny.obj"
echo "the service's batching:"
ENGINE_CALLS=0 ROWS="1000 100000" OUT="$work" timeout 150 bash "$(dirname "$0")/serve_latency.sh"
[ "${BODIES:-1000000}" != 0 ] || exit 0
echo "bodies bench (10^6 bodies, parry3d on $(nproc) cores):"
CLOSEST_BENCH_BODIES=${BODIES:-1000000} CLOSEST_BENCH_REPEATS=3 \
    CLOSEST_BENCH_MESHES="$meshes/fandisk.obj,$meshes/stanford-bunny.obj" \
    timeout 240 "$bin/bodies" 2>&1 | tail -40
