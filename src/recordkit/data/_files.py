"""The records of a file-backed pipeline: which ones an epoch holds, in which order, for which shard.

A :class:`FileSource` holds every choice made before the per-item stages: the files, the shuffle, the
``take``/``skip`` windows and parallel reading. Its :meth:`FileSource.records` gives one shard's records of
one epoch, from any position, and :meth:`FileSource.length` counts them without reading any payload.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from recordkit.data._interleave import InterleavedStream, RoundRobin
from recordkit.data._readers import CHUNK, Catalog, ReaderPool, ShardStream
from recordkit.data._shuffle import BufferShuffler, fed_position
from recordkit.data._state import ALL, Elastic
from recordkit.datasets.plan import (
    EqualShards,
    IndexUnit,
    RangeUnit,
    Unit,
    Window,
    bounds,
    cut,
    global_length,
    plan_global,
    plan_length,
    plan_pieces,
    plan_sequence,
    positions_in_files,
    whole_files,
)
from recordkit.datasets.seeds import derive_seed, permutation
from recordkit.errors import NoLengthError, UnsupportedOperationError
from recordkit.io.resolve import Sources

__all__ = ["EVERYTHING", "FileSource", "Shuffle", "Trail", "catalog_of", "narrow"]

EVERYTHING: Window = (0, None)


def narrow(window: Window, op: str, n: int) -> Window:
    """``window`` after ``take(n)`` or ``skip(n)`` (positions relative to its own start)."""
    start, stop = window
    if op == "skip":
        start += n
        return (start if stop is None else min(start, stop), stop)
    end = start + n
    return (start, end if stop is None else min(end, stop))


@dataclass(frozen=True)
class Shuffle:
    """``shuffle(buffer_size, files=...)`` as called."""

    buffer_size: int | None
    files: bool

    @property
    def is_global(self) -> bool:
        """Whether this is a global permutation (no buffer)."""
        return self.buffer_size is None


def catalog_of(sources: Sources, format: str | None, split: str | None, **options: Any) -> Catalog:
    """The files named by ``sources``, or the shards a dataset directory's manifest lists.

    ``sources`` are resolved as :func:`recordkit.open` resolves them (:func:`recordkit.io.resolve_sources`);
    ``options`` (``check_crc``, ``index``, ``lenient``) are :func:`recordkit.open`'s, for every reader.
    """
    from recordkit.io.resolve import resolve_sources

    return Catalog(resolve_sources(sources, format=format, split=split), **options)


class Trail:
    """Where the records of one shard's epoch (:meth:`FileSource.chunks`) came from, worked out on demand.

    Nothing is kept per record: the streams note where each unit began or how long it was, a shuffle
    buffer how many records it was fed, and :meth:`locate` replays the interleaving and the buffer's
    choices on positions. It is asked only when a stage fails on a record.
    """

    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog
        self.stream: ShardStream | InterleavedStream | None = None
        self.skip = 0
        self.buffer: tuple[int, int] | None = None  # (size, seed) of the shuffle buffer
        self.fed = 0

    def locate(self, position: int) -> tuple[str, int] | None:
        """The file and the record index in it of the record at ``position`` of the chunks given."""
        emitted = self.skip + position
        if self.buffer is not None:
            fed = fed_position(*self.buffer, self.fed, emitted)
            if fed is None:
                return None
            emitted = fed
        found = None if self.stream is None else self.stream.where(emitted)
        if found is None:
            return None
        return self.catalog.files[found[0]], found[1]


def _buffer_shuffled(
    stream: ShardStream | InterleavedStream, size: int, seed: int, skip: int, trail: Trail
) -> Generator[list[bytes], None, None]:
    """The stream's records through a shuffle buffer, in lists, without the first ``skip`` outputs."""
    shuffler = BufferShuffler(size, seed)
    position = 0
    if skip and stream.random_access and stream.length is not None:
        # Replay the buffer's choices on positions alone, then read only what it still holds.
        position = shuffler.replay(stream.length, skip)
        shuffler.pending[:] = stream.fetch(shuffler.pending)
        skip = 0
    trail.buffer, trail.fed = (size, seed), position
    source = stream.chunks(position)
    try:
        for chunk in source:
            trail.fed += len(chunk)
            out = shuffler.push_many(chunk)
            if skip:
                dropped = min(skip, len(out))
                skip -= dropped
                out = out[dropped:]
            if out:
                yield out
    finally:
        source.close()
    out = shuffler.drain()[skip:]
    for at in range(0, len(out), CHUNK):
        yield out[at : at + CHUNK]


