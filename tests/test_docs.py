"""The documentation: the Sphinx build has no warnings, and every shell command it shows runs as shown."""

from __future__ import annotations

import doctest
import importlib.util
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from _markdown import ShellCommand, pycon_blocks, python_blocks, run_python_blocks, shell_commands
from _scripts import run_script

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
GOLDEN = ROOT / "tests" / "data" / "golden"


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


# -- every shell command of the README and the docs runs somewhere, or says why it cannot -------------

# .ci/run runs these exactly as written, each in a fresh virtual environment of its own (the test command in
# one holding the test extra alone, as a user's would; the suite also runs with the peers, before).
TEST_COMMAND = 'pip install ".[test]" && python -m pytest'
RUN_BY_CI = {
    'pip install ".[all]" && python examples/quickstart/quickstart.py',
    TEST_COMMAND,
    'pip install ".[docs]" && sphinx-build -W -b html docs build/docs',
}

# Commands that cannot run in CI, and why. Every other command runs in test_documented_commands_run.
NOT_RUN = {
    # Installing from a checkout: CI's fresh environments install ".[all]", ".[test]" and ".[docs]" with
    # the README's own commands above; the core and the other extras are subsets of those.
    "pip install .": "a subset of .[all], installed in a fresh venv by .ci/run",
    'pip install ".[fast]"': "a subset of .[all], installed in a fresh venv by .ci/run",
    'pip install ".[remote]"': "a subset of .[all], installed in a fresh venv by .ci/run",
    'pip install ".[cli]"': "a subset of .[all], installed in a fresh venv by .ci/run",
    'pip install ".[ray]"': "installed with the other extras by .ci/run; tests/test_ray.py uses it",
    'pip install ".[dask]"': "installed with the other extras by .ci/run; tests/test_dask.py uses it",
    'pip install ".[arrow]"': "installed with the other extras by .ci/run; tests/test_tables.py uses it",
    'pip install ".[tensorboard]"': (
        "installed with the other extras by .ci/run; tests/test_tensorboard.py uses it"
    ),
    'pip install ".[arrayrecord]"': (
        "installed with the other extras by .ci/run; tests/test_arrayrecord.py uses it"
    ),
    'pip install ".[hf]"': "installed with the other extras by .ci/run; tests/test_hf.py uses it",
    'pip install ".[all]"': "the README's install-and-run command installs it in a fresh venv in .ci/run",
    'pip install ".[image]"': "a subset of .[image-fast], installed with the other extras by .ci/run",
    'pip install ".[image-fast]"': "installed with the other extras by .ci/run; tests/test_images.py",
    'pip install ".[torch]"': "pulls PyTorch with GBs of CUDA libraries; CI installs the pinned CPU build",
    'pip install ".[dask]" distributed': "the test extra installs both; tests/test_dask.py runs the page",
    'pip install "recordkit[all] @ git+https://github.com/recordkit/recordkit"': (
        "installs the published repository from the network, not the checkout under test"
    ),
    "python tests/benchmarks/run.py --json report.json": "full benchmark, minutes of machine time",
    "recordkit convert ~/tensorflow_datasets/mnist/3.0.1 mnist-arrayrecord --to arrayrecord": (
        "needs mnist prepared by tfds; tests/test_tfds_convert.py converts datasets tfds prepared"
    ),
    "python tests/benchmarks/bench_tensorboard.py --repeat 1": (
        "10**6 scalars through tbparse and EventAccumulator, minutes; the smoke test runs it small"
    ),
    "python tests/benchmarks/run.py --only read --only write --repeat 7": "full-size data, minutes",
    "python tests/benchmarks/run.py --full": "ten million records; the smoke test runs --quick",
    "python tests/benchmarks/run.py --only pipeline --workers 1 2 4": (
        "full-size data, minutes; the smoke test runs the pipeline cases with --quick"
    ),
    "python tests/benchmarks/run.py --no-build --repeat 3 --only pipeline --only read-arrayrecord --only ffrecord": (
        "full-size data in fresh processes, minutes; the smoke test runs the same cases with --quick"
    ),
    "python tests/benchmarks/run.py --no-build --repeat 3 --only images": (
        "6,000 JPEGs in fresh processes, minutes; the smoke test runs the same case with --quick"
    ),
    "python tests/benchmarks/run.py --only pipeline --no-build --workers 1 2 4 8 16": (
        "minutes of a 16-core machine; the smoke test runs the pipeline cases with --quick"
    ),
    "python tests/benchmarks/run.py --only ffrecord --only read-tfrecord --workers 1 2 4 8 16 --json "
    "report-16.json": "minutes of a 16-core machine; test_benchmarks_smoke runs run.py with --quick",
    "python tests/benchmarks/floors.py": "a minute of machine time; test_benchmarks_smoke runs it small",
    "python tests/benchmarks/floors.py --part ffrecord": "part of the command above",
    "python tests/benchmarks/floors.py --part ffrecord-write": "part of the command above",
    "python tests/benchmarks/floors.py --part tfrecord": "part of the command above",
    "python tests/benchmarks/bench_dask.py": "200 MB through four clusters, minutes; --quick is run",
    "python tests/benchmarks/bench_ray_scaling.py --workers 1 2 4 8 16 --rounds 2 --consume driver": (
        "minutes of a 16-core machine; test_benchmarks_smoke runs the script with --quick"
    ),
    "python tests/benchmarks/bench_ray_scaling.py --workers 16 1 --rounds 1": (
        "minutes of a 16-core machine; test_benchmarks_smoke runs the script with --quick"
    ),
    "python tests/benchmarks/bench_ray.py --json report-ray.json": (
        "minutes of machine time, and needs Ray and TensorFlow"
    ),
    "python -m tests.fuzz --cases 100000": "a long fuzzing session; the page's shorter runs are run",
    "recordkit cat --json train.tfrecord | jq -c '.label'": (
        "needs jq, which the test environment need not have; the JSON lines are checked in test_cli"
    ),
}


