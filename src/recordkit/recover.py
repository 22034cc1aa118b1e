"""Recover the intact records of a damaged file, and report exactly what was lost.

The normal readers stop at the first damage. This module keeps going: it skips what is damaged, finds the
next intact record where the format makes that possible, and records every skipped byte range in a
:class:`SalvageReport`. Nothing is skipped silently: the report lists each range with the reason, and a
:class:`~recordkit.errors.DataLossWarning` is issued when anything was skipped.

Recovery knows no format: it asks the file's format (:meth:`recordkit.formats.base.RecordFormat.salvage`)
for the intact records, and the format reports each damaged range it passes. A format that frames records
one after the other provides a :class:`~recordkit.formats.resync.Resync` instead (its ``resync`` hook), which
validates a candidate frame, checksums included, and finds the next plausible frame start after damage; a
format registered with :func:`recordkit.formats.register_format` is recovered the same way. What this
module does for every format: the whole-file compression. GZIP/ZLIB/BZIP2 files are decompressed up to the
first compressed byte found damaged, keeping everything inflated before it; what follows cannot be
decompressed and is reported as lost (``SalvageReport.lost_compressed_bytes``). How each built-in format
resynchronises is in ``docs/reliability.md``.

Examples
--------
>>> import io, recordkit as rk
>>> from recordkit import recover
>>> from recordkit.formats.tfrecord import frame
>>> damaged = frame(b"first") + b"\\x00garbage\\x00" + frame(b"second")
>>> with recover.scan(io.BytesIO(damaged), format="tfrecord", warn=False) as records:
...     print(list(records), records.report.skipped)
[b'first', b'second'] [SkippedRange(start=21, end=30, index=1, reason='no valid record header')]
"""

from __future__ import annotations

import mmap
import os
import tempfile
import warnings
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import IO, Any, TypeVar

from recordkit.errors import DataLossWarning, UnsupportedOperationError
from recordkit.formats import available_formats, format_for_path, get_format
from recordkit.formats.base import RecordFormat
from recordkit.formats.compression import MEMBERS, decompressor
from recordkit.formats.resync import Resync
from recordkit.io.sources import Opened, open_source, reading_format
from recordkit.support.caller import user_stacklevel
from recordkit.support.closing import Closing
from recordkit.support.moved import renamed_arguments

__all__ = ["SalvageReport", "SkippedRange", "Scan", "salvage", "scan"]

_READ_CHUNK = 1 << 20
"""The largest single read from a damaged stream, and the most a decompressor returns at once."""

_T = TypeVar("_T")


@dataclass(frozen=True)
class SkippedRange:
    """A byte range that was skipped because it is damaged.

    Attributes
    ----------
    start, end
        The range ``[start, end)`` in the (uncompressed) file.
    index
        Where the gap is in the recovered sequence: the number of records recovered before it, or, for a
        format that numbers its records in an index (FFRecord), the record number in the file.
    reason
        What was wrong.
    """

    start: int
    end: int
    index: int
    reason: str


@dataclass
class SalvageReport:
    """What a recovery kept and what it skipped.

    Attributes
    ----------
    path
        The file (``None`` for a file object without a name).
    format, compression
        The format name and the whole-file compression (``""`` for none).
    records
        The number of records recovered.
    size
        The number of (uncompressed) bytes examined.
    skipped
        Every damaged range, sorted by position in the file.
    lost_compressed_bytes
        Compressed bytes after a damaged point of a GZIP/ZLIB stream, which could not be decompressed.
    stream_truncated
        The GZIP/ZLIB stream ends before its end marker (a cut file).
    """

    path: str | None
    format: str
    compression: str = ""
    records: int = 0
    size: int = 0
    skipped: list[SkippedRange] = field(default_factory=list)
    lost_compressed_bytes: int = 0
    stream_truncated: bool = False

    @property
    def bytes_skipped(self) -> int:
        """The number of (uncompressed) bytes in the skipped ranges."""
        return sum(r.end - r.start for r in self.skipped)

    @property
    def clean(self) -> bool:
        """Whether nothing was skipped."""
        return not (self.skipped or self.lost_compressed_bytes or self.stream_truncated)

    def summary(self) -> str:
        """One line: what was recovered and what was lost."""
        where = self.path or "the file object"
        text = f"{where}: recovered {self.records} records"
        if self.clean:
            return f"{text}; nothing damaged"
        count = len(self.skipped)
        ranges = "damaged range" if count == 1 else "damaged ranges"
        text += f"; skipped {count} {ranges} ({self.bytes_skipped} bytes)"
        if self.lost_compressed_bytes:
            text += (
                f"; {self.lost_compressed_bytes} compressed bytes after damage could not be read"
            )
        if self.stream_truncated:
            text += f"; the {self.compression.upper()} stream is cut short"
        return text


