"""FFRecord: HFAiLab's indexed record files (``.ffr``).

Byte layout (all integers little-endian):

=========  =====  =================================================================
offset     size   field
=========  =====  =================================================================
0          4      ``checksum_meta``: zlib CRC-32 of bytes ``[4, 12 + 12N)``
4          8      ``N`` (int64): number of samples
12         4N     ``crc32[i]``: zlib CRC-32 of sample ``i``
12 + 4N    8N     ``offset[i]``: absolute file offset of sample ``i``
12 + 12N   ...    samples back to back, no padding
=========  =====  =================================================================

Sample ``i`` spans ``[offset[i], offset[i+1])``; the last one runs to the end of the file. An empty file
(N = 0) is exactly 12 bytes. ``checksum_meta == 0`` marks a file from the first (pure-Python) ffrecord
writer: recordkit opens it with a :class:`~recordkit.errors.LegacyFormatWarning` and still checks every
sample's CRC.

The reference reader trusts the header. recordkit checks on open that N fits the file, that the first
sample starts right after the header, that offsets never decrease and stay inside the file
(:class:`~recordkit.errors.HeaderError`), and that the header checksum matches
(:class:`~recordkit.errors.ChecksumError`, unless ``check_crc=False``).

Specification: https://github.com/HFAiLab/ffrecord (``ffrecord/src/writer.cpp`` and ``reader.cpp``).
"""

from __future__ import annotations

import bisect
import contextlib
import errno
import itertools
import operator
import os
import shutil
import struct
import sys
import tempfile
import warnings
import zlib
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import IO, Any, ClassVar, TypeVar

from recordkit.errors import ChecksumError, HeaderError, LegacyFormatWarning
from recordkit.formats import _crc
from recordkit.formats.base import (
    _SHRUNK,
    _WINDOW,
    Capabilities,
    IndexedFrameReader,
    Offsets,
    RecordFormat,
    Source,
    SupportsRead,
    _BufferedFrameWriter,
    read_full,
)
from recordkit.formats.resync import Skip
from recordkit.support.caller import user_stacklevel
from recordkit.support.heap import keep_freed_memory
from recordkit.support.moved import moved_attribute

__all__ = ["FFRecordFormat", "FFRecordFrameReader", "FFRecordFrameWriter", "build_header"]

_PREFIX = struct.Struct("<Iq")
_COUNT = struct.Struct("<q")
_BIG_ENDIAN = sys.byteorder == "big"
_LAST_SAMPLE_SEARCH = 1 << 26
"""How far (64 MiB) recovery looks for the end of a damaged last sample."""
_CRC_BATCH = 1 << 16
"""The most sample ranges recovery checksums at once through prefix CRCs."""
_DIRECT_WRITE = 1 << 16
"""Samples at least this large are written straight to the file instead of being buffered."""
_NO_KERNEL_COPY = {
    errno.EXDEV,
    errno.EINVAL,
    errno.ENOSYS,
    errno.EOPNOTSUPP,
    errno.EBADF,
    errno.EPERM,
}
"""``copy_file_range`` errors that mean "copy some other way", not a failed write."""


def _little_endian(table: array[int]) -> bytes:
    if _BIG_ENDIAN:
        table = array(table.typecode, table)
        table.byteswap()
    return table.tobytes()


def build_header(crcs: array[int], offsets: array[int]) -> bytes:
    """Return the FFRecord header for samples with these CRCs and absolute offsets.

    Examples
    --------
    >>> build_header(array("I"), array("q")).hex(" ")
    '69 df 22 65 00 00 00 00 00 00 00 00'
    """
    meta = _COUNT.pack(len(crcs)) + _little_endian(crcs) + _little_endian(offsets)
    return struct.pack("<I", _crc.crc32(meta)) + meta


_Buffer = TypeVar("_Buffer")


def _read_into(fd: int, view: memoryview, offset: int) -> bool:
    """Fill ``view`` from the file at ``offset``; return whether the file held that many bytes."""
    got = os.preadv(fd, (view,), offset)
    while got < len(view):  # one call reads at most about 2 GiB: read the rest piece by piece
        n = os.preadv(fd, (view[got:],), offset + got)
        if not n:
            return False
        got += n
    return True


