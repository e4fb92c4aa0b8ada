"""``closest.Client(url, token=None)``: the query service (SPEC §7) from Python, with the
methods of ``Engine`` and the same dicts back. Bodies are ``.npy`` in and ``.npz`` out; the
standard library's HTTP client carries them.
"""

import http.client
import io
import json
import os
import urllib.error
import urllib.parse
import urllib.request
import zipfile

import numpy as np

from ._closest import GpuError, InputError


class Client:
    """A client of ``closest serve`` at ``url`` (e.g. ``http://127.0.0.1:7341``)."""

    def __init__(self, url, token=None, timeout=600.0):
        if not isinstance(url, str):
            raise InputError(f"url: expected an http:// address, got {type(url).__name__}")
        # Sockets refuse (OverflowError) a timeout past their clock's range; a year is plenty.
        if timeout is not None and (
            isinstance(timeout, bool)
            or not isinstance(timeout, (int, float))
            or not 0 < timeout <= 365 * 86400
        ):
            raise InputError(f"timeout: expected seconds > 0 (at most a year) or None, got {timeout!r:.60}")
        # Checked here, not at the first call: urllib would take "localhost:7341" for a URL of
        # scheme "localhost" and fail every call as if the service were down.
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise InputError(
                f"url: expected an http:// or https:// address such as http://127.0.0.1:7341, "
                f"got {url!r:.80}"
            )
        self.url = url.rstrip("/")
        self.token = _token(token)
        self.timeout = timeout

    def _request(self, method, path, body=None, params=None):
        query = {k: v for k, v in (params or {}).items() if v is not None}
        url = self.url + path + ("?" + urllib.parse.urlencode(query) if query else "")
        try:
            request = urllib.request.Request(url, data=body, method=method)
        except ValueError as e:
            raise InputError(f"url: {self.url!r:.80} is no http:// address: {e}") from None
        if self.token is not None:
            request.add_header("Authorization", f"Bearer {self.token}")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                return response.read()
        except urllib.error.HTTPError as e:
            text = e.read().decode("utf-8", "replace")
            try:
                message = json.loads(text)["error"]
            except (ValueError, KeyError, TypeError):
                message = text
            if e.code >= 500:
                raise GpuError(f"{e.code}: {message}") from None
            raise InputError(message) from None
        except (OSError, ValueError, http.client.HTTPException) as e:
            # Unreachable, timed out, not an HTTP server, or cut off mid-answer (IncompleteRead,
            # BadStatusLine escaped): the remote engine did not answer.
            raise GpuError(
                f"the service at {self.url} did not answer {method} {path}: "
                f"{type(e).__name__}: {e}"
            ) from None

    def _json(self, method, path, body=None, params=None, takes=dict):
        """The answer's JSON, a `takes` (a dict, or a list), else GpuError."""
        answer = self._request(method, path, body, params)
        try:
            value = json.loads(answer)
        except ValueError:
            value = None
        if not isinstance(value, takes):
            raise GpuError(
                f"the service at {self.url} answered {method} {path} with no JSON "
                f"{takes.__name__}: {answer[:80]!r}"
            )
        return value

    def _npz(self, path, body=None, params=None, rows=None):
        """The answer's arrays, each of `rows` rows where given, else GpuError."""
        answer = self._request("POST", path, body, params)
        try:
            with np.load(io.BytesIO(answer)) as data:
                arrays = {name: data[name] for name in data.files}
        except (ValueError, OSError, EOFError, KeyError, zipfile.BadZipFile):
            raise GpuError(f"the service at {self.url} answered {path} with no .npz") from None
        for name, array in arrays.items():
            # Another server, or a proxy's answer: never rows that are not the request's.
            if rows is not None and (array.ndim == 0 or len(array) != rows):
                raise GpuError(
                    f"the service at {self.url} answered {path} with {name} of shape "
                    f"{array.shape} for {rows} rows"
                )
        return arrays

    @property
    def info(self):
        """The server's health answer: {"status", "adapter"}."""
        return self._json("GET", "/v1/health")

    def targets(self):
        """The resident targets: [{"name", "kind", "shapes" | "triangles", "device_bytes"}]."""
        return self._json("GET", "/v1/targets", takes=list)

    def scene(self, name, shapes=None):
        """Upload ``shapes`` (a list of shape dicts or a scene .json path) as scene ``name``,
        or, without shapes, use the resident one."""
        if shapes is not None:
            self._json("PUT", f"/v1/scenes/{_quote(name)}", _scene_json(shapes))
        return RemoteScene(self, name)

    def mesh(self, name, path=None):
        """Upload the mesh file at ``path`` (.obj/.stl/.ply/.off/.glb/.gltf), or a trimesh or Open3D mesh
        (sent as OFF text), as mesh ``name``, or, without a path, use the resident one."""
        if path is not None and not isinstance(path, (str, bytes, os.PathLike)) and hasattr(path, "vertices"):
            body = _off_text(path)
            self._json("PUT", f"/v1/meshes/{_quote(name)}", body, {"format": "off"})
            return RemoteMesh(self, name)
        if path is not None:
            if not isinstance(path, (str, bytes, os.PathLike)):
                raise InputError(f"path: expected a path to a mesh file or a trimesh or Open3D mesh, "
                                 f"got {type(path).__name__}")
            path = os.fsdecode(os.fspath(path))
            fmt = os.path.splitext(path)[1][1:].lower()
            if fmt not in ("obj", "stl", "ply", "off", "glb", "gltf"):
                raise InputError(f"path: {path!r:.120} is no .obj, .stl, .ply, .off, .glb or .gltf file")
            body = _read_file(path, "path")
            if fmt == "gltf":
                # The server reads no file beside an upload: buffers in files come packed.
                body, fmt = _packed_glb(path, body), "glb"
            self._json("PUT", f"/v1/meshes/{_quote(name)}", body, {"format": fmt})
        return RemoteMesh(self, name)

    def delete(self, kind, name):
        """Remove the resident ``kind`` ("scene" or "mesh") ``name``."""
        routes = {"scene": "scenes", "mesh": "meshes"}
        if not isinstance(kind, str) or kind not in routes:
            raise InputError(f"kind: `{kind}`; the valid ones are scene, mesh")
        self._request("DELETE", f"/v1/{routes[kind]}/{_quote(name)}")

    def segment_pairs(self, a, b, fields=None):
        """Closest points between segment a[i] and b[i], each (N, 2, 3)."""
        a, b = _array(a, "a", (2, 3)), _array(b, "b", (2, 3))
        buffer = io.BytesIO()
        np.savez(buffer, a=a, b=b)
        return self._npz("/v1/segments", buffer.getvalue(), {"fields": _fields(fields)}, len(a))

    def query_paired(self, shapes, points, mode="solid", fields=None):
        """Point i against shape i only; ``shapes`` a list of shape dicts or a scene .json
        path, ``points`` (N, 3). Sent as a zip holding shapes.json and points.npy."""
        if isinstance(shapes, (str, bytes, os.PathLike)):
            scene = _read_file(shapes, "shapes")
        else:
            scene = _shapes_json(shapes, "shapes")
        points = _array(points, "points", (3,))
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as archive:
            archive.writestr("shapes.json", scene)
            archive.writestr("points.npy", _npy(points))
        return self._npz("/v1/paired", buffer.getvalue(),
                         {"mode": mode, "fields": _fields(fields)}, len(points))


