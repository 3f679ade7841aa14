"""The classic shared-memory transpose ladder, in plain numba: no TMA, no inline PTX.

Seed 003 (``003_9ca9761f2706c263.txt``, "CUDA 矩阵转置优化": shared-memory transposes v1..v5,
naive, smem, conflict-free rotation without padding, double buffering, 64x32 tiles, measured
against memcpy). v1-v5 live here; the v6 rungs, which ``numba_tma.transpose`` falls back to, are
shipped kernels (:mod:`numba_tma.kernels.transpose_v6`) and join ``LADDER`` from there.

Problem: ``src`` of shape (B, M, N), row-major, to ``out`` of shape (B, N, M), row-major, with
``out[b, j, i] = src[b, i, j]``. Every rung works for any M, N (partial edge tiles are guarded),
any batch B (on ``gridDim.z``, or folded into the tile index), and any element size; each kernel
is built by a ``functools.cache``d factory keyed by the numpy dtype, so shared tiles have constant
shapes and a constant element type.

The ladder (``LADDER`` keeps this order; every value is a launcher ``fn(src, out, stream=0)``;
what each rung ran on the H100: ``docs/transpose.md``):

====================  ====================================================================
``v1_naive``          one thread per element: coalesced writes, reads strided by N
``v2_smem``           32x32 shared tile: both global sides coalesced; 32-way conflicts
``v3_rotate``         v2 with the tile rotated ``smem[lx][(lx + ly) % 32]``: no conflicts
``v3_padded``         v2 with a 32x33 tile: the textbook fix, for comparison
``v4_double_buffer``  one block walks 4 tiles through 2 buffers, one sync per tile
``v5_64x32``          64x32 tiles: half the syncs (and blocks) per element
``v6_packed``         8-byte words, k x k register transposes, 16 KiB tiles (kernels/)
``v6_persistent``     v6_packed on a resident grid, next tile prefetched (kernels/)
====================  ====================================================================

Past the ladder, the shipped ``v7_vec16`` and ``v8_sector`` (:mod:`numba_tma.kernels`).

Banks with narrow or wide elements (32 banks x 4 bytes; the seed's analysis assumes 4 bytes).
Worst conflict degree of the column write, over all rows (``_bank_conflicts`` models it; the CPU
tests check this table); the row read is conflict-free in every layout:

==========  ==========  ============  ===========  ==========================================
itemsize    v2 (plain)  v3_rotate/v5  v3_padded    why
==========  ==========  ============  ===========  ==========================================
4           32-way      1             1            the seed's case
8           16-way      1             1            64-bit accesses are served per half-warp
                                                   (16 lanes x 8 B), so 16 distinct bank pairs
                                                   per half suffice
2           16-way      1             2-way        two elements per 4-byte word: a 32-element
                                                   row is 16 words, the 33 pitch 16.5 words
1           8-way       1             2-way        four per word: rows of 8 (8.25) words
==========  ==========  ============  ===========  ==========================================

Lanes that touch the same 4-byte word never conflict (one access serves them), which is why
narrow elements conflict less in v2. The rotation keeps every lane of a column write in a distinct
word of a distinct bank for all four sizes; the padding does not quite for 1 and 2 bytes.

The v6 kernels (:mod:`numba_tma.kernels.transpose_v6`) sidestep the narrow cases: they move
8-byte words (k = 8 / itemsize elements of a row), transpose k x k element blocks inside
registers and then transpose whole words through shared memory, where the 8-byte analysis holds
for every dtype.
"""

import collections
import functools

import numpy as np

from .._frontend import cuda
from ..launch import configure
from ..kernels._grid import cdiv, check_pair, grid3
from ..kernels.transpose_v6 import BEST, v6_packed, v6_persistent

TILE = 32                 # v2..v5 tile edge: 32 x 4 B = one 128-byte line per tile row
BLOCK_X, BLOCK_Y = 32, 8  # v1..v5 block: one warp per tile row, 8 warps
THREADS = BLOCK_X * BLOCK_Y
V4_TILES_X = V4_TILES_Y = 2   # v4: each block walks a 2 x 2 set of tiles, spaced a grid apart


# --------------------------------------------------------------------------- host helpers


