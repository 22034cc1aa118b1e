"""ArrayRecord: Riegeli/records files with a footer indexing their chunks (``.array_record``), read only.

ArrayRecord (https://github.com/google/array_record, ``cpp/layout.proto``) is what tensorflow-datasets and
Grain write. A file is a Riegeli/records file (see :mod:`recordkit.formats._riegeli`): the signature, then
the user's records in chunks of ``group_size`` records each, then a *footer* chunk and, alone in the last
64 KiB block, a *postscript* chunk.

* The postscript chunk holds (three copies of) a ``RiegeliPostscript`` message: the footer's offset and
  ArrayRecord's magic number.
* The footer chunk's first record is a ``RiegeliFooterMetadata`` (format version, number of chunks, number
  of records), each following record an ``ArrayRecordFooter`` (a chunk's offset, decoded size and number
  of records).

Opening a file reads the postscript and the footer; record ``i`` is then read by decoding only the chunk
that holds it. Iteration reads the chunks in order, about :data:`~recordkit.formats.base.WINDOW` bytes at a
time.

What is checked (``check_crc=True``, the default): the file signature; the HighwayHash of every chunk
header read (the footer's and postscript's included) and of every block header inside a chunk read; that
the postscript, the footer and the chunks agree with each other (record counts, sizes, offsets); that
compressed data decompresses to the size it declares. The hash of each chunk's *data* is checked only on
request (:attr:`ArrayRecordFormat.check_data`), since recordkit computes HighwayHash in Python at about 4
MB/s. ``check_crc=False`` skips the hashes (the consistency checks remain).

Transposed chunks (``transpose:true``) are refused with an
:class:`~recordkit.errors.UnsupportedOperationError`. recordkit does not write ArrayRecord files.
"""

from __future__ import annotations

import bisect
import threading
from array import array
from collections.abc import Iterator, Sequence
from typing import IO, Any, ClassVar

from recordkit.errors import HeaderError, TruncatedRecordError, UnsupportedOperationError
from recordkit.formats._riegeli import (
    BLOCK,
    SIGNATURE,
    SIMPLE,
    Chunk,
    ChunkReader,
    Malformed,
    read_varint,
)
from recordkit.formats.base import (
    WINDOW,
    Capabilities,
    FrameReader,
    FrameWriter,
    Offsets,
    RecordFormat,
    Source,
    read_full,
)

__all__ = ["MAGIC", "ArrayRecordFormat", "ArrayRecordFrameReader"]

MAGIC = 0x71930E704FDAE05E
"""The ``magic`` field of ArrayRecord's postscript."""


def _fields(message: bytes) -> dict[int, Any]:
    """Return the varint and length-delimited fields of a protobuf message by number (the last wins).

    Raises
    ------
    Malformed
        The message is not valid protobuf, or has a field of another wire type.
    """
    fields: dict[int, Any] = {}
    pos = 0
    while pos < len(message):
        key, pos = read_varint(message, pos)
        wire = key & 7
        if wire == 0:
            fields[key >> 3], pos = read_varint(message, pos)
        elif wire == 2:
            length, pos = read_varint(message, pos)
            if pos + length > len(message):
                raise Malformed("a field runs past its message")
            fields[key >> 3] = message[pos : pos + length]
            pos += length
        else:
            raise Malformed(f"unexpected wire type {wire}")
    return fields


def _entry(message: bytes) -> tuple[Any, Any]:
    """Return the ``chunk_offset`` and ``num_records`` of an ``ArrayRecordFooter`` (``-1``, ``0`` if absent).

    A footer has one entry per chunk (per record, with ``group_size:1``): the usual encoding (one-byte keys,
    varint values) is decoded inline, anything else by :func:`_fields`.

    Raises
    ------
    Malformed
        The message is not valid protobuf.
    """
    found = [-1, -1, 0, 0]
    pos, end = 0, len(message)
    try:
        while pos < end:
            key = message[pos]
            field = key >> 3
            if key & 0x87 or not 1 <= field <= 3:
                fields = _fields(message)
                return fields.get(1, -1), fields.get(3, 0)
            value = shift = 0
            while True:
                pos += 1
                byte = message[pos]
                value |= (byte & 0x7F) << shift
                if byte < 0x80:
                    break
                shift += 7
            found[field] = value
            pos += 1
    except IndexError:
        raise Malformed("a varint runs past its message") from None
    return found[1], found[3]


