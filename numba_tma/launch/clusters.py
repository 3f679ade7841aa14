"""Thread-block cluster launches (sm_90) through ``cuLaunchKernelEx``, which numba-cuda lacks:
the launch shape checked without a GPU (:func:`plan_cluster_launch`), numba kernels launched in
clusters (:func:`launch_cluster`, :func:`cluster_launch`), and how many clusters fit at once
(:func:`max_active_clusters`)."""

import dataclasses
import math
import operator
import threading
import weakref

import numpy as np
from cuda.bindings import driver as _cudrv

from .._frontend import cuda, front_end
from .driver_calls import _check, _function_handle, _launch_config, pack_kernel_args
from .streams import _core_stream, stream_handle

__all__ = ["ClusterLaunch", "plan_cluster_launch", "launch_cluster", "cluster_launch",
           "max_active_clusters", "CLUSTER_MIN_CC", "MAX_PORTABLE_CLUSTER_SIZE",
           "MAX_NONPORTABLE_CLUSTER_SIZE", "MAX_BLOCK_THREADS", "MAX_BLOCK_DIM", "MAX_GRID_DIM"]

#: Clusters exist from Hopper on.
CLUSTER_MIN_CC = (9, 0)
#: CTAs per cluster that every sm_90 device launches.
MAX_PORTABLE_CLUSTER_SIZE = 8
#: CTAs per cluster an H100 accepts once the kernel opts in (CU_FUNC_ATTRIBUTE_NON_PORTABLE_...).
MAX_NONPORTABLE_CLUSTER_SIZE = 16
MAX_BLOCK_THREADS = 1024
MAX_BLOCK_DIM = (1024, 1024, 64)
MAX_GRID_DIM = (2**31 - 1, 65535, 65535)
_AXES = "xyz"


def _dim3(name, value):
    """``value`` (an int or a tuple of 1 to 3 ints) as a 3-tuple of positive ints."""
    if isinstance(value, bool):
        raise TypeError(f"{name} must be an int or a tuple of 1 to 3 ints, got {value!r}")
    try:
        dims = (operator.index(value),)
    except TypeError:
        if not isinstance(value, (tuple, list)) or not 1 <= len(value) <= 3:
            raise TypeError(f"{name} must be an int or a tuple of 1 to 3 ints, got {value!r}") \
                from None
        try:
            if any(isinstance(v, bool) for v in value):
                raise TypeError
            dims = tuple(operator.index(v) for v in value)
        except TypeError:
            raise TypeError(f"{name} must be an int or a tuple of 1 to 3 ints, got {value!r}") \
                from None
    dims = dims + (1,) * (3 - len(dims))
    for axis, d in zip(_AXES, dims):
        if d < 1:
            raise ValueError(f"{name} = {dims} must be >= 1 along every axis; {axis} is {d}")
    return dims


