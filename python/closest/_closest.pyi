"""Type stubs of the native module (python/src/lib.rs)."""

from os import PathLike
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np
import numpy.typing as npt

Fields = Union[None, str, Sequence[str]]
Shapes = Union[List[Dict[str, Any]], str, PathLike]
Result = Dict[str, np.ndarray]

class InputError(ValueError):
    """Bad input: the message names the argument, row or shape index and field."""

class AdapterError(RuntimeError):
    """No usable GPU adapter; the message says how to install Mesa's lavapipe."""

class GpuError(RuntimeError):
    """The device failed: validation error, out of memory or device lost."""

def adapters() -> List[Dict[str, str]]:
    """Every adapter wgpu sees, best first: [{"name", "backend", "device_type"}]."""

class Engine:
    """One GPU adapter with its pipelines built once; share it between threads."""

    def __init__(
        self,
        adapter: Optional[str] = None,
        portable_kernels: bool = False,
        *,
        mesh_records: str = "auto",
    ) -> None:
        """Open `adapter` (a substring of its name or a backend: vulkan, gl, metal, dx12), or
        $CLOSEST_ADAPTER, else the best adapter. Raises AdapterError when there is none.
        `mesh_records` is the CLI's --mesh-records: "packed" (fastest), "indexed" (about a
        third fewer bytes a triangle) or "auto" (on CPU and integrated adapters indexed for
        meshes of 2^20 triangles or more; otherwise packed unless only indexed fits)."""
    @property
    def info(self) -> Dict[str, Any]:
        """{"adapter", "backend", "device_type", "limits": {...}}."""
    def scene(self, shapes: Shapes) -> "Scene":
        """Upload a scene once (BVH built here): a list of SPEC §1 shape dicts or a .json path."""
    def mesh(
        self,
        path: Union[None, str, PathLike] = None,
        *,
        vertices: Optional[npt.ArrayLike] = None,
        triangles: Optional[npt.ArrayLike] = None,
    ) -> "Mesh":
        """Upload a triangle mesh once: a .obj/.stl/.ply/.off/.glb/.gltf path, a trimesh or Open3D mesh
        (its vertices and faces or triangles), or vertices (V, 3) floats and
        triangles (F, 3) integers (anything numpy.asarray reads). sign="auto"'s check runs
        beside the build."""
    def _mesh_distance_of(
        self,
        a: Union[str, PathLike, Any],
        b: Union[str, PathLike, Any],
        samples: int = 0,
        seed: int = 0,
        sign: Optional[str] = None,
    ) -> Dict[str, Any]:
        """`closest.mesh_distance` of two meshes not yet opened (paths, trimesh or Open3D meshes):
        A's hierarchy is built while A's points are answered against B."""
    def query_paired(
        self, shapes: Shapes, points: np.ndarray, mode: str = "solid", fields: Fields = None
    ) -> Result:
        """Point i against shape i: {"point" (N,3), "distance" (N,), "shape" (N,), "normal" (N,3)}."""
    def segment_pairs(self, a: np.ndarray, b: np.ndarray, fields: Fields = None) -> Result:
        """Closest points between segment a[i] and b[i], each (N, 2, 3):
        {"point_a", "point_b", "s", "t", "distance"}."""

class Scene:
    """A scene resident on the device."""

    def __len__(self) -> int: ...
    def query(self, points: np.ndarray, mode: str = "solid", fields: Fields = None) -> Result:
        """Nearest shape of every point (N, 3): {"point", "distance", "shape", "normal"};
        mode "solid" or "surface"; fields a subset such as "distance,shape"."""
    def contacts(
        self,
        spheres: Optional[np.ndarray] = None,
        fields: Fields = None,
        *,
        bodies: Optional[Shapes] = None,
        paired: bool = False,
    ) -> Result:
        """Sphere contacts, spheres (N, 4) as cx, cy, cz, r: {"point", "depth", "normal",
        "shape"}; or, with `bodies=` (convex shapes), each body's nearest shape (`paired=True`:
        body i against shape i): {"distance", "point_body", "point_target", "normal", "shape"}."""

