#!/usr/bin/env bash
# Where a served request's time goes (issue 47's service goal): the engine call's latency by
# batch size from Python (one caller, then four at once), and `serve_load` at 64 clients with the
# server's access log kept, its queue wait and engine-call times summed up. On a GPU machine:
#   bash scripts/bench/gpu_run.sh --exec bash scripts/bench/serve_latency.sh
# here: KIT=target/gpukit bash scripts/bench/serve_latency.sh (after gpu_kit.sh). Output in $OUT
# (or target/profile).
set -uo pipefail
out=${OUT:-target/profile}
mkdir -p "$out"
mesh=$KIT/meshes/stanford-bunny.obj
[ "${ENGINE_CALLS:-1}" = 0 ] || "${PYTHON:-python3}" - "$mesh" "${SIZES:-1000,16000,65536,262144,1048576}" <<'PY'
import statistics, sys, threading, time
import numpy as np
import closest
engine = closest.Engine()
mesh = engine.mesh(sys.argv[1])
rng = np.random.default_rng(1)
points = rng.uniform(-0.1, 0.1, (1 << 20, 3)).astype(np.float32) + np.float32([-0.03, 0.1, 0.0])
mesh.query(points[:1000], sign="pseudonormal", fields="distance")
print("engine call, one caller: rows, median / p10 / p90 ms, M rows/s at the median")
for rows in map(int, sys.argv[2].split(",")):
    times = []
    deadline = time.perf_counter() + 5
    while len(times) < 30 and time.perf_counter() < deadline:
        start = time.perf_counter()
        mesh.query(points[:rows], sign="pseudonormal", fields="distance")
        times.append((time.perf_counter() - start) * 1e3)
    q = statistics.quantiles(times, n=10)
    med = statistics.median(times)
    print(f"{rows:>9} {med:8.3f} / {q[0]:.3f} / {q[-1]:.3f}  {rows / med / 1e3:9.2f}")
for callers, rows in ((4, 16000), (4, 65536), (16, 16000)):
    done = []
    def work():
        for _ in range(20):
            mesh.query(points[:rows], sign="pseudonormal", fields="distance")
        done.append(20)
    threads = [threading.Thread(target=work) for _ in range(callers)]
    start = time.perf_counter()
    for t in threads: t.start()
    for t in threads: t.join()
    seconds = time.perf_counter() - start
    calls = sum(done)
    print(f"{callers} callers × {rows} rows: {calls} calls in {seconds * 1e3:.1f} ms, "
          f"{seconds * 1e3 * callers / calls:.3f} ms a call each, {calls * rows / seconds / 1e6:.2f} M rows/s")
PY
# The server, its log on stderr kept beside serve_load's reading of it.
wrapper=$out/server.sh
# Server options to compare, `;` between sets (each an option list for `closest serve`).
IFS=';' read -ra option_sets <<<"${SERVER_OPTIONS:-;--batch-delay-ms 2}"
for options in "${option_sets[@]}"; do
  for rows in ${ROWS:-1000}; do
    args=()
    for word in $options; do args+=(--server-arg "$word"); done
    requests=$([ "$rows" -le 1000 ] && echo "${REQUESTS:-6400}" || echo "${LARGE_REQUESTS:-640}")
    for server in ${SERVERS:-$KIT/bin/closest}; do
    printf '#!/bin/bash\nexec "%s" "$@" 2> >(tee "%s" >&2)\n' "$server" "$out/server.log" >"$wrapper"
    chmod +x "$wrapper"
    echo "$(basename "$server"), server options [${options}], $rows-point requests:"
    "$KIT/bin/serve_load" --server "$wrapper" --mesh "$mesh" --clients 64 --rows "$rows" \
        --requests "$requests" "${args[@]}" 2>&1 | tail -1
    python3 - "$out/server.log" <<'PY'
import re, statistics, sys
fields = {"queue_wait_ms": [], "device_ms": [], "ms": []}
for line in open(sys.argv[1], errors="replace"):
    if "queue_wait_ms=" not in line:
        continue
    for name in fields:
        m = re.search(r"\b" + name + r"=([0-9.]+)", line)
        if m:
            fields[name].append(float(m.group(1)))
# A batch's requests share its engine call's time: distinct times count the batches.
batches = len(set(fields["device_ms"]))
if batches:
    print(f"  {len(fields['ms'])} requests in about {batches} batches, {len(fields['ms']) / batches:.1f} a batch")
for name, values in fields.items():
    if values:
        q = statistics.quantiles(values, n=10)
        print(f"  server {name:14} median {statistics.median(values):7.3f}  p10 {q[0]:7.3f}  p90 {q[-1]:7.3f}  ({len(values)} requests)")
PY
    done
  done
done
