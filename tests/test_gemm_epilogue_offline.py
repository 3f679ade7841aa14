"""User epilogues without a GPU: the GEMM kernels with each shipped epilogue link for sm_90a with
no call, no stack and no local memory, in fp32 (no fp64 instruction); an identity epilogue
adds no load, store, barrier or wgmma to the plain kernel; the auxiliary output goes through
its own staging boxes and TMA stores; ``check_epilogue`` reports every bad function and
argument by name before anything reaches the driver; the disk cache keys only functions whose
code says all they compute.
"""

import math

import numpy as np
import pytest

from numba_tma import epilogues
from numba_tma._frontend import cuda, types
from numba_tma.kernels.gemm import KernelSpec
from numba_tma.kernels.gemm.choose import NARROW, OVERLAPPED, TALL, WIDE
from numba_tma.kernels.gemm.plan import ARGTYPES, MAP_TYPE
from numba_tma.kernels.gemm.user_epilogue import EpilogueFn, stable
from numba_tma.matmul_epilogue import check_aux, check_epilogue

# matmul() types C-contiguous argument arrays "C" (test_arguments_typed_as_the_kernel_takes_them)
F32V = types.Array(types.float32, 1, "C")
F16M = types.Array(types.float16, 2, "C")
F32M = types.Array(types.float32, 2, "C")
ARGS = {"residual": (F16M,), "bias_gelu_aux": (MAP_TYPE, F32V)}
AUX = ("bias_gelu_aux",)            # the shipped epilogues of the auxiliary-output form


@cuda.jit(device=True)
def bias_gelu_store(acc, row, col, b, pre):
    # bias + GELU writing its pre-activation itself, one store per element (the form any
    # epilogue may use for outputs of its own)
    x = acc + np.float32(b[col])
    pre[row, col] = x
    return epilogues.gelu_tanh(x)


def compiled(cfg, name, in_kind="f16", out_kind="f16", has_beta=False, fn=None, argtypes=None):
    from numba_tma.offline import compile_kernel

    if fn is None:
        fn = epilogues.SHIPPED[name]
    argtypes = argtypes if argtypes is not None else ARGS.get(name, (F32V,))
    epi = None if fn is False else EpilogueFn(fn, argtypes, name in AUX)
    spec = KernelSpec(True, False, in_kind, out_kind, has_beta, "", False, epi)
    return compile_kernel(cfg.kernel(spec), types.void(*(ARGTYPES + (argtypes if epi else ()))))


def assert_clean(kb):
    assert kb.count("HGMMA") > 0
    assert kb.stack_bytes == 0 and kb.local_bytes == 0
    assert kb.spill_stores == 0 and kb.spill_loads == 0
    for op in ("CALL", "LDL", "STL", "DFMA", "DMUL", "DADD"):
        assert kb.count(op) == 0, op


@pytest.mark.parametrize("name", list(epilogues.SHIPPED))
def test_shipped_epilogues_compile_clean(name):
    assert_clean(compiled(NARROW[128], name, "bf16", "bf16"))


@pytest.mark.parametrize("cfg, out_kind, has_beta", [
    (WIDE, "f16", False), (TALL, "f32", True)], ids=["wide", "tall_f32_beta"])
def test_epilogue_on_the_large_tiles(cfg, out_kind, has_beta):
    kb = compiled(cfg, "bias_gelu_aux", out_kind=out_kind, has_beta=has_beta)
    assert_clean(kb)
    assert kb.count("MUFU") > 0                 # (the GELU's tanh is there)


@pytest.mark.parametrize("cfg, out_kind", [(WIDE, "f16"), (NARROW[128], "bf16"),
                                           (NARROW[64], "f16"), (TALL, "f32")],
                         ids=["staged", "slab", "slab_one_consumer", "staged_f32"])
def test_auxiliary_output_goes_through_tma(cfg, out_kind):
    # The auxiliary output is staged and stored as C is: twice C's TMA stores (and, for
    # 16-bit output, stmatrix) of the same epilogue without it, and no store to global memory
    # of its own.
    aux = compiled(cfg, "bias_gelu_aux", out_kind=out_kind)
    plain = compiled(cfg, "bias_gelu", out_kind=out_kind)
    assert_clean(aux)
    ops, base = aux.opcodes(), plain.opcodes()
    assert ops["UTMASTG.2D"] == 2 * base["UTMASTG.2D"]
    staged = "STSM.16.M88.4" if out_kind != "f32" else "STS.64"
    assert ops.get(staged, 0) == 2 * base.get(staged, 0) > 0 or out_kind == "f32"
    assert not any(op.startswith("STG") for op in ops)


def test_overlapped_epilogue_refuses_an_auxiliary_output():
    with pytest.raises(ValueError, match=r"auxiliary output \(aux=\) needs overlap_epilogue=False"):
        compiled(OVERLAPPED[WIDE], "bias_gelu_aux")


