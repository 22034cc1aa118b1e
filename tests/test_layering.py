"""The layer rules of docs/design.md.

Runtime rules: each imports one module in a fresh interpreter and lists what ended up in ``sys.modules``; a rule
whose module does not exist is skipped. To add a rule, add one line to RULES.

Static rules: every module under src/recordkit (generated ``*_pb2`` files aside) is read with ``ast``, no import
runs. They check that

* no imports form a cycle, counting every import: at module level, inside functions, and under
  ``if TYPE_CHECKING:`` (of two modules that need each other, the lower one must not import the higher one at
  all, not even for an annotation or inside a function that runs later);
* no module takes a private name (a leading underscore, dunder names aside) from another package: a module path
  component or an imported name (``from recordkit.io._x import y``, ``from recordkit.io import _y``), an attribute
  reached through an imported name (``errors._attach``, ``RecordReader._frames``), or ``x._a`` on any other object
  where only other packages define ``_a`` (``self.reader._frames``). A package is the first component under
  ``recordkit`` (``io``, ``datasets``, ``errors``); ``recordkit`` itself and ``recordkit._version`` form one, and the
  generated ``recordkit._proto`` is open to all. ``self._a`` and ``cls._a`` are the class's own;
* no module is over MAX_LINES physical lines;
* every import goes to the importer's row of LAYERS or a lower one, and LAYERS is the table in docs/design.md;
* no module outside ``recordkit.formats`` compares a format name: ``==``, ``!=``, ``in``, ``not in`` (or ``is``)
  with a string constant naming a registered format on either side, alone or in a tuple, list or set display
  (``fmt == "tfrecord"``, ``name in ("ffrecord", "arrayrecord")``); a ``case "ofrecord":`` pattern; a dict
  display keyed by two or more format names (a table by format, ``{"tfrecord": ".tfrecord", "ffrecord": ...}``).
  What depends on the format is asked of the format object (``get_format(name).capabilities``, ``.payload``,
  ``.extensions``), so that a format added with ``register_format()`` works everywhere. The names are those of
  the registry; they are lowercase, as every format name recordkit hands out (``"OFRecord"``, a message type's
  name, is not one). Payload kinds are compared through ``recordkit.formats.payloads`` (``EXAMPLE_PAYLOAD``,
  ``OFRECORD_PAYLOAD``): the kind ``"ofrecord"`` is spelt as the format. A name bound to a format string
  (``X = "tfrecord"``, then ``fmt == X``) is not followed.

What counts as an import: every ``import`` and ``from ... import`` anywhere in a module (module level, functions,
methods, ``try`` and ``if`` blocks). ``import a.b.c`` and ``from a.b import c`` (c a submodule) are edges to
``a.b.c``; ``from a.b import name`` is an edge to ``a.b``. Imports under ``if TYPE_CHECKING:`` never run, but
every rule counts them: an annotation that names a module is still a dependency on it, and a cycle closed by one
(a function-level import one way, a type-checking import the other) is still two modules that cannot be
understood, tested or moved apart.

A package's ``__init__``: importing ``a.b.c`` also runs ``a/b/__init__.py``, and that implicit step is NOT counted
as an edge; a package whose ``__init__`` re-exports its submodules would otherwise be in a cycle with each of them.
An explicit ``from a.b import name`` inside ``a.b.c`` does count (a real cycle when ``a/b/__init__.py`` imports
``a.b.c``). In exchange, LAYERS puts each package's ``__init__`` at or above the submodules it imports, and the
runtime rules check that importing a low module (``recordkit.io.sources``, ``recordkit.io.manifest``) does
not load the higher modules its package holds.

Violations that are being removed are listed in KNOWN; an entry that no longer occurs fails, so KNOWN only
shrinks. The checker functions are tested on small synthetic module trees at the end of this file.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import json
import re
import subprocess
import sys
import textwrap
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

# The reader, the writer and the resolution of sources: what the lower rows must not load.
IO_ABOVE_SOURCES = ("recordkit.io.reader", "recordkit.io.resolve", "recordkit.io.writer")
# The packages built on io, which no io module loads.
ABOVE_IO = ("recordkit.datasets", "recordkit.recover", "recordkit.data", "recordkit.integrations")

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
    # The notebook previews read records with recordkit's decoders, not the generated message classes.
    (
        "recordkit.decode.preview",
        (
            "recordkit._proto.tensorflow.example_pb2",
            "recordkit._proto.oneflow",
            "recordkit.io",
            "recordkit.data",
            "PIL",
            "torch",
        ),
    ),
    # The shared varint decoder loads numpy when it runs: the framing and decoding layers import it.
    ("recordkit.support.varints", ("google.protobuf", "numpy", "recordkit.formats")),
    (
        "recordkit.formats",
        ("google.protobuf", "numpy", "torch", "recordkit._proto", "recordkit.io"),
    ),
    # The rows below io.resolve/reader/writer: they may load io.sources and io.atomic (and the lazy recordkit.io).
    ("recordkit.io.sources", ("google.protobuf", "numpy", *IO_ABOVE_SOURCES, *ABOVE_IO)),
    # What describes a dataset, read below the reader: the reader is not loaded, and nothing above io.
    (
        "recordkit.io.tfds",
        (
            "google.protobuf",
            "numpy",
            "tensorflow",
            "recordkit._proto",
            *IO_ABOVE_SOURCES,
            *ABOVE_IO,
        ),
    ),
    ("recordkit.io.manifest", ("google.protobuf", "numpy", *IO_ABOVE_SOURCES, *ABOVE_IO)),
    ("recordkit.io.index", ("google.protobuf", "numpy", *IO_ABOVE_SOURCES, *ABOVE_IO)),
    (
        "recordkit.io",
        (
            "google.protobuf",
            "numpy",
            "torch",
            "recordkit.decode",
            *ABOVE_IO,
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
    # OneFlow's reader lives here too, so the reader stack loads; torch, Pillow and pyarrow do not.
    (
        "recordkit.compat.oneflow",
        ("torch", "PIL", "pyarrow", "recordkit.integrations", "recordkit.cli"),
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
    # The reader, the resolution of sources and the writer: nothing above io.
    ("recordkit.io.reader", ("google.protobuf", "numpy", "torch", "recordkit.decode", *ABOVE_IO)),
    ("recordkit.io.resolve", ("google.protobuf", "numpy", "torch", "recordkit.decode", *ABOVE_IO)),
    ("recordkit.io.writer", ("google.protobuf", "numpy", "torch", "recordkit.decode", *ABOVE_IO)),
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
    ("recordkit.data.loading", ("torch", "recordkit.cli", "recordkit.decode")),
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
    assert exists(module), f"{module} is named in RULES but cannot be found"
    missing = [name for name in NEEDS.get(module, ()) if not exists(name)]
    if missing:
        pytest.skip(f"{module} needs {', '.join(missing)}, which is not installed")
    loaded = loaded_after_import(module)
    assert module in loaded
    offending = [m for m in loaded if any(m == f or m.startswith(f + ".") for f in forbidden)]
    assert not offending, f"importing {module} also imported {offending}"


def test_import_recordkit_loads_only_errors_and_version() -> None:
    """Besides them, only the loader of the lazy names (recordkit.support.lazy, which imports importlib) and the
    table of the names moved since 0.2 with its import finder (recordkit.support.moved, which imports none of
    their new homes)."""
    loaded = {m for m in loaded_after_import("recordkit") if m.startswith("recordkit")}
    assert loaded == {
        "recordkit",
        "recordkit.errors",
        "recordkit._version",
        "recordkit.support",
        "recordkit.support.lazy",
        "recordkit.support.moved",
    }


def test_rules_name_real_modules() -> None:
    """A typo in RULES would make a rule skip forever; the core modules must exist."""
    for module in (
        "recordkit",
        "recordkit.errors",
        "recordkit.decode.messages",
        "recordkit.cli.commands",
    ):
        assert exists(module)


# Static rules (see the module docstring).

PACKAGE = "recordkit"
SRC = Path(__file__).resolve().parents[1] / "src" / PACKAGE
DESIGN = Path(__file__).resolve().parents[1] / "docs" / "design.md"
MAX_LINES = 800

# The layers, bottom up; a module may import only modules in its own row or a lower one. Patterns are relative to
# ``recordkit``: ``x`` is the module x and everything under it, ``x.__init__`` the package x itself, ``__init__``
# the package ``recordkit``; the longest matching pattern places a module. docs/design.md has the same table.
LAYERS: list[tuple[str, ...]] = [
    ("errors", "_proto", "_version"),
    ("support",),
    ("formats",),
    ("decode",),
    ("io.sources", "io.remote", "io.mapped", "io.atomic"),
    ("io.manifest", "io.tfds", "io.index"),
    ("io.resolve", "io.reader", "io.following", "io.preview", "io.writer", "io.__init__"),
    ("recover",),
    ("datasets",),
    ("data",),
    ("integrations", "compat", "ffrecord", "hf", "tensorboard"),
    ("cli", "__main__", "testing", "__init__"),
]

# Violations being removed. Each entry must still occur (test_known_violations_still_occur), so the list only
# shrinks. ("layer", importer, imported module), ("private", importer, package whose private names it uses, or
# ATTRIBUTES), ("cycle", first module, the others), ("size", module, ""), ("format", module, "").
ATTRIBUTES = "private attributes of other packages' objects"
KNOWN: set[tuple[str, str, str]] = set()


@dataclass(frozen=True)
class Import:
    """One imported module (``name`` is set when a name, not a submodule, is taken from it)."""

    importer: str
    target: str
    name: str | None
    line: int
    type_only: bool
    in_function: bool = False


@dataclass(frozen=True)
class Access:
    """``obj._attr`` in ``module``. ``owner`` is the recordkit module or object ``obj`` was imported as, or ``""``
    when ``obj`` is any other expression (``self.reader._frames``) other than ``self`` or ``cls``."""

    module: str
    owner: str
    attr: str
    line: int


@dataclass
class Scan:
    """What :func:`scan` finds in one module or a tree: imports, private attribute reads, and the private names
    each package defines (functions, classes, assigned names and attributes)."""

    imports: list[Import] = field(default_factory=list)
    accesses: list[Access] = field(default_factory=list)
    defined: dict[str, set[str]] = field(
        default_factory=dict
    )  # private name -> packages that define it


@dataclass
class Module:
    """One source file: its dotted name, whether it is a package ``__init__``, its text."""

    name: str
    is_package: bool
    source: str


def is_private(component: str) -> bool:
    """A leading underscore that is not a dunder name (``__version__``, ``__all__``)."""
    return component.startswith("_") and not (
        component.startswith("__") and component.endswith("__")
    )


def owning_package(module: str) -> str:
    """``recordkit.io`` for ``recordkit.io.reader._x``: the package a private name belongs to."""
    package = package_of(module)
    return f"{PACKAGE}.{package}" if package else PACKAGE


def package_of(module: str) -> str:
    """The first component under recordkit (``io`` for ``recordkit.io.reader``); the package itself and its private
    top-level modules (``recordkit._version``) are ``""``."""
    parts = module.split(".")
    if len(parts) == 1 or (len(parts) == 2 and is_private(parts[1]) and parts[1] != "_proto"):
        return ""
    return parts[1]


def source_modules(root: Path = SRC) -> dict[str, Module]:
    """Every .py file under the package, generated ``*_pb2`` files aside."""
    modules = {}
    for path in sorted(root.rglob("*.py")):
        if path.stem.endswith("_pb2"):
            continue
        parts = [PACKAGE, *path.relative_to(root).with_suffix("").parts]
        is_package = parts[-1] == "__init__"
        if is_package:
            parts.pop()
        name = ".".join(parts)
        modules[name] = Module(name, is_package, path.read_text(encoding="utf-8"))
    return modules


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _dotted(node: ast.expr) -> list[str] | None:
    """``a.b.c`` as ["a", "b", "c"]; None for anything that is not a chain of names."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return [node.id, *reversed(parts)]


