"""The names that moved since 0.2 and the keyword arguments renamed in 0.4: both work with a :class:`DeprecationWarning`.

:data:`MOVED` is the one table of them: old dotted path -> new dotted path. A moved module
(``import recordkit.ray``) is served by the finder that :func:`install_finder` adds to :data:`sys.meta_path`
when ``recordkit`` is imported: the old name becomes the very module object of the new one. A moved name of a
module (``rk.float_feature``, ``recordkit.data.part_files``) is served by that module's ``__getattr__``
through :func:`moved_attribute`. Either way the new home is imported by name on first use, so this module
imports nothing of recordkit's and ``import recordkit`` loads none of the new homes.

A keyword argument renamed to the one vocabulary of docs/api.md is served by :func:`renamed_arguments`, which
records it in :data:`RENAMED`.
"""

from __future__ import annotations

import functools
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
import types
import warnings
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

__all__ = [
    "MOVED",
    "MOVED_IN",
    "NO_LONGER_PUBLIC",
    "RENAMED",
    "REMOVED_IN",
    "RENAMED_IN",
    "install_finder",
    "moved_attribute",
    "renamed_arguments",
]

MOVED_IN = "0.3"
"""The release that regrouped the package, when most names of :data:`MOVED` moved (0.3 refused their old
names; 0.4 accepts them again, with a warning). A few moved in 0.4, so the warnings name no release."""

RENAMED_IN = "0.4"
"""The release in which the keyword arguments of :data:`RENAMED` were renamed."""

REMOVED_IN = "0.5"
"""The release that removes the old names of :data:`MOVED` and the old keywords of :data:`RENAMED`."""

_ERRORS = (
    "DataLossWarning",
    "FileChangedError",
    "HeaderError",
    "LegacyFormatWarning",
    "NoLengthError",
    "SlowCRCWarning",
    "StaleIndexError",
    "StaleIndexWarning",
    "StateError",
    "UnsafePathError",
    "UnsupportedOperationError",
)
_FEATURES = ("bytes_feature", "double_feature", "float_feature", "int32_feature", "int64_feature")
_TORCH = ("dataloader", "torch_dataset", "MapDataset")
# What reading a dataset needs of its manifest and of a TFDS directory moved below the datasets layer, into
# io (the few names the writers import from there still resolve where they were).
_MANIFEST_READING = (
    "MANIFEST_VERSION",
    "TFDS_INFO",
    "changed_shard",
    "inside_path",
    "sha256_of",
    "shard_count_error",
    "shard_listing",
    "shard_path",
)
_TFDS_READING = (
    "BLOCK_LENGTH",
    "CYCLE_LENGTH",
    "ReadOrder",
    "Segment",
    "is_tfds_directory",
    "manifest_from_tfds",
    "read_order",
)
# Helpers of recordkit.io's own packages that left its public names: they stay in recordkit.io.sources,
# outside its __all__.
_IO_HELPERS = ("dataset_files", "natural_key", "require_fsspec", "source_exists", "source_size")
# Tuning constants of the format layer, no part of the contract a format implements.
_BASE_CONSTANTS = ("READ_CHUNK", "SHRUNK", "WINDOW")
# datasets.plan split by job: the seeds, the ranks and the read ranges of distributed engines left it.
_PLAN_SPLIT = {
    "seeds": "derive_seed permutation",
    "ranks": "resolve_rank shard_of worker_info",
    "ranges": "DEFAULT_RANGE_RECORDS ReadRange absolute_path open_range plan_reads read_range",
}

_TASK_RANGES = ("ReadRange", "plan_reads", "read_range")

NO_LONGER_PUBLIC: frozenset[str] = frozenset(
    [
        *(f"recordkit.io.{name}" for name in _IO_HELPERS),
        "recordkit.io.has_glob_wildcards",
        *(f"recordkit.formats.base.{name}" for name in _BASE_CONSTANTS),
    ]
)
"""The old names of :data:`MOVED` whose new home is private: their warning says so, naming no home."""

