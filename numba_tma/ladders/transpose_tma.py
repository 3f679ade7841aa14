"""TMA transposes (seed 000, then past it), out[b, j, i] = src[b, i, j] for (B, M, N) arrays.

Seed 000 (``000_f7d683ea2d9dede3.txt``, "TMA简介 & 让矩阵转置在Hopper GPUs上变得更快", Simon
Veitner's "TMA introduction" and "Making matrix transpose really fast on Hopper GPUs"): the
naive, 128B-swizzle and thread-batched TMA transposes, timed there on an H100 at 32768^2 fp32.
``numba_tma.transpose`` does not run them (``kernel=`` names them).

Every kernel reads a tile of ``src`` with a TMA load, transposes it inside shared memory and writes
it with a TMA store through a second tensor map over ``out`` at the swapped coordinates. The TMA
unit fills the part of an edge tile that lies outside ``src`` and clips it on the store, so any
M and N work, as long as both maps are legal: rows of ``src`` and ``out`` (N and M elements) must
be multiples of 16 bytes. The public ``numba_tma.transpose`` falls back to the classic kernels when
they are not.

The ladder (each docstring says what changed; what each rung ran on the H100:
``docs/transpose.md``):
  tma_naive       seed 000's first version: a 32x32 tile per block, no swizzle
  tma_swizzle128  the same with 128B-swizzled tiles and the swizzle index math
  tma_batched     128B swizzle, each thread moves 8 elements
  tma_pipelined   persistent blocks, a ring of TMA loads in flight, 16-byte shared
                  accesses in bank-conflict-free 16x16-byte micro-tiles, double-buffered
                  TMA stores; any element size (1, 2, 4, 8 bytes)

The three seed kernels keep the seed's structure, but issue the tile load before the block syncs
on the new barrier (the seed syncs first; ``init_and_load``) and do their index math in unsigned
32-bit integers, which sped up tma_naive and tma_swizzle128 in side runs. They also walk the
tiles down the columns of ``src`` and ask the L2 for 256-byte blocks on their loads
(``_seed_launch``).
"""

import functools

import numpy as np

from .._frontend import cuda
from .._bridge import inline_device
from .. import fence, mbarrier, smem, swizzle, tma
from ..launch import configure
from ..tensormap.cache import descriptor
from ..kernels._grid import MAX_GRID_YZ

__all__ = ["LADDER", "tma_naive", "tma_swizzle128", "tma_batched", "tma_pipelined",
           "pipelined_config"]

SEED_TILE = 32          # seed 000: 32 x 32 fp32 tiles
SEED_BATCH = 8          # elements per thread in tma_batched
# The seed kernels' launch (side runs at 32768^2 fp32 on the H100, tma_batched): the column-major
# raster and the loads' L2 promotion at 256 B each paid a little alone and most together; L2
# promotion at 128 B added nothing. A 128-byte tile row fetched as 256 bytes brings the next tile
# column's row into the L2 while that tile is in flight on another SM.
SEED_L2_PROMOTION = 256
LINE = 128              # bytes per tile row in tma_pipelined: one 128B-swizzle span
CHUNK = 16              # bytes per ld/st.shared.v4
THREADS_PIPELINED = 64  # per sub-tile: 8 row blocks x 8 chunk columns of 16x16-byte micro-tiles


def _seed_grid(name, tiles_i, tiles_j, batch):
    # Column-major raster: blockIdx.x is the tile row, so consecutive blocks write consecutive
    # pieces of the same out rows.
    if tiles_j > MAX_GRID_YZ or batch > MAX_GRID_YZ:
        raise ValueError(f"{name}: {tiles_j} tile columns and a batch of {batch} need grid "
                         f"({tiles_i}, {tiles_j}, {batch}); CUDA limits gridDim.y and gridDim.z "
                         f"to {MAX_GRID_YZ}; use tma_pipelined (persistent blocks) for such shapes")
    return (tiles_i, tiles_j, batch)