# -- opening ----------------------------------------------------------------------------------------


def _whole(opened: Opened, cleanup: list[Any]) -> mmap.mmap | bytes:
    """Return the whole (remaining) file as a buffer: a local file mapped, anything else copied first."""
    source = opened.source
    fd = source.descriptor()
    file: Any = None
    if fd is None or source.base:
        file = tempfile.TemporaryFile(prefix="recordkit-salvage-")  # noqa: SIM115
        cleanup.append(file)
        stream = source.stream()
        while chunk := stream.read(_READ_CHUNK):
            file.write(chunk)
        file.flush()
        fd = file.fileno()
    return _map(fd, cleanup)


def _map(fd: int, cleanup: list[Any]) -> mmap.mmap | bytes:
    """Map the file ``fd`` for reading (an empty file: ``b""``, which cannot be mapped)."""
    if os.fstat(fd).st_size == 0:
        return b""
    mapped = mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
    cleanup.append(mapped)
    return mapped


_INFLATE_PIECE = 1 << 16
"""Compressed bytes fed to the decompressor at once: the most re-inflated to locate damage."""


class _Emitter:
    """Writes inflated bytes once each, however often a retry inflates them again.

    ``position`` is where the next output belongs in the inflated stream; output before the high-water
    mark ``written`` was written already and is dropped (inflating the same input gives the same bytes).
    """

    def __init__(self, write: Callable[[bytes], Any]) -> None:
        self.write = write
        self.position = 0
        self.written = 0

    def __call__(self, data: bytes) -> None:
        start = self.position
        self.position += len(data)
        if self.position > self.written:
            self.write(data[self.written - start :] if self.written > start else data)
            self.written = self.position


def _feed(inflater: Any, piece: bytes, emit: Callable[[bytes], None]) -> None:
    """Inflate ``piece``, passing the output to ``emit`` in bounded steps; raises ``zlib.error``."""
    out = inflater.decompress(piece, _READ_CHUNK)
    emit(out)
    # A call that stops at its limit may have taken in all its input and still hold output for it.
    while not inflater.eof and (inflater.unconsumed_tail or len(out) == _READ_CHUNK):
        out = inflater.decompress(inflater.unconsumed_tail, _READ_CHUNK)
        emit(out)


def _feed_until_damage(inflater: Any, piece: bytes, emit: _Emitter) -> tuple[Any, int]:
    """Inflate the longest prefix of ``piece`` that inflates without error.

    Returns the decompressor after that prefix and the prefix's length (``len(piece)`` if nothing is
    wrong). A ``zlib.error`` loses the output of the call that raised it, so on an error the prefix is
    found by halving, each trial on a copy of the decompressor; output written before the error is not
    written twice.
    """
    if not hasattr(inflater, "copy"):
        # BZIP2: no copy to try prefixes on. It finds damage block by block, at a block's end: what the
        # blocks before it gave is kept, and the piece where the damage showed counts as lost.
        try:
            _feed(inflater, piece, emit)
        except zlib.error:
            return inflater, 0
        return inflater, len(piece)
    saved = inflater.copy()
    reached = emit.position  # the inflated stream's length after piece[:good]
    try:
        _feed(inflater, piece, emit)
        return inflater, len(piece)
    except zlib.error:
        pass
    good, bad = 0, len(piece)  # piece[:good] inflates cleanly, piece[:bad] does not
    while bad - good > 1:
        middle = (good + bad) // 2
        trial = saved.copy()
        emit.position = reached
        try:
            _feed(trial, piece[good:middle], emit)
        except zlib.error:
            bad = middle
            continue
        saved, good, reached = trial, middle, emit.position
    emit.position = reached
    return saved, good


def _inflate(
    buffer: mmap.mmap | bytes, compression: str, report: SalvageReport, cleanup: list[Any]
) -> tuple[mmap.mmap | bytes, int]:
    """Decompress to a temporary file up to the first damage, in bounded steps; note what was lost.

    Everything the damaged stream inflates to before the first compressed byte found damaged is kept,
    including when only a member's trailer (its CRC-32 or length) is damaged.
    """
    out = tempfile.TemporaryFile(prefix="recordkit-salvage-")  # noqa: SIM115
    cleanup.append(out)
    emit = _Emitter(out.write)
    pos = 0
    size = len(buffer)
    while pos < size:
        inflater = decompressor(compression)
        while pos < size and not inflater.eof:
            piece = buffer[pos : pos + _INFLATE_PIECE]
            inflater, used = _feed_until_damage(inflater, piece, emit)
            if used < len(piece):
                report.lost_compressed_bytes = size - pos - used
                break
            pos += len(piece) - len(inflater.unused_data)
        if report.lost_compressed_bytes:
            break
        if not inflater.eof:
            report.stream_truncated = True
            break
        if compression not in MEMBERS:
            report.lost_compressed_bytes = size - pos  # bytes after the end of a ZLIB stream
            break
    out.flush()
    mapped = _map(out.fileno(), cleanup)
    return mapped, len(mapped)


