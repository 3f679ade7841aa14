"""The classic shared-memory transpose ladder (seed 003), in plain numba: no TMA, no inline PTX.

Problem: ``src`` of shape (B, M, N), row-major, to ``out`` of shape (B, N, M), row-major, with
``out[b, j, i] = src[b, i, j]``. Every rung works for any M, N (partial edge tiles are guarded),
any batch B (on ``gridDim.z``, or folded into the tile index), and any element size; each kernel
is built by a ``functools.cache``d factory keyed by the numpy dtype, so shared tiles have constant
shapes and a constant element type.

The ladder (``LADDER`` keeps this order; every value is a launcher ``fn(src, out, stream=0)``):

====================  ==========================================================================
``v1_naive``          one thread per element: coalesced writes, reads strided by N
``v2_smem``           32x32 shared tile: both global sides coalesced; 32-way bank conflicts
``v3_rotate``         v2 with the tile rotated ``smem[lx][(lx + ly) % 32]``: conflict-free, no pad
``v3_padded``         v2 with a 32x33 tile: the textbook fix, for comparison
``v4_double_buffer``  one block walks 4 tiles through 2 buffers, one sync per tile
``v5_64x32``          64x32 tiles: half the syncs (and blocks) per element
``v6_packed``         8-byte words, k x k register transposes, 16 KiB tiles, 64 B in flight/thread
``v6_persistent``     v6_packed on a resident grid, next tile prefetched into registers
====================  ==========================================================================

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

The v6 kernels sidestep the narrow cases: they move 8-byte words (k = 8 / itemsize elements of a
row), transpose k x k element blocks inside registers and then transpose whole words through
shared memory, where the 8-byte analysis holds for every dtype.
"""

import collections
import functools

import numpy as np
from numba import cuda

from .._arrays import as_device
from ._configure import configure

TILE = 32                 # v2..v5 tile edge: 32 x 4 B = one 128-byte line per tile row
BLOCK_X, BLOCK_Y = 32, 8  # v1..v5 block: one warp per tile row, 8 warps
THREADS = BLOCK_X * BLOCK_Y
V4_TILES_X = V4_TILES_Y = 2   # v4: each block walks a 2 x 2 set of tiles, spaced a grid apart
MAX_GRID_YZ = 65535


# --------------------------------------------------------------------------- host helpers


def _shape_dtype(a):
    cai = getattr(a, "__cuda_array_interface__", None)
    if cai is not None:
        return tuple(cai["shape"]), np.dtype(cai["typestr"])
    return tuple(a.shape), np.dtype(a.dtype)


def _check(src, out):
    """(src, out, B, M, N) of a matching pair, or a ValueError naming what is wrong; shapes are
    checked before anything touches the device."""
    (sshape, sdtype), (oshape, odtype) = _shape_dtype(src), _shape_dtype(out)
    if len(sshape) != 3 or len(oshape) != 3:
        raise ValueError(f"src and out must be 3-D, (B, M, N) and (B, N, M); got src {sshape} "
                         f"and out {oshape}")
    B, M, N = sshape
    if oshape != (B, N, M):
        raise ValueError(f"out must have shape (B, N, M) = {(B, N, M)} for src of shape "
                         f"{sshape}; got {oshape}")
    if sdtype != odtype:
        raise ValueError(f"src and out must have the same dtype; got {sdtype} and {odtype}")
    return as_device(src), as_device(out), B, M, N


