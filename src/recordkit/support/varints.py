"""Protobuf's base-128 varints decoded many at a time with numpy: the one vectorised decoder of recordkit.

Two shapes of the same job: :func:`decode_at` reads one varint at each of many positions (the fields of
many records walked together), :func:`decode_all` a buffer that holds nothing but varints, back to back
(packed numeric lists, Riegeli's index entries); the second finds where its varints start and hands them
to the first. Each caller keeps its own idea of what is malformed: :func:`decode_all` raises
:class:`VarintError` with the offset of the varint at fault, :func:`decode_at` marks the bad ones.

numpy is imported when a function runs, so that the layers that must not load it at import can use them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = ["VarintError", "decode_all", "decode_at"]


class VarintError(ValueError):
    """A buffer of varints that :func:`decode_all` cannot decode.

    ``offset`` is where the varint at fault starts; ``truncated`` tells a varint running past the end of the
    buffer from one longer than allowed.
    """

    def __init__(self, message: str, offset: int, truncated: bool) -> None:
        super().__init__(message)
        self.offset = offset
        self.truncated = truncated


def decode_at(
    data: npt.NDArray[np.uint8],
    pos: npt.NDArray[np.int64],
    end: npt.NDArray[np.int64] | int,
    *,
    max_bytes: int = 10,
) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.int64], npt.NDArray[np.bool_]]:
    """Read the varint at each position ``pos`` of ``data``.

    Returns
    -------
    values, after, good
        The values (``uint64``; of a tenth byte only the lowest bit counts, the bits past 64 dropped as
        protobuf drops them), the position after each varint, and whether it is good: it starts before its ``end`` (one per position, or one for all),
        ends at or before it, and is at most ``max_bytes`` long. The value and ``after`` of a bad varint
        are meaningless; positions past ``data`` are read as its last byte, never raise.
    """
    import numpy as np

    byte = data.take(pos, mode="clip")
    value = (byte & 0x7F).astype(np.uint64)
    after = pos + 1
    good = pos < end
    more = byte >= 0x80
    shift = 7
    if 4 * int(np.count_nonzero(more)) > len(pos):
        # Most varints go on: every step over all of them, no indexing.
        while more.any():
            if shift >= 7 * max_bytes:
                good &= ~more
                break
            byte = data.take(after, mode="clip")
            value |= np.where(more, (byte & 0x7F).astype(np.uint64) << shift, 0)
            after += more
            more &= byte >= 0x80
            shift += 7
    else:
        at = np.flatnonzero(more)
        while len(at):
            if shift >= 7 * max_bytes:
                good[at] = False
                break
            byte = data.take(after[at], mode="clip")
            value[at] |= (byte & 0x7F).astype(np.uint64) << shift
            after[at] += 1
            at = at[byte >= 0x80]
            shift += 7
    good &= after <= end
    return value, after, good


def decode_all(
    data: npt.NDArray[np.uint8], *, max_bytes: int = 10
) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.int64]]:
    """Decode ``data``, varints back to back and nothing else.

    Returns
    -------
    values, starts
        The values (``uint64``, as :func:`decode_at` reads them) and the offset of each in ``data``.

    Raises
    ------
    VarintError
        The last varint runs past the end of ``data`` (reported first), or one is longer than
        ``max_bytes`` (the first such).
    """
    import numpy as np

    last = data < 0x80
    ends = np.flatnonzero(last)
    starts = np.zeros(len(ends), np.int64)
    if len(ends) == len(data):  # every value below 128 (labels, flags, sizes): one byte each
        starts[:] = np.arange(len(data))
        return data.astype(np.uint64), starts
    starts[1:] = ends[:-1] + 1
    if not last[-1]:
        offset = int(ends[-1]) + 1 if len(ends) else 0
        raise VarintError("a varint runs past its buffer", offset, truncated=True)
    lengths = ends - starts + 1
    if lengths.max() > max_bytes:
        offset = int(starts[np.argmax(lengths > max_bytes)])
        raise VarintError(f"a varint longer than {max_bytes} bytes", offset, truncated=False)
    values, _, _ = decode_at(data, starts, len(data), max_bytes=max_bytes)
    return values, starts