class FFRecordFrameReader(IndexedFrameReader):
    """Reads an FFRecord file: the header on construction (random-access sources), samples on demand.

    Parameters
    ----------
    source
        The file. A stream is read sequentially: the header first, then each sample.
    check_crc
        Verify the header checksum and every sample's CRC-32.
    lenient
        Unused (FFRecord files have no partial-header ambiguity).
    """

    def __init__(self, source: Source, *, check_crc: bool = True, lenient: bool = False) -> None:
        super().__init__(source, check_crc=check_crc, lenient=lenient)
        self.crcs = array("I")
        self.offsets = array("q")
        self.size = source.size
        if source.random_access:
            assert source.size is not None
            self._load(source.pread(0, 12), source.pread)

    def _load(self, prefix: bytes, read_at: Any) -> None:
        """Parse and check the header; ``read_at(offset, n)`` reads the rest of it."""
        if len(prefix) < 12:
            raise self.truncated(
                f"the file is {len(prefix)} bytes long, shorter than the 12-byte FFRecord header",
                0,
                0,
            )
        meta, count = _PREFIX.unpack(prefix)
        header_end = 12 + 12 * count
        if count < 0 or (self.size is not None and header_end > self.size):
            raise self._header_error(
                f"the header declares {count} samples, which needs {header_end} header bytes, "
                f"but the file has {self.size}"
            )
        body = read_at(12, 12 * count)
        if len(body) < 12 * count:
            raise self.truncated("the file ends inside the FFRecord header", 0, 12 + len(body))
        if meta and self.check_crc:
            actual = _crc.crc32(body, _crc.crc32(prefix[4:]))
            if actual != meta:
                raise ChecksumError(
                    "FFRecord header checksum mismatch (the header is damaged)",
                    path=self.path,
                    offset=0,
                    expected=meta,
                    actual=actual,
                )
        view = memoryview(
            body
        )  # no copies of the two halves: opening a huge file needs less memory
        self.crcs.frombytes(view[: 4 * count])
        self.offsets.frombytes(view[4 * count :])
        view.release()
        if _BIG_ENDIAN:
            self.crcs.byteswap()
            self.offsets.byteswap()
        self._validate(header_end)
        if not meta:
            warnings.warn(
                f"{self.path or 'this FFRecord file'} has no header checksum (written by an old ffrecord "
                "version); its header cannot be verified. Rewrite it with recordkit to add one.",
                LegacyFormatWarning,
                stacklevel=user_stacklevel(),
            )

    def _header_error(
        self, message: str, index: int | None = None, offset: int | None = None
    ) -> HeaderError:
        """Build a HeaderError; by default it points at sample ``index``'s entry in the offset table."""
        if offset is None and index is not None:
            offset = 12 + 4 * len(self.offsets) + 8 * index
        return HeaderError(message, path=self.path, index=index, offset=offset)

    def _unfinished(self, extra: str) -> HeaderError:
        return self._header_error(
            f"the header declares 0 samples but the file has {extra} after it "
            "(an unfinished file, whose writer never wrote the header?)",
            offset=12,
        )

    def _validate(self, header_end: int) -> None:
        offsets, size = self.offsets, self.size
        if not offsets:
            if size is not None and size != 12:
                raise self._unfinished(f"{size - 12} bytes")
            return
        if offsets[0] != header_end:
            raise self._header_error(
                f"sample 0 starts at byte {offsets[0]}, not right after the header (byte {header_end})",
                0,
            )
        if any(map(operator.gt, offsets, itertools.islice(offsets, 1, None))):
            bad = next(i for i in range(1, len(offsets)) if offsets[i] < offsets[i - 1])
            raise self._header_error(
                f"sample offsets decrease: sample {bad} starts at byte {offsets[bad]}, "
                f"before sample {bad - 1} (byte {offsets[bad - 1]})",
                bad,
            )
        if size is not None and offsets[-1] > size:
            # offsets[0] == header_end <= size here, so the first offset past the end has a predecessor,
            # and that predecessor is the sample cut short.
            cut = next(i for i in range(len(offsets)) if offsets[i] > size) - 1
            raise self._header_error(
                f"sample {cut} ends at byte {offsets[cut + 1]}, past the end of the {size}-byte file "
                "(is the file truncated?)",
                cut,
                offsets[cut],
            )

    def __len__(self) -> int:
        """Return the number of samples."""
        if not self.source.random_access:
            raise self.unsupported("len()", length=True)
        return len(self.offsets)

    def span(self, index: int) -> tuple[int, int]:
        """Return the byte range of sample ``index``."""
        offsets = self.offsets
        end = offsets[index + 1] if index + 1 < len(offsets) else self.size
        assert end is not None
        return offsets[index], end

    def decode(self, blob: Any, pos: int, end: int, index: int, offset: int) -> bytes:
        """Return sample ``index`` from ``blob[pos:end]``, checking its CRC-32."""
        data: bytes = blob[pos:end]
        if len(data) != end - pos:
            raise self.truncated(
                "the file is shorter than its header says (did it change?)", index, offset
            )
        if self.check_crc:
            self.verify(data, index, offset)
        return data

    def decode_many(self, blob: Any, base: int, indices: Sequence[int]) -> list[bytes]:
        """Return the samples at ``indices`` from ``blob`` (the file's bytes from offset ``base``)."""
        return list(self._samples(blob, base, indices))

    def _samples(self, blob: Any, base: int, indices: Iterable[int]) -> Iterator[bytes]:
        """Yield the samples at ``indices`` (the hot loop), checking each CRC-32.

        ``blob`` holds the file's bytes from offset ``base``; ``None`` reads each sample on its own.
        """
        offsets, crcs = self.offsets, self.crcs
        crc32 = _crc.crc32
        check = self.check_crc
        last = len(offsets) - 1
        size: int = self.size  # type: ignore[assignment]
        pread, fd, shift = os.pread, self.source.descriptor(), self.source.base
        for index in indices:
            start = offsets[index]
            end = offsets[index + 1] if index < last else size
            if blob is None:
                data = pread(fd, end - start, shift + start)  # type: ignore[arg-type]
            else:
                data = blob[start - base : end - base]
            if len(data) != end - start:
                data = self.refetch(index, start, end)
            if check and crc32(data) != crcs[index]:
                self.verify(data, index, start)
            yield data

    def read_into(
        self, indices: Iterable[int], allocate: Callable[[int], _Buffer]
    ) -> list[_Buffer]:
        """Return the samples at ``indices``, each read into a buffer of its own that ``allocate`` gives.

        ``allocate(n)`` returns a writable buffer of ``n`` bytes (a ``bytearray``, a numpy ``uint8``
        array). From a local file the kernel reads each sample straight into its buffer (``os.preadv``),
        and its CRC-32 is checked there (with ``check_crc``): no intermediate ``bytes``, as ffrecord's C++
        reader reads. From any other source the samples are read as :meth:`read_many` reads them and
        copied in.

        Parameters
        ----------
        indices
            Sample numbers of this file, each in ``range(len(self))``.
        allocate
            Makes the buffer of one sample.

        Raises
        ------
        ChecksumError
            A sample's CRC-32 differs from its header's.
        TruncatedRecordError
            The file is shorter than when it was opened.
        """
        keep_freed_memory()
        fd = self.source.descriptor() if hasattr(os, "preadv") else None
        if fd is None:
            buffers = []
            for data in self.read_many(list(indices)):
                buffer = allocate(len(data))
                memoryview(buffer)[:] = data  # type: ignore[arg-type]
                buffers.append(buffer)
            return buffers
        offsets, size, base = self.offsets, self.size, self.source.base
        assert size is not None
        last = len(offsets) - 1
        check, read_into, verify = self.check_crc, _read_into, self.verify
        buffers = []
        for index in indices:
            start = offsets[index]
            buffer = allocate((offsets[index + 1] if index < last else size) - start)
            if not read_into(fd, memoryview(buffer), base + start):  # type: ignore[arg-type]
                raise self.truncated(_SHRUNK, index, start)
            if check:
                verify(buffer, index, start)
            buffers.append(buffer)
        return buffers

    def verify(self, data: Any, index: int, offset: int) -> None:
        """Raise :class:`~recordkit.errors.ChecksumError` unless ``data`` has sample ``index``'s CRC-32.

        ``data`` is the sample's bytes (any buffer), read from byte ``offset`` (named in the error).
        """
        actual = _crc.crc32(data)
        if actual != self.crcs[index]:
            raise ChecksumError(
                "sample checksum mismatch",
                path=self.path,
                index=index,
                offset=offset,
                expected=self.crcs[index],
                actual=actual,
            )

    def __iter__(self) -> Iterator[bytes]:
        """Yield every sample in order."""
        buffer = self.source.buffer
        if buffer is not None:
            return self._samples(buffer, 0, range(len(self.offsets)))
        if self.source.random_access:
            return self._iter_windows()
        return self._iter_stream(self.source.stream())

    def _iter_windows(self) -> Iterator[bytes]:
        """Read runs of neighbouring samples of about ``_WINDOW`` bytes at once (a larger sample alone)."""
        offsets, size = self.offsets, self.size
        assert size is not None
        pread, samples = self.source.pread, self._samples
        count = len(offsets)
        first = 0
        while first < count:
            base = offsets[first]
            # The samples first..stop-1 end at or before base + _WINDOW (at least one sample).
            stop = bisect.bisect_right(offsets, base + _WINDOW, first + 1) - 1
            if stop == count - 1 and size <= base + _WINDOW:
                stop = count
            stop = max(stop, first + 1)
            end = offsets[stop] if stop < count else size
            yield from samples(pread(base, end - base), base, range(first, stop))
            first = stop

    def _iter_stream(self, stream: SupportsRead) -> Iterator[bytes]:
        read = stream.read

        def read_header(offset: int, n: int) -> bytes:
            return read_full(read, n)

        self._load(read_full(read, 12), read_header)
        offsets = self.offsets
        count = len(offsets)
        if not count and read(1):
            # The size check a seekable file gets on open, made when the stream shows its extra bytes.
            raise self._unfinished("more bytes")
        for index in range(count):
            start = offsets[index]
            if index + 1 < count:
                length = offsets[index + 1] - start
                data = read_full(read, length)
                if len(data) < length:
                    raise self.truncated("the file ends inside a sample", index, start)
            else:
                data = read_full(read, 1 << 62)
            if self.check_crc:
                self.verify(data, index, start)
            yield data


