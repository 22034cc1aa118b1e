"""HighwayHash-64 in pure Python: the hash Riegeli stores for its block headers, chunk headers and chunk data.

HighwayHash (https://github.com/google/highwayhash) is a keyed hash of 256-bit state updated with 32-byte
packets. No maintained Python package computes it (the one binding on PyPI, ``highwayhash-cffi``, has had
no release since 2020 and no longer builds), so recordkit implements the algorithm here in Python, checked
against the reference implementation's published test vectors and against files written by Riegeli.

It costs about 45 µs per hash of a short input (a chunk header) and hashes longer inputs at about 4 MB/s:
cheap for headers, slow for data (see :mod:`recordkit.formats.arrayrecord` for what is checked when).

Examples
--------
The first test vector of the reference implementation (the empty input under the key 0, 1, ..., 31):

>>> key = (0x0706050403020100, 0x0F0E0D0C0B0A0908, 0x1716151413121110, 0x1F1E1D1C1B1A1918)
>>> hex(highwayhash64(b"", key))
'0x907a56de22c26e53'
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from typing import Any

__all__ = ["RIEGELI_KEY", "highwayhash64"]

RIEGELI_KEY = (0x2F696C6567656952, 0x0A7364726F636572, 0x2F696C6567656952, 0x0A7364726F636572)
"""The fixed key of Riegeli's hashes: ``'Riegeli/'``, ``'records\\n'``, twice, as little-endian words."""

_M = 0xFFFFFFFFFFFFFFFF
_LO = 0xFFFFFFFF
_INIT0 = (0xDBE6D5D5FE4CCE2F, 0xA4093822299F31D0, 0x13198A2E03707344, 0x243F6A8885A308D3)
_INIT1 = (0x3BD39E10CB0EF593, 0xC0ACF169B5F18A8C, 0xBE5466CF34E90C6C, 0x452821E638D01377)
_PACKET = struct.Struct("<4Q")


def _update(
    state: tuple[int, ...], packets: Iterable[tuple[int, int, int, int]]
) -> tuple[int, ...]:
    """Mix packets (four little-endian 64-bit lanes each) into ``state``; return the new state.

    ``state`` is the 16 words ``v0[0:4] + v1[0:4] + mul0[0:4] + mul1[0:4]``. The byte shuffle ("zipper merge") is written out inline: this loop is all of the hash's cost.
    """
    (v00, v01, v02, v03, v10, v11, v12, v13, m00, m01, m02, m03, m10, m11, m12, m13) = state
    M, L = _M, _LO
    for a, b, c, d in packets:
        v10 = (v10 + m00 + a) & M
        m00 ^= (v10 & L) * (v00 >> 32)
        v00 = (v00 + m10) & M
        m10 ^= (v00 & L) * (v10 >> 32)
        v11 = (v11 + m01 + b) & M
        m01 ^= (v11 & L) * (v01 >> 32)
        v01 = (v01 + m11) & M
        m11 ^= (v01 & L) * (v11 >> 32)
        v12 = (v12 + m02 + c) & M
        m02 ^= (v12 & L) * (v02 >> 32)
        v02 = (v02 + m12) & M
        m12 ^= (v02 & L) * (v12 >> 32)
        v13 = (v13 + m03 + d) & M
        m03 ^= (v13 & L) * (v03 >> 32)
        v03 = (v03 + m13) & M
        m13 ^= (v03 & L) * (v13 >> 32)
        v00 = (
            v00
            + (
                (((v10 & 0xFF000000) | (v11 & 0xFF00000000)) >> 24)
                | (((v10 & 0xFF0000000000) | (v11 & 0xFF000000000000)) >> 16)
                | (v10 & 0xFF0000)
                | ((v10 & 0xFF00) << 32)
                | ((v11 & 0xFF00000000000000) >> 8)
                | ((v10 & 0xFF) << 56)
            )
        ) & M
        v01 = (
            v01
            + (
                (((v11 & 0xFF000000) | (v10 & 0xFF00000000)) >> 24)
                | (v11 & 0xFF0000)
                | ((v11 & 0xFF0000000000) >> 16)
                | ((v11 & 0xFF00) << 24)
                | ((v10 & 0xFF000000000000) >> 8)
                | ((v11 & 0xFF) << 48)
                | (v10 & 0xFF00000000000000)
            )
        ) & M
        v02 = (
            v02
            + (
                (((v12 & 0xFF000000) | (v13 & 0xFF00000000)) >> 24)
                | (((v12 & 0xFF0000000000) | (v13 & 0xFF000000000000)) >> 16)
                | (v12 & 0xFF0000)
                | ((v12 & 0xFF00) << 32)
                | ((v13 & 0xFF00000000000000) >> 8)
                | ((v12 & 0xFF) << 56)
            )
        ) & M
        v03 = (
            v03
            + (
                (((v13 & 0xFF000000) | (v12 & 0xFF00000000)) >> 24)
                | (v13 & 0xFF0000)
                | ((v13 & 0xFF0000000000) >> 16)
                | ((v13 & 0xFF00) << 24)
                | ((v12 & 0xFF000000000000) >> 8)
                | ((v13 & 0xFF) << 48)
                | (v12 & 0xFF00000000000000)
            )
        ) & M
        v10 = (
            v10
            + (
                (((v00 & 0xFF000000) | (v01 & 0xFF00000000)) >> 24)
                | (((v00 & 0xFF0000000000) | (v01 & 0xFF000000000000)) >> 16)
                | (v00 & 0xFF0000)
                | ((v00 & 0xFF00) << 32)
                | ((v01 & 0xFF00000000000000) >> 8)
                | ((v00 & 0xFF) << 56)
            )
        ) & M
        v11 = (
            v11
            + (
                (((v01 & 0xFF000000) | (v00 & 0xFF00000000)) >> 24)
                | (v01 & 0xFF0000)
                | ((v01 & 0xFF0000000000) >> 16)
                | ((v01 & 0xFF00) << 24)
                | ((v00 & 0xFF000000000000) >> 8)
                | ((v01 & 0xFF) << 48)
                | (v00 & 0xFF00000000000000)
            )
        ) & M
        v12 = (
            v12
            + (
                (((v02 & 0xFF000000) | (v03 & 0xFF00000000)) >> 24)
                | (((v02 & 0xFF0000000000) | (v03 & 0xFF000000000000)) >> 16)
                | (v02 & 0xFF0000)
                | ((v02 & 0xFF00) << 32)
                | ((v03 & 0xFF00000000000000) >> 8)
                | ((v02 & 0xFF) << 56)
            )
        ) & M
        v13 = (
            v13
            + (
                (((v03 & 0xFF000000) | (v02 & 0xFF00000000)) >> 24)
                | (v03 & 0xFF0000)
                | ((v03 & 0xFF0000000000) >> 16)
                | ((v03 & 0xFF00) << 24)
                | ((v02 & 0xFF000000000000) >> 8)
                | ((v03 & 0xFF) << 48)
                | (v02 & 0xFF00000000000000)
            )
        ) & M
    return (v00, v01, v02, v03, v10, v11, v12, v13, m00, m01, m02, m03, m10, m11, m12, m13)


