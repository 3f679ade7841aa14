"""Direct launches: a kernel compiled once (or its cubin loaded from the disk cache,
:mod:`numba_tma.kernel_cache`) and launched from raw pointers without numba's per-call argument
typing (:class:`DirectKernel`), and a launch whose parameter words are packed once
(:class:`PreparedLaunch`)."""

import ctypes
import dataclasses
import functools
import math
import threading

import numpy as np
from cuda.bindings import driver as _cudrv

from .._frontend import ARRAY_POINTER_WORDS, array_words, cuda, front_end
from .clusters import MAX_PORTABLE_CLUSTER_SIZE, _dim3, launch_cluster, plan_cluster_launch
from .driver_calls import _check, _function_handle, _launch_config, _PlainLaunch, pack_kernel_args
from .shared_memory import _check_dynamic_shared
from .streams import _core_stream, context_id, numba_stream, stream_handle

__all__ = ["DirectKernel", "PreparedLaunch"]


@dataclasses.dataclass(frozen=True)
class _ArraySlot:
    ndim: int
    itemsize: int
    layout: str
    typestr: str


def _argtypes(argtypes):
    """A tuple of numba types from a sequence of them, a numba signature or a signature string."""
    from .._frontend import sigutils

    if isinstance(argtypes, str) or hasattr(argtypes, "args"):
        args, ret = sigutils.normalize_signature(argtypes)
        return tuple(args)
    return tuple(argtypes)


def _offline():
    from .. import offline      # (its numba compiler imports are needed only to build)

    return offline


def _arch_name(cc):
    """``(9, 0, "a")`` -> ``"sm_90a"``."""
    return f"sm_{cc[0]}{cc[1]}{cc[2] if len(cc) > 2 else ''}"


@functools.cache
def _numba_packs_like_us(ty):
    """Whether numba-cuda's marshalling of an argument of type ``ty`` gives the words
    :meth:`DirectKernel._array_words` packs (an array is ``meminfo, parent, nitems, itemsize,
    data, shape..., strides...``): numba's own ``_prepare_args`` on a small probe, once per
    type and process, without compiling any kernel. Non-arrays are packed as numba packs them.
    numba-cuda-mlir's launcher is compiled code, with nothing to probe: its kernels' parameter
    sizes are checked instead (:func:`_parameters_match`)."""
    from .._frontend import types

    if not isinstance(ty, types.Array) or front_end() != "numba-cuda":
        return True
    try:
        from .._frontend import Kernel as _Kernel
        from types import SimpleNamespace

        dtype = np.dtype(str(ty.dtype))
        probe = cuda.device_array((3,) * ty.ndim, dtype, order="F" if ty.layout == "F" else "C")
        theirs = []
        _Kernel._prepare_args(SimpleNamespace(extensions=[]), ty, probe, _core_stream(0)[0],
                              [], theirs)
        slot = _ArraySlot(ty.ndim, dtype.itemsize, ty.layout, dtype.str)
        return [int(getattr(w, "value", w) or 0) for w in theirs] == \
            DirectKernel._array_words(slot, probe, 0)
    except Exception:           # another numba's internals: launch through numba instead
        return False


def _parameter_sizes(layout):
    """The byte size of each parameter word :class:`DirectKernel` packs for ``layout``."""
    sizes = []
    for kind in layout:
        if isinstance(kind, _ArraySlot):
            n = len(array_words(0, (1,) * kind.ndim, (kind.itemsize,) * kind.ndim, kind.itemsize))
            sizes += [8] * n
        else:
            sizes.append(ctypes.sizeof(kind))
    return sizes


def _ask_driver(name, *args):
    """``cuda.bindings.driver.<name>(*args)``: its result tuple, or None for a function this
    driver lacks (cuda-bindings raises 'Function ... not found')."""
    fn = getattr(_cudrv, name, None)
    try:
        return fn(*args) if fn is not None else None
    except RuntimeError:
        return None


