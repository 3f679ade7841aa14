"""Split GPU test files into chunks of at most SIZE test ids, for .ci/gpu to run in parallel.

    python3 .ci/chunks.py OUTDIR SIZE [-k EXPR] FILE...

One ``pytest --collect-only`` over the files (with ``-k EXPR``, the selection a sanitized run
uses); for each file, ``OUTDIR/<stem>.<i>.ids`` hold its ids, one per line (one id per chunk
for the files in ``OWN_PROCESS``), and a line ``<stem> <chunks>`` is printed (0 chunks where
nothing was collected). A file's chunks are separate processes, so a kernel that faults still
loses only its own chunk's context.
"""
import collections
import os
import subprocess
import sys

# Files whose every test is minutes of compiling and running (each shard of the seeded fuzz
# compiles kernels of its own): one test per chunk, so they spread over the host's cores.
OWN_PROCESS = {"test_fuzz"}


def main(argv):
    outdir, size = argv[0], int(argv[1])
    rest = argv[2:]
    select = []
    if rest[:1] == ["-k"]:
        select, rest = ["-k", rest[1]], rest[2:]
    os.makedirs(outdir, exist_ok=True)
    done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q",
                           "-p", "no:cacheprovider", *select, *rest],
                          capture_output=True, text=True)
    ids = collections.defaultdict(list)
    for line in done.stdout.splitlines():
        if "::" in line:            # pytest prints paths relative to its rootdir: match by name
            ids[os.path.basename(line.split("::", 1)[0])].append(line.strip())
    for path in rest:
        stem = os.path.splitext(os.path.basename(path))[0]
        mine = ids.get(os.path.basename(path), [])
        step = 1 if stem in OWN_PROCESS else size
        chunks = [mine[i:i + step] for i in range(0, len(mine), step)]
        for i, chunk in enumerate(chunks):
            with open(os.path.join(outdir, f"{stem}.{i}.ids"), "w") as f:
                f.write("\n".join(chunk) + "\n")
        print(stem, len(chunks))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
