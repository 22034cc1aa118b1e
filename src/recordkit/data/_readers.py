"""Opening the files of a dataset lazily, per process, and reading the records a plan names.

Readers are never shared between processes: a :class:`ReaderPool` remembers the process id it opened its
readers in and, after a ``fork``, drops the inherited ones (without closing them, as they belong to the
parent) and opens its own. The :class:`Catalog` holds only names and counts, so it pickles for ``spawn``.
"""

from __future__ import annotations

import bisect
import itertools
import os
from collections import OrderedDict
from collections.abc import Generator, Iterator, Sequence
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from recordkit.data._damage import DamageLog, OnError, SkippingReader, check_on_error
from recordkit.datasets.plan import IndexUnit, RangeUnit, Unit, plan_length

if TYPE_CHECKING:
    from recordkit.io import RecordReader, ResolvedSources
    from recordkit.io.tfds import ReadOrder

__all__ = ["CHUNK", "Catalog", "ReaderPool", "ShardStream", "chunked"]

CHUNK = 1024
"""Records handed on at a time where they are read in order."""

_FIRST_CHUNK = 16
_MAX_CHUNK = 1024
"""Records asked of ``RecordReader.read`` at a time when streaming a random-access range: few at first, so
that the first items of a remote file come after a small ranged read, then more for throughput."""


def chunked(records: Iterator[bytes], n: int | None) -> Iterator[list[bytes]]:
    """The first ``n`` of ``records`` (``None``: all), in lists of 16 records, then 32, ... up to :data:`CHUNK`.

    A list is read at C speed; when reading fails, the records read before the failure are handed on
    first and the error is raised at the next request, as record-by-record iteration would.
    """
    size = _FIRST_CHUNK  # the first records come soon, then longer lists
    while n is None or n > 0:
        chunk: list[bytes] = []
        want = size if n is None else min(size, n)
        size = min(2 * size, CHUNK)
        try:
            chunk.extend(itertools.islice(records, want))
        except BaseException:
            if chunk:
                yield chunk
            raise
        if not chunk:
            return
        if n is not None:
            n -= len(chunk)
        yield chunk


def _tallied(
    chunks: Generator[list[bytes], None, int], read: list[int]
) -> Generator[list[bytes], None, int]:
    """``chunks``, counting their records in ``read[0]``."""
    try:
        while True:
            try:
                chunk = next(chunks)
            except StopIteration as stop:
                return stop.value  # type: ignore[no-any-return]
            read[0] += len(chunk)
            yield chunk
    finally:
        chunks.close()


