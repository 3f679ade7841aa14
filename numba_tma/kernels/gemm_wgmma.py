"""The Hopper GEMM: ``C = alpha * A @ B + beta * C`` on ``wgmma.mma_async``, fed by TMA, with a
producer warpgroup and two consumer warpgroups, or one (16-bit inputs, fp32 accumulation,
f16/bf16/f32 output). What ``numba_tma.matmul`` runs on sm_90.

Configurations (:class:`WgmmaConfig`; which ``matmul()`` chooses where, and what each measured,
is the ladder in ``docs/gemm.md``):

1. ``persistent=False``: one block per tile; ``cluster_n=2`` CTA pairs along N multicast A;
   ``consumers=1`` one consumer warpgroup takes both m64 halves.
2. the default, persistent (``_persistent_kernel``): the next tile's loads overlap this tile's
   epilogue; ``stages`` slots, ``mma_pipe`` wgmma groups kept in flight per consumer.
3. ``cluster_m=2``: 2-CTA clusters multicast B.
4. ``bm=256`` (``BN <= 128``): 256 x 128 tiles, each consumer two m64 halves.
5. ``stream_k=True``: the last, part-filled wave's tiles split along K over every block.
6. ``pingpong=True``: each consumer warpgroup its own tile, the epilogues under the other's
   wgmmas.
7. ``overlap_epilogue=True`` (with ``mma_pipe=0``): a finished tile's C packed into 16-bit pairs
   and stored under the next tile's first wgmma groups.

* One block computes a ``bm x BN`` tile (``bm = 128``: two consumer warpgroups of 64 rows, one
  ``m64nBNk16`` per k16 step per consumer, ``BN / 2`` f32 accumulator registers per thread; or
  ``bm = 256`` with ``BN <= 128``: each consumer 128 rows, two ``m64nBNk16`` per k16 step; or,
  one block per tile with ``consumers=1``, one consumer warpgroup all 128 rows, two
  ``m64nBNk16`` per k16 step). 384 threads: warpgroup 0 is the producer, 1 and 2 the consumers
  (256 with one consumer).
* ``setmaxnreg``: the kernel is compiled for 384 threads x 168 registers
  (``launch_bounds=(384, 1)``); the producer gives registers back (``setmaxnreg_dec(56)``) and
  each consumer takes 224 (``setmaxnreg_inc``), which the 128 accumulators need (at 40 the
  persistent cluster kernel's producer spilled). Narrower tiles, one block per tile, skip it.
* The producer's one thread streams ``BK = 64``-deep slices of A and B through a ring of
  ``stages`` slots with 128B-swizzled TMA loads (out-of-range rows, columns and K are
  zero-filled: any M, N, K), on ``full``/``empty`` mbarriers: ``full[s]`` completes on the
  slot's transaction bytes, ``empty[s]`` when each consumer warp (8, or 4) has released it.
* Each consumer issues the 4 k16 wgmmas of a slot, commits them, and waits for the *previous*
  slot's group (``wait_group(1)``), so the tensor cores always have the next group queued while
  the slot before is released to the producer.
* Operands read straight from the swizzled tiles through descriptors: K-major slices advance 32
  bytes per k16 step inside the 128-byte swizzled rows; M/N-major ones (``w.T``, read with the
  transpose immediates) advance 16 rows. The descriptors are built from a warp-uniform
  warpgroup index (``wgmma.warpgroup_index``) and ring slot (read from lane 0), so they live in
  the uniform registers ``HGMMA`` reads and a group's ``HGMMA``s issue back to back (built per
  thread, each would cross over with ``R2UR`` mid-group: ``docs/gemm.md``).
* Epilogue: after a block barrier the ring becomes each warp's 16-row slab of C; accumulators
  are scaled (``beta`` times the old C, loaded by TMA, added), packed with ``stmatrix``
  (f32: 8-byte stores) into 128B-swizzled 16 x 64 boxes, and stored by TMA (clipped at the edges).
* Tiles are visited in groups of ``group_m`` tile rows so concurrent blocks share B in L2.
* Launch: the barrier thread prefetches the three tensor maps while it sets the barriers up
  (one block per tile without a cluster: and, after its own ``griddep.wait()``, issues the
  first slot's loads before the block barrier); then every thread calls ``griddep.wait()``
  (nothing before it touches global memory) and
  ``griddep.launch_dependents()``, so the kernels may be launched dependent and back-to-back
  calls overlap one's start with the other's end (``matmul()`` does, unless
  ``NUMBA_TMA_DEPENDENT_LAUNCH=0``).
"""

import functools
import math
from types import SimpleNamespace

import numpy as np
from numba import cuda

from .._bridge import inline_device
from .. import barrier, cluster, fence, griddep, intmath, mbarrier, smem, tma, warp, wgmma
from ._gemm_slices import ATOM, ATOM_BYTES, BK, SPAN, slice_loader

__all__ = ["WgmmaConfig", "DEFAULT_CONFIG", "gemm_kernel", "smem_bytes", "grid_size",
           "SIGNATURE", "SIGNATURE_STREAM_K", "signature", "stream_k_split", "stream_k_schedule",
           "workspace_floats", "THREADS", "L2_PROMOTION"]

BM = 128                     # two consumer warpgroups x 64 rows
WG_ROWS = 64                 # rows of C per consumer warpgroup (the m64 of wgmma)
THREADS = 384                # producer + 2 consumer warpgroups
CONSUMER_WARPS = 8
SWIZZLE_ALIGN = 1024         # the 128B swizzle repeats every 8 rows of 128 bytes
SLAB_ROWS = 16               # each consumer warp owns 16 rows of C in the epilogue
C_BOX_BYTES = SLAB_ROWS * SPAN      # a 16 x 64 (16-bit) or 16 x 32 (f32) box of C: 2 KiB
PRODUCER_REGS = 56
CONSUMER_REGS = 224
MAX_DYNAMIC_SMEM = 227 * 1024
#: The default L2 promotion of A's and B's tensor maps (bytes). With none, a slot's loads that
#: miss L2 fetch only the 32-byte sectors they ask for. Whole 128-byte lines were ahead at most
#: shapes on two lent H100s (``benches/results/gemm-l2-promotion-h100.txt``) and even on a
#: third (``gemm-h100-2026-11-26d.json``: rows matmul() and matmul()_l2none); 256 bytes was no
#: better.
L2_PROMOTION = 128

SIGNATURE = ("void(uint64[::1], uint64[::1], uint64[::1], int64, int64, int64, int64, int64, "
             "float32, float32)")
#: A stream-K kernel's parameters: SIGNATURE's, then the workspace of partial tiles (float32),
#: one flag per block, the tiles the blocks take whole (``dp_units``) and the K slices split
#: evenly over the blocks after them (``sk_iters``); see :func:`stream_k_split`.
SIGNATURE_STREAM_K = SIGNATURE[:-1] + ", float32[::1], uint32[::1], int64, int64)"
CONSUMER_THREADS = CONSUMER_WARPS * 32


