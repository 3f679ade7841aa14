"""Grouped 2-D copy: many matrices of different addresses, shapes and row pitches in one launch,
through TMA descriptors that the kernel writes itself (``tensormap.replace``), no host encode per
matrix and no host round-trip.

The host encodes one *template* tile-mode descriptor (dtype, box, no swizzle) and a table with
one row per matrix: source and destination addresses, rows, columns and the two row pitches. Block
``(w, g)`` (``w`` of ``WORKERS`` for matrix ``g``) rewrites two descriptor slots of its own in a
global workspace -- address, both dimensions and the row stride -- publishes them to the tensormap
proxy, acquires them, and then walks its share of the matrix's tiles: TMA load from the source,
TMA store of the same shared tile to the destination.

Two publication paths, both from the CUDA Programming Guide ("Encoding a Tensor Map on Device"):
- ``via_shared=True`` (CUTLASS's pattern): copy the template to shared memory, modify it there
  (``tensormap.replace ... .shared::cta``), then one warp copies it to the slot and releases it
  (``tensormap.cp_fenceproxy ... .release.gpu.sync.aligned``);
- ``via_shared=False``: copy the template into the slot with ordinary stores, modify it in place
  (``tensormap.replace ... .global``), then ``fence.proxy.tensormap::generic.release.gpu``.
Either way thread 0 then runs ``fence.proxy.tensormap::generic.acquire.gpu [slot], 128`` and the
block synchronises before the first TMA copy that uses the slot.
"""

import functools

import numpy as np

from .._frontend import cuda
from .. import mbarrier, tma
from .._device import require_hopper
from ..launch import configure
from ..tensormap import TensorMap, describe_array, plan_tensor_map, resolve_dtype
from ..tensormap import device as tmd

__all__ = ["grouped_copy", "WORKERS", "TILE_ROWS", "TILE_BYTES"]

TILE_ROWS = 32
TILE_BYTES = 128  # bytes per tile row: one unswizzled 128-byte line
THREADS = 128
WORKERS = 4  # blocks per matrix; each takes every WORKERS-th tile
DESC_WORDS = 16
SLOTS_PER_BLOCK = 2  # source and destination descriptors
WAIT_TIMEOUT_NS = 2_000_000_000
# Columns of the per-matrix table (int64).
SRC_ADDR, DST_ADDR, ROWS, COLS, SRC_PITCH, DST_PITCH = range(6)
TABLE_COLS = 6


@functools.cache
def _kernel(dtype, via_shared):
    tile_cols = TILE_BYTES // dtype.itemsize
    tile_elems = TILE_ROWS * tile_cols
    tx_bytes = tile_elems * dtype.itemsize

    @cuda.jit
    def grouped_copy_kernel(template, table, slots, status):
        tile = cuda.shared.array(tile_elems, dtype, alignment=128)
        bar = cuda.shared.array(1, np.uint64)
        s_src = cuda.shared.array(DESC_WORDS, np.uint64, alignment=128)
        s_dst = cuda.shared.array(DESC_WORDS, np.uint64, alignment=128)
        mbarrier.init_block(bar, 1)
        tid = cuda.threadIdx.x
        g = cuda.blockIdx.y
        worker = cuda.blockIdx.x
        base = (g * cuda.gridDim.x + worker) * (SLOTS_PER_BLOCK * DESC_WORDS)
        g_src = slots[base:base + DESC_WORDS]
        g_dst = slots[base + DESC_WORDS:base + 2 * DESC_WORDS]
        rows = table[g, ROWS]
        cols = table[g, COLS]

        if via_shared:
            if tid < DESC_WORDS:
                s_src[tid] = template[tid]
                s_dst[tid] = template[tid]
            cuda.syncthreads()
            if tid == 0:
                tmd.replace_global_address(s_src, table[g, SRC_ADDR], space="shared")
                tmd.replace_global_dim(s_src, 0, cols, space="shared")
                tmd.replace_global_dim(s_src, 1, rows, space="shared")
                tmd.replace_global_stride(s_src, 0, table[g, SRC_PITCH], space="shared")
                tmd.replace_global_address(s_dst, table[g, DST_ADDR], space="shared")
                tmd.replace_global_dim(s_dst, 0, cols, space="shared")
                tmd.replace_global_dim(s_dst, 1, rows, space="shared")
                tmd.replace_global_stride(s_dst, 0, table[g, DST_PITCH], space="shared")
            cuda.syncwarp()
            if tid < 32:  # the whole of warp 0, converged: .sync.aligned
                tmd.cp_fence_release(g_src, s_src)
                tmd.cp_fence_release(g_dst, s_dst)
        else:
            if tid < DESC_WORDS:
                g_src[tid] = template[tid]
                g_dst[tid] = template[tid]
            cuda.syncthreads()  # the template words are in place before thread 0 edits them
            if tid == 0:
                tmd.replace_global_address(g_src, table[g, SRC_ADDR], space="global")
                tmd.replace_global_dim(g_src, 0, cols, space="global")
                tmd.replace_global_dim(g_src, 1, rows, space="global")
                tmd.replace_global_stride(g_src, 0, table[g, SRC_PITCH], space="global")
                tmd.replace_global_address(g_dst, table[g, DST_ADDR], space="global")
                tmd.replace_global_dim(g_dst, 0, cols, space="global")
                tmd.replace_global_dim(g_dst, 1, rows, space="global")
                tmd.replace_global_stride(g_dst, 0, table[g, DST_PITCH], space="global")
                tmd.fence_release()
        if tid == 0:
            tmd.fence_acquire(g_src)
            tmd.fence_acquire(g_dst)
        cuda.syncthreads()

        tiles_x = (np.int32(cols) + np.int32(tile_cols - 1)) // np.int32(tile_cols)
        tiles_y = (np.int32(rows) + np.int32(TILE_ROWS - 1)) // np.int32(TILE_ROWS)
        phase = np.int32(0)
        for t in range(np.int32(worker), tiles_x * tiles_y, np.int32(cuda.gridDim.x)):
            ty = np.int32(t) // tiles_x
            tx = np.int32(t) - ty * tiles_x
            y = ty * np.int32(TILE_ROWS)
            x = tx * np.int32(tile_cols)
            if tid == 0:
                mbarrier.arrive_expect_tx(bar, tx_bytes)
                tma.load(tile, g_src, (y, x), bar)
            if not mbarrier.wait_bounded(bar, phase, WAIT_TIMEOUT_NS):
                status[0] = 0
                break               # every later phase would time out too: one timeout, not many
            phase ^= 1
            if tid == 0:
                tma.store(g_dst, (y, x), tile)  # clipped at the matrix edge
                tma.commit_group()
                tma.wait_group_read(0)  # the tile is read out before the next load reuses it
            cuda.syncthreads()
        if tid == 0:
            tma.wait_group(0)

    return grouped_copy_kernel


