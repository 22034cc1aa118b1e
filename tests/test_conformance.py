"""The shipped conformance suite (recordkit.testing), run once for each built-in format."""

from __future__ import annotations

import gzip
import struct
import zlib

from recordkit.errors import CorruptRecordError
from recordkit.testing import FormatConformance


def _complement(data: bytearray, start: int, stop: int) -> None:
    for i in range(start, stop):
        data[i] ^= 0xFF


def _damage_tfrecord_checksums(data: bytes, records: list[bytes]) -> bytes:
    damaged = bytearray(data)
    pos = 0
    for record in records:
        (length,) = struct.unpack_from("<Q", data, pos)
        assert length == len(record)
        _complement(damaged, pos + 8, pos + 12)
        _complement(damaged, pos + 12 + length, pos + 16 + length)
        pos += 16 + length
    return bytes(damaged)


class TestTFRecord(FormatConformance):
    format_name = "tfrecord"
    suffix = ".tfrecord"

    def damage_checksums(self, data: bytes, records: list[bytes]) -> bytes:
        return _damage_tfrecord_checksums(data, records)


class TestGzipTFRecord(FormatConformance):
    """GZIP TFRecord: sequential; damage to the compressed bytes is caught by zlib, GZIP or TFRecord CRCs."""

    format_name = "tfrecord"
    suffix = ".tfrecord.gz"
    options = {"compression": "gzip"}  # noqa: RUF012 - a class-level constant of the suite
    flips_always_detected = False  # header fields (MTIME, OS) and padding bits are not checksummed

    def record_boundaries(self, records: list[bytes]) -> set[int]:
        return {
            0
        }  # an empty file holds no GZIP member: zero records; any other cut ends mid-stream

    def damage_checksums(self, data: bytes, records: list[bytes]) -> bytes:
        return gzip.compress(_damage_tfrecord_checksums(gzip.decompress(data), records))


class TestZlibTFRecord(TestGzipTFRecord):
    suffix = ".tfrecord.zlib"
    options = {"compression": "zlib"}  # noqa: RUF012

    def damage_checksums(self, data: bytes, records: list[bytes]) -> bytes:
        return zlib.compress(_damage_tfrecord_checksums(zlib.decompress(data), records))


class TestOFRecord(FormatConformance):
    format_name = "ofrecord"
    suffix = ".ofrecord"


class TestFFRecord(FormatConformance):
    format_name = "ffrecord"
    suffix = ".ffr"
    sequential = False
    truncation_error = CorruptRecordError

    def damage_checksums(self, data: bytes, records: list[bytes]) -> bytes:
        damaged = bytearray(data)
        _complement(damaged, 0, 4)
        _complement(damaged, 12, 12 + 4 * len(records))
        return bytes(damaged)