def _parameters_match(func, layout):
    """Whether ``func``'s parameters (``cuFuncGetParamCount`` where the driver has it, and
    ``cuFuncGetParamInfo``: their count and sizes) are the words :class:`DirectKernel` packs
    for ``layout``; True where the driver cannot say. It never asks past the words it packs:
    compute-sanitizer reports every failed driver call as an error."""
    ok = _cudrv.CUresult.CUDA_SUCCESS
    sizes = _parameter_sizes(layout)
    count = _ask_driver("cuFuncGetParamCount", func)
    if count is not None and count[0] == ok and int(count[1]) != len(sizes):
        return False
    for i, size in enumerate(sizes):
        answer = _ask_driver("cuFuncGetParamInfo", func, i)
        if answer is None or answer[0] == _cudrv.CUresult.CUDA_ERROR_NOT_SUPPORTED:
            return True                             # a driver without it (before 12.4)
        if answer[0] != ok:                         # fewer parameters than words
            return False
        if int(answer[2]) != size:
            return False
    return True


class DirectKernel:
    """``kernel`` compiled once for ``argtypes``, its linked cubin kept on disk
    (:mod:`numba_tma.kernel_cache`), and launched with ``cuLaunchKernel`` (``cuLaunchKernelEx``
    for clusters) from raw device pointers.

    Why: a ``kernel[grid, block](*arrays)`` launch types every argument and marshals numba array
    objects on every call (many times the driver's own launch cost), and numba-cuda cannot
    cache kernels that link ``.cu`` files, so every process compiled them again (the figures:
    ``docs/host.md`` and ``docs/compile.md``). Here a launch packs the words numba's
    marshalling would produce (an array is numba-cuda's array struct, or numba-cuda-mlir's
    memref descriptor: :func:`numba_tma._frontend.array_words`) and calls the driver,
    and the function comes from a cubin loaded from disk when one was built before.

    ``argtypes``: numba types (arrays of any rank and layout, integers, float32/64), a numba
    signature, or a signature string such as ``"void(float32[:, ::1], int64)"``. ``key``: what
    else distinguishes this kernel's code (see :func:`numba_tma.kernel_cache.kernel_key`);
    ``cache=False`` keeps it off disk. An array argument is ``(pointer, nitems)`` for a 1-D
    C-contiguous array, or any object with ``__cuda_array_interface__`` (numba, CuPy, torch),
    whose rank and element size must match. Launch with ``k.launch(grid, block, stream, *args,
    shared_mem=0, cluster=None)`` or ``k[grid, block, stream, shared_mem](*args)``; a launch
    repeated with the same shape and arrays is cheapest through :meth:`prepare`. ``stream`` is
    anything :func:`stream_handle` takes. The caller owns the arrays' validity (device, bounds,
    lifetime until the kernel ran), as with any launch. The packing is checked against numba's
    own ``_prepare_args`` (numba-cuda) and the function's parameter sizes when the kernel is
    loaded; should they ever differ, launches go through numba's launch path instead (same
    results, numba's host cost).
    """

    def __init__(self, kernel, argtypes, *, key=(), cache=True):
        from .._frontend import types

        self._kernel = kernel
        self._argtypes = _argtypes(argtypes)
        self._key = key
        self._cache = bool(cache)
        layout = []
        for i, ty in enumerate(self._argtypes):
            if isinstance(ty, types.Array):
                dtype = np.dtype(str(ty.dtype))
                layout.append(_ArraySlot(ty.ndim, dtype.itemsize, ty.layout, dtype.str))
            elif isinstance(ty, types.Boolean):
                layout.append(ctypes.c_bool)
            elif isinstance(ty, types.Integer):
                layout.append(getattr(ctypes, f"c_{ty}"))
            elif ty in (types.float32, types.float64):     # numba passes them as c_float/double
                layout.append(ctypes.c_float if ty == types.float32 else ctypes.c_double)
            else:
                raise TypeError(f"argtypes[{i}]: only arrays, integers, booleans and "
                                f"float32/64, got {ty}")
        self._layout = tuple(layout)
        self._lock = threading.Lock()
        self._compiled = None
        self._cubin = None             # (cubin bytes, entry name) once built or read
        self._functions = {}           # context id -> CUfunction
        self._modules = {}             # context id -> CUmodule (kept loaded)
        self._native = None            # whether our packing matches numba's
        self._cluster_plans = {}       # (grid, block, cluster, shared_mem) -> ClusterLaunch
        self._configs = {}             # (that key, stream handle) -> CUlaunchConfig

    @property
    def kernel(self):
        """The ``@cuda.jit`` kernel."""
        return self._kernel

    @property
    def argtypes(self):
        """Its argument types (numba types), as compiled."""
        return self._argtypes

    # -- the function ---------------------------------------------------------------------

    def function(self):
        """The ``CUfunction`` in the current context: loaded from the disk cache, else compiled
        (and stored); once per context."""
        ctx = context_id()
        func = self._functions.get(ctx)
        if func is None:
            with self._lock:
                func = self._functions.get(ctx)
                if func is None:
                    func = self._functions[ctx] = self._load(ctx)
        return func


    def loaded(self):
        """Whether :meth:`function` would return without compiling or loading."""
        return context_id() in self._functions

    def _compile(self):
        if self._compiled is None:
            self._compiled = self._kernel.compile(self._argtypes)
        return self._compiled

    def _load(self, ctx):
        from .. import kernel_cache

        if self._cubin is None:
            self._cubin = self._cubin_from_disk_or_build(kernel_cache)
        if self._cubin is False:                 # not cacheable: numba loads and owns it
            compiled = self._compile()
            if front_end() == "numba-cuda":     # (numba-cuda-mlir's loads in get_cufunc)
                compiled.bind()
            self._native = False
            return _function_handle(compiled)
        cubin, entry = self._cubin
        module = _check(_cudrv.cuModuleLoadData(cubin), "cuModuleLoadData")
        self._modules[ctx] = module
        func = _check(_cudrv.cuModuleGetFunction(module, entry.encode()),
                      f"cuModuleGetFunction({entry})")
        if self._native is None:
            self._native = (all(_numba_packs_like_us(ty) for ty in self._argtypes)
                            and _parameters_match(func, self._layout))
        return func

    def _numba_only(self):
        """Whether only numba's own launch path can load this kernel: debug builds (their
        exception setup) and argument extensions (their marshalling)."""
        opts = getattr(self._kernel, "targetoptions", {}) or {}
        return bool(opts.get("debug") or opts.get("extensions"))

    def _cubin_from_disk_or_build(self, kernel_cache):
        cc = tuple(cuda.get_current_device().compute_capability)
        cc = cc + ("a" if cc >= (9, 0) else "",)     # as numba links: compute_90a on cc 9.0
        if self._numba_only():
            return False
        key_text = self._key_text(kernel_cache, cc)
        try:
            return self._from_disk_or_build(kernel_cache, cc, key_text)[0]
        except _offline().LinkError:
            return False            # what the offline link lacks (numba's NRT, cudadevrt)

    def _from_disk_or_build(self, kernel_cache, cc, key_text):
        """``((cubin, entry), built)``: the disk entry, else a build stored under its key. A
        process that misses while another builds the same entry waits for that one's."""
        hit = self._from_disk(kernel_cache, key_text)
        if hit is not None:
            return hit, False
        if key_text is None:                   # the cache is off: nothing to wait for
            return self._build_and_store(kernel_cache, cc, key_text), True
        with kernel_cache.building(key_text):
            hit = self._from_disk(kernel_cache, key_text)
            if hit is not None:
                return hit, False
            return self._build_and_store(kernel_cache, cc, key_text), True

    def _key_text(self, kernel_cache, cc):
        """The disk cache's key for ``cc``, or None where this kernel stays off disk."""
        if not (self._cache and kernel_cache.enabled()):
            return None
        return kernel_cache.kernel_key(self._kernel, self._argtypes, cc, self._key)

    @staticmethod
    def _from_disk(kernel_cache, key_text):
        hit = None if key_text is None else kernel_cache.load(key_text)
        if hit is None:
            return None
        cubin, header = hit
        return cubin, header["entry"]

    def _build_and_store(self, kernel_cache, cc, key_text):
        # numba_tma.offline's link (numba's LTO-IR, NVRTC, nvJitLink), not numba's launch
        # path: the same cubin whether built here, on a GPU, or by numba_tma.precompile.
        linked = _offline().link_kernel(self._kernel, self._argtypes, arch=_arch_name(cc))
        if key_text is not None:
            kernel_cache.store(key_text, linked.cubin, link_files=linked.link_files,
                               entry=linked.entry)
        return linked.cubin, linked.entry

    def cached(self, arch="sm_90a"):
        """Whether the on-disk kernel cache holds a valid entry of this kernel for ``arch``
        (what a launch on such a GPU would load instead of compiling)."""
        from .. import kernel_cache

        key_text = self._key_text(kernel_cache, _offline().toolchain._parse_arch(arch))
        return self._from_disk(kernel_cache, key_text) is not None

    def precompile(self, arch="sm_90a"):
        """Build this kernel for ``arch`` into the on-disk kernel cache without a GPU (the
        entry a launch on such a GPU then loads); returns ``"cached"`` when an entry was
        already there, else ``"built"``. ``numba_tma.precompile`` calls it for the library's
        kernels. ValueError when the cache is off or the kernel needs numba's launch path."""
        from .. import kernel_cache

        cc = _offline().toolchain._parse_arch(arch)
        key_text = self._key_text(kernel_cache, cc)
        if key_text is None:
            raise ValueError("precompile: the kernel cache is off (cache=False or "
                             "NUMBA_TMA_DISABLE_CACHE=1); nothing would be kept")
        if self._numba_only():
            raise ValueError("precompile: debug kernels and kernels with argument extensions "
                             "are compiled by numba's launch path, which needs a GPU")
        return "built" if self._from_disk_or_build(kernel_cache, cc, key_text)[1] else "cached"

    def static_shared_bytes(self):
        attr = _cudrv.CUfunction_attribute.CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES
        return int(_check(_cudrv.cuFuncGetAttribute(attr, self.function()),
                          "cuFuncGetAttribute(SHARED_SIZE_BYTES)"))

    def reserve_dynamic_shared(self, nbytes):
        """Allow launches with ``nbytes`` of dynamic shared memory (over 48 KB) in the current
        context; ValueError naming ``nbytes`` above the device's opt-in limit."""
        _check_dynamic_shared(nbytes, self.static_shared_bytes())
        attr = _cudrv.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
        _check(_cudrv.cuFuncSetAttribute(self.function(), attr, int(nbytes)),
               "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)")

    def max_active_clusters(self, block, cluster, shared_mem=0):
        """Clusters of this shape resident at once (``cuOccupancyMaxActiveClusters``)."""
        plan = plan_cluster_launch(cluster, block, cluster, shared_mem=shared_mem)
        config = _launch_config(plan, 0)
        return int(_check(_cudrv.cuOccupancyMaxActiveClusters(self.function(), config),
                          f"cuOccupancyMaxActiveClusters(block={plan.block}, "
                          f"cluster={plan.cluster}, shared_mem={plan.shared_mem})"))

    # -- the parameter words -----------------------------------------------------------------

    @staticmethod
    def _array_words(slot, arg, i):
        if isinstance(arg, tuple):
            ptr, nitems = arg
            if slot.ndim != 1 or slot.layout not in "CA":
                raise TypeError(f"args[{i}]: (pointer, nitems) stands for a 1-D C-contiguous "
                                f"array; the kernel takes a {slot.ndim}-D {slot.layout} array")
            return array_words(ptr, (nitems,), (slot.itemsize,), slot.itemsize)
        cai = getattr(arg, "__cuda_array_interface__", None)
        if cai is None:
            raise TypeError(f"args[{i}] must be a CUDA array or a (pointer, nitems) pair; got "
                            f"{type(arg).__name__}")
        shape = tuple(cai["shape"])
        itemsize = np.dtype(cai["typestr"]).itemsize
        if len(shape) != slot.ndim or itemsize != slot.itemsize:
            raise TypeError(f"args[{i}]: the kernel takes a {slot.ndim}-D array of "
                            f"{slot.itemsize}-byte elements; got shape {shape} of {itemsize}-byte "
                            f"elements")
        c_strides, f_strides, step_c, step_f = [], [], itemsize, itemsize
        for d_c, d_f in zip(reversed(shape), shape):
            c_strides.append(step_c)
            f_strides.append(step_f)
            step_c, step_f = step_c * d_c, step_f * d_f
        c_strides, f_strides = tuple(reversed(c_strides)), tuple(f_strides)
        strides = tuple(cai.get("strides") or c_strides)
        want = {"C": c_strides, "F": f_strides}.get(slot.layout)
        if want is not None and strides != want and math.prod(shape) > 1:
            raise TypeError(f"args[{i}]: the kernel takes a {slot.layout}-contiguous array; got "
                            f"strides {strides} bytes for shape {shape}")
        if any(st % itemsize for st in strides):
            raise TypeError(f"args[{i}]: strides {strides} bytes are not whole elements of "
                            f"{itemsize} bytes")
        return array_words(cai["data"][0], shape, strides, itemsize)

    def _words(self, args):
        words = []
        for i, (kind, arg) in enumerate(zip(self._layout, args)):
            if isinstance(kind, _ArraySlot):
                words += self._array_words(kind, arg, i)
            else:
                words.append(kind(arg))
        return words

    def _cluster_plan(self, grid, block, cluster, shared_mem):
        key = (grid, block, cluster, shared_mem)
        plan = self._cluster_plans.get(key)
        if plan is None:
            plan = plan_cluster_launch(grid, block, cluster, shared_mem=shared_mem)
            if plan.non_portable:
                raise ValueError(f"cluster = {cluster}: DirectKernel launches portable "
                                 f"clusters (<= {MAX_PORTABLE_CLUSTER_SIZE} CTAs) only")
            self._cluster_plans[key] = plan
        return key, plan

    def _config(self, key, plan, handle, dependent=False):
        config = self._configs.get((key, handle, dependent))
        if config is None:
            config = self._configs[(key, handle, dependent)] = _launch_config(
                plan, handle, dependent=dependent)
        return config

    # -- launches ----------------------------------------------------------------------------

    def _checked(self, grid, block, args, shared_mem, cluster):
        """(grid, block, cluster key, cluster plan, function) of a launch, after the checks that
        need no driver (argument count, shapes, cluster plan)."""
        if len(args) != len(self._layout):
            raise TypeError(f"args: the kernel takes {len(self._layout)} arguments, "
                            f"got {len(args)}")
        grid, block = _dim3("grid", grid), _dim3("block", block)
        key = plan = None
        if cluster is not None:
            key, plan = self._cluster_plan(grid, block, _dim3("cluster", cluster), shared_mem)
        return grid, block, key, plan, self.function()

    def launch(self, grid, block, stream, *args, shared_mem=0, cluster=None):
        grid, block, key, plan, func = self._checked(grid, block, args, shared_mem, cluster)
        if not self._native:
            return self._launch_through_numba(grid, block, stream, args, shared_mem, cluster)
        params, keepalive = pack_kernel_args(self._words(args))
        handle = stream_handle(stream)
        if plan is None:
            result = _cudrv.cuLaunchKernel(func, *grid, *block, shared_mem,
                                           _cudrv.CUstream(handle), params, 0)
        else:
            result = _cudrv.cuLaunchKernelEx(self._config(key, plan, handle), func, params, 0)
        del keepalive
        _check(result, f"cuLaunchKernel(grid={grid}, block={block}, shared_mem={shared_mem}, "
                       f"cluster={cluster})")

    def __getitem__(self, config):
        if not isinstance(config, tuple) or not 2 <= len(config) <= 4:
            raise ValueError(f"DirectKernel[grid, block, stream=0, shared_mem=0] takes 2 to 4 "
                             f"values, got {config!r}")
        grid, block, stream, shared_mem = (tuple(config) + (0, 0))[:4]
        return functools.partial(self._launch_args, grid, block, stream, shared_mem)

    def _launch_args(self, grid, block, stream, shared_mem, *args):
        self.launch(grid, block, stream, *args, shared_mem=shared_mem)

    def prepare(self, grid, block, *args, shared_mem=0, cluster=None, dependent=False):
        """A :class:`PreparedLaunch` of these arguments: packed once, launched by
        ``prepared(stream)``, arguments replaced in place with ``prepared.set(i, value)``.

        ``dependent=True`` launches with programmatic stream serialization: the kernel may be
        scheduled while the kernel ahead of it in the stream finishes, so it must call
        :func:`numba_tma.griddep.wait` before its first global memory access (and may call
        ``griddep.launch_dependents()`` to let the next such kernel start early). Dropping
        it never changes results, so the numba launch path (a packing mismatch) ignores it."""
        grid, block, key, plan, func = self._checked(grid, block, args, shared_mem, cluster)
        return PreparedLaunch(self, func, grid, block, shared_mem, key, plan, args, dependent)

    def _launch_through_numba(self, grid, block, stream, args, shared_mem=0, cluster=None):
        values = []
        for ty, kind, arg in zip(self._argtypes, self._layout, args):
            if isinstance(kind, _ArraySlot):
                if isinstance(arg, tuple):
                    ptr, nitems = arg
                    arg = cuda.from_cuda_array_interface(
                        {"shape": (nitems,), "strides": None, "typestr": kind.typestr,
                         "data": (ptr, False), "version": 3}, owner=None, sync=False)
                values.append(arg)
            else:                              # typed as compiled (a float would be float64)
                values.append(np.dtype(str(ty)).type(arg))
        stream = numba_stream(stream)
        if cluster is not None:
            launch_cluster(self._kernel, grid, block, cluster, values, stream=stream,
                           shared_mem=shared_mem)
        else:
            self._kernel[grid, block, stream, shared_mem](*values)


