"""Run the ``recordkit`` command line in-process and capture what it prints."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from recordkit.cli import main


@dataclass
class Result:
    """The exit status and the captured output of one command."""

    code: int
    out: str
    err: str


def run_cli(capsys: Any, *args: str | os.PathLike[str]) -> Result:
    """Run ``recordkit *args`` through :func:`recordkit.cli.main` and capture stdout and stderr."""
    capsys.readouterr()
    code = main([os.fspath(arg) for arg in args])
    captured = capsys.readouterr()
    return Result(code, captured.out, captured.err)
