"""CUDA array operands on the host: what a device array is, read and checked without a GPU.

:func:`read_operand` reads a numba, CuPy or torch CUDA array (or any ``__cuda_array_interface__``
exporter) into an :class:`Operand` (shape, byte strides, itemsize, dtype, address, read-only flag,
device) without building a numba array (that costs tens of microseconds per call), and refuses,
naming the argument, what a kernel must never be given: a host array, an interface without
``typestr``/``data``/``shape``, an interface version it does not know, a mask, a Python-object
or unknown typestr, big-endian (byte-swapped) elements, strides whose count differs from the
rank, a negative extent, a NULL, negative, 64-bit-overflowing or element-misaligned address, and
a read-only array where the operand is written. None of it calls the driver.
:func:`check_device` then compares the array's device with the launch device (numba's current
one) where there are several GPUs: for torch from ``tensor.device.index``, for anything else from
the pointer, asked of the driver once per allocation; with one GPU or none it costs nothing.

Tensor maps (:mod:`numba_tma.tensormap`), ``transpose()``, ``matmul()`` and the kernels'
launchers read their operands here (:func:`describe_array` is the tuple form tensor maps use).
"""

from __future__ import annotations

import bisect
import ctypes
import sys
import threading
from typing import Any, NamedTuple

import numpy as np

__all__ = ["Operand", "read_operand", "check_device", "device_to_enter", "operand_device",
           "describe_array",
           "dtype_name", "is_c_contiguous", "CAI_MAX_VERSION"]

#: The newest ``__cuda_array_interface__`` version whose fields this module knows (v3, numba's).
CAI_MAX_VERSION = 3
_MAX_ADDRESS = 1 << 64

_HOST_ARRAY_HINT = (
    "array must be a CUDA device array (numba device array, CuPy array or torch CUDA tensor); "
)


class Operand(NamedTuple):
    """One array operand, as its interface describes it (checked by :func:`read_operand`)."""

    shape: tuple[int, ...]
    strides: tuple[int, ...] | None  # bytes; None: C-contiguous
    itemsize: int
    spec: Any  # the typestr, or the torch dtype
    ptr: int
    readonly: bool
    device: int | None  # torch's device.index; None: the pointer tells (check_device)

    @property
    def dtype(self) -> str:
        """The dtype as a name that compares across libraries (``"float32"``, ``"bfloat16"``)."""
        return dtype_name(self.spec)

    @property
    def size(self) -> int:
        n = 1
        for extent in self.shape:
            n *= extent
        return n


def _is_torch_tensor(obj: Any) -> bool:
    # Duck-typed so torch stays optional; torch refuses __cuda_array_interface__ for bfloat16.
    return all(hasattr(obj, a) for a in ("data_ptr", "element_size", "stride", "is_cuda", "dtype"))


def _host_hint(argname: str) -> str:
    return argname + _HOST_ARRAY_HINT[len("array"):]


def _interface(array: Any, argname: str) -> dict:
    """The ``__cuda_array_interface__`` of ``array``, its required entries present."""
    try:
        cai = array.__cuda_array_interface__
    except AttributeError:
        raise TypeError(
            _host_hint(argname) + f"got {type(array).__module__}.{type(array).__qualname__}"
        ) from None
    if not isinstance(cai, dict):
        raise TypeError(f"{argname}'s __cuda_array_interface__ is a {type(cai).__name__}, not a "
                        f"dict")
    for key in ("shape", "typestr", "data"):
        if key not in cai:
            raise TypeError(f"{argname}'s __cuda_array_interface__ has no {key!r} entry (it "
                            f"needs 'shape', 'typestr', 'data' and 'version'); keys: "
                            f"{sorted(cai)}")
    version = cai.get("version", CAI_MAX_VERSION)     # some exporters leave it out
    if isinstance(version, bool) or not isinstance(version, int) or \
            not 0 <= version <= CAI_MAX_VERSION:
        raise TypeError(f"{argname}'s __cuda_array_interface__ has version {version!r}; "
                        f"numba_tma reads versions 0..{CAI_MAX_VERSION}")
    if cai.get("mask") is not None:
        raise TypeError(f"{argname} has a __cuda_array_interface__ mask; TMA cannot honour masks")
    return cai


