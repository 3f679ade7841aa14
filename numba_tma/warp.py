"""Warp-level tensor-core data movement and math: ``ldmatrix``, ``stmatrix`` and ``mma.sync``;
and ``elect_one`` (``elect.sync``), which picks one lane for one-thread work.

PTX ISA: "Warp-level Matrix Multiply-Accumulate Instructions" (ldmatrix, stmatrix, mma), and its
"Matrix Fragments for mma.m16n8k8 / m16n8k16 / m16n8k32" figures. ``ldmatrix`` needs sm_75, the
``mma`` variants here sm_80 (bf16, int8 m16n8k32), ``stmatrix`` sm_90 (compiled for an older GPU
its body is a trap, so the rest of the unit still builds there).

Who issues them: all 32 lanes of a warp, converged, every lane with the same variant (all are
``.sync.aligned``). Never call them under a condition that splits a warp; a warp with an exited
lane is undefined behaviour.

Registers ("fragments") travel through ``cuda.local.array``s of 32-bit words (``uint32`` or
``int32``; ``float32``/``int32`` for f32/s32 accumulators) that LTO keeps in registers as long as
they are indexed with compile-time constants (unrolled loops). An f16/bf16 word holds two 16-bit
elements, the lower-numbered one in the low half; an s8 word holds four, the lowest in the low
byte (the little-endian order, so ``numpy_frag.view(np.uint32)`` packs them). Array lengths are
run-time facts numba cannot check: they are documented per function and must be met.

A 16x8x16 f16 step, A row-major (16 x 16) and B row-major (K x N = 16 x 8) in shared memory::

    lane = cuda.threadIdx.x % 32
    a = cuda.local.array(4, np.uint32); b = cuda.local.array(2, np.uint32)
    acc = cuda.local.array(4, np.float32)                     # zero it first
    # ldmatrix.x4: lane l supplies row (l % 8) + 8 * ((l // 8) % 2), column block 8 * (l // 16)
    r, cb = lane % 8 + 8 * ((lane // 8) % 2), 8 * (lane // 16)
    warp.ldmatrix(a, sA, (r * 16 + cb) * 2, count=4)          # a == fragment_a_m16n8k16(A)
    # ldmatrix.x2.trans: lanes 0-15 supply rows k = 0..15 of B; the transpose gives B's "col" layout
    warp.ldmatrix(b, sB, (lane % 16) * 8 * 2, count=2, trans=True)  # b == fragment_b_m16n8k16(B)
    warp.mma_m16n8k16_f32_f16(acc, a, b, acc)                 # acc += A @ B, in place

Host side, the numpy helpers below map a matrix to per-lane fragments (``fragment_*``, shape
(32, elements per lane)) and back (``unfragment_*``); ``pack_words``/``unpack_words`` turn element
fragments into the 32-bit registers the intrinsics take; ``bf16_bits``/``bf16_to_float32`` give
bfloat16 bit patterns without ml_dtypes.

Notation of the layouts (the PTX ISA's): ``g = groupID = lane >> 2``, ``t = threadID_in_group =
lane % 4``; element ``i`` of a lane's fragment is its i-th 16-bit (or 8-bit) value, register
``i // 2`` (``i // 4`` for s8).
"""

import numpy as np

from ._frontend import errors, overload, types
from ._bridge import address_of, declare, host_call, literal_int, require_array, require_int

__all__ = [
    "ldmatrix", "stmatrix",
    "mma_m16n8k16_f32_f16", "mma_m16n8k16_f32_bf16", "mma_m16n8k16_f16_f16",
    "mma_m16n8k8_f32_f16", "mma_m16n8k8_f32_bf16", "mma_m16n8k32_s32_s8",
    "pack_f16x2", "pack_bf16x2", "unpack_f16x2", "unpack_bf16x2", "elect_one",
    "fragment_a_m16n8k16", "unfragment_a_m16n8k16", "fragment_b_m16n8k16", "unfragment_b_m16n8k16",
    "fragment_a_m16n8k8", "unfragment_a_m16n8k8", "fragment_b_m16n8k8", "unfragment_b_m16n8k8",
    "fragment_a_m16n8k32", "unfragment_a_m16n8k32", "fragment_b_m16n8k32", "unfragment_b_m16n8k32",
    "fragment_c", "unfragment_c", "fragment_ldmatrix", "unfragment_ldmatrix",
    "pack_words", "unpack_words", "bf16_bits", "bf16_to_float32",
]

