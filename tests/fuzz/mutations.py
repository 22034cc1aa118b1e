"""Byte-level damage for fuzzing: generic mutations plus hostile values in known header fields.

A :class:`Layout` lists where the integer fields of a seed file are (record lengths, FFRecord counts and
offsets) and how to repair its checksums after a field was changed, so that a hostile length can get past
the header checksum and reach the code that must bound it.
"""

from __future__ import annotations

import random
import struct
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field

from recordkit.formats import _crc

__all__ = [
    "HOSTILE_INTS",
    "Field",
    "Layout",
    "ffrecord_layout",
    "mutate",
    "ofrecord_layout",
    "tfrecord_layout",
]

HOSTILE_INTS = (0, 1, -1, 2**31 - 1, 2**32, 2**62, 2**63 - 1, -(2**63), 2**64 - 1)
"""Values written into length and offset fields (wrapped to the field's width)."""


@dataclass(frozen=True)
class Field:
    """An integer field of a seed file: its offset, its struct code (``<Q``, ``<q``, ``<I``)."""

    offset: int
    code: str


@dataclass
class Layout:
    """Where a seed's integer fields are, and how to make its checksums agree again."""

    fields: list[Field] = field(default_factory=list)
    repair: Callable[[bytearray], None] | None = None


def tfrecord_layout(records: list[bytes]) -> Layout:
    """The length fields of a TFRecord file of ``records``; the repair recomputes the length checksums."""
    starts = []
    pos = 0
    for record in records:
        starts.append(pos)
        pos += 16 + len(record)

    def repair(data: bytearray) -> None:
        for start in starts:
            if start + 12 <= len(data):
                crc = _crc.masked_crc32c(bytes(data[start : start + 8]))
                data[start + 8 : start + 12] = struct.pack("<I", crc)

    return Layout([Field(s, "<Q") for s in starts], repair)


def ofrecord_layout(records: list[bytes]) -> Layout:
    """The length fields of an OFRecord file of ``records`` (no checksums to repair)."""
    starts = []
    pos = 0
    for record in records:
        starts.append(pos)
        pos += 8 + len(record)
    return Layout([Field(s, "<q") for s in starts])


def ffrecord_layout(count: int) -> Layout:
    """The count, CRC and offset fields of an FFRecord header; the repair recomputes the header checksum."""
    fields = [Field(4, "<q")]
    fields += [Field(12 + 4 * i, "<I") for i in range(count)]
    fields += [Field(12 + 4 * count + 8 * i, "<q") for i in range(count)]

    def repair(data: bytearray) -> None:
        if len(data) >= 12 + 12 * count:
            data[0:4] = struct.pack("<I", zlib.crc32(bytes(data[4 : 12 + 12 * count])))

    return Layout(fields, repair)


def _hostile(rng: random.Random, size: int) -> int:
    choice = rng.randrange(4)
    if choice == 0:
        return rng.choice(HOSTILE_INTS)
    if choice == 1:
        return size + rng.choice((-1, 0, 1))
    if choice == 2:
        return rng.randrange(0, max(size, 1) * 2 + 1)
    return rng.getrandbits(64)


def _set_field(data: bytearray, rng: random.Random, layout: Layout) -> str:
    if layout.fields and rng.random() < 0.8:
        target = rng.choice(layout.fields)
    else:
        target = Field(rng.randrange(max(len(data) - 7, 1)), rng.choice(("<Q", "<q", "<I")))
    width = struct.calcsize(target.code)
    value = _hostile(rng, len(data)) % (1 << (8 * width))
    if target.offset + width > len(data):
        return "set-field(skipped)"
    data[target.offset : target.offset + width] = value.to_bytes(width, "little")
    repaired = layout.repair is not None and rng.random() < 0.7
    if repaired:
        assert layout.repair is not None
        layout.repair(data)
    return f"set-field@{target.offset}={value}{'+repair' if repaired else ''}"


def _span(rng: random.Random, size: int) -> tuple[int, int]:
    start = rng.randrange(size + 1)
    length = rng.choice((1, 2, 4, 8, 12, 16, rng.randrange(size + 1)))
    return start, min(size, start + length)


def _flip(data: bytearray, rng: random.Random) -> str:
    if not data:
        return "flip(empty)"
    bits = rng.choice((1, 1, 1, 2, 8))
    where = [rng.randrange(len(data) * 8) for _ in range(bits)]
    for bit in where:
        data[bit // 8] ^= 1 << (bit % 8)
    return f"flip{where}"


def _truncate(data: bytearray, rng: random.Random) -> str:
    cut = rng.randrange(len(data) + 1)
    del data[cut:]
    return f"truncate@{cut}"


def _extend(data: bytearray, rng: random.Random) -> str:
    n = rng.choice((1, 4, 8, 12, 16, 100))
    kind = rng.randrange(3)
    if kind == 0:
        data += bytes(n)
    elif kind == 1:
        data += rng.randbytes(n)
    else:
        data += data[-n:]
    return f"extend({kind},{n})"


def _splice(data: bytearray, rng: random.Random) -> str:
    start, end = _span(rng, len(data))
    chunk = data[start:end]
    to = rng.randrange(len(data) + 1)
    data[to : to + len(chunk)] = chunk
    return f"splice[{start}:{end}]->{to}"


def _duplicate(data: bytearray, rng: random.Random) -> str:
    start, end = _span(rng, len(data))
    to = rng.randrange(len(data) + 1)
    data[to:to] = data[start:end]
    return f"duplicate[{start}:{end}]->{to}"


def _delete(data: bytearray, rng: random.Random) -> str:
    start, end = _span(rng, len(data))
    del data[start:end]
    return f"delete[{start}:{end}]"


def _random_bytes(data: bytearray, rng: random.Random) -> str:
    n = rng.choice((0, 1, 7, 8, 11, 12, 13, 16, 64, 1000))
    data[:] = rng.randbytes(n)
    return f"random({n})"


def _varint(data: bytearray, rng: random.Random) -> str:
    """Overwrite a byte with a long varint (protobuf lengths and tags)."""
    if not data:
        return "varint(empty)"
    at = rng.randrange(len(data))
    value = rng.choice((2**31, 2**32, 2**63 - 1, 2**64 - 1, len(data) + 1, 0x7F))
    encoded = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        encoded.append(byte | (0x80 if value else 0))
        if not value:
            break
    data[at : at + 1] = encoded
    return f"varint@{at}"


_MUTATORS = (_flip, _flip, _truncate, _extend, _splice, _duplicate, _delete, _varint)


def mutate(seed: bytes, rng: random.Random, layout: Layout) -> tuple[bytes, str]:
    """Return a damaged copy of ``seed`` and a description of the damage.

    One to three mutations are stacked. Hostile field values are the most common single mutation, so
    length and offset handling gets most of the attention.
    """
    data = bytearray(seed)
    steps = []
    if rng.random() < 0.02:
        steps.append(_random_bytes(data, rng))
        return bytes(data), " ".join(steps)
    for _ in range(rng.choice((1, 1, 1, 2, 3))):
        if rng.random() < 0.35:
            steps.append(_set_field(data, rng, layout))
        else:
            steps.append(rng.choice(_MUTATORS)(data, rng))
    return bytes(data), " ".join(steps)


def is_single_bit_flip(description: str) -> bool:
    """Whether the damage was exactly one flipped bit (checksummed formats must then detect it)."""
    return (
        description.startswith("flip[") and description.count(",") == 0 and " " not in description
    )
