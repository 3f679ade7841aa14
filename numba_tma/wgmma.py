"""Hopper's warpgroup tensor-core path: ``wgmma.mma_async``, its fences and groups, the
shared-memory matrix descriptor, and ``setmaxnreg``.

PTX ISA: "Asynchronous Warpgroup Level Matrix Multiply-Accumulate Instructions" (wgmma.fence,
wgmma.mma_async, wgmma.commit_group, wgmma.wait_group; "Matrix Descriptor Format"; "Register
Fragments and Shared Memory Matrix Layouts") and "setmaxnreg". Architecture: sm_90a only (numba
compiles ``compute_90a`` on a cc 9.0 device, so these are accepted there). SASS: ``HGMMA.64xNx16``
(``.F32``/``.F16``/``.F32.BF16``; fp8 ``HGMMA.64xNx32.F32.E4M3.E4M3`` ...), ``WARPGROUP.ARRIVE``
(wgmma.fence), ``WARPGROUP.DEPBAR.LE gsb0, n`` (wait_group), ``USETMAXREG``.

Who issues them: a warpgroup, the 128 threads of 4 consecutive warps whose first warp index is a
multiple of 4, all converged and every thread with the same operands' shape, types and
immediates (``.sync.aligned``). ``setmaxnreg`` likewise, per warpgroup.

How one step goes (every name below is this module's)::

    acc = cuda.local.array(128, np.float32)      # m64n256 f32: N / 2 = 128 registers per thread
    ...                                          # operands in shared memory (TMA, or stores +
    fence.proxy_async_shared(); syncthreads()    #  fence.proxy.async before the barrier)
    wgmma.fence_operand(acc, 128)
    wgmma.fence()                                # orders the registers (and smem) before wgmma
    for kk in range(4):                          # K = 64 from one 128B-swizzled tile
        wgmma.mma_f32_f16(acc, a_desc + 2 * kk, b_desc + 2 * kk, 256, scale_d=1)
    wgmma.commit_group()
    wgmma.fence_operand(acc, 128)
    wgmma.wait_group(0)                          # the wgmma above has written acc
    wgmma.fence_operand(acc, 128)

The accumulator hand-off (why a numba kernel can get zeros): ``wgmma.mma_async`` writes its
accumulator registers *asynchronously*, after the instruction has issued; until
``wgmma.wait_group`` retires it, nothing may read or write those registers. The wrappers take the
accumulator as a ``cuda.local.array`` by pointer and LTO + SROA turn it into registers -- but only
when *every* index of the array anywhere in the kernel is a compile-time constant (loops over
``range(CONSTANT)`` that LLVM unrolls). One run-time index (``for i in range(n): out[i] =
acc[i]`` with ``n`` an argument) keeps the whole array on the stack: the asm's outputs are stored
to it (``STL``) right after the ``HGMMA`` issues, before the wait, and the kernel reads stale
values (measured: mostly zeros). So: index accumulators with constants only, and check the
kernel's offline SASS (``numba_tma.offline.compile_kernel``: ``stack_bytes == 0``, no
``STL``/``LDL``; ``check_wgmma_link_log`` for ptxas' wgmma warnings). ``fence_operand`` is
CUTLASS's ``warpgroup_fence_operand``: an empty volatile statement that reads and writes every
accumulator register, so the compiler cannot move a copy of one across the wait or the issue.

Shared-memory operands: see :func:`descriptor` for the descriptor and the canonical layouts
(what LBO and SBO mean per swizzle and major-ness). Shared memory written by threads and then
read by wgmma (the async proxy) needs ``fence.proxy_async_shared()`` by the writers before the
barrier that publishes it; TMA-loaded tiles need nothing beyond their mbarrier.
"""

import numpy as np

from ._frontend import cuda, errors, overload, register_jitable, types
from . import smem
from ._bridge import address_of, declare, host_call, literal_int, require_array