_vp, _u32 = types.voidptr, types.uint32
_WORDS = (types.uint32, types.int32)
_F32 = (types.float32,)
_S32 = (types.int32,)


def _ld_name(count, trans):
    return f"numba_tma_ldmatrix_sync_aligned_m8n8_x{count}{'_trans' if trans else ''}_shared_b16"


def _st_name(count, trans):
    return f"numba_tma_stmatrix_sync_aligned_m8n8_x{count}{'_trans' if trans else ''}_shared_b16"


_ldmatrix = {(n, t): declare("warp", _ld_name(n, t), types.void(_vp, _vp, _u32))
             for n in (1, 2, 4) for t in (False, True)}
_stmatrix = {(n, t): declare("warp", _st_name(n, t), types.void(_vp, _u32, _vp))
             for n in (1, 2, 4) for t in (False, True)}

_mma_sig = types.void(_vp, _vp, _vp, _vp)
_mma_16816_f32_f16 = declare("warp", "numba_tma_mma_sync_aligned_m16n8k16_row_col_f32_f16_f16_f32",
                             _mma_sig)
_mma_16816_f32_bf16 = declare(
    "warp", "numba_tma_mma_sync_aligned_m16n8k16_row_col_f32_bf16_bf16_f32", _mma_sig)
_mma_16816_f16_f16 = declare("warp", "numba_tma_mma_sync_aligned_m16n8k16_row_col_f16_f16_f16_f16",
                             _mma_sig)
_mma_1688_f32_f16 = declare("warp", "numba_tma_mma_sync_aligned_m16n8k8_row_col_f32_f16_f16_f32",
                            _mma_sig)
_mma_1688_f32_bf16 = declare("warp", "numba_tma_mma_sync_aligned_m16n8k8_row_col_f32_bf16_bf16_f32",
                             _mma_sig)
_mma_16832_s32_s8 = declare("warp", "numba_tma_mma_sync_aligned_m16n8k32_row_col_s32_s8_s8_s32",
                            _mma_sig)

_f32 = types.float32
_pack = {"f16": declare("warp", "numba_tma_cvt_rn_f16x2_f32", _u32(_f32, _f32)),
         "bf16": declare("warp", "numba_tma_cvt_rn_bf16x2_f32", _u32(_f32, _f32))}
_unpack = {(kind, half): declare("warp", f"numba_tma_cvt_f32_{kind}_{half}", _f32(_u32))
           for kind in ("f16", "bf16") for half in ("lo", "hi")}


def _literal_count(fname, ty):
    # An omitted argument arrives as its default value itself.
    value = ty if isinstance(ty, int) else literal_int(fname, "count", ty, 1, 4)
    if value not in (1, 2, 4):
        raise errors.TypingError(f"{fname}: count must be 1, 2 or 4 (.x1/.x2/.x4), got {value}")
    return value


def _literal_bool(fname, argname, ty):
    """Value of a compile-time bool argument (a PTX qualifier)."""
    if isinstance(ty, bool):                    # the default of an omitted argument
        return ty
    if isinstance(ty, types.BooleanLiteral):
        return bool(ty.literal_value)
    if isinstance(ty, types.Omitted) and isinstance(ty.value, bool):
        return ty.value
    raise errors.TypingError(f"{fname}: {argname} must be a compile-time constant True or False "
                             f"(it selects a PTX qualifier), got {ty}")


# ------------------------------------------------------------------------------------- stubs


