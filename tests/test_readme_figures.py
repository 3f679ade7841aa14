"""Every performance figure in the README, in docs/ and in numba_tma's docstrings and comments comes
from a committed result: it is, at the precision printed, some number in a file under ``benches/results/``
(the JSON the benches wrote, or the text of a run). A figure typed by hand, rounded differently,
quoted from a side run that was never committed, or left behind when a result was replaced fails
here.

Two checks:

- README tables: every number in a Markdown table row is some number of the results (any kind).
- Performance figures, in the README's prose and tables and in the docstrings, comments and other
  string literals of ``numba_tma/**/*.py``: a number written immediately before a unit of speed,
  time per call or ratio (``FIGURE``) --

  - ``%`` (``96.2%``, ``70 %``; code is not read, so ``a % b`` is Python's modulo),
  - ``TFLOP/s``, ``GB/s``, ``TB/s``,
  - ``us``, ``µs``, ``ms``,
  - ``x`` attached to a decimal (``0.96x``), or to any number followed by the baseline it is a
    ratio to (``3x torch``, ``1.10x cuBLAS``);

  and the numbers chained to it by ``-``, ``/``, ``, ``, ``and``, ``or``, ``to``, ``vs`` or ``->``
  (``620-645 TFLOP/s``, ``96.3 / 97.6 / 92.2 / 97.5%``, ``875 -> 942 GB/s``), each checked. Not
  figures: numbers with no such unit (tile sizes, byte counts, shapes such as ``32768^2`` or
  ``128 x 256``, register counts, ``3.9 waves``, ``8x8`` per thread, ``4x the bytes``), seconds
  (compile and first-call times), and ``NOT_FIGURES`` (settings written with a unit).

  A figure must match a number of its own kind: ``%`` the results' percentages (``pct_of_copy``,
  ``% of copy`` columns: stored as percentages, not ratios), ``GB/s`` and ``TB/s`` their bandwidths,
  ``TFLOP/s`` their TFLOP/s, ``us``/``µs`` and ``ms`` their times, ``x`` their ratios
  (``x_cublas``, ``x_triton``, ``x_torch``, geometric means, ``x ...`` columns). A JSON number's
  kind is its key's; a text file's numbers get theirs from the same ``FIGURE`` pattern and from the
  header of their table column.

The check is only as sharp as the precision printed: an integer percentage matches any stored
percentage within half a point. Numbers written without their unit (a list after "% of copy:")
are not parsed: keep those to the results by hand. A figure derived from stored numbers (a difference, a speed-up of
one side run over another) is not a stored number: quote the stored numbers instead.
"""

import io
import json
import math
import pathlib
import re
import tokenize

ROOT = pathlib.Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benches" / "results"
#: A number in a table cell: not part of a name (v7), an exponent (8192^3) or a longer number.
NUMBER = re.compile(r"(?<![\w.^])\d+(?:\.\d+)?(?![\w^])")

_NUM = r"\d+(?:\.\d+)?"
_SEP = r"(?:\s*(?:-|–|/|->|\band\b|\bor\b|\bto\b|\bvs\.?)\s*|,\s+)"
_UNIT = (r"\s?%|\s?(?:TFLOP/s|TFLOPS|GB/s|TB/s)|\s?(?:us|µs|ms)(?![\w])"
         r"|x(?=[\s,;:)\]\"'`]|\.(?:\s|$)|$)")
#: A performance figure: a chain of numbers (``a-b``, ``a / b / c``, ``a -> b``) and its unit.
FIGURE = re.compile(rf"(?<![\w.^/\-])({_NUM}(?:{_SEP}{_NUM})*)({_UNIT})")
_BASELINE = re.compile(r"\s*(?:cuBLAS|Triton|torch|CuPy|cupy|copy|unicast)\b")
_KINDS = {"%": "%", "TFLOP/s": "TFLOP/s", "TFLOPS": "TFLOP/s", "GB/s": "GB/s", "TB/s": "TB/s",
          "us": "us", "µs": "us", "ms": "ms", "x": "x"}

#: Numbers written with a unit that are settings, not measurements: (file, figure text).
NOT_FIGURES = set()


def figures(text):
    """(offset, figure text, kind, numbers) of every performance figure in ``text``."""
    for m in FIGURE.finditer(text):
        chain, unit = m.group(1), m.group(2).strip()
        numbers = re.findall(_NUM, chain)
        if unit == "x" and "." not in numbers[-1] and not _BASELINE.match(text, m.end()):
            continue                                    # 4x the bytes, 32x: a multiplier
        yield m.start(), " ".join(m.group(0).split()), _KINDS[unit], numbers


