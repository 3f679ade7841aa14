"""``v7_vec16``: the shared-memory transpose with 16-byte global accesses (no TMA), for every
element size.

Why: on the H100 a plain tiled Triton transpose (64 x 64 fp32 tiles, ``ld/st.global.v4``;
``bench.baselines.triton_transpose``) comes closer to a device copy than the 8-byte-word
``v6_packed`` and the TMA kernels (``docs/transpose.md``). numba cannot emit 128-bit global accesses,
so this kernel takes them from :mod:`numba_tma.gmem` (and :mod:`numba_tma.smem` for the shared
side).

The shared tile holds *words*: an fp32 or fp64 element, or ``pack`` = 2 fp16 / 4 uint8 elements
of consecutive src rows in one column (so one word is one 4-byte piece of an out row). A block
moves a tile of ``trows`` word rows x ``cols`` columns (``TILES``, chosen so that every src and
out row segment is 256 bytes: 64 x 256 B tiles for 4- and 8-byte elements, 128 x 128 fp16,
256 x 256 uint8; 64 x 64-word tiles, with 128- and 64-byte src segments, ran fp16 and uint8
slower in side runs):

1. every thread loads 8 vectors of 16 bytes (``LDG.E.128``); a warp instruction covers 2 rows x
   256 contiguous bytes. For packed elements a thread loads the same columns of ``pack``
   consecutive rows and ``byte_perm`` (``PRMT``) interleaves them into words;
2. it scatters the words into the shared tile stored transposed, ``tile[c][r]``, with the
   16-byte chunks of each tile row XOR-permuted by ``c / (4 * pack) % 8`` so that the words one
   store instruction writes fall on distinct bank quads (2-way conflicts: a warp covers only 2
   rows; a 4 rows x 128 B load mapping makes them conflict-free but measured slower, see
   ``LANES_PER_ROW``);
3. after one ``syncthreads`` every thread reads 8 chunks of 16 bytes (``LDS.128``, each group of 8
   lanes on 8 distinct bank quads) and stores them as 16-byte vectors of the out rows
   (``STG.E.128``).

Tiles are rastered row-major (the tile column varies fastest, as Triton's grid does; grouped
rasters measured slower). Partial edge tiles take an element-wise path. The vector path
needs both row pitches and both base addresses to be multiples of 16 bytes; otherwise
:func:`v7_vec16` runs ``v6_packed`` (so it does under the CUDA simulator, which cannot run the
PTX wrappers; CI compiles the kernels for sm_90a and checks their SASS instead).
"""

import functools

import numpy as np

from .._frontend import config as numba_config, cuda, from_dtype, libdevice, types
from .._bridge import inline_device
from .. import gmem, smem
from ._grid import cdiv, check_pair, device_pointer
from .transpose_launch import TransposeLauncher
from .transpose_v6 import v6_packed

__all__ = ["v7_vec16", "applies", "applies_to", "whole_tiles", "LAUNCHER", "TILES"]

VEC = 16                     # bytes per global and shared vector access
LOADS = 8                    # 16-byte vectors per thread per tile
SWIZZLE_CHUNKS = 8           # XOR period of the shared tile's 16-byte chunks
# itemsize: (word rows, src columns, threads, resident blocks per SM for the launch bounds).
# Chosen on the H100 at 32768^2 in side runs: 12 blocks (40 registers) beat 8 for fp32 / fp64,
# 6 beat 4 for fp16 and 2 beat 3 for uint8, and 256-byte row segments beat 64 x 64-word (fp16)
# and 64 x 128-column (uint8) tiles. What these tiles run at: docs/transpose.md.
TILES = {1: (64, 256, 512, 2), 2: (64, 128, 256, 6), 4: (64, 64, 128, 12), 8: (64, 32, 128, 12)}
# Load phase, lanes of a warp per src row (16 x 16 B = 256 B). fp32 / fp64: 4 rows x 128 B
# (conflict-free shared writes) measured slower, with 8 blocks and with 12 (side runs).
LANES_PER_ROW = 16


