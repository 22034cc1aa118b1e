"""The documentation: the Sphinx build has no warnings, and every shell command it shows runs as shown."""

from __future__ import annotations

import importlib.util
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from _markdown import ShellCommand, python_blocks, run_python_blocks, shell_commands
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
    'pip install ".[all]"': "the README's install-and-run command installs it in a fresh venv in .ci/run",
    'pip install ".[image]"': "a subset of .[image-fast], installed with the other extras by .ci/run",
    'pip install ".[image-fast]"': "installed with the other extras by .ci/run; tests/test_images.py",
    'pip install ".[torch]"': "pulls PyTorch with GBs of CUDA libraries; CI installs the pinned CPU build",
    'pip install ".[dask]" distributed': "the test extra installs both; tests/test_dask.py runs the page",
    'pip install "recordkit[all] @ git+https://github.com/recordkit/recordkit"': (
        "installs the published repository from the network, not the checkout under test"
    ),
    "python tests/benchmarks/run.py --json report.json": "full benchmark, minutes of machine time",
    "python tests/benchmarks/run.py --only read --only write --repeat 7": "full-size data, minutes",
    "python tests/benchmarks/run.py --full": "ten million records; the smoke test runs --quick",
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
    "docs/datasets.md": (lambda folder: run_python_blocks(DOCS / "datasets.md"), {}),
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
            timeout=600,
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


def test_quickstart_page_code_runs(tmp_path, monkeypatch):
    page = DOCS / "quickstart.md"
    assert python_blocks(page)
    monkeypatch.chdir(tmp_path)
    run_python_blocks(page)


@pytest.mark.slow
@pytest.mark.filterwarnings(r"ignore::DeprecationWarning:ray\..*")
def test_scale_out_page_code_runs(tmp_path, monkeypatch):
    """The page's one-machine, Ray and Dask writers produce the same records, as it says."""
    pytest.importorskip("ray")
    pytest.importorskip("dask.bag")
    page = DOCS / "scale-out.md"
    monkeypatch.chdir(tmp_path)
    run_python_blocks(page)


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
    blocks = [code for caption, code in _coming_from_blocks() if caption == "recordkit"]
    _run_script("\n".join(blocks), tmp_path)


@pytest.mark.interop
@pytest.mark.parametrize("library", sorted(PEERS))
def test_coming_from_page_peer_code_runs(library, tmp_path):
    """Their side of the page runs too, with the library installed, on the files the page writes."""
    # Looked up, not imported: TensorFlow and vahidk tfrecord cannot share this process.
    missing = [name for name in (PEERS[library], "torch") if importlib.util.find_spec(name) is None]
    if missing:
        pytest.skip(f"needs {', '.join(missing)}")
    blocks = _coming_from_blocks()
    code = [blocks[0][1], *(code for caption, code in blocks if caption == library)]
    _run_script("\n".join(code), tmp_path)
