"""A tiny protobuf wire writer for tests: builds Example/OFRecord payloads byte by byte.

It lets tests choose what protobuf libraries never write on their own: unpacked numeric lists, map entries
with the value before the key, duplicate keys, unknown fields of every wire type, and broken framing.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

# Feature oneof field numbers.
TF_BYTES, TF_FLOAT, TF_INT64 = 1, 2, 3
OF_BYTES, OF_FLOAT, OF_DOUBLE, OF_INT32, OF_INT64 = 1, 2, 3, 4, 5


def varint(value: int) -> bytes:
    """Encode ``value`` (negative numbers as 64-bit two's complement) as a varint."""
    value &= (1 << 64) - 1
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def tag(field: int, wire_type: int) -> bytes:
    return varint(field << 3 | wire_type)


def delimited(field: int, payload: bytes) -> bytes:
    return tag(field, 2) + varint(len(payload)) + payload


def list_payload(
    kind: int, values: Sequence[object], *, packed: bool = True, ofrecord: bool = False
) -> bytes:
    """The payload of a BytesList/FloatList/... message holding ``values``."""
    encoding = _encoding(kind, ofrecord)
    if encoding == "bytes":
        return b"".join(delimited(1, bytes(v)) for v in values)  # type: ignore[call-overload]
    if encoding == "f4":
        items = [struct.pack("<f", v) for v in values]
        wire_type = 5
    elif encoding == "f8":
        items = [struct.pack("<d", v) for v in values]
        wire_type = 1
    else:
        items = [varint(int(v)) for v in values]  # type: ignore[call-overload]
        wire_type = 0
    if packed:
        return delimited(1, b"".join(items)) if items else b""
    return b"".join(tag(1, wire_type) + item for item in items)


def _encoding(kind: int, ofrecord: bool) -> str:
    if ofrecord:
        return {1: "bytes", 2: "f4", 3: "f8", 4: "varint", 5: "varint"}[kind]
    return {1: "bytes", 2: "f4", 3: "varint"}[kind]


def feature(
    kind: int, values: Sequence[object], *, packed: bool = True, ofrecord: bool = False
) -> bytes:
    """A serialized Feature message with one list set."""
    return delimited(kind, list_payload(kind, values, packed=packed, ofrecord=ofrecord))


def entry(key: str, value: bytes, *, value_first: bool = False) -> bytes:
    """A map entry (field 1 of Features/OFRecord) for ``key`` -> serialized Feature ``value``."""
    parts = [delimited(1, key.encode()), delimited(2, value)]
    if value_first:
        parts.reverse()
    return delimited(1, b"".join(parts))


def features_payload(entries: Sequence[bytes]) -> bytes:
    """A Features (or OFRecord) message from serialized entries."""
    return b"".join(entries)


def example(entries: Sequence[bytes]) -> bytes:
    """A serialized Example wrapping the given map entries."""
    return delimited(1, features_payload(entries))


UNKNOWN_FIELDS = (
    tag(15, 0) + varint(300),
    tag(15, 1) + b"\x01" * 8,
    delimited(15, b"anything \xff"),
    tag(15, 5) + b"\x02" * 4,
    tag(15, 3) + tag(1, 0) + varint(5) + tag(15, 4),
)
