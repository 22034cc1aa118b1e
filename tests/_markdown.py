"""Read Markdown pages: run their ``python`` blocks as scripts, list the commands of their shell blocks."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from _scripts import run_script

PYTHON_BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)
PYCON_BLOCK = re.compile(r"^```pycon\n(.*?)^```", re.DOTALL | re.MULTILINE)


def python_blocks(path: Path) -> list[str]:
    """Return the code of every fenced ``python`` block of ``path``."""
    return PYTHON_BLOCK.findall(path.read_text(encoding="utf-8"))


def pycon_blocks(path: Path) -> list[str]:
    """Return every fenced ``pycon`` block (an interactive session, ``>>>`` prompts) of ``path``."""
    return PYCON_BLOCK.findall(path.read_text(encoding="utf-8"))


def run_python_blocks(
    path: Path, cwd: Path | None = None, blocks: Sequence[int] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``python`` blocks of ``path`` in sequence as one script, as a user who copies them would.

    The blocks (all, or those numbered in ``blocks``) are written to a ``.py`` file in ``cwd`` (default:
    the current directory) and run there with ``python file.py`` in a new process, so that what only
    breaks in a script (a process pool re-importing ``__main__``, say) breaks here too. Fails with the
    output when the script exits with a status other than 0; returns the finished process.
    """
    folder = Path.cwd() if cwd is None else cwd
    code = python_blocks(path)
    chosen = range(len(code)) if blocks is None else blocks
    script = folder / f"{path.stem.replace('-', '_')}_page.py"
    script.write_text(
        "".join(f"# {path.name}, python block {i}\n{code[i]}\n" for i in chosen), encoding="utf-8"
    )
    proc = run_script(script, folder)
    assert proc.returncode == 0, f"{path.name} as a script:\n{proc.stdout}{proc.stderr}"
    return proc


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