def _element_type(typestr: Any, argname: str) -> np.dtype:
    """The numpy dtype of an interface's typestr: understood, not a Python object, native order."""
    try:
        dt = np.dtype(typestr)
    except TypeError:
        raise TypeError(f"{argname}'s typestr {typestr!r} is not understood") from None
    if dt.hasobject:
        raise TypeError(f"{argname}'s typestr {typestr!r} is a Python object type; a CUDA "
                        f"array holds plain numbers")
    if not dt.isnative:
        raise TypeError(f"{argname}'s typestr {typestr!r} is byte-swapped (big-endian); CUDA "
                        f"kernels read little-endian data only (convert it first)")
    return dt


def _check_shape(shape: Any, strides: Any, argname: str) -> tuple[tuple[int, ...], Any]:
    try:
        shape = tuple(int(n) for n in shape)
    except TypeError:
        raise TypeError(f"{argname}'s shape {shape!r} is not a sequence of integers") from None
    for axis, extent in enumerate(shape):
        if extent < 0:
            raise ValueError(f"{argname}'s shape {shape} has a negative extent, "
                             f"shape[{axis}] = {extent}")
    if strides is not None:
        strides = tuple(int(s) for s in strides)
        if len(strides) != len(shape):
            raise ValueError(f"{argname}: strides has {len(strides)} entries; the array has "
                             f"rank {len(shape)} (strides {strides}, shape {shape})")
    return shape, strides


def _element_alignment(itemsize: int, dt: np.dtype | None = None) -> int:
    """What an element's address must be a multiple of: numpy's alignment of the interface's
    dtype (complex64: 4), or for raw bytes (void typestrs such as bfloat16's ``<V2``) and torch
    elements the largest power of two dividing the size, at most 8."""
    if dt is not None and dt.kind != "V":
        return dt.alignment
    return min(itemsize & -itemsize, 8) if itemsize else 1


def _check_pointer(ptr: Any, itemsize: int, size: int, argname: str,
                   dt: np.dtype | None = None) -> int:
    try:
        ptr = int(ptr)
    except (TypeError, ValueError):
        raise TypeError(f"{argname}'s data pointer {ptr!r} is not an integer") from None
    if size == 0:
        return ptr                      # empty arrays may export NULL; nothing is read
    if ptr <= 0:
        raise ValueError(f"{argname}'s global address {ptr:#x} is not a valid device pointer")
    if ptr >= _MAX_ADDRESS:
        raise ValueError(f"{argname}'s global address {ptr:#x} does not fit in 64 bits; it is "
                         f"not a device pointer")
    align = _element_alignment(itemsize, dt)
    if ptr % align:
        raise ValueError(f"{argname}'s global address {ptr:#x} is not aligned to its "
                         f"{itemsize}-byte elements (address % {align} = {ptr % align})")
    return ptr


def read_operand(array: Any, argname: str = "array", *, writable: bool = False) -> Operand:
    """``array`` as an :class:`Operand`, after every check that needs no driver (module
    docstring); errors are TypeError/ValueError naming ``argname``. ``writable``: the kernel
    writes it, so a read-only interface (``data=(ptr, True)``) is refused."""
    if isinstance(array, np.ndarray):
        raise TypeError(_host_hint(argname)
                        + "got a host numpy.ndarray — copy it with numba.cuda.to_device first")
    if _is_torch_tensor(array):
        if not array.is_cuda:
            raise TypeError(_host_hint(argname)
                            + f"got a torch tensor on {array.device} — move it with .cuda() first")
        itemsize = int(array.element_size())
        shape, strides = _check_shape(array.shape, [int(s) * itemsize for s in array.stride()],
                                      argname)
        ptr = _check_pointer(array.data_ptr(), itemsize, _prod(shape), argname)
        device = getattr(getattr(array, "device", None), "index", None)
        return Operand(shape, strides, itemsize, array.dtype, ptr, False, device)
    cai = _interface(array, argname)
    typestr = cai["typestr"]
    dt = _element_type(typestr, argname)
    itemsize = dt.itemsize
    shape, strides = _check_shape(cai["shape"], cai.get("strides"), argname)
    data = cai["data"]
    if not isinstance(data, (tuple, list)) or len(data) != 2:
        raise TypeError(f"{argname}'s __cuda_array_interface__ data is {data!r}; it must be a "
                        f"(pointer, read_only) pair")
    ptr = _check_pointer(data[0], itemsize, _prod(shape), argname, dt)
    readonly = bool(data[1])
    if writable and readonly:
        raise ValueError(f"{argname} is read-only (its __cuda_array_interface__ data is "
                         f"({ptr:#x}, True)) but the kernel writes it")
    return Operand(shape, strides, itemsize, typestr, ptr, readonly, None)


