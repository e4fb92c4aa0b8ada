"""Jobs sharded on Dask (SPEC §6): ``query(target, points, ...)`` takes a dask array of points
(N, 3) chunked by rows and returns a dict of dask arrays with the same row chunks.

Each worker process opens one engine and uploads each target once, on its first chunk of
that target; later chunks reuse both. Works on any ``dask.distributed`` cluster (local,
dask-jobqueue's Slurm, dask-kubernetes) and with the threaded scheduler.
"""

import contextlib
import hashlib
import json
import numbers
import os
import socket
import threading

import numpy as np

from ._closest import Engine, InputError

# name -> (width, dtype) in the default output order (SPEC §5).
_HIT_FIELDS = {
    "point": (3, np.float32),
    "distance": (1, np.float32),
    "shape": (1, np.int32),
    "normal": (3, np.float32),
}
_MESH_SUFFIXES = (".obj", ".stl", ".ply", ".off", ".glb", ".gltf")

# Per worker process: one engine per engine options, one upload per target.
_lock = threading.Lock()
_engines = {}
_targets = {}
uploads = {}  # target key -> uploads in this process (read by tests through client.run)


def _forget_the_parents_engines():
    """In a child forked from a process with engines (multiprocessing's "fork"): theirs are
    unusable here, so the child opens its own on first use. The lock may have been held by
    another of the parent's threads at the fork."""
    global _lock
    _lock = threading.Lock()
    _engines.clear()
    _targets.clear()
    uploads.clear()


os.register_at_fork(after_in_child=_forget_the_parents_engines)


class _Target:
    """What a task needs to find or upload its target: a key, and a mesh path, a scene path
    or a list of shape dicts."""

    def __init__(self, target):
        if isinstance(target, (str, bytes, os.PathLike)):
            path = os.fsdecode(os.fspath(target))
            self.kind = "mesh" if path.lower().endswith(_MESH_SUFFIXES) else "scene"
            self.payload = os.path.abspath(path)
            self.key = f"{self.kind}:{self.payload}"
        elif isinstance(target, list):
            self.kind = "scene"
            self.payload = target
            text = json.dumps(target, sort_keys=True, default=_plain)
            self.key = "shapes:" + hashlib.sha256(text.encode()).hexdigest()
        else:
            raise InputError(
                "target: expected a mesh path (.obj/.stl/.ply/.off/.glb/.gltf), a scene .json path or a list "
                f"of shape dicts, got {type(target).__name__}"
            )


def _plain(value):
    if hasattr(value, "tolist"):
        return value.tolist()
    raise InputError(
        f"target: a shape holds a {type(value).__name__}; shapes take numbers, lists and dicts"
    )


def _resident(target, engine_options):
    """This process's engine and uploaded target (opened and uploaded on first use)."""
    engine_key = tuple(sorted(engine_options.items()))
    with _lock:
        engine = _engines.get(engine_key)
        if engine is None:
            engine = _engines[engine_key] = Engine(**engine_options)
        resident = _targets.get((engine_key, target.key))
        if resident is None:
            if target.kind == "mesh":
                resident = engine.mesh(target.payload)
            else:
                resident = engine.scene(target.payload)
            _targets[(engine_key, target.key)] = resident
            uploads[target.key] = uploads.get(target.key, 0) + 1
        return resident


def _query_block(block, target, engine_options, query_options, names, width):
    """One chunk of rows: the asked fields side by side in one float32 block (the shape's
    int32 bits viewed as float32), split again by the caller."""
    resident = _resident(target, engine_options)
    result = resident.query(np.ascontiguousarray(block), **query_options)
    out = np.empty((len(block), width), np.float32)
    column = 0
    for name in names:
        w = _HIT_FIELDS[name][0]
        out[:, column : column + w] = result[name].reshape(len(block), w).view(np.float32)
        column += w
    return out


def _field_block(block, dtype, vector):
    values = np.ascontiguousarray(block).view(dtype)
    return values if vector else values.reshape(len(block))