class RemoteScene:
    """A scene resident on a server."""

    def __init__(self, client, name):
        self.client, self.name = client, name

    def query(self, points, mode="solid", fields=None):
        points = _array(points, "points", (3,))
        return self.client._npz(f"/v1/scenes/{_quote(self.name)}/query", _npy(points),
                                {"mode": mode, "fields": _fields(fields)}, len(points))

    def contacts(self, spheres=None, fields=None, *, bodies=None):
        """Sphere contacts, or with ``bodies=`` (shape dicts or a scene .json path of convex
        shapes) each body's nearest shape, as ``Scene.contacts``."""
        if (spheres is None) == (bodies is None):
            raise InputError("contacts: pass spheres, or bodies=")
        if bodies is not None:
            return self.client._npz(f"/v1/scenes/{_quote(self.name)}/bodies",
                                    _scene_json(bodies), {"fields": _fields(fields)})
        spheres = _array(spheres, "spheres", (4,))
        return self.client._npz(f"/v1/scenes/{_quote(self.name)}/contacts", _npy(spheres),
                                {"fields": _fields(fields)}, len(spheres))


class RemoteMesh:
    """A mesh resident on a server."""

    def __init__(self, client, name):
        self.client, self.name = client, name

    def query(self, points, sign=None, fields=None):
        points = _array(points, "points", (3,))
        return self.client._npz(f"/v1/meshes/{_quote(self.name)}/query", _npy(points),
                                {"sign": sign, "fields": _fields(fields)}, len(points))

    def contacts(self, *, bodies, fields=None):
        """Each body's nearest triangle, as ``Mesh.contacts``."""
        return self.client._npz(f"/v1/meshes/{_quote(self.name)}/bodies",
                                _scene_json(bodies), {"fields": _fields(fields)})

    def sdf(self, res, pad=0.1, bounds=None, sign="auto"):
        res = ",".join(map(str, res)) if isinstance(res, (tuple, list)) else str(res)
        params = {"res": res, "sign": sign or "none"}
        try:
            if bounds is not None:
                # Six numbers, or the (2, 3) corners as the engine takes them.
                corners = np.asarray(bounds, dtype=float)
                if corners.size != 6 or corners.shape not in ((6,), (2, 3)):
                    raise ValueError(corners.shape)
                params["bounds"] = ",".join(map(repr, corners.ravel().tolist()))
            else:
                params["pad"] = repr(float(pad))
        except (TypeError, ValueError):
            name, value = ("bounds", bounds) if bounds is not None else ("pad", pad)
            raise InputError(f"{name}: expected numbers, got {value!r:.60}") from None
        path = f"/v1/meshes/{_quote(self.name)}/sdf"
        answer = self.client._npz(path, None, params)
        if getattr(answer.get("sdf"), "ndim", 0) != 3:
            raise GpuError(f"the service at {self.client.url} answered {path} with no sdf grid")
        return answer


