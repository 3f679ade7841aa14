"""Launch-side helpers numba-cuda lacks, one module per concern:

- :mod:`~numba_tma.launch.shared_memory` dynamic shared memory beyond the default 48 KB
- :mod:`~numba_tma.launch.clusters` thread-block cluster launches (sm_90) through
  ``cuLaunchKernelEx``
- :mod:`~numba_tma.launch.streams` streams and contexts as the launch paths see them
- :mod:`~numba_tma.launch.direct` launches from raw pointers without numba's per-call argument
  typing (:class:`DirectKernel`, :class:`PreparedLaunch`)
- :mod:`~numba_tma.launch.quiet` the library's own launches through numba's syntax, without
  low-occupancy warnings about grids it sized (:func:`configure`)
- :mod:`~numba_tma.launch.driver_calls` what they hand the driver: launch configs, packed
  parameter words, the check of its answer

The public names are gathered here: ``from numba_tma.launch import DirectKernel``. This is host
code below the kernels: nothing here imports :mod:`numba_tma.kernels` or the public API.
"""

from .clusters import (
    CLUSTER_MIN_CC,
    MAX_BLOCK_DIM,
    MAX_BLOCK_THREADS,
    MAX_GRID_DIM,
    MAX_NONPORTABLE_CLUSTER_SIZE,
    MAX_PORTABLE_CLUSTER_SIZE,
    ClusterLaunch,
    cluster_launch,
    launch_cluster,
    max_active_clusters,
    plan_cluster_launch,
)
from .direct import DirectKernel, PreparedLaunch
from .driver_calls import pack_kernel_args, pack_kernel_args_ctypes
from .quiet import configure
from .shared_memory import DEFAULT_DYNAMIC_SHARED, max_dynamic_shared, reserve_dynamic_shared
from .streams import context_id, context_id_or_none, is_capturing, numba_stream, stream_handle

__all__ = ["DEFAULT_DYNAMIC_SHARED", "max_dynamic_shared", "reserve_dynamic_shared",
           "ClusterLaunch", "plan_cluster_launch", "launch_cluster", "cluster_launch",
           "max_active_clusters", "pack_kernel_args", "pack_kernel_args_ctypes",
           "CLUSTER_MIN_CC", "MAX_PORTABLE_CLUSTER_SIZE", "MAX_NONPORTABLE_CLUSTER_SIZE",
           "MAX_BLOCK_THREADS", "MAX_BLOCK_DIM", "MAX_GRID_DIM",
           "configure",
           "stream_handle", "numba_stream", "context_id", "context_id_or_none", "is_capturing",
           "DirectKernel", "PreparedLaunch"]