__all__ = [
    "fence", "commit_group", "wait_group", "fence_operand",
    "mma_f32_f16", "mma_f32_bf16", "mma_f16_f16",
    "mma_f32_e4m3_e4m3", "mma_f32_e4m3_e5m2", "mma_f32_e5m2_e4m3", "mma_f32_e5m2_e5m2",
    "setmaxnreg_inc", "setmaxnreg_dec", "warpgroup_index", "descriptor", "descriptor_advance",
    "N_F32", "N_OTHER", "SWIZZLE_CODES", "make_descriptor", "descriptor_fields",
    "fragment_d", "unfragment_d", "fragment_a", "operand_image", "check_wgmma_link_log",
]

#: N of the m64nNk16 f16/bf16 forms with f32 accumulators and A from shared memory.
N_F32 = (8, 16, 32, 64, 96, 128, 192, 256)
#: N of the f16-accumulator, register-A and fp8 forms.
N_OTHER = (64, 128, 192, 256)
FENCE_COUNTS = tuple(range(4, 129, 4))
MAXNREG = tuple(range(24, 257, 8))
#: Descriptor bits 62-63 per swizzle span in bytes (0 = none, the "interleave" layout).
SWIZZLE_CODES = {0: 0, 128: 1, 64: 2, 32: 3}
_FIELD14 = (1 << 14) - 1

_vp, _u32, _u64 = types.voidptr, types.uint32, types.uint64
_fence = declare("wgmma", "numba_tma_wgmma_fence_sync_aligned", types.void())
_commit = declare("wgmma", "numba_tma_wgmma_commit_group_sync_aligned", types.void())
_wait = {n: declare("wgmma", f"numba_tma_wgmma_wait_group_sync_aligned_{n}", types.void())
         for n in range(8)}
_fence_op = {(kind, c): declare("wgmma", f"numba_tma_wgmma_fence_operand_{kind}_x{c}",
                                types.void(_vp))
             for kind in ("f32", "b32") for c in FENCE_COUNTS}
_maxnreg = {(what, n): declare("wgmma", f"numba_tma_setmaxnreg_{what}_sync_aligned_u32_{n}",
                               types.void())
            for what in ("inc", "dec") for n in MAXNREG}


def _mma_name(n, k, acc, a, b, form, trans=""):
    # Mirrors ptx/wgmma_gen.py's mma_name.
    t = f"_t{trans}" if trans else ""
    return f"numba_tma_wgmma_mma_async_sync_aligned_m64n{n}k{k}_{acc}_{a}_{b}_{form}{t}"


_SIG = types.void(_vp, _u64, _u64, _u32)
_SIG_RS = types.void(_vp, _vp, _u64, _u32)
_decls = {}


def _decl(unit, n, k, acc, a, b, form, trans):
    """The declaration of one wrapper, made on first use (there are a few hundred)."""
    key = (n, k, acc, a, b, form, trans)
    fn = _decls.get(key)
    if fn is None:
        fn = declare(unit, _mma_name(*key), _SIG_RS if form == "rs" else _SIG)
        _decls[key] = fn
    return fn


# ----------------------------------------------------------------------------------- stubs


def fence():
    """Order this warpgroup's prior register and shared-memory accesses before the next
    ``wgmma.mma_async`` (required before the first wgmma, and whenever the accumulator or an A
    register fragment was touched by other instructions since).

    PTX: ``wgmma.fence.sync.aligned;`` SASS: ``WARPGROUP.ARRIVE``. Issued by: the whole
    warpgroup, converged."""
    host_call("wgmma.fence")


def commit_group():
    """Close the group of every ``wgmma.mma_async`` issued since the last commit.

    PTX: ``wgmma.commit_group.sync.aligned;``. Issued by: the whole warpgroup, converged."""
    host_call("wgmma.commit_group")


def wait_group(n):
    """Wait until at most ``n`` (a compile-time constant, 0..7) committed groups are pending;
    the accumulators of the retired groups are then valid, and the shared memory they read may
    be overwritten.

    PTX: ``wgmma.wait_group.sync.aligned n;`` SASS: ``WARPGROUP.DEPBAR.LE gsb0, n``. Issued by:
    the whole warpgroup. Pitfall: ``n > 0`` keeps the newest groups in flight -- their
    accumulators must not be touched yet (use a second accumulator array for them)."""
    host_call("wgmma.wait_group")


