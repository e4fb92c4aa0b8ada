"""The Python API against the CLI (bit for bit, the same engine) and exact answers."""

import contextlib
import io
import json
import os
import socket
import threading

import numpy as np
import pytest

import closest
from conftest import MESHES, SHAPES, random_points, run_cli

HIT_FIELDS = ["point", "distance", "shape", "normal"]


def npz(path):
    with np.load(path) as data:
        return {k: data[k] for k in data.files}


def assert_same(a, b):
    assert list(a) == list(b)
    for name in a:
        assert a[name].dtype == b[name].dtype, name
        assert a[name].shape == b[name].shape, name
        assert a[name].tobytes() == b[name].tobytes(), name


def test_adapters_and_info(engine):
    adapters = closest.adapters()
    assert adapters and all(set(a) == {"name", "backend", "device_type"} for a in adapters)
    info = engine.info
    assert info["adapter"] in {a["name"] for a in adapters}
    assert info["limits"]["max_storage_buffer_binding_size"] > 0


def test_exact_answers_of_a_sphere(backend):
    scene = backend.scene([{"type": "sphere", "center": [1, 2, 3], "radius": 2}])
    points = np.array([[5, 2, 3], [1, 2, 3.5], [np.inf, 0, 0]], np.float32)
    solid = scene.query(points)
    assert solid["distance"][0] == 2 and solid["distance"][1] == 0
    assert solid["point"][0].tolist() == [3, 2, 3]
    assert solid["shape"].tolist() == [0, 0, -1]
    assert np.isnan(solid["distance"][2]) and np.isnan(solid["normal"][2]).all()
    surface = scene.query(points, mode="surface")
    assert surface["distance"][1] == pytest.approx(-1.5)
    assert surface["normal"][1].tolist() == pytest.approx([0, 0, 1])


@pytest.mark.parametrize("mode", ["solid", "surface"])
def test_scene_query_equals_the_cli(backend, cli, tmp_path, mode):
    points = random_points(5000)
    np.save(tmp_path / "p.npy", points)
    (tmp_path / "scene.json").write_text(json.dumps({"shapes": SHAPES}))
    run_cli(cli, "query", "--shapes", tmp_path / "scene.json", "--points", tmp_path / "p.npy",
            "--mode", mode, "--out", tmp_path / "out.npz")
    want = npz(tmp_path / "out.npz")
    assert_same(backend.scene(SHAPES).query(points, mode=mode), want)
    # numpy's archives of the same points, stored or deflated, C or Fortran ordered, alone or
    # named among others: the CLI reads the same rows.
    np.savez(tmp_path / "stored.npz", points)
    np.savez_compressed(tmp_path / "deflated.npz", sdf=points[:, 0], points=np.asfortranarray(points))
    for archive in ["stored.npz", "deflated.npz"]:
        run_cli(cli, "--chunk-rows", "1024", "query", "--shapes", tmp_path / "scene.json",
                "--points", tmp_path / archive, "--mode", mode, "--out", tmp_path / "again.npz")
        again = npz(tmp_path / "again.npz")
        assert all(np.array_equal(again[k], want[k], equal_nan=True) for k in want), archive
    # A path to the same scene, float64 points: the same answers.
    by_path = backend.scene(str(tmp_path / "scene.json"))
    if backend.kind == "engine":
        assert len(by_path) == len(SHAPES)
    assert_same(by_path.query(points.astype(np.float64), mode=mode), want)


def test_every_field_subset_is_the_full_answers_columns(backend):
    scene = backend.scene(SHAPES)
    points = random_points(3000, seed=2)
    full = scene.query(points)
    for mask in range(1, 16):
        names = [f for k, f in enumerate(HIT_FIELDS) if mask >> k & 1]
        got = scene.query(points, fields=list(reversed(names)))
        assert list(got) == names
        for name in names:
            assert got[name].tobytes() == full[name].tobytes(), (names, name)
    assert list(scene.query(points, fields="shape, distance")) == ["distance", "shape"]


def test_results_are_numpy_arrays_python_owns(backend):
    result = backend.scene(SHAPES).query(random_points(1000))
    for name, array in result.items():
        assert array.flags.c_contiguous and array.flags.writeable, name
        assert len(array) == 1000
    assert result["point"].shape == (1000, 3) and result["point"].dtype == np.float32
    assert result["shape"].dtype == np.int32
    result["distance"][:] = 0  # writable, and freed with the dict


