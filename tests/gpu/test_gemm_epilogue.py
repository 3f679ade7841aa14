"""``matmul(..., epilogue=fn, epilogue_args=...)`` on the GPU: every shipped epilogue
(numba_tma.epilogues) and user-written ones, on every kernel family matmul() runs (one block per
tile, persistent, overlapped epilogue, 2-CTA clusters, 256 x 128 and 128 x 192 tiles, the
stream-K and ping-pong ladders), 16-bit and f32 outputs, with ``beta``, at tile multiples and odd
shapes, against torch's float32 epilogue on the same product.

Small-integer operands make the GEMM exact, so the epilogues made of one fp32 add or multiply
(bias, ReLU, scales, residual) compare exactly after the same rounding to the output dtype; the
transcendental ones (SiLU and the accurate GELU: fast ``exp`` and division; libdevice's
``erff``) against torch's within one unit in a 16-bit output's last place (2^-16 relative in
f32), the shipped tanh GELU (the SFU's tanh.approx) within that plus 2^-12 times its input.
Outputs are poisoned (NaN) before each run.
"""

import math

import numpy as np
import pytest

from numba_tma import epilogues, matmul
from numba_tma._frontend import cuda
from numba_tma.kernels.gemm import GemmConfig
from numba_tma.kernels.gemm.choose import (CLUSTER, N192, NARROW, NARROW_PAIRS, OVERLAPPED, TALL,
                                           WIDE)

torch = pytest.importorskip("torch")
F = torch.nn.functional

DT = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32}
SHAPES = [(128, 256, 64), (257, 200, 136), (1, 16, 16), (1000, 1032, 520)]
EXACT = ("bias", "bias_relu", "row_scale", "col_scale", "residual")
_gen = []


def generator():
    """The tests' seeded CUDA generator, made at first use (not at import: compute-sanitizer)."""
    if not _gen:
        _gen.append(torch.Generator(device="cuda"))
        _gen[0].manual_seed(int(np.random.SeedSequence().entropy % 2**31))
    return _gen[0]


def ints(shape, lo=-3, hi=4, dtype=torch.float32):
    return torch.randint(lo, hi, shape, device="cuda", generator=generator()).to(dtype)


def uniform(shape):
    return torch.rand(shape, device="cuda", generator=generator()) * 2 - 1


@cuda.jit(device=True)
def bias_gelu_store(acc, row, col, b, pre):
    # bias + GELU that writes its float32 pre-activation itself, one store per element (the
    # form any epilogue may use for outputs of its own)
    x = acc + np.float32(b[col])
    pre[row, col] = x
    return epilogues.gelu_tanh(x)


EPILOGUES = {**epilogues.SHIPPED, "bias_gelu_store": bias_gelu_store}


def reference(name, p, vec, mat):
    """torch's float32 epilogue ``name`` of the float32 product ``p``."""
    gelu = lambda x: F.gelu(x, approximate="tanh")      # noqa: E731
    return {"bias": lambda: p + vec, "bias_relu": lambda: F.relu(p + vec),
            "bias_gelu": lambda: gelu(p + vec), "bias_gelu_erf": lambda: F.gelu(p + vec),
            "bias_silu": lambda: F.silu(p + vec), "row_scale": lambda: p * vec[:, None],
            "col_scale": lambda: p * vec, "residual": lambda: p + mat.float(),
            "bias_gelu_aux": lambda: gelu(p + vec),
            "bias_gelu_store": lambda: gelu(p + vec)}[name]()


def arguments(name, m, n, dtype):
    """``(vector or None, matrix or None, epilogue_args)`` of epilogue ``name``."""
    vec = uniform((m if name == "row_scale" else n,)) * 4
    mat = None
    if name == "residual":         # (float16: numba reads no bfloat16 arrays)
        mat = ints((m, n), dtype=torch.float16)
        return vec, mat, (mat,)
    if name == "bias_gelu_store":
        mat = torch.full((m, n), float("nan"), device="cuda", dtype=torch.float32)
        return vec, mat, (vec, mat)
    return vec, None, (vec,)


#: The epilogues whose GELU runs on the SFU's tanh.approx (2^-11 relative on tanh): an
#: absolute error up to 2^-12 |x| beside the output's rounding (epilogues.gelu_tanh).
SFU_TANH = ("bias_gelu", "bias_gelu_aux", "bias_gelu_store")
#: ... and those of the auxiliary-output form (matmul(..., aux=)): the pre-activation.
AUX = ("bias_gelu_aux",)