def query(
    target,
    points,
    *,
    mode="solid",
    sign=None,
    fields=None,
    adapter=None,
    portable_kernels=False,
):
    """Nearest shape (scene) or triangle (mesh) of every row of ``points``, a dask array (N, 3).

    ``target``: a mesh path (.obj/.stl/.ply/.off/.glb/.gltf), a scene .json path, or a list of shape dicts.
    ``mode`` applies to scenes, ``sign`` to meshes; ``fields`` as in ``Scene.query``.
    ``adapter`` picks each worker's adapter (wgpu ignores CUDA_VISIBLE_DEVICES).
    Returns {name: dask array}, with the row chunks of ``points``.
    """
    import dask.array as da

    if not isinstance(points, da.Array):
        raise InputError(
            f"points: expected a dask array of shape (N, 3), got {type(points).__name__}"
        )
    if points.ndim != 2 or points.shape[1] != 3:
        raise InputError(f"points: expected a dask array of shape (N, 3), got {points.shape}")
    if points.dtype.kind != "f":
        raise InputError(
            f"points: expected a floating dtype (float16, float32 or float64), got {points.dtype}"
        )
    if len(points.chunks[1]) != 1:
        points = points.rechunk({1: 3})
    spec = _Target(target)
    if isinstance(fields, str):
        fields = [f.strip() for f in fields.split(",")]
    try:
        asked = list(_HIT_FIELDS) if fields is None else list(fields)
    except TypeError:
        raise InputError(
            f"fields: expected a comma-separated string or a list of field names, got {fields!r:.60}"
        ) from None
    unknown = [f for f in asked if f not in _HIT_FIELDS]
    if unknown or not asked or len(set(asked)) != len(asked):
        raise InputError(
            f"fields: unknown or repeated field in {asked}; the valid ones are "
            + ", ".join(_HIT_FIELDS)
        )
    names = [f for f in _HIT_FIELDS if f in asked]
    width = sum(_HIT_FIELDS[f][0] for f in names)
    if spec.kind == "mesh":
        if mode != "solid":
            raise InputError("mode: does not apply to meshes (triangles are surfaces); use sign")
        query_options = {"sign": sign, "fields": names}
    else:
        if sign is not None:
            raise InputError("sign: applies to meshes; scene queries sign by mode='surface'")
        query_options = {"mode": mode, "fields": names}
    engine_options = _engine_options(adapter, portable_kernels)
    packed = points.map_blocks(
        _query_block,
        spec,
        engine_options,
        query_options,
        names,
        width,
        chunks=(points.chunks[0], (width,)),
        dtype=np.float32,
        meta=np.empty((0, 0), np.float32),
    )
    out = {}
    column = 0
    for name in names:
        w, dtype = _HIT_FIELDS[name]
        part = packed[:, column : column + w]
        column += w
        vector = w > 1
        out[name] = part.map_blocks(
            _field_block,
            dtype,
            vector,
            chunks=(points.chunks[0], (w,)) if vector else (points.chunks[0],),
            drop_axis=[] if vector else [1],
            dtype=dtype,
            meta=np.empty((0, w) if vector else (0,), dtype),
        )
    return out


def _mesh_files(paths):
    """Mesh files (.obj/.stl/.ply/.off/.glb/.gltf) of ``paths``: files as given, directories' in name order."""
    if isinstance(paths, (str, bytes, os.PathLike)):
        paths = [paths]
    try:
        paths = [os.fsdecode(os.fspath(p)) for p in paths]
    except TypeError:
        raise InputError(
            f"paths: expected a path or a list of paths to meshes or folders, got {paths!r:.60}"
        ) from None
    def listed(folder, name):
        # As the CLI: hidden files (macOS' ._NAME.obj) left out, a link to nothing kept (it is
        # reported as a mesh that failed).
        path = os.path.join(folder, name)
        dangling = os.path.islink(path) and not os.path.exists(path)
        return (not name.startswith(".") and name.lower().endswith(_MESH_SUFFIXES)
                and (os.path.isfile(path) or dangling))

    files = []
    for path in paths:
        if os.path.isdir(path):
            files.extend(os.path.join(path, name) for name in sorted(os.listdir(path)) if listed(path, name))
        else:
            files.append(path)
    stems = {}
    for f in files:
        stem = os.path.splitext(os.path.basename(f))[0]
        if stem in stems:
            raise InputError(f"{stems[stem]} and {f} would both write {stem}.npz")
        stems[stem] = f
    if not files:
        raise InputError("paths: no meshes (.obj, .stl, .ply, .off, .glb, .gltf) in them")
    return [os.path.abspath(f) for f in files]


def _host():
    """This machine's name as temporary outputs carry it (letters, digits, "." and "-"), as the
    CLI's `io::temporary` names them."""
    kept = "".join(c for c in socket.gethostname() if c.isascii() and (c.isalnum() or c in ".-"))
    return kept or "host"


