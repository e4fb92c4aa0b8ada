"""Bad input from Python: each raises closest.InputError naming the argument, row or shape
index and field; nothing crashes the interpreter. Hypothesis drives the array checks."""

import os
import re
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import closest
from conftest import SHAPES

pytestmark = pytest.mark.hostile


def raises(call, *needles):
    with pytest.raises(closest.InputError) as info:
        call()
    for needle in needles:
        assert needle in str(info.value), (needle, str(info.value))
    # Arguments are named as Python's caller wrote them, not as the CLI's flags.
    flag = re.search(r"(^|[\s(`])--(res|pad|sigma|band|chunk|samples|surface|near|uniform)\b", str(info.value))
    assert flag is None, str(info.value)
    assert isinstance(info.value, ValueError)


def test_bad_points(scene):
    # SPEC §6: anything numpy.asarray takes with a floating dtype; a list of ints is not.
    raises(lambda: scene.query([[0, 0, 0]]), "points", "floating", "int64")
    raises(lambda: scene.query([[0, 0], [1]]), "points", "numpy.asarray")
    raises(lambda: scene.query(np.zeros((4, 2), np.float32)), "points", "(N, 3)", "(4, 2)")
    raises(lambda: scene.query(np.zeros((4,), np.float32)), "points", "(N, 3)")
    raises(lambda: scene.query(np.zeros((4, 3), np.int64)), "points", "float32", "int64")
    raises(lambda: scene.query(np.zeros((4, 3), np.complex64)), "points", "complex64")
    raises(lambda: scene.contacts(np.zeros((2, 3), np.float32)), "spheres", "(N, 4)")
    spheres = np.zeros((3, 4), np.float32)
    spheres[2, 3] = -1
    raises(lambda: scene.contacts(spheres), "spheres", "row 2", "radius", "≥ 0")


def test_non_finite_rows_give_nan_rows_not_errors(scene):
    # SPEC §2: a NaN or infinite row is answered with NaN and shape −1; others are untouched.
    points = np.array([[0, 0, 0], [np.nan, 1, 1], [1, np.inf, 0], [0, 0, 2]], np.float32)
    result = scene.query(points)
    assert result["shape"].tolist()[1:3] == [-1, -1]
    assert np.isnan(result["distance"][1:3]).all()
    assert result["distance"][[0, 3]].tolist() == scene.query(points[[0, 3]])["distance"].tolist()


def test_bad_names(engine, scene, mesh):
    points = np.zeros((2, 3), np.float32)
    raises(lambda: scene.query(points, mode="inside"), "mode", "`inside`", "solid, surface")
    raises(lambda: scene.query(points, fields="distance,depth"), "fields", "`depth`",
           "point, distance, shape, normal")
    raises(lambda: scene.query(points, fields=["shape", "shape"]), "fields", "twice")
    raises(lambda: scene.query(points, fields=[]), "fields")
    raises(lambda: scene.contacts(np.zeros((2, 4), np.float32), fields="distance"), "fields",
           "point, depth, normal, shape")
    raises(lambda: mesh.query(points, sign="inside"), "sign", "`inside`", "pseudonormal")
    raises(lambda: mesh.sdf(1), "res needs at least 2")
    raises(lambda: mesh.sdf(8, pad=-1), "pad must be")
    flat = engine.mesh(vertices=np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0]], np.float64),
                       triangles=np.array([[0, 1, 2]]))
    raises(lambda: flat.sdf(4, pad=0), "no extent along z", "z = 0.0", "pad")
    assert flat.sdf(4)["spacing"][2] > 0
    raises(lambda: flat.sample(uniform=10, pad=0), "no extent along z", "pad > 0")
    # Points a job makes itself must stay within f32's range.
    raises(lambda: mesh.sdf(4, pad=1e300), "pad 1e300", "f32")
    raises(lambda: mesh.sample(uniform=10, pad=1e300), "pad 1e300", "f32")
    raises(lambda: mesh.sample(near=10, sigma=1e308), "sigma 1e308", "f32")
    raises(lambda: mesh.sample(near=10), "near needs sigma", "width")
    # Grids may hold more than 2^32 samples, not more than 2^24 an axis or 2^29 an x-plane.
    raises(lambda: mesh.sdf_sparse((2**24 + 1, 2, 2), band=3), "res", "samples an axis")
    raises(lambda: mesh.sdf((2, 2**15, 2**15)), "res", "x-plane")
    # A band whose bricks the host cannot hold: refused up front, naming res.
    with pytest.raises(closest.GpuError, match=r"^out of memory: res \[16777216, 16384, 32768\]"):
        mesh.sdf_sparse((2**24, 2**14, 2**15), band=3)
    raises(lambda: engine.segment_pairs(np.zeros((2, 2, 3)), np.zeros((3, 2, 3))), "a has 2",
           "b has 3")
    raises(lambda: engine.query_paired(SHAPES, np.zeros((2, 3), np.float32)), "one shape per point")
    raises(lambda: closest.Engine(mesh_records="compact"), "mesh_records", "`compact`",
           "auto, packed, indexed")


