"""Offline (no GPU) checks of the TMA prefetches, tensor reductions and non-tensor bulk copies:
each lands in sm_90a SASS as its instruction, inlined (no CALL, no local memory); bad operands
fail at compile time naming the argument; the host-side rule checks need no GPU either."""

import os
from types import SimpleNamespace

import numpy as np
import pytest

from numba_tma._frontend import cuda, errors
from numba_tma import bulk, mbarrier, tma
from numba_tma.offline import compile_kernel
from sass_checks import check_clean

TypingError = errors.TypingError   # (the front end's: numba-cuda or numba-cuda-mlir)

pytestmark = pytest.mark.skipif(os.environ.get("NUMBA_ENABLE_CUDASIM") == "1",
                                reason="offline compilation needs the real CUDA target")

DESC = "uint64[::1]"


# --- tensor-map prefetch -----------------------------------------------------------------------

def make_prefetch_kernel(rank):
    coords = {1: lambda c: (c,), 2: lambda c: (c, 1), 3: lambda c: (c, 1, 2),
              4: lambda c: (c, 1, 2, 3), 5: lambda c: (c, 1, 2, 3, 4)}[rank]
    coords = cuda.jit(device=True)(coords)

    def kernel(desc, c, out):
        if cuda.threadIdx.x == 0:
            tma.prefetch_descriptor(desc)
        tma.prefetch(desc, coords(c))
        out[0] = 1

    return kernel


@pytest.mark.parametrize("rank", [1, 2, 3, 4, 5])
def test_tma_prefetch_sass(rank):
    kb = compile_kernel(make_prefetch_kernel(rank), f"void({DESC}, int32, int32[::1])")
    check_clean(kb)
    ops = kb.opcodes()
    assert ops[f"UTMAPF.L2.{rank}D"] == 1
    assert ops["UTMACCTL.PF"] == 1                               # prefetch.tensormap


# --- tensor reductions -------------------------------------------------------------------------

# A tile dtype each op accepts (the map's element type decides at run time).
OP_TILE_DTYPE = {"add": np.float32, "min": np.int32, "max": np.uint32, "inc": np.uint32,
                 "dec": np.uint32, "and": np.int32, "or": np.uint64, "xor": np.uint64}


def make_reduce_kernel(op, dtype):
    def kernel(desc, c, out):
        tile = cuda.shared.array(64, dtype, alignment=128)
        if cuda.threadIdx.x == 0:
            tma.reduce(desc, (c,), tile, op)
            tma.reduce(desc, (c, 0), tile, op)
            tma.reduce(desc, (c, 0, 1), tile, op)
            tma.reduce(desc, (c, 0, 1, 2), tile, op)
            tma.reduce(desc, (c, 0, 1, 2, 3), tile, op)
            tma.commit_group()
            tma.wait_group(0)
        out[0] = 1

    return kernel


@pytest.mark.parametrize("op", tma.REDUCE_OPS)
def test_tma_reduce_sass_every_op_and_rank(op):
    kb = compile_kernel(make_reduce_kernel(op, OP_TILE_DTYPE[op]),
                        f"void({DESC}, int32, int32[::1])")
    check_clean(kb)
    ops = kb.opcodes()
    for rank in range(1, 6):
        assert ops[f"UTMAREDG.{rank}D.{op.upper()}"] == 1, sorted(ops)
    assert kb.has("UTMACMDFLUSH") and kb.has("DEPBAR.LE")


def reduce_tile_kernel(desc, c, out):
    tile = cuda.shared.array(128, np.float32, alignment=128)
    tile[cuda.threadIdx.x] = out[cuda.threadIdx.x]
    tma.reduce_tile(desc, (c, 0), tile)                         # op defaults to "add"
    out[0] = 1


def test_tma_reduce_tile_composite_sass():
    kb = compile_kernel(reduce_tile_kernel, f"void({DESC}, int32, float32[::1])")
    check_clean(kb)
    assert kb.opcodes()["UTMAREDG.2D.ADD"] == 1
    assert kb.has("FENCE.VIEW.ASYNC.S") and kb.has("UTMACMDFLUSH") and kb.has("DEPBAR.LE")


# --- non-tensor bulk copies --------------------------------------------------------------------

