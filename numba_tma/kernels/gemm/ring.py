"""The TMA/mbarrier ring that feeds a GEMM's tensor cores, shared by every kernel of the package.

A slot of the ring holds ``bm`` rows of A then ``bn`` rows of B, 64 K-elements (128 bytes) each,
as 128B-swizzled TMA boxes: a K-major operand (A stored M x K, B stored N x K) is one box of
``rows x 64``; an M/N-major one (stored K x M or K x N) is ``rows / 64`` boxes of 64 (K) x 64,
8 KiB each. In a cluster of ``cm`` CTAs along M, CTA ``rank`` loads rows
``[rank, rank + 1) * bn / cm`` of B and multicasts them to every CTA of the cluster; in a
cluster of ``cn`` CTAs along N, rows ``[rank, rank + 1) * bm / cn`` of A likewise. Each CTA's
barrier expects the whole slot.

Each slot has two mbarriers: ``full[s]`` completes on the slot's transaction bytes (one arrival,
the producer's ``arrive_expect_tx``), ``empty[s]`` when every consumer warp that reads the slot
(in every CTA the slot is multicast into) has released it. The protocol, in CuTe's words
(``PipelineTmaAsync``), is :func:`ring`'s functions: ``producer_acquire`` (wait until the
slot's last contents were released), ``producer_commit`` (arm ``full`` and issue the loads),
``consumer_wait``, ``consumer_release``, and ``producer_tail`` (a cluster's producer waits until
every slot it filled was released, so no peer's arrival lands after it exits). A position in
the ring is ``(s, passes)``: the slot and how many times the ring has wrapped (its parity is
the phase a wait expects), both uint32 from ``(0, 0)``.

The dynamic shared memory starts with the barriers (:func:`shared_views`): the ``S`` full and
``S`` empty slot barriers, one per consumer warp for C's loads (``cbar``), then a variant's own;
a block-scaled fp8 GEMM's then has, from the next 16-byte boundary, ``SLOT_SCALES`` float32 per
slot (:func:`scale_rows`): A's scales of the slice's rows and the 16 bytes of B's that hold the
slice's (of two N blocks' for a 128 x 192 tile), which its producer bulk-copies beside the
tiles, completing on the slot's ``full`` barrier (the consumers read the scales from shared
memory, not through loads in their loop).
The ring starts at the first 1024-byte boundary after them (the 128B swizzle's period).
"""

import functools

import numpy as np

from ..._frontend import cuda
from ..._bridge import inline_device, tail
from ... import bulk, cluster, intmath, mbarrier, tma

__all__ = ["SPAN", "BK", "ATOM", "ATOM_BYTES", "SCALE_ROWS", "B_RUN", "SLOT_SCALES",
           "slice_loader", "slot_release", "shared_views", "scale_rows", "scale_rows_bytes",
           "scale_rows_end", "barrier_setup", "ring", "Parts"]

SPAN = 128                   # bytes in one 128B-swizzle row: 64 16-bit elements
BK = 64                      # K per slice: one swizzle row of a K-major operand
ATOM = 64                    # elements in one swizzled row: a K x 64 box of an M/N-major operand
ATOM_BYTES = BK * SPAN       # such a box: 8 KiB
SCALE_ROWS = 128             # A's scales per slot: the rows of a block-scaled tile (bm)
B_RUN = 4                    # B's scales per 16-byte copy: one N block's K blocks kt - kt % 4 ..
SLOT_SCALES = SCALE_ROWS + 2 * B_RUN  # ... then the 16 bytes of B's that hold the slice's, of
#                                       the tile's N block and (128 x 192 tiles) of the next


@functools.cache
def _box_loader(ctas):
    """``load(dst, desc, coords, bar)``: a TMA tile load into this CTA (``ctas`` 1), or into
    every CTA of a cluster of ``ctas`` (multicast)."""
    if ctas == 1:
        return tma.load
    mask = (1 << ctas) - 1

    @inline_device
    def load(dst, desc, coords, bar):
        tma.load_multicast(dst, desc, coords, bar, mask)
    return load