def ldmatrix(regs, tile, byte_offset, count=4, trans=False):
    """Load ``count`` (1, 2 or 4) 8x8 matrices of 16-bit elements from shared ``tile``, one
    32-bit register per matrix per lane, into ``regs[0:count]``.

    PTX: ``ldmatrix.sync.aligned.m8n8.x{count}{.trans}.shared.b16 {r0, ..}, [tile + byte_offset];``
    SASS: ``LDSM.16.M88.4``, ``LDSM.16.M88.2``, ``LDSM.16.M88`` (x1 has no suffix); with ``trans``
    ``LDSM.16.MT88.4`` / ``.2`` / ``LDSM.16.MT88``. Architecture: sm_75+.
    Issued by: all 32 lanes of a warp, converged (``.sync.aligned``), with the same count/trans.

    Operands: ``regs`` a uint32/int32 local array of at least ``count`` words; ``tile`` the shared
    array; ``byte_offset`` this lane's row address, in bytes from the start of ``tile``: lane
    ``8*m + r`` supplies row ``r`` of matrix ``m`` (lanes 0-7 matrix 0, 8-15 matrix 1, ...; x1
    reads only lanes 0-7's offsets, x2 lanes 0-15's, the others are ignored). A row is 8
    contiguous 16-bit elements (16 bytes) and its address must be 16-byte aligned; rows may lie
    anywhere (strided, padded, swizzled). ``count`` and ``trans`` must be compile-time constants.

    Fragment layout (register ``m`` holds matrix ``m``): lane ``l`` receives the two elements
    ``M[l >> 2][2*(l % 4) + j]``, j = 0 (low half), 1 (high half). With ``trans`` it receives
    ``M[2*(l % 4) + j][l >> 2]``: the matrix is transposed on the way. Numpy model:
    ``fragment_ldmatrix(mats, trans)``.
    """
    host_call("warp.ldmatrix")


def stmatrix(tile, byte_offset, regs, count=4, trans=False):
    """Store ``count`` (1, 2 or 4) 8x8 matrices of 16-bit elements from ``regs[0:count]`` into
    shared ``tile``: the inverse of ``ldmatrix`` with the same layouts.

    PTX: ``stmatrix.sync.aligned.m8n8.x{count}{.trans}.shared.b16 [tile + byte_offset], {r0, ..};``
    SASS: ``STSM.16.M88.4``, ``STSM.16.M88.2``, ``STSM.16.M88`` (x1); with ``trans``
    ``STSM.16.MT88.4`` / ``.2`` / ``STSM.16.MT88``. Architecture: sm_90
    (compiled for an older GPU it traps). Issued by: all 32 lanes of a warp, converged.

    Operands: as ``ldmatrix``: lane ``8*m + r`` supplies the byte offset (16-byte aligned) of row
    ``r`` of matrix ``m``. Register ``m`` of lane ``l`` holds ``M[l >> 2][2*(l % 4) + j]`` of
    matrix ``m`` (``M[2*(l % 4) + j][l >> 2]`` with ``trans``), j = 0 low half, 1 high half; so an
    ``mma`` f16 accumulator pair (c0,c1) / (c2,c3) of rows g / g+8 stores with ``count=2`` directly.
    Numpy model: ``unfragment_ldmatrix(frag, trans)``.
    """
    host_call("warp.stmatrix")


def mma_m16n8k16_f32_f16(d, a, b, c):
    """D = A @ B + C with A 16x16 f16 (row), B 16x8 f16 (col), C/D 16x8 f32; one per warp.

    PTX: ``mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {d0..d3}, {a0..a3}, {b0, b1},
    {c0..c3};`` SASS: ``HMMA.16816.F32``. Architecture: sm_80+. Issued by: all 32 lanes of a warp,
    converged (``.sync.aligned``).

    Operands: ``a`` uint32[4] (8 halves), ``b`` uint32[2] (4 halves), ``c``/``d`` float32[4]
    (lengths are not checked); ``d`` may be ``c`` (accumulate in place).

    A layout (8 elements): a0,a1: ``A[g][2t + {0,1}]``; a2,a3: ``A[g+8][2t + {0,1}]``;
    a4,a5: ``A[g][2t + 8 + {0,1}]``; a6,a7: ``A[g+8][2t + 8 + {0,1}]`` (``fragment_a_m16n8k16``).
    B layout (4 elements): b0,b1: ``B[2t + {0,1}][g]``; b2,b3: ``B[2t + 8 + {0,1}][g]``
    (``fragment_b_m16n8k16``).

    C/D layout (f32, s32 and f16 alike; 16 x 8): ``c[i]`` of lane l holds
    ``C[g + 8*(i >> 1)][2t + (i & 1)]``, i = 0..3: c0,c1 row g, cols 2t, 2t+1; c2,c3 row g+8,
    same cols (``fragment_c`` / ``unfragment_c``).
    """
    host_call("warp.mma_m16n8k16_f32_f16")


