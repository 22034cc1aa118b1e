"""TFRecord: TensorFlow's CRC-framed record files.

Byte layout of one record (all integers little-endian); a file is records back to back, with no file header:

======  =====  =============================================
offset  size   field
======  =====  =============================================
0       8      ``length`` (uint64): payload size in bytes
8       4      masked CRC32C of the 8 length bytes
12      length payload (usually a serialized ``tf.train.Example``)
12+len  4      masked CRC32C of the payload
======  =====  =============================================

``masked(crc) = ((crc >> 15 | crc << 17) + 0xA282EAD8) mod 2**32`` (see :mod:`recordkit.formats._crc`).
The whole file may be GZIP or ZLIB compressed (TensorFlow's ``compression_type``), or BZIP2 compressed (as
Apache Beam writes it; read only, as TensorFlow cannot read it); compressed files can only be read in order.

Errors are located the way TensorFlow reports them: a bad length checksum at the record's first byte, a bad
payload checksum at the record's first byte + 12. A file ending inside a header is an error unless
``lenient=True`` (TensorFlow silently stops there).

Specification: ``tensorflow/tsl/lib/io/record_writer.h`` and https://www.tensorflow.org/tutorials/load_data/tfrecord
"""

from __future__ import annotations

import array
import os
import struct
import zlib
from collections.abc import Callable, Generator, Iterable, Sequence
from typing import IO, Any, ClassVar

from recordkit.errors import CorruptRecordError, TruncatedRecordError
from recordkit.formats import _crc
from recordkit.formats._source import _READ_CHUNK
from recordkit.formats._tfrecord_frame import HEADER, LENGTH, checksum_error
from recordkit.formats.base import (
    Capabilities,
    Offsets,
    RecordFormat,
    Source,
    SupportsRead,
    _BufferedFrameWriter,
)
from recordkit.formats.compression import (
    MEMBERS,
    check_writable,
    decompressor,
)
from recordkit.formats.compression import magic as _compression_magic
from recordkit.formats.payloads import EXAMPLE_PAYLOAD
from recordkit.formats.resync import Resync
from recordkit.formats.sequential import SequentialFrameReader
from recordkit.support.moved import moved_attribute

__all__ = ["TFRecordFormat", "TFRecordFrameReader", "TFRecordFrameWriter", "frame"]

_TRAILER_AND_HEADER = struct.Struct("<IQI")
_U32 = struct.Struct("<I")
_MASK_DELTA = _crc.MASK_DELTA
_WBITS = {"gzip": 31, "zlib": 15}  # for writing (deflate)
_CACHE_LIMIT = 4096
# The payload checksums of this many bytes of records are compared together.
_BATCH_BYTES = 1 << 20
# TensorFlow's ZlibCompressionOptions use memLevel 9 (zlib's default is 8); the compressed bytes depend on it.
_MEM_LEVEL = 9
# Bytes a BZIP2 file's sniffer asks for: its first block compressed (blocks hold at most 900 kB before).
_BZIP2_SNIFF = 1 << 20
# Payloads at least this large are written straight to the file object instead of being joined with their
# neighbours first: the join would copy them once more (and allocate a fresh block each time).
_DIRECT_WRITE = 1 << 16
_RESYNC_BLOCK = 1 << 16
"""The most positions a resynchronising search tests at once."""


_LENGTH_CRCS: dict[int, int] = {}
"""Masked CRC32C of the length field, by length, for the lengths of valid headers seen (most files repeat a
few lengths), shared by all readers."""


def frame(data: bytes) -> bytes:
    """Return ``data`` framed as one TFRecord record.

    Examples
    --------
    >>> frame(b"hello").hex(" ")
    '05 00 00 00 00 00 00 00 ea b2 04 3e 68 65 6c 6c 6f bb 1f 1c 19'
    """
    length = LENGTH.pack(len(data))
    return (
        length + _U32.pack(_crc.masked_crc32c(length)) + data + _U32.pack(_crc.masked_crc32c(data))
    )


def _inflate_head(head: bytes, compression: str) -> bytes | None:
    """Return the first (up to 64) bytes ``head`` inflates to, or ``None`` if it is not valid data.

    BZIP2 gives nothing until a whole block (up to 900 kB before compression) is there.
    """
    try:
        return decompressor(compression).decompress(head, 64)
    except zlib.error:
        return None


