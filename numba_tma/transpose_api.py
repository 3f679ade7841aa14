"""``transpose(src, out=None)``: the public matrix transpose, and the kernel registry the benches use.

``src`` is a 2-D (M, N) or batched 3-D (B, M, N) CUDA array (numba, CuPy, or torch, including
torch bfloat16) with 1-, 2-, 4- or 8-byte elements; the result is (N, M) or (B, N, M), C-contiguous.

Which kernel (what each measured against the others: ``docs/transpose.md``):

- ``v7_vec16`` where both row pitches and base addresses are multiples of 16 bytes and the shape
  fills its tiles (:func:`~numba_tma.kernels.transpose_vec.whole_tiles`): 16-byte global
  accesses (a tensor map needs the same alignment, so TMA never applies where v7 does not);
- ``v8_sector`` everywhere else: odd shapes such as 32767 x 20001 and misaligned views (16-byte
  accesses realigned through a padded shared tile, each block writing whole 32-byte sectors of
  its out rows), and 16-byte rows whose partial edge tiles v7 would move element by element;
- under the CUDA simulator, the fastest classic kernel.

v7 and v8 are launched from raw pointers (:class:`~numba_tma.launch.DirectKernel`) after a
validation that reads the arrays' interfaces without building numba arrays, and a repeated layout
only patches the two pointers of a launch packed once, where a numba launch on the views it
used to build cost more than the kernel below ~8192^2 elements.
"""

import math
from typing import Any, NamedTuple

from ._frontend import config as numba_config, cuda

from . import operands as _operands
from ._arrays import allocate_like, numba_view
from ._calls import BoundedCache, call_stream, is_torch_tensor, operand_key, torch_current_stream
from ._device import HOPPER_CC, require_gpu
from .kernels import transpose_sector, transpose_v6, transpose_vec
from .kernels._grid import device_pointer
from .ladders import transpose_classic, transpose_tma
from .launch import context_id_or_none, is_capturing, numba_stream
from .operands import check_device, device_to_enter, is_c_contiguous, read_operand

__all__ = ["transpose", "transpose_kernels", "choose_kernel"]

# Bytes a TMA global address and row pitch must be multiples of.
TMA_ALIGN = 16
ITEMSIZES = (1, 2, 4, 8)


class _Operand(NamedTuple):
    """What the launchers need of one validated array: read from its array interface, without
    building a numba array (that costs tens of microseconds per call on the host)."""
    array: Any          # the caller's array (launchers taking numba arrays get a view of it)
    ptr: int
    shape: tuple        # (B, M, N) for src, (B, N, M) for out
    itemsize: int
    dtype: str          # "float32", "bfloat16", ...: comparable across numba, CuPy and torch


def _describe(array, argname, writable=False):
    """(shape, strides in bytes or None, itemsize, dtype name, address) of a CUDA array on the
    launch device, after :func:`numba_tma.operands.read_operand`'s checks (errors name
    ``argname``; ``writable``: a read-only array is refused)."""
    if not numba_config.ENABLE_CUDASIM:
        op = read_operand(array, argname, writable=writable)
        check_device(op, argname, first="src")
        return op.shape, op.strides, op.itemsize, op.dtype, op.ptr
    view = numba_view(array, argname)           # the simulator's arrays have no interface
    return (tuple(view.shape), tuple(view.strides), view.dtype.itemsize, view.dtype.name,
            device_pointer(view))


def _check_contiguous(shape, strides, itemsize, argname):
    if not is_c_contiguous(shape, strides, itemsize):
        raise ValueError(f"{argname} must be C-contiguous; its strides are {strides} "
                         f"bytes for shape {shape} (make a contiguous copy first)")


def _check_src(src):
    """(shape, itemsize, dtype name, address) of ``src`` after its own checks."""
    shape, strides, itemsize, dtype, ptr = _describe(src, "src")
    if len(shape) not in (2, 3):
        raise ValueError(f"src must be 2-D (M, N) or 3-D (batch, M, N); got shape {shape}")
    if itemsize not in ITEMSIZES:
        raise TypeError(f"src elements must be 1, 2, 4 or 8 bytes; {dtype} is {itemsize}")
    _check_contiguous(shape, strides, itemsize, "src")
    return shape, itemsize, dtype, ptr


