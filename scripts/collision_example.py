"""README's collision-response example, run for real, and its before/after picture.

Writes a terrain (a height field) to OBJ, sinks a character's capsule into it, pushes the
capsule out by -distance * normal until it separates (the README loop, through the closest
package), prints each step, and draws the capsule before and after over the terrain's section
through the capsule (a side view) as a PNG, with no imaging library.

    python scripts/collision_example.py OUT_DIR   # OUT_DIR/terrain.obj, OUT_DIR/collision.png
"""

import struct
import sys
import zlib
from pathlib import Path

import numpy as np

import closest

SIDE = 65  # vertices a side of the height field (odd: x = 0 and z = 0 are vertex rows)
EXTENT = 2.0  # the field spans [-EXTENT, EXTENT] in x and z


def height(x, z):
    return 1.0 + 0.25 * np.sin(1.3 * x + 0.4) * np.cos(1.1 * z) + 0.08 * x


def write_terrain(path):
    ticks = np.linspace(-EXTENT, EXTENT, SIDE)
    xs, zs = np.meshgrid(ticks, ticks, indexing="ij")
    vertices = np.stack([xs, height(xs, zs), zs], axis=-1).reshape(-1, 3)
    lines = [f"v {x:.9g} {y:.9g} {z:.9g}" for x, y, z in vertices]
    for i in range(SIDE - 1):
        for k in range(SIDE - 1):
            a, b = i * SIDE + k + 1, (i + 1) * SIDE + k + 1  # OBJ counts from 1
            # Wound so the normals point up (+y).
            lines.append(f"f {a} {a + 1} {b}")
            lines.append(f"f {b} {a + 1} {b + 1}")
    path.write_text("\n".join(lines) + "\n")


def settle(terrain, a, b, r):
    """The README loop; every position it passes through."""
    path = [(a.copy(), b.copy())]
    for _ in range(20):
        c = terrain.contacts(bodies=[{"type": "capsule", "a": list(a), "b": list(b), "radius": r}])
        d, n = float(c["distance"][0]), c["normal"][0].astype(np.float64)
        print(f"distance {d:+.5f}  normal ({n[0]:+.3f}, {n[1]:+.3f}, {n[2]:+.3f})  "
              f"shape {int(c['shape'][0])}")
        if d > -1e-5:
            break  # resting: separated, or touching within f32's rounding
        a, b = a - d * n, b - d * n
        path.append((a.copy(), b.copy()))
    return path


def write_png(path, rgb):
    height_px, width_px, _ = rgb.shape
    raw = b"".join(b"\x00" + rgb[row].tobytes() for row in range(height_px))

    def chunk(kind, data):
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", width_px, height_px, 8, 2, 0, 0, 0)
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header)
                     + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))


def draw(path, before, after, r, z):
    """Side view (x right, y up) of the section at the capsule's z, 4 pixels of supersampling
    averaged away."""
    width_px, height_px, sub = 720, 480, 2
    x0, x1, y0, y1 = -1.5, 1.5, 0.4, 2.4
    w, h = width_px * sub, height_px * sub
    xs = x0 + (np.arange(w) + 0.5) / w * (x1 - x0)
    ys = y1 - (np.arange(h) + 0.5) / h * (y1 - y0)
    px, py = np.meshgrid(xs, ys)
    # The terrain's section along z: linear between the field's vertices, as its triangles are
    # where z is a vertex row.
    ticks = np.linspace(-EXTENT, EXTENT, SIDE)
    ground = np.interp(px, ticks, height(ticks, z))
    image = np.empty((h, w, 3))
    image[:] = (0.93, 0.95, 0.98)
    image[py < ground] = (0.55, 0.47, 0.36)
    edge = np.abs(py - ground) < 0.006
    image[edge] = (0.25, 0.2, 0.15)

    def capsule_mask(a, b, shell):
        pa = np.stack([px - a[0], py - a[1]], axis=-1)
        ab = np.array([b[0] - a[0], b[1] - a[1]])
        t = np.clip((pa @ ab) / max(ab @ ab, 1e-12), 0.0, 1.0)
        gap = np.linalg.norm(pa - t[..., None] * ab, axis=-1)
        return (gap <= r) & (gap >= r - shell) if shell else gap <= r

    for (a, b), colour, alpha in ((before, (0.85, 0.2, 0.15), 0.45), (after, (0.15, 0.6, 0.25), 0.7)):
        inside = capsule_mask(a, b, 0.0)
        image[inside] = image[inside] * (1 - alpha) + np.array(colour) * alpha
        image[capsule_mask(a, b, 0.012)] = colour
    pixels = image.reshape(height_px, sub, width_px, sub, 3).mean(axis=(1, 3))
    write_png(path, (pixels * 255).round().astype(np.uint8))


def main():
    out = Path(sys.argv[1] if len(sys.argv) > 1 else ".")
    out.mkdir(parents=True, exist_ok=True)
    write_terrain(out / "terrain.obj")
    engine = closest.Engine()
    terrain = engine.mesh(str(out / "terrain.obj"))
    # The README's capsule, sunk: its lower ball dips below the ground.
    a, b, r = np.array([0.0, 1.2, 0.0]), np.array([0.0, 1.9, 0.0]), 0.3
    path = settle(terrain, a, b, r)
    final = path[-1]
    print(f"moved {np.linalg.norm(final[0] - a):.4f} in {len(path) - 1} pushes to "
          f"a = {np.round(final[0], 4).tolist()}, b = {np.round(final[1], 4).tolist()}")
    draw(out / "collision.png", (a, b), final, r, z=0.0)


if __name__ == "__main__":
    main()
