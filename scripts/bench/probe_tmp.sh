M="$KIT/meshes"; L="$M/fandisk.obj,$M/stanford-bunny.obj,$M/igea.ply"
CLOSEST_BENCH_CHUNK_ROWS=1048576 CLOSEST_BENCH_POINTS=10000000 CLOSEST_BENCH_PARRY=0 CLOSEST_BENCH_GRID=0 CLOSEST_BENCH_MESHES="$L" $KIT/bin/meshes
CLOSEST_COMMIT="$(head -1 "$KIT/COMMIT")" bash scripts/bench/report.sh --prebuilt "$KIT/bin" --meshes "$KIT/meshes" --out "$OUT/report"
