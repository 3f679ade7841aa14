"""CUDA array operands on the host: what a device array is, read without a GPU.

:func:`describe_array` reads a numba, CuPy or torch CUDA array (or any
``__cuda_array_interface__`` exporter) into its shape, byte strides, itemsize, dtype spec and
address, without building a numba array (that costs tens of microseconds per call). Tensor maps
(:mod:`numba_tma.tensormap`), ``transpose()``, ``matmul()`` and the kernels' launchers all read
their operands here.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["describe_array", "dtype_name", "is_c_contiguous"]

_HOST_ARRAY_HINT = (
    "array must be a CUDA device array (numba device array, CuPy array or torch CUDA tensor); "
)


def _is_torch_tensor(obj: Any) -> bool:
    # Duck-typed so torch stays optional; torch refuses __cuda_array_interface__ for bfloat16.
    return all(hasattr(obj, a) for a in ("data_ptr", "element_size", "stride", "is_cuda", "dtype"))


def describe_array(array: Any) -> tuple[tuple[int, ...], tuple[int, ...] | None, int, Any, int]:
    """Return (shape, strides in bytes or None, itemsize, dtype spec, address)."""
    if isinstance(array, np.ndarray):
        raise TypeError(
            _HOST_ARRAY_HINT + "got a host numpy.ndarray — copy it with numba.cuda.to_device first"
        )
    if _is_torch_tensor(array):
        if not array.is_cuda:
            raise TypeError(
                _HOST_ARRAY_HINT
                + f"got a torch tensor on {array.device} — move it with .cuda() first"
            )
        itemsize = int(array.element_size())
        shape = tuple(int(n) for n in array.shape)
        strides = tuple(int(s) * itemsize for s in array.stride())
        return shape, strides, itemsize, array.dtype, int(array.data_ptr())
    try:
        cai = array.__cuda_array_interface__
    except AttributeError:
        raise TypeError(
            _HOST_ARRAY_HINT + f"got {type(array).__module__}.{type(array).__qualname__}"
        ) from None
    if cai.get("mask") is not None:
        raise TypeError("array has a __cuda_array_interface__ mask; TMA cannot honour masks")
    typestr = cai["typestr"]
    try:
        itemsize = np.dtype(typestr).itemsize
    except TypeError:
        raise TypeError(f"array's typestr {typestr!r} is not understood") from None
    strides = cai.get("strides")
    return (
        tuple(cai["shape"]),
        (None if strides is None else tuple(strides)),
        itemsize,
        typestr,
        int(cai["data"][0]),
    )



def dtype_name(spec: Any) -> str:
    """A dtype spec from :func:`describe_array` (typestr or torch dtype) as a name that compares
    across libraries: ``"float32"``, ``"int16"``, ``"bfloat16"``."""
    text = str(spec)
    if text.startswith("torch."):
        return text[len("torch."):]
    try:
        return np.dtype(spec).name
    except TypeError:
        return text


def is_c_contiguous(shape: tuple[int, ...], strides: tuple[int, ...] | None, itemsize: int) -> bool:
    """Whether ``strides`` (bytes; None = C-contiguous, as the array interface says) lay out
    ``shape`` C-contiguously; extent-1 axes may have any stride."""
    if strides is None:
        return True
    expect = itemsize
    for n, s in zip(reversed(shape), reversed(strides)):
        if n > 1 and s != expect:
            return False
        expect *= n
    return True
