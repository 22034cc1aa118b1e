"""The contract every record format implements.

A record format is a :class:`RecordFormat` subclass, registered by name in :mod:`recordkit.formats`. It
knows how records are framed in a file and nothing about what the records contain: frame readers yield
``bytes`` and frame writers take ``bytes``. This layer never imports protobuf or numpy.

A format declares

``name``
    The registry key, also the module name (``"tfrecord"`` lives in ``recordkit/formats/tfrecord.py``).
``aliases``, ``extensions``
    Other names ``format=`` accepts (``"array_record"``), and the file suffixes that select the format.
    They agree: each suffix is an alias (``format="ffr"``) and the name and each alias a suffix
    (``x.ffrecord``), as the class's definition completes them.
``capabilities``
    A :class:`Capabilities` describing what the format can do.

and implements

``sniff(head, size)``
    Whether the first bytes of a file look like this format. It may answer with an ``int`` instead of a
    ``bool``: the number of leading bytes it needs to decide (the caller then calls it again with that many).
``reader(source, *, check_crc, lenient, compression, offsets)``
    A :class:`FrameReader` over a :class:`Source`.
``writer(fileobj, *, compression, level, n)``
    A :class:`FrameWriter` appending to a binary file object.
``resync(buffer, size)``
    For :mod:`recordkit.recover`: a :class:`~recordkit.formats.resync.Resync` that validates a candidate frame at a position of a
    damaged file (checksums included) and finds the next plausible frame start after damage; ``None``
    (the default) when the format cannot resynchronise. A format whose records are located otherwise (by
    an index in its header) overrides :meth:`RecordFormat.salvage` instead.

and may set ``overhead`` (bytes each record adds besides its payload), ``payload`` (the message kind its
records usually hold), ``shard_pattern`` (how ``recordkit convert`` names its shards) and
``sniff_priority`` (the order sniffers are tried in).

Frame readers iterate records in file order. When :attr:`FrameReader.random_access` is true they also offer
``len()``, :meth:`FrameReader.read_at` and :meth:`FrameReader.read_many`; otherwise those raise
:class:`~recordkit.errors.UnsupportedOperationError`. Damaged input raises a
:class:`~recordkit.errors.CorruptRecordError` carrying the path, the record index and the byte offset.

Frame writers buffer frames and write them in large chunks; :meth:`FrameWriter.close` writes what is left
(and, for indexed formats, the header) but never closes the file object, which belongs to the caller.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import operator
from abc import ABC, abstractmethod
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import IO, Any, ClassVar, TypeAlias

from recordkit.errors import NoLengthError, TruncatedRecordError, UnsupportedOperationError
from recordkit.formats._counting import CountsRecords
from recordkit.formats._names import agreeing_names
from recordkit.formats._source import (  # _READ_CHUNK: where 0.2's READ_CHUNK still resolves to
    _READ_CHUNK,  # noqa: F401
    Source,
    SupportsRead,
    read_full,
)
from recordkit.formats.compression import NAMES as COMPRESSION_NAMES
from recordkit.formats.resync import Resync, Skip
from recordkit.support.heap import keep_freed_memory
from recordkit.support.moved import moved_attribute

__all__ = [
    "Capabilities",
    "Offsets",
    "FrameReader",
    "FrameWriter",
    "IndexedFrameReader",
    "Source",
    "SupportsRead",
    "VerifiedOffsets",
    "as_bytes",
    "normalize_compression",
    "read_full",
]
__getattr__ = functools.partial(moved_attribute, __name__)  # 0.2's READ_CHUNK, SHRUNK, WINDOW

Offsets: TypeAlias = "array[int] | Callable[[], array[int]]"
"""A frame-offset table (``len + 1`` frame boundaries), or a function that loads one on first use.

