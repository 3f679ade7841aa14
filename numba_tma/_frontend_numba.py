"""numba-cuda's forms of :mod:`numba_tma._frontend`'s names (see its docstring): the public and
extension API from ``numba.cuda``, the internals under ``numba.``, the IR intrinsics in llvmlite.
The driver's modules are absent under the CUDA simulator: their names fail there as the
imports they stand for would."""

import math

import numba
from llvmlite import ir
from numba import config, cuda, types
from numba.core import errors
from numba.cuda import libdevice
from numba.cuda.extending import intrinsic, overload, register_jitable

__all__ = ["cuda", "types", "errors", "config", "from_dtype", "overload",
           "intrinsic", "register_jitable", "libdevice", "address_of", "tail", "trap",
           "globaltimer", "address_int", "as_u64", "as_u32", "array_words", "ARRAY_POINTER_WORDS",
           "UNROLL_IN_SOURCE", "ADDRESS_CHECK_STAGE"]

from_dtype = numba.from_dtype


# ------------------------------------------------------------------ kernel parameters
def array_words(ptr, shape, strides, itemsize):
    """The parameter words of an array argument of a kernel, as numba-cuda's marshalling
    gives them: its array struct ``meminfo, parent, nitems, itemsize, data, shape...,
    strides...`` (strides in bytes)."""
    return [0, 0, math.prod(shape), itemsize, ptr, *shape, *strides]


#: Where :func:`array_words` puts the data address.
ARRAY_POINTER_WORDS = (4,)

# LLVM unrolls our device functions' constant loops itself (numba_tma._unroll).
UNROLL_IN_SOURCE = False

# The address-space check reads the calls of numba_tma's intrinsics once types are known
# (numba-cuda does not inline them before: inline_device and forceinline).
ADDRESS_CHECK_STAGE = "after-inference"


# ------------------------------------------------------------------ internals, loaded lazily
#: The internals :mod:`numba_tma._frontend` loads at their first use.
INTERNALS = {
    # name: (module, attribute or None for the module itself)
    "driver": ("numba.cuda.cudadrv.driver", "driver"),
    "driver_module": ("numba.cuda.cudadrv.driver", None),
    "binding": ("numba.cuda.cudadrv.driver", "binding"),
    "MemoryPointer": ("numba.cuda.cudadrv.driver", "MemoryPointer"),
    "CudaAPIError": ("numba.cuda.cudadrv.driver", "CudaAPIError"),
    "CudaDriverError": ("numba.cuda.cudadrv.error", "CudaDriverError"),
    "DeviceNDArray": ("numba.cuda.cudadrv.devicearray", "DeviceNDArray"),
    "DeviceNDArrayBase": ("numba.cuda.cudadrv.devicearray", "DeviceNDArrayBase"),
    "LinkableCode": ("numba.cuda.cudadrv.linkable_code", "LinkableCode"),
    "nvrtc": ("numba.cuda.cudadrv.nvrtc", None),
    "compiler": ("numba.cuda.compiler", None),
    "dispatcher": ("numba.cuda.dispatcher", None),
    "Kernel": ("numba.cuda.dispatcher", "_Kernel"),
    "global_compiler_lock": ("numba.cuda.core.compiler_lock", "global_compiler_lock"),
    "rewrites": ("numba.cuda.core.rewrites", None),
    "sigutils": ("numba.core.sigutils", None),
    "NumbaPerformanceWarning": ("numba.cuda.core.errors", "NumbaPerformanceWarning"),
    "bundled_transpose": ("numba.cuda.kernels.transpose", None),
    "cuda_config": ("numba.cuda.core.config", None),
    "codegen": ("numba.cuda.codegen", None),
}


# ------------------------------------------------------------------- the IR intrinsics
@intrinsic
def address_of(typingctx, arr):
    """Generic address of ``arr``'s first element (a ``void*``), for the C wrappers' pointer
    operands.

    Shared arrays arrive as generic pointers; the C side converts them with
    ``__cvta_generic_to_shared``, which LTO folds into the 32-bit shared address.
    """
    if not isinstance(arr, types.Array):
        raise errors.TypingError(f"expected a numba array, got {arr}")
    sig = types.voidptr(arr)

    def codegen(context, builder, sig, args):
        ary = context.make_array(sig.args[0])(context, builder, args[0])
        return builder.bitcast(ary.data, context.get_value_type(types.voidptr))

    return sig, codegen


