"""Checksums of many, possibly overlapping, byte ranges of one buffer in time linear in the buffer.

Recovery tests candidate records whose claimed byte ranges may overlap: a crafted file can hold a valid
TFRecord header every 12 bytes, each claiming half the file. Checksumming each range on its own would cost
the sum of their lengths, quadratic in the file size. A CRC is linear instead: with ``P(x)`` the CRC of
``buffer[0:x]``,

    ``crc(buffer[a:b]) == P(b) ^ M**(b - a) (P(a))``

where ``M**k`` is what ``k`` zero bytes do to the CRC register, a 32x32 bit matrix. ``P`` is kept at
checkpoints every :data:`STRIDE` bytes (each byte of the buffer is checksummed once for them), so a range
costs at most ``2 * STRIDE`` bytes of checksumming plus ``log2(b - a)`` applications of a power-of-two
``M``, each four look-ups in 256-entry tables, done for many ranges at once with numpy.

This module imports numpy; the formats' recovery hooks import it when recovery needs it, so that importing
:mod:`recordkit.formats` does not import numpy.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable
from typing import Any

import numpy as np

from recordkit.formats._crc import MASK_DELTA

__all__ = ["CRC32C_POLY", "CRC32_POLY", "STRIDE", "RangeCRC", "tfrecord_headers"]

CRC32C_POLY = 0x82F63B78
"""The reflected Castagnoli polynomial (CRC32C, TFRecord)."""
CRC32_POLY = 0xEDB88320
"""The reflected CRC-32 polynomial of zlib (FFRecord)."""
STRIDE = 4096
"""Distance between two checkpoints of the prefix CRC; a range never costs more than twice this."""

_TABLES: dict[int, tuple[Any, Any]] = {}
_SLICING: dict[int, list[Any]] = {}


def _slicing_tables(poly: int, count: int) -> list[Any]:
    """The first ``count`` (at least) slicing tables of the reflected CRC with ``poly``, built once and extended.

    ``tables[k][b]`` is what byte ``b`` followed by ``k`` zero bytes adds to the CRC register: table 0 is the
    register after one byte from zero, and each following table shifts the previous one through one zero
    byte more. CRCs are linear, so the CRC of ``n`` bytes is the CRC of ``n`` zero bytes xor
    ``tables[n - 1 - j][byte j]`` over ``j``.
    """
    tables = _SLICING.get(poly)
    if tables is None:
        table = np.arange(256, dtype=np.uint32)
        for _ in range(8):
            table = (table >> 1) ^ np.where(table & 1, np.uint32(poly), np.uint32(0))
        tables = _SLICING[poly] = [table]
    first = tables[0]
    while len(tables) < count:
        last = tables[-1]
        tables.append((last >> np.uint32(8)) ^ first[last & np.uint32(0xFF)])
    return tables


def _apply(tables: Any, values: Any) -> Any:
    """Apply the linear map given by four byte tables to every 32-bit value in ``values``."""
    return (
        tables[0][values & 0xFF]
        ^ tables[1][(values >> 8) & 0xFF]
        ^ tables[2][(values >> 16) & 0xFF]
        ^ tables[3][values >> 24]
    )


def _tables(poly: int) -> tuple[Any, Any]:
    """Return (slicing-by-8 tables, zero-byte powers) for ``poly``, computed once.

    ``powers[k]`` holds four byte tables of ``M**(2**k)``: ``M**(2**k)(v)`` is the XOR of
    ``powers[k][j][(v >> 8 * j) & 0xFF]`` over ``j``.
    """
    cached = _TABLES.get(poly)
    if cached is not None:
        return cached
    slicing = _slicing_tables(poly, 8)[:8]
    table = slicing[0]
    lanes = np.arange(256, dtype=np.uint32)
    one_zero_byte = [table[(lanes << (8 * j)) & 0xFF] ^ ((lanes << (8 * j)) >> 8) for j in range(4)]
    powers = [np.array(one_zero_byte, dtype=np.uint32)]
    for _ in range(63):
        previous = powers[-1]
        powers.append(np.array([_apply(previous, previous[j]) for j in range(4)], dtype=np.uint32))
    cached = (np.array(slicing, dtype=np.uint32), np.array(powers, dtype=np.uint32))
    _TABLES[poly] = cached
    return cached


def _rotate(values: Any) -> Any:
    """The rotation of TFRecord's CRC mask, on ``uint32`` values."""
    return (values >> 15) | (values << 17)


