"""Any array SPEC §6 names is taken (issue 43): lists, tuples, strided, Fortran-ordered,
read-only, unaligned, byte-swapped arrays, float16/32/64, `__array__` and `__dlpack__`
objects. Each answers as the plain float32 array of the same values does (float64 rows as the
plain float64 array), and nothing reaches a Rust panic."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import closest
from conftest import SHAPES

pytestmark = pytest.mark.hostile


class ArrayLike:
    """An object numpy reads through `__array__` only."""

    def __init__(self, array):
        self.array = array

    def __array__(self, dtype=None, copy=None):
        return self.array if dtype is None else self.array.astype(dtype)


class DLPackOnly:
    """An object that offers its buffer through `__dlpack__` only (as a torch CPU tensor does
    besides `__array__`)."""

    def __init__(self, array):
        self.array = array

    def __dlpack__(self, **kwargs):
        return self.array.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()


def unaligned(array):
    """The same values, C-contiguous, at an odd address (as Dask hands chunks to workers)."""
    raw = b"\0" + array.tobytes()
    return np.frombuffer(raw, array.dtype, offset=1).reshape(array.shape)


def byte_swapped(array):
    return array.astype(array.dtype.newbyteorder(">" if array.dtype.byteorder != ">" else "<"))


def read_only(array):
    copy = array.copy()
    copy.flags.writeable = False
    return copy


def strided(array):
    wide = np.zeros((array.shape[0], array.shape[1] * 2), array.dtype)
    wide[:, ::2] = array
    return wide[:, ::2]


KINDS = {
    "list": lambda a: a.tolist(),
    "tuple": lambda a: tuple(tuple(row) for row in a.tolist()),
    "strided": strided,
    "fortran": np.asfortranarray,
    "read-only": read_only,
    "unaligned": unaligned,
    "byte-swapped": byte_swapped,
    "__array__": ArrayLike,
    "__dlpack__": DLPackOnly,
}


def plain(values, dtype):
    """The plain array an input of `dtype` answers as: float16 widens to float32 exactly;
    lists and tuples of Python floats are float64."""
    return np.ascontiguousarray(values, np.float64 if dtype == np.float64 else np.float32)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kind=st.sampled_from(sorted(KINDS)), dtype=st.sampled_from([np.float16, np.float32, np.float64]),
       rows=st.integers(0, 40), seed=st.integers(0, 1000), target=st.sampled_from(["scene", "mesh"]))
def test_every_array_kind_answers_as_the_plain_array(scene, mesh, kind, dtype, rows, seed, target):
    rng = np.random.default_rng(seed)
    values = rng.uniform(-6, 6, (rows, 3)).astype(dtype)
    given_array = KINDS[kind](values)
    # Lists and tuples of Python floats are float64 to numpy, whatever they came from.
    as_dtype = np.float64 if kind in ("list", "tuple") else dtype
    expected_input = plain(values.astype(np.float64) if as_dtype == np.float64 else values, as_dtype)
    if target == "scene":
        got = scene.query(given_array)
        want = scene.query(expected_input)
    else:
        got = mesh.query(given_array, sign="pseudonormal")
        want = mesh.query(expected_input, sign="pseudonormal")
    for name in want:
        np.testing.assert_array_equal(got[name], want[name], err_msg=f"{kind} {np.dtype(dtype)} {name}")


def test_the_issues_unaligned_buffer_is_answered(mesh):
    p = np.random.default_rng(3).uniform(-0.5, 0.5, (100, 3)).astype(np.float32)
    odd = np.frombuffer(b"\0" + p.tobytes(), np.float32, offset=1).reshape(-1, 3)
    assert not odd.flags.aligned
    np.testing.assert_array_equal(mesh.query(odd, sign="winding")["distance"],
                                  mesh.query(p, sign="winding")["distance"])


@pytest.mark.hostile
def test_a_view_whose_copy_cannot_fit_is_refused_before_copying(mesh):
    # A broadcast view of 12 bytes stands for 2^40 rows: its float32 copy (12 TiB) was numpy's
    # MemoryError, or with overcommit the OOM killer's; now InputError naming the argument.
    huge = np.broadcast_to(np.zeros(3, np.float32), (2**40, 3))
    with pytest.raises(closest.InputError, match=r"points: its copy as C-contiguous float32.*GiB"):
        mesh.query(huge, fields="distance")
    vertices = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0]], np.float64)
    triangles = np.broadcast_to(np.array([0, 1, 2]), (2**40, 3))
    with pytest.raises(closest.InputError, match=r"triangles: their copy.*GiB"):
        mesh.engine.mesh(vertices=vertices, triangles=triangles)
    # A view that fits is copied and answered as its rows.
    small = np.broadcast_to(np.array([0.25, 0.5, 2.0], np.float32), (300, 3))
    np.testing.assert_array_equal(mesh.query(small)["distance"], mesh.query(np.array(small))["distance"])


def test_every_entry_point_takes_the_array_kinds(engine, scene):
    spheres = np.array([[0, 0, 0, 0.5], [3, 0, 0, 1]], np.float32)
    want = scene.contacts(spheres)
    for kind in ("list", "unaligned", "byte-swapped", "strided"):
        got = scene.contacts(KINDS[kind](spheres))
        np.testing.assert_allclose(got["depth"], want["depth"], rtol=0, atol=1e-6)
    a = np.array([[[0, 0, 0], [1, 0, 0]]], np.float64)
    b = np.array([[[0, 1, 0], [1, 1, 1]]], np.float64)
    want = engine.segment_pairs(a, b)
    got = engine.segment_pairs(unaligned(a), byte_swapped(b))
    np.testing.assert_array_equal(got["distance"], want["distance"])
    vertices = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1]], np.float64)
    triangles = np.array([[0, 2, 1], [0, 1, 3], [0, 3, 2], [1, 2, 3]])
    tetra = engine.mesh(vertices=byte_swapped(vertices), triangles=triangles)
    assert len(tetra) == 4


@pytest.mark.parametrize("kind", ["list", "tuple", "strided", "fortran", "read-only", "unaligned",
                                  "byte-swapped", "__array__", "__dlpack__", "int32", "uint16"])
def test_triangles_of_every_kind_make_the_same_mesh(engine, kind):
    vertices = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1]], np.float64)
    triangles = np.array([[0, 2, 1], [0, 1, 3], [0, 3, 2], [1, 2, 3]], np.int64)
    make = {"int32": lambda a: a.astype(np.int32), "uint16": lambda a: a.astype(np.uint16)}
    given_triangles = make[kind](triangles) if kind in make else KINDS[kind](triangles)
    points = np.random.default_rng(7).uniform(-0.5, 1.5, (200, 3))
    want = engine.mesh(vertices=vertices, triangles=triangles).query(points, sign="winding")
    got = engine.mesh(vertices=vertices, triangles=given_triangles).query(points, sign="winding")
    for name in ("distance", "shape"):
        np.testing.assert_array_equal(got[name], want[name])


def test_a_panic_becomes_gpu_error_naming_the_call():
    # GpuError is an ordinary Exception, so `except Exception` (Dask's workers) catches it.
    assert issubclass(closest.GpuError, Exception)


def test_errors_pickle_as_themselves():
    # A worker's error reaches a Dask client as the same class (they live in `closest`).
    import pickle
    for cls in (closest.InputError, closest.GpuError, closest.AdapterError):
        assert cls.__module__ == "closest"
        again = pickle.loads(pickle.dumps(cls("why")))
        assert type(again) is cls and str(again) == "why"


def test_the_client_takes_every_array_kind_the_engine_takes(engine, server):
    # SPEC §7: `closest.Client` has the Engine's methods; it refused lists, float16 and strided
    # views, which the engine answers. Each kind, sent to the service, answers as the engine.
    client = closest.Client(server)
    local = engine.scene(SHAPES)
    remote = client.scene("kinds", SHAPES)
    points = np.random.default_rng(11).uniform(-3, 3, (200, 3)).astype(np.float32)
    for kind in KINDS:
        for dtype in (np.float16, np.float32, np.float64):
            given = KINDS[kind](points.astype(dtype))
            got = remote.query(given, fields="distance")["distance"]
            want = local.query(plain(points.astype(dtype), dtype), fields="distance")["distance"]
            np.testing.assert_array_equal(got, want, err_msg=f"{kind} {np.dtype(dtype)}")
    a = np.array([[[0, 0, 0], [1, 0, 0]]], np.float64)
    b = np.array([[[0, 1, 0], [1, 1, 1]]], np.float64)
    np.testing.assert_array_equal(client.segment_pairs(a.tolist(), byte_swapped(b))["distance"],
                                  engine.segment_pairs(a, b)["distance"])
    for call, needle in [
        (lambda: remote.query(points.astype(np.int32)), "floating dtype"),
        (lambda: remote.query(points[:, :2]), r"shape \(N, 3\)"),
        (lambda: closest.Client(3), "url"),
        (lambda: client.mesh("m", 3), "path"),
        (lambda: client.scene("s", 3), "shapes"),
        # As the engine: a copy that cannot fit is InputError, not numpy's MemoryError.
        (lambda: remote.query(np.broadcast_to(np.zeros(3), (2**40, 3))), "points: its copy"),
    ]:
        with pytest.raises(closest.InputError, match=needle):
            call()
