"""TMA transposes (seed 000, then past it), out[b, j, i] = src[b, i, j] for (B, M, N) arrays.

Every kernel reads a tile of ``src`` with a TMA load, transposes it inside shared memory and writes
it with a TMA store through a second tensor map over ``out`` at the swapped coordinates. The TMA
unit fills the part of an edge tile that lies outside ``src`` and clips it on the store, so any
M and N work, as long as both maps are legal: rows of ``src`` and ``out`` (N and M elements) must
be multiples of 16 bytes. The public ``numba_tma.transpose`` falls back to the classic kernels when
they are not.

The ladder (each docstring says what changed and what it buys):
  tma_naive       seed 000's first version: a 32x32 tile per block, no swizzle
  tma_swizzle128  the same with 128B-swizzled tiles and the swizzle index math
  tma_batched     128B swizzle, each thread moves 8 elements
  tma_pipelined   persistent blocks, a ring of TMA loads in flight, 16-byte shared accesses in
                  bank-conflict-free 16x16-byte micro-tiles, double-buffered TMA stores; any
                  element size (1, 2, 4, 8 bytes)
"""

import functools

import numpy as np
from numba import cuda

from .. import fence, mbarrier, smem, swizzle, tma
from ._descriptors import descriptor

__all__ = ["LADDER", "BEST", "tma_naive", "tma_swizzle128", "tma_batched", "tma_pipelined",
           "pipelined_config"]

SEED_TILE = 32          # seed 000: 32 x 32 fp32 tiles
SEED_BATCH = 8          # elements per thread in tma_batched
LINE = 128              # bytes per tile row in tma_pipelined: one 128B-swizzle span
CHUNK = 16              # bytes per ld/st.shared.v4
THREADS_PIPELINED = 64  # 8 row blocks x 8 chunk columns of 16x16-byte micro-tiles


def _grid(tiles_i, tiles_j, batch):
    return (tiles_j, tiles_i, batch)


