"""closest.dask on a real dask.distributed LocalCluster of 2 worker processes: a 2·10^6-point
zarr array in 8 chunks against a mesh and a scene, written back with to_zarr, equal row for
row to the single-process answers; each worker uploads each target once."""

import operator
import os
import time

import numpy as np
import pytest

import closest
from conftest import MESHES, SHAPES

import dask  # noqa: E402
import dask.array  # noqa: E402
import zarr  # noqa: E402
from distributed import Client, LocalCluster  # noqa: E402

ROWS, CHUNKS = 2_000_000, 8


@pytest.fixture(scope="module")
def client():
    # Loopback only, started and stopped here; bounded by the test's own timeouts.
    with LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
        dashboard_address="127.0.0.1:0", silence_logs=40,
    ) as cluster, Client(cluster, timeout="60s") as client:
        yield client


@pytest.fixture(scope="module")
def points_zarr(tmp_path_factory):
    path = tmp_path_factory.mktemp("dask") / "points.zarr"
    rng = np.random.default_rng(7)
    points = rng.uniform(-0.2, 0.2, (ROWS, 3)).astype(np.float32)
    points[12345] = np.nan
    z = zarr.open_array(str(path), mode="w", shape=points.shape, chunks=(ROWS // CHUNKS, 3),
                        dtype=np.float32)
    z[:] = points
    return path, points


def _run(client, target, points_path, out_dir, **kw):
    points = dask.array.from_zarr(str(points_path))
    assert points.numblocks == (CHUNKS, 1)
    result = closest.dask.query(target, points, **kw)
    for array in result.values():
        assert array.chunks[0] == points.chunks[0]
    stores = [array.to_zarr(str(out_dir / f"{name}.zarr"), compute=False)
              for name, array in result.items()]
    dask.compute(*stores)
    return {name: zarr.open_array(str(out_dir / f"{name}.zarr"), mode="r")[:]
            for name in result}


def test_mesh_and_scene_jobs_equal_the_single_process_answers(client, points_zarr, tmp_path,
                                                              engine):
    points_path, points = points_zarr
    mesh_path = str(MESHES / "stanford-bunny.obj")
    got = _run(client, mesh_path, points_path, tmp_path / "mesh", sign="pseudonormal",
               fields=["distance", "shape"])
    want = engine.mesh(mesh_path).query(points, sign="pseudonormal", fields="distance,shape")
    assert list(got) == ["distance", "shape"]
    for name in want:
        assert got[name].dtype == want[name].dtype
        assert got[name].tobytes() == want[name].tobytes(), name

    shapes = [dict(s, center=[c * 0.05 for c in s["center"]]) if "center" in s else s
              for s in SHAPES]
    got = _run(client, shapes, points_path, tmp_path / "scene", mode="surface")
    want = engine.scene(shapes).query(points, mode="surface")
    assert list(got) == list(want)
    for name in want:
        assert got[name].shape == want[name].shape
        assert got[name].tobytes() == want[name].tobytes(), name

    # One engine per worker process, each target uploaded at most once per worker.
    uploads = client.run(lambda: dict(closest.dask.uploads))
    assert len(uploads) == 2
    per_target = {}
    for worker_uploads in uploads.values():
        for key, count in worker_uploads.items():
            assert count == 1, (key, count)
            per_target[key] = per_target.get(key, 0) + 1
    assert len(per_target) == 2 and all(n <= 2 for n in per_target.values())


@pytest.mark.hostile
def test_bad_dask_input_raises_input_error(tmp_path):
    points = dask.array.zeros((10, 3), chunks=5, dtype=np.float32)
    with pytest.raises(closest.InputError, match="fields"):
        closest.dask.query(SHAPES, points, fields="depth")
    with pytest.raises(closest.InputError, match="points"):
        closest.dask.query(SHAPES, np.zeros((10, 3), np.float32))
    with pytest.raises(closest.InputError, match="sign"):
        closest.dask.query(SHAPES, points, sign="winding")
    with pytest.raises(closest.InputError, match="target"):
        closest.dask.query(42, points)
    # A shape holding something JSON cannot carry (json.dumps raised TypeError).
    odd = [{"type": "sphere", "center": [0, 0, 0], "radius": object()}]
    with pytest.raises(closest.InputError, match="target: a shape holds a object"):
        closest.dask.query(odd, points)
    with pytest.raises(closest.InputError, match="fields: expected"):
        closest.dask.query(SHAPES, points, fields=7)
    with pytest.raises(closest.InputError, match="paths: expected"):
        closest.dask.map_meshes(3, "sdf", "out")
    with pytest.raises(closest.InputError, match="out_dir: cannot write"):
        closest.dask.map_meshes(str(MESHES / "fandisk.obj"), "sdf", "/dev/null/out", res=8)
    # Engine arguments are checked before any task (a list raised "unhashable type" in every
    # task, as each worker keys its engines by them).
    with pytest.raises(closest.InputError, match="adapter: expected"):
        closest.dask.query(SHAPES, points, adapter=["llvmpipe"])
    with pytest.raises(closest.InputError, match="portable_kernels: expected"):
        closest.dask.map_meshes(str(MESHES / "fandisk.obj"), "sdf", "out", portable_kernels=[], res=8)
    # A folder given as bytes, as os.fsencode makes it (its outputs' joins raised TypeError).
    done = closest.dask.map_meshes(str(MESHES / "fandisk.obj"), "sample", os.fsencode(tmp_path),
                                   near=4, sigma=0.01)
    assert done[0]["error"] is None and (tmp_path / "fandisk.npz").is_file(), done


def test_map_meshes_reports_what_a_timeout_or_a_dead_worker_left_unfinished(client, tmp_path):
    # Four igea grids cannot finish within 10 ms: each is reported, none raises distributed's
    # TimeoutError, and the call returns at once.
    meshes = tmp_path / "meshes"
    meshes.mkdir()
    for k in range(4):
        (meshes / f"igea{k}.ply").symlink_to(MESHES / "igea.ply")
    started = time.monotonic()
    results = closest.dask.map_meshes(meshes, "sdf", tmp_path / "out", res=64, timeout=0.01)
    assert time.monotonic() - started < 30
    unfinished = [r for r in results if r["error"]]
    assert unfinished, results
    for r in unfinished:
        assert r["out"] is None and r["error"].startswith("TimeoutError: not finished within 0.01 s"), r
    for bad in ("1", 0, -1, float("nan"), float("inf"), True):
        with pytest.raises(closest.InputError, match="timeout: expected"):
            closest.dask.map_meshes(meshes, "sdf", tmp_path / "out", timeout=bad)
    # A task that failed outside `_mesh_task`'s own handler (a worker that died) is a mesh's
    # error too, not raised.
    from closest.dask import _mesh_outcome
    from distributed import wait

    failed = client.submit(operator.truediv, 1, 0, pure=False)
    wait(failed, timeout=BOUND)
    outcome = _mesh_outcome("m.obj", failed, None)
    assert outcome["out"] is None and outcome["error"].startswith("ZeroDivisionError"), outcome


def test_a_mesh_file_write_leaves_no_partial_and_removes_a_killed_workers(tmp_path):
    # What a killed worker of this host left for the target is removed before the write; a
    # running process's, another host's and another target's are not.
    import subprocess
    import sys

    from closest.dask import _host, _write_npz

    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    dead = int(gone.stdout)
    host = _host()
    stale = f".m.npz.partial-{host}-{dead}"
    kept = [f".m.npz.partial-{host}-{os.getppid()}", f".m.npz.partial-{host}x-{dead}",
            f".n.npz.partial-{host}-{dead}"]
    for name in [stale, *kept]:
        (tmp_path / name).write_bytes(b"x")
    out = tmp_path / "m.npz"
    _write_npz(str(out), {"sdf": np.arange(4, dtype=np.float32)})
    assert np.load(out)["sdf"].tolist() == [0, 1, 2, 3]
    assert sorted(os.listdir(tmp_path)) == sorted([*kept, "m.npz"])

    # A write that fails midway (an array that cannot be read) leaves no partial file.
    class Unreadable:
        def __array__(self, dtype=None, copy=None):
            raise RuntimeError("unreadable")

    with pytest.raises(RuntimeError, match="unreadable"):
        _write_npz(str(tmp_path / "o.npz"), {"a": np.zeros(3), "b": Unreadable()})
    assert sorted(os.listdir(tmp_path)) == sorted([*kept, "m.npz"])


# Dask never hangs (issue 43): each test below is bounded in time by its own `timeout`, and a
# failed task raises in the client with the worker's message.
BOUND = 120


def _unaligned_read_only(block):
    """The block's values at an odd address, read-only: what a worker may get for a chunk
    moved between processes."""
    raw = b"\0" + np.ascontiguousarray(block).tobytes()
    out = np.frombuffer(raw, block.dtype, offset=1).reshape(block.shape)
    assert not out.flags.aligned and not out.flags.writeable
    return out


@pytest.mark.hostile
def test_unaligned_read_only_chunks_are_answered(client, engine):
    rng = np.random.default_rng(11)
    values = rng.uniform(-0.2, 0.2, (40_000, 3)).astype(np.float32)
    points = dask.array.from_array(values, chunks=(5_000, 3)).map_blocks(
        _unaligned_read_only, dtype=np.float32)
    mesh_path = str(MESHES / "stanford-bunny.obj")
    result = closest.dask.query(mesh_path, points, sign="winding", fields="distance")
    got = client.compute(result["distance"]).result(timeout=BOUND)
    want = engine.mesh(mesh_path).query(values, sign="winding", fields="distance")["distance"]
    assert got.tobytes() == want.tobytes()
    # Any floating dtype the engine takes (float16 was refused), answered as the engine does.
    half = values[:8_000].astype(np.float16)
    result = closest.dask.query(mesh_path, dask.array.from_array(half, chunks=(2_000, 3)),
                                sign="winding", fields="distance")
    got = client.compute(result["distance"]).result(timeout=BOUND)
    want = engine.mesh(mesh_path).query(half, sign="winding", fields="distance")["distance"]
    assert got.tobytes() == want.tobytes()
    with pytest.raises(closest.InputError, match="floating dtype"):
        closest.dask.query(mesh_path, dask.array.zeros((10, 3), chunks=5, dtype=np.int32))


@pytest.mark.hostile
def test_a_target_missing_on_the_workers_raises_in_the_client(client, tmp_path):
    points = dask.array.zeros((1_000, 3), chunks=250, dtype=np.float32)
    missing = str(tmp_path / "nowhere" / "gone.obj")
    result = closest.dask.query(missing, points, fields="distance")
    with pytest.raises(closest.InputError, match="gone.obj"):
        client.compute(result["distance"]).result(timeout=BOUND)


def _slow_block(block):
    time.sleep(0.3)
    return block


@pytest.mark.hostile
def test_a_worker_killed_mid_job_leaves_the_job_finished_or_raising(engine):
    import os
    import signal
    rng = np.random.default_rng(5)
    values = rng.uniform(-0.2, 0.2, (24_000, 3)).astype(np.float32)
    mesh_path = str(MESHES / "stanford-bunny.obj")
    want = engine.mesh(mesh_path).query(values, sign="pseudonormal", fields="distance")["distance"]
    with LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
        dashboard_address="127.0.0.1:0", silence_logs=50,
    ) as cluster, Client(cluster, timeout="60s") as own:
        points = dask.array.from_array(values, chunks=(1_000, 3)).map_blocks(
            _slow_block, dtype=np.float32)
        result = closest.dask.query(mesh_path, points, sign="pseudonormal", fields="distance")
        future = own.compute(result["distance"])
        time.sleep(2.0)
        pids = own.run(os.getpid)
        victim = sorted(pids.values())[0]
        os.kill(victim, signal.SIGKILL)
        started = time.monotonic()
        try:
            got = future.result(timeout=BOUND)
        except Exception as e:  # raising is allowed; hanging is not
            assert time.monotonic() - started < BOUND, e
        else:
            assert got.tobytes() == want.tobytes()


