"""GPU closest-point, distance and signed-distance queries (SPEC §6).

numpy arrays in and out: float32 C-contiguous points are read in place, float64 converted;
results are dicts of named numpy arrays, as in the CLI's ``.npz`` files. The GIL is released
while the device works, so one engine, scene or mesh serves many threads.
"""

import os as _os
import tempfile as _tempfile


def _quiet_headless_loader():
    # Mesa's loader prints "error: XDG_RUNTIME_DIR is invalid or not set" on headless machines
    # (its window-system layer, which compute never uses): give it a private directory, as the
    # CLI does, before the driver is loaded.
    if "XDG_RUNTIME_DIR" in _os.environ or not hasattr(_os, "getuid"):
        return
    path = _os.path.join(_tempfile.gettempdir(), f"closest-runtime-{_os.getuid()}")
    try:
        _os.makedirs(path, mode=0o700, exist_ok=True)
        st = _os.lstat(path)
    except OSError:
        return
    import stat

    if stat.S_ISDIR(st.st_mode) and st.st_uid == _os.getuid() and st.st_mode & 0o077 == 0:
        _os.environ["XDG_RUNTIME_DIR"] = path


_quiet_headless_loader()

from ._closest import (  # noqa: E402
    AdapterError,
    Engine,
    GpuError,
    InputError,
    Mesh,
    Scene,
    adapters,
)

from .client import Client  # noqa: E402

__all__ = [
    "AdapterError",
    "Client",
    "Engine",
    "GpuError",
    "InputError",
    "Mesh",
    "Scene",
    "adapters",
    "dask",
    "mesh_distance",
    "torch",
]


def mesh_distance(a, b, samples=0, seed=0, sign=None, engine=None):
    """How far meshes `a` and `b` deviate (SPEC §9): `a.distance_to(b, ...)`, where `a` and `b`
    are `closest.Mesh` objects of one engine, mesh paths or trimesh or Open3D meshes (opened on
    `engine`, or on a default `Engine()` made once). {"a_to_b", "b_to_a" (vertex deviations), "hausdorff",
    "hausdorff_a_to_b", "hausdorff_b_to_a", "chamfer", "chamfer_squared", and the means}."""
    for name, value in (("a", a), ("b", b)):
        if not isinstance(value, (Mesh, str, bytes, _os.PathLike)) and not hasattr(value, "vertices"):
            raise InputError(f"{name}: expected a closest.Mesh, a mesh file's path or a trimesh or Open3D mesh, "
                             f"got {type(value).__name__}")
    if engine is not None and not isinstance(engine, Engine):
        raise InputError(f"engine: expected a closest.Engine or None, got {type(engine).__name__}")
    if not isinstance(a, Mesh) and not isinstance(b, Mesh):
        # Neither open yet: A's hierarchy is built while A's points are answered against B.
        engine = _default_engine() if engine is None else engine
        return engine._mesh_distance_of(a, b, samples=samples, seed=seed, sign=sign)
    if not isinstance(a, Mesh) or not isinstance(b, Mesh):
        if engine is None:
            engine = a.engine if isinstance(a, Mesh) else b.engine
        # Paths and trimesh or Open3D meshes alike: `Engine.mesh` takes both.
        a = a if isinstance(a, Mesh) else engine.mesh(a)
        b = b if isinstance(b, Mesh) else engine.mesh(b)
    return a.distance_to(b, samples=samples, seed=seed, sign=sign)


_engine = None


def _default_engine():
    global _engine
    if _engine is None:
        _engine = Engine()
    return _engine


def __getattr__(name):
    # `closest.dask` and `closest.torch` without importing dask or torch until they are used.
    if name in ("dask", "torch"):
        import importlib

        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'closest' has no attribute {name!r}")