class ArrayRecordFrameReader(FrameReader):
    """Reads an ArrayRecord file: the postscript and footer on construction, chunks on demand.

    Parameters
    ----------
    source
        The file. A stream is read into memory first (the footer is at its end).
    check_crc
        Verify the hashes of chunk and block headers.
    lenient
        Unused (an ArrayRecord file has no partial-record ambiguity: its footer lists every chunk).
    check_data
        Also verify the hash of each chunk's data (slow: about 4 MB/s).
    """

    def __init__(
        self,
        source: Source,
        *,
        check_crc: bool = True,
        lenient: bool = False,
        check_data: bool = False,
    ) -> None:
        if not source.random_access:
            data = read_full(source.stream().read, 1 << 62)
            source = Source(path=source.path, buffer=data)
        super().__init__(source, check_crc=check_crc, lenient=lenient)
        self.chunks = ChunkReader(
            source.pread, self.path, check_hashes=check_crc, check_data=check_crc and check_data
        )
        self.offsets = array("q")
        """The offset of every data chunk, then the footer's."""
        self.starts = array("q", [0])
        """The number of the first record of every data chunk, then the number of records."""
        self._cached: tuple[int, list[bytes]] | None = None
        self._lock = threading.Lock()
        self._load()

    def _header_error(
        self, message: str, offset: int | None, index: int | None = None
    ) -> HeaderError:
        return HeaderError(message, path=self.path, index=index, offset=offset)

    def _load(self) -> None:
        size = self.source.size or 0
        head = self.source.pread(0, len(SIGNATURE))
        if head != SIGNATURE:
            if SIGNATURE.startswith(bytes(head)):
                raise TruncatedRecordError(
                    "the file ends inside the Riegeli signature", path=self.path, offset=len(head)
                )
            raise self._header_error("no Riegeli/records signature at the start of the file", 0)
        if size % BLOCK:
            raise TruncatedRecordError(
                f"the file is {size} bytes long, not a whole number of 64 KiB blocks as an ArrayRecord "
                "file is (is it truncated, or a Riegeli file without ArrayRecord's footer?)",
                path=self.path,
                offset=size - size % BLOCK,
            )
        postscript_at = size - BLOCK
        postscript = self._special(postscript_at, "postscript")
        try:
            fields = _fields(postscript[0])
        except Malformed as exc:
            raise self._header_error(
                f"the postscript does not parse: {exc}", postscript_at
            ) from None
        if fields.get(2) != MAGIC:
            raise self._header_error(
                "the last block holds no ArrayRecord postscript (a Riegeli file that is not an "
                "ArrayRecord file?)",
                postscript_at,
            )
        footer_at = fields.get(1, -1)
        if not isinstance(footer_at, int) or not len(SIGNATURE) <= footer_at < postscript_at:
            raise self._header_error(
                f"the postscript's footer offset {footer_at} is outside the file", postscript_at
            )
        footer = self._special(footer_at, "footer")
        try:
            meta = _fields(_fields(footer[0]).get(1, b""))
            entries = [_entry(entry) for entry in footer[1:]]
        except (Malformed, TypeError) as exc:
            raise self._header_error(f"the footer does not parse: {exc}", footer_at) from None
        if len(entries) != meta.get(2, 0):
            raise self._header_error(
                f"the footer lists {len(entries)} chunks but its metadata says {meta.get(2, 0)}",
                footer_at,
            )
        offsets, starts = self.offsets, self.starts
        low, total = len(SIGNATURE), 0
        for offset, count in entries:
            if not (
                isinstance(offset, int) and isinstance(count, int) and low <= offset < footer_at
            ):
                raise self._header_error(
                    f"the footer's entry for chunk {len(starts) - 1} has an impossible offset "
                    f"({offset})",
                    footer_at,
                    total,
                )
            low = offset + 1
            total += count
            starts.append(total)
        offsets.extend(offset for offset, _ in entries)
        offsets.append(footer_at)
        if starts[-1] != meta.get(3, 0):
            raise self._header_error(
                f"the footer's chunks hold {starts[-1]} records but its metadata says {meta.get(3, 0)}",
                footer_at,
            )

    def _special(self, offset: int, what: str) -> list[bytes]:
        """The records of the footer or postscript chunk at ``offset`` (at least one)."""
        chunk = self.chunks.chunk(offset)
        if chunk.chunk_type != SIMPLE or not chunk.num_records:
            raise self._header_error(
                f"the ArrayRecord {what} at byte {offset} is not a simple chunk with records",
                offset,
            )
        return self.chunks.records(chunk)

    def __len__(self) -> int:
        """Return the number of records (from the footer: no chunk is read)."""
        return self.starts[-1]

    def _decode(self, chunk: Chunk, number: int) -> list[bytes]:
        """The records of data chunk ``number``, checked against the footer."""
        first = self.starts[number]
        count = self.starts[number + 1] - first
        if chunk.chunk_type == SIMPLE and chunk.num_records != count:
            raise self._header_error(
                f"the chunk holds {chunk.num_records} records but the footer says {count}",
                chunk.begin,
                first,
            )
        records = self.chunks.records(chunk, first)
        if len(records) != count:
            raise self._header_error(
                f"the chunk holds {len(records)} records but the footer says {count}",
                chunk.begin,
                first,
            )
        return records

    def _chunk_records(self, number: int) -> list[bytes]:
        cached = self._cached
        if cached is not None and cached[0] == number:
            return cached[1]
        records = self._decode(self.chunks.chunk(self.offsets[number], self.starts[number]), number)
        self._cached = (number, records)
        return records

    def _locate(self, index: int) -> int:
        """The data chunk holding record ``index``."""
        if not 0 <= index < len(self):
            raise IndexError(f"record index {index} out of range for {len(self)} records")
        return bisect.bisect_right(self.starts, index) - 1

    def read_at(self, index: int) -> bytes:
        """Return record ``index``, decoding only the chunk that holds it."""
        number = self._locate(index)
        return self._chunk_records(number)[index - self.starts[number]]

    def read_many(self, indices: Sequence[int]) -> list[bytes]:
        """Return the records at ``indices`` in the order asked, decoding each chunk needed once."""
        locate, starts = self._locate, self.starts
        wanted = {locate(i) for i in indices}
        decoded = {number: self._chunk_records(number) for number in sorted(wanted)}
        out = []
        for i in indices:
            number = bisect.bisect_right(starts, i) - 1
            out.append(decoded[number][i - starts[number]])
        return out

    def iter_from(self, index: int) -> Iterator[bytes]:
        """Yield the records from record ``index`` on, decoding from the chunk that holds it."""
        if index >= len(self):
            return iter(())
        number = self._locate(max(index, 0))
        skip = max(index, 0) - self.starts[number]
        records = self._iter_chunks(number)
        for _ in range(skip):
            next(records)
        return records

    def __iter__(self) -> Iterator[bytes]:
        """Yield every record, in file order."""
        return self._iter_chunks(0)

    def _iter_chunks(self, number: int) -> Iterator[bytes]:
        """Yield the records of data chunks ``number`` onwards, reading about WINDOW bytes at once."""
        offsets, source = self.offsets, self.source
        count = len(offsets) - 1
        while number < count:
            base = offsets[number]
            stop = bisect.bisect_right(offsets, base + WINDOW, number + 1) - 1
            stop = min(max(stop, number + 1), count)
            blob = source.pread(base, offsets[stop] - base)
            chunks = ChunkReader(
                _Window(base, blob, source.pread).pread,
                self.path,
                check_hashes=self.chunks.check_hashes,
                check_data=self.chunks.check_data,
            )
            for current in range(number, stop):
                chunk = chunks.chunk(offsets[current], self.starts[current])
                yield from self._decode(chunk, current)
            number = stop


