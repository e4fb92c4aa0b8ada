//! Python bindings of `closest` (SPEC §6): numpy arrays in and out, the GIL released while the
//! device works. The geometry lives in the `closest` crate; this file checks arguments, reads
//! float32 C-contiguous arrays in place, and hands result vectors to numpy without a copy.

use std::sync::Arc;

use closest::GpuMesh;
use closest::Points;
use closest::auto_sign::SignChoice;
use closest::engine::{
    BandSlab, BodyContacts, BodyPairs, MeshDistance, MeshDistanceSummary, MeshSamples, SampleRows,
    SdfBand,
};
use closest::engine::{
    MeshQuery, PairedQuery, SceneQuery, SdfGrid, SegmentPairs, SegmentReader, SegmentRows,
    SphereContacts, Spheres,
};
use closest::fields::{Columns, Family, Fields};
use closest::io::OutputFile;
use closest::io::Values;
use closest::io::zarr::{ZarrLayout, is_zarr};
use closest::job::{BandArg, BandUnits};
use closest::mesh::{Mesh, Sign};
use closest::sample::{SampleSpec, Sampler};
use closest::sdf::{Grid, GridRegion};
use closest::{DVec3, GpuScene, Mode, Shape};
use numpy::{
    IntoPyArray, PyArray2, PyArrayDescrMethods, PyArrayMethods, PyReadonlyArrayDyn, PyUntypedArray,
    PyUntypedArrayMethods,
};
use pyo3::create_exception;
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};

// The exceptions live in `closest` (re-exported there), so that they pickle by that name and
// a worker's error reaches a Dask client as the same class.

create_exception!(
    closest,
    InputError,
    PyValueError,
    "Bad input: an argument, array row, shape index or field named in the message."
);
create_exception!(
    closest,
    AdapterError,
    PyRuntimeError,
    "No usable GPU adapter (the message says how to install Mesa's lavapipe)."
);
create_exception!(
    closest,
    GpuError,
    PyRuntimeError,
    "The device failed (a validation error, out of memory, or a lost device), or the job needs more memory than the machine has."
);

/// One exception per kind of `closest::Error` (SPEC §6).
fn py_error(e: closest::Error) -> PyErr {
    match e {
        closest::Error::NoAdapter(_) => AdapterError::new_err(e.to_string()),
        closest::Error::Gpu(_) => GpuError::new_err(e.to_string()),
        // A job too large for the host names its argument (`res`), as bad input does.
        closest::Error::OutOfMemory(_) => GpuError::new_err(closest::error::flags_as_arguments(
            &e.to_string(),
            KEYWORD_ARGUMENTS,
        )),
        _ => InputError::new_err(closest::error::flags_as_arguments(
            &e.to_string(),
            KEYWORD_ARGUMENTS,
        )),
    }
}

/// The keyword arguments whose CLI flags (`--pad`) the engine's messages name: named as the
/// caller wrote them (`pad`).
const KEYWORD_ARGUMENTS: &[&str] = &[
    "res",
    "pad",
    "bounds",
    "sign",
    "band",
    "band_units",
    "chunk",
    "surface",
    "near",
    "sigma",
    "uniform",
    "seed",
    "samples",
    "fields",
    "layout",
];

/// `job` without the GIL (`Python::detach`), interruptible on the main thread: between chunks
/// the engine asks Python whether a signal came (Ctrl-C, Jupyter's interrupt),
/// and the exception its handler raised (KeyboardInterrupt) ends the job and is raised here.
/// Other errors as `py_error`.
fn detached<T: Send>(
    py: Python<'_>,
    job: impl FnOnce() -> closest::Result<T> + Send,
) -> PyResult<T> {
    // Only the main thread sees signals; other threads (Dask's workers, daemon threads that
    // may outlive the interpreter) never take the GIL back in the middle of a job.
    let threading = py.import("threading")?;
    let on_main_thread = threading
        .call_method0("main_thread")?
        .getattr("ident")?
        .eq(threading.call_method0("get_ident")?)?;
    if !on_main_thread {
        return off_the_gil(py, job).map_err(py_error);
    }
    let raised: Arc<std::sync::Mutex<Option<PyErr>>> = Arc::default();
    let outcome = py.detach(|| {
        let raised = raised.clone();
        let check = Box::new(move || {
            Python::attach(|py| match py.check_signals() {
                Ok(()) => false,
                Err(e) => {
                    *closest::sync::lock(&raised) = Some(e);
                    true
                }
            })
        });
        closest::interrupt::checking_interrupts(check, || closest::sync::in_process_pool(job))
    });
    match outcome {
        Err(closest::Error::Interrupted) => Err(closest::sync::lock(&raised)
            .take()
            .unwrap_or_else(|| pyo3::exceptions::PyKeyboardInterrupt::new_err("interrupted"))),
        other => other.map_err(py_error),
    }
}

/// `job` without the GIL, its rayon work on this process's pool (`sync::in_process_pool`: a
/// child forked from a process that used closest cannot use the pool it inherited).
fn off_the_gil<T: Send>(py: Python<'_>, job: impl FnOnce() -> T + Send) -> T {
    py.detach(|| closest::sync::in_process_pool(job))
}

fn input_error(message: String) -> PyErr {
    InputError::new_err(message)
}

/// Argument `name`'s value as a `T`, or `InputError` naming the argument, what it takes and what
/// came: PyO3's own conversion would raise `TypeError` or `OverflowError` (a negative count, a
/// string for a number), which SPEC §6 rules out.
fn read_argument<'py, T>(value: &Bound<'py, PyAny>, name: &str, takes: &str) -> PyResult<T>
where
    T: for<'a> FromPyObject<'a, 'py>,
{
    // Python's bools are ints: `surface=True` read as 1 sample. Only flags take them.
    let flag = takes == "True or False";
    let extracted = if value.cast::<PyBool>().is_ok() && !flag {
        None
    } else {
        value.extract::<T>().ok()
    };
    extracted.ok_or_else(|| {
        let shown = value
            .repr()
            .map(|r| r.to_string())
            .unwrap_or_else(|_| "a value".into());
        let shown: String = if shown.chars().count() > 60 {
            shown.chars().take(57).chain("...".chars()).collect()
        } else {
            shown
        };
        input_error(format!("{name}: expected {takes}, got {shown}"))
    })
}

/// One `#[pyo3(from_py_with = ...)]` reader an argument ([`read_argument`]).
macro_rules! argument_readers {
    ($($reader:ident: $ty:ty = $name:literal, $takes:expr;)*) => {$(
        fn $reader(value: &Bound<'_, PyAny>) -> PyResult<$ty> {
            read_argument(value, $name, $takes)
        }
    )*};
}

const COUNT: &str = "a whole number ≥ 0";
argument_readers! {
    adapter_name: Option<String> = "adapter", "None or a part of an adapter's name or a backend";
    portable_flag: bool = "portable_kernels", "True or False";
    mesh_records_name: String = "mesh_records", "one of auto, packed, indexed";
    mode_name: String = "mode", "one of solid, surface";
    paired_flag: bool = "paired", "True or False";
    sign_name: Option<String> = "sign", "None or one of pseudonormal, winding, auto, none";
    pad_fraction: f64 = "pad", "a fraction ≥ 0 of the mesh's largest extent";
    band_width_value: f64 = "band", "a width > 0";
    optional_band: Option<f64> = "band", "None or a width > 0";
    band_units_name: String = "band_units", "one of voxels, world";
    chunk_side: usize = "chunk", COUNT;
    samples_count: usize = "samples", COUNT;
    surface_count: usize = "surface", COUNT;
    near_count: usize = "near", COUNT;
    uniform_count: usize = "uniform", COUNT;
    seed_value: u64 = "seed", "a whole number from 0 to 2^64 - 1";
}

/// A path as `open` takes one: `str`, `bytes` (the name as the system holds it) or an
/// `os.PathLike` returning either.
fn path_value(value: &Bound<'_, PyAny>) -> Option<std::path::PathBuf> {
    if let Ok(path) = value.extract::<std::path::PathBuf>() {
        return Some(path);
    }
    let raw = value
        .py()
        .import("os")
        .ok()?
        .call_method1("fspath", (value,))
        .ok()?;
    let bytes = raw.cast::<pyo3::types::PyBytes>().ok()?.as_bytes();
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStrExt;
        Some(std::ffi::OsStr::from_bytes(bytes).into())
    }
    #[cfg(not(unix))]
    {
        std::str::from_utf8(bytes).ok().map(Into::into)
    }
}