def bulk_copy_kernel(src, dst, n):
    buf = cuda.shared.array(1024, np.float32, alignment=128)
    bars = cuda.shared.array(2, np.uint64)
    mbarrier.init_block(bars, 1)
    if cuda.threadIdx.x == 0:
        bulk.prefetch(src[256:], 4096)
        bulk.load(buf, src, 4096, bars)                         # arrive_expect_tx + copy
        mbarrier.arrive_expect_tx(bars[1:], n)
        bulk.copy_global_to_shared(buf[512:], src[n:], n, bars[1:])
    mbarrier.wait(bars, 0)
    mbarrier.wait(bars[1:], 0)
    if cuda.threadIdx.x == 0:
        bulk.copy_shared_to_global(dst[16:], buf, n)
        bulk.commit_group()
        bulk.wait_group_read(0)
        bulk.wait_group(0)


def test_bulk_copy_sass():
    kb = compile_kernel(bulk_copy_kernel, "void(float32[::1], float32[::1], int32)")
    check_clean(kb)
    ops = kb.opcodes()
    assert ops["UBLKCP.S.G"] == 2                               # load + copy_global_to_shared
    assert ops["UBLKCP.G.S"] == 1
    assert ops["UBLKPF.L2"] == 1
    assert kb.count("SYNCS.ARRIVE.TRANS64") >= 2                # the two expect_tx arrivals
    assert kb.has("UTMACMDFLUSH") and kb.has("DEPBAR.LE")


# Every (op, PTX type) the ISA allows for a .global destination, with the numba dtype that
# selects it (bf16 through a uint16 array and ptx_type="bf16") and the SASS it must become.
BULK_REDUCE_CASES = [
    ("add", "u32", "uint32", "UBLKRED.G.S.ADD"),
    ("add", "s32", "int32", "UBLKRED.G.S.ADD.S32"),
    ("add", "u64", "uint64", "UBLKRED.G.S.ADD.U64"),
    ("add", "u64", "int64", "UBLKRED.G.S.ADD.U64"),          # int64 add runs as .u64
    ("add", "f32", "float32", "UBLKRED.G.S.ADD.F32.RN"),
    ("add", "f64", "float64", "UBLKRED.G.S.ADD.F64.RN"),
    ("add", "f16", "float16", "UBLKRED.G.S.ADD.F16.RN"),
    ("add", "bf16", "uint16", "UBLKRED.G.S.ADD.BF16.RN"),
    ("min", "u32", "uint32", "UBLKRED.G.S.MIN"),
    ("min", "s32", "int32", "UBLKRED.G.S.MIN.S32"),
    ("min", "u64", "uint64", "UBLKRED.G.S.MIN.U64"),
    ("min", "s64", "int64", "UBLKRED.G.S.MIN.S64"),
    ("min", "f16", "float16", "UBLKRED.G.S.MIN.F16.RN"),
    ("min", "bf16", "uint16", "UBLKRED.G.S.MIN.BF16.RN"),
    ("max", "u32", "uint32", "UBLKRED.G.S.MAX"),
    ("max", "s32", "int32", "UBLKRED.G.S.MAX.S32"),
    ("max", "u64", "uint64", "UBLKRED.G.S.MAX.U64"),
    ("max", "s64", "int64", "UBLKRED.G.S.MAX.S64"),
    ("max", "f16", "float16", "UBLKRED.G.S.MAX.F16.RN"),
    ("max", "bf16", "uint16", "UBLKRED.G.S.MAX.BF16.RN"),
    ("inc", "u32", "uint32", "UBLKRED.G.S.INC"),
    ("dec", "u32", "uint32", "UBLKRED.G.S.DEC"),
    ("and", "b32", "int32", "UBLKRED.G.S.AND"),
    ("and", "b64", "uint64", "UBLKRED.G.S.AND.U64"),
    ("or", "b32", "uint32", "UBLKRED.G.S.OR"),
    ("or", "b64", "int64", "UBLKRED.G.S.OR.U64"),
    ("xor", "b32", "int32", "UBLKRED.G.S.XOR"),
    ("xor", "b64", "uint64", "UBLKRED.G.S.XOR.U64"),
]


def test_bulk_reduce_cases_cover_the_isa_table():
    covered = {(op, ty) for op, ty, _, _ in BULK_REDUCE_CASES}
    assert covered == {(op, ty) for op, tys in bulk.REDUCE_TYPES.items() for ty in tys}