def fence_operand(acc, count):
    """Pin ``acc[0:count]`` (float32 or 32-bit integer registers; ``count`` a compile-time
    multiple of 4 up to 128) in place: an empty volatile asm that reads and writes them, so no
    copy of an accumulator moves across the wgmma issue or the wait next to it. Emits no
    instruction. Put one before ``wgmma.fence()``, one after ``commit_group()`` and one after
    ``wait_group()`` (CUTLASS's ``warpgroup_fence_operand``)."""
    host_call("wgmma.fence_operand")


def _mma_doc(acc, a, b, k, ns, regs, trans):
    return f"""``D = A @ B (+ D)`` for one m64n{{N}}k{k} step of a warpgroup: A 64 x {k} {a},
    B {k} x N {b}, D 64 x N {acc}.

    ``mma_...(d, a, b_desc, n, scale_d=1{', trans_a=False, trans_b=False' if trans else ''})``

    PTX: ``wgmma.mma_async.sync.aligned.m64n{{n}}k{k}.{acc}.{a}.{b} d, a, b_desc, p, 1, 1{', tA, tB' if trans else ''};``
    with ``p = scale_d != 0`` (0: D = A @ B, the old D is ignored: start a tile without zeroing).
    SASS: ``HGMMA.64x{{n}}x{k}...``. Architecture: sm_90a. Issued by: a whole warpgroup, converged.

    ``d``: the accumulator, a ``cuda.local.array`` of {regs} (``n`` is a compile-time constant,
    one of {ns}); thread ``t`` of the warpgroup holds rows ``16 * (t // 32) + g + 8 * (i >> 1 & 1)``,
    columns ``8 * (i // 4) + 2 * (t % 4) + (i & 1)`` in ``d[i]``, g = (t % 32) // 4
    (``fragment_d``/``unfragment_d``). Index it with constants only (module docstring).
    ``a``: a uint64 shared-memory descriptor of A (``descriptor``), or a uint32 local array of
    4 registers holding A's fragment (the register form; ``fragment_a``: the m16n8k16 A layout
    of rows 16w..16w+15 for warp w){'; trans_a must then be False' if trans else ''}.
    ``b_desc``: the descriptor of B.{'''
    ``trans_a``/``trans_b`` (compile-time): False: the operand is K-major in shared memory (A
    stored M x K, B stored N x K, K contiguous); True: M/N-major (A stored K x M, B K x N).''' if
    trans else " fp8 operands are K-major only (no transpose)."}
    Asynchronous: wrap in ``fence()`` ... ``commit_group()`` ... ``wait_group(n)``.
    """


def mma_f32_f16(d, a, b_desc, n, scale_d=1, trans_a=False, trans_b=False):
    host_call("wgmma.mma_f32_f16")


def mma_f32_bf16(d, a, b_desc, n, scale_d=1, trans_a=False, trans_b=False):
    host_call("wgmma.mma_f32_bf16")


def mma_f16_f16(d, a, b_desc, n, scale_d=1, trans_a=False, trans_b=False):
    host_call("wgmma.mma_f16_f16")


def mma_f32_e4m3_e4m3(d, a, b_desc, n, scale_d=1):
    host_call("wgmma.mma_f32_e4m3_e4m3")


def mma_f32_e4m3_e5m2(d, a, b_desc, n, scale_d=1):
    host_call("wgmma.mma_f32_e4m3_e5m2")


def mma_f32_e5m2_e4m3(d, a, b_desc, n, scale_d=1):
    host_call("wgmma.mma_f32_e5m2_e4m3")


def mma_f32_e5m2_e5m2(d, a, b_desc, n, scale_d=1):
    host_call("wgmma.mma_f32_e5m2_e5m2")


mma_f32_f16.__doc__ = _mma_doc("f32", "f16", "f16", 16, N_F32,
                               "n // 2 float32 (A from a descriptor; the register form: "
                               f"n in {N_OTHER})", True)