@intrinsic
def tail(typingctx, arr, i):
    """``arr[i:]`` of a 1-D array without numba's slice normalisation (a negative start counted
    from the end, both bounds clamped to the length): the caller guarantees ``0 <= i <=
    len(arr)``. The GEMM ring addresses its barriers with it: each normalised slice of a
    barrier array cost about a dozen 64-bit instructions in every slice of the main loop, and a
    constant ``i`` folds into an instruction's immediate offset."""
    if not (isinstance(arr, types.Array) and arr.ndim == 1):
        raise errors.TypingError(f"tail: expected a 1-D numba array, got {arr}")
    if not isinstance(i, types.Integer):
        raise errors.TypingError(f"tail: expected an integer start, got {i}")
    sig = arr(arr, i)

    def codegen(context, builder, sig, args):
        aryty, ity = sig.args
        ary = context.make_array(aryty)(context, builder, args[0])
        idx = context.cast(builder, args[1], ity, types.intp)
        if aryty.layout == "C":
            ary.data = builder.gep(ary.data, [idx])
        else:
            step = builder.mul(idx, builder.extract_value(ary.strides, 0))
            byte = ir.IntType(8).as_pointer()
            ary.data = builder.bitcast(builder.gep(builder.bitcast(ary.data, byte), [step]),
                                       ary.data.type)
        ary.shape = builder.insert_value(ary.shape, builder.sub(
            builder.extract_value(ary.shape, 0), idx), 0)
        return ary._getvalue()

    return sig, codegen


@intrinsic
def trap(typingctx):
    """PTX ``trap;`` (SASS ``BPT.TRAP``): ends the kernel with an error (the launch fails, the
    context is lost). For the debug checks of ``NUMBA_TMA_WAIT_TIMEOUT_NS``: a spin that must
    not hang reports, then traps. Any thread."""
    def codegen(context, builder, sig, args):
        fnty = ir.FunctionType(ir.VoidType(), [])
        builder.call(ir.InlineAsm(fnty, "trap;", "", side_effect=True), [])
        return context.get_dummy_value()

    return types.void(), codegen


@intrinsic
def globaltimer(typingctx):
    """The GPU's nanosecond clock, PTX ``%globaltimer`` (uint64): the time base of bounded
    spins (``NUMBA_TMA_WAIT_TIMEOUT_NS``). Any thread."""
    def codegen(context, builder, sig, args):
        fnty = ir.FunctionType(ir.IntType(64), [])
        return builder.call(ir.InlineAsm(fnty, "mov.u64 $0, %globaltimer;", "=l",
                                         side_effect=True), [])

    return types.uint64(), codegen


@intrinsic
def address_int(typingctx, ptr):
    """A ``void*`` as a uint64: a barrier's generic address for the timeout report, an
    array's (``address_int(address_of(arr))``) for a C wrapper's 64-bit operand. Inline LLVM
    rather than a C wrapper: a C call on the cold timeout path stays a call, which nvJitLink's
    LTO then leaves unresolved."""
    def codegen(context, builder, sig, args):
        return builder.ptrtoint(args[0], ir.IntType(64))

    return types.uint64(types.voidptr), codegen


def _int_cast(context, builder, sig, args):
    # (the codegen of as_u64 and as_u32: the argument cast to the signature's return type)
    return context.cast(builder, args[0], sig.args[0], sig.return_type)


@intrinsic
def as_u64(typingctx, value):
    """An integer as a uint64 (numba widens small integers to int64; a C wrapper's operand
    may want another width)."""
    if not isinstance(value, types.Integer):
        return None
    return types.uint64(value), _int_cast


@intrinsic
def as_u32(typingctx, value):
    """An integer as a uint32."""
    if not isinstance(value, types.Integer):
        return None
    return types.uint32(value), _int_cast
