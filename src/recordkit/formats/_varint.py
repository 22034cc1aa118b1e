"""Protobuf's base-128 varints, read one at a time, for the few the framing reads (OFRecord's sniffing,
Riegeli's chunks); payloads are decoded by :mod:`recordkit.decode`. Also :class:`Malformed`, what the
decoders of Riegeli chunks raise."""

from __future__ import annotations

__all__ = ["Malformed", "varint_at"]


class Malformed(ValueError):
    """Chunk data that cannot be decoded (the caller locates it)."""


def varint_at(data: bytes, pos: int) -> tuple[int, int] | None:
    """Return the varint at ``data[pos:]`` and the position after it, or ``None`` if it runs past ``data``
    or past 10 bytes."""
    value = 0
    for shift in range(0, 70, 7):
        if pos >= len(data):
            return None
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
    return None
