"""Recover the intact records of a damaged file, and report exactly what was lost.

The normal readers stop at the first damage. This module keeps going: it skips what is damaged, finds the
next intact record where the format makes that possible, and records every skipped byte range in a
:class:`SalvageReport`. Nothing is skipped silently: the report lists each range with the reason, and a
:class:`~recordkit.errors.DataLossWarning` is issued when anything was skipped.

How each format resynchronises:

TFRecord
    After a damaged record (either checksum fails, or the length does not fit), the next record is found
    by testing every following position for a header whose length checksum matches, whose length fits
    the file, and whose payload checksum matches. A false match needs both CRC32C checks to pass by chance
    (or a payload that itself holds TFRecord frames). The search tests many positions at once with numpy
    and stays linear in the file size even for crafted overlapping frames. GZIP/ZLIB files are
    decompressed up to the first compressed byte found damaged, keeping everything inflated before it;
    what follows cannot be decompressed and is reported as lost (``SalvageReport.lost_compressed_bytes``).
FFRecord
    Every sample is located from the header's offsets and kept only if its CRC-32 matches, so a damaged
    sample (or a damaged header entry) loses only that sample. A header whose sample count cannot fit the
    file makes the whole file unrecoverable.
OFRecord
    There is no checksum, so recovery is heuristic: a frame is accepted when its length is positive and
    fits the file, and its payload decodes as an ``OFRecord`` with at least one feature. After damage, the
    next frame must also be followed by the end of the file or by another such frame. Damage inside a
    payload that still decodes cannot be detected.

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
import shutil
import struct
import tempfile
import warnings
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import IO, Any

from recordkit.errors import DataLossWarning, UnknownFormatError
from recordkit.formats import _crc
from recordkit.formats._compression import MEMBERS, decompressor
from recordkit.formats.base import READ_CHUNK, Source
from recordkit.io import reading_format
from recordkit.support.closing import Closing

__all__ = ["SalvageReport", "SkippedRange", "Scan", "salvage", "scan"]

_TF_HEADER = struct.Struct("<QI")
_U32 = struct.Struct("<I")
_I64 = struct.Struct("<q")
_LAST_SAMPLE_SEARCH = 1 << 26
"""How far (64 MiB) the end of a damaged last FFRecord sample is looked for."""
_OF_MAP_TAG = 0x0A
"""The first byte of every OFRecord payload: field 1 (the ``feature`` map), length-delimited."""
_RESYNC_BLOCK = 1 << 16
"""The most positions a resynchronising TFRecord search tests at once."""


@dataclass(frozen=True)
class SkippedRange:
    """A byte range that was skipped because it is damaged.

    Attributes
    ----------
    start, end
        The range ``[start, end)`` in the (uncompressed) file.
    index
        Where the gap is in the recovered sequence: the number of records recovered before it. For FFRecord
        it is the sample number in the file.
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
        text += f"; skipped {len(self.skipped)} damaged ranges ({self.bytes_skipped} bytes)"
        if self.lost_compressed_bytes:
            text += (
                f"; {self.lost_compressed_bytes} compressed bytes after damage could not be read"
            )
        if self.stream_truncated:
            text += f"; the {self.compression.upper()} stream is cut short"
        return text


# -- opening ----------------------------------------------------------------------------------------


def _buffer_of(src: Any, cleanup: list[Any]) -> tuple[mmap.mmap | bytes, str | None]:
    """Return the whole file as a buffer (memory-mapped when possible) and its path."""
    file: IO[bytes]
    if isinstance(src, (str, os.PathLike)):
        path = os.fspath(src)
        file = open(path, "rb")  # noqa: SIM115 - closed through cleanup
        cleanup.append(file)
    else:
        name = getattr(src, "name", None)
        path = os.fspath(name) if isinstance(name, (str, os.PathLike)) else None
        file = tempfile.TemporaryFile(prefix="recordkit-salvage-")  # noqa: SIM115
        cleanup.append(file)
        shutil.copyfileobj(src, file, READ_CHUNK)
        file.flush()
    if os.fstat(file.fileno()).st_size == 0:
        return b"", path
    mapped = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)
    cleanup.append(mapped)
    return mapped, path


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
    out = inflater.decompress(piece, READ_CHUNK)
    emit(out)
    # A call that stops at its limit may have taken in all its input and still hold output for it.
    while not inflater.eof and (inflater.unconsumed_tail or len(out) == READ_CHUNK):
        out = inflater.decompress(inflater.unconsumed_tail, READ_CHUNK)
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
    if out.tell() == 0:
        return b"", 0
    mapped = mmap.mmap(out.fileno(), 0, access=mmap.ACCESS_READ)
    cleanup.append(mapped)
    return mapped, len(mapped)


