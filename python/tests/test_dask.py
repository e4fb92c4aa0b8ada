"""closest.dask on a real dask.distributed LocalCluster of 2 worker processes: a 2·10^6-point
zarr array in 8 chunks against a mesh and a scene, written back with to_zarr, equal row for
row to the single-process answers; each worker uploads each target once."""

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
        dashboard_address=None, silence_logs=40,
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


def test_bad_dask_input_raises_input_error():
    points = dask.array.zeros((10, 3), chunks=5, dtype=np.float32)
    with pytest.raises(closest.InputError, match="fields"):
        closest.dask.query(SHAPES, points, fields="depth")
    with pytest.raises(closest.InputError, match="points"):
        closest.dask.query(SHAPES, np.zeros((10, 3), np.float32))
    with pytest.raises(closest.InputError, match="sign"):
        closest.dask.query(SHAPES, points, sign="winding")
    with pytest.raises(closest.InputError, match="target"):
        closest.dask.query(42, points)
