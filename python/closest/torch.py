"""PyTorch tensors in and out of mesh and scene queries (SPEC §8), the distance differentiable.

    import torch
    import closest, closest.torch

    mesh = closest.Engine().mesh("bunny.obj")
    points = torch.rand(10_000, 3, requires_grad=True)
    out = closest.torch.query(mesh, points, sign="auto")
    out["distance"].sum().backward()    # points.grad is out["normal"]

- CPU tensors cross through DLPack both ways without a copy: float32 C-contiguous points are
  read in place by the engine (other float dtypes and strided tensors are converted once, as
  numpy arrays are, SPEC §6), and every result is a tensor over the array the engine filled.
- Tensors on another device (CUDA) go through the host: the points are copied to host memory
  and the results copied back to the points' device. docs/guide/python.md says what that costs.
- The engine computes in float32 (SPEC §3). Float results are float32 tensors, or float64 where
  the points are float64 (converted after the query); `shape` is int32.
- Scenes too: `closest.torch.query(scene, points, mode="surface")` (`mode` as `Scene.query`;
  `sign` is for meshes).
- Only `distance` is differentiable: its gradient with respect to the points is `normal` (the
  unit vector from the closest point, negated inside where signed), which is exact wherever the
  closest point is unique, that is away from the medial axis. `point`, `normal` and `shape`
  are constants to autograd. Rows with NaN or infinite coordinates get NaN distances and
  gradients (SPEC §2).

torch is an optional dependency: `import closest` never imports it; this module does.
"""

import numpy as np
import torch

import closest

__all__ = ["query"]

_FIELDS = ("point", "distance", "shape", "normal")


def query(target, points, sign=None, fields=None, mode=None):
    """The nearest triangle of a mesh (as `Mesh.query`, `sign`: None, "pseudonormal", "winding"
    or "auto") or the nearest shape of a scene (as `Scene.query`, `mode`: "solid" or "surface")
    for each row of the (N, 3) `points` tensor: a dict of tensors on the points' device
    ("point", "distance", "shape", "normal", or the subset `fields` names)."""
    if isinstance(target, closest.Mesh):
        if mode is not None:
            raise closest.InputError("mode: meshes are signed by sign=, not mode=")

        def ask(p, asked):
            return target.query(p, sign=sign, fields=asked)

    elif isinstance(target, closest.Scene):
        if sign is not None:
            raise closest.InputError("sign: scenes take mode= (\"solid\" or \"surface\"), not sign=")

        def ask(p, asked):
            return target.query(p, mode=mode or "solid", fields=asked)

    else:
        raise closest.InputError(
            f"target: expected a closest.Mesh or closest.Scene, got {type(target).__name__}"
        )
    if not isinstance(points, torch.Tensor):
        raise closest.InputError(f"points: expected a torch.Tensor, got {type(points).__name__}")
    names = _field_names(fields)
    outputs = _Query.apply(points, ask, names)
    return dict(zip(names, outputs))


def _field_names(fields):
    if fields is None:
        return _FIELDS
    if isinstance(fields, str):
        fields = [f.strip() for f in fields.split(",")]
    try:
        names = tuple(fields)
    except TypeError:
        raise closest.InputError(
            f"fields: expected a comma-separated string or a list of field names, got {fields!r:.60}"
        ) from None
    unknown = [n for n in names if n not in _FIELDS]
    if unknown or not names:
        raise closest.InputError(
            f"fields: unknown or missing field(s) {unknown}; the valid ones are {', '.join(_FIELDS)}"
        )
    # As the engine refuses them: a name given twice would make two outputs for one key of the
    # answer, and the gradient reaching the one kept would be dropped.
    for name in names:
        if names.count(name) > 1:
            raise closest.InputError(f"fields: `{name}` is named twice")
    return names


def _host_array(points):
    """The points as a numpy array: a view of a CPU tensor's memory (DLPack), else a host copy."""
    # Tensors without host-readable data (meta, sparse, nested layouts) fail in torch's own
    # calls below with NotImplementedError or RuntimeError: InputError, naming the argument.
    try:
        points = points.detach()
        if points.device.type != "cpu":
            points = points.cpu()
        if points.dtype == torch.bfloat16:  # numpy has no bfloat16
            points = points.float()
        points = points.resolve_conj().resolve_neg()
        return np.from_dlpack(points)
    except (TypeError, RuntimeError, BufferError, NotImplementedError) as e:
        raise closest.InputError(
            f"points: cannot read a {points.dtype} tensor on {points.device}: {e}"
        ) from None


def _tensor(array, like):
    """A result array as a tensor on `like`'s device, float64 where `like` is."""
    tensor = torch.from_dlpack(array)
    if tensor.is_floating_point() and like.dtype == torch.float64:
        tensor = tensor.double()
    return tensor.to(like.device)


class _Query(torch.autograd.Function):
    @staticmethod
    def forward(ctx, points, ask, names):
        wants_gradient = ctx.needs_input_grad[0] and "distance" in names
        asked = set(names) | ({"normal"} if wants_gradient else set())
        result = ask(_host_array(points), [n for n in _FIELDS if n in asked])
        tensors = {name: _tensor(array, points) for name, array in result.items()}
        if wants_gradient:
            ctx.save_for_backward(tensors["normal"])
        ctx.distance_at = names.index("distance") if wants_gradient else None
        outputs = tuple(tensors[name] for name in names)
        ctx.mark_non_differentiable(*(t for name, t in zip(names, outputs) if name != "distance"))
        return outputs

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, *grads):
        if ctx.distance_at is None:
            return None, None, None
        (normal,) = ctx.saved_tensors
        grad_distance = grads[ctx.distance_at]
        grad_points = grad_distance.unsqueeze(-1) * normal
        return grad_points, None, None