def assert_matches(got, want, exact, dtype, pre=None):
    """``got`` equals ``want`` (exact) or is within an ulp of the output dtype (plus 2^-12 |pre|
    where the epilogue takes tanh from the SFU and ``pre`` is its pre-activation)."""
    want = want.to(got.dtype)
    assert not torch.isnan(got).any(), "unwritten (poisoned) elements"
    if exact:
        assert torch.equal(got, want), (got.float() - want.float()).abs().max()
        return
    ulp = {torch.float16: 2.0 ** -10, torch.bfloat16: 2.0 ** -7, torch.float32: 2.0 ** -16}
    if pre is None:
        torch.testing.assert_close(got.float(), want.float(), rtol=ulp[got.dtype], atol=1e-5)
        return
    err = (got.float() - want.float()).abs()
    bound = ulp[got.dtype] * want.float().abs() + 2.0 ** -12 * pre.abs() + 1e-5
    w = (err - bound).argmax()
    assert (err <= bound).all(), (f"|got - want| = {err.flatten()[w]} > {bound.flatten()[w]} "
                                  f"at pre-activation {pre.flatten()[w]}")


def run(name, m, n, k, dtype, out_dtype=None, config=None, alpha=1.0, beta=0.0):
    a, b = ints((m, k), dtype=dtype), ints((k, n), dtype=dtype)
    out = torch.full((m, n), float("nan"), device="cuda", dtype=out_dtype or dtype)
    old = None
    if beta:
        old = ints((m, n), dtype=out.dtype)
        out.copy_(old)
    vec, mat, args = arguments(name, m, n, dtype)
    aux = torch.full_like(out, float("nan")) if name in AUX else None
    got = matmul(a, b, out, alpha=alpha, beta=beta, config=config,
                 epilogue=EPILOGUES[name], epilogue_args=args, aux=aux)
    assert got is out
    p = alpha * (a.float() @ b.float())
    if beta:
        p = p + beta * old.float()
    assert_matches(out, reference(name, p, vec, mat), name in EXACT, dtype,
                   p + vec if name in SFU_TANH else None)
    if name == "bias_gelu_store":
        assert torch.equal(mat, p + vec)           # the pre-activation, in float32
    if name in AUX:                                # ... rounded to C's dtype
        assert torch.equal(aux, (p + vec).to(aux.dtype))


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("dtype", ["f16", "bf16"])
@pytest.mark.parametrize("name", list(epilogues.SHIPPED))
def test_shipped_epilogue(name, dtype, shape):
    run(name, *shape, DT[dtype])


FORCED = {"wide": WIDE, "wide_ov": OVERLAPPED[WIDE], "cluster": CLUSTER,
          "cluster_ov": OVERLAPPED[CLUSTER], "tall": TALL, "n192": N192, "n192_ov": OVERLAPPED[N192],
          "narrow128": NARROW[128], "narrow64": NARROW[64], "pairs128": NARROW_PAIRS[128]}
F32_FORCED = ("wide", "tall", "narrow128")      # (f32 output: the plain epilogue's box writer)


@pytest.mark.parametrize("cfg, out", [(c, "f16") for c in FORCED] + [(c, "f32") for c in F32_FORCED])
@pytest.mark.parametrize("name", ["bias_gelu_store", "bias_gelu_aux"])
def test_every_kernel_family(name, cfg, out):
    # The busiest epilogues (two arguments and a store per element of its own; the auxiliary
    # output through TMA, which the overlapped epilogue refuses) on every tile shape and
    # epilogue path, at a shape with partial tiles both ways.
    if name in AUX and FORCED[cfg].overlap_epilogue:
        with pytest.raises(ValueError, match=r"auxiliary output \(aux=\) needs overlap_epilogue"):
            run(name, 1000, 1032, 520, torch.float16, DT[out], FORCED[cfg])
        return
    run(name, 1000, 1032, 520, torch.float16, DT[out], FORCED[cfg])


@pytest.mark.parametrize("shape", [(1000, 1032, 520), (4096, 4096, 256)],
                         ids=lambda s: "x".join(map(str, s)))
def test_auxiliary_output_on_the_chosen_kernel(shape):
    # Left to choose, a shape whose choice overlaps its epilogue takes the plain one instead.
    run("bias_gelu_aux", *shape, torch.bfloat16)


