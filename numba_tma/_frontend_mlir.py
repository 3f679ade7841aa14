"""numba-cuda-mlir's forms of :mod:`numba_tma._frontend`'s names (see its docstring): the public
API from ``numba_cuda_mlir``, the extension API bound to its extension typing registry, the
internals under ``numba_cuda_mlir.numba_cuda.`` (the numba-cuda it bundles), and the IR
intrinsics as MLIR (LLVM dialect) lowerings.

Local workarounds of numba-cuda-mlir 0.6.0 defects are applied at import, each named in
``docs/front_ends.md``.
"""

import contextlib
import os
import threading

from numba_cuda_mlir import cuda
from numba_cuda_mlir import extending as _ext
from numba_cuda_mlir.cuda import libdevice
from numba_cuda_mlir.numba_cuda.core import config as _config, errors
from numba_cuda_mlir.numba_cuda.np.numpy_support import from_dtype

# numba_cuda_mlir.types re-exports part of the bundled numba-cuda's type system (plus MLIR-only
# types numba_tma does not use); numba_tma's typing uses the whole of it (types.unliteral ...).
from numba_cuda_mlir.numba_cuda import types

__all__ = ["cuda", "types", "errors", "config", "from_dtype", "overload",
           "intrinsic", "register_jitable", "libdevice", "address_of", "tail", "trap",
           "globaltimer", "address_int", "as_u64", "as_u32", "array_words", "ARRAY_POINTER_WORDS",
           "UNROLL_IN_SOURCE", "ADDRESS_CHECK_STAGE"]

intrinsic = _ext.intrinsic


class _Config:
    """The bundled numba-cuda's config, plus numba-cuda's ``ENABLE_CUDASIM`` that numba_tma's
    simulator branches read: numba-cuda-mlir has no simulator."""

    ENABLE_CUDASIM = False

    def __getattr__(self, name):
        return getattr(_config, name)


config = _Config()

# numba-cuda-mlir's overload and register_jitable need a typing registry; numba_tma's
# declarations go in the one its compiler contexts already load (the extension API's), so they
# keep numba-cuda's call form. (Each registration refreshes the contexts itself.)
_TYPING = _ext.typing_registry


def overload(func, *args, **kwargs):
    """``numba_cuda_mlir.extending.overload`` on that typing registry, inlined by default: the
    ``.cu`` link of a declaration called inside a non-inlined overload is lost (see
    ``docs/front_ends.md``)."""
    kwargs.setdefault("typing_registry", _TYPING)
    kwargs.setdefault("inline", "always")
    return _ext.overload(func, *args, **kwargs)


def register_jitable(*args, **kwargs):
    """``numba_cuda_mlir.extending.register_jitable`` on that typing registry."""
    kwargs.setdefault("typing_registry", _TYPING)
    return _ext.register_jitable(*args, **kwargs)


# ------------------------------------------------------------------ internals, loaded lazily
_NC = "numba_cuda_mlir.numba_cuda."
#: The internals :mod:`numba_tma._frontend` loads at their first use.
INTERNALS = {
    # name: (module, attribute or None for the module itself)
    "driver": (_NC + "cudadrv.driver", "driver"),
    "driver_module": (_NC + "cudadrv.driver", None),
    "binding": (_NC + "cudadrv.driver", "binding"),
    "MemoryPointer": (_NC + "cudadrv.driver", "MemoryPointer"),
    "CudaAPIError": (_NC + "cudadrv.driver", "CudaAPIError"),
    "CudaDriverError": (_NC + "cudadrv.error", "CudaDriverError"),
    "DeviceNDArray": (_NC + "cudadrv.devicearray", "DeviceNDArray"),
    "DeviceNDArrayBase": (_NC + "cudadrv.devicearray", "DeviceNDArrayBase"),
    "LinkableCode": (_NC + "cudadrv.linkable_code", "LinkableCode"),
    "nvrtc": (_NC + "cudadrv.nvrtc", None),
    "compiler": (_NC + "compiler", None),
    "dispatcher": (_NC + "dispatcher", None),
    "Kernel": (_NC + "dispatcher", "_Kernel"),
    "global_compiler_lock": (_NC + "core.compiler_lock", "global_compiler_lock"),
    "rewrites": (_NC + "core.rewrites", None),
    "sigutils": (_NC + "core.sigutils", None),
    "NumbaPerformanceWarning": (_NC + "core.errors", "NumbaPerformanceWarning"),
    "bundled_transpose": (_NC + "kernels.transpose", None),
    "cuda_config": (_NC + "core.config", None),
    "codegen": (_NC + "codegen", None),
}


