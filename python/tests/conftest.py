"""Shared fixtures. Without an adapter the tests fail with the lavapipe hint: they never skip."""

import contextlib
import os
import pathlib
import subprocess
import threading

import numpy as np
import pytest

import closest

REPO = pathlib.Path(__file__).resolve().parents[2]
MESHES = REPO.parent / "shared" / "data" / "meshes"


def pytest_configure(config):
    # The "hostile inputs" group (docs/ARCHITECTURE.md): `pytest -m hostile` runs it alone.
    config.addinivalue_line(
        "markers", "hostile: arrays, shapes and workers a user or a cluster can get wrong"
    )


@pytest.fixture(scope="session")
def engine():
    try:
        return closest.Engine()
    except closest.AdapterError as e:
        pytest.fail(
            f"the Python tests need a GPU adapter and found none:\n{e}\n"
            "On Debian/Ubuntu: `sudo apt-get install -y mesa-vulkan-drivers` (lavapipe).",
            pytrace=False,
        )


@pytest.fixture(scope="session")
def cli():
    """The `closest` CLI built by cargo (CLOSEST_CLI, else target/{debug,release}/closest)."""
    candidates = [os.environ.get("CLOSEST_CLI")] + [
        REPO / "target" / profile / "closest" for profile in ("debug", "release")
    ]
    for path in candidates:
        if path and pathlib.Path(path).is_file():
            return str(path)
    pytest.fail("no closest CLI: run `cargo build` first (or set CLOSEST_CLI)", pytrace=False)


def run_cli(cli, *args):
    done = subprocess.run([cli, *map(str, args)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done


SHAPES = [
    {"type": "sphere", "center": [0, 0, 0], "radius": 1},
    {"type": "aabb", "min": [2, -1, -1], "max": [3, 1, 1]},
    {"type": "box", "center": [-3, 0, 0], "half_extents": [0.5, 1, 0.25], "rotation": [0, 0, 0.38268343, 0.92387953]},
    {"type": "plane", "normal": [0, 0, 1], "offset": -4},
    {"type": "segment", "a": [0, 3, 0], "b": [1, 4, 0]},
    {"type": "capsule", "a": [0, -3, 0], "b": [1, -3, 1], "radius": 0.3},
    {"type": "cylinder", "a": [4, 4, 0], "b": [4, 4, 1], "radius": 0.5},
    {"type": "triangle", "a": [-4, 4, 0], "b": [-3, 4, 0], "c": [-4, 5, 1]},
    {"type": "wedge", "center": [0, 0, 5], "half_extents": [1, 1, 2], "rotation": [0, 0, 0, 1]},
    {"type": "cone", "a": [5, -4, 0], "b": [5, -4, 2], "radius": 0.8},
    {"type": "torus", "center": [-5, -4, 0], "axis": [0, 1, 0], "major_radius": 1, "minor_radius": 0.25},
    {"type": "ellipsoid", "center": [0, 5, 3], "radii": [1.5, 0.5, 0.25], "rotation": [0, 0.38268343, 0, 0.92387953]},
    {"type": "convex_hull", "points": [[-5, 0, 3], [-4, 0, 3], [-5, 1, 3], [-5, 0, 4], [-4.5, 0.5, 3.5]]},
]


@pytest.fixture(scope="session")
def scene(engine):
    """SHAPES resident (the bad-input and array-kind tests)."""
    return engine.scene(SHAPES)


@pytest.fixture(scope="session")
def mesh(engine):
    """fandisk resident."""
    return engine.mesh(str(MESHES / "fandisk.obj"))


def random_points(n, seed=1, spread=6.0, dtype=np.float32):
    rng = np.random.default_rng(seed)
    points = rng.uniform(-spread, spread, (n, 3)).astype(dtype)
    points[n // 3] = [np.nan, 0, 0]
    return points


@contextlib.contextmanager
def serving(cli, *options):
    """A `closest serve` on a free loopback port, started and stopped here; yields its URL."""
    process = subprocess.Popen([cli, "serve", "--listen", "127.0.0.1:0", *map(str, options)],
                               stderr=subprocess.PIPE, text=True)
    try:
        line = process.stderr.readline()
        prefix = "closest: listening on "
        assert line.startswith(prefix), line
        threading.Thread(target=process.stderr.read, daemon=True).start()
        yield line[len(prefix):].strip()
    finally:
        process.terminate()
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()


@pytest.fixture(scope="session")
def server(cli):
    with serving(cli) as url:
        yield url


class Backend:
    """The local engine, or a client of a running server, behind one interface for tests."""

    def __init__(self, kind, engine, url=None):
        self.kind = kind
        self.engine = engine
        self.client = closest.Client(url) if url else None
        self.count = 0

    def _name(self):
        self.count += 1
        return f"t{self.count}"

    def scene(self, shapes):
        if self.client:
            return self.client.scene(self._name(), shapes)
        return self.engine.scene(shapes)

    def mesh(self, path):
        if self.client:
            return self.client.mesh(self._name(), path)
        return self.engine.mesh(path)

    def segment_pairs(self, a, b, fields=None):
        return (self.client or self.engine).segment_pairs(a, b, fields=fields)

    def query_paired(self, shapes, points, mode="solid", fields=None):
        return (self.client or self.engine).query_paired(shapes, points, mode=mode, fields=fields)


@pytest.fixture(scope="session", params=["engine", "client"])
def backend(request, engine):
    if request.param == "engine":
        return Backend("engine", engine)
    return Backend("client", engine, request.getfixturevalue("server"))