def applies(src, out, M, N):
    """Whether the vector path applies: 16-byte row pitches and bases, and a real GPU (the
    simulator cannot run the PTX wrappers)."""
    return applies_to(np.dtype(src.dtype).itemsize, M, N, device_pointer(src),
                      device_pointer(out))


def applies_to(itemsize, M, N, src_ptr, out_ptr):
    """:func:`applies` on plain values: element size, src rows M x columns N, base addresses."""
    return (not numba_config.ENABLE_CUDASIM and itemsize in TILES
            and (M * itemsize) % VEC == 0 and (N * itemsize) % VEC == 0
            and src_ptr % VEC == 0 and out_ptr % VEC == 0)


def whole_tiles(itemsize, M, N):
    """Whether the shape leaves the edge paths (nearly) idle: no partial tile column and, for
    1- and 2-byte elements, no partial tile row. Those paths go element by element, and where
    they run ``v8_sector`` is faster; with whole tiles v7 leads (the figures:
    ``docs/transpose.md``, "Why ``transpose()`` chooses what it does")."""
    _, pack = _words(itemsize)
    trows, cols = TILES[itemsize][:2]
    return N % cols == 0 and (pack == 1 or M % (trows * pack) == 0)


def _words(itemsize):
    """(word dtype, pack): the transposed tile holds words of `pack` elements from consecutive
    src rows (one column); 1- and 2-byte elements are packed into 32-bit words."""
    if itemsize == 8:
        return np.dtype(np.uint64), 1
    return np.dtype(np.uint32), 4 // itemsize