/// An optional path argument (`None` or [`path_value`]), or `InputError` naming it.
fn optional_path(
    value: &Bound<'_, PyAny>,
    name: &str,
    takes: &str,
) -> PyResult<Option<std::path::PathBuf>> {
    if value.is_none() {
        return Ok(None);
    }
    match path_value(value) {
        Some(path) => Ok(Some(path)),
        // Its message, which shows the value.
        None => read_argument(value, name, takes),
    }
}

/// What `Engine.mesh` reads a mesh from: a file, or a mesh object's arrays.
enum MeshSource<'py> {
    File(std::path::PathBuf),
    Arrays(Bound<'py, PyAny>, Bound<'py, PyAny>),
}

/// The host mesh of `source`: a file read off the GIL, interruptible (Ctrl-C: a large mesh's
/// load takes seconds), or arrays.
fn host_mesh(py: Python<'_>, source: MeshSource<'_>) -> PyResult<closest::mesh::Mesh> {
    match source {
        MeshSource::File(path) => detached(py, || closest::io::load_mesh(&path)),
        MeshSource::Arrays(vertices, triangles) => mesh_from_arrays(&vertices, &triangles),
    }
}

/// `path`: a mesh file's path, or an object with `vertices` and `faces` (a `trimesh.Trimesh`)
/// or `vertices` and `triangles` (an Open3D `TriangleMesh`), so that meshes users hold in
/// those libraries need no file.
fn mesh_source<'py>(value: &Bound<'py, PyAny>) -> PyResult<Option<MeshSource<'py>>> {
    if value.is_none() {
        return Ok(None);
    }
    if let Some(path) = path_value(value) {
        return Ok(Some(MeshSource::File(path)));
    }
    if let Ok(vertices) = value.getattr("vertices") {
        for faces in ["faces", "triangles"] {
            if let Ok(triangles) = value.getattr(faces) {
                return Ok(Some(MeshSource::Arrays(vertices, triangles)));
            }
        }
    }
    read_argument::<std::path::PathBuf>(
        value,
        "path",
        "None, a path to a mesh file, or a mesh with vertices and faces (trimesh) or \
         triangles (Open3D)",
    )
    .map(|path| Some(MeshSource::File(path)))
}

fn out_path(value: &Bound<'_, PyAny>) -> PyResult<Option<std::path::PathBuf>> {
    optional_path(value, "out", "None or a path ending in .zarr")
}

/// `bounds`: six numbers x0, y0, z0, x1, y1, z1, or the corners as two rows (trimesh's
/// `mesh.bounds`, an (2, 3) array).
fn bounds_box(value: &Bound<'_, PyAny>) -> PyResult<Option<[f64; 6]>> {
    const TAKES: &str =
        "None, six numbers x0, y0, z0, x1, y1, z1 or two corners [[x0, y0, z0], [x1, y1, z1]]";
    if let Ok(Some([lo, hi])) = value.extract::<Option<[[f64; 3]; 2]>>() {
        return Ok(Some([lo[0], lo[1], lo[2], hi[0], hi[1], hi[2]]));
    }
    read_argument(value, "bounds", TAKES)
}

/// Runs an entry point's body so that a panic in it (a bug of ours) becomes `GpuError` naming
/// the call, an ordinary `Exception`, instead of pyo3's `PanicException`, which `except
/// Exception` does not catch and which left Dask's workers hanging.
fn guarded<T>(call: &str, body: impl FnOnce() -> PyResult<T>) -> PyResult<T> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(body)).unwrap_or_else(|panic| {
        let what = closest::sync::panic_message(&*panic);
        Err(GpuError::new_err(format!(
            "{call}: internal error (please report it): {what}"
        )))
    })
}

/// Rows of a float array read from Python: in place when it is float32 or float64 and
/// C-contiguous (float64 rows are converted chunk by chunk on the way to the device).
enum Rows<'a> {
    F32(&'a [f32]),
    F64(&'a [f64]),
}

/// A borrowed numpy array, kept alive while its rows are read.
enum Borrowed<'py> {
    F32(PyReadonlyArrayDyn<'py, f32>),
    F64(PyReadonlyArrayDyn<'py, f64>),
}

impl Borrowed<'_> {
    fn rows(&self) -> PyResult<Rows<'_>> {
        // Both were made C-contiguous and aligned by `float_rows`.
        let unreadable = |e| GpuError::new_err(format!("the array cannot be read in place: {e}"));
        Ok(match self {
            Borrowed::F32(a) => Rows::F32(a.as_slice().map_err(unreadable)?),
            Borrowed::F64(a) => Rows::F64(a.as_slice().map_err(unreadable)?),
        })
    }
}

impl Rows<'_> {
    fn len(&self, width: usize) -> usize {
        match self {
            Rows::F32(v) => v.len() / width,
            Rows::F64(v) => v.len() / width,
        }
    }
    fn value(&self, i: usize) -> f64 {
        match self {
            Rows::F32(v) => v[i] as f64,
            Rows::F64(v) => v[i],
        }
    }
    fn row<const N: usize>(&self, row: usize) -> [f64; N] {
        std::array::from_fn(|k| self.value(row * N + k))
    }
}

fn shape_text(tail: &[usize]) -> String {
    let dims: Vec<String> = tail.iter().map(|d| d.to_string()).collect();
    format!("(N, {})", dims.join(", "))
}

/// `obj` as a numpy array: itself, or through `__dlpack__` (an object with no `__array__`), or
/// whatever `numpy.asarray` makes of it; else an `InputError` naming the argument and what it
/// should be (`expected`).
fn numpy_array<'py>(
    obj: &Bound<'py, PyAny>,
    name: &str,
    expected: &str,
) -> PyResult<Bound<'py, PyAny>> {
    let numpy = obj.py().import("numpy")?;
    if obj.cast::<PyUntypedArray>().is_ok() {
        Ok(obj.clone())
    } else if obj.hasattr("__dlpack__")? && !obj.hasattr("__array__")? {
        numpy
            .call_method1("from_dlpack", (obj,))
            .map_err(|e| input_error(format!("{name}: cannot be read through __dlpack__: {e}")))
    } else {
        numpy.call_method1("asarray", (obj,)).map_err(|e| {
            let kind = obj.get_type();
            let type_name = kind
                .name()
                .map_or_else(|_| "?".to_string(), |n| n.to_string());
            // bfloat16, gradients or another device: what closest.torch reads for its user.
            let from_torch = kind
                .module()
                .is_ok_and(|m| m.to_string().split('.').next() == Some("torch"));
            let hint = if from_torch {
                " (closest.torch.query takes any torch tensor)"
            } else {
                ""
            };
            input_error(format!(
                "{name}: expected {expected}, got {type_name}, which numpy.asarray cannot read: {e}{hint}"
            ))
        })
    }
}

