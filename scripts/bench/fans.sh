#!/usr/bin/env bash
# Slivers meeting at a point (docs/PERF.md, "Fans: slivers meeting at a point"): `closest sample`
# of generated fans, fan-capped cylinders and an open terrain, each with the wall time, peak
# memory and the summary's build and device times. Compare two binaries by running it with each
# (`CLOSEST=path/to/closest`), and `cmp` the outputs left in $OUT.
#
# Usage: CLOSEST=target/release/closest OUT=/tmp/fans bash scripts/bench/fans.sh [--large]
# --large adds the 200k fan and the cylinder of 800k triangles (minutes before the fix).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
CLOSEST="${CLOSEST:-$ROOT/target/release/closest}"
OUT="${OUT:-$(mktemp -d)}"
mkdir -p "$OUT"
[ -x "$CLOSEST" ] || { echo "no closest binary at $CLOSEST (cargo build --release, or set CLOSEST)" >&2; exit 2; }

python3 - "$OUT" "${1:-}" <<'PY'
import math, sys
out, large = sys.argv[1], sys.argv[2] == "--large"

def fan(n, path):
    with open(path, "w") as f:
        f.write("v 0 0 0\n")
        for k in range(n):
            a = 2 * math.pi * k / n
            f.write(f"v {math.cos(a):.9f} {math.sin(a):.9f} 0\n")
        for k in range(n):
            f.write(f"f 1 {2 + k} {2 + (k + 1) % n}\n")

def cylinder(n, path):
    with open(path, "w") as f:
        f.write("v 0 0 0\nv 0 0 1\n")
        for z in (0, 1):
            for k in range(n):
                a = 2 * math.pi * k / n
                f.write(f"v {math.cos(a):.9f} {math.sin(a):.9f} {z}\n")
        b = lambda k: 3 + k % n
        t = lambda k: 3 + n + k % n
        for k in range(n):
            f.write(f"f 1 {b(k + 1)} {b(k)}\nf 2 {t(k)} {t(k + 1)}\n")
            f.write(f"f {b(k)} {b(k + 1)} {t(k + 1)}\nf {b(k)} {t(k + 1)} {t(k)}\n")

def terrain(n, path):
    with open(path, "w") as f:
        for j in range(n + 1):
            for i in range(n + 1):
                x, y = i / n, j / n
                f.write(f"v {x:.7f} {y:.7f} {0.05 * math.sin(7 * x) * math.cos(5 * y):.7f}\n")
        w = n + 1
        for j in range(n):
            for i in range(n):
                a = 1 + j * w + i
                f.write(f"f {a} {a + 1} {a + w + 1}\nf {a} {a + w + 1} {a + w}\n")

fan(20000, f"{out}/fan20k.obj")
cylinder(20000, f"{out}/cylinder20k.obj")
terrain(500, f"{out}/terrain500.obj")
if large:
    fan(200000, f"{out}/fan200k.obj")
    cylinder(200000, f"{out}/cylinder200k.obj")
PY

SAMPLES=(--near 237500 --sigma 0.0025,0.00025 --uniform 12500 --seed 3)
run() {
  local name="$1" mesh="$2"; shift 2
  local summary
  summary=$(/usr/bin/time -f "wall %e s, peak %M KB" "$CLOSEST" sample "$OUT/$mesh" "${SAMPLES[@]}" "$@" \
    --out "$OUT/$name.npz" 2>&1 | grep -E "^closest: |^wall" | sed 's/ on .*(Vulkan[^)]*)//' | tr '\n' ' ')
  echo "$name: $summary"
}
run fan20k-pseudonormal fan20k.obj --sign pseudonormal
run cylinder20k cylinder20k.obj
run terrain500 terrain500.obj
run fan20k-auto fan20k.obj
if [ "${1:-}" = "--large" ]; then
  run fan200k-pseudonormal fan200k.obj --sign pseudonormal
  run cylinder200k cylinder200k.obj
fi
echo "outputs in $OUT"
