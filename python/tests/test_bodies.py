"""Bodies against scenes and meshes (SPEC §9) from Python: the engine's methods, the CLI's
files and the service's answers agree; bad bodies raise InputError naming the index and field;
a capsule pushed by -distance·normal leaves the mesh it sank into."""

import numpy as np
import pytest

import closest

from conftest import MESHES, SHAPES, run_cli, serving

BODIES = [
    {"type": "box", "center": [0, 2.5, 0], "half_extents": [0.5, 0.5, 0.5], "rotation": [0, 0, 0, 1]},
    {"type": "capsule", "a": [2.2, 0, 0], "b": [2.8, 0, 0], "radius": 0.25},
    {"type": "ellipsoid", "center": [0, 0, -3.5], "radii": [1, 0.5, 0.75], "rotation": [0, 0, 0, 1]},
    {"type": "cylinder", "a": [-3, 0, 2], "b": [-3, 0, 3], "radius": 0.5},
]
FIELDS = ["distance", "point_body", "point_target", "normal", "shape"]
# Bodies other than spheres face no torus (not convex): SPEC §9 as the guide decides it.
TARGETS = [s for s in SHAPES if s["type"] != "torus"]


def test_scene_bodies_find_their_nearest_shapes(engine):
    scene = engine.scene(TARGETS)
    got = scene.contacts(bodies=BODIES)
    assert list(got) == FIELDS
    assert got["distance"].dtype == np.float32 and got["shape"].dtype == np.int32
    assert got["point_body"].shape == (len(BODIES), 3)
    # The capsule lies inside the aabb (x in 2..3), 0.25 deep at least to its faces' nearest.
    assert got["shape"][1] == 1 and got["distance"][1] < 0
    # The ellipsoid's bottom (z = -4.25) is 0.25 below the plane z = -4: the half-space below.
    assert got["shape"][2] == 3 and abs(got["distance"][2] + 0.25) < 1e-5
    # Paired: body i against shape i only; fields select the arrays.
    bodies = BODIES + [BODIES[0]] * (len(TARGETS) - len(BODIES))
    paired = scene.contacts(bodies=bodies, paired=True, fields="distance,shape")
    assert list(paired) == ["distance", "shape"]
    assert list(paired["shape"]) == list(range(len(TARGETS)))


def test_bodies_from_python_the_cli_and_the_service_agree(engine, cli, tmp_path):
    import json
    scene_path, bodies_path = tmp_path / "scene.json", tmp_path / "bodies.json"
    scene_path.write_text(json.dumps({"shapes": TARGETS}))
    bodies_path.write_text(json.dumps({"shapes": BODIES}))
    local = engine.scene(str(scene_path)).contacts(bodies=str(bodies_path))
    run_cli(cli, "contacts", "--shapes", scene_path, "--bodies", bodies_path,
            "--out", tmp_path / "c.npz")
    with np.load(tmp_path / "c.npz") as files:
        for name in FIELDS:
            np.testing.assert_array_equal(files[name], local[name])
    with serving(cli) as url:
        client = closest.Client(url)
        remote = client.scene("s", TARGETS).contacts(bodies=BODIES)
        for name in FIELDS:
            np.testing.assert_array_equal(remote[name], local[name])
        bunny = client.mesh("bunny", MESHES / "stanford-bunny.obj")
        ball = [{"type": "sphere", "center": [0.3, 0.1, 0.0], "radius": 0.01}]
        here = engine.mesh(MESHES / "stanford-bunny.obj").contacts(bodies=ball)
        there = bunny.contacts(bodies=ball)
        np.testing.assert_array_equal(here["distance"], there["distance"])


