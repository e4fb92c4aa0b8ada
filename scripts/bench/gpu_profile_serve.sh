#!/usr/bin/env bash
# Where the service's host time goes on a GPU machine: `serve_load` at 64 clients (1,000- and
# 100,000-point requests, long enough for a profile) under `perf record` from
# target/perfkit.tar.xz (scripts/bench/perf_kit.sh); a flat profile by process and thread,
# and the server's by library and symbol, into $OUT (or target/profile) with the perf.data
# files (read them here for the stripped kit's symbols: perf_kit.sh says how). Where perf cannot
# open its events, each thread's CPU time read from /proc is all there is. Run as
#   bash scripts/bench/gpu_run.sh --exec bash scripts/bench/gpu_profile_serve.sh
set -uo pipefail
out=${OUT:-target/profile}
mkdir -p "$out"
tar -C target -xJf target/perfkit.tar.xz
pk=$PWD/target/perfkit
perf() { LD_LIBRARY_PATH="$pk/lib:${LD_LIBRARY_PATH:-}" "$pk/perf" "$@"; }
echo "perf_event_paranoid: $(cat /proc/sys/kernel/perf_event_paranoid 2>&1)"
perf --version
can_record=true
perf record -F 99 -o /tmp/probe.data -- sleep 0.1 >/tmp/probe.log 2>&1 || can_record=false
$can_record || { echo "perf record cannot run here:"; tail -5 /tmp/probe.log; }
# Each thread's CPU seconds (utime + stime) of the server and the load, sampled until killed.
thread_times() {
    exec python3 - "$@" <<'PY'
import os, signal, sys, time
seen = {}
def sample():
    for pid in os.listdir('/proc'):
        if not pid.isdigit():
            continue
        try:
            exe = os.path.basename(os.readlink(f'/proc/{pid}/exe'))
        except OSError:
            continue
        if exe not in ('closest', 'serve_load'):
            continue
        for tid in os.listdir(f'/proc/{pid}/task'):
            try:
                stat = open(f'/proc/{pid}/task/{tid}/stat').read()
            except OSError:
                continue
            comm = stat[stat.index('(') + 1:stat.rindex(')')]
            fields = stat[stat.rindex(')') + 2:].split()
            seen[(exe, pid, tid, comm)] = (int(fields[11]) + int(fields[12])) / os.sysconf('SC_CLK_TCK')
def report(*_):
    totals = {}
    for (exe, _, _, comm), cpu in seen.items():
        totals[(exe, comm)] = totals.get((exe, comm), 0) + cpu
    for (exe, comm), cpu in sorted(totals.items(), key=lambda kv: -kv[1]):
        print(f'{exe:12} {comm:24} {cpu:8.2f} s')
    sys.exit(0)
signal.signal(signal.SIGTERM, report)
while True:
    sample()
    time.sleep(0.2)
PY
}
for rows in 1000 100000; do
    requests=$([ "$rows" = 1000 ] && echo "${SMALL_REQUESTS:-64000}" || echo "${LARGE_REQUESTS:-1920}")
    load=("$KIT/bin/serve_load" --server "$KIT/bin/closest" --mesh "$KIT/meshes/stanford-bunny.obj"
        --clients 64 --rows "$rows" --requests "$requests")
    thread_times >"$out/threads-$rows.txt" &
    sampler=$!
    if $can_record; then
        perf record -F 499 -o "$out/perf-$rows.data" -- "${load[@]}" >"$out/load-$rows.log" 2>&1
        perf report -i "$out/perf-$rows.data" --no-children --sort pid,comm --stdio 2>/dev/null |
            grep -v '^#' | grep -v '^$' | head -40 >"$out/by-thread-$rows.txt"
        # The server's threads alone (the load's are named serve_load).
        server=closest,tokio-rt-worker
        perf report -i "$out/perf-$rows.data" --no-children --comms "$server" --sort dso --stdio \
            2>/dev/null | grep -v '^#' | grep -v '^$' | head -30 >"$out/server-by-library-$rows.txt"
        perf report -i "$out/perf-$rows.data" --no-children --comms "$server" --sort comm,dso,sym \
            --stdio 2>/dev/null | grep -v '^#' | grep -v '^$' | head -200 >"$out/server-by-symbol-$rows.txt"
    else
        "${load[@]}" >"$out/load-$rows.log" 2>&1
    fi
    kill -TERM "$sampler"
    wait "$sampler"
    echo "== $rows-point requests"
    tail -3 "$out/load-$rows.log"
    head -25 "$out/threads-$rows.txt"
    [ -f "$out/by-thread-$rows.txt" ] && head -25 "$out/by-thread-$rows.txt"
    [ -f "$out/server-by-library-$rows.txt" ] && head -15 "$out/server-by-library-$rows.txt"
done
