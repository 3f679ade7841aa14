"""``transpose(src, out=None)``: the public matrix transpose, and the kernel registry the benches use.

``src`` is a 2-D (M, N) or batched 3-D (B, M, N) CUDA array (numba, CuPy, or torch, including
torch bfloat16) with 1-, 2-, 4- or 8-byte elements; the result is (N, M) or (B, N, M), C-contiguous.
Where both row pitches and base addresses are multiples of 16 bytes, ``v7_vec16`` runs (16-byte
global accesses; the fastest measured on the H100 for every element size, 95.6-96.4% of a copy at
32768^2, ahead of tma_pipelined's 88.9-92.5%; a tensor map needs the same alignment, so TMA never
applies where v7 does not). Elsewhere (odd shapes such as 32767 x 20001, misaligned views)
``v8_sector`` runs (16-byte accesses realigned through a padded shared tile, each block writing
whole 32-byte sectors of its out rows: 32767 x 20001 on the H100 runs at 90.6% of a copy for fp32,
90.7% for fp64, 87.2% for fp16 and 75.5% for uint8, where the element-wise v6_packed ran 65.4%,
79.8%, 47.8% and 37.7%). Under the CUDA simulator the fastest classic kernel runs.
"""

from numba import cuda

from ._arrays import allocate_like, numba_view
from ._device import HOPPER_CC
from .kernels import transpose_classic, transpose_sector, transpose_tma, transpose_vec

__all__ = ["transpose", "transpose_kernels", "choose_kernel"]

# Bytes a TMA global address and row pitch must be multiples of.
TMA_ALIGN = 16
ITEMSIZES = (1, 2, 4, 8)


def _check_contiguous(view, argname):
    expected = view.dtype.itemsize
    for axis in range(view.ndim - 1, -1, -1):
        if view.shape[axis] > 1 and view.strides[axis] != expected:
            raise ValueError(f"{argname} must be C-contiguous; its strides are {view.strides} "
                             f"bytes for shape {view.shape} (make a contiguous copy first)")
        expected *= view.shape[axis]


def _validate(src, out):
    """Numba views (B, M, N) and (B, N, M) of ``src`` and ``out``, after every check."""
    s = numba_view(src, "src")
    if s.ndim not in (2, 3):
        raise ValueError(f"src must be 2-D (M, N) or 3-D (batch, M, N); got shape {s.shape}")
    if s.dtype.itemsize not in ITEMSIZES:
        raise TypeError(f"src elements must be 1, 2, 4 or 8 bytes; {s.dtype} is "
                        f"{s.dtype.itemsize}")
    _check_contiguous(s, "src")
    want = s.shape[:-2] + (s.shape[-1], s.shape[-2])
    o = numba_view(out, "out")
    if o.shape != want:
        raise ValueError(f"out must have shape {want} for src of shape {s.shape}; got {o.shape}")
    if o.dtype != s.dtype:
        raise TypeError(f"out dtype {o.dtype} differs from src dtype {s.dtype}")
    _check_contiguous(o, "out")
    s_ptr = s.__cuda_array_interface__["data"][0]
    o_ptr = o.__cuda_array_interface__["data"][0]
    nbytes = s.size * s.dtype.itemsize
    if s.size and s_ptr < o_ptr + nbytes and o_ptr < s_ptr + nbytes:
        raise ValueError("out overlaps src; a transpose cannot run in place")
    if s.ndim == 2:
        s = s.reshape(1, *s.shape)
        o = o.reshape(1, *o.shape)
    return s, o


def _tma_ready(s, o):
    """Whether both arrays admit tile-mode tensor maps on this device."""
    if cuda.get_current_device().compute_capability < HOPPER_CC:
        return False
    itemsize = s.dtype.itemsize
    _, M, N = s.shape
    for view, inner in ((s, N), (o, M)):
        if view.__cuda_array_interface__["data"][0] % TMA_ALIGN or (inner * itemsize) % TMA_ALIGN:
            return False
    return True


def _choose(s, o):
    _, M, N = s.shape
    if transpose_vec.applies(s, o, M, N):
        return "v7_vec16"
    if transpose_sector.applies(s, o):
        return "v8_sector"
    return transpose_classic.BEST


def choose_kernel(src, out):
    """Name of the kernel ``transpose`` runs for these arrays (after validating them)."""
    return _choose(*_validate(src, out))


def transpose(src, out=None, *, kernel=None, stream=0):
    """Transpose the last two axes of ``src`` into ``out`` (allocated when None) and return ``out``.

    ``kernel`` forces one of ``transpose_kernels()`` by name (benchmarks, tests); by default the
    fastest one that applies is chosen. Runs asynchronously on ``stream``.
    """
    if out is None:
        shape = tuple(numba_view(src, "src").shape)
        if len(shape) not in (2, 3):
            raise ValueError(f"src must be 2-D (M, N) or 3-D (batch, M, N); got shape {shape}")
        out = allocate_like(src, shape[:-2] + (shape[-1], shape[-2]))
    s, o = _validate(src, out)
    if s.size == 0:
        return out
    name = _choose(s, o) if kernel is None else kernel
    launcher = _LAUNCHERS.get(name)
    if launcher is None:
        raise ValueError(f"kernel must be one of {sorted(_LAUNCHERS)}; got {name!r}")
    if name in transpose_tma.LADDER and not _tma_ready(s, o):
        raise ValueError(f"kernel {name!r} needs an sm_90 GPU and rows whose byte size is a "
                         f"multiple of {TMA_ALIGN} in src and out; src is {s.shape[1:]} of "
                         f"{s.dtype} (use a classic kernel)")
    launcher(s, o, stream)
    return out


_LAUNCHERS = {**transpose_classic.LADDER, "v7_vec16": transpose_vec.v7_vec16,
              "v8_sector": transpose_sector.v8_sector, **transpose_tma.LADDER}


def transpose_kernels():
    """Ordered ``{name: launcher(src, out)}`` of every transpose kernel, classic then TMA.

    Each launcher validates like ``transpose`` and runs that one kernel.
    """
    def bind(name):
        def launch(src, out, stream=0):
            return transpose(src, out, kernel=name, stream=stream)

        launch.__name__ = name
        launch.__doc__ = _LAUNCHERS[name].__doc__
        return launch

    return {name: bind(name) for name in _LAUNCHERS}
