"""The GIL is released while the device works: 8 Python threads share one engine, one mesh
and one scene, and every thread gets the single-thread answers."""

import threading
from pathlib import Path

import numpy as np
import pytest

from conftest import MESHES, SHAPES, random_points


def test_eight_threads_get_the_single_thread_answers(engine):
    mesh = engine.mesh(str(MESHES / "stanford-bunny.obj"))
    scene = engine.scene(SHAPES)
    jobs = []
    for k in range(8):
        points = random_points(20000, seed=10 + k, spread=0.15)
        if k % 2:
            jobs.append((lambda p: mesh.query(p, sign="pseudonormal"), points))
        else:
            jobs.append((lambda p: scene.query(p * 40, mode="surface"), points))
    alone = [run(points) for run, points in jobs]
    results = [None] * len(jobs)
    errors = []
    start = threading.Barrier(len(jobs))

    def work(k):
        try:
            start.wait(timeout=60)
            run, points = jobs[k]
            results[k] = [run(points) for _ in range(3)]
        except Exception as e:  # reported below, with the thread's index
            errors.append((k, e))

    threads = [threading.Thread(target=work, args=(k,)) for k in range(len(jobs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not any(t.is_alive() for t in threads), "a thread did not finish"
    assert not errors, errors
    for k, runs in enumerate(results):
        for result in runs:
            for name, array in alone[k].items():
                assert result[name].tobytes() == array.tobytes(), (k, name)


class Interrupted(Exception):
    """What the test's SIGINT handler raises (pytest itself would stop on KeyboardInterrupt)."""


@pytest.fixture(scope="module")
def torus(tmp_path_factory):
    """A mesh of 2M triangles, which takes seconds to read and build."""
    import subprocess
    import sys

    path = tmp_path_factory.mktemp("torus") / "torus.ply"
    script = Path(__file__).resolve().parents[2] / "scripts" / "bench" / "make_torus_mesh.py"
    subprocess.run([sys.executable, str(script), "1024", "1024", str(path)], check=True,
                   capture_output=True, timeout=120)
    return str(path)


def interrupted_after(fractions, call):
    """`call` whole (once first to warm what a process makes once, its kernels' pipelines, so
    that a later call is no quicker than the one timed), then again for each of `fractions` with
    a SIGINT (the main thread's signal, as Ctrl-C sends) that fraction of the whole call's time
    in, each of which must raise the handler's exception: the whole call's seconds and each
    interrupted one's."""
    import os
    import signal
    import time

    call()
    started = time.monotonic()
    call()
    whole = time.monotonic() - started

    def handler(signum, frame):
        raise Interrupted

    stopped_after = []
    previous = signal.signal(signal.SIGINT, handler)
    try:
        for fraction in fractions:
            timer = threading.Timer(fraction * whole, os.kill, (os.getpid(), signal.SIGINT))
            started = time.monotonic()
            try:
                timer.start()
                with pytest.raises(Interrupted):
                    call()
                stopped_after.append(time.monotonic() - started)
            finally:
                timer.cancel()
                timer.join()
    finally:
        signal.signal(signal.SIGINT, previous)
    return whole, stopped_after


def test_ctrl_c_stops_a_large_meshs_load_and_build(engine, torus):
    # Ctrl-C went unheard until the load and the build ended. Interrupted a tenth of the way
    # in, the call now ends well before a whole load (each measured here, in the same
    # minute), and the engine loads the next mesh. Eight tenths in, the call waits for
    # `auto`'s check, made beside the build and outlasting it by a second on these 2M
    # triangles: that wait was not asked, and the call ran to its end.
    whole, [early, late] = interrupted_after([0.1, 0.8], lambda: engine.mesh(torus))
    assert early < 0.75 * whole and late < 0.9 * whole, (early, late, whole)
    assert len(engine.mesh(str(MESHES / "fandisk.obj"))) == 12946


def test_ctrl_c_stops_the_first_auto_signed_call_on_a_mesh_checked_then(engine, tmp_path):
    # A mesh of more than 2^21 triangles is checked for `auto` at its first signed call, not
    # beside its build, and that call also makes the pseudonormal table: seconds of work
    # that went on to its end after a Ctrl-C (4.26M triangles: 6 s, the signal heard after
    # ~3 s). Both now stop between their passes; nothing is kept, and the next call makes
    # them whole and answers.
    import os
    import signal
    import subprocess
    import sys
    import time

    path = tmp_path / "torus.ply"
    script = Path(__file__).resolve().parents[2] / "scripts" / "bench" / "make_torus_mesh.py"
    subprocess.run([sys.executable, str(script), "2048", "1040", str(path)], check=True,
                   capture_output=True, timeout=120)
    started = time.monotonic()
    mesh = engine.mesh(str(path))
    load = time.monotonic() - started
    assert len(mesh) > 1 << 21

    def handler(signum, frame):
        raise Interrupted

    def stopped_after(call):
        previous = signal.signal(signal.SIGINT, handler)
        timer = threading.Timer(0.2 * load, os.kill, (os.getpid(), signal.SIGINT))
        started = time.monotonic()
        try:
            timer.start()
            with pytest.raises(Interrupted):
                call()
            return time.monotonic() - started
        finally:
            timer.cancel()
            timer.join()
            signal.signal(signal.SIGINT, previous)

    # The check (alone: the `auto_sign` property) and the table take longer than the load;
    # stopped, the call ends well before.
    for call in (lambda: mesh.auto_sign, lambda: mesh.sdf(4)):
        took = stopped_after(call)
        assert took < 0.6 * load, (took, load)
    grid = mesh.sdf(4)["sdf"]
    assert mesh.auto_sign[0] == "pseudonormal", mesh.auto_sign
    assert np.array_equal(grid, mesh.sdf(4)["sdf"])


def test_ctrl_c_stops_a_mesh_distance_whose_first_mesh_builds_aside(engine, torus):
    # `mesh_distance` of two files builds A on a thread of its own while A's points are
    # answered against B, then waits for the build. Ctrl-C a fifth of the way in (A's points
    # being answered) and at six tenths (the build waited for) stops the build too, well
    # before a whole call, and the engine answers the next one.
    import closest

    fandisk = str(MESHES / "fandisk.obj")
    whole, [early, late] = interrupted_after(
        [0.2, 0.6], lambda: closest.mesh_distance(torus, fandisk, engine=engine))
    assert early < 0.8 * whole and late < 0.95 * whole, (early, late, whole)
    again = closest.mesh_distance(fandisk, fandisk, samples=100, engine=engine)
    assert again["hausdorff"] <= 1e-5


def test_ctrl_c_stops_a_long_job_and_leaves_nothing(engine, tmp_path):
    # A 1024³ grid streamed to Zarr takes minutes on lavapipe; a SIGINT half a second in (the
    # main thread's signal, as Ctrl-C or Jupyter's interrupt sends) stops it between chunks
    # with the handler's exception, and the engine answers the next call.
    import os
    import signal
    import time

    mesh = engine.mesh(str(MESHES / "fandisk.obj"))
    out = tmp_path / "grid.zarr"

    def handler(signum, frame):
        raise Interrupted

    previous = signal.signal(signal.SIGINT, handler)
    timer = threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT))
    started = time.monotonic()
    try:
        timer.start()
        try:
            mesh.sdf(1024, out=str(out))
            stopped = False
        except Interrupted:
            stopped = True
    finally:
        timer.cancel()
        timer.join()
        signal.signal(signal.SIGINT, previous)
    assert stopped, f"the job ran to its end ({time.monotonic() - started:.1f} s)"
    # A job that ran to its end and only then met the handler would have left its store.
    assert os.listdir(tmp_path) == [], "the store was written or left in part"
    assert mesh.sdf(8)["sdf"].shape == (8, 8, 8)