MOVED: dict[str, str] = {
    # modules
    "recordkit.ray": "recordkit.integrations.ray",
    "recordkit.dask": "recordkit.integrations.dask",
    "recordkit.data.torch": "recordkit.integrations.torch",
    "recordkit.ofrecord": "recordkit.compat.oneflow",
    "recordkit.shards": "recordkit.datasets",
    "recordkit.formats.manifest": "recordkit.io.manifest",
    "recordkit.datasets.index": "recordkit.io.index",
    "recordkit.formats.tfds": "recordkit.datasets.tfds",
    "recordkit.example": "recordkit.decode.messages",
    "recordkit.parsing": "recordkit.decode.parsing",
    "recordkit.support.preview": "recordkit.decode.preview",
    "recordkit.decode.oneflow": "recordkit.compat.oneflow",
    # names of modules
    **{f"recordkit.{name}": f"recordkit.errors.{name}" for name in _ERRORS},
    **{f"recordkit.{name}": f"recordkit.decode.messages.{name}" for name in _FEATURES},
    **{f"recordkit.data.{name}": f"recordkit.integrations.torch.{name}" for name in _TORCH},
    **{f"recordkit.datasets.manifest.{n}": f"recordkit.io.manifest.{n}" for n in _MANIFEST_READING},
    **{f"recordkit.datasets.tfds.{n}": f"recordkit.io.tfds.{n}" for n in _TFDS_READING},
    # the one loader reads map-style datasets too
    "recordkit.data.RecordLoader": "recordkit.data.Loader",
    "recordkit.integrations.torch.RecordLoader": "recordkit.data.Loader",
    "recordkit.data.loading.Passes": "recordkit.data.Loader",
    "recordkit.data.OFRecordReader": "recordkit.compat.oneflow.OFRecordReader",
    "recordkit.data.part_files": "recordkit.compat.oneflow.part_files",
    "recordkit.data.expand_sources": "recordkit.io.expand_sources",
    **{f"recordkit.io.{name}": f"recordkit.io.sources.{name}" for name in _IO_HELPERS},
    # merged into is_glob_pattern, which also reads an existing file's name as the file
    "recordkit.io.has_glob_wildcards": "recordkit.io.sources._has_wildcards",
    **{
        f"recordkit.formats.base.{name}": f"recordkit.formats.base._{name}"
        for name in _BASE_CONSTANTS
    },
    **{
        f"recordkit.datasets.plan.{name}": f"recordkit.datasets.{home}.{name}"
        for home, names in _PLAN_SPLIT.items()
        for name in names.split()
    },
    # 0.2 imported them from recordkit.shards.tasks, .shardfile and recordkit.formats.manifest
    **{f"recordkit.datasets.tasks.{n}": f"recordkit.datasets.ranges.{n}" for n in _TASK_RANGES},
    "recordkit.datasets.shardfile.read_manifest": "recordkit.io.manifest.load_manifest",
    "recordkit.io.manifest.merge_manifests": "recordkit.datasets.manifest.merge_manifests",
    "recordkit.formats.tfrecord.TFRecordReader": "recordkit.formats.tfrecord.TFRecordFrameReader",
    "recordkit.formats.tfrecord.TFRecordWriter": "recordkit.formats.tfrecord.TFRecordFrameWriter",
    "recordkit.formats.ofrecord.OFRecordReader": "recordkit.formats.ofrecord.OFRecordFrameReader",
    "recordkit.formats.ofrecord.OFRecordWriter": "recordkit.formats.ofrecord.OFRecordFrameWriter",
    "recordkit.formats.ffrecord.FFRecordReader": "recordkit.formats.ffrecord.FFRecordFrameReader",
    "recordkit.formats.ffrecord.FFRecordWriter": "recordkit.formats.ffrecord.FFRecordFrameWriter",
}
"""Each name that moved since 0.2, by its old dotted path: its new dotted path (a module or a module's name)."""

_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_IMPORTLIB = os.path.dirname(os.path.abspath(importlib.__file__)) + os.sep


def _stacklevel() -> int:
    """The ``stacklevel`` for :func:`_warn`'s call of :func:`warnings.warn` that names the first line outside recordkit.

    The import machinery stands between the user's import line and the finder: frames of the frozen
    ``importlib._bootstrap`` are skipped by :mod:`warnings` without being counted, those of ``importlib``'s
    package (``import_module``) are counted.
    """
    frame = sys._getframe(1)  # _warn: stacklevel 1
    level = 1
    while True:
        back = frame.f_back
        if back is None:
            return 2
        frame = back
        name = frame.f_code.co_filename
        internal = "importlib" in name and "_bootstrap" in name
        if not internal:
            level += 1
            if not name.startswith((_PACKAGE, _IMPORTLIB)):
                return level


def _new_home(old: str) -> str | None:
    """Where the module ``old`` moved: its entry in :data:`MOVED`, or the same submodule of a moved
    package (``recordkit.shards.tasks`` is ``recordkit.datasets.tasks``); ``None`` if it did not move."""
    if old in MOVED:
        return MOVED[old]
    package = old.rpartition(".")[0]
    while package.count("."):
        if package in MOVED and _is_module(MOVED[package]):
            return MOVED[package] + old[len(package) :]
        package = package.rpartition(".")[0]
    return None


def _warn(old: str) -> None:
    """Warn that ``old`` moved (or, when its new home is not public, that it is no longer public), pointing at
    the user's line."""
    where = "is no longer public" if old in NO_LONGER_PUBLIC else f"moved to {_new_home(old)}"
    warnings.warn(
        f"{old} {where}; the old name will be removed in {REMOVED_IN}",
        DeprecationWarning,
        stacklevel=_stacklevel(),
    )


RENAMED: dict[str, dict[str, str]] = {}
"""Each callable whose keyword arguments were renamed, by dotted path: its old keyword -> its new keyword.

Filled by :func:`renamed_arguments` as the modules that use it are imported.
"""

_Renamed = TypeVar("_Renamed", bound=Callable[..., Any])


