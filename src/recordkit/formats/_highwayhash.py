"""HighwayHash-64 in pure Python: the hash Riegeli stores for its block headers, chunk headers and chunk data.

HighwayHash (https://github.com/google/highwayhash) is a keyed hash of 256-bit state updated with 32-byte
packets. No maintained Python package computes it (the one binding on PyPI, ``highwayhash-cffi``, has had
no release since 2020 and no longer builds), so recordkit implements the algorithm here in Python, checked
against the reference implementation's published test vectors and against files written by Riegeli.

One input costs about 45 µs if short (a chunk header) and is hashed at about 4 MB/s if long.
:func:`highwayhash64_many` hashes many inputs at once with numpy, a row of four words per input, the byte
shuffle done as one gather: about 1.5 µs a header, 60 MB/s of 1 KiB inputs, 10 MB/s of 64 KiB inputs
sixteen at a time (see :mod:`recordkit.formats.arrayrecord` for what is checked when). Its rounds are the
scalar ones rearranged; the shuffle's index is derived from the scalar rounds, and the tests compare the
two on many inputs.

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

__all__ = ["BATCH", "RIEGELI_KEY", "highwayhash64", "highwayhash64_many"]

RIEGELI_KEY = (0x2F696C6567656952, 0x0A7364726F636572, 0x2F696C6567656952, 0x0A7364726F636572)
"""The fixed key of Riegeli's hashes: ``'Riegeli/'``, ``'records\\n'``, twice, as little-endian words."""

_M = 0xFFFFFFFFFFFFFFFF
_LO = 0xFFFFFFFF
_INIT0 = (0xDBE6D5D5FE4CCE2F, 0xA4093822299F31D0, 0x13198A2E03707344, 0x243F6A8885A308D3)
_INIT1 = (0x3BD39E10CB0EF593, 0xC0ACF169B5F18A8C, 0xBE5466CF34E90C6C, 0x452821E638D01377)
_PACKET = struct.Struct("<4Q")
BATCH = 4
"""The fewest items :func:`highwayhash64_many` hashes with numpy (fewer are hashed one by one)."""
_ROWS = 2048
"""The most items :func:`highwayhash64_many` hashes in one set of arrays."""


