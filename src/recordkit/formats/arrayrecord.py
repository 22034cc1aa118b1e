"""ArrayRecord: Riegeli/records files with a footer indexing their chunks (``.array_record``).

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
that holds it: its data is decompressed, its hashes checked and its record sizes summed (with numpy) once,
and only the records asked for are sliced out of it. A reader keeps the chunks it decoded last, up to
:attr:`ArrayRecordFrameReader.cache_bytes` (:data:`CACHE_BYTES`, 64 MiB) of decompressed data and sizes in
all, and always the last one, so random reads over a few large chunks decode each chunk once.
Iteration reads the chunks in order, about ``_WINDOW`` bytes at a
time; the ordinary chunks of such a window (within one block, intact, simple) are decoded together by
:func:`~recordkit.formats._riegeli_window.window_records`, any other chunk one by one by the
:class:`~recordkit.formats._riegeli.ChunkReader` (same records, same errors).

What is checked (``check_crc=True``, the default): the file signature; the HighwayHash of every chunk
header read (the footer's and postscript's included), of every block header inside a chunk read and of
every chunk's data, as Riegeli's own reader does; that the postscript, the footer and the chunks agree with
each other (record counts, sizes, offsets); that compressed data decompresses to exactly the size it
declares (:mod:`~recordkit.formats._decompress` allocates by what it really produces, not by what it
declares). The hashes of a run of chunks are computed together with numpy
(:meth:`~recordkit.formats._riegeli.ChunkReader.chunks`); a single large chunk's data is hashed in Python
at about 4 MB/s. :attr:`ArrayRecordFormat.check_data` turns the data hashes off; ``check_crc=False`` skips
every hash (the consistency checks remain).

Transposed chunks (``transpose:true``) are decoded by :mod:`recordkit.formats._riegeli_transpose`; random
reads cache them as simple chunks are. recordkit does not write ArrayRecord files.
"""

from __future__ import annotations

import bisect
import contextlib
import itertools
import struct
import threading
from array import array
from collections import OrderedDict
from collections.abc import Generator, Iterator, Sequence
from typing import IO, Any, ClassVar

from recordkit.errors import (
    CorruptRecordError,
    HeaderError,
    TruncatedRecordError,
)
from recordkit.formats._arrayrecord_write import MAGIC, ArrayRecordFrameWriter
from recordkit.formats._highwayhash import highwayhash64
from recordkit.formats._riegeli import (
    BLOCK,
    BLOCK_HEADER,
    SIGNATURE,
    SIMPLE,
    TRANSPOSED,
    Chunk,
    ChunkReader,
    Malformed,
    read_varint,
)
from recordkit.formats._riegeli_window import window_records
from recordkit.formats.base import (
    _WINDOW,
    Capabilities,
    FrameReader,
    Offsets,
    RecordFormat,
    Source,
    read_full,
)
from recordkit.formats.resync import Skip
from recordkit.support.varints import VarintError, decode_all

__all__ = ["MAGIC", "ArrayRecordFormat", "ArrayRecordFrameReader", "ArrayRecordFrameWriter"]


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


def _entries(values: bytes, bounds: list[int]) -> tuple[Any, Any]:
    """Return the ``chunk_offset`` and ``num_records`` (``-1``, ``0`` if absent) of the footer's entries.

    ``values[bounds[i]:bounds[i + 1]]`` is the footer's record ``i``: an ``ArrayRecordFooter`` from ``i = 1``.
    A footer has one entry per chunk (per record, with ``group_size:1``). In the usual encoding (one-byte
    keys, varint values, each field once) the entries are, all together, varints back to back, decoded with
    numpy at once; anything else is decoded entry by entry by :func:`_fields`.

    Raises
    ------
    Malformed
        An entry is not valid protobuf.
    """
    import numpy as np

    first, count = bounds[1], len(bounds) - 2
    edges = np.asarray(bounds[1:-1], np.int64) - first
    try:
        numbers, starts = decode_all(np.frombuffer(values[first:], np.uint8))
    except VarintError:
        numbers, starts = np.zeros(0, np.uint64), np.zeros(0, np.int64)
    owner = np.searchsorted(edges, starts, side="right") - 1
    keys, fields = numbers[0::2], numbers[1::2]
    aligned = (
        len(numbers) % 2 == 0
        and np.isin(edges, starts).all()
        and (np.bincount(owner, minlength=count) % 2 == 0).all()
        and np.isin(keys, (8, 16, 24)).all()
    )
    found = []
    for key, default in ((8, -1), (24, 0)):
        column = np.full(count, default, np.int64)
        if aligned:
            mask = keys == key
            which = owner[0::2][mask]
            aligned = not len(which) or np.bincount(which).max() == 1
            column[which] = fields[mask].astype(np.int64)
        found.append(column)
    if aligned:
        return found[0], found[1]
    for i in range(count):
        entry = _fields(values[bounds[i + 1] : bounds[i + 2]])
        offset, records = entry.get(1, -1), entry.get(3, 0)
        if not isinstance(offset, int) or not isinstance(records, int):
            raise Malformed(f"entry {i} has a length-delimited chunk_offset or num_records")
        found[0][i], found[1][i] = offset, records
    return found[0], found[1]


