"""A consumer warpgroup's main loop: ``wgmma.mma_async`` on the ring's slots.

Operands are read straight from the swizzled tiles through descriptors: K-major slices advance
32 bytes per k16 step inside the 128-byte swizzled rows; M/N-major ones (read with the
transpose immediates) advance 16 rows. The descriptors are built from a warp-uniform warpgroup
index (``wgmma.warpgroup_index``) and ring slot (read from lane 0), so they live in the uniform
registers ``HGMMA`` reads and a group's ``HGMMA``s issue back to back (built per thread, each
would cross over with ``R2UR`` mid-group).

Each consumer issues the 4 k16 wgmmas of a slot (per m64 half it holds), commits them as one
group, and waits until at most ``pipe`` groups are in flight: with ``pipe = 1`` the tensor
cores always have this warpgroup's next group queued while the slot before is released; with
``pipe = 0`` the slot is released at once, and the other consumer keeps the tensor cores fed.
"""

import functools

import numpy as np

from ..._frontend import cuda

from ..._bridge import inline_device
from ... import mbarrier, wgmma
from .config import BM, SWIZZLE_ALIGN, WG_ROWS, is_fp8
from .ring import ATOM_BYTES, BK, SPAN, Parts

__all__ = ["wgmma_parts", "tile_mainloop"]

_MMA = {"f16": wgmma.mma_f32_f16, "bf16": wgmma.mma_f32_bf16}
def slice_k(in_kind):
    """K elements per ring slice: one 128-byte row of the operand's elements."""
    return 128 if is_fp8(in_kind) else BK


@functools.cache
def _fp8_mma(in_kind):
    # The fp8 wgmma in the 16-bit ones' calling form (fp8 has no transpose immediates).
    fn = getattr(wgmma, "mma_f32_" + in_kind)

    @inline_device
    def mma(d, a, b_desc, n, scale_d, trans_a, trans_b):
        fn(d, a, b_desc, n, scale_d)
    return mma


