"""Which wgmma config ``matmul()`` runs for an M x N x K problem, and every config it may run.

The choice depends only on the shape, whether the operands' rows are whole 128-byte lines, and
the number of SMs; what each choice measured against the others is ``docs/gemm.md`` ("Why
matmul() chooses what it does"). The launch each config implies is :mod:`.plan`'s.
"""

import math

from ..._frontend import front_end
from .config import BM, WgmmaConfig
from .scales import BLOCK_K
from .scheduler import tile_counts, waves
from .stream_k import StreamKConfig, stream_k_split

__all__ = ["choose_config", "choose_fp8_config", "SHIPPED_CONFIGS", "FP8_NARROW", "FP8_BLOCK",
           "FP8_PAIRS", "FP8_SPLIT", "FP8_UNPAIRED"]

#: 128 x 256 tiles take 4 slots with each slot's wgmma group retired before the next
#: (mma_pipe=0).
WIDE = WgmmaConfig(256, stages=4, mma_pipe=0)
#: The narrower tiles, which choose_config takes only where they fit in one wave: one block per
#: tile, since with no next tile the persistent loop and its epilogue staging only cost. The
#: 128 x 64 tile takes one consumer warpgroup for both m64 halves (cuBLAS's structure there).
NARROW = {128: WgmmaConfig(128, stages=4, persistent=False),
          64: WgmmaConfig(64, stages=8, persistent=False, consumers=1)}
#: ... in CTA pairs along N sharing A, where neither A's nor B's rows are whole 128-byte lines
#: (choose_config's ragged_rows): there a box row spans two L2 lines, and a pair reads each
#: A slice from L2 once.
NARROW_PAIRS = {bn: cfg.replace(cluster_n=2, stages=4, consumers=2)
                for bn, cfg in NARROW.items()}
CLUSTER = WgmmaConfig(256, stages=4, mma_pipe=0, cluster_m=2)
#: 256 x 128 tiles, where they take fewer waves; raster groups of 4 tile rows, the 1024 rows of
#: A (2048 in cluster pairs) that 128 x 256 tiles' groups of 8 cover.
TALL = WgmmaConfig(128, stages=4, mma_pipe=0, bm=256, group_m=4)
TALL_CLUSTER = WgmmaConfig(128, stages=4, mma_pipe=0, bm=256, group_m=4, cluster_m=2)
#: 128 x 192 tiles, where they take no more rounds of the SMs than the large tile choose_config
#: picks: each round then computes a quarter less per block. Not clustered: a pair splits B's
#: columns into whole 64-column boxes, and 96 is not one.
N192 = WgmmaConfig(192, stages=4, mma_pipe=0)
#: The 128 x 256 and 128 x 192 choices with the epilogue overlapped, where blocks take more
#: than one tile (with one tile each there is no next tile to store under).
OVERLAPPED = {cfg: cfg.replace(overlap_epilogue=True) for cfg in (CLUSTER, WIDE, N192)}

#: fp8 runs persistent only (:meth:`WgmmaConfig.check_spec`): where choose_config takes one block
#: per narrow tile, fp8 takes these, with as deep a ring as fits. They are block scales' configs
#: too (each consumer holds two slices' 64 x 128 or 64 x 64 products beside its accumulators).
FP8_NARROW = {128: WgmmaConfig(128, stages=6, mma_pipe=0),
              64: WgmmaConfig(64, stages=8, mma_pipe=0)}
#: Block scales' configs: FP8_NARROW's rings beside A's scales of each slot's 128 rows, which
#: take one C staging box per consumer warp (the promoting loop waits on its ring more than on
#: its epilogue: docs/fp8.md).
FP8_BLOCK = {128: WgmmaConfig(128, stages=6, mma_pipe=0, c_buffers=1),
             64: WgmmaConfig(64, stages=8, mma_pipe=0, c_buffers=1),
             # 128 x 192 tiles: one slice's product beside the accumulators (.scales'
             # serial_promoting_mainloop), for promoted accumulation too; five slots fit
             192: WgmmaConfig(192, stages=5, mma_pipe=0, c_buffers=1)}
#: The promoted 128 x 128 configs in 2-CTA clusters that multicast B, for K whose rows are not
#: whole 128-byte lines (each box row then straddles two: docs/fp8.md).
FP8_PAIRS = {"block": FP8_BLOCK[128].replace(cluster_m=2),
             "promoted": FP8_NARROW[128].replace(cluster_m=2)}

