"""Seeded fuzz of the public entry points on the GPU (issue 18).

- >= 200 random ``transpose()`` cases: every element size (1, 2, 4, 8 bytes), 1 x N, N x 1, 2-D
  and batched shapes, views starting at an element offset (misaligned bases), numba / CuPy /
  torch arrays where importable, with a poisoned ``out`` or none; exact compare of the bits.
- >= 100 random ``matmul()`` cases: float16 / bfloat16 (torch) inputs, row- or column-major A
  and B, out float16 / bfloat16 / float32, alpha and beta; sizes keep every contiguous row a
  multiple of 16 bytes, as matmul requires. Compared with a float64 reference within the
  fp32-accumulation bound plus the output's rounding.
- 64 random fp8 ``matmul()`` cases (sharded by scale mode): every e4m3/e5m2 pair, out float32 /
  bfloat16 / float16, alpha and beta, small integers and power-of-two scales: exact compare.
- a battery of bad inputs on real device arrays, each refused with a TypeError / ValueError,
  then a check that the CUDA context still works.

The seed is printed (shown with ``-s`` and with any failure); ``NUMBA_TMA_FUZZ_SEED`` replays it.
Each fuzz test is sharded (transpose by element size, matmul by the operands' layouts), so the
shards compile disjoint kernels and ``.ci/gpu`` runs each in a process of its own, in parallel.
"""

import os

import numpy as np
import pytest

from numba_tma import matmul, transpose
from numba_tma._frontend import cuda

SEED = int(os.environ.get("NUMBA_TMA_FUZZ_SEED", np.random.SeedSequence().entropy % 2**32))
TRANSPOSE_CASES = 240
MATMUL_CASES = 120
DTYPES = [np.uint8, np.int8, np.float16, np.int16, np.float32, np.int32, np.float64, np.int64]

try:
    import torch
except ImportError:
    torch = None
try:
    import cupy
except ImportError:
    cupy = None

LIBS = ["numba"] + (["torch"] if torch is not None else []) + (["cupy"] if cupy is not None else [])


def rng_for(test, shard):
    print(f"NUMBA_TMA_FUZZ_SEED={SEED} ({test}, shard {shard})")
    return np.random.default_rng([SEED, {"transpose": 1, "matmul": 2, "matmul_fp8": 3}[test], shard])


def bits(x):
    return x.view(np.dtype(f"u{x.dtype.itemsize}"))


def random_host(rng, shape, dtype):
    dtype = np.dtype(dtype)
    raw = rng.integers(0, 256, size=int(np.prod(shape)) * dtype.itemsize, dtype=np.uint8)
    return raw.view(dtype).reshape(shape)      # every bit pattern, NaNs included (bits compared)


def on_device(lib, host, offset):
    """``host`` on the device as a ``lib`` array that starts ``offset`` elements into its buffer."""
    flat = np.empty(host.size + offset, host.dtype)
    flat[:offset] = 0
    flat[offset:] = host.ravel()
    if lib == "numba":
        return cuda.to_device(flat)[offset:].reshape(host.shape)
    if lib == "torch":
        return torch.from_numpy(flat).cuda()[offset:].view(host.shape)
    return cupy.asarray(flat)[offset:].reshape(host.shape)


def to_host(x):
    if hasattr(x, "copy_to_host"):
        return x.copy_to_host()
    if torch is not None and isinstance(x, torch.Tensor):
        return x.cpu().numpy()
    return cupy.asnumpy(x)


def random_shape(rng):
    kind = rng.integers(0, 5)
    dim = lambda hi: int(np.exp(rng.uniform(0, np.log(hi))))       # log-uniform 1 .. hi
    if kind == 0:
        return (1, dim(5000))                                       # 1 x N
    if kind == 1:
        return (dim(5000), 1)                                       # N x 1
    if kind == 2:
        return (dim(700), dim(700))
    if kind == 3:
        return (int(rng.integers(1, 6)), dim(300), dim(300))        # batched
    return (int(rng.integers(1, 4)), 1, dim(2000))                  # batched 1 x N


