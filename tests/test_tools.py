"""The maintainers' tools under tools/: the code-line counter the API issue's budget is measured with."""

from __future__ import annotations

import importlib.util
from pathlib import Path

TOOLS = Path(__file__).resolve().parent.parent / "tools"


def _counter():
    spec = importlib.util.spec_from_file_location("count_code_lines", TOOLS / "count_code_lines.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SOURCE = '''"""A module docstring
over two lines."""

import os  # a comment after code counts as code

# a comment alone


class A:
    """A class docstring."""

    x = (
        1,
        2,
    )

    def f(self):
        """A function docstring."""
        return "a string that is not a docstring"
'''


def test_blank_lines_comments_and_docstrings_do_not_count():
    # import, class, x = ( 1, 2, ), def, return: 8 lines of code
    assert _counter().code_lines(SOURCE) == 8


def test_packages_are_counted_apart_and_generated_code_is_left_out(tmp_path):
    root = tmp_path / "recordkit"
    (root / "io").mkdir(parents=True)
    (root / "_proto" / "tensorflow").mkdir(parents=True)
    (root / "__init__.py").write_text("x = 1\n")
    (root / "io" / "reader.py").write_text(SOURCE)
    (root / "_proto" / "tensorflow" / "example_pb2.py").write_text("y = 2\n" * 50)
    (root / "_proto" / "__init__.py").write_text("z = 3\n")
    counts = _counter().count(root)
    assert counts == {"recordkit": 1, "io": 8, "_proto": 1}
