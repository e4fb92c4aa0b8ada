"""The GIL is released while the device works: 8 Python threads share one engine, one mesh
and one scene, and every thread gets the single-thread answers."""

import threading

import numpy as np

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