@pytest.mark.parametrize("op,ptx_type,dtype,sass", BULK_REDUCE_CASES)
def test_bulk_reduce_sass(op, ptx_type, dtype, sass):
    dt = np.dtype(dtype)
    override = "bf16" if ptx_type == "bf16" else None
    assert bulk.reduce_ptx_type(op, dt, override) == ptx_type

    def kernel(dst, n):
        buf = cuda.shared.array(64, dt, alignment=128)
        if cuda.threadIdx.x == 0:
            bulk.reduce(dst[n:], buf, 128, op, override)
            bulk.commit_group()
            bulk.wait_group(0)

    kb = compile_kernel(kernel, f"void({dt.name}[::1], int32)")
    check_clean(kb)
    assert [o for o in kb.opcodes() if o.startswith("UBLK")] == [sass]


# --- compile-time errors -----------------------------------------------------------------------

def k_reduce_runtime_op(desc, op):
    tile = cuda.shared.array(64, np.float32)
    tma.reduce(desc, (0,), tile, op)


def k_reduce_bad_op(desc):
    tile = cuda.shared.array(64, np.float32)
    tma.reduce(desc, (0,), tile, "mul")


def k_reduce_inc_f32(desc):
    tile = cuda.shared.array(64, np.float32)
    tma.reduce(desc, (0, 0), tile, "inc")


def k_reduce_add_f64(desc):
    tile = cuda.shared.array(64, np.float64)
    tma.reduce(desc, (0, 0), tile)


def k_reduce_xor_f32(desc):
    tile = cuda.shared.array(64, np.float32)
    tma.reduce(desc, (0, 0), tile, "xor")


def make_k_reduce_bitwise_i64(op):
    def kernel(desc):
        tile = cuda.shared.array(64, np.int64)
        tma.reduce(desc, (0, 0), tile, op)

    return kernel


def k_reduce_rank6(desc):
    tile = cuda.shared.array(64, np.float32)
    tma.reduce(desc, (0, 0, 0, 0, 0, 0), tile, "add")


def k_prefetch_float_coord(desc):
    tma.prefetch(desc, (0, 1.5))


def k_prefetch_bad_desc(desc):
    tma.prefetch_descriptor(desc)


def k_bulk_reduce_min_f32(dst):
    buf = cuda.shared.array(64, np.float32)
    bulk.reduce(dst, buf, 256, "min")


def k_bulk_reduce_inc_i32(dst):
    buf = cuda.shared.array(64, np.int32)
    bulk.reduce(dst, buf, 256, "inc")


def k_bulk_reduce_u16(dst):
    buf = cuda.shared.array(64, np.uint16)
    bulk.reduce(dst, buf, 128, "add")


def k_bulk_reduce_mixed(dst):
    buf = cuda.shared.array(64, np.int32)
    bulk.reduce(dst, buf, 256, "add")


def k_bulk_reduce_bad_ptx_type(dst):
    buf = cuda.shared.array(64, np.float32)
    bulk.reduce(dst, buf, 256, "add", "bf16")


def k_bulk_copy_bad_bar(src):
    buf = cuda.shared.array(64, np.float32)
    bar = cuda.shared.array(1, np.int32)
    bulk.copy_global_to_shared(buf, src, 256, bar)


def k_bulk_copy_float_size(src):
    buf = cuda.shared.array(64, np.float32)
    bulk.copy_shared_to_global(src, buf, 256.0)


def k_bulk_prefetch_scalar(src):
    bulk.prefetch(src[0], 256)