#: fp8's one-level path takes 128 x 256 tiles in single CTAs where choose_config pairs them
#: and K is a multiple of 128 (docs/fp8.md, "The one-level path: its tiles and its stores");
#: pairs never take fewer rounds of the SMs than single CTAs.
FP8_UNPAIRED = {CLUSTER: WIDE, OVERLAPPED[CLUSTER]: OVERLAPPED[WIDE]}

#: 128 x 192 tiles with the last round's tiles split along K over every block (stream-K,
#: :mod:`.stream_k`; with fewer tiles than SMs, every tile's K): block scales' where whole
#: 128 x 192 tiles would leave most of a last round idle (:func:`_split_pays`), and every
#: mode's for decode-like products (:func:`_decode_split_pays`).
FP8_SPLIT = StreamKConfig(192, stages=5, mma_pipe=0, c_buffers=1)
#: The cost model of that choice (docs/fp8.md, "Stream-K"): block-scaled 128 x 192 tiles run
#: about 2% more flops a second than 128 x 128 ones (4% before the producer was elected:
#: docs/fp8.md, "The producer's copies, elected"), and the split tiles' fix-up costs about 16
#: K slices of time.
BLOCK_192_SPEEDUP = 1.02
SPLIT_FIXUP_SLICES = 16
#: A decode-like product (M up to 64: one tile row, half of it empty) splits its 128 x 192 tiles
#: along K over every block where each block gets at least this many K slices
#: (:func:`_decode_split_pays`).
DECODE_SPLIT_SLICES = 32

#: Every config choose_config can return, by a short name (numba_tma.precompile, the compile
#: bench).
SHIPPED_CONFIGS = {
    "wide": WIDE, "wide_ov": OVERLAPPED[WIDE],
    "cluster": CLUSTER, "cluster_ov": OVERLAPPED[CLUSTER],
    "tall": TALL, "tall_cluster": TALL_CLUSTER,
    "n192": N192, "n192_ov": OVERLAPPED[N192],
    **{f"narrow{bn}": cfg for bn, cfg in NARROW.items()},
    **{f"pairs{bn}": cfg for bn, cfg in NARROW_PAIRS.items()},
}


def choose_config(m, n, k, sms, ragged_rows=False):
    """The wgmma configuration for an M x N x K problem on ``sms`` SMs: persistent 128 x 256 or
    256 x 128 tiles, in 2-CTA clusters that multicast B, or 128 x 192 tiles, where 128 x 256
    tiles give at least half the SMs a tile, else the widest of 128 x 128 and 128 x 64 that
    does, else 128 x 64, one block per tile (they fit in one wave).

    Of the large tiles, the one that takes the fewest waves of the SMs (every block waits for
    the last wave), clusters before single CTAs, 128 x 256 before 256 x 128 on a tie (single
    CTAs win only where pairs waste SMs: one tile row). Where 128 x 192 tiles take no more
    waves than that choice, they replace it. Where a 128 x 256 or 128 x 192 launch takes more
    than one wave, its blocks store each tile's C under the next tile's first wgmmas
    (``overlap_epilogue``).

    ``ragged_rows``: neither A's nor B's rows in memory are whole 128-byte lines (K and N not
    multiples of 64, for row-major operands). The narrower tiles then run in CTA pairs along N
    that share A (``cluster_n=2``)."""
    if math.ceil(m / BM) * math.ceil(n / 256) >= sms // 2:
        # (min keeps the first of the fewest waves)
        cfg = min((CLUSTER, TALL_CLUSTER, WIDE, TALL), key=lambda cfg: waves(m, n, cfg, sms))
        if waves(m, n, N192, sms) <= waves(m, n, cfg, sms):
            cfg = N192                  # the same rounds, each with a quarter less per block
        return OVERLAPPED.get(cfg, cfg) if waves(m, n, cfg, sms) > 1 else cfg
    # (fewer than sms / 2 tiles of 128 x 256: the narrower tiles fit in one wave, and pairs of
    # them are tiles twice as wide, which number under sms / 2 too)
    bn = 128 if math.ceil(m / BM) * math.ceil(n / 128) >= sms // 2 else 64
    return (NARROW_PAIRS if ragged_rows else NARROW)[bn]


