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

Records are handed on a batch at a time (about :data:`BATCH_BYTES` of them) to two worker threads, as the
C++ writer hands chunks to its thread pool: one compresses the batch's chunks (zstd from ``zstandard``, a
whole batch of one-record chunks in one call; Brotli and Snappy from ``cramjam``; all without the GIL),
the other computes the hashes of the batch before, all its chunks' data together, then its chunk and block
headers (:func:`~recordkit.formats._highwayhash.highwayhash64_many`), and writes it.
"""

from __future__ import annotations

import struct
from collections import deque
from collections.abc import Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from itertools import islice
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
BATCH_CHUNKS = 16384
"""... or once this many chunks are full."""

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


def _compress_many(compress: Any) -> Any:
    """``compress_many(list of bytes) -> sequence of buffers`` for ``compress`` (a :func:`_compressor`).

    zstd's C backend compresses a whole list in one call without the GIL
    (``ZstdCompressor.multi_compress_to_buffer``), so that the thread compressing a batch runs beside the
    one hashing the batch before it; other codecs, and zstd backends without that call, compress one by
    one.
    """
    many = getattr(getattr(compress, "__self__", None), "multi_compress_to_buffer", None)

    def one_by_one(values: list[bytes]) -> list[bytes]:
        return [compress(value) for value in values]

    if many is None:
        return one_by_one

    def together(values: list[bytes]) -> Any:
        try:
            return many(values, threads=1)  # its segments are buffers
        except (NotImplementedError, ValueError):
            # The CFFI backend has no multi_compress_to_buffer; the C one refuses a list whose values
            # are all empty.
            return one_by_one(values)

    return together


def _block(compress: Any, data: bytes) -> bytes:
    """One compressed block: the decompressed size, then the compressed bytes (stored as is: ``None``)."""
    return data if compress is None else varint(len(data)) + compress(data)


def _head(kind: int, compress: Any, size: int, heads: dict[int, bytes]) -> bytes:
    """What precedes the values of a one-record simple chunk whose record has ``size`` bytes: the
    compression byte, the compressed record sizes and, when compressed, the values' decompressed size.

    It depends on nothing else, so ``heads`` remembers it by ``size``.
    """
    head = heads.get(size)
    if head is None:
        sizes = _block(compress, varint(size))
        head = bytes((kind,)) + varint(len(sizes)) + sizes
        head = heads[size] = head if compress is None else head + varint(size)
    return head


def simple_chunk(
    records: list[bytes], kind: int, compress: Any, heads: dict[int, bytes] | None = None
) -> tuple[bytes, int]:
    """Return the data of a simple chunk holding ``records`` (compression byte ``kind``), and their size.

    ``heads`` remembers the heads of one-record chunks (:func:`_head`).
    """
    if len(records) == 1 and heads is not None:
        values = records[0]
        head = _head(kind, compress, len(values), heads)
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
        if hashes is None:
            hashes = highwayhash64_many([chunk[1] for chunk in chunks])
        placed: list[tuple[int, int, bytes]] = []  # begin, end, data
        words: list[bytes] = []  # each chunk header but its hash
        pos, offsets, pack = self.pos, self.offsets, _WORDS.pack
        for (kind, data, records, decoded), digest in zip(chunks, hashes, strict=True):
            begin, pos = pos, chunk_end(pos, len(data), records)
            placed.append((begin, pos, data))
            words.append(pack(len(data), digest, kind | records << 8, decoded))
            if kind == SIMPLE and records:
                offsets.append((begin, decoded, records))
            if self.pad and pos % BLOCK:
                self.pos = pos
                begin, pos, data = self._padding()
                placed.append((begin, pos, data))
                words.append(pack(len(data), _zeros_hash(len(data)), PADDING, 0))
        self.pos = pos
        blocks = [
            struct.pack("<QQ", at - begin, end - at)
            for begin, end, _ in placed
            if -(-begin // BLOCK) * BLOCK < end
            for at in _boundaries(begin, end)
        ]
        sums = highwayhash64_many(words + blocks)
        heads = iter(zip(sums[len(words) :], blocks, strict=True))
        out: list[bytes] = []
        for (begin, end, data), digest, header in zip(
            placed, sums[: len(words)], words, strict=True
        ):
            if -(-begin // BLOCK) * BLOCK >= end:  # no block boundary inside: the common case
                out += (
                    digest.to_bytes(8, "little"),
                    header,
                    data,
                    _ZERO[: end - begin - CHUNK_HEADER - len(data)],
                )
                continue
            length = end - begin - BLOCK_HEADER * len(_boundaries(begin, end))
            content = [digest.to_bytes(8, "little"), header, data]
            content.append(bytes(length - CHUNK_HEADER - len(data)))
            whole, at = b"".join(content), begin
            for boundary in _boundaries(begin, end):
                block_sum, block = next(heads)
                out += [whole[: boundary - at], block_sum.to_bytes(8, "little"), block]
                whole, at = whole[boundary - at :], boundary + BLOCK_HEADER
            out.append(whole)
        return b"".join(out)

    def _padding(self) -> tuple[int, int, bytes]:
        """The padding chunk from :attr:`pos` to the next block boundary with room for its header: its
        begin, end and data."""
        begin, end = self.pos, self.pos + BLOCK - self.pos % BLOCK
        if end - begin < CHUNK_HEADER:
            end += BLOCK
        size = end - begin - CHUNK_HEADER - BLOCK_HEADER * len(_boundaries(begin, end))
        self.pos = end
        return begin, end, bytes(size)


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
        self._compress_many = _compress_many(self._compress) if self._compress else None
        self._layout = _Layout(self.options.pad_to_block_boundary)
        self._heads: dict[int, bytes] = {}
        self._records: list[bytes] = []  # not yet handed to the worker threads
        self._pending = 0  # their bytes
        self._pools: list[ThreadPoolExecutor] = []
        self._in_flight: deque[Future[None]] = deque()
        self.fileobj.write(SIGNATURE)

    def write(self, data: bytes) -> None:
        """Append one record."""
        self._records.append(data)
        self._pending += len(data)
        if self._pending >= BATCH_BYTES or len(self._records) >= self._batch_records:
            self._submit()

    def write_many(self, records: Iterable[bytes]) -> int:
        """Append every record of ``records``; return how many were written."""
        count, iterator = 0, iter(records)
        while True:
            piece = list(islice(iterator, 1024))
            if not piece:
                return count
            self._records += piece
            self._pending += sum(map(len, piece))
            count += len(piece)
            if self._pending >= BATCH_BYTES or len(self._records) >= self._batch_records:
                self._submit()

    @property
    def _batch_records(self) -> int:
        return BATCH_CHUNKS * self.options.group_size

    def _submit(self, *, last: bool = False) -> None:
        """Hand the records of full chunks (with ``last``, all of them) to the worker threads: one encodes
        (compresses) them, the other places and writes them, in order, while the first encodes the next
        batch."""
        group, records = self.options.group_size, self._records
        whole = len(records) if last else len(records) - len(records) % group
        if not whole:
            return
        batch, self._records = records[:whole], records[whole:]
        self._pending = sum(map(len, self._records))
        if not self._pools:
            self._pools = [
                ThreadPoolExecutor(1, thread_name_prefix=f"recordkit-arrayrecord-{stage}")
                for stage in ("encode", "write")
            ]
        while len(self._in_flight) >= 2:  # a batch being written, the next being encoded: enough
            self._in_flight.popleft().result()
        encoded = self._pools[0].submit(self._encode, batch)
        self._in_flight.append(self._pools[1].submit(self._place, encoded))

    def _encode(self, batch: list[bytes]) -> list[tuple[int, bytes, int, int]]:
        """The chunks of ``batch`` (type, data, records, decoded size), compressed: a chunk per
        ``group_size`` records."""
        kind, compress, heads, group = (
            self._kind,
            self._compress,
            self._heads,
            self.options.group_size,
        )
        if group == 1 and self._compress_many is not None:
            return [
                (SIMPLE, _head(kind, compress, len(value), heads) + packed, 1, len(value))
                for value, packed in zip(batch, self._compress_many(batch), strict=True)
            ]
        chunks = []
        for at in range(0, len(batch), group):
            records = batch[at : at + group]
            data, size = simple_chunk(records, kind, compress, heads)
            chunks.append((SIMPLE, data, len(records), size))
        return chunks

    def _place(self, encoded: Future[list[tuple[int, bytes, int, int]]]) -> None:
        self.fileobj.write(self._layout.place(encoded.result(), None))

    def flush(self, *, last: bool = False) -> None:
        """Write the records of the full chunks (a partial chunk waits for its other records, unless
        ``last``)."""
        self._submit(last=last)
        while self._in_flight:
            self._in_flight.popleft().result()

    def close(self) -> None:
        """Write the last chunk, the footer and the postscript."""
        self.flush(last=True)
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
        """Stop the worker threads (what they were writing is the caller's to discard)."""
        for pool in self._pools:
            pool.shutdown(wait=True, cancel_futures=True)
        self._pools = []
        self._in_flight.clear()