def _validate(src, out, checked_src=None):
    """``_Operand``s (B, M, N) and (B, N, M) of ``src`` and ``out``, after every check
    (``checked_src``: what :func:`_check_src` returned for ``src``, if it already ran)."""
    shape, itemsize, dtype, s_ptr = checked_src or _check_src(src)
    want = shape[:-2] + (shape[-1], shape[-2])
    o_shape, o_strides, _, o_dtype, o_ptr = _describe(out, "out", writable=True)
    if o_shape != want:
        raise ValueError(f"out must have shape {want} for src of shape {shape}; got {o_shape}")
    if o_dtype != dtype:
        raise TypeError(f"out dtype {o_dtype} differs from src dtype {dtype}")
    _check_contiguous(o_shape, o_strides, itemsize, "out")
    size = math.prod(shape)
    nbytes = size * itemsize
    if size and s_ptr < o_ptr + nbytes and o_ptr < s_ptr + nbytes:
        raise ValueError("out overlaps src; a transpose cannot run in place")
    B, M, N = (1,) * (3 - len(shape)) + shape
    return (_Operand(src, s_ptr, (B, M, N), itemsize, dtype),
            _Operand(out, o_ptr, (B, N, M), itemsize, dtype))


def _tma_ready(s, o):
    """Whether both arrays admit tile-mode tensor maps on this device."""
    if cuda.get_current_device().compute_capability < HOPPER_CC:
        return False
    _, M, N = s.shape
    for ptr, inner in ((s.ptr, N), (o.ptr, M)):
        if ptr % TMA_ALIGN or (inner * s.itemsize) % TMA_ALIGN:
            return False
    return True


def _choose(s, o):
    _, M, N = s.shape
    if transpose_vec.applies_to(s.itemsize, M, N, s.ptr, o.ptr) and \
            transpose_vec.whole_tiles(s.itemsize, M, N):
        return "v7_vec16"
    if transpose_sector.applies_to(s.itemsize):
        return "v8_sector"
    return transpose_v6.BEST


def choose_kernel(src, out):
    """Name of the kernel ``transpose`` runs for these arrays (after validating them)."""
    return _choose(*_validate(src, out))


class _Repeat(NamedTuple):
    """A cached v7/v8 launch for one layout: new buffers of that layout only patch pointers.
    ``pointers``: the (src, out) addresses the launch holds now (patched only when they
    change; read and written under ``prepared.lock``)."""
    prepared: Any
    src_args: tuple
    out_args: tuple
    nbytes: int
    pointers: list


#: transpose() remembers the launches of its last layouts, keyed by the CUDA context, the forced
#: kernel name, each operand's shape, strides, dtype and device, and each address modulo 128 (the
#: kernels' choice and v8's arguments depend on it): a repeated call checks only that src and
#: out do not overlap, then patches the two pointers and launches. A torch ``src`` without
#: ``out`` is keyed by ``src`` alone: torch allocates the new ``out`` (C-contiguous, ``src``'s
#: dtype and device), so its layout follows from ``src``'s and it cannot overlap ``src``.
REPEAT_CACHE_SIZE = 64
_repeats = BoundedCache(REPEAT_CACHE_SIZE)
#: The torch tensor types seen by transpose(x): on a machine with one GPU such an ``x`` goes
#: straight to :func:`_transpose_torch` (no device to enter, no kind to tell).
_torch_types = set()


def transpose(src, out=None, *, kernel=None, stream=None):
    """Transpose the last two axes of ``src`` into ``out`` (allocated when None, like ``src``: a
    numba array takes a dropped output's recycled block, or one from CUDA's stream-ordered
    pool, in stream order: ``_arrays.stream_ordered_array``) and return ``out``.

    ``kernel`` forces one of ``transpose_kernels()`` by name (benchmarks, tests); by default the
    fastest one that applies is chosen.

    Streams: runs asynchronously on ``stream`` (a ``torch.cuda.Stream``, CuPy or numba stream,
    cuda.core stream or raw handle); without one, on torch's current stream for torch tensors
    (so ``with torch.cuda.stream(s):`` orders it like a torch op), CuPy's current stream for
    CuPy arrays, else the default stream. Calls repeating a layout (shape, strides, dtype, and
    address offsets) on any buffers reuse its launch, and may be captured in a CUDA graph
    (``torch.cuda.graph``), a fresh ``out`` allocated inside the capture included; a layout's
    first call must come before the capture.

    Devices: runs on the GPU ``src`` lives on, whatever the current device; ``out`` elsewhere is
    a ValueError. Without a usable GPU: :class:`numba_tma.NoGPUError`, after the checks.
    """
    if out is None and type(src) in _torch_types and _operands._device_count() <= 1:
        return _transpose_torch(src, kernel, stream)    # x.t().contiguous()'s: no device to pick
    device = device_to_enter(src)
    if device is not None:
        with cuda.gpus[device]:         # the operands decide where the call runs, as in torch
            return transpose(src, out, kernel=kernel, stream=stream)
    if out is None and is_torch_tensor(src) and not numba_config.ENABLE_CUDASIM:
        _torch_types.add(type(src))
        return _transpose_torch(src, kernel, stream)
    ks = operand_key(src)
    if ks is not None and not numba_config.ENABLE_CUDASIM:
        handle = ctx = None
        if out is None and len(ks[1]) in (2, 3) and _allocates_cheaply(src):
            shape = ks[1]
            handle = call_stream(stream, src)
            ctx = context_id_or_none()
            out = allocate_like(src, (*shape[:-2], shape[-1], shape[-2]), stream=handle,
                                ctx_id=ctx)
        ko = None if out is None else operand_key(out)
        if ko is None:
            ctx = None
        elif ctx is None:
            ctx = context_id_or_none()
        if ctx is not None:
            key = (ctx, kernel, ks[1:], ko[1:], ks[0] % 128, ko[0] % 128)
            hit = _repeats.get(key)
            if hit is not None:
                s_ptr, o_ptr, n = ks[0], ko[0], hit.nbytes
                if not (s_ptr < o_ptr + n and o_ptr < s_ptr + n):
                    _relaunch(hit, s_ptr, o_ptr,
                              call_stream(stream, src) if handle is None else handle)
                    return out
            return _transpose(src, out, kernel, stream, key)
    return _transpose(src, out, kernel, stream, None)


