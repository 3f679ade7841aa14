"""Host-side array plumbing shared by the launchers: CUDA arrays of any library (numba, CuPy,
torch) as numba device arrays, and new arrays made like a given one.

Views are made without a stream synchronisation (``as_cuda_array(..., sync=False)``): importing
must not wait for the producer's stream (torch and CuPy export theirs), or every call would block
the host until the GPU drains. As with any numba launch, the caller orders work across streams.
"""

import ctypes
import functools
import math

import numpy as np
from numba import config as cuda_config
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


def allocate_like(like, shape, dtype_name=None, stream=0):
    """An empty C-contiguous array of ``shape`` from ``like``'s library (torch, CuPy, else numba),
    with ``like``'s dtype or ``dtype_name`` (a numpy/torch name such as "float32", "bfloat16").
    A numba array comes from :func:`stream_ordered_array` on ``stream`` (the call's stream)."""
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
    return stream_ordered_array(shape, dtype, stream)


def stream_ordered_array(shape, dtype, stream=0):
    """An empty C-contiguous numba device array whose memory comes from the device's
    stream-ordered pool: ``cuMemAllocAsync`` on ``stream`` (a handle), and once the array is
    dropped, ``cuMemFreeAsync`` on the legacy default stream, queued through numba's own pending
    deallocations (flushed as numba flushes its own).

    Why: numba's ``cuda.device_array`` frees with ``cuMemFree``, which waits for the whole GPU,
    so a library call that returns a new numba array would block the host whenever earlier
    work is still queued (at numba's flush of its pending frees). The free on the legacy
    default stream is still ordered after all work queued on blocking streams (numba's
    streams, the default and per-thread default streams), as numba's synchronous free is;
    work on a non-blocking stream (a torch or CuPy stream handed in as ``stream=``) that reads
    the array must be synchronised before the array is dropped, as with torch's and CuPy's
    own pools. During a CUDA graph capture, under the simulator, or where the driver has no
    memory pools, it is numba's ``cuda.device_array``."""
    dtype = np.dtype(dtype)
    shape = tuple(int(d) for d in shape)
    nbytes = dtype.itemsize * math.prod(shape)
    if cuda_config.ENABLE_CUDASIM or nbytes == 0:
        return cuda.device_array(shape, dtype=dtype)
    from cuda.bindings import driver
    from numba.cuda.cudadrv.devicearray import DeviceNDArray
    from numba.cuda.cudadrv.driver import MemoryPointer

    from .launch import is_capturing

    if is_capturing(stream):
        return cuda.device_array(shape, dtype=dtype)
    ctx = cuda.current_context()
    err, ptr = driver.cuMemAllocAsync(nbytes, driver.CUstream(stream))
    if err != driver.CUresult.CUDA_SUCCESS:        # e.g. no memory pools: numba's allocator
        return cuda.device_array(shape, dtype=dtype)
    ptr = int(ptr)
    # (The finalizer must not hold the MemoryPointer, or it would never be collected.)
    release = functools.partial(ctx.deallocations.add_item, _free_async, ptr, nbytes)
    memory = MemoryPointer(ctx, ctypes.c_void_p(ptr), nbytes, finalizer=release)
    strides = tuple(dtype.itemsize * math.prod(shape[i + 1:]) for i in range(len(shape)))
    return DeviceNDArray(shape, strides, dtype, gpu_data=memory)


def _free_async(ptr):
    """numba's pending-deallocation destructor for :func:`stream_ordered_array`'s memory."""
    from cuda.bindings import driver

    # (An error here means the context is already gone, and its pool with it.)
    driver.cuMemFreeAsync(ptr, driver.CUstream(driver.CU_STREAM_LEGACY))
