"""``v7_vec16``: the shared-memory transpose with 16-byte global accesses (no TMA), for 4- and
8-byte elements.

Why: the H100 runs a plain Triton transpose (64 x 64 fp32 tiles, 4 warps, ``ld/st.global.v4``)
at 96% of a device copy, while the 8-byte-word ``v6_packed`` and the TMA kernels stop at 92-93%
(measured in one run, 32768^2 fp32). numba cannot emit 128-bit global accesses, so this kernel
takes them from :mod:`numba_tma.gmem` (and :mod:`numba_tma.smem` for the shared side).

A block of 128 threads moves a tile of 64 src rows x 256 bytes (64 fp32 or 32 fp64 columns):

1. every thread loads 8 vectors of 16 bytes (``LDG.E.128``); a warp's instruction covers 2 rows
   x 256 contiguous bytes;
2. it scatters their elements into the shared tile stored transposed, ``tile[c][r]``, with the
   16-byte chunks of each tile row XOR-swizzled by ``(c / kv) % 8`` (kv = elements per vector),
   so the reads below stay whole 16-byte chunks; the element writes are 2-way bank-conflicted
   (a 4 rows x 128 B load mapping makes them conflict-free but measured slower, see
   ``LANES_PER_ROW``);
3. after one ``syncthreads`` every thread reads 8 chunks of 16 bytes (``LDS.128``, each group of 8
   lanes on 8 distinct bank quads) and stores them as 16-byte vectors of the out rows
   (``STG.E.128``).

Tiles are rastered row-major (the tile column varies fastest, as Triton's grid does): the blocks
running together read whole src rows. Partial edge tiles take an element-wise path. The vector
path needs both row pitches and both base addresses to be multiples of 16 bytes; otherwise
:func:`v7_vec16` runs ``v6_packed`` (so it does under the CUDA simulator, which cannot run the
PTX wrappers; CI compiles the kernel for sm_90a and checks its SASS instead).
"""

import functools

import numpy as np
from numba import config as numba_config
from numba import cuda

from .. import gmem, smem
from . import transpose_classic as tc

__all__ = ["v7_vec16", "applies", "THREADS"]

THREADS = 128
VEC = 16                     # bytes per global and shared vector access
ROWS = 64                    # src rows per tile (= out elements per out-row segment)
ROW_BYTES = 256              # src bytes per tile row
LOADS = 8                    # 16-byte vectors per thread per tile
SWIZZLE_CHUNKS = 8           # XOR period of the shared tile's 16-byte chunks
ITEMSIZES = (4, 8)
# Measured on the H100, 32768^2, one run (% of copy, fp32 / fp64): a warp's load covering 2 rows x
# 256 B with 12 blocks per SM (40 registers) 96.3 / 95.7; 2 x 256 B, 8 blocks 96.0 / 95.2;
# 4 rows x 128 B (conflict-free shared writes), 8 blocks 95.3 / 94.0, 12 blocks 93.5 / 92.9.
LANES_PER_ROW = 16          # load phase: lanes of a warp per src row (16 x 16 B = 256 B)
MIN_BLOCKS = 12             # launch bounds: 12 resident blocks per SM, 40 registers per thread


def applies(src, out, M, N):
    """Whether the vector path applies: 4- or 8-byte elements, 16-byte row pitches and bases, and
    a real GPU (the simulator cannot run the PTX wrappers)."""
    itemsize = np.dtype(src.dtype).itemsize
    return (not numba_config.ENABLE_CUDASIM and itemsize in ITEMSIZES and (M * itemsize) % VEC == 0 and (N * itemsize) % VEC == 0
            and tc._device_pointer(src) % VEC == 0 and tc._device_pointer(out) % VEC == 0)