class _Scanner(ast.NodeVisitor):
    def __init__(self, module: Module, known: Collection[str]) -> None:
        self.module = module
        self.known = known
        self.found = Scan()
        self.bound: dict[
            str, str
        ] = {}  # local name -> recordkit module or object it was imported as
        self.attributes: list[tuple[list[str], int]] = []
        self.type_only = False
        self.in_function = False

    def _add(self, target: str, name: str | None, line: int) -> None:
        self.found.imports.append(
            Import(self.module.name, target, name, line, self.type_only, self.in_function)
        )

    def _longest_known(self, dotted: str) -> str | None:
        parts = dotted.split(".")
        while parts and ".".join(parts) not in self.known:
            parts.pop()
        return ".".join(parts) or None

    def visit_If(self, node: ast.If) -> None:
        if _is_type_checking(node.test):
            outer, self.type_only = self.type_only, True
            for stmt in node.body:
                self.visit(stmt)
            self.type_only = outer
            for stmt in node.orelse:
                self.visit(stmt)
        else:
            self.generic_visit(node)

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if alias.name.split(".")[0] != PACKAGE:
                continue
            target = self._longest_known(alias.name) or alias.name
            self._add(target, None, node.lineno)
            if alias.asname:
                self.bound[alias.asname] = alias.name
            else:
                self.bound[PACKAGE] = PACKAGE

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        base = node.module or ""
        if node.level:
            package = self.module.name.split(".")
            if not self.module.is_package:
                package.pop()
            package = package[: len(package) - (node.level - 1)]
            base = ".".join([*package, *([base] if base else [])])
        if base.split(".")[0] != PACKAGE:
            return
        for alias in node.names:
            full = f"{base}.{alias.name}"
            if full in self.known:
                self._add(full, None, node.lineno)
            else:
                self._add(base, alias.name, node.lineno)
            if alias.name != "*":
                self.bound[alias.asname or alias.name] = full

    def _define(self, name: str) -> None:
        if is_private(name):
            self.found.defined.setdefault(name, set()).add(package_of(self.module.name))

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self._define(node.name)
        outer, self.in_function = self.in_function, True
        self.generic_visit(node)
        self.in_function = outer

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self._define(node.name)
        self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, ast.Store):
            self._define(node.id)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if not isinstance(node.ctx, ast.Load):
            self._define(node.attr)
            self.generic_visit(node)
            return
        chain = _dotted(node)
        if chain is not None:
            self.attributes.append((chain, node.lineno))
        elif is_private(node.attr):
            self.found.accesses.append(Access(self.module.name, "", node.attr, node.lineno))
        if chain is None:
            self.generic_visit(node)

    def finish(self) -> Scan:
        """Resolve ``name.attr...`` chains through the names the imports bound, keeping private attributes."""
        for chain, line in self.attributes:
            # self._a is the class's own business; self._a._b is not. x._a where x was not imported leaves owner
            # "", and private_uses judges by which packages define _a.
            own = chain[0] in ("self", "cls")
            owner = "" if own else self.bound.get(chain[0], "")
            for attr in chain[2 if own else 1 :]:
                if is_private(attr):
                    self.found.accesses.append(Access(self.module.name, owner, attr, line))
                    break
                owner = owner and f"{owner}.{attr}"
        return self.found


