"""Reading records: :class:`RecordReader`, over one file or many files read as one sequence.

A reader opens each file (:func:`recordkit.io.sources.open_source`), finds its format and compression
(:func:`recordkit.io.sources.reading_format`) and reads it through the format's frame reader. A dataset's
shards are checked against their manifest entry as they are opened (presence, size) and read (record
count, and the recorded index of a shard that changed). What to read comes from
:func:`recordkit.io.resolve.resolve_sources`, whose :meth:`~recordkit.io.resolve.ResolvedSources.open`
makes the reader.
"""

from __future__ import annotations

import bisect
import builtins
import functools
import hashlib
import itertools
import operator
import os
import weakref
from array import array
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple, cast, overload

from recordkit.errors import (
    ManifestError,
    RecordKitError,
    StaleIndexError,
    UnknownFormatError,
    UnsupportedOperationError,
)
from recordkit.formats import get_format
from recordkit.formats.base import FrameReader, RecordFormat, VerifiedOffsets
from recordkit.io.index import find_index, load_index
from recordkit.io.manifest import (
    TFDS_INFO,
    Shard,
    changed_shard,
    sha256_of,
    shard_count_error,
    shard_path,
)
from recordkit.io.mapped import ViewLedger
from recordkit.io.sources import Opened, close_all, is_url, open_source, reading_format
from recordkit.support.closing import Closing
from recordkit.support.indices import index_list

if TYPE_CHECKING:
    from recordkit.formats.sequential import SequentialFrameReader
    from recordkit.io.tfds import ReadOrder


def _index_loader(index: Any, opened: Opened) -> Callable[[], array[int]] | None:
    source = opened.source
    if index is False or not source.random_access or source.size is None:
        return None
    if isinstance(index, _ShardIndex):
        return index.loader(opened)
    if index is None or index is True:
        index_path = find_index(opened.local_path or source.path) if source.path else None
        if index_path is None:
            return None
    else:
        index_path = os.fspath(index)
    return functools.partial(load_index, index_path, size=source.size, path=source.path)


def _open_part(
    src: Any, spec: _Reopen, format: str | None, compression: str | None, index: Any
) -> tuple[FrameReader, Opened, RecordFormat, str]:
    """Open one file of ``spec`` (its options) with ``index``; the format and compression as given."""
    opened = open_source(src, zero_copy=spec.zero_copy)
    path = opened.source.path
    try:
        name, comp = reading_format(opened.source, format=format, compression=compression)
        fmt = get_format(name)
        if spec.zero_copy and comp:
            raise UnsupportedOperationError(
                f"zero_copy=True needs an uncompressed file; {path} is {comp}-compressed (its records "
                "exist only once inflated)"
            )
        offsets = None if comp else _index_loader(index, opened)
        frames = fmt.reader(
            opened.source,
            check_crc=spec.check_crc,
            lenient=spec.lenient,
            compression=comp,
            offsets=offsets,
        )
        inner = frames.chunk_compression if spec.zero_copy else ""
        if inner:
            raise UnsupportedOperationError(
                f"zero_copy=True needs an uncompressed file; the record chunks of {path} are "
                f"{inner}-compressed (its records exist only once inflated)"
            )
    except BaseException:
        opened.close()
        raise
    return frames, opened, fmt, comp


def _unchanged(shard: Shard, opened: Opened) -> bool:
    """Whether an opened shard still has the fingerprint its manifest recorded (its size is checked apart).

    ``False`` also when the manifest records none (an earlier version's, a TFDS directory's) or the shard
    is remote: only a shard known to be unchanged is read by its manifest's index without a header walk.
    """
    fingerprint = shard.fingerprint
    return fingerprint is not None and opened.info is not None and fingerprint.matches(opened.info)


