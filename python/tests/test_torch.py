"""closest.torch: tensors in and out through DLPack, and the distance as an autograd function."""

import os

import numpy as np
import pytest

if os.environ.get("CLOSEST_TEST_TORCH") == "required":
    import torch  # the test command installs torch (python/pyproject.toml): never skipped there
else:
    torch = pytest.importorskip("torch")

import closest  # noqa: E402
import closest.torch as closest_torch  # noqa: E402
from conftest import MESHES  # noqa: E402

CUBE_VERTICES = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)], np.float64)
# Outward-wound faces of [-1, 1]³ (vertex index = 4x + 2y + z with 0/1 for -1/1).
CUBE_TRIANGLES = np.array(
    [
        [0, 1, 3], [0, 3, 2], [4, 6, 7], [4, 7, 5],  # x = -1, x = 1
        [0, 4, 5], [0, 5, 1], [2, 3, 7], [2, 7, 6],  # y = -1, y = 1
        [0, 2, 6], [0, 6, 4], [1, 5, 7], [1, 7, 3],  # z = -1, z = 1
    ],
    np.int64,
)


@pytest.fixture(scope="module")
def cube(engine):
    return engine.mesh(vertices=CUBE_VERTICES, triangles=CUBE_TRIANGLES)


def away_from_the_medial_axis(count, seed):
    """Points whose nearest point on the cube is unique with room to spare: outside the cube
    (its distance is C¹ there, the cube being convex), and inside near a face's centre, nearer
    that face than any other by at least 0.2."""
    rng = np.random.default_rng(seed)
    direction = rng.normal(size=(count, 3))
    direction /= np.linalg.norm(direction, axis=1, keepdims=True)
    outside = np.clip(direction * 3, -1, 1) + direction * rng.uniform(0.2, 1.5, (count, 1))
    inside = np.zeros((count, 3))
    axis = rng.integers(0, 3, count)
    side = rng.choice([-1.0, 1.0], count)
    depth = rng.uniform(0.1, 0.4, count)
    for row in range(count):
        inside[row] = rng.uniform(-0.4, 0.4, 3)
        inside[row, axis[row]] = side[row] * (1 - depth[row])
    return np.concatenate([outside, inside])


def test_cpu_tensors_cross_without_a_copy_and_give_mesh_query_s_answers(engine):
    mesh = engine.mesh(str(MESHES / "fandisk.obj"))
    generator = torch.Generator().manual_seed(5)
    points = torch.rand(2000, 3, generator=generator) * 6 - 3
    expected = mesh.query(points.numpy(), sign="pseudonormal")
    out = closest_torch.query(mesh, points, sign="pseudonormal")
    assert set(out) == {"point", "distance", "shape", "normal"}
    for name, array in expected.items():
        assert out[name].device.type == "cpu"
        assert out[name].dtype == torch.from_numpy(array).dtype
        np.testing.assert_array_equal(out[name].numpy(), array)
    # Without a copy: the engine reads the tensor's memory, and results wrap the engine's arrays.
    view = closest_torch._host_array(points)
    assert view.__array_interface__["data"][0] == points.data_ptr()
    tensor = closest_torch._tensor(expected["distance"], points)
    assert tensor.data_ptr() == expected["distance"].__array_interface__["data"][0]

    # float64 points: the same answers as float64 tensors; a strided view and a tensor that
    # requires grad are read as they are; fields pick the outputs.
    wide = closest_torch.query(mesh, points.double(), sign="pseudonormal", fields="distance,shape")
    assert set(wide) == {"distance", "shape"} and wide["distance"].dtype == torch.float64
    np.testing.assert_array_equal(wide["distance"].numpy(), expected["distance"].astype(np.float64))
    strided = torch.zeros(2000, 6)
    strided[:, ::2] = points
    out = closest_torch.query(mesh, strided[:, ::2].requires_grad_(), sign="pseudonormal")
    np.testing.assert_array_equal(out["distance"].detach().numpy(), expected["distance"])
    assert not out["shape"].requires_grad and not out["normal"].requires_grad


def test_the_distance_s_gradient_is_the_normal_and_passes_gradcheck(cube):
    points = torch.tensor(away_from_the_medial_axis(40, seed=3), requires_grad=True)

    def distance(p):
        return closest_torch.query(cube, p, sign="pseudonormal", fields=["distance"])["distance"]

    # The engine's f32 distances: central differences of 2e-3 are good to ~1e-4 here.
    assert torch.autograd.gradcheck(distance, (points,), eps=1e-3, atol=2e-3, rtol=1e-3)
    out = closest_torch.query(cube, points, sign="pseudonormal")
    weights = torch.linspace(-2, 3, len(points), dtype=torch.float64)
    (out["distance"] * weights).sum().backward()
    expected = weights[:, None] * out["normal"]
    torch.testing.assert_close(points.grad, expected)
    # Signed: the gradient points out of the cube everywhere, inside points included.
    outward = (points.detach() * out["normal"]).sum(dim=1)
    assert torch.all(outward > 0)
    assert torch.all(out["distance"][40:] < 0)