@functools.cache        # one loader for every kernel of the same slot geometry
def slice_loader(bm, bn, cm, a_kmajor, b_kmajor, cn=1, bk=BK):
    """``load(a_map, b_map, tiles, bar, off, kt, row0, col0, rank)``: arm ``bar`` for the slot's
    bytes and issue the loads of K slice ``kt`` of A rows ``row0..`` and B rows (N) ``col0..``
    into the slot at byte ``off`` of ``tiles``. Issued by one thread. ``bk``: K elements per
    slice, one 128-byte row (64 of 16-bit operands, 128 of fp8 ones, which are K-major)."""
    a_bytes = bm * SPAN
    stage_bytes = a_bytes + bn * SPAN
    a_part_rows = bm // cn
    a_part_boxes = bm // ATOM // cn
    b_part_rows = bn // cm
    b_part_boxes = bn // ATOM // cm
    load_a, load_b = _box_loader(cn), _box_loader(cm)     # a pair along N shares A, along M B

    @inline_device
    def load(a_map, b_map, tiles, bar, off, kt, row0, col0, rank):
        mbarrier.arrive_expect_tx(bar, stage_bytes)
        kx = kt * bk
        # (with cn > 1, rank is the CTA's place along N: its part of A; cm and cn are not both
        # above 1)
        a_rank = rank if cn > 1 else 0
        if a_kmajor:
            r0 = a_rank * a_part_rows
            load_a(tail(tiles, off + r0 * SPAN), a_map, (row0 + r0, kx), bar)
        else:
            for q in range(a_part_boxes):
                j = a_rank * a_part_boxes + q
                load_a(tail(tiles, off + j * ATOM_BYTES), a_map, (kx, row0 + j * ATOM), bar)
        boff = off + a_bytes
        b_rank = rank if cm > 1 else 0
        if b_kmajor:
            r0 = b_rank * b_part_rows
            load_b(tail(tiles, boff + r0 * SPAN), b_map, (col0 + r0, kx), bar)
        else:
            for q in range(b_part_boxes):
                j = b_rank * b_part_boxes + q
                load_b(tail(tiles, boff + j * ATOM_BYTES), b_map, (kx, col0 + j * ATOM), bar)

    return load


@functools.cache        # one set of device functions for every kernel that shares them
def slot_release(ctas):
    """``release(bar)``: a consumer warp gives a ring slot back through its empty barrier
    ``bar``; in a cluster of ``ctas`` CTAs that multicast into the slot, to every CTA's
    producer (each waits for all of them before it loads the slot again)."""
    @inline_device
    def release(bar):
        if ctas == 1:
            mbarrier.arrive(bar)
        else:
            for r in range(ctas):
                cluster.mbarrier_arrive_cta(bar, r)
    return release


@functools.cache
def shared_views(stages, c_bars, extra_bars=0):
    """``views()``: the dynamic shared memory as bytes and floats, and its barriers
    ``(dyn8, dynf, full, empty, cbar, extra)``: ``stages`` full and ``stages`` empty slot
    barriers, ``c_bars`` for C's loads, ``extra_bars`` of a variant's own. (numba returns views
    made in a device function only inside a tuple.)"""
    S = stages
    NBARS = 2 * S + c_bars

    @inline_device
    def views():
        dyn64 = cuda.shared.array(0, np.uint64)
        dyn8 = cuda.shared.array(0, np.uint8)
        dynf = cuda.shared.array(0, np.float32)
        return (dyn8, dynf, dyn64[:S], dyn64[S:2 * S], dyn64[2 * S:NBARS],
                dyn64[NBARS:NBARS + extra_bars])
    return views


