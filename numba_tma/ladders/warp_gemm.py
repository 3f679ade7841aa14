"""One-warp tensor-core GEMMs on ``ldmatrix`` + ``mma.sync``: a 16 x 16 x K main loop, and the
16 x 16 x 16 half GEMM four ways of seed 002, a kernel ladder for shared-memory bank conflicts.

Seed 002 (``002_00dfcadf9f73ff5b.txt``, "高性能计算-CUDA-mma-PTX": wmma + shared memory, wmma +
padding, mma.sync + ldmatrix(.trans) + stmatrix, and mma with an XOR swizzle<3,1,3>). The
figures are bank conflicts, not speed (one warp, one tile): the table's model numbers match
ncu's counters on the H100 for the plain and padded rungs (``benches/warp_gemm_banks.py``; the
counts it read: ``docs/gemm.md``).

``gemm_16x16`` (the main loop): A and B staged in shared memory, each 16-deep step loads A with
``ldmatrix.x4`` and B with ``ldmatrix.x4.trans`` and issues two m16n8k16 mmas into 8 f32
registers. Its SASS keeps every fragment in registers (no LDL/STL, checked offline by
tests/test_warp_sass.py); tests/gpu/test_warp.py checks it on the GPU.

The ladder (``LADDER`` keeps this order; each value is a host wrapper ``fn(a, b, out=None,
stream=0)`` computing ``out = a @ b`` for 16 x 16 float16 ``a``, ``b``, with one warp):

============  ======================================================================  =========
rung          shared memory and fragments                                             conflicts
============  ======================================================================  =========
``smem``      dense 16 x 16 tiles; fragments built by per-lane 32/16-bit loads        ld 12,
              in the mma layout (the seed's wmma rungs; numba has no wmma)            st 4
``padded``    rows padded by 8 halves (48-byte pitch, the seed's ``OFFSET = 8``)      0
``ldmatrix``  dense tiles, ``ldmatrix.x4`` (A), ``ldmatrix.x4.trans`` (B),            ld 8,
              ``stmatrix.x4`` (C)                                                      st 4
``swizzle``   dense tiles with the seed's XOR swizzle, ldmatrix/stmatrix              0
============  ======================================================================  =========

"Conflicts" are the extra shared-memory wavefronts of one run (32 banks of 4 bytes; a warp
access takes as many wavefronts as the most distinct 4-byte words any one bank must deliver;
an ``ldmatrix``/``stmatrix`` takes one phase per 8 x 8 matrix), from the host model
``bank_model`` fed with the very index functions the kernels use; ``benches/warp_gemm_banks.py``
measures them with ncu. Every rung reads A and B from global memory as 32-bit words (a lane per
word: coalesced), accumulates in f32 (two ``mma.m16n8k16.f32.f16.f16.f32``), rounds to f16 once
(``F2FP.F16.F32.PACK_AB``) and writes C through shared memory as f16, as the seed does.

The seed's swizzle, exactly. Its ``swizzle<B=3, M=1, S=3>(addr)`` computes ``mask = (1 << B - 1)
<< M``, which C++ parses as ``(1 << (B - 1)) << M = 0b1000``, and returns ``((addr >> 3) & mask)
^ addr``: bit 6 of the half-element offset (bit 2 of the row) flips bit 3 (which 16-byte half
of the 32-byte row). In CuTe's notation that is ``Swizzle<1, 3, 3>`` on half offsets
(``Swizzle<1, 4, 3>`` on bytes), acting on 8-half (16-byte) units: rows 4-7 and 12-15 swap their
two 16-byte chunks, so the 8 rows of every ldmatrix phase cover all 8 16-byte bank groups. The
mask the seed's comment intends, ``((1 << B) - 1) << M``, i.e. CuTe's ``Swizzle<3, 1, 3>`` on half
offsets, would permute 2-half units inside each 16-byte row and break the contiguous rows that
ldmatrix and the 16-byte copies need (``seed_swizzle``/``cute_swizzle`` below; the CPU tests
check both statements).
"""

