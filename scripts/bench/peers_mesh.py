#!/usr/bin/env python3
"""Mesh peers on this machine, same points, same session: 1,000,000 points uniform over each
shared mesh's box padded by 0.1 of its largest extent, through

- `closest query --mesh M --points P.npy --sign pseudonormal` (the CLI job's own time from its
  summary line: mesh upload, BVH build, pipeline build, queries, signs and the .npz write),
- Open3D's RaycastingScene: compute_distance (unsigned) and compute_signed_distance,
- NVIDIA Warp on the CPU: mesh_query_point_sign_normal in a kernel,

and checks that every peer's unsigned distance agrees with ours within 1e-4 of the mesh size.

With `--grid N` the points are instead an N³ SDF grid over the same padded box (corners
inclusive, C order), and closest runs as `closest sdf M --res N --out G.npz`.

Usage: python3 scripts/bench/peers_mesh.py [POINTS | --grid N]
       (needs: pip install numpy open3d warp-lang; Open3D needs Debian's libusb-1.0-0)
"""
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
MESHES = ROOT.parent / "shared" / "data" / "meshes"
CLOSEST = ROOT / "target" / "release" / "closest"


def timed(call, rounds):
    """The median time of `rounds` calls of `call`, and the last call's result."""
    import statistics

    times, result = [], None
    for _ in range(rounds):
        start = time.perf_counter()
        result = call()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def load_mesh(path):
    """Vertices (n, 3) float64 and triangles (m, 3) int32; igea.ply's strips decoded by hand."""
    if path.suffix == ".ply":
        data = path.read_bytes()
        end = data.index(b"end_header\n") + len(b"end_header\n")
        header = data[:end].decode()
        nv = int(re.search(r"element vertex (\d+)", header).group(1))
        verts = np.frombuffer(data, dtype="<f4", count=nv * 3, offset=end).reshape(nv, 3)
        at = end + nv * 12
        count = np.frombuffer(data, dtype="<i4", count=1, offset=at)[0]
        strips = np.frombuffer(data, dtype="<i4", count=count, offset=at + 4)
        tris = []
        for strip in np.split(strips, np.where(strips < 0)[0]):
            s = strip[strip >= 0]
            for k in range(len(s) - 2):
                a, b = (s[k], s[k + 1]) if k % 2 == 0 else (s[k + 1], s[k])
                tris.append((a, b, s[k + 2]))
        return verts.astype(np.float64), np.array(tris, dtype=np.int32)
    import open3d as o3d

    mesh = o3d.io.read_triangle_mesh(str(path))
    return np.asarray(mesh.vertices), np.asarray(mesh.triangles, dtype=np.int32)


def job_seconds(summary, what):
    """The job's own time: its queries or samples and the mesh's build (the summary line
    reports the build apart since issue 14; the file's load is left out, as before)."""
    seconds = float(re.search(what + r" in ([0-9.]+) s", summary).group(1))
    return seconds + float(re.search(r"build ([0-9.]+) s", summary).group(1))


def closest_job(mesh_path, points_path, out):
    run = subprocess.run(
        [str(CLOSEST), "query", "--mesh", str(mesh_path), "--points", str(points_path),
         "--sign", "pseudonormal", "--out", str(out)],
        capture_output=True, text=True, check=True,
    )
    return job_seconds(run.stderr, "queries"), np.load(out)["distance"]


def closest_sdf(mesh_path, res, out):
    run = subprocess.run(
        [str(CLOSEST), "sdf", str(mesh_path), "--res", str(res), "--out", str(out)],
        capture_output=True, text=True, check=True,
    )
    return job_seconds(run.stderr, "samples"), np.load(out)["sdf"].reshape(-1)


def grid_points(lo, hi, pad, res):
    """The sample positions of `closest sdf --res res` (default pad 0.1), C order."""
    lo, hi = lo - pad, hi + pad
    axes = [np.linspace(lo[k], hi[k], res) for k in range(3)]
    return np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1).reshape(-1, 3)