def mma_m16n8k16_f32_bf16(d, a, b, c):
    """D = A @ B + C with A 16x16 bf16 (row), B 16x8 bf16 (col), C/D 16x8 f32; one per warp.

    PTX: ``mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {d0..d3}, {a0..a3}, {b0, b1},
    {c0..c3};`` SASS: ``HMMA.16816.F32.BF16``. Architecture: sm_80+. Issued by: all 32 lanes of a
    warp, converged. Operands and layouts as ``mma_m16n8k16_f32_f16`` (a uint32[4], b uint32[2],
    c/d float32[4]; d may be c), with bfloat16 bit patterns in the halves (``bf16_bits``)."""
    host_call("warp.mma_m16n8k16_f32_bf16")


def mma_m16n8k16_f16_f16(d, a, b, c):
    """D = A @ B + C with A 16x16 f16 (row), B 16x8 f16 (col), C/D 16x8 f16; one per warp.

    PTX: ``mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16 {d0, d1}, {a0..a3}, {b0, b1},
    {c0, c1};`` SASS: ``HMMA.16816.F16``. Architecture: sm_80+. Issued by: all 32 lanes of a warp,
    converged. Accumulation is in f16 (expect ~1e-3 relative error per step).

    Operands: ``a`` uint32[4], ``b`` uint32[2], ``c``/``d`` uint32[2] (int32 accepted): each
    accumulator word holds two halves, c0 | c1 << 16 and c2 | c3 << 16; ``d`` may be ``c``.
    A and B layouts as ``mma_m16n8k16_f32_f16``.

    C/D layout (f32, s32 and f16 alike; 16 x 8): ``c[i]`` of lane l holds
    ``C[g + 8*(i >> 1)][2t + (i & 1)]``, i = 0..3: c0,c1 row g, cols 2t, 2t+1; c2,c3 row g+8,
    same cols (``fragment_c`` / ``unfragment_c``).
    """
    host_call("warp.mma_m16n8k16_f16_f16")


def mma_m16n8k8_f32_f16(d, a, b, c):
    """D = A @ B + C with A 16x8 f16 (row), B 8x8 f16 (col), C/D 16x8 f32; one per warp.

    PTX: ``mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {d0..d3}, {a0, a1}, {b0}, {c0..c3};``
    SASS: ``HMMA.1688.F32``. Architecture: sm_80+ (sm_75 for f16). Issued by: all 32 lanes of a
    warp, converged.

    Operands: ``a`` uint32[2] (4 halves), ``b`` uint32[1] (2 halves), ``c``/``d`` float32[4];
    ``d`` may be ``c``.

    A layout (4 elements): ``a[i]`` holds ``A[g + 8*(i >> 1)][2t + (i & 1)]``: a0,a1 row g,
    a2,a3 row g+8 (``fragment_a_m16n8k8``). B layout (2 elements): b0,b1: ``B[2t + {0,1}][g]``
    (``fragment_b_m16n8k8``).

    C/D layout (f32, s32 and f16 alike; 16 x 8): ``c[i]`` of lane l holds
    ``C[g + 8*(i >> 1)][2t + (i & 1)]``, i = 0..3: c0,c1 row g, cols 2t, 2t+1; c2,c3 row g+8,
    same cols (``fragment_c`` / ``unfragment_c``).
    """
    host_call("warp.mma_m16n8k8_f32_f16")