@pytest.mark.parametrize("ladder", ["stream_k", "pingpong"])
def test_ladders_refuse_an_auxiliary_output_with_one_staging_box(ladder):
    # The ladders build their own kernels: they ask WgmmaConfig.check_spec too, before building.
    from numba_tma.ladders.gemm_pingpong import PingPongConfig
    from numba_tma.ladders.gemm_stream_k import StreamKConfig

    cfg = (StreamKConfig(256, c_buffers=1) if ladder == "stream_k"
           else PingPongConfig(128, stages=6, c_buffers=1))
    epi = EpilogueFn(epilogues.bias_gelu_aux, (F32V,), True)
    with pytest.raises(ValueError, match=r"auxiliary output \(aux=\) stages C and it in two "
                                         r"boxes per warp: c_buffers must be 2 or 4"):
        cfg.kernel(KernelSpec(True, False, "f16", "f16", False, "", False, epi))


def test_strided_arguments_compile_clean_and_cost_more():
    # A strided argument ("A": run-time strides) compiles clean too; its addresses cost a
    # multiply each, which the contiguous ("C") one, the index plus constants, does without.
    strided = (types.Array(types.float32, 1, "A"), types.Array(types.float32, 2, "A"))
    a = compiled(OVERLAPPED[WIDE], None, fn=bias_gelu_store, argtypes=strided)
    c = compiled(OVERLAPPED[WIDE], None, fn=bias_gelu_store, argtypes=(F32V, F32M))
    assert_clean(a)
    assert sum(c.opcodes().values()) + 256 < sum(a.opcodes().values())


@cuda.jit(device=True)
def identity(acc, row, col):
    return acc


def _memory_and_tensor_ops(kb, twice=()):
    # per opcode: the loads, stores, TMA, barriers and wgmmas of a kernel's SASS (parameter
    # reads left out), those in ``twice`` halved
    kinds = ("LD", "ST", "UTMA", "SYNCS", "HGMMA", "BAR", "RED", "ATOM", "CALL", "MEMBAR")
    return {op: n // 2 if op.startswith(twice) else n for op, n in kb.opcodes().items()
            if op.startswith(kinds) and not op.startswith("LDC")}


@pytest.mark.parametrize("cfg", [NARROW[128], OVERLAPPED[WIDE]], ids=["narrow", "overlapped"])
def test_identity_epilogue_adds_no_memory_traffic(cfg):
    # The epilogue's plumbing (its arguments, the unrolled writers, the inside/edge test) adds
    # no load, store, barrier or wgmma of its own: with an identity function the kernel moves
    # what the plain one moves, in about as many registers. (The box writers are there twice, for
    # boxes inside C and across its edge: each box runs one.)
    plain = compiled(cfg, None, fn=False, argtypes=())
    ident = compiled(cfg, None, fn=identity, argtypes=())
    twice = ("STSM",) if cfg.persistent is False else ()
    assert _memory_and_tensor_ops(ident, twice) == _memory_and_tensor_ops(plain)
    assert ident.registers <= plain.registers + 8 and ident.stack_bytes == 0


class FakeArray:
    """A device array's interface, no memory behind it (nothing here launches)."""

    def __init__(self, shape, typestr="<f4", ptr=0x7F0000000000, strides=None):
        self.shape = shape
        self.__cuda_array_interface__ = {"shape": shape, "typestr": typestr, "data": (ptr, False),
                                         "strides": strides, "version": 3}


@pytest.fixture(autouse=True)
def one_device(monkeypatch):
    # FakeArray's address is no allocation: on a host with several GPUs the device check would
    # ask the driver whose memory it is. These tests check what comes before that question.
    import numba_tma.operands

    monkeypatch.setattr(numba_tma.operands, "_device_count", lambda: 1)


def plain_python(acc, row, col):
    return acc


@cuda.jit(device=True)
def returns_a_tuple(acc, row, col):
    return acc, acc


@cuda.jit(device=True)
def does_not_type(acc, row, col, v):
    return acc + v.no_such_attribute


@pytest.mark.parametrize("fn, args, exc, match", [
    (plain_python, (), TypeError, r"epilogue must be a @cuda.jit\(device=True\).*decorate"),
    (None, (), TypeError, "epilogue must be"),
    (returns_a_tuple, (), TypeError,
     r"returns_a_tuple\(acc: float32.*\) returns .*a pair is the auxiliary-output form"),
    (does_not_type, (1.0,), TypeError, r"does_not_type\(.*float64\) does not compile"),
    (epilogues.bias, [FakeArray((48,))][0], TypeError, "epilogue_args must be a tuple"),
    (epilogues.bias, (FakeArray((49,)),), ValueError,
     r"epilogue_args\[0\] must have shape \(N\) = \(48,\) for bias on this 64 x 48 output"),
    (epilogues.residual, (FakeArray((64, 48), "<V2"),), TypeError,
     r"epilogue_args\[0\] has dtype"),
    (epilogues.bias, (np.ones(48, np.float32),), TypeError, r"epilogue_args\[0\].*host"),
    (epilogues.bias, ("x",), TypeError, r"epilogue_args\[0\] must be a CUDA array or a number"),
    (epilogues.bias, (FakeArray((48,)), 1.0), TypeError, r"bias takes 1 argument"),
    (epilogues.bias, (2 ** 70,), ValueError, r"epilogue_args\[0\] = .* does not fit"),
])
def test_bad_epilogue_named_before_the_driver(fn, args, exc, match):
    with pytest.raises(exc, match=match):
        check_epilogue(fn, args, 64, 48)


