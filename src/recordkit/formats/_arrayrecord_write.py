"""Writing ArrayRecord files: Riegeli simple chunks, block headers, padding, the footer and the postscript.

The layout is the one array_record's ``ArrayRecordWriter`` (``cpp/array_record_writer.cc``) writes through
Riegeli's ``DefaultChunkWriter`` (``riegeli/records/chunk_writer.cc``): the 64-byte signature, then one
simple chunk per ``group_size`` records (a compression byte, the length-prefixed record sizes, the record
values; each compressed block prefixed with its decompressed size), a block header at every multiple of
64 KiB a chunk crosses (the distances back to the chunk's beginning and on to its end), zeros after a chunk
up to where Riegeli's formula ends it (:func:`~recordkit.formats._riegeli.chunk_end`), and, with
``pad_to_block_boundary``, a padding chunk after each chunk up to the next block boundary. Then the footer
chunk (a ``RiegeliFooterMetadata``, then an ``ArrayRecordFooter`` per chunk, compressed as the data) and,
padded to a block boundary each, the postscript chunk (three ``RiegeliPostscript`` copies, uncompressed).

Chunks are encoded a batch at a time (about :data:`BATCH_BYTES` of records) in one worker thread, as the
C++ writer encodes in its thread pool: zstd (``zstandard``), Brotli and Snappy (``cramjam``) release the
GIL, and the hashes of a batch's chunk data, then of its chunk and block headers, are computed together
(:func:`~recordkit.formats._highwayhash.highwayhash64_many`).
"""

from __future__ import annotations

import struct
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import IO, Any

from recordkit.errors import OptionsError, UnsupportedOperationError
from recordkit.formats._highwayhash import highwayhash64, highwayhash64_many
from recordkit.formats._riegeli import (
    BLOCK,
    BLOCK_HEADER,
    CHUNK_HEADER,
    PADDING,
    SIGNATURE,
    SIMPLE,
    chunk_end,
)
from recordkit.formats._varint import varint
from recordkit.formats.base import FrameWriter
from recordkit.support.extras import needs

__all__ = ["MAGIC", "ArrayRecordFrameWriter", "WriterOptions", "parse_options"]

MAGIC = 0x71930E704FDAE05E
"""The ``magic`` field of ArrayRecord's postscript."""

BATCH_BYTES = 4 << 20
"""Records are encoded into chunks once about this many bytes of them are waiting (or a chunk is full)."""

_CODECS = {"uncompressed": 0, "zstd": 0x7A, "brotli": 0x62, "snappy": 0x73}
_LEVELS = {"zstd": (3, -131072, 22), "brotli": (6, 0, 11)}
"""The default, lowest and highest level of each codec that has levels (Riegeli's ``CompressorOptions``)."""
_IGNORED = ("max_parallelism", "saturation_delay_ms", "transpose_bucket_size")
"""Options of ArrayRecordWriter that change how it schedules its work, not what it writes."""
_INT32_MAX = (1 << 31) - 1
_WORDS = struct.Struct("<QQQQ")


@dataclass(frozen=True)
class WriterOptions:
    """ArrayRecordWriter's options, parsed (:func:`parse_options`); ``str()`` spells them as it does."""

    group_size: int = 1
    codec: str = "zstd"
    level: int | None = 3
    window_log: int | None = 20
    pad_to_block_boundary: bool = False

    def __str__(self) -> str:
        """The writer options as ArrayRecordWriter records them in the footer (``Options::ToString``)."""
        pad = "true" if self.pad_to_block_boundary else "false"
        text = f"group_size:{self.group_size},transpose:false,pad_to_block_boundary:{pad},"
        text += self.codec if self.level is None else f"{self.codec}:{self.level}"
        if self.window_log is not None:
            text += f",window_log:{self.window_log}"
        return text + ",max_parallelism:1"


def _bad(text: str, why: str) -> OptionsError:
    return OptionsError(f"ArrayRecord writer options {text!r}: {why}")


def _integer(text: str, name: str, value: str, lowest: int, highest: int) -> int:
    try:
        number = int(value)
    except ValueError:
        number = lowest - 1
    if not lowest <= number <= highest:
        raise _bad(text, f"{name} takes an integer from {lowest} to {highest}, not {value!r}")
    return number


