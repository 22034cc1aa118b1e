"""Riegeli/records framing: block headers, chunk headers and simple chunks.

Specification: riegeli's ``doc/riegeli_records_file_format.md``. A file is a sequence of chunks; a 24-byte
block header interrupts them at every multiple of 64 KiB (:data:`BLOCK`). A chunk is a 40-byte header
(its hash, the size and hash of its data, its type, its record count and the records' total size), its
data and padding. Every number is little-endian; every hash is a HighwayHash-64 under Riegeli's key.

This module reads chunks at known offsets (ArrayRecord's footer lists them) and decodes *simple* chunks
(type ``r``: a compression byte, the compressed record sizes, the compressed record values) and, through
:mod:`recordkit.formats._riegeli_transpose`, *transposed* chunks (type ``t``: records that are protocol
buffers, stored field by field; the specification says "TODO: Document this", so that module describes the
encoding). Signature (``s``), metadata (``m``) and padding (``p``) chunks hold no records.
"""

from __future__ import annotations

import itertools
import struct
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from recordkit.errors import (
    ChecksumError,
    CorruptRecordError,
    HeaderError,
    TruncatedRecordError,
)
from recordkit.formats._decompress import NAMES, inflate
from recordkit.formats._highwayhash import highwayhash64_many
from recordkit.formats._riegeli_transpose import transposed_parts
from recordkit.formats._varint import Malformed, varint_at
from recordkit.support.varints import VarintError, decode_all

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


_Check = tuple[int | None, str, int, bytes, int]
"""A hash to verify: the first record named in errors, what is hashed, its offset, the bytes, the hash stored."""
_MISMATCH = {
    "block": "Riegeli block header hash mismatch (the block header is damaged)",
    "chunk": "Riegeli chunk header hash mismatch (the chunk header is damaged)",
    "data": "Riegeli chunk data hash mismatch (the chunk's data is damaged)",
}


def _header_check(index: int | None, what: str, offset: int, header: bytes) -> _Check:
    """The check of a block or chunk header: its first eight bytes are the hash of the rest."""
    return index, what, offset, header[8:], int.from_bytes(header[:8], "little")


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
    found = varint_at(data, pos)
    if found is None:
        raise Malformed("a varint runs past its buffer")
    return found