import collections

import numpy as np

from .._frontend import cuda, register_jitable
from .._bridge import inline_device
from .. import warp
from .._arrays import as_device
from ..launch import configure

__all__ = ["KMAX", "gemm_16x16", "LADDER", "KERNELS", "gemm16_smem", "gemm16_padded",
           "gemm16_ldmatrix", "gemm16_swizzle", "swizzle_half", "swizzle_word", "seed_swizzle",
           "cute_swizzle", "bank_model", "shared_accesses"]

KMAX = 64
TILE_ELEMS = 16 * KMAX                   # shared array shapes must be plain constants


@cuda.jit
def gemm_16x16(a, b, d, k):
    """D (16x16 f32) = A (16 x k f16, row stride KMAX) @ B (k x 16 f16): ldmatrix A (x4) and B
    (x4.trans) from shared memory each 16-deep step, two m16n8k16 mmas into 8 f32 accumulators."""
    sa = cuda.shared.array(TILE_ELEMS, np.uint16, alignment=128)
    sb = cuda.shared.array(TILE_ELEMS, np.uint16, alignment=128)
    lane = cuda.threadIdx.x % 32
    for i in range(lane, TILE_ELEMS, 32):
        sa[i] = a[i]
        sb[i] = b[i]
    cuda.syncwarp()
    acc = cuda.local.array(8, np.float32)    # [0:4] columns 0-7, [4:8] columns 8-15
    for i in range(8):
        acc[i] = 0
    af = cuda.local.array(4, np.uint32)
    bf = cuda.local.array(4, np.uint32)      # [0:2] columns 0-7, [2:4] columns 8-15
    m, r = lane >> 3, lane & 7               # this lane supplies row r of 8x8 matrix m
    row, col = r + 8 * (m & 1), 8 * (m >> 1)
    for kk in range(0, k, 16):               # run-time trip count: a real loop
        warp.ldmatrix(af, sa, (row * KMAX + kk + col) * 2, count=4)
        warp.ldmatrix(bf, sb, ((kk + row) * 16 + col) * 2, count=4, trans=True)
        warp.mma_m16n8k16_f32_f16(acc, af, bf, acc)
        warp.mma_m16n8k16_f32_f16(acc[4:], af, bf[2:], acc[4:])
    g, t = lane >> 2, lane & 3
    for nt in range(2):
        for i in range(4):
            d[(g + 8 * (i >> 1)) * 16 + 8 * nt + 2 * t + (i & 1)] = acc[4 * nt + i]


# =============================================================================================
# Seed 002: 16 x 16 x 16 half GEMM four ways

WARP = 32
N16 = 16                           # M = N = K
HALF_BYTES = 2
WORD_HALVES = 2                    # an f16 pair per 32-bit word
ROW_WORDS = N16 // WORD_HALVES     # 8 words (32 bytes) per dense row
TILE_WORDS = N16 * ROW_WORDS       # 128
COPY_STEPS = TILE_WORDS // WARP    # 4 word copies per lane and matrix
PAD_HALVES = 8                     # the seed's OFFSET: 16 bytes, keeps rows 16-byte aligned
PADDED_PITCH_WORDS = (N16 + PAD_HALVES) // WORD_HALVES   # 12 words = 48 bytes
PADDED_WORDS = N16 * PADDED_PITCH_WORDS                  # 192
SMEM_ALIGN = 128
# The seed's swizzle on half offsets: bit SWZ_SRC (row bit 2) flips bit SWZ_DST (16-byte chunk).
SWZ_SHIFT = 3
SWZ_MASK = 1 << 3
BANKS = 32
BANK_BYTES = 4


@register_jitable
def swizzle_half(off):
    """Shared half offset of logical half offset ``off`` of a dense 16 x 16 f16 tile under the
    seed's ``swizzle<3,1,3>`` (as its C++ evaluates): ``off ^ ((off >> 3) & 8)``."""
    return off ^ ((off >> SWZ_SHIFT) & SWZ_MASK)


