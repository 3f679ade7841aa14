"""The GEMMs ``matmul()`` runs, built from parts.

Parts (each a module of device-function factories, cached per configuration):

- :mod:`.ring` the TMA/mbarrier ring: slot loads, full/empty barriers, the producer/consumer
  protocol, the shared-memory carve-up;
- :mod:`.prologue` the kernel's start (map prefetch, barrier set-up, the block or cluster met,
  the dependent launch's wait);
- :mod:`.scheduler` the tile raster, clusters, persistent walks, grid sizes;
- :mod:`.mainloop` a consumer warpgroup's wgmmas on the ring;
- :mod:`.epilogue` accumulators to C through swizzled boxes and TMA stores;
- :mod:`.frame` the persistent kernel's frame, which a variant fills with its consumer loop;
- :mod:`.stream_k` the last round's tiles split along K over every block
  (:class:`~.stream_k.StreamKConfig`): the walk, the workspace, the partials' fix-up.

Variants (each assembles the parts; :meth:`WgmmaConfig.kernel` picks one):
:mod:`.tile_per_block`, :mod:`.persistent`, :mod:`.persistent_overlapped`, and the ``mma.sync``
rung :mod:`.mma_sync` (:class:`GemmConfig`); :mod:`.persistent` with a
:class:`~.stream_k.StreamKConfig` is the stream-K GEMM (fp8 block scales choose it; the ladder's
``numba_tma.ladders.gemm_stream_k`` names it for 16-bit inputs). The ladder's ping-pong GEMM
(``gemm_pingpong``) is assembled from the same parts.

Host side: :mod:`.config` (:class:`WgmmaConfig`, :class:`KernelSpec`, shared-memory sizes),
:mod:`.choose` (the config ``matmul()`` runs for a shape), :mod:`.plan` (the launch a config
implies: kernel, grid, maps, launcher).

Adding an input or output kind is a change to :class:`KernelSpec`, :mod:`.mainloop` (the
wgmma) and :mod:`.epilogue` (the packing); adding an epilogue, a change to :mod:`.epilogue`
and the variants' consumer loops that call it.
"""

from .config import KernelSpec, WgmmaConfig
from .mma_sync import GemmConfig

__all__ = ["WgmmaConfig", "GemmConfig", "KernelSpec"]
