"""Column sums of a 2-D float32 array (``x.sum(axis=0)``) with TMA loads in and TMA reductions out.

The grid is (column tiles, row slabs). Each block streams its slab of one column tile through
shared memory with a ring of ``STAGES`` TMA loads on mbarriers (16 KB per stage: BR rows x BN
columns), every thread summing one column of each tile in registers. The block then folds its
threads' partial sums into one row of BN column sums in shared memory and adds it into ``out``
with a single ``cp.reduce.async.bulk.tensor.1d ... .add`` (``tma.reduce_tile``): the TMA unit does
the cross-block accumulation in L2, so no block waits for another and no atomics are issued by
threads. ``out`` is zeroed first, on the same stream.

Edges cost nothing: a box hanging past the last row or column is filled with zeros by the TMA
load (adding nothing), and the reduction skips the part of the output box past ``N``.

Rounding: each thread adds its column's elements in order within a tile, blocks add their
partials in no fixed order, so the result is not bitwise reproducible from run to run (it is
exact when every partial sum is: e.g. small integers). The error obeys the usual bound for any
summation order of M float32 terms, ``|err| <= (M - 1) * 2**-24 * sum(|x|)`` per column.
TMA's f32 add flushes subnormal inputs and results to zero.
"""

import functools

import numpy as np

from .._frontend import cuda, types
from .. import mbarrier, tma
from .._device import require_hopper
from ..launch import configure
from ..tensormap import TensorMap, describe_array, dtype_name, is_c_contiguous

float32, uint64 = types.float32, types.uint64

__all__ = ["sum_axis0", "sum_axis0_launcher", "check_sum_axis0", "plan_grid",
           "THREADS", "STAGES", "TILE_BYTES"]

THREADS = 256
STAGES = 2
#: One stage: BR rows x BN columns of float32 = 16 KB (two stages fit the 48 KB static limit with
#: room for several blocks per SM).
TILE_BYTES = 16384
ITEMSIZE = 4
TILE_ELEMS = TILE_BYTES // ITEMSIZE
RING_ELEMS = STAGES * TILE_ELEMS            # shared.array shapes must be plain constants
#: Column-tile widths (BN): the widest not much larger than N, so narrow arrays do not stream
#: zero-filled columns.
TILE_COLS = (32, 64, 128)
#: TMA needs row strides (and the inner box) in multiples of this many bytes.
ROW_ALIGN = 16
#: Target resident blocks per SM when choosing the number of row slabs (shared memory allows
#: 6 blocks of ~33 KB; more slabs only add reductions).
BLOCKS_PER_SM = 6
#: TMA coordinates are signed 32-bit.
MAX_ROWS = 2**31 - 1
_ZERO_THREADS = 256


def tile_cols(n):
    """BN for an array of ``n`` columns: the smallest of ``TILE_COLS`` covering it, else the
    widest."""
    for bn in TILE_COLS:
        if n <= bn:
            return bn
    return TILE_COLS[-1]