@register_jitable
def swizzle_word(w):
    """``swizzle_half`` on 32-bit words (f16 pairs, never split): ``w ^ ((w >> 3) & 4)``."""
    return swizzle_half(w * WORD_HALVES) // WORD_HALVES


def seed_swizzle(addr, B=3, M=1, S=3):
    """The seed's ``swizzle<B, M, S>`` evaluated with C++ precedence (``1 << B - 1`` is
    ``1 << (B - 1)``): works on Python ints and numpy integer arrays."""
    mask = (1 << (B - 1)) << M
    return ((addr >> S) & mask) ^ addr


def cute_swizzle(offset, B, M, S):
    """CuTe's ``Swizzle<B, M, S>``: bits [M+S, M+S+B) of ``offset`` XORed into bits [M, M+B)."""
    yyy = ((1 << B) - 1) << (M + S)
    return offset ^ ((offset & yyy) >> S)


# --- index functions shared by the kernels and the bank model -------------------------------

@register_jitable
def _stage_words(lane, i, padded):
    """(global word, shared word) lane ``lane`` copies in step ``i`` (0..3) of a tile. Dense:
    word ``lane + 32 i``. Padded: rows {0,2,4,6}, {1,3,5,7}, {8,..}, {9,..} per step, 8 lanes a
    row, which puts the 4 rows on disjoint banks (row r starts at bank 12 r mod 32)."""
    if padded:
        r = 2 * (lane >> 3) + (i & 1) + 8 * (i >> 1)
        c = lane & 7
        return r * ROW_WORDS + c, r * PADDED_PITCH_WORDS + c
    w = lane + WARP * i
    return w, w


@register_jitable
def _a_word(lane, q, pitch):
    """Shared word of A-fragment register ``q`` (halves a[2q], a[2q+1]) of lane ``lane``:
    A[g + 8 (q & 1)][2t + 8 (q >> 1) + {0, 1}], rows ``pitch`` words apart."""
    g, t = lane >> 2, lane & 3
    return (g + 8 * (q & 1)) * pitch + t + 4 * (q >> 1)


@register_jitable
def _b_half(lane, r, j, pitch_halves):
    """Shared half offset of half ``j`` of B-fragment register ``r`` (= 2 nt + h: n-tile nt,
    k-half h): B[2t + j + 8h][g + 8 nt]; consecutive k are a row apart, so two 16-bit loads."""
    g, t = lane >> 2, lane & 3
    return (2 * t + j + 8 * (r & 1)) * pitch_halves + g + 8 * (r >> 1)


@register_jitable
def _c_word(lane, r, pitch):
    """Shared word of C pair ``r`` (= 2 nt + h): C[g + 8h][8 nt + 2t + {0, 1}], which holds
    accumulators acc[4 nt + 2h], acc[4 nt + 2h + 1]."""
    g, t = lane >> 2, lane & 3
    return (g + 8 * (r & 1)) * pitch + 4 * (r >> 1) + t


@register_jitable
def _ldsm_half(lane):
    """Logical half offset of the row lane ``lane`` supplies to ldmatrix/stmatrix .x4 on a dense
    16 x 16 tile: lanes 0-15 rows 0-15 of columns 0-7, lanes 16-31 rows 0-15 of columns 8-15,
    so matrices 0..3 are the quadrants (0,0), (1,0), (0,1), (1,1) -- A's a0..a7 order, B's
    (k-half, n-tile) order with .trans, and C's (row half, n-tile) pairs."""
    return (lane & 15) * N16 + (lane >> 4) * 8


@inline_device
def _pack_f16x2(lo, hi):
    """Two f32 rounded to f16 in one word, ``lo`` in the low half (F2FP.F16.F32.PACK_AB)."""
    h = cuda.local.array(2, np.float16)
    h[0] = np.float16(lo)
    h[1] = np.float16(hi)
    return h.view(np.uint32)[0]


# --- kernels ----------------------------------------------------------------------------------