class _ShardIndex:
    """The sidecar index a manifest recorded for a shard.

    It is used as the offset table without walking the record headers only while the shard has the
    fingerprint the manifest recorded (:func:`_unchanged`) and the index its recorded checksum. A shard
    whose fingerprint differs gets no index here: its headers are walked, and :class:`_ShardCheck` compares
    what they say with the manifest.
    """

    def __init__(self, path: str, shard: Shard) -> None:
        self.path, self.shard = path, shard

    def index_path(self) -> str | None:
        """Where the index file the manifest records would be (``None``: none recorded)."""
        recorded = self.shard.index
        if recorded is None:
            return None
        name = os.path.basename(recorded.path)
        if is_url(self.path):
            return f"{self.path.rsplit('/', 1)[0]}/{name}"
        return os.path.join(os.path.dirname(self.path), name)

    def recorded_path(self) -> str | None:
        """The local index file the manifest records, if it exists and still has the recorded checksum."""
        index_path = self.index_path()
        if index_path is None or is_url(index_path):
            return None
        try:
            with builtins.open(index_path, "rb") as file:
                digest = sha256_of(file)[1]
        except FileNotFoundError:
            return None
        assert self.shard.index is not None
        return index_path if digest == self.shard.index.sha256 else None

    def loader(self, opened: Opened) -> Callable[[], array[int]] | None:
        if opened.source.remote:
            return self._remote_loader(opened)
        if not _unchanged(self.shard, opened):
            return None  # the headers are walked: _ShardCheck compares them with the manifest
        index_path = self.index_path()
        if index_path is None or not os.path.exists(index_path):
            return None
        assert opened.source.size is not None
        load = functools.partial(load_index, index_path, size=opened.source.size, path=self.path)
        if self.recorded_path() is None:
            return load  # changed since the manifest was written: checked against the headers
        return VerifiedOffsets(functools.partial(self._counted, load))

    def _remote_loader(self, opened: Opened) -> Callable[[], array[int]] | None:
        """A remote shard's recorded index, fetched once, which must have the recorded SHA-256 and count.

        Its record headers are not walked (that would fetch the whole shard); each record read is checked
        against its span instead (:class:`~recordkit.formats.sequential.SequentialFrameReader`).
        """
        index_path, recorded = self.index_path(), self.shard.index
        if index_path is None or recorded is None:
            return None
        assert opened.source.size is not None
        load = functools.partial(
            load_index, index_path, size=opened.source.size, path=self.path, sha256=recorded.sha256
        )
        return functools.partial(self._counted, load)

    def _counted(self, load: Callable[[], array[int]]) -> array[int]:
        """The offsets ``load`` gives, which must count the records the manifest says."""
        table = load()
        if len(table) - 1 != self.shard.records:
            raise ManifestError(
                f"the index lists {len(table) - 1} records; the manifest says {self.shard.records}",
                path=self.path,
            )
        return table


class _ShardCheck:
    """A shard that may differ from its manifest entry although its size is the same.

    Its fingerprint differs from the one the manifest recorded (it was rewritten, replaced, or copied
    elsewhere), or the manifest records none. Before its first random access its record headers are
    walked, and the offsets they give are compared with the manifest's count and, when the index file the
    manifest records is still the same, with that index: any difference is a
    :class:`~recordkit.errors.ManifestError`, never a record read from where the file holds none.

    Attributes
    ----------
    changed
        A fingerprint is recorded and the file no longer has it: ``len()`` walks the headers too.
    """

    def __init__(
        self, path: str, shard: Shard, number: int, listing: str | None, changed: bool
    ) -> None:
        self.path, self.shard, self.number, self.listing = path, shard, number, listing
        self.changed = changed

    def compare(self, frames: FrameReader, fmt: RecordFormat) -> None:
        """Compare the walked headers of ``frames`` (whose count already matched) with the manifest's index.

        Only a format whose offsets come from its headers (``capabilities.sidecar_index``) has an index
        to compare.

        Raises
        ------
        ManifestError
            The recorded index puts a record anywhere else than the headers do.
        """
        recorded = self.shard.index
        index_path = _ShardIndex(self.path, self.shard).recorded_path()
        if (
            recorded is None
            or index_path is None
            or not fmt.capabilities.sidecar_index
            or frames.source.size is None
        ):
            return
        lister, remedy = changed_shard(self.listing)
        table = cast("SequentialFrameReader", frames).offsets
        try:
            loaded = load_index(index_path, size=frames.source.size, path=self.path)
        except StaleIndexError as exc:
            raise ManifestError(
                f"the index {recorded.path} that {lister} records for the shard does not describe it "
                f"({exc.reason}): {remedy}",
                path=self.path,
                shard=self.number,
            ) from None
        if table == loaded:
            return
        first = next(i for i, (a, b) in enumerate(zip(table, loaded, strict=False)) if a != b)
        record = max(first - 1, 0)
        raise ManifestError(
            f"the shard's record headers put record {record} at bytes {table[record]}-"
            f"{table[record + 1]}, but the index {recorded.path} that {lister} records says bytes "
            f"{loaded[record]}-{loaded[record + 1]}: {remedy}",
            path=self.path,
            shard=self.number,
        )


