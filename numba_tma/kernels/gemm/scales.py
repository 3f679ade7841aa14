"""fp8 scales: what turns an fp8 GEMM's accumulators into ``alpha * (sa * A) @ (sb * B)``.

The kernel takes the scales as two float32 2-D arrays ``sa``, ``sb`` (any strides; a stride of
0 broadcasts one value), read by the consumers from global memory, in one of three modes
(``KernelSpec.scale``):

- ``"tensor"``: ``sa[0, 0] * sb[0, 0]`` folds into ``alpha`` once per consumer; the main loop
  and epilogue are the 16-bit kernels' (the wgmma accumulators carry the whole K sum).
- ``"row"``: ``sa[r, 0]`` per row of A (C) and ``sb[c, 0]`` per column of B (C) multiply the
  finished accumulators before the epilogue (:func:`rowcol_scaler`).
- ``"block"``: DeepSeek's recipe, always promoted (below). ``sa[r, kb]`` per row of A and
  128-deep K block ``kb``, ``sb[nb, kb]`` per 128 x 128 block of B (N block ``nb``). A ring
  slice is exactly one K block (128 fp8 elements), so each slice's wgmmas write a fresh partial
  product into registers of their own, which the consumer adds into the fp32 accumulators times
  ``sa * sb`` (:func:`promoting_mainloop`): the two-level accumulation that keeps a long K's sum
  at fp32 precision. A tile's columns lie in one N block (``bn`` divides 128), so B's scale of
  a slice is one number for the whole block: the producer copies it into the slot's word beside
  the tiles (:func:`.ring.slot_words`), and lane 0 of each consumer warp reads it from there
  and shuffles it to the others. (Loaded by each consumer from global memory, its address is
  warp-uniform, and ptxas moved it into a uniform register right after the load, stalling
  every slice on global memory's latency.)

Row and column indices past M or N are clamped to the last one: those rows and columns of C are
never stored, and the clamp keeps every load inside the scale arrays.
"""

import functools

import numpy as np
from numba import cuda

from ..._bridge import inline_device, tail
from ... import warp, wgmma
from .config import SLAB_ROWS, WG_ROWS

__all__ = ["SCALE_MODES", "BLOCK_K", "thread_row", "tensor_alpha", "rowcol_scaler",
           "rowcol_packer", "promoting_mainloop"]

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