def _token(token):
    """The bearer token as the service reads its token file: one line of printable ASCII
    without spaces, surrounding whitespace (a file's newline) dropped. Checked here: a line
    break reached urllib as "did not answer", as if the service were down."""
    if token is None:
        return None
    if isinstance(token, bytes):
        token = token.decode("latin-1")
    if not isinstance(token, str):
        raise InputError(f"token: expected a string, got {type(token).__name__}")
    token = token.strip()
    bad = next((i for i, c in enumerate(token) if not "!" <= c <= "~"), None)
    if not token or bad is not None:
        where = f"{token[bad]!r} at character {bad}" if token else "nothing"
        raise InputError(
            f"token: expected one line of printable ASCII without spaces, as the service's "
            f"--token-file holds, got {where}"
        )
    return token


def _scene_json(shapes):
    """A scene body: a .json file's bytes, or shape dicts as a scene."""
    if isinstance(shapes, (str, bytes, os.PathLike)):
        return _read_file(shapes, "shapes")
    if not isinstance(shapes, (list, tuple)):
        raise InputError(
            f"shapes: expected a list of shape dicts or the path of a scene .json, got {type(shapes).__name__}"
        )
    return _shapes_json(list(shapes), "shapes")


def _shapes_json(shapes, name):
    """Shape dicts as a scene's JSON bytes; what json cannot write (a list that holds itself,
    nesting past Python's recursion limit, keys that are not strings) is the caller's input."""
    try:
        return json.dumps({"shapes": shapes}, default=_plain).encode()
    except InputError:
        raise
    except (TypeError, ValueError, RecursionError) as e:
        raise InputError(f"{name}: cannot be written as a scene's JSON: {e}") from None


def _off_text(held):
    """A trimesh (``vertices``, ``faces``) or Open3D (``vertices``, ``triangles``) mesh as OFF
    text, every coordinate to the bit (17 significant digits)."""
    faces = getattr(held, "faces", None)
    if faces is None:
        faces = getattr(held, "triangles", None)
    try:
        vertices = np.asarray(held.vertices, dtype=np.float64)
        faces = np.asarray(faces, dtype=np.int64) if faces is not None else None
    except (TypeError, ValueError) as e:
        raise InputError(f"path: a mesh's vertices and faces must be numbers: {e}") from None
    if vertices.ndim != 2 or vertices.shape[1:] != (3,):
        raise InputError(f"path: a mesh's vertices must be of shape (V, 3), got {vertices.shape}")
    if faces is None or faces.ndim != 2 or faces.shape[1:] != (3,):
        raise InputError("path: a mesh needs faces (trimesh) or triangles (Open3D) of shape (F, 3)")
    out = io.BytesIO()
    out.write(f"OFF\n{len(vertices)} {len(faces)} 0\n".encode())
    np.savetxt(out, vertices, fmt="%.17g")
    np.savetxt(out, np.column_stack([np.full(len(faces), 3), faces]), fmt="%d")
    return out.getvalue()


def _read_file(path, name):
    """The bytes of the file at ``path``, or InputError naming the argument and the reason."""
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise InputError(f"{name}: cannot read {os.fsdecode(os.fspath(path))}: {e.strerror or e}") from None