mma_f32_bf16.__doc__ = _mma_doc("f32", "bf16", "bf16", 16, N_F32,
                                "n // 2 float32 (register form: n in " f"{N_OTHER})", True)
mma_f16_f16.__doc__ = _mma_doc("f16", "f16", "f16", 16, N_OTHER,
                               "n // 4 uint32 words, two f16 each (column 2j in the low half; "
                               "word ``i`` holds f32-layout elements 2i, 2i+1); A from a "
                               "descriptor only", True)
for _f, _a, _b in ((mma_f32_e4m3_e4m3, "e4m3", "e4m3"), (mma_f32_e4m3_e5m2, "e4m3", "e5m2"),
                   (mma_f32_e5m2_e4m3, "e5m2", "e4m3"), (mma_f32_e5m2_e5m2, "e5m2", "e5m2")):
    _f.__doc__ = _mma_doc("f32", _a, _b, 32, N_OTHER, "n // 2 float32", False)


def setmaxnreg_inc(count):
    """Raise this warpgroup's per-thread register budget to ``count`` (compile-time, a multiple
    of 8 in 24..256); blocks until the SM's register file has that many free.

    PTX: ``setmaxnreg.inc.sync.aligned.u32 count;`` SASS: ``USETMAXREG.TRY_ALLOC.CTAPOOL``.
    Issued by: a whole warpgroup. The recipe that makes ptxas honour it: cap the kernel's
    registers at launch (``@cuda.jit(launch_bounds=(threads, 1))`` -- 384 threads: 168
    registers), branch once per warpgroup role, and call ``setmaxnreg_dec`` in the producer
    (e.g. 40) and ``setmaxnreg_inc`` in the consumers (e.g. 232) at the top of each branch;
    ``producer * 128 + consumers * 128 * count <= 65536``. ptxas then allocates each branch to
    its count; its warnings C7508/C7506 (in ``KernelBinary.info_log``) mean it ignored them."""
    host_call("wgmma.setmaxnreg_inc")


def warpgroup_index():
    """This thread's warpgroup in its block, ``threadIdx.x // 128``, read from lane 0 of the
    warp (``shfl.sync``) so that ptxas knows it is the same in every lane (CUTLASS's
    ``canonical_warp_group_idx``).

    Why it matters: a descriptor built from a warp-uniform value is computed in the uniform
    datapath, the ``UR`` registers ``HGMMA`` reads it from. Built from ``threadIdx.x // 128``
    itself, the same math runs per thread and each descriptor crosses over with ``R2UR``
    between the ``HGMMA``s of a group (the GEMM's 128 x 64 consumer loop: 50 ``R2UR`` against
    12), which left the tensor cores idle between them (the measurement: ``docs/gemm.md``).
    For 1-D blocks (``threadIdx.x`` only)."""
    host_call("wgmma.warpgroup_index")


def setmaxnreg_dec(count):
    """Lower this warpgroup's per-thread register budget to ``count`` (compile-time, a multiple
    of 8 in 24..256), releasing registers to the SM's pool for ``setmaxnreg_inc``.

    PTX: ``setmaxnreg.dec.sync.aligned.u32 count;`` SASS: ``USETMAXREG.DEALLOC``. Issued by: a
    whole warpgroup. See :func:`setmaxnreg_inc` for the recipe."""
    host_call("wgmma.setmaxnreg_dec")