class WgmmaConfig:
    """Block tile ``bm x bn`` (``bn`` 64, 128, 192 or 256: the wgmma N; ``bm`` 128, or 256 with
    ``bn <= 128``, persistent and without stream-K: each consumer warpgroup then two m64 halves
    of 128 rows), ``stages`` ring slots,
    ``group_m`` tile rows per raster group; ``persistent``: one block per SM walks the tiles,
    its epilogue overlapping the next tile's loads (else one block per tile, the first rung);
    ``cluster_m`` (persistent only): 2 makes CTA pairs along M share B, each loading half of
    every B slice and multicasting it to both; ``stream_k`` (persistent, ``cluster_m = 1``):
    the tiles of the last, partly filled wave are split along K evenly over every block (see
    :func:`_persistent_kernel`), which takes a workspace (:func:`workspace_floats`);
    ``c_buffers`` (persistent): the 16 x 128-byte boxes each consumer warp stages C through, 2
    or 4 (with 4, a 128 x 256 tile's 16-bit epilogue never waits for a box's earlier store);
    ``mma_pipe``: the wgmma groups a consumer leaves in flight when it moves on from a slot, 1
    (it waits for the previous slot's group and releases that slot: the tensor cores always
    hold this warpgroup's next group) or 0 (it waits for this slot's group and releases the
    slot at once: the producer's lookahead is a slot deeper, and the other consumer warpgroup
    keeps the tensor cores fed meanwhile); ``pingpong`` (persistent, ``bm = 128``,
    ``bn <= 128``, ``mma_pipe = 1``, no clusters or stream-K): each consumer warpgroup computes
    whole ``128 x bn`` tiles of its own, the block's tiles alternating between the two, so
    one's epilogue overlaps the other's main loop; ``overlap_epilogue`` (persistent,
    ``bm = 128``, ``mma_pipe = 0``, no ping-pong or stream-K): with 16-bit output and no
    ``beta``, each consumer packs a finished tile's accumulators into 16-bit pairs and stores
    them box by box under the next tile's first wgmma groups, instead of between the tiles
    with the tensor cores idle (f32 output and ``beta`` keep the plain epilogue: their
    accumulators do not fit beside the next tile's); ``cluster_n`` (one block per tile): 2
    makes CTA pairs along N share A, each loading one 64-row half of every A slice and
    multicasting it to both (a pair reads A once from L2); ``consumers`` (one block per tile,
    ``bn <= 128``): 1 gives both m64 halves of the tile to one consumer warpgroup (256
    threads, ``bn`` accumulators a thread) instead of one each to two; ``l2_promotion`` (0,
    64, 128 or 256 bytes): the L2 promotion of A's and B's tensor maps, a host-side setting the
    kernel never sees (on an L2 miss the L2 fetches whole 128-byte lines instead of the 32-byte
    sectors asked for: see ``L2_PROMOTION``)."""

    __slots__ = ("bn", "stages", "group_m", "persistent", "cluster_m", "stream_k", "c_buffers",
                 "mma_pipe", "bm", "pingpong", "overlap_epilogue", "cluster_n", "consumers",
                 "l2_promotion")

    def __init__(self, bn=256, stages=None, group_m=8, persistent=True, cluster_m=1,
                 stream_k=False, c_buffers=2, mma_pipe=1, bm=BM, pingpong=False,
                 overlap_epilogue=False, cluster_n=1, consumers=2, l2_promotion=None):
        if stages is None:          # the H100's best for 128 x 256 tiles on each rung
            stages = 3 if persistent else 4
        if bn not in wgmma.N_OTHER:
            raise ValueError(f"bn = {bn} must be one of {wgmma.N_OTHER} (a wgmma N with a "
                             f"register-A form too)")
        if stages < 2 or (not persistent and stages & (stages - 1)):
            raise ValueError(f"stages = {stages} must be >= 2 (a power of two unless "
                             f"persistent)")
        if group_m < 1:
            raise ValueError(f"group_m = {group_m} must be >= 1")
        if cluster_m not in (1, 2) or (cluster_m == 2 and not persistent):
            raise ValueError(f"cluster_m = {cluster_m} must be 1, or 2 with persistent=True")
        if bn % (ATOM * cluster_m):
            raise ValueError(f"cluster_m = {cluster_m} splits B's {bn} columns into "
                             f"{cluster_m} parts of whole 64-column boxes: bn = 128 or 256")
        if stream_k and (not persistent or cluster_m != 1):
            raise ValueError(f"stream_k = True needs persistent=True and cluster_m = 1; got "
                             f"persistent={persistent}, cluster_m={cluster_m}")
        self.bn, self.stages, self.group_m = bn, stages, group_m
        self.persistent, self.cluster_m = bool(persistent), cluster_m
        if c_buffers not in (2, 4) or (c_buffers != 2 and not persistent):
            raise ValueError(f"c_buffers = {c_buffers} must be 2 or 4 (persistent only: the "
                             f"first rung stages C in the ring)")
        if mma_pipe not in (0, 1):
            raise ValueError(f"mma_pipe = {mma_pipe} must be 0 or 1 (wgmma groups left in "
                             f"flight per consumer)")
        if bm not in (BM, 2 * BM):
            raise ValueError(f"bm = {bm} must be {BM} or {2 * BM} (rows of C per block)")
        if bm != BM and (not persistent or stream_k or bn > 128):
            raise ValueError(f"bm = {bm} (two m64 halves per consumer) needs persistent=True, "
                             f"stream_k=False and bn <= 128 (the consumers' accumulators); got "
                             f"persistent={persistent}, stream_k={stream_k}, bn={bn}")
        self.bm = bm
        if pingpong and (not persistent or stream_k or cluster_m != 1 or bm != BM or bn > 128
                         or mma_pipe != 1):
            raise ValueError(f"pingpong=True (each consumer warpgroup its own 128 x bn tile) "
                             f"needs persistent=True, stream_k=False, cluster_m=1, bm={BM}, "
                             f"bn <= 128 and mma_pipe=1; got persistent={persistent}, "
                             f"stream_k={stream_k}, cluster_m={cluster_m}, bm={bm}, bn={bn}, "
                             f"mma_pipe={mma_pipe}")
        self.pingpong = bool(pingpong)
        if overlap_epilogue and (not persistent or stream_k or bm != BM or pingpong
                                 or mma_pipe != 0):
            raise ValueError(f"overlap_epilogue=True (C stored under the next tile's wgmmas) "
                             f"needs persistent=True, stream_k=False, bm={BM}, pingpong=False "
                             f"and mma_pipe=0; got persistent={persistent}, "
                             f"stream_k={stream_k}, bm={bm}, pingpong={pingpong}, "
                             f"mma_pipe={mma_pipe}")
        self.overlap_epilogue = bool(overlap_epilogue)
        # (one block per tile already means cluster_m = 1 and bm = 128: checked above)
        if cluster_n not in (1, 2) or (cluster_n == 2 and persistent):
            raise ValueError(f"cluster_n = {cluster_n} must be 1, or 2 with persistent=False "
                             f"(each CTA of a pair loads one 64-row half of A); got "
                             f"persistent={persistent}")
        self.cluster_n = cluster_n
        if consumers not in (1, 2) or (consumers == 1 and (persistent or bn > 128)):
            raise ValueError(f"consumers = {consumers} must be 2, or 1 with persistent=False and "
                             f"bn <= 128 (one warpgroup holds both m64 halves' accumulators); "
                             f"got persistent={persistent}, bn={bn}")
        self.consumers = consumers
        if l2_promotion is None:
            l2_promotion = L2_PROMOTION
        if l2_promotion not in (0, 64, 128, 256):
            raise ValueError(f"l2_promotion = {l2_promotion!r} must be 0, 64, 128 or 256 (bytes "
                             f"an L2 miss on A or B fetches)")
        self.l2_promotion = l2_promotion
        self.stream_k = bool(stream_k)
        self.c_buffers = c_buffers
        self.mma_pipe = mma_pipe
        need = smem_bytes(self, 4)
        if need > MAX_DYNAMIC_SMEM:
            raise ValueError(f"{self!r} needs {need} bytes of shared memory; a block may have "
                             f"{MAX_DYNAMIC_SMEM}: use fewer stages or a smaller bn")

    @property
    def threads(self):
        """Threads per block: the producer warpgroup and the consumers."""
        return 128 * (1 + self.consumers)

    def key(self):
        """Everything the config sets: ``("wgmma", *kernel fields, l2_promotion)``."""
        return self.kernel_key() + (self.l2_promotion,)

    def kernel_key(self):
        """What the compiled kernel depends on (``key()`` without the host-side
        ``l2_promotion``): configs that differ only there share one kernel."""
        return ("wgmma", self.bn, self.stages, self.group_m, self.persistent, self.cluster_m,
                self.stream_k, self.c_buffers, self.mma_pipe, self.bm, self.pingpong,
                self.overlap_epilogue, self.cluster_n, self.consumers)

    def replace(self, **changes):
        """A copy of this config with ``changes`` (keyword arguments of the constructor)."""
        fields = {name: getattr(self, name) for name in self.__slots__}
        fields.update(changes)
        return WgmmaConfig(**fields)

    def __repr__(self):
        more = ", stream_k=True" if self.stream_k else ""
        more += f", c_buffers={self.c_buffers}" if self.c_buffers != 2 else ""
        more += f", mma_pipe={self.mma_pipe}" if self.mma_pipe != 1 else ""
        more += f", bm={self.bm}" if self.bm != BM else ""
        more += ", pingpong=True" if self.pingpong else ""
        more += ", overlap_epilogue=True" if self.overlap_epilogue else ""
        more += f", cluster_n={self.cluster_n}" if self.cluster_n != 1 else ""
        more += f", consumers={self.consumers}" if self.consumers != 2 else ""
        more += (f", l2_promotion={self.l2_promotion}" if self.l2_promotion != L2_PROMOTION
                 else "")
        return (f"WgmmaConfig(bn={self.bn}, stages={self.stages}, group_m={self.group_m}, "
                f"persistent={self.persistent}, cluster_m={self.cluster_m}{more})")