@dataclass(frozen=True, eq=False)
class FileSource:
    """The record-level choices of a pipeline over files.

    Attributes
    ----------
    catalog
        The files, with what has been learnt about them (shared by every copy of the pipeline).
    seed, equal
        The pipeline's seed and ``equal_shards``.
    shuffle
        The shuffle, or ``None``.
    before, after
        The ``take``/``skip`` windows called before and after :meth:`Dataset.shuffle`.
    cycle, block
        ``interleave(cycle_length, block_length)``; ``cycle=0`` reads one unit after the other.
    elastic
        An epoch continued on another number of shards (:meth:`Dataset.load_state_dict` with the states of
        every rank): in that epoch each shard reads its balanced slice of what the saved shards left.
    """

    catalog: Catalog
    seed: int
    equal: EqualShards
    shuffle: Shuffle | None = None
    before: Window = EVERYTHING
    after: Window = EVERYTHING
    cycle: int = 0
    block: int = 1
    elastic: Elastic | None = None

    def replace(self, **changes: Any) -> FileSource:
        """A copy with ``changes``."""
        return dataclasses.replace(self, **changes)

    def fingerprint(self) -> dict[str, Any]:
        """What must match for a saved position to apply (new entries only when set, for old states)."""
        spec = self.shuffle
        windows = None
        if (self.before, self.after) != (EVERYTHING, EVERYTHING):
            windows = [list(self.before), list(self.after)]
        return {
            "seed": self.seed,
            "files": len(self.catalog),
            "shuffle": None if spec is None else [spec.buffer_size, spec.files],
            "equal_shards": self.equal,
            "windows": windows,
            "interleave": [self.cycle, self.block] if self.cycle else None,
            **({"tfds_order": True} if self.catalog.order is not None else {}),
        }

    def resumed(self, epoch: int) -> Elastic | None:
        """The elastic position that applies to ``epoch``, if any."""
        elastic = self.elastic
        if elastic is None or elastic.epoch != epoch or not elastic.phases:
            return None
        return elastic

    def _rest(self, pool: ReaderPool, elastic: Elastic) -> np.ndarray:
        return remaining(self.replace(elastic=None), pool, elastic)

    # -- planning ------------------------------------------------------------------------------------

    def _pieces(self, epoch: int, count: Callable[[int], int]) -> list[RangeUnit]:
        """The parts of files the epoch reads, in its order, before it is split between shards."""
        catalog = self.catalog
        pieces = whole_files(range(len(catalog)), catalog.counts)
        if self.before != EVERYTHING:
            pieces = cut(pieces, count, *self.before)
        if self.shuffle is not None and self.shuffle.files:
            rank = permutation(len(catalog), self.seed, epoch, "files").argsort().tolist()
            pieces.sort(key=lambda p: rank[p.file])
        if self.after != EVERYTHING:
            pieces = cut(pieces, count, *self.after)
        return pieces

    def _check_global(self) -> None:
        catalog = self.catalog
        for name, ra in zip(catalog.files, catalog.random_access, strict=True):
            if not ra:
                raise UnsupportedOperationError(
                    f"a global shuffle needs random-access files, but {name!r} can only be read "
                    "sequentially (compressed?): decompress it, or use shuffle(buffer_size)"
                )

    def plan(
        self, pool: ReaderPool, epoch: int, shard: int, num_shards: int, *, counted: bool = False
    ) -> list[Unit]:
        """The units ``shard`` reads in ``epoch``; files are counted only where the plan needs it.

        One shard reading whole files in order needs no count (they are read through in order): only
        ``take``/``skip`` count the files their cuts may fall in. Several shards split random-access
        files by record ranges, and ``equal_shards``, a global shuffle and ``counted`` (resuming, which
        starts from a position) count every file, random-access ones by a header scan.
        """
        catalog = self.catalog
        elastic = self.resumed(epoch)
        if elastic is not None:
            return plan_sequence(self._rest(pool, elastic), shard, num_shards, self.equal)
        if self.equal is not None:
            catalog.count_all(pool)
        else:
            is_global = self.shuffle is not None and self.shuffle.is_global
            catalog.describe(pool, count=counted or num_shards > 1 or is_global)
        if catalog.order is not None:
            return self._ordered_plan(epoch, shard, num_shards)
        if self.shuffle is not None and self.shuffle.is_global:
            self._check_global()
            counts = [n or 0 for n in catalog.counts]
            return plan_global(
                counts, shard, num_shards, self.seed, epoch, self.equal, self.before, self.after
            )
        ra = [bool(x) for x in catalog.random_access]
        pieces = self._pieces(epoch, lambda f: catalog.count_in(pool, f))
        return plan_pieces(pieces, catalog.counts, ra, shard, num_shards, self.equal)

    def _ordered_plan(self, epoch: int, shard: int, num_shards: int) -> list[Unit]:
        """The plan of a catalog whose records have an order of their own (a TFDS split's).

        ``take``/``skip`` before the shuffle count in that order; a global shuffle permutes the records
        they select; ``files=True`` (a buffer shuffle) opens the shards in a random order, as TFDS does with
        ``shuffle_files=True``, and interleaves them as before.
        """
        from recordkit.io.tfds import ReadOrder

        catalog = self.catalog
        order = catalog.order
        assert order is not None
        self._check_global()
        offsets = catalog.offsets()
        lo, hi = bounds(self.before, len(order))
        spec = self.shuffle
        if spec is not None and spec.is_global:
            positions = permutation(hi - lo, self.seed, epoch, "global") + lo
            return plan_sequence(
                positions_in_files(order, offsets, positions),
                shard,
                num_shards,
                self.equal,
                self.after,
            )
        chosen = positions_in_files(order, offsets, np.arange(lo, hi, dtype=np.int64))
        if spec is not None and spec.files:
            files = permutation(len(catalog), self.seed, epoch, "files").tolist()
            shuffled = ReadOrder(order.lengths, order.cycle_length, order.block_length, files)
            every = positions_in_files(shuffled, offsets, np.arange(len(shuffled), dtype=np.int64))
            chosen = every if hi - lo == len(order) else every[np.isin(every, chosen)]
        return plan_sequence(chosen, shard, num_shards, self.equal, self.after)

    def length(self, epoch: int, shard: int, num_shards: int) -> int:
        """The number of records ``shard`` reads in ``epoch``, learnt from headers and indexes alone.

        Raises
        ------
        TypeError
            A count needed is known only by reading a sequential (compressed) file through.
        """
        catalog = self.catalog
        elastic = self.resumed(epoch)
        if elastic is not None:
            pool = ReaderPool(catalog)
            try:
                rest = len(self._rest(pool, elastic))
            finally:
                pool.close()
            return global_length(rest, shard, num_shards, self.equal)
        catalog.describe()

        def known(f: int) -> int:
            n = catalog.counts[f]
            if n is None:
                raise NoLengthError(
                    f"len() is unknown: {catalog.files[f]!r} can only be read sequentially "
                    "(compressed?), so its record count is known only by reading it through "
                    "(a dataset directory's manifest records it)"
                )
            return n

        if self.equal is not None:
            for f in range(len(catalog)):
                known(f)
        if catalog.order is not None or (self.shuffle is not None and self.shuffle.is_global):
            self._check_global()
            lo, hi = bounds(self.before, sum(known(f) for f in range(len(catalog))))
            lo, hi = bounds(self.after, hi - lo)
            return global_length(hi - lo, shard, num_shards, self.equal)
        ra = [bool(x) for x in catalog.random_access]
        units = plan_pieces(
            self._pieces(epoch, known), catalog.counts, ra, shard, num_shards, self.equal
        )
        n = plan_length(units)
        if n is None:
            known(next(u.file for u in units if isinstance(u, RangeUnit) and not u.sized))
        assert n is not None
        return n

    # -- reading -------------------------------------------------------------------------------------

    def records(self, epoch: int, shard: int, num_shards: int, skip: int) -> Iterator[bytes]:
        """The records ``shard`` reads in ``epoch``, without the first ``skip``; readers close at the end."""
        chunks = self.chunks(epoch, shard, num_shards, skip)
        try:
            for chunk in chunks:
                yield from chunk
        finally:
            chunks.close()

    def chunks(
        self, epoch: int, shard: int, num_shards: int, skip: int, trail: Trail | None = None
    ) -> Generator[list[bytes], None, None]:
        """:meth:`records` in lists (non-empty), as they are read; readers close at the end.

        ``trail`` (a new one) is made to tell where each record given came from.
        """
        trail = Trail(self.catalog) if trail is None else trail
        self.catalog.damage.begin(epoch)
        pool = ReaderPool(self.catalog)
        try:
            plan = self.plan(pool, epoch, shard, num_shards, counted=skip > 0)
            plain = ShardStream(plan, pool)
            stream: ShardStream | InterleavedStream = plain
            elastic = self.resumed(epoch) is not None  # the rest of an epoch, in its own order
            if self.cycle > 1 and not elastic:
                stream = InterleavedStream(plain, self.cycle, self.block)
            trail.stream, trail.skip = stream, skip
            spec = self.shuffle
            if elastic or spec is None or spec.buffer_size is None or spec.buffer_size <= 1:
                chunks = stream.chunks(skip)
            else:
                seed = derive_seed(self.seed, epoch, shard, "buffer")
                chunks = _buffer_shuffled(stream, spec.buffer_size, seed, skip, trail)
            try:
                for chunk in chunks:
                    if chunk:
                        yield chunk
            finally:
                chunks.close()
        finally:
            pool.close()


