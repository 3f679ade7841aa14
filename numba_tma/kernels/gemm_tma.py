"""The TMA-fed tensor-core GEMM: ``C = alpha * A @ B + beta * C`` with 16-bit inputs, fp32
accumulation and f16/bf16/f32 output, on ``cp.async.bulk.tensor`` + ``ldmatrix`` + ``mma.sync``.

One block computes a ``BM x BN`` tile of C with 8 warps, each owning a 64 x 64 warp tile
(4 x 8 ``m16n8k16`` accumulators = 128 f32 registers per thread). The K loop streams
``BK = 64``-deep slices of A and B through a ring of ``stages`` shared-memory buffers:

* TMA loads with the 128B swizzle: a 64-element (128-byte) row of either operand is one swizzle
  span, so K-major operands arrive as one ``rows x 64`` box and M/N-major ones as 64 x 64 boxes;
  out-of-range rows, columns and K are zero-filled by the hardware (any M, N, K).
* mbarriers, producer/consumer: ``full[s]`` (one arrival + the stage's transaction bytes) tells
  the warps slice s landed; ``empty[s]`` (one arrival per consumer warp) tells the producer every
  warp has read it. The consumer warps take turns as the producer: at step ``kt``, lane 0 of
  warp ``(kt - 1) % warps`` refills the slot of step ``kt - 1`` (``stages - 1`` slices stay in
  flight). On the H100 this beat a fixed producer thread at 4096^3 and 8192^3 (one side run):
  the block runs at the pace of its slowest warp, and a fixed producer makes warp 0 the slowest
  every step. A separate producer warp would not fit: a
  288-thread block is budgeted registers as 384 threads (168 each), and the 128 accumulators
  then spill; Hopper's answer, ``setmaxnreg`` across warpgroups, is wgmma territory. Measured
  and dropped: double-buffered fragments across the stage boundary (ptxas already interleaves
  the next step's ldmatrix with the HMMAs; waiting for the next slot earlier was slower), a
  later refill point (less lookahead: slower), two 128 x 128 blocks per SM (no faster).
* ``ldmatrix.x4`` reads fragments from the swizzled tiles without bank conflicts (the 16-byte
  chunk index XOR row % 8 spreads 8 rows over all 32 banks), ``.trans`` for M/N-major operands.
* Epilogue: the ring becomes each warp's C tile; accumulators are scaled (and ``beta`` times the
  old C, loaded by TMA, added), packed to f16x2/bf16x2 and written with ``stmatrix`` (f32: 8-byte
  stores) into a 128B-swizzled box, which one lane stores with TMA (rows/columns past the matrix
  are clipped by the hardware).

Tiles are visited in groups of ``group_m`` tile rows so the blocks running together share A and
B slices in L2.
"""

import functools
import math

import numpy as np
from numba import cuda

from .._bridge import inline_device
from .. import cluster, fence, mbarrier, smem, tma, warp
from ._gemm_slices import slice_loader

__all__ = ["GemmConfig", "DEFAULT_CONFIG", "gemm_kernel", "smem_bytes", "SIGNATURE"]

SPAN = 128                   # bytes in one 128B-swizzle row: 64 16-bit elements
BK = 64                      # K per stage: one swizzle row of a K-major operand
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

SIGNATURE = ("void(uint64[::1], uint64[::1], uint64[::1], int64, int64, int64, int64, int64, "
             "float32, float32)")


