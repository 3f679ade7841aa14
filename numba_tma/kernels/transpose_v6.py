"""The v6 rungs of the classic transpose ladder (seed 003, whose v1-v5 live in
``numba_tma.ladders.transpose_classic``): what ``numba_tma.transpose`` runs where v7 and v8 do not
apply (under the CUDA simulator, and in v7_vec16 / v8_sector's own fallbacks).

``v6_packed``         8-byte words, k x k register transposes, 16 KiB tiles, 64 B in flight/thread
``v6_persistent``     v6_packed on a resident grid, next tile prefetched into registers

The v6 kernels sidestep the narrow-element bank cases of v2-v5: they move 8-byte words (k =
8 / itemsize elements of a row), transpose k x k element blocks inside registers and then
transpose whole words through shared memory, where the 8-byte analysis holds for every dtype.
Each launcher is ``fn(src, out, stream=0)`` on (B, M, N) and (B, N, M) arrays; every docstring
says what the rung changed from the one below and what it bought.
"""

import functools

import numpy as np

from .._frontend import cuda
from ..launch import configure
from ._grid import MAX_GRID_YZ, cdiv, check_pair, device_pointer, grid3

__all__ = ["BEST", "v6_packed", "v6_persistent", "v6_config"]

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


def _micro_transpose(k, bits):
    """The k x k register transpose of words x[base : base + k] (elements of `bits` bits) as one
    device function ``micro_transpose(x, base)``, by butterfly stages: stage h swaps the lanes
    (elements) with bit h set in word i with the lanes without it in word i + h, for the words
    i without bit h; the log2(k) stages swap every bit of the (row, lane) index pair. Constants
    are typed uint64 so numba keeps the arithmetic in uint64 (uint64 op int64 would become
    float64)."""
    stages = []
    h = k // 2
    while h:
        lanes = sum(((1 << bits) - 1) << (c * bits) for c in range(k) if c & h == 0)
        stages.append(_stage_fn(k, h, np.uint64(h * bits), np.uint64(lanes)))
        h //= 2
    return _chain(stages)


def _raster(group, TP, TQ):
    """``(in_group, decode)``: the device functions that place tiles in groups of `group` tile
    rows (TP micro-rows x TQ word columns per tile)."""
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

    return in_group, decode


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
    micro_transpose = _micro_transpose(k, bits)

    @cuda.jit(device=True)
    def lanes():
        # This thread's place in a tile: (micro-row, word column) of its loads, (tile row,
        # column) of its stores.
        tid = cuda.threadIdx.x
        return tid // TQ, tid & (TQ - 1), tid // TP, tid & tpm

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

    in_group, decode = _raster(group, TP, TQ)

    if not persistent:
        @_bounded_jit(V6_PACKED_MIN_BLOCKS)
        def transpose_v6_packed(src, out, Mp, Nw, TRn, TCn):
            # Grid: x = tile within a group of `group` tile rows, y = group, z = batch.
            tr, tc = in_group(np.int64(cuda.blockIdx.x), np.int64(cuda.blockIdx.y) * group, TRn)
            if tc >= TCn:          # the last group is shorter than the grid's x extent
                return
            buf = cuda.shared.array((ROWS, TP), word)
            regs = cuda.local.array(NREG, word)
            lp, lq, sr, sc = lanes()
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
        lp, lq, sr, sc = lanes()
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
              and device_pointer(src) % 8 == 0 and device_pointer(out) % 8 == 0)
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
    about bandwidth x DRAM latency / 132 SMs = ~20 KiB per SM, which holds it well short of a copy
    (``docs/transpose.md``). Here
    each resident block has 16 KiB outstanding during its load phase (8 blocks of 256 threads per
    SM: launch bounds hold it to 32 registers). (5) Grouped
    rasterisation: consecutive blocks walk down ``group`` tile rows before moving right (see
    v6_persistent; ``group=1`` is the plain raster). Needs M and N divisible by k and 8-byte
    aligned buffers; otherwise the same kernel runs on plain elements (k = 1, 64 x 32 tiles for
    4 bytes, 32 x 32 for 1 and 2 bytes). Shapes whose grid would pass CUDA's 65535 limit on
    gridDim.y/z (a batch over 65535) run ``v6_persistent``.
    """
    src, out, B, M, N = check_pair(src, out)
    if B * M * N == 0:
        return
    word, k, TP, TQ, fs, fo, Mp, Nw = _v6_setup(src, out, B, M, N)
    group = _check_group(group)
    TRn, TCn = cdiv(Mp, TP), cdiv(Nw, TQ)
    # A group taller than the matrix would only add blocks that exit at once.
    while group > 1 and group > TRn:
        group //= 2
    if cdiv(TRn, group) > MAX_GRID_YZ or B > MAX_GRID_YZ:
        # Past the grid's y/z limits (a batch over 65535, ~67M+ rows): the persistent kernel
        # walks any number of tiles from one linear index.
        return v6_persistent(src, out, stream, group=group)
    grid = grid3(group * TCn, cdiv(TRn, group), B, "v6_packed")
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
    The loop is ~300 instructions per thread per tile, ~100 of them the tile decode; at a copy's
    bandwidth that is about 1 warp instruction per clock per SM of the 4 it can issue, so the
    limit should be DRAM, as for a copy. If it is not, the knobs in
    order: ``group`` (1 / 4 / 64), then v6_packed (which wins if block turnover is cheaper than
    the decode), then ``V6_BLOCKS_PER_SM`` = 4 (64 registers, no spill: the store phase then
    issues most of its 8 shared loads ahead of the global stores instead of pairing each one
    with its store).
    """
    src, out, B, M, N = check_pair(src, out)
    if B * M * N == 0:
        return
    word, k, TP, TQ, fs, fo, Mp, Nw = _v6_setup(src, out, B, M, N)
    TRn, TCn = cdiv(Mp, TP), cdiv(Nw, TQ)
    ntiles = B * TRn * TCn
    if ntiles >= 2 ** 31:
        raise ValueError(f"v6_persistent: {ntiles} tiles exceed the 32-bit tile index")
    kern = _v6(word, k, TP, TQ, True, _check_group(group))
    args = (fs, fo, Mp, Nw, TRn, TCn, ntiles)
    if grid is None:
        grid = _persistent_grid(kern, args)
    grid = max(1, min(int(grid), ntiles))
    configure(kern, grid, V6_THREADS, stream)(*args)


# v6_packed beat v6_persistent on the H100 for every element size and at odd shapes
# (docs/transpose.md).
BEST = "v6_packed"