def test_mesh_query_and_sdf_equal_the_cli(backend, cli, tmp_path):
    mesh_path = MESHES / "fandisk.obj"
    mesh = backend.mesh(str(mesh_path))
    if backend.kind == "engine":
        assert len(mesh) == 12946
    rng = np.random.default_rng(3)
    points = rng.uniform(-1.5, 1.5, (4000, 3)).astype(np.float64)
    np.save(tmp_path / "p.npy", points)
    for sign in ["pseudonormal", "winding"]:
        run_cli(cli, "query", "--mesh", mesh_path, "--points", tmp_path / "p.npy", "--sign",
                sign, "--out", tmp_path / "m.npz")
        assert_same(mesh.query(points, sign=sign), npz(tmp_path / "m.npz"))
    run_cli(cli, "query", "--mesh", mesh_path, "--points", tmp_path / "p.npy", "--out",
            tmp_path / "u.npz")
    assert_same(mesh.query(points), npz(tmp_path / "u.npz"))
    run_cli(cli, "sdf", mesh_path, "--res", "20,21,22", "--pad", "0.2", "--out", tmp_path / "g.npz")
    grid = mesh.sdf((20, 21, 22), pad=0.2)
    assert_same(grid, npz(tmp_path / "g.npz"))
    assert grid["sdf"].shape == (20, 21, 22)


def test_off_meshes_answer_as_the_same_obj(backend, tmp_path):
    # ModelNet's OFF files (their counts run on to the keyword), locally and through the service.
    corners = "0 0 0\n1 0 0\n0 1 0\n0 0 1\n"
    (tmp_path / "t.off").write_text("OFF4 4 0\n" + corners + "3 0 2 1\n3 0 1 3\n3 0 3 2\n3 1 2 3\n")
    (tmp_path / "t.obj").write_text("".join(f"v {line}\n" for line in corners.splitlines())
                                    + "f 1 3 2\nf 1 2 4\nf 1 4 3\nf 2 3 4\n")
    points = random_points(500, seed=5, spread=2.0)
    got = backend.mesh(str(tmp_path / "t.off")).query(points, sign="pseudonormal")
    want = backend.mesh(str(tmp_path / "t.obj")).query(points, sign="pseudonormal")
    for name in want:
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)


def test_gltf_meshes_answer_as_the_same_obj(backend, tmp_path):
    # Objaverse ships .glb: the scene's nodes placed (here one moved by 2 along x), locally and
    # through the service; the same as a .gltf whose buffer is a base64 data: URI.
    import base64
    import struct

    corners = [(0, 0, 0), (1, 0, 0), (0, 1, 0), (0, 0, 1)]
    faces = [(0, 2, 1), (0, 1, 3), (0, 3, 2), (1, 2, 3)]
    binary = struct.pack("<12f", *[c for p in corners for c in p]) + struct.pack("<12H", *[i for f in faces for i in f])
    document = {
        "asset": {"version": "2.0"}, "scene": 0, "scenes": [{"nodes": [0]}],
        "nodes": [{"mesh": 0, "translation": [2, 0, 0]}],
        "meshes": [{"primitives": [{"attributes": {"POSITION": 0}, "indices": 1}]}],
        "accessors": [{"bufferView": 0, "componentType": 5126, "count": 4, "type": "VEC3"},
                      {"bufferView": 1, "componentType": 5123, "count": 12, "type": "SCALAR"}],
        "bufferViews": [{"buffer": 0, "byteLength": 48}, {"buffer": 0, "byteOffset": 48, "byteLength": 24}],
        "buffers": [{"byteLength": len(binary)}],
    }
    text = json.dumps(document).encode()
    text += b" " * (-len(text) % 4)
    chunks = struct.pack("<II", len(text), 0x4E4F534A) + text + struct.pack("<II", len(binary), 0x004E4942) + binary
    (tmp_path / "t.glb").write_bytes(b"glTF" + struct.pack("<II", 2, 12 + len(chunks)) + chunks)
    document["buffers"][0]["uri"] = "data:application/octet-stream;base64," + base64.b64encode(binary).decode()
    (tmp_path / "t.gltf").write_text(json.dumps(document))
    # Its buffer in a file beside it, as Sketchfab's scene.bin (the client packs it as .glb).
    (tmp_path / "t data.bin").write_bytes(binary)
    document["buffers"][0]["uri"] = "t%20data.bin"
    (tmp_path / "beside.gltf").write_text(json.dumps(document))
    (tmp_path / "t.obj").write_text("".join(f"v {x + 2} {y} {z}\n" for x, y, z in corners)
                                    + "".join(f"f {a + 1} {b + 1} {c + 1}\n" for a, b, c in faces))
    points = random_points(500, seed=7, spread=3.0)
    want = backend.mesh(str(tmp_path / "t.obj")).query(points, sign="pseudonormal")
    for name in ("t.glb", "t.gltf", "beside.gltf"):
        got = backend.mesh(str(tmp_path / name)).query(points, sign="pseudonormal")
        for field in want:
            np.testing.assert_array_equal(got[field], want[field], err_msg=f"{name} {field}")
    (tmp_path / "broken.glb").write_bytes(b"glTF" + struct.pack("<II", 1, 12))
    with pytest.raises(closest.InputError, match="version 1"):
        backend.mesh(str(tmp_path / "broken.glb"))