def _plain_kernel(padded):
    """Rungs ``smem`` and ``padded``: per-lane shared loads in the mma fragment layout."""
    PITCH = PADDED_PITCH_WORDS if padded else ROW_WORDS
    PITCH_H = PITCH * WORD_HALVES
    WORDS = PADDED_WORDS if padded else TILE_WORDS
    PADDED = padded

    def kernel(a, b, c):
        sa = cuda.shared.array(WORDS, np.uint32, alignment=SMEM_ALIGN)
        sb = cuda.shared.array(WORDS, np.uint32, alignment=SMEM_ALIGN)
        sc = cuda.shared.array(WORDS, np.uint32, alignment=SMEM_ALIGN)
        lane = cuda.threadIdx.x & (WARP - 1)
        for i in range(COPY_STEPS):
            src, dst = _stage_words(lane, i, PADDED)
            sa[dst] = a[src]
            sb[dst] = b[src]
        cuda.syncwarp()

        af = cuda.local.array(4, np.uint32)
        bf = cuda.local.array(4, np.uint32)      # [0:2] columns 0-7, [2:4] columns 8-15
        acc = cuda.local.array(8, np.float32)    # likewise
        for i in range(8):
            acc[i] = 0
        for q in range(4):
            af[q] = sa[_a_word(lane, q, PITCH)]
        sbh = sb.view(np.uint16)
        for r in range(4):
            lo = np.uint32(sbh[_b_half(lane, r, 0, PITCH_H)])
            hi = np.uint32(sbh[_b_half(lane, r, 1, PITCH_H)])
            bf[r] = lo | (hi << 16)
        warp.mma_m16n8k16_f32_f16(acc, af, bf, acc)
        warp.mma_m16n8k16_f32_f16(acc[4:], af, bf[2:], acc[4:])

        for r in range(4):
            i0 = 4 * (r >> 1) + 2 * (r & 1)
            sc[_c_word(lane, r, PITCH)] = _pack_f16x2(acc[i0], acc[i0 + 1])
        cuda.syncwarp()
        for i in range(COPY_STEPS):
            src, dst = _stage_words(lane, i, PADDED)
            c[src] = sc[dst]

    return kernel


def _ldsm_kernel(swizzled):
    """Rungs ``ldmatrix`` and ``swizzle``: ldmatrix(.trans)/stmatrix on dense tiles."""
    SWIZZLED = swizzled

    def kernel(a, b, c):
        sa = cuda.shared.array(TILE_WORDS, np.uint32, alignment=SMEM_ALIGN)
        sb = cuda.shared.array(TILE_WORDS, np.uint32, alignment=SMEM_ALIGN)
        sc = cuda.shared.array(TILE_WORDS, np.uint32, alignment=SMEM_ALIGN)
        lane = cuda.threadIdx.x & (WARP - 1)
        for i in range(COPY_STEPS):
            w = lane + WARP * i
            s = swizzle_word(w) if SWIZZLED else w
            sa[s] = a[w]
            sb[s] = b[w]
        cuda.syncwarp()

        af = cuda.local.array(4, np.uint32)
        bf = cuda.local.array(4, np.uint32)
        acc = cuda.local.array(8, np.float32)
        for i in range(8):
            acc[i] = 0
        h = _ldsm_half(lane)
        if SWIZZLED:
            h = swizzle_half(h)
        row_bytes = h * HALF_BYTES
        warp.ldmatrix(af, sa, row_bytes, count=4)
        warp.ldmatrix(bf, sb, row_bytes, count=4, trans=True)
        warp.mma_m16n8k16_f32_f16(acc, af, bf, acc)
        warp.mma_m16n8k16_f32_f16(acc[4:], af, bf[2:], acc[4:])

        cw = cuda.local.array(4, np.uint32)      # stmatrix matrix r = 2 nt + h
        for r in range(4):
            i0 = 4 * (r >> 1) + 2 * (r & 1)
            cw[r] = _pack_f16x2(acc[i0], acc[i0 + 1])
        warp.stmatrix(sc, row_bytes, cw, count=4)
        cuda.syncwarp()
        for i in range(COPY_STEPS):
            w = lane + WARP * i
            c[w] = sc[swizzle_word(w) if SWIZZLED else w]

    return kernel