/// `name` as rows of `tail` float values: anything `numpy.asarray` takes with a floating dtype
/// (SPEC §6: lists, tuples, strided or read-only or unaligned or byte-swapped arrays, float16,
/// objects with `__array__` or `__dlpack__`) of shape (N, *tail). float32 and float64 arrays
/// that are C-contiguous, aligned and native-endian are read in place; any other is copied
/// once by `numpy.require` (float16 to float32, exactly; wider floats to float64). Else an
/// `InputError` naming the argument.
fn float_rows<'py>(obj: &Bound<'py, PyAny>, name: &str, tail: &[usize]) -> PyResult<Borrowed<'py>> {
    let want = shape_text(tail);
    let py = obj.py();
    let numpy = py.import("numpy")?;
    let array = numpy_array(
        obj,
        name,
        &format!("an array of shape {want} with a floating dtype"),
    )?;
    // An empty list is numpy's shape (0,): zero rows.
    let array = match array.cast::<PyUntypedArray>() {
        Ok(a) if a.shape() == [0] => {
            let mut shape = vec![0usize];
            shape.extend_from_slice(tail);
            array.call_method1("reshape", (shape,))?
        }
        _ => array,
    };
    let untyped = array
        .cast::<PyUntypedArray>()
        .map_err(|_| input_error(format!("{name}: numpy.asarray did not give an array")))?;
    let shape = untyped.shape();
    if shape.len() != tail.len() + 1 || shape[1..] != *tail {
        return Err(input_error(format!(
            "{name}: expected an array of shape {want}, got ({})",
            shape
                .iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    let dtype = untyped.dtype();
    if dtype.kind() != b'f' {
        return Err(input_error(format!(
            "{name}: expected a floating dtype (float16, float32 or float64), got {dtype}"
        )));
    }
    let target = if dtype.itemsize() >= 8 {
        "float64"
    } else {
        "float32"
    };
    // Anything but aligned native C-contiguous float32 or float64 is copied once: refused
    // first where the copy would not fit in memory (a broadcast view of a few bytes may stand
    // for gigabytes), rather than numpy's MemoryError or the kernel's OOM killer.
    let item_bytes = if target == "float32" { 4 } else { 8 };
    let in_place = untyped.is_c_contiguous()
        && dtype.itemsize() == item_bytes
        && dtype.is_native_byteorder().unwrap_or(true)
        && array
            .getattr("flags")?
            .getattr("aligned")?
            .extract::<bool>()?;
    if !in_place {
        let values: usize = tail.iter().product();
        check_result_fits(
            &format!("{name}: its copy as C-contiguous {target}"),
            shape[0],
            values * item_bytes,
        )?;
    }
    let kwargs = PyDict::new(py);
    kwargs.set_item("dtype", target)?;
    kwargs.set_item("requirements", "CA")?;
    let ready = numpy
        .call_method("require", (&array,), Some(&kwargs))
        .map_err(|e| {
            if e.is_instance_of::<pyo3::exceptions::PyMemoryError>(py) {
                input_error(format!("{name}: its copy as C-contiguous {target}: {e}"))
            } else {
                e
            }
        })?;
    Ok(if target == "float32" {
        Borrowed::F32(ready.extract()?)
    } else {
        Borrowed::F64(ready.extract()?)
    })
}

/// Two arrays of segments (N, 2, 3), read in place chunk by chunk.
struct ArrayPairs<'a>(&'a Rows<'a>, &'a Rows<'a>);

impl SegmentReader for ArrayPairs<'_> {
    fn rows(&self) -> usize {
        self.0.len(6)
    }

    fn read(
        &mut self,
        range: std::ops::Range<usize>,
        a: &mut Vec<[f64; 6]>,
        b: &mut Vec<[f64; 6]>,
    ) -> closest::Result<()> {
        a.clear();
        a.extend(range.clone().map(|i| self.0.row::<6>(i)));
        b.clear();
        b.extend(range.map(|i| self.1.row::<6>(i)));
        Ok(())
    }
}

/// An array of points (N, 3) as the engine takes them: read in place, f32 or f64.
fn points_of<'a>(points: &'a Rows<'a>) -> Points<'a> {
    match points {
        Rows::F32(v) => Points::F32(bytemuck::cast_slice(v)),
        Rows::F64(v) => Points::F64(bytemuck::cast_slice(v)),
    }
}

fn parse_fields(family: Family, fields: Option<&Bound<'_, PyAny>>) -> PyResult<Fields> {
    let Some(fields) = fields.filter(|f| !f.is_none()) else {
        return Ok(Fields::all(family));
    };
    let names: Vec<String> = if let Ok(text) = fields.cast::<PyString>() {
        text.extract::<String>()?
            .split(',')
            .map(|s| s.trim().to_string())
            .collect()
    } else {
        fields.extract().map_err(|_| {
            input_error("fields: expected a comma-separated string or a list of field names".into())
        })?
    };
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    Fields::from_names(family, &names).map_err(|e| {
        // The library's message names `fields`; keep it as the argument's name.
        input_error(e.to_string())
    })
}

fn parse_mode(mode: &str) -> PyResult<Mode> {
    Mode::parse(mode).map_err(py_error)
}

/// None is unsigned, as "none"; "auto" is decided per mesh (`GpuMesh::resolve_sign`).
fn parse_sign_choice(sign: Option<&str>) -> PyResult<SignChoice> {
    sign.map_or(Ok(SignChoice::Method(Sign::None)), SignChoice::parse)
        .map_err(py_error)
}

/// How deeply Python values given as shapes may nest: serde_json's own limit for JSON text.
/// A shape needs four levels; without a bound a list nested 10,000 deep (or one that holds
/// itself) would overflow the stack and crash the interpreter.
const MAX_JSON_DEPTH: usize = 128;

/// A Python value as JSON, for the scene reader (which names the shape and field of any
/// problem). Non-finite floats become numbers too large for f64, which it reports as
/// non-finite; numpy arrays and scalars go through `tolist()`. `what` names the argument.
fn to_json(value: &Bound<'_, PyAny>, what: &str) -> PyResult<serde_json::Value> {
    to_json_within(value, what, MAX_JSON_DEPTH)
}

fn to_json_within(
    value: &Bound<'_, PyAny>,
    what: &str,
    depth_left: usize,
) -> PyResult<serde_json::Value> {
    use serde_json::Value;
    let Some(depth_left) = depth_left.checked_sub(1) else {
        return Err(input_error(format!(
            "{what}: nested deeper than {MAX_JSON_DEPTH} levels (a list or dict that holds \
             itself?); a shape is a dict of numbers and lists of numbers"
        )));
    };
    if value.is_none() {
        return Ok(Value::Null);
    }
    if let Ok(b) = value.cast::<PyBool>() {
        return Ok(Value::Bool(b.is_true()));
    }
    if let Ok(i) = value.cast::<PyInt>() {
        let text = i.str()?.to_string();
        return serde_json::from_str(&text).map_err(|e| input_error(format!("{what}: {e}")));
    }
    if let Ok(f) = value.cast::<PyFloat>() {
        // A finite float as its shortest exact text (no parse); others as numbers too large
        // for f64, which the scene reader refuses as non-finite.
        if let Some(number) = serde_json::Number::from_f64(f.value()) {
            return Ok(Value::Number(number));
        }
        let text = if f.value() < 0.0 { "-1e999" } else { "1e999" };
        return serde_json::from_str(text).map_err(|e| input_error(format!("{what}: {e}")));
    }
    if let Ok(s) = value.cast::<PyString>() {
        return Ok(Value::String(s.extract::<String>()?));
    }
    if let Ok(d) = value.cast::<PyDict>() {
        let mut map = serde_json::Map::new();
        for (k, v) in d.iter() {
            let key: String = k
                .extract()
                .map_err(|_| input_error(format!("{what}: dict key {k} is not a string")))?;
            map.insert(key, to_json_within(&v, what, depth_left)?);
        }
        return Ok(Value::Object(map));
    }
    if value.cast::<PyList>().is_ok() || value.cast::<PyTuple>().is_ok() {
        let items: PyResult<Vec<Value>> = value
            .try_iter()?
            .map(|v| to_json_within(&v?, what, depth_left))
            .collect();
        return Ok(Value::Array(items?));
    }
    if value.hasattr("tolist")? {
        return to_json_within(&value.call_method0("tolist")?, what, depth_left);
    }
    Err(input_error(format!(
        "{what}: cannot read a value of type {} (numbers, strings, lists and dicts only)",
        value.get_type().name()?
    )))
}

/// A shape dict's fields that some kind reads, numbers and strings read as they are (a value
/// tree a shape, its floats written as text and read back, took most of a long list's time);
/// `None` for an item that is no dict (refused by the reader, after `to_json`'s own checks).
fn shape_fields(
    item: &Bound<'_, PyAny>,
    what: &str,
) -> PyResult<Option<Vec<(&'static str, closest::io::scene::FieldValue)>>> {
    let Ok(dict) = item.cast::<PyDict>() else {
        to_json(item, what)?;
        return Ok(None);
    };
    let mut fields = Vec::with_capacity(dict.len());
    for (k, v) in dict.iter() {
        let key: String = k
            .extract()
            .map_err(|_| input_error(format!("{what}: dict key {k} is not a string")))?;
        if let Some(name) = closest::io::scene::shape_field(&key) {
            fields.push((name, field_value(&v, what)?));
        }
    }
    Ok(Some(fields))
}

/// A field's value: a float or an int (not a bool) as a number, a list or tuple of them (or a
/// numpy array's `tolist()`) as numbers, a string as text, anything else as JSON.
fn field_value(value: &Bound<'_, PyAny>, what: &str) -> PyResult<closest::io::scene::FieldValue> {
    use closest::io::scene::{FieldValue, PlainNumber};
    fn number(value: &Bound<'_, PyAny>) -> Option<PlainNumber> {
        if let Ok(f) = value.cast::<PyFloat>() {
            return Some(PlainNumber::Float(f.value()));
        }
        // An int beyond i64 goes as JSON, whose text keeps every digit.
        let int = value.cast::<PyInt>().ok()?;
        (!value.is_instance_of::<PyBool>())
            .then(|| int.extract::<i64>().ok().map(PlainNumber::Int))
            .flatten()
    }
    let listed;
    let value = if number(value).is_none()
        && value.cast::<PyList>().is_err()
        && value.cast::<PyTuple>().is_err()
        && value.cast::<PyString>().is_err()
        && !value.is_instance_of::<PyBool>()
        && !value.is_none()
        && value.hasattr("tolist")?
    {
        listed = value.call_method0("tolist")?;
        &listed
    } else {
        value
    };
    if let Some(x) = number(value) {
        return Ok(FieldValue::Number(x));
    }
    if let Ok(text) = value.cast::<PyString>() {
        return Ok(FieldValue::Text(text.extract()?));
    }
    if value.cast::<PyList>().is_ok() || value.cast::<PyTuple>().is_ok() {
        let numbers: Option<Vec<PlainNumber>> = value
            .try_iter()?
            .map(|item| item.ok().as_ref().and_then(number))
            .collect();
        if let Some(numbers) = numbers {
            return Ok(FieldValue::Numbers(numbers));
        }
    }
    Ok(FieldValue::Json(to_json(value, what)?))
}

/// The argument `what` (`shapes`, `bodies`): a list of SPEC §1 dicts, or the path of a scene
/// `.json`.
fn parse_shapes(shapes: &Bound<'_, PyAny>, what: &str) -> PyResult<Vec<Shape>> {
    if let Ok(list) = shapes.cast::<PyList>() {
        let fields: PyResult<Vec<_>> = list.iter().map(|v| shape_fields(&v, what)).collect();
        return closest::io::scene::shapes_from_fields(&fields?, what).map_err(py_error);
    }
    if let Some(path) = path_value(shapes) {
        return closest::io::load_scene(&path).map_err(py_error);
    }
    Err(input_error(format!(
        "{what}: expected a list of shape dicts or the path of a scene .json, got {}",
        shapes.get_type().name()?
    )))
}

/// A result dict: each column handed to numpy without a copy (the vector becomes the array's
/// buffer), vectors reshaped to (N, 3) as views.
fn columns_to_dict(py: Python<'_>, columns: Columns) -> PyResult<Bound<'_, PyDict>> {
    let dict = PyDict::new(py);
    for (field, values) in columns.columns {
        let rows = values.len() / field.width;
        let array = if field.is_index {
            let values: Vec<i32> = bytemuck::allocation::cast_vec(values);
            values.into_pyarray(py).into_any()
        } else {
            let values: Vec<f32> = bytemuck::allocation::cast_vec(values);
            values.into_pyarray(py).into_any()
        };
        let array = if field.width > 1 {
            array.call_method1("reshape", ((rows, field.width),))?
        } else {
            array
        };
        dict.set_item(field.name, array)?;
    }
    Ok(dict)
}

/// A device object (an engine, or what lives on its device) and the process that made it. A
/// child forked from that process (multiprocessing's "fork") inherits the object but not the
/// driver's threads: used there, or dropped there (at the child's exit), it waited forever for
/// them. In another process it is refused with `GpuError` (`here`) and never dropped.
struct OfProcess<T> {
    value: std::mem::ManuallyDrop<T>,
    made_in: u32,
}

impl<T> OfProcess<T> {
    fn new(value: T) -> Self {
        OfProcess {
            value: std::mem::ManuallyDrop::new(value),
            made_in: std::process::id(),
        }
    }

    fn in_its_process(&self) -> bool {
        self.made_in == std::process::id()
    }

    /// Ok where the object may be used: the process that made it.
    fn here(&self, call: &str) -> PyResult<()> {
        if self.in_its_process() {
            return Ok(());
        }
        Err(GpuError::new_err(format!(
            "{call}: this object's engine was opened in process {}, and this process ({}) is a \
             fork of it: a device does not survive fork. Open a closest.Engine() in this \
             process, or start workers with multiprocessing's 'spawn' or 'forkserver' method",
            self.made_in,
            std::process::id()
        )))
    }
}

impl<T> std::ops::Deref for OfProcess<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.value
    }
}

impl<T: Clone> Clone for OfProcess<T> {
    /// The copy belongs to the same process as the original.
    fn clone(&self) -> Self {
        OfProcess {
            value: self.value.clone(),
            made_in: self.made_in,
        }
    }
}

impl<T> Drop for OfProcess<T> {
    fn drop(&mut self) {
        if self.in_its_process() {
            // SAFETY: dropped once, here; the value is never read after.
            unsafe { std::mem::ManuallyDrop::drop(&mut self.value) }
        }
    }
}

/// `guarded`, refused in a process `engine` does not belong to (`OfProcess`).
fn guarded_on<T>(
    engine: &OfProcess<Arc<closest::Engine>>,
    call: &str,
    body: impl FnOnce() -> PyResult<T>,
) -> PyResult<T> {
    guarded(call, || {
        engine.here(call)?;
        body()
    })
}

/// The GPU engine: one adapter, pipelines built once. Safe to share between threads.
#[pyclass(frozen, module = "closest")]
struct Engine {
    inner: OfProcess<Arc<closest::Engine>>,
}

#[pymethods]
impl Engine {
    #[new]
    #[pyo3(signature = (adapter=None, portable_kernels=false, *, mesh_records=String::from("auto")))]
    fn new(
        py: Python<'_>,
        #[pyo3(from_py_with = adapter_name)] adapter: Option<String>,
        #[pyo3(from_py_with = portable_flag)] portable_kernels: bool,
        #[pyo3(from_py_with = mesh_records_name)] mesh_records: String,
    ) -> PyResult<Engine> {
        guarded("Engine()", || {
            let mesh_records = closest::MeshRecords::parse(&mesh_records).map_err(py_error)?;
            let options = closest::EngineOptions {
                adapter,
                portable_kernels,
                mesh_records,
                ..Default::default()
            };
            let inner = off_the_gil(py, || closest::Engine::new(&options)).map_err(py_error)?;
            Ok(Engine {
                inner: OfProcess::new(Arc::new(inner)),
            })
        })
    }

    /// {"adapter", "backend", "device_type", "limits": {...}}
    #[getter]
    fn info<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        guarded("Engine.info", || {
            let info = self.inner.adapter_info();
            let l = self.inner.limits();
            let limits = PyDict::new(py);
            limits.set_item(
                "max_storage_buffer_binding_size",
                l.max_storage_buffer_binding_size,
            )?;
            limits.set_item("max_buffer_size", l.max_buffer_size)?;
            limits.set_item(
                "max_compute_workgroups_per_dimension",
                l.max_compute_workgroups_per_dimension,
            )?;
            limits.set_item("rows_per_chunk", self.inner.chunk_rows())?;
            limits.set_item("subgroup_kernels", self.inner.subgroup_kernels())?;
            let dict = PyDict::new(py);
            dict.set_item("adapter", &info.name)?;
            dict.set_item("backend", format!("{:?}", info.backend).to_lowercase())?;
            dict.set_item(
                "device_type",
                format!("{:?}", info.device_type).to_lowercase(),
            )?;
            dict.set_item("limits", limits)?;
            Ok(dict)
        })
    }

    /// Upload a scene once (BVH built here): a list of shape dicts, or a scene .json path.
    fn scene(&self, py: Python<'_>, shapes: &Bound<'_, PyAny>) -> PyResult<Scene> {
        guarded_on(&self.inner, "Engine.scene", || {
            let shapes = parse_shapes(shapes, "shapes")?;
            let engine = self.inner.clone();
            let count = shapes.len();
            let scene = off_the_gil(py, || engine.upload_scene(&shapes)).map_err(py_error)?;
            Ok(Scene {
                engine,
                scene: OfProcess::new(scene),
                count,
                shapes,
                body_targets: OfProcess::new(std::sync::OnceLock::new()),
            })
        })
    }

    /// Upload a triangle mesh once: `mesh(path)` (.obj, .stl, .ply, .off, .glb, .gltf), `mesh(m)` of a
    /// `trimesh.Trimesh` or an Open3D `TriangleMesh`, or
    /// `mesh(vertices=(V, 3), triangles=(F, 3))`.
    #[pyo3(signature = (path=None, *, vertices=None, triangles=None))]
    fn mesh<'py>(
        &self,
        py: Python<'py>,
        #[pyo3(from_py_with = mesh_source)] path: Option<MeshSource<'py>>,
        vertices: Option<&Bound<'py, PyAny>>,
        triangles: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<MeshTarget> {
        guarded_on(&self.inner, "Engine.mesh", || {
            let mesh = match (path, vertices, triangles) {
                (Some(source), None, None) => host_mesh(py, source)?,
                (None, Some(vertices), Some(triangles)) => mesh_from_arrays(vertices, triangles)?,
                _ => {
                    return Err(input_error(
                        "mesh: pass a path, or both vertices= and triangles=".into(),
                    ));
                }
            };
            let engine = self.inner.clone();
            let triangles = mesh.triangles.len();
            // Checked for `auto` beside the build: sdf, sample and band grids sign by it.
            let mesh = detached(py, || engine.upload_mesh_checking_signs(mesh))?;
            Ok(MeshTarget {
                engine,
                mesh: OfProcess::new(mesh),
                triangles,
                body_targets: OfProcess::new(std::sync::OnceLock::new()),
            })
        })
    }

    /// `closest.mesh_distance` of two meshes given as paths or trimesh or Open3D meshes, neither
    /// opened before: A's hierarchy is built while A's points are answered against B
    /// (`Engine::mesh_distance_uploading`). The answer of `Mesh.distance_to`.
    #[pyo3(signature = (a, b, samples=0, seed=0, sign=None))]
    fn _mesh_distance_of<'py>(
        &self,
        py: Python<'py>,
        #[pyo3(from_py_with = mesh_source)] a: Option<MeshSource<'py>>,
        #[pyo3(from_py_with = mesh_source)] b: Option<MeshSource<'py>>,
        #[pyo3(from_py_with = samples_count)] samples: usize,
        #[pyo3(from_py_with = seed_value)] seed: u64,
        #[pyo3(from_py_with = sign_name)] sign: Option<String>,
    ) -> PyResult<Bound<'py, PyDict>> {
        guarded_on(&self.inner, "mesh_distance", || {
            let (Some(a), Some(b)) = (a, b) else {
                return Err(input_error(
                    "mesh_distance: a and b are meshes, not None".into(),
                ));
            };
            let sign = parse_sign_choice(sign.as_deref())?;
            let meshes = (host_mesh(py, a)?, host_mesh(py, b)?);
            let vertices = meshes.0.vertices.len() + meshes.1.vertices.len();
            check_result_fits("mesh_distance", vertices, 4)?;
            let engine = &self.inner;
            let (summary, deviations, _) = detached(py, || {
                engine.mesh_distance_uploading(meshes, (samples, seed, sign), &mut |_, _| {})
            })?;
            distance_dict(py, &summary, deviations)
        })
    }

    /// Point i against shape i.
    #[pyo3(signature = (shapes, points, mode=String::from("solid"), fields=None))]
    fn query_paired<'py>(
        &self,
        py: Python<'py>,
        shapes: &Bound<'py, PyAny>,
        points: &Bound<'py, PyAny>,
        #[pyo3(from_py_with = mode_name)] mode: String,
        fields: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        guarded_on(&self.inner, "Engine.query_paired", || {
            let shapes = parse_shapes(shapes, "shapes")?;
            let borrowed = float_rows(points, "points", &[3])?;
            let (mode, fields) = (parse_mode(&mode)?, parse_fields(Family::Hits, fields)?);
            let points = borrowed.rows()?;
            let rows = points.len(3);
            if rows != shapes.len() {
                return Err(input_error(format!(
                    "query_paired needs one shape per point: {} shapes, {rows} points",
                    shapes.len()
                )));
            }
            let engine = &self.inner;
            let columns = detached(py, || {
                let job = PairedQuery {
                    shapes: &shapes,
                    points: points_of(&points),
                    mode,
                    fields,
                };
                Columns::collect(fields, rows, |sink| engine.query_paired(job, sink))
            })?;
            columns_to_dict(py, columns)
        })
    }

    /// Closest points between segment a[i] and segment b[i]; each (N, 2, 3).
    #[pyo3(signature = (a, b, fields=None))]
    fn segment_pairs<'py>(
        &self,
        py: Python<'py>,
        a: &Bound<'py, PyAny>,
        b: &Bound<'py, PyAny>,
        fields: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        guarded_on(&self.inner, "Engine.segment_pairs", || {
            let (a, b) = (float_rows(a, "a", &[2, 3])?, float_rows(b, "b", &[2, 3])?);
            let fields = parse_fields(Family::Segments, fields)?;
            let (a, b) = (a.rows()?, b.rows()?);
            let rows = a.len(6);
            if b.len(6) != rows {
                return Err(input_error(format!(
                    "segment_pairs: a has {rows} segments but b has {}: segment i of a pairs with \
                 segment i of b",
                    b.len(6)
                )));
            }
            let engine = &self.inner;
            let columns = detached(py, || {
                let mut pairs = ArrayPairs(&a, &b);
                let job = SegmentPairs {
                    pairs: SegmentRows::Read(&mut pairs),
                    fields,
                };
                Columns::collect(fields, rows, |sink| engine.segment_pairs(job, sink))
            })?;
            columns_to_dict(py, columns)
        })
    }
}

