"""Read Markdown pages: run their ``python`` blocks, list the commands of their shell blocks."""

from __future__ import annotations

import re
from dataclasses import dataclass
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


SHELL_BLOCK = re.compile(r"^```(bash|console|sh|shell)\n(.*?)^```", re.DOTALL | re.MULTILINE)
TRAILING_COMMENT = re.compile(r"\s+#\s.*$")


@dataclass(frozen=True)
class ShellCommand:
    """One command of a shell block, as written (less a trailing ``# comment``), and what it shows.

    ``output`` is the text a ``console`` block shows after the command (``""`` when none); a ``bash``
    block shows none.
    """

    page: str
    command: str
    output: str


def _console_commands(page: str, block: str) -> list[ShellCommand]:
    commands = []
    for chunk in re.split(r"^\$ ", block, flags=re.MULTILINE)[1:]:
        line, _, output = chunk.partition("\n")
        commands.append(ShellCommand(page, TRAILING_COMMENT.sub("", line).strip(), output))
    return commands


def _bash_commands(page: str, block: str) -> list[ShellCommand]:
    commands = []
    for line in block.replace("\\\n", " ").splitlines():
        command = TRAILING_COMMENT.sub("", line).strip()
        if command and not command.startswith("#"):
            commands.append(ShellCommand(page, command, ""))
    return commands


def shell_commands(path: Path, page: str) -> list[ShellCommand]:
    """Return every command of the ``bash``, ``sh``, ``shell`` and ``console`` blocks of ``path``, in order.

    In a ``console`` block the commands are the lines after ``$ ``; in the others, every line that is not
    blank or a comment.
    """
    commands = []
    for kind, block in SHELL_BLOCK.findall(path.read_text(encoding="utf-8")):
        split = _console_commands if kind == "console" else _bash_commands
        commands.extend(split(page, block))
    return commands
