"""The documentation: the Sphinx build has no warnings, and the command-line transcripts are real."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from _cli import run_cli
from _markdown import python_blocks, run_python_blocks

DOCS = Path(__file__).resolve().parent.parent / "docs"
TESTED_BLOCK = re.compile(r"<!-- tested[^>]*-->\n```console\n(.*?)```", re.DOTALL)


def test_sphinx_build_has_no_warnings(tmp_path):
    pytest.importorskip("sphinx")
    pytest.importorskip("myst_parser")
    pytest.importorskip("furo")
    command = [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html"]
    proc = subprocess.run(
        [*command, str(DOCS), str(tmp_path / "html")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "html" / "cli.html").is_file()
    assert (tmp_path / "html" / "api.html").is_file()


def _transcripts() -> list[tuple[str, str]]:
    """Each ``$ recordkit ...`` command of docs/cli.md's tested blocks with the output shown after it."""
    steps = []
    for block in TESTED_BLOCK.findall((DOCS / "cli.md").read_text(encoding="utf-8")):
        for chunk in block.split("$ ")[1:]:
            command, _, output = chunk.partition("\n")
            steps.append((command, output))
    return steps


def test_cli_page_transcripts_are_real(capsys, tmp_path, golden_dir, monkeypatch):
    steps = _transcripts()
    assert len(steps) >= 7
    shutil.copy(golden_dir / "tfrecord" / "examples.tfrecord", tmp_path / "train.tfrecord")
    monkeypatch.chdir(tmp_path)
    for command, output in steps:
        program, *args = shlex.split(command)
        assert program == "recordkit"
        result = run_cli(capsys, *args)
        assert (result.code, result.err) == (0, ""), command
        assert result.out == output, command


def test_quickstart_page_code_runs(tmp_path, monkeypatch):
    page = DOCS / "quickstart.md"
    assert python_blocks(page)
    monkeypatch.chdir(tmp_path)
    run_python_blocks(page)
