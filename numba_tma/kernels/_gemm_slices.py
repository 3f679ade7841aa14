"""The producer's TMA loads of one K slice of a GEMM's A and B tiles, shared by the TMA-fed GEMMs
(``gemm_tma``'s mma.sync kernel and ``gemm_wgmma``'s wgmma kernels).

A slot of the ring holds ``bm`` rows of A then ``bn`` rows of B, 64 K-elements (128 bytes) each,
as 128B-swizzled TMA boxes: a K-major operand (A stored M x K, B stored N x K) is one box of
``rows x 64``; an M/N-major one (stored K x M or K x N) is ``rows / 64`` boxes of 64 (K) x 64,
8 KiB each. In a cluster of ``cm`` CTAs along M, CTA ``rank`` loads rows
``[rank, rank + 1) * bn / cm`` of B and multicasts them to every CTA of the cluster; in a
cluster of ``cn`` CTAs along N, rows ``[rank, rank + 1) * bm / cn`` of A likewise. Each CTA's
barrier expects the whole slot.
"""

import functools

from .._bridge import inline_device
from .. import mbarrier, tma

__all__ = ["SPAN", "BK", "ATOM", "ATOM_BYTES", "slice_loader"]

SPAN = 128                   # bytes in one 128B-swizzle row: 64 16-bit elements
BK = 64                      # K per slice: one swizzle row of a K-major operand
ATOM = 64                    # elements in one swizzled row: a K x 64 box of an M/N-major operand
ATOM_BYTES = BK * SPAN       # such a box: 8 KiB


@functools.cache        # one loader for every kernel of the same slot geometry
def slice_loader(bm, bn, cm, a_kmajor, b_kmajor, cn=1):
    """``load(a_map, b_map, tiles, bar, off, kt, row0, col0, rank)``: arm ``bar`` for the slot's
    bytes and issue the loads of K slice ``kt`` of A rows ``row0..`` and B rows (N) ``col0..``
    into the slot at byte ``off`` of ``tiles``. Issued by one thread."""
    a_bytes = bm * SPAN
    stage_bytes = a_bytes + bn * SPAN
    a_part_rows = bm // cn
    a_part_boxes = bm // ATOM // cn
    b_part_rows = bn // cm
    b_part_boxes = bn // ATOM // cm
    mask = (1 << cm) - 1

    if cm == 1:
        load_b = tma.load
    else:
        @inline_device
        def load_b(dst, desc, coords, bar):
            tma.load_multicast(dst, desc, coords, bar, mask)
    if cn == 1:
        load_a = tma.load
    else:
        a_mask = (1 << cn) - 1

        @inline_device
        def load_a(dst, desc, coords, bar):
            tma.load_multicast(dst, desc, coords, bar, a_mask)

    @inline_device
    def load(a_map, b_map, tiles, bar, off, kt, row0, col0, rank):
        mbarrier.arrive_expect_tx(bar, stage_bytes)
        kx = kt * BK
        # (with cn > 1, rank is the CTA's place along N: its part of A; cm and cn are not both
        # above 1)
        a_rank = rank if cn > 1 else 0
        if a_kmajor:
            r0 = a_rank * a_part_rows
            load_a(tiles[off + r0 * SPAN:], a_map, (row0 + r0, kx), bar)
        else:
            for q in range(a_part_boxes):
                j = a_rank * a_part_boxes + q
                load_a(tiles[off + j * ATOM_BYTES:], a_map, (kx, row0 + j * ATOM), bar)
        boff = off + a_bytes
        b_rank = rank if cm > 1 else 0
        if b_kmajor:
            r0 = b_rank * b_part_rows
            load_b(tiles[boff + r0 * SPAN:], b_map, (col0 + r0, kx), bar)
        else:
            for q in range(b_part_boxes):
                j = b_rank * b_part_boxes + q
                load_b(tiles[boff + j * ATOM_BYTES:], b_map, (kx, col0 + j * ATOM), bar)

    return load