@functools.cache
def _kernel(itemsize, lanes_per_row=LANES_PER_ROW, min_blocks=MIN_BLOCKS):
    word = np.dtype(np.uint32) if itemsize == 4 else np.dtype(np.uint64)
    kv = VEC // itemsize                     # elements per vector
    wpe = itemsize // 4                      # 32-bit registers per element
    cols = ROW_BYTES // itemsize             # src columns per tile
    vpr = cols // kv                         # vectors per src row (16)
    out_vpr = ROWS // kv                     # vectors per out-row segment (16 or 32)
    # Load phase: a warp instruction covers 32 / lanes_per_row rows x lanes_per_row vectors.
    halves = vpr // lanes_per_row
    rows_per_warp = 32 // lanes_per_row
    lshift = lanes_per_row.bit_length() - 1
    assert LOADS * THREADS == ROWS * vpr == cols * out_vpr
    tile_elems = cols * ROWS
    out_shift = out_vpr.bit_length() - 1
    kv_shift = kv.bit_length() - 1
    nregs = LOADS * 4

    @cuda.jit(device=True, inline=True)
    def pos(c, r):
        # Shared position of element (src column c, src row r): tile row c, 16-byte chunks
        # XOR-swizzled by c's chunk index mod 8.
        return c * ROWS + (r ^ (((c >> kv_shift) & (SWIZZLE_CHUNKS - 1)) << kv_shift))

    @cuda.jit(device=True, inline=True)
    def element(regs, i, e):
        # Element e of loaded vector i, from its 32-bit registers.
        if wpe == 1:
            return regs[i * 4 + e]
        return (np.uint64(regs[i * 4 + 2 * e + 1]) << np.uint64(32)) | np.uint64(regs[i * 4 + 2 * e])

    @cuda.jit(launch_bounds=(THREADS, min_blocks))
    def transpose_v7_vec16(src, out, M, N):
        tile = cuda.shared.array(tile_elems, word, alignment=VEC)
        tid = cuda.threadIdx.x
        lane = tid & 31
        w = tid >> 5
        b = cuda.blockIdx.z
        R0 = cuda.blockIdx.y * ROWS              # row-major raster: tile columns vary fastest
        C0 = cuda.blockIdx.x * cols
        sbase = b * M * N
        obase = b * N * M
        if R0 + ROWS <= M and C0 + cols <= N:
            regs = cuda.local.array(nregs, np.uint32)
            for i in range(LOADS):
                g = i * 4 + w                           # 32 warp-sized groups of vectors
                r = (g // halves) * rows_per_warp + (lane >> lshift)
                v = (g % halves) * lanes_per_row + (lane & (lanes_per_row - 1))
                gmem.load_v4(regs[i * 4:], src, (sbase + (R0 + r) * N + C0 + v * kv) * itemsize)
            for i in range(LOADS):
                g = i * 4 + w
                r = (g // halves) * rows_per_warp + (lane >> lshift)
                v = (g % halves) * lanes_per_row + (lane & (lanes_per_row - 1))
                for e in range(kv):
                    tile[pos(v * kv + e, r)] = element(regs, i, e)
            cuda.syncthreads()
            for i in range(LOADS):
                q = i * THREADS + tid
                j = q >> out_shift                     # out row within the tile
                u = q & (out_vpr - 1)                  # vector within the out-row segment
                chunk = u ^ ((j >> kv_shift) & (SWIZZLE_CHUNKS - 1))
                smem.load_v4(regs[i * 4:], tile, (j * ROWS + chunk * kv) * itemsize)
            for i in range(LOADS):
                q = i * THREADS + tid
                j = q >> out_shift
                u = q & (out_vpr - 1)
                gmem.store_v4(out, (obase + (C0 + j) * M + R0 + u * kv) * itemsize, regs[i * 4:])
        else:
            # Partial tile: element by element, same shared layout.
            for idx in range(tid, tile_elems, THREADS):
                r = idx // cols
                c = idx - r * cols
                if R0 + r < M and C0 + c < N:
                    tile[pos(c, r)] = src[sbase + (R0 + r) * N + C0 + c]
            cuda.syncthreads()
            for idx in range(tid, tile_elems, THREADS):
                j = idx // ROWS
                r = idx - j * ROWS
                if R0 + r < M and C0 + j < N:
                    out[obase + (C0 + j) * M + R0 + r] = tile[pos(j, r)]

    return transpose_v7_vec16, word, cols


def v7_vec16(src, out, stream=0):
    """Rung 7: 16-byte global and shared accesses, 64 x 256-byte tiles, 128 threads (see the
    module docstring). 4- and 8-byte elements with 16-byte-aligned rows; anything else runs
    ``v6_packed``."""
    src, out, B, M, N = tc._check(src, out)
    if B * M * N == 0:
        return
    if not applies(src, out, M, N):
        return tc.v6_packed(src, out, stream)
    itemsize = np.dtype(src.dtype).itemsize
    kern, word, cols = _kernel(itemsize)
    total = B * M * N
    grid = tc._grid3(tc._cdiv(N, cols), tc._cdiv(M, ROWS), B, "v7_vec16")
    kern[grid, THREADS, stream](src.reshape(total).view(word), out.reshape(total).view(word), M, N)