def _valid_header(head: bytes, size: int | None) -> bool:
    if len(head) < 12:
        return False
    length, stored = HEADER.unpack_from(head)
    if _crc.masked_crc32c(head[:8]) != stored:
        return False
    return size is None or 16 + length <= size


class _Inflater:
    """A ``read(n)`` stream that inflates GZIP or BZIP2 (any number of members) or ZLIB data in bounded steps.

    Damaged or truncated compressed data raises :class:`~recordkit.errors.CorruptRecordError` /
    :class:`~recordkit.errors.TruncatedRecordError` located at the uncompressed offset reached. Every byte
    inflated before the damage is returned first: the error comes from the ``read`` after them.
    """

    def __init__(self, raw: SupportsRead, compression: str, path: str | None) -> None:
        self._raw = raw
        self._compression = compression
        self._name = compression.upper()
        self._path = path
        self._inflate = decompressor(compression)
        self._input = b""
        self._in_member = False
        self._done = False
        self._held_back = False
        self.position = 0

    def read(self, n: int = -1, /) -> bytes:
        """Return up to ``n`` inflated bytes (``b""`` at the end of the stream)."""
        if n == 0:
            return b""
        limit = _READ_CHUNK if n < 0 else n
        while not self._done:
            if self._held_back:
                # The last call stopped at its limit with all its input taken in: zlib may still hold
                # output for that input, which must come out before the input is found to end.
                self._held_back = False
                chunk = b""
            else:
                chunk = self._next_input()
                if not chunk:
                    self._done = True
                    break
            self._in_member = True
            inflate = self._inflate
            try:
                out = inflate.decompress(chunk, limit)
            except zlib.error as exc:
                self._done = True
                raise CorruptRecordError(
                    f"corrupt {self._name} data: {exc}", path=self._path, offset=self.position
                ) from exc
            self._held_back = len(out) == limit and not inflate.unconsumed_tail
            if inflate.eof:
                self._held_back = False
                self._end_member()
            if out:
                self.position += len(out)
                return out
        return b""

    def _next_input(self) -> bytes:
        """Return the next compressed bytes to inflate, ``b""`` at a clean end of the data."""
        inflate = self._inflate
        if inflate.unconsumed_tail and not inflate.eof:
            return inflate.unconsumed_tail
        if self._input:
            chunk, self._input = self._input, b""
        else:
            chunk = self._raw.read(_READ_CHUNK)
        if not chunk and self._in_member:
            self._done = True
            raise TruncatedRecordError(
                f"the {self._name} stream ends before its end marker (the file is truncated)",
                path=self._path,
                offset=self.position,
            )
        if chunk and inflate.eof:
            # A ZLIB file is one stream; anything after its end is damage (GZIP starts a new member).
            self._done = True
            raise CorruptRecordError(
                f"unexpected bytes after the end of the {self._name} stream",
                path=self._path,
                offset=self.position,
            )
        return chunk

    def _end_member(self) -> None:
        """Keep what follows the finished stream: the next GZIP member or BZIP2 stream, or stray bytes."""
        self._in_member = False
        self._input = self._inflate.unused_data
        if self._compression in MEMBERS:
            self._inflate = decompressor(self._compression)