def test_map_meshes_writes_every_mesh_and_reports_the_broken_one(client, engine, tmp_path):
    # 12 meshes: 11 boxes of different sizes and one broken file, over the 2-process cluster.
    meshes = tmp_path / "meshes"
    meshes.mkdir()
    faces = "f 1 3 4\nf 1 4 2\nf 5 6 8\nf 5 8 7\nf 1 2 6\nf 1 6 5\nf 3 7 8\nf 3 8 4\nf 1 5 7\nf 1 7 3\nf 2 4 8\nf 2 8 6\n"
    for k in range(11):
        s = 1 + k / 4
        corners = "".join(
            f"v {x * s} {y * s} {z * s}\n" for z in (-1, 1) for y in (-1, 1) for x in (-1, 1)
        )
        (meshes / f"box{k:02}.obj").write_text(corners + faces)
    (meshes / "broken.obj").write_text("v 0 0 0\nf 1 2 3\n")
    # Hidden files (a macOS resource fork) are not meshes of the folder.
    (meshes / "._box00.obj").write_bytes(b"\0\x05\x16\x07 not a mesh")
    out = tmp_path / "out"
    results = closest.dask.map_meshes(meshes, "sdf", out, res=9, timeout=120)
    assert [os.path.basename(r["mesh"]) for r in results] == ["box00.obj", "box01.obj", "box02.obj", "box03.obj", "box04.obj", "box05.obj", "box06.obj", "box07.obj", "box08.obj", "box09.obj", "box10.obj", "broken.obj"]
    failed = [r for r in results if r["error"]]
    assert len(failed) == 1 and "broken.obj" in failed[0]["mesh"], failed
    assert "InputError" in failed[0]["error"]
    for r in results[:11]:
        written = np.load(r["out"])
        want = engine.mesh(r["mesh"]).sdf(9)
        np.testing.assert_array_equal(written["sdf"], want["sdf"])
        np.testing.assert_array_equal(written["origin"], want["origin"])
    assert sorted(os.listdir(out)) == [f"box{k:02}.npz" for k in range(11)]
    samples = closest.dask.map_meshes(meshes / "box03.obj", "sample", out, uniform=100, seed=4,
                                      timeout=120)
    assert samples[0]["error"] is None
    np.testing.assert_array_equal(np.load(samples[0]["out"])["points"],
                                  engine.mesh(str(meshes / "box03.obj")).sample(uniform=100, seed=4)["points"])
    stores = closest.dask.map_meshes([meshes / "box01.obj", meshes / "broken.obj"], "sdf", tmp_path / "zarr",
                                     res=9, band=2, out_format="zarr", timeout=120)
    assert stores[0]["error"] is None and stores[0]["out"].endswith("box01.zarr") and stores[1]["error"]
    import zarr

    np.testing.assert_array_equal(zarr.open_array(os.path.join(stores[0]["out"], "sdf"), mode="r")[:],
                                  engine.mesh(str(meshes / "box01.obj")).sdf(9, band=2)["sdf"])
    assert sorted(os.listdir(tmp_path / "zarr")) == ["box01.zarr"]
    with pytest.raises(closest.InputError, match="job"):
        closest.dask.map_meshes(meshes, "voxels", out)
    with pytest.raises(closest.InputError, match="out_format"):
        closest.dask.map_meshes(meshes, "sample", out, out_format="zarr")
    # Options every mesh would refuse are refused once, before any mesh is read (they were a
    # TypeError reported per mesh after each was loaded).
    with pytest.raises(closest.InputError, match="sdf: .*'nope'"):
        closest.dask.map_meshes(meshes, "sdf", out, res=8, nope=3)
    with pytest.raises(closest.InputError, match="sdf: .*'res'"):
        closest.dask.map_meshes(meshes, "sdf", out)
    with pytest.raises(closest.InputError, match="sample: .*'res'"):
        closest.dask.map_meshes(meshes, "sample", out, res=8)
    with pytest.raises(closest.InputError, match="out: map_meshes writes"):
        closest.dask.map_meshes(meshes, "sdf", out, res=8, out="x.zarr")


