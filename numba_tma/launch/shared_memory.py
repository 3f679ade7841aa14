"""Dynamic shared memory past the default 48 KB: a kernel's launches may use more only once the
kernel opted in (``CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES``), up to the device's limit."""

from .._frontend import cuda, front_end

__all__ = ["DEFAULT_DYNAMIC_SHARED", "max_dynamic_shared", "reserve_dynamic_shared"]

# Without an opt-in, a block gets at most 48 KB of dynamic shared memory.
DEFAULT_DYNAMIC_SHARED = 48 * 1024


def max_dynamic_shared():
    """Bytes of shared memory a block of the current device may opt in to (227 KB on the H100)."""
    from .._frontend import binding, driver   # absent under the simulator

    dev = cuda.get_current_device()
    attr = binding.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN
    return int(driver.cuDeviceGetAttribute(attr, dev.id))


def _check_dynamic_shared(nbytes, static):
    """ValueError naming ``nbytes`` when it and ``static`` bytes exceed the opt-in limit."""
    limit = max_dynamic_shared()
    if nbytes + static > limit:
        raise ValueError(f"nbytes = {nbytes} of dynamic shared memory plus {static} static is more "
                         f"than the {limit} bytes a block may use on this device")


def reserve_dynamic_shared(kernel, signature, nbytes):
    """Compile ``kernel`` for ``signature`` and allow launches with ``nbytes`` of dynamic shared
    memory, so ``kernel[grid, block, stream, nbytes](...)`` may exceed 48 KB.

    ``signature`` is a numba signature or string ("void(uint64[::1], int64)"); the launch's
    arguments must type to it. Raises ValueError naming ``nbytes`` above the device's opt-in limit.
    """
    from .._frontend import binding, driver

    compiled = kernel.compile(signature)
    attr = binding.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
    if front_end() == "numba-cuda":     # (numba-cuda launches the CUkernel: set it there)
        cufunc = compiled._codelibrary.get_cufunc()
        _check_dynamic_shared(nbytes, cufunc.attrs.shared)
        driver.cuKernelSetAttribute(attr, int(nbytes), cufunc.handle,
                                    cuda.get_current_device().id)
        return compiled
    from cuda.bindings import driver as cudrv

    from .driver_calls import _check, _function_handle

    func = _function_handle(compiled)   # numba-cuda-mlir: the CUfunction its launcher uses
    static = _check(cudrv.cuFuncGetAttribute(
        cudrv.CUfunction_attribute.CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, func),
        "cuFuncGetAttribute(SHARED_SIZE_BYTES)")
    _check_dynamic_shared(nbytes, int(static))
    _check(cudrv.cuFuncSetAttribute(func, attr, int(nbytes)),
           "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)")
    return compiled