def _spill_beside(fileobj: IO[bytes]) -> IO[bytes]:
    """Return an anonymous temporary file for samples, in ``fileobj``'s directory when it has one.

    Beside the output, the samples use the file system (and free space) the file goes to, and
    :func:`_append_file` can copy them inside the kernel. The file has no name (``O_TMPFILE`` where the
    system has it, else it is unlinked at once): nothing is left behind, whatever happens.
    """
    name = getattr(fileobj, "name", None)
    if isinstance(name, str) and os.path.isabs(name):
        try:
            return tempfile.TemporaryFile(prefix=".recordkit-ffrecord-", dir=os.path.dirname(name))
        except OSError:
            pass
    return tempfile.TemporaryFile(prefix="recordkit-ffrecord-")


def _append_file(source: IO[bytes], target: IO[bytes]) -> None:
    """Copy all of ``source`` to ``target``'s position, inside the kernel where the system allows it."""
    source.flush()
    size = source.seek(0, os.SEEK_END)
    copied = 0
    copy = getattr(os, "copy_file_range", None)
    try:
        target.flush()
        start = target.tell()
        fds = (source.fileno(), target.fileno())
    except (OSError, AttributeError, ValueError):
        fds = None  # not a real file: copied in user space below
    if copy is not None and fds is not None:
        try:
            while copied < size:
                done = copy(*fds, size - copied, copied, start + copied)
                if not done:
                    break
                copied += done
        except OSError as exc:
            # Two file systems on an old kernel, or one that cannot: the rest in user space.
            if exc.errno not in _NO_KERNEL_COPY:
                raise
        target.seek(start + copied)
    source.seek(copied)
    shutil.copyfileobj(source, target, 1 << 20)