@pytest.mark.parametrize("cfg", ["wide", "narrow128", "tall"])
def test_beta_comes_before_the_epilogue(cfg):
    run("bias_relu", 257, 520, 136, torch.bfloat16, torch.float32, FORCED[cfg], alpha=0.5,
        beta=2.0)


def test_ladders_take_epilogues():
    from numba_tma.ladders.gemm_pingpong import PingPongConfig
    from numba_tma.ladders.gemm_stream_k import StreamKConfig

    run("residual", 1000, 1032, 520, torch.float16, config=StreamKConfig())
    run("bias_silu", 1000, 1032, 520, torch.bfloat16, config=PingPongConfig(128, stages=6))


SCALE = np.float32(0.25)


@cuda.jit(device=True)
def bias_residual_aux(acc, row, col, bias, res, aux, shift):
    # A user's own: bias and residual read, the pre-activation written, a closure-free global
    # constant and a scalar argument.
    x = acc + bias[col] + np.float32(res[row, col]) * SCALE
    aux[row, col] = x
    return max(x, np.float32(shift))


@pytest.mark.parametrize("shape", [(257, 200, 136), (1000, 1032, 520)],
                         ids=lambda s: "x".join(map(str, s)))
def test_user_epilogue(shape):
    m, n, k = shape
    a, b = ints((m, k), dtype=torch.float16), ints((k, n), dtype=torch.float16)
    bias, res = uniform((n,)), ints((m, n), dtype=torch.float16)
    aux = torch.full((m, n), float("nan"), device="cuda")
    out = matmul(a, b, epilogue=bias_residual_aux, epilogue_args=(bias, res, aux, -1.5))
    x = a.float() @ b.float() + bias + res.float() * 0.25
    assert torch.equal(aux, x)
    assert torch.equal(out, torch.clamp(x, min=-1.5).half())


@cuda.jit(device=True)
def bias_gelu_accurate(acc, row, col, b):
    return epilogues.gelu_tanh_accurate(acc + b[col])


@pytest.mark.parametrize("out_dtype", [torch.float16, torch.float32])
def test_accurate_gelu_within_an_ulp(out_dtype):
    # The ex2 + rcp GELU holds the output's rounding for every x, the negative tail included
    # (where the SFU tanh's 2^-11 is not small beside the result).
    m, n, k = 257, 520, 136
    a, b = ints((m, k), dtype=torch.float16), ints((k, n), dtype=torch.float16)
    bias = uniform((n,)) * 4
    out = torch.full((m, n), float("nan"), device="cuda", dtype=out_dtype)
    matmul(a, b, out, epilogue=bias_gelu_accurate, epilogue_args=(bias,))
    want = F.gelu(a.float() @ b.float() + bias, approximate="tanh")
    assert_matches(out, want, False, torch.float16)


def test_numba_arrays_and_repeated_calls():
    # numba arrays take it too; a repeated call reuses its launch and reads the arguments'
    # current values; new arguments and new functions launch anew.
    m, n, k = 136, 264, 72
    a, b = ints((m, k), dtype=torch.float16), ints((k, n), dtype=torch.float16)
    out = torch.empty((m, n), device="cuda", dtype=torch.float32)
    bias = uniform((n,))
    for _ in range(2):
        bias.copy_(uniform((n,)))
        matmul(cuda.as_cuda_array(a), cuda.as_cuda_array(b), cuda.as_cuda_array(out),
               epilogue=epilogues.bias, epilogue_args=(cuda.as_cuda_array(bias),))
        torch.testing.assert_close(out, a.float() @ b.float() + bias, rtol=0, atol=0)
    other = uniform((n,))
    matmul(a, b, out, epilogue=epilogues.col_scale, epilogue_args=(other,))
    assert torch.equal(out, (a.float() @ b.float()) * other)


