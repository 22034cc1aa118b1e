"""Frame a whole TFRecord buffer at once: the positions of all its records as numpy arrays, checksums checked.

:func:`tfrecord_frames` is for readers that decode many small records column by column (TensorBoard event
files hold millions of 40-byte records), with numpy over all records together:

* the length fields are followed one record at a time only until the sizes of the last records repeat (a
  scalar log writes its tags in turn); then the starts of the next records are predicted from that
  pattern, a block at once, the lengths found there compared with the predicted ones in one numpy
  operation, and the predictions up to the first wrong one kept (the same records the plain walk finds);
* the length checksums are compared per distinct length;
* the payload checksums of the many payloads of one short length are computed together, byte position by
  byte position, from the slicing tables :mod:`recordkit.formats.rangecrc` builds (CRC32C is linear); other
  payloads are checksummed one by one. All are compared with the stored ones together.

Errors are the ones :class:`~recordkit.formats.tfrecord.TFRecordFrameReader` raises, located the same way
(a bad length checksum at the record's first byte, a bad payload checksum at its first byte + 12), and the
records before a damaged one are never returned without it: the whole buffer is refused.

This module imports numpy; :mod:`recordkit.formats` does not import it.
"""

from __future__ import annotations

from itertools import pairwise
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from recordkit.errors import TruncatedRecordError
from recordkit.formats import _crc
from recordkit.formats._tfrecord_frame import HEADER, LENGTH, checksum_error
from recordkit.formats.rangecrc import CRC32C_POLY, _slicing_tables

__all__ = ["Frames", "tfrecord_frames"]


class Frames(NamedTuple):
    """The records found in a buffer by :func:`tfrecord_frames`.

    Attributes
    ----------
    starts
        The offset of each payload in the buffer (``int64``; the record itself starts 12 bytes earlier).
    lengths
        The length of each payload (``int64``).
    end
        Where the last whole record ends: the buffer's size, or less when ``final=False`` left a partial
        record out.
    """

    starts: npt.NDArray[np.int64]
    lengths: npt.NDArray[np.int64]
    end: int


# The framing walk predicts that the sizes of the last few records repeat (a scalar log writes its tags in
# turn, so its record sizes repeat with a period of the tag count) and checks a block of predictions at once.
_PERIODS = 16  # the longest period of record sizes looked for
_SCALAR_RUN = 2 * _PERIODS  # records walked one by one before a prediction
# Records predicted at once: doubled after each block predicted right throughout.
_BLOCK_MIN, _BLOCK_MAX = 256, 1 << 16