def test_arguments_of_the_wrong_type_or_range_raise_input_error(engine, scene, mesh):
    # SPEC §6: only InputError, naming the argument; PyO3's own conversions raised TypeError
    # (a string for a count) or OverflowError (a negative count, a seed past 2^64).
    points = np.zeros((2, 3), np.float32)
    cases = [
        (lambda: mesh.sample(near=-1, sigma=0.1), "near", "-1"),
        (lambda: mesh.sample(near=1.5, sigma=0.1), "near", "1.5"),
        (lambda: mesh.sample(surface="many"), "surface", "'many'"),
        (lambda: mesh.sample(uniform=-3), "uniform", "-3"),
        (lambda: mesh.sample(near=3, sigma=0.1, seed=-1), "seed", "-1"),
        (lambda: mesh.sample(near=3, sigma=0.1, seed=2**70), "seed", "2^64"),
        (lambda: mesh.sample(uniform=3, pad="x"), "pad", "'x'"),
        (lambda: mesh.sample(near=3, sigma=0.1, sign=3), "sign", "got 3"),
        (lambda: mesh.sdf(4, pad=None), "pad", "None"),
        # Bools are ints to Python: `surface=True` was one sample, `pad=True` a pad of 1.
        (lambda: mesh.sample(surface=True), "surface", "True"),
        (lambda: mesh.sdf(4, pad=True), "pad", "True"),
        (lambda: mesh.sdf(True), "res", "True"),
        (lambda: mesh.sdf(4, band=False), "band", "False"),
        (lambda: mesh.sdf(4, bounds=[0, 0, 0, 1, 1]), "bounds", "six numbers"),
        (lambda: mesh.sdf(4, bounds="abc"), "bounds", "'abc'"),
        (lambda: mesh.sdf(4, bounds=[[0, 0, 0], [1, 1]]), "bounds", "two corners"),
        (lambda: mesh.sdf(4, bounds=[[1, 1, 1], [0, 0, 0]]), "bounds", "x0 < x1"),
        (lambda: mesh.sdf(4, band="wide"), "band", "'wide'"),
        (lambda: mesh.sdf(4, band=1, band_units=3), "band_units", "got 3"),
        (lambda: mesh.sdf(4, out=3), "out", "got 3"),
        (lambda: mesh.sdf(4, chunk=-1), "chunk", "-1"),
        (lambda: mesh.sdf_sparse(4, band=[1]), "band", "[1]"),
        (lambda: mesh.distance_to(mesh, samples=-5), "samples", "-5"),
        (lambda: mesh.distance_to(mesh, seed="s"), "seed", "'s'"),
        (lambda: mesh.query(points, sign=1), "sign", "got 1"),
        (lambda: scene.query(points, mode=3), "mode", "got 3"),
        (lambda: scene.contacts(bodies=[], paired="yes"), "paired", "'yes'"),
        (lambda: engine.query_paired(SHAPES[:2], points, mode=None), "mode", "None"),
        (lambda: engine.mesh(3), "path", "got 3"),
        (lambda: closest.Engine(portable_kernels="no"), "portable_kernels", "'no'"),
        (lambda: closest.Engine(mesh_records=3), "mesh_records", "got 3"),
        (lambda: closest.Engine(adapter=3), "adapter", "got 3"),
        (lambda: closest.mesh_distance(mesh, mesh, samples=-5), "samples", "-5"),
        # These raised os.fspath's TypeError and an AttributeError.
        (lambda: closest.mesh_distance(None, mesh), "a: expected a closest.Mesh", "NoneType"),
        (lambda: closest.mesh_distance(mesh, 3), "b: expected", "int"),
        (lambda: closest.mesh_distance(mesh, "x.obj", engine="gpu"), "engine", "str"),
    ]
    for call, *needles in cases:
        raises(call, *needles)
    # Long values are cut short in the message.
    with pytest.raises(closest.InputError) as info:
        mesh.sample(near="x" * 500, sigma=0.1)
    assert len(str(info.value)) < 200