class TFRecordFrameReader(SequentialFrameReader):
    """Reads TFRecord frames; see :class:`~recordkit.formats.sequential.SequentialFrameReader`."""

    HEADER: ClassVar[int] = 12
    TRAILER: ClassVar[int] = 4

    def __init__(self, source: Source, **options: Any) -> None:
        super().__init__(source, **options)
        # A memory-mapped file (zero_copy=True) is sliced into memoryviews, which need their own CRC32C.
        mapped = type(source.buffer) is memoryview
        self.crc32c: Callable[[Any], int] = _crc.crc32c_for_views() if mapped else _crc.crc32c

    def parse_header(self, header: bytes, index: int, offset: int) -> int:
        """Return the payload length, verifying the length checksum when ``check_crc`` is on."""
        length, stored = HEADER.unpack(header)
        if self.check_crc:
            actual = _crc.mask(self.crc32c(header[:8]))
            if actual != stored:
                raise checksum_error(self.path, index, offset, stored, actual)
        return int(length)

    def check_payload(self, data: bytes, trailer: bytes, index: int, offset: int) -> None:
        """Verify the payload checksum."""
        stored = _U32.unpack(trailer)[0]
        actual = _crc.mask(self.crc32c(data))
        if actual != stored:
            raise checksum_error(self.path, index, offset, stored, actual, payload=True)

    def check_chunks(
        self, chunks: Iterable[bytes], trailer: bytes, index: int, offset: int
    ) -> None:
        """Verify the payload checksum of a payload given as consecutive pieces, never joining them."""
        crc = 0
        for chunk in chunks:
            crc = _crc.crc32c_extend(crc, chunk)
        stored = _U32.unpack(trailer)[0]
        actual = _crc.mask(crc)
        if actual != stored:
            raise checksum_error(self.path, index, offset, stored, actual, payload=True)

    def iter_window(
        self, window: Any, base: int, index: int, final: bool
    ) -> Generator[bytes, None, tuple[int, int, int]]:
        """Yield the whole records in ``window``, a batch at a time.

        :meth:`_scan` slices a batch of records out of the window and computes their payload checksums
        in a plain loop; the batch's checksums are then compared together (see
        :func:`~recordkit.formats._crc.first_masked_mismatch`), so no record is yielded before its checksum
        is compared. See :meth:`SequentialFrameReader.iter_window` for the parameters and the result.
        """
        if not self.check_crc:
            return (yield from super().iter_window(window, base, index, final))
        size = len(window)
        if size < 12:
            if not final:
                return base, index, 12
            if size and not self.lenient:
                raise self.truncated("the file ends inside a record header", index, base)
            return base, index, 0
        pos = 0
        while True:
            records, crcs, trailers, (end, next_index, need), failure = self._scan(
                window, base, pos, index, final
            )
            wrong = _crc.first_masked_mismatch(crcs, trailers)
            if wrong is not None:
                yield from records[:wrong]
                at = base + pos + sum(len(record) + 16 for record in records[:wrong])
                raise checksum_error(
                    self.path,
                    index + wrong,
                    at,
                    trailers[wrong],
                    _crc.mask(crcs[wrong]),
                    payload=True,
                )
            yield from records
            if failure is not None:
                raise failure
            pos, index = end, next_index
            if need >= 0:
                return base + pos, index, need

    def _scan(
        self, window: Any, base: int, pos: int, index: int, final: bool
    ) -> tuple[
        list[bytes], array.array[int], array.array[int], tuple[int, int, int], Exception | None
    ]:
        """Slice the records of ``window`` from ``pos`` (where a whole header lies), for about
        :data:`_BATCH_BYTES`: the hot loop, kept free of method calls and of ``yield``.

        One ``unpack_from`` per record reads the payload checksum together with the next record's header.
        Returns the records, their payload CRCs (unmasked), the checksums stored for them, then ``(pos,
        index, need)`` where the scan stopped (``need`` as :meth:`iter_window` returns it, or ``-1``
        when the batch is full and the window goes on), and the error that stopped it, if any.
        """
        unpack_next = _TRAILER_AND_HEADER.unpack_from
        crc32c = self.crc32c
        known = _LENGTH_CRCS
        size = len(window)
        records: list[bytes] = []
        crcs = array.array("I")
        trailers = array.array("I")
        add_record, add_crc, add_trailer = records.append, crcs.append, trailers.append
        full = pos + _BATCH_BYTES
        length, stored = HEADER.unpack_from(window, pos)
        while True:
            if known.get(length) != stored:
                crc = crc32c(window[pos : pos + 8])
                expected = (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF
                if expected != stored:
                    mismatch = checksum_error(self.path, index, base + pos, stored, expected)
                    return records, crcs, trailers, (pos, index, 0), mismatch
                if len(known) < _CACHE_LIMIT:
                    known[length] = expected
            stop = pos + 12 + length
            try:
                trailer, length, stored = unpack_next(window, stop)
            except (struct.error, OverflowError):
                # Fewer than 16 bytes after the payload (or a length past any file): the last record of
                # the window, or one that does not fit in it.
                if stop + 4 > size:
                    if not final:
                        return records, crcs, trailers, (pos, index, stop + 4 - pos), None
                    cut = self.truncated("the file ends inside a record", index, base + pos)
                    return records, crcs, trailers, (pos, index, 0), cut
                trailer = _U32.unpack_from(window, stop)[0]
                length = -1
            data = window[pos + 12 : stop]
            add_record(data)
            add_crc(crc32c(data))
            add_trailer(trailer)
            pos = stop + 4
            index += 1
            if length < 0:
                if pos == size:
                    return records, crcs, trailers, (pos, index, 0), None
                if not final:
                    return records, crcs, trailers, (pos, index, 12), None
                if self.lenient:
                    return records, crcs, trailers, (pos, index, 0), None
                failure = self.truncated("the file ends inside a record header", index, base + pos)
                return records, crcs, trailers, (pos, index, 0), failure
            if pos >= full:
                return records, crcs, trailers, (pos, index, -1), None

    def decode_many(self, blob: Any, base: int, indices: Sequence[int]) -> list[bytes]:
        """Return the records at ``indices`` from ``blob`` (the file's bytes from offset ``base``).

        ``blob=None`` reads each record on its own (see
        :meth:`~recordkit.formats.base.IndexedFrameReader.decode_many`).
        """
        if not self.check_crc:
            return super().decode_many(blob, base, indices)
        offsets = self.offsets
        unpack_length, unpack_u32 = HEADER.unpack_from, _U32.unpack_from
        crc32c = self.crc32c
        known = _LENGTH_CRCS
        pread, fd, shift = os.pread, self.source.descriptor(), self.source.base
        records = []
        for index in indices:
            start, end = offsets[index], offsets[index + 1]
            if blob is None:
                frame, at = pread(fd, end - start, shift + start), 0  # type: ignore[arg-type]
            else:
                frame, at = blob, start - base
            if len(frame) < at + end - start:
                frame, at = self.refetch(index, start, end), 0
            length, stored = unpack_length(frame, at)
            if 16 + length != end - start:
                # The offset table disagrees with the header: decode() reports the stale index.
                return super().decode_many(blob, base, indices)
            if known.get(length) != stored:
                expected = _crc.masked_crc32c(LENGTH.pack(length))
                if expected != stored:
                    raise checksum_error(self.path, index, start, stored, expected)
                if len(known) < _CACHE_LIMIT:
                    known[length] = expected
            data = frame[at + 12 : at + 12 + length]
            crc = crc32c(data)
            stored = unpack_u32(frame, at + 12 + length)[0]
            if (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF != stored:
                raise checksum_error(self.path, index, start, stored, _crc.mask(crc), payload=True)
            records.append(data)
        return records


class TFRecordFrameWriter(_BufferedFrameWriter):
    """Writes TFRecord frames, optionally through a GZIP or ZLIB compressor.

    Parameters
    ----------
    fileobj
        Where to write.
    compression
        ``""``, ``"gzip"`` or ``"zlib"``.
    level
        The zlib compression level (0-9, or -1 for zlib's default, which TensorFlow uses too).
    """

    def __init__(
        self, fileobj: IO[bytes], *, compression: str = "", level: int | None = None
    ) -> None:
        super().__init__(fileobj)
        self._headers: dict[int, bytes] = {}
        self._compressor = None
        check_writable(compression, "TFRecord")
        if compression:
            level = -1 if level is None else level
            if not -1 <= level <= 9:
                raise ValueError(f"compression level must be between -1 and 9, not {level}")
            self._compressor = zlib.compressobj(
                level, zlib.DEFLATED, _WBITS[compression], _MEM_LEVEL
            )
        elif level is not None:
            raise ValueError("a compression level needs compression='gzip' or 'zlib'")

    def _header(self, length: int) -> bytes:
        header = self._headers.get(length)
        if header is None:
            packed = LENGTH.pack(length)
            header = packed + _U32.pack(_crc.masked_crc32c(packed))
            if len(self._headers) < _CACHE_LIMIT:
                self._headers[length] = header
        return header

    def write(self, data: bytes) -> None:
        """Append one record."""
        if len(data) >= _DIRECT_WRITE:
            self.write_many((data,))
            return
        crc = _crc.crc32c(data)
        self._parts += (
            self._header(len(data)),
            data,
            _U32.pack((((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF),
        )
        self._pending += len(data) + 16
        if self._pending >= self.BUFFER_SIZE:
            self._drain()

    def write_many(self, records: Iterable[bytes]) -> int:
        """Append every record of ``records``; return how many were written."""
        parts = self._parts
        header_for, headers = self._header, self._headers
        crc32c, pack = _crc.crc32c, _U32.pack
        limit = self.BUFFER_SIZE
        direct = _DIRECT_WRITE if self._compressor is None else 1 << 62
        count = 0
        for data in records:
            length = len(data)
            crc = crc32c(data)
            header = headers.get(length) or header_for(length)
            trailer = pack((((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF)
            count += 1
            if length >= direct:
                parts.append(header)
                self._drain()
                self.fileobj.write(data)
                parts.append(trailer)
                self._pending = 4
                continue
            parts += (header, data, trailer)
            self._pending += length + 16
            if self._pending >= limit:
                self._drain()
        return count

    def _drain(self) -> None:
        # The base class's, plus the compressor (when GZIP/ZLIB) between the buffer and the file.
        blob = b"".join(self._parts)
        self._parts.clear()
        self._pending = 0
        if self._compressor is not None:
            blob = self._compressor.compress(blob)
        if blob:
            self.fileobj.write(blob)

    def flush(self) -> None:
        """Write every buffered record to the file object (a compressor is flushed as TensorFlow does)."""
        self._drain()
        if self._compressor is not None:
            self.fileobj.write(self._compressor.flush(zlib.Z_PARTIAL_FLUSH))

    def close(self) -> None:
        """Write what is buffered and end the compressed stream."""
        self._drain()
        if self._compressor is not None:
            self.fileobj.write(self._compressor.flush())
            self._compressor = None

    def abort(self) -> None:
        """Drop buffered records."""
        super().abort()
        self._compressor = None


class _Resync(Resync):
    """Finds intact TFRecord frames in a damaged file, with work linear in its size whatever the content.

    A frame is intact when its length checksum matches, its length fits the file and its payload checksum
    matches; a false match needs both CRC32C checks to pass by chance. A crafted file can hold a valid
    header every 12 bytes, each claiming a payload of half the file; checking each payload on its own
    would be quadratic. So :meth:`next_start` tests a block of positions at once with numpy (the length
    checksum of every position, then the payload checksum of the few that pass), and payloads are
    checksummed through :class:`recordkit.formats.rangecrc.RangeCRC`, which touches each byte a bounded
    number of times. Frames met in order are checked directly, as long as the bytes checksummed in vain
    so far stay under the size of the file.
    """

    def __init__(self, buffer: Any, size: int) -> None:
        super().__init__(buffer, size)
        self.wasted = 0
        self._ranges: Any = None

    def ranges(self) -> Any:
        """The shared :class:`~recordkit.formats.rangecrc.RangeCRC` of the buffer (numpy is imported here)."""
        if self._ranges is None:
            from recordkit.formats import rangecrc

            self._ranges = rangecrc.RangeCRC(self.buffer, _crc.crc32c_extend, rangecrc.CRC32C_POLY)
        return self._ranges

    def _header(self, pos: int) -> int | None:
        """The end of the frame at ``pos`` if its length checksum matches and it fits, else ``None``."""
        if not _valid_header(self.buffer[pos : pos + 12], self.size - pos):
            return None
        return pos + 16 + int(LENGTH.unpack_from(self.buffer, pos)[0])

    def frame(self, pos: int) -> tuple[int, int, int] | None:
        """The payload range and end of the frame at ``pos`` if both its checksums match."""
        buffer, size = self.buffer, self.size
        end = self._header(pos)
        if end is None:
            return None
        start, stop = pos + 12, end - 4
        expected = _crc.unmask(_U32.unpack_from(buffer, stop)[0])
        if self.wasted <= size:
            crc = 0
            for at in range(
                start, stop, _READ_CHUNK
            ):  # bounded slices: a memory map is never copied whole
                crc = _crc.crc32c_extend(crc, buffer[at : min(at + _READ_CHUNK, stop)])
            if crc == expected:
                return start, stop, end
            self.wasted += stop - start
            return None
        return (
            (start, stop, end) if int(self.ranges().crcs([start], [stop])[0]) == expected else None
        )

    def next_start(self, pos: int) -> int:
        """The first position from ``pos`` on that starts an intact frame, else ``size``."""
        block, size = 256, self.size
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

        from recordkit.formats.rangecrc import tfrecord_headers

        buffer, size = self.buffer, self.size
        at = tfrecord_headers(buffer, lo, hi) + lo
        lengths = np.ndarray((size - 7,), "<u8", buffer, 0, (1,))[at]
        fits = lengths <= (size - 16 - at).astype(np.uint64)
        at, lengths = at[fits], lengths[fits].astype(np.int64)
        if not len(at):
            return None
        starts = at + 12
        stops = starts + lengths
        stored = np.ndarray((size - 3,), "<u4", buffer, 0, (1,))[stops] - np.uint32(_MASK_DELTA)
        expected = (stored >> 17) | (stored << 15)
        hits = np.flatnonzero(self.ranges().crcs(starts, stops) == expected)
        return int(at[hits[0]]) if len(hits) else None

    def damage(self, pos: int) -> str:
        """Why the frame at ``pos`` is not intact."""
        if self._header(pos) is not None:
            return "payload checksum mismatch"
        return "no valid record header"


class TFRecordFormat(RecordFormat):
    """The TFRecord format (plain, GZIP or ZLIB; BZIP2 read only)."""

    name: ClassVar[str] = "tfrecord"
    extensions: ClassVar[tuple[str, ...]] = (".tfrecord", ".tfrecords", ".tfrec", ".tfr")
    capabilities: ClassVar[Capabilities] = Capabilities(
        random_access=True,
        checksums=True,
        compression=("gzip", "zlib", "bzip2"),
        empty_records=True,
        sidecar_index=True,
        copyable_frames=True,
    )
    overhead: ClassVar[int] = 16
    payload: ClassVar[str | None] = EXAMPLE_PAYLOAD
    sniff_priority: ClassVar[int] = 30

    def resync(self, buffer: Any, size: int) -> Resync:
        """Return the TFRecord frame finder of recovery (see :class:`_Resync`)."""
        return _Resync(buffer, size)

    def frames(self, buffer: bytes, *, path: str | None = None, final: bool = True) -> Any:
        """Find every frame of ``buffer`` at once (:func:`~recordkit.formats.bulk.tfrecord_frames`)."""
        from recordkit.formats.bulk import tfrecord_frames

        return tfrecord_frames(buffer, path=path, final=final)

    def sniff(self, head: bytes, size: int | None) -> bool | int:
        """Recognise a plain TFRecord by its first length checksum, a compressed one by what it inflates to."""
        if _valid_header(head, size):
            return True
        compression = _compression_magic(head)
        if not compression:
            return False
        inflated = _inflate_head(head, compression)
        if inflated == b"" and compression == "bzip2" and (size is None or len(head) < size):
            # Not a whole block yet: ask for more (a random-access file gets it).
            return _BZIP2_SNIFF
        return inflated is not None and _valid_header(inflated, None)

    def detect_compression(self, head: bytes) -> str:
        """Return the compression of a compressed TFRecord file starting with ``head``, else ``""``.

        A file is taken as compressed only if it starts with GZIP's magic bytes, a ZLIB header or BZIP2's
        (``BZh`` and a block's magic), does not start with a valid plain TFRecord header, and its first
        bytes inflate without error to the start of a TFRecord (a valid first header, or too few bytes yet
        to tell: BZIP2 gives nothing before a whole block). Anything else is read as a
        plain TFRecord file, whose reader then reports what is wrong with it.
        """
        if _valid_header(head, None):
            return ""
        compression = _compression_magic(head)
        if not compression:
            return ""
        inflated = _inflate_head(head, compression)
        if inflated is None or (len(inflated) >= 12 and not _valid_header(inflated, None)):
            return ""
        return compression

    def reader(
        self,
        source: Source,
        *,
        check_crc: bool = True,
        lenient: bool = False,
        compression: str = "",
        offsets: Offsets | None = None,
    ) -> TFRecordFrameReader:
        """Return a :class:`TFRecordFrameReader`; compressed sources are read through an inflater."""
        _crc.warn_if_slow()
        inflate = None
        if compression:

            def inflate(raw: SupportsRead) -> SupportsRead:
                return _Inflater(raw, compression, source.path)

        return TFRecordFrameReader(
            source, check_crc=check_crc, lenient=lenient, inflate=inflate, offsets=offsets
        )

    def writer(
        self,
        fileobj: IO[bytes],
        *,
        compression: str = "",
        level: int | None = None,
        n: int | None = None,
    ) -> TFRecordFrameWriter:
        """Return a :class:`TFRecordFrameWriter` (``n`` is not needed and ignored)."""
        _crc.warn_if_slow()
        return TFRecordFrameWriter(fileobj, compression=compression, level=level)


def __getattr__(name: str) -> Any:
    """A name renamed since 0.2 (the frame reader and writer), with a warning naming the new one (PEP 562)."""
    return moved_attribute(__name__, name)