class Catalog:
    """The files of a dataset with what has been learnt about them (record counts, random access).

    Parameters
    ----------
    files
        The file names (local paths or fsspec URLs), or what :func:`recordkit.io.resolve_sources` found.
    format
        The format of every file, or ``None`` to let :func:`recordkit.open` decide per file.
    options
        The options every reader is opened with (``check_crc``, ``index``, ``lenient``: those of
        :func:`recordkit.open`).
    """

    def __init__(
        self, files: Sequence[str] | ResolvedSources, format: str | None = None, **options: Any
    ) -> None:
        from recordkit.io import ResolvedSources

        if not isinstance(files, ResolvedSources):
            files = ResolvedSources(list(files), format, None)
        resolved = files
        self.files = list(resolved.files)
        self.format = resolved.format
        self.options = options
        self.counts: list[int | None] = [None] * len(self.files)
        self.random_access: list[bool | None] = [None] * len(self.files)
        # The records' order when it is not file after file: a TFDS split's (formats.tfds.read_order).
        self.order: ReadOrder | None = None
        # Every file opens as recordkit.open opens it (ResolvedSources.open_part): a dataset's shards are
        # checked against their entries, with the errors and remedies of whatever lists them.
        self._resolved = resolved
        # on_error="skip": files open as SkippingReaders, which note what they skip here (this process's).
        self.on_error: OnError = "raise"
        self.damage = DamageLog()
        manifest = resolved.manifest
        if manifest is not None:
            from recordkit.io.tfds import read_order

            self.counts = [shard.records for shard in manifest.shards]
            self.random_access = [not manifest.compression] * len(manifest.shards)
            self.order = read_order(manifest)

    def __len__(self) -> int:
        return len(self.files)

    def open(self, i: int) -> RecordReader:
        """Open a new reader on file ``i`` (a manifest's shard is checked against its entry).

        With ``on_error="skip"``, a :class:`~recordkit.datasets.damage.SkippingReader` in its place.
        """
        if self.on_error == "skip":
            opened = SkippingReader(
                lambda: self._resolved.open_part(i, **self.options),
                self.files[i],
                self.damage,
                self.format,
            )
            return cast("RecordReader", opened)
        return self._resolved.open_part(i, **self.options)

    def skipping(self, on_error: OnError, max_skipped: int | None) -> None:
        """Read with ``on_error`` (``"skip"``: through damage), skipping at most ``max_skipped`` per epoch."""
        check_on_error(on_error, max_skipped)
        self.on_error = on_error
        self.damage.max_skipped = max_skipped

    def describe(self, pool: ReaderPool | None = None, *, count: bool = True) -> None:
        """Learn, for every file not yet described, whether it is random-access and its record count.

        With a ``pool``, the random-access readers opened here stay in it for the reading that follows
        (a TFRecord reader without a sidecar index scans the file's headers once to count it, and keeps
        that index). Without one, each file is opened and closed again. ``count=False`` learns only
        which files are random-access: a file read in order needs no count.
        """
        for i, known in enumerate(self.random_access):
            if known is not None and (not count or not known or self.counts[i] is not None):
                continue
            reader = self.open(i) if pool is None else pool.get(i)
            try:
                self.random_access[i] = bool(reader.supports_random_access)
                if count and reader.supports_random_access:
                    self.counts[i] = len(reader)
            finally:
                if pool is None:
                    reader.close()
                elif not self.random_access[i]:
                    pool.discard(i)

    def count_all(self, pool: ReaderPool | None = None) -> None:
        """Count the records of every file, reading sequential files through once."""
        self.describe(pool)
        for i in range(len(self.files)):
            self.count_in(pool, i)

    def count(self, i: int) -> int:
        """The record count of file ``i`` (described first), reading it through once if sequential."""
        n = self.counts[i]
        if n is None:
            reader = self.open(i)
            try:
                if self.random_access[i] is None:
                    self.random_access[i] = bool(reader.supports_random_access)
                n = len(reader) if reader.supports_random_access else sum(1 for _ in reader)
            finally:
                reader.close()
            self.counts[i] = n
        return n

    def count_in(self, pool: ReaderPool | None, i: int) -> int:
        """:meth:`count`, a random-access file counted by the reader of ``pool`` (which keeps its index)."""
        n = self.counts[i]
        if n is None and pool is not None and self.random_access[i]:
            n = self.counts[i] = len(pool.get(i))
        return self.count(i) if n is None else n

    def offsets(self) -> np.ndarray:
        """The global index of each file's first record (files laid end to end), with the total last."""
        counts = [n or 0 for n in self.counts]
        return np.concatenate([[0], np.cumsum(counts, dtype=np.int64)])


