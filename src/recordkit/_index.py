"""Sidecar offset index files for TFRecord and OFRecord.

The format is the one of DALI's ``tfrecord2idx`` and of the ``tfrecord`` package's
``tfrecord.tools.tfrecord2idx``: a text file with one line per record, ``"<offset> <length>\\n"``, where
``offset`` is the byte offset of the record's frame and ``length`` the size of the whole frame (header and
checksums included). recordkit writes and reads the same format for OFRecord files.

The default sidecar of ``data.tfrecord`` is ``data.tfrecord.idx``. An index is trusted only if it covers
the file exactly: frames must follow each other from byte 0 to the end of the file, otherwise
:class:`~recordkit.errors.StaleIndexError` is raised. Every record header is still checked when the record
is read. No path is ever taken from an index file's content.
"""

from __future__ import annotations

import os
from array import array
from collections.abc import Iterable

from recordkit._atomic import AtomicFile
from recordkit.errors import StaleIndexError

__all__ = ["INDEX_SUFFIX", "default_index_path", "load_index", "save_index"]

INDEX_SUFFIX = ".idx"
"""Appended to a record file's name to name its default sidecar index."""


def default_index_path(path: str | os.PathLike[str]) -> str:
    """Return the default sidecar index path of ``path``: the same name plus ``.idx``.

    Examples
    --------
    >>> default_index_path("data/train.tfrecord")
    'data/train.tfrecord.idx'
    """
    return os.fspath(path) + INDEX_SUFFIX


def save_index(offsets: array[int], index_path: str | os.PathLike[str]) -> None:
    """Write an offset table (``len + 1`` frame boundaries) as a sidecar index, atomically."""
    target = AtomicFile(index_path)
    try:
        target.file.write(_format(offsets))
    except BaseException:
        target.discard()
        raise
    target.commit()


def _format(offsets: array[int]) -> bytes:
    lines: Iterable[str] = (
        f"{offsets[i]} {offsets[i + 1] - offsets[i]}\n" for i in range(len(offsets) - 1)
    )
    return "".join(lines).encode("ascii")


def load_index(
    index_path: str | os.PathLike[str], *, size: int, path: str | None = None
) -> array[int]:
    """Read a sidecar index and return the frame-offset table (``len + 1`` entries).

    Parameters
    ----------
    index_path
        The index file.
    size
        The size of the record file it should describe.
    path
        The record file, for error messages.

    Raises
    ------
    StaleIndexError
        If the index is malformed, out of order, or does not cover the file's ``size`` bytes exactly.
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
    with open(index_path, "rb") as file:
        for number, line in enumerate(file):
            fields = line.split()
            try:
                offset, length = (int(field) for field in fields)
            except ValueError:
                raise stale(f"has a malformed line {number + 1}: {line[:80]!r}", number) from None
            if offset != position or length <= 0:
                raise stale(
                    f"says record {number} is at byte {offset} ({length} bytes), but the previous records "
                    f"end at byte {position}",
                    number,
                )
            table.append(offset)
            position = offset + length
            if position > size:
                raise stale(
                    f"describes records up to byte {position}, past the end of the {size}-byte file"
                )
    if position != size:
        raise stale(f"covers {position} bytes but the file has {size}")
    table.append(position)
    return table