def mma_m16n8k8_f32_bf16(d, a, b, c):
    """D = A @ B + C with A 16x8 bf16 (row), B 8x8 bf16 (col), C/D 16x8 f32; one per warp.

    PTX: ``mma.sync.aligned.m16n8k8.row.col.f32.bf16.bf16.f32 {d0..d3}, {a0, a1}, {b0}, {c0..c3};``
    SASS: ``HMMA.1688.F32.BF16``. Architecture: sm_80+. Issued by: all 32 lanes of a warp,
    converged. Operands and layouts as ``mma_m16n8k8_f32_f16`` (a uint32[2], b uint32[1],
    c/d float32[4]), with bfloat16 bit patterns in the halves."""
    host_call("warp.mma_m16n8k8_f32_bf16")


def mma_m16n8k32_s32_s8(d, a, b, c):
    """D = A @ B + C with A 16x32 s8 (row), B 32x8 s8 (col), C/D 16x8 s32; one per warp.

    PTX: ``mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {d0..d3}, {a0..a3}, {b0, b1},
    {c0..c3};`` (signed inputs, wrapping s32 accumulation; no ``.satfinite``). SASS:
    ``IMMA.16832.S8.S8``. Architecture: sm_80+. Issued by: all 32 lanes of a warp, converged.

    Operands: ``a`` uint32[4] (16 bytes), ``b`` uint32[2] (8 bytes), ``c``/``d`` int32[4];
    ``d`` may be ``c``.

    A layout (16 elements): ``a[i]`` holds ``A[g + 8*((i >> 2) & 1)][4t + (i & 3) + 16*(i >> 3)]``:
    a0..a3 row g, cols 4t..4t+3; a4..a7 row g+8, same cols; a8..a11 row g, cols 4t+16..4t+19;
    a12..a15 row g+8, cols 4t+16.. (``fragment_a_m16n8k32``). B layout (8 elements): ``b[i]`` holds
    ``B[4t + (i & 3) + 16*(i >> 2)][g]``: b0..b3 rows 4t..4t+3, b4..b7 rows 4t+16..4t+19
    (``fragment_b_m16n8k32``).

    C/D layout (f32, s32 and f16 alike; 16 x 8): ``c[i]`` of lane l holds
    ``C[g + 8*(i >> 1)][2t + (i & 1)]``, i = 0..3: c0,c1 row g, cols 2t, 2t+1; c2,c3 row g+8,
    same cols (``fragment_c`` / ``unfragment_c``).
    """
    host_call("warp.mma_m16n8k32_s32_s8")


def pack_f16x2(lo, hi):
    """One 32-bit word holding ``lo`` and ``hi`` (float32) rounded to f16, ``lo`` in the low half:
    an accumulator pair (c0, c1) as the register ``stmatrix`` or an f16 ``mma`` operand takes.

    PTX: ``cvt.rn.f16x2.f32 d, hi, lo;`` (sm_80). SASS: ``F2FP.F16.F32.PACK_AB``. Any thread.
    """
    host_call("warp.pack_f16x2")


def pack_bf16x2(lo, hi):
    """As :func:`pack_f16x2`, rounding to bfloat16. PTX: ``cvt.rn.bf16x2.f32 d, hi, lo;`` (sm_80).
    SASS: ``F2FP.BF16.F32.PACK_AB``."""
    host_call("warp.pack_bf16x2")


def unpack_f16x2(word, high=False):
    """The f16 in the low (``high=False``) or high half of ``word``, widened to float32 (exact).

    PTX: ``mov.b32 {l, h}, word; cvt.f32.f16 f, l|h;``. ``high`` must be a compile-time constant.
    """
    host_call("warp.unpack_f16x2")


def unpack_bf16x2(word, high=False):
    """The bf16 in the low or high half of ``word`` as float32 (exact: a shift or a mask)."""
    host_call("warp.unpack_bf16x2")


def elect_one():
    """True in one lane of the warp, False in the other 31.

    PTX: ``elect.sync _|p, 0xffffffff;`` (sm_90). SASS: ``ELECT``. Issued by: all 32 lanes of a
    converged warp. Why: guarding one-thread work (a producer's TMA and bulk copies) with it
    rather than with a test of the thread index lets ptxas issue each copy as it is; under
    ``if tid == 0`` it wraps every copy in a loop over the active lanes (ELECT, PLOP3,
    BRA.U.ANY), whose dependent instructions add up in a loop that issues copies every slice.
    """
    host_call("warp.elect_one")