def _named(fn, name):
    fn.__name__ = fn.__qualname__ = name
    return cuda.jit(fn)


#: The ladder's kernels, ``kernel[1, 32](a_words, b_words, c_words)`` on uint32[128] arrays
#: (16 x 16 row-major f16, two halves a word, low half first). Names are ncu's --kernel-name.
KERNELS = collections.OrderedDict([
    ("smem", _named(_plain_kernel(False), "warp_gemm16_smem")),
    ("padded", _named(_plain_kernel(True), "warp_gemm16_padded")),
    ("ldmatrix", _named(_ldsm_kernel(False), "warp_gemm16_ldmatrix")),
    ("swizzle", _named(_ldsm_kernel(True), "warp_gemm16_swizzle")),
])


# --- host wrappers ----------------------------------------------------------------------------

def _describe(x, name):
    cai = getattr(x, "__cuda_array_interface__", None)
    if cai is not None:
        return tuple(cai["shape"]), np.dtype(cai["typestr"]), cai.get("strides"), cai["data"][0]
    if isinstance(x, np.ndarray):
        return x.shape, x.dtype, x.strides if not x.flags.c_contiguous else None, None
    raise TypeError(f"{name} must be a numpy array or a CUDA device array exposing "
                    f"__cuda_array_interface__; got {type(x).__name__}")


def _check16(x, name):
    """Validate ``x``: a 16 x 16 float16 C-contiguous array (host or device), 4-byte aligned."""
    shape, dtype, strides, ptr = _describe(x, name)
    if dtype != np.float16:
        raise TypeError(f"{name} must have dtype float16, got {dtype}")
    if tuple(shape) != (N16, N16):
        raise ValueError(f"{name} must have shape (16, 16), got {tuple(shape)}")
    if strides is not None and tuple(strides) != (N16 * HALF_BYTES, HALF_BYTES):
        raise ValueError(f"{name} must be C-contiguous, got strides {tuple(strides)} (bytes)")
    if ptr is not None and ptr % BANK_BYTES:
        raise ValueError(f"{name} must be 4-byte aligned (it is read as 32-bit words), got "
                         f"address {ptr:#x}")


def _words(x):
    """A validated 16 x 16 float16 array as a device uint32[128] view (host arrays copied)."""
    if isinstance(x, np.ndarray):
        x = cuda.to_device(np.ascontiguousarray(x))
    else:
        x = as_device(x)
    return x.reshape(N16 * N16).view(np.uint32)


def _launcher(name):
    kernel = KERNELS[name]

    def run(a, b, out=None, stream=0):
        _check16(a, "a")
        _check16(b, "b")
        if out is not None:
            if isinstance(out, np.ndarray):
                raise TypeError("out must be a CUDA device array (float16, 16 x 16), got a "
                                "numpy array")
            _check16(out, "out")
        aw, bw = _words(a), _words(b)
        if out is None:
            out = cuda.device_array((N16, N16), np.float16, stream=stream)
        configure(kernel, 1, WARP, stream)(aw, bw, _words(out))
        return out

    run.__name__ = run.__qualname__ = f"gemm16_{name}"
    return run


_gemm16_smem = _launcher("smem")
_gemm16_padded = _launcher("padded")
_gemm16_ldmatrix = _launcher("ldmatrix")
_gemm16_swizzle = _launcher("swizzle")


