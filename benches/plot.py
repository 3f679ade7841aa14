"""Draw a committed bench result (the JSON a bench's ``--json`` wrote) as a PNG, without a GPU:

    python benches/plot.py benches/results/gemm-h100.json                # -> gemm-h100.png
    python benches/plot.py benches/results/host-h100.json --png host.png

One panel per dtype where the bench has them, one line per kernel and baseline (copy, torch,
cuBLAS, Triton as the bench measured them). Each bench draws the same picture of a new run with
``--plot PATH``. Needs matplotlib (``pip install "numba_tma[plot]"``).
"""

import argparse
import json
import os
import sys


# This checkout's numba_tma first (an older installed copy is never benched by mistake).
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from numba_tma import bench  # noqa: E402


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("results", nargs="+", help="bench result JSON files")
    p.add_argument("--png", default=None,
                   help="output path (one input only; default: the JSON's path with .png)")
    args = p.parse_args(argv)
    if args.png and len(args.results) > 1:
        p.error("--png takes one input")
    for path in args.results:
        with open(path) as f:
            doc = json.load(f)
        out = args.png or os.path.splitext(path)[0] + ".png"
        bench.write_plot(doc, out)
        print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