def _copy_golden(folder: Path, *copies: tuple[str, str]) -> None:
    for source, target in copies:
        (folder / target).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(GOLDEN / source, folder / target)


def _link_repository(folder: Path, *names: str) -> None:
    for name in names:
        (folder / name).symlink_to(ROOT / name, target_is_directory=True)


def _readme_files(folder: Path) -> None:
    run_python_blocks(ROOT / "README.md")  # writes train.tfrecord
    _copy_golden(
        folder,
        ("tfrecord/examples.tfrecord", "shards/part-0.tfrecord"),
        ("tfrecord/raw.tfrecord", "shards/part-1.tfrecord"),
        ("tfrecord/corrupt_data_crc.tfrecord", "damaged.tfrecord"),
    )


def _cli_page_files(folder: Path) -> None:
    _copy_golden(
        folder,
        ("tfrecord/examples.tfrecord", "train.tfrecord"),
        ("tfrecord/examples.tfrecord", "data/train.tfrecord"),
        ("tfrecord/examples.tfrecord", "shards/part-0.tfrecord"),
        ("tfrecord/examples.tfrecord", "shards/part-1.tfrecord"),
        ("tfrecord/corrupt_data_crc.tfrecord", "data/corrupt.tfrecord"),
        ("ffrecord/corrupt_payload.ffr", "corrupt_payload.ffr"),
    )


def _tables_page_files(folder: Path) -> None:
    pytest.importorskip("pyarrow")
    pytest.importorskip("pandas")
    run_python_blocks(DOCS / "tables.md")  # writes table.tfrecord


def _quickstart_page_files(folder: Path) -> None:
    run_python_blocks(DOCS / "quickstart.md")  # writes mnist.tfrecord
    _link_repository(folder, "examples")


# How the suite runs a page's commands: the files they need, made in an empty folder first, and the
# commands whose documented status is not 0. The commands run in order, in that folder, through bash.
PAGES = {
    "README.md": (
        _readme_files,
        {"recordkit verify damaged.tfrecord --salvage repaired.tfrecord": 1},
    ),
    "docs/cli.md": (
        _cli_page_files,
        {
            "recordkit verify data/": 1,
            "recordkit verify corrupt_payload.ffr --salvage rescued.ffr": 1,
        },
    ),
    "docs/quickstart.md": (_quickstart_page_files, {}),
    "docs/datasets.md": (lambda folder: _run_doc_page("docs/datasets.md"), {}),
    "docs/tables.md": (_tables_page_files, {}),
    "docs/performance.md": (lambda folder: _link_repository(folder, "tests"), {}),
    "docs/reliability.md": (lambda folder: _link_repository(folder, "tests"), {}),
}