class ReaderPool:
    """Random-access readers of a catalog's files, opened on first use in the current process."""

    def __init__(self, catalog: Catalog, max_open: int = 64) -> None:
        self.catalog = catalog
        self.max_open = max_open
        self._readers: OrderedDict[int, RecordReader] = OrderedDict()
        self._pid = os.getpid()

    def get(self, i: int) -> RecordReader:
        """The reader of file ``i`` (opened now if needed)."""
        if self._pid != os.getpid():
            # Inherited through fork: the handles are the parent's; open our own.
            self._readers = OrderedDict()
            self._pid = os.getpid()
        reader = self._readers.get(i)
        if reader is not None:
            self._readers.move_to_end(i)
            return reader
        if len(self._readers) >= self.max_open:
            _, oldest = self._readers.popitem(last=False)
            oldest.close()
        reader = self._readers[i] = self.catalog.open(i)
        return reader

    def detach(self, i: int) -> RecordReader | None:
        """Remove the reader of file ``i`` from this pool and hand it over (``None`` if none is open)."""
        if self._pid != os.getpid():
            return None
        return self._readers.pop(i, None)

    def attach(self, i: int, reader: RecordReader) -> None:
        """Take over ``reader`` (of file ``i``, from :meth:`detach`); it is closed with this pool."""
        self.discard(i)
        self._readers[i] = reader

    def discard(self, i: int) -> None:
        """Close the reader of file ``i`` if this pool has one open."""
        reader = self._readers.pop(i, None)
        if reader is not None and self._pid == os.getpid():
            reader.close()

    def read(self, files: np.ndarray, local: np.ndarray) -> list[bytes]:
        """Records ``local[j]`` of files ``files[j]``, in that order, one ``read`` call per file."""
        if len(files) == 0:
            return []
        out: list[bytes] = [b""] * len(files)
        for f in np.unique(files):
            where = np.flatnonzero(files == f)
            records = self.get(int(f)).read(local[where].tolist())
            for j, record in zip(where.tolist(), records, strict=True):
                out[j] = record
        return out

    def close(self) -> None:
        """Close every reader this process opened."""
        readers, self._readers = self._readers, OrderedDict()
        if self._pid == os.getpid():
            for reader in readers.values():
                reader.close()


