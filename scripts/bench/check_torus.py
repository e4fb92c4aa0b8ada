#!/usr/bin/env python3
"""Check a torus job's answers against the analytic torus (issue 14: a large mesh answered
correctly). The mesh from make_torus_mesh.py U V has its vertices on the torus (major R, minor
r, axis z), so its signed distance differs from the analytic one by at most the tessellation's
sag, R·(1 − cos(π/U)) + r·(1 − cos(π/V)), plus SPEC §3's f32 bound 1e-5·scale.

Usage: python3 scripts/bench/check_torus.py OUT.npz POINTS.npy U V [--major R] [--minor r]
Exits 1 naming the worst row if any row is farther off, or if a sign differs where |d|
exceeds the bound.
"""
import argparse
import sys

import numpy as np

parser = argparse.ArgumentParser()
parser.add_argument("out")
parser.add_argument("points")
parser.add_argument("u", type=int)
parser.add_argument("v", type=int)
parser.add_argument("--major", type=float, default=1.0)
parser.add_argument("--minor", type=float, default=0.3)
args = parser.parse_args()

p = np.load(args.points).astype(np.float64)
d = np.load(args.out)["distance"].astype(np.float64)
exact = np.hypot(np.hypot(p[:, 0], p[:, 1]) - args.major, p[:, 2]) - args.minor
sag = args.major * (1 - np.cos(np.pi / args.u)) + args.minor * (1 - np.cos(np.pi / args.v))
scale = np.maximum(np.abs(p).max(axis=1), args.major + args.minor)
bound = sag + 1e-5 * scale
signed = (d < 0).any()
off = np.abs((d if signed else np.abs(d)) - (exact if signed else np.abs(exact)))
worst = int(np.argmax(off - bound))
print(f"{len(d)} rows, {'signed' if signed else 'unsigned'}: largest deviation {off.max():.3g} "
      f"(bound {bound.min():.3g} to {bound.max():.3g}, sag {sag:.3g})")
if off[worst] > bound[worst]:
    sys.exit(f"row {worst}: d = {d[worst]}, analytic {exact[worst]}, off by {off[worst]:.3g}")
