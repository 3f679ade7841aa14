"""numba_tma._unroll: constant loops written out in the source, the same results as the loops
(plain Python here; the GEMM SASS tests check what it does for numba-cuda-mlir's machine code)."""

import dis
import random

import pytest

from numba_tma._frontend import UNROLL_IN_SOURCE, front_end
from numba_tma._unroll import MAX_TRIPS, unrolled

N = 3


def loops(func):
    return sum(i.opname == "FOR_ITER" for i in dis.get_instructions(func))


def _factory(K, M):
    def f(acc, n, flag):
        s = 0
        for j in range(K):                      # closure bound: written out
            for q in range(j + 1):              # depends on the outer loop's value
                s += acc[j * 4 + q] * (q + 1)
        for i in range(n):                      # a parameter: stays a loop
            s += acc[i]
        for i in range(N, M + N, 2):            # global and closure, start/stop/step
            if i == 3 and flag:
                continue                        # continue: stays a loop
            s += acc[i]
        for i in range(2):
            s -= late(acc[i])                   # a closure cell filled after f is defined
        for i in range(2):
            s += i
        else:
            s += 1                              # else: stays a loop
        return s

    def late(x):
        return x // 3

    return f


@pytest.mark.parametrize("k,m", [(1, 1), (2, 4), (3, 6)])
def test_same_results(k, m):
    f = _factory(k, m)
    g = unrolled(f)
    assert g is not f and g.__wrapped__ is f and g.__name__ == f.__name__
    rng = random.Random(k * 100 + m)
    for _ in range(20):
        acc = [rng.randrange(-1000, 1000) for _ in range(64)]
        n = rng.randrange(0, 10)
        for flag in (False, True):
            assert g(acc, n, flag) == f(acc, n, flag)
    # Written out: the K loop and its inner loop, the late cell's loop; kept: range(n), the
    # loop with continue, the loop with else.
    assert loops(f) == 6 and loops(g) == 3


def test_nothing_to_write_out_returns_the_function():
    def f(acc, n):
        s = 0
        for i in range(n):
            s += acc[i]
        while s > 10:
            s -= 10
        return s

    assert unrolled(f) is f

    def g(acc):
        s = 0
        for j in [0, 1]:                        # not a range
            s += acc[j]
        for j in reversed(range(2)):            # nor this
            s += acc[j]
        return s

    assert unrolled(g) is g


def test_local_name_shadowing_a_global_is_not_a_bound():
    def f(acc):
        N = len(acc)                            # the local N, not the module's 3
        s = 0
        for i in range(N):
            s += acc[i]
        return s

    assert unrolled(f) is f
    assert f([1] * 5) == 5


def test_break_and_assigned_variable_keep_the_loop():
    def f(acc):
        s = 0
        for i in range(4):
            if acc[i] < 0:
                break
            s += acc[i]
        for i in range(4):
            i += 1                              # (assigns the loop variable)
            s += i
        for i in range(4):
            for j in range(3):
                if j == 1:
                    break                       # the inner loop's break: the outer is written out
                s += acc[i] + j
        return s

    g = unrolled(f)
    for acc in ([1, 2, 3, 4], [1, -2, 3, 4], [5, 6, 7, -8]):
        assert g(acc) == f(acc)
    assert loops(f) == 4 and loops(g) == 2 + 4    # two kept, four copies of the inner loop


def test_trip_limit():
    def big(acc):
        for i in range(MAX_TRIPS + 1):
            acc[i] = i

    def fits(acc):
        for i in range(MAX_TRIPS):
            acc[i] = i

    assert unrolled(big) is big
    g = unrolled(fits)
    acc = [0] * MAX_TRIPS
    g(acc)
    assert acc == list(range(MAX_TRIPS)) and loops(g) == 0


def test_source_unavailable_returns_the_function():
    namespace = {}
    exec("def f(acc):\n    for i in range(4):\n        acc[i] = i\n", namespace)
    assert unrolled(namespace["f"]) is namespace["f"]


def test_front_end_choice():
    # numba-cuda's LLVM unrolls these loops itself (writing them out there only costs compile
    # time); numba-cuda-mlir's pipeline does not.
    assert UNROLL_IN_SOURCE == (front_end() == "numba-cuda-mlir")
    assert MAX_TRIPS >= 128                 # a 64 x 256 f32 accumulator fragment per thread