def choose_fp8_config(m, n, k, sms, scale, promote=False):
    """The config of an fp8 problem with scale mode ``scale`` ("", "tensor", "row", "block"):
    choose_config's, its one-block-per-tile narrow tiles replaced by persistent ones
    (:data:`FP8_NARROW`) and, where K is a multiple of 128, its 128 x 256 CTA pairs by single
    CTAs (:data:`FP8_UNPAIRED`); block scales (:data:`FP8_BLOCK`) and promoted accumulation
    (``promote``) take 128 x 128 tiles, in 2-CTA clusters where K is not a multiple of 128 and
    the row tiles pair up (:data:`FP8_PAIRS`), or 128 x 192 where those take no more of each
    SM's time (rounds of the SMs times the tile's work: at most two thirds of 128 x 128's
    rounds), or 128 x 64 where 128 x 128 tiles give fewer than half the SMs a tile. Block scales
    take 128 x 192 tiles with the last round split along K (:data:`FP8_SPLIT`) where
    that takes less time than 128 x 128 tiles (:func:`_split_pays`). Every mode takes it for
    decode-like products (M up to 64) whose K is long (:func:`_decode_split_pays`)."""
    if _decode_split_pays(m, n, k, sms):
        return FP8_SPLIT
    if scale == "block" or promote:
        row_tiles = math.ceil(m / BM)
        bn = 128 if row_tiles * math.ceil(n / 128) >= sms // 2 else 64
        # an odd count leaves one CTA of a pair idle: measured slower than single CTAs
        if bn == 128 and k % 128 and row_tiles % 2 == 0:
            return FP8_PAIRS["block" if scale == "block" else "promoted"]
        if bn == 128 and 3 * waves(m, n, FP8_BLOCK[192], sms) <= 2 * waves(m, n, FP8_BLOCK[128],
                                                                             sms):
            return FP8_BLOCK[192]
        if bn == 128 and scale == "block" and _split_pays(m, n, k, sms):
            return FP8_SPLIT
        return (FP8_BLOCK if scale == "block" else FP8_NARROW)[bn]
    cfg = choose_config(m, n, k, sms)
    if k % BLOCK_K == 0:
        cfg = FP8_UNPAIRED.get(cfg, cfg)
    return cfg if cfg.persistent else FP8_NARROW[cfg.bn]


def _split_work(m, n, k):
    # FP8_SPLIT's tiles and K slices per tile (one slice per 128-deep K block)
    return math.prod(tile_counts(m, n, FP8_SPLIT)), math.ceil(k / BLOCK_K)


def _split_pays(m, n, k, sms):
    """Whether block-scaled 128 x 192 tiles split along K in their last round
    (:data:`FP8_SPLIT`) take less time than whole 128 x 128 tiles, in rounds of 128 x 128
    tiles' work: the 128 x 192 tiles' rounds as a fraction (the split evens the last one out),
    times 1.5 / ``BLOCK_192_SPEEDUP``, plus the fix-up's ``SPLIT_FIXUP_SLICES`` of the ``k /
    128`` slices of a round, against 128 x 128 tiles' whole rounds. Measured on an H200: it
    pays at 4096 x 7168 x 16384, not at 4096 x 4096 x 7168 (5.33 rounds of 128 x 192 tiles
    against 8 of 128 x 128) nor at 4096^3 (a round of 32 slices).
    Only where the 128 x 192 tiles fill at least one round (what it was measured on); never on
    numba-cuda-mlir, whose build of the stream-K kernels spills (docs/front_ends.md)."""
    if front_end() == "numba-cuda-mlir":
        return False
    tiles, num_k = _split_work(m, n, k)
    if tiles <= sms or stream_k_split(tiles, sms, num_k)[1] == 0:
        return False
    rounds = 1.5 * tiles / sms / BLOCK_192_SPEEDUP + SPLIT_FIXUP_SLICES / num_k
    return rounds < waves(m, n, FP8_BLOCK[128], sms)


def _decode_split_pays(m, n, k, sms):
    """Whether a decode-like product (M up to 64) runs faster as 128 x 192 tiles split along K
    over every block (:data:`FP8_SPLIT`) than as 128 x 64 tiles, one per block: where each
    block gets at least ``DECODE_SPLIT_SLICES`` K slices. A tile's slice then loads three times
    the B columns for the same A rows, barriers and promotion, which is what such a product's
    blocks wait on; with fewer slices per block the fix-up costs more than that saves. Measured
    on an H200: it pays at 64 x 7168 x 16384 (37 slices per block), not at 64 x 4096 x 7168
    (9), nor at M = 128 (docs/fp8.md, "Stream-K")."""
    if m > 64 or front_end() == "numba-cuda-mlir":
        return False
    tiles, num_k = _split_work(m, n, k)
    return (tiles < sms and tiles * num_k >= DECODE_SPLIT_SLICES * sms
            and stream_k_split(tiles, sms, num_k)[1] > 0)
