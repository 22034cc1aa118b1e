"""The notebook view of a :class:`~recordkit.io.reader.RecordReader` (its ``_repr_html_``).

What it shows, bounded whatever the files: the format, compression, the first files and their sizes, the
record count where it is known without reading every record header (a manifest's counts, a format whose header
or footer holds it, or files of at most :data:`COUNT_BYTES` in all), and the first records decoded by
:func:`recordkit.support.preview.records_html`. The records are read by a new iteration, which does not move
any other iteration of the reader; a reader over a stream (which reading would consume) or a closed reader
shows no records.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING

from recordkit.support.preview import MAX_RECORDS, records_html

if TYPE_CHECKING:
    from recordkit.io.reader import RecordReader

__all__ = ["COUNT_BYTES", "reader_html"]

COUNT_BYTES = 64 << 20
"""Files of at most this many bytes in all are counted (a scan of their record headers) for the preview."""

# Formats whose frame reader knows its record count from a header or footer, without a scan.
_COUNTED_FORMATS = ("ffrecord", "arrayrecord")
_SHOWN_FILES = 3


def _count(reader: RecordReader, size: int | None) -> object:
    if not reader.supports_random_access:
        return "not counted (read in order only)"
    cheap = reader._counts is not None or reader.format in _COUNTED_FORMATS
    if not cheap and (size is None or size > COUNT_BYTES):
        return f"not counted here (over {COUNT_BYTES >> 20} MiB: len(reader) counts them)"
    try:
        return len(reader)
    except Exception as exc:  # noqa: BLE001 - a damaged file: shown, never raised from a repr
        return f"not counted: {type(exc).__name__}: {exc}"


def reader_html(reader: RecordReader) -> str:
    """The HTML preview of ``reader``: its files, format and record count, then its first records."""
    paths = reader.paths
    shown = ", ".join(str(p) for p in paths[:_SHOWN_FILES])
    if len(paths) > _SHOWN_FILES:
        shown += f", … ({len(paths)} files)"
    facts: list[tuple[str, object]] = [("files", shown), ("format", reader.format)]
    facts.append(("compression", reader.compression or "none"))
    if reader.closed:
        return records_html("RecordReader (closed)", facts, None, format=reader.format)
    sources = [frames.source for frames in reader._frames]
    sizes = [source.size for source in sources]
    size = None if None in sizes else sum(s or 0 for s in sizes)
    if size is not None:
        facts.append(("bytes", f"{size:,}"))
    facts.append(("records", _count(reader, size)))
    if not all(source.seekable for source in sources):
        note = "a stream: the preview does not read it (that would consume it)"
        return records_html("RecordReader", facts, None, format=reader.format, note=note)
    records = itertools.islice(iter(reader), MAX_RECORDS + 1)
    return records_html("RecordReader", facts, records, format=reader.format)
