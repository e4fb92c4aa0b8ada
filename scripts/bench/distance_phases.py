#!/usr/bin/env python3
"""Where `closest.mesh_distance` spends its time (issue 46): loading each mesh (parse, hierarchy,
upload) and the queries, the bunny against its point-cloud-utils decimation, three rounds.

    PYTHONPATH=<the closest package> python scripts/bench/distance_phases.py
"""
import time, closest, numpy as np, sys
B = str(__import__("pathlib").Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "meshes" / "stanford-bunny.obj")
e = closest.Engine()
import point_cloud_utils as pcu, trimesh
m = trimesh.load(B, force="mesh", process=False)
v2, f2, _, _ = pcu.decimate_triangle_mesh(np.asarray(m.vertices), np.asarray(m.faces, np.int32), len(m.faces)//10)
trimesh.Trimesh(v2, f2, process=False).export(str(__import__("tempfile").gettempdir() + "/bunny_decimated.obj"))
for r in range(3):
    t0 = time.perf_counter(); a = e.mesh(B); t1 = time.perf_counter(); b = e.mesh(str(__import__("tempfile").gettempdir() + "/bunny_decimated.obj")); t2 = time.perf_counter()
    d = a.distance_to(b, samples=100000); t3 = time.perf_counter()
    d = a.distance_to(b, samples=0); t4 = time.perf_counter()
    print(f"load A {t1-t0:.3f} load B {t2-t1:.3f} distance 1e5 {t3-t2:.3f} vertices only {t4-t3:.3f}")
