"""The decompressors of Riegeli chunks: zstd, Brotli and Snappy, from maintained packages.

Riegeli names a chunk's compression with one byte (``0`` none, ``b`` Brotli, ``z`` zstd, ``s`` Snappy);
each compressed block is prefixed with its decompressed size (a varint). The codecs come from the
``arrayrecord`` extra (``pip install 'recordkit[arrayrecord]'``: cramjam, which has all three), or from
the standard library's ``compression.zstd`` (Python 3.14+), ``zstandard`` or ``brotli`` where they are
installed. recordkit carries no codec of its own.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable
from typing import Any

from recordkit.support.extras import install_hint

__all__ = ["NAMES", "DecompressionFailed", "decompressor"]

NAMES = {0: "none", 0x62: "brotli", 0x7A: "zstd", 0x73: "snappy"}
"""Riegeli's compression bytes and the codec each names."""

EXTRA_HINT = install_hint("arrayrecord")


class DecompressionFailed(ValueError):
    """A codec refused the bytes it was given (the caller says where they were)."""


def _module(name: str) -> Any:
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def _cramjam(codec: str) -> Callable[[bytes, int], bytes] | None:
    cramjam = _module("cramjam")
    if cramjam is None:
        return None
    if codec == "snappy":
        raw = cramjam.snappy.decompress_raw
        return lambda data, size: bytes(raw(data))
    decompress = getattr(cramjam, codec).decompress
    return lambda data, size: bytes(decompress(data, output_len=size))


def _zstd() -> Callable[[bytes, int], bytes] | None:
    stdlib = _module("compression.zstd")
    if stdlib is not None:
        return lambda data, size: bytes(stdlib.decompress(data))
    found = _cramjam("zstd")
    if found is not None:
        return found
    zstandard = _module("zstandard")
    if zstandard is None:
        return None
    return lambda data, size: bytes(
        zstandard.ZstdDecompressor().decompress(data, max_output_size=size)
    )


def _brotli() -> Callable[[bytes, int], bytes] | None:
    found = _cramjam("brotli")
    if found is not None:
        return found
    brotli = _module("brotli")
    return None if brotli is None else lambda data, size: bytes(brotli.decompress(data))


_FINDERS: dict[int, Callable[[], Callable[[bytes, int], bytes] | None]] = {
    0x7A: _zstd,
    0x62: _brotli,
    0x73: lambda: _cramjam("snappy"),
}


@functools.cache
def decompressor(kind: int) -> Callable[[bytes, int], bytes]:
    """Return ``decompress(data, size)`` for Riegeli compression byte ``kind`` (not ``0``).

    ``size`` is the decompressed size the block's prefix declares; the result is checked against it by
    the caller. Any failure of the codec raises :class:`DecompressionFailed`.

    Raises
    ------
    ImportError
        No installed package decompresses this codec; the message names the extra that brings one.
    KeyError
        ``kind`` names no codec Riegeli defines.
    """
    find = _FINDERS[kind]
    codec = find()
    if codec is None:
        raise ImportError(
            f"reading {NAMES[kind]}-compressed Riegeli/ArrayRecord chunks needs a decompressor: "
            f"{EXTRA_HINT} (cramjam)"
        )
    found: Callable[[bytes, int], bytes] = codec

    def decompress(data: bytes, size: int) -> bytes:
        try:
            return found(data, size)
        except Exception as exc:
            raise DecompressionFailed(f"{type(exc).__name__}: {exc}") from exc

    return decompress