def open_shard(
    directory: str,
    shard: Shard,
    *,
    format: str,
    compression: str,
    check_crc: bool = True,
    index: Any = None,
    lenient: bool = False,
    listing: str | None = None,
    recount: bool = False,
) -> RecordReader:
    """Open one shard of a manifest for reading, with the checks :func:`open` makes on a dataset.

    Parameters
    ----------
    directory
        The manifest's directory (a local path or an fsspec URL).
    shard
        The manifest's entry for the shard.
    format, compression
        The manifest's.
    check_crc, index, lenient
        As for :func:`recordkit.open`.
    listing
        ``"dataset_info.json"`` when the manifest was made from a tensorflow-datasets directory
        (:func:`shard_listing`): the errors then name it, and its remedy.
    recount
        ``len()`` counts the shard's records from its own record headers (no index; a compressed shard
        is counted as it is read through) instead of taking the manifest's count, and a count that
        differs from the manifest's raises :class:`~recordkit.errors.ManifestError`.

    Raises
    ------
    ManifestError
        The shard is missing, or its size differs from the manifest's.
    """
    path = shard_path(directory, shard)
    spec = _Reopen(
        [path], path, check_crc, index, lenient, (shard,), listing=listing, recount=recount
    )
    return _read_files(spec, format=format, compression=compression)


def _open_shard(
    spec: _Reopen, number: int, format: str | None, compression: str | None
) -> tuple[FrameReader, Opened, RecordFormat, str]:
    """Open shard ``number`` of ``spec``, which must be present and have its manifest's size."""
    assert spec.shards is not None
    file, shard = spec.files[number], spec.shards[number]
    index = False if spec.recount else spec.index  # recount: from its own headers, not an index
    if index in (None, True):
        index = _ShardIndex(file, shard)
    lister, remedy = changed_shard(spec.listing)
    try:
        frames, opened, fmt, comp = _open_part(file, spec, format, compression, index)
    except FileNotFoundError:
        raise ManifestError(
            f"the shard {shard.path} listed in {lister} is missing", path=file, shard=number
        ) from None
    size = opened.source.size
    if size is not None and size != shard.size:
        opened.close()
        # TFDS records no shard sizes: the size is the one the file had when the dataset was opened.
        said = "it had" if spec.listing == TFDS_INFO else f"{lister} says"
        raise ManifestError(
            f"the shard is {size} bytes, but {said} {shard.size}: {remedy}",
            path=file,
            shard=number,
        )
    return frames, opened, fmt, comp


# -- what readers and writers share ----------------------------------------------------------------