fn mesh_from_arrays(vertices: &Bound<'_, PyAny>, triangles: &Bound<'_, PyAny>) -> PyResult<Mesh> {
    let borrowed = float_rows(vertices, "vertices", &[3])?;
    let rows = borrowed.rows()?;
    check_result_fits("vertices: their f64 copy", rows.len(3), 24)?;
    let vertices: Vec<DVec3> = (0..rows.len(3))
        .map(|i| {
            let [x, y, z] = rows.row::<3>(i);
            DVec3::new(x, y, z)
        })
        .collect();
    let bad = || {
        input_error(
            "triangles: expected integers of shape (F, 3), vertex indices (an array or anything numpy.asarray reads)".into(),
        )
    };
    // Anything numpy reads as integers (lists, strided, byte-swapped, unaligned arrays,
    // `__dlpack__`), as the vertices take any floats.
    let triangles = numpy_array(triangles, "triangles", "integers of shape (F, 3)")?;
    let array = triangles.cast::<PyUntypedArray>().map_err(|_| bad())?;
    if array.ndim() != 2 || array.shape()[1] != 3 || !matches!(array.dtype().kind(), b'i' | b'u') {
        return Err(bad());
    }
    // The 64-bit copy below and the u32 rows beside it.
    check_result_fits("triangles: their copy", array.shape()[0], 24 + 12)?;
    // Read as one native 64-bit array (a copy), not element by element through Python:
    // igea's 268,686 rows took 70–120 ms that way. Unsigned stays unsigned, so 2^63 and
    // above are named as given.
    let tris = if array.dtype().kind() == b'u' {
        triangle_rows::<u64>(&triangles, "uint64")?
    } else {
        triangle_rows::<i64>(&triangles, "int64")?
    };
    Mesh::new(vertices, tris, "mesh").map_err(py_error)
}

