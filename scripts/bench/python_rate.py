#!/usr/bin/env python3
"""The Python package's mesh query rate (report.sh): MESH (an .obj), ROWS points uniform over its box
padded by 0.1 of its largest extent (float32), signed by pseudonormal, distance only; median
of 3 calls after a warm-up. A sample of the answers is checked against a brute-force f64
distance first, so a wrong answer posts no figure. Prints `python ROWS M/s`.

    python3 scripts/bench/python_rate.py MESH ROWS
"""
import sys
import time

import numpy as np

import closest


def brute_force(vertices, triangles, p):
    """f64 distance from p to every triangle (Ericson's closest point on a triangle)."""
    a, b, c = (vertices[triangles[:, k]] for k in range(3))
    ab, ac, ap = b - a, c - a, p - a
    d1, d2 = (ab * ap).sum(1), (ac * ap).sum(1)
    bp, cp = p - b, p - c
    d3, d4 = (ab * bp).sum(1), (ac * bp).sum(1)
    d5, d6 = (ab * cp).sum(1), (ac * cp).sum(1)
    va, vb, vc = d3 * d6 - d5 * d4, d5 * d2 - d1 * d6, d1 * d4 - d3 * d2
    with np.errstate(divide="ignore", invalid="ignore"):
        denom = va + vb + vc
        v, w = vb / denom, vc / denom
        q = a + ab * v[:, None] + ac * w[:, None]
        cases = [
            (d1 <= 0) & (d2 <= 0), (d3 >= 0) & (d4 <= d3), (d6 >= 0) & (d5 <= d6),
            (vc <= 0) & (d1 >= 0) & (d3 <= 0), (vb <= 0) & (d2 >= 0) & (d6 <= 0),
            (va <= 0) & (d4 - d3 >= 0) & (d5 - d6 >= 0),
        ]
        e_ab = a + ab * np.clip(d1 / (d1 - d3), 0, 1)[:, None]
        e_ac = a + ac * np.clip(d2 / (d2 - d6), 0, 1)[:, None]
        bc = c - b
        e_bc = b + bc * np.clip((d4 - d3) / ((d4 - d3) + (d5 - d6)), 0, 1)[:, None]
        for mask, value in reversed(list(zip(cases, [a, b, c, e_ab, e_ac, e_bc]))):
            q = np.where(mask[:, None], value, q)
    return np.sqrt(((q - p) ** 2).sum(1)).min()


def read_obj(path):
    """Vertices and triangles of an OBJ file (v and f lines; polygons fanned), for the
    brute-force check: independent of the engine's own reader."""
    vertices, triangles = [], []
    for line in open(path):
        parts = line.split()
        if not parts:
            continue
        if parts[0] == "v":
            vertices.append([float(x) for x in parts[1:4]])
        elif parts[0] == "f":
            ids = [int(p.split("/")[0]) for p in parts[1:]]
            ids = [i - 1 if i > 0 else len(vertices) + i for i in ids]
            triangles.extend([ids[0], ids[k], ids[k + 1]] for k in range(1, len(ids) - 1))
    return np.array(vertices, np.float64), np.array(triangles, np.int64)


def main():
    path, rows = sys.argv[1], int(sys.argv[2])
    engine = closest.Engine()
    mesh = engine.mesh(path)
    vertices, triangles = read_obj(path)
    lo, hi = vertices.min(0), vertices.max(0)
    pad = (hi - lo).max() * 0.1
    points = np.random.default_rng(1).uniform(lo - pad, hi + pad, (rows, 3)).astype(np.float32)
    mesh.query(points[:1000], sign="pseudonormal", fields="distance")
    times = []
    for _ in range(3):
        started = time.perf_counter()
        distance = mesh.query(points, sign="pseudonormal", fields="distance")["distance"]
        times.append(time.perf_counter() - started)
    scale = max(np.abs(lo).max(), np.abs(hi).max(), np.abs(points).max())
    for row in range(0, rows, max(rows // 50, 1)):
        truth = brute_force(vertices, triangles, points[row].astype(np.float64))
        assert abs(abs(float(distance[row])) - truth) <= 1e-5 * scale, (row, distance[row], truth)
    print(f"python {rows} {rows / sorted(times)[1] / 1e6:.3f}")


if __name__ == "__main__":
    main()
