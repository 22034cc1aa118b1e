"""Reading through damage: ``on_error="skip"``, for the pipelines (:mod:`recordkit.data`) and the Ray and
Dask readers.

A :class:`SkippingReader` stands in for a file's :class:`~recordkit.io.RecordReader` when a pipeline skips
damaged records. Where a record lies is decided once per file, the same way in every process, so that every
intact record keeps one position in the epoch's order and is read exactly once:

* a file whose records can be located as usual (its index, header or offsets can be read: ``len()``
  works) keeps its numbering; a record that fails its checks there is a *hole*, handed on as
  :data:`DAMAGED` at its position and dropped before the pipeline's stages;
* a file whose records cannot be located (its framing is damaged: a length, a header, a cut end) is
  numbered by its intact records, as :func:`recordkit.recover.scan` finds them (the formats'
  resynchronisation, :mod:`recordkit.formats.resync`). Until the damage shows, reading in order gives the
  same records, so reading switches to the recovered records at the record where it stopped. What is kept
  of such a file is where its intact records lie (:class:`Recovered`): their byte ranges, 16 bytes a
  record, read from the file on demand; only a file whose records have no place in the file (a compressed
  one, or a format that locates records by an index) is kept as its payloads, up to :data:`HELD_LIMIT`.

A :class:`DamageLog` counts what was skipped (per epoch, in the process that reads), issues a
:class:`~recordkit.errors.DataLossWarning` for a damaged file as its reader closes (naming each hole once
per process: a file that another reader meets again gets another warning only for holes not named yet),
and raises the original error once more than ``max_skipped`` records and damaged ranges were skipped.
"""

from __future__ import annotations

import itertools
import threading
import warnings
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from recordkit.datasets.ranges import ReadRange, open_range, plan_reads, read_range
from recordkit.errors import (
    CorruptRecordError,
    DataLossWarning,
    ManifestError,
    TruncatedRecordError,
    UnsupportedOperationError,
)
from recordkit.support.caller import user_stacklevel

if TYPE_CHECKING:
    from typing_extensions import Self

    from recordkit.io import RecordReader
    from recordkit.io.sources import Opened
    from recordkit.recover import SalvageReport

__all__ = [
    "DAMAGED",
    "HELD_LIMIT",
    "DamageLog",
    "OnError",
    "Recovered",
    "SkippingReader",
    "check_on_error",
    "intact",
    "intact_chunks",
    "open_range_skipping",
    "plan_reads_skipping",
    "read_range_skipping",
    "recover_file",
]

OnError = Literal["raise", "skip"]

HELD_LIMIT = 1 << 30
"""The most bytes a damaged file whose records cannot be read by byte range (a GZIP/ZLIB/BZIP2 file: its
records lie in the inflated stream; FFRecord and ArrayRecord recovered whole) may have for its intact records
to be kept in memory; a larger one is refused. Also the most payload bytes a :class:`DamageLog` keeps of such
files at once (older ones are recovered again when read again)."""

_BLOCK = 1 << 20
"""The most bytes read at once when recovered records are read in order."""

_HOLED_CHUNK = 256
"""Records read at once, in order, past the first hole of a file that keeps its numbering."""


class Recovered:
    """What recovering a file found: where its intact records are, the report, and the error that led there.

    Attributes
    ----------
    spans
        ``(start, stop)`` byte range of each intact payload in the file, an ``int64`` array of shape
        ``(n, 2)`` (a file whose records are read by byte range), else ``None``.
    payloads
        The intact payloads (of any other file), else ``None``; ``None`` with no ``spans`` too when
        :class:`DamageLog` let them go (the file is recovered again when read again).
    report, error
        The :class:`~recordkit.recover.SalvageReport` and the error that showed the damage.
    """

    def __init__(
        self,
        spans: np.ndarray[Any, Any] | None,
        payloads: list[bytes] | None,
        report: SalvageReport,
        error: CorruptRecordError,
    ) -> None:
        self.spans = spans
        self.payloads = payloads
        self.report = report
        self.error = error

    @property
    def held(self) -> bool:
        """Whether the records can be read without recovering the file again."""
        return self.spans is not None or self.payloads is not None

    def __len__(self) -> int:
        if self.spans is not None:
            return len(self.spans)
        assert self.payloads is not None
        return len(self.payloads)