/// An integer (F, 3) array's rows as vertex indices, read as `dtype` (T's numpy name).
fn triangle_rows<T>(triangles: &Bound<'_, PyAny>, dtype: &str) -> PyResult<Vec<[u32; 3]>>
where
    T: numpy::Element + Copy + std::fmt::Display,
    u32: TryFrom<T>,
{
    let indices = triangles
        .call_method1("astype", (dtype,))?
        .cast_into::<PyArray2<T>>()?;
    let indices = indices.readonly();
    let indices = indices.as_array();
    let mut rows = Vec::with_capacity(indices.nrows());
    for (t, tri) in indices.rows().into_iter().enumerate() {
        let corner = |k: usize| {
            u32::try_from(tri[k]).map_err(|_| {
                input_error(format!(
                    "triangles: row {t}: vertex index {} is out of range (0 ..= {})",
                    tri[k],
                    u32::MAX
                ))
            })
        };
        rows.push([corner(0)?, corner(1)?, corner(2)?]);
    }
    Ok(rows)
}

/// A scene resident on the device.
#[pyclass(frozen, module = "closest")]
struct Scene {
    engine: OfProcess<Arc<closest::Engine>>,
    scene: OfProcess<GpuScene>,
    count: usize,
    /// The shapes, for paired bodies and for the body walk's own upload.
    shapes: Vec<Shape>,
    /// The scene as body targets (an axis-aligned BVH), uploaded at the first body query.
    body_targets: OfProcess<std::sync::OnceLock<GpuScene>>,
}

#[pymethods]
impl Scene {
    fn __len__(&self) -> usize {
        self.count
    }

    /// Nearest shape for every point: {"point", "distance", "shape", "normal"}.
    #[pyo3(signature = (points, mode=String::from("solid"), fields=None))]
    fn query<'py>(
        &self,
        py: Python<'py>,
        points: &Bound<'py, PyAny>,
        #[pyo3(from_py_with = mode_name)] mode: String,
        fields: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        guarded_on(&self.engine, "Scene.query", || {
            let borrowed = float_rows(points, "points", &[3])?;
            let (mode, fields) = (parse_mode(&mode)?, parse_fields(Family::Hits, fields)?);
            let points = borrowed.rows()?;
            let rows = points.len(3);
            if self.count == 0 && rows > 0 {
                return Err(input_error("shapes: the scene has no shapes".into()));
            }
            let (engine, scene) = (&self.engine, &self.scene);
            let columns = detached(py, || {
                let job = SceneQuery {
                    scene,
                    points: points_of(&points),
                    mode,
                    fields,
                };
                Columns::collect(fields, rows, |sink| engine.query_scene(job, sink))
            })?;
            columns_to_dict(py, columns)
        })
    }

    /// Sphere contacts, spheres (N, 4) as cx, cy, cz, r: {"point", "depth", "normal",
    /// "shape"}; or, with `bodies=` (shape dicts or a scene .json path of convex shapes), each
    /// body's nearest shape (`paired=True`: body i against shape i): {"distance",
    /// "point_body", "point_target", "normal", "shape"} (SPEC §9).
    #[pyo3(signature = (spheres=None, fields=None, *, bodies=None, paired=false))]
    fn contacts<'py>(
        &self,
        py: Python<'py>,
        spheres: Option<&Bound<'py, PyAny>>,
        fields: Option<&Bound<'py, PyAny>>,
        bodies: Option<&Bound<'py, PyAny>>,
        #[pyo3(from_py_with = paired_flag)] paired: bool,
    ) -> PyResult<Bound<'py, PyDict>> {
        guarded_on(&self.engine, "Scene.contacts", || {
            let spheres = match (spheres, bodies) {
                (Some(spheres), None) if !paired => spheres,
                (None, Some(bodies)) => {
                    let bodies = parse_bodies(bodies)?;
                    let fields = parse_fields(Family::Bodies, fields)?;
                    return self.body_contacts(py, &bodies, paired, fields);
                }
                _ => {
                    return Err(input_error(
                        "contacts: pass spheres, or bodies= (paired= goes with bodies=)".into(),
                    ));
                }
            };
            let borrowed = float_rows(spheres, "spheres", &[4])?;
            let fields = parse_fields(Family::Contacts, fields)?;
            let rows = borrowed.rows()?;
            if self.count == 0 && rows.len(4) > 0 {
                return Err(input_error("shapes: the scene has no shapes".into()));
            }
            // Read in place, float64 centres rounded once, in the scene's frame.
            let count = rows.len(4);
            let (engine, scene) = (&self.engine, &self.scene);
            let columns = detached(py, || {
                let spheres = match rows {
                    Rows::F32(values) => Spheres::Slice(bytemuck::cast_slice(values)),
                    Rows::F64(values) => Spheres::SliceF64(bytemuck::cast_slice(values)),
                };
                let job = SphereContacts {
                    scene,
                    spheres,
                    fields,
                };
                Columns::collect(fields, count, |sink| engine.sphere_contacts(job, sink))
            })?;
            columns_to_dict(py, columns)
        })
    }
}

