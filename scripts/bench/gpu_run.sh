#!/usr/bin/env bash
# report.sh on a GPU machine from target/gpukit.tar.gz (scripts/bench/gpu_kit.sh): unpacks it,
# points the Vulkan loader it carries at the NVIDIA driver's ICD where the machine has no
# manifest of its own (its GLX ICD does not load in a container; the EGL library does), and
# runs the report with the kit's executables. Arguments go to report.sh; or
# `gpu_run.sh --exec CMD ARGS...` runs CMD in the same environment, with $KIT the kit's folder
# (its executables in $KIT/bin, meshes in $KIT/meshes).
set -euo pipefail
cd "$(dirname "$0")/../.."
tar -C target -xzf target/gpukit.tar.gz
kit=$PWD/target/gpukit
export LD_LIBRARY_PATH="$kit/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
if [ -z "${VK_ICD_FILENAMES:-}" ]; then
    nvidia=$(ls /usr/local/nvidia/lib64/libEGL_nvidia.so.0 /usr/lib/x86_64-linux-gnu/libEGL_nvidia.so.0 \
        /usr/lib64/libEGL_nvidia.so.0 2>/dev/null | head -1 || true)
    if [ -n "$nvidia" ]; then
        printf '{"file_format_version": "1.0.0", "ICD": {"library_path": "%s", "api_version": "1.3.0"}}\n' \
            "$nvidia" >"$kit/nvidia_icd.json"
        export VK_ICD_FILENAMES="$kit/nvidia_icd.json"
    fi
fi
export KIT="$kit"
export PYTHONPATH="$kit/python${PYTHONPATH:+:$PYTHONPATH}"
if [ "${1:-}" = --exec ]; then
    shift
    exec "$@"
fi
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || true
CLOSEST_COMMIT="$(head -1 "$kit/COMMIT")" bash scripts/bench/report.sh --prebuilt "$kit/bin" \
    --meshes "$kit/meshes" "$@"