def _tiles(m, n, tile_m, tile_n):
    return -(-m // tile_m), -(-n // tile_n)


# -- seed 000 variants: 4-byte elements, one 32x32 tile per block ---------------------------------

@inline_device
def init_and_load(tile, src_map, coords, bar):
    # The seed initialises the barrier, syncs the block, then issues the load. Here thread 0
    # issues the load right after the init and its fences, and the block syncs while the tile
    # is in flight: the sync only has to publish the barrier to the threads that wait on it.
    if cuda.threadIdx.x == 0:
        mbarrier.init(bar, 1)
        mbarrier.fence_init()
        fence.proxy_async_shared()
        tma.load_tile(tile, src_map, coords, bar)
    cuda.syncthreads()
    mbarrier.wait(bar, 0)


@inline_device
def store_and_exit(out_map, coords, tile_tr):
    # The seed's epilogue: every thread fences its shared writes to the async proxy, the block
    # syncs, thread 0 stores, commits and waits until the engine has read the tile. No second
    # barrier (tma.store_tile's): the block exits next and nothing rewrites the tile.
    fence.proxy_async_shared()
    cuda.syncthreads()
    if cuda.threadIdx.x == 0:
        tma.store(out_map, coords, tile_tr)
        tma.commit_group()
        tma.wait_group_read(0)


@functools.cache
def _naive_kernel():
    T = SEED_TILE
    TT = T * T              # shared array shapes must be plain constants

    @cuda.jit
    def tma_naive_kernel(src_map, out_map):
        tile = cuda.shared.array(TT, np.uint32, alignment=128)
        tile_tr = cuda.shared.array(TT, np.uint32, alignment=128)
        bar = cuda.shared.array(1, np.uint64)
        b = cuda.blockIdx.z
        y = cuda.blockIdx.x * T             # tile row: the column-major raster of _seed_grid
        x = cuda.blockIdx.y * T
        init_and_load(tile, src_map, (b, y, x), bar)
        tid = np.uint32(cuda.threadIdx.x)  # unsigned: // and % are shifts, not signed fix-ups
        col = tid % T
        row = tid // T
        tile_tr[col * T + row] = tile[row * T + col]   # 32-way bank conflicts on the write
        store_and_exit(out_map, (b, x, y), tile_tr)

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
        b = cuda.blockIdx.z
        y = cuda.blockIdx.x * T
        x = cuda.blockIdx.y * T
        init_and_load(tile, src_map, (b, y, x), bar)
        tid = np.uint32(cuda.threadIdx.x)
        row = tid // per_row
        col0 = (tid % per_row) * batch
        # Both tiles are 128B-swizzled: logical (r, c) sits at column swizzle.col(r, c). All the
        # thread's loads issue before its stores (the compiler would not move a load past a
        # store to the other tile), so `batch` shared reads are in flight at once.
        vals = cuda.local.array(batch, np.uint32)
        for j in range(batch):
            vals[j] = tile[row * T + swizzle.col(row, col0 + j, 4, 128)]
        for j in range(batch):
            col = col0 + j
            tile_tr[col * T + swizzle.col(col, row, 4, 128)] = vals[j]
        store_and_exit(out_map, (b, x, y), tile_tr)

    return tma_swizzled_kernel


def _check_4byte(name, src):
    if src.dtype.itemsize != 4:
        raise TypeError(f"{name} is seed 000's 4-byte kernel; src has {src.dtype.itemsize}-byte "
                        f"elements ({src.dtype}); use tma_pipelined for other sizes")


def _seed_launch(name, kernel, threads, swz, src, out, stream):
    _check_4byte(name, src)
    B, M, N = src.shape
    box = (1, SEED_TILE, SEED_TILE)
    ti, tj = _tiles(M, N, SEED_TILE, SEED_TILE)
    grid = _seed_grid(name, ti, tj, B)
    src_map = descriptor(src, box, swz, SEED_L2_PROMOTION)
    out_map = descriptor(out, box, swz)
    configure(kernel, grid, threads, stream)(src_map, out_map)


def tma_naive(src, out, stream=0):
    """Seed 000's naive TMA transpose: TMA load, ``tr[c][r] = t[r][c]`` in shared memory, TMA store
    of the transposed tile at the swapped coordinates. 1024 threads, one element each; the column
    write to shared memory is a 32-way bank conflict."""
    _seed_launch("tma_naive", _naive_kernel(), SEED_TILE * SEED_TILE, 0, src, out, stream)


def tma_swizzle128(src, out, stream=0):
    """+ 128B swizzle on both tiles: the same shared-memory walk now spreads over the banks."""
    _seed_launch("tma_swizzle128", _swizzled_kernel(1), SEED_TILE * SEED_TILE, 128, src, out, stream)


def tma_batched(src, out, stream=0):
    """+ thread batching: 128 threads, 8 elements each, so fewer threads wait per tile and more
    independent shared-memory operations are in flight: each thread issues its 8 reads before
    its 8 writes. With the seed's launch, batches of 4, 16 and 32 measured slower than 8 (side
    runs); 16-byte reads (2 LDS.128 for the 8) made no difference. It is launched by
    ``_seed_launch``, as the other seed kernels."""
    _seed_launch("tma_batched", _swizzled_kernel(SEED_BATCH), SEED_TILE * SEED_TILE // SEED_BATCH,
                 128, src, out, stream)


# -- past the seed: the pipelined, persistent kernel -----------------------------------------------

# A tile is KI x KJ sub-tiles of (128/itemsize)^2 elements (128 rows of 128 bytes at most), loaded
# as KJ TMA boxes (one per 128-byte column strip) and stored as KI boxes. (KI, KJ, stages, out
# buffers) per element size; the ring lives in dynamic shared memory (up to 227 KB). Chosen with
# benches/transpose_tune.py at 32768^2 fp32 on the H100 (side runs): more sub-tiles per tile paid,
# up to 4x2; stages beyond 2, the supertile shape and L2 promotion barely moved it (what it
# runs at: docs/transpose.md).
PIPELINE = {1: (2, 1, 3, 2), 2: (2, 2, 2, 2), 4: (4, 2, 2, 2), 8: (4, 2, 4, 2)}
# Tiles are visited in supertiles of GROUP_I x GROUP_J tiles (column-major inside), so the tiles
# in flight at once cover a patch of the matrix: long runs of each input row *and* output row.
GROUP = (8, 8)


def pipelined_config(itemsize, sub_tiles=None, stages=None, out_buffers=None):
    """(sub-tile side T, KI, KJ, stages, out buffers) of tma_pipelined for this element size."""
    ki, kj, s, ob = PIPELINE[itemsize]
    if sub_tiles is not None:
        ki, kj = sub_tiles
    return LINE // itemsize, ki, kj, stages or s, out_buffers or ob


def _pipelined_smem(itemsize, ki, kj, stages, out_buffers):
    """Dynamic shared memory of one block: barriers, 1 KB to align the ring, the tiles."""
    T = LINE // itemsize
    return 8 * stages + 1024 + (stages + out_buffers) * ki * kj * T * LINE


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
    return inline_device(scope["micro_transpose"])


@functools.cache
def _pipelined_kernel(itemsize, ki, kj, stages, out_buffers, group_i, group_j):
    T = LINE // itemsize
    S, OB = stages, out_buffers
    E = CHUNK // itemsize                 # elements per 16-byte chunk = rows per micro-tile
    SUB_BYTES = T * LINE                  # one T x T sub-tile
    IN_STRIP = ki * SUB_BYTES             # one loaded box: ki*T rows of one 128-byte strip
    OUT_STRIP = kj * SUB_BYTES            # one stored box: kj*T rows
    STAGE = ki * kj * SUB_BYTES
    NW = 4 * E                            # words in one thread's micro-tile
    PENDING = OB - 2                      # stores that may still read their tile
    GG = group_i * group_j
    assert group_i & (group_i - 1) == 0 and group_j & (group_j - 1) == 0 and OB >= 2
    LOG_GI = group_i.bit_length() - 1
    micro_transpose = _micro_transpose(itemsize)

    @inline_device
    def advance(cur, q, r, st_i, st_j):
        # cur = (w, stj, sti, b): tile w of supertile (sti, stj) of batch b. Moving by
        # q * GG + r tiles needs no division (64-bit divisions compile to subroutine calls);
        # q is below a supertile row's length except for tiny matrices.
        cur[0] += r
        cur[1] += q
        if cur[0] >= GG:
            cur[0] -= GG
            cur[1] += 1
        while cur[1] >= st_j:
            cur[1] -= st_j
            cur[2] += 1
        while cur[2] >= st_i:
            cur[2] -= st_i
            cur[3] += 1

    @inline_device
    def tile_i(cur):
        return cur[2] * group_i + (cur[0] & (group_i - 1))

    @inline_device
    def tile_j(cur):
        return cur[1] * group_j + (cur[0] >> LOG_GI)

    @inline_device
    def issue_loads(src_map, ring, bar, cur, n_rows, n_cols):
        # Boxes wholly right of the matrix are not loaded (nor counted); partial ones are filled.
        y = tile_i(cur) * ki * T
        x0 = tile_j(cur) * kj * T
        strips = min(kj, (n_cols - x0 + T - 1) // T)
        mbarrier.arrive_expect_tx(bar, strips * IN_STRIP)
        for q in range(kj):
            if q < strips:
                tma.load(ring[q * (IN_STRIP // 4):], src_map, (cur[3], y, x0 + q * T), bar)

    @cuda.jit
    def tma_pipelined_kernel(src_map, out_map, batch, n_rows, n_cols, tiles_i, tiles_j,
                             st_i, st_j, q, r):
        dyn64 = cuda.shared.array(0, np.uint64)
        dyn32 = cuda.shared.array(0, np.uint32)
        full = dyn64[:S]
        # The ring starts at the first 1024-byte boundary after the barriers (128B swizzle).
        first = smem.aligned_offset(dyn32, 8 * S, 1024) // 4
        tiles = dyn32[first:]
        wi = cuda.local.array(NW, np.uint32)
        wo = cuda.local.array(NW, np.uint32)
        cur = cuda.local.array(4, np.int64)    # tile being transposed
        nxt = cuda.local.array(4, np.int64)    # next tile to load (thread 0)
        mbarrier.init_block(full, 1)
        tid = cuda.threadIdx.x
        for k in range(4):
            cur[k] = 0
        bid = cuda.blockIdx.x
        advance(cur, bid // GG, bid % GG, st_i, st_j)
        for k in range(4):
            nxt[k] = cur[k]
        if tid == 0:
            for s in range(S):
                while nxt[3] < batch and (tile_i(nxt) >= tiles_i or tile_j(nxt) >= tiles_j):
                    advance(nxt, q, r, st_i, st_j)
                if nxt[3] < batch:
                    issue_loads(src_map, tiles[s * (STAGE // 4):], full[s:], nxt, n_rows, n_cols)
                    advance(nxt, q, r, st_i, st_j)
        # 64 threads per sub-tile; sub-tile (a, c) of the tile goes to sub-tile (c, a) of the
        # output. Thread -> micro-tile (row block rb, chunk column cb) on a diagonal, so each
        # 8-lane phase of a 128-bit access touches 8 distinct bank quads in both swizzled tiles.
        g = tid // THREADS_PIPELINED
        a = g // kj
        c = g % kj
        rb = tid % 8
        cb = rb ^ ((tid // 8) % 8)
        in_sub = c * IN_STRIP + a * SUB_BYTES
        out_sub = a * OUT_STRIP + c * SUB_BYTES
        it = 0
        while cur[3] < batch:
            ti = tile_i(cur)
            tj = tile_j(cur)
            if ti < tiles_i and tj < tiles_j:
                s = it % S
                mbarrier.wait(full[s:], (it // S) & 1)
                base = s * STAGE + in_sub
                for k in range(E):
                    row = E * rb + k
                    smem.load_v4(wi[4 * k:], tiles, base + row * LINE + ((cb ^ (row & 7)) << 4))
                micro_transpose(wi, wo)
                obase = (S + it % OB) * STAGE + out_sub
                for k in range(E):
                    row = E * cb + k
                    smem.store_v4(tiles, obase + row * LINE + ((rb ^ (row & 7)) << 4), wo[4 * k:])
                fence.proxy_async_shared()
                if tid == 0:
                    tma.wait_group_read(PENDING)   # the next out buffer's stores have read it
                cuda.syncthreads()
                if tid == 0:
                    # Out strip p holds rows ti*ki*T + p*T.. of src as kj*T rows of out.
                    y0 = ti * ki * T
                    strips = min(ki, (n_rows - y0 + T - 1) // T)
                    ob = (S + it % OB) * (STAGE // 4)
                    for p in range(ki):
                        if p < strips:
                            tma.store(out_map, (cur[3], tj * kj * T, y0 + p * T),
                                      tiles[ob + p * (OUT_STRIP // 4):])
                    tma.commit_group()
                    while nxt[3] < batch and (tile_i(nxt) >= tiles_i or tile_j(nxt) >= tiles_j):
                        advance(nxt, q, r, st_i, st_j)
                    if nxt[3] < batch:            # every thread is past stage s (syncthreads)
                        issue_loads(src_map, tiles[s * (STAGE // 4):], full[s:], nxt, n_rows,
                                    n_cols)
                        advance(nxt, q, r, st_i, st_j)
                it += 1
            advance(cur, q, r, st_i, st_j)
        if tid == 0:
            tma.wait_group(0)

    # The tile walk's pieces, for tests that replay it on the host (``.py_func``).
    tma_pipelined_kernel.tile_walk = (advance, tile_i, tile_j)
    return tma_pipelined_kernel


PIPELINED_SIGNATURE = "void(uint64[::1], uint64[::1]" + ", int64" * 9 + ")"


@functools.cache
def _pipelined_ready(itemsize, ki, kj, stages, out_buffers, group_i, group_j, device_id):
    """The kernel, compiled and allowed its dynamic shared memory on this device."""
    from ..launch import reserve_dynamic_shared

    kernel = _pipelined_kernel(itemsize, ki, kj, stages, out_buffers, group_i, group_j)
    reserve_dynamic_shared(kernel, PIPELINED_SIGNATURE,
                           _pipelined_smem(itemsize, ki, kj, stages, out_buffers))
    return kernel


def _sm_count():
    return _sm_count_of(cuda.get_current_device().id)


@functools.cache
def _sm_count_of(device_id):            # per device: a process may use several GPUs
    return cuda.get_current_device().MULTIPROCESSOR_COUNT


def tma_pipelined(src, out, stream=0, *, blocks_per_sm=None, group=GROUP, l2_promotion=0,
                  sub_tiles=None, stages=None, out_buffers=None):
    """Past the seed: a persistent grid (a few blocks per SM walk the tiles), each block keeping
    ``stages`` tiles of TMA loads in flight on their own mbarriers, so DRAM always has work queued.
    A tile is KI x KJ sub-tiles of (128/itemsize)^2 elements (64 x 64 fp32 by default, so every
    row segment read or written is 256 bytes); 64 threads per sub-tile transpose it as 16x16-byte
    micro-tiles with 16-byte shared loads/stores (LDS.128/STS.128) placed on a diagonal that is
    bank-conflict-free under the 128B swizzle; output tiles rotate so TMA stores drain while the
    next tile is transposed; tiles are visited in supertiles (``group``) so the tiles in flight
    cover long runs of input and output rows. One ``syncthreads`` per tile; the ring lives in
    dynamic shared memory. 1-, 2-, 4- and 8-byte elements."""
    itemsize = src.dtype.itemsize
    if itemsize not in (1, 2, 4, 8):
        raise TypeError(f"tma_pipelined handles 1, 2, 4 or 8-byte elements; src has {itemsize}")
    T, ki, kj, S, OB = pipelined_config(itemsize, sub_tiles, stages, out_buffers)
    B, M, N = src.shape
    src_map = descriptor(src, (1, ki * T, T), 128, l2_promotion)
    out_map = descriptor(out, (1, kj * T, T), 128, l2_promotion)
    ti, tj = _tiles(M, N, ki * T, kj * T)
    gi, gj = group
    st_i, st_j = -(-ti // gi), -(-tj // gj)
    nbytes = _pipelined_smem(itemsize, ki, kj, S, OB)
    if blocks_per_sm is None:
        blocks_per_sm = max(1, min(16, (228 * 1024) // (nbytes + 1024)))
    grid = max(1, min(B * ti * tj, _sm_count() * blocks_per_sm))
    q, r = divmod(grid, gi * gj)
    kernel = _pipelined_ready(itemsize, ki, kj, S, OB, gi, gj, cuda.get_current_device().id)
    configure(kernel, grid, THREADS_PIPELINED * ki * kj, stream, nbytes)(
        src_map, out_map, B, M, N, ti, tj, st_i, st_j, q, r)


LADDER = {
    "tma_naive": tma_naive,
    "tma_swizzle128": tma_swizzle128,
    "tma_batched": tma_batched,
    "tma_pipelined": tma_pipelined,
}