def _tiles(m, n, tile_m, tile_n):
    return -(-m // tile_m), -(-n // tile_n)


# -- seed 000 variants: 4-byte elements, one 32x32 tile per block ---------------------------------

@functools.cache
def _naive_kernel():
    T = SEED_TILE
    TT = T * T              # shared array shapes must be plain constants

    @cuda.jit
    def tma_naive_kernel(src_map, out_map):
        tile = cuda.shared.array(TT, np.uint32, alignment=128)
        tile_tr = cuda.shared.array(TT, np.uint32, alignment=128)
        bar = cuda.shared.array(1, np.uint64)
        mbarrier.init_block(bar, 1)
        b = cuda.blockIdx.z
        y = cuda.blockIdx.y * T
        x = cuda.blockIdx.x * T
        if cuda.threadIdx.x == 0:
            tma.load_tile(tile, src_map, (b, y, x), bar)
        mbarrier.wait(bar, 0)
        col = cuda.threadIdx.x % T
        row = cuda.threadIdx.x // T
        tile_tr[col * T + row] = tile[row * T + col]   # 32-way bank conflicts on the write
        tma.store_tile(out_map, (b, x, y), tile_tr)

    return tma_naive_kernel


@functools.cache
def _swizzled_kernel(batch):
    T = SEED_TILE
    TT = T * T
    per_row = T // batch

    @cuda.jit
    def tma_swizzled_kernel(src_map, out_map):
        tile = cuda.shared.array(TT, np.uint32, alignment=1024)
        tile_tr = cuda.shared.array(TT, np.uint32, alignment=1024)
        bar = cuda.shared.array(1, np.uint64)
        mbarrier.init_block(bar, 1)
        b = cuda.blockIdx.z
        y = cuda.blockIdx.y * T
        x = cuda.blockIdx.x * T
        if cuda.threadIdx.x == 0:
            tma.load_tile(tile, src_map, (b, y, x), bar)
        mbarrier.wait(bar, 0)
        row = cuda.threadIdx.x // per_row
        col0 = (cuda.threadIdx.x % per_row) * batch
        for j in range(batch):
            col = col0 + j
            # Both tiles are 128B-swizzled: logical (r, c) sits at column swizzle.col(r, c).
            tile_tr[col * T + swizzle.col(col, row, 4, 128)] = tile[row * T + swizzle.col(row, col, 4, 128)]
        tma.store_tile(out_map, (b, x, y), tile_tr)

    return tma_swizzled_kernel


def _check_4byte(name, src):
    if src.dtype.itemsize != 4:
        raise TypeError(f"{name} is seed 000's 4-byte kernel; src has {src.dtype.itemsize}-byte "
                        f"elements ({src.dtype}); use tma_pipelined for other sizes")


def _seed_launch(name, kernel, threads, swz, src, out, stream):
    _check_4byte(name, src)
    B, M, N = src.shape
    box = (1, SEED_TILE, SEED_TILE)
    src_map = descriptor(src, box, swz)
    out_map = descriptor(out, box, swz)
    ti, tj = _tiles(M, N, SEED_TILE, SEED_TILE)
    kernel[_grid(ti, tj, B), threads, stream](src_map, out_map)


def tma_naive(src, out, stream=0):
    """Seed 000's naive TMA transpose: TMA load, ``tr[c][r] = t[r][c]`` in shared memory, TMA store
    of the transposed tile at the swapped coordinates. 1024 threads, one element each; the column
    write to shared memory is a 32-way bank conflict (seed: 875 GB/s at 32768^2 fp32 on an H100)."""
    _seed_launch("tma_naive", _naive_kernel(), SEED_TILE * SEED_TILE, 0, src, out, stream)


def tma_swizzle128(src, out, stream=0):
    """+ 128B swizzle on both tiles: the same shared-memory walk now spreads over the banks
    (seed: 1252 GB/s)."""
    _seed_launch("tma_swizzle128", _swizzled_kernel(1), SEED_TILE * SEED_TILE, 128, src, out, stream)


def tma_batched(src, out, stream=0):
    """+ thread batching: 128 threads, 8 elements each, so fewer threads wait per tile and more
    independent shared-memory operations are in flight (seed: 2771 GB/s)."""
    _seed_launch("tma_batched", _swizzled_kernel(SEED_BATCH), SEED_TILE * SEED_TILE // SEED_BATCH,
                 128, src, out, stream)


# -- past the seed: the pipelined, persistent kernel -----------------------------------------------

def pipelined_config(itemsize):
    """(tile elements per side, stages) for tma_pipelined; tiles are (128 / itemsize)^2, i.e.
    128 rows of 128 bytes at most; stages fill the 48 KB of static shared memory."""
    tile = LINE // itemsize
    tile_bytes = tile * LINE
    stages = {1: 1, 2: 3, 4: 4, 8: 8}[itemsize]
    assert (stages + 2) * tile_bytes <= 48 * 1024
    return tile, stages


def _micro_transpose_source(itemsize):
    """Straight-line source of the register transpose of one E x E-element micro-tile.

    ``wi``/``wo`` hold E chunks of 4 words; element (r, c) of the input is chunk r, word
    c // P, bits BITS*(c % P) (P elements per word). Generated unrolled so every index is a
    constant and both arrays stay in registers (LLVM stops fully unrolling the 1-byte case).
    """
    E = CHUNK // itemsize
    lines = ["def micro_transpose(wi, wo):"]
    if itemsize == 8:
        for c in range(E):
            for r in range(E):
                for h in range(2):
                    lines.append(f"    wo[{4 * c + 2 * r + h}] = wi[{4 * r + 2 * c + h}]")
    else:
        P, bits = 4 // itemsize, 8 * itemsize
        mask = (1 << bits) - 1
        for c in range(E):
            for w in range(4):
                terms = []
                for h in range(P):
                    src = f"wi[{4 * (w * P + h) + c // P}]"
                    shift_in, shift_out = bits * (c % P), bits * h
                    term = f"({src} >> np.uint32({shift_in}))" if shift_in else src
                    if P > 1:
                        term = f"({term} & np.uint32({mask}))"
                    if shift_out:
                        term = f"({term} << np.uint32({shift_out}))"
                    terms.append(term)
                lines.append(f"    wo[{4 * c + w}] = " + " | ".join(terms))
    return "\n".join(lines) + "\n"


@functools.cache
def _micro_transpose(itemsize):
    scope = {"np": np}
    exec(compile(_micro_transpose_source(itemsize), f"<micro_transpose_{itemsize}>", "exec"), scope)
    return cuda.jit(device=True, inline="always")(scope["micro_transpose"])


@functools.cache
def _pipelined_kernel(itemsize):
    T, S = pipelined_config(itemsize)
    E = CHUNK // itemsize                 # elements per 16-byte chunk = rows per micro-tile
    TILE_BYTES = T * LINE
    TILE_WORDS = TILE_BYTES // 4
    NW = 4 * E                            # words in one thread's micro-tile
    IN_WORDS = S * TILE_WORDS             # shared array shapes must be plain constants
    OUT_WORDS = 2 * TILE_WORDS
    micro_transpose = _micro_transpose(itemsize)

    @cuda.jit(device=True, inline="always")
    def advance(cur, step, tiles_i, tiles_j):
        # cur = (b, ti, tj) of tile t -> tile t + step, without 64-bit divisions (which compile
        # to subroutine calls): the grid is at most a few times wider than a row of tiles.
        cur[2] += step
        while cur[2] >= tiles_j:
            cur[2] -= tiles_j
            cur[1] += 1
        while cur[1] >= tiles_i:
            cur[1] -= tiles_i
            cur[0] += 1

    @cuda.jit
    def tma_pipelined_kernel(src_map, out_map, n_tiles, tiles_i, tiles_j):
        in_tiles = cuda.shared.array(IN_WORDS, np.uint32, alignment=1024)
        out_tiles = cuda.shared.array(OUT_WORDS, np.uint32, alignment=1024)
        full = cuda.shared.array(S, np.uint64)
        wi = cuda.local.array(NW, np.uint32)
        wo = cuda.local.array(NW, np.uint32)
        cur = cuda.local.array(3, np.int64)    # (b, ti, tj) of the tile being transposed
        nxt = cuda.local.array(3, np.int64)    # ... and of the next tile to load
        mbarrier.init_block(full, 1)
        tid = cuda.threadIdx.x
        step = cuda.gridDim.x
        cur[0] = 0
        cur[1] = 0
        cur[2] = 0
        advance(cur, cuda.blockIdx.x, tiles_i, tiles_j)
        nxt[0] = cur[0]
        nxt[1] = cur[1]
        nxt[2] = cur[2]
        t_next = cuda.blockIdx.x
        if tid == 0:
            for s in range(S):
                if t_next < n_tiles:
                    mbarrier.arrive_expect_tx(full[s:], TILE_BYTES)
                    tma.load(in_tiles[s * TILE_WORDS:], src_map,
                             (nxt[0], nxt[1] * T, nxt[2] * T), full[s:])
                    t_next += step
                    advance(nxt, step, tiles_i, tiles_j)
        # Thread -> micro-tile (row block rb, chunk column cb) on a diagonal, so each 8-lane
        # phase of a 128-bit access touches 8 distinct bank quads in both swizzled tiles.
        rb = tid % 8
        cb = rb ^ (tid // 8)
        it = 0
        t = cuda.blockIdx.x
        while t < n_tiles:
            s = it % S
            mbarrier.wait(full[s:], (it // S) & 1)
            base = s * TILE_BYTES
            for k in range(E):
                r = E * rb + k
                smem.load_v4(wi[4 * k:], in_tiles, base + r * LINE + ((cb ^ (r & 7)) << 4))
            micro_transpose(wi, wo)
            obase = (it & 1) * TILE_BYTES
            for k in range(E):
                r = E * cb + k
                smem.store_v4(out_tiles, obase + r * LINE + ((rb ^ (r & 7)) << 4), wo[4 * k:])
            fence.proxy_async_shared()
            if tid == 0:
                tma.wait_group_read(0)    # the other out buffer's store has read its tile
            cuda.syncthreads()
            if tid == 0:
                tma.store(out_map, (cur[0], cur[2] * T, cur[1] * T),
                          out_tiles[(it & 1) * TILE_WORDS:])
                tma.commit_group()
                if t_next < n_tiles:      # every thread is past stage s (syncthreads above)
                    mbarrier.arrive_expect_tx(full[s:], TILE_BYTES)
                    tma.load(in_tiles[s * TILE_WORDS:], src_map,
                             (nxt[0], nxt[1] * T, nxt[2] * T), full[s:])
                    t_next += step
                    advance(nxt, step, tiles_i, tiles_j)
            t += step
            it += 1
            advance(cur, step, tiles_i, tiles_j)
        if tid == 0:
            tma.wait_group(0)

    return tma_pipelined_kernel


@functools.cache
def _sm_count():
    return cuda.get_current_device().MULTIPROCESSOR_COUNT


def tma_pipelined(src, out, stream=0, blocks_per_sm=None):
    """Past the seed: a persistent grid (a few blocks per SM walk the tiles), each block keeping
    ``stages`` TMA loads in flight on their own mbarriers, so DRAM always has work queued; 64
    threads transpose a (128/itemsize)^2 tile as 64 micro-tiles of 16x16 bytes with 16-byte shared
    loads/stores (LDS.128/STS.128) placed on a diagonal that is bank-conflict-free under the 128B
    swizzle; two output tiles alternate so a TMA store drains while the next tile is transposed.
    One ``syncthreads`` per tile. Works for 1-, 2-, 4- and 8-byte elements."""
    itemsize = src.dtype.itemsize
    if itemsize not in (1, 2, 4, 8):
        raise TypeError(f"tma_pipelined handles 1, 2, 4 or 8-byte elements; src has {itemsize}")
    T, S = pipelined_config(itemsize)
    B, M, N = src.shape
    box = (1, T, T)
    src_map = descriptor(src, box, 128)
    out_map = descriptor(out, box, 128)
    ti, tj = _tiles(M, N, T, T)
    n_tiles = B * ti * tj
    if blocks_per_sm is None:
        smem_bytes = (S + 2) * T * LINE
        blocks_per_sm = max(1, min(16, (227 * 1024) // (smem_bytes + 1024)))
    grid = max(1, min(n_tiles, _sm_count() * blocks_per_sm))
    _pipelined_kernel(itemsize)[grid, THREADS_PIPELINED, stream](src_map, out_map, n_tiles, ti, tj)


LADDER = {
    "tma_naive": tma_naive,
    "tma_swizzle128": tma_swizzle128,
    "tma_batched": tma_batched,
    "tma_pipelined": tma_pipelined,
}
BEST = "tma_pipelined"
