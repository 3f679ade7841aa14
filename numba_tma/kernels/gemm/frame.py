"""The persistent wgmma GEMM's frame, which every persistent variant fills with its consumer.

One block per SM (or one cluster of ``cluster_m`` CTAs per SM pair) walks the tiles in raster
order (:mod:`.scheduler`). 384 threads: warpgroup 0 is the producer, whose one thread streams
``BK``-deep K slices of A and B through the ring (:mod:`.ring`), running ahead across tile
boundaries so the next tile's first slots load while the consumers store this one; warpgroups 1
and 2 are the consumers, whose loop over their tiles is the variant's (``consume``).

``setmaxnreg``: the kernel is compiled for 384 threads x 168 registers (``launch_bounds=(384,
1)``); the producer gives registers back (``setmaxnreg_dec(56)``) and each consumer takes 224,
which the 128 accumulators of a 128 x 256 tile need.

Slots are counted across tiles (slot ``s``, ring pass ``passes``); the consumers release each
slot once the wgmma group reading it has retired. Each consumer warp stages C through
``c_buffers`` 16 x 128-byte boxes of its own (not the ring, which the producer is refilling),
at ``stage``. With ``cluster_m = 2`` CTA ``r`` of a cluster loads rows ``[r, r + 1) * bn / 2``
of every B slice and multicasts them to both CTAs; a slot's ``empty`` barrier then counts the
consumer warps of both. The pair meets once, at the start; at the end each producer drains its
``empty`` barriers instead (the ring's ``producer_tail``).
"""

import functools

import numpy as np

from ..._frontend import cuda

from ..._bridge import inline_device
from ... import mbarrier, smem, tma, warp, wgmma
from .config import (CONSUMER_REGS, CONSUMER_WARPS, C_BOX_BYTES, PRODUCER_REGS, SWIZZLE_ALIGN,
                     THREADS, ring_bytes)
from .mainloop import slice_k, tile_mainloop, wgmma_parts
from .prologue import meet, ring_setup, start_dependent
from .ring import (SCALE_ROWS, Parts, ring, scale_rows, scale_rows_end, shared_views,
                   slice_loader)
from .scales import BLOCK_K
from .scheduler import cluster_place, raster
from .stream_k import stream_k_parts

__all__ = ["persistent_parts", "persistent_kernel", "kernel_entry"]


@functools.cache
def persistent_parts(cfg, spec, whole=False, turns=False):
    """The parts a persistent variant assembles, as a namespace: ``P`` (the wgmma parts),
    ``R`` (the ring), ``tile_origin``, ``views`` (the shared memory), ``mma_tile`` (a tile's
    main loop), and the constants ``S``, ``BAR_BYTES``, ``RING_BYTES``, ``NBARS``.
    ``whole``: each consumer warpgroup its own tile (ping-pong); ``turns``: its main loop hands
    the turn to the other. ``BK``: K elements per slice; ``SCALED``: the kernel takes fp8
    scales (``spec.scale``); ``EPI``: the user's epilogue (``spec.epilogue``), whose arguments
    the kernel takes last."""
    S, CM = cfg.stages, cfg.cluster_m
    P = wgmma_parts(cfg.bn, cfg.mma_pipe, spec.a_kmajor, spec.b_kmajor, spec.in_kind, cfg.bm,
                    whole)
    bk = slice_k(spec.in_kind)
    issue_slot = slice_loader(cfg.bm, cfg.bn, CM, spec.a_kmajor, spec.b_kmajor, bk=bk)
    BLOCK = spec.scale == "block"
    R = ring(S, P.STAGE_BYTES, issue_slot, CM, two_b=BLOCK and cfg.bn > BLOCK_K)
    NBARS = 2 * S + CONSUMER_WARPS
    return Parts(P=P, R=R, S=S, BK=bk, SCALED=bool(spec.scale), BLOCK=BLOCK,
                 EPI=spec.epilogue, NBARS=NBARS,
                 # (with block scales, each slot's scales after the barriers)
                 BAR_BYTES=(scale_rows_end(S, CONSUMER_WARPS, cfg.extra_barriers) if BLOCK
                            else 8 * (NBARS + cfg.extra_barriers)),
                 scale_rows=scale_rows(S, CONSUMER_WARPS, cfg.extra_barriers),
                 RING_BYTES=ring_bytes(cfg),
                 tile_origin=raster(cfg.group_m, CM, cfg.bm, cfg.bn),
                 views=shared_views(S, CONSUMER_WARPS, cfg.extra_barriers),
                 mma_tile=tile_mainloop(P, R, cfg.mma_pipe, turns))