def recover_file(
    path: str, format: str | None, compression: str | None, error: CorruptRecordError
) -> Recovered:
    """Recover ``path`` (its framing found damaged by ``error``): its intact records' byte ranges, or payloads.

    Raises
    ------
    UnsupportedOperationError
        The records must be held in memory (see :data:`HELD_LIMIT`) and the file is larger than that.
    """
    from recordkit.recover import scan

    with scan(path, format=format, compression=compression, warn=False) as found:
        report = found.report
        if found.positional:
            flat = np.fromiter(itertools.chain.from_iterable(found.spans()), dtype=np.int64)
            return Recovered(flat.reshape(-1, 2), None, report, error)
        if report.size > HELD_LIMIT:
            kind = f"{report.compression.upper()} " if report.compression else ""
            raise UnsupportedOperationError(
                f"{path}: on_error='skip' cannot read through this damage ({error}): the intact "
                f"records of a damaged {kind}{report.format} file are held in memory, and its "
                f"{report.size} bytes exceed the limit of {HELD_LIMIT} "
                "(recordkit.datasets.damage.HELD_LIMIT); salvage the file first "
                "(recordkit verify FILE --salvage OUT)"
            ) from error
        return Recovered(None, list(found), report, error)


class _Damaged:
    """The place of a damaged record in a stream of records (never reaches the pipeline's stages)."""

    def __repr__(self) -> str:
        return "DAMAGED"

    def __len__(self) -> int:
        return 0  # counted as no bytes where lists of records are sized

    def __reduce__(self) -> str:
        return "DAMAGED"


DAMAGED = _Damaged()


def intact(record: Any) -> bool:
    """Whether ``record`` is a record rather than the place of a damaged one."""
    return record is not DAMAGED


def read_range_skipping(
    item: ReadRange, *, check_crc: bool = True, max_skipped: int | None = None
) -> Iterator[list[bytes]]:
    """:func:`recordkit.datasets.read_range` through damage: the intact records of one range.

    What one range skipped is warned about and limited by ``max_skipped`` on its own (a distributed
    read task's).
    """
    with open_range_skipping(item, check_crc=check_crc, max_skipped=max_skipped) as reader:
        yield from intact_chunks(read_range(item, reader=reader))  # type: ignore[arg-type]


def plan_reads_skipping(sources: Any, **options: Any) -> list[ReadRange]:
    """:func:`recordkit.datasets.plan_reads`, a file too damaged to be counted planned as one whole range.

    Counting a self-indexed file (FFRecord) reads its header: where that is damaged, the file is read
    whole, as recovered (:func:`read_range_skipping`), instead of failing the plan.
    """
    try:
        return plan_reads(sources, **options)
    except ManifestError:
        raise
    except CorruptRecordError:
        pass
    from recordkit.io.resolve import resolve_sources

    files = resolve_sources(sources, format=options.get("format")).files
    return [item for path in files for item in _plan_file(path, options)]


def _plan_file(path: str, options: dict[str, Any]) -> list[ReadRange]:
    try:
        return plan_reads(path, **options)
    except ManifestError:
        raise
    except CorruptRecordError:
        return [ReadRange(path=path, format=options.get("format"))]


def open_range_skipping(
    item: ReadRange, *, check_crc: bool = True, max_skipped: int | None = None
) -> SkippingReader:
    """Open one range's file as a :class:`SkippingReader` with a log of its own."""
    return SkippingReader(
        lambda: open_range(item, check_crc=check_crc),
        item.path,
        DamageLog(max_skipped),
        item.format,
    )


def intact_chunks(chunks: Iterable[list[Any]]) -> Iterator[list[bytes]]:
    """The lists of ``chunks`` without the :data:`DAMAGED` places (and without lists left empty)."""
    for chunk in chunks:
        kept = [record for record in chunk if record is not DAMAGED]
        if kept:
            yield kept


