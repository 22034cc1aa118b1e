"""examples/same_task: each version of the task runs and reads one epoch, and the line counts are true."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest
from _scripts import run_script

import recordkit

FOLDER = Path(__file__).resolve().parent.parent / "examples" / "same_task"

# Each version, the modules it imports beyond the standard library, and the name its report starts with.
VERSIONS = {
    "with_recordkit.py": (["numpy", "PIL", "torch"], "recordkit"),
    "with_tfdata.py": (["numpy", "PIL", "tensorflow"], "tf.data"),
    "with_vahidk.py": (["numpy", "PIL", "torch", "tfrecord"], "vahidk tfrecord"),
    "with_webdataset.py": (["numpy", "PIL", "torch", "webdataset"], "webdataset"),
    "with_streaming.py": (["numpy", "PIL", "torch", "streaming"], "streaming"),
}


def _count_lines() -> dict[str, int]:
    proc = run_script(FOLDER / "count_lines.py", FOLDER)
    assert proc.returncode == 0, proc.stderr
    return {name: int(count) for name, count in (line.split() for line in proc.stdout.splitlines())}


def test_every_version_is_here_and_tested():
    assert {script.name for script in FOLDER.glob("with_*.py")} == VERSIONS.keys()


@pytest.mark.parametrize("script", list(VERSIONS))
def test_version_reads_one_epoch_of_decoded_batches(script, tmp_path):
    modules, label = VERSIONS[script]
    missing = [name for name in modules if importlib.util.find_spec(name) is None]
    if missing:
        pytest.skip(f"{script} needs {', '.join(missing)}")
    if script == "with_recordkit.py" and not hasattr(recordkit, "Image"):
        pytest.skip("with_recordkit.py needs recordkit.Image")
    proc = run_script(FOLDER / script, tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    last = proc.stdout.strip().splitlines()[-1]
    assert re.fullmatch(rf"{re.escape(label)}: 1000 samples, images of .*uint8'?>?", last), last
    assert (
        len(list((tmp_path / "out").iterdir())) >= 4
    )  # the four shards, and any index beside them


def test_recordkit_version_is_the_shortest():
    counts = _count_lines()
    assert counts.keys() == VERSIONS.keys()
    peers = [count for name, count in counts.items() if name != "with_recordkit.py"]
    assert counts["with_recordkit.py"] <= min(peers)


def test_readme_table_matches_count_lines():
    readme = (FOLDER / "README.md").read_text(encoding="utf-8")
    table = dict(re.findall(r"^\| `(with_\w+\.py)` \| (\d+) \|", readme, re.MULTILINE))
    assert {name: int(count) for name, count in table.items()} == _count_lines()