def scan(module: Module, known: Collection[str]) -> Scan:
    """The recordkit imports of one module, its private attribute reads, the private names it defines."""
    scanner = _Scanner(module, known)
    scanner.visit(ast.parse(module.source))
    return scanner.finish()


def scan_all(modules: dict[str, Module]) -> Scan:
    """:func:`scan` over every module."""
    total = Scan()
    for module in modules.values():
        found = scan(module, modules)
        total.imports += found.imports
        total.accesses += found.accesses
        for name, packages in found.defined.items():
            total.defined.setdefault(name, set()).update(packages)
    return total


def import_cycles(imports: Iterable[Import]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), over every import: module level,
    inside functions and under ``if TYPE_CHECKING:``."""
    graph: dict[str, set[str]] = {}
    for imp in imports:
        if imp.target != imp.importer:
            graph.setdefault(imp.importer, set()).add(imp.target)
            graph.setdefault(imp.target, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for succ in sorted(graph[node]):
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(components)


def where(imp: Import) -> str:
    """`` (in a function)``, `` (type checking)`` or ``""`` (module level): how an import runs."""
    if imp.type_only:
        return " (type checking)"
    return " (in a function)" if imp.in_function else ""


def describe_cycle(component: list[str], imports: Iterable[Import]) -> str:
    """The imports inside one strongly connected component, with their lines and how each runs."""
    members = set(component)
    edges = sorted(
        {
            f"{imp.importer}:{imp.line} -> {imp.target}{where(imp)}"
            for imp in imports
            if imp.importer in members and imp.target in members and imp.importer != imp.target
        }
    )
    return " <-> ".join(component) + " (" + "; ".join(edges) + ")"


Found = dict[tuple[str, str, str], list[str]]


def private_uses(found_in: Scan) -> Found:
    """Private names (a module path component or an imported name) taken from another package; private
    attributes reached through a name imported from another package; and ``x._a`` on any other object where only
    other packages define ``_a`` (so it cannot be the importer's own).

    {("private", module, package whose private names it uses): where, one line per use}."""
    found: Found = {}
    for imp in found_in.imports:
        if package_of(imp.target) == package_of(imp.importer):
            continue
        path = imp.target.split(".")[1:] + ([imp.name] if imp.name else [])
        if path[:1] == ["_proto"] or not any(is_private(part) for part in path):
            continue
        what = imp.target + (f".{imp.name}" if imp.name else "")
        key = ("private", imp.importer, owning_package(imp.target))
        found.setdefault(key, []).append(f"{imp.importer}:{imp.line} imports {what}")
    for acc in found_in.accesses:
        if acc.owner:
            if package_of(acc.owner) == package_of(acc.module):
                continue
            what = f"{acc.owner}.{acc.attr}"
            owners = owning_package(acc.owner)
        else:
            definers = found_in.defined.get(acc.attr, set())
            if not definers or package_of(acc.module) in definers:
                continue
            what = f"x.{acc.attr} (defined only in {', '.join(sorted(owning_package(f'{PACKAGE}.{p}') for p in definers))})"
            owners = ATTRIBUTES
        found.setdefault(("private", acc.module, owners), []).append(
            f"{acc.module}:{acc.line} uses {what}"
        )
    return found


def layer_of(module: str, layers: Sequence[Sequence[str]] = LAYERS) -> int | None:
    """The row of the longest pattern that matches ``module`` (None when none does)."""
    place = placement(module, layers)
    return None if place is None else place[0]


def placement(module: str, layers: Sequence[Sequence[str]] = LAYERS) -> tuple[int, str] | None:
    """The row and the pattern that place ``module``: the longest pattern that matches it."""
    matching = [
        (row, p)
        for row, patterns in enumerate(layers)
        for p in patterns
        if pattern_matches(p, module)
    ]
    return max(matching, key=lambda place: len(place[1]), default=None)


def pattern_matches(pattern: str, module: str) -> bool:
    """Whether a LAYERS pattern covers ``module`` (before longer patterns are considered)."""
    relative = module.split(".", 1)[1] if "." in module else ""
    if pattern == "__init__" or pattern.endswith(".__init__"):
        return relative == pattern.removesuffix("__init__").removesuffix(".")
    return relative == pattern or relative.startswith(pattern + ".")


def upward_imports(imports: Iterable[Import], layers: Sequence[Sequence[str]] = LAYERS) -> Found:
    """Imports of a module in a higher row than the importer's: {("layer", importer, target): where}."""
    found: Found = {}
    for imp in imports:
        low, high = layer_of(imp.importer, layers), layer_of(imp.target, layers)
        if low is not None and high is not None and high > low:
            found.setdefault(("layer", imp.importer, imp.target), []).append(
                f"{imp.importer}:{imp.line} (row {low}) imports {imp.target} (row {high})"
            )
    return found


def interleaved_packages(layers: Sequence[Sequence[str]] = LAYERS) -> list[tuple[str, str, int]]:
    """Packages that hold rows on both sides of another package's row: ``(package, other, row)``.

    A package is the first component of a pattern (``io`` for ``io.reader``; ``__init__``, the package
    ``recordkit`` itself, and each top-level module count alone). When ``other`` has a row between two rows
    of ``package``, the layers hold only one way: part of ``package`` is below ``other`` and part above it,
    so the two packages import each other."""
    rows: dict[str, set[int]] = {}
    for row, patterns in enumerate(layers):
        for pattern in patterns:
            rows.setdefault(pattern.split(".")[0], set()).add(row)
    return sorted(
        (package, other, row)
        for package, own in rows.items()
        for other, theirs in rows.items()
        if other != package
        for row in theirs
        if min(own) < row < max(own)
    )


def long_modules(modules: dict[str, Module], limit: int = MAX_LINES) -> Found:
    """Modules of more than ``limit`` physical lines: {("size", module, ""): [count]}."""
    return {
        ("size", m.name, ""): [f"{m.name}: {len(m.source.splitlines())} lines"]
        for m in modules.values()
        if len(m.source.splitlines()) > limit
    }


COMPARISONS = (ast.Eq, ast.NotEq, ast.In, ast.NotIn, ast.Is, ast.IsNot)


def format_names() -> frozenset[str]:
    """The names of the registered formats (the built-in ones and any plugin installed)."""
    from recordkit.formats import available_formats

    return frozenset(available_formats())


def _named_formats(node: ast.AST, names: Collection[str]) -> list[str]:
    """The format names ``node`` holds: a string constant, or one in a tuple, list or set display."""
    values = node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else [node]
    return [
        v.value
        for v in values
        if isinstance(v, ast.Constant) and isinstance(v.value, str) and v.value in names
    ]


def format_comparisons(modules: dict[str, Module], names: Collection[str]) -> Found:
    """Comparisons of format names outside ``recordkit.formats`` (see the module docstring):
    {("format", module, ""): where, one line per comparison}."""
    found: Found = {}
    for module in modules.values():
        if module.name == f"{PACKAGE}.formats" or module.name.startswith(f"{PACKAGE}.formats."):
            continue
        nodes = [n for n in ast.walk(ast.parse(module.source)) if hasattr(n, "lineno")]
        for node in sorted(nodes, key=lambda n: (n.lineno, n.col_offset)):
            named: list[str] = []
            what = ""
            if isinstance(node, ast.Compare) and any(
                isinstance(op, COMPARISONS) for op in node.ops
            ):
                for side in (node.left, *node.comparators):
                    named += _named_formats(side, names)
                what = "compares"
            elif isinstance(node, ast.MatchValue):
                named = _named_formats(node.value, names)
                what = "matches"
            elif isinstance(node, ast.Dict):
                keys = [_named_formats(key, names) for key in node.keys if key is not None]
                named = [name for key in keys for name in key]
                named = named if len(named) > 1 else []
                what = "keys a table by"
            if named:
                found.setdefault(("format", module.name, ""), []).append(
                    f"{module.name}:{node.lineno} {what} {', '.join(map(repr, named))}"
                )
    return found


@functools.cache
def violations() -> Found:
    """Every static violation in the tree, keyed as in KNOWN."""
    modules = source_modules()
    tree = scan_all(modules)
    found = {
        ("cycle", c[0], " ".join(c[1:])): [describe_cycle(c, tree.imports)]
        for c in import_cycles(tree.imports)
    }
    found |= private_uses(tree)
    found |= upward_imports(tree.imports)
    found |= long_modules(modules)
    found |= format_comparisons(modules, format_names())
    return found


def _new(kind: str) -> list[str]:
    return sorted(
        line
        for key, where in violations().items()
        if key[0] == kind and key not in KNOWN
        for line in where
    )


def test_no_import_cycles() -> None:
    assert not _new("cycle"), "import cycles:\n" + "\n".join(_new("cycle"))


def test_no_private_names_across_packages() -> None:
    assert not _new("private"), "private names used from another package:\n" + "\n".join(
        _new("private")
    )


def test_imports_follow_the_layers() -> None:
    assert not _new("layer"), "imports of a higher layer:\n" + "\n".join(_new("layer"))


def test_no_module_over_max_lines() -> None:
    assert not _new("size"), f"modules over {MAX_LINES} lines:\n" + "\n".join(_new("size"))


def test_no_format_name_comparisons_outside_formats() -> None:
    assert not _new("format"), (
        "format names compared outside recordkit.formats (ask the format object instead):\n"
        + "\n".join(_new("format"))
    )


def test_packages_do_not_interleave() -> None:
    """Each package's rows are together: no package sits partly below and partly above another (io and
    datasets did, io reading datasets' manifest and index while datasets built on io's reader)."""
    assert not interleaved_packages(), (
        f"(package, package with a row between two of its rows, that row): {interleaved_packages()}"
    )


def test_io_imports_nothing_above_it() -> None:
    """No io module imports datasets, recover, data or integrations: at module level, in a function or for
    type checking (the layer table says so; this names the rule the table exists for)."""
    above = [name.removeprefix(f"{PACKAGE}.") for name in ABOVE_IO]
    offending = [
        f"{imp.importer}:{imp.line} -> {imp.target}{where(imp)}"
        for imp in scan_all(source_modules()).imports
        if package_of(imp.importer) == "io" and package_of(imp.target) in above
    ]
    assert not offending, "io imports a package built on it:\n" + "\n".join(offending)


def test_every_module_has_a_layer() -> None:
    unplaced = [name for name in source_modules() if layer_of(name) is None]
    assert not unplaced, (
        f"add these modules to LAYERS and to the table in docs/design.md: {unplaced}"
    )


def test_every_layer_pattern_names_a_module() -> None:
    """A pattern left behind by a moved or deleted module would let a new one of that name in unplaced."""
    used = {placement(name) for name in source_modules()}
    unused = [
        pattern
        for row, patterns in enumerate(LAYERS)
        for pattern in patterns
        if (row, pattern) not in used
    ]
    assert not unused, f"patterns in LAYERS that match no module: {unused}"


def test_known_violations_still_occur() -> None:
    """A violation that was fixed must leave KNOWN, so that it cannot come back unnoticed."""
    gone = sorted(KNOWN - set(violations()))
    assert not gone, f"fixed; remove from KNOWN: {gone}"


def design_layers(text: str) -> list[tuple[str, ...]]:
    """The module patterns of the layer table in design.md: the code spans of each row's second column."""
    section = re.split(r"^## Layers\n", text, maxsplit=1, flags=re.MULTILINE)[1].split("\n## ", 1)[
        0
    ]
    rows = [line for line in section.splitlines() if line.startswith("|")][2:]
    return [tuple(re.findall(r"`([^`]+)`", row.split("|")[2])) for row in rows]


def test_design_md_has_the_same_layers() -> None:
    assert design_layers(DESIGN.read_text(encoding="utf-8")) == LAYERS


# The checkers on small synthetic trees, so that none of them passes vacuously.


def synthetic(sources: dict[str, str]) -> dict[str, Module]:
    """Modules from {dotted name: source}; a name ending in ``.__init__`` is a package."""
    modules = {}
    for name, source in sources.items():
        is_package = name.endswith(".__init__")
        dotted = name.removesuffix(".__init__")
        modules[dotted] = Module(dotted, is_package, textwrap.dedent(source))
    return modules


def test_checker_finds_a_module_level_cycle() -> None:
    modules = synthetic(
        {
            "recordkit.a.__init__": "",
            "recordkit.a.x": "from recordkit.a.y import f\n",
            "recordkit.a.y": "import recordkit.a.x\n",
            "recordkit.a.z": "from recordkit.a import x\n",
        }
    )
    imports = scan_all(modules).imports
    assert import_cycles(imports) == [["recordkit.a.x", "recordkit.a.y"]]
    assert "recordkit.a.x:1 -> recordkit.a.y" in describe_cycle(
        ["recordkit.a.x", "recordkit.a.y"], imports
    )


def test_checker_finds_a_cycle_through_a_function_and_a_relative_import() -> None:
    modules = synthetic(
        {
            "recordkit.b.__init__": "from recordkit.b.low import g\n",
            "recordkit.b.low": "def g():\n    from . import high\n    return high\n",
            "recordkit.b.high": "class C:\n    def m(self):\n        from .low import g\n",
        }
    )
    imports = scan_all(modules).imports
    assert import_cycles(imports) == [["recordkit.b.high", "recordkit.b.low"]]


def test_checker_counts_type_checking_imports_in_cycles() -> None:
    modules = synthetic(
        {
            "recordkit.c": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from recordkit.d import D\n",
            "recordkit.d": "from recordkit.c import C\n",
        }
    )
    imports = scan_all(modules).imports
    assert import_cycles(imports) == [["recordkit.c", "recordkit.d"]]
    assert [imp.type_only for imp in imports] == [True, False]


def test_checker_finds_a_cycle_of_a_function_level_and_a_type_checking_import() -> None:
    """The shape that hid three cycles: the higher module imports the lower one inside a method (so that
    loading either loads nothing more), the lower one imports the higher one for an annotation."""
    modules = synthetic(
        {
            "recordkit.e.__init__": "",
            "recordkit.e.reader": """
                class Reader:
                    def _repr_html_(self):
                        from recordkit.e.view import html
                        return html(self)
            """,
            "recordkit.e.view": """
                from __future__ import annotations
                from typing import TYPE_CHECKING
                if TYPE_CHECKING:
                    from recordkit.e.reader import Reader
                def html(reader: Reader) -> str: ...
            """,
        }
    )
    imports = scan_all(modules).imports
    assert [(imp.in_function, imp.type_only) for imp in imports] == [(True, False), (False, True)]
    (cycle,) = import_cycles(imports)
    assert cycle == ["recordkit.e.reader", "recordkit.e.view"]
    assert describe_cycle(cycle, imports) == (
        "recordkit.e.reader <-> recordkit.e.view (recordkit.e.reader:4 -> recordkit.e.view (in a function); "
        "recordkit.e.view:5 -> recordkit.e.reader (type checking))"
    )


def test_checker_finds_private_names_from_other_packages() -> None:
    modules = synthetic(
        {
            "recordkit.io.__init__": """
                from recordkit.io._impl import _helper
                class RecordReader:
                    def __init__(self):
                        self._frames = []
                        self._closed = False
            """,
            "recordkit.io._impl": "def _helper(): ...\n",
            "recordkit.errors": "def _attach(): ...\n",
            "recordkit.data.__init__": """
                import recordkit.errors as errs
                from recordkit import errors
                from recordkit.io import RecordReader, __version__
                from recordkit._proto.tensorflow import example_pb2
                class Mine:
                    def __init__(self, reader):
                        self._closed = reader._closed  # data defines _closed too: not provably io's
                        self._reader = reader
                    def f(self):
                        from recordkit.io._impl import thing
                        from recordkit.io import _helper
                        errors._attach()
                        errs.public.chain._hidden
                        self._reader.frames
                        return RecordReader._frames, self._reader._frames, self.r._frames
            """,
        }
    )
    found = private_uses(scan_all(modules))
    assert sorted(found) == [
        ("private", "recordkit.data", ATTRIBUTES),
        ("private", "recordkit.data", "recordkit.errors"),
        ("private", "recordkit.data", "recordkit.io"),
    ]
    assert sorted(line.split(" ", 1)[1] for lines in found.values() for line in lines) == [
        "imports recordkit.io._helper",
        "imports recordkit.io._impl.thing",
        "uses recordkit.errors._attach",
        "uses recordkit.errors.public.chain._hidden",
        "uses recordkit.io.RecordReader._frames",
        "uses x._frames (defined only in recordkit.io)",
        "uses x._frames (defined only in recordkit.io)",
    ]


def test_checker_finds_upward_imports_and_long_modules() -> None:
    layers = [("errors",), ("io.reader", "io.__init__"), ("data",)]
    modules = synthetic(
        {
            "recordkit.errors": "\n" * 5,
            "recordkit.io.__init__": "from recordkit.io.reader import R\n",
            "recordkit.io.reader": "from recordkit.errors import E\nfrom recordkit.data import D\n",
            "recordkit.data.__init__": "from recordkit.io import R\n",
        }
    )
    imports = scan_all(modules).imports
    assert sorted(upward_imports(imports, layers)) == [
        ("layer", "recordkit.io.reader", "recordkit.data")
    ]
    assert layer_of("recordkit.io", layers) == 1
    assert layer_of("recordkit.io.other", layers) is None
    assert layer_of("recordkit.data._x", layers) == 2
    assert placement("recordkit.io.reader", [("io",), ("io.reader",)]) == (1, "io.reader")
    assert sorted(long_modules(modules, limit=4)) == [("size", "recordkit.errors", "")]


def test_checker_finds_format_name_comparisons() -> None:
    names = {"tfrecord", "ffrecord", "ofrecord", "arrayrecord"}
    modules = synthetic(
        {
            "recordkit.formats.__init__": 'def f(name):\n    return name == "tfrecord"\n',
            "recordkit.formats.x": 'TABLE = {"tfrecord": 1, "ffrecord": 2}\n',
            "recordkit.cli.a": """
                from recordkit.formats.payloads import OFRECORD_PAYLOAD
                SUFFIXES = {"tfrecord": ".tfrecord", "ffrecord": ".ffr"}
                def f(fmt, kind, reader):
                    if fmt == "tfrecord" or "arrayrecord" != reader.format:
                        pass
                    if fmt not in ("ffrecord", "ofrecord", "other"):
                        pass
                    match fmt:
                        case "ofrecord" | "tfrecord":
                            pass
                        case "example":
                            pass
                    return (
                        kind == "OFRecord",
                        kind == "example",
                        kind == OFRECORD_PAYLOAD,
                        fmt < "tfrecord",
                        open_reader(fmt, format="tfrecord"),
                        {"ofrecord": kind, "columns": fmt},
                    )
            """,
        }
    )
    found = format_comparisons(modules, names)
    assert list(found) == [("format", "recordkit.cli.a", "")]
    assert found["format", "recordkit.cli.a", ""] == [
        "recordkit.cli.a:3 keys a table by 'tfrecord', 'ffrecord'",
        "recordkit.cli.a:5 compares 'tfrecord'",
        "recordkit.cli.a:5 compares 'arrayrecord'",
        "recordkit.cli.a:7 compares 'ffrecord', 'ofrecord'",
        "recordkit.cli.a:10 matches 'ofrecord'",
        "recordkit.cli.a:10 matches 'tfrecord'",
    ]


def test_format_names_are_the_registry_s() -> None:
    """The check compares with the registry's names: an empty or stale set would let every comparison by."""
    assert {"tfrecord", "ffrecord", "ofrecord", "arrayrecord"} <= format_names()


def test_checker_finds_interleaved_packages() -> None:
    layers = [
        ("errors", "_version"),
        ("io.sources",),
        ("datasets.manifest",),
        ("io.reader",),
        ("datasets.writer", "__init__"),
    ]
    assert interleaved_packages(layers) == [("datasets", "io", 3), ("io", "datasets", 2)]
    assert interleaved_packages([("io.sources",), ("recover",), ("io.reader",)]) == [
        ("io", "recover", 1)
    ]
    assert (
        interleaved_packages(
            [("errors",), ("io.sources",), ("io.reader",), ("datasets",), ("__init__",)]
        )
        == []
    )


def test_design_table_parser() -> None:
    text = "## Layers\n\n| row | modules | may import |\n|---|---|---|\n| 0 | `errors`, `_proto` | x |\n| 1 | `io.__init__` | `errors` |\n\n## Next\n"
    assert design_layers(text) == [("errors", "_proto"), ("io.__init__",)]