class _RecordFile(Closing):
    """The attributes and open/closed state common to :class:`RecordReader` and :class:`RecordWriter`."""

    _noun: ClassVar[str]

    def __init__(self, *, path: str | None, format: str, compression: str) -> None:
        self._path = path
        self._format = format
        self._compression = compression
        self._closed = False

    @property
    def path(self) -> str | None:
        """The path or URL given (the directory, for reading a directory of files), or ``None``."""
        return self._path

    @property
    def format(self) -> str:
        """The format name (``"tfrecord"``, ``"ofrecord"``, ``"ffrecord"``, ...)."""
        return self._format

    @property
    def compression(self) -> str:
        """The whole-file compression: ``""``, ``"gzip"`` or ``"zlib"``."""
        return self._compression

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` (or, for a writer, :meth:`~RecordWriter.abort`) was called."""
        return self._closed

    def _check_open(self) -> None:
        if self._closed:
            raise ValueError(f"I/O operation on a closed {self._noun}")


# -- the reader -------------------------------------------------------------------------------------


class RecordReader(_RecordFile):
    """Reads the records of one file, or of several files as one sequence.

    Made by :func:`open`. Iterating yields each record as ``bytes``, file after file; the shards of a
    TFDS split come in the order TFDS reads them (:func:`recordkit.io.tfds.read_order`), and indexes
    count in that order. Files that allow random access (every uncompressed file that is not a stream)
    also support ``len(reader)``, ``reader[i]`` (negative indexes count from the end), ``reader[a:b]`` (a
    list) and :meth:`read`; on other files ``len()`` raises :class:`~recordkit.errors.NoLengthError` and
    the others :class:`~recordkit.errors.UnsupportedOperationError`.

    An iterator keeps its reader open, so ``for record in recordkit.open(path)`` needs no name for the
    reader; the files are closed by :meth:`close`, or once neither the reader nor an iterator over it is
    referenced any more.

    A reader pickles as the files it reads and its options (format, compression, ``check_crc``, ``index``,
    ``lenient``): unpickling opens them again, so a reader can be sent to another process (a PyTorch
    ``DataLoader`` worker started with ``spawn``). The position of an iteration is not part of it. A
    reader over a file object cannot be pickled (:class:`TypeError`), nor can a closed one
    (:class:`ValueError`).

    A random-access reader is a Grain ``RandomAccessDataSource`` with batched reads (``_getitems`` is
    :meth:`read`): its ``repr()`` names the format, the path, the number of files and records and a token
    of the files' paths, sizes and modification times, which Grain's ``DataLoader`` compares when it
    restores a checkpoint.

    Attributes
    ----------
    paths
        The files read, in order (``None`` entries for file objects without a name).
    """

    _noun = "RecordReader"

    def __init__(
        self,
        parts: Sequence[tuple[FrameReader, Opened]],
        reopen: _Reopen,
        *,
        format: str,
        compression: str,
        checks: Mapping[int, _ShardCheck] | None = None,
    ) -> None:
        super().__init__(path=reopen.path, format=format, compression=compression)
        counts = None if reopen.shards is None else [shard.records for shard in reopen.shards]
        # A TFDS split's records come in TFDS's interleaved order, not file after file (needs counts).
        self._order = reopen.order if counts is not None else None
        self._frames = [frames for frames, _ in parts]
        self._opened = [opened for _, opened in parts]
        # Record counts known without reading (a manifest's) make len() free, even of compressed files.
        # Each part is checked against its count when it is first read at random or read to its end.
        self._counts = counts
        self._starts = None if counts is None else list(itertools.accumulate(counts, initial=0))
        self._counted: set[int] = set()
        # The shards that may have changed since the manifest was written (their fingerprint differs):
        # walked and compared with the manifest before their first random access.
        self._checks = {} if checks is None else dict(checks)
        self._reopen = reopen
        # The first part that can only be read in order (it raises the error random access gets).
        self._sequential = next((f for f in self._frames if not f.random_access), None)
        self.paths = [frames.path for frames in self._frames]
        # Zero-copy readers hand out views of their maps; close() releases them (see recordkit.io.mapped).
        self._views = ViewLedger() if reopen.zero_copy else None
        # A reader dropped without close() (e.g. inside a dataset object) still releases its files; views
        # it handed out then stay valid for as long as they live.
        self._release = weakref.finalize(self, close_all, list(self._opened))

    @property
    def supports_random_access(self) -> bool:
        """Whether ``len()``, indexing, slicing and :meth:`read` work."""
        return self._sequential is None

    def _repr_html_(self) -> str:
        """The notebook view: files, format, count and the first records (:mod:`recordkit.io.preview`)."""
        from recordkit.io.preview import reader_html

        sources = [] if self._closed else [frames.source for frames in self._frames]
        return reader_html(
            self,
            sizes=[source.size for source in sources],
            seekable=all(source.seekable for source in sources),
            counted=self._counts is not None or get_format(self._format).capabilities.self_indexed,
        )

    @property
    def chunk_compression(self) -> str:
        """The compression of the records inside the files' chunks: ``""`` (none), or the codec of a format
        that compresses each chunk of records apart (ArrayRecord's ``"zstd"``, ``"brotli"``, ``"snappy"``);
        ``"mixed"`` when the files, or the chunks of one, differ. Not :attr:`compression`, the whole-file
        compression: a file with compressed chunks still has random access."""
        found = {frames.chunk_compression for frames in self._frames}
        return "mixed" if len(found) > 1 else next(iter(found), "")

    # lifecycle

    def close(self) -> None:
        """Close the files recordkit opened (a file object passed in stays open). Idempotent."""
        if self._closed:
            return
        self._closed = True
        for frames in self._frames:
            frames.close()
        if self._views is not None:
            self._views.release()
        self._release()

    def __repr__(self) -> str:
        """What is read: format, path, files, records and a token of their content (Grain checks it)."""
        where = f"{self._format} {self._path or self.paths!r}"
        if self._closed:
            return f"<RecordReader {where} (closed)>"
        files = f"{len(self._frames)} file{'' if len(self._frames) == 1 else 's'}"
        records, content = self._records_text(), self._content()
        return f"<RecordReader {where}: {files}, {records}, content {content} (open)>"

    def _records_text(self) -> str:
        if self._sequential is not None and self._starts is None:
            return "records unknown"  # a compressed file without a manifest: counted only by reading it
        try:
            return f"{len(self)} records"
        except RecordKitError as exc:
            return f"records unknown ({type(exc).__name__})"

    def _content(self) -> str:
        """A token that changes when a file may have: its path, size and modification time (size alone
        for a remote file, whose time recordkit does not ask for)."""
        digest = hashlib.blake2b(digest_size=6)
        for frames, opened in zip(self._frames, self._opened, strict=True):
            mtime = None if opened.info is None else opened.info.st_mtime_ns
            digest.update(repr((frames.path, frames.source.size, mtime)).encode())
        return digest.hexdigest()

    def _getitems(self, indices: Sequence[int]) -> list[bytes]:
        """:meth:`read`, under the name Grain's batched ``RandomAccessDataSource`` protocol calls."""
        return self.read(indices)

    def __reduce__(self) -> tuple[Any, ...]:
        if self._closed:
            raise ValueError(
                "cannot pickle a closed RecordReader: pickling reopens the files, which were closed"
            )
        spec = self._reopen
        if not all(isinstance(f, (str, os.PathLike)) for f in spec.files):
            raise TypeError(
                "cannot pickle a RecordReader over a file object: another process cannot reopen it; "
                "open the reader from a path or URL instead"
            )
        return (_reopen_reader, (spec, self._format, self._compression))

    # reading

    def __iter__(self) -> Iterator[bytes]:
        """Yield every record, file after file; a TFDS split's in TFDS's interleaved order."""
        self._check_open()
        records = self._records()
        return records if self._views is None else self._views.track(records)

    def _records(self) -> Iterator[bytes]:
        # A generator method: the iterator holds the reader, whose finalizer would otherwise close the
        # files of an unnamed reader (``for r in recordkit.open(p)``) while the iteration still reads them.
        if self._order is not None:
            yield from self._ordered_records()
        elif self._counts is not None:
            yield from self._counted_records()
        elif len(self._frames) == 1:
            yield from self._frames[0]
        else:
            yield from itertools.chain.from_iterable(self._frames)

    def iter_from(self, start: int) -> Iterator[bytes]:
        """Yield every record from index ``start`` on, in the order iteration gives them.

        ``start=0`` is plain iteration, which builds no offset table. A later start of a single
        random-access file begins reading at that record, after the checks random access makes; other
        readers read and drop the records before it.
        """
        if start <= 0:
            return iter(self)
        if self._sequential is not None or self._order is not None or len(self._frames) != 1:
            return itertools.islice(iter(self), start, None)
        self._check_open()
        self._check_count(0)
        records = self._frames[0].iter_from(start)
        return self._held(records if self._views is None else self._views.track(records))

    def _held(self, records: Iterator[bytes]) -> Iterator[bytes]:
        # A generator method, as _records: the iterator keeps the reader (and its files) alive.
        yield from records

    def _counted_records(self) -> Iterator[bytes]:
        """Every record, each part checked against the count its manifest gives once it is read through."""
        assert self._counts is not None
        for part, (frames, expected) in enumerate(zip(self._frames, self._counts, strict=True)):
            check = self._checks.get(part)
            if check is not None and check.changed and frames.random_access:
                # Rewritten or replaced since its manifest: compared with the manifest before a record
                # of it is handed out, as random access does, not only counted at its end.
                self._check_count(part)
            found = 0
            for found, record in enumerate(frames, 1):  # noqa: B007 - found is the count afterwards
                yield record
            if found != expected:
                raise self._count_mismatch(part, found)

    def _ordered_records(self) -> Iterator[bytes]:
        """Every record in the order's turns, each part checked against its count as it ends."""
        assert self._order is not None
        assert self._counts is not None
        counts = self._counts
        readers: dict[int, Iterator[bytes]] = {}
        for part, start, stop in self._order.runs():
            records = readers.get(part)
            if records is None:
                records = readers[part] = iter(self._frames[part])
            # One turn: a block of a few records, taken at C speed.
            run = list(itertools.islice(records, stop - start))
            yield from run
            if len(run) < stop - start:
                raise self._count_mismatch(part, start + len(run))
            if stop == counts[part]:
                rest = sum(1 for _ in readers.pop(part))
                if rest:
                    raise self._count_mismatch(part, stop + rest)
        for part, expected in enumerate(counts):  # the empty shards the order never visits
            if not expected:
                found = sum(1 for _ in self._frames[part])
                if found:
                    raise self._count_mismatch(part, found)

    def _count_mismatch(self, part: int, found: int) -> ManifestError:
        assert self._counts is not None
        listing = self._reopen.listing
        return shard_count_error(self._frames[part].path, part, found, self._counts[part], listing)

    def _check_count(self, part: int) -> None:
        """Before the first random access to a part with a known count: the file must hold that many.

        A shard that may have changed since its manifest was written (:class:`_ShardCheck`) has its record
        headers walked here, and they must also agree with the manifest's index.
        """
        if self._counts is None or part in self._counted:
            return
        frames = self._frames[part]
        found = len(frames)
        if found != self._counts[part]:
            raise self._count_mismatch(part, found)
        check = self._checks.pop(part, None)
        if check is not None:
            check.compare(frames, get_format(self._format))
        self._counted.add(part)

    def frame_reader(self, number: int) -> FrameReader:
        """Return the frame reader of file ``number`` (``paths[number]``), for format-specific access.

        A file whose record count its manifest gives is checked to hold that many records first, as
        before the first random access to it.
        """
        self._check_open()
        self._check_count(number)
        return self._frames[number]

    def _part_starts(self) -> list[int]:
        if self._starts is None:
            self._starts = list(itertools.accumulate(map(len, self._frames), initial=0))
        return self._starts

    def __len__(self) -> int:
        """Return the number of records.

        It comes from the dataset manifest when there is one; otherwise TFRecord and OFRecord files are
        counted by a header-only scan on first use. A dataset's uncompressed shard whose fingerprint
        differs from the one its manifest recorded is counted by that scan too, and a count that differs
        from the manifest's raises :class:`~recordkit.errors.ManifestError`, as it does for every shard of
        a reader opened with ``recount=True`` (:meth:`~recordkit.io.ResolvedSources.open_part`).
        """
        for part, frames in enumerate(self._frames):
            check = self._checks.get(part)
            if (self._reopen.recount and frames.random_access) or (
                check is not None and check.changed
            ):
                self._check_count(part)
        return self._length()

    def _length(self) -> int:
        """The number of records, from the manifest's counts when there are (shards are not walked)."""
        self._check_open()
        if self._sequential is not None and self._starts is None:
            raise self._sequential.unsupported("len()", length=True)
        return self._part_starts()[-1]

    def _check_random_access(self, what: str) -> None:
        self._check_open()
        if self._sequential is not None:
            raise self._sequential.unsupported(what)

    def _normalize(self, index: Any, total: int) -> int:
        i = operator.index(index)
        if i < 0:
            i += total
        if not 0 <= i < total:
            raise IndexError(f"record index {index} out of range for {total} records")
        return i

    def _where(self, i: int) -> tuple[int, int]:
        """The part record ``i`` is in, and its index there."""
        if self._order is not None:
            return self._order.locate(i)
        if len(self._frames) == 1:
            return 0, i
        starts = self._part_starts()
        part = bisect.bisect_right(starts, i) - 1
        return part, i - starts[part]

    @overload
    def __getitem__(self, key: int) -> bytes: ...

    @overload
    def __getitem__(self, key: slice) -> list[bytes]: ...

    def __getitem__(self, key: int | slice) -> bytes | list[bytes]:
        """Return record ``key`` or, for a slice, a list of records."""
        if isinstance(key, slice):
            self._check_random_access("slicing (reader[a:b])")
            return self.read(range(*key.indices(self._length())))
        self._check_random_access("indexing (reader[i])")
        part, local = self._where(self._normalize(key, self._length()))
        self._check_count(part)
        record = self._frames[part].read_at(local)
        return record if self._views is None else self._views.add(record)

    def read(self, indices: Iterable[int]) -> list[bytes]:
        """Return the records at ``indices`` as a list, in the order asked.

        Neighbouring records are read together, so sorted or adjacent indexes cost few I/O calls.
        Negative indexes count from the end.
        """
        records = self._read(indices)
        if self._views is not None:
            self._views.add_all(records)
        return records

    def _read(self, indices: Iterable[int]) -> list[bytes]:
        self._check_random_access("read(indices)")
        total = self._length()
        wanted = index_list(indices)
        # Every index must be an int (map(type) and the set run in C); anything else, or one out of
        # range, goes through _normalize, which raises TypeError or IndexError as reader[i] does.
        if wanted and (set(map(type, wanted)) != {int} or min(wanted) < 0 or max(wanted) >= total):
            wanted = [self._normalize(i, total) for i in wanted]
        if len(self._frames) == 1:
            self._check_count(0)
            return self._frames[0].read_many(wanted)
        by_part: dict[int, tuple[list[int], list[int]]] = {}
        for i in wanted:
            part, local = self._where(i)
            members, locals_ = by_part.setdefault(part, ([], []))
            members.append(i)
            locals_.append(local)
        found: dict[int, bytes] = {}
        for part, (members, locals_) in by_part.items():
            self._check_count(part)
            records = self._frames[part].read_many(locals_)
            found.update(zip(members, records, strict=True))
        return [found[i] for i in wanted]


# -- open -------------------------------------------------------------------------------------------


class _Reopen(NamedTuple):
    """What a reader needs to open its files again in another process (see ``RecordReader.__reduce__``)."""

    files: list[Any]
    path: str | None
    check_crc: bool
    index: Any
    lenient: bool
    shards: Sequence[Shard] | None = None
    zero_copy: bool = False
    order: ReadOrder | None = None  # a TFDS split's interleaved order
    listing: str | None = None  # "dataset_info.json" when a TFDS directory lists the shards
    recount: bool = False  # len() counts each shard from its own record headers


def _read_files(spec: _Reopen, *, format: str | None, compression: str | None) -> RecordReader:
    parts: list[tuple[FrameReader, Opened]] = []
    formats: list[tuple[str, str]] = []
    checks: dict[int, _ShardCheck] = {}
    try:
        for i, file in enumerate(spec.files):
            if spec.shards is None:
                frames, opened, fmt, comp = _open_part(file, spec, format, compression, spec.index)
            else:
                shard = spec.shards[i]
                frames, opened, fmt, comp = _open_shard(spec, i, format, compression)
                if frames.random_access and not _unchanged(shard, opened):
                    changed = shard.fingerprint is not None and opened.info is not None
                    checks[i] = _ShardCheck(file, shard, i, spec.listing, changed)
            parts.append((frames, opened))
            formats.append((fmt.name, comp))
        if len(set(formats)) > 1:
            kinds = ", ".join(
                f"{name} {comp or 'uncompressed'}" for name, comp in sorted(set(formats))
            )
            raise UnknownFormatError(
                f"{spec.path + ': the' if spec.path else 'The'} files mix formats or compressions "
                f"({kinds}); one reader reads one kind: open them one by one, or pass format= to read a "
                "directory's files of one format"
            )
    except BaseException:
        for _, opened in parts:
            opened.close()
        raise
    if not formats:  # a dataset whose manifest lists no shards: an empty reader
        assert format is not None  # the manifest's
        formats.append((format, compression or ""))
    name, comp = formats[0]
    return RecordReader(parts, spec, format=name, compression=comp, checks=checks)


def _reopen_reader(spec: _Reopen, format: str, compression: str) -> RecordReader:
    """Open a pickled reader's files again (the format and compression are the ones found the first time)."""
    return _read_files(spec, format=format, compression=compression)