def test_trimesh_and_open3d_meshes_are_read_by_their_arrays(engine, server):
    # Objects as trimesh (`vertices`, `faces`) and Open3D (`vertices`, `triangles`) hold
    # meshes: read without a file, with the answers of the file they came from.
    path = str(MESHES / "fandisk.obj")
    text = open(path).read().split("\n")
    vertices = np.array([l.split()[1:4] for l in text if l.startswith("v ")], np.float64)
    faces = np.array([[int(w.split("/")[0]) - 1 for w in l.split()[1:4]] for l in text if l.startswith("f ")])

    class Trimesh:
        pass

    class TriangleMesh:
        pass

    tri, o3d = Trimesh(), TriangleMesh()
    tri.vertices, tri.faces = vertices, faces
    o3d.vertices, o3d.triangles = vertices.tolist(), faces.tolist()
    points = random_points(2000, seed=9, spread=3.0)
    want = engine.mesh(path).query(points, sign="pseudonormal")
    client = closest.Client(server)
    for held in (tri, o3d):
        for where, got in (("engine", engine.mesh(held)), ("client", client.mesh("held", held))):
            got = got.query(points, sign="pseudonormal")
            for name in want:
                np.testing.assert_array_equal(got[name], want[name], err_msg=f"{type(held).__name__} {where} {name}")
    d = closest.mesh_distance(tri, path, samples=1000, engine=engine)
    assert d["hausdorff"] < 1e-5 * 30  # the same surface: f32 rounding of fandisk (30 across)
    with pytest.raises(closest.InputError, match="path: expected None, a path to a mesh file, or a mesh"):
        engine.mesh(3)

    class Broken:
        vertices = [[0, 0], [1, 1]]
        faces = [[0, 1, 2]]

    with pytest.raises(closest.InputError, match=r"shape \(V, 3\)"):
        client.mesh("broken", Broken())


def test_indexed_mesh_records_give_the_cli_answers(cli, tmp_path):
    # The CLI's --mesh-records, from Python: indexed records (fewer bytes a triangle) answer as
    # the CLI does with the same option, within SPEC §3 of packed records.
    indexed = closest.Engine(mesh_records="indexed")
    mesh_path = MESHES / "stanford-bunny.obj"
    mesh = indexed.mesh(str(mesh_path))
    assert mesh.records == "indexed"
    points = random_points(3000, seed=5, spread=0.15)
    np.save(tmp_path / "p.npy", points)
    run_cli(cli, "--mesh-records", "indexed", "query", "--mesh", mesh_path, "--points",
            tmp_path / "p.npy", "--sign", "pseudonormal", "--out", tmp_path / "m.npz")
    answers = mesh.query(points, sign="pseudonormal")
    assert_same(answers, npz(tmp_path / "m.npz"))
    packed = closest.Engine(mesh_records="packed").mesh(str(mesh_path))
    assert packed.records == "packed"
    reference = packed.query(points, sign="pseudonormal")
    np.testing.assert_allclose(answers["distance"], reference["distance"], rtol=0, atol=1e-6)