def _cdiv(a, b):
    return -(-a // b)


def _grid3(gx, gy, gz, what):
    if gy > MAX_GRID_YZ or gz > MAX_GRID_YZ:
        raise ValueError(f"{what}: grid ({gx}, {gy}, {gz}) exceeds CUDA's 65535 limit on "
                         "gridDim.y/z; use v6_persistent for such shapes")
    return gx, gy, gz


def grid_chunks(gy, gz):
    """``(y0, ny, z0, nz)`` for each launch of a grid ``gy`` blocks tall and ``gz`` deep split
    so that every launch keeps gridDim.y and gridDim.z within 65535 (one launch when it fits)."""
    if gy <= MAX_GRID_YZ and gz <= MAX_GRID_YZ:
        return ((0, gy, 0, gz),)
    return tuple((y0, min(MAX_GRID_YZ, gy - y0), z0, min(MAX_GRID_YZ, gz - z0))
                 for z0 in range(0, gz, MAX_GRID_YZ) for y0 in range(0, gy, MAX_GRID_YZ))


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
    src, out, B, M, N = _check(src, out)
    if B * M * N == 0:
        return
    grid = _grid3(_cdiv(M, BLOCK_X), _cdiv(N, BLOCK_Y), B, "v1_naive")
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
    src, out, B, M, N = _check(src, out)
    if B * M * N == 0:
        return
    grid = _grid3(_cdiv(N, TILE), _cdiv(M, TILE), B, name)
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
    src, out, B, M, N = _check(src, out)
    if B * M * N == 0:
        return
    grid = _grid3(_cdiv(_cdiv(N, TILE), V4_TILES_X), _cdiv(_cdiv(M, TILE), V4_TILES_Y), B,
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
    src, out, B, M, N = _check(src, out)
    if B * M * N == 0:
        return
    grid = _grid3(_cdiv(N, V5_COLS), _cdiv(M, TILE), B, "v5_64x32")
    configure(_v5(np.dtype(src.dtype)), grid, (BLOCK_X, BLOCK_Y), stream)(src, out)


# --------------------------------------------------------------------------- v6

V6_THREADS = 256
V6_GROUP = 16         # tile rows per raster group (see v6_persistent's docstring)
V6_BLOCKS_PER_SM = 5  # v6_persistent: 5 x (2 x 16 KiB) smem, launch bounds cap registers at 48
V6_PACKED_MIN_BLOCKS = 8  # v6_packed: 2048 threads/SM, 8 x 16 KiB; caps registers at 32


def v6_config(itemsize, packed):
    """(word itemsize, k, TP, TQ) of a v6 tile.

    A word holds k elements of one row; the tile is TP x TQ micro-blocks of k x k elements, i.e.
    k*TP src rows x k*TQ src columns, stored as k*TQ x TP words in shared memory. Every packed
    tile is 16 KiB and every thread moves 8 words (64 B) per tile.
    """
    if packed:
        k = 8 // itemsize
        tp, tq = {1: (16, 16), 2: (16, 32), 4: (32, 32), 8: (64, 32)}[itemsize]
        return 8, k, tp, tq
    # Unpacked fallback (shapes not divisible by k, or misaligned views): elements as words.
    # TP = 64 keeps 8 loads per thread for 4 and 8 bytes. For 1 and 2 bytes a 64-element row is
    # 16 or 32 words, and the rotated column write would put neighbouring lanes on one bank in
    # different rows (2-way), so they keep the conflict-free TP = 32 (4 loads per thread).
    return itemsize, 1, (64 if itemsize >= 4 else 32), 32


def _bounded_jit(min_blocks):
    """``cuda.jit`` with launch bounds (V6_THREADS, min_blocks): caps registers so that
    ``min_blocks`` blocks fit on an SM. The simulator's ``jit`` takes no bounds."""
    try:
        return cuda.jit(launch_bounds=(V6_THREADS, min_blocks))
    except TypeError:
        return cuda.jit


def _stage_fn(k, h, sh, msk):
    """One butterfly stage of the k x k transpose of words x[base : base + k] (uint64)."""

    @cuda.jit(device=True)
    def stage(x, base):
        for i in range(k):
            if i & h == 0:
                t = ((x[base + i] >> sh) ^ x[base + i + h]) & msk
                x[base + i + h] ^= t
                x[base + i] ^= t << sh

    return stage


def _chain(stages):
    """A device function applying ``stages`` in turn (none: k = 1, a no-op)."""
    if not stages:
        @cuda.jit(device=True)
        def nothing(x, base):
            pass

        return nothing
    first, rest = stages[0], _chain(stages[1:])

    @cuda.jit(device=True)
    def both(x, base):
        first(x, base)
        rest(x, base)

    return both


@functools.cache
def _v6(word, k, TP, TQ, persistent, group):
    """v6 kernel on words of numpy dtype ``word``, k elements per word (k=1: plain elements)."""
    word = np.dtype(word)
    bits = 8 * word.itemsize // k             # bits of one element inside a word
    assert TP & (TP - 1) == 0 and TQ & (TQ - 1) == 0 and V6_THREADS % TQ == 0
    PSTEP = V6_THREADS // TQ                  # micro-rows between one thread's loads
    NL = TP // PSTEP                          # micro-blocks loaded per thread
    RSTEP = V6_THREADS // TP                  # tile rows between one thread's stores
    NS = k * TQ // RSTEP                      # words stored per thread
    NREG = NL * k
    assert NL * PSTEP == TP and NS * RSTEP == k * TQ
    kshift = k.bit_length() - 1
    ROWS = k * TQ                             # shared tile rows (words of TP per row)
    tpm = TP - 1
    # k x k register transpose by butterfly stages: stage h swaps the lanes (elements) with bit h
    # set in word i with the lanes without it in word i + h, for the words i without bit h; the
    # log2(k) stages swap every bit of the (row, lane) index pair. Constants are typed uint64 so
    # numba keeps the arithmetic in uint64 (uint64 op int64 would become float64).
    stages = []
    h = k // 2
    while h:
        lanes = sum(((1 << bits) - 1) << (c * bits) for c in range(k) if c & h == 0)
        stages.append(_stage_fn(k, h, np.uint64(h * bits), np.uint64(lanes)))
        h //= 2
    micro_transpose = _chain(stages)

    # Index math is done in uint64: numba adds a negative-index wraparound (compare, select,
    # add) to every signed array index, about 6 instructions per access, which unsigned indices
    # skip. All values are non-negative, so the casts are free bit-reinterpretations.
    @cuda.jit(device=True)
    def load(src, regs, b, P0, Q0, Mp, Nw, lp, lq):
        # Word (row R, col C) of batch b lives at (b * M + R) * Nw + C, M = k * Mp.
        q = Q0 + lq
        base = np.uint64((b * (k * Mp) + k * (P0 + lp)) * Nw + q)
        nw = np.uint64(Nw)
        if P0 + TP <= Mp and Q0 + TQ <= Nw:           # interior tile: no guards
            for i in range(NL):
                for r in range(k):
                    regs[i * k + r] = src[base + np.uint64(i * PSTEP * k + r) * nw]
        else:
            for i in range(NL):
                if P0 + lp + i * PSTEP < Mp and q < Nw:
                    for r in range(k):
                        regs[i * k + r] = src[base + np.uint64(i * PSTEP * k + r) * nw]

    @cuda.jit(device=True)
    def to_smem(regs, buf, lp, lq):
        for i in range(NL):
            micro_transpose(regs, i * k)
            # Word c of micro-block (p, q) now holds column k*q + c: it goes to tile row
            # k*q + c, column p rotated by the row's micro-column q. Lanes of a half-warp have
            # one p and 16 consecutive q, hence 16 distinct columns = bank pairs (8-byte words).
            col = np.uint32((lp + i * PSTEP + lq) & tpm)
            for c in range(k):
                buf[np.uint32(k * lq + c), col] = regs[i * k + c]

    @cuda.jit(device=True)
    def from_smem(out, buf, b, P0, Q0, Mp, Nw, sr, sc):
        # Tile row R is out row k*Q0 + R; a half-warp reads 16 consecutive (rotated) columns.
        col = P0 + sc
        base = np.uint64((b * (k * Nw) + k * Q0 + sr) * Mp + col)
        mp = np.uint64(Mp)
        if P0 + TP <= Mp and Q0 + TQ <= Nw:
            for j in range(NS):
                R = sr + j * RSTEP
                out[base + np.uint64(j * RSTEP) * mp] = \
                    buf[np.uint32(R), np.uint32((sc + (R >> kshift)) & tpm)]
        else:
            for j in range(NS):
                R = sr + j * RSTEP
                if Q0 + (R >> kshift) < Nw and col < Mp:
                    out[base + np.uint64(j * RSTEP) * mp] = \
                        buf[np.uint32(R), np.uint32((sc + (R >> kshift)) & tpm)]

    gshift = group.bit_length() - 1

    @cuda.jit(device=True)
    def in_group(loc, first, TRn):
        # Tile `loc` of the group of tile rows starting at `first`, column-major in the group:
        # (tile row, tile column). Full groups divide by the power-of-two `group` with a shift;
        # only the last, partial group pays a (32-bit) division.
        rows = min(group, TRn - first)
        if rows == group:
            tc = loc >> gshift
        else:
            tc = np.int64(np.uint32(loc) // np.uint32(rows))
        return first + (loc - tc * rows), tc

    @cuda.jit(device=True)
    def decode(t, per_batch, TRn, TCn):
        # Linear tile id -> (batch, first micro-row, first word column), rastered in groups of
        # `group` tile rows. Ids fit in 32 bits (the launcher checks), and the divisions are
        # done on uint32 values, which LLVM keeps 32-bit (a 64-bit division is ~70 instructions).
        # (Uniform branches skip the divisions for one batch and for one group.)
        b = 0
        if t >= per_batch:
            b = np.int64(np.uint32(t) // np.uint32(per_batch))
        r = t - b * per_batch
        g = 0
        if TRn > group:
            g = np.int64(np.uint32(r) // np.uint32(group * TCn))
        tr, tc = in_group(r - g * (group * TCn), g * group, TRn)
        return b, tr * TP, tc * TQ

    if not persistent:
        @_bounded_jit(V6_PACKED_MIN_BLOCKS)
        def transpose_v6_packed(src, out, Mp, Nw, TRn, TCn):
            # Grid: x = tile within a group of `group` tile rows, y = group, z = batch.
            tr, tc = in_group(np.int64(cuda.blockIdx.x), np.int64(cuda.blockIdx.y) * group, TRn)
            if tc >= TCn:          # the last group is shorter than the grid's x extent
                return
            buf = cuda.shared.array((ROWS, TP), word)
            regs = cuda.local.array(NREG, word)
            tid = cuda.threadIdx.x
            lq = tid & (TQ - 1)
            lp = tid // TQ
            sc = tid & tpm
            sr = tid // TP
            b = cuda.blockIdx.z
            P0 = tr * TP
            Q0 = tc * TQ
            load(src, regs, b, P0, Q0, Mp, Nw, lp, lq)
            to_smem(regs, buf, lp, lq)
            cuda.syncthreads()
            from_smem(out, buf, b, P0, Q0, Mp, Nw, sr, sc)

        return transpose_v6_packed

    @_bounded_jit(V6_BLOCKS_PER_SM)
    def transpose_v6_persistent(src, out, Mp, Nw, TRn, TCn, ntiles):
        buf = cuda.shared.array((2, ROWS, TP), word)
        regs = cuda.local.array(NREG, word)
        tid = cuda.threadIdx.x
        lq = tid & (TQ - 1)
        lp = tid // TQ
        sc = tid & tpm
        sr = tid // TP
        per_batch = TRn * TCn
        t = np.int64(cuda.blockIdx.x)
        stride = np.int64(cuda.gridDim.x)
        b, P0, Q0 = decode(t, per_batch, TRn, TCn)
        if t < ntiles:
            load(src, regs, b, P0, Q0, Mp, Nw, lp, lq)
        parity = 0
        while t < ntiles:
            # Buffer `parity` was last read two tiles ago, before the previous barrier.
            to_smem(regs, buf[parity], lp, lq)        # waits for this tile's loads
            cuda.syncthreads()                         # the only barrier per tile
            tn = t + stride
            bn, P0n, Q0n = decode(tn, per_batch, TRn, TCn)
            if tn < ntiles:
                # Next tile's loads go out now and fly while this tile is stored.
                load(src, regs, bn, P0n, Q0n, Mp, Nw, lp, lq)
            from_smem(out, buf[parity], b, P0, Q0, Mp, Nw, sr, sc)
            parity ^= 1
            t = tn
            b = bn
            P0 = P0n
            Q0 = Q0n

    return transpose_v6_persistent


def _device_pointer(a):
    try:
        return a.__cuda_array_interface__["data"][0]
    except (AttributeError, KeyError, TypeError):
        return a.__array_interface__["data"][0] if hasattr(a, "__array_interface__") else 0


def _check_group(group):
    group = int(group)
    if group < 1 or group & (group - 1):
        raise ValueError(f"group must be a power of two >= 1 (tile rows per raster group), "
                         f"got {group}")
    return group


def _v6_setup(src, out, B, M, N):
    """The packed path whenever it applies: (word dtype, k, TP, TQ, flat src words, flat out
    words, Mp = M / k, Nw = N / k); else the same on plain elements (k = 1)."""
    itemsize = np.dtype(src.dtype).itemsize
    k = 8 // itemsize if itemsize <= 8 else 1
    packed = (itemsize in (1, 2, 4, 8) and M % k == 0 and N % k == 0
              and _device_pointer(src) % 8 == 0 and _device_pointer(out) % 8 == 0)
    wsize, k, TP, TQ = v6_config(itemsize, packed)
    word = np.dtype(np.uint64) if packed else np.dtype(src.dtype)
    flat_src = src.reshape(B * M * N)
    flat_out = out.reshape(B * M * N)
    if packed:
        flat_src = flat_src.view(word)
        flat_out = flat_out.view(word)
    return word, k, TP, TQ, flat_src, flat_out, M // k, N // k


def v6_packed(src, out, stream=0, *, group=V6_GROUP):
    """Rung 6a: 8-byte words, k x k register transposes, 64 bytes in flight per thread.

    Changed from v5: (1) every global and shared access moves an 8-byte word: a thread loads k
    words from k consecutive src rows (a k x k block of elements, k = 8 / itemsize), transposes
    the block in registers with log2(k) shift/xor butterfly stages, and stores k words that are
    k consecutive out rows' pieces; shared memory then transposes whole words. (2) A tile is
    16 KiB (64 x 64 fp32, 64 x 32 fp64, 64 x 128 fp16, 128 x 128 bytes) and each of the 256
    threads issues 8 independent 8-byte loads (64 B) before its first shared store has to wait.
    (3) Interior tiles take an unguarded path; only edge tiles test bounds. (4) Rotation
    ``col = (p + q) mod TP`` keeps 8-byte shared accesses conflict-free for every dtype, since
    shared memory only ever sees 8-byte words.

    Buys: a quarter of the memory instructions of v3 for fp32 (one per 8 B instead of 4 B, per
    8 x the 1-byte case, which otherwise needs one instruction per byte and runs out of issue
    slots long before DRAM saturates), and 4x the bytes in flight per thread. The padded 32x32
    kernel keeps about 4 KiB of loads in flight per block, 16 KiB per SM on average; an H100 needs
    about bandwidth x latency = 3.35 TB/s x ~0.8 us / 132 SMs = ~20 KiB per SM, which is where
    its 87 % of copy comes from. Here each resident block has 16 KiB outstanding during its load
    phase (8 blocks of 256 threads per SM: launch bounds hold it to 32 registers). (5) Grouped
    rasterisation: consecutive blocks walk down ``group`` tile rows before moving right (see
    v6_persistent; ``group=1`` is the plain raster). Needs M and N divisible by k and 8-byte
    aligned buffers; otherwise the same kernel runs on plain elements (k = 1, 64 x 32 tiles for
    4 bytes, 32 x 32 for 1 and 2 bytes). Shapes whose grid would pass CUDA's 65535 limit on
    gridDim.y/z (a batch over 65535) run ``v6_persistent``.
    """
    src, out, B, M, N = _check(src, out)
    if B * M * N == 0:
        return
    word, k, TP, TQ, fs, fo, Mp, Nw = _v6_setup(src, out, B, M, N)
    group = _check_group(group)
    TRn, TCn = _cdiv(Mp, TP), _cdiv(Nw, TQ)
    # A group taller than the matrix would only add blocks that exit at once.
    while group > 1 and group > TRn:
        group //= 2
    if _cdiv(TRn, group) > MAX_GRID_YZ or B > MAX_GRID_YZ:
        # Past the grid's y/z limits (a batch over 65535, ~67M+ rows): the persistent kernel
        # walks any number of tiles from one linear index.
        return v6_persistent(src, out, stream, group=group)
    grid = _grid3(group * TCn, _cdiv(TRn, group), B, "v6_packed")
    configure(_v6(word, k, TP, TQ, False, group), grid, V6_THREADS, stream)(fs, fo, Mp, Nw, TRn, TCn)


@functools.cache
def _resident_blocks(kernel, args_types, device_id):
    """How many blocks of ``kernel`` fit on the whole GPU at once (occupancy x SMs)."""
    return kernel.compile(args_types).max_cooperative_grid_blocks(V6_THREADS)


def _persistent_grid(kernel, args):
    """The resident grid of a v6_persistent kernel for ``args``; a guess under the simulator,
    which has no occupancy API (and no speed to tune)."""
    try:
        types_ = tuple(kernel.typeof_pyval(a) for a in args)
        return _resident_blocks(kernel, types_, cuda.get_current_device().id)
    except Exception:
        return 132 * V6_BLOCKS_PER_SM


def v6_persistent(src, out, stream=0, *, grid=None, group=V6_GROUP):
    """Rung 6b (BEST): v6_packed on a resident grid that walks tiles, next tile in registers.

    Changed from v6_packed: (1) the grid is exactly as many blocks as fit on the GPU at once
    (the occupancy API x SMs: 5 x 256 threads per SM, launch bounds hold it to 48 registers; two
    16 KiB buffers each); block g handles tiles g, g + grid, g + 2 grid, ... (``grid=`` overrides
    it). (2) Software pipeline per tile: write the registers (tile t) to shared buffer t & 1, one
    ``syncthreads``, issue the 8 loads of tile t + 1 into the same registers, then read buffer
    t & 1 and store tile t. The next tile's loads fly during the whole store phase, so an SM
    keeps ~5 x 16 KiB of reads outstanding all the time rather than only while a block is in
    its load phase, with no block launch/drain between tiles and one barrier per 16 KiB tile.
    Buffer t & 1 is rewritten two tiles later, after the barrier that follows its last read.
    (3) Grouped rasterisation: consecutive tile ids walk down ``group`` tile rows before moving
    right, so the ~660 tiles in flight (x2 counting the prefetch) cover a squarish region
    (16 x ~40 tiles by default) instead of 1.3 tile rows: src rows are read in ~10 KiB runs and
    out rows written in 4 KiB runs, rather than 256-byte pieces scattered over every out row of
    the matrix, which keeps DRAM row buffers and the L2's write-back on fewer pages. ``group``
    (a power of two; 1 = plain raster) is a knob worth sweeping: 1, 4, 16, 64.

    Expected on an H100 at 32768^2 fp32 (64 x 64 tiles, 262144 of them, ~400 per block): each
    load instruction is one 256-byte warp request (a copy kernel's shape), the stores are whole
    256-byte runs, shared memory is conflict-free, interior tiles have no bounds checks (offline
    SASS per tile and thread: 8 ``LDG.E.64``, 8 ``STS.64``, one ``BAR``, 8 ``LDS.64``, 8
    ``STG.E.64``; ptxas parks one 4-byte smem address in local memory, reloaded once per tile).
    The loop is ~300 instructions per thread per tile, ~100 of them the tile decode; at 3 TB/s
    that is about 1 warp instruction per clock per SM of the 4 it can issue, so the limit should
    be DRAM, as for a copy, and >= 92 % of copy bandwidth the result. If it is not, the knobs in
    order: ``group`` (1 / 4 / 64), then v6_packed (which wins if block turnover is cheaper than
    the decode), then ``V6_BLOCKS_PER_SM`` = 4 (64 registers, no spill: the store phase then
    issues most of its 8 shared loads ahead of the global stores instead of pairing each one
    with its store).
    """
    src, out, B, M, N = _check(src, out)
    if B * M * N == 0:
        return
    word, k, TP, TQ, fs, fo, Mp, Nw = _v6_setup(src, out, B, M, N)
    TRn, TCn = _cdiv(Mp, TP), _cdiv(Nw, TQ)
    ntiles = B * TRn * TCn
    if ntiles >= 2 ** 31:
        raise ValueError(f"v6_persistent: {ntiles} tiles exceed the 32-bit tile index")
    kern = _v6(word, k, TP, TQ, True, _check_group(group))
    args = (fs, fo, Mp, Nw, TRn, TCn, ntiles)
    if grid is None:
        grid = _persistent_grid(kern, args)
    grid = max(1, min(int(grid), ntiles))
    configure(kern, grid, V6_THREADS, stream)(*args)


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

# Measured on the H100 (benches/results/transpose-h100.json): v6_packed beat v6_persistent for
# every element size and at odd shapes (e.g. 92.5% vs 92.0% of copy at 32768^2 fp32).
BEST = "v6_packed"

__all__ = ["BEST", "LADDER", *LADDER]
