"""What a loader over a pipeline is built of: recordkit's :class:`~recordkit.data.Loader` and the PyTorch glue
(:mod:`recordkit.integrations.torch`) both are, so they split, count and resume an epoch in the same way.

* :class:`Share` is one rank's share of a :class:`~recordkit.data.Dataset`, split between a loader's worker
  processes: the :class:`Run` s each worker reads in an iteration (the streams that saved workers left
  unfinished, when resuming, possibly saved with another number of workers, then its own shard from the
  next epoch on), their items, and their length.
* :class:`IndexShare` is the same for a map-style dataset: the batches of indexes :class:`IndexBatches`
  draws for each epoch, read by the workers in turn.
* :class:`EpochClock` lets the workers of a plain PyTorch ``DataLoader`` agree on each iteration's epoch.
* :class:`IndexedFiles` reads the records of random-access files by global index, a batch at a time.
* :data:`STATE_VERSION` and :func:`check_state` write and check the JSON-compatible positions.

None of them needs PyTorch.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.context
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from recordkit.data._damage import DamageLog, OnError, intact
from recordkit.data._dataset import Share
from recordkit.data._files import catalog_of
from recordkit.data._readers import ReaderPool
from recordkit.data._state import STATE_VERSION, Elastic, Resume, Run, check_state
from recordkit.datasets.plan import (
    EqualShards,
    check_equal_shards,
    global_length,
    plan_sequence,
    positions_in_files,
)
from recordkit.datasets.seeds import permutation
from recordkit.errors import StateError, UnsupportedOperationError
from recordkit.io.resolve import Sources
from recordkit.support.moved import moved_attribute

__all__ = [
    "STATE_VERSION",
    "EpochClock",
    "IndexBatches",
    "IndexShare",
    "IndexedFiles",
    "Passed",
    "Resume",
    "Run",
    "Share",
    "check_state",
]


class IndexBatches:
    """The batches of indexes one rank reads of a map-style dataset of ``n`` records, seeded per epoch.

    ``shuffle``: a permutation of ``seed`` and the epoch, else index order. The order is split between
    ``world_size`` ranks in contiguous parts; ``equal_shards`` ``"pad"`` repeats indexes and ``"drop"``
    leaves the last ones out, so that every rank gets as many.
    """

    def __init__(
        self,
        n: int,
        batch_size: int,
        *,
        shuffle: bool,
        seed: int,
        drop_last: bool,
        rank: int,
        world_size: int,
        equal_shards: EqualShards,
    ) -> None:
        self.n, self.batch_size, self.shuffle, self.seed = n, batch_size, shuffle, seed
        self.drop_last, self.rank, self.world_size = drop_last, rank, world_size
        self.equal = check_equal_shards(equal_shards)

    def indexes(self, epoch: int) -> np.ndarray:
        """This rank's indexes of ``epoch``, in the order they are read."""
        order = (
            permutation(self.n, self.seed, epoch, "sampler") if self.shuffle else np.arange(self.n)
        )
        (unit,) = plan_sequence(order, self.rank, self.world_size, self.equal)
        return unit.indices  # type: ignore[union-attr]

    def __len__(self) -> int:
        """The number of batches in an epoch."""
        mine = global_length(self.n, self.rank, self.world_size, self.equal)
        return mine // self.batch_size if self.drop_last else -(-mine // self.batch_size)


class Passed:
    """An item a loader counts in its position but does not hand out: a map-style dataset's batch whose
    every record was skipped as damaged (``on_error="skip"``)."""