def _scale_rows_offset(stages, c_bars, extra_bars):
    # (bytes: after the barriers, at a 16-byte boundary, a bulk copy's)
    return (8 * (2 * stages + c_bars + extra_bars) + 15) // 16 * 16


def scale_rows_bytes(stages):
    """Bytes :func:`scale_rows` takes after the barriers, at most (with the boundary's
    padding)."""
    return 8 + 4 * SLOT_SCALES * stages


def scale_rows_end(stages, c_bars, extra_bars=0):
    """The byte offset where :func:`scale_rows` ends (the barrier area's size with them)."""
    return _scale_rows_offset(stages, c_bars, extra_bars) + 4 * SLOT_SCALES * stages


@functools.cache
def scale_rows(stages, c_bars, extra_bars=0):
    """``rows()``: ``(r,)``, ``r`` the ``stages * SLOT_SCALES`` float32 after the barriers
    (from a 16-byte boundary): slot ``s``'s A scales at ``r[s * SLOT_SCALES:]``, one per row of
    the tile, then the four B scales of K blocks ``kt & ~3 ..`` (of slice ``kt`` in the slot)
    at ``r[s * SLOT_SCALES + SCALE_ROWS:]``, and (128 x 192 tiles) the next N block's four."""
    first = _scale_rows_offset(stages, c_bars, extra_bars) // 4
    count = SLOT_SCALES * stages

    @inline_device
    def rows():
        dynf = cuda.shared.array(0, np.float32)
        return (dynf[first:first + count],)
    return rows


@functools.cache
def barrier_setup(stages, empty_arrivals, c_bars):
    """``init(full, empty, cbar)``: one thread initialises the ring's barriers (``full``: one
    arrival and the transaction bytes; ``empty``: ``empty_arrivals``) and C's (one arrival
    each). The caller adds its own, then ``mbarrier.fence_init()``."""
    @inline_device
    def init(full, empty, cbar):
        for s in range(stages):
            mbarrier.init(full[s:], 1)
            mbarrier.init(empty[s:], empty_arrivals)
        for w in range(c_bars):
            mbarrier.init(cbar[w:], 1)
    return init


