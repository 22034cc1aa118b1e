"""Every 0.2 import line of a moved name still works, with a DeprecationWarning naming the new home.

Each case runs in a fresh interpreter, so that a module cached by an earlier case cannot hide a missing alias.
The table is ``recordkit.support.moved.MOVED``; docs/api.md's table of moved names must list the same names.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import recordkit
from recordkit.support.moved import MOVED, MOVED_IN, NO_LONGER_PUBLIC, REMOVED_IN

API_MD = Path(__file__).resolve().parents[1] / "docs" / "api.md"

# Each moved name's new home needs these packages to import; where one is missing, only the warning is checked.
NEEDS = {
    "recordkit.integrations.ray": ("ray", "pyarrow"),
    "recordkit.integrations.dask": ("dask",),
    "recordkit.integrations.torch": ("torch",),
}

# Runs the 0.2 line (argv[1]) with the warning an error (argv[2] == "error") or recorded, then prints what came
# of it: the warning's text and location, and whether the old name gives the very object at the new home.
SCRIPT = textwrap.dedent(
    """
    import importlib, json, sys, warnings

    line, mode, new = sys.argv[1], sys.argv[2], sys.argv[3]

    def resolve(path):
        try:
            return importlib.import_module(path)
        except ModuleNotFoundError as exc:
            if exc.name != path:
                raise
        module, _, name = path.rpartition(".")
        return getattr(importlib.import_module(module), name)

    namespace = {}
    if mode == "error":
        warnings.simplefilter("error", DeprecationWarning)
        try:
            exec(compile(line, "<user>", "exec"), namespace)
        except DeprecationWarning as warning:
            print(json.dumps({"raised": str(warning)}))
        else:
            print(json.dumps({"raised": None}))
    else:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            exec(compile(line, "<user>", "exec"), namespace)
        print(json.dumps({
            "same": namespace["value"] is resolve(new),
            "warnings": [
                [w.category.__name__, str(w.message), w.filename] for w in caught
                if issubclass(w.category, DeprecationWarning)
            ],
        }))
    """
)


def old_line(old: str) -> str:
    """The 0.2 import line of ``old``, binding what it gives to ``value``."""
    module, _, name = old.rpartition(".")
    if _names_module(MOVED[old]):
        return f"import {old} as value"
    if module == "recordkit":
        return f"import recordkit as rk\nvalue = rk.{name}"
    return f"from {module} import {name} as value"


def _names_module(path: str) -> bool:
    """Whether ``path`` is a module rather than a name of one (imports its parent package)."""
    try:
        return importlib.util.find_spec(path) is not None
    except ModuleNotFoundError:
        return False


def run(line: str, mode: str, new: str) -> dict[str, object]:
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT, line, mode, new],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    outcome: dict[str, object] = json.loads(result.stdout.splitlines()[-1])
    return outcome


def missing_for(new: str) -> list[str]:
    needs = next(
        (deps for home, deps in NEEDS.items() if new == home or new.startswith(home + ".")), ()
    )
    return [name for name in needs if importlib.util.find_spec(name) is None]


def message(old: str) -> str:
    where = "is no longer public" if old in NO_LONGER_PUBLIC else f"moved to {MOVED[old]}"
    return f"{old} {where}; the old name will be removed in {REMOVED_IN}"


@pytest.mark.parametrize("old", sorted(MOVED))
def test_old_line_warns_naming_the_new_home(old: str) -> None:
    missing = missing_for(old)  # an old module that itself needs an extra
    if missing:
        pytest.skip(f"{old.rpartition('.')[0]} needs {', '.join(missing)}, which is not installed")
    assert run(old_line(old), "error", MOVED[old]) == {"raised": message(old)}


@pytest.mark.parametrize("old", sorted(MOVED))
def test_old_line_gives_the_object_at_the_new_home(old: str) -> None:
    missing = missing_for(MOVED[old]) + missing_for(old)  # either end may need an extra
    if missing:
        pytest.skip(f"{MOVED[old]} needs {', '.join(missing)}, which is not installed")
    outcome = run(old_line(old), "record", MOVED[old])
    assert outcome["same"] is True
    warned = outcome["warnings"]
    assert isinstance(warned, list)
    assert warned, "no DeprecationWarning"
    # Pointing at the line that used the old name, not at recordkit or the import machinery.
    assert {tuple(warning) for warning in warned} == {
        ("DeprecationWarning", message(old), "<user>")
    }


@pytest.mark.parametrize(
    ("line", "old"),
    [
        ("from recordkit import ofrecord as value", "recordkit.ofrecord"),
        ("import recordkit as rk\nvalue = rk.example\nvalue = rk.example", "recordkit.example"),
    ],
    ids=["from-import", "attribute"],
)
def test_a_moved_module_reached_from_its_package_warns_once(line: str, old: str) -> None:
    """The import statement looks a name up twice; the finder binds the old module name at the first."""
    outcome = run(line, "record", MOVED[old])
    assert outcome["same"] is True
    assert outcome["warnings"] == [["DeprecationWarning", message(old), "<user>"]]


def test_import_recordkit_warns_of_nothing() -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-W",
            "error",
            "-c",
            "import recordkit, recordkit.data, recordkit.formats.tfrecord",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stderr == ""


@pytest.mark.parametrize("name", ["no_such_name", "float_features"])
def test_a_name_that_never_existed_still_raises_attribute_error(name: str) -> None:
    with pytest.raises(AttributeError, match=f"'recordkit' has no attribute '{name}'"):
        getattr(recordkit, name)


def test_a_module_that_never_existed_still_raises_module_not_found() -> None:
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("recordkit.no_such_module")


def test_the_old_names_are_removed_in_a_later_release() -> None:
    """Once the package reaches REMOVED_IN, the table must go (and this test with it)."""

    def version(text: str) -> tuple[int, ...]:
        return tuple(int(part) for part in re.findall(r"\d+", text)[:2])

    assert version(recordkit.__version__) < version(REMOVED_IN)
    assert version(MOVED_IN) < version(REMOVED_IN)


def docs_table() -> list[tuple[list[str], list[str]]]:
    """The rows of docs/api.md's table of moved names: the dotted names of each column."""
    text = API_MD.read_text(encoding="utf-8")
    section = text[text.index("## Names that moved since 0.2") :]
    rows = []
    for line in section.splitlines()[1:]:
        if line.startswith("## "):
            break
        if not line.startswith("| `"):
            continue
        old, new = line.split(" | ", 1)
        rows.append((re.findall(r"`([^`]+)`", old), re.findall(r"`([^`]+)`", new)))
    return rows