def _prod(shape: tuple[int, ...]) -> int:
    n = 1
    for extent in shape:
        n *= extent
    return n


def describe_array(array: Any, argname: str = "array"
                   ) -> tuple[tuple[int, ...], tuple[int, ...] | None, int, Any, int]:
    """(shape, strides in bytes or None, itemsize, dtype spec, address) of ``array``, after
    :func:`read_operand`'s checks."""
    op = read_operand(array, argname)
    return op.shape, op.strides, op.itemsize, op.spec, op.ptr


# ---------------------------------------------------------------------------------------------
# The device check: the array's device is the launch device
# ---------------------------------------------------------------------------------------------


def launch_device() -> int | None:
    """numba's current device ordinal (where kernels launch), or None without a usable GPU
    (no driver, no device, the simulator): then there is nothing to compare."""
    if _device_count() == 0:
        return None
    lib = _libcuda[0] if _libcuda else _load_libcuda()
    if lib is not None:                 # the current context's device, as numba takes it
        ordinal = getattr(_ordinal_out, "pair", None)
        if ordinal is None:
            value = ctypes.c_int(-1)
            ordinal = _ordinal_out.pair = (value, ctypes.byref(value))
        if lib.cuCtxGetDevice(ordinal[1]) == 0:
            return ordinal[0].value
    from ._frontend import cuda  # deferred: importing numba.cuda is slow

    return cuda.get_current_device().id     # no current context: numba makes device 0's


_devices: list[int] = []


def _device_count() -> int:
    """How many GPUs numba sees (asked once); 0 without a usable driver or under the simulator."""
    if not _devices:
        from ._frontend import config, cuda

        try:
            n = 0 if config.ENABLE_CUDASIM or not cuda.is_available() else len(cuda.gpus)
        except Exception:           # a driver that fails to initialise: nothing to compare
            n = 0
        _devices.append(n)
    return _devices[0]


_libcuda = []
_ordinal_out = threading.local()        # each thread's out-parameter of cuCtxGetDevice


def _load_libcuda():
    """The driver's C library through ctypes (None where it cannot be loaded): asked directly,
    its calls cost a fraction of cuda-python's and numba's wrappers."""
    if not _libcuda:
        try:
            lib = ctypes.CDLL("nvcuda.dll" if sys.platform == "win32" else "libcuda.so.1")
            lib.cuPointerGetAttribute.argtypes = (ctypes.c_void_p, ctypes.c_int,
                                                  ctypes.c_uint64)
        except (OSError, AttributeError):
            lib = None
        _libcuda.append(lib)
    return _libcuda[0]


def device_ordinal(ptr: int) -> tuple[int, int]:
    """``(CUresult value, ordinal)``: the driver's answer to which device ``ptr`` was allocated
    on (a non-zero result: not CUDA memory). Asked of libcuda's C API: cuda-bindings 13.3.1
    answers 0 for every pointer (CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, on a two-H100 host,
    2026-11-27)."""
    lib = _load_libcuda()
    if lib is None:
        from cuda.bindings import driver

        err, ordinal = driver.cuPointerGetAttribute(
            driver.CUpointer_attribute.CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, ptr)
        return int(err), int(ordinal)
    ordinal = ctypes.c_int(-1)
    err = lib.cuPointerGetAttribute(ctypes.byref(ordinal), 9, ptr)   # ..._DEVICE_ORDINAL
    return int(err), ordinal.value


