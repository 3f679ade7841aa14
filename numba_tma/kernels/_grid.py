"""Launch helpers the transpose kernels share (host side, package-internal): grid limits, grid
splitting, ceiling division, device pointers, and the check of a (src, out) transpose pair.

:func:`check_pair` validates both arrays with the package's one operand validation
(:func:`numba_tma.operands.read_operand` and :func:`~numba_tma.operands.check_device`, as
``transpose()`` and ``matmul()`` do): a NULL, negative or misaligned address, a read-only ``out``,
a byte-swapped or object typestr or an array on another GPU is refused, naming the argument,
before the array reaches numba or the driver.

Every kernel module of ``numba_tma.kernels`` and ``numba_tma.ladders`` that launches a transpose
takes them from here (they used to be private names of the classic ladder's module).
"""

import numpy as np

from .._frontend import config as _numba_config
from .._arrays import as_device
from ..operands import check_device, read_operand

__all__ = ["MAX_GRID_YZ", "cdiv", "check_pair", "device_pointer", "grid3", "grid_chunks"]

#: CUDA's limit on gridDim.y and gridDim.z (gridDim.x goes to 2^31 - 1).
MAX_GRID_YZ = 65535


def _shape_dtype(a):
    """(shape, dtype) of a simulator array (it has no ``__cuda_array_interface__``) or of any
    array object with ``.shape`` and ``.dtype``."""
    cai = getattr(a, "__cuda_array_interface__", None)
    if cai is not None:
        return tuple(cai["shape"]), np.dtype(cai["typestr"])
    return tuple(a.shape), np.dtype(a.dtype)


def check_pair(src, out):
    """(src, out, B, M, N) of a matching pair as numba device arrays, or an error naming what is
    wrong. Both arrays pass :func:`numba_tma.operands.read_operand` (``out`` as written) and
    the shape and dtype checks before anything touches the device; the device check
    (:func:`~numba_tma.operands.check_device`, free with one GPU) comes last. Under the CUDA
    simulator, whose arrays have no array interface, only shapes and dtypes are checked."""
    if _numba_config.ENABLE_CUDASIM:
        s = o = None
        (sshape, sdtype), (oshape, odtype) = _shape_dtype(src), _shape_dtype(out)
    else:
        s = read_operand(src, "src")
        o = read_operand(out, "out", writable=True)
        sshape, oshape = s.shape, o.shape
        # Same typestr (or torch dtype): equal without naming them (a dtype's name costs
        # microseconds); else compare names, which agree across libraries and byte-order marks.
        sdtype = odtype = s.spec
        if s.spec != o.spec:
            sdtype, odtype = s.dtype, o.dtype
    if len(sshape) != 3 or len(oshape) != 3:
        raise ValueError(f"src and out must be 3-D, (B, M, N) and (B, N, M); got src {sshape} "
                         f"and out {oshape}")
    B, M, N = sshape
    if oshape != (B, N, M):
        raise ValueError(f"out must have shape (B, N, M) = {(B, N, M)} for src of shape "
                         f"{sshape}; got {oshape}")
    if sdtype != odtype:
        raise ValueError(f"src and out must have the same dtype; got {sdtype} and {odtype}")
    if s is not None:
        check_device(s, "src")
        check_device(o, "out")
    return as_device(src), as_device(out), B, M, N


def cdiv(a, b):
    """Ceiling division of non-negative integers."""
    return -(-a // b)


def grid3(gx, gy, gz, what):
    """``(gx, gy, gz)``, or a ValueError naming ``what`` where gridDim.y or gridDim.z would pass
    65535."""
    if gy > MAX_GRID_YZ or gz > MAX_GRID_YZ:
        raise ValueError(f"{what}: grid ({gx}, {gy}, {gz}) exceeds CUDA's 65535 limit on "
                         "gridDim.y/z; use v6_persistent for such shapes")
    return gx, gy, gz


def grid_chunks(gy, gz):
    """``(y0, ny, z0, nz)`` for each launch of a grid ``gy`` blocks tall and ``gz`` deep split
    so that every launch keeps gridDim.y and gridDim.z within 65535 (one launch when it fits)."""
    if gy <= MAX_GRID_YZ and gz <= MAX_GRID_YZ:
        return ((0, gy, 0, gz),)
    return tuple((y0, min(MAX_GRID_YZ, gy - y0), z0, min(MAX_GRID_YZ, gz - z0))
                 for z0 in range(0, gz, MAX_GRID_YZ) for y0 in range(0, gy, MAX_GRID_YZ))


def device_pointer(a):
    """The device address of a CUDA array (its ``__cuda_array_interface__``), or of a simulator
    array (its ``__array_interface__``); 0 for anything else."""
    try:
        return a.__cuda_array_interface__["data"][0]
    except (AttributeError, KeyError, TypeError):
        return a.__array_interface__["data"][0] if hasattr(a, "__array_interface__") else 0
