"""Compile-time errors for an intrinsic operand in the wrong address space.

numba-cuda types ``cuda.shared.array``, ``cuda.local.array`` and a kernel's array parameters
alike (``Array``): the address space is known only when the IR is lowered, and an intrinsic's
typing sees types alone. So the check runs on the calling function's IR, after type inference
(a numba-cuda "after-inference" rewrite that rewrites nothing): for each call of a numba_tma
intrinsic it follows an array operand back through slices and copies to where it was made, and
raises a ``TypingError`` naming the intrinsic and the argument where that place cannot be the
operand's space:

- a shared-memory operand (a barrier, a TMA destination or source, an ``ldmatrix`` tile, a wgmma
  descriptor's tile, ...) made by ``cuda.local.array`` (thread-local memory), or, in a kernel,
  one of the kernel's array parameters (global memory);
- a global-memory operand (a bulk copy's global side) made by ``cuda.shared.array`` or
  ``cuda.local.array``.

An operand that arrives as a device function's parameter is not judged there (its caller may
pass either). The check reaches into the front end in one place, :func:`install` (its rewrite
registry and, to tell a kernel from a device function, the frames of its compile calls). On
numba-cuda-mlir it runs before type inference (``ADDRESS_CHECK_STAGE``), on the same IR.
"""

import sys

__all__ = ["install", "OPERANDS"]

SHARED, GLOBAL = "shared", "global"


def _table():
    """``{intrinsic function: {argument position: (argument name, space)}}``."""
    from . import bulk, cluster, gmem, mbarrier, smem, tma, warp, wgmma

    spaces = {
        mbarrier.init: {"bar": SHARED}, mbarrier.inval: {"bar": SHARED},
        mbarrier.arrive: {"bar": SHARED}, mbarrier.arrive_expect_tx: {"bar": SHARED},
        mbarrier.expect_tx: {"bar": SHARED}, mbarrier.try_wait: {"bar": SHARED},
        mbarrier.test_wait: {"bar": SHARED}, mbarrier.wait: {"bar": SHARED},
        mbarrier.wait_bounded: {"bar": SHARED}, mbarrier.init_block: {"bars": SHARED},
        tma.load: {"dst": SHARED, "bar": SHARED}, tma.load_tile: {"dst": SHARED, "bar": SHARED},
        tma.load_multicast: {"dst": SHARED, "bar": SHARED},
        tma.load_im2col: {"dst": SHARED, "bar": SHARED},
        tma.store: {"src": SHARED}, tma.store_async: {"src": SHARED},
        tma.store_tile: {"src": SHARED}, tma.reduce: {"src": SHARED},
        tma.reduce_tile: {"src": SHARED},
        bulk.copy_global_to_shared: {"dst": SHARED, "src": GLOBAL, "bar": SHARED},
        bulk.load: {"dst": SHARED, "src": GLOBAL, "bar": SHARED},
        bulk.copy_shared_to_global: {"dst": GLOBAL, "src": SHARED},
        bulk.reduce: {"dst": GLOBAL, "src": SHARED}, bulk.prefetch: {"src": GLOBAL},
        gmem.copy_async: {"dst": SHARED, "src": GLOBAL}, gmem.copy_async_arrive: {"bar": SHARED},
        warp.ldmatrix: {"tile": SHARED}, warp.stmatrix: {"tile": SHARED},
        smem.load_v4: {"src": SHARED}, smem.store_v4: {"dst": SHARED},
        smem.shared_address: {"arr": SHARED}, smem.aligned_offset: {"arr": SHARED},
        cluster.map_shared: {"arr": SHARED}, cluster.mbarrier_arrive: {"bar": SHARED},
        cluster.mbarrier_arrive_cta: {"bar": SHARED}, cluster.mbarrier_try_wait: {"bar": SHARED},
        cluster.mbarrier_wait: {"bar": SHARED}, cluster.mbarrier_wait_bounded: {"bar": SHARED},
        wgmma.descriptor: {"tile": SHARED},
    }
    table = {}
    for fn, names in spaces.items():
        params = fn.__code__.co_varnames[:fn.__code__.co_argcount]
        table[fn] = {params.index(name): (name, space) for name, space in names.items()}
    return table


