#!/usr/bin/env bash
# Packs Linux `perf` with the libraries it links (but the C and C++ runtimes, which the GPU
# machine has) into target/perfkit.tar.xz, for host profiles on the device tool's machines,
# which have no `perf` (docs/perf-history.md "The service's host side on an H200"). Carry it
# beside a kit from gpu_kit.sh (both under the tool's 64 MiB with the tree: a kit of only the
# executables a profile runs, e.g. `tar -C target -czf target/gpukit.tar.gz gpukit/bin/closest
# gpukit/bin/serve_load gpukit/lib gpukit/meshes/stanford-bunny.obj gpukit/COMMIT`) and run
# scripts/bench/gpu_profile_serve.sh there. The kit's executables are stripped: bring perf.data
# back and read it here after `perf buildid-cache --add target/report/bin/closest` (the same
# build, its symbols kept).
set -euo pipefail
cd "$(dirname "$0")/../.."
perf=$(command -v perf) || { echo "perf_kit.sh: no perf: apt-get install -y linux-perf" >&2; exit 3; }
kit=target/perfkit
rm -rf "$kit" "$kit.tar.xz"
mkdir -p "$kit/lib"
cp -L "$perf" "$kit/perf"
for lib in $(ldd "$perf" | awk '/=>/ {print $3}'); do
    case $(basename "$lib") in
        libc.so* | libm.so* | libstdc++* | libgcc_s* | ld-linux*) ;;
        *) cp -L "$lib" "$kit/lib/" ;;
    esac
done
tar -C target -cJf "$kit.tar.xz" perfkit
ls -la "$kit.tar.xz"
