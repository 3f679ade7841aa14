"""Draw bench results (the JSON a bench's --json wrote) as PNGs, without a GPU; only the PNGs
that --png or --out-dir names are written.

    python benches/plot.py benches/results/host-h100.json --png host.png
    python benches/plot.py benches/results/*.json --out-dir plots        # plots/<name>.png each
    # redraw the committed PNGs in place (and draw the results that have none):
    python benches/plot.py benches/results/*.json --out-dir benches/results

One panel per dtype where the bench has them, one line per kernel and baseline (copy, torch,
cuBLAS, Triton as the bench measured them). Each bench draws the same picture of a new run with
``--plot PATH``. Needs matplotlib (``pip install "numba_tma[plot]"``). Exit status 1 when an
input could not be drawn (the others are), 2 for a usage error or without matplotlib.
"""

import argparse
import json
import os
import sys


# This checkout's numba_tma first (an older installed copy is never benched by mistake).
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from numba_tma import bench  # noqa: E402


def outputs(args, p):
    """The PNG of each input, as the command line names them (``p.error`` where it does not)."""
    if args.png:
        if len(args.results) > 1:
            p.error("--png takes one input; name a folder with --out-dir for several")
        return [args.png]
    if not args.out_dir:
        p.error("name the output: --png PATH (one input) or --out-dir DIR (each input's name "
                "with .png; --out-dir benches/results redraws the committed PNGs)")
    outs = [os.path.join(args.out_dir, os.path.splitext(os.path.basename(path))[0] + ".png")
            for path in args.results]
    if len(set(outs)) < len(outs):      # one PNG would overwrite another
        p.error("two inputs share a file name; draw them with --png one at a time")
    return outs


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("results", nargs="+", metavar="JSON", help="bench result JSON files")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--png", metavar="PATH", default=None,
                       help="the PNG to write (one input only)")
    where.add_argument("--out-dir", metavar="DIR", default=None,
                       help="write each input's PNG into DIR, named as the JSON with .png")
    args = p.parse_args(argv)
    outs = outputs(args, p)
    bench.require("benches/plot.py", plot="the PNGs")
    failed = False
    for path, out in zip(args.results, outs):
        try:
            with open(path) as f:
                doc = json.load(f)
            bench.write_plot(doc, out)
        except (OSError, ValueError) as exc:    # unreadable, not JSON, no plot for its bench
            bench.log(f"{path}: not drawn: {bench.one_line(exc, limit=400)}")
            failed = True
            continue
        print(f"wrote {out}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
