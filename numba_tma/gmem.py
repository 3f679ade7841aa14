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
"""

from numba import types
from numba.cuda.extending import overload

from ._bridge import address_of, declare, host_call, require_array, require_int

__all__ = ["load_v4", "store_v4"]

_vp = types.voidptr
_ld = declare("gmem", "numba_tma_ld_global_v4_b32", types.void(_vp, _vp, types.uint64))
_st = declare("gmem", "numba_tma_st_global_v4_b32", types.void(_vp, types.uint64, _vp))
_WORDS = (types.uint32, types.int32)


def load_v4(regs, src, byte_offset):
    """Load 16 bytes of global ``src`` at ``byte_offset`` into ``regs[0:4]`` (uint32 words).

    PTX: ``ld.global.v4.b32 {r0, r1, r2, r3}, [src + byte_offset];`` SASS: ``LDG.E.128``.
    """
    host_call("gmem.load_v4")


def store_v4(dst, byte_offset, regs):
    """Store ``regs[0:4]`` (uint32 words) as 16 bytes into global ``dst`` at ``byte_offset``.

    PTX: ``st.global.v4.b32 [dst + byte_offset], {r0, r1, r2, r3};`` SASS: ``STG.E.128``.
    """
    host_call("gmem.store_v4")


@overload(load_v4)
def _ov_load_v4(regs, src, byte_offset):
    require_array("gmem.load_v4", "regs", regs, dtypes=_WORDS)
    require_array("gmem.load_v4", "src", src)
    require_int("gmem.load_v4", "byte_offset", byte_offset)
    return lambda regs, src, byte_offset: _ld(address_of(regs), address_of(src), byte_offset)


@overload(store_v4)
def _ov_store_v4(dst, byte_offset, regs):
    require_array("gmem.store_v4", "dst", dst)
    require_int("gmem.store_v4", "byte_offset", byte_offset)
    require_array("gmem.store_v4", "regs", regs, dtypes=_WORDS)
    return lambda dst, byte_offset, regs: _st(address_of(dst), byte_offset, address_of(regs))
