"""Recovering the intact records of a damaged ArrayRecord file (:meth:`ArrayRecordFormat.salvage`).

A damaged chunk loses its records; the chunks before and after it are kept. Every hash is checked, the
chunks' data hashes included.

* With the postscript and the footer intact, the footer lists the chunks: each is read and checked on its
  own, and one that fails is skipped with its records (reported with the number of its first record).
* Otherwise (a damaged footer or postscript, a truncated file) the chunks are walked from the start of the
  file, each beginning where the one before ends. After a damaged chunk header the walk goes on at the
  next block boundary whose block header is intact: it says where the chunk it interrupts ends, which is
  where the next chunk begins. The walk stops at the footer: the chunk that the postscript names, or,
  without a postscript, the first chunk shaped as a footer or postscript (a ``RiegeliFooterMetadata``
  then ``ArrayRecordFooter`` entries pointing back into the file, or postscripts with ArrayRecord's magic).
"""

from __future__ import annotations

import struct
from collections.abc import Generator, Iterator
from typing import Any

from recordkit.errors import CorruptRecordError
from recordkit.formats._highwayhash import highwayhash64
from recordkit.formats._riegeli import BLOCK, BLOCK_HEADER, SIGNATURE, Chunk, ChunkReader, Malformed
from recordkit.formats.arrayrecord import MAGIC, ArrayRecordFrameReader, _fields
from recordkit.formats.base import Source
from recordkit.formats.resync import Skip

__all__ = ["salvage"]

_BLOCK_HEADER = struct.Struct("<QQQ")


def salvage(buffer: Any, size: int, skip: Skip) -> Iterator[bytes]:
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
