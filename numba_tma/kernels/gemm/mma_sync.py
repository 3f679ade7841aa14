"""The TMA-fed ``mma.sync`` GEMM (``GemmConfig``): ``C = alpha * A @ B + beta * C`` with 16-bit
inputs, fp32 accumulation and f16/bf16/f32 output, on ``cp.async.bulk.tensor`` + ``ldmatrix`` +
``mma.sync``. The rung before wgmma; ``matmul(config=GemmConfig(...))`` runs it.

One block computes a ``bm x bn`` tile of C with one warp per 64 x 64 warp tile (4 x 8
``m16n8k16`` accumulators = 128 f32 registers per thread). The K loop streams ``BK = 64``-deep
slices of A and B through the ring (:mod:`.ring`). The warps take turns as the producer: at step
``kt``, lane 0 of warp ``(kt - 1) % warps`` refills the slot of step ``kt - 1`` (``stages - 1``
slices stay in flight), so no warp carries all the producer's instructions and waits. A separate
producer warp would not fit: a 288-thread block is budgeted registers as 384 threads, and the 128
accumulators then spill (``setmaxnreg`` across warpgroups is wgmma territory).

``ldmatrix.x4`` reads fragments from the swizzled tiles without bank conflicts (the 16-byte chunk
index XOR row % 8 spreads 8 rows over all 32 banks), ``.trans`` for M/N-major operands. Epilogue:
the ring becomes each warp's C tile; accumulators are scaled (and ``beta`` times the old C,
loaded by TMA, added), packed with ``stmatrix`` (f32: 8-byte stores) into a 128B-swizzled box,
which one lane stores with TMA (clipped at the edges).
"""

import dataclasses
import functools

import numpy as np

from ..._frontend import cuda
from ..._bridge import inline_device
from ... import cluster, fence, mbarrier, smem, tma, warp
from .config import SIGNATURE, KernelSpec
from .ring import BK, SPAN, barrier_setup, ring, shared_views, slice_loader
from .scheduler import raster

__all__ = ["GemmConfig", "DEFAULT_CONFIG", "smem_bytes", "WARP_TILE", "ACC"]

WARP_TILE = 64               # each warp computes a 64 x 64 tile of C
BOX16 = WARP_TILE * SPAN     # a 64 x 64 box of 16-bit elements: 8 KiB
SWIZZLE_ALIGN = 1024         # the 128B swizzle repeats every 8 rows of 128 bytes
MMA_M, MMA_N, MMA_K = 16, 8, 16
M_TILES = WARP_TILE // MMA_M        # 4 m16 tiles per warp
N_TILES = WARP_TILE // MMA_N        # 8 n8 tiles per warp
K_STEPS = BK // MMA_K               # 4 k16 steps per stage
ACC = M_TILES * N_TILES * 4         # 128 f32 accumulators per thread
A_FRAG = M_TILES * 4                # 16 words: the A fragments of one k16 step
B_FRAG = N_TILES * 2                # 16 words: the B fragments of one k16 step
MAX_WARPS = 8                       # 65536 registers / (8 x 32 threads) = 256 each
MAX_DYNAMIC_SMEM = 227 * 1024       # H100: the most shared memory one block may have