# ------------------------------------------------------------------ kernel parameters
def array_words(ptr, shape, strides, itemsize):
    """The parameter words of an array argument of a kernel: its memref descriptor, each field a
    parameter of its own (``allocated pointer, aligned pointer, offset, sizes..., strides...``,
    offset and strides in elements)."""
    return [ptr, ptr, 0, *shape, *(s // itemsize for s in strides)]


#: Where :func:`array_words` puts the data address.
ARRAY_POINTER_WORDS = (0, 1)

# Its pipeline leaves an inlined function's constant loops loops, their index dynamic and the
# accumulators in local memory: numba_tma._unroll writes them out in the source.
UNROLL_IN_SOURCE = True

# The address-space check reads the calls of numba_tma's intrinsics before type inference: its
# typed pipeline inlines their overloads (inline="always") before the after-inference rewrites run.
ADDRESS_CHECK_STAGE = "before-inference"


# ------------------------------------------------------------------- the IR intrinsics
# MLIR codegen: (builder: MLIRLower, target, args, kwargs); numba-cuda-mlir runs it only for a
# codegen defined outside its vendored numba-cuda. An array is a memref whose LLVM form is the
# descriptor {allocated ptr, aligned ptr, offset, sizes[n], strides[n]} (offset and strides in
# elements).
def _mlir():
    from numba_cuda_mlir._mlir import ir
    from numba_cuda_mlir._mlir.dialects import arith, builtin, llvm
    from numba_cuda_mlir import lowering_utilities as lu
    return ir, builtin, llvm, lu, arith


@intrinsic
def address_of(typingctx, arr):
    """Generic address of ``arr``'s first element (a ``void*``), for the C wrappers' pointer
    operands (as numba-cuda's form: the aligned pointer plus the memref's offset)."""
    if not isinstance(arr, types.Array):
        raise errors.TypingError(f"expected a numba array, got {arr}")

    def codegen(builder, target, args, kwargs):
        _, _, _, lu, _ = _mlir()
        ary, = builder.load_vars(args)
        builder.store_var(target, lu.memref_data_pointer(ary))

    return types.voidptr(arr), codegen


@intrinsic
def tail(typingctx, arr, i):
    """``arr[i:]`` of a 1-D array without slice normalisation; the caller guarantees
    ``0 <= i <= len(arr)`` (see numba-cuda's form)."""
    if not (isinstance(arr, types.Array) and arr.ndim == 1):
        raise errors.TypingError(f"tail: expected a 1-D numba array, got {arr}")
    if not isinstance(i, types.Integer):
        raise errors.TypingError(f"tail: expected an integer start, got {i}")

    def codegen(builder, target, args, kwargs):
        ir, builtin, llvm, lu, arith = _mlir()
        ary, idx = builder.load_vars(args)
        i64 = ir.IntegerType.get_signless(64)
        idx = lu.convert(idx, i64, signed=i.signed)
        mr_type = ary.type
        desc_type = lu.memref_descriptor_type(1)
        desc = builtin.unrealized_conversion_cast([desc_type], [ary])
        # Moving the offset, not the pointer, keeps the pointer's provenance (its address
        # space) for LLVM and works for every layout: the offset counts elements.
        offset = llvm.extractvalue(i64, desc, [2])
        stride = llvm.extractvalue(i64, desc, [4, 0])
        size = llvm.extractvalue(i64, desc, [3, 0])
        offset = arith.addi(offset, arith.muli(idx, stride))
        desc = llvm.insertvalue(desc, offset, [2])
        desc = llvm.insertvalue(desc, arith.subi(size, idx), [3, 0])
        builder.store_var(target, builtin.unrealized_conversion_cast([mr_type], [desc]))

    return arr(arr, i), codegen


@intrinsic
def trap(typingctx):
    """PTX ``trap;`` (SASS ``BPT.TRAP``): ends the kernel with an error. Any thread."""
    def codegen(builder, target, args, kwargs):
        _, _, llvm, _, _ = _mlir()
        llvm.inline_asm(None, [], "trap;", "", has_side_effects=True)

    return types.void(), codegen


@intrinsic
def globaltimer(typingctx):
    """The GPU's nanosecond clock, PTX ``%globaltimer`` (uint64). Any thread."""
    def codegen(builder, target, args, kwargs):
        ir, _, llvm, _, _ = _mlir()
        builder.store_var(target, llvm.inline_asm(
            ir.IntegerType.get_signless(64), [], "mov.u64 $0, %globaltimer;", "=l",
            has_side_effects=True))

    return types.uint64(), codegen


@intrinsic
def address_int(typingctx, ptr):
    """A ``void*`` as a uint64 (see numba-cuda's form)."""
    def codegen(builder, target, args, kwargs):
        ir, _, llvm, _, _ = _mlir()
        value, = builder.load_vars(args)
        builder.store_var(target, llvm.ptrtoint(ir.IntegerType.get_signless(64), value))

    return types.uint64(types.voidptr), codegen


def _int_cast(value, width):
    def codegen(builder, target, args, kwargs):
        ir, _, _, lu, _ = _mlir()
        v, = builder.load_vars(args)
        builder.store_var(target, lu.convert(v, ir.IntegerType.get_signless(width),
                                             signed=value.signed))
    return codegen


@intrinsic
def as_u64(typingctx, value):
    """An integer as a uint64."""
    if not isinstance(value, types.Integer):
        return None
    return types.uint64(value), _int_cast(value, 64)


@intrinsic
def as_u32(typingctx, value):
    """An integer as a uint32."""
    if not isinstance(value, types.Integer):
        return None
    return types.uint32(value), _int_cast(value, 32)


# ------------------------------------------------------------------ the offline compile
_COMPILE_LOCK = threading.RLock()


@contextlib.contextmanager
def _target_cc(cc):
    """``tools.resolve_gpu_target`` asks the driver for the GPU's compute capability even when
    ``chip=`` names the target, so an offline compile fails without a GPU (and, with one of an
    older cc, links for the GPU's): name ``cc`` as the GPU's for the compile."""
    from numba_cuda_mlir import tools

    with _COMPILE_LOCK:
        saved = tools._cached_cc
        tools._cached_cc = (cc[0], cc[1])
        try:
            yield
        finally:
            tools._cached_cc = saved


def compile_ltoir(pyfunc, signature, cc, arch, nvrtc=None, **options):
    """The offline compile's front half on numba-cuda-mlir (``numba_cuda.compile_all``'s role on
    numba-cuda): ``(codes, link_paths, entry)``: the kernel's LTO-IR as the one code, the
    ``.cu`` files its declarations link, and its entry name. ``nvrtc``: what its linker
    compiles those files with during this compile (an object with numba's ``nvrtc.compile``;
    the offline compile's remembers each source's result). ``options``: ``cuda.jit``'s
    (``link``, ``debug``, ``lineinfo``, ``fastmath``, ``opt``, ``launch_bounds``,
    ``max_registers``), those left None not passed."""
    from numba_cuda_mlir.numba_cuda.cudadrv import driver as linker_module

    kws = {k: v for k, v in options.items() if v is not None}
    with _target_cc(cc):
        saved = linker_module.nvrtc
        linker_module.nvrtc = nvrtc or saved
        try:
            # (lto=True: LTO-IR even when nothing is linked, as compile_all(output="ltoir"))
            compiled = cuda.jit(chip=arch, lto=True, **kws)(pyfunc).compile(signature)
        finally:
            linker_module.nvrtc = saved
    md = compiled.metadata
    paths = [os.path.abspath(os.fspath(item)) for item in md.get("linked_external_link_items", ())
             if isinstance(item, (str, os.PathLike))]
    return [md["ltoir"]], paths, md["func_name"]


# ------------------------------------------------------------ local workarounds (0.6.0)
def _patch_void_c_abi_calls():
    """A call of a void ``abi="c"`` declaration leaves its result variable unset, so the
    ``return lambda: f(...)`` of an overload (and any later use of the None) fails with "not
    found in varmap" (``MLIRLower._lower_call_external_c_abi``). Store the None it stands for."""
    from numba_cuda_mlir._mlir import ir
    from numba_cuda_mlir.mlir_lowering import MLIRLower

    original = MLIRLower._lower_call_external_c_abi
    if getattr(original, "_numba_tma_patched", False):
        return

    def _lower_call_external_c_abi(self, target, fn_value, args):
        original(self, target, fn_value, args)
        if fn_value.sig.return_type in (types.void, types.none) and not self.var_lowered(target):
            self.store_var(target, ir.NoneType.get())

    _lower_call_external_c_abi._numba_tma_patched = True
    MLIRLower._lower_call_external_c_abi = _lower_call_external_c_abi


_patch_void_c_abi_calls()


def _patch_callee_link_items():
    """A device function compiled on its own (a ``cuda.jit(device=True)`` callee, as the
    GEMM's) hands its caller only the LTO-IR already in its linker
    (``MLIRLower._record_ltoirs_from_linker``), not the ``.cu`` files its declarations link:
    the kernel then calls an unresolved extern. Hand those files to the caller too (the
    caller links each file once)."""
    from numba_cuda_mlir.mlir_lowering import MLIRLower

    create, record = MLIRLower._create_resolved_linker, MLIRLower._record_ltoirs_from_linker
    if getattr(record, "_numba_tma_patched", False):
        return

    def _create_resolved_linker(self):
        linker = create(self)
        linker._numba_tma_link_items = tuple(self._linked_external_link_items)
        return linker

    def _record_ltoirs_from_linker(self, linker):
        record(self, linker)
        for item in getattr(linker, "_numba_tma_link_items", ()):
            self.link_external_item(item)

    _record_ltoirs_from_linker._numba_tma_patched = True
    MLIRLower._create_resolved_linker = _create_resolved_linker
    MLIRLower._record_ltoirs_from_linker = _record_ltoirs_from_linker


_patch_callee_link_items()


def _lower_array_itemsize():
    """``array.itemsize`` types but has no lowering (``lower_getattr_assign`` raises
    NotImplementedError); numba_tma's copies size their transactions with it. A constant."""
    from numba_cuda_mlir._mlir import ir
    from numba_cuda_mlir._mlir.dialects import arith
    from numba_cuda_mlir.lowering_utilities import storage_itemsize_bytes

    @_ext.lowering_registry.lower_getattr(types.Array, "itemsize")
    def _itemsize(context, builder, target, array):
        dtype = builder.get_numba_type(array.name).dtype
        builder.store_var(target, arith.constant(ir.IntegerType.get_signless(64),
                                                 storage_itemsize_bytes(dtype)))

    _ext.refresh_registries(typing=False, target=True, include_uninitialized_cuda=False)


_lower_array_itemsize()


def _lower_threadfences():
    """``cuda.threadfence``, ``threadfence_block`` and ``threadfence_system`` type but have no
    lowering; numba-cuda lowers them to NVVM's ``membar`` (PTX ``membar.{gl,cta,sys}``, which
    sm_70+ runs as ``fence.sc.{gpu,cta,sys}``). The same PTX, as inline asm with a memory
    clobber."""
    from numba_cuda_mlir._mlir.dialects import llvm

    for stub, level in ((cuda.threadfence, "gl"), (cuda.threadfence_block, "cta"),
                        (cuda.threadfence_system, "sys")):
        def codegen(builder, target, args, kwargs, _asm=f"membar.{level};"):
            llvm.inline_asm(None, [], _asm, "~{memory}", has_side_effects=True)
            builder.store_var(target, None)
        _ext.lowering_registry.lower(stub)(codegen)
    _ext.refresh_registries(typing=False, target=True, include_uninitialized_cuda=False)


_lower_threadfences()


def _patch_arch_specific_target():
    """Without ``chip=``, a kernel compiles for ``sm_90`` on a cc 9.0 GPU, where numba-cuda
    compiles ``sm_90a``: the sm_90a-only instructions (``wgmma``, ``setmaxnreg``,
    ``tensormap.replace``) then fail in ptxas. Name ``sm_90a`` there, as numba-cuda does."""
    from numba_cuda_mlir import mlir_lowering, tools

    original = tools.resolve_gpu_target
    if getattr(original, "_numba_tma_patched", False):
        return

    def resolve_gpu_target(targetoptions=None):
        targetoptions = {} if targetoptions is None else targetoptions
        if not targetoptions.get("chip") and tools.get_gpu_compute_capability(tuple) == (9, 0):
            targetoptions = dict(targetoptions, chip="sm_90a")
        return original(targetoptions)

    resolve_gpu_target._numba_tma_patched = True
    tools.resolve_gpu_target = mlir_lowering.resolve_gpu_target = resolve_gpu_target


_patch_arch_specific_target()


def _patch_plane_collapse():
    """Taking a plane of a 3-D array (``buf[i]``) builds a ``memref.collapse_shape`` whose
    result type marks every stride dynamic, where MLIR's verifier wants the static stride of
    a group that ends in a static size or holds one dimension (``lowering/numpy.py``
    ``_rank_reducing_subview``): an internal compiler error. Give it the type MLIR computes
    (``computeCollapsedLayoutMap``)."""
    import types as pytypes
    from numba_cuda_mlir._mlir import ir
    from numba_cuda_mlir.lowering import numpy as lowering_numpy

    memref = lowering_numpy.memref
    if getattr(memref, "_numba_tma_patched", False):
        return

    def collapse_shape(result_type, src, reassociation, *args, **kwargs):
        source = ir.MemRefType(src.type)
        shape = source.shape
        layout = ir.StridedLayoutAttr(source.layout)
        strides = []
        for group in reassociation:
            group = list(group)
            while len(group) > 1 and shape[group[-1]] == 1:    # a size-1 dim's stride is moot
                group.pop()
            dynamic = len(group) > 1 and ir.ShapedType.is_dynamic_size(shape[group[-1]])
            strides.append(ir.ShapedType.get_dynamic_stride_or_offset() if dynamic
                           else layout.strides[group[-1]])
        result = ir.MemRefType(result_type)
        result_type = ir.MemRefType.get(
            result.shape, result.element_type,
            layout=ir.StridedLayoutAttr.get(layout.offset, strides),
            memory_space=result.memory_space)
        return memref.collapse_shape(result_type, src, reassociation, *args, **kwargs)

    names = {name: getattr(memref, name) for name in dir(memref) if not name.startswith("__")}
    names.update(collapse_shape=collapse_shape, _numba_tma_patched=True)
    lowering_numpy.memref = pytypes.SimpleNamespace(**names)


_patch_plane_collapse()


def _patch_alias_analysis():
    """Dead-code elimination drops a store through an array read from a tuple (the user
    epilogue's ``pre[row, col] = x``, its ``pre`` an item of the arguments' tuple ``ep``) when
    it cannot link the array to an argument (``core/ir_utils.py`` ``find_potential_aliases``):
    a ``build_tuple`` is not linked to its items, and an item read from a tuple before the tuple
    is known to alias an argument stays out of the argument aliases for good (the blocks are
    visited in label order, not the data's). numba-cuda-mlir inlines device functions into the
    kernel's IR, which puts those stores in reach of the elimination that inlining an
    ``@overload`` runs. Link a built tuple to its items, and make every alias of an argument
    alias an argument."""
    from numba_cuda_mlir.numba_cuda.core import ir, ir_utils

    find = ir_utils.find_potential_aliases
    if getattr(find, "_numba_tma_patched", False):
        return
    previous = ir_utils.alias_analysis_extensions.get(ir.Assign)

    def alias_tuple_items(instr, args, typemap, func_ir, alias_map, arg_aliases):
        if previous is not None:
            previous(instr, args, typemap, func_ir, alias_map, arg_aliases)
        expr = instr.value
        if isinstance(expr, ir.Expr) and expr.op == "build_tuple":
            for item in expr.items:
                if not ir_utils.is_immutable_type(item.name, typemap):
                    ir_utils._add_alias(instr.target.name, item.name, alias_map, arg_aliases)

    def find_potential_aliases(*args, **kwargs):
        alias_map, arg_aliases = find(*args, **kwargs)
        while True:
            more = {v for v, aliases in alias_map.items()
                    if v not in arg_aliases and aliases & arg_aliases}
            if not more:
                return alias_map, arg_aliases
            arg_aliases |= more

    find_potential_aliases._numba_tma_patched = True
    ir_utils.alias_analysis_extensions[ir.Assign] = alias_tuple_items
    ir_utils.find_potential_aliases = find_potential_aliases


_patch_alias_analysis()


def _patch_range_next():
    """A ``for`` over a range whose bounds are known only at run time advances its iterator by
    selects on the iteration's validity (``lowering_utilities.RangeObject.next``: ``count =
    valid ? count - 1 : count``, ``iter = valid ? iter + step : iter``), where numba-cuda
    advances it in the branch taken when valid. LLVM does not see through the selects: the
    loop index stays a select on a 64-bit compare, and ptxas computes it per thread and moves
    it to a uniform register (``R2UR``) inside the next wgmma group (the one-block-per-tile
    GEMM's consumer loop). Advance it unconditionally: once the count is spent the loop exits
    and reads neither again."""
    from numba_cuda_mlir import lowering_utilities as lu
    from numba_cuda_mlir._mlir.dialects import arith, memref
    from numba_cuda_mlir._mlir.extras import types as T

    RangeObject = lu.RangeObject
    if getattr(RangeObject.next, "_numba_tma_patched", False):
        return

    def next(self):
        int_type = self._memref.type.element_type
        count, value = self.count, self.iter
        is_valid = arith.cmpi(predicate=arith.CmpIPredicate.sgt, lhs=count,
                              rhs=lu.int_of(0, int_type))
        memref.store(arith.subi(lhs=count, rhs=lu.int_of(1, int_type)), self._memref,
                     [lu.index_of(3)])
        memref.store(arith.addi(lhs=value, rhs=self.step), self._memref, [lu.index_of(4)])
        result = memref.alloca(memref=T.memref(2, int_type), dynamic_sizes=[],
                               symbol_operands=[])
        memref.store(value, result, [lu.index_of(0)])
        memref.store(lu.convert(is_valid, int_type), result, [lu.index_of(1)])
        return result

    next._numba_tma_patched = True
    RangeObject.next = next


_patch_range_next()


def _patch_entry_allocas():
    """Device functions are inlined in MLIR (its ``inline`` pass), which leaves a callee's
    allocas where the call was, outside the caller's entry block; numba-cuda puts every
    ``cuda.local.array`` in the entry block. LLVM's SROA promotes only entry-block allocas, so
    an accumulator array allocated in an inlined function stays in local memory wherever the
    optimizer's other passes cannot remove each of its loads and stores (the stream-K GEMM:
    its 64 accumulators on the stack, 256 B). Before code generation, move each alloca of a
    constant size into its function's entry block."""
    from numba_cuda_mlir import mlir_optimization
    from numba_cuda_mlir._mlir import ir

    original = mlir_optimization.run_pre_codegen_patterns
    if getattr(original, "_numba_tma_patched", False):
        return

    def functions(op):
        if op.name == "llvm.func":
            yield op
            return
        for region in op.regions:
            for block in region.blocks:
                for child in block.operations:
                    yield from functions(child.operation)

    def hoist(func):
        blocks = list(func.regions[0].blocks) if func.regions else []
        if len(blocks) < 2:
            return
        first = blocks[0].operations[0].operation
        for block in blocks[1:]:
            for op in list(block.operations):
                op = op.operation
                if op.name != "llvm.alloca":
                    continue
                size = op.operands[0]
                owner = size.owner         # (a Block for a block argument)
                if isinstance(owner, ir.Block) or owner.name != "llvm.mlir.constant":
                    continue
                constant = owner.operation.clone(ip=ir.InsertionPoint(first))
                op.replace_uses_of_with(size, constant.result)
                op.move_before(first)

    def run_pre_codegen_patterns(module):
        original(module)
        for func in functions(module.operation):
            hoist(func)

    run_pre_codegen_patterns._numba_tma_patched = True
    mlir_optimization.run_pre_codegen_patterns = run_pre_codegen_patterns


_patch_entry_allocas()


def _patch_contiguous_indexing():
    """Every array is a memref with dynamic strides, and an element's address is computed with
    its descriptor's run-time stride even where the array's type is C-contiguous, whose last
    stride is one element (numba-cuda addresses a C array from its shape alone): a 64-bit
    multiply per access, which put transpose_v6's persistent kernel over its 48 registers (32
    B of spills). Index such arrays through a view whose last stride is the constant 1 (a
    dimension of one element, whose stride numpy leaves free, is only ever indexed at 0)."""
    from numba_cuda_mlir import lowering_utilities as lu
    from numba_cuda_mlir._mlir import ir
    from numba_cuda_mlir._mlir.dialects import memref

    load, store = lu.array_element_value_load, lu.array_element_value_store
    if getattr(load, "_numba_tma_patched", False):
        return
    dynamic = ir.ShapedType.get_dynamic_stride_or_offset()

    def unit_stride(array_type, array):
        if getattr(array_type, "layout", None) != "C":
            return array
        mrt = ir.MemRefType(array.type)
        if mrt.rank == 0:
            return array
        static_strides, static_offset = mrt.get_strides_and_offset()
        static_strides = list(static_strides)
        if static_strides[-1] != dynamic:
            return array
        md = memref.extract_strided_metadata(array)
        rank = mrt.rank
        sizes = [s for s, n in zip(md[2:2 + rank], mrt.shape)
                 if n == ir.ShapedType.get_dynamic_size()]
        strides = [s for s, n in zip(md[2 + rank:2 + 2 * rank], static_strides) if n == dynamic]
        strides[-1] = lu.index_of(1)
        offsets = [md[1]] if static_offset == dynamic else []
        return memref.reinterpret_cast(array.type, array, offsets=offsets, sizes=sizes,
                                       strides=strides, static_offsets=[static_offset],
                                       static_sizes=list(mrt.shape),
                                       static_strides=static_strides)

    def array_element_value_load(array_type, array, indices, **kwargs):
        return load(array_type, unit_stride(array_type, array), indices, **kwargs)

    def array_element_value_store(array_type, array, indices, value, **kwargs):
        return store(array_type, unit_stride(array_type, array), indices, value, **kwargs)

    array_element_value_load._numba_tma_patched = True
    lu.array_element_value_load = array_element_value_load
    lu.array_element_value_store = array_element_value_store


_patch_contiguous_indexing()


def _patch_extern_function_typeof():
    """``typeof`` of a ``declare_device`` function makes a new typing template at every call
    (``compiler.typeof_extern_function``), so the same function loaded twice where the loads
    meet (two calls of ``mbarrier._wait`` in a kernel) fails to type: "Cannot unify
    Function(<ExternFunction>) and Function(<ExternFunction>)". Type each function once."""
    from numba_cuda_mlir import compiler as mlir_compiler
    from numba_cuda_mlir.numba_cuda.typing.typeof import typeof_impl

    original = mlir_compiler.typeof_extern_function
    if getattr(original, "_numba_tma_patched", False):
        return

    def typeof_extern_function(val, c):
        typ = val.__dict__.get("_numba_tma_type")
        if typ is None:
            typ = val._numba_tma_type = original(val, c)
        return typ

    typeof_extern_function._numba_tma_patched = True
    mlir_compiler.typeof_extern_function = typeof_extern_function
    typeof_impl.register(mlir_compiler.ExternFunction)(typeof_extern_function)


_patch_extern_function_typeof()