def parse_options(text: str | None, level: int | None = None) -> WriterOptions:
    """Parse ArrayRecordWriter's option string (``"group_size:1,zstd:3"``), with its defaults.

    ``level``, when given, is the codec's level (as ``zstd:LEVEL`` or ``brotli:LEVEL`` would say).

    Raises
    ------
    OptionsError
        An unknown option or a value out of range (as ArrayRecordWriter refuses it).
    UnsupportedOperationError
        ``transpose:true`` (transposed chunks are read, not written), or ``window_log`` with Brotli
        (cramjam's Brotli has no window setting).
    """
    text = text or ""
    group, codec, pad, window, levels = 1, "zstd", False, "", {}
    seen_codec: str | None = None
    for option in text.split(","):
        key, _, value = option.partition(":")
        if not option or key in _IGNORED or option == "default" or option == "transpose:false":
            continue
        if key == "group_size":
            group = _integer(text, key, value, 1, _INT32_MAX)
        elif key in _CODECS:
            if seen_codec not in (None, key):
                raise _bad(text, f"{key} conflicts with {seen_codec}: name one compression")
            codec = seen_codec = key
            if value:
                if key not in _LEVELS:
                    raise _bad(text, f"{key} takes no level")
                levels[key] = _integer(text, key, value, *_LEVELS[key][1:])
        elif key == "window_log":
            window = value if value == "auto" else str(_integer(text, key, value, 10, 31))
        elif key == "pad_to_block_boundary" and value in ("", "true", "false"):
            pad = (
                value == "true"
            )  # a bare "pad_to_block_boundary" is false, as ArrayRecordWriter parses it
        elif key == "transpose" and value in ("", "true"):
            raise UnsupportedOperationError(
                "recordkit writes ArrayRecord files with simple chunks only: drop transpose:true "
                "(recordkit and array_record read both kinds)"
            )
        else:
            raise _bad(text, f"unknown option {option!r}")
    if level is not None:
        if codec not in _LEVELS:
            raise _bad(text, f"level={level} given, but {codec} has no levels")
        if codec in levels and levels[codec] != level:
            raise _bad(text, f"level={level} given, but the options say {codec}:{levels[codec]}")
        levels[codec] = _integer(text, "level", str(level), *_LEVELS[codec][1:])
    chosen = levels.get(codec, _LEVELS[codec][0]) if codec in _LEVELS else None
    if codec == "zstd":
        window_log: int | None = 20 if window in ("", "auto") else int(window)
    elif window not in ("", "auto") and codec == "brotli":
        raise UnsupportedOperationError(
            "window_log with brotli: cramjam's Brotli compressor has no window setting; drop window_log"
        )
    elif window and codec != "brotli":
        raise _bad(text, f"{codec} takes no window_log")
    else:
        window_log = None
    return WriterOptions(group, codec, chosen, window_log, pad)


def _compressor(options: WriterOptions) -> Any:
    """``compress(bytes) -> bytes`` for the codec of ``options`` (one per thread: zstd's keeps state)."""
    if options.codec == "zstd":
        with needs("writing zstd-compressed ArrayRecord files", "zstandard", "arrayrecord"):
            import zstandard
        params = zstandard.ZstdCompressionParameters.from_level(
            options.level or 0, window_log=options.window_log, write_content_size=True
        )
        return zstandard.ZstdCompressor(compression_params=params).compress
    with needs(f"writing {options.codec}-compressed ArrayRecord files", "cramjam", "arrayrecord"):
        import cramjam
    if options.codec == "brotli":
        brotli, level = cramjam.brotli.compress, options.level
        return lambda data: bytes(brotli(data, level))
    snappy = cramjam.snappy.compress_raw
    return lambda data: bytes(snappy(data))


def _block(compress: Any, data: bytes) -> bytes:
    """One compressed block: the decompressed size, then the compressed bytes (stored as is: ``None``)."""
    return data if compress is None else varint(len(data)) + compress(data)


