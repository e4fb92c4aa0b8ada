#!/usr/bin/env python3
"""Time `mesh.sample` calls alone, no peer (for A/B of two packages, alternated by the caller):
each shared mesh loaded fresh, then `sample(near=237500, sigma=[0.0025, 0.00025],
uniform=12500, seed=r)` timed, median of ROUNDS (default 5). The bench's sample counts
(`peers_sample.py`), on the meshes as the files give them.

Usage: PYTHONPATH=<package> python3 scripts/bench/sample_calls.py [LABEL]
"""
import os
import sys
import time
from pathlib import Path

import numpy as np

import closest

MESHES = Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "meshes"
ROUNDS = int(os.environ.get("ROUNDS", "5"))

engine = closest.Engine()
medians = {}
for name in ["fandisk.obj", "stanford-bunny.obj", "igea.ply"]:
    engine.mesh(MESHES / name)  # the pipelines built once, outside the timing
    times = []
    for r in range(ROUNDS):
        mesh = engine.mesh(MESHES / name)
        start = time.perf_counter()
        mesh.sample(near=237500, sigma=[0.0025, 0.00025], uniform=12500, seed=r)
        times.append(time.perf_counter() - start)
    medians[name] = round(float(np.median(times)), 3)
print(sys.argv[1] if len(sys.argv) > 1 else "closest", medians)
