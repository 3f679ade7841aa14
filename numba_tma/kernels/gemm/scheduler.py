"""The tile scheduler: which tile of C a block (or a persistent block's next unit of work)
computes, and how many blocks a launch takes.

Tiles are visited in raster groups of ``group_m`` tile rows that walk the tile columns together,
so the blocks running at once share B's slices in L2. In a cluster of ``cm`` CTAs along M the
unit of work is a column of ``cm`` tiles (the CTAs sharing B); the last one may reach past M:
its CTA loads zeros, computes, and stores nothing. A persistent launch runs one block (or one
cluster) per SM, each walking the units ``cid, cid + clusters, ...``.
"""

import functools
import math

from ..._frontend import cuda

from ..._bridge import inline_device
from ... import cluster, intmath

__all__ = ["raster", "cluster_place", "grid_size", "waves", "tile_counts"]


@functools.cache        # one set of device functions for every kernel that shares them
def raster(group_m, cm, tm, bn):
    """``tile_origin(unit, tiles_m, tiles_n, rank)``: the first row and column of C of CTA
    ``rank``'s tile in unit ``unit`` (``tm x bn`` tiles, units of ``cm`` tiles along M)."""
    @inline_device
    def tile_origin(unit, tiles_m, tiles_n, rank):
        # group_m units walk the tile columns together; 32-bit division (64-bit is a called
        # routine).
        units_m = (tiles_m + cm - 1) // cm
        width = group_m * tiles_n
        first_m = intmath.div_u32(unit, width) * group_m
        gsize = min(units_m - first_m, group_m)
        in_group = intmath.rem_u32(unit, width)
        row0 = ((first_m + intmath.rem_u32(in_group, gsize)) * cm + rank) * tm
        col0 = intmath.div_u32(in_group, gsize) * bn
        return row0, col0
    return tile_origin


@functools.cache
def cluster_place(cm):
    """``place()``: ``(rank, cid, clusters)``, this CTA's rank in its cluster of ``cm`` along M,
    its cluster's index and the number of clusters in the grid (``cm = 1``: the block's)."""
    @inline_device
    def place():
        rank = 0
        cid = cuda.blockIdx.x
        nclusters = cuda.gridDim.x
        if cm > 1:
            rank = cluster.cta_rank()
            cid = cid // cm
            nclusters = nclusters // cm
        return rank, cid, nclusters
    return place


def tile_counts(m, n, cfg):
    """``(tiles_m, tiles_n)``: C's tiles of ``cfg.bm x cfg.bn``."""
    return math.ceil(m / cfg.bm), math.ceil(n / cfg.bn)


def grid_size(m, n, cfg, resident=None):
    """Blocks to launch: one per tile, whole clusters; persistent: one per tile up to
    ``resident`` (the blocks that fit on the GPU at once, a multiple of ``cfg.cluster_m``);
    stream-K: ``resident`` (fewer tiles than blocks are split along K over them all)."""
    cm, cn = cfg.cluster_m, cfg.cluster_n
    tiles_m, tiles_n = tile_counts(m, n, cfg)
    blocks = math.ceil(tiles_m / cm) * cm * math.ceil(tiles_n / cn) * cn
    if cfg.persistent:
        if resident is None or resident < cm:
            raise ValueError(f"a persistent {cfg!r} needs resident >= {cm} (blocks that fit "
                             f"at once); got {resident!r}")
        blocks = resident // cm * cm if cfg.stream_k else min(blocks, resident // cm * cm)
    return blocks


def waves(m, n, cfg, sms):
    """Rounds of a persistent ``cfg`` launch over ``sms`` SMs: its units of work (a tile, or a
    cluster's tiles) over the units that run at once (one per SM, or per SM pair)."""
    cm = cfg.cluster_m
    tiles_m, tiles_n = tile_counts(m, n, cfg)
    units = math.ceil(tiles_m / cm) * tiles_n
    return math.ceil(units / max(1, sms // cm))
