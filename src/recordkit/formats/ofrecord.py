"""OFRecord: OneFlow's length-prefixed record files.

Byte layout of one record (little-endian); a file (OneFlow calls it a *part*, e.g. ``part-0``) is records
back to back, with no file header, no padding and no checksum:

======  ======  =================================================
offset  size    field
======  ======  =================================================
0       8       ``length`` (int64, > 0): payload size in bytes
8       length  payload: a serialized ``oneflow.OFRecord`` message
======  ======  =================================================

OneFlow aborts on a zero or negative length, so the writer refuses empty records (an ``OFRecord`` without
features serializes to zero bytes). OneFlow's legacy reader capped records at 64 MiB; recordkit has no cap
but never allocates more than what is left in the file, so a damaged length cannot exhaust memory.

Because there is no checksum, a flipped payload bit cannot be detected here: it surfaces (at best) as a
:class:`~recordkit.errors.DecodeError` when the payload is parsed.

Specification: ``oneflow/core/record/record.proto`` and ``oneflow/user/data/ofrecord_dataset.h``.
"""

from __future__ import annotations

import struct
from collections.abc import Generator
from typing import IO, Any, ClassVar

from recordkit.errors import CorruptRecordError
from recordkit.formats._varint import varint_at
from recordkit.formats.base import (
    Capabilities,
    Offsets,
    RecordFormat,
    Source,
    _BufferedFrameWriter,
)
from recordkit.formats.payloads import OFRECORD_PAYLOAD
from recordkit.formats.resync import Resync
from recordkit.formats.sequential import SequentialFrameReader
from recordkit.support.moved import moved_attribute

__all__ = ["OFRecordFormat", "OFRecordFrameReader", "OFRecordFrameWriter"]

_LENGTH = struct.Struct("<q")
_MAP_ENTRY_TAG = 0x0A  # field 1 (``feature`` map), wire type 2 (length-delimited)


class OFRecordFrameReader(SequentialFrameReader):
    """Reads OFRecord frames; see :class:`~recordkit.formats.sequential.SequentialFrameReader`."""

    HEADER: ClassVar[int] = 8
    TRAILER: ClassVar[int] = 0

    def parse_header(self, header: bytes, index: int, offset: int) -> int:
        """Return the payload length, which must be positive."""
        length = int(_LENGTH.unpack(header)[0])
        if length <= 0:
            raise self._bad_length(length, index, offset)
        return length

    def _bad_length(self, length: int, index: int, offset: int) -> CorruptRecordError:
        return CorruptRecordError(
            f"invalid record length {length} (OFRecord lengths are positive; is this an OFRecord file?)",
            path=self.path,
            index=index,
            offset=offset,
        )

    def iter_window(
        self, window: Any, base: int, index: int, final: bool
    ) -> Generator[bytes, None, tuple[int, int, int]]:
        """Yield the whole records in ``window`` (the hot loop).

        See :meth:`SequentialFrameReader.iter_window` for the parameters and the result.
        """
        unpack = _LENGTH.unpack_from
        size = len(window)
        pos = 0
        while pos < size:
            if size - pos < 8:
                if not final:
                    return base + pos, index, 8
                if self.lenient:
                    return base + pos, index, 0
                raise self.truncated("the file ends inside a record header", index, base + pos)
            length = unpack(window, pos)[0]
            if length <= 0:
                raise self._bad_length(length, index, base + pos)
            stop = pos + 8 + length
            if stop > size:
                if not final:
                    return base + pos, index, stop - pos
                raise self.truncated("the file ends inside a record", index, base + pos)
            yield window[pos + 8 : stop]
            pos = stop
            index += 1
        return base + pos, index, 0


class OFRecordFrameWriter(_BufferedFrameWriter):
    """Writes OFRecord frames; empty records are refused."""

    def write(self, data: bytes) -> None:
        """Append one record.

        Raises
        ------
        ValueError
            If ``data`` is empty: OneFlow cannot read a zero-length record.
        """
        if not data:
            raise ValueError(
                "OFRecord cannot store an empty record (OneFlow aborts on a zero length); "
                "an OFRecord message with no features serializes to zero bytes"
            )
        self._parts += (_LENGTH.pack(len(data)), data)
        self._pending += len(data) + 8
        if self._pending >= self.BUFFER_SIZE:
            self._drain()


