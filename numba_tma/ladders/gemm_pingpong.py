"""No seed: the ping-pong rung of the wgmma GEMM ladder (``PingPongConfig``), assembled from the
shipped GEMM's parts (:mod:`numba_tma.kernels.gemm`). ``matmul()`` never chooses it: on the H100
the cooperative kernel with the overlapped epilogue won (``docs/gemm.md``); run it with
``matmul(a, b, config=PingPongConfig(128, stages=6))``.

Each consumer warpgroup computes whole ``128 x bn`` tiles of its own (two m64 halves), the
block's tiles alternating between the two (warpgroup ``c`` takes tiles ``c, c + 2, ...`` of the
block's and skips the other's slots in the ring), so one's epilogue overlaps the other's main
loop. Before each tile but its first a consumer waits on ``turn[c]``, which the other arrives on
once it has waited for the last slot of its own tile: a full barrier is then never two passes
behind the one a consumer waits for (a parity wait cannot tell passes two apart). A slot's
``empty`` barrier counts the 4 warps of one consumer.
"""

import dataclasses
import functools

import numpy as np

from .._frontend import cuda
from .._bridge import inline_device
from .. import mbarrier
from ..kernels.gemm.config import BM, CONSUMER_WARPS, KernelSpec, WgmmaConfig
from ..kernels.gemm.epilogue import staged_epilogue
from ..kernels.gemm.frame import persistent_kernel, persistent_parts

__all__ = ["PingPongConfig"]


@dataclasses.dataclass(frozen=True, repr=False)
class PingPongConfig(WgmmaConfig):
    """A persistent :class:`~numba_tma.kernels.gemm.WgmmaConfig` (``bm = 128``, ``bn <= 128``,
    ``mma_pipe = 1``, no clusters, the plain epilogue) whose two consumer warpgroups take
    alternate tiles (the module's docstring)."""

    extra_barriers = 2          # the two turn barriers

    def _check(self):
        super()._check()
        if not self.persistent or self.cluster_m != 1 or self.bm != BM or self.bn > 128 \
                or self.mma_pipe != 1 or self.overlap_epilogue:
            raise ValueError(f"ping-pong (each consumer warpgroup its own {BM} x bn tile) "
                             f"needs persistent=True, cluster_m=1, bm={BM}, bn <= 128, "
                             f"mma_pipe=1 and overlap_epilogue=False; got "
                             f"persistent={self.persistent}, cluster_m={self.cluster_m}, "
                             f"bm={self.bm}, bn={self.bn}, mma_pipe={self.mma_pipe}, "
                             f"overlap_epilogue={self.overlap_epilogue}")

    def kernel(self, spec):
        spec = KernelSpec(*spec)
        self.check_spec(spec)       # (WgmmaConfig's rules for the spec: aux's c_buffers, fp8)
        return _kernel(self.kernel_config(), spec)


@inline_device
def _init_turns(turn_bars):
    mbarrier.init(turn_bars[0:], 1)
    mbarrier.init(turn_bars[1:], 1)


@functools.cache
def _kernel(cfg, spec):
    F = persistent_parts(cfg, spec, whole=True, turns=True)
    NACC = F.P.NACC
    views, tile_origin, mma_tile = F.views, F.tile_origin, F.mma_tile
    skip_slots = F.R.skip_slots
    store_tile = staged_epilogue(cfg.bn, spec.out_kind, spec.has_beta, cfg.c_buffers, cfg.bm,
                                 F.P.HALVES, True, spec.epilogue)

    @inline_device
    def consume(tiles, first, c_map, c, lane, ct, cw, stage, cid, nclusters, dp_units,
                sk_iters, num_k, tiles_m, tiles_n, rank, m, n, alpha, beta, ws, flags, sa, sb,
                ep):
        dyn8, dynf, full, empty, cbar, turn = views()
        acc = cuda.local.array(NACC, np.float32)
        acc2 = cuda.local.array(NACC, np.float32)
        words = cuda.local.array(4, np.uint32)
        old = cuda.local.array(4, np.uint32)
        s, passes = np.uint32(0), np.uint32(0)   # the ring position (.ring)
        boxes = 0
        loads = 0
        lead = (ct & 127) == 0
        turns = 0                               # this warpgroup's waits for its turn
        unit = cid + c * nclusters
        step = 2 * nclusters
        if c == 1:
            s, passes = skip_slots(s, passes, num_k)
        while unit < dp_units:
            row0, col0 = tile_origin(unit, tiles_m, tiles_n, rank)
            if c == 1 or unit != cid:
                mbarrier.wait(turn[c:], turns & 1)
                turns += 1
            unit += step
            s, passes = mma_tile(acc, acc2, tiles, full, empty, c, lane, 0, num_k, s, passes,
                                 turn[1 - c:], lead)
            boxes, loads = store_tile(acc, acc2, dyn8, dynf, c_map, cbar, stage, cw, lane, row0,
                                      col0, m, n, alpha, beta, words, old, boxes, loads, ep)
            s, passes = skip_slots(s, passes, num_k)

    return persistent_kernel(cfg, F, consume, empty_arrivals=CONSUMER_WARPS // 2,
                             init_extra=_init_turns)
