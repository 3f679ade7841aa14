"""``v8_sector``: the 16-byte-access transpose for rows that are not 16-byte multiples (odd
shapes such as 32767 x 20001, misaligned views), every element size.

Why: on the H100 what an odd shape costs is the out side. Profiling the element-wise kernel
(ncu, 32767 x 20000 vs 32768 x 20000 fp32): the DRAM bytes read and written barely grow, but the
L2 write sectors do, the L2 write requests far more, and the kernel takes much longer. A 32-byte L2
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
   vectors from ``C0 - d_r`` (``d_r``: the row's misalignment at ``C0``), one per lane, 16 or 32
   lanes per row, plus one more per row for its last ``d_r`` columns.
3. Each element goes to the transposed shared tile, row ``c``, slot ``r - R0 + p_c``. The tile
   is padded on all four sides, so the elements another tile owns (slots outside ``0 .. TR``,
   columns outside the tile) land in padding: no test, no select. A thread's rows are ``step``
   apart, and ``step * itemsize`` is 32 or 64 bytes, so at any row pitch they share ``d_r``, and
   with it each vector element's column ``c`` and its ``p_c``: the shared index of element ``k``
   of the thread's ``i``-th vector is one per-thread value per ``k`` plus ``i * step``, and the
   scatter is one ``STS`` per element with an immediate offset (1- and 2-byte elements add a
   shift to extract the element).
4. After one barrier each out-row segment is read with ``LDS.128`` and written with
   ``STG.E.128``, two lanes per sector; for 1-byte elements the TMA unit writes it instead, one
   bulk copy per segment (``BULK_STORE``).

What an odd shape still costs is mostly the out rows' pitch: in fp32 side runs at N = 20032,
v7_vec16, whose 256-byte out segments are 16-byte aligned, kept its speed where the out pitch is
a multiple of 256 bytes and fell to about this kernel's speed at M = 32767 where it is not
(M = 32760 .. 32800; the committed runs: ``docs/transpose.md``). Owning 64-, 128- or 256-byte
blocks of the out rows instead of sectors (with the larger halos) did not pay.

Tiles whose aligned loads could leave ``src`` or whose segments reach past either end of an
out row (the first and last tile rows, the last tile column) take an element-wise path with
the same ownership, storing whole chunks where they lie inside the row. Needs a real GPU (the
simulator cannot run the PTX wrappers): under the simulator :func:`v8_sector` runs
``v6_packed``.
"""

import functools
from typing import NamedTuple

import numpy as np

from .._frontend import config as numba_config, cuda, from_dtype, types
from .._bridge import inline_device
from .. import bulk, fence, gmem, smem, tma
from ._grid import cdiv, check_pair, device_pointer
from .transpose_launch import TransposeLauncher
from .transpose_v6 import v6_packed

__all__ = ["v8_sector", "applies", "applies_to", "LAUNCHER", "TILES"]

VEC = 16                     # bytes per global and shared vector access
SECTOR = 32                  # bytes per L2 sector: the unit a block owns in an out row
LOADS = 8                    # aligned 16-byte vectors per thread per tile (plus halo and tail)
# A row's loads span its segment and run into the next 256-byte block by its phase; asking the L2
# to fetch whole 256-byte blocks (.L2::256B) measured faster for every element size at
# 32767 x 20001 on the H100 (side runs; on v7_vec16's whole-block rows, slower).
L2_PREFETCH = 256
# itemsize: (slots per out row TR, src columns TC, threads, resident blocks per SM).
# Chosen in side runs on the H100 at 32767 x 20001, with and without the .L2::256B loads: the
# fastest of the tiles and block counts tried were 64 x 128 for fp32 (3 blocks; 4 spill), 64 x 64
# for fp64, 128 x 128 for fp16 (3 blocks) and 256 x 256 for uint8. The skew stepping back where
# p_c >= kv (ncu had shown several shared wavefronts per scatter store) raised uint8 most; the
# first layout (per-element ownership tests and a scratch slot, ~3x the instructions) was slower
# for every element size, fp16 and uint8 by far. What an odd shape still costs (ncu, fp32
# 64 x 64, 20032 vs 20001 columns, 32768 vs 32767 rows): the same DRAM bytes, but more L2 read
# requests for misaligned src rows (a 256-byte row segment spans 3 lines instead of 2) and more
# write requests for misaligned out rows. What these tiles run at: docs/transpose.md.
TILES = {1: (256, 256, 512, 2), 2: (128, 128, 256, 3), 4: (64, 128, 256, 3), 8: (64, 64, 256, 4)}
# Element sizes whose out-row segments the TMA unit writes (cp.async.bulk, one per segment, issued
# by the tile row's thread) instead of the threads' LDS.128 + STG.E.128. In a side run at
# 32767 x 20001 on the H100 it paid for uint8 only; fp16, fp32 and fp64 were unchanged.
BULK_STORE = (1,)