def _transpose_torch(src, kernel, stream):
    """transpose(src) of a torch tensor on the launch device, out allocated by torch as
    ``x.t().contiguous()`` does; a repeated layout's launch is reused. Each torch accessor costs
    a Python binding call, so each is read once and the key is flat: this is the path whose
    host cost is measured against torch's own (benches/host.py). A CPU tensor or another rank
    goes to the checks, which report it."""
    try:                                # (as operand_key: a tensor without these has no key)
        shape, dev, s_ptr = src.shape, src.get_device(), src.data_ptr()
        new_empty = src.new_empty
    except (AttributeError, TypeError, RuntimeError):
        dev = -1
    rank = len(shape) if dev >= 0 else 0
    if rank == 2:
        out_shape = (shape[1], shape[0])
    elif rank == 3:
        out_shape = (shape[0], shape[2], shape[1])
    else:
        return _transpose(src, None, kernel, stream, None)      # (its checks report it)
    handle = torch_current_stream(dev) if stream is None else call_stream(stream, src)
    ctx = context_id_or_none()
    out = new_empty(out_shape)
    if ctx is None:
        return _transpose(src, out, kernel, stream, None)
    o_ptr = out.data_ptr()
    key = (ctx, kernel, shape, src.stride(), src.dtype, dev, s_ptr & 127, o_ptr & 127)
    hit = _repeats.get(key)
    if hit is None:
        return _transpose(src, out, kernel, stream, key)
    _relaunch(hit, s_ptr, o_ptr, handle)
    return out


def _relaunch(hit, s_ptr, o_ptr, handle):
    """Launch a cached layout's kernel on the buffers at ``s_ptr`` and ``o_ptr``."""
    prepared = hit.prepared
    with prepared.lock:
        if hit.pointers[0] != s_ptr or hit.pointers[1] != o_ptr:
            for i in hit.src_args:
                prepared.set_pointer(i, s_ptr)
            for i in hit.out_args:
                prepared.set_pointer(i, o_ptr)
            hit.pointers[:] = s_ptr, o_ptr
        prepared(handle)


def _allocates_cheaply(x):
    """Whether ``out`` for ``x`` can be allocated before the checks: a torch tensor, a CuPy
    array (their pools) or a numba device array (``_arrays.stream_ordered_array``); other
    interfaces allocate after the checks, on the slow path."""
    return (hasattr(x, "new_empty") or type(x).__module__.split(".")[0] == "cupy"
            or hasattr(x, "copy_to_host"))