class ShardStream:
    """The records of one shard's plan, in plan order, readable from any position.

    Parameters
    ----------
    units
        The plan (see :mod:`recordkit.datasets.plan`).
    pool
        Where readers come from.
    """

    def __init__(self, units: Sequence[Unit], pool: ReaderPool) -> None:
        self.units = list(units)
        self.pool = pool
        self.length = plan_length(self.units)
        catalog = pool.catalog
        self._offsets = catalog.offsets()
        self.random_access = self.length is not None and all(
            isinstance(u, IndexUnit) or catalog.random_access[u.file] for u in self.units
        )
        # Where each unit began in the stream :meth:`chunks` reads (units it did not reach: not listed).
        self._begins: list[int] = []
        self._begun: list[int] = []

    def chunks(self, start: int = 0) -> Generator[list[bytes], None, None]:
        """Yield the records from position ``start`` to the end, in lists of up to :data:`CHUNK`."""
        position = 0
        self._begins, self._begun = [], []
        for k, unit in enumerate(self.units):
            if unit.sized:
                n = len(unit)
                if start >= n:
                    start -= n
                    position += n
                    continue
            self._begins.append(position)
            self._begun.append(k)
            read = [0]
            skipped = yield from _tallied(self.unit_chunks(unit, start), read)
            start -= skipped
            position += skipped + read[0]

    def where(self, position: int) -> tuple[int, int] | None:
        """The file and the record index in it of the record :meth:`chunks` read at ``position``."""
        k = bisect.bisect_right(self._begins, position) - 1
        if k < 0:
            return None
        return self.where_in(self._begun[k], position - self._begins[k])

    def where_in(self, unit: int, rel: int) -> tuple[int, int] | None:
        """The file and the record index in it of record ``rel`` of unit number ``unit``."""
        if self.units[unit].sized and not 0 <= rel < len(self.units[unit]):
            return None
        files, local = self._pairs(self.units[unit], rel, rel + 1)
        return int(files[0]), int(local[0])

    def unit_records(
        self, unit: Unit, start: int, pool: ReaderPool | None = None
    ) -> Generator[bytes, None, int]:
        """Yield the records of one unit after its first ``start``; return how many were skipped.

        See :meth:`unit_chunks`.
        """
        chunks = self.unit_chunks(unit, start, pool)
        try:
            while True:
                try:
                    chunk = next(chunks)
                except StopIteration as stop:
                    return stop.value  # type: ignore[no-any-return]
                yield from chunk
        finally:
            chunks.close()

    def unit_chunks(
        self, unit: Unit, start: int, pool: ReaderPool | None = None
    ) -> Generator[list[bytes], None, int]:
        """Yield the records of one unit after its first ``start``, in lists; return how many were skipped.

        Random-access files are read through ``pool`` (default: the stream's own pool, which is not
        thread-safe: a thread passes its own): a range of records in order, from its first record on
        (without indexing the file when it starts at the beginning), other units by index. A sequential
        file is opened for this unit alone.
        """
        if isinstance(unit, IndexUnit):
            yield from self._indexed(unit, start, pool or self.pool)
            return start
        if self.pool.catalog.random_access[unit.file]:
            if unit.step == 1:
                return (yield from self._in_order(unit, start, pool or self.pool))
            if unit.sized:
                yield from self._indexed(unit, start, pool or self.pool)
                return start
        return (yield from self._sequential(unit, start))

    def _pairs(self, unit: Unit, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
        if isinstance(unit, IndexUnit):
            offsets = self._offsets
            g = unit.indices[lo:hi]
            files = np.searchsorted(offsets, g, side="right") - 1
            return files, g - offsets[files]
        local = np.arange(unit.start + lo * unit.step, unit.start + hi * unit.step, unit.step)
        return np.full(len(local), unit.file, dtype=np.int64), local

    def _indexed(self, unit: Unit, start: int, pool: ReaderPool) -> Iterator[list[bytes]]:
        n = len(unit)
        chunk = _FIRST_CHUNK
        while start < n:
            stop = min(n, start + chunk)
            yield pool.read(*self._pairs(unit, start, stop))
            start = stop
            chunk = min(2 * chunk, _MAX_CHUNK)

    def _in_order(
        self, unit: RangeUnit, skip: int, pool: ReaderPool
    ) -> Generator[list[bytes], None, int]:
        """The records of a range of a random-access file after its first ``skip``, read in order."""
        reader = pool.get(unit.file)
        stop = unit.stop
        if skip and stop is None:
            stop = len(reader)  # reading from a record needs the file's index anyway
        if stop is not None and skip >= stop - unit.start:
            return max(0, stop - unit.start)
        first = unit.start + skip
        records = reader.iter_from(first)
        left = None if stop is None else stop - unit.start - skip
        try:
            yield from chunked(records, left)
        finally:
            close = getattr(records, "close", None)
            if close is not None:
                close()
        return skip

    def _sequential(self, unit: RangeUnit, skip: int) -> Generator[list[bytes], None, int]:
        """Yield the unit's records after the first ``skip``; return how many were skipped."""
        reader = self.pool.catalog.open(unit.file)
        try:
            records = itertools.islice(reader, unit.start, unit.stop, unit.step)
            skipped = sum(1 for _ in itertools.islice(records, skip)) if skip else 0
            yield from chunked(records, None)
        finally:
            reader.close()
        return skipped

    def fetch(self, positions: Sequence[int]) -> list[bytes]:
        """The records at ``positions`` (random-access plans only), in that order."""
        pos = np.asarray(positions, dtype=np.int64)
        sizes = np.array([len(u) for u in self.units], dtype=np.int64)
        bounds = np.concatenate([[0], np.cumsum(sizes)])
        which = np.searchsorted(bounds, pos, side="right") - 1
        files = np.empty(len(pos), dtype=np.int64)
        local = np.empty(len(pos), dtype=np.int64)
        for k in np.unique(which):
            sel = np.flatnonzero(which == k)
            unit = self.units[int(k)]
            rel = pos[sel] - bounds[k]
            if isinstance(unit, IndexUnit):
                f, loc = self._pairs(IndexUnit(unit.indices[rel]), 0, len(rel))
            else:
                f = np.full(len(rel), unit.file, dtype=np.int64)
                loc = unit.start + rel * unit.step
            files[sel], local[sel] = f, loc
        return self.pool.read(files, local)