def _packed_glb(path, text):
    """A ``.gltf``'s document and buffers (files beside it, or data: URIs) as one ``.glb``: the
    buffers laid end to end as its binary chunk and the buffer views moved onto it. A document
    that does not parse is sent as it is, for the server to name what is wrong."""
    import base64
    import struct

    try:
        document = json.loads(text.decode("utf-8-sig"))
        buffers = document.get("buffers", [])
        views = document.get("bufferViews", [])
        if not isinstance(buffers, list) or not isinstance(views, list):
            return text
    except (UnicodeDecodeError, ValueError, AttributeError):
        return text
    binary, starts = bytearray(), []
    for k, buffer in enumerate(buffers):
        uri = buffer.get("uri") if isinstance(buffer, dict) else None
        if not isinstance(uri, str):
            return text
        if uri.startswith("data:"):
            try:
                data = base64.b64decode(uri.split(",", 1)[1], validate=True)
            except (IndexError, ValueError):
                return text
        elif "://" in uri:
            raise InputError(f"path: buffers[{k}].uri `{uri:.60}` is not a file beside {path!r:.120}")
        else:
            beside = os.path.join(os.path.dirname(path), urllib.parse.unquote(uri))
            data = _read_file(beside, f"path: buffers[{k}]")
        binary += b"\0" * (-len(binary) % 8)
        starts.append(len(binary))
        binary += data
    for view in views:
        if isinstance(view, dict) and isinstance(view.get("buffer"), int) and 0 <= view["buffer"] < len(starts):
            view["byteOffset"] = view.get("byteOffset", 0) + starts[view["buffer"]]
            view["buffer"] = 0
    document["buffers"] = [{"byteLength": len(binary)}] if buffers else []
    packed = json.dumps(document).encode()
    packed += b" " * (-len(packed) % 4)
    binary += b"\0" * (-len(binary) % 4)
    chunks = struct.pack("<II", len(packed), 0x4E4F534A) + packed
    if buffers:
        chunks += struct.pack("<II", len(binary), 0x004E4942) + bytes(binary)
    return b"glTF" + struct.pack("<II", 2, 12 + len(chunks)) + chunks


def _quote(name):
    if not isinstance(name, str) or not name:
        # An empty name would leave no route (`/v1/scenes/`), answered as an unknown route.
        raise InputError(f"name: expected a target's name (a non-empty string), got {name!r:.60}")
    return urllib.parse.quote(name, safe="")


def _plain(value):
    if hasattr(value, "tolist"):
        return value.tolist()
    raise InputError(f"shapes: cannot send a {type(value).__name__} (numbers, lists, dicts)")


def _fields(fields):
    """`fields` as the service's comma-separated parameter (it refuses unknown names)."""
    if fields is None or isinstance(fields, str):
        return fields
    try:
        names = list(fields)
    except TypeError:
        names = None
    if names is None or not all(isinstance(n, str) for n in names):
        raise InputError(
            f"fields: expected a comma-separated string or a list of field names, got {fields!r:.60}"
        )
    return ",".join(names)


def _array(values, name, tail):
    """The array kinds the local engine takes (SPEC §6: anything numpy.asarray reads with a
    real floating dtype, of shape (N, *tail)), as the little-endian C-contiguous float32 or
    float64 rows the service reads: float16 and float32 as float32, wider floats as float64."""
    dlpack_only = hasattr(values, "__dlpack__") and not hasattr(values, "__array__")
    try:
        array = np.from_dlpack(values) if dlpack_only else np.asarray(values)
    except Exception as e:  # whatever __array__ or __dlpack__ raised
        raise InputError(f"{name}: numpy cannot read a {type(values).__name__}: {e}") from None
    if array.dtype.kind != "f":
        raise InputError(f"{name}: expected a floating dtype (float16, float32 or float64), got {array.dtype}")
    if array.shape == (0,):
        array = array.reshape((0, *tail))
    if array.ndim != len(tail) + 1 or array.shape[1:] != tail:
        raise InputError(f"{name}: expected an array of shape (N, {', '.join(map(str, tail))}),"
                         f" got {array.shape}")
    dtype = "<f4" if array.dtype.itemsize <= 4 else "<f8"
    try:
        return np.require(array, dtype=dtype, requirements="C")
    except MemoryError as e:  # a broadcast view standing for more rows than memory holds
        raise InputError(f"{name}: its copy as C-contiguous {dtype}: {e}") from None


def _npy(array):
    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()
