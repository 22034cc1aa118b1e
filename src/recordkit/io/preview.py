"""The notebook view of a :class:`~recordkit.io.reader.RecordReader` (its ``_repr_html_``).

What it shows, bounded whatever the files: the format, compression, the first files and their sizes, the
record count where it is known without reading every record header (a manifest's counts, a format whose header
or footer holds it, or files of at most :data:`COUNT_BYTES` in all), and the first records decoded by
:func:`recordkit.decode.preview.records_html`. The records are read by a new iteration, which does not move
any other iteration of the reader; a reader over a stream (which reading would consume) or a closed reader
shows no records.

The reader tells what only it knows (its files' sizes, whether they are seekable, whether its count is known
without a scan); this module reads nothing else of it than :class:`Previewed` names, so that it needs no
import of the reader.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from typing import Protocol

from recordkit.decode.preview import MAX_RECORDS, records_html
from recordkit.formats import get_format

__all__ = ["COUNT_BYTES", "Previewed", "reader_html"]

COUNT_BYTES = 64 << 20
"""Files of at most this many bytes in all are counted (a scan of their record headers) for the preview."""

_SHOWN_FILES = 3


class Previewed(Protocol):
    """What :func:`reader_html` reads of a :class:`~recordkit.io.reader.RecordReader`."""

    @property
    def paths(self) -> Sequence[str | None]:
        """The files read (``None`` for a file object without a name)."""

    @property
    def format(self) -> str:
        """The format name."""

    @property
    def compression(self) -> str:
        """The whole-file compression."""

    @property
    def closed(self) -> bool:
        """Whether the reader was closed."""

    @property
    def supports_random_access(self) -> bool:
        """Whether ``len()`` works."""

    def __len__(self) -> int:
        """The number of records."""

    def __iter__(self) -> Iterator[bytes]:
        """A new iteration over the records."""


def _count(reader: Previewed, size: int | None, counted: bool) -> object:
    if not reader.supports_random_access:
        return "not counted (read in order only)"
    if not counted and (size is None or size > COUNT_BYTES):
        return f"not counted here (over {COUNT_BYTES >> 20} MiB: len(reader) counts them)"
    try:
        return len(reader)
    except Exception as exc:  # noqa: BLE001 - a damaged file: shown, never raised from a repr
        return f"not counted: {type(exc).__name__}: {exc}"


def reader_html(
    reader: Previewed, *, sizes: Sequence[int | None], seekable: bool, counted: bool
) -> str:
    """The HTML preview of ``reader``: its files, format and record count, then its first records.

    ``sizes`` are its files' sizes in bytes (``None`` where unknown), ``seekable`` whether every file is
    (a stream is not read: that would consume it), ``counted`` whether ``len(reader)`` reads no record
    header (a manifest's counts, or a format whose files hold their own index).
    """
    paths = reader.paths
    shown = ", ".join(str(p) for p in paths[:_SHOWN_FILES])
    if len(paths) > _SHOWN_FILES:
        shown += f", … ({len(paths)} files)"
    facts: list[tuple[str, object]] = [("files", shown), ("format", reader.format)]
    facts.append(("compression", reader.compression or "none"))
    if reader.closed:
        return records_html("RecordReader (closed)", facts, None)
    size = None if None in sizes else sum(s or 0 for s in sizes)
    if size is not None:
        facts.append(("bytes", f"{size:,}"))
    facts.append(("records", _count(reader, size, counted)))
    if not seekable:
        note = "a stream: the preview does not read it (that would consume it)"
        return records_html("RecordReader", facts, None, note=note)
    records = itertools.islice(iter(reader), MAX_RECORDS + 1)
    payload = get_format(reader.format).payload
    return records_html("RecordReader", facts, records, payload=payload)