def _query_pointer(ptr: int) -> tuple[int, int, int] | None:
    """(device ordinal, allocation start, allocation size) of a device pointer from the driver,
    or None where ``ptr`` is not CUDA memory."""
    from cuda.bindings import driver

    attr, ok = driver.CUpointer_attribute, driver.CUresult.CUDA_SUCCESS
    err, ordinal = device_ordinal(ptr)
    if err:
        return None
    err_s, start = driver.cuPointerGetAttribute(attr.CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, ptr)
    err_n, nbytes = driver.cuPointerGetAttribute(attr.CU_POINTER_ATTRIBUTE_RANGE_SIZE, ptr)
    if err_s != ok or err_n != ok:
        return int(ordinal), ptr, 1                 # memory without a range: this address only
    return int(ordinal), int(start), int(nbytes)


#: Allocations whose device was asked: sorted starts, and (end, ordinal) per start.
POINTER_CACHE_SIZE = 1024
_starts: list[int] = []
_ranges: dict[int, tuple[int, int]] = {}
_lock = threading.Lock()


def pointer_device(ptr: int, *, refresh: bool = False) -> int | None:
    """The ordinal of the device that holds ``ptr`` (None: not CUDA memory), asked of the driver
    once per allocation and then found by range. A freed range reused by another device reads
    stale until ``refresh`` (check_device refreshes before it refuses)."""
    with _lock:
        i = bisect.bisect_right(_starts, ptr) - 1
        if i >= 0 and not refresh:
            end, ordinal = _ranges[_starts[i]]
            if ptr < end:
                return ordinal
    found = _query_pointer(ptr)
    if found is None:
        return None
    ordinal, start, nbytes = found
    with _lock:
        if start not in _ranges:
            if len(_starts) >= POINTER_CACHE_SIZE:
                _starts.clear()
                _ranges.clear()
            bisect.insort(_starts, start)
        _ranges[start] = (start + nbytes, ordinal)
    return ordinal


def operand_device(array: Any) -> int | None:
    """The ordinal of the GPU holding ``array`` where numba sees several (None with one GPU or
    none: there the current device is the only one, and nothing is asked). torch tensors and
    CuPy arrays name their device; anything else is asked of the driver by its address (once
    per allocation). None as well for what is not a CUDA array: the checks report it."""
    if _device_count() <= 1:
        return None
    device = getattr(array, "device", None)
    for field in ("index", "id"):           # torch.device.index, cupy.cuda.Device.id
        ordinal = getattr(device, field, None)
        if type(ordinal) is int:
            return ordinal
    try:
        ptr = int(array.__cuda_array_interface__["data"][0])
    except Exception:                       # no interface (a host array): the checks say so
        return None
    return pointer_device(ptr) if ptr else None


def device_to_enter(array: Any) -> int | None:
    """The GPU a public call on ``array`` must make current: the one ``array`` lives on, where
    that is not numba's current device (None: the call runs where it is)."""
    device = operand_device(array)
    return None if device is None or device == launch_device() else device


def check_device(op: Operand, argname: str, device: int | None = None,
                 first: str | None = None) -> None:
    """``op`` must live on the launch device (``device``, default numba's current one), which
    the public calls make their first operand's (named ``first``, for the message). Free on a
    machine with one GPU or none (every device array is then on the launch device, or there is
    nothing to compare); with several, torch tensors name their device and other pointers are
    asked of the driver once per allocation."""
    if op.size == 0 or (device is None and _device_count() <= 1):
        return
    current = launch_device() if device is None else device
    if current is None:
        return
    if op.device is not None:
        owner = op.device
    else:
        owner = pointer_device(op.ptr)
        if owner is not None and owner != current:
            owner = pointer_device(op.ptr, refresh=True)      # a stale range, or really elsewhere
        if owner is None:
            raise ValueError(f"{argname}'s address {op.ptr:#x} is not CUDA device memory")
    if owner != current and first not in (None, argname):
        raise ValueError(f"{argname} lives on device {owner} but {first} lives on device "
                         f"{current}; every operand of one call must be on the same device "
                         f"(move {argname} there)")
    if owner != current:
        raise ValueError(f"{argname} lives on device {owner} but the launch device (numba's "
                         f"current device) is {current}; call inside "
                         f"`with numba.cuda.gpus[{owner}]:` or move the array")


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
