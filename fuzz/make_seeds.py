"""Write the hand-made seed inputs of every fuzz target into fuzz/corpus/<target>/seed-*.

Small valid files of every variant each reader knows (and a few invalid ones), so that the
fuzzer starts from the formats' structure rather than from nothing. Run from the repository
root: python3 fuzz/make_seeds.py
"""

import json
import pathlib
import struct

ROOT = pathlib.Path(__file__).resolve().parent / "corpus"

TETRA_V = [(0, 0, 0), (1, 0, 0), (0, 1, 0), (0, 0, 1)]
TETRA_F = [(0, 2, 1), (0, 1, 3), (0, 3, 2), (1, 2, 3)]


def put(target, name, data):
    folder = ROOT / target
    folder.mkdir(parents=True, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    (folder / f"seed-{name}").write_bytes(data)


def obj():
    v = "".join(f"v {x} {y} {z}\n" for x, y, z in TETRA_V)
    put("obj", "tetra", "# tetrahedron\n" + v + "".join(f"f {a+1} {b+1} {c+1}\n" for a, b, c in TETRA_F))
    put("obj", "slashes", "o a\n" + v + "vt 0 0\nvn 0 0 1\n"
        + "".join(f"f {a+1}/1/1 {b+1}/1/1 {c+1}/1/1\n" for a, b, c in TETRA_F))
    put("obj", "quad-negative", "g quad\nv 0 0 0\nv 1 0 0\nv 1 1 0\nv 0 1 0\nf -4 -3 -2 -1\nl 1 2\np 3\n")
    put("obj", "bad-index", "v 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 9\n")
    put("obj", "nan", "v nan 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 3\n")


def stl():
    def facet(a, b, c):
        return ("facet normal 0 0 0\n outer loop\n"
                + "".join(f"  vertex {p[0]} {p[1]} {p[2]}\n" for p in (a, b, c))
                + " endloop\nendfacet\n")
    tris = [[TETRA_V[k] for k in f] for f in TETRA_F]
    put("stl", "ascii", "solid t\n" + "".join(facet(*t) for t in tris) + "endsolid t\n")

    def binary(header):
        out = header.ljust(80, b"\0")[:80] + struct.pack("<I", len(tris))
        for t in tris:
            out += struct.pack("<3f", 0, 0, 0) + b"".join(struct.pack("<3f", *p) for p in t) + b"\0\0"
        return out
    put("stl", "binary", binary(b"binary tetra"))
    put("stl", "binary-solid-header", binary(b"solid but binary"))
    put("stl", "binary-short", binary(b"x")[:-7])


def ply():
    head = "ply\nformat ascii 1.0\nelement vertex 4\nproperty float x\nproperty float y\nproperty float z\n"
    v = "".join(f"{x} {y} {z}\n" for x, y, z in TETRA_V)
    put("ply", "ascii-faces", head + "element face 4\nproperty list uchar int vertex_indices\nend_header\n"
        + v + "".join(f"3 {a} {b} {c}\n" for a, b, c in TETRA_F))
    put("ply", "ascii-strips", head + "element tristrips 1\nproperty list int int vertex_indices\nend_header\n"
        + v + "6 0 1 2 -1 1 3\n")
    bhead = ("ply\nformat binary_little_endian 1.0\ncomment seed\nelement vertex 4\nproperty double x\n"
             "property double y\nproperty double z\nelement face 4\nproperty list uchar uint vertex_index\n"
             "end_header\n").encode()
    body = b"".join(struct.pack("<3d", *p) for p in TETRA_V)
    body += b"".join(struct.pack("<B3I", 3, *f) for f in TETRA_F)
    put("ply", "binary-le", bhead + body)
    bbe = bhead.replace(b"binary_little_endian", b"binary_big_endian")
    body = b"".join(struct.pack(">3d", *p) for p in TETRA_V)
    body += b"".join(struct.pack(">B3I", 3, *f) for f in TETRA_F)
    put("ply", "binary-be", bbe + body)


def scene():
    examples = pathlib.Path(__file__).resolve().parent.parent / "examples" / "scene.json"
    put("scene", "example", examples.read_bytes())
    more = [
        {"type": "cone", "a": [0, 0, 0], "b": [0, 0, 2], "radius": 1},
        {"type": "torus", "center": [1, 2, 3], "axis": [0, 0, 1], "major_radius": 2, "minor_radius": 0.5},
        {"type": "ellipsoid", "center": [0, 0, 0], "radii": [1, 2, 3], "rotation": [0, 0, 0, 1]},
        {"type": "convex_hull", "points": [list(p) for p in TETRA_V]},
    ]
    put("scene", "new-shapes", json.dumps({"shapes": more}))
    put("scene", "degenerate", json.dumps({"shapes": [
        {"type": "sphere", "center": [1e30, -1e30, 0], "radius": 0},
        {"type": "convex_hull", "points": [[0, 0, 0], [1, 1, 1], [2, 2, 2]]},
        {"type": "segment", "a": [1, 1, 1], "b": [1, 1, 1]}]}))
    put("scene", "empty", '{"shapes": []}')


def npy_bytes(descr, shape, values, fmt, version=1):
    header = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (
        descr, "".join(f"{n}," if i == 0 else f" {n}" for i, n in enumerate(shape)))
    lead = 10 if version == 1 else 12
    pad = (-(lead + len(header) + 1)) % 64
    header = header + " " * pad + "\n"
    size = struct.pack("<H", len(header)) if version == 1 else struct.pack("<I", len(header))
    return b"\x93NUMPY" + bytes([version, 0]) + size + header.encode() + struct.pack(fmt, *values)


def off():
    v = "".join(f"{x} {y} {z}\n" for x, y, z in TETRA_V)
    f = "".join(f"3 {a} {b} {c}\n" for a, b, c in TETRA_F)
    put("off", "tetra", "OFF\n# tetrahedron\n4 4 6\n" + v + f)
    # ModelNet's files run the counts on to the keyword; colours after a face's corners.
    put("off", "modelnet", "OFF4 4 0\n" + v + "".join(f"3 {a} {b} {c} 255 0 0\n" for a, b, c in TETRA_F))
    put("off", "quad-coff", "COFF\n4 1 0\n0 0 0 1 0 0 1\n1 0 0 1 0 0 1\n1 1 0 1 0 0 1\n0 1 0 1 0 0 1\n4 0 1 2 3\n")
    put("off", "bad-index", "OFF\n3 1 0\n0 0 0\n1 0 0\n0 1 0\n3 0 1 9\n")
    put("off", "short", "OFF\n4 4 0\n0 0 0\n")


def glb_bytes(document, binary):
    text = json.dumps(document).encode()
    text += b" " * (-len(text) % 4)
    binary += b"\0" * (-len(binary) % 4)
    chunks = struct.pack("<II", len(text), 0x4E4F534A) + text
    if binary:
        chunks += struct.pack("<II", len(binary), 0x004E4942) + binary
    return b"glTF" + struct.pack("<II", 2, 12 + len(chunks)) + chunks


def glb():
    positions = b"".join(struct.pack("<3f", *p) for p in TETRA_V)
    indices = b"".join(struct.pack("<3H", *f) for f in TETRA_F)
    binary = positions + indices

    def document(mode=4, nodes=None, index_type=5123):
        return {
            "asset": {"version": "2.0"},
            "scene": 0,
            "scenes": [{"nodes": [0]}],
            "nodes": nodes or [{"mesh": 0, "translation": [1, 2, 3], "children": [1]},
                               {"mesh": 0, "rotation": [0, 0, 0.6, 0.8], "scale": [2, 2, 2]}],
            "meshes": [{"primitives": [{"attributes": {"POSITION": 0}, "indices": 1, "mode": mode}]}],
            "accessors": [
                {"bufferView": 0, "componentType": 5126, "count": 4, "type": "VEC3"},
                {"bufferView": 1, "componentType": index_type, "count": 12, "type": "SCALAR"},
            ],
            "bufferViews": [{"buffer": 0, "byteLength": 48}, {"buffer": 0, "byteOffset": 48, "byteLength": 24}],
            "buffers": [{"byteLength": len(binary)}],
        }

    put("glb", "tetra-nodes", glb_bytes(document(), binary))
    put("glb", "strip", glb_bytes(document(mode=5), binary))
    put("glb", "fan", glb_bytes(document(mode=6), binary))
    put("glb", "cycle", glb_bytes(document(nodes=[{"mesh": 0, "children": [1]}, {"children": [0]}]), binary))
    put("glb", "matrix", glb_bytes(document(nodes=[{"mesh": 0, "matrix": [2, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 5, 6, 7, 1]}]), binary))
    embedded = document()
    del embedded["scene"]
    embedded["buffers"][0]["uri"] = "data:application/octet-stream;base64," + __import__("base64").b64encode(binary).decode()
    put("glb", "embedded-gltf", json.dumps(embedded))
    put("glb", "short", glb_bytes(document(), binary[:40]))
    instanced = document(nodes=[{"mesh": 0, "extensions": {"EXT_mesh_gpu_instancing": {"attributes": {"TRANSLATION": 0}}}}])
    put("glb", "instanced", glb_bytes(instanced, binary))


def npy():
    pts = [0.5, 1, 2, float("nan"), 0, float("inf"), -3, 1e30, 7]
    put("npy", "f32", npy_bytes("<f4", (3, 3), pts, "<9f"))
    put("npy", "f64-v2", npy_bytes("<f8", (3, 3), pts, "<9d", version=2))
    put("npy", "empty", npy_bytes("<f8", (0, 3), [], "<"))
    put("npy", "truncated", npy_bytes("<f4", (5, 3), pts, "<9f"))


def npz():
    import io
    import zipfile
    pts = [0.5, 1, 2, float("nan"), 0, float("inf"), -3, 1e30, 7]

    def archive(arrays, method):
        out = io.BytesIO()
        with zipfile.ZipFile(out, "w", method) as z:
            for name, data in arrays:
                # A fixed date, so that the seeds' bytes do not change from run to run.
                z.writestr(zipfile.ZipInfo(name + ".npy", date_time=(2026, 11, 30, 0, 0, 0)), data, method)
        return out.getvalue()

    f32 = npy_bytes("<f4", (3, 3), pts, "<9f")
    put("npz", "stored", archive([("arr_0", f32)], zipfile.ZIP_STORED))
    put("npz", "deflated", archive([("arr_0", f32)], zipfile.ZIP_DEFLATED))
    put("npz", "named", archive([("sdf", f32[:80]), ("points", npy_bytes("<f8", (3, 3), pts, "<9d"))], zipfile.ZIP_DEFLATED))
    put("npz", "unnamed", archive([("a", f32), ("b", f32)], zipfile.ZIP_STORED))
    put("npz", "truncated", archive([("arr_0", npy_bytes("<f4", (5, 3), pts, "<9f"))], zipfile.ZIP_DEFLATED))


def pcd():
    pts = [0.5, 1, 2, float("nan"), 0, float("inf"), -3, 1e30, 7]

    def header(data, fields="x y z", size="4 4 4", kind="F F F", count="1 1 1"):
        return (f"# .PCD v0.7\nVERSION 0.7\nFIELDS {fields}\nSIZE {size}\nTYPE {kind}\nCOUNT {count}\n"
                f"WIDTH 3\nHEIGHT 1\nVIEWPOINT 0 0 0 1 0 0 0\nPOINTS 3\nDATA {data}\n").encode()

    put("pcd", "ascii", header("ascii", "rgb x y z", "4 4 4 4", "U F F F", "1 1 1 1")
        + b"1 0.5 1 2\n2 nan 0 inf\n3 -3 1e30 7\n")
    put("pcd", "binary", header("binary", "x y z normal", "8 4 4 4", "F F F F", "1 1 1 3")
        + b"".join(struct.pack("<d2f3f", pts[3 * k], pts[3 * k + 1], pts[3 * k + 2], 0, 0, 1) for k in range(3)))
    columns = struct.pack("<9f", *(pts[3 * k + c] for c in range(3) for k in range(3)))
    # LZF: literal runs of at most 32 bytes.
    packed = bytes([31]) + columns[:32] + bytes([len(columns) - 33]) + columns[32:]
    put("pcd", "compressed", header("binary_compressed") + struct.pack("<II", len(packed), len(columns)) + packed)
    put("pcd", "backref", header("binary_compressed", size="4 4 4")
        + struct.pack("<II", 8, 36) + bytes([3, 0, 0, 128, 63]) + bytes([0xe0, 23, 3]))
    put("pcd", "short", header("binary") + b"\0" * 20)


def csv():
    put("csv", "header", "x,y,z\n0,1,2\n# comment\n\n3.5, -4e3 ,nan\ninf,-inf,1e-300\n")
    put("csv", "short-row", "1,2,3\n4,5\n")


for make in (obj, stl, ply, off, glb, scene, npy, npz, pcd, csv):
    make()