A table given as it is, or loaded by a :class:`VerifiedOffsets`, is used as it is. A table loaded by any
other function (a sidecar index) is checked against the record headers first."""


class VerifiedOffsets:
    """A function loading an offset table already known to describe the file, so no header walk is needed.

    recordkit uses it for a sidecar index whose checksum matches the one a dataset manifest recorded when
    the shard and its index were written together. Each record's own header is still checked when it is
    read.
    """

    def __init__(self, load: Callable[[], array[int]]) -> None:
        self._load = load

    def __call__(self) -> array[int]:
        """Load the table."""
        return self._load()


_SHRUNK = "the file ends before this record: it is shorter than when it was opened (truncated while being read?)"
"""The message of the error raised when a file shrinks under a reader."""


@dataclass(frozen=True)
class Capabilities:
    """What a format supports. The defaults are the cautious answers.

    Attributes
    ----------
    random_access
        Records can be read by index without reading the ones before them.
    checksums
        Records carry checksums that readers verify.
    compression
        Whole-file compression names the format accepts besides ``""`` (e.g. ``("gzip", "zlib")``).
    empty_records
        A record may be empty (zero bytes).
    sidecar_index
        Random access uses a table of frame offsets, found by walking the record headers or loaded from a
        sidecar index file (``recordkit index`` writes one, as does a shard writer).
    self_indexed
        The file holds its own index (the record count and offsets in a header): ``len()`` reads no record.
    writable
        recordkit writes the format (``False``: it only reads it, and :meth:`RecordFormat.writer` refuses).
    copyable_frames
        A frame does not depend on where it lies, so runs of frames can be copied as bytes into another
        file of the format, and :meth:`RecordFormat.frames` finds them all in a buffer at once.
    """

    random_access: bool = False
    checksums: bool = False
    compression: tuple[str, ...] = ()
    empty_records: bool = False
    sidecar_index: bool = False
    self_indexed: bool = False
    writable: bool = True
    copyable_frames: bool = False


def normalize_compression(name: str) -> str:
    """Return the canonical compression name: ``""`` (none), ``"gzip"``, ``"zlib"`` or ``"bzip2"``.

    TensorFlow's spellings (``"GZIP"``, ``"ZLIB"``, ``""``) and Apache Beam's (``"BZIP2"``) are accepted in
    any case, and so are ``"none"``, ``"gz"`` and ``"bz2"``.

    Raises
    ------
    ValueError
        For an unknown name.

    Examples
    --------
    >>> normalize_compression("GZIP"), normalize_compression("NONE")
    ('gzip', '')
    """
    canonical = COMPRESSION_NAMES.get(str(name).lower())
    if canonical is None:
        raise ValueError(f"unknown compression {name!r}; use '', 'gzip', 'zlib' or 'bzip2'")
    return canonical


def as_bytes(data: Any) -> bytes:
    """Return a record given to a writer as ``bytes``.

    Accepts ``bytes``, any object supporting the buffer protocol (``bytearray``, ``memoryview``, a numpy
    ``uint8`` array, ...) and any object with a ``SerializeToString`` method (a protobuf message).

    Raises
    ------
    TypeError
        For anything else (``str`` included: encode it first).
    """
    if type(data) is bytes:
        return data
    serialize = getattr(data, "SerializeToString", None)
    if serialize is not None:
        result = serialize()
        if not isinstance(result, bytes):
            raise TypeError(
                f"{type(data).__name__}.SerializeToString() returned {type(result).__name__}"
            )
        return result
    if isinstance(data, str):
        raise TypeError("records are bytes; encode the str first (e.g. text.encode())")
    try:
        view = memoryview(data)
    except TypeError:
        raise TypeError(
            f"a record must be bytes-like or a protobuf message, not {type(data).__name__}"
        ) from None
    with view:
        return view.tobytes()


_WINDOW = 1 << 20
"""How many bytes iteration over a random-access source reads at a time (a larger record: the record)."""

_FROM_CHUNK = 1024
"""Records read at a time by :meth:`FrameReader.iter_from` on a random-access reader."""


class FrameReader(ABC):
    """Reads the records of one file. Subclasses implement the framing of one format.

    Parameters
    ----------
    source
        Where the bytes come from.
    check_crc
        Verify checksums (formats without checksums ignore it).
    lenient
        Treat a file that ends inside a record header as a clean end (sequential formats only).
    """

    def __init__(self, source: Source, *, check_crc: bool = True, lenient: bool = False) -> None:
        self.source = source
        self.path = source.path
        self.check_crc = check_crc
        self.lenient = lenient

    @property
    def random_access(self) -> bool:
        """Whether ``len()``, :meth:`read_at` and :meth:`read_many` work."""
        return self.source.random_access

    @property
    def chunk_compression(self) -> str:
        """The compression of the records inside the file's chunks, for a format that compresses its
        chunks one by one (ArrayRecord): ``""`` for none, a codec name, or ``"mixed"``. Whole-file
        compression (a ``.gz`` TFRecord) is not this; here: ``""``."""
        return ""

    @abstractmethod
    def __iter__(self) -> Iterator[bytes]:
        """Yield every record, in file order."""

    def __len__(self) -> int:
        """Return the number of records."""
        raise self.unsupported("len()", length=True)

    def read_at(self, index: int) -> bytes:
        """Return record ``index`` (``0 <= index < len(self)``)."""
        raise self.unsupported("random access")

    def read_many(self, indices: Sequence[int]) -> list[bytes]:
        """Return the records at ``indices`` (each in ``range(len(self))``), in the order asked."""
        read_at = self.read_at
        return [read_at(i) for i in indices]

    def iter_from(self, index: int) -> Iterator[bytes]:
        """Yield the records from record ``index`` on, in file order (``index=0``: every record).

        A random-access reader starts at the record (reading neighbours together); a sequential one reads
        and drops the records before it. Formats override it with their sequential reading.
        """
        if index <= 0:
            return iter(self)
        if not self.random_access:
            return itertools.islice(iter(self), index, None)
        return self._read_from(index)

    def _read_from(self, index: int) -> Iterator[bytes]:
        total = len(self)
        while index < total:
            stop = min(total, index + _FROM_CHUNK)
            yield from self.read_many(range(index, stop))
            index = stop

    def close(self) -> None:  # noqa: B027 - most readers have nothing to release
        """Release memory held by the reader; the source is closed by its owner."""

    def unsupported(self, what: str, *, length: bool = False) -> UnsupportedOperationError:
        """Return the error for an operation that needs random access on a sequential source.

        With ``length=True`` (for ``len()``) the error is a :class:`~recordkit.errors.NoLengthError`, also a
        :class:`TypeError` (what ``len()`` raises for objects without a length), so ``list(reader)`` still
        works on a sequential reader.
        """
        cls = NoLengthError if length else UnsupportedOperationError
        return cls(
            f"{what} needs random access, but {self.path or 'this source'} can only be read in order "
            "(a compressed file or a non-seekable stream). Iterate over it, or decompress it / copy it to "
            "a local file first."
        )

    def truncated(self, message: str, index: int, offset: int) -> TruncatedRecordError:
        """Return a :class:`~recordkit.errors.TruncatedRecordError` located in this file."""
        return TruncatedRecordError(message, path=self.path, index=index, offset=offset)


class IndexedFrameReader(FrameReader):
    """A frame reader that can locate record ``i`` by its byte range (:meth:`span`).

    Subclasses implement ``__len__``, :meth:`span` and :meth:`decode`, and may override
    :meth:`decode_many` with a faster loop; this class provides :meth:`read_at` and a :meth:`read_many`
    that reads each run of neighbouring records with one ranged read (scattered records from a source
    with a descriptor: one ``pread`` each).
    """

    @abstractmethod
    def span(self, index: int) -> tuple[int, int]:
        """Return the byte range ``[start, end)`` of record ``index`` in the file."""

    @abstractmethod
    def decode(self, blob: Any, pos: int, end: int, index: int, offset: int) -> bytes:
        """Return record ``index`` from ``blob[pos:end]``, which holds its bytes found at file ``offset``."""

    def read_at(self, index: int) -> bytes:
        """Return record ``index`` (``0 <= index < len(self)``)."""
        start, end = self.span(index)
        buffer = self.source.buffer
        if buffer is not None:
            return self.decode(buffer, start, end, index, start)
        return self.decode(self.source.pread(start, end - start), 0, end - start, index, start)

    def read_many(self, indices: Sequence[int]) -> list[bytes]:
        """Return the records at ``indices`` in the order asked, reading each run of neighbours at once."""
        keep_freed_memory()
        source = self.source
        if source.buffer is not None:
            return self.decode_many(source.buffer, 0, indices)
        ordered = sorted(set(indices))
        # The number of runs of consecutive indices, counted in C: one more than the gaps between them.
        gaps = len(ordered) - 1 - sum(map((1).__eq__, map(operator.sub, ordered[1:], ordered)))
        if source.fd is not None and 2 * (gaps + 1) > len(indices):
            # Mostly scattered records: one pread each, inside the format's loop.
            return self.decode_many(None, 0, indices)
        runs: list[tuple[int, int]] = []  # (first, last) of each run of consecutive indices
        for i in ordered:
            if runs and runs[-1][1] == i - 1:
                runs[-1] = (runs[-1][0], i)
            else:
                runs.append((i, i))
        span, decode_many = self.span, self.decode_many
        bounds = [(span(first)[0], span(last)[1]) for first, last in runs]
        found: dict[int, bytes] = {}
        for (first, last), (base, _), blob in zip(
            runs, bounds, source.read_ranges(bounds), strict=True
        ):
            run = range(first, last + 1)
            found.update(zip(run, decode_many(blob, base, run), strict=True))
        return [found[i] for i in indices]

    def decode_many(self, blob: Any, base: int, indices: Sequence[int]) -> list[bytes]:
        """Return the records at ``indices`` from ``blob``, which holds the file's bytes from offset ``base``.

        With ``blob=None`` each record is read on its own (the source has a descriptor). Formats override
        it with a loop free of method calls. A ``blob`` that ends before a record (the file shrank since
        it was opened) raises :class:`~recordkit.errors.TruncatedRecordError`.
        """
        span, decode, pread = self.span, self.decode, self.source.pread
        records = []
        for index in indices:
            start, end = span(index)
            if blob is None:
                records.append(decode(pread(start, end - start), 0, end - start, index, start))
            else:
                records.append(decode(blob, start - base, end - base, index, start))
        return records

    def refetch(self, index: int, start: int, end: int) -> bytes:
        """Read bytes ``[start, end)`` of record ``index`` again after a short read.

        One ``pread`` returns at most about 2 GiB; any other short read means the file shrank.

        Raises
        ------
        TruncatedRecordError
            If the file now ends before ``end``.
        """
        data = self.source.pread(start, end - start)
        if len(data) != end - start:
            raise self.truncated(_SHRUNK, index, start)
        return data


class FrameWriter(CountsRecords, ABC):
    """Writes records to one binary file object (which it never closes).

    Subclasses implement :meth:`write`, :meth:`flush` and :meth:`close`, and may override
    :meth:`write_many` and :meth:`abort`. They never count records: :attr:`count` is kept by the base class
    (a ``write`` that raises counts nothing; a ``write_many`` counts the number it returns).

    Parameters
    ----------
    fileobj
        Where to write.
    """

    BUFFER_SIZE: ClassVar[int] = 1 << 20

    def __init__(self, fileobj: IO[bytes]) -> None:
        self.fileobj = fileobj
        self._count = 0

    @abstractmethod
    def write(self, data: bytes) -> None:
        """Append one record (already ``bytes``)."""

    def write_many(self, records: Iterable[bytes]) -> int:
        """Append every record of ``records``; return how many were written."""
        write = self.write
        count = 0
        for record in records:
            write(record)
            count += 1
        return count

    @abstractmethod
    def flush(self) -> None:
        """Write buffered frames to the file object."""

    @abstractmethod
    def close(self) -> None:
        """Finish the file (write what is buffered, trailers, headers). Idempotence is the caller's job."""

    def abort(self) -> None:
        """Discard buffered data and temporary resources after a failure."""


