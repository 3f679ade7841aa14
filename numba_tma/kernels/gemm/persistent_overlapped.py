"""The persistent wgmma GEMM with the overlapped epilogue (``WgmmaConfig(overlap_epilogue=True,
mma_pipe=0)``): what ``matmul()`` runs on 128 x 256 and 128 x 192 tiles where a block takes more
than one tile, with 16-bit output and no ``beta``.

A consumer that finishes a tile packs ``alpha`` times its accumulators into 16-bit pairs
(``NACC / 2`` registers beside the ``NACC`` of the next tile) and starts the next tile at once;
its first ``C_BOXES`` slots each store one box of the packed tile between the wgmma issue and
the wait, so the stores run under the tensor cores' work instead of between tiles with them
idle. The block's last tile is stored after its loop. f32 output and ``beta`` keep the plain
epilogue (:mod:`.persistent`): their accumulators do not fit beside the next tile's. fp8
with per-tensor or per-row/column scales (:mod:`.scales`) scales the accumulators as it packs,
and a user epilogue (:mod:`.user_epilogue`) runs on each element as it is packed.
"""

import functools

import numpy as np

from ..._frontend import cuda
from ..._bridge import generated_device, inline_device
from ... import warp, wgmma
from .config import SLAB_ROWS, WG_ROWS
from .epilogue import epilogue_branches, packed_epilogue
from .frame import persistent_kernel, persistent_parts
from .mainloop import zeroing
from .scales import rowcol_packer, rowcol_scaler, tensor_alpha, thread_row

__all__ = ["kernel"]


