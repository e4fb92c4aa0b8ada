#!/usr/bin/env python3
"""Mesh-to-mesh distance (issue 46): the bunny against a decimated bunny, each side's points
being its vertices plus SAMPLES area-weighted surface samples (closest's own, from
`mesh.sample(surface=…, seed=…)`, so every side measures the same points).

- closest: `closest.mesh_distance(a_path, b_path, samples=…)` from the files (load, BVH build,
  sampling, both directions), and the CLI `closest distance A B --samples … --out d.npz`.
- trimesh `proximity.closest_point(mesh, points)` both ways (exact, to the surface).
- point-cloud-utils `closest_points_on_mesh(points, v, f)` both ways (exact, to the surface), and
  its `hausdorff_distance` + `chamfer_distance` between the two point sets (point to point:
  an upper bound of the surface figures, as users call it).

Whole calls, median of ROUNDS (default 3), one process; the peers' figures are cross-checked
against closest's (the surface ones must agree within 1e-4 of the bunny's size).

    PYTHONPATH=<the closest package> python scripts/bench/peers_distance.py [SAMPLES]
"""
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import point_cloud_utils as pcu
import trimesh

import closest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from peers_mesh import timed  # noqa: E402

ROUNDS = int(os.environ.get("ROUNDS", "3"))
SAMPLES = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
ROOT = Path(__file__).resolve().parents[2]
BUNNY = ROOT / ".." / "shared" / "data" / "meshes" / "stanford-bunny.obj"
CLI = os.environ.get("CLOSEST_CLI", str(ROOT / "target" / "release" / "closest"))


def decimated(v, f, faces):
    """The bunny with `faces` faces by point-cloud-utils' quadric decimation."""
    v2, f2, _, _ = pcu.decimate_triangle_mesh(v, f, faces)
    return v2, f2


def figures(a_to_b, b_to_a):
    a, b = np.abs(a_to_b), np.abs(b_to_a)
    return {
        "hausdorff": max(a.max(), b.max()),
        "chamfer": a.mean() + b.mean(),
        "chamfer_squared": (a * a).mean() + (b * b).mean(),
    }


def main():
    bunny = trimesh.load(BUNNY, force="mesh", process=False)
    va, fa = np.asarray(bunny.vertices, np.float64), np.asarray(bunny.faces, np.int32)
    vb, fb = decimated(va, fa, len(fa) // 10)
    work = Path(tempfile.mkdtemp())
    b_path = work / "bunny_decimated.obj"
    trimesh.Trimesh(vb, fb, process=False).export(b_path)
    vb = np.asarray(trimesh.load(b_path, force="mesh", process=False).vertices, np.float64)

    engine = closest.Engine()
    print(f"adapter: {engine.info['adapter']}; A: bunny {len(va)} vertices, {len(fa)} faces; "
          f"B: decimated {len(vb)} vertices, {len(fb)} faces; {SAMPLES} samples a side")
    ma, mb = engine.mesh(str(BUNNY)), engine.mesh(str(b_path))
    pa = np.concatenate([va, ma.sample(surface=SAMPLES, seed=0)["points"].astype(np.float64)])
    pb = np.concatenate([vb, mb.sample(surface=SAMPLES, seed=0)["points"].astype(np.float64)])
    points = len(pa) + len(pb)

    rows = []
    t, ours = timed(lambda: closest.mesh_distance(str(BUNNY), b_path, samples=SAMPLES, engine=engine), ROUNDS)
    rows.append(("closest.mesh_distance (files)", t, ours))
    out = work / "d.npz"
    t, _ = timed(lambda: subprocess.run(
        [CLI, "distance", BUNNY, b_path, "--samples", str(SAMPLES), "--out", out],
        check=True, capture_output=True), ROUNDS)
    rows.append(("closest distance (CLI)", t, dict(np.load(out))))

    def trimesh_both():
        a, b = trimesh.load(BUNNY, force="mesh", process=False), trimesh.load(b_path, force="mesh", process=False)
        _, d_ab, _ = trimesh.proximity.closest_point(b, pa)
        _, d_ba, _ = trimesh.proximity.closest_point(a, pb)
        return figures(d_ab, d_ba)

    def pcu_surface():
        d_ab, _, _ = pcu.closest_points_on_mesh(pa, vb, fb)
        d_ba, _, _ = pcu.closest_points_on_mesh(pb, va, fa)
        return figures(d_ab, d_ba)

    def pcu_points():
        # pcu's Chamfer is the two directions' mean point-to-point distance, added.
        return {
            "hausdorff": pcu.hausdorff_distance(pa, pb),
            "chamfer": pcu.chamfer_distance(pa, pb),
        }

    for name, call in [("point-cloud-utils closest_points_on_mesh", pcu_surface),
                       ("point-cloud-utils hausdorff + chamfer (point to point)", pcu_points),
                       ("trimesh proximity.closest_point", trimesh_both)]:
        t, result = timed(call, ROUNDS)
        rows.append((name, t, result))

    size = np.linalg.norm(va.max(0) - va.min(0))
    fastest_peer = min(t for name, t, _ in rows[2:])
    print(f"| call | s | M points/s | Hausdorff | Chamfer (plain) | Chamfer (squared) | closest's speed-up |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, t, r in rows:
        ratio = f"{t / rows[0][1]:.2f}×" if name.startswith(("point", "trimesh")) else f"{fastest_peer / t:.2f}× the fastest peer"
        cell = lambda k: f"{float(r[k]):.6g}" if k in r else "–"
        print(f"| {name} | {t:.3f} | {points / t / 1e6:.3f} | {cell('hausdorff')} | {cell('chamfer')} | "
              f"{cell('chamfer_squared')} | {ratio} |")
    for name, _, r in rows[2:]:
        if "surface" in name or "trimesh" in name or "closest_points" in name:
            gap = abs(float(r["hausdorff"]) - ours["hausdorff"])
            assert gap <= 1e-4 * size, f"{name}: Hausdorff {r['hausdorff']} vs {ours['hausdorff']}"
            gap = abs(float(r["chamfer"]) - ours["chamfer"])
            assert gap <= 1e-4 * size, f"{name}: Chamfer {r['chamfer']} vs {ours['chamfer']}"
    print("cross-check: the surface peers' Hausdorff and Chamfer equal closest's within 1e-4 of the size")


if __name__ == "__main__":
    main()