def _skipping(report: SalvageReport) -> Callable[..., None]:
    """The :data:`~recordkit.formats.resync.Skip` that notes each damaged range in ``report``."""
    skipped = report.skipped

    def skip(start: int, end: int, reason: str, index: int | None = None) -> None:
        # Adjacent ranges skipped for the same reason (between the same two records) are one.
        last = skipped[-1] if skipped else None
        if index is None and last and last.end == start and last.reason == reason:
            skipped[-1] = SkippedRange(last.start, end, last.index, reason)
        else:
            skipped.append(
                SkippedRange(start, end, report.records if index is None else index, reason)
            )

    return skip


def _counted(items: Iterator[_T], report: SalvageReport) -> Iterator[_T]:
    """The intact records (or their byte ranges), counted as they pass; the skipped ranges in file order
    at the end."""
    for item in items:
        report.records += 1
        yield item
    # Damaged offsets (of a format with an index) may point backwards.
    report.skipped.sort(key=lambda r: (r.start, r.end))


def _frames(fmt: RecordFormat, buffer: Any, size: int) -> Resync | None:
    """The format's frame finder when its records are found by position (its ``salvage`` is the default
    walk of its :class:`~recordkit.formats.resync.Resync`), else ``None``."""
    if type(fmt).salvage is not RecordFormat.salvage:
        return None
    return fmt.resync(buffer, size)


# -- public API -----------------------------------------------------------------------------------


class Scan(Closing):
    """The intact records of a damaged file, read once by iterating (or by :meth:`spans`); see :func:`scan`.

    Attributes
    ----------
    report
        The :class:`SalvageReport`, complete once iteration has finished.
    """

    def __init__(
        self, fmt: RecordFormat, buffer: Any, report: SalvageReport, cleanup: list[Any], warn: bool
    ) -> None:
        self.report = report
        self._format = fmt
        self._buffer = buffer
        self._cleanup = cleanup
        self._warn = warn
        self._used = False

    @property
    def positional(self) -> bool:
        """Whether :meth:`spans` works: the file is not compressed and its format finds records by position
        (TFRecord, OFRecord; a registered format with a ``resync`` hook)."""
        return not self.report.compression and _frames(self._format, b"", 0) is not None

    def _walk(self, items: Iterator[_T]) -> Iterator[_T]:
        if self._used:
            raise ValueError("a recovery scan can be iterated only once")
        self._used = True
        yield from _counted(items, self.report)
        if self._warn and not self.report.clean:
            # The caller's line, however deep the loop that consumed the records (salvage's writer).
            warnings.warn(self.report.summary(), DataLossWarning, stacklevel=user_stacklevel())

    def __iter__(self) -> Iterator[bytes]:
        """Yield the intact records; warn at the end if anything was skipped."""
        skip = _skipping(self.report)
        yield from self._walk(self._format.salvage(self._buffer, self.report.size, skip))

    def spans(self) -> Iterator[tuple[int, int]]:
        """Yield the byte range ``(start, stop)`` of each intact record's payload in the file, in file order,
        instead of the records (iterating or this, once); warn at the end if anything was skipped.

        A payload is ``file[start:stop]`` of the file as it was scanned (of a URL or a file object: from
        where it was positioned). Only for a :attr:`positional` scan.

        Raises
        ------
        UnsupportedOperationError
            The scan is not :attr:`positional` (records located by an index, or a compressed file, whose
            positions are in the inflated stream).
        """
        frames = _frames(self._format, self._buffer, self.report.size)
        if frames is None or self.report.compression:
            raise UnsupportedOperationError(
                f"{self.report.path or 'the file object'}: the records of a "
                f"{self.report.compression or 'plain'} {self.report.format} file are not read by byte "
                "range from the file; iterate the scan for them"
            )
        yield from self._walk(frames.frames(_skipping(self.report)))

    def close(self) -> None:
        """Release the file (and temporary files). Idempotent."""
        while self._cleanup:
            self._cleanup.pop().close()


