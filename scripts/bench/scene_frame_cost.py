#!/usr/bin/env python3
"""The cost of a scene's own frame (docs/guide/shapes.md): 2,000 spheres and boxes in a
100-unit cube and 10^6 points about them, at the origin and moved 10^6 away (where the scene is
answered in its frame), float32 and float64 points, distance only and every field; median of 5
whole `scene.query` calls.

    PYTHONPATH=<the closest package> python scripts/bench/scene_frame_cost.py
"""
import time, numpy as np, closest
e = closest.Engine()
rng = np.random.default_rng(0)
n = 2000
centres = rng.uniform(-50, 50, (n, 3))
def scene_at(by):
    return [{"type": "sphere", "center": (c + by).tolist(), "radius": 0.5} if i % 2 else
            {"type": "box", "center": (c + by).tolist(), "half_extents": [0.4, 0.3, 0.2], "rotation": [0, 0, 0, 1]}
            for i, c in enumerate(centres)]
pts = rng.uniform(-55, 55, (10**6, 3))
for name, by in [("origin", np.zeros(3)), ("1e6", np.array([1e6, 2e6, -1e6]))]:
    s = e.scene(scene_at(by))
    for dtype in (np.float32, np.float64):
        p = (pts + by).astype(dtype)
        ts = []
        for _ in range(5):
            t = time.perf_counter(); s.query(p, fields="distance"); ts.append(time.perf_counter() - t)
        ts2 = []
        for _ in range(5):
            t = time.perf_counter(); s.query(p); ts2.append(time.perf_counter() - t)
        print(name, np.dtype(dtype).name, "distance %.3f s, all fields %.3f s" % (np.median(ts), np.median(ts2)))