def descriptor(tile, byte_offset, lbo, sbo, swizzle):
    """The 64-bit shared-memory matrix descriptor of the operand at ``tile`` + ``byte_offset``.

    Device function (any thread; cheap integer math on ``cvta.to.shared``). ``lbo``/``sbo`` in
    bytes (multiples of 16, < 2^18), ``swizzle`` the span in bytes, a compile-time 0, 32, 64
    or 128 (the TMA map's swizzle that laid the tile out). Bits (PTX ISA "Matrix Descriptor
    Format"): 0-13 start address >> 4, 16-29 LBO >> 4, 32-45 SBO >> 4, 49-51 base offset (0
    here: tiles aligned to their swizzle's period), 62-63 swizzle (0 none, 1 128B, 2 64B,
    3 32B). Numpy model: :func:`make_descriptor`, :func:`operand_image`.

    Canonical layouts, 16-bit elements (``T`` = 8 elements = one 16-byte chunk; a "core matrix"
    is 8 rows of 16 bytes):

    ============  =========  ==============================================  ====================
    major         swizzle    LBO                                             SBO
    ============  =========  ==============================================  ====================
    K (A: M x K,  none       bytes from the core matrix of K 0-7 to K 8-15   bytes between 8-row
    B: N x K)                (rows are 16 bytes: a 16-byte-wide box per 8 K)  groups along M/N
    K             32/64/128  unused (K 0-15 lie in one swizzled row; give    8 x the row pitch
                             16)                                             (256/512/1024)
    M/N (A: K x   none       bytes between 8-row (K) groups                  bytes between core
    M, B: K x N)                                                             matrices along M/N
    M/N           32/64/128  bytes between atoms of 16/32/64 M/N elements    bytes between
                             (the next TMA box along M/N)                    8-row (K) groups
    ============  =========  ==============================================  ====================

    K steps: a K-major operand's next k16 step under a swizzle starts 32 bytes further
    (``descriptor_advance(desc, 32)``): the hardware applies the swizzle to the address bits, so
    the tile must be aligned to the swizzle period (1024 bytes for 128B) or the result is
    silently wrong. An M/N-major operand's next k16 step is 16 rows further (16 x the row pitch).
    """
    host_call("wgmma.descriptor")


def descriptor_advance(desc, byte_offset):
    """``desc`` with its start address moved by ``byte_offset`` bytes (a multiple of 16; the
    14-bit field must not overflow: the tile stays inside shared memory)."""
    host_call("wgmma.descriptor_advance")


# -------------------------------------------------------------------------------- overloads


@overload(fence)
def _ov_fence():
    return lambda: _fence()


@overload(commit_group)
def _ov_commit_group():
    return lambda: _commit()


@overload(wait_group, prefer_literal=True)
def _ov_wait_group(n):
    fn = _wait[literal_int("wgmma.wait_group", "n", n, 0, 7)]
    return lambda n: fn()


_F32 = (types.float32,)
_WORDS = (types.uint32, types.int32)


@overload(fence_operand, prefer_literal=True)
def _ov_fence_operand(acc, count):
    fname = "wgmma.fence_operand"
    require_array(fname, "acc", acc, dtypes=_F32 + _WORDS)
    c = literal_int(fname, "count", count, 4, 128)
    if c % 4:
        raise errors.TypingError(f"{fname}: count = {c} must be a multiple of 4")
    fn = _fence_op[("f32" if acc.dtype == types.float32 else "b32", c)]
    return lambda acc, count: fn(address_of(acc))


def _literal_flag(fname, argname, ty):
    if isinstance(ty, bool):
        return ty
    if isinstance(ty, types.BooleanLiteral):
        return bool(ty.literal_value)
    if isinstance(ty, types.Omitted) and isinstance(ty.value, bool):
        return ty.value
    if isinstance(ty, types.IntegerLiteral) and ty.literal_value in (0, 1):
        return bool(ty.literal_value)
    raise errors.TypingError(f"{fname}: {argname} must be a compile-time True or False (a PTX "
                             f"immediate), got {ty}")


