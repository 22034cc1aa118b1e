"""The decompressors of Riegeli chunks: zstd, Brotli and Snappy, from maintained packages, bounded.

Riegeli names a chunk's compression with one byte (``0`` none, ``b`` Brotli, ``z`` zstd, ``s`` Snappy);
each compressed block is prefixed with its decompressed size (a varint). The codecs come from the
``arrayrecord`` extra (``pip install 'recordkit[arrayrecord]'``): cramjam has all three, and zstd is also
taken from ``zstandard`` where cramjam is missing. recordkit carries no codec of its own.

The declared size is untrusted: a crafted block can declare 10**11 bytes in a few bytes of data, and a
decompressor told to produce that much allocates it before it finds out. So the output goes into a buffer
of :data:`EAGER` bytes or :data:`GUESS` times the compressed size, whichever is larger (or the declared size,
if smaller, plus one byte to notice an output that is too long); only when the codec really fills it does
the buffer grow, eight times larger each time, up to the declared size. Memory follows what the data really decompresses to, never what it claims, and the
output must be exactly the declared size: a shorter one is an error, not zero padding.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable
from typing import Any

from recordkit.formats._varint import Malformed, varint_at
from recordkit.support.extras import install_hint

__all__ = ["EAGER", "GUESS", "NAMES", "DecompressionFailed", "bounded", "decompressor"]

NAMES = {0: "none", 0x62: "brotli", 0x7A: "zstd", 0x73: "snappy"}
"""Riegeli's compression bytes and the codec each names."""

EXTRA_HINT = install_hint("arrayrecord")

EAGER = 1 << 20
"""An output buffer this large may be allocated before the codec has shown that it needs it."""

GUESS = 64
"""The first output buffer holds this many times the compressed size, when that is more than EAGER."""

SNAPPY_EXPANSION = 22
"""No Snappy data decompresses to more than this many times its size (a 3-byte copy yields 64 bytes)."""


class DecompressionFailed(ValueError):
    """A codec refused the bytes it was given, or they decompress to another size than declared (the
    caller says where they were)."""


class _TooSmall(Exception):
    """The output does not fit the buffer given."""


Into = Callable[[Any, bytearray], int]
"""Decompress into a buffer; return the output's length, or raise :class:`_TooSmall` if it does not fit."""


def _module(name: str) -> Any:
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def _cramjam(codec: str) -> Into | None:
    """cramjam's ``decompress_into`` for ``codec``: it fails, saying so, when the buffer is too small."""
    cramjam = _module("cramjam")
    if cramjam is None:
        return None
    module = getattr(cramjam, codec)
    write = module.decompress_raw_into if codec == "snappy" else module.decompress_into
    overflow = ("failed to write whole buffer", "is smaller than required")

    def into(data: Any, buffer: bytearray) -> int:
        try:
            written: int = write(data, buffer)
        except cramjam.DecompressionError as exc:
            if any(words in str(exc) for words in overflow):
                raise _TooSmall from None
            raise
        return written

    return into


def _zstandard() -> Into | None:
    """``zstandard``'s stream reader, which produces as much output as asked and no more."""
    zstandard = _module("zstandard")
    if zstandard is None:
        return None

    def into(data: Any, buffer: bytearray) -> int:
        reader = zstandard.ZstdDecompressor().stream_reader(data, read_across_frames=True)
        view, got = memoryview(buffer), 0
        while got < len(buffer):
            n = reader.readinto(view[got:])
            if not n:
                return got
            got += n
        if reader.read(1):
            raise _TooSmall
        return got

    return into


_FINDERS: dict[int, Callable[[], Into | None]] = {
    0x7A: lambda: _cramjam("zstd") or _zstandard(),
    0x62: lambda: _cramjam("brotli"),
    0x73: lambda: _cramjam("snappy"),
}


def bounded(into: Into, data: Any, size: int) -> bytes:
    """Return ``data`` decompressed by ``into``, which must yield exactly ``size`` bytes (see the module).

    Raises
    ------
    DecompressionFailed
        The codec refused the data, or its output is shorter or longer than ``size``.
    """
    cap = min(size + 1, max(EAGER, GUESS * len(data)))
    while True:
        try:
            buffer = bytearray(cap)
            written = into(data, buffer)
        except _TooSmall:
            if cap > size:
                raise DecompressionFailed(
                    f"it decompresses to more than the {size} bytes it declares"
                ) from None
            cap = min(size + 1, cap * 8)
            continue
        except MemoryError:
            raise DecompressionFailed(
                f"no memory for the {cap} bytes it decompresses to (of {size} declared)"
            ) from None
        except Exception as exc:
            raise DecompressionFailed(f"{type(exc).__name__}: {exc}") from exc
        if written != size:
            raise DecompressionFailed(
                f"it decompresses to {written} bytes, not the {size} it declares"
            )
        return bytes(memoryview(buffer)[:written])


def _snappy_checked(into: Into) -> Callable[[Any, int], bytes]:
    """Snappy states its output size first: refuse one that disagrees or that no Snappy data can reach."""

    def decompress(data: Any, size: int) -> bytes:
        if size > SNAPPY_EXPANSION * len(data) + 32:
            raise DecompressionFailed(
                f"{len(data)} bytes of Snappy data cannot decompress to the {size} bytes declared"
            )
        return bounded(into, data, size)

    return decompress


@functools.cache
def decompressor(kind: int) -> Callable[[Any, int], bytes]:
    """Return ``decompress(data, size)`` for Riegeli compression byte ``kind`` (not ``0``).

    ``size`` is the decompressed size the block's prefix declares: the result is exactly that long, and
    no more memory than the data really decompresses to is allocated (see the module). Any failure, a
    short or long output included, raises :class:`DecompressionFailed`.

    Raises
    ------
    ImportError
        No installed package decompresses this codec; the message names the extra that brings one.
    KeyError
        ``kind`` names no codec Riegeli defines.
    """
    into = _FINDERS[kind]()
    if into is None:
        raise ImportError(
            f"reading {NAMES[kind]}-compressed Riegeli/ArrayRecord chunks needs a decompressor: "
            f"{EXTRA_HINT} (cramjam)"
        )
    found: Into = into
    if kind == 0x73:
        return _snappy_checked(found)
    return lambda data, size: bounded(found, data, size)


def inflate(kind: int, block: bytes, what: str, lowest: int = 0, highest: int = 1 << 64) -> bytes:
    """Decompress one Riegeli block of compression ``kind`` (``0``: stored as it is), prefixed with its
    decompressed size, which must lie in ``[lowest, highest]``.

    The bounds come from the chunk header where it has them (the record count, the records' total size):
    a block declaring another size is refused before anything is decompressed.
    """
    if not kind:
        return block
    found = varint_at(block, 0, 64)
    if found is None:
        raise Malformed(f"the decompressed size of the {what} is cut short or too long")
    size, pos = found
    if not lowest <= size <= highest:
        expected = f"{lowest}" if lowest == highest else f"{lowest} to {highest}"
        raise Malformed(
            f"the {what} declare {size} bytes decompressed where the chunk header allows {expected}"
        )
    try:
        return decompressor(kind)(block[pos:], size)
    except DecompressionFailed as exc:
        raise Malformed(f"the {NAMES[kind]}-compressed {what} do not decompress: {exc}") from None
