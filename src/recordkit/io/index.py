"""Sidecar offset index files for TFRecord and OFRecord.

The format is the one of DALI's ``tfrecord2idx`` and of the ``tfrecord`` package's
``tfrecord.tools.tfrecord2idx``: a text file with one line per record, ``"<offset> <length>\\n"``, where
``offset`` is the byte offset of the record's frame and ``length`` the size of the whole frame (header and
checksums included). recordkit writes and reads the same format for OFRecord files.

The sidecar recordkit writes for ``data.tfrecord`` is ``.data.tfrecord.idx``, a hidden name beside the
file: tools that read every file of a directory (Ray Data, Spark, Dask, Hadoop) pass names starting with
``.`` or ``_`` by, so the index is never read as a record file (see docs/design.md). The name of earlier
versions and of DALI's and the ``tfrecord`` package's tools, ``data.tfrecord.idx``, is still found and used
(:func:`find_index`).

An index is used only if it covers the file exactly (frames follow each other from byte 0 to the end of
the file) and every entry agrees with the record headers, which the reader walks when it loads the index;
otherwise :func:`load_index` raises :class:`~recordkit.errors.StaleIndexError`, which readers turn into a
:class:`~recordkit.errors.StaleIndexWarning` before scanning the file. No path is ever taken from an index
file's content.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import posixpath
from array import array
from collections.abc import Callable, Iterator
from typing import IO, Any

from recordkit.errors import StaleIndexError
from recordkit.io.atomic import write_atomically
from recordkit.io.sources import is_url, require_fsspec, source_exists

__all__ = [
    "INDEX_PREFIX",
    "INDEX_SUFFIX",
    "default_index_path",
    "find_index",
    "format_index",
    "index_paths",
    "legacy_index_path",
    "load_index",
    "save_index",
]

# Two 20-digit numbers and a separator fit easily: a longer line is malformed, and is never read whole.
_LINE_LIMIT = 128
_BLOCK = 1 << 20

INDEX_SUFFIX = ".idx"
"""Appended to a record file's name to name its sidecar index."""

INDEX_PREFIX = "."
"""Put before a record file's name to name the sidecar index recordkit writes: a hidden name."""


def default_index_path(path: str | os.PathLike[str]) -> str:
    """Return the path of the sidecar index recordkit writes for ``path``: ``.<name>.idx`` beside it.

    Works for local paths and for fsspec URLs (``/`` separators).

    Examples
    --------
    >>> default_index_path("data/train.tfrecord")
    'data/.train.tfrecord.idx'
    """
    path = os.fspath(path)
    split, join = (
        (posixpath.split, posixpath.join) if "://" in path else (os.path.split, os.path.join)
    )
    directory, name = split(path)
    return join(directory, f"{INDEX_PREFIX}{name}{INDEX_SUFFIX}")


def legacy_index_path(path: str | os.PathLike[str]) -> str:
    """Return the sidecar name of earlier versions (and of DALI's ``tfrecord2idx``): ``<path>.idx``.

    Examples
    --------
    >>> legacy_index_path("data/train.tfrecord")
    'data/train.tfrecord.idx'
    """
    return os.fspath(path) + INDEX_SUFFIX


def index_paths(path: str | os.PathLike[str]) -> tuple[str, str]:
    """Return both places a sidecar index of ``path`` may be: recordkit's name, then the legacy one."""
    return default_index_path(path), legacy_index_path(path)


def find_index(path: str | os.PathLike[str]) -> str | None:
    """Return the sidecar index of the file ``path`` (local, or an fsspec URL) that exists (recordkit's
    name first), or ``None``."""
    remote = is_url(os.fspath(path))
    for candidate in index_paths(path):
        if source_exists(candidate) if remote else os.path.isfile(candidate):
            return candidate
    return None


def save_index(offsets: array[int], index_path: str | os.PathLike[str]) -> None:
    """Write an offset table (``len + 1`` frame boundaries) as a sidecar index, atomically."""
    write_atomically(index_path, format_index(offsets))


def format_index(offsets: array[int]) -> bytes:
    """Return the bytes of the sidecar index describing an offset table (``len + 1`` boundaries)."""
    import numpy as np

    table = np.asarray(offsets, np.int64)
    if len(table) < 2:
        return b""
    numbers: list[int] = [0] * (2 * len(table) - 2)  # offset, length, offset, length, ...
    numbers[0::2], numbers[1::2] = table[:-1].tolist(), np.diff(table).tolist()
    # One formatting of all the numbers, in C: a third faster than a line at a time.
    return (("%d %d\n" * (len(table) - 1)) % tuple(numbers)).encode("ascii")


