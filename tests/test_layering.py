"""The layer rules of docs/design.md: what importing each module may pull in.

Each rule imports one module in a fresh interpreter and lists what ended up in ``sys.modules``. A rule whose
module does not exist is skipped. To add a rule, add one line to RULES.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import pytest

# (module imported, modules that must then be absent: a name also forbids its submodules)
RULES: list[tuple[str, tuple[str, ...]]] = [
    (
        "recordkit",
        (
            "google.protobuf",
            "torch",
            "numpy",
            "recordkit.formats",
            "recordkit._proto",
            "dask",
            "ray",
            "PIL",
            "pyarrow",
            "pandas",
        ),
    ),
    ("recordkit.errors", ("google.protobuf", "torch", "numpy")),
    (
        "recordkit.formats",
        ("google.protobuf", "numpy", "torch", "recordkit._proto", "recordkit.io"),
    ),
    (
        "recordkit.datasets.tfds",
        ("google.protobuf", "numpy", "tensorflow", "recordkit._proto", "recordkit.io"),
    ),
    (
        "recordkit.io",
        (
            "google.protobuf",
            "numpy",
            "torch",
            "recordkit.decode",
        ),
    ),
    # The decoding layer: nothing from the framing or reader layers, nothing above it.
    ("recordkit.decode", ("google.protobuf", "numpy", "recordkit.formats", "recordkit.io")),
    ("recordkit.decode.messages", ("recordkit.formats", "recordkit.io", "recordkit.data", "torch")),
    (
        "recordkit.decode.parsing",
        (
            "recordkit.formats",
            "recordkit.io",
            "recordkit.data",
            "torch",
            "PIL",
            "pyarrow",
            "pandas",
        ),
    ),
    ("recordkit.decode._wire", ("google.protobuf", "recordkit.formats", "recordkit.io", "torch")),
    (
        "recordkit.compat.oneflow",
        ("recordkit.formats", "recordkit.io", "recordkit.data", "torch", "PIL", "pyarrow"),
    ),
    # Pillow and simplejpeg are loaded on the first decoded image, never on import.
    (
        "recordkit.decode.images",
        ("PIL", "simplejpeg", "recordkit.formats", "recordkit.io", "recordkit.data", "torch"),
    ),
    # pyarrow is loaded by the table functions on first use, pandas only for a DataFrame given to them.
    (
        "recordkit.decode.tables",
        (
            "recordkit.formats",
            "recordkit.io",
            "recordkit.data",
            "torch",
            "pyarrow",
            "pandas",
            "PIL",
        ),
    ),
    ("recordkit.recover", ("google.protobuf", "numpy", "torch", "recordkit.decode.messages")),
    ("recordkit.datasets.manifest", ("google.protobuf", "numpy", "recordkit.io")),
    (
        "recordkit.datasets",
        (
            "google.protobuf",
            "numpy",
            "torch",
            "recordkit.decode",
            "recordkit.data",
            "recordkit.cli",
        ),
    ),
    ("recordkit.data", ("torch", "recordkit.cli")),
    ("recordkit.data._stages", ("torch", "recordkit.cli", "recordkit.decode")),
    ("recordkit.data._interleave", ("torch", "recordkit.cli", "recordkit.decode")),
    ("recordkit.data._files", ("torch", "recordkit.cli", "recordkit.decode")),
    ("recordkit.data._mix", ("torch", "recordkit.cli", "recordkit.decode")),
    ("recordkit.cli", ("torch", "pyarrow", "pandas", "PIL")),
    ("recordkit.cli.parquet", ("torch", "pyarrow", "pandas")),
    # The Dask adapter needs dask's bags only: not distributed (a cluster is the user's choice).
    ("recordkit.integrations.dask", ("torch", "recordkit.cli", "recordkit.data", "distributed")),
    ("recordkit.integrations.ray", ("torch", "recordkit.cli", "recordkit.data")),
]

PROBE = "import importlib, json, sys; importlib.import_module(sys.argv[1]); print(json.dumps(sorted(sys.modules)))"


def loaded_after_import(module: str) -> list[str]:
    result = subprocess.run(
        [sys.executable, "-c", PROBE, module],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    loaded: list[str] = json.loads(result.stdout)
    return loaded


def exists(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False


# Integrations whose import needs an optional dependency: their rule is checked where it is installed.
NEEDS = {"recordkit.integrations.ray": ("ray", "pyarrow"), "recordkit.integrations.dask": ("dask",)}


@pytest.mark.parametrize(("module", "forbidden"), RULES, ids=[module for module, _ in RULES])
def test_layer_rule(module: str, forbidden: tuple[str, ...]) -> None:
    if not exists(module):
        pytest.skip(f"{module} does not exist yet")
    missing = [name for name in NEEDS.get(module, ()) if not exists(name)]
    if missing:
        pytest.skip(f"{module} needs {', '.join(missing)}, which is not installed")
    loaded = loaded_after_import(module)
    assert module in loaded
    offending = [m for m in loaded if any(m == f or m.startswith(f + ".") for f in forbidden)]
    assert not offending, f"importing {module} also imported {offending}"


def test_import_recordkit_loads_only_errors_and_version() -> None:
    loaded = {m for m in loaded_after_import("recordkit") if m.startswith("recordkit")}
    assert loaded == {"recordkit", "recordkit.errors", "recordkit._version"}


def test_rules_name_real_modules() -> None:
    """A typo in RULES would make a rule skip forever; the core modules must exist."""
    for module in (
        "recordkit",
        "recordkit.errors",
        "recordkit.decode.messages",
        "recordkit.cli.commands",
    ):
        assert exists(module)