def _describe_2d(array, what):
    shape, strides, itemsize, natural, address = describe_array(array)
    if len(shape) != 2:
        raise ValueError(f"{what} must be 2-D, got {len(shape)}-D with shape {shape}")
    if 0 in shape:
        raise ValueError(f"{what} is empty (shape {shape})")
    dtype, _ = resolve_dtype(natural, f"{what}'s dtype")
    if isinstance(dtype, str):
        raise TypeError(f"{what}: dtype {dtype} has no numba equivalent; pass a uint16 view")
    return shape, strides, itemsize, np.dtype(dtype), address


def grouped_copy(srcs, dsts, *, via_shared=True):
    """Copy ``srcs[i]`` into ``dsts[i]`` for every ``i`` in one launch (2-D device arrays, one
    dtype, pairwise equal shapes, any shapes and row pitches TMA accepts: rows a multiple of
    16 bytes apart, innermost axis contiguous, 16-byte aligned addresses).

    Descriptors are written on the device (``numba_tma.tensormap.device``); ``via_shared`` picks
    the publication path (see the module docstring). Raises ``ValueError``/``TypeError`` naming the
    offending matrix before anything is launched.
    """
    srcs, dsts = list(srcs), list(dsts)
    if not srcs or len(srcs) != len(dsts):
        raise ValueError(f"srcs and dsts must be non-empty lists of equal length, got "
                         f"{len(srcs)} and {len(dsts)}")
    rows_table = []
    dtype = None
    for i, (src, dst) in enumerate(zip(srcs, dsts)):
        s_shape, s_strides, itemsize, s_dtype, s_addr = _describe_2d(src, f"srcs[{i}]")
        d_shape, d_strides, _, d_dtype, d_addr = _describe_2d(dst, f"dsts[{i}]")
        dtype = dtype or s_dtype
        if s_dtype != dtype or d_dtype != dtype:
            raise TypeError(f"srcs[{i}]/dsts[{i}] have dtypes {s_dtype}/{d_dtype}; every matrix "
                            f"must be {dtype}")
        if s_shape != d_shape:
            raise ValueError(f"srcs[{i}] has shape {s_shape} but dsts[{i}] has {d_shape}")
        box = (TILE_ROWS, TILE_BYTES // itemsize)
        s_plan = plan_tensor_map(s_shape, s_strides, s_dtype, s_addr, box)  # TMA's rules
        d_plan = plan_tensor_map(d_shape, d_strides, d_dtype, d_addr, box)
        rows_table.append((s_addr, d_addr, s_shape[0], s_shape[1], s_plan.strides[0],
                           d_plan.strides[0]))
    require_hopper("grouped_copy")
    # The template: any valid map of this dtype and box; the kernel overwrites address and shape.
    stand_in = cuda.device_array((TILE_ROWS, TILE_BYTES // dtype.itemsize), dtype)
    template = TensorMap(stand_in, (TILE_ROWS, TILE_BYTES // dtype.itemsize))
    table = cuda.to_device(np.array(rows_table, dtype=np.int64).reshape(-1, TABLE_COLS))
    groups = len(rows_table)
    slots = cuda.device_array(groups * WORKERS * SLOTS_PER_BLOCK * DESC_WORDS, np.uint64)
    status = cuda.to_device(np.ones(1, np.int32))
    configure(_kernel(dtype, bool(via_shared)), (WORKERS, groups), THREADS)(template, table, slots, status)
    if status.copy_to_host()[0] != 1:
        raise RuntimeError("grouped_copy: an mbarrier wait timed out (a TMA load never completed)")
