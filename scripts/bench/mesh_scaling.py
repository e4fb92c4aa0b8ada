#!/usr/bin/env python3
"""How build time, memory and query rate grow with the triangle count (issue 14, item 4):
1,000,000 points uniform in [-1.5, 1.5]³ against tori of about 10^5, 10^6 and 10^7 triangles
(scripts/bench/make_torus_mesh.py, binary STL), through three tools in one run, each in its own
process (peak RSS by GNU time):

- `closest query --mesh M --points P --sign none --fields distance` (the summary line's load,
  build and query times),
- parry3d's TriMesh (`cargo run --release --example parry_mesh`: our loader, its build, the
  projections on all cores),
- Open3D's RaycastingScene (read_triangle_mesh; add_triangles plus one query, which builds its
  BVH; then compute_distance of all points).

The sums of the three tools' distances are compared (relative 1e-5), so all answered alike.
Prints a Markdown table for docs/PERF.md.

Usage: python3 scripts/bench/mesh_scaling.py [U×V ...]   (default 256x200 1024x512 2560x2048;
       needs numpy and open3d in the venv of scripts/python_env.sh, GNU time, release builds of
       the binary and of the parry_mesh example; meshes are made in target/big if missing)
"""
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
CLOSEST = ROOT / "target" / "release" / "closest"
PARRY = ROOT / "target" / "release" / "examples" / "parry_mesh"
BIG = ROOT / "target" / "big"

OPEN3D = """
import sys, time, numpy as np, open3d as o3d
start = time.perf_counter()
mesh = o3d.io.read_triangle_mesh(sys.argv[1])
loaded = time.perf_counter()
scene = o3d.t.geometry.RaycastingScene()
scene.add_triangles(o3d.t.geometry.TriangleMesh.from_legacy(mesh))
points = np.load(sys.argv[2]).astype(np.float32)
scene.compute_distance(o3d.core.Tensor(points[:1]))
built = time.perf_counter()
d = scene.compute_distance(o3d.core.Tensor(points)).numpy()
done = time.perf_counter()
print(f"open3d load {loaded - start:.3f} s, build {built - loaded:.3f} s, "
      f"queries {done - built:.3f} s, sum {d.astype(np.float64).sum():.6f}")
"""


def peak_rss_mib(log):
    return int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", log).group(1)) // 1024


def timed(command):
    run = subprocess.run(["/usr/bin/time", "-v", *command], capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit(f"{command[0]} failed:\n{run.stderr[-3000:]}")
    return run, peak_rss_mib(run.stderr)


def phases(line):
    return [float(re.search(rf"{name} ([0-9.]+) s", line).group(1))
            for name in ("load", "build", "queries")]


def main():
    sizes = sys.argv[1:] or ["256x200", "1024x512", "2560x2048"]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        points = Path(tmp) / "points.npy"
        np.save(points, np.random.default_rng(1).uniform(-1.5, 1.5, size=(1_000_000, 3)))
        count = 1_000_000
        for size in sizes:
            u, v = (int(x) for x in size.split("x"))
            mesh = BIG / f"torus_{u}x{v}.stl"
            if not mesh.exists():
                BIG.mkdir(parents=True, exist_ok=True)
                subprocess.run([sys.executable, str(ROOT / "scripts" / "make_torus_mesh.py"),
                                str(u), str(v), str(mesh)], check=True)
            triangles = 2 * u * v
            out = Path(tmp) / "out.npz"
            run, rss = timed([str(CLOSEST), "query", "--mesh", str(mesh), "--points", str(points),
                              "--sign", "none", "--fields", "distance", "--out", str(out)])
            line = re.search(r"^closest: .*$", run.stderr, re.M).group(0)
            query = float(re.search(r"queries in ([0-9.]+) s", line).group(1))
            load = float(re.search(r"mesh load ([0-9.]+) s", line).group(1))
            build = float(re.search(r"build ([0-9.]+) s", line).group(1))
            ours_sum = np.load(out)["distance"].astype(np.float64).sum()
            results = [("closest", load, build, query, rss, ours_sum)]
            run, rss = timed([str(PARRY), str(mesh), str(points)])
            results.append(("parry3d", *phases(run.stdout), rss,
                            float(re.search(r"sum ([0-9.e+-]+)", run.stdout).group(1))))
            run, rss = timed([sys.executable, "-c", OPEN3D, str(mesh), str(points)])
            results.append(("Open3D", *phases(run.stdout), rss,
                            float(re.search(r"sum ([0-9.e+-]+)", run.stdout).group(1))))
            for name, *_, total in results:
                if abs(total - ours_sum) > 1e-5 * abs(ours_sum):
                    sys.exit(f"{mesh.name}: {name}'s distances sum to {total}, ours to {ours_sum}")
            for name, load, build, query, rss, _ in results:
                rate = count / query / 1e6
                ratio = results[0][3] and query / results[0][3]
                rows.append(f"| {triangles:,} | {mesh.stat().st_size // 2**20} | {name} | "
                            f"{load:.2f} | {build:.2f} | {query:.2f} | {rate:.2f} | "
                            f"{ratio:.2f} | {rss} |")
                print(rows[-1], flush=True)
    print("\n| triangles | STL MiB | tool | load s | build s | 1M queries s | M queries/s | "
          "query time / closest's | peak RSS MiB |")
    print("|---|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))


main()
