"""The public API: the exact list of exported names, that each resolves, and that each is documented."""

from __future__ import annotations

import importlib
import inspect
import types

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