OPERANDS = {}           # filled by install(): _table()

_LOCAL, _SHARED_ARRAY, _KERNEL_ARG = "cuda.local.array", "cuda.shared.array", "kernel parameter"


def _value(func_ir, var, depth=0):
    """The Python object a variable names, where it is a global, a free variable or a chain of
    attributes of one (``cuda.local.array``); None otherwise."""
    if depth > 8:
        return None
    try:
        node = func_ir.get_definition(var)
    except Exception:
        return None
    kind = type(node).__name__             # (numba's and numba-cuda's IR classes alike)
    if kind in ("Global", "FreeVar"):
        return node.value
    if kind == "Expr" and node.op == "getattr":
        owner = _value(func_ir, node.value, depth + 1)
        return None if owner is None else getattr(owner, node.attr, None)
    return None


def _is_slice(func_ir, node):
    return (type(node).__name__ == "Expr" and node.op == "call"
            and _value(func_ir, node.func) is slice)


def _dims_dropped(func_ir, node):
    """How many dimensions an index expression takes away (an integer index one, a slice
    none); an index of unknown kind counts as an integer."""
    if node.op == "static_getitem":
        items = node.index if isinstance(node.index, tuple) else (node.index,)
        return sum(not isinstance(x, slice) for x in items)
    try:
        index = func_ir.get_definition(node.index)
    except Exception:
        return 1
    if type(index).__name__ == "Expr" and index.op == "build_tuple":
        dropped = 0
        for item in index.items:
            try:
                dropped += not _is_slice(func_ir, func_ir.get_definition(item))
            except Exception:
                dropped += 1
        return dropped
    return 0 if _is_slice(func_ir, index) else 1


def _origin(func_ir, var, in_kernel, depth=0, dropped=0):
    """Where an array operand was made: ``cuda.local.array``, ``cuda.shared.array``, a kernel's
    array parameter (where ``in_kernel(i, dropped)`` for parameter ``i`` indexed down by
    ``dropped`` dimensions), or None (unknown, or a device function's parameter)."""
    from ._frontend import cuda

    if depth > 32:
        return None
    try:
        node = func_ir.get_definition(var)
    except Exception:
        return None
    kind = type(node).__name__
    if kind == "Var":
        return _origin(func_ir, node, in_kernel, depth + 1, dropped)
    if kind == "Arg":
        return _KERNEL_ARG if in_kernel(node.index, dropped) else None
    if kind == "Expr":
        if node.op in ("getitem", "static_getitem"):        # a slice or view of an array
            return _origin(func_ir, node.value, in_kernel, depth + 1,
                           dropped + _dims_dropped(func_ir, node))
        if node.op == "call":
            fn = _value(func_ir, node.func)
            if fn is cuda.local.array:
                return _LOCAL
            if fn is cuda.shared.array:
                return _SHARED_ARRAY
    return None


def _compiling_a_kernel(func=None):
    """Whether the front end is compiling a kernel (not a device function): the nearest of its
    compile frames on the stack says so (numba-cuda 0.30's ``CUDADispatcher.compile_device``,
    ``_Kernel.__init__``, and the ``numba.cuda.compiler`` functions taking ``device=``, as
    ``cuda.compile`` does; numba-cuda-mlir's ``mlir_compiler.compile_mlir``, whose
    ``targetoptions`` say ``device``, and whose ``pyfunc`` must be ``func``, the function
    checked: its inliner runs a device function's untyped passes inside the kernel's compile)."""
    frame = sys._getframe(2)
    while frame is not None:
        code = frame.f_code
        if code.co_name == "compile_device":
            return False
        if code.co_name == "__init__" and type(frame.f_locals.get("self")).__name__ == "_Kernel":
            return True
        module = frame.f_globals.get("__name__")
        if module == "numba.cuda.compiler":
            device = frame.f_locals.get("device")
            if isinstance(device, bool):
                return not device
        if module == "numba_cuda_mlir.mlir_compiler" and code.co_name == "compile_mlir":
            return (not frame.f_locals.get("targetoptions", {}).get("device", False)
                    and frame.f_locals.get("pyfunc") is func)
        frame = frame.f_back
    return False


