"""Shared machinery of the length-prefixed sequential formats (TFRecord, OFRecord).

Both formats are a plain sequence of frames ``header | payload | trailer`` with no file header and no
index. Random access uses a table of frame offsets (``array('q')``, one entry per record plus the end of
the data, 8 bytes per record), built lazily by a header-only scan that jumps over payloads, or loaded from
a sidecar index file.

A subclass sets :attr:`SequentialFrameReader.HEADER` and :attr:`~SequentialFrameReader.TRAILER`, decodes a
header into a payload length (:meth:`~SequentialFrameReader.parse_header`, which also verifies any header
checksum), verifies a payload against its trailer (:meth:`~SequentialFrameReader.check_payload`), and may
override :meth:`~SequentialFrameReader.iter_window` with a faster loop over a window of the file.
"""

from __future__ import annotations

from abc import abstractmethod
from array import array
from collections.abc import Callable, Generator, Iterator
from typing import TYPE_CHECKING, Any, ClassVar

from recordkit.errors import StaleIndexError
from recordkit.formats.base import (
    WINDOW,
    IndexedFrameReader,
    Offsets,
    Source,
    SupportsRead,
    read_full,
)

if TYPE_CHECKING:
    import mmap

__all__ = ["SequentialFrameReader"]


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

    # -- iteration -------------------------------------------------------------------------------

    def __iter__(self) -> Iterator[bytes]:
        """Yield every record in file order."""
        if self.inflate is not None:
            return self.iter_stream(self.inflate(self.source.stream()))
        buffer = self.source.buffer
        if buffer is not None:
            return self.iter_buffer(buffer)
        if self.source.random_access:
            return self.iter_windows()
        return self.iter_stream(self.source.stream())

    def iter_buffer(self, buffer: mmap.mmap | bytes) -> Iterator[bytes]:
        """Yield the records of a whole file held in ``buffer``."""
        return self.iter_window(buffer, 0, 0, True)

    def iter_windows(self) -> Iterator[bytes]:
        """Yield the records of a random-access source, read in windows of about :data:`WINDOW` bytes.

        A record larger than a window is read in one piece. The source's size is the one seen at
        opening; a file that has shrunk since raises :class:`~recordkit.errors.TruncatedRecordError`.
        """
        size = self.source.size
        assert size is not None  # a random-access source always knows its size
        pread = self.source.pread
        iter_window = self.iter_window
        pos = index = need = 0
        while pos < size:
            left = size - pos
            # A frame that cannot fit in what is left: read a window only, where the loop reports the cut.
            want = need if WINDOW < need <= left else min(WINDOW, left)
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
        self, window: mmap.mmap | bytes, base: int, index: int, final: bool
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
        """Yield the records of a stream, reading in bounded chunks."""
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
            data = read_full(read, length)
            trailer = read_full(read, trailer_size) if trailer_size else b""
            if len(data) < length or len(trailer) < trailer_size:
                raise self.truncated("the file ends inside a record", index, pos)
            if verify:
                check(data, trailer, index, pos)
            yield data
            pos += header_size + length + trailer_size
            index += 1

    # -- random access ---------------------------------------------------------------------------

    @property
    def offsets(self) -> array[int]:
        """The frame-offset table (built on first use): record ``i`` spans ``[offsets[i], offsets[i+1])``."""
        if self._offsets is None:
            if not self.random_access:
                raise self.unsupported("an offset index")
            self._offsets = self._load_offsets() if self._load_offsets is not None else self.scan()
        return self._offsets

    def scan(self) -> array[int]:
        """Build the frame-offset table by reading only the headers (payloads are skipped)."""
        size = self.source.size
        assert size is not None  # a random-access source always knows its size
        pread = self.source.pread
        header_size, extra = self.HEADER, self.HEADER + self.TRAILER
        parse = self.parse_header
        table = array("q")
        append = table.append
        pos = 0
        index = 0
        while pos < size:
            if size - pos < header_size:
                if self.lenient:
                    break
                raise self.truncated("the file ends inside a record header", index, pos)
            end = pos + extra + parse(pread(pos, header_size), index, pos)
            if end > size:
                raise self.truncated("the file ends inside a record", index, pos)
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
        length = self.parse_header(blob[pos : pos + header_size], index, offset)
        stop = pos + header_size + length
        if stop + trailer_size != end:
            raise StaleIndexError(
                f"the index says this record is {end - pos} bytes long, the record header says "
                f"{header_size + length + trailer_size}: the index does not match the file",
                path=self.path,
                index=index,
                offset=offset,
            )
        data: bytes = blob[pos + header_size : stop]
        if self.check_crc and trailer_size:
            self.check_payload(data, blob[stop:end], index, offset)
        return data

    def span(self, index: int) -> tuple[int, int]:
        """Return the byte range ``[start, end)`` of frame ``index``."""
        offsets = self.offsets
        return offsets[index], offsets[index + 1]
