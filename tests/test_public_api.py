"""The public API: the exact top-level names, that each resolves, has one home and is documented.

A public module is one whose dotted path has no part with a leading underscore; its public names are its
``__all__``. Every public name is listed in one module only (its home), except the top-level re-exports and
the compatibility modules (:mod:`recordkit.compat`), and every public name is in docs/api.md, in the section
of its home.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
import re
import types
from collections import defaultdict
from pathlib import Path

import pytest

import recordkit

# Changing the public API is a decision: update this snapshot on purpose.
EXPECTED_ALL = [
    "ChecksumError",
    "CorruptRecordError",
    "DecodeError",
    "FixedLen",
    "FixedLenSequence",
    "Image",
    "ManifestError",
    "Ragged",
    "RecordKitError",
    "RecordKitWarning",
    "RecordReader",
    "RecordWriter",
    "ShardWriter",
    "TruncatedRecordError",
    "UnknownFormatError",
    "VarLen",
    "__version__",
    "available_formats",
    "decode_example",
    "decode_ofrecord",
    "decode_sequence_example",
    "detect_format",
    "encode_example",
    "encode_examples",
    "encode_ofrecord",
    "encode_ofrecords",
    "encode_sequence_example",
    "follow",
    "get_format",
    "open",
    "parse_example",
    "parse_examples",
    "parse_ofrecords",
    "parse_sequence_example",
    "parse_sequence_examples",
    "register_format",
    "to_arrow",
]

SOURCE = Path(recordkit.__file__).parent
API_MD = Path(__file__).resolve().parents[1] / "docs" / "api.md"
# The top level holds what a first program needs; the rest lives in subpackages (docs/api.md says why).
TOP_LEVEL_LIMIT = 40
# Modules that keep the names of the API they copy, whatever recordkit calls the same thing.
COPIED_APIS = "recordkit.compat"
# Adapters that give each engine the same verbs (``read_records``, ``write_records``).
ENGINE_ADAPTERS = "recordkit.integrations"
# Modules that offer an io verb for their own kind of data under the same name: a second home for it.
# ``recordkit.tensorboard.follow`` follows a log directory as DataFrames, ``recordkit.follow`` one file.
SAME_VERBS = {"recordkit.tensorboard": {"follow"}}

# Public names whose defining module is not written yet. Keep empty once every module exists.
NOT_YET_AVAILABLE: set[str] = set()

# Modules whose own ``__all__`` is public API too.
PUBLIC_MODULES = ["recordkit", "recordkit.errors", "recordkit.decode.messages"]


def public_objects() -> list[tuple[str, object]]:
    return [
        (name, getattr(recordkit, name))
        for name in recordkit.__all__
        if name not in NOT_YET_AVAILABLE and name != "__version__"
    ]


def test_all_snapshot() -> None:
    assert recordkit.__all__ == EXPECTED_ALL
    assert len(set(EXPECTED_ALL)) == len(EXPECTED_ALL)


@pytest.mark.parametrize("name", EXPECTED_ALL)
def test_name_resolves(name: str) -> None:
    if name in NOT_YET_AVAILABLE:
        pytest.skip(f"{name} is not implemented yet")
    assert getattr(recordkit, name) is not None
    assert name in dir(recordkit)


def test_not_yet_available_names_are_really_missing() -> None:
    for name in NOT_YET_AVAILABLE:
        with pytest.raises((AttributeError, ImportError)):
            getattr(recordkit, name)


def test_version_is_a_string() -> None:
    assert isinstance(recordkit.__version__, str)
    assert recordkit.__version__[0].isdigit()


def test_unknown_attribute_raises_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no_such_name"):
        recordkit.no_such_name  # noqa: B018


@pytest.mark.parametrize("module_name", PUBLIC_MODULES)
def test_module_all_resolves_and_is_documented(module_name: str) -> None:
    module = importlib.import_module(module_name)
    assert inspect.getdoc(module)
    for name in module.__all__:
        value = getattr(module, name)
        if isinstance(value, (type, types.FunctionType)):
            assert inspect.getdoc(value), f"{module_name}.{name} has no docstring"


def test_every_public_name_has_a_docstring() -> None:
    undocumented = [name for name, obj in public_objects() if not inspect.getdoc(obj)]
    assert not undocumented


def test_public_methods_have_docstrings() -> None:
    """Methods and properties of public classes, defined by recordkit itself, are documented."""
    undocumented = []
    for name, obj in public_objects():
        if not isinstance(obj, type) or not obj.__module__.startswith("recordkit"):
            continue
        for attr, member in vars(obj).items():
            if attr.startswith("_"):
                continue
            target = member.fget if isinstance(member, property) else member
            if isinstance(target, (staticmethod, classmethod)):
                target = target.__func__
            if callable(target) and not inspect.getdoc(target):
                undocumented.append(f"{name}.{attr}")
    assert not undocumented


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def public_all() -> dict[str, list[str]]:
    """Each public module's ``__all__``, read from its source (importing needs no optional dependency)."""
    modules: dict[str, list[str]] = {}
    for path in sorted(SOURCE.rglob("*.py")):
        parts = list(path.relative_to(SOURCE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        if any(part.startswith("_") for part in parts):
            continue
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            target = (
                node.targets[0] if isinstance(node, ast.Assign) else getattr(node, "target", None)
            )
            if isinstance(target, ast.Name) and target.id == "__all__":
                assert isinstance(node, (ast.Assign, ast.AnnAssign))
                assert node.value is not None
                modules[".".join(parts)] = list(ast.literal_eval(node.value))
    return modules


def test_top_level_stays_small() -> None:
    assert len(recordkit.__all__) <= TOP_LEVEL_LIMIT


def test_public_all_is_read_from_every_public_module() -> None:
    modules = public_all()
    assert modules["recordkit"] == recordkit.__all__
    assert "recordkit.errors" in modules
    assert "recordkit.io" in modules
    assert not any("._" in name for name in modules)


def homes() -> dict[str, list[str]]:
    """Public name -> the modules (top level and copied APIs aside) whose ``__all__`` lists it."""
    found: dict[str, list[str]] = defaultdict(list)
    for module, names in public_all().items():
        if module != "recordkit" and not _within(module, COPIED_APIS):
            for name in names:
                if name not in SAME_VERBS.get(module, ()):
                    found[name].append(module)
    return found


def test_every_public_name_has_one_home() -> None:
    twice = {
        name: modules
        for name, modules in homes().items()
        if len(modules) > 1 and not all(_within(m, ENGINE_ADAPTERS) for m in modules)
    }
    assert not twice, f"listed in several __all__: {twice}"


def test_every_top_level_name_is_a_re_export_of_its_home() -> None:
    found = homes()
    for name in recordkit.__all__:
        if name == "__version__":
            continue
        assert len(found[name]) == 1, f"recordkit.{name} needs exactly one home below the top level"
        home = importlib.import_module(found[name][0])
        assert getattr(recordkit, name) is getattr(home, name)


def api_sections() -> dict[str, str]:
    """docs/api.md's text per module: each heading naming a module in backquotes starts its section."""
    sections: dict[str, str] = defaultdict(str)
    module = None
    for line in API_MD.read_text(encoding="utf-8").splitlines():
        if line.startswith("#"):
            named = re.findall(r"`(recordkit(?:\.\w+)*)`", line)
            module = named[0] if named else None
        elif module is not None:
            sections[module] += line + "\n"
    return sections


def test_every_public_name_is_in_api_md_under_its_home() -> None:
    sections = api_sections()
    missing = [
        f"{module}.{name}"
        for module, names in public_all().items()
        for name in names
        if f"`{name}`" not in sections.get(module, "")
    ]
    assert not missing, f"not in docs/api.md (in the section of their module): {missing}"


def test_api_md_names_only_modules_that_exist() -> None:
    unknown = [module for module in api_sections() if importlib.util.find_spec(module) is None]
    assert not unknown