@renamed_arguments(src="path")
def scan(
    path: str | os.PathLike[str] | IO[bytes],
    *,
    format: str | None = None,
    compression: str | None = None,
    warn: bool = True,
) -> Scan:
    """Read the intact records of a possibly damaged file, skipping (and reporting) damaged ranges.

    Parameters
    ----------
    path
        The file: a path, an fsspec URL or a binary file object, opened as :func:`recordkit.open` opens it (a URL or
        a file object is copied to a temporary file first).
    format
        A registered format's name. Default: from the suffix, else the content (a file damaged at its
        start may need it).
    compression
        ``""``, ``"gzip"``, ``"zlib"`` or ``"bzip2"``, as the format allows. Default: from the suffix (also when
        ``format`` is given), else the content: as :func:`recordkit.open` tells it
        (:func:`recordkit.io.reading_format`).
    warn
        Issue a :class:`~recordkit.errors.DataLossWarning` after iterating if anything was skipped.

    Returns
    -------
    Scan
        Iterate it for the records (or, where :attr:`Scan.positional`, call :meth:`Scan.spans` for their
        byte ranges in the file); ``.report`` describes what was skipped. Use it as a context manager
        (or call ``close()``) to release the file.

    Raises
    ------
    UnknownFormatError
        If the format cannot be determined.
    UnsupportedOperationError
        If the format has no way to find a record after damage.
    """
    cleanup: list[Any] = []
    try:
        opened = open_source(path)
        cleanup.append(opened)
        name, comp = reading_format(opened.source, format=format, compression=compression)
        buffer = _whole(opened, cleanup)
        size = len(buffer)
        report = SalvageReport(opened.source.path, name, comp)
        if comp:
            buffer, size = _inflate(buffer, comp, report, cleanup)
        report.size = size
        fmt = get_format(name)
    except BaseException:
        while cleanup:
            cleanup.pop().close()
        raise
    return Scan(fmt, buffer, report, cleanup, warn)


def _destination_format(dst: str, format: str) -> str:
    """The format salvage writes ``dst`` in: the source's ``format``, or, for a format recordkit only reads
    (ArrayRecord), the writable format ``dst``'s name says. Refuses a name that says anything else."""
    named = format_for_path(dst)
    source = get_format(format)
    if source.capabilities.writable:
        if named is not None and named[0] is not source:
            raise UnsupportedOperationError(
                f"{dst}: the name says {named[0].name}, but salvage writes the source's format, "
                f"{format}; name the copy accordingly (and convert it afterwards if needed)"
            )
        return format
    if named is not None and named[0].capabilities.writable:
        return named[0].name
    suffixes = ", ".join(
        f"{get_format(name).extensions[0]} ({name})" for name in available_formats(writable=True)
    )
    raise UnsupportedOperationError(
        f"{dst}: recordkit reads {format} files but does not write them, so salvage writes the intact "
        f"records into the format the copy's name says: give it the suffix of one, {suffixes}"
    )


@renamed_arguments(src="path", dst="dest")
def salvage(
    path: str | os.PathLike[str] | IO[bytes],
    dest: str | os.PathLike[str],
    *,
    format: str | None = None,
    compression: str | None = None,
    warn: bool = True,
) -> SalvageReport:
    """Copy the intact records of ``path`` to a new file ``dest``, and report what was skipped.

    ``dest`` is written atomically in the format of ``path`` (its compression follows ``dest``'s suffix). The
    source is never modified. A ``dest`` whose suffix names another format raises
    :class:`~recordkit.errors.UnsupportedOperationError` (a :class:`ValueError`) before anything is
    written. A format recordkit reads but does not write (ArrayRecord) is salvaged into the format
    ``dest``'s suffix names (the records are copied as they are); a ``dest`` naming none is refused.

    Parameters
    ----------
    path
        The damaged file (a path, an fsspec URL or a binary file object).
    dest
        Where to write the recovered records.
    format, compression
        Of ``path``, as for :func:`scan`.
    warn
        Issue a :class:`~recordkit.errors.DataLossWarning` if anything was skipped.

    Returns
    -------
    SalvageReport
        The records recovered and every skipped range.

    Examples
    --------
    >>> import os, tempfile
    >>> from recordkit.formats.tfrecord import frame
    >>> folder = tempfile.mkdtemp()
    >>> src = os.path.join(folder, "damaged.tfrecord")
    >>> with open(src, "wb") as f:
    ...     _ = f.write(frame(b"a") + frame(b"b")[:-1] + frame(b"c"))
    >>> report = salvage(src, os.path.join(folder, "fixed.tfrecord"), warn=False)
    >>> report.summary().endswith("recovered 2 records; skipped 1 damaged range (16 bytes)")
    True
    """
    from recordkit.io import open as open_records

    with scan(path, format=format, compression=compression, warn=warn) as records:
        written = _destination_format(os.fspath(dest), records.report.format)
        with open_records(dest, "w", format=written) as writer:
            writer.write_many(records)
        return records.report