@functools.cache
def _kernel(bn):
    br = TILE_ELEMS // bn                   # rows per tile
    groups = THREADS // bn                  # threads per column
    rows_per_thread = br // groups          # 16 whatever bn is
    col_mask = bn - 1
    group_shift = bn.bit_length() - 1
    stride = groups * bn                    # elements between a thread's rows in a tile

    @cuda.jit
    def sum_axis0_kernel(xdesc, odesc, tiles_per_slab, n_row_tiles):
        tiles = cuda.shared.array(RING_ELEMS, float32, alignment=128)
        part = cuda.shared.array(THREADS, float32)
        sums = cuda.shared.array(bn, float32, alignment=128)
        bars = cuda.shared.array(STAGES, uint64)
        tid = cuda.threadIdx.x
        col = tid & col_mask
        group = tid >> group_shift
        c0 = cuda.blockIdx.x * bn
        t0 = cuda.blockIdx.y * tiles_per_slab
        n_tiles = min(tiles_per_slab, n_row_tiles - t0)
        mbarrier.init_block(bars, 1)
        if tid == 0:
            tma.prefetch_descriptor(xdesc)
            for s in range(STAGES):
                if s < n_tiles:
                    mbarrier.arrive_expect_tx(bars[s:], TILE_BYTES)
                    tma.load(tiles[s * TILE_ELEMS:], xdesc, ((t0 + s) * br, c0), bars[s:])
        acc0 = float32(0)
        acc1 = float32(0)
        for i in range(n_tiles):
            s = i & (STAGES - 1)
            mbarrier.wait(bars[s:], (i // STAGES) & 1)
            base = s * TILE_ELEMS + group * bn + col
            for k in range(0, rows_per_thread, 2):      # two chains of dependent adds
                acc0 += tiles[base + k * stride]
                acc1 += tiles[base + (k + 1) * stride]
            cuda.syncthreads()                           # stage s is read: refill it
            if tid == 0 and i + STAGES < n_tiles:
                mbarrier.arrive_expect_tx(bars[s:], TILE_BYTES)
                tma.load(tiles[s * TILE_ELEMS:], xdesc, ((t0 + i + STAGES) * br, c0), bars[s:])
        part[tid] = acc0 + acc1
        cuda.syncthreads()
        if tid < bn:
            total = float32(0)
            for g in range(groups):
                total += part[g * bn + tid]
            sums[tid] = total
        tma.reduce_tile(odesc, (c0,), sums, "add")

    return sum_axis0_kernel


@functools.cache
def _zero_kernel():
    @cuda.jit
    def zero(out):
        for i in range(cuda.grid(1), out.shape[0], cuda.gridsize(1)):
            out[i] = 0

    return zero


def check_sum_axis0(x, out=None):
    """Validate ``sum_axis0``'s arguments without touching the GPU; returns ``(M, N)``.

    ``x``: a 2-D, C-contiguous float32 CUDA array (numba, CuPy or torch) whose rows are a
    multiple of 16 bytes (N a multiple of 4: TMA's row-stride rule) and whose address is
    16-byte aligned. ``out``: None, or a 1-D C-contiguous float32 CUDA array of N elements,
    16-byte aligned, not overlapping ``x``. Raises TypeError/ValueError naming the argument.
    """
    shape, strides, itemsize, dtype, address = describe_array(x)
    if len(shape) != 2:
        raise ValueError(f"x must be 2-D (M, N), got {len(shape)}-D with shape {tuple(shape)}")
    if dtype_name(dtype) != "float32":
        raise TypeError(f"x must have dtype float32, got {dtype_name(dtype)}")
    m, n = (int(v) for v in shape)
    if not is_c_contiguous(shape, strides, itemsize):
        raise ValueError(f"x must be C-contiguous; its strides are {tuple(strides)} bytes for "
                         f"shape {tuple(shape)}")
    if (n * itemsize) % ROW_ALIGN:
        raise ValueError(f"x's rows must be a multiple of {ROW_ALIGN} bytes for TMA: N * 4 = "
                         f"{n} * 4 = {n * itemsize} bytes; pad N to a multiple of "
                         f"{ROW_ALIGN // itemsize}")
    if m > MAX_ROWS:
        raise ValueError(f"x has {m} rows; TMA coordinates are 32-bit (at most {MAX_ROWS})")
    if m and n and address % ROW_ALIGN:
        raise ValueError(f"x's data at {address:#x} is not {ROW_ALIGN}-byte aligned")
    if out is not None:
        o_shape, o_strides, o_itemsize, o_dtype, o_address = describe_array(out)
        if tuple(int(v) for v in o_shape) != (n,):
            raise ValueError(f"out must have shape ({n},) for x of shape {(m, n)}; got "
                             f"{tuple(o_shape)}")
        if dtype_name(o_dtype) != "float32":
            raise TypeError(f"out must have dtype float32, got {dtype_name(o_dtype)}")
        if not is_c_contiguous(o_shape, o_strides, o_itemsize):
            raise ValueError(f"out must be contiguous; its stride is {tuple(o_strides)} bytes")
        if n and o_address % ROW_ALIGN:
            raise ValueError(f"out's data at {o_address:#x} is not {ROW_ALIGN}-byte aligned "
                             f"(TMA needs {ROW_ALIGN})")
        x_end, o_end = address + m * n * itemsize, o_address + n * itemsize
        if n and m and address < o_end and o_address < x_end:
            raise ValueError("out overlaps x")
    return m, n


def plan_grid(m, n, sm_count):
    """``(bn, grid, tiles_per_slab, n_row_tiles)`` for an (m, n) input on ``sm_count`` SMs."""
    bn = tile_cols(n)
    br = TILE_ELEMS // bn
    col_tiles = -(-n // bn)
    n_row_tiles = -(-m // br)
    slabs = max(1, min(n_row_tiles, -(-sm_count * BLOCKS_PER_SM // col_tiles)))
    tiles_per_slab = -(-n_row_tiles // slabs)
    slabs = -(-n_row_tiles // tiles_per_slab)   # every slab gets at least one tile
    return bn, (col_tiles, slabs), tiles_per_slab, n_row_tiles


@functools.cache
def _sm_count(device_id):
    return int(cuda.get_current_device().MULTIPROCESSOR_COUNT)


def _zero(out, n):
    blocks = min(-(-n // _ZERO_THREADS), 1024)
    configure(_zero_kernel(), blocks, _ZERO_THREADS)(out)


def sum_axis0_launcher(x, out=None):
    """Validate once and encode the tensor maps once; returns ``(run, out)`` where ``run()``
    zeroes ``out`` and launches the kernel (asynchronously, on the default stream).

    For repeated sums over the same buffers (the bench times ``run``); ``sum_axis0`` is
    ``run()`` plus the set-up. Keep ``x`` and ``out`` alive while ``run`` is used.
    """
    m, n = check_sum_axis0(x, out)
    if out is None:
        out = cuda.device_array(n, dtype=np.float32)
    if n == 0:
        return (lambda: None), out
    o = out if cuda.is_cuda_array(out) else cuda.as_cuda_array(out)
    if m == 0:
        return (lambda: _zero(o, n)), out
    require_hopper("sum_axis0")
    bn, grid, tiles_per_slab, n_row_tiles = plan_grid(m, n, _sm_count(cuda.get_current_device().id))
    br = TILE_ELEMS // bn
    xmap = TensorMap(x, (br, bn))
    omap = TensorMap(out, (bn,))
    kernel = _kernel(bn)

    def run():
        _zero(o, n)
        configure(kernel, grid, THREADS)(xmap, omap, tiles_per_slab, n_row_tiles)

    return run, out


def sum_axis0(x, out=None):
    """``x.sum(axis=0)`` of a 2-D float32 CUDA array, as a float32 device array of N elements.

    ``x``: numba, CuPy or torch; C-contiguous; N a multiple of 4 (rows of whole 16-byte units,
    TMA's rule). ``out``: optional float32 array of N elements to write (it is zeroed first).
    Needs an sm_90 GPU. Returns ``out``. Arguments are checked (``check_sum_axis0``) before
    anything reaches the driver. Accuracy: float32 accumulation in a data-dependent order (see
    the module docstring).
    """
    run, out = sum_axis0_launcher(x, out)
    run()
    return out
