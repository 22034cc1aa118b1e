"""Shared machinery of the length-prefixed sequential formats (TFRecord, OFRecord, and any registered one).

Such a format is a plain sequence of frames ``header | payload | trailer`` with no file header and no
index. Random access uses a table of frame offsets (``array('q')``, one entry per record plus the end of
the data, 8 bytes per record), built lazily by a header-only scan that jumps over payloads, or loaded from
a sidecar index file.

A subclass sets :attr:`SequentialFrameReader.HEADER` and :attr:`~SequentialFrameReader.TRAILER`, decodes a
header into a payload length (:meth:`~SequentialFrameReader.parse_header`, which also verifies any header
checksum), verifies a payload against its trailer (:meth:`~SequentialFrameReader.check_payload`), and may
override :meth:`~SequentialFrameReader.iter_window` with a faster loop over a window of the file. A format
whose reader is one declares ``Capabilities(sidecar_index=True)``: its offset tables can be saved beside the
file (``recordkit index``, shard writers) and are checked against the headers when loaded.
"""

from __future__ import annotations

import io
import warnings
from abc import abstractmethod
from array import array
from collections.abc import Callable, Generator, Iterable, Iterator
from functools import partial
from typing import Any, ClassVar

from recordkit.errors import CorruptRecordError, StaleIndexError, StaleIndexWarning
from recordkit.formats._source import _READ_CHUNK
from recordkit.formats.base import (
    _WINDOW,
    IndexedFrameReader,
    Offsets,
    Source,
    SupportsRead,
    VerifiedOffsets,
    read_full,
)
from recordkit.support.caller import user_stacklevel

__all__ = ["SequentialFrameReader"]

_SMALL_RECORD = 16 << 10
"""Records up to this size are scanned a window at a time: a read per header costs more than copying a
record's worth of bytes from the page cache."""

_KNOWN_HEADERS = 4096
"""How many distinct valid headers :meth:`SequentialFrameReader.scan` remembers (records of equal length
have equal headers, which are then parsed and checked once)."""


