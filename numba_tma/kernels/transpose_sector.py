"""``v8_sector``: the 16-byte-access transpose for rows that are not 16-byte multiples (odd
shapes such as 32767 x 20001, misaligned views), every element size.

Why: on the H100 what an odd shape costs is the out side. Profiling the element-wise kernel
(ncu, 32767 x 20000 vs 32768 x 20000 fp32): DRAM bytes read and written grow by 2-3 %, L2 write
sectors by 16 % and L2 write requests by 70 %, and the kernel takes 34 % longer. A 32-byte L2
sector that several store instructions (of one block or of two) fill piecewise costs far more
than one written whole by one instruction. So every block here owns *whole sectors* of the out
rows it writes, and writes each with aligned 16-byte stores of one warp instruction:

1. Tile ``(ty, tx)`` holds out rows ``C0 .. C0 + TC`` (src columns). In out row ``C0 + c`` it
   owns the ``TR`` elements from column ``R0 - p_c``, where ``R0 = ty * TR`` and ``p_c`` is how
   far column ``R0`` of that row lies past a 32-byte boundary (in elements): the segment starts
   on a sector and is ``TR * itemsize = 256`` or 512 bytes long, so it is whole sectors. The tile
   rows shift the ownership of each out row by its own ``p_c``; together they still cover each
   out row exactly once (``ceil((M + S - 1) / TR)`` tile rows, ``S`` elements per sector).
2. So a tile needs src rows ``R0 - (S - 1) .. R0 + TR``: ``S - 1`` halo rows above its own (7 for
   fp32), read again by the tile above (mostly from L2). Src rows are loaded with aligned 16-byte
   vectors from ``C0 - d_r`` (``d_r``: the row's misalignment at ``C0``), 16 per row, plus a 17th
   per row for its last ``d_r`` columns.
3. Each element goes to the transposed shared tile, row ``c``, slot ``r - R0 + p_c``, or to a
   per-thread scratch slot if that is outside ``0 .. TR`` (another tile owns it) or ``c`` is
   outside the tile. Slots are XOR-swizzled by 16-byte chunk as in v7.
4. After one barrier each out-row segment is read with ``LDS.128`` and written with
   ``STG.E.128``, two lanes per sector.

Tiles whose aligned loads could leave ``src`` or whose segments reach past either end of an
out row (the first and last tile rows, the last tile column) take an element-wise path with
the same ownership, storing whole chunks where they lie inside the row. Needs a real GPU (the
simulator cannot run the PTX wrappers): under the simulator :func:`v8_sector` runs
``v6_packed``.
"""

import functools

import numpy as np
from numba import config as numba_config
from numba import cuda

from .. import gmem, smem
from . import transpose_classic as tc

__all__ = ["v8_sector", "applies", "TILES", "PREFERRED"]

VEC = 16                     # bytes per global and shared vector access
SECTOR = 32                  # bytes per L2 sector: the unit a block owns in an out row
LOADS = 8                    # aligned 16-byte vectors per thread per tile (plus halo and tail)
SWIZZLE_CHUNKS = 8           # XOR period of the shared tile's 16-byte chunks
LANES_PER_ROW = 16           # load phase: a warp instruction covers 2 src rows x 256 bytes
# itemsize: (slots per out row TR, src columns TC, threads, resident blocks per SM).
# Measured on the H100 at 32767 x 20001 (% of copy): fp32 64 x 64 87.9, 128 x 64 (256 threads)
# 88.0, 256 x 64 84.5; owning 64- or 128-byte pieces instead of sectors (more halo rows) gained
# at most 0.5. Precomputing each thread's per-column phases and rotating the chunk swizzle by the
# phase (fewer bank conflicts) spilled registers and lost 5-15.
TILES = {1: (256, 256, 512, 2), 2: (128, 128, 256, 4), 4: (64, 64, 128, 8), 8: (64, 32, 128, 8)}
# Element sizes transpose() sends here. One-byte elements scatter 16 single bytes per vector into
# shared memory and run at 24% of copy (v6_packed: 38%), so they stay on v6_packed.
PREFERRED = (2, 4, 8)


def applies(src, out):
    """Whether the kernel can run: a real GPU (the simulator cannot run the PTX wrappers) and
    1-, 2-, 4- or 8-byte elements."""
    return not numba_config.ENABLE_CUDASIM and np.dtype(src.dtype).itemsize in TILES