def _transpose(src, out, kernel, stream, key):
    """transpose() after every check; caches a v7/v8 launch under ``key``."""
    checked = _check_src(src)
    given = out is not None
    if not given:
        require_gpu("transpose")                # after src's checks, before the allocation
        shape = checked[0]
        out = allocate_like(src, shape[:-2] + (shape[-1], shape[-2]),
                            stream=call_stream(stream, src))
    s, o = _validate(src, out, checked)
    if given:
        require_gpu("transpose")                # after out's checks too
    if 0 in s.shape:
        return out
    name = _choose(s, o) if kernel is None else kernel
    launcher = _LAUNCHERS.get(name)
    if launcher is None:
        raise ValueError(f"kernel must be one of {sorted(_LAUNCHERS)}; got {name!r}")
    if name in transpose_tma.LADDER and not _tma_ready(s, o):
        raise ValueError(f"kernel {name!r} needs an sm_90 GPU and rows whose byte size is a "
                         f"multiple of {TMA_ALIGN} in src and out; src is {s.shape[1:]} of "
                         f"{s.dtype} (use a classic kernel)")
    B, M, N = s.shape
    direct_launcher = None
    if name == "v7_vec16" and transpose_vec.applies_to(s.itemsize, M, N, s.ptr, o.ptr):
        direct_launcher = transpose_vec.LAUNCHER
    elif name == "v8_sector" and transpose_sector.applies_to(s.itemsize):
        direct_launcher = transpose_sector.LAUNCHER
    if direct_launcher is None:
        launcher(numba_view(src, "src").reshape(s.shape), numba_view(out, "out").reshape(o.shape),
                 numba_stream(call_stream(stream, src)))
        return out
    handle = call_stream(stream, src)
    if key is None:
        direct_launcher.launch(s.ptr, o.ptr, B, M, N, s.itemsize, handle)
        return out
    direct = direct_launcher.direct(s.itemsize)
    if is_capturing(handle) and not direct.loaded():
        raise RuntimeError(f"transpose: the {name} kernel is not loaded yet, which cannot happen "
                           f"during CUDA graph capture; call transpose once on this layout "
                           f"before capturing")
    prepared = direct_launcher.prepare(s.ptr, o.ptr, B, M, N, s.itemsize)
    if prepared is None:                   # past the grid limits: several launches each time
        direct_launcher.launch(s.ptr, o.ptr, B, M, N, s.itemsize, handle)
        return out
    entry = _Repeat(prepared, direct_launcher.src_args, direct_launcher.out_args,
                    B * M * N * s.itemsize, [s.ptr, o.ptr])
    _repeats.put(key, entry)
    prepared(handle)
    return out


#: The transposes launched from raw pointers (transpose() picks them for 1-, 2-, 4- and 8-byte
#: elements), by the name transpose_kernels() gives them: their launchers
#: (:class:`~numba_tma.kernels.transpose_launch.TransposeLauncher`), kernels cached on disk.
DIRECT_KERNELS = {"v7_vec16": transpose_vec.LAUNCHER, "v8_sector": transpose_sector.LAUNCHER}


def kernel_variants(names=None, itemsizes=ITEMSIZES):
    """``[(name, (itemsize, row_offset))]``: the kernels transpose() may launch from raw
    pointers (``names`` of :data:`DIRECT_KERNELS`, all by default); ``row_offset`` is the form
    for grids past CUDA's 65535 tile rows."""
    names = list(DIRECT_KERNELS) if names is None else list(names)
    for name in names:
        if name not in DIRECT_KERNELS:
            raise ValueError(f"names: {name!r} is not one of {sorted(DIRECT_KERNELS)}")
    return [(name, (itemsize, row_offset)) for name in names for itemsize in itemsizes
            if itemsize in DIRECT_KERNELS[name].tiles for row_offset in (False, True)]


def kernel_for(name, variant):
    """The :class:`numba_tma.launch.DirectKernel` of one of :func:`kernel_variants`, not
    loaded."""
    return DIRECT_KERNELS[name].direct(*variant)


_LAUNCHERS = {**transpose_classic.LADDER, "v7_vec16": transpose_vec.v7_vec16,
              "v8_sector": transpose_sector.v8_sector, **transpose_tma.LADDER}


def transpose_kernels():
    """Ordered ``{name: launcher(src, out)}`` of every transpose kernel, classic then TMA.

    Each launcher validates like ``transpose`` and runs that one kernel. Its ``kind`` says what
    it is: ``"shipped"`` (a kernel ``transpose()`` runs: v6_packed, v6_persistent, v7_vec16,
    v8_sector, in :mod:`numba_tma.kernels`) or ``"ladder"`` (a seed ladder's rung, in
    :mod:`numba_tma.ladders`: classic v1-v5 of seed 003, the TMA transposes of seed 000); its
    ``module`` names the module the kernel lives in.
    """
    def bind(name):
        def launch(src, out, stream=0):
            return transpose(src, out, kernel=name, stream=stream)

        launch.__name__ = name
        launch.__doc__ = _LAUNCHERS[name].__doc__
        launch.module = _LAUNCHERS[name].__module__
        launch.kind = "ladder" if launch.module.startswith("numba_tma.ladders.") else "shipped"
        return launch

    return {name: bind(name) for name in _LAUNCHERS}
