"""Seed 002 on the GPU: the 16x16x16 half GEMM ladder (numba_tma.ladders.warp_gemm.LADDER:
smem, padded, ldmatrix, swizzle), one warp each, against numpy.

Small-integer inputs make the f16 result exact (|C| <= 256), so those compare bit for bit after
``out`` was poisoned with NaNs; permutation inputs pin every element's place; standard normals
compare within one f16 rounding of the f32-accumulated product, and all rungs agree bitwise
(same fragments, same mma instructions, one rounding)."""

import numpy as np
import pytest

from gpu_helpers import rng
from numba_tma._frontend import cuda
from numba_tma.ladders import warp_gemm

RUNGS = list(warp_gemm.LADDER)
N = 16
NAN16 = 0x7E00


def small_ints(lo=-4, hi=4):
    while True:
        m = rng.integers(lo, hi, size=(N, N), endpoint=True).astype(np.float16)
        if np.count_nonzero(m) > N * N // 2:      # fresh and clearly not zeros
            return m


def poisoned():
    return cuda.to_device(np.full((N, N), NAN16, np.uint16).view(np.float16))


def run(rung, a, b, out=None):
    ret = warp_gemm.LADDER[rung](a, b, out)
    cuda.synchronize()
    return ret


def bits(x):
    return np.ascontiguousarray(x).view(np.uint16)


@pytest.mark.parametrize("rung", RUNGS)
def test_exact_on_small_integers(rung):
    a, b = small_ints(), small_ints()
    out = poisoned()
    assert run(rung, a, b, out) is out
    want = (a.astype(np.float32) @ b.astype(np.float32)).astype(np.float16)
    np.testing.assert_array_equal(bits(out.copy_to_host()), bits(want))


@pytest.mark.parametrize("rung", RUNGS)
def test_permutations_place_every_element(rung):
    """A a permutation matrix, B distinct integers 0..255 (exact in f16): C = B's rows permuted;
    then B a permutation: C = A's columns permuted. A transposed fragment shows at once."""
    perm = rng.permutation(N)
    p = np.eye(N, dtype=np.float16)[perm]
    vals = rng.permutation(N * N).reshape(N, N).astype(np.float16)
    got = run(rung, p, vals, poisoned()).copy_to_host()
    np.testing.assert_array_equal(bits(got), bits(vals[perm]))
    got = run(rung, vals, p.T.copy(), poisoned()).copy_to_host()
    np.testing.assert_array_equal(bits(got), bits(vals[:, perm]))


@pytest.mark.parametrize("rung", RUNGS)
def test_device_inputs_and_fresh_out(rung):
    a, b = small_ints(), small_ints()
    out = run(rung, cuda.to_device(a), cuda.to_device(b))
    assert out.shape == (N, N) and out.dtype == np.float16
    want = (a.astype(np.float32) @ b.astype(np.float32)).astype(np.float16)
    np.testing.assert_array_equal(bits(out.copy_to_host()), bits(want))


def test_rungs_agree_on_normals():
    a = rng.standard_normal((N, N)).astype(np.float16)
    b = rng.standard_normal((N, N)).astype(np.float16)
    results = {rung: run(rung, a, b, poisoned()).copy_to_host() for rung in RUNGS}
    first = results[RUNGS[0]]
    for rung, got in results.items():
        np.testing.assert_array_equal(bits(got), bits(first), err_msg=rung)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    scale = np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64))
    # one f16 rounding (half an ulp: 2^-11 relative) of an f32 sum (~16 * 2^-24 of the terms)
    bound = 2.0**-11 * np.abs(ref) + 2.0**-16 * scale + 2.0**-24
    assert np.all(np.abs(first.astype(np.float64) - ref) <= bound)


def test_torch_tensors():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA device")
    a, b = small_ints(), small_ints()
    ta, tb = torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda()
    out = torch.full((N, N), float("nan"), dtype=torch.float16, device="cuda")
    assert warp_gemm.gemm16_swizzle(ta, tb, out) is out
    torch.cuda.synchronize()
    np.testing.assert_array_equal(bits(out.cpu().numpy()), bits((ta.float() @ tb.float()).half()
                                                                 .cpu().numpy()))
    with pytest.raises(ValueError, match="a must be C-contiguous"):
        warp_gemm.gemm16_padded(ta.t(), tb)