# ------------------------------------------------------------------------------------ overloads


@overload(ldmatrix, prefer_literal=True)
def _ov_ldmatrix(regs, tile, byte_offset, count=4, trans=False):
    fname = "warp.ldmatrix"
    require_array(fname, "regs", regs, dtypes=_WORDS)
    require_array(fname, "tile", tile)
    require_int(fname, "byte_offset", byte_offset)
    fn = _ldmatrix[(_literal_count(fname, count), _literal_bool(fname, "trans", trans))]

    def impl(regs, tile, byte_offset, count=4, trans=False):
        fn(address_of(regs), address_of(tile), byte_offset)

    return impl


@overload(stmatrix, prefer_literal=True)
def _ov_stmatrix(tile, byte_offset, regs, count=4, trans=False):
    fname = "warp.stmatrix"
    require_array(fname, "tile", tile)
    require_int(fname, "byte_offset", byte_offset)
    require_array(fname, "regs", regs, dtypes=_WORDS)
    fn = _stmatrix[(_literal_count(fname, count), _literal_bool(fname, "trans", trans))]

    def impl(tile, byte_offset, regs, count=4, trans=False):
        fn(address_of(tile), byte_offset, address_of(regs))

    return impl


def _mma_overload(stub, fn, acc_dtypes):
    fname = f"warp.{stub.__name__}"

    @overload(stub)
    def _ov(d, a, b, c):
        require_array(fname, "d", d, dtypes=acc_dtypes)
        require_array(fname, "a", a, dtypes=_WORDS)
        require_array(fname, "b", b, dtypes=_WORDS)
        require_array(fname, "c", c, dtypes=acc_dtypes)
        return lambda d, a, b, c: fn(address_of(d), address_of(a), address_of(b), address_of(c))

    return _ov


_mma_overload(mma_m16n8k16_f32_f16, _mma_16816_f32_f16, _F32)
_mma_overload(mma_m16n8k16_f32_bf16, _mma_16816_f32_bf16, _F32)
_mma_overload(mma_m16n8k16_f16_f16, _mma_16816_f16_f16, _WORDS)
_mma_overload(mma_m16n8k8_f32_f16, _mma_1688_f32_f16, _F32)
_mma_overload(mma_m16n8k8_f32_bf16, _mma_1688_f32_bf16, _F32)
_mma_overload(mma_m16n8k32_s32_s8, _mma_16832_s32_s8, _S32)


def _pack_overload(stub, fn):
    @overload(stub)
    def _ov(lo, hi):
        for name, ty in (("lo", lo), ("hi", hi)):
            if not isinstance(ty, (types.Float, types.Integer)):
                raise errors.TypingError(f"warp.{stub.__name__}: {name} must be a number, got {ty}")
        return lambda lo, hi: fn(types.float32(lo), types.float32(hi))

    return _ov


def _unpack_overload(stub, kind):
    @overload(stub, prefer_literal=True)
    def _ov(word, high=False):
        require_int(f"warp.{stub.__name__}", "word", word)
        fn = _unpack[(kind, "hi" if _literal_bool(f"warp.{stub.__name__}", "high", high) else "lo")]
        return lambda word, high=False: fn(types.uint32(word))

    return _ov


_elect = declare("warp", "numba_tma_elect_sync", _u32())


@overload(elect_one)
def _ov_elect_one():
    return lambda: _elect() != 0


_pack_overload(pack_f16x2, _pack["f16"])
_pack_overload(pack_bf16x2, _pack["bf16"])
_unpack_overload(unpack_f16x2, "f16")
_unpack_overload(unpack_bf16x2, "bf16")


# ------------------------------------------------------------------- numpy fragment models


def _lanes():
    lane = np.arange(32)[:, None]
    return lane >> 2, lane % 4          # groupID, threadID_in_group: (32, 1) each