def test_a_folders_meshes_leave_out_hidden_files_and_keep_links_to_nothing(tmp_path):
    # As `closest sdf DIR --out-dir`: a macOS resource fork (._NAME.obj) is not a mesh of the
    # folder; a link to a mesh that is gone is kept, so that it is reported as a failed mesh.
    (tmp_path / "a.obj").write_text("v 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 3\n")
    (tmp_path / "._a.obj").write_bytes(b"\0\x05\x16\x07")
    (tmp_path / "gone.obj").symlink_to(tmp_path / "nowhere.obj")
    (tmp_path / "notes.txt").write_text("not a mesh")
    listed = [os.path.basename(f) for f in closest.dask._mesh_files(tmp_path)]
    assert listed == ["a.obj", "gone.obj"]
    # A folder or file given as bytes (os.listdir(b".")'s names) lists the same.
    assert closest.dask._mesh_files(os.fsencode(tmp_path)) == closest.dask._mesh_files(tmp_path)
    assert closest.dask._mesh_files([os.fsencode(tmp_path / "a.obj")]) == [str(tmp_path / "a.obj")]
    results = closest.dask.map_meshes(tmp_path, "sdf", tmp_path / "out", res=4)
    assert [r["error"] is None for r in results] == [True, False]
    assert "gone.obj" in results[1]["error"], results