# -- per-format recovery ------------------------------------------------------------------------


class _Skips:
    """Collects skipped ranges, merging adjacent ones with the same reason."""

    def __init__(self, report: SalvageReport) -> None:
        self.report = report

    def add(self, start: int, end: int, reason: str, index: int | None = None) -> None:
        skipped = self.report.skipped
        where = self.report.records if index is None else index
        if skipped and skipped[-1].end == start and skipped[-1].reason == reason and index is None:
            last = skipped[-1]
            skipped[-1] = SkippedRange(last.start, end, last.index, reason)
        else:
            skipped.append(SkippedRange(start, end, where, reason))


FrameCheck = Callable[[Any, int, int], "int | None"]
"""``check(buffer, pos, size)``: the end of an acceptable frame starting at ``pos``, or ``None``."""
Resync = Callable[[Any, int, int], int]
"""``resync(buffer, pos, size)``: the first position from ``pos`` on where a frame is trusted, else ``size``."""


def _scan_frames(
    buffer: Any,
    size: int,
    skips: _Skips,
    *,
    header: int,
    trailer: int,
    intact: FrameCheck,
    resync: Resync,
    describe: Callable[[Any, int, int], str],
) -> Iterator[bytes]:
    """Yield intact frames; after damage, skip to the next position where ``resync`` trusts a frame."""
    pos = 0
    while pos < size:
        end = intact(buffer, pos, size)
        if end is not None:
            skips.report.records += 1
            yield buffer[pos + header : end - trailer]
            pos = end
            continue
        # Even when the length looks right, bytes may be missing or added inside the frame: look for
        # the next intact frame from the next byte on rather than trusting the length.
        start = pos
        pos = resync(buffer, pos + 1, size)
        if pos >= size:
            reason = "no intact record up to the end of the file (truncated?)"
        else:
            reason = describe(buffer, start, size)
        skips.add(start, pos, reason)


def _tfrecord_header(buffer: Any, pos: int, size: int) -> int | None:
    """The end of the frame at ``pos`` if its length checksum matches and it fits, else ``None``."""
    if size - pos < 16:
        return None
    length, stored = _TF_HEADER.unpack_from(buffer, pos)
    if length > size - pos - 16 or _crc.masked_crc32c(buffer[pos : pos + 8]) != stored:
        return None
    return int(pos + 16 + length)


def _crc32c_range(buffer: Any, start: int, stop: int) -> int:
    """The CRC32C of ``buffer[start:stop]``, read in bounded slices (a memory map is never copied whole)."""
    crc = 0
    for at in range(start, stop, READ_CHUNK):
        crc = _crc.crc32c_extend(crc, buffer[at : min(at + READ_CHUNK, stop)])
    return crc