@functools.cache        # one set of device functions for every kernel that shares them
def wgmma_parts(bn, pipe, a_kmajor, b_kmajor, in_kind, tm=BM, whole=False):
    """A consumer's wgmmas on one slot of a ``tm x bn`` tile's ring. ``tm``: rows of C per
    block, 128 (each consumer one m64 half) or 256 (two, each with its own accumulators);
    ``whole``: each consumer takes all ``tm`` rows (a ping-pong consumer its own tile, or a
    block's only consumer). ``in_kind``: "f16", "bf16" (k16 steps) or an fp8 pair of
    :data:`.config.FP8_KINDS` (k32 steps, K-major operands only): either way a step advances 32
    bytes along a K-major row, 4 steps per slot. Returns a namespace: ``NACC`` (f32 accumulators per
    m64 half per thread), ``HALVES`` (m64 halves per consumer), ``STAGE_BYTES``, and the device
    functions ``mma_slot``, ``mma_issue`` (``fresh``: the group's first step overwrites the
    accumulators rather than adding to them), ``mma_retire``, ``fence_accumulators``."""
    A_BYTES = tm * SPAN
    STAGE_BYTES = A_BYTES + bn * SPAN
    NACC = bn // 2
    # m64 halves per consumer: all tm rows' (whole), or its share of two consumers'
    HALVES = tm // WG_ROWS if whole else tm // BM
    if is_fp8(in_kind):
        if not (a_kmajor and b_kmajor):
            raise ValueError(f"{in_kind}: fp8 wgmma reads both operands K-major (A stored M x K, "
                             f"B stored N x K)")
        mma = _fp8_mma(in_kind)
    else:
        mma = _MMA[in_kind]
    TA = not a_kmajor
    TB = not b_kmajor
    # Descriptor strides and per-k16 advance (bytes) of each operand (wgmma.descriptor's table).
    A_LBO, A_SBO = (16, SWIZZLE_ALIGN) if a_kmajor else (ATOM_BYTES, SWIZZLE_ALIGN)
    B_LBO, B_SBO = (16, SWIZZLE_ALIGN) if b_kmajor else (ATOM_BYTES, SWIZZLE_ALIGN)
    A_KSTEP = 32 if a_kmajor else 16 * SPAN
    B_KSTEP = 32 if b_kmajor else 16 * SPAN
    # Bytes from a slot's A rows to row r (a multiple of 64): K-major rows are 128 bytes; an
    # M-major slice is a run of 64-row boxes.
    A_ROW64 = WG_ROWS * SPAN if a_kmajor else ATOM_BYTES
    A_WG = 0 if whole else HALVES * A_ROW64     # consumer c's rows of the A slice

    @inline_device
    def slot_descriptors(tiles, s, c):
        # The descriptors of slot s's A rows for consumer c and of its B: slot 0's (the same
        # in every slot's loop, so built once, outside it) moved by s slots, one add each
        # rather than the descriptor's shifts and masks in 64 bits. s is read from lane 0: the
        # same in every lane, which ptxas cannot always prove of a ring index carried through
        # the persistent loop, and then it builds the descriptors per thread and moves each
        # into a UR register between the HGMMAs. (shfl_sync takes the uint32 slot as int32.)
        s = cuda.shfl_sync(0xFFFFFFFF, np.int32(s), 0)
        step = s * STAGE_BYTES
        return (wgmma.descriptor_advance(
                    wgmma.descriptor(tiles, c * A_WG, A_LBO, A_SBO, 128), step),
                wgmma.descriptor_advance(
                    wgmma.descriptor(tiles, A_BYTES, B_LBO, B_SBO, 128), step))

    @inline_device
    def fence_accumulators(acc, acc2):
        # The accumulators stay in registers across the asynchronous wgmmas (warpgroup_fence_
        # operand): every half's.
        wgmma.fence_operand(acc, NACC)
        if HALVES == 2:
            wgmma.fence_operand(acc2, NACC)

    @inline_device
    def mma_slot(acc, acc2, tiles, s, c):
        # Consumer warpgroup c's k16 wgmmas on slot s (4, or 4 per m64 half: acc2 holds the
        # second half's rows), committed as one group; returns once at most pipe groups are in
        # flight: the group before it (pipe = 1) or this one (pipe = 0) has retired, and its
        # slot may be released.
        a_desc, b_desc = slot_descriptors(tiles, s, c)
        wgmma.fence()
        for kk in range(BK // 16):
            b_k = wgmma.descriptor_advance(b_desc, kk * B_KSTEP)
            mma(acc, wgmma.descriptor_advance(a_desc, kk * A_KSTEP), b_k, bn, 1, TA, TB)
            if HALVES == 2:
                mma(acc2, wgmma.descriptor_advance(a_desc, A_ROW64 + kk * A_KSTEP), b_k, bn,
                    1, TA, TB)
        wgmma.commit_group()
        fence_accumulators(acc, acc2)
        wgmma.wait_group(pipe)
        fence_accumulators(acc, acc2)

    @inline_device
    def mma_issue(acc, tiles, s, c, fresh):
        # mma_slot's wgmmas and commit without the wait (one m64 half): the overlapped
        # epilogue stores a box of the previous tile before the wait, the promoting main loop
        # adds the slice before into its accumulators.
        a_desc, b_desc = slot_descriptors(tiles, s, c)
        wgmma.fence()
        for kk in range(BK // 16):
            b_k = wgmma.descriptor_advance(b_desc, kk * B_KSTEP)
            mma(acc, wgmma.descriptor_advance(a_desc, kk * A_KSTEP), b_k, bn,
                0 if fresh and kk == 0 else 1, TA, TB)
        wgmma.commit_group()
        wgmma.fence_operand(acc, NACC)

    @inline_device
    def mma_retire(acc):
        # ... and its wait: the group has retired, the slot may be released.
        wgmma.wait_group(0)
        wgmma.fence_operand(acc, NACC)

    return Parts(NACC=NACC, HALVES=HALVES, STAGE_BYTES=STAGE_BYTES, mma_slot=mma_slot,
                 mma_issue=mma_issue, mma_retire=mma_retire,
                 fence_accumulators=fence_accumulators)


@functools.cache
def zeroing(n):
    """``zero(acc)``: ``acc[0..n-1] = 0`` (written out where the front end would keep the loop
    and with it a dynamic index: :mod:`numba_tma._unroll`)."""
    @inline_device
    def zero(acc):
        for i in range(n):
            acc[i] = 0.0

    return zero


@functools.cache
def tile_mainloop(parts, ring, pipe, turns=False):
    """``mma_tile(acc, acc2, tiles, full, empty, c, lane, kt0, kt1, s, passes, turn, lead)``:
    a persistent consumer's product over K slices ``kt0..kt1`` of one tile into ``acc`` (and
    ``acc2``, the second m64 half's rows when ``parts.HALVES = 2``; zeros when there are no
    slices), each slot given back once the wgmma group reading it has retired; returns the ring
    position. ``parts``: :func:`wgmma_parts`; ``ring``: :func:`.ring.ring`. With ``turns`` (the
    ping-pong ladder), the ``lead`` thread arrives on ``turn`` once the tile's last slot is in
    (at once if there is none): the other consumer's turn."""
    NACC, HALVES = parts.NACC, parts.HALVES
    mma_slot, fence_accumulators = parts.mma_slot, parts.fence_accumulators
    consumer_wait, consumer_release = ring.consumer_wait, ring.consumer_release
    next_slot = ring.next_slot
    zero = zeroing(NACC)

    @inline_device
    def mma_tile(acc, acc2, tiles, full, empty, c, lane, kt0, kt1, s, passes, turn, lead):
        zero(acc)
        if HALVES == 2:
            zero(acc2)
        fence_accumulators(acc, acc2)
        prev = 0
        if turns and kt1 == kt0 and lead:
            mbarrier.arrive(turn)       # (no slot to wait for: the other's turn at once)
        for kt in range(kt0, kt1):
            consumer_wait(full, s, passes)
            if turns and kt == kt1 - 1 and lead:
                mbarrier.arrive(turn)   # this tile's last slot is in: the other's turn
            mma_slot(acc, acc2, tiles, s, c)
            if pipe == 0:       # this slot's group is done: give the slot back
                if lane == 0:
                    consumer_release(empty, s)
            else:               # the group of the previous slot is done: give that slot back
                if kt > kt0 and lane == 0:
                    consumer_release(empty, prev)
                prev = s
            s, passes = next_slot(s, passes)
        wgmma.wait_group(0)
        fence_accumulators(acc, acc2)
        if pipe and kt1 > kt0 and lane == 0:
            consumer_release(empty, prev)
        return s, passes

    return mma_tile
