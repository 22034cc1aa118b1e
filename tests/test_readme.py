"""The README's Python code runs as written, so its quickstart can never go stale."""

from __future__ import annotations

from pathlib import Path

from _markdown import python_blocks, run_python_blocks

README = Path(__file__).resolve().parent.parent / "README.md"


def test_readme_has_a_python_quickstart():
    assert "## Quickstart" in README.read_text(encoding="utf-8")
    assert python_blocks(README), "README.md has no ```python block"


def test_readme_python_blocks_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    run_python_blocks(README)
