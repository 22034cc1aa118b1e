"""Protobuf's base-128 varints, read one at a time, for the few the framing reads (OFRecord's sniffing,
Riegeli's chunks, read and written); payloads are decoded by :mod:`recordkit.decode`. Also :class:`Malformed`, what the
decoders of Riegeli chunks raise."""

from __future__ import annotations

__all__ = ["Malformed", "varint", "varint_at"]


class Malformed(ValueError):
    """Chunk data that cannot be decoded (the caller locates it)."""


def varint_at(data: bytes, pos: int, bits: int = 70) -> tuple[int, int] | None:
    """Return the varint at ``data[pos:]`` and the position after it, or ``None`` if it runs past ``data``,
    or does not fit ``bits`` bits in ``ceil(bits / 7)`` bytes (by default 10 bytes, as protobuf allows).

    A varint may be longer than it needs (trailing zero groups) within that many bytes.
    """
    value = 0
    last = (bits + 6) // 7 - 1
    for i in range(last + 1):
        if pos + i >= len(data):
            return None
        byte = data[pos + i]
        if i == last and byte >> (bits - 7 * i):
            return None
        value |= (byte & 0x7F) << (7 * i)
        if byte < 0x80:
            return value, pos + i + 1
    return None


_ONE_BYTE = [bytes((i,)) for i in range(128)]


def varint(value: int) -> bytes:
    """Return the varint of ``value`` (``0 <= value < 2**64``), as Riegeli's writer encodes sizes."""
    if value < 128:
        return _ONE_BYTE[value]
    out = bytearray()
    while value >= 128:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)