impl Scene {
    fn body_contacts<'py>(
        &self,
        py: Python<'py>,
        bodies: &[Shape],
        paired: bool,
        fields: Fields,
    ) -> PyResult<Bound<'py, PyDict>> {
        let engine = &self.engine;
        if let Some((torus, body)) = closest::engine::torus_conflict(bodies, &self.shapes, paired) {
            let problem = closest::engine::torus_refusal(torus, body, bodies[body].kind());
            return Err(input_error(format!("shapes: {problem}")));
        }
        if !paired && self.count == 0 && !bodies.is_empty() {
            return Err(input_error("shapes: the scene has no shapes".into()));
        }
        let columns = detached(py, || {
            if paired {
                let job = BodyPairs {
                    bodies,
                    targets: &self.shapes,
                    fields,
                };
                return Columns::collect(fields, bodies.len(), |sink| engine.body_pairs(job, sink));
            }
            let targets = match self.body_targets.get() {
                Some(targets) => targets,
                None => {
                    let uploaded = engine.upload_body_targets(&self.shapes)?;
                    self.body_targets.get_or_init(|| uploaded)
                }
            };
            let job = BodyContacts {
                targets,
                bodies,
                fields,
            };
            Columns::collect(fields, bodies.len(), |sink| engine.body_contacts(job, sink))
        })?;
        columns_to_dict(py, columns)
    }
}

/// Bodies as shape dicts or a scene .json path, each a convex kind (SPEC §9), refused with
/// its index and field otherwise.
fn parse_bodies(bodies: &Bound<'_, PyAny>) -> PyResult<Vec<Shape>> {
    let bodies = parse_shapes(bodies, "bodies")?;
    closest::engine::check_bodies(&bodies, "bodies").map_err(py_error)?;
    Ok(bodies)
}

/// A triangle mesh resident on the device.
#[pyclass(frozen, module = "closest", name = "Mesh")]
struct MeshTarget {
    engine: OfProcess<Arc<closest::Engine>>,
    mesh: OfProcess<GpuMesh>,
    triangles: usize,
    /// The triangles as body targets, uploaded at the first body query.
    body_targets: OfProcess<std::sync::OnceLock<GpuScene>>,
}

#[pymethods]
impl MeshTarget {
    fn __len__(&self) -> usize {
        self.triangles
    }

    /// The engine the mesh lives on (the same device and kernels as the one that loaded it).
    #[getter]
    fn engine(&self) -> Engine {
        Engine {
            inner: self.engine.clone(),
        }
    }

