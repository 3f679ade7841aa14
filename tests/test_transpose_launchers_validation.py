"""CPU-only: the direct transpose launchers (kernels.transpose_vec.v7_vec16,
kernels.transpose_sector.v8_sector, kernels.transpose_v6.v6_packed / v6_persistent and the classic
ladder's v1-v5) validate src and out with the package's operand validation (numba_tma.operands,
through kernels._grid.check_pair) before anything reaches numba or the driver: fake
``__cuda_array_interface__`` objects with a NULL or misaligned address, a read-only out, or an
array on another GPU are refused with an error naming the argument. The first step that would
touch the device (turning the arrays into numba device arrays) is replaced by a sentinel."""

import os
import re

import pytest
from fake_devices import fake_two_gpus

from numba_tma import operands
from numba_tma.kernels import _grid, transpose_sector, transpose_v6, transpose_vec
from numba_tma.ladders import transpose_classic

pytestmark = pytest.mark.skipif(os.environ.get("NUMBA_ENABLE_CUDASIM") == "1",
                                reason="the simulator's arrays have no array interface")

BASE = 1 << 40      # device 0 (in the two-GPU fixture)
OTHER = 2 << 40     # device 1
SHAPE, OUT_SHAPE = (2, 24, 40), (2, 40, 24)

LAUNCHERS = {
    "v7_vec16": transpose_vec.v7_vec16,
    "v8_sector": transpose_sector.v8_sector,
    "v6_packed": transpose_v6.v6_packed,
    "v6_persistent": transpose_v6.v6_persistent,
    **{name: transpose_classic.LADDER[name] for name in
       ("v1_naive", "v2_smem", "v3_rotate", "v3_padded", "v4_double_buffer", "v5_64x32")},
}


class Fake:
    """An object exposing only a __cuda_array_interface__ (never dereferenced)."""

    def __init__(self, shape, typestr="<f4", ptr=BASE, readonly=False):
        self.__cuda_array_interface__ = {"shape": tuple(shape), "typestr": typestr,
                                         "data": (ptr, readonly), "strides": None, "version": 3}


class ReachedDevice(Exception):
    """Raised where the launcher would first make numba arrays (and call the driver)."""


@pytest.fixture(autouse=True)
def sentinel(monkeypatch):
    """No GPU: the launch device is unknown, the driver is never asked about a pointer, and
    turning an operand into a numba device array raises ReachedDevice."""
    def reached(array):
        raise ReachedDevice(array)

    monkeypatch.setattr(_grid, "as_device", reached)
    monkeypatch.setattr(operands, "launch_device", lambda: None)
    monkeypatch.setattr(operands, "_query_pointer",
                        lambda ptr: pytest.fail("asked the driver about a pointer"))


@pytest.fixture
def two_gpus(monkeypatch):
    """Device 0 launches; allocations at BASE.. (1 GiB) live on device 0, at OTHER.. on 1."""
    fake_two_gpus(monkeypatch, ((BASE, 0), (OTHER, 1)), 1 << 30)