def _mma_overload(stub, unit, k, acc_kind, a_type, b_type, n_ss, n_rs, has_trans):
    fname = f"wgmma.{stub.__name__}"
    acc_dtypes = _F32 if acc_kind == "f32" else _WORDS

    def resolve(d, a, b_desc, n, scale_d, trans_a, trans_b):
        """(wrapper, A in registers) for these operand types; raises TypingErrors."""
        require_array(fname, "d", d, dtypes=acc_dtypes)
        nv = literal_int(fname, "n", n, 8, 256)
        if not isinstance(b_desc, types.Integer):
            raise errors.TypingError(f"{fname}: b_desc must be a uint64 descriptor "
                                     f"(wgmma.descriptor), got {b_desc}")
        if not isinstance(scale_d, (types.Integer, types.Boolean, int)):
            raise errors.TypingError(f"{fname}: scale_d must be an integer or bool, got "
                                     f"{scale_d}")
        ta = _literal_flag(fname, "trans_a", trans_a)
        tb = _literal_flag(fname, "trans_b", trans_b)
        trans = (lambda digits: digits) if has_trans else (lambda digits: "")
        if isinstance(a, types.Array):
            require_array(fname, "a", a, dtypes=_WORDS)
            if nv not in n_rs:
                raise errors.TypingError(f"{fname}: n = {nv} with A in registers; supported: "
                                         f"{n_rs}")
            if ta:
                raise errors.TypingError(f"{fname}: A in registers is K-major: trans_a must be "
                                         f"False")
            return _decl(unit, nv, k, acc_kind, a_type, b_type, "rs", trans(str(int(tb)))), True
        if not isinstance(a, types.Integer):
            raise errors.TypingError(f"{fname}: a must be a uint64 descriptor or a uint32 "
                                     f"register array, got {a}")
        if nv not in n_ss:
            raise errors.TypingError(f"{fname}: n = {nv} is not wrapped; supported: {n_ss}")
        return _decl(unit, nv, k, acc_kind, a_type, b_type, "ss",
                     trans(f"{int(ta)}{int(tb)}")), False

    if has_trans:
        @overload(stub, prefer_literal=True)
        def _ov(d, a, b_desc, n, scale_d=1, trans_a=False, trans_b=False):
            fn, regs = resolve(d, a, b_desc, n, scale_d, trans_a, trans_b)
            if regs:
                def impl(d, a, b_desc, n, scale_d=1, trans_a=False, trans_b=False):
                    fn(address_of(d), address_of(a), _u64(b_desc), _u32(scale_d))
            else:
                def impl(d, a, b_desc, n, scale_d=1, trans_a=False, trans_b=False):
                    fn(address_of(d), _u64(a), _u64(b_desc), _u32(scale_d))
            return impl
    else:
        @overload(stub, prefer_literal=True)
        def _ov(d, a, b_desc, n, scale_d=1):
            fn, regs = resolve(d, a, b_desc, n, scale_d, False, False)
            if regs:
                def impl(d, a, b_desc, n, scale_d=1):
                    fn(address_of(d), address_of(a), _u64(b_desc), _u32(scale_d))
            else:
                def impl(d, a, b_desc, n, scale_d=1):
                    fn(address_of(d), _u64(a), _u64(b_desc), _u32(scale_d))
            return impl

    return _ov


_mma_overload(mma_f32_f16, "wgmma_f16", 16, "f32", "f16", "f16", N_F32, N_OTHER, True)
_mma_overload(mma_f32_bf16, "wgmma_bf16", 16, "f32", "bf16", "bf16", N_F32, N_OTHER, True)
_mma_overload(mma_f16_f16, "wgmma_f16", 16, "f16", "f16", "f16", N_OTHER, (), True)
for _f, _a, _b in ((mma_f32_e4m3_e4m3, "e4m3", "e4m3"), (mma_f32_e4m3_e5m2, "e4m3", "e5m2"),
                   (mma_f32_e5m2_e4m3, "e5m2", "e4m3"), (mma_f32_e5m2_e5m2, "e5m2", "e5m2")):
    _mma_overload(_f, "wgmma_fp8", 32, "f32", _a, _b, N_OTHER, N_OTHER, False)


def _maxnreg_overload(stub, what):
    fname = f"wgmma.{stub.__name__}"

    @overload(stub, prefer_literal=True)
    def _ov(count):
        c = literal_int(fname, "count", count, 24, 256)
        if c % 8:
            raise errors.TypingError(f"{fname}: count = {c} must be a multiple of 8")
        fn = _maxnreg[(what, c)]
        return lambda count: fn()

    return _ov


_maxnreg_overload(setmaxnreg_inc, "inc")
_maxnreg_overload(setmaxnreg_dec, "dec")


