"""16-byte global-memory loads and stores (``ld.global.v4.b32`` / ``st.global.v4.b32``).

numba indexes device arrays one element at a time and LLVM cannot prove a run-time index 16-byte
aligned, so it never forms a 128-bit global access; these do. As with :mod:`numba_tma.smem`, the
four 32-bit words travel through a ``cuda.local.array(4, np.uint32)`` (or a 4-word slice of a
bigger one) indexed with compile-time constants, which LTO keeps in registers::

    regs = cuda.local.array(4, np.uint32)
    gmem.load_v4(regs, src, byte_offset)       # LDG.E.128
    gmem.store_v4(out, byte_offset, regs)      # STG.E.128

``byte_offset`` counts from the array's first element; the address must be a multiple of 16 (a
misaligned one faults with a misaligned-address error). Any dtype: the bytes are moved as-is.
Issued by: any thread. A warp of 16-byte accesses moves 512 bytes per instruction (four 128-byte
lines when the lanes are consecutive), half the instructions of 8-byte accesses.

``load_v4(..., l2_prefetch=256)`` adds PTX's ``.L2::256B`` (also 64, 128): on a miss the L2
fetches the whole naturally aligned 256-byte block around the access from DRAM. It pays where a
warp's loads start and end mid-block, as in rows that are not 16-byte multiples (v8_sector's
ragged rows, where ``transpose_sector`` uses it), and costs where they are already whole aligned
blocks (v7_vec16 at 32768^2 runs without it).

``copy_async(dst, src, nbytes)`` copies 4, 8 or 16 bytes from global ``src`` to shared ``dst``
without passing through registers (``cp.async``, ``LDGSTS``): the issuing thread goes on at once,
and ``copy_async_arrive(bar)`` makes mbarrier ``bar``'s current phase wait for every copy this
thread issued before it. A thread that feeds a ring slot a few bytes beside its TMA tiles (a
block scale) thus completes the slot's ``full`` barrier without waiting on global memory::

    gmem.copy_async(words[s:], scales[row, k:], 4)   # LDGSTS.E
    gmem.copy_async_arrive(full[s:])                  # ARRIVES.LDGSTSBAR.64
    mbarrier.arrive_expect_tx(full[s:], tile_bytes)   # the phase's one expected arrival
"""

from ._frontend import errors, overload, types

from ._bridge import address_of, declare, host_call, literal_int, require_array, require_int

__all__ = ["load_v4", "store_v4", "copy_async", "copy_async_arrive", "L2_PREFETCH_BYTES",
           "COPY_ASYNC_BYTES"]

L2_PREFETCH_BYTES = (0, 64, 128, 256)   # load_v4's l2_prefetch: none, or .L2::64B/128B/256B

_vp = types.voidptr
_ld = {n: declare("gmem", f"numba_tma_ld_global_v4_b32_l2_{n}b" if n else "numba_tma_ld_global_v4_b32",
                  types.void(_vp, _vp, types.uint64))
       for n in L2_PREFETCH_BYTES}
_st = declare("gmem", "numba_tma_st_global_v4_b32", types.void(_vp, types.uint64, _vp))
_WORDS = (types.uint32, types.int32)
COPY_ASYNC_BYTES = (4, 8, 16)           # copy_async's sizes (cp.async's cp-size)
_cp_async = {n: declare("gmem", f"numba_tma_cp_async_ca_shared_global_{n}",
                        types.void(_vp, _vp)) for n in COPY_ASYNC_BYTES}
_cp_async_arrive = declare("gmem", "numba_tma_cp_async_mbarrier_arrive_shared_b64",
                           types.void(_vp))


def load_v4(regs, src, byte_offset, l2_prefetch=0):
    """Load 16 bytes of global ``src`` at ``byte_offset`` into ``regs[0:4]`` (uint32 words).

    PTX: ``ld.global{.L2::<l2_prefetch>B}.v4.b32 {r0, r1, r2, r3}, [src + byte_offset];``
    SASS: ``LDG.E.128`` (``LDG.E.LTC<n>B.128`` with a prefetch size). ``l2_prefetch`` is a
    compile-time 0, 64, 128 or 256.
    """
    host_call("gmem.load_v4")


