"""A float32 `.npy` writer with the standard library only, for the scripts that make their
own inputs without numpy (same_outputs.sh, bench/ab.sh)."""

import struct


def npy(path, shape, values):
    """Write `values` (row-major floats) as a little-endian float32 array of `shape`."""
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': (%s), }" % "".join(f"{d}, " for d in shape)
    header += " " * (63 - (10 + len(header)) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode())
        f.write(struct.pack(f"<{len(values)}f", *values))
