"""The wgmma GEMM, one block per tile (``WgmmaConfig(persistent=False)``): what ``matmul()`` runs
where the tiles fit in one wave.

A producer warpgroup and two consumer warpgroups, each one m64 half of the 128-row tile (or
``consumers=1``: one warpgroup takes both halves, 256 threads). The producer's one thread streams
the K slices through the ring of ``stages`` slots (a power of two); each consumer runs the wgmma
main loop and releases the slots. After a named barrier of the consumers the ring becomes the
warps' slabs of C (:func:`.epilogue.slab_epilogue`). With ``cluster_n=2`` CTA pairs along N take
adjacent tiles of one tile row and multicast A, each loading one 64-row half.

Registers move from producer to consumers (``setmaxnreg``) only where the accumulators need it
(128 per thread at ``bn = 256``); up to ``bn = 128`` every warp keeps the kernel's 168 and the
consumers skip ``setmaxnreg.inc``'s wait for the producer's ``dec``. A single CTA's barrier
thread issues the first slot before the block barrier (its own barriers need nobody else); a
pair's multicast waits for the peer's barriers.
"""

import functools

import numpy as np

from ..._frontend import cuda
from ..._bridge import inline_device
from ... import barrier, cluster, fence, griddep, mbarrier, tma, warp, wgmma
from .config import CONSUMER_REGS, CONSUMER_WARPS, PRODUCER_REGS, SWIZZLE_ALIGN
from .epilogue import slab_epilogue
from .frame import kernel_entry
from .mainloop import wgmma_parts, zeroing
from .prologue import meet, ring_setup, start_dependent
from .ring import BK, ring, shared_views, slice_loader
from .scheduler import raster
from ... import smem

__all__ = ["kernel"]