def _is_running(pid):
    """Whether process ``pid`` exists here (another user's, which we may not signal, does)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (OSError, OverflowError):
        pass
    return True


def _write_npz(out, arrays):
    """``arrays`` to ``out`` as .npz, written beside it first and renamed: a failed write
    leaves nothing. What a killed worker left for this target (the nanny's memory limit, the
    OOM killer: this host's ``.NAME.partial-HOST-PID`` of a process no longer running) is
    removed first, as the CLI removes its own."""
    directory, name = os.path.split(out)
    prefix = f".{name}.partial-{_host()}-"
    for entry in os.listdir(directory):
        pid = entry[len(prefix):].split("-")[0] if entry.startswith(prefix) else ""
        if pid.isdigit() and int(pid) != os.getpid() and not _is_running(int(pid)):
            with contextlib.suppress(OSError):
                os.remove(os.path.join(directory, entry))
    partial = os.path.join(directory, f"{prefix}{os.getpid()}")
    try:
        with open(partial, "wb") as f:
            np.savez(f, **arrays)
        os.replace(partial, out)
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(partial)
        raise


def _mesh_task(path, job, out_dir, out_format, engine_options, options):
    """One mesh on a worker: its grid or samples written to out_dir/NAME.npz (beside it first,
    then renamed) or streamed to out_dir/NAME.zarr, or the reason it failed. The worker's engine
    is reused; the mesh is not kept."""
    stem = os.path.splitext(os.path.basename(path))[0]
    out = os.path.join(out_dir, f"{stem}.{out_format}")
    try:
        engine_key = tuple(sorted(engine_options.items()))
        with _lock:
            engine = _engines.get(engine_key)
            if engine is None:
                engine = _engines[engine_key] = Engine(**engine_options)
        mesh = engine.mesh(path)
        if out_format == "zarr":
            mesh.sdf(out=out, **options)
            return {"mesh": path, "out": out, "error": None}
        arrays = mesh.sdf(**options) if job == "sdf" else mesh.sample(**options)
        _write_npz(out, arrays)
        return {"mesh": path, "out": out, "error": None}
    except Exception as e:  # reported per mesh, as `closest sdf --out-dir` does
        return {"mesh": path, "out": None, "error": f"{type(e).__name__}: {e}"}


def map_meshes(paths, job, out_dir, *, adapter=None, portable_kernels=False, timeout=None,
               out_format="npz", **options):
    """``job`` ("sdf" or "sample") for every mesh of ``paths`` (files, or directories of .obj,
    .stl, .ply, .off, .glb and .gltf files), one task per mesh, each worker's engine reused; writes
    ``out_dir/NAME.npz`` (the arrays of ``Mesh.sdf`` or ``Mesh.sample``, which ``options`` go
    to), or for "sdf" with ``out_format="zarr"`` streams each grid to ``out_dir/NAME.zarr``.
    A mesh that fails is reported, not raised: returns one {"mesh", "out", "error"} a mesh, in
    order. On a ``dask.distributed`` client, ``timeout`` (seconds) bounds the wait: meshes not
    done by then are cancelled and reported as errors, as is a mesh whose worker died (a task
    already running may still write its file after the call returns)."""
    import dask

    if job not in ("sdf", "sample"):
        raise InputError(f'job: expected "sdf" or "sample", got {job!r}')
    if out_format not in ("npz", "zarr") or (out_format == "zarr" and job != "sdf"):
        raise InputError(f'out_format: expected "npz", or "zarr" for "sdf" grids, got {out_format!r}')
    if timeout is not None and not (
        isinstance(timeout, numbers.Real) and not isinstance(timeout, bool) and 0 < timeout < float("inf")
    ):
        raise InputError(f"timeout: expected None or a number of seconds > 0, got {timeout!r:.60}")
    engine_options = _engine_options(adapter, portable_kernels)
    files = _mesh_files(paths)
    _check_options(job, options)
    try:
        out_dir = os.path.abspath(os.fsdecode(os.fspath(out_dir)))
        os.makedirs(out_dir, exist_ok=True)
    except (TypeError, OSError) as e:
        raise InputError(f"out_dir: cannot write outputs to {out_dir!r:.60}: {e}") from None
    tasks = [
        dask.delayed(_mesh_task, pure=False)(f, job, out_dir, out_format, engine_options, options)
        for f in files
    ]
    try:
        from distributed import default_client, wait

        client = default_client()
    except (ImportError, ValueError):
        return list(dask.compute(*tasks))
    futures = client.compute(tasks)
    try:
        wait(futures, timeout=timeout)
    except TimeoutError:  # distributed's, an alias of the builtin
        pass
    return [_mesh_outcome(f, future, timeout) for f, future in zip(files, futures)]


def _engine_options(adapter, portable_kernels):
    """Each worker's ``Engine`` arguments, checked here: a bad one would fail every task alike
    (and a list could not even key the worker's engines)."""
    if adapter is not None and not isinstance(adapter, str):
        raise InputError(f"adapter: expected a name, a backend or None, got {adapter!r:.60}")
    if not isinstance(portable_kernels, (bool, np.bool_)):
        raise InputError(f"portable_kernels: expected True or False, got {portable_kernels!r:.60}")
    return {"adapter": adapter, "portable_kernels": bool(portable_kernels)}


def _check_options(job, options):
    """Refuse, before any mesh is read, options that ``Mesh.sdf`` or ``Mesh.sample`` does not
    take (every mesh would fail alike), and ``out``, which map_meshes names itself."""
    import inspect

    from . import Mesh

    if "out" in options:
        raise InputError("out: map_meshes writes out_dir/NAME.npz (or .zarr): leave out out=")
    method = Mesh.sdf if job == "sdf" else Mesh.sample
    try:
        inspect.signature(method).bind(None, **options)
    except TypeError as e:
        raise InputError(f"{job}: {e}") from None


def _mesh_outcome(path, future, timeout):
    """A map_meshes future's result, or its failure as a mesh's error (never raised: a worker
    that died raises `KilledWorker` in `gather`, a wait that ran out a `TimeoutError`)."""
    if future.status == "finished":
        return future.result()
    if future.status == "error":
        e = future.exception()
        return {"mesh": path, "out": None, "error": f"{type(e).__name__}: {e}"}
    future.cancel()
    return {"mesh": path, "out": None, "error": f"TimeoutError: not finished within {timeout} s (cancelled)"}
