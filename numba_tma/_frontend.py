"""The front end: the one module through which numba_tma reaches the numba that compiles it.

numba_tma's intrinsics, kernels and launches are written for numba-cuda (``numba.cuda``). Every
other module takes what it needs of it from here, so that a second front end (numba-cuda-mlir,
whose package bundles its own ``numba_cuda_mlir.numba_cuda``) is a second set of these names,
not a change spread over the package. :func:`front_end` says which one is in use.

The choice: ``NUMBA_TMA_FRONT_END`` = ``numba-cuda`` | ``numba-cuda-mlir``; unset, numba-cuda
when it is installed, else numba-cuda-mlir. Each front end's forms live in a module of their own
(:mod:`numba_tma._frontend_numba`, :mod:`numba_tma._frontend_mlir`); this one picks one at import
and re-exports its names. What numba-cuda-mlir lacks is listed in ``docs/front_ends.md``.

What is here:

- The public API every ``@cuda.jit`` author uses: ``cuda``, ``types``, ``errors``, ``config``,
  ``from_dtype``, the extension API (``overload``, ``intrinsic``, ``register_jitable``) and
  ``libdevice``.
- The intrinsics that need IR of their own rather than inline PTX in ``ptx/``: ``address_of``
  and ``tail`` (re-exported by :mod:`numba_tma._bridge`), ``trap`` and ``globaltimer``
  (:mod:`numba_tma.mbarrier`'s bounded waits), ``address_int`` (those waits' reports, and
  :mod:`numba_tma.tensormap.device`'s addresses), ``as_u64`` and ``as_u32``
  (:mod:`numba_tma.tensormap.device`'s operands). With numba-cuda they are llvmlite IR.
- A kernel's parameter words for an array argument (``array_words``, with
  ``ARRAY_POINTER_WORDS`` the positions of its data address among them): numba-cuda passes its
  array struct, numba-cuda-mlir a memref descriptor (:class:`numba_tma.launch.DirectKernel`).
- ``UNROLL_IN_SOURCE``: whether :func:`numba_tma._bridge.inline_device` writes out a device
  function's loops over constant ranges (:mod:`numba_tma._unroll`) because the front end's
  own pipeline leaves them loops (numba-cuda-mlir).
- ``ADDRESS_CHECK_STAGE``: the rewrite stage (``"after-inference"`` or ``"before-inference"``)
  at which :mod:`numba_tma._address_space` still sees the intrinsics' calls.
- The internals numba_tma builds on, each loaded at its first use (``from numba_tma._frontend
  import driver`` inside a function), with the seam that needs it (module paths under
  ``numba.``; numba-cuda-mlir's under ``numba_cuda_mlir.numba_cuda.``):

  - ``driver``, ``driver_module`` (``cuda.cudadrv.driver``, its object and the module),
    ``binding``, ``MemoryPointer``, ``CudaAPIError``: launches, output pools, the bench;
    ``CudaDriverError`` (``cuda.cudadrv.error``): the bench;
  - ``DeviceNDArray``, ``DeviceNDArrayBase`` (``cuda.cudadrv.devicearray``): arrays, calls;
  - ``LinkableCode``, ``nvrtc`` (``cuda.cudadrv``), ``compiler``, ``dispatcher``
    (``cuda.compiler``, ``cuda.dispatcher``), ``global_compiler_lock``
    (``cuda.core.compiler_lock``): the offline compile and the kernel cache;
  - ``Kernel`` (``cuda.dispatcher._Kernel``), ``sigutils`` (``core.sigutils``): direct launches;
  - ``rewrites`` (``cuda.core.rewrites``): the address-space check;
  - ``NumbaPerformanceWarning`` (``cuda.core.errors``): quiet launches;
  - ``bundled_transpose`` (``cuda.kernels.transpose``): the bench's baseline;
  - ``cuda_config`` (``cuda.core.config``, the module the launch reads its warnings' settings
    from) and ``codegen`` (``cuda.codegen``; numba-cuda's ``CUDACodeLibrary``, absent from
    numba-cuda-mlir's copy): the tests and the compile bench only.

The driver's modules are absent under the CUDA simulator: their names fail there as the
imports they stand for would.
"""

import importlib
import importlib.util
import os

__all__ = ["NAME", "front_end", "cuda", "types", "errors", "config", "from_dtype", "overload",
           "intrinsic", "register_jitable", "libdevice", "address_of", "tail", "trap",
           "globaltimer", "address_int", "as_u64", "as_u32", "array_words",
           "ARRAY_POINTER_WORDS", "UNROLL_IN_SOURCE", "ADDRESS_CHECK_STAGE"]

#: Each front end's module of forms.
_MODULES = {"numba-cuda": "_frontend_numba", "numba-cuda-mlir": "_frontend_mlir"}


def _choose():
    name = os.environ.get("NUMBA_TMA_FRONT_END", "").strip()
    if not name:
        # find_spec of a top-level name imports nothing: numba-cuda's own package is
        # ``numba_cuda`` (``numba.cuda`` redirects to it), so plain numba alone does not count.
        if importlib.util.find_spec("numba_cuda"):
            return "numba-cuda"
        if importlib.util.find_spec("numba_cuda_mlir"):
            return "numba-cuda-mlir"
        raise ImportError("numba_tma needs a numba front end: numba-cuda (pip install "
                          "'numba-cuda[cu13]') or numba-cuda-mlir (pip install "
                          "'numba-cuda-mlir[cu13]'); neither is installed")
    if name not in _MODULES:
        raise ImportError(f"NUMBA_TMA_FRONT_END={name!r}: expected one of "
                          f"{', '.join(map(repr, _MODULES))}")
    return name


#: The front end numba_tma compiles with.
NAME = _choose()
_impl = importlib.import_module(f"{__package__}.{_MODULES[NAME]}")

(cuda, types, errors, config, from_dtype, overload, intrinsic, register_jitable, libdevice,
 address_of, tail, trap, globaltimer, address_int, as_u64, as_u32, array_words,
 ARRAY_POINTER_WORDS, UNROLL_IN_SOURCE, ADDRESS_CHECK_STAGE) = (getattr(_impl, n)
                                                                 for n in __all__[2:])


def front_end():
    """The front end numba_tma compiles with: ``"numba-cuda"`` or ``"numba-cuda-mlir"``."""
    return NAME


def __getattr__(name):
    # The internals, loaded at first use from the chosen front end's map of them (its module's
    # private names stay its own).
    if name.startswith("_"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if name in _impl.INTERNALS:
        module, attr = _impl.INTERNALS[name]
        value = importlib.import_module(module)
        if attr is not None:
            value = getattr(value, attr)
    else:
        try:
            value = getattr(_impl, name)
        except AttributeError:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    globals()[name] = value
    return value