@overload(warpgroup_index)
def _ov_warpgroup_index():
    def impl():
        return cuda.shfl_sync(0xFFFFFFFF, cuda.threadIdx.x >> 7, 0)
    return impl


@register_jitable
def _encode(address, lbo, sbo, code):
    return (np.uint64((address >> 4) & _FIELD14)
            | (np.uint64((lbo >> 4) & _FIELD14) << np.uint64(16))
            | (np.uint64((sbo >> 4) & _FIELD14) << np.uint64(32))
            | (np.uint64(code) << np.uint64(62)))


@overload(descriptor, prefer_literal=True)
def _ov_descriptor(tile, byte_offset, lbo, sbo, swizzle):
    fname = "wgmma.descriptor"
    require_array(fname, "tile", tile)
    span = literal_int(fname, "swizzle", swizzle, 0, 128)
    if span not in SWIZZLE_CODES:
        raise errors.TypingError(f"{fname}: swizzle = {span} must be 0, 32, 64 or 128 (bytes)")
    code = SWIZZLE_CODES[span]

    def impl(tile, byte_offset, lbo, sbo, swizzle):
        return _encode(smem.shared_address(tile) + byte_offset, lbo, sbo, code)

    return impl


@overload(descriptor_advance)
def _ov_descriptor_advance(desc, byte_offset):
    return lambda desc, byte_offset: _u64(desc) + _u64(byte_offset >> 4)


# ------------------------------------------------------------------------- numpy models


def make_descriptor(address, lbo, sbo, swizzle, base_offset=0):
    """The descriptor :func:`descriptor` builds, as a Python int (host model), with checks."""
    if swizzle not in SWIZZLE_CODES:
        raise ValueError(f"swizzle must be 0, 32, 64 or 128 (bytes), got {swizzle!r}")
    for name, v in (("address", address), ("lbo", lbo), ("sbo", sbo)):
        if not isinstance(v, (int, np.integer)) or v < 0 or v % 16 or v >= 1 << 18:
            raise ValueError(f"{name} = {v!r} must be a multiple of 16 in 0..{(1 << 18) - 16} "
                             f"(the descriptor keeps bits 4-17)")
    if swizzle and address % (8 * swizzle):
        raise ValueError(f"address {address:#x}: a {swizzle}B-swizzled operand must start on "
                         f"its {8 * swizzle}-byte period (or give base_offset)")
    if not 0 <= base_offset < 8:
        raise ValueError(f"base_offset = {base_offset} must be 0..7")
    return (int(_encode(int(address), int(lbo), int(sbo), SWIZZLE_CODES[swizzle]))
            | (base_offset << 49))


def descriptor_fields(desc):
    """{"address", "lbo", "sbo", "base_offset", "swizzle"} (bytes) of a descriptor."""
    desc = int(desc)
    code = desc >> 62
    return {"address": (desc & _FIELD14) << 4, "lbo": ((desc >> 16) & _FIELD14) << 4,
            "sbo": ((desc >> 32) & _FIELD14) << 4, "base_offset": (desc >> 49) & 7,
            "swizzle": {v: k for k, v in SWIZZLE_CODES.items()}[code]}


