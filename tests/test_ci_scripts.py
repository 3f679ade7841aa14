"""The GPU script's helper that splits test files into chunks of test ids (.ci/chunks.py)."""

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_chunks_split_each_file_by_test_id(tmp_path):
    tests = tmp_path / "t"
    tests.mkdir()
    (tests / "test_a.py").write_text(
        "import pytest\n\n"
        "@pytest.mark.parametrize('x', ['p q', 'r', 's', 't', 'u'])\n"
        "def test_one(x):\n    pass\n\n"
        "def test_big_4096():\n    pass\n")
    (tests / "test_b.py").write_text("import pytest\npytest.skip('no', allow_module_level=True)\n")
    out = tmp_path / "ids"
    run = lambda *extra: subprocess.run(  # noqa: E731
        [sys.executable, os.path.join(ROOT, ".ci", "chunks.py"), str(out), "2", *extra,
         str(tests / "test_a.py"), str(tests / "test_b.py")],
        capture_output=True, text=True, check=True, cwd=tmp_path).stdout.split("\n")
    assert run()[:2] == ["test_a 3", "test_b 0"]
    ids = [open(out / f"test_a.{i}.ids").read().splitlines() for i in range(3)]
    assert [len(c) for c in ids] == [2, 2, 2]
    flat = [i.split("::", 1)[1] for c in ids for i in c]
    assert flat == ["test_one[p q]", "test_one[r]", "test_one[s]", "test_one[t]",
                    "test_one[u]", "test_big_4096"]            # ids with spaces kept whole
    assert run("-k", "not 4096")[:1] == ["test_a 3"]
    assert len(open(out / "test_a.2.ids").read().splitlines()) == 1