@functools.cache
def rowcol_scaler(nacc, halves):
    """``scale_tile(acc, acc2, sa, sb, r, col0, lane, m, n)``: multiply a consumer thread's
    accumulators (``acc``; ``acc2`` its second m64 half's when ``halves`` = 2, 64 rows below)
    by ``sa[row, 0] * sb[col, 0]``; ``r`` is :func:`thread_row`."""
    TILES = nacc // 4           # n8 tiles: accumulators 4t..4t+3 are rows (r, r + 8) x 2 columns

    @inline_device
    def scale_half(acc, sa, sb, r, col0, lane, m, n):
        fa0 = sa[min(r, m - 1), 0]
        fa1 = sa[min(r + 8, m - 1), 0]
        c = col0 + 2 * (lane & 3)
        for t in range(TILES):
            fb0 = sb[min(c + 8 * t, n - 1), 0]
            fb1 = sb[min(c + 8 * t + 1, n - 1), 0]
            acc[4 * t] *= fa0 * fb0
            acc[4 * t + 1] *= fa0 * fb1
            acc[4 * t + 2] *= fa1 * fb0
            acc[4 * t + 3] *= fa1 * fb1

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
        c = col0 + 2 * (lane & 3)
        for t in range(nacc // 4):
            fb0 = sb[min(c + 8 * t, n - 1), 0]
            fb1 = sb[min(c + 8 * t + 1, n - 1), 0]
            c16[2 * t] = pack(acc[4 * t] * (fa0 * fb0), acc[4 * t + 1] * (fa0 * fb1))
            c16[2 * t + 1] = pack(acc[4 * t + 2] * (fa1 * fb0), acc[4 * t + 3] * (fa1 * fb1))

    return pack_tile


@inline_device
def _scale_rows(sa, ra, rb):
    # The rows of A's block scales a thread reads, as 1-D views: one multiply per load.
    return sa[ra], sa[rb]


@inline_device
def _no_scale_rows(sa, ra, rb):
    return sa, sa           # (None: the kernel takes no scales)


@functools.cache
def promoting_mainloop(parts, ring, scaled):
    """Two-level accumulation: ``mma_tile(acc, part, part2, tiles, full, empty, c, lane, kt0,
    kt1, s, passes, sa, words, ra, rb)``, a consumer's product over K slices ``kt0..kt1`` of
    one tile (one m64 half). Each slice's wgmma group writes a fresh partial product into
    ``part`` or ``part2`` in turn, and is added into the fp32 ``acc`` while the next slice's
    group runs (``wait_group(1)``): times ``sa[ra or rb, kt] * words[s]`` with block scales
    (``scaled``; ``ra``, ``rb``: the thread's two rows, clamped to M; ``words[s]``: B's scale
    of the slice in slot ``s``, :func:`.ring.slot_words`), else as it is. A slice's A scales
    load under the wgmmas of the slice before it (two slices before their use: a load from L2
    outlasts one slice), B's under its own; each slot is given back once its group retired.
    Returns the ring position.
    """
    NACC = parts.NACC
    assert parts.HALVES == 1
    rows_of = _scale_rows if scaled else _no_scale_rows
    mma_issue = parts.mma_issue
    consumer_wait, consumer_release = ring.consumer_wait, ring.consumer_release
    next_slot = ring.next_slot

    @inline_device
    def a_scales(rows, kt):
        # Slice kt's scales of A, rows r and r + 8 (an unsigned index: no negative-index
        # wraparound).
        if scaled:
            k = np.uint32(kt)
            return rows[0][k], rows[1][k]
        one = np.float32(1)
        return one, one

    @inline_device
    def slice_scales(a, words, s, lane):
        # A slice's scales: A's (a, loaded a slice earlier) and B's from its slot s's word,
        # read by lane 0 alone, the lane that releases the slot (its read is ordered before
        # the release; other lanes' reads would not be), and passed to the others.
        if scaled:
            b = np.float32(0)
            if lane == 0:
                b = tail(words, s)[0]
            return a[0], a[1], cuda.shfl_sync(0xFFFFFFFF, b, 0)
        return a[0], a[1], a[0]

    @inline_device
    def promote(acc, part, f):
        if scaled:
            f0 = f[0] * f[2]
            f1 = f[1] * f[2]
            for i in range(NACC):
                if i & 2:
                    acc[i] += f1 * part[i]
                else:
                    acc[i] += f0 * part[i]
        else:
            for i in range(NACC):
                acc[i] += part[i]

    @inline_device
    def retire(acc, older, empty, lane, ps, f, pending):
        # Wait until only `pending` groups run: older's has retired; give its slot back and
        # add it in, times its scales f.
        wgmma.wait_group(pending)
        wgmma.fence_operand(older, NACC)
        if lane == 0:
            consumer_release(empty, ps)
        promote(acc, older, f)

    @inline_device
    def step(acc, older, newer, tiles, full, empty, c, lane, s, passes, ps, kt, kt1, f, a, rows,
             words):
        # Issue slice kt (slot s) into newer, take its scales (A's, a, loaded under the slice
        # before) and load the next slice's A scales; promote the slice before it (slot ps, in
        # older, scales f) under its wgmmas. Returns slice kt's scales and the next's of A.
        consumer_wait(full, s, passes)
        mma_issue(newer, tiles, s, c, True)
        g = slice_scales(a, words, s, lane)
        a = a_scales(rows, min(kt + 1, kt1 - 1))
        retire(acc, older, empty, lane, ps, f, 1)
        return g, a

    @inline_device
    def mma_tile(acc, part, part2, tiles, full, empty, c, lane, kt0, kt1, s, passes, sa, words,
                 ra, rb):
        for i in range(NACC):
            acc[i] = 0.0
        if kt0 >= kt1:
            return s, passes
        rows = rows_of(sa, ra, rb)
        a = a_scales(rows, kt0)
        consumer_wait(full, s, passes)
        mma_issue(part, tiles, s, c, True)
        f = slice_scales(a, words, s, lane)
        a = a_scales(rows, min(kt0 + 1, kt1 - 1))
        ps = s
        s, passes = next_slot(s, passes)
        kt = kt0 + 1
        # two slices a trip, so that each buffer is named by constants (registers)
        while kt + 1 < kt1:
            f, a = step(acc, part, part2, tiles, full, empty, c, lane, s, passes, ps, kt, kt1, f,
                        a, rows, words)
            ps = s
            s, passes = next_slot(s, passes)
            f, a = step(acc, part2, part, tiles, full, empty, c, lane, s, passes, ps, kt + 1, kt1,
                        f, a, rows, words)
            ps = s
            s, passes = next_slot(s, passes)
            kt += 2
        if kt < kt1:
            f, a = step(acc, part, part2, tiles, full, empty, c, lane, s, passes, ps, kt, kt1, f,
                        a, rows, words)
            ps = s
            s, passes = next_slot(s, passes)
            retire(acc, part2, empty, lane, ps, f, 0)
        else:
            retire(acc, part, empty, lane, ps, f, 0)
        return s, passes

    return mma_tile
