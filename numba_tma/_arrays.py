"""Host-side array plumbing shared by the launchers: CUDA arrays of any library (numba, CuPy,
torch) as numba device arrays, and new arrays made like a given one.

Views are made without a stream synchronisation (``as_cuda_array(..., sync=False)``): importing
must not wait for the producer's stream (torch and CuPy export theirs), or every call would block
the host until the GPU drains. As with any numba launch, the caller orders work across streams.
"""

import numpy as np
from numba import cuda

from .tensormap import describe_array


def as_device(array):
    """``array`` as a numba device array: numba's own (and the simulator's) pass through, any
    other ``__cuda_array_interface__`` exporter becomes a view (no copy)."""
    if hasattr(array, "copy_to_host") and hasattr(array, "reshape") and hasattr(array, "view"):
        return array
    return cuda.as_cuda_array(array, sync=False)


def numba_view(array, argname):
    """A numba device-array view of ``array`` (no copy), its dtype preserved bit for bit (torch
    bfloat16 as int16); a host or non-CUDA array raises a TypeError naming ``argname``."""
    if isinstance(array, np.ndarray):
        raise TypeError(f"{argname} must be a CUDA device array (numba, CuPy or torch); got a "
                        f"host numpy.ndarray: copy it with numba.cuda.to_device first")
    if str(getattr(array, "dtype", None)) == "torch.bfloat16":
        # torch exports no __cuda_array_interface__ for bfloat16 (asking raises TypeError, which
        # hasattr does not catch); move its bits as int16.
        import torch

        describe_array(array)       # a CPU tensor gets the clear host-array TypeError
        return as_device(array.view(torch.int16))
    if cuda.is_cuda_array(array):
        return as_device(array)
    describe_array(array)       # raises the same clear TypeError as TensorMap for anything else
    raise TypeError(f"{argname} must be a CUDA device array; got {type(array).__name__}")


def allocate_like(like, shape, dtype_name=None):
    """An empty C-contiguous array of ``shape`` from ``like``'s library (torch, CuPy, else numba),
    with ``like``'s dtype or ``dtype_name`` (a numpy/torch name such as "float32", "bfloat16")."""
    if hasattr(like, "new_empty"):                     # torch
        if dtype_name is None:
            return like.new_empty(shape)
        import torch

        return like.new_empty(shape, dtype=getattr(torch, dtype_name))
    if dtype_name == "bfloat16":
        raise TypeError("bfloat16 output needs torch tensors (numba and CuPy have no bfloat16)")
    if dtype_name is not None:
        dtype = np.dtype(dtype_name)
    elif isinstance(getattr(like, "dtype", None), np.dtype):    # CuPy, numba: no view needed
        dtype = like.dtype
    else:
        dtype = numba_view(like, "like").dtype
    if type(like).__module__.split(".")[0] == "cupy":
        import cupy

        return cupy.empty(shape, dtype=dtype)
    return cuda.device_array(shape, dtype=dtype)