def _period(sizes: list[int]) -> int:
    """The shortest period (up to :data:`_PERIODS`) of ``sizes``; 0 when none."""
    for period in range(1, min(_PERIODS, len(sizes) // 2) + 1):
        if sizes[period:] == sizes[:-period]:
            return period
    return 0


def _walk(buffer: Any, size: int) -> tuple[npt.NDArray[np.int64], int]:
    """Follow the length fields from offset 0: the start of each whole record, and where the walk stopped.

    The same records as one ``unpack_from`` per record, found faster: after :data:`_SCALAR_RUN` records read
    one by one, the sizes of the last period are predicted to repeat; the lengths at the predicted starts
    are read with one numpy index, and the predictions up to the first wrong one are kept.
    """
    unpack = LENGTH.unpack_from
    view = np.ndarray((max(size - 7, 0),), "<u8", buffer, 0, (1,))
    pieces: list[npt.NDArray[np.int64]] = []
    heads: list[int] = []
    add = heads.append
    pos = 0
    limit = size - 16  # a record whose header is at pos <= limit may fit
    run = _SCALAR_RUN
    block = _BLOCK_MIN
    pattern: npt.NDArray[np.int64] | None = None
    while pos <= limit:
        if pattern is None:
            for _ in range(run):
                stop = pos + 16 + unpack(buffer, pos)[0]
                if stop > size:
                    pieces.append(np.array(heads, np.int64))
                    return np.concatenate(pieces), pos
                add(pos)
                pos = stop
                if pos > limit:
                    break
            else:
                tail = [*heads[-_SCALAR_RUN:], pos]
                sizes = [b - a for a, b in pairwise(tail)]
                period = _period(sizes)
                if period:
                    pattern = np.array(sizes[-period:], np.int64)
                else:
                    run = min(2 * run, 1024)
            pieces.append(np.array(heads, np.int64))
            heads = []
            add = heads.append
            continue
        steps = np.tile(pattern, -(-block // len(pattern)))
        bounds = np.cumsum(steps)
        bounds += pos
        # the predicted records that end in the buffer
        fit = int(np.searchsorted(bounds, size, "right"))
        starts = np.empty(fit + 1, np.int64)
        starts[0] = pos
        starts[1:] = bounds[:fit]
        wrong = np.flatnonzero(view[starts[:fit]] != (steps[:fit] - 16).astype(np.uint64))
        good = int(wrong[0]) if len(wrong) else fit
        pieces.append(starts[:good])
        pos = int(starts[good])
        if good == len(steps):
            block = min(2 * block, _BLOCK_MAX)
        else:
            # A new pattern, or the end: walk on one by one; a prediction wrong at once is tried less often.
            pattern = None
            block = _BLOCK_MIN
            run = _SCALAR_RUN if good >= _BLOCK_MIN else min(2 * run, 1024)
    pieces.append(np.array(heads, np.int64))
    return np.concatenate(pieces), pos


def tfrecord_frames(
    buffer: Any, *, path: str | None = None, check_crc: bool = True, final: bool = True
) -> Frames:
    """Find every record of an uncompressed TFRecord buffer.

    Parameters
    ----------
    buffer
        The file's bytes (``bytes``, a memory map, anything numpy reads as a buffer), from a record start.
    path
        The file's name, for error messages.
    check_crc
        Verify every length and payload checksum (the default). ``False`` verifies nothing.
    final
        The buffer is the whole file: a record cut short at its end raises
        :class:`~recordkit.errors.TruncatedRecordError`. ``False`` (a file still being written) leaves the
        partial record out and reports where it starts in :attr:`Frames.end`.

    Raises
    ------
    ChecksumError
        A length or payload checksum does not match; ``.index`` and ``.offset`` locate the record.
    TruncatedRecordError
        ``final`` and the buffer ends inside a record.
    """
    size = len(buffer)
    heads, end = _walk(buffer, size)
    lengths = np.zeros(0, np.int64)
    if len(heads):
        lengths = np.ndarray((size - 7,), "<u8", buffer, 0, (1,))[heads].astype(np.int64)
    if check_crc and len(heads):
        _check_lengths(buffer, heads, lengths, path)
    if end < size:
        # A partial record, or a header whose length is damaged: a damaged one is a checksum error.
        if end + 12 <= size and check_crc:
            length, stored = HEADER.unpack_from(buffer, end)
            actual = _crc.masked_crc32c(LENGTH.pack(length))
            if actual != stored:
                raise checksum_error(path, len(heads), end, stored, actual)
        if final:
            where = "header" if end + 12 > size else "record"
            raise TruncatedRecordError(
                f"the file ends inside a {where}", path=path, index=len(heads), offset=end
            )
    starts = heads + 12
    if check_crc and len(heads):
        _check_payloads(buffer, starts, lengths, path)
    return Frames(starts, lengths, end)


def _check_lengths(
    buffer: Any, heads: npt.NDArray[np.int64], lengths: npt.NDArray[np.int64], path: str | None
) -> None:
    """Compare every stored length checksum with the masked CRC32C of its length, one CRC per length."""
    stored = np.ndarray((len(buffer) - 11,), "<u4", buffer, 8, (1,))[heads]
    distinct = np.unique(lengths)
    inverse = np.searchsorted(distinct, lengths)  # faster than np.unique's return_inverse
    expected = np.array(
        [_crc.masked_crc32c(LENGTH.pack(int(n))) for n in distinct.tolist()], np.uint32
    )
    wrong = np.flatnonzero(expected[inverse] != stored)
    if len(wrong):
        i = int(wrong[0])
        raise checksum_error(path, i, int(heads[i]), int(stored[i]), int(expected[inverse[i]]))


def _check_payloads(
    buffer: Any, starts: npt.NDArray[np.int64], lengths: npt.NDArray[np.int64], path: str | None
) -> None:
    """Compare every stored payload checksum with the masked CRC32C of its payload."""
    crcs = _payload_crcs(buffer, starts, lengths)
    masked = ((crcs >> np.uint32(15)) | (crcs << np.uint32(17))) + np.uint32(_crc.MASK_DELTA)
    stops = starts + lengths
    stored = np.ndarray((len(buffer) - 3,), "<u4", buffer, 0, (1,))[stops]
    wrong = np.flatnonzero(masked != stored)
    if len(wrong):
        i = int(wrong[0])
        raise checksum_error(
            path, i, int(starts[i]) - 12, int(stored[i]), int(masked[i]), payload=True
        )


# Payloads of one length are checksummed together, byte position by byte position, when there are at least
# _GROUP_MIN of them and they are at most _VECTOR_LENGTH bytes long (longer ones are faster one by one).
_GROUP_MIN = 256
_VECTOR_LENGTH = 96
_GROUPS = 32  # the most lengths checksummed together
_CHUNK = 1 << 15  # payloads gathered at once


def _payload_crcs(
    buffer: Any, starts: npt.NDArray[np.int64], lengths: npt.NDArray[np.int64]
) -> npt.NDArray[np.uint32]:
    """The CRC32C of every payload: the many short ones of one length with numpy, the others one by one."""
    crcs = np.empty(len(starts), np.uint32)
    alone = np.ones(len(starts), bool)
    short = lengths[lengths <= _VECTOR_LENGTH]
    # A group must also be large enough to pay for finding its members among all payloads.
    least = max(_GROUP_MIN, len(lengths) // 64)
    if len(short) >= least:
        counts = np.bincount(short)
        common = np.flatnonzero(counts >= least)
        common = common[np.argsort(counts[common])[::-1][:_GROUPS]]
        data = np.frombuffer(buffer, np.uint8)
        for length in common.tolist():
            group = np.flatnonzero(lengths == length)
            crcs[group] = _same_length_crcs(data, starts[group], length)
            alone[group] = False
    rest = np.flatnonzero(alone)
    if len(rest):
        crc32c = _crc.crc32c
        at, stops = starts[rest], starts[rest] + lengths[rest]
        crcs[rest] = [crc32c(buffer[a:b]) for a, b in zip(at.tolist(), stops.tolist(), strict=True)]
    return crcs


def _same_length_crcs(
    data: npt.NDArray[np.uint8], starts: npt.NDArray[np.int64], length: int
) -> npt.NDArray[np.uint32]:
    """The CRC32C of the ``length`` bytes at each of ``starts`` in ``data``."""
    tables = _slicing_tables(CRC32C_POLY, length)
    zeros = np.uint32(_crc.crc32c(bytes(length)))
    crcs = np.full(len(starts), zeros, np.uint32)
    if not length:
        return crcs
    windows = np.lib.stride_tricks.as_strided(
        data, shape=(len(data) - length + 1, length), strides=(1, 1), writeable=False
    )
    for first in range(0, len(starts), _CHUNK):
        # one row per byte position, one column per payload
        columns = np.ascontiguousarray(windows[starts[first : first + _CHUNK]].T)
        crc = crcs[first : first + _CHUNK]
        for j in range(length):
            crc ^= tables[length - 1 - j].take(columns[j])
    return crcs
