"""The one launcher of the transposes ``transpose()`` runs from raw pointers (``v7_vec16``,
``v8_sector``): each kernel module describes its kernel (how to build it, its grid's tile rows,
its arguments) and :class:`TransposeLauncher` does the rest the same way for both: the
:class:`~numba_tma.launch.DirectKernel` per element size and variant (cubin cached on disk), the
grid split at CUDA's 65535 limit on gridDim.y/z, the launches and the packed launch a repeated
layout reuses (:meth:`TransposeLauncher.prepare`).

A kernel module's grid is ``(cdiv(N, cols), tile rows, B)`` of ``threads`` threads, with
``(trows, cols, threads, min_blocks) = tiles[itemsize]``; where the tile rows or the batch pass
65535 it is split (:func:`~numba_tma.kernels._grid.grid_chunks`): batches by pointer offsets,
tile rows by the ``tile_y0`` argument of the kernel's row-offset variant. Shapes within the
limits take one launch of the plain variant.
"""

import functools

from ._grid import MAX_GRID_YZ, cdiv, grid_chunks

__all__ = ["TransposeLauncher"]


class TransposeLauncher:
    """Launches one transpose kernel family on raw pointers: src (B, M, N) at ``src_ptr``, out
    (B, N, M) at ``out_ptr``, both C-contiguous.

    :param name: the disk cache's key prefix (``"transpose_vec"``).
    :param tiles: ``{itemsize: (trows, cols, threads, min_blocks)}``.
    :param build: ``build(itemsize, row_offset) -> (kernel, argtypes)``.
    :param tile_rows: ``tile_rows(itemsize, M)``: the grid's tile rows for M src rows.
    :param args: ``args(src_ptr, out_ptr, count, M, N, tile_y0, itemsize)``: one launch's
        arguments for ``count`` elements of src and out at those pointers (arrays as
        ``(pointer, elements of the array's own dtype)``).
    :param src_args, out_args: the argument positions that hold the src and out pointers
        (what a repeated layout patches).
    """

    def __init__(self, name, tiles, build, tile_rows, args, src_args, out_args):
        self.name, self.tiles = name, tiles
        self._build, self._tile_rows, self._args = build, tile_rows, args
        self.src_args, self.out_args = tuple(src_args), tuple(out_args)
        self._kernels = functools.cache(self._direct_kernel)

    def direct(self, itemsize, row_offset=False):
        """The kernel for ``itemsize`` as a :class:`~numba_tma.launch.DirectKernel`, one per
        variant (``direct(4)`` and ``direct(4, False)`` are the same loaded kernel); not loaded
        until its first launch."""
        return self._kernels(itemsize, bool(row_offset))

    def _direct_kernel(self, itemsize, row_offset):
        from ..launch import DirectKernel    # real GPUs only: the simulator lacks its driver API

        kernel, argtypes = self._build(itemsize, row_offset)
        return DirectKernel(kernel, argtypes,
                            key=(self.name, itemsize, self.tiles[itemsize], row_offset))

    def launches(self, src_ptr, out_ptr, B, M, N, itemsize):
        """(DirectKernel, [(grid, block, args), ...]): one launch where the grid fits, else one
        per ``grid_chunks`` piece (each launch's buffers its own matrices)."""
        _, cols, threads, _ = self.tiles[itemsize]
        per = M * N                                  # elements per matrix
        gx, gy = cdiv(N, cols), self._tile_rows(itemsize, M)
        direct = self.direct(itemsize, gy > MAX_GRID_YZ)
        runs = []
        for y0, ny, z0, nz in grid_chunks(gy, B):
            off = z0 * per * itemsize
            runs.append(((gx, ny, nz), (threads, 1, 1),
                         self._args(src_ptr + off, out_ptr + off, nz * per, M, N, y0, itemsize)))
        return direct, runs

    def launch(self, src_ptr, out_ptr, B, M, N, itemsize, stream=0):
        """Launch the kernel on ``stream``, where the kernel module's ``applies_to`` holds (the
        caller checked); any shape (:meth:`launches`)."""
        direct, runs = self.launches(src_ptr, out_ptr, B, M, N, itemsize)
        for grid, block, args in runs:
            direct.launch(grid, block, stream, *args)

    def prepare(self, src_ptr, out_ptr, B, M, N, itemsize):
        """:meth:`launch`'s launch as a :class:`~numba_tma.launch.PreparedLaunch`, for calls that
        repeat the layout on other buffers (pointers at ``src_args`` / ``out_args``); None where
        the shape needs more than one launch."""
        direct, runs = self.launches(src_ptr, out_ptr, B, M, N, itemsize)
        if len(runs) > 1:
            return None
        grid, block, args = runs[0]
        return direct.prepare(grid, block, *args)
