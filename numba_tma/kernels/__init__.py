"""The kernels numba_tma's public API runs, one module per family, and their shared host helpers.

``transpose_vec`` (v7), ``transpose_sector`` (v8) and ``transpose_v6`` (v6_packed,
v6_persistent) are what ``numba_tma.transpose`` runs; the package ``gemm`` (built from parts:
its docstring is the map) what ``numba_tma.matmul`` runs; ``reduce`` (``sum_axis0``),
``grouped_copy``, ``im2col`` and ``multicast_copy`` the other library kernels. ``_grid`` (grid
limits and splitting, the transpose pair check) is a helper for the package's kernels (the
ladders' included); they take cached tensor maps from :mod:`numba_tma.tensormap.cache` and
launch through :func:`numba_tma.launch.configure`. The seed ladders live in
:mod:`numba_tma.ladders`.

A family's functions share the module's name (``kernels.im2col.im2col``), so import them from
the module; ``kernels.sum_axis0`` is the function.
"""

from .reduce import sum_axis0

__all__ = ["sum_axis0"]