def _plausible_length(buffer: Any, pos: int, size: int | None) -> int | None:
    """The payload length of a plausible frame header at ``pos``: positive, fitting the file, and followed
    by the tag of the ``feature`` map, the only field of an ``OFRecord``; else ``None``."""
    if len(buffer) - pos < 9:
        return None
    length: int = _LENGTH.unpack_from(buffer, pos)[0]
    if (
        length <= 0
        or (size is not None and 8 + length > size - pos)
        or buffer[pos + 8] != _MAP_ENTRY_TAG
    ):
        return None
    return length


class _Resync(Resync):
    """Finds plausible OFRecord frames in a damaged file (there is no checksum: recovery is heuristic).

    A frame is accepted when its length is positive and fits the file, and its payload parses as an
    ``OFRecord`` with at least one feature (protobuf is imported here, by recovery only). After damage the
    next frame must also be followed by the end of the file or by another such frame.
    """

    def __init__(self, buffer: Any, size: int) -> None:
        super().__init__(buffer, size)
        from recordkit._proto.oneflow import record_pb2

        self._parse = record_pb2.OFRecord.FromString

    def frame(self, pos: int) -> tuple[int, int, int] | None:
        """The payload range and end of a plausible frame at ``pos``."""
        from google.protobuf.message import DecodeError

        length = _plausible_length(self.buffer, pos, self.size)
        if length is None:
            return None
        try:
            features = self._parse(self.buffer[pos + 8 : pos + 8 + length]).feature
        except DecodeError:
            return None
        # A feature name that is not UTF-8 comes back as bytes: not an OFRecord OneFlow could read.
        if not features or not all(isinstance(name, str) for name in features):
            return None
        return pos + 8, pos + 8 + length, pos + 8 + length

    def _anchor(self, pos: int) -> bool:
        """Whether a frame at ``pos`` is trusted after damage: the end of the file or a frame follows it."""
        buffer, size = self.buffer, self.size
        length = _plausible_length(buffer, pos, size)
        if length is None:
            return False
        end = pos + 8 + length
        # Both headers are checked before either payload is parsed: parsing costs the payload's length.
        if end != size and _plausible_length(buffer, end, size) is None:
            return False
        return self.frame(pos) is not None and (end == size or self.frame(end) is not None)

    def next_start(self, pos: int) -> int:
        """The first position from ``pos`` on where a trusted frame starts, else ``size``."""
        while pos < self.size and not self._anchor(pos):
            pos += 1
        return pos


class OFRecordFormat(RecordFormat):
    """The OFRecord format."""

    name: ClassVar[str] = "ofrecord"
    extensions: ClassVar[tuple[str, ...]] = (".ofrecord",)
    capabilities: ClassVar[Capabilities] = Capabilities(random_access=True, sidecar_index=True)
    overhead: ClassVar[int] = 8
    payload: ClassVar[str | None] = OFRECORD_PAYLOAD
    shard_pattern: ClassVar[str] = "part-{shard}"
    sniff_priority: ClassVar[int] = 10

    def sniff(self, head: bytes, size: int | None) -> bool | int:
        """Recognise a positive first length that fits the file, followed by an ``OFRecord`` map entry."""
        length = _plausible_length(head, 0, size)
        if length is None:
            return False
        entry = varint_at(head, 9)
        return entry is None or entry[0] + entry[1] - 8 <= length

    def resync(self, buffer: Any, size: int) -> Resync:
        """Return the OFRecord frame finder of recovery (see :class:`_Resync`)."""
        return _Resync(buffer, size)

    def reader(
        self,
        source: Source,
        *,
        check_crc: bool = True,
        lenient: bool = False,
        compression: str = "",
        offsets: Offsets | None = None,
    ) -> OFRecordFrameReader:
        """Return an :class:`OFRecordFrameReader` (OFRecord has no checksums; ``check_crc`` changes nothing)."""
        return OFRecordFrameReader(source, check_crc=check_crc, lenient=lenient, offsets=offsets)

    def writer(
        self,
        fileobj: IO[bytes],
        *,
        compression: str = "",
        level: int | None = None,
        n: int | None = None,
    ) -> OFRecordFrameWriter:
        """Return an :class:`OFRecordFrameWriter`."""
        return OFRecordFrameWriter(fileobj)


def __getattr__(name: str) -> Any:
    """A name renamed since 0.2 (the frame reader and writer), with a warning naming the new one (PEP 562)."""
    return moved_attribute(__name__, name)