@functools.cache        # one set of device functions for every kernel that shares them
def ring(stages, stage_bytes, issue_slot, ctas, two_b=False):
    """The ring protocol of ``stages`` slots of ``stage_bytes``, filled by ``issue_slot`` (a
    :func:`slice_loader`) and released to the producers of ``ctas`` CTAs; see the module's
    docstring. ``two_b``: a block-scaled tile spans two N blocks of B's scales (128 x 192
    tiles). Returns a namespace of device functions."""
    S = stages
    release = slot_release(ctas)

    @inline_device
    def next_slot(s, passes):
        # The ring position after slot s, in 32 bits (numba's 64-bit counters cost a carry and
        # a high-word compare each: per slice, in the producer's loop and the consumers').
        s = np.uint32(s + 1)
        if s == S:
            s = np.uint32(0)
            passes = np.uint32(passes + 1)
        return s, passes

    @inline_device
    def skip_slots(s, passes, count):
        # The ring position count slots on.
        t = s + count
        laps = intmath.div_u32(t, S)
        return np.uint32(t - laps * S), np.uint32(passes + laps)

    @inline_device
    def producer_acquire(empty, s, passes):
        # The slot's contents of the pass before were released by every consumer warp. (On
        # the first pass the wait is for the phase before the barrier's first, which counts as
        # complete: it returns at once, with no branch on the pass.)
        mbarrier.wait(tail(empty, s), (passes & 1) ^ 1)

    @inline_device
    def producer_commit(a_map, b_map, tiles, full, s, kt, row0, col0, rank):
        # K slice kt of the tile at (row0, col0) into slot s, completing full[s].
        issue_slot(a_map, b_map, tiles, tail(full, s), s * stage_bytes, kt, row0, col0, rank)

    @inline_device
    def consumer_wait(full, s, passes):
        mbarrier.wait(tail(full, s), passes & 1)

    @inline_device
    def consumer_release(empty, s):
        release(tail(empty, s))

    @inline_device
    def load_tile(a_map, b_map, tiles, full, empty, row0, col0, rank, kt0, kt1, s, passes):
        # Producer: K slices kt0..kt1 of one tile into the ring; returns the ring position.
        kt, end = np.uint32(kt0), np.uint32(kt1)
        while kt < end:
            producer_acquire(empty, s, passes)
            producer_commit(a_map, b_map, tiles, full, s, kt, row0, col0, rank)
            kt = np.uint32(kt + 1)
            s, passes = next_slot(s, passes)
        return s, passes

    @inline_device
    def load_tile_scaled(a_map, b_map, tiles, full, empty, row0, col0, rank, kt0, kt1, s, passes,
                         rows, b_scales, b_scales2, a_scales, row_bytes):
        # load_tile, each slice's block scales bulk-copied into its slot on the slot's full
        # barrier (whose phase then also waits for them): ``row_bytes`` (a multiple of 16) of
        # A's from a_scales[kt] (a column of the K-block-by-row scales: the tile's first row
        # of each K block) and the 16 bytes of b_scales (B's of the tile's N block, K blocks
        # contiguous) that hold b_scales[kt], and (two_b) of b_scales2 (the next N block's).
        # Each view is moved on by an add per slice rather than indexed by a multiply.
        a_scales = tail(a_scales, kt0)
        b_scales = tail(b_scales, kt0 - (kt0 & (B_RUN - 1)))
        b_scales2 = tail(b_scales2, kt0 - (kt0 & (B_RUN - 1)))
        b_bytes = 32 if two_b else 16
        kt, end = np.uint32(kt0), np.uint32(kt1)
        while kt < end:
            producer_acquire(empty, s, passes)
            bar = tail(full, s)
            slot = tail(rows, s * SLOT_SCALES)
            # (before the commit's arrive completes it)
            mbarrier.expect_tx(bar, row_bytes + b_bytes)
            bulk.copy_global_to_shared(slot, a_scales, row_bytes, bar)
            bulk.copy_global_to_shared(tail(slot, SCALE_ROWS), b_scales, 16, bar)
            if two_b:
                bulk.copy_global_to_shared(tail(slot, SCALE_ROWS + B_RUN), b_scales2, 16, bar)
            producer_commit(a_map, b_map, tiles, full, s, kt, row0, col0, rank)
            a_scales = tail(a_scales, 1)
            if (kt & (B_RUN - 1)) == B_RUN - 1:
                b_scales = tail(b_scales, B_RUN)
                b_scales2 = tail(b_scales2, B_RUN)
            kt = np.uint32(kt + 1)
            s, passes = next_slot(s, passes)
        return s, passes

    @inline_device
    def producer_tail(empty, s, passes):
        # A cluster's producer waits, as before loading them again, until the consumers of
        # every CTA have released each slot that was filled, so no peer's arrive can land on
        # this CTA's barriers after it exits (CUTLASS's producer tail). It stands in for a
        # cluster barrier at the end, whose releasing arrive would wait on every thread's
        # outstanding stores. The peer's multicasts into this CTA are all awaited by its own
        # consumers.
        for _ in range(S):
            producer_acquire(empty, s, passes)
            s, passes = next_slot(s, passes)

    return Parts(next_slot=next_slot, skip_slots=skip_slots,
                 producer_acquire=producer_acquire, producer_commit=producer_commit,
                 consumer_wait=consumer_wait, consumer_release=consumer_release,
                 load_tile=load_tile, load_tile_scaled=load_tile_scaled,
                 producer_tail=producer_tail)


class Parts:
    """A part's device functions and constants by name. Hashed by identity: the factories
    that make parts are cached, so equal arguments give the same object, and a factory may
    take a part as an argument."""

    def __init__(self, **members):
        self.__dict__.update(members)