def store_v4(dst, byte_offset, regs):
    """Store ``regs[0:4]`` (uint32 words) as 16 bytes into global ``dst`` at ``byte_offset``.

    PTX: ``st.global.v4.b32 [dst + byte_offset], {r0, r1, r2, r3};`` SASS: ``STG.E.128``.
    """
    host_call("gmem.store_v4")


def copy_async(dst, src, nbytes):
    """Copy ``nbytes`` (4, 8 or 16, a compile-time constant) bytes from global ``src`` to shared
    ``dst`` asynchronously; both addresses (the arrays' first elements) ``nbytes``-aligned.

    PTX: ``cp.async.ca.shared.global [dst], [src], nbytes;`` (sm_80+). SASS: ``LDGSTS.E``.
    Issued by: any thread; ``dst`` is written some time later: wait for it through an mbarrier
    (:func:`copy_async_arrive`) before reading it.
    """
    host_call("gmem.copy_async")


def copy_async_arrive(bar):
    """Make mbarrier ``bar``'s current phase wait for every :func:`copy_async` this thread
    issued before; ``bar``'s expected arrival count is unchanged (no arrival of its own).

    PTX: ``cp.async.mbarrier.arrive.shared::cta.b64 [bar];`` (without ``.noinc``: the pending
    count is raised by one now and lowered when the copies complete). SASS:
    ``ARRIVES.LDGSTSBAR.64``. Issued by: the thread that issued the copies, before the phase's
    last expected arrival; threads that wait on the phase may then read the copies' bytes.
    """
    host_call("gmem.copy_async_arrive")


@overload(copy_async, prefer_literal=True)
def _ov_copy_async(dst, src, nbytes):
    fname = "gmem.copy_async"
    require_array(fname, "dst", dst)
    require_array(fname, "src", src)
    size = literal_int(fname, "nbytes", nbytes, COPY_ASYNC_BYTES[0], COPY_ASYNC_BYTES[-1])
    if size not in _cp_async:
        raise errors.TypingError(f"{fname}: nbytes = {size} must be one of {COPY_ASYNC_BYTES}")
    cp = _cp_async[size]
    return lambda dst, src, nbytes: cp(address_of(dst), address_of(src))


@overload(copy_async_arrive)
def _ov_copy_async_arrive(bar):
    require_array("gmem.copy_async_arrive", "bar", bar, dtypes=(types.uint64, types.int64))
    return lambda bar: _cp_async_arrive(address_of(bar))


@overload(load_v4, prefer_literal=True)
def _ov_load_v4(regs, src, byte_offset, l2_prefetch=0):
    fname = "gmem.load_v4"
    require_array(fname, "regs", regs, dtypes=_WORDS)
    require_array(fname, "src", src)
    require_int(fname, "byte_offset", byte_offset)
    size = literal_int(fname, "l2_prefetch", l2_prefetch, 0, L2_PREFETCH_BYTES[-1])
    if size not in _ld:
        raise errors.TypingError(f"{fname}: l2_prefetch = {size} must be one of {L2_PREFETCH_BYTES}")
    ld = _ld[size]

    def impl(regs, src, byte_offset, l2_prefetch=0):
        ld(address_of(regs), address_of(src), byte_offset)

    return impl


@overload(store_v4)
def _ov_store_v4(dst, byte_offset, regs):
    require_array("gmem.store_v4", "dst", dst)
    require_int("gmem.store_v4", "byte_offset", byte_offset)
    require_array("gmem.store_v4", "regs", regs, dtypes=_WORDS)
    return lambda dst, byte_offset, regs: _st(address_of(dst), byte_offset, address_of(regs))