def _documented_commands() -> list[ShellCommand]:
    pages = [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]
    return [
        command
        for page in pages
        for command in shell_commands(page, page.relative_to(ROOT).as_posix())
    ]


def test_every_documented_command_is_run_or_allowed():
    commands = _documented_commands()
    unaccounted = [
        f"{command.page}: {command.command}"
        for command in commands
        if command.command not in RUN_BY_CI
        and command.command not in NOT_RUN
        and command.page not in PAGES
    ]
    assert not unaccounted, "run these in test_documented_commands_run, or list them in NOT_RUN"
    written = {command.command for command in commands}
    assert not (RUN_BY_CI | NOT_RUN.keys()) - written, "stale entries"
    assert not PAGES.keys() - {command.page for command in commands}, "stale pages"


def test_ci_runs_the_readme_commands_in_fresh_venvs():
    lines = [
        line.strip() for line in (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    ]
    venvs = []
    for command in RUN_BY_CI:
        assert command in lines, f".ci/run does not run {command!r} as written"
        at = lines.index(command)
        assert lines[at + 1] == ")", f"{command}: not in a subshell of its own"
        # After activating a venv made just before, in the same subshell, and nothing installed there
        # first: the test command's venv holds the test extra alone.
        assert lines[at - 2] == "(", command
        activate = re.fullmatch(r'\. "\$work/(\w+)/bin/activate"', lines[at - 1])
        assert activate, command
        venvs.append(activate.group(1))
        assert lines[at - 3] == f'python3 -m venv "$work/{venvs[-1]}"', command
    assert len(set(venvs)) == len(venvs) == len(RUN_BY_CI)
    assert "main" not in venvs, "the venv with the peers is not a fresh one"
    # The whole suite also runs where the peers are installed (the interop tests skip without them).
    main = lines[: lines.index("deactivate")]
    assert any(line.startswith('pip install -q ".[test,') for line in main)
    assert "python -m pytest -p no:cacheprovider" in main
    assert "python -m pytest -p no:cacheprovider -m slow" in main  # deselected by default


def _shims(folder: Path) -> dict[str, str]:
    """An environment whose ``python`` and ``recordkit`` are this interpreter and its recordkit."""
    folder.mkdir()
    for name, line in (("python", '"$@"'), ("recordkit", '-m recordkit "$@"')):
        shim = folder / name
        shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" {line}\n', encoding="utf-8")
        shim.chmod(0o755)
    return {**os.environ, "PATH": f"{folder}{os.pathsep}{os.environ.get('PATH', '')}"}


@pytest.mark.skipif(shutil.which("bash") is None, reason="the documented commands are bash")
@pytest.mark.parametrize(
    "page",
    [
        pytest.param(page, marks=[pytest.mark.slow] if page == "docs/performance.md" else [])
        for page in sorted(PAGES)
    ],
)
def test_documented_commands_run(page, tmp_path, monkeypatch):
    make_files, statuses = PAGES[page]
    env = _shims(tmp_path / "bin")
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    make_files(work)
    commands = [
        command
        for command in shell_commands(ROOT / page, page)
        if command.command not in RUN_BY_CI and command.command not in NOT_RUN
    ]
    assert commands
    for command in commands:
        proc = subprocess.run(
            ["bash", "-c", command.command],
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
            # the benchmark page's --quick run starts a fresh process per contender and round
            timeout=1200 if page == "docs/performance.md" else 600,
            check=False,
        )
        expected = statuses.get(command.command, 0)
        assert proc.returncode == expected, f"{command.command}\n{proc.stdout}{proc.stderr}"
        if command.output:
            assert proc.stdout == command.output, command.command


def test_install_commands_need_no_release():
    # recordkit is not on PyPI yet: the docs install it from the checkout (".", ".[extra]") or from git.
    for command in _documented_commands():
        for part in command.command.split("&&"):
            words = shlex.split(part)
            if words[:2] != ["pip", "install"]:
                continue
            for requirement in words[2:]:
                name = re.match(r"[A-Za-z0-9_.\-]*", requirement).group(0)
                from_pypi = name.lower() == "recordkit" and "git+" not in requirement
                assert not from_pypi, f"{command.page}: {command.command}"


def test_readme_says_where_the_oneflow_golden_files_are():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "RECORDKIT_SHARED" in readme
    assert "`shared/`" in readme


# -- every python block of the docs runs as a script, as a user would copy it --------------------------


def _example_files(folder: Path) -> None:
    """train.tfrecord (Examples), clips.tfrecord (SequenceExamples), part-0 (OFRecords)."""
    import numpy as np

    import recordkit as rk
    from recordkit.decode.messages import int32_feature

    rng = np.random.default_rng(0)
    with rk.open(folder / "train.tfrecord", "w") as writer:
        for i in range(300):
            features = {
                "label": i % 10,
                "image": rng.random((28, 28), dtype=np.float32),
                "tokens": list(range(i % 5)),
            }
            if i % 3:
                features["caption"] = f"record {i}"
            writer.write(rk.encode_example(features))
    with rk.open(folder / "clips.tfrecord", "w") as writer:
        for i in range(4):
            frames = rng.random((i + 1, 2), dtype=np.float32)
            tokens = [[1, 2], [3], [4, 5, 6]][: 2 + i % 2]
            writer.write(
                rk.encode_sequence_example(
                    {"id": b"clip-%d" % i}, {"frames": frames, "tokens": tokens}
                )
            )
    with rk.open(folder / "part-0", "w", format="ofrecord") as writer:
        for i in range(40):
            ids = int32_feature(np.arange(i, i + 128, dtype=np.int32))
            writer.write(rk.encode_ofrecord({"input_ids": ids, "encoded": b"\xff\xd8jpeg %d" % i}))


def _jpeg_files(folder: Path) -> None:
    """train.tfrecord of encoded JPEG images and labels, and part-00000, OFRecords of JPEGs."""
    import io

    import numpy as np
    from PIL import Image

    import recordkit as rk

    rng = np.random.default_rng(0)
    jpegs = []
    for _ in range(8):
        buffer = io.BytesIO()
        pixels = rng.integers(0, 256, (48 + 8, 64, 3), dtype=np.uint8)
        Image.fromarray(pixels).save(buffer, format="JPEG")
        jpegs.append(buffer.getvalue())
    with rk.open(folder / "train.tfrecord", "w") as writer:
        for i in range(64):
            writer.write(rk.encode_example({"image": jpegs[i % 8], "label": i % 10}))
    with rk.open(folder / "part-00000", "w", format="ofrecord") as writer:
        for i in range(32):
            writer.write(rk.encode_ofrecord({"encoded": [jpegs[i % 8]]}))


def _pipeline_files(folder: Path) -> None:
    import numpy as np

    import recordkit as rk

    (folder / "data").mkdir()
    for part in range(2):
        with rk.open(folder / "data" / f"train-{part:05d}.tfrecord", "w") as writer:
            writer.write_many(rk.encode_example({"label": part * 100 + i}) for i in range(100))
        with rk.open(folder / f"web-{part}.tfrecord", "w") as writer:
            writer.write_many(rk.encode_example({"label": i}) for i in range(50))
    with rk.open(folder / "books-0.ffr", "w") as writer:
        writer.write_many(rk.encode_example({"label": i}) for i in range(50))
    for part in range(4):
        with rk.open(folder / "data" / f"part-{part:05d}", "w", format="ofrecord") as writer:
            images = np.zeros(784, np.float32)
            writer.write_many(rk.encode_ofrecord({"images": images}) for _ in range(40))


def _reliability_files(folder: Path) -> None:
    import recordkit as rk

    _copy_golden(folder, ("tfrecord/corrupt_data_crc.tfrecord", "shard-7.tfrecord"))
    with rk.open(folder / "part-0", "w", format="ofrecord") as writer:
        writer.write_many(rk.encode_ofrecord({"i": [i]}) for i in range(10))


def _ffrecord_files(folder: Path) -> None:
    import recordkit as rk

    (folder / "data").mkdir()
    for part in range(2):
        with rk.open(folder / "data" / f"PART_{part:05d}.ffr", "w") as writer:
            writer.write_many(b"sample %d" % i for i in range(10))


def _tensorboard_files(folder: Path) -> None:
    import recordkit as rk
    from recordkit._proto.tensorboard import event_pb2

    # Two runs with the same tag and steps and different values: a pivot over steps alone averages them.
    for scale, run in enumerate(("eval", "train"), start=1):
        (folder / "logs" / run).mkdir(parents=True)
        path = folder / "logs" / run / "events.out.tfevents.1700000000.host"
        with rk.open(path, "w", format="tfrecord") as writer:
            for step in range(5):
                event = event_pb2.Event(wall_time=1.7e9 + step, step=step)
                event.summary.value.add(tag="loss", simple_value=scale / (step + 1))
                writer.write(event.SerializeToString())


@dataclass(frozen=True)
class DocPage:
    """How a page's python blocks run: the files they need first (made in an empty folder), the modules
    each block needs (a block whose module is missing is left out, with the blocks after it in its
    script), the scripts (lists of block numbers; default: every block, in order, as one script), and a
    check of what the scripts did."""

    files: Callable[[Path], None] | None = None
    needs: dict[int, tuple[str, ...]] = field(default_factory=dict)
    scripts: tuple[tuple[int, ...], ...] | None = None
    check: Callable[[list[str], Path], None] | None = None
    marks: tuple[pytest.MarkDecorator, ...] = ()


def _check_tensorboard(outputs: list[str], folder: Path) -> None:
    lines = [line.split() for line in outputs[0].splitlines()]
    # The first block's wide table: run "train"'s own values (2 / (step + 1)), not averaged with "eval".
    assert lines[:4] == [["tag", "loss"], ["step"], ["3", "0.5"], ["4", "0.4"]]
    # A list of runs and a glob: the runs by the names the log directory gives them.
    assert lines[4] == ["['eval',", "'train']", "['eval',", "'train']"]
    # The follow block: the latest loss of each run.
    assert lines[5:] == [["run", "step", "value"], ["eval", "4", "0.2"], ["train", "4", "0.4"]]


def _check_dask(outputs: list[str], folder: Path) -> None:
    shards, counts, mean, *parsed = outputs[0].splitlines()
    assert parsed in ([], ["1000"])  # the features= block, where distributed is installed
    assert shards == str([(f"part-{i:05d}.tfrecord", 2_500) for i in range(4)])
    assert counts == "4 1000"
    assert float(mean) == pytest.approx(sum(i / 100 for i in range(10_000)) / 10_000)


def _check_ray(outputs: list[str], folder: Path) -> None:
    import recordkit as rk

    assert outputs[0].splitlines() == ["1000", "(8, 28, 28)"]
    with rk.open(folder / "out" / "train-tf") as reader:
        assert len(reader) == 1000


def _check_datasets(outputs: list[str], folder: Path) -> None:
    # TensorFlow's glob of the page leaves the manifest and the hidden indexes out.
    shards = [
        "test-00000-of-00001.tfrecord",
        *(f"train-0000{i}-of-00003.tfrecord" for i in range(3)),
    ]
    assert outputs[0].splitlines()[-2:] == [str(shards), "1100"]
    # The rewrite with fewer shards deleted the old ones, and kept the file the page wrote by hand.
    rewritten = [f"part-0000{i}.tfrecord" for i in range(2)]
    listing = sorted(
        [
            *(f".{name}.idx" for name in rewritten),
            "NOTES.txt",
            "_recordkit_manifest.json",
            *rewritten,
        ]
    )
    assert str(listing) in outputs[0].splitlines()
    assert sorted(path.name for path in (folder / "rewrite").iterdir()) == listing
    assert {".train-00000-of-00003.tfrecord.idx", "_recordkit_manifest.json"} <= {
        path.name for path in (folder / "data").iterdir()
    }


def _check_scale_out(outputs: list[str], folder: Path) -> None:
    # Ray's and Dask's logs may come between the lines; the counts are the page's.
    assert [line for line in outputs[0].splitlines() if line.isdigit()] == ["10000"] * 3


DOC_PAGES = {
    "docs/cli.md": DocPage(files=_cli_page_files),
    "docs/dask.md": DocPage(
        needs={0: ("dask.bag",), 1: ("dask.bag", "distributed"), 2: ("dask.bag",)},
        check=_check_dask,
    ),
    # The last block reads the directory with TensorFlow's glob, as the page recommends; the one before
    # reshards it with Dask.
    "docs/datasets.md": DocPage(
        needs={7: ("dask.bag",), 8: ("tensorflow",)}, check=_check_datasets
    ),
    "docs/errors.md": DocPage(),
    # The first block writes the file with array_record, the second reads it.
    "docs/formats/arrayrecord.md": DocPage(
        needs={0: ("array_record", "cramjam"), 1: ("array_record", "cramjam")}
    ),
    "docs/formats/ffrecord.md": DocPage(files=_ffrecord_files),
    # The plugin module, its use, and its conformance suite (which needs pytest), as one script.
    "docs/formats/plugins.md": DocPage(needs={2: ("pytest",)}),
    "docs/formats/tfds.md": DocPage(needs={2: ("tensorflow_datasets",)}),
    # The HF cache goes to the page's folder (cache_dir=) and HF_HOME is not needed for the rest.
    "docs/hf.md": DocPage(needs={0: ("datasets",), 1: ("datasets",)}, marks=(pytest.mark.slow,)),
    "docs/images.md": DocPage(files=_jpeg_files, needs={0: ("PIL",), 1: ("PIL",)}),
    "docs/index.md": DocPage(files=_example_files),
    "docs/messages.md": DocPage(),
    "docs/notebook.md": DocPage(),
    "docs/parsing.md": DocPage(files=_example_files),
    "docs/pipelines.md": DocPage(
        files=_pipeline_files,
        needs={
            4: ("torch",),
            5: ("torch",),
            7: ("torch", "torchdata"),
            8: ("torchdata",),
            9: ("grain",),
        },
        scripts=((0, 1, 2, 3, 6, 10), (4, 5, 7, 8), (9,)),
        # torch, torchdata and grain in child processes: about 20 s, with the slow tests.
        marks=(pytest.mark.torch, pytest.mark.slow),
    ),
    "docs/quickstart.md": DocPage(),
    "docs/ray.md": DocPage(needs={0: ("ray",)}, check=_check_ray, marks=(pytest.mark.ray,)),
    "docs/reading-writing.md": DocPage(files=_example_files),
    "docs/reliability.md": DocPage(files=_reliability_files),
    "docs/scale-out.md": DocPage(
        needs={1: ("ray",), 2: ("dask.bag",)},
        check=_check_scale_out,
        marks=(pytest.mark.ray, pytest.mark.slow),
    ),
    "docs/tables.md": DocPage(needs={0: ("pyarrow", "pandas"), 1: ("pyarrow", "pandas")}),
    "docs/tensorboard.md": DocPage(
        files=_tensorboard_files,
        needs={0: ("pandas",), 1: ("pandas",), 2: ("pandas",)},
        check=_check_tensorboard,
    ),
}


def _has(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # a missing parent package
        return False


def _runnable_scripts(name: str) -> tuple[list[list[int]], list[str]]:
    """The scripts of a page (lists of block numbers) with the modules they need installed, and why
    any blocks are left out."""
    page = DOC_PAGES[name]
    scripts, left_out = [], []
    for script in page.scripts or (tuple(range(len(python_blocks(ROOT / name)))),):
        runnable = []
        for block in script:
            missing = [module for module in page.needs.get(block, ()) if not _has(module)]
            if missing:
                left_out.append(f"block {block} needs {', '.join(missing)}")
                break  # the blocks after it build on it
            runnable.append(block)
        if runnable:
            scripts.append(runnable)
    return scripts, left_out


def _run_doc_page(name: str) -> None:
    """Run what can run of a page's python blocks in the current directory (the files it writes)."""
    for script in _runnable_scripts(name)[0]:
        run_python_blocks(ROOT / name, blocks=script)


def test_every_docs_page_with_python_is_run():
    pages = {
        page.relative_to(ROOT).as_posix()
        for page in DOCS.rglob("*.md")
        if python_blocks(page) or pycon_blocks(page)
    }
    assert pages == DOC_PAGES.keys(), "list the page in DOC_PAGES (README.md: test_readme.py)"
    for name, page in DOC_PAGES.items():
        count = len(python_blocks(ROOT / name))
        assert all(block < count for block in page.needs), name
        if page.scripts is not None:
            assert sorted(b for script in page.scripts for b in script) == list(range(count)), name


@pytest.mark.parametrize(
    "name", [pytest.param(name, marks=page.marks) for name, page in sorted(DOC_PAGES.items())]
)
def test_docs_page_python_runs_as_a_script(name, tmp_path):
    """Each page's python blocks, in order, saved as a .py file and run with python in a new process;
    its interactive sessions (pycon blocks) run through doctest."""
    page, path = DOC_PAGES[name], ROOT / name
    scripts, left_out = _runnable_scripts(name)
    if left_out and not scripts:
        pytest.skip("; ".join(left_out))
    if page.files is not None:
        page.files(tmp_path)
    outputs = [run_python_blocks(path, tmp_path, script).stdout for script in scripts]
    for number, session in enumerate(pycon_blocks(path)):
        test = doctest.DocTestParser().get_doctest(session, {}, f"{name}[{number}]", name, 0)
        runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
        runner.run(test)
        assert runner.summarize(verbose=False).failed == 0, f"{name}: pycon block {number}"
    if page.check is not None and not left_out:
        page.check(outputs, tmp_path)


# -- docs/coming-from.md: every block runs, recordkit's and the other libraries' -----------------------

COMING_FROM = DOCS / "coming-from.md"
CAPTIONED_BLOCK = re.compile(
    r"^```\{code-block\} python\n:caption: ([^\n]+)\n(.*?)^```", re.DOTALL | re.MULTILINE
)
# Caption -> the module the block needs.
PEERS = {
    "tf.data": "tensorflow",
    "vahidk tfrecord": "tfrecord",
    "HFAiLab ffrecord": "ffrecord",
    "webdataset": "webdataset",
}


def _coming_from_blocks() -> list[tuple[str, str]]:
    blocks = CAPTIONED_BLOCK.findall(COMING_FROM.read_text(encoding="utf-8"))
    assert blocks[0][0] == "recordkit", "the page starts with the block that writes its files"
    return blocks


def test_coming_from_page_has_both_sides_of_each_library():
    captions = [caption for caption, _ in _coming_from_blocks()]
    assert set(captions) == {"recordkit", *PEERS}
    assert python_blocks(COMING_FROM) == [], "captioned code-block directives only, run below"


def _run_script(code: str, folder: Path) -> None:
    # A process of its own: TensorFlow and vahidk tfrecord cannot be imported into one process.
    script = folder / "page.py"
    script.write_text(code, encoding="utf-8")
    proc = run_script(script, folder)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.torch
def test_coming_from_page_recordkit_code_runs(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("PIL")
    import recordkit

    if not hasattr(recordkit, "Image"):
        pytest.skip("the page decodes images with recordkit.Image")
    setup, *blocks = [code for caption, code in _coming_from_blocks() if caption == "recordkit"]
    # Each block is copied on its own: it runs alone, after the block that writes the files it reads.
    _run_script(setup, tmp_path)
    for code in blocks:
        _run_script(code, tmp_path)


@pytest.mark.interop
@pytest.mark.parametrize(
    "library",
    # TensorFlow in a child process takes about 15 s: with the slow tests.
    [
        pytest.param(name, marks=[pytest.mark.slow] if name == "tf.data" else [])
        for name in sorted(PEERS)
    ],
)
def test_coming_from_page_peer_code_runs(library, tmp_path):
    """Their side of the page runs too, with the library installed, on the files the page writes."""
    # Looked up, not imported: TensorFlow and vahidk tfrecord cannot share this process.
    missing = [name for name in (PEERS[library], "torch") if importlib.util.find_spec(name) is None]
    if missing:
        pytest.skip(f"needs {', '.join(missing)}")
    blocks = _coming_from_blocks()
    # Each block is copied on its own: it runs alone, after the block that writes the files it reads.
    _run_script(blocks[0][1], tmp_path)
    for code in (code for caption, code in blocks if caption == library):
        _run_script(code, tmp_path)