@functools.cache
def _kernel(itemsize, trows, cols, threads, min_blocks, own=SECTOR):
    """The kernel for one element size; ``own``: the aligned piece of an out row a block owns
    (a 32-byte sector; 64 and 128 were measured, see TILES)."""
    kv = VEC // itemsize                     # elements per vector
    kv_shift = kv.bit_length() - 1
    e_shift = itemsize.bit_length() - 1
    halo = own // itemsize - 1               # src rows above the tile that it may own
    vpr = cols // kv                         # aligned vectors per src row segment (16)
    out_vpr = trows // kv                    # aligned chunks per out row segment
    rows_per_warp = 32 // LANES_PER_ROW
    warps = threads // 32
    assert vpr == LANES_PER_ROW and LOADS * threads == trows * vpr == cols * out_vpr
    halo_loads = -(-halo // (rows_per_warp * warps))
    assert trows * itemsize % own == 0 and trows + halo <= threads
    tile_elems = cols * trows
    smem_elems = tile_elems + threads        # + one scratch slot per thread
    out_shift = out_vpr.bit_length() - 1
    col_shift = cols.bit_length() - 1
    swz_mask = min(SWIZZLE_CHUNKS, out_vpr) - 1
    elem = np.dtype(f"u{itemsize}")
    nregs = (LOADS + halo_loads) * 4
    wpr = max(1, itemsize // 4)              # 32-bit words per element
    epw = max(1, 4 // itemsize)              # elements per 32-bit word

    @cuda.jit(device=True, inline=True)
    def phase(d_out, mbytes, c):
        # Elements between out row C0 + c's sector boundary and its column R0.
        return ((d_out + c * mbytes) & (own - 1)) >> e_shift

    @cuda.jit(device=True, inline=True)
    def pos(c, s):
        # Shared position of slot s (0 .. TR - 1) of tile row c: 16-byte chunks XOR-swizzled by
        # c / kv mod 8, as in v7.
        return c * trows + (((s >> kv_shift) ^ ((c >> kv_shift) & swz_mask)) << kv_shift) + (s & (kv - 1))

    @cuda.jit(device=True, inline=True)
    def src_phase(src_mis, at):
        # Elements between src element `at` and the 16-byte boundary below it.
        return ((src_mis + at * itemsize) & (VEC - 1)) >> e_shift

    @cuda.jit(device=True, inline=True)
    def part(word, t):
        # Element t of a 32-bit word holding 1- or 2-byte elements.
        return (word >> np.uint32(8 * itemsize * t)) & np.uint32((1 << (8 * itemsize)) - 1)

    @cuda.jit(device=True, inline=True)
    def element(regs, k, t):
        # Element t of 32-bit word k of regs; for 8-byte elements, element k (words 2k, 2k + 1).
        if itemsize == 8:
            return (np.uint64(regs[2 * k + 1]) << np.uint64(32)) | np.uint64(regs[2 * k])
        if itemsize == 4:
            return regs[k]
        return part(regs[k], t)

    @cuda.jit(device=True, inline=True)
    def put(tile, r, c, d_out, mbytes, scratch, value):
        # Element (src row R0 + r, tile row c) goes to slot r + p_c if this tile owns it, else
        # to the thread's scratch slot: selects, not branches, keep the scatter straight-line.
        s = r + phase(d_out, mbytes, c)
        at = pos(c, s & (trows - 1))
        if s < 0 or s >= trows or c < 0 or c >= cols:
            at = scratch
        tile[at] = value

    @cuda.jit(device=True, inline=True)
    def scatter(tile, regs, r, first, d_out, mbytes, scratch):
        # The elements of the vector in regs[0:4], tile rows first .. first + kv.
        if itemsize >= 4:
            for k in range(4 // wpr):
                put(tile, r, first + k, d_out, mbytes, scratch, element(regs, k, 0))
        else:
            # 8 or 16 elements: LLVM may leave this loop rolled, so the words are picked by
            # selects, never by a run-time index into regs (which would move regs to the stack).
            w0 = regs[0]
            w1 = regs[1]
            w2 = regs[2]
            w3 = regs[3]
            for j in range(kv):
                k = j // epw
                word = w0
                if k == 1:
                    word = w1
                if k == 2:
                    word = w2
                if k == 3:
                    word = w3
                put(tile, r, first + j, d_out, mbytes, scratch, part(word, j % epw))

    @cuda.jit(launch_bounds=(threads, min_blocks))
    def transpose_v8_sector(src, out, M, N, src_mis, out_mis):
        # src_mis / out_mis: the buffers' base addresses mod 128.
        tile = cuda.shared.array(smem_elems, elem, alignment=VEC)
        tid = cuda.threadIdx.x
        lane = tid & 31
        w = tid >> 5
        scratch = tile_elems + tid
        b = cuda.blockIdx.z
        R0 = cuda.blockIdx.y * trows
        C0 = cuda.blockIdx.x * cols
        sbase = b * M * N
        obase = b * N * M
        total = cuda.gridDim.z * M * N
        # Byte misalignment of out row C0 at column R0; row C0 + c adds c * (M * itemsize).
        d_out = out_mis + (obase + C0 * M + R0) * itemsize
        mbytes = (M * itemsize) & (own - 1)
        first = sbase + (R0 - halo) * N + C0             # element index of (R0 - halo, C0)
        last = sbase + (R0 + trows - 1) * N + C0 + cols  # one past the tile's last element
        if R0 >= halo and R0 + trows <= M and C0 + cols <= N and first >= kv and last + kv <= total:
            regs = cuda.local.array(nregs, np.uint32)
            extra = cuda.local.array(4, np.uint32)
            for i in range(LOADS):
                r = (i * warps + w) * rows_per_warp + (lane >> 4)
                at = sbase + (R0 + r) * N + C0
                d = src_phase(src_mis, at)
                gmem.load_v4(regs[i * 4:], src, (at - d + (lane & 15) * kv) * itemsize)
            for h in range(halo_loads):
                hrow = (h * warps + w) * rows_per_warp + (lane >> 4)
                if hrow < halo:
                    at = first + hrow * N
                    d = src_phase(src_mis, at)
                    gmem.load_v4(regs[(LOADS + h) * 4:], src, (at - d + (lane & 15) * kv) * itemsize)
            if tid < trows + halo:
                at = first + tid * N
                d = src_phase(src_mis, at)
                if d != 0:
                    gmem.load_v4(extra, src, (at - d + cols) * itemsize)
            for i in range(LOADS):
                r = (i * warps + w) * rows_per_warp + (lane >> 4)
                at = sbase + (R0 + r) * N + C0
                d = src_phase(src_mis, at)
                scatter(tile, regs[i * 4:], r, (lane & 15) * kv - d, d_out, mbytes, scratch)
            for h in range(halo_loads):
                hrow = (h * warps + w) * rows_per_warp + (lane >> 4)
                if hrow < halo:
                    at = first + hrow * N
                    d = src_phase(src_mis, at)
                    scatter(tile, regs[(LOADS + h) * 4:], hrow - halo, (lane & 15) * kv - d, d_out,
                            mbytes, scratch)
            if tid < trows + halo:
                at = first + tid * N
                d = src_phase(src_mis, at)
                if d != 0:
                    scatter(tile, extra, tid - halo, cols - d, d_out, mbytes, scratch)
            cuda.syncthreads()
            for i in range(LOADS):
                q = i * threads + tid
                c = q >> out_shift                         # tile row = out row C0 + c
                u = q & (out_vpr - 1)
                smem.load_v4(regs[i * 4:], tile, pos(c, u * kv) * itemsize)
            for i in range(LOADS):
                q = i * threads + tid
                c = q >> out_shift
                u = q & (out_vpr - 1)
                m = R0 - phase(d_out, mbytes, c) + u * kv
                gmem.store_v4(out, (obase + (C0 + c) * M + m) * itemsize, regs[i * 4:])
        else:
            # Edge tile, or aligned vectors that would leave src: the same ownership, loaded
            # element by element; chunks inside the out row are still stored whole.
            for idx in range(tid, tile_elems, threads):
                c = idx & (cols - 1)
                s = idx >> col_shift
                m = R0 - phase(d_out, mbytes, c) + s
                if m >= 0 and m < M and C0 + c < N:
                    tile[pos(c, s)] = src[sbase + m * N + C0 + c]
            cuda.syncthreads()
            vec = cuda.local.array(4, np.uint32)
            for i in range(LOADS):
                q = i * threads + tid
                c = q >> out_shift
                u = q & (out_vpr - 1)
                m = R0 - phase(d_out, mbytes, c) + u * kv
                if C0 + c < N:
                    at = obase + (C0 + c) * M + m
                    if m >= 0 and m + kv <= M:
                        smem.load_v4(vec, tile, pos(c, u * kv) * itemsize)
                        gmem.store_v4(out, at * itemsize, vec)
                    else:
                        for j in range(kv):
                            if m + j >= 0 and m + j < M:
                                out[at + j] = tile[pos(c, u * kv + j)]

    return transpose_v8_sector, elem, halo


def v8_sector(src, out, stream=0):
    """Rung 8: 16-byte global accesses for any row pitch and base address, each block owning
    whole 32-byte sectors of its out rows (see the module docstring). Under the CUDA simulator
    runs ``v6_packed``."""
    src, out, B, M, N = tc._check(src, out)
    if B * M * N == 0:
        return
    if not applies(src, out):
        return tc.v6_packed(src, out, stream)
    itemsize = np.dtype(src.dtype).itemsize
    trows, cols, threads, min_blocks = TILES[itemsize]
    kern, elem, halo = _kernel(itemsize, trows, cols, threads, min_blocks)
    total = B * M * N
    grid = tc._grid3(tc._cdiv(N, cols), tc._cdiv(M + halo, trows), B, "v8_sector")
    kern[grid, threads, stream](src.reshape(total).view(elem), out.reshape(total).view(elem), M, N,
                                tc._device_pointer(src) % 128, tc._device_pointer(out) % 128)