class _Window:
    """``pread`` served from bytes already read at ``base`` when they hold the range asked."""

    def __init__(self, base: int, blob: bytes, pread: Any) -> None:
        self.base, self.blob, self.fallback = base, blob, pread

    def pread(self, offset: int, n: int) -> bytes:
        start = offset - self.base
        if start >= 0 and start + n <= len(self.blob):
            data: bytes = self.blob[start : start + n]
            return data
        return bytes(self.fallback(offset, n))


class ArrayRecordFormat(RecordFormat):
    """The ArrayRecord format (read only).

    Attributes
    ----------
    check_data
        Whether readers made by :meth:`reader` with ``check_crc=True`` also verify each chunk's data hash
        (default ``False``: about 4 MB/s in Python). Set it on the registered instance:
        ``recordkit.formats.get_format("arrayrecord").check_data = True``.
    """

    name: ClassVar[str] = "arrayrecord"
    extensions: ClassVar[tuple[str, ...]] = (".array_record", ".arrayrecord")
    capabilities: ClassVar[Capabilities] = Capabilities(
        random_access=True, checksums=True, empty_records=True, self_indexed=True
    )
    sniff_priority: ClassVar[int] = 30

    def __init__(self) -> None:
        self.check_data = False

    def sniff(self, head: bytes, size: int | None) -> bool | int:
        """Recognise the fixed first 64 bytes of a Riegeli/records file."""
        if len(head) >= len(SIGNATURE):
            return head[: len(SIGNATURE)] == SIGNATURE
        if not SIGNATURE.startswith(head[:8]) or (size is not None and size < len(SIGNATURE)):
            return False
        return len(SIGNATURE)

    def reader(
        self,
        source: Source,
        *,
        check_crc: bool = True,
        lenient: bool = False,
        compression: str = "",
        offsets: Offsets | None = None,
    ) -> ArrayRecordFrameReader:
        """Return an :class:`ArrayRecordFrameReader` (the postscript and footer are read now)."""
        return ArrayRecordFrameReader(
            source, check_crc=check_crc, lenient=lenient, check_data=self.check_data
        )

    def writer(
        self,
        fileobj: IO[bytes],
        *,
        compression: str = "",
        level: int | None = None,
        n: int | None = None,
    ) -> FrameWriter:
        """Refuse: recordkit reads ArrayRecord files but does not write them.

        Raises
        ------
        UnsupportedOperationError
            Always.
        """
        raise UnsupportedOperationError(
            "recordkit reads ArrayRecord files but does not write them: write TFRecord or FFRecord "
            "(recordkit convert --format tfrecord), or use array_record's ArrayRecordWriter"
        )
