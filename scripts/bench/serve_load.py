#!/usr/bin/env python3
"""Load on `closest serve`, beside the same points in one in-process call, same run.

Starts the release server on a free loopback port, makes the bunny and a 10,000-shape scene
resident, then for 1, 8 and 64 concurrent clients (threads, each with one keep-alive
connection) sends requests of 1,000 and 100,000 points; reports rows/s and p50/p99 latency,
and the rate of one in-process `Engine` call on all the points of the run. Bounded: each
configuration sends a fixed number of requests and stops after 120 s whatever.

Usage: python scripts/bench/serve_load.py   (after `cargo build --release` and `pip install ./python`)
"""

import http.client
import io
import json
import pathlib
import subprocess
import threading
import time

import numpy as np

import closest

ROOT = pathlib.Path(__file__).resolve().parents[2]
MESH = ROOT.parent / "shared" / "data" / "meshes" / "stanford-bunny.obj"
SERVER = ROOT / "target" / "release" / "closest"
TIME_LIMIT = 120.0


def scene_shapes(count, rng):
    shapes = []
    for k in range(count):
        c = rng.uniform(-100, 100, 3).tolist()
        if k % 3 == 0:
            shapes.append({"type": "sphere", "center": c, "radius": float(rng.uniform(0.2, 2))})
        elif k % 3 == 1:
            h = rng.uniform(0.2, 2, 3)
            shapes.append({"type": "aabb", "min": (np.array(c) - h).tolist(),
                           "max": (np.array(c) + h).tolist()})
        else:
            shapes.append({"type": "capsule", "a": c, "b": (np.array(c) + rng.uniform(-2, 2, 3)).tolist(),
                           "radius": float(rng.uniform(0.1, 1))})
    return shapes


def npy(points):
    buffer = io.BytesIO()
    np.save(buffer, points)
    return buffer.getvalue()


def run_clients(address, path, bodies, clients):
    """`clients` threads share `bodies` round-robin; latencies of every request."""
    host, port = address.split(":")
    latencies = [[] for _ in range(clients)]
    deadline = time.perf_counter() + TIME_LIMIT

    def client(k):
        connection = http.client.HTTPConnection(host, int(port), timeout=600)
        for body in bodies[k::clients]:
            if time.perf_counter() > deadline:
                break
            started = time.perf_counter()
            connection.request("POST", path, body=body)
            response = connection.getresponse()
            data = response.read()
            assert response.status == 200, data[:200]
            latencies[k].append(time.perf_counter() - started)
        connection.close()

    threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.perf_counter() - started, [x for per in latencies for x in per]


def main():
    rng = np.random.default_rng(1)
    process = subprocess.Popen([str(SERVER), "serve", "--listen", "127.0.0.1:0"],
                               stderr=subprocess.PIPE, text=True)
    try:
        line = process.stderr.readline()
        address = line.strip().rsplit("//", 1)[1]
        threading.Thread(target=process.stderr.read, daemon=True).start()
        client = closest.Client("http://" + address)
        client.mesh("bunny", str(MESH))
        shapes = scene_shapes(10_000, rng)
        client.scene("scene", shapes)
        engine = closest.Engine()
        local = {"bunny": engine.mesh(str(MESH)), "scene": engine.scene(shapes)}
        boxes = {"bunny": ([-0.11, 0.02, -0.08], [0.07, 0.2, 0.06]), "scene": ([-100] * 3, [100] * 3)}
        print(f"{engine.info['adapter']}; server and clients on the same machine")
        print(f"{'target':>7} {'rows/req':>9} {'clients':>8} {'requests':>9} {'served rows/s':>14}"
              f" {'p50 ms':>8} {'p99 ms':>8} {'in-process rows/s':>18} {'served/in-process':>18}")
        for target, path in [("bunny", "/v1/meshes/bunny/query"), ("scene", "/v1/scenes/scene/query")]:
            lo, hi = boxes[target]
            for rows, requests in [(1_000, 640), (100_000, 16)]:
                for clients in [1, 8, 64]:
                    count = max(requests, clients)
                    points = [rng.uniform(lo, hi, (rows, 3)).astype(np.float32) for _ in range(count)]
                    bodies = [npy(p) for p in points]
                    seconds, latencies = run_clients(address, path, bodies, clients)
                    served = len(latencies) * rows / seconds
                    everything = np.concatenate(points[: len(latencies)])
                    started = time.perf_counter()
                    local[target].query(everything)
                    in_process = len(everything) / (time.perf_counter() - started)
                    p50, p99 = np.percentile(latencies, [50, 99]) * 1e3
                    print(f"{target:>7} {rows:>9} {clients:>8} {len(latencies):>9} {served:>14.0f}"
                          f" {p50:>8.1f} {p99:>8.1f} {in_process:>18.0f} {served / in_process:>18.2f}")
        metrics = client._request("GET", "/metrics").decode()
        batches = [l for l in metrics.splitlines() if l.startswith("closest_batches_total")]
        print(batches[0] if batches else "")
    finally:
        process.terminate()
        process.wait(timeout=60)


if __name__ == "__main__":
    main()
