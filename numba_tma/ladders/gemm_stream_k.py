"""No seed: the stream-K rung of the wgmma GEMM ladder (``StreamKConfig``), the persistent GEMM
(:mod:`numba_tma.kernels.gemm.persistent`) with its last, part-filled round of tiles split
along K over every block (:mod:`numba_tma.kernels.gemm.stream_k`, where the config, the split
and the workspace live). On 16-bit inputs ``matmul()`` never chooses it: on the H100 the
128 x 192 tiles and CTA pairs that fill the last wave better won (``docs/gemm.md``); run it with
``matmul(a, b, config=StreamKConfig())``. fp8 takes it with block scales where the tiles leave
most of a last round idle, and in every mode for decode-like products (``docs/fp8.md``).
"""

from ..kernels.gemm.stream_k import (MIN_STREAM_K_SLICES, SIGNATURE_STREAM_K, StreamKConfig,
                                     stream_k_schedule, stream_k_split, workspace_floats)

__all__ = ["StreamKConfig", "stream_k_split", "stream_k_schedule", "workspace_floats",
           "MIN_STREAM_K_SLICES", "SIGNATURE_STREAM_K"]