def test_bad_shapes_name_the_index_and_field(engine):
    good = {"type": "sphere", "center": [0, 0, 0], "radius": 1}
    raises(lambda: engine.scene([good, {"type": "sphere", "center": [0, 0, 0]}]), "shape 1",
           "`radius`", "missing")
    raises(lambda: engine.scene([good, good, {"type": "blob"}]), "shape 2", "`type`")
    raises(lambda: engine.scene([{**good, "radius": -1}]), "shape 0", "`radius`", "≥ 0")
    raises(lambda: engine.scene([{**good, "center": [0, float("nan"), 0]}]), "shape 0", "`center`")
    raises(lambda: engine.scene([{**good, "center": np.array([0, 1])}]), "shape 0", "`center`")
    raises(lambda: engine.scene(["sphere"]), "shape 0")
    raises(lambda: engine.scene(42), "shapes", "int")
    # Shapes and meshes whose own lengths square past f32 (SPEC §3 could not hold): refused.
    long = {"type": "segment", "a": [0, 0, 0], "b": [2e18, 0, 0]}
    raises(lambda: engine.scene([good, long]), "shape 1", "`b`", "spans 2.000e18", "1e18")
    raises(lambda: engine.mesh(vertices=np.array([[0, 0, 0], [2e18, 0, 0], [0, 1, 0]]),
                               triangles=np.array([[0, 1, 2]])), "the mesh spans", "1e18")
    assert len(engine.scene([{**long, "b": [9e17, 0, 0]}])) == 1
    # numpy values are read like Python ones.
    assert len(engine.scene([{**good, "center": np.zeros(3), "radius": np.float32(2)}])) == 1
    # Huge numbers are written with an exponent, not hundreds of digits.
    raises(lambda: engine.scene([{**good, "radius": 1e300}]), "shape 0", "`radius`", "1e300 is beyond")


def test_nesting_that_never_ends_is_refused_not_a_crash(engine):
    # A list 10,000 deep, or one holding itself, once overflowed the extension's stack.
    deep = []
    for _ in range(10_000):
        deep = [deep]
    holds_itself = {"type": "sphere", "center": [0, 0, 0], "radius": 1}
    holds_itself["center"] = [0, 0, holds_itself]
    loop = []
    loop.append(loop)
    for shapes in ([deep], [holds_itself], loop):
        raises(lambda: engine.scene(shapes), "shapes", "nested deeper than 128 levels")
    raises(lambda: engine.mesh(vertices=np.eye(3), triangles=[[0, 1, 2]]).contacts(bodies=[deep]),
           "bodies", "nested deeper")
    # Four levels (a hull's points) is what a shape needs; far from the bound.
    hull = {"type": "convex_hull", "points": [[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1]]}
    assert len(engine.scene([hull])) == 1


def test_bad_meshes(engine, tmp_path):
    raises(lambda: engine.mesh(str(tmp_path / "missing.obj")), "missing.obj")
    broken = tmp_path / "broken.stl"
    broken.write_bytes(b"solid x\nfacet normal 0 0 1\nouter loop\nvertex 0 0\n")
    raises(lambda: engine.mesh(str(broken)), "broken.stl")
    v = np.zeros((3, 3))
    raises(lambda: engine.mesh(vertices=v, triangles=np.array([[0, 1, 5]])), "triangle 0",
           "vertex 5")
    raises(lambda: engine.mesh(vertices=v, triangles=np.array([[0, 1, -1]])), "triangles",
           "row 0", "-1")
    raises(lambda: engine.mesh(vertices=v, triangles=np.zeros((1, 3), np.float32)), "triangles")
    raises(lambda: engine.mesh(vertices=v, triangles=[[0, 1, 2.5]]), "triangles")
    raises(lambda: engine.mesh(vertices=v, triangles=[[0, 1], [2]]), "triangles")
    raises(lambda: engine.mesh(vertices=v, triangles=np.array([[0, 1, 2**63 + 5]], np.uint64)),
           "row 0", str(2**63 + 5))
    raises(lambda: engine.mesh(vertices=v, triangles=np.array([[0, 1, 2**32]])), "row 0",
           str(2**32))
    raises(lambda: engine.mesh(vertices=v), "vertices= and triangles=")