def test_rows_with_nan_get_nan_gradients_and_leave_the_rest_alone(cube):
    points = torch.tensor(away_from_the_medial_axis(5, seed=9), requires_grad=True)
    with torch.no_grad():
        poisoned = points.clone()
        poisoned[3, 1] = float("nan")
    poisoned.requires_grad_()
    clean = closest_torch.query(cube, points, sign="pseudonormal")["distance"]
    dirty = closest_torch.query(cube, poisoned, sign="pseudonormal")["distance"]
    clean.sum().backward()
    dirty.sum().backward()
    assert torch.isnan(dirty[3]) and torch.isnan(poisoned.grad[3]).all()
    keep = torch.arange(len(points)) != 3
    torch.testing.assert_close(dirty[keep], clean[keep])
    torch.testing.assert_close(poisoned.grad[keep], points.grad[keep])


@pytest.mark.hostile
def test_bad_tensors_and_arguments_raise_input_error(cube):
    cases = [
        (lambda: closest_torch.query(cube, np.zeros((2, 3))), "points: expected a torch.Tensor"),
        (lambda: closest_torch.query(cube, torch.zeros(2, 3, dtype=torch.int64)), "points"),
        (lambda: closest_torch.query(cube, torch.zeros(2, 3, dtype=torch.complex64)), "points"),
        (lambda: closest_torch.query(cube, torch.zeros(4, 2)), "points"),
        (lambda: closest_torch.query(cube, torch.zeros(2, 3), fields="colour"), "fields"),
        (lambda: closest_torch.query(cube, torch.zeros(2, 3), sign="sideways"), "sign"),
        (lambda: closest_torch.query("cube.obj", torch.zeros(2, 3)), "target"),
        (lambda: closest_torch.query(cube, torch.zeros(2, 3), mode="surface"), "mode"),
        # Tensors with no data on the host, and fields that are no list (these escaped as
        # NotImplementedError and TypeError).
        (lambda: closest_torch.query(cube, torch.zeros(2, 3, device="meta")), "points.*meta"),
        (lambda: closest_torch.query(cube, torch.zeros(2, 3).to_sparse()), "points"),
        (lambda: closest_torch.query(cube, torch.zeros(2, 3), fields=7), "fields.*got 7"),
        (lambda: closest_torch.query(cube, torch.zeros(2, 3), sign=3), "sign.*got 3"),
        # A field named twice (it answered a zero gradient: the one output kept in the dict
        # was not the one whose gradient the backward pass read).
        (lambda: closest_torch.query(cube, torch.zeros(2, 3), fields="distance,distance"), "twice"),
        (lambda: closest_torch.query(cube, torch.zeros(2, 3), fields=["point", "point"]), "twice"),
    ]
    for call, message in cases:
        with pytest.raises(closest.InputError, match=message):
            call()
    # Half precision is a real float: read, and answered in float32.
    out = closest_torch.query(cube, torch.tensor([[0.0, 0.0, 3.0]], dtype=torch.bfloat16))
    assert out["distance"].dtype == torch.float32 and out["distance"].item() == 2.0


def test_tensors_numpy_cannot_read_point_plain_queries_to_closest_torch(cube):
    # bfloat16 and tensors with gradients: numpy refuses them, closest.torch reads them.
    for points in [torch.zeros(2, 3, dtype=torch.bfloat16), torch.zeros(2, 3, requires_grad=True)]:
        with pytest.raises(closest.InputError, match="points: .*closest.torch.query"):
            cube.query(points)
        assert closest_torch.query(cube, points)["distance"].shape == (2,)


def test_scene_distances_are_differentiable_too(engine):
    # Outside a sphere and a box, in surface mode: the gradient of the distance is the normal.
    scene = engine.scene([
        {"type": "sphere", "center": [0, 0, 0], "radius": 1},
        {"type": "box", "center": [4, 0, 0], "half_extents": [0.5, 1, 0.25], "rotation": [0, 0, 0.38268343, 0.92387953]},
    ])
    rng = np.random.default_rng(2)
    direction = rng.normal(size=(30, 3))
    direction /= np.linalg.norm(direction, axis=1, keepdims=True)
    # Around the sphere, between 1.2 and 1.8 from its centre: nearer it than the box.
    points = torch.tensor(direction * rng.uniform(1.2, 1.8, (30, 1)), requires_grad=True)

    def distance(p):
        return closest_torch.query(scene, p, mode="surface", fields="distance")["distance"]

    assert torch.autograd.gradcheck(distance, (points,), eps=1e-3, atol=2e-3, rtol=1e-3)
    out = closest_torch.query(scene, points, mode="surface")
    torch.testing.assert_close(out["distance"], torch.linalg.norm(points.detach(), dim=1) - 1,
                               atol=1e-5, rtol=0)
    assert torch.all(out["shape"] == 0)
    with pytest.raises(closest.InputError, match="sign"):
        closest_torch.query(scene, points, sign="winding")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_tensors_go_through_the_host_and_come_back(cube):
    points = torch.tensor(away_from_the_medial_axis(100, seed=1), device="cuda", requires_grad=True)
    out = closest_torch.query(cube, points, sign="pseudonormal")
    assert all(t.device == points.device for t in out.values())
    on_host = closest_torch.query(cube, points.detach().cpu(), sign="pseudonormal")
    torch.testing.assert_close(out["distance"].cpu(), on_host["distance"])
    out["distance"].sum().backward()
    torch.testing.assert_close(points.grad.cpu(), on_host["normal"])
