"""Shared helpers of the ``recordkit`` command line: input expansion, readers, progress bars, errors.

Like the rest of the command-line layer, this module uses only recordkit's public names.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator
from typing import TypeVar

import recordkit as rk
from recordkit.io import expand_sources, find_dataset, natural_key, shard_path

__all__ = [
    "EXIT_CORRUPT",
    "EXIT_ERROR",
    "EXIT_OK",
    "CliError",
    "describe_error",
    "expand_inputs",
    "natural_key",
    "open_reader",
    "progress",
]

EXIT_OK = 0
"""Everything went well."""
EXIT_CORRUPT = 1
"""Corrupt data was found: a damaged file or a payload that does not decode."""
EXIT_ERROR = 2
"""A usage error or any other failure: bad arguments, a missing file, an unknown format."""

_T = TypeVar("_T")


class CliError(Exception):
    """A failure the command line reports in one line on stderr, then exits with ``code``.

    Parameters
    ----------
    message
        What went wrong and, when possible, what to do.
    code
        The exit status, :data:`EXIT_ERROR` unless the data itself is at fault.
    """

    def __init__(self, message: str, *, code: int = EXIT_ERROR) -> None:
        super().__init__(message)
        self.code = code


def expand_inputs(paths: Iterable[str], *, format: str | None = None) -> list[str]:
    """Replace each directory and glob pattern by the record files it names, in natural order.

    A dataset directory with a manifest (or a tensorflow-datasets ``dataset_info.json``) contributes the
    shards its manifest lists, every split, in the manifest's order: files beside them that it does not
    list (left over from an earlier write) are not read. Any other directory or glob is expanded by
    :func:`recordkit.io.expand_sources`, the same as :func:`recordkit.open`'s expansion: a directory
    contributes its files whose suffix names a record format (with ``--format``: that format), or, when it
    has none, its files without such a suffix (OneFlow's ``part-0``, ``part-1``, ...); hidden files, sidecar
    ``*.idx`` indexes and links out of the directory are left out. A quoted glob pattern is expanded here.
    A file that does not exist is returned as given and reported when it is opened, beside the others.

    Raises
    ------
    FileNotFoundError
        A directory holds no record file, or a glob pattern matches nothing.
    """
    files: list[str] = []
    plain: list[str] = []
    for path in paths:
        dataset = find_dataset(path, all_splits=True)
        if dataset is None:
            plain.append(path)
            continue
        if plain:
            files.extend(expand_sources(plain, format=format, missing_ok=True))
            plain = []
        directory, manifest = dataset
        files.extend(shard_path(directory, shard) for shard in manifest.shards)
    if plain:
        files.extend(expand_sources(plain, format=format, missing_ok=True))
    return files


def open_reader(path: str | list[str], *, format: str | None) -> rk.RecordReader:
    """Open record files for reading, checksums checked, with the format from ``--format`` or detected.

    ``path`` is one file or a list of files read as one sequence.
    """
    return rk.open(path, format=format)


def progress(
    items: Iterable[_T], *, total: int | None, desc: str, enabled: bool, unit: str = "rec"
) -> Iterator[_T]:
    """Wrap ``items`` in a tqdm progress bar on stderr when ``enabled`` and tqdm is installed.

    The bar is shown only when stderr is a terminal, so logs and pipes stay clean.
    """
    if enabled and sys.stderr.isatty():
        try:
            from tqdm import tqdm
        except ImportError:
            pass
        else:
            yield from tqdm(
                items,
                total=total,
                desc=desc,
                unit=unit,
                unit_scale=True,
                leave=False,
                file=sys.stderr,
            )
            return
    yield from items


def describe_error(exc: BaseException) -> str:
    """Return a one-line description of ``exc`` for stderr: what failed, where, and the error class."""
    if isinstance(exc, rk.CorruptRecordError):
        return f"{exc} [{type(exc).__name__}]"
    if isinstance(exc, OSError) and exc.strerror and exc.filename is not None:
        return f"{exc.filename}: {exc.strerror}"
    if isinstance(exc, rk.UnknownFormatError):
        # The library's message speaks of the Python argument; on the command line it is an option.
        return str(exc).replace("pass format=", "pass --format")
    return str(exc) or type(exc).__name__