def _rotate32(lane: int, count: int) -> int:
    """Rotate both 32-bit halves of ``lane`` left by ``count`` (0 < count < 32)."""
    low, high = lane & _LO, lane >> 32
    low = ((low << count) | (low >> (32 - count))) & _LO
    high = ((high << count) | (high >> (32 - count))) & _LO
    return (high << 32) | low


def _swap(lane: int) -> int:
    return ((lane >> 32) | (lane << 32)) & _M


def _reset(key: Sequence[int]) -> tuple[int, ...]:
    """The state before any packet, for ``key``."""
    return (
        *(_INIT0[i] ^ key[i] for i in range(4)),
        *(_INIT1[i] ^ _swap(key[i]) for i in range(4)),
        *_INIT0,
        *_INIT1,
    )


def _remainder(state: tuple[int, ...], tail: bytes) -> tuple[int, ...]:
    """Mix the last ``len(tail)`` (1 to 31) bytes into ``state``, as the reference pads them."""
    rest = len(tail)
    add = (rest << 32) + rest
    words = list(state)
    for i in range(4):
        words[i] = (words[i] + add) & _M
        words[4 + i] = _rotate32(words[4 + i], rest)
    packet = bytearray(32)
    whole = rest & ~3
    packet[:whole] = tail[:whole]
    size_mod4 = rest & 3
    if rest & 16:
        packet[28:32] = tail[rest - 4 : rest]
    elif size_mod4:
        packet[16] = tail[whole]
        packet[17] = tail[whole + (size_mod4 >> 1)]
        packet[18] = tail[rest - 1]
    return _update(tuple(words), (_PACKET.unpack(packet),))


def highwayhash64(data: Any, key: Sequence[int] = RIEGELI_KEY) -> int:
    """Return the 64-bit HighwayHash of ``data`` (any buffer) under ``key`` (four 64-bit words).

    The default key is Riegeli's (:data:`RIEGELI_KEY`).

    Examples
    --------
    The reference implementation's test vector for the key 1, 2, 3, 4:

    >>> hex(highwayhash64(bytes(range(128, 161)), [1, 2, 3, 4]))
    '0x53c516cce478cad7'
    """
    view = memoryview(data).cast("B")
    full = len(view) & ~31
    state = _update(_reset(key), _PACKET.iter_unpack(view[:full]))
    if full != len(view):
        state = _remainder(state, view[full:].tobytes())
    for _ in range(4):
        state = _update(
            state, ((_swap(state[2]), _swap(state[3]), _swap(state[0]), _swap(state[1])),)
        )
    return (state[0] + state[4] + state[8] + state[12]) & _M
