"""Run a Python script the way a user would: this interpreter, in a given folder, output captured."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def run_script(script: Path, cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """Run ``script`` with this interpreter in ``cwd``; return the finished process, whatever its status."""
    return subprocess.run(
        [sys.executable, str(script)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