def check_on_error(on_error: object, max_skipped: object) -> None:
    """Refuse anything but ``"raise"``/``"skip"``, and a limit other than ``None`` or a non-negative int
    (or any limit without ``"skip"``)."""
    if on_error not in ("raise", "skip"):
        raise ValueError(f'on_error must be "raise" or "skip", not {on_error!r}')
    if max_skipped is not None and (
        isinstance(max_skipped, bool) or not isinstance(max_skipped, int) or max_skipped < 0
    ):
        raise ValueError(f"max_skipped must be None or an int of at least 0, not {max_skipped!r}")
    if max_skipped is not None and on_error != "skip":
        raise ValueError(
            'max_skipped limits what on_error="skip" skips: pass on_error="skip" with it'
        )


class DamageLog:
    """What a pipeline skipped in the current epoch, in this process; warns and enforces ``max_skipped``.

    Attributes
    ----------
    max_skipped
        The most records plus damaged ranges an epoch may skip; one more raises the error that was found.
    forward
        Collect the events in :attr:`pending` instead of counting and warning (a loader's worker, whose
        main process counts and warns: :meth:`receive`).
    """

    def __init__(self, max_skipped: int | None = None) -> None:
        self.max_skipped = max_skipped
        self.forward = False
        self.last_error: CorruptRecordError | None = None
        self.epoch: int | None = None
        self.pending: list[dict[str, Any]] = []
        # What the warnings named (this process, every epoch): files, their holes, their damaged ranges.
        self._warned: set[str] = set()
        self._named: set[tuple[str, int]] = set()
        self._named_ranges: set[str] = set()
        # Forwarding: the files with holes reported since their reader last closed.
        self._reported: set[str] = set()
        # Forwarding with .prefetch(): the reading thread adds events while the worker's main thread
        # takes them; an event added to a list already taken would be lost.
        self._lock = threading.Lock()
        # What recovering the files read as recovered found, by path (this process's, kept across
        # epochs): byte ranges, or payloads of HELD_LIMIT bytes in all at most (see remember).
        self.recovered: dict[str, Recovered] = {}
        self.reset()

    def begin(self, epoch: int) -> None:
        """Start counting ``epoch`` (unless it is the epoch being counted)."""
        if epoch != self.epoch:
            self.reset()
            self.epoch = epoch

    def reset(self) -> None:
        """Start counting a new epoch."""
        self.epoch = None
        self.records = 0
        self.ranges = 0
        self.bytes = 0
        self.files: dict[str, dict[str, Any]] = {}
        self._holes: set[tuple[str, int]] = set()
        self._recovered_now: set[str] = set()

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["pending"] = []
        state["recovered"] = {}
        del state["_lock"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def remember(self, path: str, found: Recovered) -> None:
        """Keep what recovering ``path`` found; let the payloads of the files recovered longest ago go
        while those kept come to more than :data:`HELD_LIMIT` bytes."""
        self.recovered.pop(path, None)
        self.recovered[path] = found
        held = 0
        for known in reversed(list(self.recovered.values())):
            if known.payloads is not None:
                held += known.report.size
                if held > HELD_LIMIT and known is not found:
                    known.payloads = None

    def summary(self) -> dict[str, Any]:
        """The counts, JSON-compatible: records and damaged byte ranges skipped, their bytes, the files."""
        return {
            "records": self.records,
            "ranges": self.ranges,
            "bytes": self.bytes,
            "files": sorted(self.files),
        }

    def _file(self, path: str) -> dict[str, Any]:
        return self.files.setdefault(path, {"records": [], "ranges": [], "bytes": 0})

    def hole(self, path: str, index: int, error: CorruptRecordError) -> None:
        """Note that record ``index`` of ``path`` was skipped (once per epoch, however often it is read)."""
        self.last_error = error
        if (path, index) in self._holes:
            return
        self._holes.add((path, index))
        self.add(
            {"path": path, "records": [[index, error.offset]], "ranges": [], "bytes": 0}, error
        )

    def salvaged(self, path: str, report: SalvageReport, error: CorruptRecordError) -> None:
        """Note what recovering ``path`` skipped (its damaged byte ranges), once per epoch."""
        if path in self._recovered_now:
            return
        self._recovered_now.add(path)
        ranges = [[r.start, r.end, r.reason] for r in report.skipped]
        lost = report.lost_compressed_bytes
        if lost:
            ranges.append([report.size, report.size, f"{lost} compressed bytes after damage"])
        if not ranges:  # the error came from something recovery tolerates: count the file once
            ranges = [[error.offset or 0, error.offset or 0, error.reason]]
        event: dict[str, Any] = {"path": path, "records": [], "ranges": ranges}
        event["bytes"] = report.bytes_skipped + lost
        self.add(event, error)

    def add(self, event: dict[str, Any], error: CorruptRecordError) -> None:
        """Count ``event`` (from this process or a worker's); raise ``error`` past ``max_skipped``.

        A file's recovery is complete at once and is warned about now; holes are warned about when the
        file's reader closes (:meth:`warn`), with every hole it found. With :attr:`forward`, the event is
        only collected (the main process counts it, see :meth:`receive`).
        """
        if self.forward:
            with self._lock:
                self.pending.append({**event, "error": error})
                if event["records"]:
                    self._reported.add(event["path"])
            return
        known = self.files.get(event["path"])
        if event["ranges"] and not event["records"] and known is not None and known["ranges"]:
            return  # recovered again (another reader, or a worker's report of the same file)
        info = self._file(event["path"])
        info["records"].extend(event["records"])
        info["ranges"].extend(event["ranges"])
        info["bytes"] += event["bytes"]
        self.records += len(event["records"])
        self.ranges += len(event["ranges"])
        self.bytes += event["bytes"]
        if self.max_skipped is not None and self.records + self.ranges > self.max_skipped:
            self._name_all(event["path"])  # the error says it; no warning after it
            raise error
        if event["ranges"]:
            self.warn(event["path"])

    def warn(self, path: str) -> None:
        """Issue a :class:`~recordkit.errors.DataLossWarning` naming what was skipped in ``path`` and not
        named before in this process (each hole and each file's damaged ranges are named once).

        Called as a file's reader closes. With :attr:`forward`, it reports the close instead, so that the
        main process warns then (:meth:`receive`).
        """
        if self.forward:
            with self._lock:
                if path in self._reported:
                    self._reported.discard(path)
                    self.pending.append({"path": path, "closed": True})
            return
        info = self.files.get(path)
        if info is None:
            return
        records = [hole for hole in info["records"] if (path, hole[0]) not in self._named]
        ranges = [] if path in self._named_ranges else info["ranges"]
        if not records and not ranges:
            return
        more = " more" if path in self._warned else ""
        self._name_all(path)
        parts = []
        if records:
            where = ", ".join(
                f"{i}" if offset is None else f"{i} at byte {offset}" for i, offset in records
            )
            n = len(records)
            parts.append(
                f"{n}{more} damaged record{'s' if n > 1 else ''} "
                f"({'records' if n > 1 else 'record'} {where})"
            )
        if ranges:
            spans = ", ".join(f"[{s}, {e}) {reason}" for s, e, reason in ranges)
            n = len(ranges)
            parts.append(
                f"{n} damaged range{'s' if n > 1 else ''}, {info['bytes']} bytes ({spans})"
            )
        warnings.warn(
            f"{path}: skipped {'; '.join(parts)}; the intact records were read",
            DataLossWarning,
            stacklevel=user_stacklevel(),
        )

    def warn_all(self) -> None:
        """Warn about every file with something skipped that no warning named yet (the end of a pass
        whose workers' readers may not have closed)."""
        for path in list(self.files):
            self.warn(path)

    def _name_all(self, path: str) -> None:
        """Count everything skipped in ``path`` so far as named (warned about, or said by an error)."""
        self._warned.add(path)
        info = self.files.get(path)
        if info is not None:
            self._named.update((path, hole[0]) for hole in info["records"])
            if info["ranges"]:
                self._named_ranges.add(path)

    def receive(self, events: Iterable[dict[str, Any]]) -> None:
        """Count and warn about what a worker skipped (:meth:`take_pending` there), raising past
        ``max_skipped`` over every worker; a record or a file's recovery reported again in the epoch (by
        another worker, or a worker that read it twice) counts once.

        A recovered file is warned about at once; holes when the worker reports that its reader of the
        file closed (the warning names every hole of the file not named yet, whichever worker found it),
        or at the end of the pass (:meth:`warn_all`).
        """
        for event in events:
            event = dict(event)
            path = event["path"]
            if event.get("closed"):
                self.warn(path)
                continue
            error = event.pop("error")
            fresh = [hole for hole in event["records"] if (path, hole[0]) not in self._holes]
            if event["records"] and not fresh:
                continue
            self._holes.update((path, hole[0]) for hole in fresh)
            self.add({**event, "records": fresh}, error)

    def take_pending(self) -> list[dict[str, Any]]:
        """The events collected since the last call (see :attr:`forward`).

        A worker does not know the epoch, so it reports a hole or a recovered file again when it reads it
        again after this call (the main process counts each once per epoch, :meth:`receive`).
        """
        with self._lock:
            events, self.pending = self.pending, []
            self._holes.clear()
            self._recovered_now.clear()
        return events


class SkippingReader:
    """A file's reader that skips damage: holes where the file's numbering survives, else its intact records.

    It reads as the :class:`~recordkit.io.RecordReader` that ``open_file`` returns does (``len``,
    ``read``, ``iter_from``, iteration), with :data:`DAMAGED` in place of each damaged record of a file that
    keeps its numbering. A :class:`~recordkit.errors.ManifestError` (a dataset's shard that changed) is
    not damage to skip: it is raised. A file read as recovered is read by byte range where its records have
    one (see :class:`Recovered`).
    """

    def __init__(
        self,
        open_file: Callable[[], RecordReader],
        path: str,
        log: DamageLog,
        format: str | None = None,
    ) -> None:
        self.path = path
        self._log = log
        self._format = format
        self._reader: RecordReader | None = None
        self._found: Recovered | None = None
        self._opened: Opened | None = None
        known = log.recovered.get(path)
        if known is not None:  # found damaged before in this process: read as recovered at once
            self._recover(known.error)
            return
        try:
            self._reader = open_file()
        except ManifestError:
            raise
        except CorruptRecordError as error:
            self._recover(error)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @property
    def format(self) -> str:
        """The file's format name."""
        if self._reader is not None:
            return self._reader.format
        known = self._log.recovered.get(self.path)
        return known.report.format if known is not None else (self._format or "")

    def __getattr__(self, name: str) -> Any:
        reader = self.__dict__.get("_reader")
        if reader is None:
            raise AttributeError(name)
        return getattr(reader, name)

    @property
    def supports_random_access(self) -> bool:
        """Whether records can be read by index (a recovered file's always can)."""
        if self._found is not None or self._reader is None:
            return True
        return bool(self._reader.supports_random_access)

    def _recover(self, error: CorruptRecordError) -> Recovered:
        """Recover the file (once), note what was skipped, and read its intact records from now on."""
        if self._found is None:
            known = self._log.recovered.get(self.path)
            if known is None or not known.held:
                reader = self._reader
                fmt = reader.format if reader is not None else self._format
                comp = reader.compression if reader is not None else None
                known = recover_file(self.path, fmt, comp, error if known is None else known.error)
                self._log.remember(self.path, known)
            self._found = Recovered(known.spans, known.payloads, known.report, known.error)
            self._log.salvaged(self.path, known.report, known.error)
        return self._found

    def _numbered(self, error: CorruptRecordError) -> bool:
        """Whether the file keeps its numbering after ``error`` (else it is read as recovered from now on)."""
        if isinstance(error, ManifestError):
            raise error
        reader = self._reader
        if self._found is None and reader is not None and reader.supports_random_access:
            try:
                len(reader)
            except ManifestError:
                raise
            except CorruptRecordError:
                pass
            else:
                return True
        self._recover(error)
        return False

    def __len__(self) -> int:
        if self._found is None:
            assert self._reader is not None
            try:
                return len(self._reader)
            except ManifestError:
                raise
            except CorruptRecordError as error:
                self._recover(error)
        assert self._found is not None
        return len(self._found)

    def read(self, indices: Iterable[int]) -> list[Any]:
        """The records at ``indices``, :data:`DAMAGED` for each damaged one."""
        wanted = list(indices)
        if self._found is None:
            assert self._reader is not None
            try:
                return self._reader.read(wanted)
            except CorruptRecordError as error:
                if self._numbered(error):
                    return [self._one(i) for i in wanted]
        found = self._found
        assert found is not None
        self._log.salvaged(self.path, found.report, found.error)  # once per epoch (or worker batch)
        if found.payloads is not None:
            payloads = found.payloads
            return [payloads[i] for i in wanted]
        return [self._spanned(i, i + 1)[0] for i in wanted]

    def _spanned(self, first: int, stop: int) -> list[bytes]:
        """Recovered records ``first`` to ``stop - 1``, read from the file by their byte ranges at once."""
        spans = self._found.spans  # type: ignore[union-attr]
        assert spans is not None
        count = len(spans)
        for i in (first, stop - 1):
            if not -count <= i < count:
                raise IndexError(f"{self.path}: record {i} of {count} recovered records")
        if first < 0:
            first, stop = first + count, stop + count
        low, high = int(spans[first, 0]), int(spans[stop - 1, 1])
        if self._opened is None:
            from recordkit.io.sources import open_source

            self._opened = open_source(self.path)
        data = self._opened.source.pread(low, high - low)
        if len(data) < high - low:
            raise TruncatedRecordError(
                f"the file is shorter than when it was recovered ({low + len(data)} bytes)",
                path=self.path,
                index=first + int(np.searchsorted(spans[first:stop, 1], low + len(data), "right")),
                offset=low + len(data),
            )
        view = memoryview(data)
        return [bytes(view[a - low : b - low]) for a, b in spans[first:stop].tolist()]

    def _one(self, index: int) -> Any:
        assert self._reader is not None
        try:
            return self._reader.read([index])[0]
        except ManifestError:
            raise
        except CorruptRecordError as error:
            self._log.hole(self.path, index, error)
            return DAMAGED

    def iter_from(self, start: int) -> Iterator[Any]:
        """Every record from position ``start`` on, in order (:data:`DAMAGED` for a hole)."""
        position = start
        while self._found is None:
            assert self._reader is not None
            records: Iterator[Any] | None = None
            try:
                # Starting past the first record may scan the file up to there (an unindexed TFRecord):
                # damage on the way is met here.
                records = self._reader.iter_from(position) if position else iter(self._reader)
                for record in records:
                    yield record
                    position += 1
                return
            except CorruptRecordError as error:
                if self._numbered(error):
                    yield from self._past_holes(position)
                    return
            finally:
                close = getattr(records, "close", None)
                if close is not None:
                    close()
        found = self._found
        self._log.salvaged(self.path, found.report, found.error)
        if found.payloads is not None:
            yield from found.payloads[position:]
            return
        spans = found.spans
        assert spans is not None
        ends = spans[:, 1]
        while position < len(spans):
            # Records up to _BLOCK bytes past this one's start in one read (at least this one).
            reach = int(spans[position, 0]) + _BLOCK
            stop = max(int(np.searchsorted(ends, reach, "right")), position + 1)
            yield from self._spanned(position, stop)
            position = stop

    def _past_holes(self, position: int) -> Iterator[Any]:
        """Every record from ``position`` on of a file that keeps its numbering, :data:`DAMAGED` for a hole.

        Read :data:`_HOLED_CHUNK` records at a time; a chunk that holds a hole is read again record by
        record, so each record is read at most twice here however close the holes lie (starting the file's
        own reading again after each hole would read its next chunk again for every record before the
        next hole).
        """
        reader = self._reader
        assert reader is not None
        total = len(reader)
        while position < total:
            stop = min(total, position + _HOLED_CHUNK)
            try:
                chunk = reader.read(range(position, stop))
            except ManifestError:
                raise
            except CorruptRecordError:
                chunk = [self._one(i) for i in range(position, stop)]
            yield from chunk
            position = stop

    def __iter__(self) -> Iterator[Any]:
        return self.iter_from(0)

    def close(self) -> None:
        """Close the file, and warn about the damaged records it skipped."""
        if self._reader is not None:
            self._reader.close()
        if self._opened is not None:
            self._opened.close()
            self._opened = None
        self._log.warn(self.path)
