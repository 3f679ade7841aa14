"""The GPU matmul fuzz's error bound checked on a model of a correct kernel (no GPU).

``tests/gpu/test_fuzz.py`` compares ``matmul()`` with a float64 reference within
``matmul_tolerance``. A bound too tight fails a correct kernel now and then (it did: a
float16 output below the normal range), one too loose hides bugs; here the model (fp16
operands, fp32 accumulation and epilogue, round to the output type as ``cvt.rn`` does) must
pass it on the fuzz's own kinds of problems, small K and small alpha included, and the bound
must still catch an output three units in the last place off at a normal magnitude."""

import importlib.util
import os

import numpy as np
import pytest

FUZZ = os.path.join(os.path.dirname(os.path.abspath(__file__)), "gpu", "test_fuzz.py")


@pytest.fixture(scope="module")
def fuzz():
    spec = importlib.util.spec_from_file_location("fuzz_bounds_test_fuzz", FUZZ)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)         # (its GPU tests compile nothing at import)
    return module


def model(a, b, alpha, out_type):
    """What a correct kernel returns: fp32 products summed in fp32, alpha applied in fp32,
    rounded to nearest even into ``out_type``."""
    acc = a.astype(np.float32) @ b.astype(np.float32)
    return (np.float32(alpha) * acc).astype(out_type).astype(np.float64)


@pytest.mark.parametrize("out_type", ["float16", "float32"])
@pytest.mark.parametrize("k", [1, 2, 3, 8, 64, 600])
def test_matmul_tolerance_passes_a_correct_kernel(fuzz, out_type, k):
    rng = np.random.default_rng(k)
    for alpha in (1.0, -0.5, 2.0, 0.07, -1e-3):
        a = rng.standard_normal((96, k)).astype(np.float16)
        b = rng.standard_normal((k, 80)).astype(np.float16)
        a64, b64 = a.astype(np.float64), b.astype(np.float64)
        ref = alpha * (a64 @ b64)
        mag = abs(alpha) * (np.abs(a64) @ np.abs(b64))
        err = np.abs(model(a, b, alpha, out_type) - ref)
        tol = fuzz.matmul_tolerance(mag, k, out_type)
        assert (err <= tol).all(), (alpha, float((err - tol).max()))


def test_the_subnormal_term_is_needed_and_three_ulps_are_caught(fuzz):
    rng = np.random.default_rng(1)
    a = rng.standard_normal((504, 1)).astype(np.float16)
    b = rng.standard_normal((1, 80)).astype(np.float16)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    ref, mag = -0.5 * (a64 @ b64), 0.5 * np.abs(a64 @ b64)
    err = np.abs(model(a, b, -0.5, "float16") - ref)
    relative_only = mag * (2.0**-22 + 2 * fuzz.U["float16"] + 2.0**-20)
    assert (err > relative_only).any()                  # the fuzz's first bound: too tight
    assert (err <= fuzz.matmul_tolerance(mag, 1, "float16")).all()
    # Three float16 units in the last place off, wherever |ref| is normal (>= 2^-14), exceed
    # the bound (which allows the rounding's half unit and a little more).
    normal = np.abs(ref) >= 2.0**-14
    off = model(a, b, -0.5, "float16").astype(np.float16)
    for _ in range(3):
        off = np.nextafter(off, np.float16(np.inf))
    off_err = np.abs(off.astype(np.float64) - ref)
    assert normal.sum() > 1000
    assert (off_err[normal] > fuzz.matmul_tolerance(mag, 1, "float16")[normal]).all()
