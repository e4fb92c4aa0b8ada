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
