#!/usr/bin/env python3
"""Fixed cost of a large mesh, same machine, same run (issue 14): the time from the mesh file
to the first 1,000 signed answers, and the peak resident memory, of

- `closest query --mesh M --points P --sign pseudonormal` (its summary line's load, build and
  query times; peak RSS by GNU time),
- Open3D: read_triangle_mesh, RaycastingScene.add_triangles, compute_signed_distance (the
  scene builds on its first query; peak RSS of a child process).

Usage: python3 scripts/bench/mesh_fixed_cost.py MESH [POINTS]   (make MESH with make_torus_mesh.py;
       needs numpy and open3d in the venv of scripts/python_env.sh, GNU time, a release build)
"""
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
CLOSEST = ROOT / "target" / "release" / "closest"

OPEN3D = """
import sys, time, numpy as np, open3d as o3d
start = time.perf_counter()
mesh = o3d.io.read_triangle_mesh(sys.argv[1])
loaded = time.perf_counter()
scene = o3d.t.geometry.RaycastingScene()
scene.add_triangles(o3d.t.geometry.TriangleMesh.from_legacy(mesh))
points = o3d.core.Tensor(np.load(sys.argv[2]).astype(np.float32))
d = scene.compute_signed_distance(points).numpy()
done = time.perf_counter()
print(f"open3d load {loaded - start:.3f} s, build+queries {done - loaded:.3f} s, "
      f"total {done - start:.3f} s")
"""


def peak_rss_mib(log):
    return int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", log).group(1)) // 1024


def main():
    mesh = Path(sys.argv[1])
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
    with tempfile.TemporaryDirectory() as tmp:
        rng = np.random.default_rng(1)
        points = Path(tmp) / "points.npy"
        np.save(points, rng.uniform(-1.5, 1.5, size=(count, 3)))
        run = subprocess.run(
            ["/usr/bin/time", "-v", str(CLOSEST), "query", "--mesh", str(mesh), "--points",
             str(points), "--sign", "pseudonormal", "--out", str(Path(tmp) / "out.npz")],
            capture_output=True, text=True, check=True)
        line = re.search(r"^closest: .*$", run.stderr, re.M).group(0)
        query = float(re.search(r"queries in ([0-9.]+) s", line).group(1))
        load = float(re.search(r"mesh load ([0-9.]+) s", line).group(1))
        build = float(re.search(r"build ([0-9.]+) s", line).group(1))
        ours = load + build + query
        print(f"closest load {load:.3f} s, build {build:.3f} s, queries {query:.3f} s, "
              f"total {ours:.3f} s, peak RSS {peak_rss_mib(run.stderr)} MiB")
        run = subprocess.run(
            ["/usr/bin/time", "-v", sys.executable, "-c", OPEN3D, str(mesh), str(points)],
            capture_output=True, text=True, check=True)
        theirs = float(re.search(r"total ([0-9.]+) s", run.stdout).group(1))
        print(run.stdout.strip() + f", peak RSS {peak_rss_mib(run.stderr)} MiB")
        print(f"file {mesh.stat().st_size // 2**20} MiB; closest/open3d fixed cost "
              f"{ours / theirs:.2f}x")


main()
