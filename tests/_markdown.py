"""Run the ``python`` code blocks of a Markdown file, in order, in one namespace."""

from __future__ import annotations

import re
from pathlib import Path

PYTHON_BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)


def python_blocks(path: Path) -> list[str]:
    """Return the code of every fenced ``python`` block of ``path``."""
    return PYTHON_BLOCK.findall(path.read_text(encoding="utf-8"))


def run_python_blocks(path: Path) -> None:
    """Execute every ``python`` block of ``path`` (in the current directory), failing on any error."""
    namespace: dict[str, object] = {"__name__": f"__{path.stem}__"}
    for number, block in enumerate(python_blocks(path)):
        code = compile(block, f"{path.name} python block {number}", "exec")
        exec(code, namespace)  # noqa: S102 - running the documented code is the point
