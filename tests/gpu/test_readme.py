"""The README's first example runs as written and adds one to every element."""

import os
import re

import numpy as np
from test_readme_examples import as_front_end


def test_readme_add_one_example():
    readme = os.path.join(os.path.dirname(__file__), "..", "..", "README.md")
    blocks = re.findall(r"```python\n(.*?)```", open(readme).read(), re.S)
    block = as_front_end(blocks[0])
    scope = {}
    exec(compile(block, "README.md", "exec"), scope)
    want = np.arange(100 * 64, dtype=np.int32).reshape(100, 64) + 1
    np.testing.assert_array_equal(scope["a"].copy_to_host(), want)