def _key_kind(key):
    if "pct" in key:
        return "%"
    if key.endswith("GBps"):
        return "GB/s"
    if key == "TFLOPs" or key.endswith("_TFLOPs"):
        return "TFLOP/s"
    if key == "us" or key.endswith("_us"):
        return "us"
    if key == "ms" or key.endswith("_ms"):
        return "ms"
    if key.startswith(("x_", "geomean_x")):
        return "x"
    return None


def _json_numbers(obj, kind, out, flat):
    if isinstance(obj, dict):
        for k, v in obj.items():
            _json_numbers(v, _key_kind(k) or kind, out, flat)
    elif isinstance(obj, list):
        for v in obj:
            _json_numbers(v, kind, out, flat)
    elif isinstance(obj, (int, float)) and not isinstance(obj, bool) and math.isfinite(obj):
        flat.add(float(obj))
        if kind:
            out.setdefault(kind, set()).add(float(obj))


def _column_kind(header):
    header = header.strip()
    if "%" in header:
        return "%"
    if "TFLOP/s" in header:
        return "TFLOP/s"
    if "GB/s" in header:
        return "GB/s"
    if "TB/s" in header:
        return "TB/s"
    if header.startswith("x "):
        return "x"
    last = header.split()[-1] if header else ""
    return {"us": "us", "ms": "ms"}.get(last)


def _text_numbers(text, out):
    for _, _, kind, numbers in figures(text):
        out.setdefault(kind, set()).update(float(n) for n in numbers)
    lines = text.splitlines()
    for i in range(len(lines) - 1):                     # tables: header, then a line of dashes
        header, rule = lines[i], lines[i + 1]
        if "|" not in header or "-" not in rule or not set(rule) <= set("-+| "):
            continue
        kinds = [_column_kind(h) for h in header.split("|")]
        for row in lines[i + 2:]:
            cells = row.split("|")
            if len(cells) != len(kinds):
                break
            for kind, cell in zip(kinds, cells):
                if kind:
                    out.setdefault(kind, set()).update(float(n) for n in NUMBER.findall(cell))


def result_numbers(by_kind=None):
    """Every number of the results; with a dict ``by_kind``, also fill it: kind -> numbers."""
    out, flat = {}, set()
    for path in RESULTS.iterdir():
        if path.suffix == ".json":
            _json_numbers(json.loads(path.read_text()), None, out, flat)
        elif path.suffix == ".txt":
            text = path.read_text()
            flat.update(float(m) for m in re.findall(r"\d+(?:\.\d+)?", text))
            _text_numbers(text, out)
    out["TB/s"] = out.get("TB/s", set()) | {x / 1000 for x in out.get("GB/s", ())}
    if by_kind is not None:
        by_kind.update(out)
    return flat


def table_numbers(text):
    """(line number, token, line) of every number in a Markdown table row of ``text``."""
    for i, line in enumerate(text.splitlines(), 1):
        if line.startswith("|") and not set(line) <= set("|-: "):
            for token in NUMBER.findall(line):
                yield i, token, line


def sourced(token, numbers):
    digits = len(token.split(".")[1]) if "." in token else 0
    value = float(token)
    return any(abs(round(x, digits) - value) < 1e-9 for x in numbers)


def readme_prose(text):
    """The README with its fenced code blocks blanked (line numbers kept)."""
    out, fenced = [], False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            out.append("")
        else:
            out.append("" if fenced else line)
    return "\n".join(out)


def python_prose(source):
    """``source`` with everything but its comments and string literals blanked (offsets kept)."""
    lines = source.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))
    chars = [c if c == "\n" else " " for c in source]
    prose_types = {tokenize.STRING, tokenize.COMMENT, getattr(tokenize, "FSTRING_MIDDLE", -1)}
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type in prose_types:
            begin = starts[tok.start[0] - 1] + tok.start[1]
            end = starts[tok.end[0] - 1] + tok.end[1]
            chars[begin:end] = source[begin:end]
            if tok.type == tokenize.COMMENT:
                chars[begin] = " "
    return "".join(chars)


def markdown_files():
    """The README and every Markdown file under docs/ (the rung histories live there)."""
    return [ROOT / "README.md"] + sorted((ROOT / "docs").rglob("*.md"))