def test_mesh_from_arrays_is_the_exact_cube(engine):
    vertices = np.array([[x, y, z] for x in (0, 1) for y in (0, 1) for z in (0, 1)], np.float64)
    # Outward-wound faces of the unit cube (vertex k = 4x + 2y + z).
    quads = [(0, 1, 3, 2), (4, 6, 7, 5), (0, 4, 5, 1), (2, 3, 7, 6), (0, 2, 6, 4), (1, 5, 7, 3)]
    triangles = np.array([t for a, b, c, d in quads for t in ((a, b, c), (a, c, d))], np.int64)
    cube = engine.mesh(vertices=vertices, triangles=triangles)
    points = np.array([[0.5, 0.5, 0.25], [2, 0.5, 0.5], [0.5, -1, 0.5]], np.float32)
    for sign in ["pseudonormal", "winding"]:
        d = cube.query(points, sign=sign, fields="distance")["distance"]
        assert d.tolist() == pytest.approx([-0.25, 1, 1], abs=1e-6)
    grid = cube.sdf(3, bounds=[0, 0, 0, 1, 1, 1])
    assert grid["origin"].tolist() == [0, 0, 0] and grid["spacing"].tolist() == [0.5] * 3
    assert grid["sdf"][1, 1, 1] == pytest.approx(-0.5)
    # The corners as two rows (trimesh's `mesh.bounds`) are the same box.
    corners = cube.sdf(3, bounds=np.array([[0, 0, 0], [1, 1, 1]], np.float64))
    assert corners["sdf"].tobytes() == grid["sdf"].tobytes()


def test_contacts_paired_and_segments_equal_the_cli(backend, engine, cli, tmp_path):
    (tmp_path / "scene.json").write_text(json.dumps({"shapes": SHAPES}))
    rng = np.random.default_rng(4)
    spheres = np.concatenate([random_points(2000, seed=5), rng.uniform(0, 1, (2000, 1))], 1)
    spheres = spheres.astype(np.float32)
    np.save(tmp_path / "s.npy", spheres)
    run_cli(cli, "contacts", "--shapes", tmp_path / "scene.json", "--spheres", tmp_path / "s.npy",
            "--out", tmp_path / "c.npz")
    assert_same(backend.scene(SHAPES).contacts(spheres), npz(tmp_path / "c.npz"))

    a = rng.uniform(-3, 3, (3000, 2, 3))
    b = rng.uniform(-3, 3, (3000, 2, 3))
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", b)
    run_cli(cli, "segments", "--a", tmp_path / "a.npy", "--b", tmp_path / "b.npy",
            "--fields", "s,t,distance", "--out", tmp_path / "seg.npz")
    assert_same(backend.segment_pairs(a, b, fields="s,t,distance"), npz(tmp_path / "seg.npz"))

    shapes = [SHAPES[k % len(SHAPES)] for k in range(900)]
    (tmp_path / "paired.json").write_text(json.dumps({"shapes": shapes}))
    points = random_points(900, seed=6)
    np.save(tmp_path / "pp.npy", points)
    run_cli(cli, "query", "--paired", "--shapes", tmp_path / "paired.json", "--points",
            tmp_path / "pp.npy", "--out", tmp_path / "pq.npz")
    assert_same(backend.query_paired(shapes, points), npz(tmp_path / "pq.npz"))
    # A path to the scene file and float64 points answer the same (converted once to f32).
    assert_same(backend.query_paired(tmp_path / "paired.json", points.astype(np.float64)),
                npz(tmp_path / "pq.npz"))