_raw_launch = None


def _raw_launch_kernel():
    """``cuLaunchKernel`` as a ctypes function from the driver's own table
    (``cuGetProcAddress``, legacy default-stream semantics, as cuda-python's), or False. A
    ctypes call of pre-converted integers costs about a microsecond less per launch than
    cuda-python's wrapper, which re-checks and converts each argument. Its prototype declares
    no arguments: the callers pass ctypes values made once (:class:`PreparedLaunch`), which
    ctypes hands on unconverted, where declared argument types convert all eleven per call."""
    global _raw_launch
    if _raw_launch is None:
        _raw_launch = False
        try:
            flags = _cudrv.CUdriverProcAddress_flags.CU_GET_PROC_ADDRESS_LEGACY_STREAM
            err, pfn, status = _cudrv.cuGetProcAddress(b"cuLaunchKernel", 12000, flags)
            if err == _cudrv.CUresult.CUDA_SUCCESS and int(pfn):
                _raw_launch = ctypes.CFUNCTYPE(ctypes.c_int)(int(pfn))
        except Exception:         # another cuda-python: its own wrapper serves
            _raw_launch = False
    return _raw_launch


class PreparedLaunch:
    """One kernel launch with its parameter words packed once (by :meth:`DirectKernel.prepare`).

    ``prepared(stream)`` launches it (``stream`` a handle int or anything :func:`stream_handle`
    takes); ``prepared.set(i, value)`` replaces argument ``i`` in place (a pointer of a moved
    buffer, a new alpha), so a repeated launch costs the driver call and little else. Callers that
    share one across threads hold ``prepared.lock`` around their ``set`` calls and the launch (the
    driver copies the words during the launch call, so the lock is free again once it returns).
    """

    def __init__(self, direct, func, grid, block, shared_mem, key, plan, args, dependent=False):
        self._direct, self._func = direct, func
        self._grid, self._block, self._shared = grid, block, shared_mem
        self._key, self._plan = key, plan
        self._dependent = bool(dependent)
        if plan is None and dependent:      # cuLaunchKernelEx, without a cluster attribute
            self._key = (grid, block, None, shared_mem)
            self._plan = _PlainLaunch(grid, block, None, shared_mem)
        self.lock = threading.Lock()
        # Every word lives in one buffer laid out as the kernel's parameters are (each at its
        # own alignment), and the driver reads it word by word (kernelParams, the pointer array
        # below). Launching the buffer whole (CU_LAUNCH_PARAM_BUFFER_POINTER) measured no faster
        # on the H100 host, within its noise.
        words, self._slots = [], []
        for i, (kind, arg) in enumerate(zip(direct._layout, args)):
            self._slots.append(len(words))
            if isinstance(kind, _ArraySlot):
                words += [(ctypes.c_int64, w) for w in direct._array_words(kind, arg, i)]
            else:
                words.append((kind, arg))
        offsets, size = [], 0
        for ctype, _ in words:
            n = ctypes.sizeof(ctype)
            size = -(-size // n) * n
            offsets.append(size)
            size += n
        self._buffer = (ctypes.c_char * max(8, size))()
        self._values = [ctype.from_buffer(self._buffer, off) for (ctype, _), off in
                        zip(words, offsets)]
        for value, (_, w) in zip(self._values, words):
            value.value = w
        self._args = list(args)
        self._params = (ctypes.c_void_p * max(1, len(self._values)))(
            *[ctypes.addressof(v) for v in self._values])
        self._address = ctypes.addressof(self._params)
        self._streams = {}
        self._raw = _raw_launch_kernel() if self._plan is None else False
        # cuLaunchKernel's (f, grid, block, shared) and kernelParams as ctypes values, and one
        # c_void_p per stream handle (_raw_launch_kernel: an untyped prototype)
        u = ctypes.c_uint
        self._raw_args = ((ctypes.c_void_p(int(func)),) + tuple(u(g) for g in grid)
                          + tuple(u(b) for b in block) + (u(shared_mem),))
        self._raw_params = ctypes.c_void_p(self._address)
        self._raw_streams = {}

    def set(self, i, value):
        """Replace argument ``i`` (same kind of value as :meth:`DirectKernel.launch` takes)."""
        kind, start = self._direct._layout[i], self._slots[i]
        if isinstance(kind, _ArraySlot):
            for j, w in enumerate(self._direct._array_words(kind, value, i)):
                self._values[start + j].value = w
        else:
            self._values[start].value = value
        self._args[i] = value

    def set_pointer(self, i, ptr):
        """Replace only the data address of array argument ``i`` (same shape)."""
        for word in ARRAY_POINTER_WORDS:
            self._values[self._slots[i] + word].value = ptr
        if isinstance(self._args[i], tuple):
            self._args[i] = (ptr, self._args[i][1])

    def __call__(self, stream=0):
        handle = stream if type(stream) is int else stream_handle(stream)
        if not self._direct._native:
            return self._direct._launch_through_numba(
                self._grid, self._block, handle, self._args, self._shared,
                None if self._plan is None else self._plan.cluster)
        if self._raw:
            cu_stream = self._raw_streams.get(handle)
            if cu_stream is None:
                if len(self._raw_streams) >= 64:         # (streams made and dropped per call)
                    self._raw_streams.clear()
                cu_stream = self._raw_streams[handle] = ctypes.c_void_p(handle or None)
            err = self._raw(*self._raw_args, cu_stream, self._raw_params, None)
            if err:
                _check(_cudrv.CUresult(err), f"cuLaunchKernel(grid={self._grid}, "
                                             f"block={self._block}, shared_mem={self._shared})")
            return None
        if self._plan is None:
            cu_stream = self._streams.get(handle)
            if cu_stream is None:
                cu_stream = self._streams[handle] = _cudrv.CUstream(handle)
            result = _cudrv.cuLaunchKernel(self._func, *self._grid, *self._block, self._shared,
                                           cu_stream, self._address, 0)
        else:
            config = self._direct._config(self._key, self._plan, handle, self._dependent)
            result = _cudrv.cuLaunchKernelEx(config, self._func, self._address, 0)
        if result[0] != _cudrv.CUresult.CUDA_SUCCESS:
            _check(result, f"cuLaunchKernel(grid={self._grid}, block={self._block}, "
                           f"shared_mem={self._shared})")