class FFRecordFrameWriter(_BufferedFrameWriter):
    """Writes an FFRecord file.

    With ``n`` known and a seekable file, samples are written in place after a reserved header, which is
    filled in by :meth:`close`. Otherwise the header's size is unknown until the end: samples go to an
    anonymous temporary file in the output's directory, and :meth:`close` writes the header and appends
    the samples with a kernel-side copy (``os.copy_file_range``) where the system has one.

    Parameters
    ----------
    fileobj
        Where to write (positioned at the start of the FFRecord data).
    n
        The number of samples that will be written, or ``None``.
    """

    def __init__(self, fileobj: IO[bytes], *, n: int | None = None) -> None:
        super().__init__(fileobj)
        if n is not None and (isinstance(n, bool) or operator.index(n) < 0):
            raise ValueError(f"n must be a non-negative int, not {n!r}")
        self.n = n
        self.crcs = array("I")
        self.lengths = array("q")
        self._spill: IO[bytes] | None = None
        self._base = 0
        seekable = False
        if n is not None:
            try:
                seekable = fileobj.seekable()
            except (AttributeError, OSError):
                seekable = False
        if seekable:
            assert n is not None
            self._base = fileobj.tell()
            fileobj.write(bytes(12 + 12 * n))
        else:
            self._spill = _spill_beside(fileobj)
            self._out = self._spill

    def write(self, data: bytes) -> None:
        """Append one sample.

        Raises
        ------
        ValueError
            If more than ``n`` samples are written.
        """
        if self.n is not None and self.count >= self.n:
            raise ValueError(f"this FFRecord writer was told n={self.n} samples; cannot write more")
        self.crcs.append(_crc.crc32(data))
        self.lengths.append(len(data))
        if len(data) >= _DIRECT_WRITE:
            # Joining a large sample with its neighbours would copy it once more for nothing.
            self._drain()
            self._out.write(data)
            return
        self._parts.append(data)
        self._pending += len(data)
        if self._pending >= self.BUFFER_SIZE:
            self._drain()

    def close(self) -> None:
        """Write the header (and, when spilling, the samples) to the file.

        Raises
        ------
        ValueError
            If ``n`` was given and a different number of samples was written.
        """
        self._drain()
        if self.n is not None and self.count != self.n:
            self.abort()
            raise ValueError(
                f"this FFRecord writer was told n={self.n} samples but got {self.count}"
            )
        offsets = array("q")
        position = 12 + 12 * self.count
        for length in self.lengths:
            offsets.append(position)
            position += length
        header = build_header(self.crcs, offsets)
        if self._spill is None:
            self.fileobj.seek(self._base)
            self.fileobj.write(header)
            self.fileobj.seek(self._base + position)
            return
        try:
            self.fileobj.write(header)
            _append_file(self._spill, self.fileobj)
        except BaseException:
            self.abort()  # a full disk: the spill file goes, whatever closing it says
            raise
        spill, self._spill = self._spill, None
        spill.close()

    def abort(self) -> None:
        """Drop buffered samples and the spill file. Never raises on an I/O error.

        Closing the spill file flushes what it still buffers, which fails on a full disk; the file has no
        name (see :func:`_spill_beside`), so closing its descriptor is all there is to do.
        """
        super().abort()
        spill, self._spill = self._spill, None
        if spill is not None:
            with contextlib.suppress(OSError):
                spill.close()


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
    from recordkit.formats import rangecrc

    ranges = rangecrc.RangeCRC(buffer, lambda crc, data: zlib.crc32(data, crc), rangecrc.CRC32_POLY)
    for at in range(0, len(spans), _CRC_BATCH):
        batch = spans[at : at + _CRC_BATCH]
        yield from ranges.crcs([s for _, s, _ in batch], [e for _, _, e in batch]).tolist()