def _d_tables(n):
    t = np.arange(128)[:, None]
    i = np.arange(n // 2)[None, :]
    w, lane = t // 32, t % 32
    rows = 16 * w + lane // 4 + 8 * ((i >> 1) & 1)
    cols = 8 * (i // 4) + 2 * (lane % 4) + (i & 1)
    return rows, cols


def fragment_d(D):
    """64 x N accumulator -> (128, N // 2): what thread t of the warpgroup holds in d[i]."""
    D = np.asarray(D)
    if D.ndim != 2 or D.shape[0] != 64 or D.shape[1] % 8:
        raise ValueError(f"wgmma.fragment_d: expected a 64 x N matrix (N a multiple of 8), "
                         f"got shape {D.shape}")
    rows, cols = _d_tables(D.shape[1])
    return D[rows, cols]


def unfragment_d(frag):
    """(128, N // 2) per-thread accumulators -> the 64 x N matrix D."""
    frag = np.asarray(frag)
    if frag.ndim != 2 or frag.shape[0] != 128 or frag.shape[1] % 4:
        raise ValueError(f"wgmma.unfragment_d: expected (128, N // 2) fragments, got shape "
                         f"{frag.shape}")
    rows, cols = _d_tables(2 * frag.shape[1])
    out = np.empty((64, 2 * frag.shape[1]), frag.dtype)
    out[rows, cols] = frag
    return out


def fragment_a(A):
    """64 x K A (K = 16 for 16-bit elements, 32 for fp8) -> (128, 8 or 16): the register form's
    A elements of thread t (warp w = t // 32 holds rows 16w..16w+15 in mma.sync's m16n8k16 /
    m16n8k32 A layout); ``warp.pack_words`` turns them into the 4 registers."""
    from . import warp

    A = np.asarray(A)
    if A.ndim != 2 or A.shape[0] != 64 or A.shape[1] not in (16, 32):
        raise ValueError(f"wgmma.fragment_a: expected 64 x 16 (16-bit) or 64 x 32 (fp8), got "
                         f"shape {A.shape}")
    frag = warp.fragment_a_m16n8k16 if A.shape[1] == 16 else warp.fragment_a_m16n8k32
    return np.concatenate([frag(A[16 * w:16 * w + 16]) for w in range(4)])


def operand_image(mat, k_major, swizzle, *, atom_rows=None):
    """Shared-memory bytes of an operand in the canonical layout for ``swizzle``, laid out as
    the TMA boxes the project's GEMMs load (``swizzle.shared_image``), and the (LBO, SBO) of its
    descriptor. Returns ``(image uint8, lbo, sbo)``.

    ``mat``: the operand as the instruction sees it, rows = M (A) or N (B), columns = K (16-bit
    elements, K a multiple of 16). ``k_major`` True: stored rows x K (K contiguous), one TMA box
    of ``rows x span/2`` per span of K (no swizzle: ``rows x 8`` boxes, one per 8 K). False
    (M/N-major): stored K x rows, boxes of ``K x span/2`` columns (no swizzle: ``8 x 8`` core
    matrices), one per span of rows.
    """
    from . import swizzle as sw

    mat = np.ascontiguousarray(mat)
    rows, kdim = mat.shape
    item = mat.itemsize
    if k_major:
        width = (swizzle // item) if swizzle else 8      # K elements per box row
        boxes = [mat[:, j:j + width] for j in range(0, kdim, width)]
        images = [sw.shared_image(b, swizzle) for b in boxes]
        box_bytes = images[0].size
        if swizzle:
            return np.concatenate(images), 16, 8 * swizzle
        return np.concatenate(images), box_bytes, 8 * 16
    t = mat.T                                   # K x rows, rows contiguous
    if swizzle:
        width = swizzle // item                 # rows per atom (one swizzled box row)
        images = [sw.shared_image(np.ascontiguousarray(t[:, j:j + width]), swizzle)
                  for j in range(0, rows, width)]
        return np.concatenate(images), images[0].size, 8 * swizzle
    # No swizzle: 8 (K) x 8 (M/N) core matrices, 128 bytes each, M/N-adjacent ones contiguous.
    cores = [np.ascontiguousarray(t[kk:kk + 8, j:j + 8]) for kk in range(0, kdim, 8)
             for j in range(0, rows, 8)]
    image = np.concatenate([c.reshape(-1).view(np.uint8) for c in cores])
    return image, (rows // 8) * 128, 128


_WGMMA_WARNINGS = ("C7515", "C7517", "C7508", "C7506", "C7511", "C7510")


def check_wgmma_link_log(info_log):
    """The ptxas warnings of a link log (``KernelBinary.info_log``) that break a wgmma kernel
    silently: C7515/C7517 (wgmma serialised, or a wait injected, because its registers are
    touched in flight), C7508/C7506 (setmaxnreg ignored), C7511/C7510. Returns them (a list of
    lines; empty is good)."""
    return [ln for ln in info_log.splitlines() if any(c in ln for c in _WGMMA_WARNINGS)]