def _elems(n):
    return np.arange(n)[None, :]


def _layout(name):
    """(rows, cols) index tables of shape (32, elements per lane), and the matrix shape."""
    g, t = _lanes()
    if name == "a_m16n8k16":
        i = _elems(8)
        return g + 8 * ((i >> 1) & 1), 2 * t + (i & 1) + 8 * (i >> 2), (16, 16)
    if name == "b_m16n8k16":
        i = _elems(4)
        return 2 * t + (i & 1) + 8 * (i >> 1), g + 0 * i, (16, 8)
    if name == "a_m16n8k8":
        i = _elems(4)
        return g + 8 * (i >> 1), 2 * t + (i & 1), (16, 8)
    if name == "b_m16n8k8":
        i = _elems(2)
        return 2 * t + i, g + 0 * i, (8, 8)
    if name == "a_m16n8k32":
        i = _elems(16)
        return g + 8 * ((i >> 2) & 1), 4 * t + (i & 3) + 16 * (i >> 3), (16, 32)
    if name == "b_m16n8k32":
        i = _elems(8)
        return 4 * t + (i & 3) + 16 * (i >> 2), g + 0 * i, (32, 8)
    if name == "c":
        i = _elems(4)
        return g + 8 * (i >> 1), 2 * t + (i & 1), (16, 8)
    raise KeyError(name)


def _fragment(name, m):
    rows, cols, shape = _layout(name)
    m = np.asarray(m)
    if m.shape != shape:
        raise ValueError(f"warp.fragment_{name}: expected a {shape[0]}x{shape[1]} matrix, "
                         f"got shape {m.shape}")
    return m[rows, cols]


def _unfragment(name, frag):
    rows, cols, shape = _layout(name)
    frag = np.asarray(frag)
    if frag.shape != rows.shape:
        raise ValueError(f"warp.unfragment_{name}: expected per-lane fragments of shape "
                         f"{rows.shape}, got {frag.shape}")
    out = np.empty(shape, frag.dtype)
    out[rows, cols] = frag
    return out


def fragment_a_m16n8k16(A):
    """16x16 A (any dtype) -> (32, 8): lane l's elements a0..a7 (see ``mma_m16n8k16_f32_f16``)."""
    return _fragment("a_m16n8k16", A)


def unfragment_a_m16n8k16(frag):
    """(32, 8) per-lane A elements -> the 16x16 matrix (inverse of ``fragment_a_m16n8k16``)."""
    return _unfragment("a_m16n8k16", frag)


def fragment_b_m16n8k16(B):
    """16x8 B (K x N) -> (32, 4): lane l's elements b0..b3."""
    return _fragment("b_m16n8k16", B)


def unfragment_b_m16n8k16(frag):
    """(32, 4) per-lane B elements -> the 16x8 (K x N) matrix."""
    return _unfragment("b_m16n8k16", frag)


def fragment_a_m16n8k8(A):
    """16x8 A -> (32, 4): lane l's elements a0..a3 (see ``mma_m16n8k8_f32_f16``)."""
    return _fragment("a_m16n8k8", A)


def unfragment_a_m16n8k8(frag):
    """(32, 4) per-lane A elements -> the 16x8 matrix."""
    return _unfragment("a_m16n8k8", frag)


def fragment_b_m16n8k8(B):
    """8x8 B (K x N) -> (32, 2): lane l's elements b0, b1."""
    return _fragment("b_m16n8k8", B)


def unfragment_b_m16n8k8(frag):
    """(32, 2) per-lane B elements -> the 8x8 (K x N) matrix."""
    return _unfragment("b_m16n8k8", frag)


def fragment_a_m16n8k32(A):
    """16x32 A (int8) -> (32, 16): lane l's elements a0..a15 (see ``mma_m16n8k32_s32_s8``)."""
    return _fragment("a_m16n8k32", A)


def unfragment_a_m16n8k32(frag):
    """(32, 16) per-lane A elements -> the 16x32 matrix."""
    return _unfragment("a_m16n8k32", frag)