def simple_parts(
    data: bytes, num_records: int, decoded_size: int, *, array: bool = False
) -> tuple[Any, bytes]:
    """Return where each record of a simple chunk's data starts (and the end), and the records' bytes.

    The bounds are a list of ints; with ``array`` they are, for a chunk of 64 records or more, a numpy
    ``int64`` array instead (no Python int per record: for reading a few records out of a large chunk).

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
        sizes = inflate(kind, sizes, "record sizes", num_records, 10 * num_records)
        values = inflate(kind, values, "records", decoded_size, decoded_size)
    if num_records >= 64:  # many records: the sizes decoded with numpy
        import numpy as np

        try:
            lengths = decode_all(np.frombuffer(sizes, np.uint8))[0]
        except VarintError as exc:
            raise Malformed(str(exc)) from None
        bounds: Any = [0]
        if len(lengths) == num_records and array:
            if lengths.max(initial=0) <= decoded_size:  # then the sum cannot wrap around
                bounds = np.zeros(num_records + 1, np.int64)
                np.cumsum(lengths.astype(np.int64), out=bounds[1:])
        elif len(lengths) == num_records:
            bounds += np.cumsum(lengths, dtype=np.uint64).tolist()
        at = len(sizes)
    else:
        bounds = [0]
        at = 0
        end = len(sizes)
        for _ in range(num_records):
            if at < end and sizes[at] < 0x80:  # most records are shorter than 128 bytes
                length = sizes[at]
                at += 1
            else:
                length, at = read_varint(sizes, at)
            bounds.append(bounds[-1] + length)
    if (
        len(bounds) != num_records + 1
        or at != len(sizes)
        or bounds[-1] != decoded_size
        or len(values) != decoded_size
    ):
        raise Malformed(
            f"the record sizes ({bounds[-1]} bytes in {len(bounds) - 1} of {num_records} records, "
            f"{len(sizes) - at} bytes left) do not match the chunk header ({decoded_size} bytes) or the "
            f"values ({len(values)} bytes)"
        )
    return bounds, values


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

    def _gather(
        self, pos: int, n: int, index: int | None, blocks: list[tuple[int, bytes]] | None = None
    ) -> tuple[bytes, int]:
        """Return ``n`` bytes of chunk content from ``pos`` on (skipping block headers), and the end.

        The block headers skipped are appended to ``blocks`` (offset, bytes) for the caller to verify, or,
        without ``blocks``, verified now (when hashes are checked).
        """
        inside = pos % BLOCK
        if BLOCK_HEADER <= inside <= BLOCK - n:  # within one block: most chunks' headers and data
            piece = self.pread(pos, n)
            if len(piece) == n:
                return piece, pos + n
        parts = []
        while n > 0:
            inside = pos % BLOCK
            if inside < BLOCK_HEADER:
                block = pos - inside
                if self.check_hashes:
                    header = self.pread(block, BLOCK_HEADER)
                    if len(header) < BLOCK_HEADER:
                        raise TruncatedRecordError(
                            "the file ends inside a block header",
                            path=self.path,
                            index=index,
                            offset=block,
                        )
                    if blocks is not None:
                        blocks.append((block, header))
                    else:
                        self._raise_first([_header_check(index, "block", block, header)])
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

    def _first_mismatch(self, checks: list[_Check]) -> tuple[int, ChecksumError] | None:
        """Hash every check's bytes at once; return the position of the first that fails and its error.

        A check is ``(index, what, offset, bytes hashed, hash stored)`` (see :func:`_header_check`).
        """
        hashes = highwayhash64_many([check[3] for check in checks])
        for at, actual in enumerate(hashes):
            index, what, offset, _, stored = checks[at]
            if actual != stored:
                return at, ChecksumError(
                    _MISMATCH[what],
                    path=self.path,
                    index=index,
                    offset=offset,
                    expected=stored,
                    actual=actual,
                )
        return None

    def _raise_first(self, checks: list[_Check]) -> None:
        found = self._first_mismatch(checks)
        if found is not None:
            raise found[1]

    def chunk(self, begin: int, index: int | None = None) -> Chunk:
        """Read the chunk beginning at ``begin``; ``index`` (its first record's number) is named in errors.

        Raises
        ------
        ChecksumError
            A header or data hash does not match.
        TruncatedRecordError
            The file ends inside the chunk.
        """
        chunks, failure = self.chunks([begin], [index])
        if failure is not None:
            raise failure
        return chunks[0]

    def chunks(
        self, begins: Sequence[int], indices: Sequence[int | None]
    ) -> tuple[list[Chunk], CorruptRecordError | None]:
        """Read the chunks beginning at ``begins`` (in file order), verifying their hashes together.

        ``indices`` are the chunks' first records' numbers, named in errors. The hashes of all the chunk
        headers (and of the block headers they cross) are computed at once, then, for the chunks whose
        headers are intact, those of the block headers their data cross and, with ``check_data``, of their
        data: with many chunks, numpy computes them together (:func:`highwayhash64_many`).

        Returns
        -------
        tuple
            The chunks before the first that fails to read or verify, and that failure (``None`` if all
            were read). Within a chunk the failures are found in the order a reader meets them: a block
            header, the chunk header, a block header inside the data, the end of the file, the data hash.
        """
        failure: tuple[int, CorruptRecordError] | None = None
        checks: list[_Check] = []
        owners: list[int] = []
        heads: list[tuple[bytes, int]] = []
        for i, begin in enumerate(begins):
            blocks: list[tuple[int, bytes]] = []
            try:
                heads.append(self._gather(begin, CHUNK_HEADER, indices[i], blocks))
            except TruncatedRecordError as exc:
                failure = (i, exc)
            checks += [_header_check(indices[i], "block", at, header) for at, header in blocks]
            if failure is not None:
                owners += [i] * len(blocks)
                break
            if self.check_hashes:
                checks.append(_header_check(indices[i], "chunk", begin, heads[-1][0]))
            owners += [i] * (len(checks) - len(owners))
        failure = self._earliest(checks, owners, failure)
        count = len(heads) if failure is None else failure[0]
        checks, owners, out = [], [], []
        for i in range(count):
            header, pos = heads[i]
            _, data_size, data_hash, type_and_count, decoded_size = _HEADER.unpack(header)
            blocks = []
            try:
                data, _ = self._gather(pos, data_size, indices[i], blocks)
            except TruncatedRecordError as exc:  # the chunks before it are still read and checked
                failure = (i, exc)
                owners += [i] * (len(checks) + len(blocks) - len(owners))
                checks += [_header_check(indices[i], "block", at, h) for at, h in blocks]
                break
            checks += [_header_check(indices[i], "block", at, block) for at, block in blocks]
            if self.check_data:
                checks.append((indices[i], "data", begins[i], data, data_hash))
            owners += [i] * (len(checks) - len(owners))
            num_records = type_and_count >> 8
            end = chunk_end(begins[i], data_size, num_records)
            out.append(
                Chunk(begins[i], type_and_count & 0xFF, num_records, decoded_size, data, end)
            )
        failure = self._earliest(checks, owners, failure)
        if failure is None:
            return out, None
        return out[: failure[0]], failure[1]

    def _earliest(
        self,
        checks: list[_Check],
        owners: list[int],
        failure: tuple[int, CorruptRecordError] | None,
    ) -> tuple[int, CorruptRecordError] | None:
        """The first failing check (owned by chunk ``owners[k]``) if it comes before ``failure``."""
        found = self._first_mismatch(checks) if checks else None
        if found is None:
            return failure
        return owners[found[0]], found[1]

    def compression(self, begin: int, index: int | None = None) -> str | None:
        """Return the compression of the chunk at ``begin`` (:data:`NAMES`' spelling, ``"none"``).

        Only the chunk header (its hash verified with ``check_hashes``) and the first byte of the data
        are read. ``None`` for a chunk that holds no compressed records (signature, metadata, padding),
        ``"unknown 0x.."`` for a byte Riegeli does not define.

        Raises
        ------
        ChecksumError
            The chunk header, or a block header before its first data byte, is damaged.
        TruncatedRecordError
            The file ends before that byte.
        """
        header, pos = self._gather(begin, CHUNK_HEADER, index)
        if self.check_hashes:
            self._raise_first([_header_check(index, "chunk", begin, header)])
        data_size, type_and_count = _HEADER.unpack(header)[1::2]
        if type_and_count & 0xFF not in (SIMPLE, TRANSPOSED) or not data_size:
            return None
        kind = self._gather(pos, 1, index)[0][0]
        return NAMES.get(kind, f"unknown {kind:#04x}")

    def parts(
        self, chunk: Chunk, index: int | None = None, *, array: bool = False
    ) -> tuple[Any, bytes]:
        """Return the record bounds and bytes of the simple or transposed chunk ``chunk``.

        See :func:`simple_parts` (``array`` applies to simple chunks; a transposed chunk's bounds are a
        list) and :func:`~recordkit.formats._riegeli_transpose.transposed_parts`.

        Raises
        ------
        CorruptRecordError
            The chunk's data does not decode.
        """
        transposed = chunk.chunk_type == TRANSPOSED
        try:
            if transposed:
                return transposed_parts(chunk.data, chunk.num_records, chunk.decoded_size)
            return simple_parts(chunk.data, chunk.num_records, chunk.decoded_size, array=array)
        except Malformed as exc:
            raise CorruptRecordError(
                f"a Riegeli {'transposed' if transposed else 'simple'} chunk does not decode: {exc}",
                path=self.path,
                index=index,
                offset=chunk.begin,
            ) from None

    def records(self, chunk: Chunk, index: int | None = None) -> list[bytes]:
        """Return the records of ``chunk`` (none for signature, metadata and padding chunks).

        Raises
        ------
        CorruptRecordError
            The chunk's data does not decode, or its type is unknown.
        """
        kind = chunk.chunk_type
        if kind in (SIMPLE, TRANSPOSED):
            bounds, values = self.parts(chunk, index)
            if chunk.num_records == 1:
                return [values]
            return [values[a:b] for a, b in itertools.pairwise(bounds)]
        if kind in (SIGNATURE_CHUNK, METADATA, PADDING) and not chunk.num_records:
            return []
        raise HeaderError(
            f"unknown Riegeli chunk type {kind:#04x} with {chunk.num_records} records",
            path=self.path,
            index=index,
            offset=chunk.begin,
        )