class _TFRecordFrames:
    """Finds intact TFRecord frames in a buffer, with work linear in its size whatever the content.

    A crafted file can hold a valid header every 12 bytes, each claiming a payload of half the file; checking
    each payload on its own would be quadratic. So the resynchronising search tests a block of positions at
    once with numpy (the length checksum of every position, then the payload checksum of the few that pass),
    and payloads are checksummed through :class:`recordkit.recover.rangecrc.RangeCRC`, which touches each byte a
    bounded number of times. Frames met in order are checked directly, as long as the bytes checksummed in
    vain so far stay under the size of the file.
    """

    def __init__(self, buffer: Any, size: int) -> None:
        self.buffer = buffer
        self.size = size
        self.wasted = 0
        self._ranges: Any = None

    def ranges(self) -> Any:
        """The shared :class:`~recordkit.recover.rangecrc.RangeCRC` of the buffer (numpy is imported here)."""
        if self._ranges is None:
            from recordkit.recover import rangecrc as _rangecrc

            self._ranges = _rangecrc.RangeCRC(
                self.buffer, _crc.crc32c_extend, _rangecrc.CRC32C_POLY
            )
        return self._ranges

    def intact(self, buffer: Any, pos: int, size: int) -> int | None:
        """The end of the frame at ``pos`` if both its checksums match, else ``None``."""
        end = _tfrecord_header(buffer, pos, size)
        if end is None:
            return None
        start, stop = pos + 12, end - 4
        expected = _crc.unmask(_U32.unpack_from(buffer, stop)[0])
        if self.wasted <= size:
            if _crc32c_range(buffer, start, stop) == expected:
                return end
            self.wasted += stop - start
            return None
        return end if int(self.ranges().crcs([start], [stop])[0]) == expected else None

    def resync(self, buffer: Any, pos: int, size: int) -> int:
        """The first position from ``pos`` on that starts an intact frame, else ``size``."""
        block = 256
        while pos < size - 15:
            stop = min(pos + block, size - 15)
            found = self._first_intact(pos, stop)
            if found is not None:
                return found
            pos = stop
            block = min(block * 4, _RESYNC_BLOCK)
        return size

    def _first_intact(self, lo: int, hi: int) -> int | None:
        """The first position in ``[lo, hi)`` that starts an intact frame (``hi <= size - 15``)."""
        import numpy as np

        from recordkit.recover.rangecrc import tfrecord_headers

        buffer, size = self.buffer, self.size
        at = tfrecord_headers(buffer, lo, hi) + lo
        lengths = np.ndarray((size - 7,), "<u8", buffer, 0, (1,))[at]
        fits = lengths <= (size - 16 - at).astype(np.uint64)
        at, lengths = at[fits], lengths[fits].astype(np.int64)
        if not len(at):
            return None
        starts = at + 12
        stops = starts + lengths
        stored = np.ndarray((size - 3,), "<u4", buffer, 0, (1,))[stops] - np.uint32(_crc.MASK_DELTA)
        expected = (stored >> 17) | (stored << 15)
        hits = np.flatnonzero(self.ranges().crcs(starts, stops) == expected)
        return int(at[hits[0]]) if len(hits) else None


def _tfrecord_damage(buffer: Any, pos: int, size: int) -> str:
    if _tfrecord_header(buffer, pos, size) is not None:
        return "payload checksum mismatch"
    return "no valid record header"


def _scan_tfrecord(buffer: Any, size: int, skips: _Skips) -> Iterator[bytes]:
    frames = _TFRecordFrames(buffer, size)
    return _scan_frames(
        buffer,
        size,
        skips,
        header=12,
        trailer=4,
        intact=frames.intact,
        resync=frames.resync,
        describe=_tfrecord_damage,
    )


def _ofrecord_length(buffer: Any, pos: int, size: int) -> int | None:
    """The payload length of a plausible OFRecord frame header at ``pos``, or ``None``.

    Checked before anything is decoded (or copied): the length is positive and fits the file, and the
    payload starts with the tag of the ``feature`` map, the only field of an ``OFRecord``.
    """
    if size - pos < 9:
        return None
    length: int = _I64.unpack_from(buffer, pos)[0]
    if length <= 0 or length > size - pos - 8 or buffer[pos + 8] != _OF_MAP_TAG:
        return None
    return length


def _ofrecord_frame(buffer: Any, pos: int, size: int) -> int | None:
    """The end of a plausible OFRecord frame at ``pos``, or ``None``."""
    from recordkit.decode.messages import decode_ofrecord
    from recordkit.errors import DecodeError

    length = _ofrecord_length(buffer, pos, size)
    if length is None:
        return None
    try:
        features = decode_ofrecord(buffer[pos + 8 : pos + 8 + length])
    except DecodeError:
        return None
    return pos + 8 + length if features else None


def _ofrecord_anchor(buffer: Any, pos: int, size: int) -> int | None:
    """After damage, a frame is trusted only if the end of the file or another frame follows it."""
    length = _ofrecord_length(buffer, pos, size)
    if length is None:
        return None
    end = pos + 8 + length
    # Both headers are checked before either payload is decoded: decoding costs the payload's length.
    if end != size and _ofrecord_length(buffer, end, size) is None:
        return None
    if _ofrecord_frame(buffer, pos, size) is None:
        return None
    return end if end == size or _ofrecord_frame(buffer, end, size) is not None else None