def open3d_peer(verts, tris, points):
    import open3d as o3d

    started = time.perf_counter()
    scene = o3d.t.geometry.RaycastingScene()
    scene.add_triangles(o3d.core.Tensor(verts.astype(np.float32)), o3d.core.Tensor(tris.astype(np.uint32)))
    query = o3d.core.Tensor(points.astype(np.float32))
    unsigned = scene.compute_distance(query).numpy()
    t_unsigned = time.perf_counter() - started
    started = time.perf_counter()
    scene.compute_signed_distance(query).numpy()
    t_signed = time.perf_counter() - started
    return t_unsigned, t_signed, unsigned


def warp_peer(verts, tris, points):
    import warp as wp

    wp.config.quiet = True
    wp.init()

    @wp.kernel
    def distances(mesh: wp.uint64, points: wp.array(dtype=wp.vec3), out: wp.array(dtype=float)):
        i = wp.tid()
        p = points[i]
        q = wp.mesh_query_point_sign_normal(mesh, p, 1.0e6)
        if q.result:
            c = wp.mesh_eval_position(mesh, q.face, q.u, q.v)
            out[i] = q.sign * wp.length(p - c)

    started = time.perf_counter()
    mesh = wp.Mesh(points=wp.array(verts.astype(np.float32), dtype=wp.vec3, device="cpu"),
                   indices=wp.array(tris.flatten(), dtype=int, device="cpu"))
    pts = wp.array(points.astype(np.float32), dtype=wp.vec3, device="cpu")
    out = wp.zeros(len(points), dtype=float, device="cpu")
    # Compile outside the timing.
    wp.launch(distances, dim=1, inputs=[mesh.id, pts, out], device="cpu")
    wp.synchronize()
    started = time.perf_counter()
    wp.launch(distances, dim=len(points), inputs=[mesh.id, pts, out], device="cpu")
    wp.synchronize()
    return time.perf_counter() - started, out.numpy()


def main():
    grid = len(sys.argv) > 2 and sys.argv[1] == "--grid"
    res = int(sys.argv[2]) if grid else 0
    n = res ** 3 if grid else (int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000)
    import open3d
    import warp

    what = f"a {res}³ grid" if grid else f"{n} random points"
    print(f"open3d {open3d.__version__}, warp {warp.__version__}, numpy {np.__version__}; {what}")
    print(f"{'mesh':>20} {'closest job s':>14} {'open3d unsigned s':>18} {'open3d signed s':>16} {'warp cpu signed s':>18}")
    rng = np.random.default_rng(1)
    with tempfile.TemporaryDirectory() as tmp:
        for name in ["fandisk.obj", "stanford-bunny.obj", "igea.ply"]:
            path = MESHES / name
            verts, tris = load_mesh(path)
            lo, hi = verts.min(0), verts.max(0)
            pad = (hi - lo).max() * 0.1
            if grid:
                points = grid_points(lo, hi, pad, res)
                ours_s, ours = closest_sdf(path, res, Path(tmp) / "grid.npz")
            else:
                points = rng.uniform(lo - pad, hi + pad, size=(n, 3))
                points_path = Path(tmp) / "points.npy"
                np.save(points_path, points)
                ours_s, ours = closest_job(path, points_path, Path(tmp) / "out.npz")
            o3d_u, o3d_s, o3d_d = open3d_peer(verts, tris, points)
            warp_s, warp_d = warp_peer(verts, tris, points)
            size = np.linalg.norm(hi - lo)
            for peer, d in [("open3d", o3d_d), ("warp", warp_d)]:
                bad = np.sum(np.abs(np.abs(d) - np.abs(ours)) > 1e-4 * size)
                assert bad == 0, f"{name}: {peer} disagrees with closest on {bad} distances"
            print(f"{name:>20} {ours_s:>14.2f} {o3d_u:>18.2f} {o3d_s:>16.2f} {warp_s:>18.2f}")


if __name__ == "__main__":
    main()
