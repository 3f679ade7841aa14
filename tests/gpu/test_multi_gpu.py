"""Operands on any GPU of the box: ``matmul()`` and ``transpose()`` run on the device their
operands live on (torch, CuPy and numba arrays), whatever numba's or the framework's current
device is, and return there; operands on two devices are refused by name. Needs two GPUs."""

import numpy as np
import pytest

from numba_tma import matmul, transpose
from numba_tma._frontend import cuda

rng = np.random.default_rng()


def _gpus():
    try:
        return len(cuda.gpus) if cuda.is_available() else 0
    except Exception:
        return 0


pytestmark = pytest.mark.skipif(0 < _gpus() < 2, reason="needs two GPUs")   # none: conftest says why


def _ints(shape):
    # Small integers: every product and fp32 sum is exact, so results compare exactly.
    return rng.integers(-4, 5, size=shape).astype(np.float16)


def _reference(a, b):
    return a.astype(np.float64) @ b.astype(np.float64)


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


@pytest.mark.parametrize("numba_current", [0, 1])
def test_torch_operands_on_device_1(torch, numba_current):
    m, n, k = 300, 264, 136
    a, b = _ints((m, k)), _ints((k, n))
    ta, tb = torch.from_numpy(a).to("cuda:1"), torch.from_numpy(b).to("cuda:1")
    with torch.cuda.device(0), cuda.gpus[numba_current]:
        out = matmul(ta, tb, out_dtype=torch.float32)
        given = torch.full((m, n), float("nan"), dtype=torch.float32, device="cuda:1")
        matmul(ta, tb, given)
        x = torch.from_numpy(rng.standard_normal((333, 517)).astype(np.float32)).to("cuda:1")
        xt = transpose(x)
    assert out.device.index == 1 and xt.device.index == 1
    torch.cuda.synchronize(1)
    np.testing.assert_array_equal(out.cpu().numpy(), _reference(a, b))
    np.testing.assert_array_equal(given.cpu().numpy(), _reference(a, b))
    np.testing.assert_array_equal(xt.cpu().numpy(), x.cpu().numpy().T)


def test_torch_current_stream_of_the_operands_device_orders_the_call(torch):
    m = n = k = 256
    a, b = _ints((m, k)), _ints((k, n))
    with torch.cuda.device(1):
        side = torch.cuda.Stream()
        with torch.cuda.stream(side):
            ta = torch.from_numpy(a).to("cuda:1", non_blocking=False)
            tb = torch.from_numpy(b).to("cuda:1")
            ta.mul_(1.0)                            # queued on the side stream before the call
    with torch.cuda.device(0), torch.cuda.stream(side):
        out = matmul(ta, tb, out_dtype=torch.float32)   # on side (device 1's current stream)
    side.synchronize()
    np.testing.assert_array_equal(out.cpu().numpy(), _reference(a, b))


@pytest.mark.parametrize("numba_current", [0, 1])
def test_cupy_operands_on_device_1(numba_current):
    cupy = pytest.importorskip("cupy")
    a, b = _ints((272, 200)), _ints((200, 144))
    x = rng.standard_normal((129, 515)).astype(np.float32)
    with cupy.cuda.Device(1):
        ca, cb, cx = cupy.asarray(a), cupy.asarray(b), cupy.asarray(x)
    with cupy.cuda.Device(0), cuda.gpus[numba_current]:
        out = matmul(ca, cb)
        xt = transpose(cx)
    assert out.device.id == 1 and xt.device.id == 1
    with cupy.cuda.Device(1):
        cupy.cuda.get_current_stream().synchronize()
        np.testing.assert_array_equal(out.get().astype(np.float64),
                                      _reference(a, b).astype(np.float16))
        np.testing.assert_array_equal(xt.get(), x.T)


@pytest.mark.parametrize("numba_current", [0, 1])
def test_numba_arrays_made_on_device_1(numba_current):
    a, b = _ints((256, 128)), _ints((128, 192))
    x = rng.standard_normal((64, 200)).astype(np.float32)
    with cuda.gpus[1]:
        da, db, dx = cuda.to_device(a), cuda.to_device(b), cuda.to_device(x)
        out = cuda.to_device(np.full((256, 192), np.nan, np.float32))
    with cuda.gpus[numba_current]:
        matmul(da, db, out)
        xt = transpose(dx)
    with cuda.gpus[1]:
        cuda.synchronize()
        np.testing.assert_array_equal(out.copy_to_host(), _reference(a, b))
        np.testing.assert_array_equal(xt.copy_to_host(), x.T)


def test_interleaved_calls_on_both_devices(torch):
    # The launch caches are keyed by context: each device's launch stays its own.
    ins = {d: (_ints((384, 256)), _ints((256, 320)),
               rng.standard_normal((300, 260)).astype(np.float32)) for d in (0, 1)}
    dev = {d: tuple(torch.from_numpy(v).to(f"cuda:{d}") for v in ins[d]) for d in (0, 1)}
    for _ in range(3):
        for d in (0, 1, 1, 0):
            ta, tb, tx = dev[d]
            out = matmul(ta, tb, out_dtype=torch.float32)
            xt = transpose(tx)
            assert out.device.index == d and xt.device.index == d
            torch.cuda.synchronize(d)
            np.testing.assert_array_equal(out.cpu().numpy(), _reference(*ins[d][:2]))
            np.testing.assert_array_equal(xt.cpu().numpy(), ins[d][2].T)


def test_operands_on_two_devices_are_refused(torch):
    a0 = torch.ones((64, 64), dtype=torch.float16, device="cuda:0")
    b1 = torch.ones((64, 64), dtype=torch.float16, device="cuda:1")
    with pytest.raises(ValueError, match="b lives on device 1 but a lives on device 0"):
        matmul(a0, b1)
    out1 = torch.empty((64, 64), dtype=torch.float32, device="cuda:1")
    with pytest.raises(ValueError, match="out lives on device 1 but a lives on device 0"):
        matmul(a0, a0.clone(), out1)
    with pytest.raises(ValueError, match="out lives on device 1 but src lives on device 0"):
        transpose(torch.ones((64, 32), device="cuda:0"), torch.empty((32, 64), device="cuda:1"))
    with cuda.gpus[1]:
        n1 = cuda.to_device(np.ones((64, 64), np.float16))
    with pytest.raises(ValueError, match="b lives on device 1 but a lives on device 0"):
        matmul(cuda.to_device(np.ones((64, 64), np.float16)), n1)