    /// How the triangles are stored on the device: "packed" or "indexed" (what the engine's
    /// `mesh_records` chose).
    #[getter]
    fn records(&self) -> &'static str {
        match self.mesh.records() {
            closest::MeshRecords::Indexed => "indexed",
            _ => "packed",
        }
    }

    /// The method `sign="auto"` picks for this mesh, and why: (name, reason).
    #[getter]
    fn auto_sign(&self, py: Python<'_>) -> PyResult<(&'static str, String)> {
        guarded_on(&self.engine, "Mesh.auto_sign", || {
            let auto = detached(py, || self.mesh.auto_sign_interruptible().cloned())?;
            let name = match auto.sign {
                Sign::Pseudonormal => "pseudonormal",
                _ => "winding",
            };
            Ok((name, auto.reason))
        })
    }

    /// Each body's nearest triangle (SPEC §9), bodies as shape dicts or a scene .json path of
    /// convex shapes: {"distance", "point_body", "point_target", "normal", "shape"}.
    #[pyo3(signature = (*, bodies, fields=None))]
    fn contacts<'py>(
        &self,
        py: Python<'py>,
        bodies: &Bound<'py, PyAny>,
        fields: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        guarded_on(&self.engine, "Mesh.contacts", || {
            let bodies = parse_bodies(bodies)?;
            let fields = parse_fields(Family::Bodies, fields)?;
            let engine = &self.engine;
            let columns = detached(py, || {
                let targets = match self.body_targets.get() {
                    Some(targets) => targets,
                    None => {
                        let uploaded = engine.upload_mesh_body_targets(self.mesh.mesh())?;
                        self.body_targets.get_or_init(|| uploaded)
                    }
                };
                let job = BodyContacts {
                    targets,
                    bodies: &bodies,
                    fields,
                };
                Columns::collect(fields, bodies.len(), |sink| engine.body_contacts(job, sink))
            })?;
            columns_to_dict(py, columns)
        })
    }

    /// Nearest triangle for every point; `sign`: None, "pseudonormal", "winding" or "auto".
    #[pyo3(signature = (points, sign=None, fields=None))]
    fn query<'py>(
        &self,
        py: Python<'py>,
        points: &Bound<'py, PyAny>,
        #[pyo3(from_py_with = sign_name)] sign: Option<String>,
        fields: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        guarded_on(&self.engine, "Mesh.query", || {
            let borrowed = float_rows(points, "points", &[3])?;
            let (sign, fields) = (
                parse_sign_choice(sign.as_deref())?,
                parse_fields(Family::Hits, fields)?,
            );
            let points = borrowed.rows()?;
            let rows = points.len(3);
            let (engine, mesh) = (&self.engine, &self.mesh);
            let sign = off_the_gil(py, || engine.resolve_sign(mesh, sign)).map_err(py_error)?;
            let columns = detached(py, || {
                let job = MeshQuery {
                    mesh,
                    points: points_of(&points),
                    sign,
                    fields,
                };
                Columns::collect(fields, rows, |sink| engine.query_mesh(job, sink))
            })?;
            columns_to_dict(py, columns)
        })
    }

    /// Signed-distance grid: {"sdf" (NX, NY, NZ) float32, "origin" (3,), "spacing" (3,)}.
    /// With `band=W`, a narrow band (SPEC §8): samples within W of the surface exact, the rest
    /// ±W (W in voxels, or world units with `band_units="world"`). With `out="x.zarr"`, the
    /// grid streams to a Zarr v3 store in chunks of `chunk` samples a side instead of memory,
    /// and the dict has "out", "origin", "spacing" and "sign" (the method applied).
    #[pyo3(signature = (res, pad=0.1, bounds=None, sign=Some(String::from("auto")), band=None, band_units=String::from("voxels"), out=None, chunk=64))]
    #[allow(clippy::too_many_arguments)]
    fn sdf<'py>(
        &self,
        py: Python<'py>,
        res: &Bound<'py, PyAny>,
        #[pyo3(from_py_with = pad_fraction)] pad: f64,
        #[pyo3(from_py_with = bounds_box)] bounds: Option<[f64; 6]>,
        #[pyo3(from_py_with = sign_name)] sign: Option<String>,
        #[pyo3(from_py_with = optional_band)] band: Option<f64>,
        #[pyo3(from_py_with = band_units_name)] band_units: String,
        #[pyo3(from_py_with = out_path)] out: Option<std::path::PathBuf>,
        #[pyo3(from_py_with = chunk_side)] chunk: usize,
    ) -> PyResult<Bound<'py, PyDict>> {
        guarded_on(&self.engine, "Mesh.sdf", || {
            let grid = self.grid_of(res, pad, bounds)?;
            let sign = parse_sign_choice(sign.as_deref())?;
            let band = band
                .map(|w| band_width(&grid, w, &band_units))
                .transpose()?;
            let mut store = match &out {
                Some(path) if !is_zarr(path) => {
                    return Err(input_error(format!(
                        "Mesh.sdf: out: expected a path ending in .zarr, got {}",
                        path.display()
                    )));
                }
                Some(path) => {
                    let layout = ZarrLayout::sdf_grid(grid.res, chunk, band);
                    Some(
                        OutputFile::create_zarr(path, layout, &grid.constants())
                            .map_err(py_error)?,
                    )
                }
                None => {
                    check_result_fits("Mesh.sdf", grid.len(), 4)?;
                    None
                }
            };
            let (engine, mesh) = (&self.engine, &self.mesh);
            let (values, sign) = detached(py, || {
                let sign = engine.resolve_sign(mesh, sign)?;
                let mut values = Vec::new();
                let mut sink = |chunk: &[f32]| match &mut store {
                    Some(store) => store.append(chunk.len(), &[Values::f32_column(chunk, 1)]),
                    None => {
                        values.extend_from_slice(chunk);
                        Ok(())
                    }
                };
                match band {
                    Some(width) => {
                        let job = SdfBand {
                            mesh,
                            grid: &grid,
                            sign,
                            width,
                            every_value: true,
                        };
                        engine.sdf_band(job, &mut |slab: BandSlab<'_>| sink(slab.values))?;
                    }
                    None => {
                        let job = SdfGrid {
                            mesh,
                            grid: &grid,
                            sign,
                        };
                        engine.sdf(job, &mut |_first, chunk: &[f32]| sink(chunk))?;
                    }
                }
                if let Some(mut store) = store {
                    store.set_attribute("sign", sign.name().into());
                    store.set_attribute("band", band.into());
                    store.commit()?;
                }
                Ok::<_, closest::Error>((values, sign))
            })?;
            let dict = PyDict::new(py);
            match out {
                Some(path) => {
                    dict.set_item("out", path)?;
                    dict.set_item("sign", sign.name())?;
                }
                None => {
                    let [nx, ny, nz] = grid.res;
                    let sdf = values.into_pyarray(py).into_any();
                    dict.set_item("sdf", sdf.call_method1("reshape", ((nx, ny, nz),))?)?;
                }
            }
            add_grid(&dict, &grid)?;
            Ok(dict)
        })
    }

    /// How far this mesh (A) and `other` (B) deviate (SPEC §9), over each one's vertices plus
    /// `samples` area-weighted surface samples: {"a_to_b" (VA,) and "b_to_a" (VB,) float32
    /// vertex deviations, "hausdorff", "hausdorff_a_to_b", "hausdorff_b_to_a", "chamfer",
    /// "chamfer_squared", "mean_a_to_b", "mean_b_to_a", "mean_squared_a_to_b",
    /// "mean_squared_b_to_a" (floats)}. `sign` signs the deviations by the other mesh's inside.
    #[pyo3(signature = (other, samples=0, seed=0, sign=None))]
    fn distance_to<'py>(
        &self,
        py: Python<'py>,
        other: &Bound<'py, PyAny>,
        #[pyo3(from_py_with = samples_count)] samples: usize,
        #[pyo3(from_py_with = seed_value)] seed: u64,
        #[pyo3(from_py_with = sign_name)] sign: Option<String>,
    ) -> PyResult<Bound<'py, PyDict>> {
        guarded_on(&self.engine, "Mesh.distance_to", || {
            let other = other.cast::<MeshTarget>().map_err(|_| {
                input_error(format!(
                    "Mesh.distance_to: other: expected a closest.Mesh, got {}",
                    other
                        .get_type()
                        .name()
                        .map_or("?".into(), |n| n.to_string())
                ))
            })?;
            let other = other.get();
            if !Arc::ptr_eq(&self.engine, &other.engine) {
                return Err(input_error(
                    "Mesh.distance_to: other: a mesh of another Engine (both must be on one device)"
                        .into(),
                ));
            }
            let sign = parse_sign_choice(sign.as_deref())?;
            let vertices = self.mesh.mesh().vertices.len() + other.mesh.mesh().vertices.len();
            check_result_fits("Mesh.distance_to", vertices, 4)?;
            let (summary, deviations) = detached(py, || {
                let job = MeshDistance {
                    a: &self.mesh,
                    b: &other.mesh,
                    samples,
                    seed,
                    sign,
                };
                self.engine.mesh_distance_vertices(job, &mut |_, _| {})
            })?;
            distance_dict(py, &summary, deviations)
        })
    }

    /// The narrow band's samples only (SPEC §8): {"index" (M, 3) int32, "sdf" (M,) float32,
    /// "origin", "spacing", "shape", "band" (the width in world units)}.
    #[pyo3(signature = (res, band, pad=0.1, bounds=None, sign=Some(String::from("auto")), band_units=String::from("voxels")))]
    #[allow(clippy::too_many_arguments)]
    fn sdf_sparse<'py>(
        &self,
        py: Python<'py>,
        res: &Bound<'py, PyAny>,
        #[pyo3(from_py_with = band_width_value)] band: f64,
        #[pyo3(from_py_with = pad_fraction)] pad: f64,
        #[pyo3(from_py_with = bounds_box)] bounds: Option<[f64; 6]>,
        #[pyo3(from_py_with = sign_name)] sign: Option<String>,
        #[pyo3(from_py_with = band_units_name)] band_units: String,
    ) -> PyResult<Bound<'py, PyDict>> {
        guarded_on(&self.engine, "Mesh.sdf_sparse", || {
            let grid = self.grid_of(res, pad, bounds)?;
            let sign = parse_sign_choice(sign.as_deref())?;
            let width = band_width(&grid, band, &band_units)?;
            let (engine, mesh) = (&self.engine, &self.mesh);
            let [_, ny, nz] = grid.res;
            let (index, values) = detached(py, || {
                let job = SdfBand {
                    mesh,
                    grid: &grid,
                    sign: engine.resolve_sign(mesh, sign)?,
                    width,
                    every_value: false,
                };
                let (mut index, mut values) = (Vec::new(), Vec::new());
                engine.sdf_band(job, &mut |slab: BandSlab<'_>| {
                    for &k in slab.in_band {
                        let row = slab.first + k as usize;
                        index
                            .extend([row / (ny * nz), (row / nz) % ny, row % nz].map(|x| x as i32));
                        values.push(slab.values[k as usize]);
                    }
                    Ok(())
                })?;
                Ok::<_, closest::Error>((index, values))
            })?;
            let dict = PyDict::new(py);
            let m = values.len();
            let index = index.into_pyarray(py).into_any();
            dict.set_item("index", index.call_method1("reshape", ((m, 3),))?)?;
            dict.set_item("sdf", values.into_pyarray(py))?;
            add_grid(&dict, &grid)?;
            dict.set_item(
                "shape",
                grid.res.map(|n| n as i64).to_vec().into_pyarray(py),
            )?;
            dict.set_item("band", width)?;
            Ok(dict)
        })
    }

    /// Training samples (SPEC §8, `closest sample`): {"points" (M, 3) float32, "sdf" (M,),
    /// "normal" (M, 3), "kind" (M,) uint8: 0 surface, 1 near, 2 uniform}. `sigma`: one width
    /// or a list; the near samples are split evenly among them.
    #[pyo3(signature = (surface=0, near=0, sigma=None, uniform=0, pad=0.1, seed=0, sign=Some(String::from("auto"))))]
    #[allow(clippy::too_many_arguments)]
    fn sample<'py>(
        &self,
        py: Python<'py>,
        #[pyo3(from_py_with = surface_count)] surface: usize,
        #[pyo3(from_py_with = near_count)] near: usize,
        sigma: Option<&Bound<'py, PyAny>>,
        #[pyo3(from_py_with = uniform_count)] uniform: usize,
        #[pyo3(from_py_with = pad_fraction)] pad: f64,
        #[pyo3(from_py_with = seed_value)] seed: u64,
        #[pyo3(from_py_with = sign_name)] sign: Option<String>,
    ) -> PyResult<Bound<'py, PyDict>> {
        guarded_on(&self.engine, "Mesh.sample", || {
            let sigmas: Vec<f64> = match sigma {
                None => Vec::new(),
                Some(s) => match s.extract::<f64>() {
                    Ok(one) => vec![one],
                    Err(_) => s.extract().map_err(|_| {
                        input_error("sigma: expected a width or a list of widths".into())
                    })?,
                },
            };
            let spec = SampleSpec {
                surface,
                near,
                sigmas,
                uniform,
                pad,
                seed,
            };
            let rows = spec.total().map_err(py_error)?;
            // points, sdf, normal, kind: and the chunk being answered beside them.
            check_result_fits("Mesh.sample", rows, 2 * 29)?;
            let sign = parse_sign_choice(sign.as_deref())?;
            let (engine, mesh) = (&self.engine, &self.mesh);
            let all = detached(py, || {
                let sampler = Sampler::new(mesh.mesh(), spec)?;
                let mut all = SampleRows::default();
                let job = MeshSamples {
                    mesh,
                    sampler: &sampler,
                    sign: engine.resolve_sign(mesh, sign)?,
                };
                engine.mesh_samples(job, &mut |_first, chunk: SampleRows| {
                    all.append(chunk);
                    Ok(())
                })?;
                Ok::<_, closest::Error>(all)
            })?;
            let dict = PyDict::new(py);
            let rows3 = |v: Vec<[f32; 3]>| -> PyResult<Bound<'py, PyAny>> {
                let flat: Vec<f32> = bytemuck::cast_vec(v);
                flat.into_pyarray(py)
                    .into_any()
                    .call_method1("reshape", ((rows, 3),))
            };
            dict.set_item("points", rows3(all.points)?)?;
            dict.set_item("sdf", all.sdf.into_pyarray(py))?;
            dict.set_item("normal", rows3(all.normal)?)?;
            dict.set_item("kind", all.kind.into_pyarray(py))?;
            Ok(dict)
        })
    }
}

