#!/usr/bin/env python3
"""A finely tessellated torus for large-mesh benchmarks and tests (issue 14): U segments around
the main axis, V around the tube, 2·U·V triangles wound outwards (a closed manifold), written
as binary STL (a triangle soup, as CAD exports are) or binary little-endian PLY (indexed).

    python3 scripts/bench/make_torus_mesh.py U V OUT.stl|OUT.ply [--major R] [--minor r]

1024 1024 gives 2,097,152 triangles (a 100 MB STL), 4096 2048 gives 16,777,216 (839 MB).
Written in slabs of rows, so memory stays at a few hundred MB however large the mesh.
"""
import argparse
import sys

import numpy as np


def quads(u0, u1):
    """Triangles (rows u0..u1) as vertex indices of the U×V grid, two per quad."""
    u = np.arange(u0, u1)[:, None]
    v = np.arange(args.v)[None, :]
    a = u * args.v + v
    b = ((u + 1) % args.u) * args.v + v
    c = ((u + 1) % args.u) * args.v + (v + 1) % args.v
    d = u * args.v + (v + 1) % args.v
    first = np.stack([a, b, c], axis=-1).reshape(-1, 3)
    second = np.stack([a, c, d], axis=-1).reshape(-1, 3)
    return np.stack([first, second], axis=1).reshape(-1, 3)


def vertices():
    u = np.arange(args.u)[:, None]
    theta = 2.0 * np.pi * u / args.u
    phi = 2.0 * np.pi * np.arange(args.v)[None, :] / args.v
    radius = args.major + args.minor * np.cos(phi)
    z = np.broadcast_to(args.minor * np.sin(phi), (args.u, args.v))
    xyz = np.stack([radius * np.cos(theta), radius * np.sin(theta), z], axis=-1)
    return xyz.reshape(-1, 3).astype(np.float32)


def write_stl(out):
    verts = vertices()
    count = 2 * args.u * args.v
    out.write(b"closest torus".ljust(80, b" "))
    out.write(np.uint32(count).tobytes())
    record = np.dtype([("normal", "<f4", 3), ("corners", "<f4", (3, 3)), ("attr", "<u2")])
    slab = max(1, 1_000_000 // (2 * args.v))
    for u0 in range(0, args.u, slab):
        tris = quads(u0, min(args.u, u0 + slab))
        corners = verts[tris]
        normal = np.cross(corners[:, 1] - corners[:, 0], corners[:, 2] - corners[:, 0])
        normal /= np.maximum(np.linalg.norm(normal, axis=1, keepdims=True), 1e-30)
        rows = np.zeros(len(tris), dtype=record)
        rows["normal"] = normal
        rows["corners"] = corners
        out.write(rows.tobytes())


def write_ply(out):
    verts = vertices()
    count = 2 * args.u * args.v
    out.write(
        (
            "ply\nformat binary_little_endian 1.0\ncomment closest torus\n"
            f"element vertex {len(verts)}\nproperty float x\nproperty float y\nproperty float z\n"
            f"element face {count}\nproperty list uchar int vertex_indices\nend_header\n"
        ).encode()
    )
    out.write(verts.astype("<f4").tobytes())
    record = np.dtype([("n", "u1"), ("k", "<i4", 3)])
    slab = max(1, 1_000_000 // (2 * args.v))
    for u0 in range(0, args.u, slab):
        tris = quads(u0, min(args.u, u0 + slab))
        rows = np.zeros(len(tris), dtype=record)
        rows["n"] = 3
        rows["k"] = tris
        out.write(rows.tobytes())


parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("u", type=int, help="segments around the main axis")
parser.add_argument("v", type=int, help="segments around the tube")
parser.add_argument("out", help="output .stl or .ply")
parser.add_argument("--major", type=float, default=1.0)
parser.add_argument("--minor", type=float, default=0.3)
args = parser.parse_args()
if args.u < 3 or args.v < 3:
    sys.exit("make_torus_mesh.py: U and V must be at least 3")
with open(args.out, "wb") as out:
    if args.out.endswith(".stl"):
        write_stl(out)
    elif args.out.endswith(".ply"):
        write_ply(out)
    else:
        sys.exit("make_torus_mesh.py: OUT must end in .stl or .ply")
print(f"{args.out}: {2 * args.u * args.v} triangles, {args.u * args.v} vertices")
