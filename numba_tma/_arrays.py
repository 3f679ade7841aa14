"""Host-side array plumbing shared by the launchers: CUDA arrays of any library (numba, CuPy,
torch) as numba device arrays, and new arrays made like a given one.

Views are made without a stream synchronisation (``as_cuda_array(..., sync=False)``): importing
must not wait for the producer's stream (torch and CuPy export theirs), or every call would block
the host until the GPU drains. As with any numba launch, the caller orders work across streams.
"""

import functools
import math
import os
import threading

import numpy as np
from cuda.bindings import driver

from ._frontend import config as cuda_config, cuda
from ._calls import BoundedCache
from .launch import context_id, is_capturing
from .tensormap import describe_array


class InterfaceView:
    """A device array's ``__cuda_array_interface__`` and nothing else: what a launch packs
    (pointer, shape, byte strides, typestr) without holding the caller's array, so a cached
    launcher keeps no user memory alive."""

    __slots__ = ("__cuda_array_interface__",)

    def __init__(self, ptr, shape, strides, typestr):
        self.__cuda_array_interface__ = {"shape": tuple(shape), "strides": strides,
                                         "typestr": typestr, "data": (ptr, False),
                                         "version": 3}


def as_device(array):
    """``array`` as a numba device array: numba's own (and the simulator's) pass through, any
    other ``__cuda_array_interface__`` exporter becomes a view (no copy)."""
    if hasattr(array, "copy_to_host") and hasattr(array, "reshape") and hasattr(array, "view"):
        return array
    return cuda.as_cuda_array(array, sync=False)


#: torch dtypes without an array interface, and the integer dtype of the same width viewed.
_RAW_VIEWS = {"torch.bfloat16": "int16", "torch.float8_e4m3fn": "uint8",
              "torch.float8_e5m2": "uint8"}


def numba_view(array, argname):
    """A numba device-array view of ``array`` (no copy), its dtype preserved bit for bit (torch
    bfloat16 as int16); a host or non-CUDA array raises a TypeError naming ``argname``."""
    if isinstance(array, np.ndarray):
        raise TypeError(f"{argname} must be a CUDA device array (numba, CuPy or torch); got a "
                        f"host numpy.ndarray: copy it with numba.cuda.to_device first")
    raw = _RAW_VIEWS.get(str(getattr(array, "dtype", None)))
    if raw is not None:
        # torch exports no __cuda_array_interface__ for bfloat16 or fp8 (asking raises
        # TypeError, which hasattr does not catch); move their bits as integers.
        import torch

        describe_array(array)       # a CPU tensor gets the clear host-array TypeError
        return as_device(array.view(getattr(torch, raw)))
    if cuda.is_cuda_array(array):
        return as_device(array)
    describe_array(array)       # raises the same clear TypeError as TensorMap for anything else
    raise TypeError(f"{argname} must be a CUDA device array; got {type(array).__name__}")


def allocate_like(like, shape, dtype_name=None, stream=0, ctx_id=None):
    """An empty C-contiguous array of ``shape`` from ``like``'s library (torch, CuPy, else numba),
    with ``like``'s dtype or ``dtype_name`` (a numpy/torch name such as "float32", "bfloat16").
    A numba array comes from :func:`stream_ordered_array` on ``stream`` (the call's stream;
    ``ctx_id``: the current context's id, when the caller has it already)."""
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

        with like.device:               # CuPy allocates on its own current device otherwise
            return cupy.empty(shape, dtype=dtype)
    return stream_ordered_array(shape, dtype, stream, ctx_id)


