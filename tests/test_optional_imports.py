"""A missing optional dependency says which ``pip install 'recordkit[EXTRA]'`` brings it.

Each case runs in a fresh interpreter where the package is made unimportable (``sys.modules[name] = None``),
so it holds whether or not the package is installed here. A static check makes sure every import of an
optional package in ``src`` goes through :mod:`recordkit.support.extras` (or is a fallback).
"""

from __future__ import annotations

import ast
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

import recordkit as rk

SRC = Path(__file__).resolve().parents[1] / "src" / "recordkit"

# The top-level names of the packages recordkit's extras install, and the optional ones it uses besides.
OPTIONAL = {
    "PIL", "pandas", "pyarrow", "torch", "torchdata", "ray", "dask", "datasets", "fsspec", "tqdm",
    "cramjam", "zstandard", "brotli", "simplejpeg", "google_crc32c", "isal",
}  # fmt: skip

# Imports of an optional package that need no hint, by module: where it is present already.
PRESENT_ALREADY = {
    "recordkit.data._shm": "torch: pickling a torch tensor, so torch is imported",
    "recordkit.data._workers": "torch: only when sys.modules holds it",
    "recordkit.formats._crc": "google_crc32c: only once _google_function() found it",
}

# (what the code needs, the code, the extra the message names)
CASES = [
    ("PIL", "from recordkit.decode.images import Image, decode_images\ndecode_images([b'x'], Image(), 'f')", "image"),
    ("pandas", "rk.tensorboard.scalars(EVENTS)", "tensorboard"),
    ("pyarrow", "rk.encode_examples({'a': [1]})", "arrow"),
    ("fsspec", "rk.open('s3://bucket/x.tfrecord')", "remote"),
    ("datasets", "import recordkit.hf\nrecordkit.hf.to_dataset(EVENTS)", "hf"),
    ("torch", "import recordkit.integrations.torch", "torch"),
    ("dask", "import recordkit.integrations.dask", "dask"),
    ("ray", "import recordkit.integrations.ray", "ray"),
    ("tqdm", "from recordkit.compat.ffrecord import dump\ndump([b'a'], OUT, 1, verbose=True)", "cli"),
]  # fmt: skip


@pytest.fixture(scope="module")
def events(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("logs") / "events.out.tfevents.1.host"
    with rk.open(path, "w", format="tfrecord") as writer:
        writer.write(b"")
    return path


@pytest.mark.parametrize(("module", "code", "extra"), CASES, ids=[case[0] for case in CASES])
def test_a_missing_optional_package_names_its_extra(events, tmp_path, module, code, extra):
    program = (
        f"import sys\nsys.modules[{module!r}] = None\n"
        f"EVENTS, OUT = {str(events)!r}, {str(tmp_path / 'out.ffr')!r}\n"
        "import recordkit as rk\n"
        f"try:\n    exec({code!r})\n"
        "except ModuleNotFoundError as exc:\n"
        "    print(type(exc).__name__, exc.name.split('.')[0], '|', exc)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", program], check=False, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    kind, name = result.stdout.split(" | ")[0].split()
    assert kind == "ModuleNotFoundError", result.stdout
    # The package removed, or another of the same extra that this environment lacks and is met first
    # (recordkit.integrations.ray imports pyarrow before ray).
    assert name == module or importlib.util.find_spec(name) is None, result.stdout
    assert f"pip install 'recordkit[{extra}]'" in result.stdout


def _guarded(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    """Whether an import is under ``needs(...)``, TYPE_CHECKING, or a fallback: a ``try`` that handles
    ImportError, ``contextlib.suppress(ImportError)``."""
    while node in parents:
        node = parents[node]
        if isinstance(node, ast.With) and any(
            isinstance(item.context_expr, ast.Call)
            and (
                getattr(item.context_expr.func, "id", None) == "needs"
                or ast.unparse(item.context_expr) == "contextlib.suppress(ImportError)"
            )
            for item in node.items
        ):
            return True
        if isinstance(node, ast.Try) and any(
            "ImportError" in ast.unparse(handler.type) for handler in node.handlers if handler.type
        ):
            return True
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            return True
    return False


def test_every_optional_import_says_what_to_install():
    unguarded = []
    for path in sorted(SRC.rglob("*.py")):
        module = ".".join(path.relative_to(SRC.parent).with_suffix("").parts)
        tree = ast.parse(path.read_text(encoding="utf-8"))
        parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
        required = set()  # the packages this module imports under needs() at its top level
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top not in OPTIONAL:
                    continue
                if _guarded(node, parents):
                    if parents.get(parents[node]) is tree:
                        required.add(top)
                    continue
                unguarded.append((module, top, node.lineno))
        unguarded = [
            item
            for item in unguarded
            if not (item[0] == module and item[1] in required) and item[0] not in PRESENT_ALREADY
        ]
    assert not unguarded, f"optional imports without an install hint: {unguarded}"
