"""Whole-file compression of record files, in one place: names, suffixes, magic bytes, decompressors.

A format that accepts compressed files (``Capabilities.compression``) and :mod:`recordkit.recover` use it.

GZIP and ZLIB are TensorFlow's ``compression_type`` values: recordkit reads and writes them. BZIP2 is what
Apache Beam writes with ``compression_type=BZIP2`` (``.tfrecord.bz2``); TensorFlow cannot read it, so
recordkit reads it (with the standard library's :mod:`bz2`) but does not write it.

Every decompressor has the interface of :func:`zlib.decompressobj` that the readers use:
``decompress(data, max_length)``, ``eof``, ``unused_data``, ``unconsumed_tail``, and raises
:class:`zlib.error` on damaged data.
"""

from __future__ import annotations

import bz2
import zlib
from typing import Final, Protocol

from recordkit.errors import UnsupportedOperationError

__all__ = [
    "MEMBERS",
    "Decompressor",
    "NAMES",
    "READ_ONLY",
    "SUFFIXES",
    "check_writable",
    "decompressor",
    "magic",
]

NAMES: Final[dict[str, str]] = {
    "": "",
    "none": "",
    "gzip": "gzip",
    "gz": "gzip",
    "zlib": "zlib",
    "bzip2": "bzip2",
    "bz2": "bzip2",
}
"""Accepted spellings (lowercased) -> the canonical name (``""`` for none)."""

SUFFIXES: Final = ((".gz", "gzip"), (".gzip", "gzip"), (".zlib", "zlib"), (".bz2", "bzip2"))
"""File name suffixes that name a compression."""

READ_ONLY: Final = frozenset({"bzip2"})
"""Compressions recordkit reads but does not write: TensorFlow cannot read them."""

MEMBERS: Final = frozenset({"gzip", "bzip2"})
"""Compressions whose files may hold several streams back to back (GZIP members, BZIP2 streams)."""

_WBITS: Final = {"gzip": 31, "zlib": 15}
# "BZh", the block size ('1'-'9'), then the magic of a block (pi) or of the end of the stream (sqrt(pi)).
_BZIP2_BLOCKS: Final = (b"\x31\x41\x59\x26\x53\x59", b"\x17\x72\x45\x38\x50\x90")


class Decompressor(Protocol):
    """What the readers use of a decompressor: :func:`zlib.decompressobj`'s interface."""

    @property
    def eof(self) -> bool:
        """Whether the end of the stream was reached."""
        ...

    @property
    def unused_data(self) -> bytes:
        """The bytes after the end of the stream."""
        ...

    @property
    def unconsumed_tail(self) -> bytes:
        """Input not yet used because of ``max_length``, to give again."""
        ...

    def decompress(self, data: bytes, max_length: int = ..., /) -> bytes:
        """Return up to ``max_length`` decompressed bytes of ``data``; raise :class:`zlib.error`."""
        ...


def _looks_zlib(head: bytes) -> bool:
    return (
        len(head) >= 2
        and head[0] & 0x0F == 8
        and head[0] >> 4 <= 7
        and (head[0] << 8 | head[1]) % 31 == 0
    )


def _looks_bzip2(head: bytes) -> bool:
    return (
        len(head) >= 4
        and head[:3] == b"BZh"
        and 0x31 <= head[3] <= 0x39
        and (len(head) < 10 or head[4:10] in _BZIP2_BLOCKS)
    )


def magic(head: bytes) -> str:
    """Return the compression whose magic bytes ``head`` starts with (``""`` for none)."""
    if head[:3] == b"\x1f\x8b\x08":
        return "gzip"
    if _looks_bzip2(head):
        return "bzip2"
    return "zlib" if _looks_zlib(head) else ""


class _Bunzip2:
    """:class:`bz2.BZ2Decompressor` with the interface of a zlib decompressor (see the module)."""

    unconsumed_tail = b""  # the decompressor keeps input it has not used yet itself

    def __init__(self) -> None:
        self._inner = bz2.BZ2Decompressor()

    @property
    def eof(self) -> bool:
        """Whether the end of the stream was reached."""
        return self._inner.eof

    @property
    def unused_data(self) -> bytes:
        """The bytes after the end of the stream."""
        return self._inner.unused_data

    def decompress(self, data: bytes, max_length: int = -1, /) -> bytes:
        """Return up to ``max_length`` decompressed bytes; ``b""`` input continues with what is held."""
        try:
            return self._inner.decompress(data, max_length)
        except (OSError, EOFError) as exc:
            raise zlib.error(f"invalid BZIP2 data ({exc})") from None


def decompressor(name: str) -> Decompressor:
    """Return a new decompressor for one stream of compression ``name`` (``"gzip"``, ``"zlib"``, ``"bzip2"``)."""
    if name == "bzip2":
        return _Bunzip2()
    return zlib.decompressobj(_WBITS[name])


def check_writable(name: str, format: str) -> None:
    """Raise :class:`~recordkit.errors.UnsupportedOperationError` for a compression recordkit only reads."""
    if name in READ_ONLY:
        raise UnsupportedOperationError(
            f"recordkit reads {name.upper()}-compressed {format} files but does not write them: "
            "TensorFlow cannot read them (its compression types are GZIP and ZLIB). Write GZIP "
            "(compression='gzip', a '.gz' suffix) or uncompressed files instead"
        )
