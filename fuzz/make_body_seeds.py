#!/usr/bin/env python3
"""Seeds of the `body` fuzz target (fuzz/corpus/body): the first byte picks the parser (0 an
.npy stream, whose second byte picks the piece size; 1 an .npz archive; 2 scene JSON), as
`closest::serve::fuzz_body` reads them. Standard library only. Names starting `seed-` are
valid bodies that must be taken; `attack-` ones must be refused."""
import io
import pathlib
import struct
import zipfile

OUT = pathlib.Path(__file__).resolve().parent / "corpus" / "body"


def npy(descr, shape, values):
    header = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (
        descr, ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else ""))
    header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
    code = {"<f4": "<%df", "<f8": "<%dd"}[descr]
    return (b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode()
            + struct.pack(code % len(values), *values))


def archive(members):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as z:
        for name, data in members:
            z.writestr(name, data)
    return buffer.getvalue()


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    twelve = [float(i) - 5.5 for i in range(12)]
    seeds = {
        "seed-npy-f32": b"\x00\x07" + npy("<f4", (4, 3), twelve),
        "seed-npy-f64": b"\x00\x00" + npy("<f8", (4, 3), twelve),
        "seed-npy-empty": b"\x00\x10" + npy("<f4", (0, 3), []),
        # The byte count 768614336404564651 × 3 × 8 wraps to 8 in 64 bits.
        "attack-wrapping-shape": b"\x00\x03" + npy("<f8", (768614336404564651, 3), [0.0]),
        "attack-short-data": b"\x00\x05" + npy("<f4", (5, 3), twelve),
        "attack-not-whole-rows": b"\x00\x05" + npy("<f4", (4, 2), twelve[:8]),
        "seed-npz-segments": b"\x01" + archive([
            ("a.npy", npy("<f8", (2, 2, 3), twelve)),
            ("b.npy", npy("<f8", (2, 2, 3), [v + 1 for v in twelve])),
        ]),
        "seed-npz-paired": b"\x01" + archive([
            ("shapes.json", b'{"shapes": [{"type": "sphere", "center": [0, 0, 0], "radius": 1}]}'),
            ("points.npy", npy("<f4", (1, 3), [1.0, 2.0, 3.0])),
        ]),
        "seed-scene": b"\x02" + b'{"shapes": [{"type": "sphere", "center": [0, 0, 0], '
                                 b'"radius": 1}, {"type": "aabb", "min": [0, 0, 0], '
                                 b'"max": [1, 2, 3]}]}',
    }
    for name, data in seeds.items():
        (OUT / name).write_bytes(data)


if __name__ == "__main__":
    main()