def load_index(
    index_path: str | os.PathLike[str],
    *,
    size: int,
    path: str | None = None,
    sha256: str | None = None,
) -> array[int]:
    """Read a sidecar index and return the frame-offset table (``len + 1`` entries).

    Parameters
    ----------
    index_path
        The index file (local, or an fsspec URL).
    size
        The size of the record file it should describe.
    path
        The record file, for error messages.
    sha256
        The SHA-256 (lowercase hex) the index file must have: the one a manifest records.

    Raises
    ------
    StaleIndexError
        If the index is malformed, out of order, does not cover the file's ``size`` bytes exactly, does
        not have the ``sha256`` given, or (with ``sha256``) is missing.
    """
    index_path = os.fspath(index_path)

    def stale(message: str, index: int | None = None) -> StaleIndexError:
        return StaleIndexError(
            f"the index {index_path} {message}; delete it or rebuild it with recordkit.io.write_index()",
            path=path,
            index=index,
        )

    table = array("q")
    position = 0
    remote = is_url(index_path)
    digest = hashlib.sha256() if sha256 is not None else None
    try:
        # Closed by the ``with`` below; opened here so that a missing index is told from a parsing error.
        file = require_fsspec().open(index_path, "rb").open() if remote else open(index_path, "rb")  # noqa: SIM115
    except FileNotFoundError:
        if sha256 is None:
            raise
        raise stale("recorded in the manifest is missing") from None
    with file:
        for first, lines in _blocks(file, digest):
            offsets, lengths = _parse_block(lines, first, stale)
            starts = list(itertools.accumulate(lengths, initial=position))
            if starts[:-1] != offsets or (lengths and min(lengths) <= 0):
                bad = next(
                    i
                    for i, (a, b) in enumerate(zip(offsets, starts, strict=False))
                    if a != b or lengths[i] <= 0
                )
                raise stale(
                    f"says record {first + bad} is at byte {offsets[bad]} ({lengths[bad]} bytes), but the "
                    f"previous records end at byte {starts[bad]}",
                    first + bad,
                )
            position = starts[-1]
            if position > size:
                raise stale(
                    f"describes records up to byte {position}, past the end of the {size}-byte file"
                )
            table.extend(offsets)
    if position != size:
        raise stale(f"covers {position} bytes but the file has {size}")
    if digest is not None and digest.hexdigest() != sha256:
        raise stale("does not have the SHA-256 the manifest records")
    table.append(position)
    return table


def _blocks(file: IO[bytes], digest: Any = None) -> Iterator[tuple[int, list[bytes]]]:
    """Yield ``(number of the first line, complete lines)`` from about 1 MiB of the index at a time,
    updating ``digest`` (a :mod:`hashlib` object) with every byte read."""
    tail = b""
    number = 0
    while True:
        block = file.read(_BLOCK)
        if not block:
            break
        if digest is not None:
            digest.update(block)
        data = tail + block
        cut = data.rfind(b"\n") + 1
        lines = data[:cut].split(b"\n")[:-1]
        tail = data[cut:]
        if len(tail) >= _LINE_LIMIT:
            lines.append(tail)  # a line far too long: reported as malformed, never read whole
            tail = b""
        if lines:
            yield number, lines
            number += len(lines)
    if tail:
        yield number, [tail]


def _parse_block(
    lines: list[bytes], first: int, stale: Callable[..., StaleIndexError]
) -> tuple[list[int], list[int]]:
    """Return the offsets and lengths of ``lines``, each ``"<offset> <length>"``."""
    tokens = b" ".join(lines).split()
    try:
        if len(tokens) != 2 * len(lines) or max(map(len, lines)) >= _LINE_LIMIT:
            raise ValueError
        numbers = list(map(int, tokens))
    except ValueError:
        for number, line in enumerate(lines):
            fields = line.split()
            if len(fields) != 2 or len(line) >= _LINE_LIMIT or not all(map(_is_int, fields)):
                raise stale(
                    f"has a malformed line {first + number + 1}: {line[:80]!r}", first + number
                ) from None
        raise AssertionError("unreachable: some line has a malformed field") from None
    return numbers[0::2], numbers[1::2]


def _is_int(field: bytes) -> bool:
    try:
        int(field)
    except ValueError:
        return False
    return True