class IndexShare:
    """One rank's batches of a map-style dataset, read by a loader's workers in turn.

    Worker ``w`` of ``n`` reads batches ``w``, ``w + n``, ... of the epoch (after those already delivered,
    when resuming), so that taking the workers' items in turn gives the batches in order: the order, and
    a position, do not depend on the number of workers. The position is one stream, the batches delivered.

    Parameters
    ----------
    dataset
        The map-style dataset (what ``torch.utils.data.get_worker_info().dataset`` gives in a worker).
    records
        Its records.
    batches
        The batches of indexes of each epoch.
    fetch
        Reads and collates one batch of indexes (in the worker that reads it).
    """

    epochs = 1
    first_epoch = 0

    def __init__(
        self,
        dataset: Any,
        records: IndexedFiles,
        batches: IndexBatches,
        fetch: Callable[[list[int]], Any],
    ) -> None:
        self.dataset = dataset
        self.records = records
        self.batches = batches
        self.fetch = fetch

    @property
    def damage(self) -> DamageLog | None:
        """The log of what ``on_error="skip"`` skips (``None`` unless the dataset skips damage)."""
        return self.records.damage

    def slots(self, num_workers: int) -> int:
        """One stream, whatever the number of workers."""
        return 1

    def check_streams(self, streams: int) -> None:
        """Refuse a saved position of more than one stream."""
        if streams != 1:
            raise StateError(f"malformed loader state: {streams} counts for a map-style dataset")

    def fingerprint(self) -> dict[str, Any]:
        """What a saved position must match: the records, the batch size, the order and the rank."""
        b = self.batches
        return {
            "seed": b.seed,
            "files": len(self.records.files),
            "records": len(self.records),
            "batch_size": b.batch_size,
            "shuffle": b.shuffle,
            "rank": b.rank,
            "world_size": b.world_size,
        }

    def elastic_state(self, epoch: int) -> None:
        """Nothing: the epochs of a map-style dataset are not continued on other ranks."""
        return

    def restore_elastic(self, elastic: Elastic | None) -> None:
        """Refuse to continue on another layout of ranks."""
        if elastic is not None:
            raise UnsupportedOperationError(
                "this loader resumes only with the ranks it was saved with (a map-style dataset's "
                "sampler decides its order)"
            )

    def merge(self, states: Sequence[Mapping[str, Any]]) -> tuple[int, int, Elastic | None]:
        """Refuse the states of several ranks (see :meth:`restore_elastic`)."""
        raise UnsupportedOperationError(
            "this loader resumes only from its own rank's state, with the ranks it was saved with"
        )

    def runs(
        self, worker: int, num_workers: int, first: int, end: int | None, resume: Resume | None
    ) -> list[Run]:
        """The batches ``worker`` of ``num_workers`` reads in the epoch ``first``, as one run."""
        skip = 0 if resume is None else resume.positions[0][1]
        return [Run(0, worker, num_workers, first, skip, 1)]

    def items(self, run: Run) -> Iterator[Any]:
        """The collated batches of ``run`` (:class:`Passed` for one with no intact record)."""
        indexes, size = self.batches.indexes(run.epoch), self.batches.batch_size
        for b in range(run.skip + run.shard, len(self.batches), run.num_shards):
            yield self.fetch(indexes[b * size : (b + 1) * size].tolist())

    def length(self, epoch: int, num_workers: int | None = None) -> int:
        """The number of batches in an epoch."""
        return len(self.batches)


# Cells of an EpochClock: the epoch the next iteration starts in, the slot of the newest iteration, then
# for each of the last _SLOTS iterations: its key (two cells), its first epoch, and how many workers joined.
_NEXT, _NEWEST, _HEADER, _SLOTS, _SLOT_CELLS = 0, 1, 2, 4, 4
_NO_KEY = -1


def _shared_clock(cells: Any) -> EpochClock:
    clock = EpochClock.__new__(EpochClock)
    clock._cells = cells
    return clock


class EpochClock:
    """Which epoch each DataLoader iteration reads, agreed on by every worker of that iteration.

    A plain ``DataLoader`` starts its workers (or reuses persistent ones) without telling its dataset which
    iteration they serve. The clock's cells live in shared memory made in the main process, so every worker
    process (forked or spawned, persistent or not) reads and advances the same clock. A worker recognises
    the iteration it belongs to by a key that all the workers of one iteration share and the next iteration
    does not: torch's base seed of the iteration (``get_worker_info().seed - id``) and how many iterations
    this worker process has started (1 for non-persistent workers, counting up for persistent ones, whose
    seed never changes). The first worker of an iteration takes the next epoch; its siblings find the
    iteration by its key.
    """

    _cells: Any

    def __init__(self, epoch: int) -> None:
        # A lock made in the spawn context works in forked, spawned and forkserver children alike.
        self._cells = multiprocessing.get_context("spawn").Array(
            "q", _HEADER + _SLOTS * _SLOT_CELLS
        )
        self.reset(epoch)

    def __reduce__(self) -> tuple[Any, ...]:
        if multiprocessing.context.get_spawning_popen() is not None:
            return (_shared_clock, (self._cells,))  # a worker is being started: share the cells
        return (EpochClock, (self.next_epoch,))  # any other copy gets a clock of its own

    @property
    def next_epoch(self) -> int:
        """The epoch the next iteration starts in."""
        return int(self._cells[_NEXT])

    def reset(self, epoch: int) -> None:
        """Start the next iteration at ``epoch``, forgetting the iterations seen so far."""
        with self._cells.get_lock():
            cells = self._cells.get_obj()
            cells[:] = [_NO_KEY] * len(cells)
            cells[_NEXT], cells[_NEWEST] = epoch, 0

    def join(
        self, key: tuple[int, int] | None, workers: int, span: int | None, first: int | None
    ) -> int:
        """Return the first epoch of the iteration identified by ``key`` (a new one if unseen or full).

        ``span`` is how many epochs an iteration reads (``None``: forever); ``first`` is the first epoch of
        a restored iteration, which then sets the clock instead of reading it.
        """
        with self._cells.get_lock():
            cells = self._cells.get_obj()
            slot = None if key is None else self._find(cells, key, workers)
            if slot is not None:
                cells[slot + 3] += 1
                return int(cells[slot + 2])
            epoch = int(cells[_NEXT]) if first is None else first
            newest = (int(cells[_NEWEST]) + 1) % _SLOTS
            base = _HEADER + newest * _SLOT_CELLS
            cells[base : base + _SLOT_CELLS] = [*(key or (_NO_KEY, _NO_KEY)), epoch, 1]
            cells[_NEWEST] = newest
            cells[_NEXT] = epoch + (span or 1)
            return epoch

    def reached(self, epoch: int) -> None:
        """Note that a worker started ``epoch``: the next iteration starts after it."""
        with self._cells.get_lock():
            cells = self._cells.get_obj()
            cells[_NEXT] = max(int(cells[_NEXT]), epoch + 1)

    @staticmethod
    def _find(cells: Any, key: tuple[int, int], workers: int) -> int | None:
        """The slot of the newest iteration with ``key`` that still waits for workers, if any."""
        newest = int(cells[_NEWEST])
        for age in range(_SLOTS):
            base = _HEADER + (newest - age) % _SLOTS * _SLOT_CELLS
            if (cells[base], cells[base + 1]) == key and cells[base + 3] < workers:
                return base
        return None