@pytest.mark.parametrize("kernel,sig,message", [
    (k_reduce_runtime_op, f"void({DESC}, unicode_type)",
     r"tma.reduce: op must be a compile-time constant string"),
    (k_reduce_bad_op, f"void({DESC})", r"tma.reduce: op = 'mul' is not one of add, min"),
    (k_reduce_inc_f32, f"void({DESC})", r"tma.reduce: op = 'inc' cannot reduce a float32 tile"),
    (k_reduce_add_f64, f"void({DESC})", r"tma.reduce: op = 'add' cannot reduce a float64 tile"),
    (k_reduce_xor_f32, f"void({DESC})", r"tma.reduce: op = 'xor' cannot reduce a float32 tile"),
    (k_reduce_rank6, f"void({DESC})", r"tma.reduce: coords must be a tuple of 1 to 5"),
    # and/or/xor on an INT64 map fault on the H100 (CUDA_ERROR_ILLEGAL_INSTRUCTION): refused.
    *[(make_k_reduce_bitwise_i64(op), f"void({DESC})",
       rf"tma.reduce: op = '{op}' cannot reduce a int64 tile.*UINT32, INT32, UINT64, so src's "
       r"dtype must be one of uint32, int32, uint64 .*dtype='uint64'")
      for op in ("and", "or", "xor")],
    (k_prefetch_float_coord, f"void({DESC})", r"tma.prefetch: coords\[1\] must be an integer"),
    (k_prefetch_bad_desc, "void(float32[::1])", r"tma.prefetch_descriptor: desc must have dtype"),
    (k_bulk_reduce_min_f32, "void(float32[::1])",
     r"bulk.reduce: op = 'min' takes u32, s32, u64, s64, f16, bf16 elements, not float32"),
    (k_bulk_reduce_inc_i32, "void(int32[::1])", r"bulk.reduce: op = 'inc' takes u32 elements"),
    (k_bulk_reduce_u16, "void(uint16[::1])", r"bulk.reduce: a uint16 array is ambiguous"),
    (k_bulk_reduce_mixed, "void(float32[::1])", r"bulk.reduce: src must have dst's dtype float32"),
    (k_bulk_reduce_bad_ptx_type, "void(float32[::1])",
     r"bulk.reduce: ptx_type = 'bf16' is 2 bytes but the arrays' dtype float32 is 4 bytes"),
    (k_bulk_copy_bad_bar, "void(float32[::1])",
     r"bulk.copy_global_to_shared: bar must have dtype uint64"),
    (k_bulk_copy_float_size, "void(float32[::1])",
     r"bulk.copy_shared_to_global: nbytes must be an integer"),
    (k_bulk_prefetch_scalar, "void(float32[::1])", r"bulk.prefetch: src must be an array"),
])
def test_bad_operands_fail_at_compile_time(kernel, sig, message):
    with pytest.raises(TypingError, match=message):
        compile_kernel(kernel, sig)


def k_copy_size_20(src):
    buf = cuda.shared.array(64, np.float32)
    bulk.copy_shared_to_global(src, buf, 20)


def k_load_size_0(src):
    buf = cuda.shared.array(64, np.float32)
    bar = cuda.shared.array(1, np.uint64)
    bulk.load(buf, src, 0, bar)


def k_g2s_too_many_tx_bytes(src):
    buf = cuda.shared.array(64, np.float32)
    bar = cuda.shared.array(1, np.uint64)
    bulk.copy_global_to_shared(buf, src, 1 << 20, bar)


def k_prefetch_size_8(src):
    bulk.prefetch(src, 8)


def k_reduce_size_24(dst):
    buf = cuda.shared.array(64, np.float32)
    bulk.reduce(dst, buf, 24, "add")


@pytest.mark.parametrize("kernel,message", [
    (k_copy_size_20, r"bulk.copy_shared_to_global: nbytes = 20 must be a positive multiple of 16"),
    (k_load_size_0, r"bulk.load: nbytes = 0 must be a positive multiple of 16"),
    (k_g2s_too_many_tx_bytes, r"bulk.copy_global_to_shared: nbytes = 1048576 .*at most 1048575"),
    (k_prefetch_size_8, r"bulk.prefetch: nbytes = 8 must be a positive multiple of 16"),
    (k_reduce_size_24, r"bulk.reduce: nbytes = 24 must be a positive multiple of 16"),
])
def test_constant_sizes_are_checked_at_compile_time(kernel, message):
    # A ValueError, not a TypingError: numba retries a call whose literal argument failed to
    # type with the literal widened to int64, which would accept the bad constant.
    with pytest.raises(ValueError, match=message):
        compile_kernel(kernel, "void(float32[::1])")


def test_runtime_sizes_compile():
    def kernel(src, n):
        buf = cuda.shared.array(64, np.float32, alignment=128)
        if cuda.threadIdx.x == 0:
            bulk.copy_shared_to_global(src, buf, n)
            bulk.commit_group()
            bulk.wait_group_read(0)

    check_clean(compile_kernel(kernel, "void(float32[::1], uint32)"))


def test_reduce_op_defaults_to_add():
    def kernel(dst, n):
        buf = cuda.shared.array(64, np.int32, alignment=128)
        if cuda.threadIdx.x == 0:
            bulk.reduce(dst, buf, n)
            bulk.commit_group()
            bulk.wait_group(0)

    kb = compile_kernel(kernel, "void(int32[::1], int64)")
    check_clean(kb)
    assert kb.opcodes()["UBLKRED.G.S.ADD.S32"] == 1


