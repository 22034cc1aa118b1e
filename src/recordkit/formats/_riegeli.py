"""Riegeli/records framing: block headers, chunk headers and simple chunks.

Specification: riegeli's ``doc/riegeli_records_file_format.md``. A file is a sequence of chunks; a 24-byte
block header interrupts them at every multiple of 64 KiB (:data:`BLOCK`). A chunk is a 40-byte header
(its hash, the size and hash of its data, its type, its record count and the records' total size), its
data and padding. Every number is little-endian; every hash is a HighwayHash-64 under Riegeli's key.

This module reads chunks at known offsets (ArrayRecord's footer lists them) and decodes *simple* chunks
(type ``r``: a compression byte, the compressed record sizes, the compressed record values). *Transposed*
chunks (type ``t``) are refused: their encoding is not specified (the specification says "TODO: Document
this"). Signature (``s``), metadata (``m``) and padding (``p``) chunks hold no records.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import NamedTuple

from recordkit.errors import (
    ChecksumError,
    CorruptRecordError,
    HeaderError,
    TruncatedRecordError,
    UnsupportedOperationError,
)
from recordkit.formats._decompress import NAMES, DecompressionFailed, decompressor
from recordkit.formats._highwayhash import highwayhash64

__all__ = [
    "BLOCK",
    "BLOCK_HEADER",
    "CHUNK_HEADER",
    "SIGNATURE",
    "Chunk",
    "ChunkReader",
    "Malformed",
    "chunk_end",
    "read_varint",
]

BLOCK = 1 << 16
"""Riegeli's block size: a block header starts at every multiple of it."""
BLOCK_HEADER = 24
USABLE = BLOCK - BLOCK_HEADER
CHUNK_HEADER = 40
SIGNATURE = bytes.fromhex(
    "83af70d10d884a3f 0000000000000000 4000000000000000 91bac23c9287e1a9"
    "0000000000000000 e19f13c0e9b1c372 7300000000000000 0000000000000000"
)
"""The first 64 bytes of every Riegeli/records file: a block header and the file signature chunk."""

SIMPLE, TRANSPOSED, SIGNATURE_CHUNK, METADATA, PADDING = 0x72, 0x74, 0x73, 0x6D, 0x70
_HEADER = struct.Struct("<QQQQQ")
_BLOCK_HEADER = struct.Struct("<QQQ")


class Malformed(ValueError):
    """Chunk data that cannot be decoded (the caller locates it)."""


class Chunk(NamedTuple):
    """One chunk: where it begins, its header fields and its data (block headers removed)."""

    begin: int
    chunk_type: int
    num_records: int
    decoded_size: int
    data: bytes
    end: int


def chunk_end(begin: int, data_size: int, num_records: int) -> int:
    """Return the end of the chunk beginning at ``begin`` (the specification's formula)."""
    size = CHUNK_HEADER + data_size
    overhead = (size + (begin + USABLE - 1) % BLOCK) // USABLE
    end = begin + size + overhead * BLOCK_HEADER
    at = begin + num_records
    remaining = BLOCK - 1 - (at + BLOCK - 1) % BLOCK
    return max(end, at + max(remaining - (USABLE - 1), 0))


def read_varint(data: bytes, pos: int) -> tuple[int, int]:
    """Return the varint64 at ``data[pos:]`` and the position after it.

    Raises
    ------
    Malformed
        The varint runs past the data or past 10 bytes.
    """
    result = shift = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise Malformed("a varint runs past its buffer")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7


def _inflate(kind: int, block: bytes) -> bytes:
    """Decompress one block prefixed with its decompressed size."""
    size, pos = read_varint(block, 0)
    try:
        out = decompressor(kind)(block[pos:], size)
    except DecompressionFailed as exc:
        raise Malformed(f"{NAMES[kind]} data does not decompress ({exc})") from None
    if len(out) != size:
        raise Malformed(f"{NAMES[kind]} data decompresses to {len(out)} bytes, not {size}")
    return out


def simple_records(data: bytes, num_records: int, decoded_size: int) -> list[bytes]:
    """Return the records of a simple chunk's data.

    Raises
    ------
    Malformed
        The data is inconsistent with itself or with the header's counts.
    UnsupportedOperationError
        The compression byte names no codec Riegeli defines.
    ImportError
        The codec's package is not installed.
    """
    if not data:
        raise Malformed("a simple chunk with no data")
    kind = data[0]
    if kind and kind not in NAMES:
        raise Malformed(f"unknown compression type {kind:#04x}")
    sizes_size, pos = read_varint(data, 1)
    if pos + sizes_size > len(data):
        raise Malformed("the record sizes run past the chunk data")
    sizes = data[pos : pos + sizes_size]
    values = data[pos + sizes_size :]
    if kind:
        sizes, values = _inflate(kind, sizes), _inflate(kind, values)
    records = []
    at = start = 0
    end = len(sizes)
    for _ in range(num_records):
        if at < end and sizes[at] < 0x80:  # most records are shorter than 128 bytes
            length = sizes[at]
            at += 1
        else:
            length, at = read_varint(sizes, at)
        records.append(values[start : start + length])
        start += length
    if at != len(sizes) or start != decoded_size or len(values) != decoded_size:
        raise Malformed(
            f"the record sizes ({start} bytes in {num_records} records, {len(sizes) - at} bytes left) "
            f"do not match the chunk header ({decoded_size} bytes) or the values ({len(values)} bytes)"
        )
    return records