_WRONG = {
    (SHARED, _LOCAL): "is a cuda.local.array (thread-local memory); it must be shared memory: "
                      "a cuda.shared.array (or a slice of one)",
    (SHARED, _KERNEL_ARG): "is a kernel parameter (global memory); it must be shared memory: "
                           "a cuda.shared.array (or a slice of one)",
    (GLOBAL, _LOCAL): "is a cuda.local.array (thread-local memory); it must be global memory "
                      "(a device array passed to the kernel)",
    (GLOBAL, _SHARED_ARRAY): "is a cuda.shared.array; it must be global memory (a device array "
                             "passed to the kernel)",
}


def _check_block(func_ir, block, in_kernel):
    from ._frontend import errors

    for stmt in block.body:
        if not (type(stmt).__name__ == "Assign" and type(stmt.value).__name__ == "Expr"
                and stmt.value.op == "call"):
            continue
        fn = _value(func_ir, stmt.value.func)
        operands = OPERANDS.get(fn) if fn is not None else None
        if not operands:
            continue
        args, kws = stmt.value.args, dict(stmt.value.kws)
        for pos, (name, space) in operands.items():
            arg = args[pos] if pos < len(args) else kws.get(name)
            if arg is None:
                continue
            wrong = _WRONG.get((space, _origin(func_ir, arg, in_kernel)))
            if wrong:
                shown = name if arg.name in (name, "") or arg.name.startswith("$") \
                    else f"{name} ({arg.name})"
                raise errors.TypingError(
                    f"{fn.__module__.rpartition('.')[2]}.{fn.__name__}: {shown} {wrong}",
                    loc=stmt.loc)


def install():
    """Register the check with the front end's rewrites (once), at the stage where the
    intrinsics' calls are still calls (``ADDRESS_CHECK_STAGE``: numba-cuda-mlir inlines their
    overloads in its typed pipeline, before its after-inference rewrites)."""
    if OPERANDS:
        return
    from ._frontend import rewrites, ADDRESS_CHECK_STAGE

    OPERANDS.update(_table())

    @rewrites.register_rewrite(ADDRESS_CHECK_STAGE)
    class AddressSpaceCheck(rewrites.Rewrite):
        """Raises on an intrinsic operand in the wrong address space; rewrites nothing."""

        def __init__(self, state=None):
            super().__init__(state)
            self._in_kernel = None
            self._arg_types = getattr(state, "args", None)

        def in_kernel(self, index, dropped):
            # Whether parameter `index`, indexed down by `dropped` dimensions, is still an array
            # of a kernel (asked only of an operand that is a parameter: the stack walk is then
            # once per function compiled). Before inference (numba-cuda-mlir) an operand that
            # is no array (out[0]) is left to the intrinsic's typing, whose error says so.
            if self._in_kernel is None:
                self._in_kernel = _compiling_a_kernel(self._func)
            arg_types = self._arg_types
            if arg_types is not None and index < len(arg_types):
                from ._frontend import types

                t = arg_types[index]
                return self._in_kernel and isinstance(t, types.Array) and t.ndim > dropped
            return self._in_kernel

        def match(self, func_ir, block, typemap, calltypes):
            self._func = func_ir.func_id.func
            _check_block(func_ir, block, self.in_kernel)
            return False
