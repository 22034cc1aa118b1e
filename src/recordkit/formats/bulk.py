"""Frame a whole TFRecord buffer at once: the positions of all its records as numpy arrays, checksums checked.

:func:`tfrecord_frames` is for readers that decode many small records column by column (TensorBoard event
files hold millions of 40-byte records): one Python loop follows the length fields, and everything else is
done for all records together: the length checksums are compared per distinct length, the stored payload
checksums are gathered with one numpy index, and the payload checksums are computed in one list
comprehension and compared together.

Errors are the ones :class:`~recordkit.formats.tfrecord.TFRecordFrameReader` raises, located the same way
(a bad length checksum at the record's first byte, a bad payload checksum at its first byte + 12), and the
records before a damaged one are never returned without it: the whole buffer is refused.

This module imports numpy; :mod:`recordkit.formats` does not import it.
"""

from __future__ import annotations

import struct
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from recordkit.errors import ChecksumError, TruncatedRecordError
from recordkit.formats import _crc

__all__ = ["Frames", "tfrecord_frames"]

_LENGTH = struct.Struct("<Q")
_HEADER = struct.Struct("<QI")


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


def _walk(buffer: Any, size: int) -> tuple[list[int], int]:
    """Follow the length fields from offset 0: the start of each whole record, and where the walk stopped."""
    unpack = _LENGTH.unpack_from
    starts: list[int] = []
    add = starts.append
    pos = 0
    limit = size - 16  # a record whose header is at pos <= limit may fit
    while pos <= limit:
        stop = pos + 16 + unpack(buffer, pos)[0]
        if stop > size:
            break
        add(pos)
        pos = stop
    return starts, pos


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
    found, end = _walk(buffer, size)
    heads = np.array(found, dtype=np.int64)
    lengths = np.zeros(0, np.int64)
    if len(heads):
        lengths = np.ndarray((size - 7,), "<u8", buffer, 0, (1,))[heads].astype(np.int64)
    if check_crc and len(heads):
        _check_lengths(buffer, heads, lengths, path)
    if end < size:
        # A partial record, or a header whose length is damaged: a damaged one is a checksum error.
        if end + 12 <= size and check_crc:
            length, stored = _HEADER.unpack_from(buffer, end)
            actual = _crc.masked_crc32c(_LENGTH.pack(length))
            if actual != stored:
                raise _length_error(path, len(heads), end, stored, actual)
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
    distinct, inverse = np.unique(lengths, return_inverse=True)
    expected = np.array(
        [_crc.masked_crc32c(_LENGTH.pack(int(n))) for n in distinct.tolist()], np.uint32
    )
    wrong = np.flatnonzero(expected[inverse] != stored)
    if len(wrong):
        i = int(wrong[0])
        raise _length_error(path, i, int(heads[i]), int(stored[i]), int(expected[inverse[i]]))


def _check_payloads(
    buffer: Any, starts: npt.NDArray[np.int64], lengths: npt.NDArray[np.int64], path: str | None
) -> None:
    """Compare every stored payload checksum with the masked CRC32C of its payload."""
    crc32c = _crc.crc32c
    stops = starts + lengths
    crcs = np.array(
        [crc32c(buffer[a:b]) for a, b in zip(starts.tolist(), stops.tolist(), strict=True)],
        np.uint32,
    )
    masked = ((crcs >> np.uint32(15)) | (crcs << np.uint32(17))) + np.uint32(_crc.MASK_DELTA)
    stored = np.ndarray((len(buffer) - 3,), "<u4", buffer, 0, (1,))[stops]
    wrong = np.flatnonzero(masked != stored)
    if len(wrong):
        i = int(wrong[0])
        raise ChecksumError(
            "payload checksum mismatch",
            path=path,
            index=i,
            offset=int(starts[i]),
            expected=int(stored[i]),
            actual=int(masked[i]),
        )


def _length_error(
    path: str | None, index: int, offset: int, stored: int, actual: int
) -> ChecksumError:
    hint = " (is this a TFRecord file?)" if offset == 0 else ""
    return ChecksumError(
        f"length checksum mismatch{hint}",
        path=path,
        index=index,
        offset=offset,
        expected=stored,
        actual=actual,
    )
