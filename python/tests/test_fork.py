"""Processes forked from one that used closest (multiprocessing's "fork", Linux's default before
Python 3.14). The child inherits the parent's engines but not the driver's or rayon's threads:
the parent's objects are refused there with GpuError (they waited forever), dropping them
there returns (it waited forever), and an engine opened in the child answers as the parent's
(its first mesh waited forever on rayon's inherited pool)."""

import gc
import multiprocessing
import traceback

import numpy as np
import pytest

import closest
import closest.dask
from conftest import MESHES

pytestmark = pytest.mark.hostile

SPHERE = [{"type": "sphere", "center": [0, 0, 0], "radius": 1}]
TIMEOUT_S = 120


def _report(queue, job):
    try:
        queue.put(("ok", job()))
    except BaseException:  # noqa: BLE001 - the parent reads what went wrong
        queue.put(("raised", traceback.format_exc()))


def in_forked_child(job):
    """`job()`'s value, run in a child forked from this process, within TIMEOUT_S."""
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_report, args=(queue, job))
    child.start()
    try:
        outcome, value = queue.get(timeout=TIMEOUT_S)
    except Exception:  # noqa: BLE001 - queue.Empty: the child hung or died
        outcome, value = "hung", f"no answer within {TIMEOUT_S} s"
    child.join(10)
    if child.is_alive():
        child.kill()
        child.join()
        pytest.fail(f"the forked child did not exit ({outcome}: {value})")
    assert outcome == "ok", value
    assert child.exitcode == 0
    return value


@pytest.fixture(scope="module")
def parents(engine):
    """A scene and a mesh used in this process before the fork (device and rayon both)."""
    scene = engine.scene(SPHERE)
    mesh = engine.mesh(MESHES / "fandisk.obj")
    points = np.random.default_rng(3).uniform(-1, 1, (2000, 3)).astype(np.float32)
    return {
        "scene": scene,
        "mesh": mesh,
        "points": points,
        "scene_distance": scene.query(points, fields=["distance"])["distance"],
        "mesh_sdf": mesh.query(points, sign="pseudonormal", fields=["distance"])["distance"],
        "grid": mesh.sdf(12, sign="pseudonormal")["sdf"],
        "samples": mesh.sample(near=500, sigma=[0.01], uniform=20, seed=7)["sdf"],
    }


def test_the_parents_objects_are_refused_in_a_forked_child(engine, parents):
    scene, mesh, points = parents["scene"], parents["mesh"], parents["points"]
    calls = {
        "Scene.query": lambda: scene.query(points),
        "Scene.contacts": lambda: scene.contacts(np.zeros((1, 4), np.float32)),
        "Mesh.query": lambda: mesh.query(points, sign="winding"),
        "Mesh.sdf": lambda: mesh.sdf(8),
        "Mesh.sample": lambda: mesh.sample(near=10),
        "Mesh.auto_sign": lambda: mesh.auto_sign,
        "Engine.scene": lambda: engine.scene(SPHERE),
        "Engine.mesh": lambda: mesh.engine.mesh(MESHES / "fandisk.obj"),
    }

    def child():
        refusals = {}
        for name, call in calls.items():
            try:
                call()
                refusals[name] = None
            except closest.GpuError as e:
                refusals[name] = str(e)
        return refusals

    for name, message in in_forked_child(child).items():
        assert message is not None, f"{name} answered in a forked child"
        assert name in message and "fork" in message and "closest.Engine()" in message, message


def test_dropping_the_parents_objects_in_a_forked_child_returns(parents):
    doomed = [closest.Engine()]
    doomed += [doomed[0].scene(SPHERE), doomed[0].mesh(MESHES / "fandisk.obj")]
    doomed[2].query(parents["points"], sign="pseudonormal")

    def child():
        doomed.clear()
        gc.collect()
        return "dropped"

    assert in_forked_child(child) == "dropped"


def test_an_engine_opened_in_a_forked_child_answers_as_the_parents(parents):
    points = parents["points"]

    def child():
        engine = closest.Engine()
        scene = engine.scene(SPHERE)
        mesh = engine.mesh(MESHES / "fandisk.obj")
        return {
            "scene": np.array_equal(
                scene.query(points, fields=["distance"])["distance"], parents["scene_distance"]
            ),
            "mesh": np.array_equal(
                mesh.query(points, sign="pseudonormal", fields=["distance"])["distance"],
                parents["mesh_sdf"],
            ),
            "grid": np.array_equal(mesh.sdf(12, sign="pseudonormal")["sdf"], parents["grid"]),
            "samples": np.array_equal(
                mesh.sample(near=500, sigma=[0.01], uniform=20, seed=7)["sdf"],
                parents["samples"],
            ),
        }

    assert in_forked_child(child) == {"scene": True, "mesh": True, "grid": True, "samples": True}


def test_closest_dask_opens_its_own_engine_in_a_forked_child(parents):
    closest.dask._resident(closest.dask._Target(SPHERE), {})
    assert closest.dask._engines

    def child():
        return len(closest.dask._engines), len(closest.dask._targets)

    assert in_forked_child(child) == (0, 0)