def stream_ordered_array(shape, dtype, stream=0, ctx_id=None):
    """An empty C-contiguous numba device array for a library call's output on ``stream`` (a
    handle), from the library's recycled outputs or else the device's stream-ordered pool.

    On the legacy default stream (numba's default, 0 or ``CU_STREAM_LEGACY``) a block of the
    same size that an earlier output left when it was dropped is taken again
    (:data:`OUTPUTS`): no driver call, as torch's caching allocator does it. That is safe in
    stream order: work queued later on the legacy stream runs after all work queued before
    on blocking streams (numba's streams, the default streams). Otherwise, or when no block
    is free, ``cuMemAllocAsync`` on ``stream``. A dropped output's block goes back to
    :data:`OUTPUTS` while it holds less than its limit, else it is freed with
    ``cuMemFreeAsync`` on the legacy stream, queued through numba's pending deallocations.

    Why: numba's ``cuda.device_array`` frees with ``cuMemFree``, which waits for the whole GPU,
    so a library call that returns a new numba array would block the host whenever earlier
    work is still queued (at numba's flush of its pending frees); and a launch right after a
    ``cuMemAllocAsync`` costs the host tens of microseconds more than the launch alone. Work
    on a non-blocking stream (a torch or CuPy stream handed in as ``stream=``: the call's own
    work then too) that uses the array must be synchronised before the array is dropped, as
    with torch's and CuPy's own pools. During a CUDA graph capture, under the simulator, or
    where the driver has no memory pools, it is numba's ``cuda.device_array``."""
    shape, dtype, nbytes = OUTPUTS.layout(shape, dtype)
    if cuda_config.ENABLE_CUDASIM or nbytes == 0:
        return cuda.device_array(shape, dtype=dtype)
    if ctx_id is None:
        ctx_id = context_id()
    if stream in _LEGACY:
        ptr = OUTPUTS.take(ctx_id, nbytes)
        if ptr is not None:
            return OUTPUTS.wrap(ctx_id, ptr, nbytes, shape, dtype)
    if is_capturing(stream):
        return cuda.device_array(shape, dtype=dtype)
    err, ptr = driver.cuMemAllocAsync(nbytes, driver.CUstream(stream))
    if err != driver.CUresult.CUDA_SUCCESS:        # e.g. no memory pools: numba's allocator
        return cuda.device_array(shape, dtype=dtype)
    return OUTPUTS.wrap(ctx_id, int(ptr), nbytes, shape, dtype)


_LEGACY = (0, 1)            # the legacy default stream: 0, or CU_STREAM_LEGACY
LAYOUTS = 64                # array layouts whose conversions and attributes OutputPool keeps


