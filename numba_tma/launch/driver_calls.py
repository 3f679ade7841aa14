"""What every launch path hands the driver: the ``CUlaunchConfig`` (cluster, programmatic
stream serialization and cooperative attributes), the kernel's ``CUfunction``, the packed
parameter words, and the check of the driver's answer."""

import collections
import ctypes

import numpy as np
from cuda.bindings import driver as _cudrv

__all__ = ["pack_kernel_args", "pack_kernel_args_ctypes"]


def _check(result, what):
    err = result[0] if isinstance(result, tuple) else result
    if err != _cudrv.CUresult.CUDA_SUCCESS:
        name = getattr(err, "name", str(err))
        raise RuntimeError(f"{what} failed: {name}")
    if isinstance(result, tuple):
        return result[1] if len(result) == 2 else result[1:]
    return None


def _function_handle(compiled):
    """A CUfunction of ``compiled`` in the current context (numba loads kernels as CUkernels)."""
    handle = compiled._codelibrary.get_cufunc().handle
    if isinstance(handle, _cudrv.CUkernel):
        return _check(_cudrv.cuKernelGetFunction(handle), "cuKernelGetFunction")
    if isinstance(handle, _cudrv.CUfunction):
        return handle
    return _cudrv.CUfunction(int(handle))


def _launch_config(plan, stream_handle, cooperative=False, dependent=False):
    """The ``CUlaunchConfig`` of ``plan`` (a :class:`ClusterLaunch`, or one whose ``cluster`` is
    None: no cluster attribute) on a stream; ``dependent`` adds programmatic stream
    serialization (:mod:`numba_tma.griddep`)."""
    config = _cudrv.CUlaunchConfig()
    config.gridDimX, config.gridDimY, config.gridDimZ = plan.grid
    config.blockDimX, config.blockDimY, config.blockDimZ = plan.block
    config.sharedMemBytes = plan.shared_mem
    config.hStream = _cudrv.CUstream(stream_handle)
    attrs = []
    if plan.cluster is not None:
        attr = _cudrv.CUlaunchAttribute()
        attr.id = _cudrv.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
        attr.value.clusterDim.x, attr.value.clusterDim.y, attr.value.clusterDim.z = plan.cluster
        attrs.append(attr)
    if dependent:   # may start before the kernel ahead of it ends: it calls griddep.wait()
        pdl = _cudrv.CUlaunchAttribute()
        pdl.id = _cudrv.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
        pdl.value.programmaticStreamSerializationAllowed = 1
        attrs.append(pdl)
    if cooperative:  # a kernel using grid.sync() (numba links cudadevrt and marks it)
        coop = _cudrv.CUlaunchAttribute()
        coop.id = _cudrv.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_COOPERATIVE
        coop.value.cooperative = 1
        attrs.append(coop)
    config.attrs = attrs
    config.numAttrs = len(attrs)
    return config


#: A launch shape without a cluster, for ``cuLaunchKernelEx`` with other attributes.
_PlainLaunch = collections.namedtuple("_PlainLaunch", "grid block cluster shared_mem")


def pack_kernel_args(kernelargs):
    """The ``void*[]`` block ``cuLaunchKernelEx`` takes, for the values numba's ``_prepare_args``
    produced, packed as cuda.core's launch packs them (numba's own path): Python ints (array
    fields, pointers) as intptr_t, bools as one byte, floats as double, ctypes and numpy scalars
    as themselves.

    Returns ``(address, keepalive)``: keep ``keepalive`` until the launch call returned (the
    driver copies the parameters during the call).
    """
    try:
        from cuda.core._kernel_arg_handler import ParamHolder
    except ImportError:  # another cuda.core layout: the same rules, in ctypes
        return pack_kernel_args_ctypes(kernelargs)
    holder = ParamHolder(list(kernelargs))
    return holder.ptr, holder


def pack_kernel_args_ctypes(kernelargs):
    """:func:`pack_kernel_args` in plain ctypes (the fallback; same layout as cuda.core's)."""
    values = []
    for i, arg in enumerate(kernelargs):
        if isinstance(arg, bool):         # cuda.core packs a bool as one byte
            values.append(ctypes.c_bool(arg))
        elif isinstance(arg, int):
            values.append(ctypes.c_ssize_t(arg))
        elif isinstance(arg, float):
            values.append(ctypes.c_double(arg))
        elif isinstance(arg, ctypes._SimpleCData):
            values.append(arg)
        elif isinstance(arg, np.generic) and arg.dtype.kind in "biuf" and arg.itemsize <= 8:
            # numpy scalars by their own width (float16 as its bits), as cuda.core does.
            bits = arg.view(f"u{arg.itemsize}") if arg.dtype.kind == "f" else arg
            ctype = np.ctypeslib.as_ctypes_type(arg.dtype if arg.dtype.kind != "f" or
                                                arg.itemsize != 2 else np.uint16)
            values.append(ctype(bits.item() if arg.itemsize == 2 and arg.dtype.kind == "f"
                                else arg.item()))
        else:
            raise TypeError(f"args: kernel parameter word {i} has unsupported type "
                            f"{type(arg).__name__}")
    if not values:
        return 0, None
    ptrs = (ctypes.c_void_p * len(values))(*[ctypes.addressof(v) for v in values])
    return ctypes.addressof(ptrs), (ptrs, values)