def simple_chunk(
    records: list[bytes], kind: int, compress: Any, heads: dict[int, bytes] | None = None
) -> tuple[bytes, int]:
    """Return the data of a simple chunk holding ``records`` (compression byte ``kind``), and their size.

    ``heads`` remembers, by record size, what precedes the values in a chunk of one record (the
    compression byte and the compressed record sizes), which depends on nothing else.
    """
    if len(records) == 1 and heads is not None:
        values = records[0]
        head = heads.get(len(values))
        if head is None:  # also the values' decompressed size, when compressed
            sizes = _block(compress, varint(len(values)))
            head = bytes((kind,)) + varint(len(sizes)) + sizes
            head = heads[len(values)] = head if compress is None else head + varint(len(values))
        return head + (values if compress is None else compress(values)), len(values)
    values = b"".join(records)
    sizes = _block(compress, b"".join([varint(len(record)) for record in records]))
    data = b"".join((bytes((kind,)), varint(len(sizes)), sizes, _block(compress, values)))
    return data, len(values)


def _boundaries(begin: int, end: int) -> range:
    """The block boundaries in ``[begin, end)``: where a chunk spanning those bytes has block headers."""
    return range(-(-begin // BLOCK) * BLOCK, end, BLOCK)


class _Layout:
    """Places chunks in the file from position ``pos``: their headers, block headers and padding."""

    def __init__(self, pad: bool) -> None:
        self.pos = len(SIGNATURE)
        self.pad = pad
        self.offsets: list[
            tuple[int, int, int]
        ] = []  # chunk offset, decoded size, records: the footer

    def place(self, chunks: list[tuple[int, bytes, int, int]], hashes: list[int] | None) -> bytes:
        """Return the bytes of ``chunks`` (type, data, records, decoded size) from :attr:`pos` on.

        ``hashes`` are the data hashes (``None``: computed here); padding chunks are added as needed.
        """
        placed: list[tuple[int, int, int, bytes, int, int]] = []  # begin, end, then as chunks
        pos, offsets = self.pos, self.offsets
        for kind, data, records, decoded in chunks:
            begin, pos = pos, chunk_end(pos, len(data), records)
            placed.append((begin, pos, kind, data, records, decoded))
            if kind == SIMPLE and records:
                offsets.append((begin, decoded, records))
            if self.pad and pos % BLOCK:
                self.pos = pos
                placed.append(self._padding())
                pos = self.pos
        self.pos = pos
        if hashes is None:
            hashes = highwayhash64_many([item[3] for item in placed if item[2] != PADDING])
        datas = iter(hashes)
        pack = _WORDS.pack
        words = [
            pack(
                len(data),
                _zeros_hash(len(data)) if kind == PADDING else next(datas),
                kind | records << 8,
                decoded,
            )
            for _, _, kind, data, records, decoded in placed
        ]
        blocks = [
            (at, struct.pack("<QQ", at - begin, end - at))
            for begin, end, *_ in placed
            if -(-begin // BLOCK) * BLOCK < end
            for at in _boundaries(begin, end)
        ]
        sums = highwayhash64_many(words + [block for _, block in blocks])
        heads = iter(zip(sums[len(words) :], blocks, strict=True))
        out: list[bytes] = []
        for (begin, end, _, data, *_), digest, header in zip(
            placed, sums[: len(words)], words, strict=True
        ):
            if (
                -(-begin // BLOCK) * BLOCK >= end
            ):  # no block boundary inside the chunk: the common case
                gap = end - begin - CHUNK_HEADER - len(data)
                out += (digest.to_bytes(8, "little"), header, data, _ZERO[:gap])
                continue
            length = end - begin - BLOCK_HEADER * len(_boundaries(begin, end))
            content = [digest.to_bytes(8, "little"), header, data]
            content.append(bytes(length - CHUNK_HEADER - len(data)))
            whole, at = b"".join(content), begin
            for boundary in _boundaries(begin, end):
                block_sum, (_, block) = next(heads)
                out += [whole[: boundary - at], block_sum.to_bytes(8, "little"), block]
                whole, at = whole[boundary - at :], boundary + BLOCK_HEADER
            out.append(whole)
        return b"".join(out)

    def _padding(self) -> tuple[int, int, int, bytes, int, int]:
        """The padding chunk from :attr:`pos` to the next block boundary with room for its header."""
        begin, end = self.pos, self.pos + BLOCK - self.pos % BLOCK
        if end - begin < CHUNK_HEADER:
            end += BLOCK
        size = end - begin - CHUNK_HEADER - BLOCK_HEADER * len(_boundaries(begin, end))
        self.pos = end
        return begin, end, PADDING, bytes(size), 0, 0


_ZEROS: dict[int, int] = {}
_ZERO = bytes(BLOCK)


def _zeros_hash(size: int) -> int:
    """The hash of ``size`` zero bytes (a padding chunk's data), remembered."""
    if size not in _ZEROS:
        _ZEROS[size] = highwayhash64(bytes(size))
    return _ZEROS[size]


def _message(*fields: tuple[int, int | bytes]) -> bytes:
    """A protobuf message of varint and bytes fields (number, value), in that order."""
    out = []
    for number, value in fields:
        if isinstance(value, bytes):
            out += [varint(number << 3 | 2), varint(len(value)), value]
        else:
            out += [varint(number << 3), varint(value)]
    return b"".join(out)


class ArrayRecordFrameWriter(FrameWriter):
    """Writes an ArrayRecord file (see the module) to a binary file object.

    Parameters
    ----------
    fileobj
        Where to write: the file must start there (chunk offsets are counted from it).
    options
        ArrayRecordWriter's option string (``"group_size:1,zstd:3"``); see :func:`parse_options`.
    level
        The codec's level, if not in ``options``.
    """

    def __init__(
        self, fileobj: IO[bytes], options: str | None = None, level: int | None = None
    ) -> None:
        super().__init__(fileobj)
        self.options = parse_options(options, level)
        self._kind = _CODECS[self.options.codec]
        self._compress = _compressor(self.options) if self._kind else None
        self._layout = _Layout(self.options.pad_to_block_boundary)
        self._group: list[bytes] = []
        self._heads: dict[int, bytes] = {}
        self._chunks: list[list[bytes]] = []
        self._pending = 0
        self._pool: ThreadPoolExecutor | None = None
        self._running: Future[None] | None = None
        self.fileobj.write(SIGNATURE)

    def write(self, data: bytes) -> None:
        """Append one record."""
        group = self._group
        group.append(data)
        self._pending += len(data)
        if len(group) >= self.options.group_size:
            self._chunks.append(group)
            self._group = []
            if self._pending >= BATCH_BYTES or len(self._chunks) >= 16384:
                self._submit()

    def _submit(self) -> None:
        """Hand the full chunks to the worker thread (after the batch before them is written)."""
        batch, self._chunks, self._pending = self._chunks, [], 0
        if self._pool is None:
            self._pool = ThreadPoolExecutor(1, thread_name_prefix="recordkit-arrayrecord")
        if self._running is not None:
            self._running.result()
        self._running = self._pool.submit(self._encode, batch)

    def _encode(self, batch: list[list[bytes]]) -> None:
        kind, compress = self._kind, self._compress
        chunks = []
        for records in batch:
            data, size = simple_chunk(records, kind, compress, self._heads)
            chunks.append((SIMPLE, data, len(records), size))
        self.fileobj.write(self._layout.place(chunks, None))

    def flush(self) -> None:
        """Write the records of the full chunks (a partial chunk waits for its other records)."""
        if self._chunks:
            self._submit()
        if self._running is not None:
            self._running.result()

    def close(self) -> None:
        """Write the last chunk, the footer and the postscript."""
        if self._group:
            self._chunks.append(self._group)
            self._group = []
        self.flush()
        self.abort()
        layout, options = self._layout, self.options
        entries = [
            b"".join((b"\x08", varint(at), b"\x10", varint(size), b"\x18", varint(count)))
            for at, size, count in layout.offsets
        ]
        count = sum(entry[2] for entry in layout.offsets)
        meta = _message((1, 1), (2, len(entries)), (3, count), (4, str(options).encode()))
        footer, size = simple_chunk([_message((1, meta)), *entries], self._kind, self._compress)
        layout.pad = True
        footer_at = layout.pos
        out = layout.place([(SIMPLE, footer, len(entries) + 1, size)], None)
        postscript = _message((1, footer_at), (2, MAGIC))
        data, size = simple_chunk([postscript] * 3, 0, None)
        self.fileobj.write(out + layout.place([(SIMPLE, data, 3, size)], None))

    def abort(self) -> None:
        """Stop the worker thread (what it was writing is the caller's to discard)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