class OutputPool:
    """The device blocks of dropped library outputs (numba arrays from
    :func:`stream_ordered_array`), per CUDA context (``cuCtxGetId``) and size, for the next
    output of that size on the legacy default stream. It holds at most ``limit`` bytes
    (``NUMBA_TMA_OUTPUT_POOL_BYTES``, default 1 GiB; 0 turns recycling off); :meth:`release`
    frees what it holds. Taking and giving back are a list pop and push: no driver call."""

    def __init__(self, limit):
        self.limit = limit
        self._free = {}             # (context id, nbytes) -> [device address, ...]
        self._held = 0              # bytes in _free
        # Reentrant: a block may come back from a finalizer that the garbage collector runs
        # inside a locked section of this very thread.
        self._lock = threading.RLock()
        self._contexts = {}         # context id -> numba Context (cuda.current_context() is slow)
        # (shape, dtype) -> a DeviceNDArray's attributes but gpu_data
        self._templates = BoundedCache(LAYOUTS)
        # (shape, dtype) as asked -> (shape, np.dtype, nbytes)
        self._layouts = BoundedCache(LAYOUTS)

    def take(self, ctx_id, nbytes):
        """A free block of ``nbytes`` in context ``ctx_id`` (its address), or None."""
        key = (ctx_id, nbytes)
        if not self._free.get(key):             # (the common miss, without the lock)
            return None
        with self._lock:        # the list again: release() may have taken the one read above
            blocks = self._free.get(key)
            if not blocks:
                return None
            self._held -= nbytes
            return blocks.pop()

    def give(self, ctx_id, ctx, ptr, nbytes):
        """Block ``ptr`` of a dropped output: kept while the pool is under its limit, else freed
        in stream order (``cuMemFreeAsync`` on the legacy stream, through numba's pending
        deallocations of ``ctx``)."""
        with self._lock:
            if self._held + nbytes <= self.limit:
                self._free.setdefault((ctx_id, nbytes), []).append(ptr)
                self._held += nbytes
                return
        ctx.deallocations.add_item(_free_async, ptr, nbytes)

    def held_bytes(self):
        """Bytes of free blocks the pool holds."""
        return self._held

    def release(self):
        """Free every block the pool holds in the current context (in stream order, on the legacy
        stream), and forget those of contexts that are gone. Returns the bytes freed."""
        current = context_id()
        with self._lock:
            free, self._free, self._held = self._free, {}, 0
        freed = 0
        for (ctx_id, nbytes), blocks in free.items():
            if ctx_id != current:
                continue            # (a destroyed context took its memory with it)
            for ptr in blocks:
                _free_async(ptr)
                freed += nbytes
        return freed

    def layout(self, shape, dtype):
        """``(shape, dtype, nbytes)`` of a C-contiguous array: a tuple of ints, a numpy dtype and
        its size in bytes (remembered per layout asked for, as those conversions cost more than
        taking a block)."""
        key = (shape, dtype)
        try:
            got = self._layouts.get(key)
        except TypeError:               # a shape given as a list
            got, key = None, None
        if got is None:
            dtype = np.dtype(dtype)
            shape = tuple(int(d) for d in shape)
            got = (shape, dtype, dtype.itemsize * math.prod(shape))
            if key is not None:
                self._layouts.put(key, got)
        return got

    def wrap(self, ctx_id, ptr, nbytes, shape, dtype):
        """A C-contiguous numba DeviceNDArray of ``shape``/``dtype`` on block ``ptr``, which comes
        back to :meth:`give` once the array is dropped. Built from a per-layout template (the
        attributes numba's own ``DeviceNDArray.bind`` copies), not numba's constructor."""
        DeviceNDArray, RecycledPointer, CUdeviceptr = _numba_classes()
        ctx = self._contexts.get(ctx_id)
        if ctx is None:
            ctx = self._contexts[ctx_id] = cuda.current_context()
        memory = RecycledPointer(ctx, CUdeviceptr(ptr), nbytes)
        memory.recycle = (self, ctx_id, ptr)
        template = self._templates.get((shape, dtype))
        if template is None:
            strides = tuple(dtype.itemsize * math.prod(shape[i + 1:])
                            for i in range(len(shape)))
            array = DeviceNDArray(shape, strides, dtype, gpu_data=memory)
            self._templates.put((shape, dtype), {k: v for k, v in array.__dict__.items()
                                                 if k != "gpu_data"})
            return array
        array = DeviceNDArray.__new__(DeviceNDArray)
        array.__dict__.update(template)
        array.gpu_data = memory
        return array


@functools.cache
def _numba_classes():
    """numba's DeviceNDArray, a MemoryPointer whose block goes back to its OutputPool once the
    last reference (the array, or a view's pointer) is gone, and CUdeviceptr. (Made on first
    use, not with this module: numba's driver classes are absent under the simulator, and an
    import inside the hot path costs a microsecond a call.)"""
    from ._frontend import DeviceNDArray, MemoryPointer, binding

    class RecycledPointer(MemoryPointer):
        """A MemoryPointer of an :class:`OutputPool` block. ``recycle`` = (pool, context id,
        address): the block goes back on ``free()`` or when the pointer dies (``__del__``, a
        microsecond cheaper per array than numba's ``weakref.finalize`` finalizer)."""

        recycle = None

        def free(self):
            back, self.recycle = self.recycle, None
            if back is not None:
                pool, ctx_id, ptr = back
                pool.give(ctx_id, self.context, ptr, self.size)

        def __del__(self):
            try:
                self.free()
            except Exception:       # (interpreter shutdown: the pool may be gone already)
                pass

    return DeviceNDArray, RecycledPointer, binding.CUdeviceptr


#: The library's recycled numba outputs (see :func:`stream_ordered_array`).
OUTPUTS = OutputPool(int(os.environ.get("NUMBA_TMA_OUTPUT_POOL_BYTES", 1 << 30)))


def release_outputs():
    """Free the device memory that dropped numba outputs of ``matmul()`` and ``transpose()`` left
    for reuse (in stream order); returns the bytes freed. As ``torch.cuda.empty_cache()`` does
    for torch's allocator."""
    return OUTPUTS.release()


def _free_async(ptr):
    """numba's pending-deallocation destructor for :func:`stream_ordered_array`'s memory."""
    # (An error here means the context is already gone, and its pool with it.)
    driver.cuMemFreeAsync(ptr, driver.CUstream(driver.CU_STREAM_LEGACY))
