"""Shared by the simulator tests of the classic transpose kernels: the ladder's v1-v5
(test_transpose_classic_sim.py) and the shipped v6 rungs (test_transpose_v6_sim.py).

* :func:`run_child` runs in a simulator child process (see sim_workers): for each case fresh
  random bytes in (NaN payloads included), the output poisoned, the launcher run, a byte-exact
  compare with numpy's transpose; one JSON line per case.
* :func:`problems` is the parent's verdict over one kernel's cases.
* :class:`FakeDeviceArray` is just enough array interface for the launchers' host checks.
"""

import json
import time

import numpy as np


def run_child(cases, launchers):
    """Runs in the simulator: one JSON line ``{"id", "err", "s"}`` per case ``(id, kernel,
    dtype, shape, kwargs, misaligned)``; ``launchers`` maps kernel names to launchers."""
    from numba_tma._frontend import cuda

    from numba_tma.kernels import transpose_v6 as v6

    rng = np.random.default_rng()
    for cid, kernel, dtype, shape, kwargs, misaligned in cases:
        t0 = time.perf_counter()
        try:
            B, M, N = shape
            dt = np.dtype(dtype)
            nbytes = B * M * N * dt.itemsize
            a = rng.integers(0, 256, size=nbytes, dtype=np.uint8).view(dt).reshape(shape)
            poison = np.full(nbytes, 0xA5, np.uint8)
            if misaligned:
                # Device buffers one byte past an 8-byte boundary.
                pad = np.zeros(1, np.uint8)
                src = cuda.to_device(np.concatenate([pad, a.view(np.uint8).ravel()]))[1:]
                src = src.view(dt).reshape(shape)
                out = cuda.to_device(np.concatenate([pad, poison]))[1:]
                out = out.view(dt).reshape(B, N, M)
                k = v6._v6_setup(src, out, B, M, N)[1]
                assert k == 1, f"misaligned buffers took the packed path (k={k})"
            else:
                src = cuda.to_device(a)
                out = cuda.to_device(poison.view(dt).reshape(B, N, M))
            launchers[kernel](src, out, **kwargs)
            got = out.copy_to_host().view(np.uint8).reshape(B, N, M, dt.itemsize)
            want = np.ascontiguousarray(a.transpose(0, 2, 1)).view(np.uint8)
            want = want.reshape(B, N, M, dt.itemsize)
            bad = np.argwhere((got != want).any(axis=-1))
            err = None
            if len(bad):
                err = (f"{len(bad)} of {B * N * M} elements differ, first at out index "
                       f"{tuple(int(v) for v in bad[0])}")
        except Exception as exc:  # reported to the parent, which fails the case
            err = f"{type(exc).__name__}: {exc}"
        print(json.dumps({"id": cid, "err": err, "s": round(time.perf_counter() - t0, 2)}),
              flush=True)


def problems(sim_results, mine):
    """What went wrong with the cases ``mine`` in ``sim_results`` (run_cases' answer): one line
    per case without a result or with an error."""
    results, errors = sim_results
    found = []
    for cid, *_ in mine:
        r = results.get(cid)
        if r is None:
            found.append(f"{cid}: no result" + (f" ({errors[0]})" if errors else ""))
        elif r["err"]:
            found.append(f"{cid}: {r['err']}")
    return found


class FakeDeviceArray:
    """Just enough __cuda_array_interface__ for the launchers' checks; never dereferenced."""

    def __init__(self, shape, typestr="<f4"):
        self.__cuda_array_interface__ = {"version": 3, "shape": shape, "typestr": typestr,
                                         "strides": None, "data": (0x10000, False)}