def remaining(source: FileSource, pool: ReaderPool, elastic: Elastic) -> np.ndarray:
    """The global indexes of the records of ``elastic``'s epoch that its phases left, in reading order.

    ``source`` is the pipeline's record choices (without ``elastic``). Every shard's stream is rebuilt from
    the seed, the epoch and the shard; of it, the first records (a shuffle buffer's: those it emitted, the
    buffer replayed on positions) are the consumed ones. What is left is laid shard after shard and, when
    the pipeline shuffles, permuted (seeded by the seed, the epoch and the phase).

    Raises
    ------
    UnsupportedOperationError
        A file is sequential (compressed): its records cannot be read by index.
    """
    key = (source.seed, source.shuffle, source.before, source.after, source.cycle, source.block)
    cached = elastic._cache.get(key)
    if cached is not None:
        return cached
    catalog = source.catalog
    catalog.count_all(pool)
    for name, ra in zip(catalog.files, catalog.random_access, strict=True):
        if not ra:
            raise UnsupportedOperationError(
                f"resuming on another number of shards reads the rest of the epoch by record index, but "
                f"{name!r} can only be read sequentially (compressed?): decompress it, or resume with "
                "the same number of ranks"
            )
    offsets = catalog.offsets()
    epoch = elastic.epoch
    spec = source.shuffle
    left: np.ndarray | None = None
    for p, phase in enumerate(elastic.phases):
        tails = []
        for s in range(phase.num_shards):
            buffer = 0
            if left is None:
                units = source.plan(pool, epoch, s, phase.num_shards, counted=True)
                stream = _indexes(units, offsets)
                if source.cycle > 1:
                    stream = stream[_interleaved(units, source.cycle, source.block, RoundRobin)]
                if spec is not None and spec.buffer_size is not None and spec.buffer_size > 1:
                    buffer = spec.buffer_size
            else:
                (unit,) = plan_sequence(left, s, phase.num_shards, source.equal)
                assert isinstance(unit, IndexUnit)
                stream = unit.indices
            taken = len(stream) if phase.consumed[s] == ALL else min(len(stream), phase.consumed[s])
            if buffer:
                shuffler = BufferShuffler(buffer, derive_seed(source.seed, epoch, s, "buffer"))
                fed = shuffler.replay(len(stream), taken)
                kept = np.concatenate(
                    [
                        np.sort(np.asarray(shuffler.pending, dtype=np.int64)),
                        np.arange(fed, len(stream)),
                    ]
                )
                tails.append(stream[kept])
            else:
                tails.append(stream[taken:])
        left = np.concatenate(tails).astype(np.int64) if tails else np.zeros(0, np.int64)
        if spec is not None:
            left = left[permutation(len(left), source.seed, epoch, "elastic", p)]
    assert left is not None
    elastic._cache[key] = left
    return left


def _indexes(units: Sequence[Unit], offsets: np.ndarray) -> np.ndarray:
    """The global indexes of a plan's records, in plan order (every unit sized)."""
    parts = []
    for unit in units:
        if isinstance(unit, IndexUnit):
            parts.append(np.asarray(unit.indices, dtype=np.int64))
        else:
            assert unit.stop is not None
            parts.append(offsets[unit.file] + np.arange(unit.start, unit.stop, unit.step))
    return np.concatenate(parts).astype(np.int64) if parts else np.zeros(0, np.int64)


def _interleaved(units: Sequence[Unit], cycle: int, block: int, schedule_of: Any) -> np.ndarray:
    """The plan positions in the order ``interleave(cycle, block_length=block)`` reads them."""
    lengths = [len(u) for u in units]
    bases = np.concatenate([[0], np.cumsum(lengths, dtype=np.int64)])
    schedule = schedule_of(len(units), cycle, block)
    taken = [0] * len(units)
    order: list[int] = []
    while (unit := schedule.current()) is not None:
        if taken[unit] == lengths[unit]:
            schedule.ended()
            continue
        order.append(int(bases[unit]) + taken[unit])
        taken[unit] += 1
        schedule.took()
    return np.asarray(order, dtype=np.int64)