@functools.cache
def kernel(cfg, spec):
    """The ``@cuda.jit`` kernel of ``cfg`` (one block per tile) for ``spec``."""
    BN, S, CN, NC = cfg.bn, cfg.stages, cfg.cluster_n, cfg.consumers
    LOG_S = S.bit_length() - 1
    ONE = NC == 1               # one consumer warpgroup takes both m64 halves of the tile
    NTHREADS = 128 * (1 + NC)
    P = wgmma_parts(BN, cfg.mma_pipe, spec.a_kmajor, spec.b_kmajor, spec.in_kind, whole=ONE)
    PIPE = cfg.mma_pipe
    NACC = P.NACC
    zero = zeroing(NACC)
    BAR_BYTES = 8 * (2 * S + CONSUMER_WARPS)
    issue_slot = slice_loader(cfg.bm, BN, 1, spec.a_kmajor, spec.b_kmajor, CN)
    R = ring(S, P.STAGE_BYTES, issue_slot, CN)
    producer_acquire, producer_commit = R.producer_acquire, R.producer_commit
    consumer_wait, consumer_release = R.consumer_wait, R.consumer_release
    mma_slot, fence_accumulators = P.mma_slot, P.fence_accumulators
    views = shared_views(S, CONSUMER_WARPS)
    # every consumer warp releases each slot (a pair's: both CTAs', as both producers write it)
    setup = ring_setup(S, 4 * NC * CN, CONSUMER_WARPS)
    meet_all = meet(CN)
    tile_origin = raster(cfg.group_m, 1, cfg.bm, BN)
    E = slab_epilogue(BN, spec.out_kind, spec.has_beta, spec.epilogue)
    load_old_slab, write_slab, store_slab = E.load_old_slab, E.write_slab, E.store_slab
    has_beta = spec.has_beta
    EXCHANGE = NACC > 64
    EARLY = 1 if CN == 1 else 0

    @inline_device
    def produce(a_map, b_map, tiles, full, empty, num_k, row0, col0, rank):
        # The producer's one thread: every slot after the early one; a pair's producer then
        # drains its ring (the producer tail: no peer's arrive lands on it after exit).
        for kt in range(min(EARLY, num_k), num_k):
            s = kt & (S - 1)
            producer_acquire(empty, s, kt >> LOG_S)
            producer_commit(a_map, b_map, tiles, full, s, kt, row0, col0, rank)
        if CN > 1:
            for kt in range(max(num_k - S, 0), num_k):
                mbarrier.wait(empty[kt & (S - 1):], (kt >> LOG_S) & 1)

    @inline_device
    def consume(acc, acc2, tiles, full, empty, c, lane, num_k):
        zero(acc)
        if ONE:
            zero(acc2)
        fence_accumulators(acc, acc2)
        for kt in range(num_k):
            s = kt & (S - 1)
            consumer_wait(full, s, kt >> LOG_S)
            mma_slot(acc, acc2, tiles, s, c)
            # The group of slot kt - PIPE is done: give that slot back to the producer.
            if kt >= PIPE and lane == 0:
                consumer_release(empty, (kt - PIPE) & (S - 1))
        wgmma.wait_group(0)
        fence_accumulators(acc, acc2)
        if CN > 1 and lane == 0:
            # ... and the last PIPE slots too, which the producers' drain waits for.
            for kt in range(max(num_k - PIPE, 0), num_k):
                consumer_release(empty, kt & (S - 1))

    @inline_device
    def finish(acc, acc2, tiles, dynf, first, c_map, cbar, tid, lane, row0, col0, m, n, alpha,
               beta, ep):
        # Slab cw is consumer warp cw's of two consumers; consumer warp cw's (first half) and
        # cw + 4's (second) of one.
        cw = (tid >> 5) - 4
        if has_beta:
            load_old_slab(tiles, c_map, cbar, cw, lane, row0, col0, m, n)
            if ONE:
                load_old_slab(tiles, c_map, cbar, cw + 4, lane, row0, col0, m, n)
        write_slab(acc, tiles, dynf, first, cbar, cw, lane, row0, col0, m, n, alpha, beta, ep)
        if ONE:
            write_slab(acc2, tiles, dynf, first, cbar, cw + 4, lane, row0, col0, m, n, alpha,
                       beta, ep)
        fence.proxy_async_shared()
        cuda.syncwarp()
        store_slab(c_map, tiles, cw, lane, row0, col0, m, n, ep)
        if ONE:
            store_slab(c_map, tiles, cw + 4, lane, row0, col0, m, n, ep)
        if lane == 0:
            tma.commit_group()
            tma.wait_group_read(0)

    @inline_device
    def body(a_map, b_map, c_map, m, n, k, tiles_m, tiles_n, alpha, beta, ep):
        dyn8, dynf, full, empty, cbar, _ = views()
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
            setup(a_map, b_map, c_map, full, empty, cbar)
            mbarrier.fence_init()
            if EARLY and num_k > 0:
                griddep.wait()                  # the loads read what the kernel before wrote
                producer_commit(a_map, b_map, tiles, full, 0, 0, row0, col0, rank)
        meet_all()
        start_dependent()

        if wg == 0:
            # It returns here, so nothing after this branch runs under the producer's 56.
            if EXCHANGE:
                wgmma.setmaxnreg_dec(PRODUCER_REGS)
            if tid < 32 and warp.elect_one():     # (ptxas issues its copies as they are)
                produce(a_map, b_map, tiles, full, empty, num_k, row0, col0, rank)
            return

        if EXCHANGE:
            wgmma.setmaxnreg_inc(CONSUMER_REGS)
        lane = tid & 31
        acc = cuda.local.array(NACC, np.float32)
        acc2 = cuda.local.array(NACC, np.float32)      # (one consumer: the second half's rows)
        consume(acc, acc2, tiles, full, empty, wg - 1, lane, num_k)
        # Every consumer warp is past its last wgmma (named barrier 1: the producer has left):
        # the ring becomes the warps' slabs of C.
        barrier.sync(1, NTHREADS - 128)
        finish(acc, acc2, tiles, dynf, first, c_map, cbar, tid, lane, row0, col0, m, n, alpha,
               beta, ep)

    if spec.epilogue is not None:       # (the user's epilogue arguments come last)
        return kernel_entry(body, NTHREADS, (), (), len(spec.epilogue.argtypes))

    @cuda.jit(launch_bounds=(NTHREADS, 1))
    def gemm(a_map, b_map, c_map, m, n, k, tiles_m, tiles_n, alpha, beta):
        body(a_map, b_map, c_map, m, n, k, tiles_m, tiles_n, alpha, beta, None)

    return gemm