def applies(src, out):
    """Whether the kernel can run: a real GPU (the simulator cannot run the PTX wrappers) and
    1-, 2-, 4- or 8-byte elements."""
    return applies_to(np.dtype(src.dtype).itemsize)


def applies_to(itemsize):
    """:func:`applies` for an element size."""
    return not numba_config.ENABLE_CUDASIM and itemsize in TILES


class _Layout(NamedTuple):
    """One tile's thread mapping and padded shared layout (:func:`_layout`)."""
    kv: int                  # elements per vector
    kv_shift: int
    e_shift: int             # log2(itemsize)
    spe: int                 # elements per sector
    halo: int                # src rows above the tile that it may own
    out_vpr: int             # aligned chunks per out row segment
    out_shift: int
    lanes: int               # lanes per src row in the load phase (16 or 32)
    lane_shift: int
    rows_per_warp: int
    step: int                # src rows between a thread's consecutive vectors
    pad_rows: int            # shared rows of padding above and below the tile rows
    pitch_e: int             # elements per shared tile row
    smem_elems: int
    col_shift: int
    elem: np.dtype
    nregs: int               # 32-bit registers of a thread's vectors (its halo vector included)
    epw: int                 # elements per 32-bit word


@functools.cache
def _layout(itemsize, trows, cols, threads):
    """The :class:`_Layout` of one element size and tile (`trows` slots per out row, `cols` src
    columns, `threads` threads)."""
    kv = VEC // itemsize
    kv_shift = kv.bit_length() - 1
    spe = SECTOR // itemsize
    halo = spe - 1
    out_vpr = trows // kv
    lanes = cols // kv
    rows_per_warp = 32 // lanes
    warps = threads // 32
    step = rows_per_warp * warps
    assert lanes in (16, 32) and LOADS * threads == trows * lanes == cols * out_vpr
    # A thread's rows are `step` apart, so they share one 16-byte phase (and with it their
    # columns and slot offsets); its halo row is one step above its first.
    assert step * itemsize % VEC == 0 and halo <= step and trows + halo <= threads
    # Shared layout: tile row c (out row C0 + c) at pad rows + c, slot s at spe + s, so columns
    # -(kv - 1) .. cols + kv - 2 and slots -(spe - 1) .. trows + spe - 2 (the parts another tile
    # owns) land in padding and need no test. Row crow starts at crow * pitch chunks plus a skew
    # of one chunk per kv rows, less one chunk where p_c >= kv: the lanes of one scatter
    # instruction (rows kv apart, whose p_c differ by 0 or kv) then fall in 8 different banks
    # whatever the out row pitch, and every row's chunks stay 16-byte aligned for LDS.128.
    pad_rows = kv - 1
    nrows = cols + 2 * pad_rows
    # Chunks per tile row (+1: the skew may step back). Lane l's row starts at chunk
    # l * (kv * pitch + 1) mod 8: kv is even, so that multiplier is odd and the 8 are distinct.
    pitch = (trows + 2 * spe) // kv + 1
    pitch_e = pitch * kv
    return _Layout(
        kv=kv, kv_shift=kv_shift, e_shift=itemsize.bit_length() - 1, spe=spe, halo=halo,
        out_vpr=out_vpr, out_shift=out_vpr.bit_length() - 1, lanes=lanes,
        lane_shift=lanes.bit_length() - 1, rows_per_warp=rows_per_warp, step=step,
        pad_rows=pad_rows, pitch_e=pitch_e,
        smem_elems=nrows * pitch_e + ((nrows - 1) >> kv_shift) * kv,
        col_shift=cols.bit_length() - 1, elem=np.dtype(f"u{itemsize}"), nregs=(LOADS + 1) * 4,
        epw=max(1, 4 // itemsize))


@functools.cache
def _index_fns(itemsize, trows, cols, threads):
    """``(phase, slot0, out_chunk, src_phase, element)``: the index maps of one tile, as
    device functions."""
    lay = _layout(itemsize, trows, cols, threads)
    kv, kv_shift, e_shift, spe = lay.kv, lay.kv_shift, lay.e_shift, lay.spe
    pad_rows, pitch_e, out_shift, out_vpr, epw = (lay.pad_rows, lay.pitch_e, lay.out_shift,
                                                  lay.out_vpr, lay.epw)

    @inline_device
    def phase(d_out, mbytes, c):
        # Elements between out row C0 + c's sector boundary and its column R0.
        return ((d_out + c * mbytes) & (SECTOR - 1)) >> e_shift

    @inline_device
    def slot0(c, p_c):
        # Shared index of tile row c's slot 0 (p_c: the row's phase).
        crow = c + pad_rows
        return crow * pitch_e + ((crow >> kv_shift) + 1 - (p_c >> kv_shift)) * kv + spe

    @inline_device
    def out_chunk(i, tid):
        # The 16-byte out chunk thread tid moves in its i-th store: (tile row c, chunk u).
        q = i * threads + tid
        return q >> out_shift, q & (out_vpr - 1)

    @inline_device
    def src_phase(src_mis, at):
        # Elements between src element `at` and the 16-byte boundary below it.
        return ((src_mis + at * itemsize) & (VEC - 1)) >> e_shift

    @inline_device
    def element(regs, k):
        # Element k of the vector in regs[0:4].
        if itemsize == 8:
            return (np.uint64(regs[2 * k + 1]) << np.uint64(32)) | np.uint64(regs[2 * k])
        if itemsize == 4:
            return regs[k]
        t = k % epw
        return (regs[k // epw] >> np.uint32(8 * itemsize * t)) & np.uint32((1 << (8 * itemsize)) - 1)

    return phase, slot0, out_chunk, src_phase, element


@functools.cache
def _load_parts(itemsize, trows, cols, threads):
    """``(load_rows, scatter)``: the interior tile's aligned 16-byte loads and its scatter into
    the padded shared tile, as device functions. The kernel computes the thread's rows and
    phases itself: returned from a part, they cost fp32 its registers (12 bytes of spills)."""
    lay = _layout(itemsize, trows, cols, threads)
    kv, lanes, step = lay.kv, lay.lanes, lay.step
    phase, slot0, _, _, element = _index_fns(itemsize, trows, cols, threads)

    @inline_device
    def load_rows(src, regs, extra, vec0, in_halo, xat, xd, has_extra, N):
        # The thread's vectors: LOADS rows `step` apart from element vec0, the halo row one step
        # above them, and the extra vector of row xat for its last xd columns.
        for i in range(LOADS):
            gmem.load_v4(regs[i * 4:], src, (vec0 + i * step * N) * itemsize, L2_PREFETCH)
        if in_halo:
            gmem.load_v4(regs[LOADS * 4:], src, (vec0 - step * N) * itemsize, L2_PREFETCH)
        if has_extra:
            gmem.load_v4(extra, src, (xat - xd + cols) * itemsize, L2_PREFETCH)

    @inline_device
    def scatter(tile, regs, extra, lane, r0, d, in_halo, xr, xd, has_extra, d_out, mbytes):
        # Element k of each vector is column c_k of the tile (the same for all i) and goes
        # to slot r + p_c: one shared index per k, plus i * step.
        at_k = cuda.local.array(kv, np.uint32)
        for k in range(kv):
            c = (lane & (lanes - 1)) * kv - d + k
            p_c = phase(d_out, mbytes, c)
            at_k[k] = slot0(c, p_c) + r0 + p_c
        for i in range(LOADS):
            for k in range(kv):
                tile[at_k[k] + np.uint32(i * step)] = element(regs[i * 4:], k)
        if in_halo:
            for k in range(kv):
                tile[at_k[k] - np.uint32(step)] = element(regs[LOADS * 4:], k)
        if has_extra:
            for k in range(kv):
                c = cols - xd + k
                p_c = phase(d_out, mbytes, c)
                tile[np.uint32(slot0(c, p_c) + xr + p_c)] = element(extra, k)

    return load_rows, scatter


@functools.cache
def _store_parts(itemsize, trows, cols, threads):
    """``(store_vectors, store_bulk, edge_tile)``: the interior tile's out-row segments by the
    threads' 16-byte stores or by TMA bulk copies, and the element-wise edge tile, as device
    functions."""
    lay = _layout(itemsize, trows, cols, threads)
    kv, col_shift = lay.kv, lay.col_shift
    phase, slot0, out_chunk, _, _ = _index_fns(itemsize, trows, cols, threads)

    @inline_device
    def store_vectors(out, tile, regs, tid, obase, R0, C0, M, d_out, mbytes):
        cuda.syncthreads()
        for i in range(LOADS):
            c, u = out_chunk(i, tid)                   # tile row c = out row C0 + c
            slot = slot0(c, phase(d_out, mbytes, c)) + u * kv
            smem.load_v4(regs[i * 4:], tile, slot * itemsize)
        for i in range(LOADS):
            c, u = out_chunk(i, tid)
            m = R0 - phase(d_out, mbytes, c) + u * kv
            gmem.store_v4(out, (obase + (C0 + c) * M + m) * itemsize, regs[i * 4:])

    @inline_device
    def store_bulk(out, tile, tid, obase, R0, C0, M, d_out, mbytes):
        # Thread c copies tile row c's segment: whole sectors, 16-byte aligned at both ends,
        # inside the out row (the interior tile's test).
        fence.proxy_async_shared()
        cuda.syncthreads()
        if tid < cols:
            p_c = phase(d_out, mbytes, tid)
            bulk.copy_shared_to_global(out[obase + (C0 + tid) * M + R0 - p_c:],
                                       tile[slot0(tid, p_c):], trows * itemsize)
            tma.commit_group()
            tma.wait_group_read(0)     # the block may exit once the engine has read it

    @inline_device
    def edge_tile(src, out, tile, tid, sbase, obase, R0, C0, M, N, d_out, mbytes):
        # Edge tile, or aligned vectors that would leave src: the same ownership, loaded
        # element by element; chunks inside the out row are still stored whole.
        for idx in range(tid, trows * cols, threads):
            c = idx & (cols - 1)
            s = idx >> col_shift
            p_c = phase(d_out, mbytes, c)
            m = R0 - p_c + s
            if m >= 0 and m < M and C0 + c < N:
                tile[np.uint32(slot0(c, p_c) + s)] = src[sbase + m * N + C0 + c]
        cuda.syncthreads()
        vec = cuda.local.array(4, np.uint32)
        for i in range(LOADS):
            c, u = out_chunk(i, tid)
            p_c = phase(d_out, mbytes, c)
            m = R0 - p_c + u * kv
            if C0 + c < N:
                at = obase + (C0 + c) * M + m
                if m >= 0 and m + kv <= M:
                    smem.load_v4(vec, tile, (slot0(c, p_c) + u * kv) * itemsize)
                    gmem.store_v4(out, at * itemsize, vec)
                else:
                    for j in range(kv):
                        if m + j >= 0 and m + j < M:
                            out[at + j] = tile[np.uint32(slot0(c, p_c) + u * kv + j)]

    return store_vectors, store_bulk, edge_tile


@functools.cache
def _kernel(itemsize, trows, cols, threads, min_blocks, row_offset=False):
    """The kernel for one element size and tile: returns (kernel, element dtype, halo rows).
    `row_offset`: the variant whose tile rows start at its `tile_y0` argument (launches that
    split a grid taller than 65535); the other ignores it: the extra add costs fp16 / fp32 a
    register they do not have at 3 blocks per SM (80: 8 bytes of spills), so the common path
    keeps the code it had."""
    bulk_store = itemsize in BULK_STORE
    lay = _layout(itemsize, trows, cols, threads)
    kv, halo, smem_elems, elem, nregs = lay.kv, lay.halo, lay.smem_elems, lay.elem, lay.nregs
    lanes, lane_shift, rows_per_warp, step = lay.lanes, lay.lane_shift, lay.rows_per_warp, lay.step
    src_phase = _index_fns(itemsize, trows, cols, threads)[3]
    load_rows, scatter = _load_parts(itemsize, trows, cols, threads)
    store_vectors, store_bulk, edge_tile = _store_parts(itemsize, trows, cols, threads)

    @cuda.jit(launch_bounds=(threads, min_blocks))
    def transpose_v8_sector(src, out, M, N, src_mis, out_mis, tile_y0):
        # src_mis / out_mis: the buffers' base addresses mod 128. tile_y0: the first tile row
        # of this launch (launches split gridDim.y at 65535).
        tile = cuda.shared.array(smem_elems, elem, alignment=VEC)
        tid = cuda.threadIdx.x
        b = cuda.blockIdx.z
        if row_offset:
            R0 = (cuda.blockIdx.y + tile_y0) * trows
        else:
            R0 = cuda.blockIdx.y * trows
        C0 = cuda.blockIdx.x * cols
        sbase = b * M * N
        obase = b * N * M
        total = cuda.gridDim.z * M * N
        # Byte misalignment of out row C0 at column R0; row C0 + c adds c * (M * itemsize).
        d_out = out_mis + (obase + C0 * M + R0) * itemsize
        mbytes = (M * itemsize) & (SECTOR - 1)
        first = sbase + (R0 - halo) * N + C0             # element index of (R0 - halo, C0)
        last = sbase + (R0 + trows - 1) * N + C0 + cols  # one past the tile's last element
        if R0 >= halo and R0 + trows <= M and C0 + cols <= N and first >= kv and last + kv <= total:
            regs = cuda.local.array(nregs, np.uint32)
            extra = cuda.local.array(4, np.uint32)
            # Thread: rows r0 + i * step (i = -1 for a halo row), `lanes` lanes per row, each an
            # aligned vector from the row's 16-byte boundary below column C0, d elements left.
            lane = tid & 31
            r0 = (tid >> 5) * rows_per_warp + (lane >> lane_shift)
            at = sbase + (R0 + r0) * N + C0
            d = src_phase(src_mis, at)
            in_halo = r0 >= step - halo
            # One more vector per row (thread tid: row tid - halo) for its last d_r columns.
            xr = tid - halo
            xat = sbase + (R0 + xr) * N + C0
            xd = src_phase(src_mis, xat)
            has_extra = tid < trows + halo and xd != 0
            load_rows(src, regs, extra, at - d + (lane & (lanes - 1)) * kv, in_halo, xat, xd,
                      has_extra, N)
            scatter(tile, regs, extra, lane, r0, d, in_halo, xr, xd, has_extra, d_out, mbytes)
            if bulk_store:
                store_bulk(out, tile, tid, obase, R0, C0, M, d_out, mbytes)
            else:
                store_vectors(out, tile, regs, tid, obase, R0, C0, M, d_out, mbytes)
        else:
            edge_tile(src, out, tile, tid, sbase, obase, R0, C0, M, N, d_out, mbytes)

    return transpose_v8_sector, elem, halo


def v8_sector(src, out, stream=0):
    """Rung 8: 16-byte global accesses for any row pitch and base address, each block owning
    whole 32-byte sectors of its out rows (see the module docstring). Under the CUDA simulator
    runs ``v6_packed``."""
    src, out, B, M, N = check_pair(src, out)
    if B * M * N == 0:
        return
    if not applies(src, out):
        return v6_packed(src, out, stream)
    LAUNCHER.launch(device_pointer(src), device_pointer(out), B, M, N,
                    np.dtype(src.dtype).itemsize, stream)


def _build(itemsize, row_offset):
    """(kernel, argtypes) of the launcher's kernel for `itemsize`: src, out, M, N, the bases
    mod 128, tile_y0."""
    kern, elem, _ = _kernel(itemsize, *TILES[itemsize], row_offset=row_offset)
    e = types.Array(from_dtype(elem), 1, "C")
    return kern, (e, e) + (types.int64,) * 5


def _tile_rows(itemsize, M):
    """The grid's tile rows: M src rows and the halo of the first sector, trows per tile."""
    return cdiv(M + SECTOR // itemsize - 1, TILES[itemsize][0])


def _args(src_ptr, out_ptr, count, M, N, tile_y0, itemsize):
    """One launch's arguments for `count` elements of src and out."""
    return ((src_ptr, count), (out_ptr, count), M, N, src_ptr % 128, out_ptr % 128, tile_y0)


#: What ``transpose()`` launches on raw pointers (src pointer at argument 0, out at 1; a
#: repeated layout keeps their offsets within 128 bytes, which are arguments of their own).
LAUNCHER = TransposeLauncher("transpose_sector", TILES, _build, _tile_rows, _args,
                             src_args=(0,), out_args=(1,))