@pytest.mark.parametrize("kwargs, exc, match", [
    # (what check_epilogue reports of functions and arguments: tests/test_gemm_epilogue_offline)
    (dict(epilogue=print), TypeError, "epilogue must be a @cuda.jit.device=True"),
    (dict(epilogue=epilogues.bias, epilogue_args="bias"), TypeError, "epilogue_args must be"),
    (dict(epilogue=epilogues.bias, epilogue_args=()), TypeError, "takes 1 argument"),
    (dict(epilogue_args=(1.0,)), ValueError, "epilogue_args given without an epilogue"),
    (dict(epilogue=epilogues.bias, config=GemmConfig()), ValueError, "mma.sync"),
    (dict(aux=torch.empty((64, 48), device="cuda", dtype=torch.float16)), ValueError,
     "aux given without an epilogue"),
])
def test_bad_input(kwargs, exc, match):
    a = ints((64, 32), dtype=torch.float16)
    b = ints((32, 48), dtype=torch.float16)
    with pytest.raises(exc, match=match):
        matmul(a, b, **kwargs)


@pytest.mark.parametrize("make, exc, match", [
    (lambda out: torch.empty((64, 48), device="cuda"), TypeError, r"aux must have out's dtype"),
    (lambda out: torch.empty((64, 40), device="cuda", dtype=out.dtype), ValueError,
     r"aux must have shape \(64, 48\)"),
    (lambda out: torch.empty((48, 64), device="cuda", dtype=out.dtype).t(), ValueError,
     "aux must be row-major"),
    (lambda out: torch.empty((64, 49), device="cuda", dtype=out.dtype)[:, :48], ValueError,
     "aux must be row-major|aux.*multiple of 16 bytes"),
    (lambda out: out, ValueError, "aux overlaps out"),
    (lambda out: torch.empty((64, 48), dtype=out.dtype), TypeError, r"aux.*cpu"),
])
def test_bad_aux(make, exc, match):
    a = ints((64, 32), dtype=torch.float16)
    b = ints((32, 48), dtype=torch.float16)
    out = torch.full((64, 48), 7.0, device="cuda", dtype=torch.float16)
    with pytest.raises(exc, match=match):
        matmul(a, b, out, epilogue=epilogues.bias_gelu_aux,
               epilogue_args=(torch.ones(48, device="cuda"),), aux=make(out))
    with pytest.raises(TypeError, match="with aux= it must return a pair"):
        matmul(a, b, out, epilogue=epilogues.bias, epilogue_args=(torch.ones(48, device="cuda"),),
               aux=torch.empty_like(out))
    assert (out == 7).all()                 # nothing launched


@pytest.mark.parametrize("arg, exc, match", [
    (lambda m, n: torch.ones(n + 1, device="cuda"), ValueError, r"epilogue_args\[0\] must have "
                                                                r"shape \(N\) = \(48,\)"),
    (lambda m, n: torch.ones(n, device="cuda", dtype=torch.bfloat16), TypeError,
     r"epilogue_args\[0\].*bfloat16.*float\(\)"),
    (lambda m, n: np.ones(n, np.float32), TypeError, r"epilogue_args\[0\].*host"),
    (lambda m, n: torch.ones(n), TypeError, r"epilogue_args\[0\].*cpu"),
    (lambda m, n: torch.ones((), device="cuda"), ValueError, r"epilogue_args\[0\]"),
    (lambda m, n: "x", TypeError, r"epilogue_args\[0\] must be a CUDA array or a number"),
])
def test_bad_epilogue_args(arg, exc, match):
    a = ints((64, 32), dtype=torch.float16)
    b = ints((32, 48), dtype=torch.float16)
    out = torch.full((64, 48), 7.0, device="cuda", dtype=torch.float16)
    with pytest.raises(exc, match=match):
        matmul(a, b, out, epilogue=epilogues.bias, epilogue_args=(arg(64, 48),))
    assert (out == 7).all()                 # nothing launched


def test_fp8_refuses_an_epilogue():
    a = ints((64, 32)).to(torch.float8_e4m3fn)
    w = ints((48, 32)).to(torch.float8_e4m3fn)
    with pytest.raises(ValueError, match="fp8"):
        matmul(a, w.t(), scale_a=1.0, scale_b=1.0, epilogue=epilogues.bias,
               epilogue_args=(torch.ones(48, device="cuda"),))


def test_k_zero_applies_the_epilogue():
    a = torch.empty((40, 0), device="cuda", dtype=torch.float16)
    b = torch.empty((0, 24), device="cuda", dtype=torch.float16)
    bias = uniform((24,))
    out = matmul(a, b, out_dtype=torch.float32, epilogue=epilogues.bias, epilogue_args=(bias,))
    assert torch.equal(out, bias.expand(40, 24))
    assert math.isfinite(out.sum().item())