def _last_sample_end(buffer: Any, start: int, end: int, crc: int) -> int | None:
    """The shortest ``stop`` in ``[start, end)`` with ``crc32(buffer[start:stop]) == crc``, or ``None``."""
    running = 0
    for stop in range(start, min(end, start + _LAST_SAMPLE_SEARCH)):
        if running == crc:
            return stop
        running = zlib.crc32(buffer[stop : stop + 1], running)
    return None


class FFRecordFormat(RecordFormat):
    """The FFRecord format."""

    name: ClassVar[str] = "ffrecord"
    extensions: ClassVar[tuple[str, ...]] = (".ffr",)
    capabilities: ClassVar[Capabilities] = Capabilities(
        random_access=True, checksums=True, empty_records=True, self_indexed=True
    )
    overhead: ClassVar[int] = 12
    shard_pattern: ClassVar[str] = "PART_{shard:05d}.ffr"
    sniff_priority: ClassVar[int] = 20

    def salvage(self, buffer: Any, size: int, skip: Skip) -> Iterator[bytes]:
        """Yield the samples whose CRC-32 matches, located by the header's offsets.

        A damaged sample (or header entry) loses only that sample, reported with its sample number; a
        header whose sample count cannot fit the file makes the whole file unrecoverable.
        """
        count = _COUNT.unpack_from(buffer, 4)[0] if size >= 12 else -1
        header_end = 12 + 12 * count
        if count < 0 or header_end > size:
            if size:
                skip(0, size, f"the header's sample count ({count}) does not fit the file", 0)
            return
        if count == 0 and size > 12:
            skip(12, size, "the header declares no samples (an unfinished file?)", 0)
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
            skip(low, max(low, high), reason, i)
        for (i, start, end), actual in zip(spans, _sample_crcs(buffer, size, spans), strict=True):
            if actual == crcs[i]:
                yield buffer[start:end]
                continue
            # The last sample runs to the end of the file: bytes appended after it make it fail.
            found = _last_sample_end(buffer, start, end, crcs[i]) if i + 1 == count else None
            if found is not None:
                yield buffer[start:found]
                skip(found, end, "bytes after the last sample", i + 1)
            else:
                skip(start, end, "sample checksum mismatch", i)

    def sniff(self, head: bytes, size: int | None) -> bool | int:
        """Recognise a header whose sample count fits the file and whose checksum (or layout) verifies."""
        if len(head) < 12:
            return False
        meta, count = _PREFIX.unpack_from(head)
        header_end = 12 + 12 * count
        if count < 0 or (size is not None and header_end > size):
            return False
        if len(head) < header_end:
            return int(header_end)
        if meta:
            return bool(_crc.crc32(head[4:header_end]) == meta)
        # A legacy file without a header checksum: check the layout instead.
        offsets = array("q")
        offsets.frombytes(head[12 + 4 * count : header_end])
        if _BIG_ENDIAN:
            offsets.byteswap()
        if not offsets:
            return size == 12 and head[:12] == bytes(12)
        return bool(offsets[0] == header_end and not any(map(operator.gt, offsets, offsets[1:])))

    def reader(
        self,
        source: Source,
        *,
        check_crc: bool = True,
        lenient: bool = False,
        compression: str = "",
        offsets: Offsets | None = None,
    ) -> FFRecordFrameReader:
        """Return an :class:`FFRecordFrameReader` (the header is read and checked now, for seekable sources)."""
        return FFRecordFrameReader(source, check_crc=check_crc, lenient=lenient)

    def writer(
        self,
        fileobj: IO[bytes],
        *,
        compression: str = "",
        level: int | None = None,
        n: int | None = None,
    ) -> FFRecordFrameWriter:
        """Return an :class:`FFRecordFrameWriter`."""
        return FFRecordFrameWriter(fileobj, n=n)


def __getattr__(name: str) -> Any:
    """A name renamed since 0.2 (the frame reader and writer), with a warning naming the new one (PEP 562)."""
    return moved_attribute(__name__, name)
