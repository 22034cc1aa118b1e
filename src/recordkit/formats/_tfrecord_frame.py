"""TFRecord's frame layout and the error of a checksum that does not match, shared by the record-by-record
reader (:mod:`recordkit.formats.tfrecord`) and the whole-buffer one (:mod:`recordkit.formats.bulk`).

A frame is the payload's length (8 bytes, little-endian), the masked CRC32C of those 8 bytes, the payload,
and the masked CRC32C of the payload.
"""

from __future__ import annotations

import struct

from recordkit.errors import ChecksumError

__all__ = ["HEADER", "LENGTH", "checksum_error"]

LENGTH = struct.Struct("<Q")
"""The length field."""
HEADER = struct.Struct("<QI")
"""The length field and its checksum."""


def checksum_error(
    path: str | None, index: int, offset: int, stored: int, actual: int, *, payload: bool = False
) -> ChecksumError:
    """The error of record ``index`` at ``offset`` whose length checksum (or, with ``payload``, payload
    checksum, located 12 bytes further, as TensorFlow does) does not match."""
    if payload:
        what, offset = "payload checksum mismatch", offset + 12
    else:
        # Only a bad first header suggests the file is not a TFRecord file at all.
        what = "length checksum mismatch" + (" (is this a TFRecord file?)" if offset == 0 else "")
    return ChecksumError(
        what, path=path, index=index, offset=offset, expected=stored, actual=actual
    )