def _ofrecord_resync(buffer: Any, pos: int, size: int) -> int:
    while pos < size and _ofrecord_anchor(buffer, pos, size) is None:
        pos += 1
    return pos


def _scan_ofrecord(buffer: Any, size: int, skips: _Skips) -> Iterator[bytes]:
    return _scan_frames(
        buffer,
        size,
        skips,
        header=8,
        trailer=0,
        intact=_ofrecord_frame,
        resync=_ofrecord_resync,
        describe=lambda buffer, pos, size: "no valid record",
    )


def _scan_ffrecord(buffer: Any, size: int, skips: _Skips) -> Iterator[bytes]:
    count = _I64.unpack_from(buffer, 4)[0] if size >= 12 else -1
    header_end = 12 + 12 * count
    if count < 0 or header_end > size:
        if size:
            skips.add(0, size, f"the header's sample count ({count}) does not fit the file", 0)
        return
    if count == 0 and size > 12:
        skips.add(12, size, "the header declares no samples (an unfinished file?)", 0)
    crcs = struct.unpack_from(f"<{count}I", buffer, 12)
    offsets = struct.unpack_from(f"<{count}q", buffer, 12 + 4 * count)
    spans = []
    for i, start in enumerate(offsets):
        end = offsets[i + 1] if i + 1 < count else size
        if header_end <= start <= end <= size:
            spans.append((i, start, end))
            continue
        reason = "the header's offsets for this sample are impossible"
        if end > size >= start >= header_end:
            reason = "the file ends inside this sample (truncated?)"
        elif start > size:
            reason = "the sample starts past the end of the file (truncated?)"
        low, high = min(max(start, header_end), size), min(max(end, header_end), size)
        skips.add(low, max(low, high), reason, i)
    for (i, start, end), actual in zip(spans, _sample_crcs(buffer, size, spans), strict=True):
        if actual == crcs[i]:
            skips.report.records += 1
            yield buffer[start:end]
            continue
        if i + 1 == count:
            # The last sample runs to the end of the file: bytes appended after it make it fail.
            found = _last_sample_end(buffer, start, end, crcs[i])
            if found is not None:
                skips.report.records += 1
                yield buffer[start:found]
                skips.add(found, end, "bytes after the last sample", i + 1)
                continue
        skips.add(start, end, "sample checksum mismatch", i)
    # Damaged offsets may point backwards: list the ranges in file order, as for the other formats.
    skips.report.skipped.sort(key=lambda r: (r.start, r.end))


def _sample_crcs(buffer: Any, size: int, spans: list[tuple[int, int, int]]) -> Iterator[int]:
    """The CRC-32 of every ``(index, start, end)`` sample range, in order.

    Damaged (or crafted) offsets can make the ranges overlap, up to a third of the file's size of them each
    spanning most of it; then the ranges are checksummed through prefix CRCs, in time linear in the file.
    """
    if sum(end - start for _, start, end in spans) <= 2 * size:
        for _, start, end in spans:
            with memoryview(
                buffer
            ) as view:  # released before each yield: the map may be closed then
                crc = zlib.crc32(view[start:end])
            yield crc
        return
    from recordkit.recover import rangecrc as _rangecrc

    ranges = _rangecrc.RangeCRC(
        buffer, lambda crc, data: zlib.crc32(data, crc), _rangecrc.CRC32_POLY
    )
    for at in range(0, len(spans), _RESYNC_BLOCK):
        batch = spans[at : at + _RESYNC_BLOCK]
        yield from ranges.crcs([s for _, s, _ in batch], [e for _, _, e in batch]).tolist()


def _last_sample_end(buffer: Any, start: int, end: int, crc: int) -> int | None:
    """The shortest ``stop`` in ``[start, end)`` with ``crc32(buffer[start:stop]) == crc``, or ``None``."""
    running = 0
    stop = start
    limit = min(end, start + _LAST_SAMPLE_SEARCH)
    while stop < limit:
        if running == crc:
            return stop
        running = zlib.crc32(buffer[stop : stop + 1], running)
        stop += 1
    return None


_SCANNERS = {"tfrecord": _scan_tfrecord, "ofrecord": _scan_ofrecord, "ffrecord": _scan_ffrecord}


# -- public API -----------------------------------------------------------------------------------


