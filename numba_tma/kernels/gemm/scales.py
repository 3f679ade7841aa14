"""fp8 scales: what turns an fp8 GEMM's accumulators into ``alpha * (sa * A) @ (sb * B)``.

The kernel takes the scales as two float32 2-D arrays ``sa``, ``sb`` (any strides; a stride of
0 broadcasts one value), in one of three modes (``KernelSpec.scale``):

- ``"tensor"``: ``sa[0, 0] * sb[0, 0]`` folds into ``alpha`` once per consumer; the main loop
  and epilogue are the 16-bit kernels' (the wgmma accumulators carry the whole K sum).
- ``"row"``: ``sa[r, 0]`` per row of A (C) and ``sb[c, 0]`` per column of B (C) multiply the
  finished accumulators before the epilogue (:func:`rowcol_scaler`).
- ``"block"``: DeepSeek's recipe, always promoted (below). ``sa[kb, r]`` per 128-deep K block
  ``kb`` and row of A (the kernel takes A's scales K block by row, each block's rows padded to
  whole 16 bytes: ``matmul_fp8`` passes ``scale_a`` itself where it has that layout, else a copy
  made by :func:`stage_scales`), ``sb[nb, kb]`` per 128 x 128 block of B (N block ``nb``). A
  ring slice is exactly one K block (128 fp8 elements), so each slice's wgmmas write a fresh
  partial product into registers of their own, which the consumer adds into the fp32
  accumulators times ``sa * sb`` (:func:`promoting_mainloop`): the two-level accumulation that
  keeps a long K's sum at fp32 precision. The producer bulk-copies each slice's scales into its
  slot beside the tiles, completing on the slot's ``full`` barrier (:func:`.ring.scale_rows`):
  A's of the tile's 128 rows, and the 16 bytes of B's row ``nb`` that hold the slice's (a
  tile's columns lie in one N block where ``bn`` divides 128; a 128 x 192 tile's span two, and
  the producer copies the next row's 16 bytes too; the kernel takes B's scales with each N
  block's K blocks contiguous, in whole 16 bytes: ``matmul_fp8`` passes ``scale_b`` itself
  where it has that layout, else a copy). The consumers read them from shared memory: loads
  from global memory in their loop stalled it on global memory's latency. A 128 x 192 tile's
  consumer holds one slice's product, not two (:func:`serial_promoting_mainloop`).

Row and column indices past M or N are clamped to the last one: those rows and columns of C are
never stored, and the clamp keeps every load inside the scale arrays.
"""

import functools

import numpy as np

from ..._frontend import cuda
from ..._bridge import inline_device, tail
from ... import warp, wgmma
from .config import SLAB_ROWS, WG_ROWS
from .mainloop import zeroing
from .ring import B_RUN, SCALE_ROWS, SLOT_SCALES

__all__ = ["SCALE_MODES", "BLOCK_K", "thread_row", "tensor_alpha", "rowcol_scaler",
           "rowcol_packer", "promoting_mainloop", "serial_promoting_mainloop", "slot_releaser",
           "stage_scales", "stage_grid"]

SCALE_MODES = ("tensor", "row", "block")
BLOCK_K = 128           # K (and N, for B) per block scale: one fp8 ring slice