def _bank_conflicts(itemsize, addr_of_lane, lanes=32):
    """Worst bank-conflict degree of one warp access (host model, for the docstrings' claims).

    ``addr_of_lane(lane)`` is the element index the lane touches. 8-byte accesses are served per
    half-warp; lanes touching the same 4-byte word share it (no conflict)."""
    group = 16 if itemsize == 8 else lanes
    worst = 1
    for g0 in range(0, lanes, group):
        words = collections.defaultdict(set)
        for lane in range(g0, g0 + group):
            byte = addr_of_lane(lane) * itemsize
            for w in range(max(1, itemsize // 4)):
                word = byte // 4 + w
                words[word % 32].add(word)
        worst = max(worst, max(len(s) for s in words.values()))
    return worst


# --------------------------------------------------------------------------- v1


@functools.cache
def _v1(dtype):
    @cuda.jit
    def transpose_v1_naive(src, out):
        b = cuda.blockIdx.z
        M = src.shape[1]
        N = src.shape[2]
        i = cuda.blockIdx.x * BLOCK_X + cuda.threadIdx.x   # out column = src row
        j = cuda.blockIdx.y * BLOCK_Y + cuda.threadIdx.y   # out row = src column
        if i < M and j < N:
            # A warp writes 32 consecutive out elements (one line) but reads 32 src rows
            # N elements apart: 32 separate sectors per load instruction.
            out[b, j, i] = src[b, i, j]

    return transpose_v1_naive


def v1_naive(src, out, stream=0):
    """Rung 1, the baseline: one thread per element, ``out[b, j, i] = src[b, i, j]``.

    The writes of a warp are coalesced (consecutive i), its reads are not: 32 lanes read 32
    different rows, so every load instruction touches 32 sectors and uses 4 of each 32 bytes that
    the memory system fetches. Only the L1/L2 caches, which keep the sectors until neighbouring
    warps use the rest, save it from 1/8 of copy bandwidth; expect about half of it.
    """
    src, out, B, M, N = check_pair(src, out)
    if B * M * N == 0:
        return
    grid = grid3(cdiv(M, BLOCK_X), cdiv(N, BLOCK_Y), B, "v1_naive")
    configure(_v1(np.dtype(src.dtype)), grid, (BLOCK_X, BLOCK_Y), stream)(src, out)


# --------------------------------------------------------------------------- v2, v3


def _tile_kernel(dtype, layout):
    """The one-tile kernels v2 / v3_rotate / v3_padded; ``layout`` picks the smem indexing."""
    rotate = layout == "rotate"
    pitch = TILE + 1 if layout == "padded" else TILE

    @cuda.jit
    def transpose_tile(src, out):
        tile = cuda.shared.array((TILE, pitch), dtype)
        b = cuda.blockIdx.z
        M = src.shape[1]
        N = src.shape[2]
        tx = cuda.threadIdx.x
        ty = cuda.threadIdx.y
        i0 = cuda.blockIdx.y * TILE      # first src row of the tile
        j0 = cuda.blockIdx.x * TILE      # first src column
        # Global -> shared: a warp reads 32 consecutive elements of one src row (coalesced) and
        # writes them down a column of the tile, tile[col][row] (the transpose happens here).
        for it in range(TILE // BLOCK_Y):
            ly = it * BLOCK_Y + ty
            i = i0 + ly
            j = j0 + tx
            if i < M and j < N:
                if rotate:
                    tile[tx, (tx + ly) & (TILE - 1)] = src[b, i, j]
                else:
                    tile[tx, ly] = src[b, i, j]
        cuda.syncthreads()
        # Shared -> global: a warp reads one tile row and writes 32 consecutive out elements.
        for it in range(TILE // BLOCK_Y):
            ly = it * BLOCK_Y + ty
            j = j0 + ly                  # out row
            i = i0 + tx                  # out column
            if j < N and i < M:
                if rotate:
                    out[b, j, i] = tile[ly, (tx + ly) & (TILE - 1)]
                else:
                    out[b, j, i] = tile[ly, tx]

    return transpose_tile


@functools.cache
def _v2(dtype):
    return _tile_kernel(dtype, "plain")


@functools.cache
def _v3_rotate(dtype):
    return _tile_kernel(dtype, "rotate")


@functools.cache
def _v3_padded(dtype):
    return _tile_kernel(dtype, "padded")


def _launch_tile(factory, name, src, out, stream):
    src, out, B, M, N = check_pair(src, out)
    if B * M * N == 0:
        return
    grid = grid3(cdiv(N, TILE), cdiv(M, TILE), B, name)
    configure(factory(np.dtype(src.dtype)), grid, (BLOCK_X, BLOCK_Y), stream)(src, out)


def v2_smem(src, out, stream=0):
    """Rung 2: stage a 32x32 tile in shared memory so both global sides are coalesced.

    Changed from v1: a warp reads 32 consecutive elements of a src row and, after one
    ``syncthreads``, writes 32 consecutive elements of an out row; the transposition happens in
    shared memory (written down a column, read along a row). Buys: every global access is a full
    128-byte line (4-byte elements), so DRAM traffic drops to the ideal 2 x size.
    Costs: the column write hits one bank 32 times (4-byte elements; 16-way per half-warp for
    8 bytes, 16-way for 2 bytes, 8-way for 1 byte), so each store to shared memory replays 32x.
    """
    _launch_tile(_v2, "v2_smem", src, out, stream)


def v3_rotate(src, out, stream=0):
    """Rung 3a: v2 with the seed's padding-free rotation ``smem[lx][(lx + ly) % 32]``.

    Changed from v2: element (row ly, col lx) of the tile is stored in row lx at column
    (lx + ly) mod 32, and read back from the same place. A warp writing a column now touches 32
    different columns -- 32 banks -- and a warp reading a row touches a rotated row, also 32
    banks. Buys: no bank conflicts for 1, 2, 4 and 8-byte elements (see the module docstring),
    without the 33rd column (the tile stays 4 KiB for fp32, aligned, power-of-two indexing).
    """
    _launch_tile(_v3_rotate, "v3_rotate", src, out, stream)


def v3_padded(src, out, stream=0):
    """Rung 3b: v2 with a 32x33 tile, the textbook bank-conflict fix, for comparison with v3a.

    Changed from v2: the tile's pitch is 33 elements, so a column's elements are 33 elements
    apart and fall in 32 different banks (4 bytes) or 16 different bank pairs per half-warp
    (8 bytes). Buys the same as the rotation for 4 and 8 bytes; for 2 and 1 byte a 33-element
    pitch is not a whole number of words and some rows still pair up two lanes per bank (2-way,
    versus 16- and 8-way in v2). Costs 32 elements of shared memory and a multiply by 33.
    """
    _launch_tile(_v3_padded, "v3_padded", src, out, stream)


# --------------------------------------------------------------------------- v4


@functools.cache
def _v4(dtype):
    ntiles = V4_TILES_X * V4_TILES_Y

    @cuda.jit(device=True)
    def load_tile(src, buf, b, i0, j0, tx, ty):
        M = src.shape[1]
        N = src.shape[2]
        for it in range(TILE // BLOCK_Y):
            ly = it * BLOCK_Y + ty
            if i0 + ly < M and j0 + tx < N:
                buf[tx, (tx + ly) & (TILE - 1)] = src[b, i0 + ly, j0 + tx]

    @cuda.jit(device=True)
    def store_tile(out, buf, b, i0, j0, tx, ty):
        N = out.shape[1]
        M = out.shape[2]
        for it in range(TILE // BLOCK_Y):
            ly = it * BLOCK_Y + ty
            if j0 + ly < N and i0 + tx < M:
                out[b, j0 + ly, i0 + tx] = buf[ly, (tx + ly) & (TILE - 1)]

    @cuda.jit
    def transpose_v4(src, out):
        smem = cuda.shared.array((2, TILE, TILE), dtype)
        b = cuda.blockIdx.z
        tx = cuda.threadIdx.x
        ty = cuda.threadIdx.y
        # Tile t of this block sits a whole grid away from tile t - 1 (as in the seed), so the
        # tiles that resident blocks work on at any moment stay one contiguous band.
        load_tile(src, smem[0], b, cuda.blockIdx.y * TILE, cuda.blockIdx.x * TILE, tx, ty)
        for t in range(ntiles):
            # One barrier per tile: it publishes buffer t & 1 (written last iteration) and
            # retires the reads of buffer (t + 1) & 1 (read last iteration) before the refill.
            cuda.syncthreads()
            if t + 1 < ntiles:
                tn = t + 1
                i0 = ((tn // V4_TILES_X) * cuda.gridDim.y + cuda.blockIdx.y) * TILE
                j0 = ((tn % V4_TILES_X) * cuda.gridDim.x + cuda.blockIdx.x) * TILE
                load_tile(src, smem[tn & 1], b, i0, j0, tx, ty)
            i0 = ((t // V4_TILES_X) * cuda.gridDim.y + cuda.blockIdx.y) * TILE
            j0 = ((t % V4_TILES_X) * cuda.gridDim.x + cuda.blockIdx.x) * TILE
            store_tile(out, smem[t & 1], b, i0, j0, tx, ty)

    return transpose_v4


def v4_double_buffer(src, out, stream=0):
    """Rung 4: one block walks 2 x 2 tiles through two shared buffers, one sync per tile.

    Changed from v3_rotate: a block loads tile t + 1 into the other buffer while it stores tile t,
    and needs a single ``syncthreads`` per tile (it both publishes the new tile and frees the old
    buffer). Buys: a quarter of the blocks (less launch and drain), and loads of the next tile
    issued before the stores of the current one, so a block keeps global reads in flight instead
    of alternating between all-load and all-store phases.
    """
    src, out, B, M, N = check_pair(src, out)
    if B * M * N == 0:
        return
    grid = grid3(cdiv(cdiv(N, TILE), V4_TILES_X), cdiv(cdiv(M, TILE), V4_TILES_Y), B,
                  "v4_double_buffer")
    configure(_v4(np.dtype(src.dtype)), grid, (BLOCK_X, BLOCK_Y), stream)(src, out)


# --------------------------------------------------------------------------- v5

V5_COLS = 2 * TILE   # the tile is 32 src rows x 64 src columns


@functools.cache
def _v5(dtype):
    @cuda.jit
    def transpose_v5(src, out):
        # Stored transposed: smem[src col][rotated src row], 64 x 32.
        tile = cuda.shared.array((V5_COLS, TILE), dtype)
        b = cuda.blockIdx.z
        M = src.shape[1]
        N = src.shape[2]
        tx = cuda.threadIdx.x
        ty = cuda.threadIdx.y
        i0 = cuda.blockIdx.y * TILE
        j0 = cuda.blockIdx.x * V5_COLS
        for it in range(TILE // BLOCK_Y):
            ly = it * BLOCK_Y + ty
            for ix in range(V5_COLS // BLOCK_X):
                lx = ix * BLOCK_X + tx
                if i0 + ly < M and j0 + lx < N:
                    # Lanes: 32 consecutive lx in one row ly -> 32 distinct rotated columns.
                    tile[lx, (lx + ly) & (TILE - 1)] = src[b, i0 + ly, j0 + lx]
        cuda.syncthreads()
        for it in range(V5_COLS // BLOCK_Y):
            ly = it * BLOCK_Y + ty      # out row within the tile (src column)
            if j0 + ly < N and i0 + tx < M:
                out[b, j0 + ly, i0 + tx] = tile[ly, (tx + ly) & (TILE - 1)]

    return transpose_v5


def v5_64x32(src, out, stream=0):
    """Rung 5: 32 x 64 src tiles (64 x 32 out tiles), the seed's other way to cut syncs.

    Changed from v3_rotate (not v4: for the same shared memory the two are alternatives): each
    block moves twice the elements, 8 per thread, for the same one ``syncthreads``. Buys half the
    barriers and blocks per element and twice the loads in flight per thread (8 independent
    loads are issued before the first shared store has to wait for them). Rotation stays
    ``(lx + ly) % 32`` on a 64-row tile: a warp's column write still spans 32 banks.
    """
    src, out, B, M, N = check_pair(src, out)
    if B * M * N == 0:
        return
    grid = grid3(cdiv(N, V5_COLS), cdiv(M, TILE), B, "v5_64x32")
    configure(_v5(np.dtype(src.dtype)), grid, (BLOCK_X, BLOCK_Y), stream)(src, out)


LADDER = collections.OrderedDict([
    ("v1_naive", v1_naive),
    ("v2_smem", v2_smem),
    ("v3_rotate", v3_rotate),
    ("v3_padded", v3_padded),
    ("v4_double_buffer", v4_double_buffer),
    ("v5_64x32", v5_64x32),
    ("v6_packed", v6_packed),
    ("v6_persistent", v6_persistent),
])

# BEST (v6_packed, measured against v6_persistent on the H100) comes with the v6 kernels from
# numba_tma.kernels.transpose_v6: transpose() runs it under the simulator.

__all__ = ["BEST", "LADDER", *LADDER]
