#!/usr/bin/env bash
# Packs what report.sh needs on a GPU machine that has neither Rust nor a Vulkan loader (the
# device tool's machines, docs/perf-history.md "A hardware GPU"): the stripped release executables,
# Debian's libvulkan.so.1, the shared meshes and the 2M-triangle torus, and the Python package
# (release build; it runs where the GPU machine's python3 has numpy), into
# target/gpukit.tar.gz (under the device tool's 64 MiB carry). On the GPU machine:
# `bash scripts/bench/gpu_run.sh [--quick]`, then
# `bash scripts/bench/gpu_run.sh --exec bash scripts/bench/gpu_extra.sh`.
set -euo pipefail
cd "$(dirname "$0")/../.."
loader=/usr/lib/x86_64-linux-gnu/libvulkan.so.1
[ -e "$loader" ] || { echo "gpu_kit.sh: no $loader: apt-get install -y libvulkan1" >&2; exit 3; }
bash scripts/bench/report.sh --build-only
cargo build --release --locked -p closest-python
# The bodies bench for gpu_extra.sh, from cargo's own report of what it built.
bodies=$(cargo bench --locked --no-run --bench bodies --message-format=json 2>/dev/null |
    python3 -c 'import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "bodies" and m.get("executable"):
        print(m["executable"])')
# Small engine calls one at a time and several at once (gpu_extra.sh, the service's batches).
cargo build --release --locked --example concurrent_calls
torus=target/torus-2m.ply
[ -f "$torus" ] || "${PYTHON:-python3}" scripts/bench/make_torus_mesh.py 1024 1024 "$torus"
kit=target/gpukit
rm -rf "$kit" "$kit.tar.gz"
mkdir -p "$kit/bin" "$kit/lib" "$kit/meshes" "$kit/python"
cp -r python/closest "$kit/python/"
strip -o "$kit/python/closest/_closest.abi3.so" target/release/lib_closest.so
cp "$torus" "$kit/meshes/"
for b in closest meshes scenes serve_load; do
    strip -o "$kit/bin/$b" "target/report/bin/$b"
done
strip -o "$kit/bin/bodies" "$bodies"
strip -o "$kit/bin/concurrent_calls" target/release/examples/concurrent_calls
cp -L "$loader" "$kit/lib/libvulkan.so.1"
cp ../shared/data/meshes/{fandisk.obj,stanford-bunny.obj,igea.ply} "$kit/meshes/"
git rev-parse --short HEAD >"$kit/COMMIT"
[ -z "$(git status --porcelain --untracked-files=no)" ] || echo "+ (uncommitted changes)" >>"$kit/COMMIT"
tar -C target -czf "$kit.tar.gz" gpukit
ls -la "$kit.tar.gz"
