#!/usr/bin/env python3
"""DeepSDF-style training samples (issue 45): 250,000 samples of each shared mesh, scaled to the
unit sphere as DeepSDF and mesh_to_sdf do (95 % near the surface with sigmas 0.0025 and 0.00025,
5 % uniform), from closest (`mesh.sample`) beside mesh_to_sdf's `sample_sdf_near_surface` (its
`sample` surface method, which needs no OpenGL) and point-cloud-utils' `signed_distance_to_mesh`
at points trimesh samples. Whole calls, median of ROUNDS (default 3), same process; each peer's
sdf is checked against closest's at the peer's own points (sign agreement and |difference|).

    PYTHONPATH=<the closest package> python scripts/bench/peers_sample.py [MESH ...]
"""
import os
import sys
from pathlib import Path

import numpy as np
import trimesh

import closest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from peers_mesh import load_mesh, timed  # noqa: E402  (igea's triangle strips, which trimesh skips)

N = 250_000
ROUNDS = int(os.environ.get("ROUNDS", "3"))
MESHES = Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "meshes"


def unit_sphere(path):
    path = Path(path)
    if path.suffix == ".ply":
        v, f = load_mesh(path)
    else:
        loaded = trimesh.load(path, force="mesh", process=False)
        v, f = loaded.vertices, loaded.faces
    v = np.asarray(v, dtype=np.float64)
    v = v - (v.min(0) + v.max(0)) / 2
    v /= np.linalg.norm(v, axis=1).max()
    return trimesh.Trimesh(v, np.asarray(f), process=False)


def main(paths):
    engine = closest.Engine()
    print(f"adapter: {engine.info['adapter']}; {N} samples a mesh; median of {ROUNDS}")
    print(f"{'mesh':>20} {'peer':>26} {'seconds':>9} {'peer / closest':>15} {'sign agreement':>15} {'median |Δ|':>11}")
    for path in paths:
        mesh = unit_sphere(path)
        v, f = mesh.vertices, np.asarray(mesh.faces, dtype=np.int64)
        near, uniform = N * 95 // 100, N * 5 // 100

        def ours():
            m = engine.mesh(vertices=v, triangles=f)
            return m, m.sample(near=near, sigma=[0.0025, 0.00025], uniform=uniform, pad=0.0)

        ours_time, (m, _) = timed(ours, ROUNDS)
        print(f"{Path(path).name:>20} {'closest':>26} {ours_time:9.3f}")

        def check(points, sdf):
            reference = m.query(np.asarray(points, dtype=np.float32), sign="auto",
                                fields="distance")["distance"]
            agree = np.mean(np.sign(reference) == np.sign(sdf))
            return agree, np.median(np.abs(np.abs(reference) - np.abs(sdf)))

        peers = {}
        try:
            import point_cloud_utils as pcu

            def pcu_samples():
                points, _ = trimesh.sample.sample_surface(mesh, near)
                points = points + np.random.default_rng(0).normal(size=points.shape) * np.repeat(
                    [0.0025, 0.00025], [near // 2, near - near // 2])[:, None]
                box = np.random.default_rng(1).uniform(-1, 1, (uniform, 3))
                points = np.concatenate([points, box])
                sdf, _, _ = pcu.signed_distance_to_mesh(points, v, f.astype(np.int32))
                return points, sdf

            peers["trimesh + point-cloud-utils"] = pcu_samples
        except ImportError as e:
            print(f"  point-cloud-utils: not installed ({e})")
        try:
            os.environ.setdefault("PYOPENGL_PLATFORM", "egl")
            import mesh_to_sdf

            def m2s():
                return mesh_to_sdf.sample_sdf_near_surface(
                    mesh, number_of_points=N, surface_point_method="sample", sign_method="normal")

            peers["mesh_to_sdf (sample, normal)"] = m2s
        except Exception as e:  # pyrender/OpenGL missing: said, not hidden
            print(f"  mesh_to_sdf: does not import here ({type(e).__name__}: {e})")
        for name, call in peers.items():
            try:
                seconds, (points, sdf) = timed(call, ROUNDS)
            except Exception as e:
                print(f"{Path(path).name:>20} {name:>26} failed: {type(e).__name__}: {e}")
                continue
            agree, delta = check(points, sdf)
            print(f"{Path(path).name:>20} {name:>26} {seconds:9.3f} {seconds / ours_time:15.1f}"
                  f" {agree:15.4f} {delta:11.2e}")


if __name__ == "__main__":
    main(sys.argv[1:] or [MESHES / m for m in ("fandisk.obj", "stanford-bunny.obj", "igea.ply")])