class IndexedFiles:
    """The records of random-access files laid end to end, read by global index a batch at a time.

    Readers are opened on first use in the process that reads (one inherited through ``fork`` is never
    used), at most 64 at a time, and never pickled: the object travels to worker processes without them.
    A TFDS split's indexes count in TFDS's order, as ``recordkit.open(directory, split=...)[i]`` does.

    Parameters
    ----------
    sources, format, split, check_crc, index, lenient
        As for :func:`recordkit.open`.

    Raises
    ------
    UnsupportedOperationError
        A file can only be read sequentially (a compressed TFRecord).
    ManifestError
        A dataset's shard is missing or changed since its manifest was written, or the split is missing
        or needed.
    """

    def __init__(
        self,
        sources: Sources,
        *,
        format: str | None = None,
        split: str | None = None,
        check_crc: bool = True,
        index: str | os.PathLike[str] | bool | None = None,
        lenient: bool = False,
        on_error: OnError = "raise",
        max_skipped: int | None = None,
    ) -> None:
        self._catalog = catalog_of(
            sources, format, split, check_crc=check_crc, index=index, lenient=lenient
        )
        self._catalog.skipping(on_error, max_skipped)
        self._catalog.describe()
        for name, ra in zip(self._catalog.files, self._catalog.random_access, strict=True):
            if not ra:
                raise UnsupportedOperationError(
                    f"{name!r} can only be read sequentially (compressed?): decompress it or use Dataset"
                )
        self._offsets = self._catalog.offsets()
        self._pool: ReaderPool | None = None

    @property
    def files(self) -> list[str]:
        """The files, in index order."""
        return list(self._catalog.files)

    def __len__(self) -> int:
        return int(self._offsets[-1])

    def read(self, indices: Sequence[int]) -> list[bytes]:
        """The records at ``indices`` (negative indexes count from the end), in request order.

        Raises
        ------
        IndexError
            An index is out of range.
        """
        n = len(self)
        asked = np.asarray(indices, dtype=np.int64).reshape(-1)
        idx = np.where(asked < 0, asked + n, asked)
        bad = (idx < 0) | (idx >= n)
        if bad.any():
            raise IndexError(f"index {int(asked[bad][0])} out of range for {n}")
        if self._pool is None:
            self._pool = ReaderPool(self._catalog)
        if self._catalog.order is not None:  # a TFDS split: indexes count in TFDS's order
            idx = positions_in_files(self._catalog.order, self._offsets, idx)
        files = np.searchsorted(self._offsets, idx, side="right") - 1
        return self._pool.read(files, idx - self._offsets[files])

    @property
    def damage(self) -> DamageLog | None:
        """What ``on_error="skip"`` skipped in this process (``None`` unless it skips)."""
        return self._catalog.damage if self._catalog.on_error == "skip" else None

    def intact(self, indices: Sequence[int], single: bool = False) -> tuple[list[int], list[bytes]]:
        """The indexes among ``indices`` whose records are intact, and those records (:meth:`read`).

        Only with ``on_error="skip"`` can records be missing (they are skipped and warned about, see
        :class:`~recordkit.data.Dataset`). ``single``: one index was asked for, which has nothing to go
        on to: its error is raised.
        """
        records = self.read(indices)
        if self._catalog.on_error != "skip":
            return list(indices), records
        kept = [(i, r) for i, r in zip(indices, records, strict=True) if intact(r)]
        if single and not kept:
            self.close()  # warn now about the file
            error = self._catalog.damage.last_error
            assert error is not None
            raise error
        return [i for i, _ in kept], [r for _, r in kept]

    def close(self) -> None:
        """Close the readers this process opened (they reopen on the next read).

        Also called when the object is garbage-collected.
        """
        if self._pool is not None:
            self._pool.close()
            self._pool = None

    def __del__(self) -> None:
        # The readers are this object's own; one dropped without close() must not leak them.
        pool = getattr(self, "_pool", None)
        if pool is not None:
            pool.close()

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_pool"] = None  # readers never travel to another process
        return state


def __getattr__(name: str) -> Any:
    """A name that moved away (``Passes``, folded into :class:`~recordkit.data.Loader`), with a warning."""
    return moved_attribute(__name__, name)