class GemmConfig:
    """Block tile ``bm x bn`` (multiples of 64; one warp per 64 x 64), ``stages`` ring slots,
    ``group_m`` tile rows per raster group, ``cluster_m`` CTAs per thread-block cluster along M
    (2: the pair shares its B slices, each CTA loading half and multicasting it to both)."""

    __slots__ = ("bm", "bn", "stages", "group_m", "cluster_m")

    def __init__(self, bm=128, bn=256, stages=4, group_m=8, cluster_m=1):
        if bm % WARP_TILE or bn % WARP_TILE or not 1 <= (bm // 64) * (bn // 64) <= MAX_WARPS:
            raise ValueError(f"block tile {bm} x {bn}: both must be multiples of {WARP_TILE} "
                             f"and give 1 to {MAX_WARPS} warps (each thread holds 128 "
                             f"accumulators; more warps would spill)")
        if (bn // WARP_TILE) & (bn // WARP_TILE - 1):
            raise ValueError(f"bn = {bn} must be 64 times a power of two (warps index C's "
                             f"columns with a shift)")
        if bm > 256 or bn > 256:
            raise ValueError(f"block tile {bm} x {bn}: a TMA box has at most 256 rows")
        if stages < 2 or stages & (stages - 1):
            raise ValueError(f"stages = {stages} must be a power of two >= 2")
        if cluster_m not in (1, 2):
            raise ValueError(f"cluster_m = {cluster_m} must be 1 or 2")
        if cluster_m == 2 and bn // WARP_TILE < 2:
            raise ValueError(f"cluster_m = 2 splits B's {bn} columns in halves of 64; bn >= 128")
        self.bm, self.bn, self.stages, self.group_m = bm, bn, stages, group_m
        self.cluster_m = cluster_m
        need = smem_bytes(self, 4)
        if need > MAX_DYNAMIC_SMEM:
            raise ValueError(f"{self!r} needs {need} bytes of shared memory; a block may have "
                             f"{MAX_DYNAMIC_SMEM}: use fewer stages or a smaller tile")

    def key(self):
        return (self.bm, self.bn, self.stages, self.group_m, self.cluster_m)

    @property
    def threads(self):
        """Threads per block: one warp per 64 x 64 tile of C."""
        return 32 * (self.bm // WARP_TILE) * (self.bn // WARP_TILE)

    def __repr__(self):
        return (f"GemmConfig(bm={self.bm}, bn={self.bn}, stages={self.stages}, "
                f"group_m={self.group_m}, cluster_m={self.cluster_m})")


def _layout(cfg):
    warps = (cfg.bm // WARP_TILE) * (cfg.bn // WARP_TILE)
    a_bytes = cfg.bm * SPAN
    b_bytes = cfg.bn * SPAN
    n_bars = 2 * cfg.stages + warps
    return warps, a_bytes, b_bytes, n_bars


def smem_bytes(cfg, out_itemsize):
    """Dynamic shared memory of one block: barriers, alignment slack, the ring (which the
    epilogue reuses for C)."""
    warps, a_bytes, b_bytes, n_bars = _layout(cfg)
    ring = cfg.stages * (a_bytes + b_bytes)
    c_tile = warps * WARP_TILE * WARP_TILE * out_itemsize
    return 8 * n_bars + SWIZZLE_ALIGN + max(ring, c_tile)


DEFAULT_CONFIG = GemmConfig()


@functools.cache
def gemm_kernel(cfg_key, a_kmajor, b_kmajor, in_kind, out_kind, has_beta):
    """The kernel for one configuration. ``a_kmajor``: A is stored M x K row-major (else K x M);
    ``b_kmajor``: B is stored N x K row-major (else K x N). ``in_kind`` "f16"/"bf16";
    ``out_kind`` "f16"/"bf16"/"f32"; ``has_beta`` adds ``beta * C`` (C loaded by TMA)."""
    bm, bn, S, group_m, CM = cfg_key
    cfg = GemmConfig(*cfg_key)
    WARPS, A_BYTES, B_BYTES, NBARS = _layout(cfg)
    STAGE_BYTES = A_BYTES + B_BYTES
    WARPS_N = bn // WARP_TILE
    LOG_WN = WARPS_N.bit_length() - 1
    assert WARPS_N & (WARPS_N - 1) == 0
    LOG_S = S.bit_length() - 1
    BAR_BYTES = 8 * NBARS
    OUT16 = out_kind != "f32"
    C_WARP_BYTES = WARP_TILE * WARP_TILE * (2 if OUT16 else 4)
    C_BOX = WARP_TILE * SPAN                   # f32: 64 rows x 32 columns; 16-bit: 64 x 64
    mma = warp.mma_m16n8k16_f32_f16 if in_kind == "f16" else warp.mma_m16n8k16_f32_bf16
    pack = warp.pack_f16x2 if out_kind == "f16" else warp.pack_bf16x2
    unpack = warp.unpack_f16x2 if out_kind == "f16" else warp.unpack_bf16x2
    A_TRANS = not a_kmajor
    B_TRANS = not b_kmajor
    # With a cluster of CM CTAs along M, each CTA loads its part of B and multicasts it.
    EMPTY_ARRIVALS = WARPS * CM           # every warp of every CTA the stage is multicast into
    issue_stage = slice_loader(bm, bn, CM, a_kmajor, b_kmajor)

    if WARPS & (WARPS - 1) == 0:
        @inline_device
        def producer_warp(j):
            return j & (WARPS - 1)
    else:
        @inline_device
        def producer_warp(j):
            return j % WARPS

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

    @cuda.jit(launch_bounds=(cfg.threads, 1))
    def gemm(a_map, b_map, c_map, m, n, k, tiles_m, tiles_n, alpha, beta):
        dyn64 = cuda.shared.array(0, np.uint64)
        dyn8 = cuda.shared.array(0, np.uint8)
        dynf = cuda.shared.array(0, np.float32)
        full = dyn64[:S]
        empty = dyn64[S:2 * S]
        cbar = dyn64[2 * S:NBARS]
        # The ring starts at the first 1024-byte boundary after the barriers (128B swizzle).
        first = smem.aligned_offset(dyn8, BAR_BYTES, SWIZZLE_ALIGN)
        tiles = dyn8[first:]
        tid = cuda.threadIdx.x
        lane = tid & 31
        wid = tid >> 5
        wm = wid >> LOG_WN
        wn = wid & (WARPS_N - 1)

        # Raster: group_m tile rows walk the tile columns together (L2 reuse of B). In a
        # cluster the unit is a column of CM tiles (the CTAs sharing B); the last one may
        # reach past M: its CTA loads zeros, computes, and stores nothing.
        rank = 0
        pid = cuda.blockIdx.x
        if CM > 1:
            rank = cluster.cta_rank()
            pid = pid // CM
        units_m = (tiles_m + CM - 1) // CM
        width = group_m * tiles_n
        first_m = (pid // width) * group_m
        gsize = min(units_m - first_m, group_m)
        tm = (first_m + (pid % width) % gsize) * CM + rank
        tn = (pid % width) // gsize
        row0 = tm * bm
        col0 = tn * bn
        num_k = (k + BK - 1) // BK

        if tid == 0:
            for s in range(S):
                mbarrier.init(full[s:], 1)
                mbarrier.init(empty[s:], EMPTY_ARRIVALS)
            for w in range(WARPS):
                mbarrier.init(cbar[w:], 1)
            mbarrier.fence_init()
        if CM > 1:
            cluster.sync()          # the peers' barriers exist before anything multicasts
        else:
            cuda.syncthreads()
        if tid == 0:
            for s in range(S):
                if s < num_k:
                    issue_stage(a_map, b_map, tiles, full[s:], s * STAGE_BYTES, s, row0, col0,
                                rank)

        acc = cuda.local.array(ACC, np.float32)
        for i in range(ACC):
            acc[i] = 0
        af = cuda.local.array(A_FRAG, np.uint32)
        bf = cuda.local.array(B_FRAG, np.uint32)

        for kt in range(num_k):
            s = kt & (S - 1)
            phase = (kt >> LOG_S) & 1
            mbarrier.wait(full[s:], phase)
            if lane == 0:
                # Refill the slot step kt - 1 used, once every warp has released it. The warps
                # take turns (lane 0 of warp (kt - 1) % WARPS), so no warp carries all the
                # producer's instructions and waits and falls behind the others.
                j = kt - 1
                if j >= 0 and j + S < num_k and producer_warp(j) == wid:
                    sj = j & (S - 1)
                    mbarrier.wait(empty[sj:], (j >> LOG_S) & 1)
                    issue_stage(a_map, b_map, tiles, full[sj:], sj * STAGE_BYTES, j + S,
                                row0, col0, rank)
            cuda.syncwarp()
            a_base = s * STAGE_BYTES
            b_base = a_base + A_BYTES
            for kk in range(K_STEPS):
                for mi in range(M_TILES):
                    warp.ldmatrix(af[mi * 4:], tiles, a_base + a_offset(lane, wm, mi, kk),
                                  4, A_TRANS)
                for nj in range(N_TILES // 2):
                    warp.ldmatrix(bf[nj * 4:], tiles, b_base + b_offset(lane, wn, nj, kk),
                                  4, B_TRANS)
                for mi in range(M_TILES):
                    for ni in range(N_TILES):
                        c = (mi * N_TILES + ni) * 4
                        mma(acc[c:], af[mi * 4:], bf[ni * 2:], acc[c:])
            # This warp's ldmatrix of slot s fed the HMMAs above: release the slot.
            cuda.syncwarp()
            if lane == 0:
                if CM == 1:
                    mbarrier.arrive(empty[s:])
                else:       # release the stage to every CTA that multicasts into it
                    for r in range(CM):
                        cluster.mbarrier_arrive_cta(empty[s:], r)

        # Epilogue: every warp is past its last ldmatrix, so the ring becomes the C tiles.
        cuda.syncthreads()
        c_off = wid * C_WARP_BYTES
        crow = row0 + wm * WARP_TILE
        ccol = col0 + wn * WARP_TILE
        inside = crow < m and ccol < n
        if has_beta:
            if lane == 0 and inside:
                mbarrier.arrive_expect_tx(cbar[wid:], C_WARP_BYTES)
                tma.load(tiles[c_off:], c_map, (crow, ccol), cbar[wid:])
                if not OUT16:       # f32: the warp's 64 columns are two 32-column boxes
                    tma.load(tiles[c_off + C_BOX:], c_map, (crow, ccol + 32), cbar[wid:])
            if inside:
                mbarrier.wait(cbar[wid:], 0)
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
            fbase = first >> 2
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
        fence.proxy_async_shared()
        cuda.syncwarp()
        if lane == 0 and inside:
            tma.store(c_map, (crow, ccol), tiles[c_off:])
            if not OUT16 and ccol + 32 < n:
                tma.store(c_map, (crow, ccol + 32), tiles[c_off + C_BOX:])
            tma.commit_group()
            tma.wait_group_read(0)
        if CM > 1:
            cluster.sync()          # no peer may still arrive on this CTA's barriers

    return gemm


def grid_size(m, n, cfg):
    """Blocks to launch: one per tile, the tile rows rounded up to whole clusters."""
    units_m = math.ceil(math.ceil(m / cfg.bm) / cfg.cluster_m)
    return units_m * cfg.cluster_m * math.ceil(n / cfg.bn)