def fragment_b_m16n8k32(B):
    """32x8 B (K x N, int8) -> (32, 8): lane l's elements b0..b7."""
    return _fragment("b_m16n8k32", B)


def unfragment_b_m16n8k32(frag):
    """(32, 8) per-lane B elements -> the 32x8 (K x N) matrix."""
    return _unfragment("b_m16n8k32", frag)


def fragment_c(C):
    """16x8 accumulator C (f32, s32 or f16) -> (32, 4): lane l's c0..c3, every mma shape here."""
    return _fragment("c", C)


def unfragment_c(frag):
    """(32, 4) per-lane accumulators (d0..d3) -> the 16x8 matrix D."""
    return _unfragment("c", frag)


def _ldmatrix_tables(count, trans):
    g, t = _lanes()
    e = _elems(2 * count)
    m, j = e >> 1, e & 1                # register (= matrix) m, half j
    if trans:
        return m + 0 * g, 2 * t + j, g + 0 * j
    return m + 0 * g, g + 0 * j, 2 * t + j


def fragment_ldmatrix(mats, trans=False):
    """``count`` 8x8 matrices, shape (count, 8, 8) -> (32, 2*count): what ``ldmatrix`` leaves in
    each lane, element ``2*m + j`` being half j of register m:
    ``mats[m][l >> 2][2*(l % 4) + j]``, or ``mats[m][2*(l % 4) + j][l >> 2]`` with ``trans``."""
    mats = np.asarray(mats)
    if mats.ndim != 3 or mats.shape[1:] != (8, 8) or mats.shape[0] not in (1, 2, 4):
        raise ValueError(f"warp.fragment_ldmatrix: expected (1|2|4, 8, 8) matrices, "
                         f"got shape {mats.shape}")
    return mats[_ldmatrix_tables(mats.shape[0], trans)]


def unfragment_ldmatrix(frag, trans=False):
    """(32, 2*count) per-lane halves -> the (count, 8, 8) matrices ``stmatrix`` writes."""
    frag = np.asarray(frag)
    if frag.ndim != 2 or frag.shape[0] != 32 or frag.shape[1] not in (2, 4, 8):
        raise ValueError(f"warp.unfragment_ldmatrix: expected (32, 2|4|8) fragments, "
                         f"got shape {frag.shape}")
    count = frag.shape[1] // 2
    out = np.empty((count, 8, 8), frag.dtype)
    out[_ldmatrix_tables(count, trans)] = frag
    return out


def pack_words(frag):
    """Per-lane element fragments (32, n) of 2- or 1-byte elements -> (32, n*itemsize/4) uint32
    registers, lower-numbered elements in the lower bits (PTX's "low to high" order)."""
    frag = np.ascontiguousarray(frag)
    if frag.dtype.itemsize not in (1, 2) or (frag.shape[-1] * frag.dtype.itemsize) % 4:
        raise ValueError(f"warp.pack_words: need 1- or 2-byte elements filling whole words, got "
                         f"{frag.dtype} x {frag.shape[-1]}")
    return frag.astype(frag.dtype.newbyteorder("<"), copy=False).view("<u4").astype(np.uint32)


def unpack_words(words, dtype):
    """(32, w) uint32 registers -> (32, w*4/itemsize) elements of ``dtype`` (1 or 2 bytes)."""
    dtype = np.dtype(dtype)
    words = np.ascontiguousarray(words, dtype="<u4")
    return words.view(dtype.newbyteorder("<")).astype(dtype)


def bf16_bits(x):
    """float32 values -> uint16 bfloat16 bit patterns, rounded to nearest even (NaNs stay NaN).

    Pure numpy, the same as ``ml_dtypes.bfloat16`` for every value; values exactly representable
    in bfloat16 (e.g. integers up to 256) convert exactly, so truncation would agree on them."""
    u = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    rounded = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(np.asarray(x, np.float32))
    return np.where(nan, ((u >> 16) | 0x40).astype(np.uint16), rounded)


def bf16_to_float32(bits):
    """uint16 bfloat16 bit patterns -> float32 values (exact)."""
    return (np.asarray(bits, np.uint16).astype(np.uint32) << 16).view(np.float32)