class SequentialFrameReader(IndexedFrameReader):
    """A reader of ``header | payload | trailer`` frames, with an offset table for random access.

    Parameters
    ----------
    source
        The (uncompressed) file, or ``None`` when reading through ``stream``.
    check_crc, lenient
        See :class:`~recordkit.formats.base.FrameReader`.
    inflate
        Wraps the source's stream into a decompressing one (for compressed files); the reader is then
        sequential.
    offsets
        A frame-offset table (``len + 1`` entries) or a function loading one (e.g. from a sidecar index);
        ``None`` scans the headers when the table is first needed.
    """

    HEADER: ClassVar[int]
    TRAILER: ClassVar[int] = 0

    def __init__(
        self,
        source: Source,
        *,
        check_crc: bool = True,
        lenient: bool = False,
        inflate: Callable[[SupportsRead], SupportsRead] | None = None,
        offsets: Offsets | None = None,
    ) -> None:
        super().__init__(source, check_crc=check_crc, lenient=lenient)
        self.inflate = inflate
        self._offsets: array[int] | None = None
        self._load_offsets = offsets if callable(offsets) else None
        if isinstance(offsets, array):
            self._offsets = offsets

    @property
    def random_access(self) -> bool:
        """Whether the file can be read by index (uncompressed and seekable)."""
        return self.inflate is None and self.source.random_access

    @abstractmethod
    def parse_header(self, header: bytes, index: int, offset: int) -> int:
        """Return the payload length in ``header`` (exactly :attr:`HEADER` bytes), checking it.

        Raises
        ------
        recordkit.errors.CorruptRecordError
            If the header is invalid (a checksum mismatch, an impossible length).
        """

    def check_payload(self, data: bytes, trailer: bytes, index: int, offset: int) -> None:
        """Verify ``data`` against its ``trailer``; called only when ``check_crc`` is on and TRAILER > 0."""

    def check_chunks(
        self, chunks: Iterable[bytes], trailer: bytes, index: int, offset: int
    ) -> None:
        """Verify a payload given as consecutive pieces against its ``trailer``, like :meth:`check_payload`.

        Used for payloads read from a stream in pieces, so that a payload failing its check is never also
        joined into one copy. This default joins the pieces; a format whose checksum can be computed
        piece by piece overrides it.
        """
        self.check_payload(b"".join(chunks), trailer, index, offset)

    # -- iteration -------------------------------------------------------------------------------

    def __iter__(self) -> Iterator[bytes]:
        """Yield every record in file order."""
        if self.inflate is not None:
            return self._iter_inflated(self.inflate(self.source.stream()))
        buffer = self.source.buffer
        if buffer is not None:
            return self.iter_window(buffer, 0, 0, True)
        if self.source.random_access:
            return self.iter_windows()
        return self.iter_stream(self.source.stream())

    def _iter_inflated(self, stream: SupportsRead) -> Iterator[bytes]:
        """:meth:`iter_stream` over decompressed bytes; an error of the decompression (damaged compressed
        data, which knows only its offset) is given the index of the record it cuts."""
        index = 0
        try:
            for record in self.iter_stream(stream):
                yield record
                index += 1
        except CorruptRecordError as exc:
            if exc.index is not None:
                raise
            raise type(exc)(exc.reason, path=self.path, index=index, offset=exc.offset) from exc

    def iter_from(self, index: int) -> Iterator[bytes]:
        """Yield the records from record ``index`` on, in file order.

        A random-access file is read in windows from the record's offset (the offset table is built, by
        a header scan, only for ``index > 0``); a sequential one is read from its start.
        """
        if index <= 0 or not self.random_access:
            return super().iter_from(index)
        offsets = self.offsets
        if index >= len(offsets) - 1:
            return iter(())
        buffer = self.source.buffer
        if buffer is not None:
            start = offsets[index]
            return self.iter_window(buffer[start:], start, index, True)
        return self.iter_windows(offsets[index], index)

    def iter_windows(self, start: int = 0, first: int = 0) -> Iterator[bytes]:
        """Yield the records of a random-access source, read in windows of about ``_WINDOW`` bytes.

        Reading starts at byte ``start``, where record ``first`` begins. A record larger than a window is
        read in one piece. The source's size is the one seen at opening; a file that has shrunk since
        raises :class:`~recordkit.errors.TruncatedRecordError`.
        """
        size = self.source.size
        assert size is not None  # a random-access source always knows its size
        pread = self.source.pread
        iter_window = self.iter_window
        pos, index, need = start, first, 0
        while pos < size:
            left = size - pos
            # A frame that cannot fit in what is left: read a window only, where the loop reports the cut.
            want = need if _WINDOW < need <= left else min(_WINDOW, left)
            window = pread(pos, want)
            short = len(window) < want
            final = short or want == left or need > left
            pos, index, need = yield from iter_window(window, pos, index, final)
            if short:
                raise self.truncated(
                    f"the file is shorter than the {size} bytes it had when it was opened "
                    "(it was truncated while being read)",
                    index,
                    pos,
                )
            if final:
                return

    def iter_window(
        self, window: Any, base: int, index: int, final: bool
    ) -> Generator[bytes, None, tuple[int, int, int]]:
        """Yield the whole records in ``window``, which holds the file's bytes from offset ``base``.

        Parameters
        ----------
        window
            The bytes.
        base
            The file offset of ``window[0]``, where record ``index`` starts.
        index
            The index of the first record in the window.
        final
            Whether the window reaches the end of the file: a record cut by its end is then truncated.

        Returns
        -------
        (offset, index, need)
            Where the first record not yielded starts, its index, and how many bytes from there it needs
            (``0`` at the end of the file).
        """
        header_size, trailer_size = self.HEADER, self.TRAILER
        parse, check = self.parse_header, self.check_payload
        verify = self.check_crc and trailer_size > 0
        size = len(window)
        pos = 0
        while pos < size:
            if size - pos < header_size:
                if not final:
                    return base + pos, index, header_size
                if self.lenient:
                    return base + pos, index, 0
                raise self.truncated("the file ends inside a record header", index, base + pos)
            length = parse(window[pos : pos + header_size], index, base + pos)
            start = pos + header_size
            stop = start + length
            if stop + trailer_size > size:
                if not final:
                    return base + pos, index, stop + trailer_size - pos
                raise self.truncated("the file ends inside a record", index, base + pos)
            data = window[start:stop]
            if verify:
                check(data, window[stop : stop + trailer_size], index, base + pos)
            yield data
            pos = stop + trailer_size
            index += 1
        return base + pos, index, 0

    def iter_stream(self, stream: SupportsRead) -> Iterator[bytes]:
        """Yield the records of a stream, reading in bounded chunks.

        Nothing is allocated from a record's length field: a payload is read piece by piece, so it takes
        only as much memory as the stream actually delivers, and it is verified before it is returned.
        """
        read = stream.read
        # Bound to locals, as in iter_window, because the loop below runs once per record.
        header_size, trailer_size = self.HEADER, self.TRAILER
        parse, check = self.parse_header, self.check_payload
        verify = self.check_crc and trailer_size > 0
        pos = 0
        index = 0
        while True:
            header = read_full(read, header_size)
            if len(header) < header_size:
                if not header or self.lenient:
                    return
                raise self.truncated("the file ends inside a record header", index, pos)
            length = parse(header, index, pos)
            if length > _READ_CHUNK:
                data = self._read_long_payload(read, length, index, pos, verify)
            else:
                data = read_full(read, length)
                trailer = read_full(read, trailer_size) if trailer_size else b""
                if len(data) < length or len(trailer) < trailer_size:
                    raise self.truncated("the file ends inside a record", index, pos)
                if verify:
                    check(data, trailer, index, pos)
            yield data
            pos += header_size + length + trailer_size
            index += 1

    def _read_long_payload(
        self, read: Callable[[int], bytes], length: int, index: int, offset: int, verify: bool
    ) -> bytes:
        """Read (and verify) a payload of ``length`` bytes, more than one chunk, from a stream.

        The pieces go into one ``BytesIO``, whose buffer grows in place and is handed over by
        ``getvalue()`` without a copy (CPython), so the payload is held once, not as pieces plus a joined
        copy. The checksum is computed over the pieces before that hand-over.
        """
        buffer = io.BytesIO()
        got = 0
        while got < length:
            chunk = read(min(length - got, _READ_CHUNK))
            if not chunk:
                break
            buffer.write(chunk)
            got += len(chunk)
        del chunk
        trailer = read_full(read, self.TRAILER) if self.TRAILER else b""
        if got < length or len(trailer) < self.TRAILER:
            raise self.truncated("the file ends inside a record", index, offset)
        if verify:
            buffer.seek(0)
            self.check_chunks(iter(partial(buffer.read, _READ_CHUNK), b""), trailer, index, offset)
        return buffer.getvalue()

    # -- random access ---------------------------------------------------------------------------

    @property
    def offsets(self) -> array[int]:
        """The frame-offset table (built on first use): record ``i`` spans ``[offsets[i], offsets[i+1])``."""
        if self._offsets is None:
            if not self.random_access:
                raise self.unsupported("an offset index")
            if self._load_offsets is None:
                self._offsets = self.scan()
            else:
                self._offsets = self._indexed_offsets(self._load_offsets)
        return self._offsets

    def _indexed_offsets(self, load: Callable[[], array[int]]) -> array[int]:
        """The offset table an index gives, checked; a stale or malformed index is ignored with a warning.

        An index is a cache: when it does not describe the file (another program rewrote the file and left
        the old index beside it), the file's own headers are scanned instead, and a
        :class:`~recordkit.errors.StaleIndexWarning` says so. Damage in the file itself still raises.
        """
        try:
            loaded: array[int] | None = load()
        except StaleIndexError as exc:
            loaded, problem = None, exc
        if loaded is not None and isinstance(load, VerifiedOffsets):
            return loaded
        if loaded is not None and self.source.remote and self.check_crc:
            # Walking the headers would fetch the whole file. Each record read is checked instead: its
            # header must give its span, and both checksums must match (a stale index raises there).
            return loaded
        table = self.scan()
        if loaded is not None:
            if table == loaded:
                return table
            problem = self._index_mismatch(table, loaded)
        warnings.warn(
            f"{problem}. The index was ignored: the records were found by scanning the file's headers",
            StaleIndexWarning,
            stacklevel=user_stacklevel(),
        )
        return table

    def check_index(self, loaded: array[int]) -> array[int]:
        """Return a loaded offset table if the record headers agree with every entry of it.

        An index can only be trusted by walking the headers from byte 0: an entry that points at a valid
        frame stored inside another record's payload is otherwise indistinguishable from a real record.
        The walk is :meth:`scan` (one header read per record); the index adds the cross-check.

        Raises
        ------
        recordkit.errors.StaleIndexError
            At the first record whose boundaries differ. (Reading never raises it for a sidecar index:
            :attr:`offsets` then warns and uses the scanned table.)
        """
        table = self.scan()
        if table != loaded:
            raise self._index_mismatch(table, loaded)
        return table

    def _index_mismatch(self, table: array[int], loaded: array[int]) -> StaleIndexError:
        pairs = zip(table, loaded, strict=False)
        first = next((i for i, (a, b) in enumerate(pairs) if a != b), min(len(table), len(loaded)))
        index = max(first - 1, 0)  # boundary ``first`` differs: record ``first - 1`` ends elsewhere

        def bounds(offsets: array[int]) -> str:
            if index + 1 >= len(offsets):
                return "no such record"
            return f"bytes {offsets[index]}-{offsets[index + 1]}"

        return StaleIndexError(
            f"the sidecar index does not match the file: it says record {index} spans "
            f"{bounds(loaded)}, the record headers say {bounds(table)} ({len(loaded) - 1} records "
            f"against {len(table) - 1}); delete the index or rebuild it with recordkit.io.write_index()",
            path=self.path,
            index=index,
            offset=table[index] if index < len(table) else None,
        )

    def scan(self) -> array[int]:
        """Build the frame-offset table by walking the headers (payloads are skipped).

        A file of small records is read in windows of about ``_WINDOW`` bytes and the headers are walked
        in memory, so a record costs no system call (or request) of its own; a header beyond the window
        starts the next window there. After a large record only the header is read.
        """
        size = self.source.size
        assert size is not None  # a random-access source always knows its size
        pread = self.source.pread
        header_size, extra = self.HEADER, self.HEADER + self.TRAILER
        parse = self.parse_header
        table = array("q")
        append = table.append
        pos = 0
        index = 0
        window: Any = b""
        base = 0  # the file offset of window[0]
        want = _WINDOW  # after a large record, only the next header
        known: dict[bytes, int] = {}
        while pos < size:
            if size - pos < header_size:
                if self.lenient:
                    break
                raise self.truncated("the file ends inside a record header", index, pos)
            at = pos - base
            if at + header_size > len(window):
                window = pread(pos, min(want, size - pos))
                base, at = pos, 0
            header = window[at : at + header_size]
            length = known.get(header) if type(header) is bytes else None
            if length is None:
                length = parse(header, index, pos)
                if type(header) is bytes and len(known) < _KNOWN_HEADERS:
                    known[header] = length  # a header's length depends on its bytes alone
            end = pos + extra + length
            if end > size:
                raise self.truncated("the file ends inside a record", index, pos)
            want = _WINDOW if end - pos <= _SMALL_RECORD else header_size
            append(pos)
            pos = end
            index += 1
        append(pos)
        return table

    def __len__(self) -> int:
        """Return the number of records (scanning the headers on first use)."""
        if not self.random_access:
            raise self.unsupported("len()", length=True)
        return len(self.offsets) - 1

    def decode(self, blob: Any, pos: int, end: int, index: int, offset: int) -> bytes:
        """Decode the frame ``blob[pos:end]`` of record ``index`` found at file ``offset``."""
        header_size, trailer_size = self.HEADER, self.TRAILER
        if len(blob) < end:
            raise self.truncated(
                "the file is shorter than its index says (did it change?)", index, offset
            )
        if end - pos < header_size + trailer_size:
            raise self._stale_span(index, offset, end - pos, None)
        length = self.parse_header(blob[pos : pos + header_size], index, offset)
        stop = pos + header_size + length
        if stop + trailer_size != end:
            raise self._stale_span(index, offset, end - pos, header_size + length + trailer_size)
        data: bytes = blob[pos + header_size : stop]
        if self.check_crc and trailer_size:
            self.check_payload(data, blob[stop:end], index, offset)
        return data

    def _stale_span(
        self, index: int, offset: int, size: int, framed: int | None
    ) -> StaleIndexError:
        says = (
            "shorter than a record header" if framed is None else f"the record header says {framed}"
        )
        return StaleIndexError(
            f"the offset table says this record is {size} bytes long, {says}: the index does not "
            "match the file",
            path=self.path,
            index=index,
            offset=offset,
        )

    def span(self, index: int) -> tuple[int, int]:
        """Return the byte range ``[start, end)`` of frame ``index``."""
        offsets = self.offsets
        return offsets[index], offsets[index + 1]