def test_no_adapter_raises_adapter_error_with_the_hint(tmp_path):
    # A name that matches none of the adapters present: they are named; installing lavapipe
    # is no remedy, so the hint is not given.
    with pytest.raises(closest.AdapterError) as info:
        closest.Engine(adapter="no-such-adapter")
    assert "available: llvmpipe" in str(info.value)
    assert "mesa-vulkan-drivers" not in str(info.value)
    assert isinstance(info.value, RuntimeError)
    # No adapter at all (the Vulkan and EGL drivers hidden from their loaders, in a process of
    # its own): the hint.
    hidden = str(tmp_path / "no-driver.json")
    env = dict(os.environ, VK_ICD_FILENAMES=hidden, __EGL_VENDOR_LIBRARY_FILENAMES=hidden,
               CLOSEST_ADAPTER="")
    code = ("import closest\n"
            "try:\n    closest.Engine()\n"
            "except closest.AdapterError as e:\n    print('AdapterError', e)\n")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.stdout.startswith("AdapterError") and "mesa-vulkan-drivers" in out.stdout, out


dtypes = st.sampled_from([np.float32, np.float64, np.float16, np.int32, np.int64, np.uint8,
                          np.complex64, np.bool_, object])
shapes = st.lists(st.integers(0, 5), min_size=0, max_size=3).map(tuple)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(dtype=dtypes, shape=shapes, strided=st.booleans(), fortran=st.booleans())
def test_any_array_is_answered_or_refused_with_input_error(scene, dtype, shape, strided, fortran):
    array = np.ones(shape, dtype=dtype)
    if fortran:
        array = np.asfortranarray(array)
    if strided and array.ndim >= 1 and array.shape[0] > 1:
        array = array[::2]
    # Strided and Fortran-ordered arrays and float16 are copied once and answered (SPEC §6).
    # An empty 1-D array (numpy's reading of []) is zero rows.
    valid = array.dtype.kind == "f" and (
        (array.ndim == 2 and array.shape[1] == 3) or array.shape == (0,))
    if valid:
        result = scene.query(array)
        assert result["distance"].shape == (array.shape[0],)
    else:
        with pytest.raises(closest.InputError, match="points"):
            scene.query(array)


field_names = st.lists(st.sampled_from(["point", "distance", "shape", "normal", "depth", "",
                                        "Distance", "s"]), max_size=5)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(names=field_names)
def test_any_field_list_is_answered_or_refused_with_input_error(scene, names):
    points = np.zeros((2, 3), np.float32)
    valid = names and len(set(names)) == len(names) and set(names) <= {
        "point", "distance", "shape", "normal"}
    if valid:
        assert set(scene.query(points, fields=names)) == set(names)
    else:
        with pytest.raises(closest.InputError, match="fields"):
            scene.query(points, fields=names)


def _breaks(shape, field, value):
    """Whether `value` in place of the shape's `field` is certainly invalid."""
    if field not in shape:
        return False
    if value is None or isinstance(value, str):
        return True
    scalar = not isinstance(shape[field], list)
    if isinstance(value, float):
        return not scalar or not np.isfinite(value) or value < 0
    return scalar or len(value) != 3 or not all(np.isfinite(v) for v in value)


keys = st.sampled_from(["type", "center", "radius", "min", "max", "a", "b"])


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(index=st.integers(0, 3), drop=keys, value=st.one_of(
    st.none(), st.floats(allow_nan=True), st.text(max_size=3), st.lists(st.floats(), max_size=4)))