_BASE_PARAMS = ("a_map", "b_map", "c_map", "m", "n", "k", "tiles_m", "tiles_n", "alpha", "beta")
_SK_PARAMS = ("ws", "flags", "dp_units", "sk_iters")
_SCALE_PARAMS = ("sa", "sb")


def kernel_entry(body, threads, params, passed, n_epilogue_args):
    """The ``@cuda.jit`` kernel ``gemm(a_map, ..., beta, *params, e0, e1, ...)`` that calls
    ``body(a_map, ..., beta, *passed, (e0, e1, ...))``: a user epilogue's arguments are as many
    as the user gives, so this entry point's source is written for their number."""
    args = tuple(f"e{i}" for i in range(n_epilogue_args))
    signature = ", ".join(_BASE_PARAMS + tuple(params) + args)
    call = ", ".join(_BASE_PARAMS + tuple(passed) + ("(" + "".join(a + ", " for a in args)
                                                     + ")",))
    namespace = {"body": body, "__name__": __name__}
    exec(f"def gemm({signature}):\n    body({call})\n", namespace)
    return cuda.jit(launch_bounds=(threads, 1))(namespace["gemm"])


@inline_device
def _no_barriers(extra):
    pass


def persistent_kernel(cfg, F, consume, *, empty_arrivals=CONSUMER_WARPS, init_extra=None,
                      stream_k=False):
    """The ``@cuda.jit`` persistent kernel of ``cfg`` from the variant's parts ``F``
    (:func:`persistent_parts`; the frame takes only the ring, the raster and the shared-memory
    layout of them, the same for every ``whole`` and ``turns``) around the variant's
    ``consume(tiles, first, c_map, c, lane, ct, cw, stage, cid, nclusters, dp_units, sk_iters,
    num_k, tiles_m, tiles_n, rank, m, n, alpha, beta, ws, flags, sa, sb, ep)``, run by every
    consumer thread (``c`` its warpgroup 0 or 1, ``ct`` its thread 0..255, ``cw`` its warp 0..7,
    ``stage`` the byte offset of its warp's C boxes); the consumers' units are
    ``cid, cid + nclusters, ...`` below ``dp_units``.

    ``empty_arrivals``: consumer warps of one CTA that release each slot; ``init_extra(extra)``:
    the barrier thread's set-up of the variant's ``cfg.extra_barriers``; ``stream_k``: the
    kernel also takes ``(ws, flags, dp_units, sk_iters)``, a workspace, flags and the split
    (:mod:`.stream_k`; else every unit is taken whole), and the producer loads the block's
    share of the split tiles' slices after its whole tiles. With ``F.SCALED`` the kernel takes
    fp8 scales ``(sa, sb)`` after beta (:mod:`.scales`; before the stream-K parameters); else
    ``consume`` gets None for them. With ``F.EPI`` it takes the user epilogue's arguments last,
    which ``consume`` gets as the tuple ``ep`` (else None)."""
    S, CM, NBUF = cfg.stages, cfg.cluster_m, cfg.c_buffers
    BAR_BYTES, RING_BYTES = F.BAR_BYTES, F.RING_BYTES
    views, tile_origin = F.views, F.tile_origin
    load_tile, producer_tail = F.R.load_tile, F.R.producer_tail
    load_tile_scaled, BLOCK = F.R.load_tile_scaled, F.BLOCK
    scale_rows = F.scale_rows
    setup = ring_setup(S, empty_arrivals * CM, CONSUMER_WARPS)
    meet_all = meet(CM)
    place = cluster_place(CM)
    init_extra = init_extra or _no_barriers
    SK = stream_k
    BK, SCALED = F.BK, F.SCALED
    if SK:
        assert CM == 1
        walk = stream_k_parts(F.P.NACC, F.RING_BYTES)
        share, segment = walk.share, walk.segment

    @inline_device
    def produce_tile(a_map, b_map, tiles, full, empty, row0, col0, rank, kt0, kt1, s, passes, m,
                     sa, sb):
        # K slices kt0..kt1 of the tile at (row0, col0) into the ring (with block scales, each
        # slice's beside it).
        if BLOCK:
            # (sa: A's scales K block by row, rows padded to whole 16 bytes; a cluster's second
            # CTA holds a tile past M where the row tiles are odd in number: it copies the last
            # 16 bytes of rows, never stored, so that its slots complete as the others')
            rows_in = min(SCALE_ROWS, m - row0)
            srow = row0
            if rows_in <= 0:
                rows_in = 4
                srow = sa.shape[1] - 4
            nb = col0 // BLOCK_K        # (and the next, clamped: 128 x 192 tiles)
            return load_tile_scaled(a_map, b_map, tiles, full, empty, row0, col0, rank, kt0,
                                    kt1, s, passes, scale_rows()[0], sb[nb],
                                    sb[min(nb + 1, sb.shape[0] - 1)], sa[:, srow],
                                    (rows_in * 4 + 15) // 16 * 16)
        return load_tile(a_map, b_map, tiles, full, empty, row0, col0, rank, kt0, kt1, s, passes)

    @inline_device
    def body(a_map, b_map, c_map, m, n, k, tiles_m, tiles_n, alpha, beta, ws, flags,
             dp_units, sk_iters, sa, sb, ep):
        dyn8, dynf, full, empty, cbar, extra = views()
        first = smem.aligned_offset(dyn8, BAR_BYTES, SWIZZLE_ALIGN)
        tiles = dyn8[first:]
        tid = cuda.threadIdx.x
        wg = wgmma.warpgroup_index()          # warp-uniform: descriptors in UR registers
        rank, cid, nclusters = place()
        num_k = (k + BK - 1) // BK
        if not SK:
            dp_units = (tiles_m + CM - 1) // CM * tiles_n

        if tid == 0:
            setup(a_map, b_map, c_map, full, empty, cbar)
            init_extra(extra)
            mbarrier.fence_init()
        meet_all()
        start_dependent()

        if wg == 0:
            # Producer: one thread issues every load, running ahead across tiles (elected in
            # warp 0, so that ptxas issues each copy as it is: warp.elect_one).
            wgmma.setmaxnreg_dec(PRODUCER_REGS)
            if tid < 32 and warp.elect_one():
                s, passes = np.uint32(0), np.uint32(0)   # the ring position (.ring)
                unit = cid
                while unit < dp_units:  # (a range with a run-time step divides in 64 bits)
                    row0, col0 = tile_origin(unit, tiles_m, tiles_n, rank)
                    unit += nclusters
                    s, passes = produce_tile(a_map, b_map, tiles, full, empty, row0, col0, rank,
                                             0, num_k, s, passes, m, sa, sb)
                if SK:
                    it, hi = share(cid, sk_iters, nclusters)
                    while it < hi:
                        t, k0, k1 = segment(it, hi, num_k)
                        row0, col0 = tile_origin(dp_units + t, tiles_m, tiles_n, rank)
                        s, passes = produce_tile(a_map, b_map, tiles, full, empty, row0, col0,
                                                 rank, k0, k1, s, passes, m, sa, sb)
                        it += k1 - k0
                if CM > 1:
                    producer_tail(empty, s, passes)
        else:
            wgmma.setmaxnreg_inc(CONSUMER_REGS)
            lane = tid & 31
            ct = tid - 128                          # consumer thread 0..255
            cw = ct >> 5                            # consumer warp 0..7: 16 rows of C each
            stage = first + RING_BYTES + cw * (NBUF * C_BOX_BYTES)
            consume(tiles, first, c_map, wg - 1, lane, ct, cw, stage, cid, nclusters, dp_units,
                    sk_iters, num_k, tiles_m, tiles_n, rank, m, n, alpha, beta, ws, flags, sa,
                    sb, ep)
            if lane == 0:
                tma.wait_group_read(0)
        # (The block stays resident until its bulk stores have read their sources, and, in a
        # cluster, until the producer's drain has seen every remote arrive land.)

    if F.EPI is not None or (SK and SCALED):
        params = (_SCALE_PARAMS if SCALED else ()) + (_SK_PARAMS if SK else ())
        passed = ((_SK_PARAMS if SK else ("None", "None", "0", "0"))
                  + (_SCALE_PARAMS if SCALED else ("None", "None")))
        return kernel_entry(body, THREADS, params, passed,
                            0 if F.EPI is None else len(F.EPI.argtypes))
    if SK:
        @cuda.jit(launch_bounds=(THREADS, 1))
        def gemm(a_map, b_map, c_map, m, n, k, tiles_m, tiles_n, alpha, beta, ws, flags,
                 dp_units, sk_iters):
            body(a_map, b_map, c_map, m, n, k, tiles_m, tiles_n, alpha, beta, ws, flags,
                 dp_units, sk_iters, None, None, None)
    elif SCALED:
        @cuda.jit(launch_bounds=(THREADS, 1))
        def gemm(a_map, b_map, c_map, m, n, k, tiles_m, tiles_n, alpha, beta, sa, sb):
            body(a_map, b_map, c_map, m, n, k, tiles_m, tiles_n, alpha, beta, None, None, 0, 0,
                 sa, sb, None)
    else:
        @cuda.jit(launch_bounds=(THREADS, 1))
        def gemm(a_map, b_map, c_map, m, n, k, tiles_m, tiles_n, alpha, beta):
            body(a_map, b_map, c_map, m, n, k, tiles_m, tiles_n, alpha, beta, None, None, 0, 0,
                 None, None, None)

    return gemm