@pytest.mark.parametrize("itemsize", [1, 2, 4, 8])
def test_fuzz_transpose(itemsize):
    rng = rng_for("transpose", itemsize)
    dtypes = [d for d in DTYPES if np.dtype(d).itemsize == itemsize]
    for case in range(TRANSPOSE_CASES // 4):
        dtype = np.dtype(dtypes[case % len(dtypes)])
        lib = LIBS[int(rng.integers(0, len(LIBS)))]
        shape = random_shape(rng)
        s_off = int(rng.integers(0, 9)) if rng.random() < 0.4 else 0
        host = random_host(rng, shape, dtype)
        want = np.swapaxes(host, -1, -2)
        src = on_device(lib, host, s_off)
        what = (f"case {case}: {lib} {dtype} {shape}, src offset {s_off}, seed {SEED}")
        if rng.random() < 0.5:
            o_off = int(rng.integers(0, 9)) if rng.random() < 0.4 else 0
            poison = np.full(want.shape, 0xA5, np.uint8 if dtype.itemsize == 1 else
                             np.dtype(f"u{dtype.itemsize}")).view(dtype)
            out = on_device(lib, poison, o_off)
            assert transpose(src, out) is out, what
            what += f", out offset {o_off}"
        else:
            out = transpose(src)
        got = to_host(out)
        assert got.shape == want.shape, what
        np.testing.assert_array_equal(bits(got), bits(want), err_msg=what)


# ------------------------------------------------------------------------------------ matmul

U = {"float16": 2.0**-11, "bfloat16": 2.0**-8, "float32": 2.0**-24}
TINY = {"float16": 2.0**-25, "bfloat16": 2.0**-134, "float32": 2.0**-150}   # half subnormal step


def matmul_tolerance(mag, k, out_type):
    """The bound on ``|got - ref|`` elementwise, ``mag`` being ``|alpha| |A| |B| + |beta| |C|``:
    fp32 accumulation of ``k`` products, the fp32 epilogue and the output's rounding, relative,
    plus half the output's smallest subnormal step: where ``|ref|`` is below float16's normal
    range (K of 1 or 2, a small alpha), rounding costs up to 2^-25 whatever the magnitude.
    Without that term a model of a correct kernel failed the FC shard (the only one whose K
    need not be a multiple of 8) for 9 of 200 seeds, and seed 5 failed on the H100 at the case
    the model named (504 x 80 x 1 -> float16); tests/test_fuzz_bounds.py checks the bound."""
    return mag * (k * 2.0**-22 + 2 * U[out_type] + 2.0**-20) + TINY[out_type]


def mm_operand(rng, rows, cols, dtype, order, use_torch):
    """(device array, its float64 values): normals rounded to ``dtype``, row-major ("C") or
    column-major ("F"); a torch tensor (bfloat16 always) or a numba array."""
    x = rng.standard_normal((rows, cols)).astype(np.float32)
    if use_torch:
        t = torch.from_numpy(x).cuda().to(getattr(torch, dtype))
        if order == "F":
            t = t.t().contiguous().t()
        return t, t.float().cpu().numpy().astype(np.float64)
    h = x.astype(np.float16)
    d = cuda.to_device(np.ascontiguousarray(h) if order == "C" else np.asfortranarray(h))
    return d, h.astype(np.float64)


def mm_out(rng, m, n, dtype, beta, use_torch):
    """(out, its float64 values or None when beta == 0): poisoned with NaN where beta is 0."""
    if use_torch:
        t = torch.full((m, n), float("nan"), device="cuda", dtype=getattr(torch, dtype))
        if beta:
            t.copy_(torch.randn(m, n, device="cuda"))
            return t, t.float().cpu().numpy().astype(np.float64)
        return t, None
    if beta:
        h = rng.standard_normal((m, n)).astype(dtype)
        return cuda.to_device(h), h.astype(np.float64)
    return cuda.to_device(np.full((m, n), np.nan, dtype)), None


def mm_host(x):
    if torch is not None and isinstance(x, torch.Tensor):
        return x.float().cpu().numpy().astype(np.float64)
    return x.copy_to_host().astype(np.float64)


@pytest.mark.parametrize("orders", ["CC", "CF", "FC", "FF"])
def test_fuzz_matmul(orders):
    rng = rng_for("matmul", ["CC", "CF", "FC", "FF"].index(orders))
    in_types = ["float16"] + (["bfloat16"] if torch is not None else [])
    out_types = ["float16", "float32"] + (["bfloat16"] if torch is not None else [])
    oa, ob = orders
    for case in range(MATMUL_CASES // 4):
        dt = in_types[case % len(in_types)]
        ot = out_types[int(rng.integers(0, len(out_types)))]
        # Every contiguous row a multiple of 8 elements (16 bytes): A's K (C) or M (F), B's N
        # (C) or K (F), out's N.
        m, n, k = (int(np.exp(rng.uniform(0, np.log(600)))) for _ in range(3))
        n = -(-n // 8) * 8
        if oa == "C" or ob == "F":
            k = -(-k // 8) * 8
        if oa == "F":
            m = -(-m // 8) * 8
        alpha = float(rng.choice([1.0, -0.5, 2.0, rng.uniform(-2, 2)]))
        beta = float(rng.choice([0.0, 0.0, 1.0, -1.5, rng.uniform(-2, 2)]))
        # One library per case: torch wherever bfloat16 is involved, else numba or (30%) torch.
        use_torch = "bfloat16" in (dt, ot) or torch is not None and rng.random() < 0.3
        a, a64 = mm_operand(rng, m, k, dt, oa, use_torch)
        b, b64 = mm_operand(rng, k, n, dt, ob, use_torch)
        out, c64 = mm_out(rng, m, n, ot, beta, use_torch)
        what = f"case {case}: {m}x{n}x{k} {dt} {oa}{ob} -> {ot}, alpha {alpha}, beta {beta}, seed {SEED}"
        assert matmul(a, b, out, alpha=alpha, beta=beta) is out, what
        ref = alpha * (a64 @ b64)
        mag = abs(alpha) * (np.abs(a64) @ np.abs(b64))
        if c64 is not None:
            ref += beta * c64
            mag += abs(beta) * np.abs(c64)
        tol = matmul_tolerance(mag, k, ot)
        got = mm_host(out)
        err = np.abs(got - ref)
        worst = np.unravel_index(np.argmax(err / tol), err.shape)   # not the largest error
        assert np.isfinite(got).all() and (err <= tol).all(), \
            (f"{what}: error {err[worst]:.3g} vs tolerance {tol[worst]:.3g} at {worst} "
             f"(reference {ref[worst]:.3g}, got {got[worst]:.3g})")


FP8_CASES = 64


@pytest.mark.skipif(torch is None, reason="fp8 operands are torch tensors")
@pytest.mark.parametrize("mode", ["", "tensor", "row", "block"], ids=lambda m: m or "unscaled")
def test_fuzz_matmul_fp8(mode):
    """fp8 ``matmul()``: random pairs, shapes (K a multiple of 16, N of 8), outputs, alpha and
    beta; small integers and power-of-two scales, so every result is exact."""
    rng = rng_for("matmul_fp8", ["", "tensor", "row", "block"].index(mode))
    kinds = {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2}
    for case in range(FP8_CASES // 4):
        ka, kb = (str(rng.choice(list(kinds))) for _ in range(2))
        ot = str(rng.choice(["float32", "bfloat16", "float16"]))
        m, n, k = (int(np.exp(rng.uniform(0, np.log(700)))) for _ in range(3))
        n, k = -(-n // 8) * 8, -(-k // 16) * 16
        kb_, nb = -(-k // 128), -(-n // 128)
        ints = lambda *shape: torch.from_numpy(rng.integers(-2, 3, shape).astype(np.float32))
        pow2 = lambda *shape: torch.from_numpy(
            np.asarray(2.0 ** rng.integers(-2, 3, shape), np.float32)).cuda()
        a = ints(m, k).cuda().to(kinds[ka])
        w = ints(n, k).cuda().to(kinds[kb])
        sa, sb = {"": (None, None), "tensor": (pow2(), pow2()), "row": (pow2(m, 1), pow2(1, n)),
                  "block": (pow2(m, kb_), pow2(nb, kb_))}[mode]
        alpha = float(rng.choice([1.0, 0.5, -2.0]))
        beta = float(rng.choice([0.0, 0.0, 1.0])) if ot == "float32" else 0.0
        c0 = ints(m, n).cuda()
        out = c0.clone() if beta else torch.full((m, n), float("nan"), device="cuda",
                                                 dtype=getattr(torch, ot))
        what = (f"case {case}: {m}x{n}x{k} {ka} x {kb} -> {ot}, scale {mode or 'none'}, "
                f"alpha {alpha}, beta {beta}, seed {SEED}")
        assert matmul(a, w.t(), out, scale_a=sa, scale_b=sb, alpha=alpha, beta=beta) is out, what
        A, B = a.double(), w.double()
        if mode == "block":
            A = A * sa.double().repeat_interleave(128, 1)[:, :k]
            B = B * sb.double().repeat_interleave(128, 0)[:n].repeat_interleave(128, 1)[:, :k]
        elif mode == "row":
            A, B = A * sa.double(), B * sb.double().reshape(n, 1)
        elif mode == "tensor":
            A, B = A * sa.double(), B * sb.double()
        ref = alpha * (A @ B.t()) + beta * c0.double()
        want = ref.to(getattr(torch, ot)).double()
        got = out.double()
        bad = got != want
        assert not bad.any(), (f"{what}: {int(bad.sum())} differ, first at "
                               f"{bad.nonzero()[0].tolist()}")


# ------------------------------------------------------------------------------ bad inputs

# Refused today (each must stay a clear TypeError / ValueError, not a launch). Item 1 of issue
# 18 adds, for transpose() and matmul() on the array interface: a NULL or negative data pointer,
# a pointer not aligned to the element size (fp32 at +2 bytes), a read-only out, strides with
# fewer entries than the shape, byte order (a big-endian '>f4' src with a little-endian out), an
# object dtype '|O8', a negative shape entry, a tensor on another GPU than numba's current one,
# matmul's dtype taken from the interface's typestr (an interface-only '<f2' object), and an
# interface without 'typestr' or 'data' (today a bare KeyError).
def bad_cases():
    f32 = cuda.to_device(np.zeros((64, 32), np.float32))
    h16 = cuda.to_device(np.zeros((64, 32), np.float16))
    return [
        ("transpose: host array", lambda: transpose(np.zeros((4, 4), np.float32)), TypeError),
        ("transpose: out shape", lambda: transpose(f32, cuda.device_array((64, 32), np.float32)),
         ValueError),
        ("transpose: out dtype", lambda: transpose(f32, cuda.device_array((32, 64), np.float64)),
         TypeError),
        ("transpose: 4-D", lambda: transpose(cuda.device_array((2, 2, 2, 2), np.float32)),
         ValueError),
        ("transpose: 1-D", lambda: transpose(cuda.device_array(8, np.float32)), ValueError),
        ("transpose: strided", lambda: transpose(f32[:, ::2]), ValueError),
        ("transpose: strided out", lambda: transpose(
            f32, cuda.device_array((32, 128), np.float32)[:, ::2]), ValueError),
        ("transpose: in place", lambda: transpose(f32, f32.reshape(32, 64)), ValueError),
        ("transpose: 16-byte elements",
         lambda: transpose(cuda.device_array((4, 4), np.complex128)), TypeError),
        ("transpose: kernel name", lambda: transpose(f32, kernel="nope"), ValueError),
        ("matmul: float32 a", lambda: matmul(f32, cuda.device_array((32, 8), np.float32)),
         TypeError),
        ("matmul: a, b dtypes", lambda: matmul(h16, cuda.device_array((32, 8), np.float32)),
         TypeError),
        ("matmul: inner sizes", lambda: matmul(h16, cuda.device_array((40, 8), np.float16)),
         ValueError),
        ("matmul: out shape", lambda: matmul(h16, cuda.device_array((32, 8), np.float16),
                                             cuda.device_array((64, 16), np.float16)), ValueError),
        ("matmul: column-major out",
         lambda: matmul(h16, cuda.device_array((32, 16), np.float16),
                        cuda.device_array((64, 16), np.float16, order="F")), ValueError),
        ("matmul: beta without out", lambda: matmul(h16, cuda.device_array((32, 8), np.float16),
                                                    beta=1.0), ValueError),
        ("matmul: out and out_dtype",
         lambda: matmul(h16, cuda.device_array((32, 8), np.float16),
                        cuda.device_array((64, 8), np.float16), out_dtype=np.float32), ValueError),
        ("matmul: out_dtype", lambda: matmul(h16, cuda.device_array((32, 8), np.float16),
                                             out_dtype=np.int32), TypeError),
        ("matmul: 3-D a", lambda: matmul(cuda.device_array((2, 64, 32), np.float16),
                                         cuda.device_array((32, 8), np.float16)), ValueError),
        ("matmul: 14-byte rows", lambda: matmul(cuda.device_array((64, 7), np.float16),
                                                cuda.device_array((7, 8), np.float16)), ValueError),
        ("matmul: in place", lambda: matmul(h16, cuda.device_array((32, 32), np.float16), h16[:, :]),
         ValueError),
        ("matmul: config", lambda: matmul(h16, cuda.device_array((32, 8), np.float16),
                                          config="fast"), TypeError),
    ]


def test_bad_inputs_then_the_context_still_works():
    for name, call, exc in bad_cases():
        try:
            call()
        except exc:
            continue
        except Exception as other:                      # name the case that raised wrongly
            raise AssertionError(f"{name}: expected {exc.__name__}, got "
                                 f"{type(other).__name__}: {other}") from other
        raise AssertionError(f"{name}: accepted")
    a = np.arange(37 * 45, dtype=np.float32).reshape(37, 45)
    np.testing.assert_array_equal(transpose(cuda.to_device(a)).copy_to_host(), a.T)
    cuda.synchronize()
