"""Reading the ordinary chunks of a window of a Riegeli file at once: the fast path of sequential reads.

A file written with one record per chunk (ArrayRecord's ``group_size:1``, what tensorflow-datasets writes)
has a chunk per record, so what a chunk costs in Python is what a record costs. :func:`window_records`
takes the bytes of a run of chunks (a window, read at once) and, with numpy, parses all their 40-byte
headers at once and checks their hashes together; then each chunk's data is decoded with as little Python
as it takes, decompressing with one bound function per codec (``zstandard``'s reusable decompressor where
installed: it decompresses a tiny frame several times faster than a codec that sets up a context per call).
A chunk with one record usually has a record-sizes block identical to many other chunks' (the same length
compressed the same way), so each distinct sizes block is decompressed once per window.

Only *ordinary* chunks take this path: a simple chunk whose header and data lie within one 64 KiB block
(no block header to skip or check), whose header hash (and, when asked, data hash) matches, whose record
count is the one expected, and whose data decodes consistently. Any other chunk (one that crosses a block
boundary, a damaged one, one of another type) is left to the caller, which reads it with the general
:class:`~recordkit.formats._riegeli.ChunkReader`; that one raises the error a damaged chunk deserves. The
fast path never raises for bad data: it checks, and on doubt defers, so both paths accept exactly the same
chunks with the same records, and every error comes from the general path.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
from collections.abc import Callable
from typing import Any

from recordkit.formats._decompress import EAGER, NAMES, decompressor
from recordkit.formats._highwayhash import highwayhash64_many
from recordkit.formats._riegeli import (
    BLOCK,
    BLOCK_HEADER,
    CHUNK_HEADER,
    SIMPLE,
    Malformed,
    simple_parts,
)
from recordkit.formats._varint import varint_at

__all__ = ["window_records"]

_SIZES_MEMO = 4096
"""The most distinct record-sizes blocks remembered per window."""


def _codecs() -> dict[int, Callable[[Any, int], Any]]:
    """``decompress(data, size)`` per compression byte, for this window (not shared between threads).

    A codec's failure or an output of another size makes the caller defer the chunk to the general path,
    whose decompressor then gives the error (or, should it disagree, the records).
    """
    codecs: dict[int, Callable[[Any, int], Any]] = {}
    zstandard = _zstandard()
    if zstandard is not None:
        fast = zstandard.ZstdDecompressor().decompress
        codecs[0x7A] = lambda data, size: fast(data, max_output_size=size, allow_extra_data=False)
    for kind in NAMES:
        if kind and kind not in codecs:
            with contextlib.suppress(ImportError):
                codecs[kind] = decompressor(kind)
    return codecs


@functools.cache
def _zstandard() -> Any:
    """The ``zstandard`` module if installed and recent enough to refuse bytes after a frame, else ``None``."""
    try:
        import zstandard

        frame = zstandard.ZstdCompressor().compress(b"x")
        zstandard.ZstdDecompressor().decompress(frame, max_output_size=1, allow_extra_data=False)
    except (ImportError, TypeError):
        return None
    return zstandard


def window_records(
    blob: Any, base: int, begins: Any, counts: Any, *, check_hashes: bool, check_data: bool
) -> list[Any]:
    """Decode the ordinary chunks among those at ``begins`` (file offsets) in ``blob``, read at ``base``.

    ``counts`` are the numbers of records the chunks must hold (the footer's). Returns, in order, a list of
    records for each run of ordinary chunks and, for every other chunk, its position in ``begins`` (an
    ``int``) for the caller to read with the general path.
    """
    import numpy as np

    n = len(begins)
    begins = np.asarray(begins, np.int64)
    rel = begins - base
    inside = begins % BLOCK
    size = len(blob)
    fits = (inside >= BLOCK_HEADER) & (inside <= BLOCK - CHUNK_HEADER) & (rel >= 0)
    fits &= rel + CHUNK_HEADER <= size
    which = np.flatnonzero(fits)
    raw = np.frombuffer(blob, np.uint8)
    heads = raw[rel[which, None] + np.arange(CHUNK_HEADER)].view("<u8")
    data_size, type_count, decoded = heads[:, 1], heads[:, 3], heads[:, 4]
    room = np.minimum(BLOCK - CHUNK_HEADER - inside[which], size - CHUNK_HEADER - rel[which])
    good = (data_size > 0) & (data_size <= room.astype(np.uint64))
    good &= (type_count & 0xFF) == SIMPLE
    good &= (type_count >> 8) == np.asarray(counts, np.int64)[which].astype(np.uint64)
    if check_hashes and len(which):
        starts = rel[which].tolist()
        hashes = highwayhash64_many([blob[at + 8 : at + CHUNK_HEADER] for at in starts])
        good &= heads[:, 0] == np.array(hashes, np.uint64)
        if check_data:
            keep = np.flatnonzero(good)
            firsts = (rel[which[keep]] + CHUNK_HEADER).tolist()
            lasts = (data_size[keep].astype(np.int64) + rel[which[keep]] + CHUNK_HEADER).tolist()
            hashes = highwayhash64_many([blob[a:b] for a, b in zip(firsts, lasts, strict=True)])
            good[keep] &= heads[keep, 2] == np.array(hashes, np.uint64)
    ordinary = np.zeros(n, bool)
    ordinary[which[good]] = True
    first = (rel + CHUNK_HEADER).tolist()
    last = np.zeros(n, np.int64)
    last[which] = rel[which] + CHUNK_HEADER + np.where(good, data_size, 0).astype(np.int64)
    expected = np.zeros(n, np.int64)
    expected[which] = np.where(good, decoded, 0).astype(np.int64)
    return _decode(
        blob, ordinary.tolist(), first, last.tolist(), expected.tolist(), list(counts), _codecs()
    )


def _decode(
    blob: Any,
    ordinary: list[bool],
    first: list[int],
    last: list[int],
    expected: list[int],
    counts: list[int],
    codecs: dict[int, Callable[[Any, int], Any]],
) -> list[Any]:
    """The records of the chunks whose headers passed (``ordinary``), data ``blob[first:last]``."""
    out: list[Any] = []
    records: list[Any] = []
    memo: dict[Any, int] = {}
    for i, fine in enumerate(ordinary):
        if fine:
            at, end, decoded = first[i], last[i], expected[i]
            if counts[i] == 1:
                record = _single(blob, at, end, decoded, codecs, memo)
                if record is not None:
                    records.append(record)
                    continue
            else:
                found = _several(blob[at:end], counts[i], decoded)
                if found is not None:
                    records += found
                    continue
        if records:
            out.append(records)
            records = []
        out.append(i)
    if records:
        out.append(records)
    return out


def _single(
    blob: Any,
    at: int,
    end: int,
    decoded: int,
    codecs: dict[int, Callable[[Any, int], Any]],
    memo: dict[Any, int],
) -> Any:
    """The one record of the simple chunk whose data is ``blob[at:end]``, or ``None`` to defer it."""
    kind = blob[at]
    sizes_size = blob[at + 1] if at + 1 < end else 0x80
    if sizes_size >= 0x80:
        return None
    pos = at + 2 + sizes_size
    if pos > end:
        return None
    sizes = blob[at + 2 : pos]
    if not kind:
        if len(sizes) != 1 or sizes[0] != decoded or end - pos != decoded:
            found = varint_at(sizes, 0)
            if found != (decoded, len(sizes)) or end - pos != decoded:
                return None
        return blob[pos:end]
    decompress = codecs.get(kind)
    if decompress is None:
        return None
    if type(sizes) is not bytes:
        sizes = bytes(sizes)
    length = memo.get(sizes)
    if length is None:
        length = _sizes(sizes, decompress)
        if len(memo) < _SIZES_MEMO:
            memo[sizes] = length
    if length != decoded:
        return None
    head = blob[pos] if pos < end else 0x80
    if head < 0x80:
        size, pos = head, pos + 1
    else:
        found = varint_at(blob[pos:end], 0)
        if found is None:
            return None
        size, pos = found[0], pos + found[1]
    if size != decoded or size > EAGER:  # a large one is decompressed by the general path, bounded
        return None
    try:
        record = decompress(blob[pos:end], size)
    except Exception:  # noqa: BLE001 - deferred: the general path's decompressor gives the error
        return None
    return record if len(record) == size else None


def _sizes(block: Any, decompress: Callable[[Any, int], Any]) -> int:
    """The one record size a compressed sizes block holds, ``-1`` if it does not decode to exactly one."""
    found = varint_at(block, 0)
    if found is None:
        return -1
    size, pos = found
    if not 1 <= size <= 10:  # one varint
        return -1
    try:
        sizes = decompress(block[pos:], size)
    except Exception:  # noqa: BLE001 - deferred: the general path's decompressor gives the error
        return -1
    one = varint_at(sizes, 0) if len(sizes) == size else None
    return one[0] if one is not None and one[1] == len(sizes) else -1


def _several(data: Any, count: int, decoded: int) -> list[Any] | None:
    """The records of a simple chunk of ``count`` records (not one), or ``None`` to defer it."""
    try:
        bounds, values = simple_parts(data, count, decoded)
    except (Malformed, ImportError):
        return None
    if count == 0:
        return []
    return [values[a:b] for a, b in itertools.pairwise(bounds)]