def test_docs_table_lists_every_moved_name_and_its_new_home() -> None:
    documented: dict[str, list[str]] = {}
    for olds, news in docs_table():
        homes = [name for name in news if name.startswith("recordkit.")]
        for old in olds:
            full = "recordkit." + old.removeprefix("rk.") if old.startswith("rk.") else old
            if full.startswith("recordkit.") and full in MOVED:
                documented[full] = homes
    assert sorted(documented) == sorted(MOVED)
    for old, homes in documented.items():
        new = MOVED[old]
        assert any(new == home or new.startswith(home + ".") for home in homes), (old, new, homes)


def test_docs_table_rows_name_only_moved_names() -> None:
    """Every old name in the table is in MOVED, but for the drop-in's kept line and the CLI's fields."""
    kept = {"recordkit.ffrecord", "recordkit convert --pattern"}
    for olds, _ in docs_table():
        for old in olds:
            full = "recordkit." + old.removeprefix("rk.") if old.startswith("rk.") else old
            if full in kept or full.startswith("{"):
                continue
            assert full in MOVED, full


def test_a_submodule_of_a_moved_package_is_the_new_module_not_a_copy() -> None:
    """0.2's ``from recordkit.shards.tasks import plan_reads``: the old package's submodule is the new
    package's module object, so its moved names resolve and its classes are the same classes."""
    code = (
        "import sys, warnings; warnings.simplefilter('ignore')\n"
        "from recordkit.shards.tasks import plan_reads, ReadRange\n"
        "import recordkit.datasets.ranges as ranges\n"
        "assert sys.modules['recordkit.shards.tasks'] is sys.modules['recordkit.datasets.tasks']\n"
        "assert plan_reads is ranges.plan_reads and ReadRange is ranges.ReadRange\n"
        "print('ok')"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.stdout.strip() == "ok", result.stderr[-3000:]
