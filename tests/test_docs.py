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


# Runs Python as in a venv without pytest: the docs extra does not install it.
WITHOUT_PYTEST = """
import importlib.abc, sys

class _NoPytest(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "pytest" or name.startswith(("pytest.", "_pytest")):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, _NoPytest())
"""


def _python_without_pytest(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", WITHOUT_PYTEST + code, *args],
        capture_output=True,
        text=True,
        check=False,
    )


def test_sphinx_build_has_no_warnings_without_pytest(tmp_path):
    pytest.importorskip("sphinx")
    pytest.importorskip("myst_parser")
    pytest.importorskip("furo")
    build = "from sphinx.cmd.build import main; sys.exit(main(sys.argv[1:]))"
    options = ["-W", "--keep-going", "-q", "-b", "html"]
    proc = _python_without_pytest(build, *options, str(DOCS), str(tmp_path / "html"))
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "html" / "cli.html").is_file()
    api = (tmp_path / "html" / "api.html").read_text(encoding="utf-8")
    assert "FormatConformance" in api


def test_testing_module_without_pytest_says_what_it_needs():
    proc = _python_without_pytest("import recordkit, recordkit.testing")
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines()[-1] == (
        "ImportError: recordkit.testing is a pytest conformance suite and needs pytest: "
        "pip install pytest"
    )


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