def gemm16_smem(a, b, out=None, stream=0):
    """Rung 1 (seed's ``sharedM_wmma_kernel``): ``out = a @ b``, 16 x 16 f16, one warp.

    A and B are copied to dense 16 x 16 shared tiles (a lane per 32-bit word), then each lane
    builds its mma fragments with plain shared loads in the PTX fragment layout (the seed's
    ``wmma::load_matrix_sync``, written out per lane): A's four registers are 32-bit loads of ``A[g][2t..]``,
    ``A[g+8][2t..]``, ``A[g][2t+8..]``, ``A[g+8][2t+8..]``; B's k-pairs lie in different rows of
    the row-major tile, so each B register is two 16-bit loads packed. Two m16n8k16 f32 mmas;
    C is rounded to f16, stored per lane (32-bit pairs) to a dense shared tile, copied out.

    Cost: the dense 32-byte row pitch puts rows g and g + 4 on the same banks: every fragment
    load and C store is 2-way conflicted (model: 12 extra load wavefronts, 4 extra store
    wavefronts). ``a``, ``b``: float16 (16, 16) C-contiguous, host or device; ``out``: device
    float16 (16, 16) or None (allocated). Returns ``out``; does not synchronize.
    """
    return _gemm16_smem(a, b, out, stream)


def gemm16_padded(a, b, out=None, stream=0):
    """Rung 2 (seed's ``sharedM_padding_wmma_kernel``): rung 1 with rows padded to 24 halves.

    Changed from ``smem``: every shared row is 16 + 8 halves (48 bytes, still 16-byte aligned;
    the seed's ``OFFSET = 8``), for A, B and C; the copies visit rows {0,2,4,6}, {1,3,5,7},
    {8,..}, {9,..} per step so that they are conflict-free too.

    Buys: row g starts at bank 12 g mod 32, so the 8 rows g of a fragment access land on 8
    disjoint 4-bank groups: every fragment load and C store is one wavefront (model: no extra
    wavefront at all). Costs 24 halves of shared memory per row instead of 16. Arguments as
    ``gemm16_smem``.
    """
    return _gemm16_padded(a, b, out, stream)


def gemm16_ldmatrix(a, b, out=None, stream=0):
    """Rung 3 (seed's ``sharedM_mma_kernel``): ldmatrix/stmatrix on dense tiles.

    Changed from ``smem``: one ``ldmatrix.x4`` loads all of A's fragment, one
    ``ldmatrix.x4.trans`` all of B's (the transpose turns row-major B into the mma's column
    operand, no 16-bit loads), one ``stmatrix.x4`` stores C's four f16x2 registers; lane l
    supplies row ``l % 16``, column block ``8 (l // 16)``.

    Buys: 3 shared instructions instead of 16 per lane. Still conflicted: each 8 x 8 matrix is
    8 rows 32 bytes apart, rows r and r + 4 on the same banks, 2 wavefronts per matrix (model: 8
    extra ldmatrix wavefronts, 4 extra stmatrix wavefronts). Arguments as ``gemm16_smem``.
    """
    return _gemm16_ldmatrix(a, b, out, stream)


def gemm16_swizzle(a, b, out=None, stream=0):
    """Rung 4 (seed's ``sharedM_mma_swizzle_kernel``): rung 3 on XOR-swizzled dense tiles.

    Changed from ``ldmatrix``: half offset ``off`` of every tile lives at ``swizzle_half(off) =
    off ^ ((off >> 3) & 8)`` (the seed's ``swizzle<3,1,3>``): rows 4-7 and 12-15 swap their two
    16-byte chunks. The copies in and out apply the same map to whole words.

    Buys: the 8 rows of each ldmatrix/stmatrix phase now cover all 8 16-byte bank groups: no
    conflicts (model: none), with no padding (dense 512-byte tiles) and the instruction count of
    rung 3. Arguments as ``gemm16_smem``.
    """
    return _gemm16_swizzle(a, b, out, stream)


LADDER = collections.OrderedDict([
    ("smem", gemm16_smem), ("padded", gemm16_padded),
    ("ldmatrix", gemm16_ldmatrix), ("swizzle", gemm16_swizzle),
])


# --- bank model ---------------------------------------------------------------------------------

Access = collections.namedtuple("Access", "op what phases")


