"""Every example runs to completion (each is ``examples/<name>/<name>.py`` with a PEP 723 header)."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest
from _scripts import run_script

import recordkit as rk

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
# same_task holds one task written with several libraries; tests/test_examples_same_task.py runs it.
SCRIPTS = sorted(path for path in EXAMPLES.glob("*/*.py") if path.parent.name != "same_task")
PEP723 = re.compile(r"^# /// script\n((?:#.*\n)*?)# ///$", re.MULTILINE)


def _dependencies(script: Path) -> list[str]:
    """The import names of the packages the script's PEP 723 header asks for."""
    match = PEP723.search(script.read_text(encoding="utf-8"))
    assert match, f"{script} has no PEP 723 header"
    header = "".join(line[2:] + "\n" for line in match.group(1).splitlines())
    # The list ends at the last "]" of its line: requirements may contain extras ("recordkit[torch]").
    listed = re.search(r"dependencies\s*=\s*\[(.*)\]\s*$", header, re.DOTALL | re.MULTILINE)
    assert listed, f"{script}: the PEP 723 header lists no dependencies"
    requirements = re.findall(r"[\"']([^\"']+)[\"']", listed.group(1))
    names = [re.match(r"[A-Za-z0-9_.\-]+", requirement).group(0) for requirement in requirements]
    return [name.replace("-", "_").lower() for name in names]


def test_every_example_has_its_layout():
    assert SCRIPTS, "no examples found"
    for script in SCRIPTS:
        assert script.stem == script.parent.name, script
        assert (script.parent / "README.md").is_file(), script
        assert "recordkit" in _dependencies(script)


@pytest.mark.parametrize("script", SCRIPTS, ids=[s.parent.name for s in SCRIPTS])
def test_example_runs(script, tmp_path):
    missing = [name for name in _dependencies(script) if importlib.util.find_spec(name) is None]
    if missing:
        pytest.skip(f"{script.name} needs {', '.join(missing)}")
    proc = run_script(script, tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip(), "an example should say what it did"


def test_verify_shards_rescues_the_intact_records_after_the_damage_too(tmp_path):
    spec = importlib.util.spec_from_file_location(
        "verify_shards", EXAMPLES / "verify_shards" / "verify_shards.py"
    )
    assert spec is not None
    assert spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    example.main(tmp_path)
    with rk.open(tmp_path / "rescued.tfrecord") as reader:
        ids = [int(rk.decode_example(record)["id"][0]) for record in reader]
    shard = range(200, 300)  # the third of 4 shards of 400 records
    assert ids == sorted(ids)
    assert set(ids) <= set(shard)
    assert len(ids) == len(shard) - 1  # one damaged record lost, no more
    lost = (set(shard) - set(ids)).pop()
    assert any(i > lost for i in ids)  # the intact records after the damage are kept