class _BufferedFrameWriter(FrameWriter):
    """A frame writer that gathers frames in ``_parts`` and writes them in blocks of about ``BUFFER_SIZE``.

    ``write`` appends to ``_parts``, adds the bytes to ``_pending`` and calls :meth:`_drain` once
    ``_pending`` reaches ``BUFFER_SIZE`` (inline in each format: it runs once per record). :meth:`_drain`
    writes to ``_out``, the file object unless a format sets another.
    """

    def __init__(self, fileobj: IO[bytes]) -> None:
        super().__init__(fileobj)
        self._parts: list[bytes] = []
        self._pending = 0
        self._out = fileobj

    def _drain(self) -> None:
        """Write the gathered frames as one block to ``_out`` and empty the buffer."""
        if self._parts:
            self._out.write(b"".join(self._parts))
            self._parts.clear()
            self._pending = 0

    def flush(self) -> None:
        """Write buffered frames to the file object."""
        self._drain()

    def close(self) -> None:
        """Write what is buffered."""
        self._drain()

    def abort(self) -> None:
        """Drop buffered frames."""
        self._parts.clear()


class RecordFormat(ABC):
    """A record file format. Subclasses are registered with :func:`recordkit.formats.register_format`.

    Attributes
    ----------
    aliases
        Other names (lower case) :func:`~recordkit.formats.get_format` resolves to this format.
    overhead
        The bytes each record adds to a file besides its payload (framing, checksums, an index entry):
        what a shard writer's ``max_bytes`` counts.
    payload
        The message kind the format's records hold for the tools that read them (a kind of
        :mod:`recordkit.formats.payloads`: ``tf.train.Example``, OneFlow's ``OFRecord``), or ``None``.
        ``recordkit convert`` converts payloads to it, and record batches are parsed as it.
    shard_pattern
        The name ``recordkit convert`` gives the shards it writes into a directory, with
        :class:`~recordkit.datasets.ShardWriter`'s fields: ``{shard}`` counts from 0, ``{num_shards}`` is
        the number of shards. Default: ``part-{shard:05d}-of-{num_shards:05d}`` and the first extension
        (TensorFlow's naming).
    sniff_priority
        Sniffers are tried from the highest priority down: a format whose sniffer verifies a checksum (few
        false positives) ranks above one that only guesses from the structure.
    index_place
        Where a ``self_indexed`` file keeps its index (``"header"``, ``"footer"``), for ``recordkit info``.
    """

    name: ClassVar[str]
    aliases: ClassVar[tuple[str, ...]] = ()
    extensions: ClassVar[tuple[str, ...]] = ()
    capabilities: ClassVar[Capabilities] = Capabilities()
    overhead: ClassVar[int] = 0
    payload: ClassVar[str | None] = None
    shard_pattern: ClassVar[str] = ""
    sniff_priority: ClassVar[int] = 0
    index_place: ClassVar[str] = "header"

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if isinstance(getattr(cls, "name", None), str):
            cls.aliases, cls.extensions = agreeing_names(cls.name, cls.aliases, cls.extensions)
        if not cls.shard_pattern:
            suffix = cls.extensions[0] if cls.extensions else ""
            cls.shard_pattern = "part-{shard:05d}-of-{num_shards:05d}" + suffix

    def resync(self, buffer: Any, size: int) -> Resync | None:
        """Return how :meth:`salvage` finds intact frames in ``buffer`` after damage (``None``: it cannot)."""
        return None

    def frames(self, buffer: bytes, *, path: str | None = None, final: bool = True) -> Any:
        """Find every frame of ``buffer`` (an uncompressed file's bytes from a frame's start) at once,
        checksums checked: a :class:`~recordkit.formats.bulk.Frames` (payload starts and lengths, and
        where the last whole frame ends).

        Formats with ``capabilities.copyable_frames`` implement it (``recordkit reshard`` copies their
        frames as bytes). ``final``: the buffer ends the file, and a frame cut short there is an error.

        Raises
        ------
        UnsupportedOperationError
            The format's frames cannot be copied.
        """
        raise UnsupportedOperationError(
            f"the {self.name} format's frames cannot be copied as bytes"
        )

    def salvage(self, buffer: Any, size: int, skip: Skip) -> Iterator[bytes]:
        """Return the intact records of a possibly damaged file held whole in ``buffer[:size]``.

        Each damaged range is reported with ``skip`` (see :data:`Skip`) as the iteration reaches it. The
        default walks the frames with :meth:`resync`.

        Raises
        ------
        UnsupportedOperationError
            The format cannot resynchronise after damage.
        """
        frames = self.resync(buffer, size)
        if frames is None:
            raise UnsupportedOperationError(
                f"the {self.name} format cannot be recovered: it has no way to find a record after damage"
            )
        return frames.salvage(skip)

    @abstractmethod
    def sniff(self, head: bytes, size: int | None) -> bool | int:
        """Return whether ``head`` (the first bytes of a file of ``size`` bytes) looks like this format:
        ``True``/``False``, or the number of leading bytes needed to decide when ``head`` is too short."""

    @abstractmethod
    def reader(
        self,
        source: Source,
        *,
        check_crc: bool = True,
        lenient: bool = False,
        compression: str = "",
        offsets: Offsets | None = None,
    ) -> FrameReader:
        """Return a :class:`FrameReader` over ``source``.

        Parameters
        ----------
        source
            The bytes to read.
        check_crc
            Verify checksums.
        lenient
            A file ending inside a record header is a clean end.
        compression
            The whole-file compression (normalised name, ``""`` for none).
        offsets
            For sequential formats: a frame-offset table (``len + 1`` entries, the last one the end of the
            data) or a function returning one, e.g. loading a sidecar index. ``None`` builds it by a
            header-only scan when first needed. Other formats ignore it.
        """

    @abstractmethod
    def writer(
        self,
        fileobj: IO[bytes],
        *,
        compression: str = "",
        level: int | None = None,
        n: int | None = None,
    ) -> FrameWriter:
        """Return a :class:`FrameWriter` appending records to ``fileobj`` (a binary file object open for
        writing), with the whole-file ``compression`` (normalised name) at ``level``; ``n``, when given, is
        the number of records that will be written, for a format that can use it."""

    def verifying(self) -> contextlib.AbstractContextManager[Any]:
        """Within it, readers :meth:`reader` makes also run checks too slow for every read (what
        ``recordkit verify`` runs in): a format with such checks overrides it. Here: none."""
        return contextlib.nullcontext()

    def detect_compression(self, head: bytes) -> str:
        """Return the compression ``head`` appears to use (``""`` for none)."""
        return ""

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"
