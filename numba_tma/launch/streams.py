"""Streams and contexts as the launch paths see them: the ``CUstream`` handle of any library's
stream, numba's view of it, the current context's id (part of every cache key that outlives a
context), and whether a stream is being captured into a CUDA graph."""

import ctypes
import threading

from cuda.bindings import driver as _cudrv

from .._frontend import cuda
from .driver_calls import _check

__all__ = ["stream_handle", "numba_stream", "context_id", "context_id_or_none", "is_capturing"]


def stream_handle(stream):
    """The ``CUstream`` handle (an int) of ``stream``: 0 or None (the legacy default stream), a
    raw handle, a ``torch.cuda.Stream``, a CuPy stream, a numba stream, a cuda.core stream or
    anything with ``__cuda_stream__``. Raises TypeError naming ``stream`` for anything else."""
    if stream is None:
        return 0
    if isinstance(stream, int) and not isinstance(stream, bool):
        if stream < 0:
            raise ValueError(f"stream = {stream} is not a CUDA stream handle")
        return stream
    handle = getattr(stream, "cuda_stream", None)             # torch
    if isinstance(handle, int):
        return handle
    proto = getattr(stream, "__cuda_stream__", None)          # the CUDA stream protocol
    if callable(proto):
        return int(proto()[1])
    ptr = getattr(stream, "ptr", None)                        # CuPy
    if isinstance(ptr, int):
        return ptr
    handle = getattr(stream, "handle", None)                  # numba, cuda.core
    if handle is not None:
        value = getattr(handle, "value", handle)              # a ctypes c_void_p, or a CUstream
        try:
            return int(value or 0)
        except TypeError:
            pass
    if isinstance(stream, _cudrv.CUstream):
        return int(stream)
    raise TypeError(f"stream must be a CUDA stream (torch, CuPy, numba, cuda.core, a raw handle "
                    f"or 0); got {type(stream).__name__}")


def numba_stream(stream):
    """``stream`` as numba's launch syntax takes it: 0, a numba stream as is, or a numba
    external stream over the handle of any other (:func:`stream_handle`)."""
    if stream is None or (isinstance(stream, int) and stream == 0):
        return 0
    if type(stream).__module__.startswith("numba"):
        return stream
    return cuda.external_stream(stream_handle(stream))


_raw_ctx_id = []          # [ctypes cuCtxGetId], or [False] where it cannot be had
_ctx_out = threading.local()        # each thread's out-parameter for it


def _raw_context_id():
    """``cuCtxGetId`` as a ctypes function from the driver's own table, or None: every public
    call reads the context id, and cuda-python's wrapper costs several times the driver call.
    Not cached while the driver cannot answer yet (before its initialisation)."""
    if not _raw_ctx_id:
        try:
            err, pfn, _ = _cudrv.cuGetProcAddress(
                b"cuCtxGetId", 12000, _cudrv.CUdriverProcAddress_flags.CU_GET_PROC_ADDRESS_DEFAULT)
        except Exception:       # no driver, or another cuda-python: its own wrapper serves
            _raw_ctx_id.append(False)
            return None
        if err != _cudrv.CUresult.CUDA_SUCCESS or not int(pfn):
            return None
        # (no declared argument types: ctypes passes None and a byref() through unconverted,
        # half the cost of a checked call)
        _raw_ctx_id.append(ctypes.CFUNCTYPE(ctypes.c_int)(int(pfn)))
    return _raw_ctx_id[0] or None


def context_id():
    """The current CUDA context's unique id (``cuCtxGetId``: never reused in a process, unlike
    the context's address after ``numba.cuda.close()``), making numba's context current first
    when none is. Cache keys that outlive a context include it."""
    raw = _raw_ctx_id[0] if _raw_ctx_id else _raw_context_id()
    if raw:
        out = getattr(_ctx_out, "pair", None)
        if out is None:
            value = ctypes.c_ulonglong()
            out = _ctx_out.pair = (value, ctypes.byref(value))
        if raw(None, out[1]) == 0:
            return out[0].value
    else:
        err, ident = _cudrv.cuCtxGetId(None)
        if err == _cudrv.CUresult.CUDA_SUCCESS:
            return int(ident)
    cuda.current_context()                 # no current context yet: numba's primary one
    return int(_check(_cudrv.cuCtxGetId(None), "cuCtxGetId"))


def context_id_or_none():
    """:func:`context_id`, or None where CUDA cannot be used (no driver or GPU): the public ops
    then take their slow path, whose checks say what is missing."""
    try:
        return context_id()
    except Exception:
        return None


def is_capturing(handle):
    """Whether stream ``handle`` is being captured into a CUDA graph (an error counts as yes:
    querying the legacy stream while another stream captures in global mode fails)."""
    err, status = _cudrv.cuStreamIsCapturing(_cudrv.CUstream(handle))
    if err != _cudrv.CUresult.CUDA_SUCCESS:
        return True
    return status != _cudrv.CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_NONE


def _core_stream(stream):
    """The stream as numba's own launch path carries it (a cuda.core Stream) and its handle."""
    from .._frontend import driver_module as numba_driver

    to_core = getattr(numba_driver, "_to_core_stream", None)
    if to_core is not None:
        core = to_core(stream)
        return core, int(core.handle)
    # Older numba-cuda: numba Streams and 0.
    if not stream:
        return 0, 0
    return stream, int(stream.handle or 0)