class Scan(Closing):
    """The intact records of a damaged file, read once by iterating; see :func:`scan`.

    Attributes
    ----------
    report
        The :class:`SalvageReport`, complete once iteration has finished.
    """

    def __init__(
        self, records: Iterator[bytes], report: SalvageReport, cleanup: list[Any], warn: bool
    ) -> None:
        self.report = report
        self._records = records
        self._cleanup = cleanup
        self._warn = warn
        self._used = False

    def __iter__(self) -> Iterator[bytes]:
        """Yield the intact records; warn at the end if anything was skipped."""
        if self._used:
            raise ValueError("a recovery scan can be iterated only once")
        self._used = True
        yield from self._records
        if self._warn and not self.report.clean:
            warnings.warn(self.report.summary(), DataLossWarning, stacklevel=2)

    def close(self) -> None:
        """Release the file (and temporary files). Idempotent."""
        while self._cleanup:
            self._cleanup.pop().close()


def scan(
    src: str | os.PathLike[str] | IO[bytes],
    *,
    format: str | None = None,
    compression: str | None = None,
    warn: bool = True,
) -> Scan:
    """Read the intact records of a possibly damaged file, skipping (and reporting) damaged ranges.

    Parameters
    ----------
    src
        A local path or a binary file object (which is copied to a temporary file first).
    format
        ``"tfrecord"``, ``"ofrecord"`` or ``"ffrecord"``. Default: from the suffix, else the content
        (a file damaged at its start may need it).
    compression
        TFRecord: ``""``, ``"gzip"``, ``"zlib"`` or ``"bzip2"``. Default: from the suffix (also when
        ``format`` is given), else the content: as :func:`recordkit.open` tells it
        (:func:`recordkit.io.reading_format`).
    warn
        Issue a :class:`~recordkit.errors.DataLossWarning` after iterating if anything was skipped.

    Returns
    -------
    Scan
        Iterate it for the records; ``.report`` describes what was skipped. Use it as a context manager
        (or call ``close()``) to release the file.

    Raises
    ------
    UnknownFormatError
        If the format cannot be determined.
    """
    cleanup: list[Any] = []
    try:
        buffer, path = _buffer_of(src, cleanup)
        size = len(buffer)
        name, comp = reading_format(
            Source(path=path, buffer=buffer), format=format, compression=compression
        )
        if name not in _SCANNERS:
            raise UnknownFormatError(f"no recovery for the {name} format", name=name)
        report = SalvageReport(path, name, comp)
        if comp:
            buffer, size = _inflate(buffer, comp, report, cleanup)
        report.size = size
        records = _SCANNERS[name](buffer, size, _Skips(report))
    except BaseException:
        while cleanup:
            cleanup.pop().close()
        raise
    return Scan(records, report, cleanup, warn)


def _check_destination_name(dst: str, format: str) -> None:
    """Refuse a destination whose suffix names another format than the one the records are written in."""
    from recordkit.formats import format_for_path

    named = format_for_path(dst)
    if named is not None and named[0].name != format:
        raise ValueError(
            f"{dst}: the name says {named[0].name}, but salvage writes the source's format, {format}; "
            "name the copy accordingly (and convert it afterwards if needed)"
        )


def salvage(
    src: str | os.PathLike[str] | IO[bytes],
    dst: str | os.PathLike[str],
    *,
    format: str | None = None,
    compression: str | None = None,
    warn: bool = True,
) -> SalvageReport:
    """Copy the intact records of ``src`` to a new file ``dst``, and report what was skipped.

    ``dst`` is written atomically in the format of ``src`` (its compression follows ``dst``'s suffix). The
    source is never modified. A ``dst`` whose suffix names another format raises :class:`ValueError`
    before anything is written.

    Parameters
    ----------
    src
        The damaged file (a local path or a binary file object).
    dst
        Where to write the recovered records.
    format, compression
        Of ``src``, as for :func:`scan`.
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
    >>> report.summary().endswith("recovered 2 records; skipped 1 damaged ranges (16 bytes)")
    True
    """
    from recordkit.io import open as open_records

    with scan(src, format=format, compression=compression, warn=warn) as records:
        _check_destination_name(os.fspath(dst), records.report.format)
        with open_records(dst, "w", format=records.report.format) as writer:
            writer.write_many(records)
        return records.report
