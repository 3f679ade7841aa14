"""numba_tma's bench toolkit: time your own kernels the way numba_tma's benches do.

``numba_tma.bench.do_bench(fn)`` is the median time of ``fn()`` in ms (CUDA events around each
run on the default stream, after warm-up runs; ``rounds`` medians of medians), as
``triton.testing.do_bench`` is for Triton; :func:`interleaved_rounds` times several functions in
turn, round after round, so a GPU clock that drifts with power shifts them alike. Beside them:

- :mod:`~numba_tma.bench.timing`: ``time_cuda`` (each run between its own events, optionally
  queued behind a GPU-side ``hold``), ``time_cuda_batch`` (back-to-back runs, the wall time a
  caller sees), ``host_us_per_call``, ``copy_bandwidth()`` (the device copy ceiling, GB/s);
- :mod:`~numba_tma.bench.stats`: medians, summaries, GB/s, % of a reference, speedups, geomeans;
- :mod:`~numba_tma.bench.baselines`: copy, torch, CuPy, cuBLAS (``geam``, ``torch.matmul``),
  numba-cuda's transpose and a tuned Triton matmul, as launchers;
- :mod:`~numba_tma.bench.report`: the table printer, formatting, the result JSON writer with the
  GPU, driver and versions (``report_header`` + ``write_json``/``save_results``);
- :mod:`~numba_tma.bench.env`: optional libraries, package versions, the GPU environment, and
  ``require`` (a bench's one-line exit where torch, the GPU or matplotlib it needs is missing);
- :mod:`~numba_tma.bench.args`: dtype names, argparse types, kernel selection, random inputs
  (``fp8_inputs``: an fp8 GEMM's operands and every scale mode's scales);
- :mod:`~numba_tma.bench.plot`: result documents drawn as PNGs (matplotlib, optional, imported
  only when drawing).

Example::

    from numba_tma import bench
    ms = bench.do_bench(lambda: my_kernel[grid, block](a, b))
    print(f"{bench.gbps(2 * a.nbytes, ms):.1f} GB/s, "
          f"{bench.pct_of(bench.gbps(2 * a.nbytes, ms), bench.copy_bandwidth()):.1f}% of a copy")

Importing it needs no GPU: numba.cuda, torch, CuPy, Triton and matplotlib are imported inside
the functions that use them. The scripts in ``benches/`` are command lines over this package.
"""

from .args import (DTYPE_ALIASES, SUPPORTED_DTYPES, add_output_args, argparse_type,
                   fp8_inputs, nonnegative_int, parse_dtype, parse_dtype_list, positive_int,
                   random_array, select_names, uint_view_dtype, wgmma_config)
from .env import (context_alive, dist_version, free_device_memory, gpu_environment,
                  gpu_problem, import_optional, package_versions, require, unmet_needs)
from .plot import BASELINES, PLOTS, plot_panels, plot_size, write_plot
from .report import (fmt, format_table, jsonable, log, one_line, report_header, save_results,
                     skippable, timestamp, why, write_json)
from .stats import gbps, geomean, median, pct_of, speedup, summarize
from .timing import (copy_bandwidth, do_bench, host_us_per_call, interleaved_rounds, time_cuda,
                     time_cuda_batch)

__all__ = [
    "add_output_args", "argparse_type", "BASELINES", "context_alive", "copy_bandwidth",
    "dist_version", "do_bench", "DTYPE_ALIASES", "fmt", "format_table", "fp8_inputs",
    "free_device_memory", "gbps", "geomean", "gpu_environment", "gpu_problem",
    "host_us_per_call", "import_optional", "interleaved_rounds", "jsonable", "log", "median",
    "nonnegative_int", "one_line", "package_versions", "parse_dtype", "parse_dtype_list",
    "pct_of", "plot_panels", "plot_size", "PLOTS", "positive_int", "random_array",
    "report_header", "require", "save_results", "select_names", "skippable", "speedup",
    "summarize", "SUPPORTED_DTYPES", "time_cuda", "time_cuda_batch", "timestamp",
    "uint_view_dtype", "unmet_needs", "wgmma_config", "why", "write_json", "write_plot",
]
