"""The seed ladders: the kernels of the documents numba_tma was created from, rung by rung.

Teaching code, kept runnable, tested and benchmarked (``benches/``), but not what the public API
runs (that is :mod:`numba_tma.kernels`). One module per kernel family of a seed document (the
documents are listed in the project's seed README); every module docstring names its seed and
gives its rungs' H100 figures, and every rung's docstring says what it changed and what it bought.

====================  ========  ============================================================
module                seed      what
====================  ========  ============================================================
``add_one``           000       TMA introduction: load a tile, add one, store it (swizzles)
``transpose_tma``     000       TMA transposes: naive, 128B swizzle, batched, pipelined
``warp_gemm``         002       one-warp 16x16x16 half GEMM four ways (bank conflicts)
``transpose_classic`` 003       shared-memory transposes v1-v5 (v6, shipped, from kernels)
``simt_gemm``         004       tiled SIMT fp32 GEMM (slice-k, 8x8 per thread)
``wgmma_probe``       --        one warpgroup, one tile: the wgmma GEMM ladder's first rung
====================  ========  ============================================================

Seed 001 (the TMA unit: tensor maps, modes, instruction families) has no ladder: it is what
the intrinsics modules (``numba_tma.tma``, ``bulk``, ``mbarrier``, ``tensormap.device``) and the
tensor-map planners implement. ``transpose_kernels()`` and ``matmul_kernels()`` list the
ladders' launchers beside the shipped ones, labelled.

The submodules are imported on use (``from numba_tma.ladders import warp_gemm``), not here.
"""
