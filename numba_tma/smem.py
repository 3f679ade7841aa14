"""16-byte shared-memory loads and stores (``ld.shared.v4.b32`` / ``st.shared.v4.b32``).

numba indexes shared arrays one element at a time and LLVM cannot prove a run-time index 16-byte
aligned, so it never forms a 128-bit access; these do. The four 32-bit words travel through a
``cuda.local.array(4, np.uint32)`` (or a 4-word slice of a bigger one) that LTO keeps in
registers, as long as it is indexed with compile-time constants (unrolled loops)::

    regs = cuda.local.array(4, np.uint32)
    smem.load_v4(regs, tile, byte_offset)      # LDS.128
    smem.store_v4(out_tile, byte_offset, regs) # STS.128

``byte_offset`` is from the start of the shared array and must be a multiple of 16 (so must the
array's address: declare it with ``alignment=16`` or more). Any dtype: the bytes are moved as-is.
Issued by: any thread. A warp's 128-bit accesses are served 8 lanes at a time; they are free of
bank conflicts when each group of 8 lanes touches 8 distinct 16-byte bank quads.
"""

from ._frontend import errors, overload, types

from ._bridge import address_of, declare, host_call, literal_int, require_array, require_int

__all__ = ["load_v4", "store_v4", "shared_address", "aligned_offset"]

# The largest alignment TMA asks of shared memory: the 128B swizzle's 8 x 128-byte period.
MAX_ALIGN = 1024

_vp, _u32 = types.voidptr, types.uint32
_ld = declare("smem", "numba_tma_ld_shared_v4_b32", types.void(_vp, _vp, _u32))
_st = declare("smem", "numba_tma_st_shared_v4_b32", types.void(_vp, _u32, _vp))
_cvta = declare("smem", "numba_tma_cvta_to_shared_u32", _u32(_vp))
_WORDS = (types.uint32, types.int32)


def load_v4(regs, src, byte_offset):
    """Load 16 bytes of shared ``src`` at ``byte_offset`` into ``regs[0:4]`` (uint32 words).

    PTX: ``ld.shared.v4.b32 {r0, r1, r2, r3}, [src + byte_offset];`` SASS: ``LDS.128``.
    """
    host_call("smem.load_v4")


def store_v4(dst, byte_offset, regs):
    """Store ``regs[0:4]`` (uint32 words) as 16 bytes into shared ``dst`` at ``byte_offset``.

    PTX: ``st.shared.v4.b32 [dst + byte_offset], {r0, r1, r2, r3};`` SASS: ``STS.128``.
    """
    host_call("smem.store_v4")


def shared_address(arr):
    """The 32-bit shared-memory address of ``arr``'s first element (``cvta.to.shared``).

    For aligning inside dynamic shared memory: TMA tiles want 128 bytes, 128B-swizzled ones 1024.
    """
    host_call("smem.shared_address")


def aligned_offset(arr, start, align):
    """Bytes from ``arr``'s first element to the first ``align``-aligned shared address at or past
    byte ``start``: where a TMA ring goes in dynamic shared memory after ``start`` bytes of
    barriers (dynamic shared memory itself is only 16-byte aligned).

    ``align`` is a compile-time power of two up to 1024 (128 for TMA tiles, 1024 under the 128B
    swizzle); reserve ``align - 1`` bytes of slack. Integer math on ``cvta.to.shared``.
    """
    host_call("smem.aligned_offset")


@overload(aligned_offset, prefer_literal=True)
def _ov_aligned_offset(arr, start, align):
    fname = "smem.aligned_offset"
    require_array(fname, "arr", arr)
    require_int(fname, "start", start)
    value = literal_int(fname, "align", align, 1, MAX_ALIGN)
    if value & (value - 1):
        raise errors.TypingError(f"{fname}: align = {value} must be a power of two")
    mask = value - 1

    def impl(arr, start, align):
        return start + mask - ((_cvta(address_of(arr)) + start + mask) & mask)

    return impl


@overload(shared_address)
def _ov_shared_address(arr):
    require_array("smem.shared_address", "arr", arr)
    return lambda arr: _cvta(address_of(arr))


@overload(load_v4)
def _ov_load_v4(regs, src, byte_offset):
    require_array("smem.load_v4", "regs", regs, dtypes=_WORDS)
    require_array("smem.load_v4", "src", src)
    require_int("smem.load_v4", "byte_offset", byte_offset)
    return lambda regs, src, byte_offset: _ld(address_of(regs), address_of(src), byte_offset)


@overload(store_v4)
def _ov_store_v4(dst, byte_offset, regs):
    require_array("smem.store_v4", "dst", dst)
    require_int("smem.store_v4", "byte_offset", byte_offset)
    require_array("smem.store_v4", "regs", regs, dtypes=_WORDS)
    return lambda dst, byte_offset, regs: _st(address_of(dst), byte_offset, address_of(regs))