def test_no_loader_message_when_xdg_runtime_dir_is_unset():
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "XDG_RUNTIME_DIR"}
    done = subprocess.run([sys.executable, "-c", "import closest; closest.Engine().info"],
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "XDG_RUNTIME_DIR" not in done.stderr, done.stderr


def test_client_errors_and_targets(server, engine):
    client = closest.Client(server)
    assert client.info["status"] == "ok"
    scene = client.scene("errors", SHAPES)
    assert any(t["name"] == "errors" for t in client.targets())
    with pytest.raises(closest.InputError, match="fields"):
        scene.query(random_points(5), fields="depth")
    with pytest.raises(closest.InputError, match="shape 0"):
        client.scene("broken", [{"type": "sphere", "center": [0, 0, 0]}])
    with pytest.raises(closest.InputError, match="no scene named"):
        client.scene("missing").query(random_points(5))
    with pytest.raises(closest.InputError, match="points"):
        scene.query([[0, 0, 0]])
    # The client's own conversions raise InputError too (they raised TypeError, ValueError).
    with pytest.raises(closest.InputError, match="shapes: cannot send a object"):
        client.scene("odd", [{"type": "sphere", "center": [0, 0, 0], "radius": object()}])
    with pytest.raises(closest.InputError, match="pad: expected numbers"):
        client.mesh("any").sdf(4, pad="wide")
    with pytest.raises(closest.InputError, match="path: cannot read"):
        client.mesh("gone", "/nonexistent/gone.obj")
    with pytest.raises(closest.InputError, match="shapes: cannot read"):
        client.scene("gone", "/nonexistent/gone.json")
    looped = []
    looped.append(looped)
    deep = []
    for _ in range(100_000):
        deep = [deep]
    # Arguments the client read itself (TypeError escaped, or an empty name reached the
    # service as an unknown route, or an extension-less path as its format).
    for call, needle in [
        (lambda: scene.query(random_points(5), fields=7), "fields.*got 7"),
        (lambda: scene.query(random_points(5), fields=[1, 2]), "fields"),
        (lambda: closest.Client(server, timeout="soon"), "timeout"),
        (lambda: closest.Client(server, timeout=1e300), "timeout"),  # OverflowError escaped
        (lambda: client.delete(["scene"], "errors"), "kind"),  # TypeError: unhashable
        (lambda: client.scene("", SHAPES), "name"),
        (lambda: client.mesh("m", MESHES / "SOURCES.md"), "path.*no .obj"),
        # json.dumps' ValueError, RecursionError and TypeError escaped.
        (lambda: client.scene("loop", looped), "shapes: cannot be written.*[Cc]ircular"),
        (lambda: client.scene("deep", [deep]), "shapes: cannot be written"),
        (lambda: client.scene("keys", [{("t",): 1}]), "shapes: cannot be written"),
        (lambda: client.query_paired([deep], random_points(1)), "shapes: cannot be written"),
    ]:
        with pytest.raises(closest.InputError, match=needle):
            call()
    # The service names its query parameters, not the CLI's flags.
    with pytest.raises(closest.InputError, match="^pad must be") as info:
        client.mesh("tiny", MESHES / "fandisk.obj").sdf(4, pad=float("nan"))
    assert "--" not in str(info.value)
    # Bounds as the engine takes them: six numbers or (2, 3) corners.
    tiny = client.mesh("tiny")
    corners = [[-1.0, -1.0, -1.0], [1.0, 1.0, 1.0]]
    np.testing.assert_array_equal(tiny.sdf(4, bounds=corners)["sdf"],
                                  tiny.sdf(4, bounds=[-1.0, -1.0, -1.0, 1.0, 1.0, 1.0])["sdf"])
    with pytest.raises(closest.InputError, match="bounds"):
        tiny.sdf(4, bounds=[[0, 0], [1, 1]])
    client.delete("mesh", "tiny")
    # No server there, or no address at all (URLError and ValueError escaped).
    with pytest.raises(closest.GpuError, match="did not answer"):
        closest.Client("http://127.0.0.1:9", timeout=10).info
    with pytest.raises(closest.InputError, match="url"):
        closest.Client("not an address").info
    # An address without its scheme, or of another scheme: refused when the client is made
    # (urllib took "localhost:7341" for scheme "localhost", and every call said "did not
    # answer" as if the service were down).
    for url in ["localhost:7341", "127.0.0.1:7341", "ftp://127.0.0.1", "http://", ""]:
        with pytest.raises(closest.InputError, match="url: expected an http"):
            closest.Client(url)
    # Tokens as the service's --token-file takes them: a file's newline dropped; a line break
    # inside reached urllib and said "did not answer".
    assert closest.Client(server, token="s3cret\n").token == "s3cret"
    for token in ["a\nb", "sec ret", "t\u00f6k", "", 5]:
        with pytest.raises(closest.InputError, match="token: expected"):
            closest.Client(server, token=token)
    client.delete("scene", "errors")
    assert all(t["name"] != "errors" for t in client.targets())


def _answers(raw):
    """An HTTP server on loopback that is not closest: every connection gets `raw` bytes."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    stop = threading.Event()

    def serve():
        while not stop.is_set():
            try:
                connection, _ = listener.accept()
            except OSError:
                continue
            with connection:
                connection.settimeout(2)
                with contextlib.suppress(OSError):
                    connection.recv(1 << 16)
                    connection.sendall(raw)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return f"http://127.0.0.1:{listener.getsockname()[1]}", stop, thread, listener


def _npz_bytes(**arrays):
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()


def test_a_client_facing_a_server_that_is_not_closest_raises_gpu_error():
    # A server cut off mid-answer, a proxy's or another program's answer: http.client's
    # exceptions (IncompleteRead, BadStatusLine, LineTooLong) and numpy's EOFError escaped,
    # and an answer of other rows than the request's was returned as the answer.
    def ok(body, kind=b"application/octet-stream"):
        return b"HTTP/1.1 200 OK\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n%s" % (
            kind, len(body), body)

    points = random_points(4)
    calls = {
        "info": lambda c: c.info,
        "targets": lambda c: c.targets(),
        "scene": lambda c: c.scene("s", SHAPES),
        "query": lambda c: c.scene("s").query(points),
        "contacts": lambda c: c.scene("s").contacts(np.zeros((4, 4), np.float32)),
        "mesh query": lambda c: c.mesh("m").query(points),
        "sdf": lambda c: c.mesh("m").sdf(4),
        "segments": lambda c: c.segment_pairs(np.zeros((4, 2, 3)), np.zeros((4, 2, 3))),
    }
    answers = {
        "garbage": b"HELLO\r\n\r\n",
        "cut off": b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\nPK\x03\x04",
        "long header": b"HTTP/1.1 200 OK\r\nX: " + b"a" * 70000 + b"\r\n\r\n",
        "bad chunks": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nZZ\r\n",
        "empty": ok(b""),
        "wrong rows": ok(_npz_bytes(distance=np.zeros(3, np.float32))),
        "a number": ok(b"5", b"application/json"),
    }
    for answer, raw in answers.items():
        url, stop, thread, listener = _answers(raw)
        try:
            client = closest.Client(url, timeout=10)
            for name, call in calls.items():
                if answer == "a number" and name not in ("info", "targets", "scene"):
                    continue
                with pytest.raises(closest.GpuError, match="the service at .* (did not )?answer"):
                    call(client)
        finally:
            stop.set()
            thread.join(10)
            listener.close()


def test_auto_sign_names_its_method_and_is_the_sdf_default(engine):
    # fandisk is closed and oriented; the bunny has holes (SPEC §8: auto picks winding there).
    fandisk = engine.mesh(str(MESHES / "fandisk.obj"))
    assert fandisk.auto_sign == ("pseudonormal", "closed and consistently oriented")
    bunny = engine.mesh(str(MESHES / "stanford-bunny.obj"))
    method, reason = bunny.auto_sign
    assert method == "winding" and "open edge" in reason, reason
    by_default = bunny.sdf(12)["sdf"]
    np.testing.assert_array_equal(by_default, bunny.sdf(12, sign="winding")["sdf"])
    np.testing.assert_array_equal(bunny.sdf(12, sign="auto")["sdf"], by_default)
    points = random_points(500, seed=8, spread=0.1)
    np.testing.assert_array_equal(bunny.query(points, sign="auto")["distance"],
                                  bunny.query(points, sign="winding")["distance"])
    with pytest.raises(closest.InputError, match="auto, none, pseudonormal, winding"):
        bunny.query(points, sign="signed")


def test_band_and_sparse_grids_match_the_dense_grid(engine):
    mesh = engine.mesh(str(MESHES / "fandisk.obj"))
    dense = mesh.sdf(40)
    width = 2 * dense["spacing"].max()
    band = mesh.sdf(40, band=2)
    np.testing.assert_array_equal(band["origin"], dense["origin"])
    d, b = dense["sdf"], band["sdf"]
    tolerance = 1e-5 * 3.0 * 1.2 * 10  # SPEC §3 on fandisk's coordinates (|x| < 3)
    inside = np.abs(d) < width - tolerance
    outside = np.abs(d) > width + tolerance
    assert inside.sum() > 1000
    np.testing.assert_allclose(b[inside], d[inside], rtol=0, atol=tolerance)
    np.testing.assert_array_equal(b[outside], np.where(d[outside] < 0, -width, width).astype(np.float32))
    sparse = mesh.sdf_sparse(40, band=2)
    assert sparse["index"].dtype == np.int32 and sparse["index"].shape[1] == 3
    assert tuple(sparse["shape"]) == (40, 40, 40) and sparse["band"] == pytest.approx(width)
    i, j, k = sparse["index"].T
    np.testing.assert_array_equal(sparse["sdf"], b[i, j, k])
    assert np.all(np.abs(sparse["sdf"]) <= width)
    assert len(sparse["sdf"]) >= inside.sum()
    for bad in [dict(band=0), dict(band=float("nan")), dict(band=1, band_units="parsecs")]:
        with pytest.raises(closest.InputError, match="band"):
            mesh.sdf(8, **bad)


def test_zarr_stores_read_back_in_zarr_and_xarray_as_the_grid(engine, cli, tmp_path):
    import xarray  # test requirements (python/pyproject.toml): never skipped
    import zarr

    path = MESHES / "fandisk.obj"
    mesh = engine.mesh(str(path))
    dense = mesh.sdf((40, 33, 21))
    store = tmp_path / "dense.zarr"
    written = mesh.sdf((40, 33, 21), out=str(store), chunk=16)
    assert "sdf" not in written and written["sign"] == "pseudonormal"
    group = zarr.open_group(str(store), mode="r")
    array = group["sdf"]
    assert array.shape == (40, 33, 21) and array.dtype == np.float32 and array.chunks == (16, 16, 16)
    np.testing.assert_array_equal(array[:], dense["sdf"])
    np.testing.assert_array_equal(group.attrs["origin"], dense["origin"])
    np.testing.assert_array_equal(group.attrs["spacing"], dense["spacing"])
    assert group.attrs["band"] is None and group.attrs["sign"] == "pseudonormal"
    dataset = xarray.open_zarr(str(store), consolidated=False)
    assert dataset["sdf"].dims == ("x", "y", "z")
    np.testing.assert_array_equal(dataset["sdf"].values, dense["sdf"])
    assert dataset["sdf"].attrs["sign"] == "pseudonormal"

    # A band store: chunks all at +W are not written and read back as the fill value; the
    # CLI's store holds the same values.
    band = mesh.sdf(64, band=2)
    width = 2 * band["spacing"].max()
    band_store = tmp_path / "band.zarr"
    mesh.sdf(64, band=2, out=band_store, chunk=16)
    array = zarr.open_array(str(band_store / "sdf"), mode="r")
    assert array.fill_value == np.float32(width)
    assert array.nchunks_initialized < array.nchunks
    np.testing.assert_array_equal(array[:], band["sdf"])
    assert zarr.open_group(str(band_store), mode="r").attrs["band"] == pytest.approx(width)
    cli_store = tmp_path / "cli.zarr"
    run_cli(cli, "sdf", path, "--res", "64", "--band", "2", "--out", cli_store, "--chunk", "16")
    np.testing.assert_array_equal(zarr.open_array(str(cli_store / "sdf"), mode="r")[:], band["sdf"])

    for bad, message in [(dict(out=str(tmp_path / "g.npz")), "zarr"), (dict(out=str(store), chunk=0), "chunk")]:
        with pytest.raises(closest.InputError, match=message):
            mesh.sdf(8, **bad)
    np.testing.assert_array_equal(zarr.open_array(str(store / "sdf"), mode="r")[:], dense["sdf"])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["band.zarr", "cli.zarr", "dense.zarr"]


def test_mesh_distance_equals_the_cli_and_refuses_other_things(engine, cli, tmp_path):
    a, b = MESHES / "stanford-bunny.obj", MESHES / "fandisk.obj"
    out = tmp_path / "d.npz"
    run_cli(cli, "distance", a, b, "--samples", "2000", "--seed", "4", "--sign", "auto", "--out", out)
    expected = npz(out)
    got = closest.mesh_distance(str(a), b, samples=2000, seed=4, sign="auto", engine=engine)
    for name in ["a_to_b", "b_to_a"]:
        assert got[name].dtype == np.float32
        np.testing.assert_array_equal(got[name], expected[name])
    for name in ["hausdorff", "hausdorff_a_to_b", "hausdorff_b_to_a", "chamfer", "chamfer_squared",
                 "mean_a_to_b", "mean_b_to_a", "mean_squared_a_to_b", "mean_squared_b_to_a"]:
        assert got[name] == pytest.approx(float(expected[name]), rel=1e-12), name
    bunny = engine.mesh(str(a))
    # A mesh and a path: the path opens on the mesh's engine (this raised AttributeError).
    assert bunny.engine.info == engine.info
    mixed = closest.mesh_distance(bunny, b, samples=2000, seed=4, sign="auto")
    np.testing.assert_array_equal(mixed["a_to_b"], got["a_to_b"])
    assert mixed["hausdorff"] == got["hausdorff"]
    same = bunny.distance_to(engine.mesh(str(MESHES / "stanford-bunny.stl")))
    assert same["hausdorff"] < 1e-6
    with pytest.raises(closest.InputError, match="other"):
        bunny.distance_to(str(b))
    with pytest.raises(closest.InputError, match="another Engine"):
        bunny.distance_to(closest.Engine().mesh(str(b)))
    with pytest.raises(closest.InputError, match="sign"):
        bunny.distance_to(bunny, sign="sideways")


def test_training_samples_equal_the_cli_and_repeat_by_seed(engine, cli, tmp_path):
    path = MESHES / "fandisk.obj"
    mesh = engine.mesh(str(path))
    s = mesh.sample(surface=200, near=300, sigma=[0.05, 0.005], uniform=100, seed=9)
    assert s["points"].shape == (600, 3) and s["points"].dtype == np.float32
    assert s["kind"].dtype == np.uint8
    np.testing.assert_array_equal(np.bincount(s["kind"]), [200, 300, 100])
    assert np.all(s["sdf"][:200] == 0)
    np.testing.assert_allclose(np.linalg.norm(s["normal"], axis=1), 1, atol=1e-5)
    again = mesh.sample(surface=200, near=300, sigma=[0.05, 0.005], uniform=100, seed=9)
    for key in s:
        np.testing.assert_array_equal(s[key], again[key])
    other = mesh.sample(surface=200, near=300, sigma=[0.05, 0.005], uniform=100, seed=10)
    assert not np.array_equal(other["points"], s["points"])
    run_cli(cli, "sample", path, "--surface", "200", "--near", "300", "--sigma", "0.05,0.005",
            "--uniform", "100", "--seed", "9", "--out", tmp_path / "s.npz")
    written = np.load(tmp_path / "s.npz")
    for key in s:
        np.testing.assert_array_equal(s[key], written[key])
    with pytest.raises(closest.InputError, match="^sigma takes"):
        mesh.sample(near=10, sigma=0)
    # A result too large to hold is refused before any work, not an out-of-memory kill.
    with pytest.raises(closest.InputError, match="more than the"):
        mesh.sample(uniform=4_000_000_000)


def test_paths_may_be_bytes_as_open_takes_them(engine, server, tmp_path):
    # A folder listed with os.listdir(b"...") gives bytes; str, bytes and PathLike alike.
    fandisk = MESHES / "fandisk.obj"
    as_bytes = os.fsencode(fandisk)
    points = np.array([[0.1, 0.2, 0.3], [2.0, 0.0, 0.0]], np.float32)
    expected = engine.mesh(str(fandisk)).query(points)["distance"]
    np.testing.assert_array_equal(engine.mesh(as_bytes).query(points)["distance"], expected)
    scene_path = tmp_path / "scene.json"
    scene_path.write_text('{"shapes": [{"type": "sphere", "center": [0, 0, 0], "radius": 1}]}')
    # Solid mode: the first point is inside the ball.
    assert engine.scene(os.fsencode(scene_path)).query(points)["distance"].tolist() == [0.0, 1.0]
    out = tmp_path / "g.zarr"
    engine.mesh(as_bytes).sdf(8, out=os.fsencode(out))
    assert out.is_dir()
    same = closest.mesh_distance(as_bytes, as_bytes, engine=engine)
    assert same["hausdorff"] <= 1e-6  # f32 rounding of a mesh against itself
    remote = closest.Client(server).mesh("bytes", as_bytes)
    np.testing.assert_array_equal(remote.query(points)["distance"], expected)


def far_scene(by):
    """A sphere, a box, a capsule and a ground plane moved by `by` (SPEC §1 fields)."""
    x, y, z = by
    at = lambda p: [p[0] + x, p[1] + y, p[2] + z]  # noqa: E731
    return [
        {"type": "sphere", "center": at([0, 0, 0]), "radius": 1},
        {"type": "box", "center": at([3, 1, 0]), "half_extents": [1, 0.5, 2],
         "rotation": [0.1, 0.2, 0.3, 0.9]},
        {"type": "capsule", "a": at([-4, 0, 0]), "b": at([-4, 3, 1]), "radius": 0.5},
        {"type": "plane", "normal": [0, 1, 0], "offset": y - 2},
    ]


def test_a_scene_far_from_the_origin_answers_as_it_does_there(backend):
    # Answered in its own frame (shapes and float64 points moved there before rounding to
    # f32): 10^7 from the origin the distances are those at the origin, where f32's ±0.5
    # there moved each before.
    rng = np.random.default_rng(5)
    relative = rng.uniform(-6, 6, (300, 3))
    by = np.array([1.1e7, -0.7e7, 0.3e7])
    bodies = lambda shift: [{"type": "capsule", "a": list(shift + [0.5, 1.6, 0.2]),  # noqa: E731
                             "b": list(shift + [1.5, 1.7, 0.1]), "radius": 0.4}]
    got = []
    for shift in (np.zeros(3), by):
        scene = backend.scene(far_scene(shift))
        points = relative + shift
        spheres = np.column_stack([points, np.full(len(points), 0.25)])
        got.append((scene.query(points, fields="distance,shape"),
                    scene.contacts(spheres, fields="depth,shape"),
                    scene.contacts(bodies=bodies(shift), fields="distance,shape")))
    for near, far in zip(*got):
        assert list(near) == list(far)
        np.testing.assert_array_equal(near["shape"], far["shape"])
        first = next(iter(near))
        np.testing.assert_allclose(far[first], near[first], rtol=0, atol=1e-4)