def _update(state: Sequence[Any], packets: Iterable[Sequence[Any]]) -> tuple[Any, ...]:
    """Mix packets (four little-endian 64-bit lanes each) into ``state``; return the new state.

    ``state`` is the 16 words ``v0[0:4] + v1[0:4] + mul0[0:4] + mul1[0:4]``: Python integers, or numpy
    ``uint64`` arrays holding one word of many inputs (the same arithmetic, wrapping at 64 bits, so the one
    implementation serves both). The byte shuffle ("zipper merge") is written out inline: this loop is all
    of the hash's cost.
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


def _rotate32(lane: Any, count: Any) -> Any:
    """Rotate both 32-bit halves of ``lane`` left by ``count`` (0 < count < 32)."""
    low, high = lane & _LO, lane >> 32
    low = ((low << count) | (low >> (32 - count))) & _LO
    high = ((high << count) | (high >> (32 - count))) & _LO
    return (high << 32) | low


def _swap(lane: Any) -> Any:
    return ((lane >> 32) | (lane << 32)) & _M


def _reset(key: Sequence[int]) -> tuple[int, ...]:
    """The state before any packet, for ``key``."""
    return (
        *(_INIT0[i] ^ key[i] for i in range(4)),
        *(_INIT1[i] ^ _swap(key[i]) for i in range(4)),
        *_INIT0,
        *_INIT1,
    )


def _padding(rest: int) -> list[int]:
    """Where the reference puts the last ``rest`` (1 to 31) bytes in the final packet.

    Entry ``i`` is the index in the tail of the packet's byte ``i``, or 32 for a zero byte.
    """
    whole = rest & ~3
    table = [*range(whole), *[32] * (32 - whole)]
    if rest & 16:
        table[28:32] = range(rest - 4, rest)
    elif rest & 3:
        table[16:19] = [whole, whole + ((rest & 3) >> 1), rest - 1]
    return table


_PADDING = [_padding(rest) if rest else [32] * 32 for rest in range(32)]


def _remainder(
    state: Sequence[Any], rest: Any, packet: tuple[Any, Any, Any, Any]
) -> tuple[Any, ...]:
    """Mix the final ``packet`` of ``rest`` (1 to 31) bytes, padded by :data:`_PADDING`, into ``state``."""
    add = (rest << 32) + rest
    words = [(state[i] + add) & _M for i in range(4)]
    words += [_rotate32(state[4 + i], rest) for i in range(4)]
    return _update((*words, *state[8:]), (packet,))


def _finalize(state: tuple[Any, ...]) -> Any:
    """Run the four final permute-and-update rounds; return the 64-bit hash."""
    for _ in range(4):
        state = _update(
            state, ((_swap(state[2]), _swap(state[3]), _swap(state[0]), _swap(state[1])),)
        )
    return (state[0] + state[4] + state[8] + state[12]) & _M


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
    rest = len(view) - full
    if rest:
        tail = view[full:].tobytes().ljust(33, b"\0")
        packet = bytes(tail[i] for i in _PADDING[rest])
        state = _remainder(state, rest, _PACKET.unpack(packet))
    result: int = _finalize(state)
    return result


def _zipper_order() -> list[int]:
    """The byte shuffle ("zipper merge") of :func:`_update` as an index: byte ``i`` of the 32 bytes added
    to ``v0`` is byte ``order[i]`` of ``v1`` (and likewise from ``v0`` to ``v1``).

    Derived from the scalar rounds themselves, on a ``v1`` whose bytes are all different, so that the two
    formulations cannot disagree.
    """
    state = [0] * 16
    state[4:8] = [int.from_bytes(bytes(range(8 * i + 1, 8 * i + 9)), "little") for i in range(4)]
    mixed = _update(state, ((0, 0, 0, 0),))  # v0 = 0 + zipper(v1), the multipliers staying zero
    return [byte - 1 for word in mixed[:4] for byte in word.to_bytes(8, "little")]


def _lanes_update(state: Sequence[Any], packet: Any, order: Any) -> None:
    """:func:`_update` of one packet on many inputs at once, in place.

    ``state`` is ``v0, v1, mul0, mul1``, each a C-contiguous ``(n, 4)`` ``uint64`` array (a row per
    input), and ``packet`` an ``(n, 4)`` array of words. A row's four words are updated together, and the
    byte shuffle is one gather (``order``, :func:`_zipper_order`): a dozen numpy operations a packet.
    """
    import numpy as np

    v0, v1, m0, m1 = state
    v1 += m0
    v1 += packet
    m0 ^= (v1 & _LO) * (v0 >> 32)
    v0 += m1
    m1 ^= (v0 & _LO) * (v1 >> 32)
    v0 += np.take(v1.view(np.uint8), order, axis=1).view(np.uint64)
    v1 += np.take(v0.view(np.uint8), order, axis=1).view(np.uint64)


def _rows(items: Sequence[Any], lengths: Any, order: Any, stride: int) -> Any:
    """The bytes of ``items`` in the order ``order``, a row of ``stride`` bytes each, zeros after them."""
    import numpy as np

    n = len(items)
    first = int(lengths[0])
    if first == int(lengths[-1]) and first:  # all of one length (chunk headers): no copy per item
        rows = np.zeros((n, stride), np.uint8)
        rows[:, :first] = np.frombuffer(b"".join(items), np.uint8).reshape(n, first)
        return rows
    buf = np.zeros(n * stride, np.uint8)
    view, start = memoryview(buf.data), 0
    for i, size in zip(order.tolist(), lengths.tolist(), strict=True):
        view[start : start + size] = memoryview(items[i]).cast("B")
        start += stride
    return buf.reshape(n, stride)


def highwayhash64_many(items: Sequence[Any], key: Sequence[int] = RIEGELI_KEY) -> list[int]:
    """Return the HighwayHash-64 of each of ``items`` (buffers) under ``key``, computed together.

    With many items, numpy runs the rounds on ``(items, 4)`` arrays, a row per item
    (:func:`_lanes_update`): hashing 10,000 chunk headers costs about as much as hashing 200 one by one.
    Fewer than :data:`BATCH` items are hashed one by one.

    Examples
    --------
    >>> highwayhash64_many([b"", bytes(range(33))] * 20)[:2] == [
    ...     highwayhash64(b""), highwayhash64(bytes(range(33)))]
    True
    """
    if len(items) < BATCH:
        return [highwayhash64(item, key) for item in items]
    if (
        len(items) > _ROWS
    ):  # beyond about this many rows, the arrays of the rounds fall out of the cache
        return [
            digest
            for at in range(0, len(items), _ROWS)
            for digest in highwayhash64_many(items[at : at + _ROWS], key)
        ]
    import numpy as np

    n = len(items)
    lengths = np.fromiter((memoryview(item).nbytes for item in items), np.int64, n)
    order = np.argsort(-lengths, kind="stable")  # the items still hashing packet j are a prefix
    lengths = lengths[order]
    stride = (
        int(lengths[0]) + 63
    ) & ~31  # a row per item, its bytes then zeros (a packet at least)
    rows = _rows(items, lengths, order, stride)
    buf = rows.reshape(-1)
    starts = np.arange(n, dtype=np.int64) * stride
    packets = lengths >> 5
    whole = int(packets[0])
    words = rows.view("<u8")
    initial = np.array(_reset(key), np.uint64).reshape(4, 4)
    state = tuple(np.repeat(initial[k][None, :], n, axis=0) for k in range(4))
    zipper = np.array(_zipper_order())
    columns = np.arange(32)
    for j in range(whole):
        active = int(np.searchsorted(-packets, -j, side="left"))
        lanes = state if active == n else [part[:active] for part in state]
        _lanes_update(lanes, words[:active, 4 * j : 4 * j + 4], zipper)
    rests = lengths & 31
    ragged = np.flatnonzero(rests)
    if len(ragged):
        tails = starts[ragged] + 32 * packets[ragged]
        rest = rests[ragged].astype(np.uint64)[:, None]
        taken = np.minimum(columns, rest.astype(np.int64) - 1)
        tail = np.where(columns < rest, buf[tails[:, None] + taken], 0).astype(np.uint8)
        tail = np.concatenate([tail, np.zeros((len(ragged), 1), np.uint8)], axis=1)
        padded = np.take_along_axis(tail, np.asarray(_PADDING)[rests[ragged]], axis=1)
        part = tuple(np.ascontiguousarray(word[ragged]) for word in state)
        part[0][...] += (rest << 32) + rest
        low, high = part[1] & _LO, part[1] >> 32
        low = ((low << rest) | (low >> (32 - rest))) & _LO
        high = ((high << rest) | (high >> (32 - rest))) & _LO
        part[1][...] = (high << 32) | low
        _lanes_update(part, padded.view("<u8"), zipper)
        for word, new in zip(state, part, strict=True):
            word[ragged] = new
    for _ in range(4):
        swapped = np.take(state[0], [2, 3, 0, 1], axis=1)
        _lanes_update(state, (swapped >> 32) | (swapped << 32), zipper)
    hashes = np.empty(n, np.uint64)
    hashes[order] = state[0][:, 0] + state[1][:, 0] + state[2][:, 0] + state[3][:, 0]
    result: list[int] = hashes.tolist()
    return result