# (id, src, out, exception, literal text of the message)
BAD = [
    ("null_src", Fake(SHAPE, ptr=0), Fake(OUT_SHAPE, ptr=OTHER), ValueError,
     "src's global address 0x0 is not a valid device pointer"),
    ("null_out", Fake(SHAPE), Fake(OUT_SHAPE, ptr=0), ValueError,
     "out's global address 0x0 is not a valid device pointer"),
    ("negative_src", Fake(SHAPE, ptr=-4096), Fake(OUT_SHAPE, ptr=OTHER), ValueError,
     "src's global address -0x1000 is not a valid device pointer"),
    ("misaligned_src", Fake(SHAPE, ptr=BASE + 2), Fake(OUT_SHAPE, ptr=OTHER), ValueError,
     "src's global address 0x10000000002 is not aligned to its 4-byte elements "
     "(address % 4 = 2)"),
    ("misaligned_out", Fake(SHAPE, "<f8"), Fake(OUT_SHAPE, "<f8", ptr=OTHER + 4), ValueError,
     "out's global address 0x20000000004 is not aligned to its 8-byte elements "
     "(address % 8 = 4)"),
    ("read_only_out", Fake(SHAPE), Fake(OUT_SHAPE, ptr=OTHER, readonly=True), ValueError,
     "out is read-only (its __cuda_array_interface__ data is (0x20000000000, True)) but the "
     "kernel writes it"),
    ("big_endian_src", Fake(SHAPE, ">f4"), Fake(OUT_SHAPE, ptr=OTHER), TypeError,
     "src's typestr '>f4' is byte-swapped (big-endian)"),
    ("object_src", Fake(SHAPE, "|O8"), Fake(OUT_SHAPE, "|O8", ptr=OTHER), TypeError,
     "src's typestr '|O8' is a Python object type"),
]


@pytest.mark.parametrize("case", BAD, ids=[c[0] for c in BAD])
@pytest.mark.parametrize("kernel", LAUNCHERS)
def test_launcher_refuses_a_bad_operand_by_name(kernel, case):
    _, src, out, exc, message = case
    with pytest.raises(exc, match=re.escape(message)):
        LAUNCHERS[kernel](src, out)


@pytest.mark.parametrize("kernel", LAUNCHERS)
def test_launcher_refuses_an_array_on_another_device(kernel, two_gpus):
    fn = LAUNCHERS[kernel]
    with pytest.raises(ValueError, match=re.escape(
            "out lives on device 1 but the launch device (numba's current device) is 0")):
        fn(Fake(SHAPE), Fake(OUT_SHAPE, ptr=OTHER))
    with pytest.raises(ValueError, match=re.escape("src lives on device 1 but the launch device")):
        fn(Fake(SHAPE, ptr=OTHER), Fake(OUT_SHAPE, ptr=BASE + (1 << 20)))
    with pytest.raises(ReachedDevice):      # both on the launch device: accepted
        fn(Fake(SHAPE), Fake(OUT_SHAPE, ptr=BASE + (1 << 20)))


@pytest.mark.parametrize("kernel", LAUNCHERS)
def test_launcher_passes_valid_operands_to_the_device(kernel):
    fn = LAUNCHERS[kernel]
    with pytest.raises(ReachedDevice):
        fn(Fake(SHAPE), Fake(OUT_SHAPE, ptr=OTHER))
    with pytest.raises(ReachedDevice):      # a read-only src is fine: it is only read
        fn(Fake(SHAPE, readonly=True), Fake(OUT_SHAPE, ptr=OTHER))
    with pytest.raises(ReachedDevice):      # empty arrays may export NULL (numba does)
        fn(Fake((0, 24, 40), ptr=0), Fake((0, 40, 24), ptr=0))


@pytest.mark.parametrize("kernel", LAUNCHERS)
def test_launcher_keeps_its_shape_and_dtype_messages(kernel):
    fn = LAUNCHERS[kernel]
    with pytest.raises(ValueError, match=r"out must have shape \(B, N, M\) = \(2, 5, 3\)"):
        fn(Fake((2, 3, 5)), Fake((2, 3, 5), ptr=OTHER))
    with pytest.raises(ValueError, match="must be 3-D"):
        fn(Fake((3, 5)), Fake((5, 3), ptr=OTHER))
    with pytest.raises(ValueError, match=re.escape("same dtype; got float32 and float64")):
        fn(Fake((1, 3, 5)), Fake((1, 5, 3), "<f8", ptr=OTHER))


def test_check_pair_returns_the_pair_and_its_extents(monkeypatch):
    monkeypatch.setattr(_grid, "as_device", lambda array: array)
    src, out = Fake(SHAPE), Fake(OUT_SHAPE, ptr=OTHER)
    assert _grid.check_pair(src, out) == (src, out, *SHAPE)
