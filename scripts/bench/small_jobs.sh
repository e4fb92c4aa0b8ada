#!/usr/bin/env bash
# Wall time of small CLI jobs (1,000 rows: the fixed cost of adapter, pipeline build and
# output) for one or more `closest` binaries, alternated, ROUNDS rounds (default 3), medians.
#   bash scripts/bench/small_jobs.sh BINARY [BINARY ...]
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: $0 BINARY [BINARY ...]" >&2; exit 2; }
here=$(cd "$(dirname "$0")/../.." && pwd)
meshes=$here/../shared/data/meshes
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 - "$work" <<'PY'
import struct, random, sys
random.seed(3)
def npy(path, shape, values):
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': %s, }" % (shape,)
    header += " " * (63 - (len(header) + 10) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode())
        f.write(struct.pack("<%df" % len(values), *values))
u = lambda n, lo, hi: [random.uniform(lo, hi) for _ in range(n)]
npy(sys.argv[1] + "/points.npy", (1000, 3), u(3000, -3, 3))
npy(sys.argv[1] + "/balls.npy", (1000, 4), [v for i in range(1000) for v in u(3, -5, 5) + u(1, 0.1, 1)])
npy(sys.argv[1] + "/a.npy", (1000, 2, 3), u(6000, -5, 5))
npy(sys.argv[1] + "/b.npy", (1000, 2, 3), u(6000, -5, 5))
PY
echo '{"shapes":[{"type":"sphere","center":[0,0,0],"radius":1.5}]}' > "$work/sphere.json"
scene=$here/examples/scene.json
jobs=(
  "sphere|query --shapes $work/sphere.json --points $work/points.npy"
  "scene of 13|query --shapes $scene --points $work/points.npy"
  "scene of 13, portable|--portable-kernels query --shapes $scene --points $work/points.npy"
  "contacts|contacts --shapes $scene --spheres $work/balls.npy"
  "segments|segments --a $work/a.npy --b $work/b.npy"
  "fandisk, pseudonormal|query --mesh $meshes/fandisk.obj --points $work/points.npy --sign pseudonormal"
)
rounds=${ROUNDS:-3}
declare -A times
for ((r = 0; r < rounds; r++)); do
  for job in "${jobs[@]}"; do
    for bin in "$@"; do
      start=$(date +%s.%N)
      # shellcheck disable=SC2086
      "$bin" ${job#*|} --out "$work/out.npz" > /dev/null 2>&1
      times["${job%%|*}|$bin"]+="$(echo "$(date +%s.%N) - $start" | bc) "
    done
  done
done
printf '%-24s' job; for bin in "$@"; do printf ' %12s' "$(basename "$bin")"; done; echo
for job in "${jobs[@]}"; do
  printf '%-24s' "${job%%|*}"
  for bin in "$@"; do
    median=$(echo "${times["${job%%|*}|$bin"]}" | tr ' ' '\n' | grep . | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
    printf ' %11.3fs' "$median"
  done
  echo
done