def smem_bytes(cfg, out_itemsize):
    """Dynamic shared memory of one block: barriers, alignment slack, the ring, and C's staging
    (the persistent kernel: ``c_buffers`` 16 x 128-byte boxes per consumer warp; the first rung
    reuses the ring for C)."""
    ring = cfg.stages * (cfg.bm + cfg.bn) * SPAN
    bars = 8 * (2 * cfg.stages + CONSUMER_WARPS + 2 * cfg.pingpong) + SWIZZLE_ALIGN
    if cfg.persistent:
        return bars + ring + CONSUMER_WARPS * cfg.c_buffers * C_BOX_BYTES
    c_slabs = CONSUMER_WARPS * SLAB_ROWS * cfg.bn * out_itemsize
    return bars + max(ring, c_slabs)


DEFAULT_CONFIG = WgmmaConfig()


@functools.cache        # one set of device functions for every kernel that shares them
def _pieces(BN, group_m, CM, PIPE, a_kmajor, b_kmajor, in_kind, TM=BM, WHOLE=False, CN=1):
    """What both rungs share, for one configuration: the slot and descriptor geometry, the
    producer's loads of one slot, a consumer's wgmmas on one slot (leaving ``PIPE`` groups in
    flight), and the tile raster. ``TM``: rows of C per block, 128 (each consumer one m64
    half) or 256 (two, each with its own accumulators); ``WHOLE``: each consumer takes all
    ``TM`` rows (a ping-pong consumer its own tile, or a block's only consumer); ``CN``: CTAs
    along N sharing A (the loader's ``cn``)."""
    A_BYTES = TM * SPAN
    STAGE_BYTES = A_BYTES + BN * SPAN
    NACC = BN // 2                              # f32 accumulators per m64 half per thread
    # m64 halves per consumer: all TM rows' (WHOLE), or its share of two consumers'
    HALVES = TM // WG_ROWS if WHOLE else TM // BM
    mma = wgmma.mma_f32_f16 if in_kind == "f16" else wgmma.mma_f32_bf16
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
    A_WG = 0 if WHOLE else HALVES * A_ROW64     # consumer c's rows of the A slice
    issue_slot = slice_loader(TM, BN, CM, a_kmajor, b_kmajor, CN)

    @inline_device
    def slot_descriptors(tiles, s, c):
        # The descriptors of slot s's A rows for consumer c and of its B. s is read from lane 0:
        # the same in every lane, which ptxas cannot always prove of a ring index carried
        # through the persistent loop, and then it builds the descriptors per thread and moves
        # each into a UR register between the HGMMAs.
        s = cuda.shfl_sync(0xFFFFFFFF, s, 0)
        return (wgmma.descriptor(tiles, s * STAGE_BYTES + c * A_WG, A_LBO, A_SBO, 128),
                wgmma.descriptor(tiles, s * STAGE_BYTES + A_BYTES, B_LBO, B_SBO, 128))

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
        # second half's rows), committed as one group; returns once at most PIPE groups are in
        # flight: the group before it (PIPE = 1) or this one (PIPE = 0) has retired, and its
        # slot may be released.
        a_desc, b_desc = slot_descriptors(tiles, s, c)
        wgmma.fence()
        for kk in range(BK // 16):
            b_k = wgmma.descriptor_advance(b_desc, kk * B_KSTEP)
            mma(acc, wgmma.descriptor_advance(a_desc, kk * A_KSTEP), b_k, BN, 1, TA, TB)
            if HALVES == 2:
                mma(acc2, wgmma.descriptor_advance(a_desc, A_ROW64 + kk * A_KSTEP), b_k, BN,
                    1, TA, TB)
        wgmma.commit_group()
        fence_accumulators(acc, acc2)
        wgmma.wait_group(PIPE)
        fence_accumulators(acc, acc2)

    @inline_device
    def mma_issue(acc, tiles, s, c):
        # mma_slot's wgmmas and commit without the wait (one m64 half): the overlapped
        # epilogue stores a box of the previous tile between the two.
        a_desc, b_desc = slot_descriptors(tiles, s, c)
        wgmma.fence()
        for kk in range(BK // 16):
            b_k = wgmma.descriptor_advance(b_desc, kk * B_KSTEP)
            mma(acc, wgmma.descriptor_advance(a_desc, kk * A_KSTEP), b_k, BN, 1, TA, TB)
        wgmma.commit_group()
        wgmma.fence_operand(acc, NACC)

    @inline_device
    def mma_retire(acc):
        # ... and its wait: the group has retired, the slot may be released.
        wgmma.wait_group(0)
        wgmma.fence_operand(acc, NACC)

    @inline_device
    def tile_origin(unit, tiles_m, tiles_n, rank):
        # Raster: group_m units (a unit: the CM tiles along M that share B) walk the tile
        # columns together, for L2 reuse of B; 32-bit division (64-bit is a called routine).
        units_m = (tiles_m + CM - 1) // CM
        width = group_m * tiles_n
        first_m = intmath.div_u32(unit, width) * group_m
        gsize = min(units_m - first_m, group_m)
        in_group = intmath.rem_u32(unit, width)
        row0 = ((first_m + intmath.rem_u32(in_group, gsize)) * CM + rank) * TM
        col0 = intmath.div_u32(in_group, gsize) * BN
        return row0, col0

    return SimpleNamespace(NACC=NACC, HALVES=HALVES, STAGE_BYTES=STAGE_BYTES,
                           issue_slot=issue_slot, mma_slot=mma_slot, mma_issue=mma_issue,
                           mma_retire=mma_retire, fence_accumulators=fence_accumulators,
                           tile_origin=tile_origin)


@inline_device
def _prefetch_maps(a_map, b_map, c_map):
    # The three tensor maps into the TMA unit's cache while the barriers are set up, rather
    # than at the first load and the first store (one thread).
    tma.prefetch_descriptor(a_map)
    tma.prefetch_descriptor(b_map)
    tma.prefetch_descriptor(c_map)


@inline_device
def _start_dependent():
    # Every thread, after the barriers' setup and before any global memory access of its own
    # (the one-block kernel's barrier thread, which loads the first slot earlier, waits before
    # that load). Launched with programmatic stream serialization
    # (matmul_api.dependent_launches), the kernel may have started while the one before it in
    # the stream still ran: wait for that one's memory, and let the next such launch be
    # scheduled (its blocks take SMs as these exit).
    griddep.wait()
    griddep.launch_dependents()


@functools.cache        # one set of device functions for every kernel that shares them
def _slot_release(ctas):
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


@inline_device
def _stmatrix_row(off, lane, q4):
    # The byte offset of lane's row address for the stmatrix.x4 of columns 16 q4..16 q4 + 15 of
    # the 128B-swizzled 16 x 64 (16-bit) box at off: its matrices are (rows 0-7 | 8-15) x
    # (n8 tile 2 q4 | 2 q4 + 1), and lane's word q of them packs accumulators
    # ((q4 * 2 + (q >> 1)) * 4 + 2 * (q & 1)) + (0, 1) of the box's n8 tiles.
    srow = (lane & 7) + (((lane >> 3) & 1) << 3)
    chunk = (q4 * 2 + (lane >> 4)) & 7
    return off + srow * SPAN + ((chunk ^ (srow & 7)) << 4)


@functools.cache        # one set of device functions for every kernel that shares them
def _box_writer(out_kind, has_beta):
    """``write_box(acc, smem8, dynf, fbase, off, j, lane, alpha, beta, words, old)``: a consumer
    warp's box ``j`` of C (16 rows x 128 bytes: the n8 tiles 8j..8j+7 of 16-bit output,
    4j..4j+3 of f32) at byte ``off`` of the uint8 shared array ``smem8``, which starts at float
    ``fbase`` of ``dynf`` (the dynamic shared memory as float32), 128B-swizzled as its TMA store
    reads it:
    ``alpha * acc``, plus ``beta`` times the box's old contents (already loaded there) when
    ``has_beta``; 16-bit output packed with ``stmatrix``, f32 with 8-byte stores. ``j`` must
    be a compile-time constant (an unrolled loop), as every accumulator index is. ``words``
    and ``old`` are the warp's 4-word scratch fragments."""
    OUT16 = out_kind != "f32"
    pack = warp.pack_f16x2 if out_kind == "f16" else warp.pack_bf16x2
    unpack = warp.unpack_f16x2 if out_kind == "f16" else warp.unpack_bf16x2

    @inline_device
    def write_box(acc, smem8, dynf, fbase, off, j, lane, alpha, beta, words, old):
        if OUT16:
            for q4 in range(4):
                soff = _stmatrix_row(off, lane, q4)
                if has_beta:
                    warp.ldmatrix(old, smem8, soff, 4)
                for q in range(4):
                    i = ((j * 4 + q4) * 2 + (q >> 1)) * 4 + 2 * (q & 1)
                    v0 = alpha * acc[i]
                    v1 = alpha * acc[i + 1]
                    if has_beta:
                        v0 += beta * unpack(old[q])
                        v1 += beta * unpack(old[q], True)
                    words[q] = pack(v0, v1)
                warp.stmatrix(smem8, soff, words, 4)
        else:
            g = lane >> 2
            t = lane & 3
            for q in range(4):
                for h in range(2):
                    row = g + 8 * h
                    chunk = (q * 2 + (t >> 1)) ^ g
                    f = fbase + ((off + row * SPAN + (chunk << 4) + (t & 1) * 8) >> 2)
                    i = (j * 4 + q) * 4 + 2 * h
                    v0 = alpha * acc[i]
                    v1 = alpha * acc[i + 1]
                    if has_beta:
                        v0 += beta * dynf[f]
                        v1 += beta * dynf[f + 1]
                    dynf[f] = v0
                    dynf[f + 1] = v1

    return write_box


def gemm_kernel(cfg_key, a_kmajor, b_kmajor, in_kind, out_kind, has_beta):
    """The kernel for one configuration. ``a_kmajor``: A is stored M x K row-major (else K x M);
    ``b_kmajor``: B is stored N x K row-major (else K x N). ``in_kind`` "f16"/"bf16";
    ``out_kind`` "f16"/"bf16"/"f32"; ``has_beta`` adds ``beta * C`` (C loaded by TMA).
    ``cfg_key``: ``WgmmaConfig.kernel_key()`` (or ``key()``, whose host-side tail is dropped)."""
    return _gemm_kernel(tuple(cfg_key[:KERNEL_KEY_LEN]), a_kmajor, b_kmajor, in_kind, out_kind,
                        has_beta)


KERNEL_KEY_LEN = len(DEFAULT_CONFIG.kernel_key())


@functools.cache
def _gemm_kernel(cfg_key, a_kmajor, b_kmajor, in_kind, out_kind, has_beta):
    _, BN, S, group_m, persistent, CM, SK, NBUF, PIPE, TM, PP, OV, CN, NC = cfg_key
    if persistent:
        return _persistent_kernel(BN, S, group_m, CM, SK, NBUF, PIPE, a_kmajor, b_kmajor,
                                  in_kind, out_kind, has_beta, TM, PP, OV)
    LOG_S = S.bit_length() - 1
    # One consumer warpgroup (NC = 1) takes both m64 halves of the tile, two accumulator sets.
    ONE = NC == 1
    NTHREADS = 128 * (1 + NC)
    P = _pieces(BN, group_m, 1, PIPE, a_kmajor, b_kmajor, in_kind, WHOLE=ONE, CN=CN)
    NACC = P.NACC
    STAGE_BYTES = P.STAGE_BYTES
    NBARS = 2 * S + CONSUMER_WARPS
    BAR_BYTES = 8 * NBARS
    # every consumer warp releases each slot (a pair's: both CTAs', as both producers write it)
    EMPTY_ARRIVALS = 4 * NC * CN
    OUT16 = out_kind != "f32"
    C_COLS = 64 if OUT16 else 32                # columns of one 128-byte-wide box of C
    C_BOXES = BN // C_COLS
    SLAB_BYTES = C_BOXES * C_BOX_BYTES
    issue_slot, mma_slot, tile_origin = P.issue_slot, P.mma_slot, P.tile_origin
    fence_accumulators = P.fence_accumulators
    write_box = _box_writer(out_kind, has_beta)

    # The epilogue, per 16-row slab of C: slab w (rows row0 + 16 w..) is consumer warp w's of
    # two consumers, and consumer warp w's (first half) and w + 4's (second) of one.
    @inline_device
    def load_old_slab(tiles, c_map, cbar, w, lane, row0, col0, m, n):
        # beta: the slab's old C into its boxes, by TMA (lane 0)
        crow = row0 + w * SLAB_ROWS
        if lane == 0 and crow < m and col0 < n:
            mbarrier.arrive_expect_tx(cbar[w:], SLAB_BYTES)
            for j in range(C_BOXES):
                tma.load(tiles[w * SLAB_BYTES + j * C_BOX_BYTES:], c_map,
                         (crow, col0 + j * C_COLS), cbar[w:])

    @inline_device
    def write_slab(acc, tiles, dynf, first, cbar, w, lane, row0, col0, m, n, alpha, beta):
        # alpha * acc (+ beta * the old C, once it has landed) into the slab's swizzled boxes
        if has_beta and row0 + w * SLAB_ROWS < m and col0 < n:
            mbarrier.wait(cbar[w:], 0)
        words = cuda.local.array(4, np.uint32)
        old = cuda.local.array(4, np.uint32)
        for j in range(C_BOXES):
            write_box(acc, tiles, dynf, first >> 2, w * SLAB_BYTES + j * C_BOX_BYTES, j, lane,
                      alpha, beta, words, old)

    @inline_device
    def store_slab(c_map, tiles, w, lane, row0, col0, m, n):
        # the slab's boxes to C by TMA (lane 0; clipped at the edges, boxes past N skipped)
        crow = row0 + w * SLAB_ROWS
        if lane == 0 and crow < m:
            for j in range(C_BOXES):
                if col0 + j * C_COLS < n:
                    tma.store(c_map, (crow, col0 + j * C_COLS), tiles[w * SLAB_BYTES
                                                                     + j * C_BOX_BYTES:])

    release = _slot_release(CN)
    # Registers move from producer to consumers only where the accumulators need it (128 per
    # thread at BN = 256); up to BN = 128 every warp keeps the kernel's 168, and the consumers
    # skip setmaxnreg.inc's wait for the producer's dec.
    EXCHANGE = NACC > 64
    # A single CTA's producer thread issues the first slot before the block barrier (its own
    # barriers need nobody else); a pair's multicast waits for the peer's barriers.
    EARLY = 1 if CN == 1 else 0

    @cuda.jit(launch_bounds=(NTHREADS, 1))
    def gemm(a_map, b_map, c_map, m, n, k, tiles_m, tiles_n, alpha, beta):
        dyn64 = cuda.shared.array(0, np.uint64)
        dyn8 = cuda.shared.array(0, np.uint8)
        dynf = cuda.shared.array(0, np.float32)
        full = dyn64[:S]
        empty = dyn64[S:2 * S]
        cbar = dyn64[2 * S:NBARS]
        first = smem.aligned_offset(dyn8, BAR_BYTES, SWIZZLE_ALIGN)
        tiles = dyn8[first:]
        tid = cuda.threadIdx.x
        wg = wgmma.warpgroup_index()          # warp-uniform: descriptors in UR registers

        rank = 0
        if CN == 1:
            row0, col0 = tile_origin(cuda.blockIdx.x, tiles_m, tiles_n, 0)
        else:
            # A pair takes CN adjacent tiles of one tile row (the raster walks pairs).
            rank = cluster.cta_rank()
            row0, col0 = tile_origin(cuda.blockIdx.x // CN, tiles_m, (tiles_n + CN - 1) // CN,
                                     0)
            col0 = col0 * CN + rank * BN
        num_k = (k + BK - 1) // BK

        if tid == 0:
            _prefetch_maps(a_map, b_map, c_map)
            for s in range(S):
                mbarrier.init(full[s:], 1)
                mbarrier.init(empty[s:], EMPTY_ARRIVALS)
            for w in range(CONSUMER_WARPS):
                mbarrier.init(cbar[w:], 1)
            mbarrier.fence_init()
            if EARLY and num_k > 0:
                griddep.wait()                  # the loads read what the kernel before wrote
                issue_slot(a_map, b_map, tiles, full[0:], 0, 0, row0, col0, rank)
        if CN == 1:
            cuda.syncthreads()
        else:
            # The peer's barriers exist before anything multicasts or arrives remotely (as in
            # the persistent kernel's clusters: fence_init released them at cluster scope).
            cluster.arrive_relaxed()
            cluster.wait()
        _start_dependent()

        if wg == 0:
            # Producer: gives its registers to the consumers (EXCHANGE); one thread issues
            # every load. It returns here, so nothing after this branch runs under its 56.
            if EXCHANGE:
                wgmma.setmaxnreg_dec(PRODUCER_REGS)
            if tid == 0:
                for kt in range(min(EARLY, num_k), num_k):
                    s = kt & (S - 1)
                    if kt >= S:
                        mbarrier.wait(empty[s:], ((kt >> LOG_S) - 1) & 1)
                    issue_slot(a_map, b_map, tiles, full[s:], s * STAGE_BYTES, kt, row0, col0,
                               rank)
                if CN > 1:
                    # Drain (CUTLASS's producer tail): every slot's last use released by both
                    # CTAs' consumers, so no peer's arrive lands on these barriers after exit.
                    for kt in range(max(num_k - S, 0), num_k):
                        mbarrier.wait(empty[kt & (S - 1):], (kt >> LOG_S) & 1)
            return

        if EXCHANGE:
            wgmma.setmaxnreg_inc(CONSUMER_REGS)
        c = wg - 1
        lane = tid & 31
        acc = cuda.local.array(NACC, np.float32)
        acc2 = cuda.local.array(NACC, np.float32)      # (one consumer: the second half's rows)
        for i in range(NACC):
            acc[i] = 0.0
            if ONE:
                acc2[i] = 0.0
        fence_accumulators(acc, acc2)
        for kt in range(num_k):
            s = kt & (S - 1)
            mbarrier.wait(full[s:], (kt >> LOG_S) & 1)
            mma_slot(acc, acc2, tiles, s, c)
            # The group of slot kt - PIPE is done: give that slot back to the producer.
            if kt >= PIPE and lane == 0:
                release(empty[(kt - PIPE) & (S - 1):])
        wgmma.wait_group(0)
        fence_accumulators(acc, acc2)
        if CN > 1 and lane == 0:
            # ... and the last PIPE slots too, which the producers' drain waits for.
            for kt in range(max(num_k - PIPE, 0), num_k):
                release(empty[kt & (S - 1):])

        # Every consumer warp is past its last wgmma (named barrier 1: the producer has left):
        # the ring becomes the warps' slabs of C.
        barrier.sync(1, NTHREADS - 128)
        cw = (tid >> 5) - 4                     # consumer warp: 0..7, or 0..3 of one consumer
        if has_beta:
            load_old_slab(tiles, c_map, cbar, cw, lane, row0, col0, m, n)
            if ONE:
                load_old_slab(tiles, c_map, cbar, cw + 4, lane, row0, col0, m, n)
        write_slab(acc, tiles, dynf, first, cbar, cw, lane, row0, col0, m, n, alpha, beta)
        if ONE:
            write_slab(acc2, tiles, dynf, first, cbar, cw + 4, lane, row0, col0, m, n, alpha,
                       beta)
        fence.proxy_async_shared()
        cuda.syncwarp()
        store_slab(c_map, tiles, cw, lane, row0, col0, m, n)
        if ONE:
            store_slab(c_map, tiles, cw + 4, lane, row0, col0, m, n)
        if lane == 0:
            tma.commit_group()
            tma.wait_group_read(0)

    return gemm


def grid_size(m, n, cfg, resident=None):
    """Blocks to launch: one per tile; persistent: one per tile up to ``resident`` (the blocks
    that fit on the GPU at once, a multiple of ``cfg.cluster_m``), whole clusters."""
    cm, cn = cfg.cluster_m, cfg.cluster_n
    blocks = (math.ceil(math.ceil(m / cfg.bm) / cm) * cm
              * math.ceil(math.ceil(n / cfg.bn) / cn) * cn)
    if cfg.persistent:
        if resident is None or resident < cm:
            raise ValueError(f"a persistent {cfg!r} needs resident >= {cm} (blocks that fit "
                             f"at once); got {resident!r}")
        blocks = min(blocks, resident // cm * cm)
    return blocks


def c_box(out_kind):
    """The TMA box of C each consumer warp stores: 16 rows x 128 bytes."""
    return (SLAB_ROWS, 64 if out_kind != "f32" else 32)


def signature(cfg):
    """The kernel parameters of ``cfg``'s kernels: SIGNATURE, or SIGNATURE_STREAM_K."""
    return SIGNATURE_STREAM_K if cfg.stream_k else SIGNATURE


#: A stream-K split pays only where each block gets at least this many K slices of the tail.
MIN_STREAM_K_SLICES = 4


def stream_k_split(tiles, blocks, num_k):
    """``(dp_units, sk_iters)`` of a stream-K launch of ``blocks`` persistent blocks over
    ``tiles`` tiles of ``num_k`` K slices: the first ``dp_units`` tiles are taken whole (the
    same number by every block), the K slices of the rest, ``sk_iters`` of them, are split
    evenly over the blocks. No split (``(tiles, 0)``) where the tiles fill whole waves, where
    there is less than one wave, where a block would get fewer than ``MIN_STREAM_K_SLICES``
    slices, or where ``blocks * sk_iters`` would not fit the kernel's 32-bit division."""
    tail = tiles % blocks if tiles > blocks else 0
    sk_iters = tail * num_k
    if tail == 0 or sk_iters < MIN_STREAM_K_SLICES * blocks or blocks * sk_iters >= 2 ** 32:
        return tiles, 0
    return tiles - tail, sk_iters


def stream_k_schedule(blocks, dp_units, sk_iters, num_k):
    """The stream-K part of each block's work as the kernel walks it, a model for tests and
    readers: ``[[(tile, k0, k1, role), ...] per block]``, ``role`` "final" for the segment that
    starts its tile (it adds the others' partials and stores C) or "partial" (stored in the
    block's workspace slot and flagged). Block ``b`` takes slices ``[b W / G, (b + 1) W / G)``
    of the ``W = sk_iters`` slices after the whole tiles (tile ``dp_units + t`` holds slices
    ``[t num_k, (t + 1) num_k)``)."""
    plan = []
    for b in range(blocks):
        it, hi = b * sk_iters // blocks, (b + 1) * sk_iters // blocks
        segs = []
        while it < hi:
            t = it // num_k
            k0 = it - t * num_k
            k1 = min(num_k, k0 + hi - it)
            segs.append((dp_units + t, k0, k1, "final" if k0 == 0 else "partial"))
            it += k1 - k0
        plan.append(segs)
    return plan


def workspace_floats(bn, blocks):
    """float32 elements of the workspace of a stream-K launch of ``blocks`` blocks of
    ``128 x bn`` tiles: one partial tile per block."""
    return blocks * CONSUMER_THREADS * (bn // 2)


def _persistent_kernel(BN, S, group_m, CM, SK, NBUF, PIPE, a_kmajor, b_kmajor, in_kind,
                       out_kind, has_beta, TM=BM, PP=False, OV=False):
    """The persistent rung (``WgmmaConfig(persistent=True)``): one block per SM (``CM`` = 2:
    one cluster per SM pair) walks its tiles; the producer runs ahead across tile boundaries,
    so the next tile's first slots load while the consumers' epilogue stores this one.

    Slots are counted across tiles (slot ``s``, ring pass ``passes``); the consumers release
    each slot once the wgmma group reading it has retired (the last one of a tile after
    ``wait_group(0)``). Each consumer warp stages C through ``NBUF`` (2 or 4) 16 x 128-byte boxes
    of its own (not the ring, which the producer is refilling), taking them in turn so a box is
    written while the others' TMA stores still read theirs. With ``CM = 2`` CTA ``r`` of a
    cluster loads rows ``[r, r + 1) * BN / 2`` of every B slice and multicasts them to both
    CTAs; a slot's ``empty`` barrier then counts the consumer warps of both CTAs. The pair
    meets once, at the start (a relaxed cluster arrive and wait after the barriers' init
    fence); at the end each producer drains its ``empty`` barriers instead (``drain``).

    Ping-pong (``PP``): consumer warpgroup ``c`` takes the block's tiles ``c, c + 2, ...``
    whole (all ``TM`` rows, two m64 halves) and skips the other's slots in the ring; before
    each tile but its first it waits on ``turn[c]``, which the other warpgroup arrives on once
    it has waited for the last slot of its own tile, so a full barrier is never two passes
    behind the one a consumer waits for (parity cannot tell those apart). A slot's ``empty``
    barrier then counts the 4 warps of one consumer.

    Overlapped epilogue (``OV``, 16-bit output without ``beta``; else the plain one): a
    consumer that finishes a tile packs ``alpha`` times its accumulators into 16-bit pairs
    (``NACC / 2`` registers beside the ``NACC`` of the next tile) and starts the next tile at
    once; its first ``C_BOXES`` slots each store one box of the packed tile between the
    wgmma issue and the wait, so the stores run under the tensor cores' work instead of
    between tiles with them idle. The block's last tile is stored after its loop.

    Stream-K (``SK``): where the tiles do not fill whole waves, the last wave's tiles would
    leave SMs idle. Every block first takes ``dp_units`` tiles whole (the same number each),
    then an even share of the remaining tiles' K slices (:func:`stream_k_schedule`): a share
    that starts inside a tile stops at the tile's end or earlier, and its accumulators go to
    the block's workspace slot (fragment order: element ``i`` of consumer thread ``t`` at
    ``i * 256 + t``, coalesced) and its flag is raised; the block whose share holds a tile's
    first slice finishes that tile last (its share ends there), adds the partials of the
    following blocks whose shares start inside the tile (waiting on their flags, which it
    lowers again for the next launch), and stores C. Every block of a persistent launch is
    resident, and a block waits only on higher-numbered blocks' first segments, which wait
    on nobody: no deadlock."""
    P = _pieces(BN, group_m, CM, PIPE, a_kmajor, b_kmajor, in_kind, TM, WHOLE=PP)
    NACC = P.NACC
    HALVES = P.HALVES
    STAGE_BYTES = P.STAGE_BYTES
    RING_BYTES = S * STAGE_BYTES
    NBARS = 2 * S + CONSUMER_WARPS
    BAR_BYTES = 8 * (NBARS + 2 * PP)            # (ping-pong: and the two turn barriers)
    # a slot is read by both consumer warpgroups, or (ping-pong) by the one whose tile it holds
    EMPTY_ARRIVALS = (CONSUMER_WARPS // 2 if PP else CONSUMER_WARPS) * CM
    OUT16 = out_kind != "f32"
    C_COLS = 64 if OUT16 else 32
    C_BOXES = BN // C_COLS
    STORES_IN_FLIGHT = NBUF - 1                 # a warp's stores that may still read
    HALF_BOXES = (C_BOXES + 1) // 2
    CT = CONSUMER_THREADS
    PART = CT * NACC                            # workspace floats of one block's partial tile
    FIXUP_BARRIER = 1                           # named barrier of the 256 consumer threads
    TIMEOUT = mbarrier.WAIT_TIMEOUT_NS          # the hang-debugging switch, as mbarrier.wait's
    issue_slot, mma_slot, tile_origin = P.issue_slot, P.mma_slot, P.tile_origin
    fence_accumulators = P.fence_accumulators
    write_box = _box_writer(out_kind, has_beta)
    OV = OV and OUT16 and not has_beta     # (else the plain epilogue: see the docstring)

    release = _slot_release(CM)

    @inline_device
    def next_slot(s, passes):
        # The ring position after slot s (slots count across tiles; a pass is S slots).
        s += 1
        if s == S:
            s = 0
            passes += 1
        return s, passes

    @inline_device
    def load_tile(a_map, b_map, tiles, full, empty, row0, col0, rank, kt0, kt1, s, passes):
        # Producer: K slices kt0..kt1 of one tile into the ring; returns the ring position.
        for kt in range(kt0, kt1):
            if passes > 0:
                mbarrier.wait(empty[s:], (passes - 1) & 1)
            issue_slot(a_map, b_map, tiles, full[s:], s * STAGE_BYTES, kt, row0, col0, rank)
            s, passes = next_slot(s, passes)
        return s, passes

    @inline_device
    def drain(empty, s, passes):
        # Producer, cluster: wait, as before loading them again, until the consumers of both
        # CTAs have released every slot that was filled, so no peer's arrive can land on this
        # CTA's barriers after it exits (CUTLASS's producer tail). It stands in for a cluster
        # barrier at the end, whose releasing arrive would wait on every thread's outstanding
        # stores. The peer's multicasts into this CTA are all awaited by its own consumers.
        for _ in range(S):
            if passes > 0:
                mbarrier.wait(empty[s:], (passes - 1) & 1)
            s, passes = next_slot(s, passes)

    @inline_device
    def skip_slots(s, passes, count):
        # The ring position count slots on (the other ping-pong consumer's tile).
        t = s + count
        laps = intmath.div_u32(t, S)
        return t - laps * S, passes + laps

    @inline_device
    def mma_tile(acc, acc2, tiles, full, empty, c, lane, kt0, kt1, s, passes, turn, lead):
        # Consumer: acc (and acc2, the second m64 half's rows when HALVES = 2) = the product
        # over K slices kt0..kt1 (zeros when there are none); each slot is given back once the
        # wgmma group reading it has retired. Returns the ring position.
        for i in range(NACC):
            acc[i] = 0.0
            if HALVES == 2:
                acc2[i] = 0.0
        fence_accumulators(acc, acc2)
        prev = 0
        if PP and kt1 == kt0 and lead:
            mbarrier.arrive(turn)       # (no slot to wait for: the other's turn at once)
        for kt in range(kt0, kt1):
            mbarrier.wait(full[s:], passes & 1)
            if PP and kt == kt1 - 1 and lead:
                mbarrier.arrive(turn)   # this tile's last slot is in: the other's turn
            mma_slot(acc, acc2, tiles, s, c)
            if PIPE == 0:       # this slot's group is done: give the slot back
                if lane == 0:
                    release(empty[s:])
            else:               # the group of the previous slot is done: give that slot back
                if kt > kt0 and lane == 0:
                    release(empty[prev:])
                prev = s
            s, passes = next_slot(s, passes)
        wgmma.wait_group(0)
        fence_accumulators(acc, acc2)
        if PIPE and kt1 > kt0 and lane == 0:
            release(empty[prev:])
        return s, passes

    @inline_device
    def store_boxes(acc, dyn8, dynf, c_map, cbar, stage, cw, lane, crow, col0, m, n, alpha,
                    beta, words, old, boxes, loads, J0, J1):
        # Boxes J0..J1 of a warp's 16 rows of C, one by one through its NBUF staging boxes.
        for j in range(J0, J1):
            ccol = col0 + j * C_COLS
            inside = crow < m and ccol < n
            off = stage + (boxes & (NBUF - 1)) * C_BOX_BYTES
            boxes += 1
            if lane == 0:
                tma.wait_group_read(STORES_IN_FLIGHT)   # this buffer's last store read it
            cuda.syncwarp()
            if has_beta and inside:
                if lane == 0:
                    mbarrier.arrive_expect_tx(cbar[cw:], C_BOX_BYTES)
                    tma.load(dyn8[off:], c_map, (crow, ccol), cbar[cw:])
                mbarrier.wait(cbar[cw:], loads & 1)
                loads += 1
            write_box(acc, dyn8, dynf, 0, off, j, lane, alpha, beta, words, old)
            fence.proxy_async_shared()
            cuda.syncwarp()
            if lane == 0:
                if inside:
                    tma.store(c_map, (crow, ccol), dyn8[off:])
                tma.commit_group()          # (empty when outside: keeps the count)
        return boxes, loads

    @inline_device
    def store_tile(acc, acc2, dyn8, dynf, c_map, cbar, stage, cw, lane, row0, col0, m, n,
                   alpha, beta, words, old, boxes, loads):
        # Epilogue, warp by warp: 16 rows x BN of each m64 half (the producer is already
        # loading the next tile's slots). Returns the counts of boxes staged (which buffer is
        # next) and of C boxes loaded for beta (cbar parity). Loops of at most 4 boxes: the
        # compiler unrolls those, while one loop over the 8 f32 boxes of a 256-wide tile with
        # beta's loads stayed a loop, its run-time accumulator index sending all 128
        # accumulators to local memory (512 stack bytes).
        # (ping-pong: the warpgroup's own tile; else its half of the block's rows)
        crow = row0 + (0 if PP else (cw >> 2) * (TM // 2)) + (cw & 3) * SLAB_ROWS
        boxes, loads = store_boxes(acc, dyn8, dynf, c_map, cbar, stage, cw, lane, crow, col0,
                                   m, n, alpha, beta, words, old, boxes, loads, 0, HALF_BOXES)
        boxes, loads = store_boxes(acc, dyn8, dynf, c_map, cbar, stage, cw, lane, crow, col0,
                                   m, n, alpha, beta, words, old, boxes, loads, HALF_BOXES,
                                   C_BOXES)
        if HALVES == 2:
            crow += WG_ROWS
            boxes, loads = store_boxes(acc2, dyn8, dynf, c_map, cbar, stage, cw, lane, crow,
                                       col0, m, n, alpha, beta, words, old, boxes, loads, 0,
                                       HALF_BOXES)
            boxes, loads = store_boxes(acc2, dyn8, dynf, c_map, cbar, stage, cw, lane, crow,
                                       col0, m, n, alpha, beta, words, old, boxes, loads,
                                       HALF_BOXES, C_BOXES)
        return boxes, loads

    @inline_device
    def take_partial(flags, p):
        # Wait until block p has flagged its partial, and lower the flag for the next launch.
        # Under NUMBA_TMA_WAIT_TIMEOUT_NS a flag that never comes is reported, then trapped on.
        if TIMEOUT:
            start = mbarrier.globaltimer()
            while cuda.atomic.cas(flags, p, 1, 0) != 1:
                if mbarrier.globaltimer() - start > TIMEOUT:
                    print("numba_tma: stream-K block", cuda.blockIdx.x, "waited past",
                          TIMEOUT, "ns (NUMBA_TMA_WAIT_TIMEOUT_NS) for the partial of block", p)
                    mbarrier.trap()
        else:
            while cuda.atomic.cas(flags, p, 1, 0) != 1:
                pass

    @inline_device
    def sk_first(b, sk_iters, blocks):
        # First stream-K slice of block b (of blocks): b * W // G in 32 bits (the host keeps
        # blocks * W below 2^32).
        return np.int64(intmath.div_u32(b * sk_iters, blocks))

    @inline_device
    def sk_segment(it, hi, num_k):
        # The tile (counted from the first split one) of slice it, and the K slices k0..k1 of
        # it that the share [it, hi) covers.
        t = np.int64(intmath.div_u32(it, num_k))
        k0 = it - t * num_k
        return t, k0, min(num_k, k0 + hi - it)

    @inline_device
    def smem_views():
        # The dynamic shared memory as bytes and floats, and its barriers: the S full and S
        # empty slot barriers, then one per consumer warp for C's loads (cbar), then (ping-
        # pong) the two turn barriers: turn[c] completes when the other consumer warpgroup has
        # waited for the last slot of its tile, so every slot's barriers are at most one phase
        # behind the pass consumer c waits for next (a parity wait cannot tell passes two
        # apart). (numba returns views made in a device function only inside a tuple.)
        dyn64 = cuda.shared.array(0, np.uint64)
        dyn8 = cuda.shared.array(0, np.uint8)
        dynf = cuda.shared.array(0, np.float32)
        return (dyn8, dynf, dyn64[:S], dyn64[S:2 * S], dyn64[2 * S:NBARS],
                dyn64[NBARS:NBARS + 2])

    # Stream-K's parts of the producer and the consumers (rung 4); without stream_k, empty
    # functions, so the other configs' front end never types the stream-K code.
    if SK:
        @inline_device
        def sk_produce(a_map, b_map, tiles, full, empty, cid, nclusters, dp_units, sk_iters,
                       num_k, tiles_m, tiles_n, rank, s, passes):
            it = sk_first(cid, sk_iters, nclusters)
            hi = sk_first(cid + 1, sk_iters, nclusters)
            while it < hi:
                t, k0, k1 = sk_segment(it, hi, num_k)
                row0, col0 = tile_origin(dp_units + t, tiles_m, tiles_n, rank)
                s, passes = load_tile(a_map, b_map, tiles, full, empty, row0, col0,
                                      rank, k0, k1, s, passes)
                it += k1 - k0
            return s, passes

        @inline_device
        def sk_consume(acc, tiles, c_map, c, lane, ct, cw, stage, cid, nclusters, dp_units,
                       sk_iters, num_k, tiles_m, tiles_n, rank, m, n, alpha, beta, words, old,
                       ws, flags, s, passes, boxes, loads):
            # (at most 30 arguments: CPython passes more as *args, which numba cannot inline;
            # the shared-memory views come from smem_views, as in body)
            dyn8, dynf, full, empty, cbar, turn_bars = smem_views()
            it = sk_first(cid, sk_iters, nclusters)
            hi = sk_first(cid + 1, sk_iters, nclusters)
            while it < hi:
                t, k0, k1 = sk_segment(it, hi, num_k)
                s, passes = mma_tile(acc, acc, tiles, full, empty, c, lane, k0, k1, s, passes,
                                     full, False)
                if k0 == 0:
                    # This block finishes the tile: add the partials of the blocks whose
                    # shares start inside it, then store C.
                    t_end = (t + 1) * num_k
                    p = cid + 1
                    while k1 < num_k and p < nclusters and \
                            sk_first(p, sk_iters, nclusters) < t_end:
                        if ct == 0:
                            take_partial(flags, p)
                            cuda.threadfence()
                        cuda.syncwarp()     # (bar.sync is .aligned: warp 0 reconverges)
                        barrier.sync(FIXUP_BARRIER, CT)
                        for i in range(NACC):
                            acc[i] += ws[p * PART + i * CT + ct]
                        p += 1
                    wgmma.fence_operand(acc, NACC)
                    row0, col0 = tile_origin(dp_units + t, tiles_m, tiles_n, rank)
                    boxes, loads = store_tile(acc, acc, dyn8, dynf, c_map, cbar, stage, cw,
                                              lane, row0, col0, m, n, alpha, beta, words,
                                              old, boxes, loads)
                else:
                    # A partial (this share starts inside the tile): to the block's slot.
                    for i in range(NACC):
                        ws[cid * PART + i * CT + ct] = acc[i]
                    cuda.threadfence()
                    barrier.sync(FIXUP_BARRIER, CT)
                    if ct == 0:
                        cuda.atomic.exch(flags, cid, 1)
                it += k1 - k0
            return s, passes, boxes, loads
    else:
        @inline_device
        def sk_produce(a_map, b_map, tiles, full, empty, cid, nclusters, dp_units, sk_iters,
                       num_k, tiles_m, tiles_n, rank, s, passes):
            return s, passes

        @inline_device
        def sk_consume(acc, tiles, c_map, c, lane, ct, cw, stage, cid, nclusters, dp_units,
                       sk_iters, num_k, tiles_m, tiles_n, rank, m, n, alpha, beta, words, old,
                       ws, flags, s, passes, boxes, loads):
            return s, passes, boxes, loads

    # The overlapped epilogue's parts; without OV, an empty function (as stream-K's).
    if OV:
        NWORDS = NACC // 2
        mma_issue, mma_retire = P.mma_issue, P.mma_retire
        pack = warp.pack_f16x2 if out_kind == "f16" else warp.pack_bf16x2

        @inline_device
        def store_packed(c16, dyn8, c_map, stage, lane, crow, col0, m, n, boxes, words, j):
            # Box j (a compile-time constant; none past C_BOXES) of a warp's packed 16 rows.
            if j < C_BOXES:
                ccol = col0 + j * C_COLS
                off = stage + (boxes & (NBUF - 1)) * C_BOX_BYTES
                boxes += 1
                if lane == 0:
                    tma.wait_group_read(STORES_IN_FLIGHT)   # this buffer's last store read it
                cuda.syncwarp()
                for q4 in range(4):
                    for q in range(4):
                        words[q] = c16[((j * 4 + q4) * 2 + (q >> 1)) * 2 + (q & 1)]
                    warp.stmatrix(dyn8, _stmatrix_row(off, lane, q4), words, 4)
                fence.proxy_async_shared()
                cuda.syncwarp()
                if lane == 0:
                    if crow < m and ccol < n:
                        tma.store(c_map, (crow, ccol), dyn8[off:])
                    tma.commit_group()      # (empty when outside: keeps the count)
            return boxes

        @inline_device
        def slot_storing(acc, c16, tiles, full, empty, c, lane, kt, kt1, s, passes, pend, dyn8,
                         c_map, stage, pcrow, pcol, m, n, boxes, words, j):
            # K slice kt of the tile (if there is one) with box j of the packed previous tile
            # (if there is one) stored between its wgmma issue and its wait.
            if kt < kt1:
                mbarrier.wait(full[s:], passes & 1)
                mma_issue(acc, tiles, s, c)
                if pend:
                    boxes = store_packed(c16, dyn8, c_map, stage, lane, pcrow, pcol, m, n,
                                         boxes, words, j)
                mma_retire(acc)
                if lane == 0:
                    release(empty[s:])
                s, passes = next_slot(s, passes)
            elif pend:
                boxes = store_packed(c16, dyn8, c_map, stage, lane, pcrow, pcol, m, n, boxes,
                                     words, j)
            return s, passes, boxes

        @inline_device
        def consume_overlapped(acc, tiles, c_map, c, lane, cw, stage, unit, step, dp_units,
                               num_k, tiles_m, tiles_n, rank, m, n, alpha, words, s, passes,
                               boxes):
            dyn8, dynf, full, empty, cbar, turn_bars = smem_views()
            c16 = cuda.local.array(NWORDS, np.uint32)   # the previous tile, packed
            pend = False
            pcrow = 0
            pcol = 0
            while unit < dp_units:
                row0, col0 = tile_origin(unit, tiles_m, tiles_n, rank)
                unit += step
                for i in range(NACC):
                    acc[i] = 0.0
                wgmma.fence_operand(acc, NACC)
                # (one call per box: j stays a constant, and so every register index)
                s, passes, boxes = slot_storing(acc, c16, tiles, full, empty, c, lane, 0, num_k,
                                                s, passes, pend, dyn8, c_map, stage, pcrow,
                                                pcol, m, n, boxes, words, 0)
                s, passes, boxes = slot_storing(acc, c16, tiles, full, empty, c, lane, 1, num_k,
                                                s, passes, pend, dyn8, c_map, stage, pcrow,
                                                pcol, m, n, boxes, words, 1)
                s, passes, boxes = slot_storing(acc, c16, tiles, full, empty, c, lane, 2, num_k,
                                                s, passes, pend, dyn8, c_map, stage, pcrow,
                                                pcol, m, n, boxes, words, 2)
                s, passes, boxes = slot_storing(acc, c16, tiles, full, empty, c, lane, 3, num_k,
                                                s, passes, pend, dyn8, c_map, stage, pcrow,
                                                pcol, m, n, boxes, words, 3)
                # (slot_storing's slot without a box, written out: through slot_storing the
                # loop computed its slot addresses in vector registers, 12 R2UR more per pass)
                for kt in range(4, num_k):
                    mbarrier.wait(full[s:], passes & 1)
                    mma_issue(acc, tiles, s, c)
                    mma_retire(acc)
                    if lane == 0:
                        release(empty[s:])
                    s, passes = next_slot(s, passes)
                for w in range(NWORDS):
                    c16[w] = pack(alpha * acc[2 * w], alpha * acc[2 * w + 1])
                pend = True
                pcrow = row0 + (cw >> 2) * WG_ROWS + (cw & 3) * SLAB_ROWS
                pcol = col0
            if pend:
                for j in range(4):      # (C_BOXES <= 4 boxes of 64 columns)
                    boxes = store_packed(c16, dyn8, c_map, stage, lane, pcrow, pcol, m, n,
                                         boxes, words, j)
            return s, passes, boxes
    else:
        @inline_device
        def consume_overlapped(acc, tiles, c_map, c, lane, cw, stage, unit, step, dp_units,
                               num_k, tiles_m, tiles_n, rank, m, n, alpha, words, s, passes,
                               boxes):
            return s, passes, boxes

    # (the kernel's whole body, shared by both kernel signatures)
    @inline_device
    def body(a_map, b_map, c_map, m, n, k, tiles_m, tiles_n, alpha, beta, ws, flags,
             dp_units, sk_iters):
        dyn8, dynf, full, empty, cbar, turn_bars = smem_views()
        first = smem.aligned_offset(dyn8, BAR_BYTES, SWIZZLE_ALIGN)
        tiles = dyn8[first:]
        tid = cuda.threadIdx.x
        wg = wgmma.warpgroup_index()          # warp-uniform: descriptors in UR registers
        rank = 0
        cid = cuda.blockIdx.x
        nclusters = cuda.gridDim.x
        if CM > 1:
            rank = cluster.cta_rank()
            cid = cid // CM
            nclusters = nclusters // CM
        num_k = (k + BK - 1) // BK
        if not SK:
            dp_units = (tiles_m + CM - 1) // CM * tiles_n

        if tid == 0:
            _prefetch_maps(a_map, b_map, c_map)
            for s in range(S):
                mbarrier.init(full[s:], 1)
                mbarrier.init(empty[s:], EMPTY_ARRIVALS)
            for w in range(CONSUMER_WARPS):
                mbarrier.init(cbar[w:], 1)
            if PP:
                mbarrier.init(turn_bars[0:], 1)
                mbarrier.init(turn_bars[1:], 1)
            mbarrier.fence_init()
        if CM > 1:
            # The peer's barriers exist before anything multicasts or arrives remotely:
            # fence_init released them at cluster scope, so a relaxed arrive suffices (a
            # releasing one adds a GPU-scope MEMBAR per thread).
            cluster.arrive_relaxed()
            cluster.wait()
        else:
            cuda.syncthreads()
        _start_dependent()

        if wg == 0:
            # Producer: one thread issues every load, running ahead across tiles.
            wgmma.setmaxnreg_dec(PRODUCER_REGS)
            if tid == 0:
                s = 0
                passes = 0
                unit = cid
                while unit < dp_units:  # (a range with a run-time step divides in 64 bits)
                    row0, col0 = tile_origin(unit, tiles_m, tiles_n, rank)
                    unit += nclusters
                    s, passes = load_tile(a_map, b_map, tiles, full, empty, row0, col0, rank,
                                          0, num_k, s, passes)
                s, passes = sk_produce(a_map, b_map, tiles, full, empty, cid, nclusters,
                                       dp_units, sk_iters, num_k, tiles_m, tiles_n, rank, s,
                                       passes)
                if CM > 1:
                    drain(empty, s, passes)
        else:
            wgmma.setmaxnreg_inc(CONSUMER_REGS)
            c = wg - 1
            lane = tid & 31
            ct = tid - 128                          # consumer thread 0..255
            cw = ct >> 5                            # consumer warp 0..7: 16 rows of C each
            stage = first + RING_BYTES + cw * (NBUF * C_BOX_BYTES)
            acc = cuda.local.array(NACC, np.float32)
            acc2 = cuda.local.array(NACC, np.float32)     # (unused, so gone, when HALVES = 1)
            words = cuda.local.array(4, np.uint32)
            old = cuda.local.array(4, np.uint32)
            s = 0
            passes = 0
            boxes = 0                               # boxes this warp has staged (next buffer)
            loads = 0                               # C boxes loaded for beta (cbar parity)
            unit = cid
            step = nclusters
            turn = turn_bars if PP else full       # (full: a placeholder, never arrived on)
            lead = PP and (ct & 127) == 0
            turns = 0                               # this warpgroup's waits for its turn
            if PP:
                # Ping-pong: the block's tiles alternate between the consumer warpgroups, each
                # skipping the other's slots in the ring, whose order makes their main loops
                # take turns: one's epilogue runs while the other's wgmmas keep the tensor
                # cores busy.
                unit += c * nclusters
                step = 2 * nclusters
                if c == 1:
                    s, passes = skip_slots(s, passes, num_k)
            if OV:
                s, passes, boxes = consume_overlapped(
                    acc, tiles, c_map, c, lane, cw, stage, unit, step, dp_units, num_k,
                    tiles_m, tiles_n, rank, m, n, alpha, words, s, passes, boxes)
            else:
                while unit < dp_units:
                    row0, col0 = tile_origin(unit, tiles_m, tiles_n, rank)
                    if PP and (c == 1 or unit != cid):
                        mbarrier.wait(turn[c:], turns & 1)
                        turns += 1
                    unit += step
                    s, passes = mma_tile(acc, acc2, tiles, full, empty, c, lane, 0, num_k, s,
                                         passes, turn[1 - c:], lead)
                    boxes, loads = store_tile(acc, acc2, dyn8, dynf, c_map, cbar, stage, cw,
                                              lane, row0, col0, m, n, alpha, beta, words, old,
                                              boxes, loads)
                    if PP:
                        s, passes = skip_slots(s, passes, num_k)
            s, passes, boxes, loads = sk_consume(
                acc, tiles, c_map, c, lane, ct, cw, stage, cid, nclusters, dp_units, sk_iters,
                num_k, tiles_m, tiles_n, rank, m, n, alpha, beta, words, old, ws, flags, s,
                passes, boxes, loads)
            if lane == 0:
                tma.wait_group_read(0)
        # (The block stays resident until its bulk stores have read their sources, and, in a
        # cluster, until the producer's drain has seen every remote arrive land.)

    if SK:
        @cuda.jit(launch_bounds=(THREADS, 1))
        def gemm(a_map, b_map, c_map, m, n, k, tiles_m, tiles_n, alpha, beta, ws, flags,
                 dp_units, sk_iters):
            body(a_map, b_map, c_map, m, n, k, tiles_m, tiles_n, alpha, beta, ws, flags,
                 dp_units, sk_iters)
    else:
        @cuda.jit(launch_bounds=(THREADS, 1))
        def gemm(a_map, b_map, c_map, m, n, k, tiles_m, tiles_n, alpha, beta):
            body(a_map, b_map, c_map, m, n, k, tiles_m, tiles_n, alpha, beta, None, None, 0, 0)

    return gemm