@functools.cache
def kernel(cfg, spec):
    """The ``@cuda.jit`` kernel of ``cfg`` (persistent, overlapped epilogue) for ``spec``
    (16-bit output, no ``beta``)."""
    assert spec.out16 and not spec.has_beta and cfg.mma_pipe == 0
    assert spec.scale in ("", "tensor", "row") and not spec.promoted
    SCALE, TM = spec.scale, cfg.bm
    F = persistent_parts(cfg, spec)
    NACC = F.P.NACC
    zero = zeroing(NACC)
    NWORDS = NACC // 2
    BN = cfg.bn
    views, tile_origin = F.views, F.tile_origin
    mma_issue, mma_retire = F.P.mma_issue, F.P.mma_retire
    consumer_wait, consumer_release, next_slot = (F.R.consumer_wait, F.R.consumer_release,
                                                  F.R.next_slot)
    store_packed = packed_epilogue(cfg.bn, spec.out_kind, cfg.c_buffers)
    pack = warp.pack_f16x2 if spec.out_kind == "f16" else warp.pack_bf16x2
    pack_scaled = rowcol_packer(NACC, spec.out_kind)
    EPI = spec.epilogue is not None
    # The tile's first wgmma overwrites the accumulators (scale-d = 0) instead of adding
    # to zeros. Not with row scales or a user epilogue: there the previous tile's values,
    # which that wgmma nominally reads, stay live through the packing, and ptxas spills.
    FRESH = SCALE != "row" and not EPI
    scale_tile = rowcol_scaler(NACC, 1)
    if EPI:     # (written out: LLVM would not unroll a loop of the user's code)
        body = [f"c16[{w}] = pack(APPLY(alpha * acc[{2 * w}], row + {8 * (w & 1)}, "
                f"col + {8 * (w >> 1)}, m, n, ep), APPLY(alpha * acc[{2 * w + 1}], "
                f"row + {8 * (w & 1)}, col + {8 * (w >> 1) + 1}, m, n, ep))"
                for w in range(NWORDS)]
        lines, names = epilogue_branches(spec.epilogue, "inside", body)
        pack_epilogue = generated_device(
            "pack_epilogue",
            ["def pack_epilogue(c16, acc, row, col, m, n, alpha, ep, inside):"] + lines,
            {"pack": pack, **names})

    @inline_device
    def pack_tile(c16, acc, sa, sb, row0, col0, cw, lane, m, n, alpha, ep):
        # The finished tile, times alpha (and its fp8 row/column scales), packed into 16-bit
        # pairs; with a user epilogue, each element through it first.
        if EPI:
            if SCALE == "row":
                scale_tile(acc, acc, sa, sb, thread_row(row0, cw, lane, TM), col0, lane, m, n)
            # (accumulators 2w, 2w + 1: n8 tile w // 2, rows r + 8 (w % 2); the warp's 16
            # rows and the tile's columns inside C: no test per element)
            crow = row0 + (cw >> 2) * WG_ROWS + (cw & 3) * SLAB_ROWS
            pack_epilogue(c16, acc, crow + (lane >> 2), col0 + 2 * (lane & 3), m, n, alpha,
                          ep, crow + SLAB_ROWS <= m and col0 + BN <= n)
        elif SCALE == "row":
            pack_scaled(c16, acc, sa, sb, thread_row(row0, cw, lane, TM), col0, lane, m, n,
                        alpha)
        else:
            for w in range(NWORDS):
                c16[w] = pack(alpha * acc[2 * w], alpha * acc[2 * w + 1])

    @inline_device
    def slot_storing(acc, c16, tiles, full, empty, c, lane, kt, kt1, s, passes, pend, dyn8,
                     c_map, stage, pcrow, pcol, m, n, boxes, words, j):
        # K slice kt of the tile (if there is one) with box j of the packed previous tile
        # (if there is one) stored between its wgmma issue and its wait.
        if kt < kt1:
            consumer_wait(full, s, passes)
            mma_issue(acc, tiles, s, c, FRESH and kt == 0)
            if pend:
                boxes = store_packed(c16, dyn8, c_map, stage, lane, pcrow, pcol, m, n, boxes,
                                     words, j)
            mma_retire(acc)
            if lane == 0:
                consumer_release(empty, s)
            s, passes = next_slot(s, passes)
        elif pend:
            boxes = store_packed(c16, dyn8, c_map, stage, lane, pcrow, pcol, m, n, boxes,
                                 words, j)
        return s, passes, boxes

    @inline_device
    def consume(tiles, first, c_map, c, lane, ct, cw, stage, cid, nclusters, dp_units,
                sk_iters, num_k, tiles_m, tiles_n, rank, m, n, alpha, beta, ws, flags, sa, sb,
                ep):
        dyn8, dynf, full, empty, cbar, extra = views()
        acc = cuda.local.array(NACC, np.float32)
        words = cuda.local.array(4, np.uint32)
        c16 = cuda.local.array(NWORDS, np.uint32)   # the previous tile, packed
        s, passes = np.uint32(0), np.uint32(0)   # the ring position (.ring)
        boxes = 0                               # boxes this warp has staged (next buffer)
        pend = False
        pcrow = 0
        pcol = 0
        if SCALE == "tensor":
            alpha = tensor_alpha(alpha, sa, sb)
        unit = cid
        while unit < dp_units:
            row0, col0 = tile_origin(unit, tiles_m, tiles_n, rank)
            unit += nclusters
            if not FRESH or num_k == 0:     # (K = 0: no first wgmma)
                zero(acc)
            wgmma.fence_operand(acc, NACC)
            # (one call per box: j stays a constant, and so every register index)
            s, passes, boxes = slot_storing(acc, c16, tiles, full, empty, c, lane, 0, num_k, s,
                                            passes, pend, dyn8, c_map, stage, pcrow, pcol, m,
                                            n, boxes, words, 0)
            s, passes, boxes = slot_storing(acc, c16, tiles, full, empty, c, lane, 1, num_k, s,
                                            passes, pend, dyn8, c_map, stage, pcrow, pcol, m,
                                            n, boxes, words, 1)
            s, passes, boxes = slot_storing(acc, c16, tiles, full, empty, c, lane, 2, num_k, s,
                                            passes, pend, dyn8, c_map, stage, pcrow, pcol, m,
                                            n, boxes, words, 2)
            s, passes, boxes = slot_storing(acc, c16, tiles, full, empty, c, lane, 3, num_k, s,
                                            passes, pend, dyn8, c_map, stage, pcrow, pcol, m,
                                            n, boxes, words, 3)
            # (slot_storing's slot without a box, written out: through slot_storing the loop
            # computed its slot addresses in vector registers, 12 R2UR more per pass)
            for kt in range(4, num_k):
                consumer_wait(full, s, passes)
                mma_issue(acc, tiles, s, c, False)
                mma_retire(acc)
                if lane == 0:
                    consumer_release(empty, s)
                s, passes = next_slot(s, passes)
            pack_tile(c16, acc, sa, sb, row0, col0, cw, lane, m, n, alpha, ep)
            pend = True
            pcrow = row0 + (cw >> 2) * WG_ROWS + (cw & 3) * SLAB_ROWS
            pcol = col0
        if pend:
            for j in range(4):      # (C_BOXES <= 4 boxes of 64 columns)
                boxes = store_packed(c16, dyn8, c_map, stage, lane, pcrow, pcol, m, n, boxes,
                                     words, j)

    return persistent_kernel(cfg, F, consume)
