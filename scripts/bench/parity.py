"""Python vs the Rust library, same run: a 10^7-point distance-only mesh query (float32
points in memory, unsigned) on the bunny, from Python (`mesh.query(points,
fields="distance")`) and through `examples/mesh_distances.rs`; medians of 5 runs, alternated.

Usage: python scripts/bench/parity.py [POINTS]   (after `pip install ./python` and
`cargo build --release --example mesh_distances`)
"""

import pathlib
import subprocess
import sys
import tempfile
import time

import numpy as np

import closest

ROOT = pathlib.Path(__file__).resolve().parents[2]
MESH = ROOT.parent / "shared" / "data" / "meshes" / "stanford-bunny.obj"
EXAMPLE = ROOT / "target" / "release" / "examples" / "mesh_distances"


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000_000
    rng = np.random.default_rng(1)
    # The bunny's box, padded by 0.1 of its largest extent (about 0.016 either side).
    lo, hi = np.array([-0.111, 0.018, -0.078]), np.array([0.073, 0.200, 0.063])
    points = rng.uniform(lo - 0.02, hi + 0.02, (n, 3)).astype(np.float32)
    engine = closest.Engine()
    mesh = engine.mesh(str(MESH))
    python_times, rust_times = [], []
    with tempfile.TemporaryDirectory() as tmp:
        path = pathlib.Path(tmp) / "points.npy"
        np.save(path, points)
        for _ in range(5):
            started = time.perf_counter()
            d = mesh.query(points, fields="distance")["distance"]
            python_times.append(time.perf_counter() - started)
            run = subprocess.run([str(EXAMPLE), str(MESH), str(path), "1"], check=True,
                                 capture_output=True, text=True)
            seconds, rust_sum = run.stdout.split()
            rust_times.append(float(seconds))
    py, rs = np.median(python_times), np.median(rust_times)
    assert abs(float(d.astype(np.float64).sum()) - float(rust_sum)) <= 1e-6 * abs(float(rust_sum))
    print(f"{engine.info['adapter']}; {n} points, distance only, bunny, unsigned")
    print(f"python {py:.3f} s ({n / py / 1e6:.2f} M/s)  rust {rs:.3f} s ({n / rs / 1e6:.2f} M/s)"
          f"  python/rust time {py / rs:.3f}")


if __name__ == "__main__":
    main()