def test_a_capsule_sunk_into_a_mesh_is_pushed_out_by_its_contact(engine):
    """Collision response: push by -distance·normal until the capsule separates."""
    bunny = engine.mesh(MESHES / "stanford-bunny.obj")
    # A capsule lying on the surface below an outside point, sunk by half its radius.
    hit = bunny.query(np.array([[0.0, 0.3, 0.0]]), sign="pseudonormal")
    q, n = hit["point"][0].astype(np.float64), hit["normal"][0].astype(np.float64)
    along = np.cross(n, [1.0, 0.0, 0.0])
    along /= np.linalg.norm(along)
    radius = 0.004
    a, b = q + n * radius * 0.5 - along * 0.005, q + n * radius * 0.5 + along * 0.005
    first = None
    for _ in range(20):
        capsule = {"type": "capsule", "a": list(a), "b": list(b), "radius": radius}
        got = bunny.contacts(bodies=[capsule])
        d, normal = float(got["distance"][0]), got["normal"][0].astype(np.float64)
        first = d if first is None else first
        if d >= -1e-6:
            break
        a, b = a - d * normal, b - d * normal
    assert first < 0, first
    assert d >= -1e-6, "the capsule never separated"
    assert d < 1e-3


@pytest.mark.hostile
def test_bad_bodies_raise_input_errors_naming_index_and_field(engine):
    scene = engine.scene(TARGETS)
    with pytest.raises(closest.InputError, match=r"bodies: shape 1.*`type`.*plane"):
        scene.contacts(bodies=[BODIES[0], {"type": "plane", "normal": [0, 0, 1], "offset": 0}])
    with pytest.raises(closest.InputError, match=r"bodies: shape 0.*half_extents"):
        scene.contacts(bodies=[{"type": "box", "center": [0, 0, 0]}])
    with pytest.raises(closest.InputError, match=r"fields"):
        scene.contacts(bodies=BODIES, fields="depth")
    with pytest.raises(closest.InputError, match=r"as many targets as bodies"):
        scene.contacts(bodies=BODIES, paired=True)
    with pytest.raises(closest.InputError, match=r"spheres, or bodies"):
        scene.contacts(np.zeros((1, 4), np.float32), bodies=BODIES)
    ring = engine.scene([{"type": "torus", "center": [0, 0, 0], "axis": [0, 0, 1],
                          "major_radius": 2, "minor_radius": 0.5}])
    with pytest.raises(closest.InputError, match=r"shape 0.*torus.*body 0"):
        ring.contacts(bodies=BODIES[:1])
    # Bodies are shapes: a non-finite one is refused as a scene's would be (the engine gives a
    # NaN row to a body it is handed, tests/bodies.rs).
    nan = {"type": "sphere", "center": [float("nan"), 0, 0], "radius": 1}
    with pytest.raises(closest.InputError, match=r"bodies: shape 1.*`center`.*finite"):
        scene.contacts(bodies=[BODIES[0], nan, BODIES[1]])
    # Beyond the body jobs' scale (1e9 from the origin) bodies and targets are refused by index.
    far = {"type": "sphere", "center": [1e20, 0, 0], "radius": 1}
    with pytest.raises(closest.InputError, match=r"bodies: shape 1.*1e9"):
        scene.contacts(bodies=[BODIES[0], far])
    with pytest.raises(closest.InputError, match=r"targets: shape 0.*1e9"):
        engine.scene([far]).contacts(bodies=BODIES[:1])


def test_the_readme_collision_example_settles_the_capsule(engine, tmp_path):
    """README's worked example as scripts/collision_example.py runs it (and draws its PNG): the
    sunk capsule is pushed up out of the terrain and then rests on it."""
    import importlib.util
    from pathlib import Path

    script = Path(__file__).resolve().parents[2] / "scripts" / "collision_example.py"
    spec = importlib.util.spec_from_file_location("collision_example", script)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    example.write_terrain(tmp_path / "terrain.obj")
    terrain = engine.mesh(str(tmp_path / "terrain.obj"))
    a, b, r = np.array([0.0, 1.2, 0.0]), np.array([0.0, 1.9, 0.0]), 0.3
    path = example.settle(terrain, a, b, r)
    assert len(path) >= 2, "the capsule starts sunk"
    rest_a, rest_b = path[-1]
    assert rest_a[1] > a[1] + 0.1, path
    after = terrain.contacts(bodies=[{"type": "capsule", "a": list(rest_a), "b": list(rest_b), "radius": r}])
    assert -1e-5 < float(after["distance"][0]) < 1e-3, after
    example.draw(tmp_path / "collision.png", (a, b), path[-1], r, z=0.0)
    assert (tmp_path / "collision.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