def prose_files():
    """(path relative to the checkout, prose) of the README, docs/ and every numba_tma module."""
    for path in markdown_files():
        yield path.relative_to(ROOT).as_posix(), readme_prose(path.read_text())
    for path in sorted((ROOT / "numba_tma").rglob("*.py")):
        yield path.relative_to(ROOT).as_posix(), python_prose(path.read_text())


def unsourced_figures(name, text, by_kind):
    """``name:line: figure (numbers not found)`` for each figure of ``text`` with no result."""
    for offset, figure, kind, numbers in figures(text):
        if (name, figure) in NOT_FIGURES:
            continue
        bad = [n for n in numbers if not sourced(n, by_kind.get(kind, ()))]
        if bad:
            line = text.count("\n", 0, offset) + 1
            yield f"{name}:{line}: {figure!r} ({kind}: {', '.join(bad)} in no result)"


def test_readme_table_figures_come_from_results():
    numbers = result_numbers()
    assert len(numbers) > 1000, "benches/results holds no results"
    missing = [f"{path.relative_to(ROOT).as_posix()}:{i}: {token} in {line.strip()[:80]}"
               for path in markdown_files()
               for i, token, line in table_numbers(path.read_text())
               if not sourced(token, numbers)]
    assert not missing, "figures with no committed result:\n" + "\n".join(missing)


def test_performance_figures_in_readme_and_docstrings_come_from_results():
    by_kind = {}
    result_numbers(by_kind)
    for kind in ("%", "GB/s", "TFLOP/s", "us", "ms", "x"):
        assert len(by_kind.get(kind, ())) > 50, f"benches/results holds no {kind} figures"
    missing = [m for name, text in prose_files() for m in unsourced_figures(name, text, by_kind)]
    assert not missing, ("performance figures with no committed result (correct them to "
                         "a file in benches/results/, or remove them):\n" + "\n".join(missing))


def test_not_figures_are_still_there():
    """An exemption whose text is gone is dropped, not kept as a hole for a later figure."""
    found = {(name, figure) for name, text in prose_files() for _, figure, _, _ in figures(text)}
    assert NOT_FIGURES <= found, sorted(NOT_FIGURES - found)


def test_the_check_catches_a_typed_figure():
    numbers = {96.24, 2913.3}
    rows = "| a | b |\n| --- | --- |\n| float32 | 2913 | 96.2 | 96.3 |\n"
    found = [(t, sourced(t, numbers)) for _, t, _ in table_numbers(rows)]
    assert found == [("2913", True), ("96.2", True), ("96.3", False)]    # not float32's 32


def test_what_counts_as_a_figure():
    text = ("v7 runs 96.2% (a % 16 is not), 2913 GB/s, 620-645 TFLOP/s, 17.0 / 11.4 / 11.5 us, "
            "0.96x, 3x torch, 875 -> 942 GB/s; not 32768^2, 128 x 256, 8x8, 4x the bytes, "
            "3.9 waves, 0x1f, uint8 or 1.5 s")
    assert [(f, k, n) for _, f, k, n in figures(text)] == [
        ("96.2%", "%", ["96.2"]), ("2913 GB/s", "GB/s", ["2913"]),
        ("620-645 TFLOP/s", "TFLOP/s", ["620", "645"]),
        ("17.0 / 11.4 / 11.5 us", "us", ["17.0", "11.4", "11.5"]),
        ("0.96x", "x", ["0.96"]), ("3x", "x", ["3"]),
        ("875 -> 942 GB/s", "GB/s", ["875", "942"])]


def test_a_figure_must_match_a_result_of_its_kind():
    by_kind = {"%": {96.24}, "GB/s": {2913.3}, "x": {0.9612}}
    text = "96.2% 2913 GB/s 0.96x 96.2 GB/s 2913% 0.97x"
    assert [m.split(": ", 1)[1] for m in unsourced_figures("t", text, by_kind)] == [
        "'96.2 GB/s' (GB/s: 96.2 in no result)", "'2913%' (%: 2913 in no result)",
        "'0.97x' (x: 0.97 in no result)"]


def test_docstrings_and_comments_are_read_not_code():
    source = ('"""Runs at 91.0% of copy."""\n'
              'x = 16 % 4  # took 72.0% -> 75.3%\n'
              'y = "0.5x"\n')
    prose = python_prose(source)
    assert [(prose.count("\n", 0, o) + 1, f) for o, f, _, _ in figures(prose)] == [
        (1, "91.0%"), (2, "72.0%"), (2, "75.3%"), (3, "0.5x")]