_ROLE = {
    "footer": "the index of the file's chunks",
    "postscript": "where the footer is",
}
"""What the footer and the postscript are for, in errors about them."""

CACHE_BYTES = 64 << 20
"""The default :attr:`ArrayRecordFrameReader.cache_bytes`: 64 MiB of decoded chunks per reader."""

_ENTRY_COST = 256
"""Bytes counted for each cached chunk besides its data and record bounds (the cache's own bookkeeping)."""


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
        Also verify the hash of each chunk's data (with ``check_crc``; the default): without it a flipped
        bit inside a chunk's data may come back as a wrong record.
    """

    cache_bytes: int = CACHE_BYTES
    """How many bytes of decoded chunks (decompressed data, 8 bytes of bounds per record, and
    :data:`_ENTRY_COST` per chunk) single and batched reads keep, least recently used dropped first; the
    chunk read last is kept even when it alone is larger. Set on the class or on a reader (a lower budget
    takes effect at the next read)."""

    def __init__(
        self,
        source: Source,
        *,
        check_crc: bool = True,
        lenient: bool = False,
        check_data: bool = True,
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
        self._cache: OrderedDict[int, tuple[Any, bytes, int]] = OrderedDict()
        self._cache_used = 0
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
        chunk = self._special(postscript_at, "postscript")
        try:
            postscript = self.chunks.records(chunk)
        except CorruptRecordError as exc:
            exc.within(f"the ArrayRecord postscript ({_ROLE['postscript']})")
            raise
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
        chunk = self._special(footer_at, "footer")
        try:
            bounds, values = self.chunks.parts(chunk, None)
        except CorruptRecordError as exc:
            exc.within(f"the ArrayRecord footer ({_ROLE['footer']})")
            raise
        try:
            meta = _fields(_fields(values[: bounds[1]]).get(1, b""))
            offsets, counts = _entries(values, bounds)
        except (Malformed, TypeError, OverflowError) as exc:
            raise self._header_error(f"the footer does not parse: {exc}", footer_at) from None
        if len(offsets) != meta.get(2, 0):
            raise self._header_error(
                f"the footer lists {len(offsets)} chunks but its metadata says {meta.get(2, 0)}",
                footer_at,
            )
        import numpy as np

        starts = np.zeros(len(counts) + 1, np.int64)
        np.cumsum(counts, out=starts[1:])
        lowest = np.empty_like(offsets)
        lowest[:1] = len(SIGNATURE)
        lowest[1:] = offsets[:-1] + 1
        bad = np.flatnonzero((offsets < lowest) | (offsets >= footer_at) | (counts < 0))
        if len(bad):
            raise self._header_error(
                f"the footer's entry for chunk {bad[0]} has an impossible offset ({offsets[bad[0]]})",
                footer_at,
                int(starts[bad[0]]),
            )
        # Riegeli gives each record a position between its chunk's beginning and end (padding the chunk
        # when needed): a chunk spans at least as many bytes as it holds records, so no count can exceed
        # the bytes up to the next chunk, and the total cannot exceed the file's size.
        spans = np.diff(offsets, append=footer_at)
        bad = np.flatnonzero(counts > spans)
        if len(bad):
            raise self._header_error(
                f"the footer says chunk {bad[0]} holds {counts[bad[0]]} records, more than the "
                f"{spans[bad[0]]} bytes up to the next chunk can hold",
                footer_at,
                int(starts[bad[0]]),
            )
        self.offsets.frombytes(offsets.astype("<i8").tobytes())
        self.offsets.append(footer_at)
        self.starts = array("q", starts.astype("<i8").tobytes())
        if self.starts[-1] != meta.get(3, 0):
            raise self._header_error(
                f"the footer's chunks hold {self.starts[-1]} records but its metadata says "
                f"{meta.get(3, 0)}",
                footer_at,
            )

    def _special(self, offset: int, what: str) -> Chunk:
        """The footer or postscript chunk at ``offset``: a simple chunk with records."""
        try:
            chunk = self.chunks.chunk(offset)
        except CorruptRecordError as exc:
            exc.within(f"the ArrayRecord {what} ({_ROLE[what]})")
            raise
        if chunk.chunk_type != SIMPLE or not chunk.num_records:
            raise self._header_error(
                f"the ArrayRecord {what} at byte {offset} is not a simple chunk with records",
                offset,
            )
        return chunk

    @property
    def chunk_compression(self) -> str:
        """The compression of the file's record chunks: ``""`` (none), ``"zstd"``, ``"brotli"`` or ``"snappy"``.

        Read from the first and the last data chunk (their headers and first data bytes; array_record
        writes every chunk of a file with the same options): ``"mixed"`` when they differ, ``""`` for a
        file without records.
        """
        count = len(self.offsets) - 1
        found = {
            self.chunks.compression(self.offsets[number], self.starts[number])
            for number in sorted({0, count - 1})
            if count
        }
        names = {"" if name in (None, "none") else name for name in found}
        return "mixed" if len(names) > 1 else next(iter(names), "")

    def __len__(self) -> int:
        """Return the number of records (from the footer: no chunk is read)."""
        return self.starts[-1]

    def _check_count(self, chunk: Chunk, number: int, found: int) -> None:
        """Raise unless data chunk ``number`` holds as many records as the footer says."""
        first = self.starts[number]
        count = self.starts[number + 1] - first
        if found != count:
            raise self._header_error(
                f"the chunk holds {found} records but the footer says {count}", chunk.begin, first
            )

    def _decode(self, chunk: Chunk, number: int) -> list[bytes]:
        """The records of data chunk ``number``, checked against the footer."""
        if chunk.chunk_type in (SIMPLE, TRANSPOSED):
            self._check_count(chunk, number, chunk.num_records)
        records = self.chunks.records(chunk, self.starts[number])
        self._check_count(chunk, number, len(records))
        return records

    def _parts(self, chunk: Chunk, number: int) -> tuple[Any, bytes]:
        """The record bounds (a numpy array for a large chunk) and bytes of data chunk ``number``."""
        first = self.starts[number]
        if chunk.chunk_type in (SIMPLE, TRANSPOSED):
            self._check_count(chunk, number, chunk.num_records)
            bounds, values = self.chunks.parts(chunk, first, array=True)
        else:  # without records, or of an unknown type: records() says which
            records = self.chunks.records(chunk, first)
            bounds, values = (
                list(itertools.accumulate(map(len, records), initial=0)),
                b"".join(records),
            )
        self._check_count(chunk, number, len(bounds) - 1)
        return bounds, values

    def _remember(self, number: int, bounds: Any, values: bytes) -> None:
        """Cache decoded chunk ``number``, dropping the least recently used beyond :attr:`cache_bytes`."""
        cost = len(values) + (8 if isinstance(bounds, list) else bounds.itemsize) * len(bounds)
        cost += _ENTRY_COST
        with self._lock:
            cache = self._cache
            if number in cache:
                return
            cache[number] = (bounds, values, cost)
            self._cache_used += cost
            self._trim()

    def _trim(self) -> None:
        """Drop the least recently used chunks beyond :attr:`cache_bytes` (the lock held)."""
        cache = self._cache
        while self._cache_used > self.cache_bytes and len(cache) > 1:
            self._cache_used -= cache.popitem(last=False)[1][2]

    def _cached(self, number: int) -> tuple[Any, bytes] | None:
        with self._lock:
            entry = self._cache.get(number)
            if entry is None:
                return None
            self._cache.move_to_end(number)
            self._trim()
            return entry[0], entry[1]

    @property
    def cached_chunks(self) -> tuple[list[int], int]:
        """The numbers of the data chunks cached (least recently used first) and the bytes they count."""
        with self._lock:
            return list(self._cache), self._cache_used

    def _chunk_parts(self, number: int) -> tuple[Any, bytes]:
        found = self._cached(number)
        if found is None:
            chunk = self.chunks.chunk(self.offsets[number], self.starts[number])
            found = self._parts(chunk, number)
            self._remember(number, *found)
        return found

    def _locate(self, index: int) -> int:
        """The data chunk holding record ``index``."""
        if not 0 <= index < len(self):
            raise IndexError(f"record index {index} out of range for {len(self)} records")
        return bisect.bisect_right(self.starts, index) - 1

    def read_at(self, index: int) -> bytes:
        """Return record ``index``, decoding only the chunk that holds it (unless it is cached)."""
        if self.source.remote:  # the chunk in one request, rather than its header, then its data
            return self.read_many([index])[0]
        number = self._locate(index)
        bounds, values = self._chunk_parts(number)
        k = index - self.starts[number]
        return values[bounds[k] : bounds[k + 1]]

    def read_many(self, indices: Sequence[int]) -> list[bytes]:
        """Return the records at ``indices`` in the order asked, decoding each chunk needed once.

        Cached chunks are used as they are; the others are read in file order, their hashes verified
        together, and cached.
        """
        locate, starts = self._locate, self.starts
        wanted = sorted({locate(i) for i in indices})
        decoded: dict[int, tuple[Any, bytes]] = {}
        for number in wanted:
            found = self._cached(number)
            if found is not None:
                decoded[number] = found
        todo = [number for number in wanted if number not in decoded]
        reader = self.chunks
        source = self.source
        if todo and source.buffer is None and source.descriptor() is None:
            # Each chunk's bytes run to the next chunk: fetched together, not a header and data at a time.
            spans = [(self.offsets[number], self.offsets[number + 1]) for number in todo]
            windows = _Windows(spans, source.read_ranges(spans), source.pread)
            reader = ChunkReader(
                windows.pread,
                self.path,
                check_hashes=reader.check_hashes,
                check_data=reader.check_data,
            )
        chunks, failure = reader.chunks(
            [self.offsets[number] for number in todo], [starts[number] for number in todo]
        )
        for number, chunk in zip(todo, chunks, strict=False):
            decoded[number] = self._parts(chunk, number)
            self._remember(number, *decoded[number])
        if failure is not None:
            raise failure
        out = []
        for i in indices:
            number = bisect.bisect_right(starts, i) - 1
            bounds, values = decoded[number]
            k = i - starts[number]
            out.append(values[bounds[k] : bounds[k + 1]])
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
        """Yield the records of data chunks ``number`` onwards, reading about _WINDOW bytes at once."""
        offsets, source = self.offsets, self.source
        count = len(offsets) - 1
        while number < count:
            base = offsets[number]
            stop = bisect.bisect_right(offsets, base + _WINDOW, number + 1) - 1
            stop = min(max(stop, number + 1), count)
            blob = source.pread(base, offsets[stop] - base)
            general = ChunkReader(
                _Windows([(base, base + len(blob))], [blob], source.pread).pread,
                self.path,
                check_hashes=self.chunks.check_hashes,
                check_data=self.chunks.check_data,
            )
            counts = [b - a for a, b in itertools.pairwise(self.starts[number : stop + 1])]
            pieces = window_records(
                blob,
                base,
                offsets[number:stop],
                counts,
                check_hashes=general.check_hashes,
                check_data=general.check_data,
            )
            # The chunks left to the general path (transposed ones, damaged ones) are read and their
            # hashes checked together; they come back up to the first that fails, then that failure.
            deferred = [number + piece for piece in pieces if isinstance(piece, int)]
            chunks, failure = general.chunks(
                [offsets[current] for current in deferred],
                [self.starts[current] for current in deferred],
            )
            read = dict(zip(deferred, chunks, strict=False))
            for piece in pieces:  # runs of ordinary chunks' records, or a chunk to read in general
                if isinstance(piece, int):
                    current = number + piece
                    if current not in read and failure is not None:
                        raise failure
                    yield from self._decode(read.pop(current), current)
                else:
                    yield from piece
            number = stop


class _Windows:
    """``pread`` served from bytes already read (``blobs[i]`` from ``spans[i][0]``, the spans in file
    order) when one of them holds the range asked; otherwise from ``pread``."""

    def __init__(self, spans: Sequence[tuple[int, int]], blobs: Sequence[Any], pread: Any) -> None:
        self.bases = [start for start, _ in spans]
        self.blobs, self.fallback = blobs, pread

    def pread(self, offset: int, n: int) -> bytes:
        i = bisect.bisect_right(self.bases, offset) - 1
        if i >= 0:
            start, blob = offset - self.bases[i], self.blobs[i]
            if start + n <= len(blob):
                data: bytes = blob[start : start + n]
                return data
        return bytes(self.fallback(offset, n))


class ArrayRecordFormat(RecordFormat):
    """The ArrayRecord format (read only).

    Attributes
    ----------
    check_data
        Whether readers made by :meth:`reader` with ``check_crc=True`` also verify each chunk's data hash
        (default ``True``, as Riegeli's own reader does). Setting it to ``False`` on the registered instance
        (``recordkit.formats.get_format("arrayrecord").check_data = False``) trades that check for speed on
        large chunks, whose data is hashed at about 4 MB/s, and lets a flipped bit in a chunk's data come
        back as a wrong record.
    """

    name: ClassVar[str] = "arrayrecord"
    aliases: ClassVar[tuple[str, ...]] = ("array_record",)  # the package's, TFDS's and Grain's name
    extensions: ClassVar[tuple[str, ...]] = (".array_record", ".arrayrecord")
    capabilities: ClassVar[Capabilities] = Capabilities(
        random_access=True, checksums=True, empty_records=True, self_indexed=True
    )
    sniff_priority: ClassVar[int] = 30
    index_place: ClassVar[str] = "footer"

    def __init__(self) -> None:
        self.check_data = True

    @contextlib.contextmanager
    def verifying(self) -> Iterator[None]:
        """Within it, readers made by :meth:`reader` with ``check_crc=True`` also verify the data hashes."""
        before, self.check_data = self.check_data, True
        try:
            yield
        finally:
            self.check_data = before

    def salvage(self, buffer: Any, size: int, skip: Any) -> Iterator[bytes]:
        """Return the records of the intact chunks of a damaged file; a damaged chunk loses its records.

        The chunks are found through the footer or, when it is damaged or cut off, by walking them from
        the start (see the salvage section at the end of this module).
        """
        return _salvage(buffer, size, skip)

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
        options: str | None = None,
    ) -> ArrayRecordFrameWriter:
        """Return an :class:`ArrayRecordFrameWriter`: ``options`` is ArrayRecordWriter's option string
        (``"group_size:1,zstd:3"``, its defaults when absent), ``level`` the codec's level.

        Raises
        ------
        ValueError
            Whole-file ``compression`` (an ArrayRecord file compresses its chunks), or bad ``options``.
        UnsupportedOperationError
            ``transpose:true``.
        """
        if compression:
            raise ValueError(
                "an ArrayRecord file compresses its chunks, not the whole file: pass "
                "options='zstd:3' (or brotli, snappy, uncompressed), not compression="
            )
        return ArrayRecordFrameWriter(fileobj, options, level)


# Salvage.
#
# Recovering the intact records of a damaged ArrayRecord file (:meth:`ArrayRecordFormat.salvage`).
#
# A damaged chunk loses its records; the chunks before and after it are kept. Every hash is checked, the
# chunks' data hashes included.
#
# * With the postscript and the footer intact, the footer lists the chunks: each is read and checked on its
#   own, and one that fails is skipped with its records (reported with the number of its first record).
# * Otherwise (a damaged footer or postscript, a truncated file) the chunks are walked from the start of the
#   file, each beginning where the one before ends. After a damaged chunk header the walk goes on at the
#   next block boundary whose block header is intact: it says where the chunk it interrupts ends, which is
#   where the next chunk begins. The walk stops at the footer: the chunk that the postscript names, or,
#   without a postscript, the first chunk shaped as a footer or postscript (a ``RiegeliFooterMetadata``
#   then ``ArrayRecordFooter`` entries pointing back into the file, or postscripts with ArrayRecord's magic).

_BLOCK_HEADER = struct.Struct("<QQQ")


def _salvage(buffer: Any, size: int, skip: Skip) -> Iterator[bytes]:
    """Yield the records of the intact chunks of the ArrayRecord file ``buffer[:size]``; see the module."""
    source = Source(path=None, buffer=buffer if len(buffer) == size else memoryview(buffer)[:size])
    try:
        reader = ArrayRecordFrameReader(source, check_crc=True, check_data=True)
    except CorruptRecordError as exc:
        return _walk(source, size, skip, exc.reason)
    return _listed(reader, skip)


def _listed(reader: ArrayRecordFrameReader, skip: Skip) -> Iterator[bytes]:
    """The records of each chunk the footer lists, a damaged chunk skipped."""
    offsets, starts = reader.offsets, reader.starts
    for number in range(len(offsets) - 1):
        first, stop = starts[number], starts[number + 1]
        try:
            records = reader.read_many(range(first, stop))
        except CorruptRecordError as exc:
            what = f"chunk {number} (records {first} to {stop - 1}) is damaged: {exc.reason}"
            skip(offsets[number], offsets[number + 1], what, first)
            continue
        yield from records


def _walk(source: Source, size: int, skip: Skip, why: str) -> Iterator[bytes]:
    """The records of the chunks found one after the other; then the damaged footer or postscript."""
    end = yield from _chunks(source, size, skip)
    if end < size:
        skip(end, size, f"the ArrayRecord footer or postscript is damaged or cut off: {why}")


def _chunks(source: Source, size: int, skip: Skip) -> Generator[bytes, None, int]:
    """Yield the records of the chunks from the start of the file; return where the footer begins (or
    the postscript, when the footer is intact), the end of the file if neither was found."""
    chunks = ChunkReader(source.pread, None, check_hashes=True, check_data=True)
    pos = len(SIGNATURE)
    if bytes(source.pread(0, pos)) != SIGNATURE:
        skip(0, min(pos, size), "no Riegeli/records signature")
    footer = _footer_offset(chunks, size)
    limit = size if footer is None else footer
    while pos < limit:
        try:
            chunk = chunks.chunk(pos)
            records = chunks.records(chunk)
        except CorruptRecordError as exc:
            found = _resync(source, pos, limit)
            skip(pos, found, exc.reason)
            pos = found
            continue
        if footer is None:
            kind = _kind(chunk, records)
            if kind == "postscript":
                return size if chunk.begin >= size - BLOCK else chunk.begin
            if kind == "footer":
                return chunk.end
        yield from records
        pos = chunk.end
    return limit


def _footer_offset(chunks: ChunkReader, size: int) -> int | None:
    """Where the postscript says the footer is, or ``None`` (the file is cut, or the postscript damaged)."""
    if size % BLOCK or size < 2 * BLOCK:
        return None
    try:
        postscript = chunks.records(chunks.chunk(size - BLOCK))
        fields = _fields(postscript[0]) if postscript else {}
    except (CorruptRecordError, Malformed):
        return None
    footer = fields.get(1)
    if fields.get(2) != MAGIC or not isinstance(footer, int) or not 0 < footer < size:
        return None
    return footer


def _kind(chunk: Chunk, records: list[bytes]) -> str | None:
    """``"footer"`` or ``"postscript"`` for a chunk shaped as ArrayRecord's, ``None`` for the file's records."""
    if not records:
        return None
    try:
        parsed = [_fields(bytes(record)) for record in records]
        if all(fields.get(2) == MAGIC for fields in parsed):  # the postscript's copies
            return "postscript"
        meta = parsed[0].get(1)
        if not isinstance(meta, bytes) or set(parsed[0]) != {1}:
            return None
        counts = _fields(meta)
    except Malformed:
        return None
    entries = parsed[1:]
    footer = (
        all(isinstance(counts.get(key, 0), int) for key in (1, 2, 3))
        and counts.get(2, 0) == len(entries)
        and all(
            set(entry) <= {1, 2, 3} and isinstance(entry.get(1), int) and entry[1] < chunk.begin
            for entry in entries
        )
    )
    return "footer" if footer else None


def _resync(source: Source, pos: int, limit: int) -> int:
    """Where the next chunk after a damaged one at ``pos`` begins, by the next intact block header."""
    block = pos - pos % BLOCK + BLOCK
    while block < limit:
        header = bytes(source.pread(block, BLOCK_HEADER))
        if len(header) < BLOCK_HEADER:
            break
        stored, previous, following = _BLOCK_HEADER.unpack(header)
        if highwayhash64(header[8:]) == stored:
            begin = block if previous == 0 else block + following
            if pos < begin < limit:
                return begin
        block += BLOCK
    return limit
