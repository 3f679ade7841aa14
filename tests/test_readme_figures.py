"""Every number in the README's tables comes from a committed result: it is, at the precision
the README prints it, some number in a file under ``benches/results/`` (the JSON the benches
wrote, or the text of a run). A figure typed by hand, rounded differently, or left behind when a
result was replaced fails here."""

import json
import math
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benches" / "results"
#: A number in a table cell: not part of a name (v7), an exponent (8192^3) or a longer number.
NUMBER = re.compile(r"(?<![\w.^])\d+(?:\.\d+)?(?![\w^])")


def _numbers(obj, out):
    if isinstance(obj, dict):
        for v in obj.values():
            _numbers(v, out)
    elif isinstance(obj, list):
        for v in obj:
            _numbers(v, out)
    elif isinstance(obj, (int, float)) and not isinstance(obj, bool) and math.isfinite(obj):
        out.add(float(obj))


def result_numbers():
    out = set()
    for path in RESULTS.iterdir():
        if path.suffix == ".json":
            _numbers(json.loads(path.read_text()), out)
        elif path.suffix == ".txt":
            out.update(float(m) for m in re.findall(r"\d+(?:\.\d+)?", path.read_text()))
    return out


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


def test_readme_table_figures_come_from_results():
    numbers = result_numbers()
    assert len(numbers) > 1000, "benches/results holds no results"
    missing = [f"README.md:{i}: {token} in {line.strip()[:80]}"
               for i, token, line in table_numbers((ROOT / "README.md").read_text())
               if not sourced(token, numbers)]
    assert not missing, "figures with no committed result:\n" + "\n".join(missing)


def test_the_check_catches_a_typed_figure():
    numbers = {96.24, 2913.3}
    rows = "| a | b |\n| --- | --- |\n| float32 | 2913 | 96.2 | 96.3 |\n"
    found = [(t, sourced(t, numbers)) for _, t, _ in table_numbers(rows)]
    assert found == [("2913", True), ("96.2", True), ("96.3", False)]    # not float32's 32
