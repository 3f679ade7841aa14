"""The persistent wgmma GEMM with the plain epilogue (``WgmmaConfig()``): what ``matmul()`` runs
on large problems where a block's tiles are stored between its main loops (one tile per block,
f32 output, ``beta``), in 128 x 256, 256 x 128 (``bm=256``: each consumer two m64 halves) or
128 x 192 tiles, alone or in CTA pairs along M that multicast B (``cluster_m=2``).

Each consumer warpgroup computes its m64 half (or halves) of every tile of the block in turn
(:func:`.mainloop.tile_mainloop`), then stores it box by box through its warps' staging boxes
(:func:`.epilogue.staged_epilogue`) while the producer already loads the next tile's slots.

fp8 (:mod:`.scales`): per-tensor scales fold into alpha, per-row/column ones multiply the
finished accumulators, and block scales (or ``spec.promote``) take the promoting main loop,
whose slices' partial products are added into the accumulators (times their block scales): two
slices' products in turn at 128 x 128 or 128 x 64, one at 128 x 192 (``bn > BLOCK_K``).

With a :class:`~.stream_k.StreamKConfig` each block then takes its share of the last round's
tiles' K slices (:mod:`.stream_k`): a share that starts inside a tile leaves its accumulators in
the workspace; the one that holds the tile's first slice adds them and finishes the tile (row
scales, the epilogue).
"""

import functools

import numpy as np

from ..._frontend import cuda, front_end
from ..._bridge import inline_device, tail
from .config import CONSUMER_THREADS, CONSUMER_WARPS, WG_ROWS
from .epilogue import staged_epilogue
from .frame import persistent_kernel, persistent_parts
from .mainloop import zeroing
from .scales import (BLOCK_K, promoting_mainloop, rowcol_scaler, serial_promoting_mainloop,
                     slot_releaser, tensor_alpha, thread_row)
from .stream_k import stream_k_parts

__all__ = ["kernel"]