class ChunkReader:
    """Reads chunks through ``pread(offset, n)`` (fewer bytes at the end of the file).

    Parameters
    ----------
    pread
        Reads the file.
    path
        Named in errors.
    check_hashes
        Verify the hash of every chunk header and of every block header a chunk crosses.
    check_data
        Also verify the hash of each chunk's data.
    """

    def __init__(
        self,
        pread: Callable[[int, int], bytes],
        path: str | None,
        *,
        check_hashes: bool = True,
        check_data: bool = False,
    ) -> None:
        self.pread = pread
        self.path = path
        self.check_hashes = check_hashes
        self.check_data = check_data

    def _gather(self, pos: int, n: int, index: int | None) -> tuple[bytes, int]:
        """Return ``n`` bytes of chunk content from ``pos`` on (skipping block headers), and the end."""
        parts = []
        while n > 0:
            inside = pos % BLOCK
            if inside < BLOCK_HEADER:
                block = pos - inside
                if self.check_hashes:
                    self._check_block_header(block, index)
                pos = block + BLOCK_HEADER
                continue
            take = min(n, BLOCK - inside)
            piece = self.pread(pos, take)
            if len(piece) < take:
                raise TruncatedRecordError(
                    "the file ends inside a chunk (is it truncated?)",
                    path=self.path,
                    index=index,
                    offset=pos + len(piece),
                )
            parts.append(piece)
            pos += take
            n -= take
        return (parts[0] if len(parts) == 1 else b"".join(parts)), pos

    def _check_block_header(self, block: int, index: int | None) -> None:
        header = self.pread(block, BLOCK_HEADER)
        if len(header) < BLOCK_HEADER:
            raise TruncatedRecordError(
                "the file ends inside a block header", path=self.path, index=index, offset=block
            )
        stored = _BLOCK_HEADER.unpack(header)[0]
        actual = highwayhash64(header[8:])
        if stored != actual:
            raise ChecksumError(
                "Riegeli block header hash mismatch (the block header is damaged)",
                path=self.path,
                index=index,
                offset=block,
                expected=stored,
                actual=actual,
            )

    def chunk(self, begin: int, index: int | None = None) -> Chunk:
        """Read the chunk beginning at ``begin``; ``index`` (its first record's number) is named in errors.

        Raises
        ------
        ChecksumError
            A header or data hash does not match.
        TruncatedRecordError
            The file ends inside the chunk.
        """
        header, pos = self._gather(begin, CHUNK_HEADER, index)
        stored, data_size, data_hash, type_and_count, decoded_size = _HEADER.unpack(header)
        if self.check_hashes:
            actual = highwayhash64(header[8:])
            if stored != actual:
                raise ChecksumError(
                    "Riegeli chunk header hash mismatch (the chunk header is damaged)",
                    path=self.path,
                    index=index,
                    offset=begin,
                    expected=stored,
                    actual=actual,
                )
        data, _ = self._gather(pos, data_size, index)
        if self.check_data:
            actual = highwayhash64(data)
            if actual != data_hash:
                raise ChecksumError(
                    "Riegeli chunk data hash mismatch (the chunk's data is damaged)",
                    path=self.path,
                    index=index,
                    offset=begin,
                    expected=data_hash,
                    actual=actual,
                )
        num_records = type_and_count >> 8
        return Chunk(
            begin,
            type_and_count & 0xFF,
            num_records,
            decoded_size,
            data,
            chunk_end(begin, data_size, num_records),
        )

    def records(self, chunk: Chunk, index: int | None = None) -> list[bytes]:
        """Return the records of ``chunk`` (none for signature, metadata and padding chunks).

        Raises
        ------
        CorruptRecordError
            The chunk's data does not decode, or its type is unknown.
        UnsupportedOperationError
            A transposed chunk.
        """
        kind = chunk.chunk_type
        if kind == SIMPLE:
            try:
                return simple_records(chunk.data, chunk.num_records, chunk.decoded_size)
            except Malformed as exc:
                raise CorruptRecordError(
                    f"a Riegeli simple chunk does not decode: {exc}",
                    path=self.path,
                    index=index,
                    offset=chunk.begin,
                ) from None
        if kind == TRANSPOSED:
            raise UnsupportedOperationError(
                f"{self.path or 'this file'}: the chunk at byte {chunk.begin} (record {index}) is a "
                "Riegeli transposed chunk (ArrayRecord's transpose:true option), whose encoding the "
                "Riegeli specification leaves undocumented; recordkit reads simple chunks only. Rewrite "
                "the file without transpose:true, or read it with array_record."
            )
        if kind in (SIGNATURE_CHUNK, METADATA, PADDING) and not chunk.num_records:
            return []
        raise HeaderError(
            f"unknown Riegeli chunk type {kind:#04x} with {chunk.num_records} records",
            path=self.path,
            index=index,
            offset=chunk.begin,
        )