def test_a_broken_shape_dict_names_its_index(engine, index, drop, value):
    # Overwriting a field the shape has with a wrong value must fail naming that shape; a
    # field it does not have is extra and ignored (SPEC §1: unknown fields are ignored).
    shapes = [dict(s) for s in SHAPES[:4]]
    breaks = _breaks(shapes[index], drop, value)
    shapes[index][drop] = value
    if breaks:
        with pytest.raises(closest.InputError, match=f"shape {index}"):
            engine.scene(shapes)
    else:
        try:
            engine.scene(shapes)
        except closest.InputError as e:  # e.g. a 3-list where a number belongs
            assert f"shape {index}" in str(e), str(e)


numbers = st.one_of(st.floats(allow_nan=False, allow_infinity=False), st.integers(-2**70, 2**70))
field_values = st.one_of(
    numbers, st.booleans(), st.none(), st.text(max_size=3),
    st.lists(numbers, max_size=5), st.tuples(numbers, numbers, numbers),
    st.lists(st.one_of(numbers, st.text(max_size=2), st.booleans()), max_size=4),
    st.builds(lambda v: np.asarray(v, dtype=np.float32),
              st.lists(st.floats(width=32, allow_nan=False, allow_infinity=False), min_size=3,
                       max_size=3)),
    st.builds(np.float64, st.floats(allow_nan=False, allow_infinity=False)))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@example(index=0, field="radius", value=[1.192092896e-07])  # a float quoted otherwise
@given(index=st.integers(0, 3), field=keys, value=field_values)
def test_a_shape_list_reads_as_its_json_file(engine, tmp_path, index, field, value):
    # A list of dicts is read field by field (numbers and strings as they are), a file from
    # its text: both give the same shapes, or refuse the same shape and field the same way.
    import json

    shapes = [dict(s) for s in SHAPES[:4]]
    shapes[index][field] = value
    path = tmp_path / "shapes.json"
    as_json = [{k: (v.tolist() if isinstance(v, (np.ndarray, np.generic)) else v)
                for k, v in s.items()} for s in shapes]
    path.write_text(json.dumps({"shapes": as_json}, allow_nan=False))
    outcomes = []
    for source in (shapes, str(path)):
        try:
            scene = engine.scene(source)
            points = np.array([[0.5, -1.0, 2.0], [3.0, 0.25, -0.5]], dtype=np.float32)
            outcomes.append({k: v.tolist() for k, v in scene.query(points).items()})
        except closest.InputError as e:
            # The message less its source's name, numbers it quotes compared by value (a list's
            # float is quoted by its shortest text, a file's as written: 1e-7, 1e-07).
            message = str(e).split(": ", 1)[1]
            outcomes.append(re.sub(r"-?\d+(\.\d+)?([eE][-+]?\d+)?",
                                   lambda m: repr(float(m.group())), message))
    assert outcomes[0] == outcomes[1], (shapes[index], outcomes)


def test_bad_zarr_targets_and_mesh_distances_leave_nothing(engine, tmp_path):
    from conftest import MESHES

    mesh = engine.mesh(str(MESHES / "fandisk.obj"))
    raises(lambda: mesh.sdf(8, out=str(tmp_path / "no" / "such" / "g.zarr")), "g.zarr")
    mine = tmp_path / "mine.zarr"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep")
    raises(lambda: mesh.sdf(8, out=str(mine)), "mine.zarr", "not a Zarr store")
    assert (mine / "notes.txt").read_text() == "keep"
    for chunk in (0, 257):
        raises(lambda: mesh.sdf(8, out=str(tmp_path / "g.zarr"), chunk=chunk), "chunk must be")
    raises(lambda: mesh.sdf(8, out=str(tmp_path / "g.zarr"), band=-1), "band")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine.zarr"]
    raises(lambda: closest.mesh_distance(MESHES / "fandisk.obj", tmp_path / "missing.obj", engine=engine),
           "missing.obj")
    raises(lambda: mesh.distance_to(mesh, samples=2**33), "samples")
    flat = engine.mesh(vertices=np.array([[0, 0, 0], [1, 0, 0], [2, 0, 0]], np.float64),
                       triangles=np.array([[0, 1, 2]]))
    raises(lambda: mesh.distance_to(flat, samples=10), "no area")
    raises(lambda: mesh.distance_to(np.zeros((3, 3))), "other", "closest.Mesh")