@functools.cache
def _kernel(itemsize, trows, cols, threads, min_blocks, lanes_per_row=LANES_PER_ROW,
            row_offset=False):
    """The kernel for one element size and tile: `trows` rows of words (trows * pack src rows)
    x `cols` src columns, `threads` threads of LOADS vectors each. `row_offset`: the variant
    whose tile rows start at its `tile_y0` argument (launches that split a grid taller than
    65535); the other ignores it, so the common path's code is what it was without it."""
    word, pack = _words(itemsize)
    wsize = word.itemsize
    kv = VEC // wsize                        # words per vector
    wpe = wsize // 4                         # 32-bit registers per word
    vpr = cols // kv                         # vectors per tile row of words
    out_vpr = trows // kv                    # vectors per out-row segment
    warps = threads // 32
    # Load phase, 4- and 8-byte elements: a warp instruction covers 32 / lanes_per_row rows x
    # lanes_per_row vectors.
    halves = vpr // lanes_per_row
    rows_per_warp = 32 // lanes_per_row
    lshift = lanes_per_row.bit_length() - 1
    # Load phase, packed (1- and 2-byte) elements: a tile row of words is `pack` src row
    # segments of cols * itemsize bytes; a unit is one vector from each of those rows (same
    # columns), `pack` vectors that byte_perm turns into 4 * pack words of one tile row.
    seg_vecs = vpr // pack                   # vectors per src row segment
    seg_shift = seg_vecs.bit_length() - 1
    units = LOADS // pack                    # units per thread
    unit_rows = 32 // seg_vecs               # tile rows per warp instruction
    assert LOADS * threads == trows * vpr == cols * out_vpr
    assert pack == 1 or units * warps * unit_rows == trows
    tile_elems = cols * trows
    out_shift = out_vpr.bit_length() - 1
    kv_shift = kv.bit_length() - 1
    # The chunks of tile row c are XOR-permuted by c / (kv * pack): the columns one store
    # instruction writes (one per vector of the lanes) then fall on distinct bank quads.
    swz_shift = kv_shift + pack.bit_length() - 1
    swz_mask = min(SWIZZLE_CHUNKS, out_vpr) - 1
    nregs = LOADS * 4
    src_rows = trows * pack                  # src rows per tile

    @inline_device
    def pos(c, r):
        # Shared position of word (column c, tile row r): tile row c, 16-byte chunks permuted.
        return c * trows + (r ^ (((c >> swz_shift) & swz_mask) << kv_shift))

    @inline_device
    def element(regs, i, e):
        # Word e of loaded vector i, from its 32-bit registers.
        if wpe == 1:
            return regs[i * 4 + e]
        return (np.uint64(regs[i * 4 + 2 * e + 1]) << np.uint64(32)) | np.uint64(regs[i * 4 + 2 * e])

    @cuda.jit(launch_bounds=(threads, min_blocks))
    def transpose_v7_vec16(src, out, src_e, out_e, M, N, tile_y0):
        # src/out: the buffers as words (vector path); src_e/out_e: as elements (edge tiles).
        # tile_y0: the first tile row of this launch (launches split gridDim.y at 65535).
        tile = cuda.shared.array(tile_elems, word, alignment=VEC)
        tid = cuda.threadIdx.x
        lane = tid & 31
        w = tid >> 5
        b = cuda.blockIdx.z
        if row_offset:
            R0 = (cuda.blockIdx.y + tile_y0) * src_rows
        else:
            R0 = cuda.blockIdx.y * src_rows      # row-major raster: tile columns vary fastest
        C0 = cuda.blockIdx.x * cols
        sbase = b * M * N                        # in elements
        obase = b * N * M
        if R0 + src_rows <= M and C0 + cols <= N:
            regs = cuda.local.array(nregs, np.uint32)
            if pack == 1:
                for i in range(LOADS):
                    g = i * warps + w                       # warp-sized groups of vectors
                    r = (g // halves) * rows_per_warp + (lane >> lshift)
                    v = (g % halves) * lanes_per_row + (lane & (lanes_per_row - 1))
                    gmem.load_v4(regs[i * 4:], src, (sbase + (R0 + r) * N + C0 + v * kv) * itemsize)
                for i in range(LOADS):
                    g = i * warps + w
                    r = (g // halves) * rows_per_warp + (lane >> lshift)
                    v = (g % halves) * lanes_per_row + (lane & (lanes_per_row - 1))
                    for e in range(kv):
                        tile[pos(v * kv + e, r)] = element(regs, i, e)
            else:
                for i in range(units):
                    r = (i * warps + w) * unit_rows + (lane >> seg_shift)      # tile row
                    v = lane & (seg_vecs - 1)
                    for t in range(pack):
                        gmem.load_v4(regs[(i * pack + t) * 4:], src,
                                     (sbase + (R0 + r * pack + t) * N + C0 + v * kv * pack) * itemsize)
                for i in range(units):
                    r = (i * warps + w) * unit_rows + (lane >> seg_shift)
                    c = (lane & (seg_vecs - 1)) * kv * pack
                    for j in range(4):
                        a = regs[i * pack * 4 + j]
                        bb = regs[(i * pack + 1) * 4 + j]
                        if pack == 2:
                            # Halves of rows 2r and 2r + 1: low halves are column c + 2j.
                            tile[pos(c + 2 * j, r)] = libdevice.byte_perm(a, bb, 0x5410)
                            tile[pos(c + 2 * j + 1, r)] = libdevice.byte_perm(a, bb, 0x7632)
                        else:
                            # 4 x 4 byte transpose of rows 4r .. 4r + 3.
                            cc = regs[(i * pack + 2) * 4 + j]
                            d = regs[(i * pack + 3) * 4 + j]
                            ab_lo = libdevice.byte_perm(a, bb, 0x5140)
                            ab_hi = libdevice.byte_perm(a, bb, 0x7362)
                            cd_lo = libdevice.byte_perm(cc, d, 0x5140)
                            cd_hi = libdevice.byte_perm(cc, d, 0x7362)
                            tile[pos(c + 4 * j, r)] = libdevice.byte_perm(ab_lo, cd_lo, 0x5410)
                            tile[pos(c + 4 * j + 1, r)] = libdevice.byte_perm(ab_lo, cd_lo, 0x7632)
                            tile[pos(c + 4 * j + 2, r)] = libdevice.byte_perm(ab_hi, cd_hi, 0x5410)
                            tile[pos(c + 4 * j + 3, r)] = libdevice.byte_perm(ab_hi, cd_hi, 0x7632)
            cuda.syncthreads()
            Mw = M // pack                         # out row length in words
            for i in range(LOADS):
                q = i * threads + tid
                j = q >> out_shift                     # out row within the tile
                u = q & (out_vpr - 1)                  # vector within the out-row segment
                chunk = u ^ ((j >> swz_shift) & swz_mask)
                smem.load_v4(regs[i * 4:], tile, (j * trows + chunk * kv) * wsize)
            for i in range(LOADS):
                q = i * threads + tid
                j = q >> out_shift
                u = q & (out_vpr - 1)
                at = obase // pack + (C0 + j) * Mw + R0 // pack + u * kv      # in words
                gmem.store_v4(out, at * wsize, regs[i * 4:])
        elif pack == 1:
            # Partial tile: element by element, same shared layout.
            for idx in range(tid, tile_elems, threads):
                r = idx // cols
                c = idx - r * cols
                if R0 + r < M and C0 + c < N:
                    tile[pos(c, r)] = src[sbase + (R0 + r) * N + C0 + c]
            cuda.syncthreads()
            for idx in range(tid, tile_elems, threads):
                j = idx // trows
                r = idx - j * trows
                if R0 + r < M and C0 + j < N:
                    out[obase + (C0 + j) * M + R0 + r] = tile[pos(j, r)]
        else:
            # Partial tile of packed elements: element by element, global to global (reads
            # coalesced along src rows); edge tiles are a thin frame of the matrix.
            for idx in range(tid, src_rows * cols, threads):
                r = idx // cols
                c = idx - r * cols
                if R0 + r < M and C0 + c < N:
                    out_e[obase + (C0 + c) * M + R0 + r] = src_e[sbase + (R0 + r) * N + C0 + c]

    return transpose_v7_vec16, word, pack, cols, src_rows


def v7_vec16(src, out, stream=0):
    """Rung 7: 16-byte global and shared accesses, tiles of 256-byte row segments (see the module
    docstring). Rows and bases that are not 16-byte multiples run ``v6_packed``."""
    src, out, B, M, N = check_pair(src, out)
    if B * M * N == 0:
        return
    if not applies(src, out, M, N):
        return v6_packed(src, out, stream)
    LAUNCHER.launch(device_pointer(src), device_pointer(out), B, M, N,
                    np.dtype(src.dtype).itemsize, stream)


def _build(itemsize, row_offset):
    """(kernel, argtypes) of the launcher's kernel for `itemsize`: src and out as words (vector
    path) and as elements (edge tiles), M, N, tile_y0."""
    kern, word, _, _, _ = _kernel(itemsize, *TILES[itemsize], row_offset=row_offset)
    w = types.Array(from_dtype(word), 1, "C")
    e = types.Array(from_dtype(np.dtype(f"u{itemsize}")), 1, "C")
    return kern, (w, w, e, e, types.int64, types.int64, types.int64)


def _tile_rows(itemsize, M):
    """The grid's tile rows: trows words of `pack` src rows each."""
    return cdiv(M, TILES[itemsize][0] * _words(itemsize)[1])


def _args(src_ptr, out_ptr, count, M, N, tile_y0, itemsize):
    """One launch's arguments for `count` elements of src and out."""
    words = count * itemsize // _words(itemsize)[0].itemsize
    return ((src_ptr, words), (out_ptr, words), (src_ptr, count), (out_ptr, count), M, N,
            tile_y0)


#: What ``transpose()`` launches on raw pointers (the src pointer at arguments 0 and 2, the out
#: pointer at 1 and 3, with the same 16-byte alignment on a repeated layout, since
#: :func:`applies_to` depends on it).
LAUNCHER = TransposeLauncher("transpose_vec", TILES, _build, _tile_rows, _args,
                             src_args=(0, 2), out_args=(1, 3))
