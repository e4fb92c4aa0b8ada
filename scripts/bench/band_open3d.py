#!/usr/bin/env python3
"""Narrow-band grids against Open3D (issue 45): for each shared mesh, the whole
`closest sdf M --res 512 --band 3 --sparse s.npz` job (sign auto), and Open3D's signed distance
(`RaycastingScene.compute_signed_distance`, its scene built from the same file) at exactly the
band's samples that job wrote. Open3D is timed as a user meets it: reading the mesh, building
its scene and querying; its distances are cross-checked against closest's (|distance| within
1e-4 of the mesh's size, and how many signs agree).

    python scripts/bench/band_open3d.py [RES] [BAND]      (default 512 3; ROUNDS, default 1)
"""
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import open3d as o3d

sys.path.insert(0, str(Path(__file__).resolve().parent))
from peers_mesh import load_mesh, timed  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
MESHES = ROOT / ".." / "shared" / "data" / "meshes"
CLI = os.environ.get("CLOSEST_CLI", str(ROOT / "target" / "release" / "closest"))
ROUNDS = int(os.environ.get("ROUNDS", "1"))
RES = int(sys.argv[1]) if len(sys.argv) > 1 else 512
BAND = sys.argv[2] if len(sys.argv) > 2 else "3"


def main():
    work = Path(tempfile.mkdtemp())
    print(f"| mesh | closest band job (s) | band samples | Open3D at them (s) | Open3D / closest | "
          f"max abs difference | signs agreeing |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name in ["fandisk.obj", "stanford-bunny.obj", "igea.ply"]:
        mesh_path = MESHES / name
        sparse = work / "s.npz"

        def ours():
            done = subprocess.run(
                [CLI, "sdf", mesh_path, "--res", str(RES), "--band", BAND, "--sparse", sparse],
                check=True, capture_output=True, text=True)
            return done.stderr

        t_ours, log = timed(ours, ROUNDS)
        print(f"closest {name}: {t_ours:.2f} s", file=sys.stderr)
        band = np.load(sparse)
        points = (band["origin"] + band["index"] * band["spacing"]).astype(np.float32)
        values = band["sdf"]

        def open3d():
            # igea.ply is triangle strips, which Open3D's reader skips: decoded by hand there.
            vertices, triangles = load_mesh(mesh_path)
            scene = o3d.t.geometry.RaycastingScene()
            scene.add_triangles(o3d.core.Tensor(vertices.astype(np.float32)),
                                o3d.core.Tensor(triangles.astype(np.uint32)))
            return scene.compute_signed_distance(o3d.core.Tensor(points)).numpy()

        t_o3d, theirs = timed(open3d, ROUNDS)
        vertices, _ = load_mesh(mesh_path)
        size = np.linalg.norm(vertices.max(0) - vertices.min(0))
        difference = np.abs(np.abs(theirs) - np.abs(values)).max()
        agree = np.mean(np.sign(theirs) == np.sign(values)) * 100
        assert difference <= 1e-4 * size, f"{name}: |distance| differs by {difference}"
        signs = log.split("signs: ")[1].split(";")[0].split(" (")[0] if "signs: " in log else "?"
        print(f"| {name} ({signs}) | {t_ours:.2f} | {len(values):,} | {t_o3d:.2f} | "
              f"{t_o3d / t_ours:.2f}× | {difference:.2e} | {agree:.3f} % |")


if __name__ == "__main__":
    main()
