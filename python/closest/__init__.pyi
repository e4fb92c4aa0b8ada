from os import PathLike
from typing import Any, Dict, Optional, Union

from . import dask as dask
from .client import Client as Client
from ._closest import (
    AdapterError as AdapterError,
    Engine as Engine,
    GpuError as GpuError,
    InputError as InputError,
    Mesh as Mesh,
    Scene as Scene,
    adapters as adapters,
)

def mesh_distance(
    a: Union[Mesh, str, "PathLike[str]"],
    b: Union[Mesh, str, "PathLike[str]"],
    samples: int = 0,
    seed: int = 0,
    sign: Optional[str] = None,
    engine: Optional[Engine] = None,
) -> Dict[str, Any]:
    """`a.distance_to(b, ...)` for meshes or mesh paths (opened on `engine`, or a default one)."""