@dataclasses.dataclass(frozen=True)
class GemmConfig:
    """Block tile ``bm x bn`` (multiples of 64; one warp per 64 x 64), ``stages`` ring slots (a
    power of two), ``group_m`` tile rows per raster group, ``cluster_m`` CTAs per cluster along
    M (2: the pair shares its B slices, each CTA loading half and multicasting it to both)."""

    bm: int = 128
    bn: int = 256
    stages: int = 4
    group_m: int = 8
    cluster_m: int = 1

    #: host-side fields and launch hooks, as WgmmaConfig's (one block per tile, no pair along
    #: N: scheduler.grid_size sizes its grid as it does WgmmaConfig's)
    signature = SIGNATURE
    extra_argtypes = ()
    persistent = False
    cluster_n = 1
    l2_promotion = 0        # the maps stay as this rung was measured, without L2 promotion

    def __post_init__(self):
        bm, bn = self.bm, self.bn
        if bm % WARP_TILE or bn % WARP_TILE or not 1 <= (bm // 64) * (bn // 64) <= MAX_WARPS:
            raise ValueError(f"block tile {bm} x {bn}: both must be multiples of {WARP_TILE} "
                             f"and give 1 to {MAX_WARPS} warps (each thread holds 128 "
                             f"accumulators; more warps would spill)")
        if (bn // WARP_TILE) & (bn // WARP_TILE - 1):
            raise ValueError(f"bn = {bn} must be 64 times a power of two (warps index C's "
                             f"columns with a shift)")
        if bm > 256 or bn > 256:
            raise ValueError(f"block tile {bm} x {bn}: a TMA box has at most 256 rows")
        if self.stages < 2 or self.stages & (self.stages - 1):
            raise ValueError(f"stages = {self.stages} must be a power of two >= 2")
        if self.cluster_m not in (1, 2):
            raise ValueError(f"cluster_m = {self.cluster_m} must be 1 or 2")
        if self.cluster_m == 2 and bn // WARP_TILE < 2:
            raise ValueError(f"cluster_m = 2 splits B's {bn} columns in halves of 64; bn >= 128")
        need = smem_bytes(self, 4)
        if need > MAX_DYNAMIC_SMEM:
            raise ValueError(f"{self!r} needs {need} bytes of shared memory; a block may have "
                             f"{MAX_DYNAMIC_SMEM}: use fewer stages or a smaller tile")

    @property
    def threads(self):
        """Threads per block: one warp per 64 x 64 tile of C."""
        return 32 * self.warps

    @property
    def warps(self):
        return (self.bm // WARP_TILE) * (self.bn // WARP_TILE)

    def kernel_config(self):
        return self

    def kernel(self, spec):
        """The ``@cuda.jit`` kernel of this config for ``spec`` (a ``KernelSpec``)."""
        return _kernel(self, KernelSpec(*spec))

    def launch_extras(self, tiles, grid, num_k):
        return (), None


def smem_bytes(cfg, out_itemsize):
    """Dynamic shared memory of one block: barriers, alignment slack, the ring (which the
    epilogue reuses for C)."""
    ring_bytes = cfg.stages * (cfg.bm + cfg.bn) * SPAN
    c_tile = cfg.warps * WARP_TILE * WARP_TILE * out_itemsize
    return 8 * (2 * cfg.stages + cfg.warps) + SWIZZLE_ALIGN + max(ring_bytes, c_tile)


DEFAULT_CONFIG = GemmConfig()


@functools.cache
def _fragments(bn, a_kmajor, b_kmajor, in_kind, stage_a_bytes):
    """``mma_stage(acc, af, bf, tiles, base, lane, wm, wn)``: a warp's 4 k16 steps on the slot at
    byte ``base`` (ldmatrix of its A and B fragments, then the m16n8k16 mma.syncs)."""
    mma = warp.mma_m16n8k16_f32_f16 if in_kind == "f16" else warp.mma_m16n8k16_f32_bf16
    A_TRANS = not a_kmajor
    B_TRANS = not b_kmajor

    @inline_device
    def a_offset(lane, wm, mi, kk):
        # Byte offset, within a stage, of the 16-byte row this lane gives ldmatrix.x4 for the
        # A fragment (m16 tile mi, k16 step kk) of warp row wm.
        l7 = lane & 7
        if a_kmajor:      # rows m, 16-byte chunks along k; matrices (m0-7|m8-15) x (k0-7|k8-15)
            row = wm * WARP_TILE + mi * MMA_M + (lane & 15)
            return row * SPAN + (((kk * 2 + (lane >> 4)) ^ l7) << 4)
        # rows k, chunks along m (ldmatrix.trans): matrices (k0-7|k8-15) x (m0-7|m8-15)
        krow = kk * MMA_K + l7 + ((lane >> 4) << 3)
        return wm * BOX16 + krow * SPAN + (((mi * 2 + ((lane >> 3) & 1)) ^ l7) << 4)

    @inline_device
    def b_offset(lane, wn, nj, kk):
        # As a_offset for the B fragments of n8 tiles 2nj, 2nj+1 (one ldmatrix.x4).
        l7 = lane & 7
        if b_kmajor:      # rows n, chunks along k
            row = wn * WARP_TILE + nj * 16 + l7 + ((lane >> 4) << 3)
            return row * SPAN + (((kk * 2 + ((lane >> 3) & 1)) ^ l7) << 4)
        krow = kk * MMA_K + l7 + (((lane >> 3) & 1) << 3)       # rows k, chunks along n
        return wn * BOX16 + krow * SPAN + (((nj * 2 + (lane >> 4)) ^ l7) << 4)

    @inline_device
    def mma_stage(acc, af, bf, tiles, a_base, lane, wm, wn):
        b_base = a_base + stage_a_bytes
        for kk in range(K_STEPS):
            for mi in range(M_TILES):
                warp.ldmatrix(af[mi * 4:], tiles, a_base + a_offset(lane, wm, mi, kk), 4,
                              A_TRANS)
            for nj in range(N_TILES // 2):
                warp.ldmatrix(bf[nj * 4:], tiles, b_base + b_offset(lane, wn, nj, kk), 4,
                              B_TRANS)
            for mi in range(M_TILES):
                for ni in range(N_TILES):
                    c = (mi * N_TILES + ni) * 4
                    mma(acc[c:], af[mi * 4:], bf[ni * 2:], acc[c:])
    return mma_stage


@functools.cache
def _warp_tile_writer(out_kind, has_beta):
    """``write(acc, tiles, dynf, fbase, c_off, lane, alpha, beta)``: a warp's 64 x 64 tile of C
    into its 128B-swizzled box(es) at byte ``c_off`` (16-bit: one 64 x 64 box through
    ``stmatrix``; f32: two 64 x 32 boxes, 8-byte stores), ``beta`` times the old C (already
    there) added."""
    OUT16 = out_kind != "f32"
    C_BOX = WARP_TILE * SPAN                   # f32: 64 rows x 32 columns; 16-bit: 64 x 64
    pack = warp.pack_f16x2 if out_kind == "f16" else warp.pack_bf16x2
    unpack = warp.unpack_f16x2 if out_kind == "f16" else warp.unpack_bf16x2

    @inline_device
    def write(acc, tiles, dynf, fbase, c_off, lane, alpha, beta):
        g = lane >> 2
        t = lane & 3
        if OUT16:
            words = cuda.local.array(4, np.uint32)
            old = cuda.local.array(4, np.uint32)
            srow = (lane & 7) + (((lane >> 3) & 1) << 3)
            for mi in range(M_TILES):
                for nj in range(N_TILES // 2):
                    row = mi * MMA_M + srow
                    off = c_off + row * SPAN + (((nj * 2 + (lane >> 4)) ^ (lane & 7)) << 4)
                    if has_beta:
                        warp.ldmatrix(old, tiles, off, 4)
                    for q in range(4):
                        # stmatrix.x4 matrices: (rows 0-7 | 8-15) x (n8 tile 2nj | 2nj+1)
                        c = (mi * N_TILES + 2 * nj + (q >> 1)) * 4 + 2 * (q & 1)
                        v0 = alpha * acc[c]
                        v1 = alpha * acc[c + 1]
                        if has_beta:
                            v0 += beta * unpack(old[q])
                            v1 += beta * unpack(old[q], True)
                        words[q] = pack(v0, v1)
                    warp.stmatrix(tiles, off, words, 4)
        else:
            for mi in range(M_TILES):
                for ni in range(N_TILES):
                    for h in range(2):
                        row = mi * MMA_M + g + 8 * h
                        chunk = ((ni & 3) * 2 + (t >> 1)) ^ g
                        off = c_off + (ni >> 2) * C_BOX + row * SPAN + (chunk << 4) + (t & 1) * 8
                        i = fbase + (off >> 2)
                        c = (mi * N_TILES + ni) * 4 + 2 * h
                        v0 = alpha * acc[c]
                        v1 = alpha * acc[c + 1]
                        if has_beta:
                            v0 += beta * dynf[i]
                            v1 += beta * dynf[i + 1]
                        dynf[i] = v0
                        dynf[i + 1] = v1
    return write


@functools.cache
def _kernel(cfg, spec):
    bm, bn, S, CM = cfg.bm, cfg.bn, cfg.stages, cfg.cluster_m
    WARPS = cfg.warps
    A_BYTES = bm * SPAN
    STAGE_BYTES = A_BYTES + bn * SPAN
    WARPS_N = bn // WARP_TILE
    LOG_WN = WARPS_N.bit_length() - 1
    LOG_S = S.bit_length() - 1
    BAR_BYTES = 8 * (2 * S + WARPS)
    OUT16 = spec.out16
    has_beta = spec.has_beta
    C_WARP_BYTES = WARP_TILE * WARP_TILE * (2 if OUT16 else 4)
    C_BOX = WARP_TILE * SPAN
    issue = slice_loader(bm, bn, CM, spec.a_kmajor, spec.b_kmajor)
    R = ring(S, STAGE_BYTES, issue, CM)
    producer_acquire, producer_commit = R.producer_acquire, R.producer_commit
    consumer_wait, consumer_release = R.consumer_wait, R.consumer_release
    views = shared_views(S, WARPS)
    # every warp of every CTA the stage is multicast into releases it
    init_barriers = barrier_setup(S, WARPS * CM, WARPS)
    tile_origin = raster(cfg.group_m, CM, bm, bn)
    mma_stage = _fragments(bn, spec.a_kmajor, spec.b_kmajor, spec.in_kind, A_BYTES)
    write_tile = _warp_tile_writer(spec.out_kind, has_beta)

    if WARPS & (WARPS - 1) == 0:
        @inline_device
        def producer_warp(j):
            return j & (WARPS - 1)
    else:
        @inline_device
        def producer_warp(j):
            return j % WARPS

    @inline_device
    def refill(a_map, b_map, tiles, full, empty, kt, num_k, wid, row0, col0, rank):
        # Lane 0 of warp (kt - 1) % WARPS refills the slot step kt - 1 used, once every warp
        # has released it.
        j = kt - 1
        if j >= 0 and j + S < num_k and producer_warp(j) == wid:
            sj = j & (S - 1)
            producer_acquire(empty, sj, (j >> LOG_S) + 1)
            producer_commit(a_map, b_map, tiles, full, sj, j + S, row0, col0, rank)

    @inline_device
    def finish(acc, tiles, dynf, first, c_map, cbar, wid, lane, crow, ccol, m, n, alpha, beta):
        # The ring is now each warp's C tile: the old C (beta), alpha * acc, the TMA store.
        c_off = wid * C_WARP_BYTES
        inside = crow < m and ccol < n
        if has_beta:
            if lane == 0 and inside:
                mbarrier.arrive_expect_tx(cbar[wid:], C_WARP_BYTES)
                tma.load(tiles[c_off:], c_map, (crow, ccol), cbar[wid:])
                if not OUT16:       # f32: the warp's 64 columns are two 32-column boxes
                    tma.load(tiles[c_off + C_BOX:], c_map, (crow, ccol + 32), cbar[wid:])
            if inside:
                mbarrier.wait(cbar[wid:], 0)
        write_tile(acc, tiles, dynf, first >> 2, c_off, lane, alpha, beta)
        fence.proxy_async_shared()
        cuda.syncwarp()
        if lane == 0 and inside:
            tma.store(c_map, (crow, ccol), tiles[c_off:])
            if not OUT16 and ccol + 32 < n:
                tma.store(c_map, (crow, ccol + 32), tiles[c_off + C_BOX:])
            tma.commit_group()
            tma.wait_group_read(0)

    @cuda.jit(launch_bounds=(cfg.threads, 1))
    def gemm(a_map, b_map, c_map, m, n, k, tiles_m, tiles_n, alpha, beta):
        dyn8, dynf, full, empty, cbar, _ = views()
        first = smem.aligned_offset(dyn8, BAR_BYTES, SWIZZLE_ALIGN)
        tiles = dyn8[first:]
        tid = cuda.threadIdx.x
        lane = tid & 31
        wid = tid >> 5
        wm = wid >> LOG_WN
        wn = wid & (WARPS_N - 1)
        rank = 0
        pid = cuda.blockIdx.x
        if CM > 1:
            rank = cluster.cta_rank()
            pid = pid // CM
        row0, col0 = tile_origin(pid, tiles_m, tiles_n, rank)
        num_k = (k + BK - 1) // BK

        if tid == 0:
            init_barriers(full, empty, cbar)
            mbarrier.fence_init()
        if CM > 1:
            cluster.sync()          # the peers' barriers exist before anything multicasts
        else:
            cuda.syncthreads()
        if tid == 0:
            for s in range(S):
                if s < num_k:
                    producer_commit(a_map, b_map, tiles, full, s, s, row0, col0, rank)

        acc = cuda.local.array(ACC, np.float32)
        for i in range(ACC):
            acc[i] = 0
        af = cuda.local.array(A_FRAG, np.uint32)
        bf = cuda.local.array(B_FRAG, np.uint32)
        for kt in range(num_k):
            s = kt & (S - 1)
            consumer_wait(full, s, kt >> LOG_S)
            if lane == 0:
                refill(a_map, b_map, tiles, full, empty, kt, num_k, wid, row0, col0, rank)
            cuda.syncwarp()
            mma_stage(acc, af, bf, tiles, s * STAGE_BYTES, lane, wm, wn)
            # This warp's ldmatrix of slot s fed the mma.syncs above: release the slot.
            cuda.syncwarp()
            if lane == 0:
                consumer_release(empty, s)

        # Every warp is past its last ldmatrix, so the ring becomes the C tiles.
        cuda.syncthreads()
        finish(acc, tiles, dynf, first, c_map, cbar, wid, lane, row0 + wm * WARP_TILE,
               col0 + wn * WARP_TILE, m, n, alpha, beta)
        if CM > 1:
            cluster.sync()          # no peer may still arrive on this CTA's barriers

    return gemm