impl MeshTarget {
    /// The grid `res`, `pad` and `bounds` describe around this mesh.
    fn grid_of(
        &self,
        res: &Bound<'_, PyAny>,
        pad: f64,
        bounds: Option<[f64; 6]>,
    ) -> PyResult<Grid> {
        let res: [usize; 3] = if let Ok(n) = read_argument::<usize>(res, "res", COUNT) {
            [n; 3]
        } else if res.cast::<PyBool>().is_ok() {
            return Err(input_error(format!(
                "res: expected a whole number of samples an axis, or (NX, NY, NZ), got {res}"
            )));
        } else {
            res.extract().map_err(|_| {
                input_error(
                    "res: expected a whole number of samples an axis, or (NX, NY, NZ)".into(),
                )
            })?
        };
        let region = match bounds {
            Some(b) => GridRegion::Bounds(b),
            None => GridRegion::Pad(pad),
        };
        Grid::new(self.mesh.mesh(), res, region).map_err(py_error)
    }
}

/// A band's width in world units on `grid`: `band` in `units` ("voxels" or "world").
fn band_width(grid: &Grid, band: f64, units: &str) -> PyResult<f64> {
    let units = match units {
        "voxels" => BandUnits::Voxels,
        "world" => BandUnits::World,
        other => {
            return Err(input_error(format!(
                "band_units: expected \"voxels\" or \"world\", got {other:?}"
            )));
        }
    };
    BandArg { width: band, units }
        .world_width(grid)
        .map_err(py_error)
}

/// Refuse, before any work, a result held whole in memory that the host cannot hold (a job
/// too large for Python's arrays streams through the CLI instead).
/// `Mesh.distance_to`'s answer: the vertices' deviations and the figures.
fn distance_dict<'py>(
    py: Python<'py>,
    summary: &MeshDistanceSummary,
    [a_to_b, b_to_a]: [Vec<f32>; 2],
) -> PyResult<Bound<'py, PyDict>> {
    let dict = PyDict::new(py);
    dict.set_item("a_to_b", a_to_b.into_pyarray(py))?;
    dict.set_item("b_to_a", b_to_a.into_pyarray(py))?;
    let (ab, ba) = (&summary.a_to_b, &summary.b_to_a);
    for (name, value) in [
        ("hausdorff", summary.hausdorff()),
        ("hausdorff_a_to_b", ab.max),
        ("hausdorff_b_to_a", ba.max),
        ("chamfer", summary.chamfer()),
        ("chamfer_squared", summary.chamfer_squared()),
        ("mean_a_to_b", ab.mean),
        ("mean_b_to_a", ba.mean),
        ("mean_squared_a_to_b", ab.mean_squared),
        ("mean_squared_b_to_a", ba.mean_squared),
    ] {
        dict.set_item(name, value)?;
    }
    Ok(dict)
}

fn check_result_fits(what: &str, rows: usize, bytes_a_row: usize) -> PyResult<()> {
    let bytes = (rows as u64).saturating_mul(bytes_a_row as u64);
    match closest::host_memory::host_available_bytes() {
        Some(available) if bytes > available => Err(input_error(format!(
            "{what}: {rows} rows need {:.1} GiB in memory, more than the {:.1} GiB available; \
             ask fewer, or stream them to a file with the CLI",
            bytes as f64 / f64::from(1 << 30),
            available as f64 / f64::from(1 << 30)
        ))),
        _ => Ok(()),
    }
}

/// A grid's `origin` and `spacing` into a result dict, after its arrays (the `.npz` order).
fn add_grid(dict: &Bound<'_, PyDict>, grid: &Grid) -> PyResult<()> {
    let py = dict.py();
    let v = |d: DVec3| vec![d.x, d.y, d.z].into_pyarray(py);
    dict.set_item("origin", v(grid.origin))?;
    dict.set_item("spacing", v(grid.spacing))?;
    Ok(())
}

/// Every adapter wgpu sees, best first: [{"name", "backend", "device_type"}].
#[pyfunction]
fn adapters(py: Python<'_>) -> PyResult<Bound<'_, PyList>> {
    guarded("closest.adapters", || {
        let list = PyList::empty(py);
        for a in off_the_gil(py, closest::gpu::list_adapters) {
            let d = PyDict::new(py);
            d.set_item("name", &a.info.name)?;
            d.set_item("backend", format!("{:?}", a.info.backend).to_lowercase())?;
            d.set_item(
                "device_type",
                format!("{:?}", a.info.device_type).to_lowercase(),
            )?;
            list.append(d)?;
        }
        Ok(list)
    })
}

#[pymodule]
fn _closest(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add_class::<Engine>()?;
    m.add_class::<Scene>()?;
    m.add_class::<MeshTarget>()?;
    m.add_function(wrap_pyfunction!(adapters, m)?)?;
    m.add("InputError", py.get_type::<InputError>())?;
    m.add("AdapterError", py.get_type::<AdapterError>())?;
    m.add("GpuError", py.get_type::<GpuError>())?;
    // numpy's array API is imported on first use, which runs Python code: were that the end of
    // a long call, a signal handler raising there (Ctrl-C) made the numpy crate panic. Now.
    numpy::PyArray1::<f32>::zeros(py, 0, false);
    Ok(())
}
