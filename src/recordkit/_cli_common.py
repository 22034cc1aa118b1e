"""Shared helpers of the ``recordkit`` command line: input expansion, readers, progress bars, errors.

Like the rest of the command-line layer, this module uses only recordkit's public names.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterable, Iterator
from typing import Any, TypeVar

import recordkit as rk
from recordkit.formats import format_for_path
from recordkit.io import dataset_files

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


def natural_key(name: str) -> list[Any]:
    """Sort key that orders embedded numbers by value: ``part-2`` before ``part-10``.

    Examples
    --------
    >>> sorted(["part-10", "part-2", "part-1"], key=natural_key)
    ['part-1', 'part-2', 'part-10']
    """
    return [int(piece) if piece.isdigit() else piece for piece in re.split(r"(\d+)", name)]


def expand_inputs(paths: Iterable[str]) -> list[str]:
    """Replace each directory by the record files in it, in natural order.

    A directory contributes its files whose suffix names a record format (``*.tfrecord``, ``*.ffr``,
    ...); when it has none, all its regular files (OneFlow's ``part-0``, ``part-1``, ...), except hidden
    files and sidecar ``*.idx`` indexes. Files given by name are returned as given; whether they exist is
    checked when they are opened.

    Raises
    ------
    CliError
        A directory holds no candidate file.
    """
    files: list[str] = []
    for path in paths:
        if not os.path.isdir(path):
            files.append(path)
            continue
        # dataset_files leaves out hidden files and refuses links that lead out of the directory.
        candidates = [
            name
            for name in dataset_files(path, "")
            if not name.endswith(".idx") and os.path.isfile(name)
        ]
        known = [name for name in candidates if format_for_path(name) is not None]
        chosen = sorted(known or candidates, key=lambda name: natural_key(os.path.basename(name)))
        if not chosen:
            raise CliError(f"{path}: the directory holds no record files")
        files.extend(chosen)
    return files


def open_reader(path: str, *, format: str | None) -> rk.RecordReader:
    """Open one record file for reading, checksums checked, with the format from ``--format`` or detected."""
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