@inline_device
def thread_row(row0, cw, lane, tm):
    # The first of the two rows of C (this and 8 below) that consumer warp cw's lane holds in
    # its first m64 half of a tm-row tile split between two consumers.
    return row0 + (cw >> 2) * (tm // 2) + (cw & 3) * SLAB_ROWS + (lane >> 2)


@inline_device
def tensor_alpha(alpha, sa, sb):
    # Per-tensor scales fold into alpha.
    return alpha * sa[0, 0] * sb[0, 0]


@inline_device
def col_index(col0, lane, n):
    """A consumer thread's first column of a tile clamped to C, ``c``, and how far past it C's
    columns go, ``last``, both unsigned 32-bit: ``sb[c + min(j, last), 0]`` is column
    ``min(col0 + 2 (lane % 4) + j, n - 1)``'s. A clamp in 64 bits and numba's wrap of a
    negative index per load made the loads most of the epilogue's instructions, which slowed
    row scales measurably (docs/fp8.md, "Row scales' loads")."""
    c = min(col0 + 2 * (lane & 3), n - 1)
    return np.uint32(c), np.uint32(n - 1 - c)


@functools.cache
def rowcol_scaler(nacc, halves):
    """``scale_tile(acc, acc2, sa, sb, r, col0, lane, m, n)``: multiply a consumer thread's
    accumulators (``acc``; ``acc2`` its second m64 half's when ``halves`` = 2, 64 rows below)
    by ``sa[row, 0] * sb[col, 0]``; ``r`` is :func:`thread_row`."""
    TILES = nacc // 4           # n8 tiles: accumulators 4t..4t+3 are rows (r, r + 8) x 2 columns
    BATCH = 16                  # (n8 tiles whose loads ptxas may hoist together)

    @inline_device
    def scale_n8(acc, t, fa0, fa1, fb0, fb1):
        acc[4 * t] *= fa0 * fb0
        acc[4 * t + 1] *= fa0 * fb1
        acc[4 * t + 2] *= fa1 * fb0
        acc[4 * t + 3] *= fa1 * fb1

    @inline_device
    def scale_half(acc, sa, sb, r, col0, lane, m, n):
        fa0 = sa[min(r, m - 1), 0]
        fa1 = sa[min(r + 8, m - 1), 0]
        c, last = col_index(col0, lane, n)
        for t in range(TILES):
            if t == BATCH:
                # (in two batches with a warp sync between, which ptxas schedules the loads
                # around: all 64 at once left a 128 x 256 tile's consumer 8 bytes short of
                # registers)
                cuda.syncwarp()
            scale_n8(acc, t, fa0, fa1, sb[c + min(np.uint32(8 * t), last), 0],
                     sb[c + min(np.uint32(8 * t + 1), last), 0])

    @inline_device
    def scale_tile(acc, acc2, sa, sb, r, col0, lane, m, n):
        scale_half(acc, sa, sb, r, col0, lane, m, n)
        if halves == 2:
            scale_half(acc2, sa, sb, r + WG_ROWS, col0, lane, m, n)

    return scale_tile


@functools.cache
def rowcol_packer(nacc, out_kind):
    """``pack_tile(c16, acc, sa, sb, r, col0, lane, m, n, alpha)``: the overlapped epilogue's
    packing of ``alpha * sa[row, 0] * sb[col, 0] * acc`` into 16-bit pairs (word ``w`` holds
    accumulators ``2w, 2w + 1``), one n8 tile's column scales at a time."""
    pack = warp.pack_f16x2 if out_kind == "f16" else warp.pack_bf16x2

    @inline_device
    def pack_tile(c16, acc, sa, sb, r, col0, lane, m, n, alpha):
        fa0 = alpha * sa[min(r, m - 1), 0]
        fa1 = alpha * sa[min(r + 8, m - 1), 0]
        c, last = col_index(col0, lane, n)
        for t in range(nacc // 4):
            fb0 = sb[c + min(np.uint32(8 * t), last), 0]
            fb1 = sb[c + min(np.uint32(8 * t + 1), last), 0]
            c16[2 * t] = pack(acc[4 * t] * (fa0 * fb0), acc[4 * t + 1] * (fa0 * fb1))
            c16[2 * t + 1] = pack(acc[4 * t + 2] * (fa1 * fb0), acc[4 * t + 3] * (fa1 * fb1))

    return pack_tile


def _stage_scales(src, dst, m):
    # dst[j, r] = src[min(r, m - 1), j]: block scales (m, kb), any strides, K block by row (by
    # column for B's, given transposed); rows past m repeat the last (never read for C).
    r = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if r < dst.shape[1]:
        for j in range(cuda.blockIdx.y, dst.shape[0], cuda.gridDim.y):
            dst[j, r] = src[min(r, m - 1), j]


STAGE_THREADS = 256


@functools.cache
def stage_scales():
    """The :class:`~numba_tma.launch.DirectKernel` ``(src, dst, m)`` that copies block scales
    ``src`` (m, kb; any strides) into ``dst`` (kb, m'), whole 16 bytes per K block: the order
    the producer bulk-copies A's from (and, given B's ``(nb, kb)`` transposed, B's), for a
    ``scale_a`` or ``scale_b`` of another layout."""
    from ...launch import DirectKernel

    return DirectKernel(cuda.jit(_stage_scales), "void(float32[:, :], float32[:, ::1], int64)",
                        key="stage_scales")


def stage_grid(rows, kb):
    """``(grid, block)`` of :func:`stage_scales` for ``rows`` x ``kb`` scales."""
    return ((rows + STAGE_THREADS - 1) // STAGE_THREADS, min(kb, 65535), 1), (STAGE_THREADS, 1, 1)


@functools.cache
def _promoter(nacc, first):
    """``promote(acc, part, a0, a1, b0, b1)``: ``acc[i] += part[i]`` times its row's A scale
    (``a0``; ``a1`` for accumulators ``i & 2``, the row 8 below) and its column's B scale
    (``b0`` for the accumulators before ``first``, ``b1`` from there on)."""
    @inline_device
    def promote(acc, part, a0, a1, b0, b1):
        f00 = a0 * b0
        f10 = a1 * b0
        f01 = a0 * b1
        f11 = a1 * b1
        for i in range(first):
            if i & 2:
                acc[i] += f10 * part[i]
            else:
                acc[i] += f00 * part[i]
        for i in range(first, nacc):
            if i & 2:
                acc[i] += f11 * part[i]
            else:
                acc[i] += f01 * part[i]
    return promote


@functools.cache
def slot_releaser(ring, scaled):
    """``release(empty, s, lane)``: a consumer thread's part in giving ``ring``'s slot ``s``
    back. With block scales in the slot (``scaled``) every lane arrives, its own reads of them
    ordered before its arrival; else lane 0 for its warp."""
    consumer_release = ring.consumer_release

    @inline_device
    def release(empty, s, lane):
        if scaled or lane == 0:
            consumer_release(empty, s)

    return release


@functools.cache
def _slot_parts(ring, scaled):
    """``(scales, release)`` of a promoting main loop: ``scales(rows, s, lr, kt)``, slice
    ``kt``'s scales in slot ``s``, ``(a0, a1, b0, b1)``: A's of the thread's rows ``lr`` and
    ``lr + 8``, B's of the tile's N block and (128 x 192 tiles) of the next (ones without
    ``scaled``); ``release``: :func:`slot_releaser`'s."""

    @inline_device
    def scales(rows, s, lr, kt):
        if scaled:
            a = tail(rows, s * SLOT_SCALES + lr)
            b = tail(rows, s * SLOT_SCALES + SCALE_ROWS + (kt & (B_RUN - 1)))
            return a[0], a[8], b[0], b[B_RUN]
        one = np.float32(1)
        return one, one, one, one

    return scales, slot_releaser(ring, scaled)


def _loop_parts(parts, ring, scaled):
    # What a promoting main loop takes from the wgmma parts (one m64 half per consumer) and the
    # ring, and its slot's scales and release.
    assert parts.HALVES == 1
    return ((parts.NACC, zeroing(parts.NACC), parts.mma_issue, ring.consumer_wait, ring.next_slot)
            + _slot_parts(ring, scaled))


@functools.cache
def promoting_mainloop(parts, ring, scaled):
    """Two-level accumulation: ``mma_tile(acc, part, part2, tiles, full, empty, c, lane, kt0,
    kt1, s, passes, rows, lr)``, a consumer's product over K slices ``kt0..kt1`` of one
    tile (one m64 half). Each slice's wgmma group writes a fresh partial product into ``part``
    or ``part2`` in turn, and is added into the fp32 ``acc`` while the next slice's group runs
    (``wait_group(1)``): times its block scales with ``scaled``, else as it is. The scales are
    in the slice's slot (:func:`.ring.scale_rows`): the thread's two rows' of A at ``lr`` and
    ``lr + 8``, B's at ``SCALE_ROWS + kt % 4``; each lane reads its own under the slice's
    wgmmas, and every lane releases the slot (its reads ordered before its own arrival) once
    the slot's group retired.
    Returns the ring position.
    """
    (NACC, zero, mma_issue, consumer_wait, next_slot, slice_scales,
     release) = _loop_parts(parts, ring, scaled)

    promote_scaled = _promoter(NACC, NACC)

    @inline_device
    def promote(acc, part, f):
        # (one N block: B's first scale for every column; without scales f is ones, and each
        # multiply folds away: an FADD per accumulator)
        promote_scaled(acc, part, f[0], f[1], f[2], f[2])

    @inline_device
    def retire(acc, older, empty, lane, ps, f, pending):
        # Wait until only `pending` groups run: older's has retired; give its slot back (with
        # scales, every lane: its own reads of them come before its arrival) and add it in,
        # times its scales f.
        wgmma.wait_group(pending)
        wgmma.fence_operand(older, NACC)
        release(empty, ps, lane)
        promote(acc, older, f)

    @inline_device
    def step(acc, older, newer, tiles, full, empty, c, lane, s, passes, ps, f, rows, lr, kt):
        # Issue slice kt (slot s) into newer and read its scales; promote the slice before it
        # (slot ps, in older, scales f) under its wgmmas. Returns the slice's scales.
        consumer_wait(full, s, passes)
        mma_issue(newer, tiles, s, c, True)
        g = slice_scales(rows, s, lr, kt)
        retire(acc, older, empty, lane, ps, f, 1)
        return g

    @inline_device
    def mma_tile(acc, part, part2, tiles, full, empty, c, lane, kt0, kt1, s, passes, rows, lr):
        zero(acc)
        if kt0 >= kt1:
            return s, passes
        consumer_wait(full, s, passes)
        mma_issue(part, tiles, s, c, True)
        f = slice_scales(rows, s, lr, kt0)
        ps = s
        s, passes = next_slot(s, passes)
        kt = kt0 + 1
        # two slices a trip, so that each buffer is named by constants (registers)
        while kt + 1 < kt1:
            f = step(acc, part, part2, tiles, full, empty, c, lane, s, passes, ps, f, rows, lr,
                     kt)
            ps = s
            s, passes = next_slot(s, passes)
            f = step(acc, part2, part, tiles, full, empty, c, lane, s, passes, ps, f, rows, lr,
                     kt + 1)
            ps = s
            s, passes = next_slot(s, passes)
            kt += 2
        if kt < kt1:
            f = step(acc, part, part2, tiles, full, empty, c, lane, s, passes, ps, f, rows, lr,
                     kt)
            ps = s
            s, passes = next_slot(s, passes)
            retire(acc, part2, empty, lane, ps, f, 0)
        else:
            retire(acc, part, empty, lane, ps, f, 0)
        return s, passes

    return mma_tile


@functools.cache
def serial_promoting_mainloop(parts, ring, scaled):
    """The two-level accumulation of 128 x 192 tiles, whose 96 accumulators per thread leave
    room for one slice's partial product, not two: ``mma_tile(acc, part, tiles, full, empty, c,
    lane, kt0, kt1, s, passes, rows, lr, split)``, a consumer's product over K slices
    ``kt0..kt1`` of one tile (one m64 half), in DeepGEMM's order: issue a slice's wgmma group
    into ``part``, read its scales from the slot under it, wait for it, release the slot (every
    lane, after its reads), add it into ``acc``. The other consumer's wgmmas keep the tensor
    cores busy meanwhile. A tile's 192 columns span two N blocks of B's scales, whose second
    starts at column ``split`` (64 or 128; n8 tiles before it take B's first scale, the rest the
    second): B's scales are at ``SCALE_ROWS + kt % 4`` and ``SCALE_ROWS + 4 + kt % 4`` of the
    slot (:func:`.ring.scale_rows`). Returns the ring position.
    """
    (NACC, zero, mma_issue, consumer_wait, next_slot, slot_scales,
     release) = _loop_parts(parts, ring, scaled)

    # (accumulators 4t..4t+3 are n8 tile t's: a split at column 64 or 128 is accumulator 32 or 64)
    promote_64, promote_128 = _promoter(NACC, 64 // 8 * 4), _promoter(NACC, 128 // 8 * 4)

    @inline_device
    def mma_tile(acc, part, tiles, full, empty, c, lane, kt0, kt1, s, passes, rows, lr, split):
        zero(acc)
        for kt in range(kt0, kt1):
            consumer_wait(full, s, passes)
            mma_issue(part, tiles, s, c, True)
            a0, a1, b0, b1 = slot_scales(rows, s, lr, kt)
            wgmma.wait_group(0)
            wgmma.fence_operand(part, NACC)
            release(empty, s, lane)
            if split == 64:
                promote_64(acc, part, a0, a1, b0, b1)
            else:
                promote_128(acc, part, a0, a1, b0, b1)
            s, passes = next_slot(s, passes)
        return s, passes

    return mma_tile