def _warn_renamed(where: str, old: str, new: str) -> None:
    """Warn that the keyword ``old`` of ``where`` is now ``new``, pointing at the user's line."""
    warnings.warn(
        f"{where}({old}=...) is now {where}({new}=...) since {RENAMED_IN}; "
        f"the keyword {old}= will be removed in {REMOVED_IN}",
        DeprecationWarning,
        stacklevel=_stacklevel(),
    )


def renamed_arguments(**renames: str) -> Callable[[_Renamed], _Renamed]:
    """Keep accepting the old keywords of a function or class whose parameters were renamed, with a warning.

    Each keyword is an old name and its value the new one. A call that passes an old keyword gets a
    :class:`DeprecationWarning` naming the new keyword, and the value under the new name; one that passes
    both the old keyword and the new parameter (by keyword or position) is a :class:`TypeError`.
    Positional calls are not affected. On a class, the keywords of ``__init__`` are the ones renamed. The function keeps its signature (the new names), and
    :data:`RENAMED` records the renames under its dotted path; the wrapper's ``__renamed_arguments__`` holds
    them too.

    Examples
    --------
    ::

        @renamed_arguments(src="sources")
        def open(sources, mode="r"): ...
    """

    def decorate(target: _Renamed) -> _Renamed:
        function: Callable[..., Any] = (
            vars(target)["__init__"] if isinstance(target, type) else target
        )
        code = function.__code__
        missing = set(renames.values()) - set(
            code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]
        )
        if missing:
            raise TypeError(
                f"{target.__qualname__} has no parameter {sorted(missing)} to rename to"
            )
        where = f"{target.__module__}.{target.__qualname__}"
        # Where each new name sits among the positional parameters: given there and as the old keyword, it
        # is given twice.
        position = {name: i for i, name in enumerate(code.co_varnames[: code.co_argcount])}

        @functools.wraps(function)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            for old in renames.keys() & kwargs.keys():
                new = renames[old]
                if new in kwargs or position.get(new, len(args)) < len(args):
                    raise TypeError(f"{where}() got both {old}= and {new} (the new name of {old}=)")
                _warn_renamed(where, old, new)
                kwargs[new] = kwargs.pop(old)
            return function(*args, **kwargs)

        wrapper.__renamed_arguments__ = dict(renames)  # type: ignore[attr-defined]
        RENAMED[where] = dict(renames)
        if isinstance(target, type):
            target.__init__ = wrapper  # type: ignore[misc]
            return target
        return wrapper  # type: ignore[return-value]

    return decorate


def _resolve(path: str) -> Any:
    """Import a dotted path: a module, or a name of a module."""
    try:
        return importlib.import_module(path)
    except ModuleNotFoundError as exc:
        if exc.name != path:
            raise
    module, _, name = path.rpartition(".")
    return getattr(importlib.import_module(module), name)


def _is_module(path: str) -> bool:
    """Whether a dotted path names a module (a name of a module is not one), importing its parent only."""
    try:
        return importlib.util.find_spec(path) is not None
    except ModuleNotFoundError:  # the parent is a module, not a package
        return False


def moved_attribute(module: str, name: str) -> Any:
    """Return the object at the new home of ``module.name``, with a :class:`DeprecationWarning` naming it.

    For a module's ``__getattr__`` (PEP 562): a name that did not move raises :class:`AttributeError`.

    Examples
    --------
    At the end of a module that lost names::

        def __getattr__(name: str) -> Any:
            return moved_attribute(__name__, name)
    """
    old = f"{module}.{name}"
    if old not in MOVED:
        raise AttributeError(f"module {module!r} has no attribute {name!r}")
    if _is_module(MOVED[old]):
        # Through the finder, which warns once and binds the old name, so that the second lookup of
        # ``from recordkit import ofrecord`` (the import statement makes two) finds it without a second warning.
        return importlib.import_module(old)
    _warn(old)
    return _resolve(MOVED[old])


class _Alias(importlib.abc.Loader):
    """Loads a moved module's old name as the new module object."""

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        """Warn, then import the new module and return it under the old name."""
        _warn(spec.name)
        return importlib.import_module(_new_home(spec.name) or spec.name)

    def exec_module(self, module: types.ModuleType) -> None:
        """Nothing to run: the new module is imported already."""


class _MovedModuleFinder(importlib.abc.MetaPathFinder):
    """Finds the old names of moved modules (after every other finder has missed them)."""

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: types.ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        """A spec for a moved module's old name; ``None`` for any other name."""
        if not fullname.startswith("recordkit."):
            return None
        new = _new_home(fullname)
        if new is None or not _is_module(new):
            return None
        return importlib.machinery.ModuleSpec(fullname, _Alias())


def install_finder() -> None:
    """Add the finder of moved modules to the front of :data:`sys.meta_path`, once.

    In front, so that a submodule of a moved package (``recordkit.shards.tasks``) is the new module object,
    not a second copy that the path finder would load from the new package's folder. It answers only for
    moved names, after a dictionary lookup.
    """
    if not any(isinstance(finder, _MovedModuleFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _MovedModuleFinder())