def test_intrinsics_refuse_host_calls():
    with pytest.raises(RuntimeError, match="device intrinsic"):
        bulk.prefetch(np.zeros(4, np.float32), 16)
    with pytest.raises(RuntimeError, match="device intrinsic"):
        tma.prefetch_descriptor(np.zeros(16, np.uint64))


# --- host-side rules (no GPU) ------------------------------------------------------------------

class FakeDeviceArray:
    """Just a __cuda_array_interface__: what check_operand reads."""

    def __init__(self, shape, typestr, address, strides=None):
        self.__cuda_array_interface__ = {"shape": shape, "typestr": typestr, "strides": strides,
                                         "data": (address, False), "version": 3}


BASE = 0x7F0000000000


def test_check_operand_accepts_aligned_ranges():
    a = FakeDeviceArray((1000,), "<f4", BASE)
    assert bulk.check_operand(a, 16) == BASE
    assert bulk.check_operand(a, 4000) == BASE
    assert bulk.check_operand(a, 3984, offset=4) == BASE + 16
    assert bulk.check_operand(FakeDeviceArray((10, 8), "<f8", BASE), 640) == BASE


@pytest.mark.parametrize("array,nbytes,offset,exc,message", [
    (FakeDeviceArray((1000,), "<f4", BASE), 20, 0, ValueError,
     r"nbytes = 20 must be a positive multiple of 16"),
    (FakeDeviceArray((1000,), "<f4", BASE), 0, 0, ValueError, r"nbytes = 0 must be a positive"),
    (FakeDeviceArray((1000,), "<f4", BASE), 16, 1, ValueError,
     r"src\[1\] is at 0x7f0000000004, not 16-byte aligned"),
    (FakeDeviceArray((1000,), "<f4", BASE + 8), 16, 0, ValueError, r"not 16-byte aligned"),
    (FakeDeviceArray((1000,), "<f4", BASE), 4016, 0, ValueError,
     r"nbytes = 4016 runs past the end of src: 4000 bytes from element 0"),
    (FakeDeviceArray((1000,), "<f4", BASE), 16, 1001, ValueError, r"offset = 1001 must be"),
    (FakeDeviceArray((10, 8), "<f4", BASE, strides=(64, 4)), 16, 0, ValueError,
     r"src must be C-contiguous"),
    (FakeDeviceArray((1000,), "<f4", BASE), 16.0, 0, TypeError, r"nbytes must be an integer"),
    (np.zeros(64, np.float32), 16, 0, TypeError, r"src: .*host numpy.ndarray"),
])
def test_check_operand_rejects(array, nbytes, offset, exc, message):
    with pytest.raises(exc, match=message):
        bulk.check_operand(array, nbytes, offset=offset, name="src")


@pytest.mark.parametrize("op,dtype,ptx_type,message", [
    ("min", "float32", None, r"op = 'min' takes .* not float32"),
    ("add", "int8", None, r"op = 'add' takes .* not int8"),
    ("inc", "int32", None, r"op = 'inc' takes u32 elements, not int32"),
    ("add", "int16", None, r"ambiguous: pass ptx_type='bf16'"),
    ("mul", "float32", None, r"op = 'mul' is not a bulk reduction"),
    ("add", "float32", "f16", r"ptx_type = 'f16' is 2 bytes"),
    ("add", "float32", "x32", r"ptx_type = 'x32' is not a reduction type"),
])
def test_reduce_ptx_type_rejects(op, dtype, ptx_type, message):
    with pytest.raises(ValueError, match=message):
        bulk.reduce_ptx_type(op, dtype, ptx_type)


def fake_map(data_type, dtype):
    plan = SimpleNamespace(data_type_name=f"CU_TENSOR_MAP_DATA_TYPE_{data_type}")
    return SimpleNamespace(plan=plan, dtype=dtype)