def _header_tables() -> Any:
    """Four 65536-entry tables ``H`` with ``mask(crc32c(w)) - MASK_DELTA == XOR of H[j][u16_j]``.

    ``u16_j`` is the ``j``-th little-endian 16-bit half-word of the 8-byte word ``w``. The CRC's initial
    and final XOR and the mask's rotation are linear, so they fold into the tables.
    """
    cached = _TABLES.get(0)
    if cached is not None:
        return cached[0]
    slicing, _ = _tables(CRC32C_POLY)
    low = np.arange(65536, dtype=np.uint32) & 0xFF
    high = np.arange(65536, dtype=np.uint32) >> 8
    init = np.uint32(0xFF)
    pairs = [
        slicing[7][low ^ init] ^ slicing[6][high ^ init] ^ np.uint32(0xFFFFFFFF),
        slicing[5][low ^ init] ^ slicing[4][high ^ init],
        slicing[3][low] ^ slicing[2][high],
        slicing[1][low] ^ slicing[0][high],
    ]
    tables = np.array([_rotate(t) for t in pairs], dtype=np.uint32)
    _TABLES[0] = (tables, None)
    return tables


def tfrecord_headers(buffer: Any, lo: int, hi: int) -> Any:
    """Return the positions ``p`` in ``[lo, hi)`` where ``buffer[p+8:p+12]`` is the length checksum of
    ``buffer[p:p+8]`` (a TFRecord header), as offsets from ``lo``; ``buffer`` holds at least ``hi + 11``
    bytes."""
    tables = _header_tables()
    n = hi - lo
    crc = tables[0][np.ndarray((n,), "<u2", buffer, lo, (1,))]
    for j in range(1, 4):
        crc ^= tables[j][np.ndarray((n,), "<u2", buffer, lo + 2 * j, (1,))]
    stored = np.ndarray((n,), "<u4", buffer, lo + 8, (1,)) - np.uint32(MASK_DELTA)
    return np.flatnonzero(crc == stored)


def shift(values: Any, lengths: Any, poly: int) -> Any:
    """Return ``M**lengths[i] (values[i])``: the CRC register after ``lengths[i]`` zero bytes."""
    _, powers = _tables(poly)
    values = values.astype(np.uint32, copy=True)
    lengths = lengths.astype(np.uint64)
    bits = int(lengths.max()).bit_length() if len(lengths) else 0
    for k in range(bits):
        chosen = np.flatnonzero((lengths >> np.uint64(k)) & np.uint64(1))
        if len(chosen):
            values[chosen] = _apply(powers[k], values[chosen])
    return values


class RangeCRC:
    """The CRCs of byte ranges of one buffer, each byte checksummed a bounded number of times overall.

    Parameters
    ----------
    buffer
        The data (``bytes`` or a memory map); slices of it are checksummed.
    extend
        ``extend(crc, data)``: the CRC of the bytes so far followed by ``data`` (``extend(0, d)`` is the
        CRC of ``d``).
    poly
        The reflected polynomial of that CRC (:data:`CRC32C_POLY` or :data:`CRC32_POLY`).
    """

    def __init__(self, buffer: Any, extend: Callable[[int, bytes], int], poly: int) -> None:
        self.buffer = buffer
        self.extend = extend
        self.poly = poly
        self._checkpoints = array("L", [0])  # P(k * STRIDE)

    def _checkpoint(self, k: int) -> int:
        """Return ``P(k * STRIDE)``, extending the checkpoints as far as needed."""
        points, buffer, extend = self._checkpoints, self.buffer, self.extend
        while len(points) <= k:
            start = (len(points) - 1) * STRIDE
            points.append(extend(points[-1], buffer[start : start + STRIDE]))
        return points[k]

    def prefixes(self, positions: Any) -> Any:
        """Return ``P(x)`` for every ``x`` of the sorted array ``positions``."""
        buffer, extend, checkpoint = self.buffer, self.extend, self._checkpoint
        found: list[int] = []
        append = found.append
        last, crc = -1, 0
        for x in positions.tolist():
            if last < x - x % STRIDE:
                last = x - x % STRIDE
                crc = checkpoint(last // STRIDE)
            crc = extend(crc, buffer[last:x])
            last = x
            append(crc)
        return np.array(found, dtype=np.uint32)

    def crcs(self, starts: Any, stops: Any) -> Any:
        """Return the CRC of ``buffer[starts[i]:stops[i]]`` for every ``i`` (``uint32`` array)."""
        starts = np.asarray(starts, dtype=np.int64)
        stops = np.asarray(stops, dtype=np.int64)
        points, where = np.unique(np.concatenate((starts, stops)), return_inverse=True)
        prefix = self.prefixes(points)
        n = len(starts)
        return prefix[where[n:]] ^ shift(prefix[where[:n]], stops - starts, self.poly)