@dataclasses.dataclass(frozen=True)
class ClusterLaunch:
    """A validated cluster launch configuration; ``grid`` counts blocks (not clusters)."""
    grid: tuple
    block: tuple
    cluster: tuple
    shared_mem: int
    non_portable: bool

    @property
    def cluster_size(self):
        return math.prod(self.cluster)

    @property
    def num_clusters(self):
        return math.prod(g // c for g, c in zip(self.grid, self.cluster))


def plan_cluster_launch(grid, block, cluster, *, shared_mem=0, non_portable=False):
    """Check a cluster launch's shape without a GPU; returns a :class:`ClusterLaunch`.

    ``grid`` is in blocks, as for ``kernel[grid, block]`` and ``cudaLaunchKernelEx``; each of its
    axes must be a multiple of ``cluster``'s. A cluster of more than 8 CTAs is not portable:
    it needs ``non_portable=True`` (the kernel then opts in to
    ``CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED``; the H100 takes up to 16 CTAs, and
    only if that many fit on one GPC with the kernel's shared memory and registers).
    Raises TypeError/ValueError naming the argument, with the numbers.
    """
    grid = _dim3("grid", grid)
    block = _dim3("block", block)
    cluster = _dim3("cluster", cluster)
    for axis, g, lim in zip(_AXES, grid, MAX_GRID_DIM):
        if g > lim:
            raise ValueError(f"grid = {grid}: {axis} = {g} exceeds the device limit {lim}")
    for axis, b, lim in zip(_AXES, block, MAX_BLOCK_DIM):
        if b > lim:
            raise ValueError(f"block = {block}: {axis} = {b} exceeds the device limit {lim}")
    if math.prod(block) > MAX_BLOCK_THREADS:
        raise ValueError(f"block = {block} has {math.prod(block)} threads; a block holds at most "
                         f"{MAX_BLOCK_THREADS}")
    for axis, g, c in zip(_AXES, grid, cluster):
        if g % c:
            raise ValueError(f"grid = {grid} (in blocks) is not a multiple of cluster = {cluster}: "
                             f"along {axis}, {g} % {c} = {g % c}; round grid.{axis} up to "
                             f"{-(-g // c) * c}")
    size = math.prod(cluster)
    if not isinstance(non_portable, bool):
        raise TypeError(f"non_portable must be True or False, got {non_portable!r}")
    if size > MAX_NONPORTABLE_CLUSTER_SIZE:
        raise ValueError(f"cluster = {cluster} has {size} CTAs; sm_90 clusters hold at most "
                         f"{MAX_NONPORTABLE_CLUSTER_SIZE} (and {MAX_PORTABLE_CLUSTER_SIZE} "
                         f"portably)")
    if size > MAX_PORTABLE_CLUSTER_SIZE and not non_portable:
        raise ValueError(f"cluster = {cluster} has {size} CTAs, more than the portable "
                         f"{MAX_PORTABLE_CLUSTER_SIZE}; pass non_portable=True to opt in (the "
                         f"H100 runs up to {MAX_NONPORTABLE_CLUSTER_SIZE} when they fit on a GPC)")
    try:
        shared_mem = operator.index(shared_mem)
    except TypeError:
        raise TypeError(f"shared_mem must be an int (bytes of dynamic shared memory per block), "
                        f"got {shared_mem!r}") from None
    if shared_mem < 0:
        raise ValueError(f"shared_mem = {shared_mem} must be >= 0")
    return ClusterLaunch(grid, block, cluster, shared_mem, non_portable)


def _require_cluster_device():
    cc = tuple(cuda.get_current_device().compute_capability)
    if cc < CLUSTER_MIN_CC:
        raise ValueError(f"cluster: thread-block clusters need compute capability "
                         f"{CLUSTER_MIN_CC[0]}.{CLUSTER_MIN_CC[1]} or newer; this GPU is "
                         f"{cc[0]}.{cc[1]}")


def _check_kernel_args(kernel, args):
    if not hasattr(kernel, "overloads") or not hasattr(kernel, "typeof_pyval"):
        raise TypeError(f"kernel must be a @cuda.jit kernel (a numba CUDA dispatcher), got "
                        f"{type(kernel).__name__}")
    if not isinstance(args, (tuple, list)):
        raise TypeError(f"args must be a tuple of the kernel's arguments, got "
                        f"{type(args).__name__}")


def _compiled_kernel(kernel, args):
    """The dispatcher's compiled kernel for ``args``, compiled (and bound) on first use."""
    if getattr(kernel, "specialized", False):
        compiled = next(iter(kernel.overloads.values()))
    else:
        argtypes = tuple(kernel.typeof_pyval(a) for a in args)
        compiled = kernel.overloads.get(argtypes)
        if compiled is None:
            if not getattr(kernel, "_can_compile", True):
                sigs = ", ".join(str(s) for s in kernel.overloads) or "none"
                raise TypeError(f"args: the kernel was compiled for {sigs} only, not for "
                                f"{argtypes}")
            compiled = kernel.compile(argtypes)
    if len(args) != len(compiled.argument_types):
        raise TypeError(f"args: the kernel takes {len(compiled.argument_types)} arguments, "
                        f"got {len(args)}")
    compiled.bind()
    return compiled


def _allow_non_portable(func):
    attr = _cudrv.CUfunction_attribute.CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED
    _check(_cudrv.cuFuncSetAttribute(func, attr, 1),
           "cuFuncSetAttribute(CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED)")


_direct_kernels = weakref.WeakKeyDictionary()    # kernel -> {argtypes: DirectKernel}
_direct_lock = threading.Lock()


def _direct_kernel(kernel, args):
    """The :class:`~numba_tma.launch.DirectKernel` of ``kernel`` for ``args``' types, made once.
    numba-cuda-mlir's launcher marshals arguments in compiled code, with nothing to reuse for
    ``cuLaunchKernelEx``; a DirectKernel packs them itself."""
    from .direct import DirectKernel

    argtypes = tuple(kernel.typeof_pyval(a) for a in args)
    with _direct_lock:
        by_types = _direct_kernels.setdefault(kernel, {})
        direct = by_types.get(argtypes)
        if direct is None:
            direct = by_types[argtypes] = DirectKernel(kernel, argtypes, cache=False)
    return direct


def _on_device(arg, stream, retr):
    """``arg``, a numpy array copied to the device (its copy back appended to ``retr``)."""
    if not isinstance(arg, np.ndarray):
        return arg
    copy = cuda.to_device(arg, stream=stream)
    retr.append(lambda: copy.copy_to_host(arg, stream=stream))
    return copy


def _prepare_cluster(kernel, args, grid, block, cluster, shared_mem, non_portable):
    """Checks (before any driver call), then the compiled kernel (numba-cuda's, or a
    :func:`_direct_kernel` elsewhere) and its function handle, opted in to non-portable cluster
    sizes when the plan needs them."""
    plan = plan_cluster_launch(grid, block, cluster, shared_mem=shared_mem,
                               non_portable=non_portable)
    _check_kernel_args(kernel, args)
    _require_cluster_device()
    if front_end() == "numba-cuda":
        compiled = _compiled_kernel(kernel, args)
        func = _function_handle(compiled)
    else:
        compiled = _direct_kernel(kernel, args)
        func = compiled.function()
        if not compiled._native:
            raise RuntimeError(f"launch_cluster: the parameters of {kernel.py_func.__name__} "
                               f"are not the words numba_tma packs for {front_end()}")
    if plan.non_portable:
        _allow_non_portable(func)
    return plan, compiled, func


def launch_cluster(kernel, grid, block, cluster, args, *, stream=0, shared_mem=0,
                   non_portable=False):
    """Launch numba kernel ``kernel`` over ``grid`` blocks of ``block`` threads, in thread-block
    clusters of ``cluster`` blocks (sm_90), with ``args``.

    ``grid`` counts blocks (not clusters) and must be a multiple of ``cluster`` along each axis;
    ``cluster`` holds at most 8 CTAs, or 16 with ``non_portable=True``. ``stream`` is 0 or a
    numba stream; ``shared_mem`` is the dynamic shared memory per block (beyond 48 KB, call
    :func:`reserve_dynamic_shared` first). The kernel is compiled for the arguments' types like a
    ``kernel[grid, block](*args)`` launch, and the arguments are converted by numba's own
    marshalling (``_Kernel._prepare_args``, then cuda.core's parameter packing) -- numpy arrays
    are copied in and back, device arrays, CuPy/torch arrays and :class:`numba_tma.TensorMap`
    (``__cuda_array_interface__``) pass as pointers. Only the launch call differs: it is
    ``cuLaunchKernelEx`` with a ``CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION`` attribute. On
    numba-cuda-mlir the arguments are packed as :class:`DirectKernel` packs them (numpy arrays
    copied in and back first).

    Inside the kernel, ``numba_tma.cluster`` gives the CTA's rank and the cluster barrier, and
    ``tma.load_multicast`` writes into every CTA of a cluster. Kernels compiled with
    ``debug=True`` launch, but their device-side exceptions are not reported back.
    Raises TypeError/ValueError naming the argument before any driver call, ValueError naming
    ``cluster`` on a GPU older than 9.0, RuntimeError with the CUresult if the driver refuses.
    """
    plan, compiled, func = _prepare_cluster(kernel, args, grid, block, cluster, shared_mem,
                                            non_portable)
    retr, kernelargs = [], []
    if front_end() == "numba-cuda":
        core_stream, handle = _core_stream(stream)
        for ty, value in zip(compiled.argument_types, args):
            compiled._prepare_args(ty, value, core_stream, retr, kernelargs)
    else:       # numpy arrays copied in and back, as numba-cuda's marshalling does
        handle, kernelargs = stream_handle(stream), compiled._words(
            [_on_device(a, stream, retr) for a in args])
    params, keepalive = pack_kernel_args(kernelargs)
    config = _launch_config(plan, handle, getattr(compiled, "cooperative", False))
    result = _cudrv.cuLaunchKernelEx(config, func, params, 0)
    del keepalive
    _check(result, f"cuLaunchKernelEx(grid={plan.grid}, block={plan.block}, "
                   f"cluster={plan.cluster}, shared_mem={plan.shared_mem})")
    for writeback in retr:
        writeback()


class _ClusterLauncher:
    """``cluster_launch(kernel, cluster)[grid, block, stream, shared_mem](*args)``."""

    def __init__(self, kernel, cluster, non_portable):
        self.kernel, self.cluster, self.non_portable = kernel, cluster, non_portable

    def __getitem__(self, config):
        if not isinstance(config, tuple) or not 2 <= len(config) <= 4:
            raise ValueError("cluster_launch(kernel, cluster)[grid, block, stream=0, "
                             f"shared_mem=0] takes 2 to 4 values, got {config!r}")
        grid, block, stream, shared_mem = (tuple(config) + (0, 0))[:4]
        plan_cluster_launch(grid, block, self.cluster, shared_mem=shared_mem,
                            non_portable=self.non_portable)

        def launch(*args):
            launch_cluster(self.kernel, grid, block, self.cluster, args, stream=stream,
                           shared_mem=shared_mem, non_portable=self.non_portable)

        return launch


def cluster_launch(kernel, cluster, *, non_portable=False):
    """Sugar for :func:`launch_cluster` in numba's launch syntax::

        cluster_launch(kernel, (2, 1, 1))[grid, block](*args)            # grid in blocks
        cluster_launch(kernel, 4)[grid, block, stream, shared_mem](*args)
    """
    _dim3("cluster", cluster)
    return _ClusterLauncher(kernel, cluster, non_portable)


def max_active_clusters(kernel, args, block, cluster, *, shared_mem=0, non_portable=False):
    """How many clusters of this shape can be resident at once on the current device
    (``cuOccupancyMaxActiveClusters``), for the kernel compiled for ``args``' types.

    0 means the cluster cannot be scheduled at all (too much shared memory or too many
    registers for ``cluster`` CTAs on one GPC). Persistent kernels size their grid from it.
    """
    plan, _, func = _prepare_cluster(kernel, args, cluster, block, cluster, shared_mem,
                                     non_portable)
    config = _launch_config(plan, 0)
    return int(_check(_cudrv.cuOccupancyMaxActiveClusters(func, config),
                      f"cuOccupancyMaxActiveClusters(block={plan.block}, cluster={plan.cluster}, "
                      f"shared_mem={plan.shared_mem})"))