def test_check_reduce_host_rules():
    assert tma.check_reduce(fake_map("FLOAT32", "float32"), "add") == "FLOAT32"
    assert tma.check_reduce(fake_map("BFLOAT16", "bfloat16"), "max") == "BFLOAT16"
    assert tma.check_reduce(fake_map("UINT32", "uint32"), "inc") == "UINT32"
    for data_type, op in [("FLOAT32", "min"), ("FLOAT64", "add"), ("INT64", "add"),
                          ("INT32", "inc"), ("UINT16", "add"), ("FLOAT16", "xor"),
                          ("INT64", "and"), ("INT64", "or"), ("INT64", "xor")]:
        with pytest.raises(ValueError, match=f"op = '{op}' cannot reduce a map of {data_type}"):
            tma.check_reduce(fake_map(data_type, data_type.lower()), op)
    with pytest.raises(ValueError, match="not a TMA reduction"):
        tma.check_reduce(fake_map("FLOAT32", "float32"), "mul")
    with pytest.raises(TypeError, match="desc must be a numba_tma.TensorMap"):
        tma.check_reduce(np.zeros(16, np.uint64), "add")
    # 64-bit bitwise: UINT64 maps only (INT64 faults on sm_90); the message says what to do.
    for op in ("and", "or", "xor"):
        assert tma.check_reduce(fake_map("UINT64", "uint64"), op) == "UINT64"
        with pytest.raises(ValueError, match=r"ILLEGAL_INSTRUCTION.*dtype='uint64'"):
            tma.check_reduce(fake_map("INT64", "int64"), op)
    assert tma.check_reduce(fake_map("INT64", "int64"), "min") == "INT64"


def test_tables_agree_with_the_isa():
    # Tensor reductions: the bulk table minus float64 add (cp.reduce.async.bulk.tensor's table),
    # and minus INT64 for the bitwise ops (.b64 on an INT64 map faults on the H100; UINT64 works).
    names = {"u32": "UINT32", "s32": "INT32", "u64": "UINT64", "s64": "INT64", "f32": "FLOAT32",
             "f64": "FLOAT64", "f16": "FLOAT16", "bf16": "BFLOAT16"}
    for op in tma.REDUCE_OPS:
        want = set()
        for ty in bulk.REDUCE_TYPES[op]:
            want |= {"UINT32", "INT32"} if ty == "b32" else {"UINT64", "INT64"} if ty == "b64" \
                else {names[ty]}
        want.discard("FLOAT64")
        if op in ("and", "or", "xor"):
            want.discard("INT64")
        assert set(tma.REDUCE_MAP_TYPES[op]) == want, op


def test_reduce_reference_semantics():
    u32 = np.uint32
    old = np.array([0, 5, 7, 3, 2**32 - 1], u32)
    src = np.array([5, 5, 6, 0, 9], u32)
    np.testing.assert_array_equal(bulk.reduce_reference("inc", old, src), [1, 0, 0, 0, 0])
    np.testing.assert_array_equal(bulk.reduce_reference("dec", old, src), [5, 4, 6, 0, 9])
    np.testing.assert_array_equal(
        bulk.reduce_reference("add", np.array([2**31 - 1], np.int32), np.array([1], np.int32)),
        [-2**31])                                                    # integers wrap
    np.testing.assert_array_equal(
        bulk.reduce_reference("add", np.array([2**63 - 1, -5], np.int64),
                              np.array([1, 3], np.int64)), [-2**63, -2])
    f32 = bulk.reduce_reference("add", np.array([1e-39, 1.0, 3e-38], np.float32),
                                np.array([0.0, 2.0, -2.9e-38], np.float32))
    np.testing.assert_array_equal(f32, [0.0, 3.0, 0.0])              # subnormals flushed
    np.testing.assert_array_equal(bulk.reduce_reference("min", np.array([3, -4], np.int64),
                                                        np.array([-9, 8], np.int64)), [-9, -4])
    np.testing.assert_array_equal(bulk.reduce_reference("xor", np.array([6], np.uint64),
                                                        np.array([3], np.uint64)), [5])
    # bfloat16 bits: computed in float32, rounded to nearest even (1 + 2**-8 is a tie -> 1).
    from numba_tma.warp import bf16_bits, bf16_to_float32
    a = bf16_bits(np.array([1.0, 3.0, -2.0], np.float32))
    b = bf16_bits(np.array([2.0**-8, -5.0, 0.5], np.float32))
    np.testing.assert_array_equal(bf16_to_float32(bulk.reduce_reference("add", a, b, "bf16")),
                                  [1.0, -2.0, -1.5])
    np.testing.assert_array_equal(bf16_to_float32(bulk.reduce_reference("max", a, b, "bf16")),
                                  [1.0, 3.0, 0.5])
    h = bulk.reduce_reference("add", np.array([1.0], np.float16).view(np.uint16),
                              np.array([0.5], np.float16).view(np.uint16), "f16")
    np.testing.assert_array_equal(h.view(np.float16), [1.5])
    with pytest.raises(ValueError, match="one dtype and shape"):
        bulk.reduce_reference("add", np.zeros(2, np.int32), np.zeros(3, np.int32))