@functools.cache
def kernel(cfg, spec):
    """The ``@cuda.jit`` kernel of ``cfg`` (persistent, plain epilogue) for ``spec``."""
    F = persistent_parts(cfg, spec)
    NACC = F.P.NACC
    views, tile_origin, mma_tile = F.views, F.tile_origin, F.mma_tile
    scale_rows = F.scale_rows
    store_tile = staged_epilogue(cfg.bn, spec.out_kind, spec.has_beta, cfg.c_buffers, cfg.bm,
                                 F.P.HALVES, False, spec.epilogue)
    SCALE, TM = spec.scale, cfg.bm
    scale_tile = rowcol_scaler(NACC, F.P.HALVES)
    PROMOTE = spec.promoted
    SK = cfg.stream_k                   # the last round's tiles split along K (.stream_k)
    if SK:
        walk = stream_k_parts(NACC, F.RING_BYTES)
        share, segment, fix_up, leave_partial = (walk.share, walk.segment, walk.fix_up,
                                                 walk.leave_partial)
    SERIAL = cfg.bn > BLOCK_K           # 128 x 192: one slice's product beside the accumulators
    if PROMOTE:
        assert F.P.HALVES == 1 and cfg.mma_pipe == 0
        assert BLOCK_K % cfg.bn == 0 or cfg.bn == 192
        if SERIAL:
            mma_serial = serial_promoting_mainloop(F.P, F.R, SCALE == "block")
        else:
            mma_promoted = promoting_mainloop(F.P, F.R, SCALE == "block")

    # A consumer whose m64 rows all lie past M (a product of up to 64 rows, or the last tile
    # row's second half) issues no wgmma: it gives its slots back as they fill, and the other
    # consumer has the tensor cores to itself. Only where ptxas keeps the wgmma descriptors
    # uniform beside the branch: not with mma_pipe=1 (72 R2UR inside the wgmma groups of the
    # 16-bit CLUSTER kernel), nor in the promoting loop of 128 x 128 tiles with block scales
    # or in CTA pairs (2 to 24 R2UR; block scales measured slower at 4096^3: docs/fp8.md);
    # not on numba-cuda-mlir, whose build of the branch spills 32 bytes.
    SKIPS_EMPTY_HALF = (F.P.HALVES == 1 and cfg.mma_pipe == 0
                        and not (PROMOTE and cfg.bn == 128
                                 and (SCALE == "block" or cfg.cluster_m > 1))
                        and front_end() != "numba-cuda-mlir")
    consumer_wait, next_slot = F.R.consumer_wait, F.R.next_slot
    release = slot_releaser(F.R, SCALE == "block")      # (the main loops' arrivals on a slot)
    zero = zeroing(NACC)

    @inline_device
    def has_rows(row0, c, m):
        # Consumer c's m64 half of the tile at row0 holds rows of C (else its products are
        # zeros: nothing of A lies there).
        return row0 + c * WG_ROWS < m

    @inline_device
    def pass_slots(acc, full, empty, lane, kt0, kt1, s, passes):
        zero(acc)
        for kt in range(kt0, kt1):
            consumer_wait(full, s, passes)
            release(empty, s, lane)
            s, passes = next_slot(s, passes)
        return s, passes

    @inline_device
    def product(acc, acc2, part, part2, tiles, full, empty, c, lane, kt0, kt1, s, passes, r,
                row0, col0, m):
        # The consumer's share of the tile's product over K slices kt0..kt1.
        if SKIPS_EMPTY_HALF and not has_rows(row0, c, m):
            return pass_slots(acc, full, empty, lane, kt0, kt1, s, passes)
        if PROMOTE and SERIAL:
            # (B's second N block starts at column 128 of an even tile column, 64 of an odd)
            return mma_serial(acc, part, tiles, full, empty, c, lane, kt0, kt1, s, passes,
                              scale_rows()[0], r - row0, BLOCK_K - col0 % BLOCK_K)
        if PROMOTE:
            return mma_promoted(acc, part, part2, tiles, full, empty, c, lane, kt0, kt1, s,
                                passes, scale_rows()[0], r - row0)
        return mma_tile(acc, acc2, tiles, full, empty, c, lane, kt0, kt1, s, passes, full, False)

    @inline_device
    def finish(acc, acc2, dyn8, dynf, c_map, cbar, stage, cw, lane, r, row0, col0, m, n, alpha,
               beta, words, old, boxes, loads, sa, sb, ep):
        # The finished tile (its whole K sum) to C.
        if SCALE == "row":
            scale_tile(acc, acc2, sa, sb, r, col0, lane, m, n)
        return store_tile(acc, acc2, dyn8, dynf, c_map, cbar, stage, cw, lane, row0, col0, m, n,
                          alpha, beta, words, old, boxes, loads, ep)

    @inline_device
    def consume(tiles, first, c_map, c, lane, ct, cw, stage, cid, nclusters, dp_units,
                sk_iters, num_k, tiles_m, tiles_n, rank, m, n, alpha, beta, ws, flags, sa, sb,
                ep):
        dyn8, dynf, full, empty, cbar, extra = views()
        acc = cuda.local.array(NACC, np.float32)
        acc2 = cuda.local.array(NACC, np.float32)     # (unused, so gone, when HALVES = 1)
        part = cuda.local.array(NACC, np.float32)     # (promoted: slices' products, in turn)
        part2 = cuda.local.array(NACC, np.float32)
        words = cuda.local.array(4, np.uint32)
        old = cuda.local.array(4, np.uint32)
        s, passes = np.uint32(0), np.uint32(0)   # the ring position (.ring)
        boxes = 0                               # boxes this warp has staged (next buffer)
        loads = 0                               # C boxes loaded for beta (cbar parity)
        if SCALE == "tensor":
            alpha = tensor_alpha(alpha, sa, sb)
        unit = cid
        while unit < dp_units:
            row0, col0 = tile_origin(unit, tiles_m, tiles_n, rank)
            unit += nclusters
            r = thread_row(row0, cw, lane, TM)
            s, passes = product(acc, acc2, part, part2, tiles, full, empty, c, lane, 0, num_k, s,
                                passes, r, row0, col0, m)
            boxes, loads = finish(acc, acc2, dyn8, dynf, c_map, cbar, stage, cw, lane, r, row0,
                                  col0, m, n, alpha, beta, words, old, boxes, loads, sa, sb, ep)
        if SK:
            # This block's share of the split tiles' slices (.stream_k)
            it, hi = share(cid, sk_iters, nclusters)
            while it < hi:
                t, k0, k1 = segment(it, hi, num_k)
                row0, col0 = tile_origin(dp_units + t, tiles_m, tiles_n, rank)
                r = thread_row(row0, cw, lane, TM)
                s, passes = product(acc, acc2, part, part2, tiles, full, empty, c, lane, k0, k1,
                                    s, passes, r, row0, col0, m)
                live = has_rows(row0, c, m)
                if k0 == 0:
                    fix_up(acc, ws, flags, ct, cid, nclusters, sk_iters, t, k1, num_k, live,
                           tail(dynf, first >> 2), extra)
                    boxes, loads = finish(acc, acc2, dyn8, dynf, c_map, cbar, stage, cw, lane, r,
                                          row0, col0, m, n, alpha, beta, words, old, boxes,
                                          loads, sa, sb, ep)
                else:
                    leave_partial(acc, ws, flags, ct, cid, live)
                it += k1 - k0

    # (block scales: every consumer thread releases each slot, after reading its scales)
    releases = CONSUMER_THREADS if SCALE == "block" else CONSUMER_WARPS
    return persistent_kernel(cfg, F, consume, empty_arrivals=releases,
                             init_extra=walk.init_barriers if SK else None, stream_k=SK)