class Mesh:
    """A triangle mesh resident on the device."""

    def __len__(self) -> int: ...
    @property
    def records(self) -> str:
        """How the triangles are stored on the device: "packed" or "indexed"."""
    def contacts(self, *, bodies: Shapes, fields: Fields = None) -> Result:
        """Each body's nearest triangle: {"distance", "point_body", "point_target", "normal",
        "shape"}."""
    def query(
        self, points: np.ndarray, sign: Optional[str] = None, fields: Fields = None
    ) -> Result:
        """Nearest triangle of every point: {"point", "distance", "shape", "normal"};
        sign None (unsigned), "pseudonormal", "winding" or "auto" (pseudonormal where the
        mesh is closed, consistently oriented and does not intersect itself, else winding)."""
    def sdf(
        self,
        res: Union[int, Tuple[int, int, int]],
        pad: float = 0.1,
        bounds: Optional[Sequence[float]] = None,
        sign: Optional[str] = "auto",
        band: Optional[float] = None,
        band_units: str = "voxels",
        out: Optional[Union[str, PathLike]] = None,
        chunk: int = 64,
    ) -> Result:
        """Signed-distance grid, corners inclusive: {"sdf" (NX, NY, NZ) float32, "origin" (3,),
        "spacing" (3,)}; sample (i, j, k) at origin + (i, j, k) * spacing. sign as for
        `query`, "auto" by default. band=W: a narrow band, samples within W of the surface
        exact and the rest ±W (W in voxels, or world units with band_units="world").
        out="x.zarr": the grid streams to a Zarr v3 store (array "sdf" in zstd chunks of
        `chunk` samples a side; attributes origin, spacing, band, sign) in bounded memory, and
        the dict has "out", "sign", "origin" and "spacing" instead of "sdf"."""
    def sdf_sparse(
        self,
        res: Union[int, Tuple[int, int, int]],
        band: float,
        pad: float = 0.1,
        bounds: Optional[Sequence[float]] = None,
        sign: Optional[str] = "auto",
        band_units: str = "voxels",
    ) -> Result:
        """The narrow band's samples only: {"index" (M, 3) int32, "sdf" (M,) float32, "origin",
        "spacing", "shape" (3,) int64, "band" (the width in world units)}."""
    def sample(
        self,
        surface: int = 0,
        near: int = 0,
        sigma: Union[None, float, Sequence[float]] = None,
        uniform: int = 0,
        pad: float = 0.1,
        seed: int = 0,
        sign: Optional[str] = "auto",
    ) -> Result:
        """Training samples as `closest sample` writes them: {"points" (M, 3) float32, "sdf"
        (M,), "normal" (M, 3), "kind" (M,) uint8 (0 surface, 1 near, 2 uniform)}; the same
        seed gives the same samples."""
    def distance_to(
        self,
        other: "Mesh",
        samples: int = 0,
        seed: int = 0,
        sign: Optional[str] = None,
    ) -> Dict[str, Any]:
        """How far this mesh (A) and `other` (B, of the same engine) deviate, over each one's
        vertices plus `samples` area-weighted surface samples: {"a_to_b" (VA,), "b_to_a" (VB,)
        float32 vertex deviations, "hausdorff", "hausdorff_a_to_b", "hausdorff_b_to_a",
        "chamfer", "chamfer_squared", "mean_a_to_b", "mean_b_to_a", "mean_squared_a_to_b",
        "mean_squared_b_to_a" (floats)}; `sign` signs deviations by the other mesh's inside."""
    @property
    def auto_sign(self) -> Tuple[str, str]:
        """The method sign="auto" picks for this mesh and why: ("pseudonormal" | "winding",
        reason)."""