def test_auxiliary_form_needs_a_pair():
    with pytest.raises(TypeError, match=r"bias\(acc: float32.*\) returns float32; with aux= it "
                                        r"must return a pair"):
        check_epilogue(epilogues.bias, (FakeArray((48,)),), 64, 48, aux=True)
    check_epilogue(returns_a_tuple, (), 64, 48, aux=True)


_A, _B, _OUT, _AUX = (0x7F0000000000 + i * 0x100000 for i in range(4))


@pytest.mark.parametrize("aux, exc, match", [
    (FakeArray((64, 48), "<f4", _AUX), TypeError, r"aux must have out's dtype \(float16\)"),
    (FakeArray((64, 40), "<f2", _AUX), ValueError, r"aux must have shape \(64, 48\) for a"),
    (FakeArray((64, 48), "<f2", _AUX, strides=(2, 128)), ValueError, "aux must be row-major"),
    (FakeArray((64, 48), "<f2", _AUX + 8), ValueError, r"aux's data address .* 16-byte"),
    (FakeArray((64, 48), "<f2", _A), ValueError, "aux overlaps a"),
    (FakeArray((64, 48), "<f2", _OUT + 64), ValueError, "aux overlaps out"),
])
def test_bad_aux_named_before_the_driver(aux, exc, match):
    a = FakeArray((64, 32), "<f2", _A)
    b = FakeArray((32, 48), "<f2", _B)
    out = FakeArray((64, 48), "<f2", _OUT)
    with pytest.raises(exc, match=match):
        check_aux(aux, a, b, out)
    assert check_aux(FakeArray((64, 48), "<f2", _AUX), a, b, out).shape == (64, 48)


def test_arguments_typed_as_the_kernel_takes_them():
    epi, values = check_epilogue(bias_gelu_store,
                                 (FakeArray((48,)), FakeArray((64, 48), "<f2")), 64, 48)
    assert epi.argtypes == (F32V, F16M) and epi.fn is bias_gelu_store and not epi.aux
    assert [v.__cuda_array_interface__["shape"] for v in values] == [(48,), (64, 48)]
    epi, _ = check_epilogue(bias_gelu_store, (FakeArray((48,), strides=(8,)),
                                              FakeArray((64, 48), strides=(4, 256))), 64, 48)
    assert epi.argtypes == (types.Array(types.float32, 1, "A"),
                            types.Array(types.float32, 2, "A"))
    # the auxiliary-output form: the kernel takes aux's tensor map before the user's arguments
    epi, values = check_epilogue(epilogues.bias_gelu_aux, (FakeArray((48,)),), 64, 48, aux=True)
    assert epi == (epilogues.bias_gelu_aux, (MAP_TYPE, F32V), True) and len(values) == 1

    @cuda.jit(device=True)
    def scaled(acc, row, col, s, flag, n):
        return acc * s if flag else acc + n

    epi, values = check_epilogue(scaled, (np.float32(0.5), True, 3), 64, 48)
    assert epi.argtypes == (types.float32, types.boolean, types.int64)
    assert values == (0.5, True, 3)


def test_stable_functions_only_reach_the_disk_cache():
    assert all(stable(fn) for fn in epilogues.SHIPPED.values())
    table = np.arange(4, dtype=np.float32)

    @cuda.jit(device=True)
    def captures_an_array(acc, row, col):
        return acc * table[0]

    @cuda.jit(device=True)
    def captures_a_number(acc, row, col):
        return acc * math.pi

    assert not stable(captures_an_array)
    assert stable(captures_a_number)


def test_readme_epilogue_types_as_written():
    # The README's user-written epilogue: its definitions run, and its function types for the
    # arguments its call passes (a float32 bias of N, an np.float32 slope).
    import pathlib
    import re

    from test_readme_examples import as_front_end

    readme = (pathlib.Path(__file__).resolve().parents[1] / "README.md").read_text()
    (block,) = [b for b in re.findall(r"```python\n(.*?)```", readme, re.S) if "epilogue=" in b]
    scope = {}
    exec(as_front_end(block.split("\nout = ")[0]), scope)
    epi, _ = check_epilogue(scope["bias_leaky_relu"], (FakeArray((48,)), np.float32(0.1)),
                            64, 48)
    assert epi.argtypes == (F32V, types.float32)