def _word_phase(byte_addrs, width):
    """One phase: the 4-byte words each lane's ``width``-byte access touches."""
    return [[(addr // BANK_BYTES) + k for k in range(max(1, width // BANK_BYTES))]
            for addr in byte_addrs]


def shared_accesses(name):
    """The shared-memory warp instructions of rung ``name``, in program order: ``Access(op,
    what, phases)``, ``op`` one of "ld", "st" (LDS/STS), "ldsm", "stsm"; ``phases`` a list of
    phases, each a list of per-lane lists of 4-byte word addresses. Built from the kernels' own
    index functions."""
    lanes = range(WARP)
    acc = []
    padded = name == "padded"
    if name in ("smem", "padded"):
        pitch = PADDED_PITCH_WORDS if padded else ROW_WORDS
        base_b = PADDED_WORDS if padded else TILE_WORDS     # tiles laid out sa, sb, sc
        base_c = 2 * base_b
        for i in range(COPY_STEPS):
            for base, what in ((0, "stage A"), (base_b, "stage B")):
                words = [base + _stage_words(lane, i, padded)[1] for lane in lanes]
                acc.append(Access("st", what, [_word_phase([4 * w for w in words], 4)]))
        for q in range(4):
            words = [_a_word(lane, q, pitch) for lane in lanes]
            acc.append(Access("ld", f"A reg {q}", [_word_phase([4 * w for w in words], 4)]))
        for r in range(4):
            for j in range(2):
                halves = [_b_half(lane, r, j, pitch * WORD_HALVES) for lane in lanes]
                acc.append(Access("ld", f"B reg {r} half {j}",
                                  [_word_phase([4 * base_b + 2 * h for h in halves], 2)]))
        for r in range(4):
            words = [base_c + _c_word(lane, r, pitch) for lane in lanes]
            acc.append(Access("st", f"C pair {r}", [_word_phase([4 * w for w in words], 4)]))
        for i in range(COPY_STEPS):
            words = [base_c + _stage_words(lane, i, padded)[1] for lane in lanes]
            acc.append(Access("ld", "copy out C", [_word_phase([4 * w for w in words], 4)]))
        return acc
    if name not in ("ldmatrix", "swizzle"):
        raise ValueError(f"unknown rung {name!r}; choose from {', '.join(LADDER)}")
    swz = name == "swizzle"

    def word(w):
        return swizzle_word(w) if swz else w

    def rows(base):
        h = [_ldsm_half(lane) for lane in lanes]
        h = [swizzle_half(x) if swz else x for x in h]
        # phase m: lanes 8m..8m+7 supply the 16-byte rows of matrix m
        return [_word_phase([4 * base + 2 * x for x in h[8 * m:8 * m + 8]], 16) for m in range(4)]

    for i in range(COPY_STEPS):
        for base, what in ((0, "stage A"), (TILE_WORDS, "stage B")):
            words = [base + word(lane + WARP * i) for lane in lanes]
            acc.append(Access("st", what, [_word_phase([4 * w for w in words], 4)]))
    acc.append(Access("ldsm", "A ldmatrix.x4", rows(0)))
    acc.append(Access("ldsm", "B ldmatrix.x4.trans", rows(TILE_WORDS)))
    acc.append(Access("stsm", "C stmatrix.x4", rows(2 * TILE_WORDS)))
    for i in range(COPY_STEPS):
        words = [2 * TILE_WORDS + word(lane + WARP * i) for lane in lanes]
        acc.append(Access("ld", "copy out C", [_word_phase([4 * w for w in words], 4)]))
    return acc


def _wavefronts(phase):
    """Wavefronts of one phase: the most distinct words any bank must deliver (at least 1)."""
    per_bank = collections.defaultdict(set)
    for words in phase:
        for w in words:
            per_bank[w % BANKS].add(w)
    return max(len(s) for s in per_bank.values())


def bank_model(name):
    """{op: (wavefronts, ideal wavefronts)} of one run of rung ``name``; "ideal" is one wavefront
    per phase (what a conflict-free access costs). ncu's bank-conflict counters report the
    difference."""
    out = {}
    for a in shared_accesses(name):
        waves = sum(_wavefronts(p) for p in a.phases)
        w, ideal = out.get(a.op, (0, 0))
        out[a.op] = (w + waves, ideal + len(a.phases))
    return out
