"""The :class:`Dataset` pipeline: sources, sharding, shuffling, mapping, batching, repeating, prefetching."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from recordkit.data._prefetch import prefetch
from recordkit.data._readers import Catalog, ReaderPool, ShardStream
from recordkit.data._sharding import (
    EqualShards,
    Unit,
    plan_global,
    plan_shard,
    resolve_rank,
    shard_of,
    worker_info,
)
from recordkit.data._shuffle import BufferShuffler, derive_seed, permutation
from recordkit.data._sources import Sources, expand_sources
from recordkit.data._state import STATE_VERSION, check_state
from recordkit.errors import UnsupportedOperationError

__all__ = ["Dataset"]


@dataclass(frozen=True)
class _Shuffle:
    buffer_size: int | None
    files: bool


@dataclass(frozen=True)
class _Map:
    fn: Callable[[Any], Any]


@dataclass(frozen=True)
class _Batch:
    size: int
    drop_last: bool


def _check_int(value: object, what: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{what} must be an int of at least {minimum}, not {value!r}")
    return value


class EpochEnd:
    """Marks the end of an epoch in the internal item stream (never reaches users)."""


EPOCH_END = EpochEnd()


def _mapped(items: Iterator[Any], fn: Callable[[Any], Any]) -> Iterator[Any]:
    try:
        for item in items:
            yield fn(item)
    finally:
        items.close()  # type: ignore[attr-defined]


def _batched(items: Iterator[Any], size: int, drop_last: bool) -> Iterator[list[Any]]:
    batch: list[Any] = []
    try:
        for item in items:
            batch.append(item)
            if len(batch) == size:
                yield batch
                batch = []
    finally:
        items.close()  # type: ignore[attr-defined]
    if batch and not drop_last:
        yield batch


def _buffer_shuffled(stream: ShardStream, size: int, seed: int, skip: int) -> Iterator[bytes]:
    """The stream's records through a shuffle buffer, without the first ``skip`` outputs."""
    shuffler = BufferShuffler(size, seed)
    held: dict[int, bytes] = {}
    position = 0
    if skip and stream.random_access and stream.length is not None:
        # Replay the buffer's choices on positions alone, then read only what it still holds.
        position = shuffler.replay(stream.length, skip)
        held.update(zip(shuffler.pending, stream.fetch(shuffler.pending), strict=True))
        skip = 0
    source = stream.records(position)
    try:
        for record in source:
            held[position] = record
            out = shuffler.push(position)
            position += 1
            if out is not None:
                record = held.pop(out)
                if skip:
                    skip -= 1
                else:
                    yield record
    finally:
        source.close()  # type: ignore[attr-defined]
    for out in shuffler.drain():
        record = held.pop(out)
        if skip:
            skip -= 1
        else:
            yield record


def _catalog(sources: Sources, format: str | None, split: str | None) -> Catalog:
    from recordkit.io import find_dataset

    dataset = find_dataset(sources, split=split)
    if dataset is not None:
        return Catalog.of_dataset(*dataset)
    if split is not None:
        raise ValueError(
            f"split={split!r} needs a dataset directory with a manifest or a tensorflow-datasets "
            "dataset_info.json"
        )
    return Catalog(expand_sources(sources, format=format), format)


class Dataset:
    """Records from many files, split between ranks and workers, shuffled, mapped, batched and repeated.

    The stages are applied in a fixed order whatever order the methods are called in: **shard** (by rank
    and DataLoader worker) → **shuffle** → **map** and **batch** (in the order called) → **repeat** →
    **prefetch**. Each stage method returns a new dataset and leaves this one unchanged. Iterating gives
    one epoch (or as many as :meth:`repeat` asks for); readers are opened lazily, in the process that
    iterates, and closed when the iteration ends or is abandoned.

    Parameters
    ----------
    sources
        A path, a glob pattern, an fsspec URL (``s3://...``, ``memory://...``; needs ``fsspec``), or a list
        of them. The files may be of different formats. A dataset directory with a manifest (written by
        :class:`recordkit.ShardWriter`) or a tensorflow-datasets directory is read as its manifest lists
        it: record counts come from the manifest, so planning a globally shuffled epoch opens no file.
    format
        The format of every file; by default each file's suffix, else its content, decides.
    seed
        Seeds every random choice together with the epoch: the same seed and epoch give the same order on
        every machine, and each epoch a different one.
    rank, world_size
        This process's place among the distributed ranks. By default they come from
        ``torch.distributed`` (when initialised), else the ``RANK`` and ``WORLD_SIZE`` environment
        variables, else a single process.
    equal_shards
        ``None`` (default): over an epoch each record is read exactly once, and shards may differ in size
        (by at most one record when every file is random-access). ``"pad"``: shards are brought up to the
        size of the largest by repeating some of their own records. ``"drop"``: shards are cut to the size
        of the smallest. Use one of them with DistributedDataParallel, which needs the same number of
        steps on every rank. Both count the records of sequential (compressed) files first.
    split
        A dataset directory's split (``"train"``); required when it has several.

    Examples
    --------
    >>> ds = Dataset("train-*.tfrecord", seed=1).shuffle(1024).map(decode).batch(32)  # doctest: +SKIP
    >>> for batch in ds:  # doctest: +SKIP
    ...     ...
    """

    def __init__(
        self,
        sources: Sources,
        *,
        format: str | None = None,
        seed: int = 0,
        rank: int | None = None,
        world_size: int | None = None,
        equal_shards: EqualShards = None,
        split: str | None = None,
    ) -> None:
        if equal_shards not in (None, "pad", "drop"):
            raise ValueError(f"equal_shards must be None, 'pad' or 'drop', not {equal_shards!r}")
        if rank is not None or world_size is not None:
            resolve_rank(rank, world_size)  # validate now
        self._catalog = _catalog(sources, format, split)
        self._seed = int(seed)
        self._rank = rank
        self._world_size = world_size
        self._equal: EqualShards = equal_shards
        self._shuffle: _Shuffle | None = None
        self._ops: tuple[_Map | _Batch, ...] = ()
        self._repeat: int | None = 1
        self._prefetch = 0
        self._epoch = 0
        self._first_epoch = 0
        self._consumed = 0
        self._restored_skip: int | None = None
        self._expected_shard: tuple[int, int] | None = None
        self._last_shard: tuple[int, int] | None = None

    # -- description ---------------------------------------------------------------------------------

    @property
    def files(self) -> list[str]:
        """The files read, in their given order."""
        return list(self._catalog.files)

    @property
    def seed(self) -> int:
        """The seed of every random choice."""
        return self._seed

    @property
    def epoch(self) -> int:
        """The epoch the next iteration starts in (advanced after every completed epoch)."""
        return self._epoch

    @property
    def batch_size(self) -> int | None:
        """The batch size, or ``None`` when the dataset yields single records."""
        for op in self._ops:
            if isinstance(op, _Batch):
                return op.size
        return None

    def __repr__(self) -> str:
        stages = []
        if self._shuffle is not None:
            stages.append(f"shuffle({self._shuffle.buffer_size}, files={self._shuffle.files})")
        for op in self._ops:
            if isinstance(op, _Map):
                stages.append(f"map({getattr(op.fn, '__name__', op.fn)!s})")
            else:
                stages.append(f"batch({op.size}, drop_last={op.drop_last})")
        if self._repeat != 1:
            stages.append(f"repeat({self._repeat})")
        if self._prefetch:
            stages.append(f"prefetch({self._prefetch})")
        head = f"Dataset({len(self._catalog)} files, seed={self._seed})"
        return ".".join([head, *stages])

    # -- stages --------------------------------------------------------------------------------------

    def _with(self, **changes: Any) -> Dataset:
        new = copy.copy(self)
        for name, value in changes.items():
            setattr(new, name, value)
        new._consumed = 0
        new._restored_skip = None
        return new

    def shuffle(self, buffer_size: int | None = None, *, files: bool = True) -> Dataset:
        """Shuffle the records, differently each epoch.

        Parameters
        ----------
        buffer_size
            ``None`` (default): a true global permutation of every record, read in batches by index. It
            needs random-access files (not compressed TFRecord). An integer: a shuffle buffer of that many
            records, which works on any file; ``0`` or ``1`` shuffles only the file order.
        files
            Also shuffle the order of the files each epoch (OneFlow's ``shuffle_after_epoch``). Ignored by
            the global permutation, which mixes every file anyway.

        Raises
        ------
        ValueError
            The dataset is already shuffled or batched (shuffle before batching).
        """
        if self._shuffle is not None:
            raise ValueError("the dataset is already shuffled")
        if any(isinstance(op, _Batch) for op in self._ops):
            raise ValueError("shuffle before batch: shuffling batches is not supported")
        if buffer_size is not None:
            _check_int(buffer_size, "buffer_size", 0)
        return self._with(_shuffle=_Shuffle(buffer_size, bool(files)))

    def map(self, fn: Callable[[Any], Any]) -> Dataset:
        """Apply ``fn`` to every item: to every record, or to every batch if called after :meth:`batch`.

        ``fn`` runs in the process that iterates (each DataLoader worker) and must be picklable for the
        ``spawn`` start method (a module-level function, not a lambda).
        """
        if not callable(fn):
            raise TypeError(f"map needs a callable, not {type(fn).__name__}")
        return self._with(_ops=(*self._ops, _Map(fn)))

    def batch(self, size: int, *, drop_last: bool = False) -> Dataset:
        """Group items into lists of ``size``; the last one is shorter unless ``drop_last``.

        Batches never span two epochs.
        """
        _check_int(size, "the batch size", 1)
        if self.batch_size is not None:
            raise ValueError("the dataset is already batched")
        return self._with(_ops=(*self._ops, _Batch(size, bool(drop_last))))

    def repeat(self, epochs: int | None = None) -> Dataset:
        """Iterate ``epochs`` epochs in one go (``None``: forever), each in its own shuffled order."""
        if epochs is not None:
            _check_int(epochs, "epochs", 1)
        return self._with(_repeat=epochs)

    def prefetch(self, n: int = 2) -> Dataset:
        """Produce up to ``n`` items ahead in a background thread (``0`` turns it off).

        The thread stops and is joined when the iteration ends or is abandoned; an exception raised while
        reading is re-raised to the consumer.
        """
        _check_int(n, "the prefetch depth", 0)
        return self._with(_prefetch=n)

    # -- epochs and state ----------------------------------------------------------------------------

    def set_epoch(self, epoch: int) -> None:
        """Start the next iteration at the beginning of ``epoch``."""
        if epoch < 0:
            raise ValueError(f"the epoch must be non-negative, not {epoch}")
        self._epoch = self._first_epoch = int(epoch)
        self._consumed = 0
        self._restored_skip = None

    def _fingerprint(self) -> dict[str, Any]:
        shuffle = (
            None if self._shuffle is None else [self._shuffle.buffer_size, self._shuffle.files]
        )
        return {
            "seed": self._seed,
            "files": len(self._catalog),
            "batch_size": self.batch_size,
            "shuffle": shuffle,
            "equal_shards": self._equal,
        }

    def state_dict(self) -> dict[str, Any]:
        """Return the position of the iteration: restoring it continues with exactly the items not yet seen.

        The dict holds plain ints and strings (JSON-compatible): the epoch, how many items were received
        in it, and what the pipeline looks like (seed, number of files, batch size...) to check on restore.
        """
        state: dict[str, Any] = {
            "kind": "dataset",
            "version": STATE_VERSION,
            "epoch": self._epoch,
            "first_epoch": self._first_epoch,
            "consumed": self._consumed,
            "shard": None if self._last_shard is None else list(self._last_shard),
            **self._fingerprint(),
        }
        return state

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Continue, at the next iteration, from a position saved by :meth:`state_dict`.

        Raises
        ------
        ValueError
            The state comes from a different pipeline (other seed, files, batch size, shuffle...); the
            shard (rank and worker) is checked when the iteration starts.
        """
        check_state(state, "dataset", self._fingerprint())
        self._epoch = int(state["epoch"])
        self._first_epoch = int(state["first_epoch"])
        self._consumed = int(state["consumed"])
        self._restored_skip = self._consumed
        shard = state.get("shard")
        self._expected_shard = None if shard is None else (int(shard[0]), int(shard[1]))

    # -- iteration -----------------------------------------------------------------------------------

    def __iter__(self) -> Iterator[Any]:
        rank, world_size = resolve_rank(self._rank, self._world_size)
        shard, num_shards = shard_of(rank, world_size, *worker_info())
        if self._restored_skip is not None and self._expected_shard not in (
            None,
            (shard, num_shards),
        ):
            raise ValueError(
                f"the state was saved by shard {self._expected_shard[0]} of {self._expected_shard[1]} "
                f"(rank x worker) but this is shard {shard} of {num_shards}"
            )
        self._last_shard = (shard, num_shards)
        if self._restored_skip is None:
            self._first_epoch = self._epoch
            skip = 0
        else:
            skip = self._restored_skip
        self._restored_skip = None
        self._consumed = skip
        items = self._items(shard, num_shards, self._epoch, self._first_epoch, skip, self._repeat)
        try:
            for item in items:
                if item is EPOCH_END:
                    self._epoch += 1
                    self._consumed = 0
                    continue
                self._consumed += 1
                yield item
        finally:
            items.close()  # type: ignore[attr-defined]

    def _items(
        self,
        shard: int,
        num_shards: int,
        epoch: int,
        first_epoch: int,
        skip: int,
        epochs: int | None,
    ) -> Iterator[Any]:
        """Items of epochs ``epoch, epoch+1, ...`` up to ``first_epoch + epochs``, each followed by
        :data:`EPOCH_END`, the first ``skip`` items left out; prefetched if asked."""
        end = None if epochs is None else first_epoch + epochs
        items = self._epochs(shard, num_shards, epoch, skip, end)
        return prefetch(items, self._prefetch) if self._prefetch else items

    def _epochs(
        self, shard: int, num_shards: int, epoch: int, skip: int, end: int | None
    ) -> Iterator[Any]:
        while end is None or epoch < end:
            produced = 0
            for item in self._epoch_items(epoch, shard, num_shards, skip):
                produced += 1
                yield item
            yield EPOCH_END
            if end is None and produced == 0 and skip == 0:
                return  # an empty shard repeated forever would spin without end
            epoch += 1
            skip = 0

    def _plan(self, pool: ReaderPool, epoch: int, shard: int, num_shards: int) -> list[Unit]:
        catalog = self._catalog
        if self._equal is not None:
            catalog.count_all(pool)
        else:
            catalog.describe(pool)
        spec = self._shuffle
        if spec is not None and spec.buffer_size is None:
            sequential = [
                f for f, ra in zip(catalog.files, catalog.random_access, strict=True) if not ra
            ]
            if sequential:
                raise UnsupportedOperationError(
                    f"a global shuffle needs random-access files, but {sequential[0]!r} can only be read "
                    "sequentially (compressed?): decompress it, or use shuffle(buffer_size)"
                )
            counts = [n or 0 for n in catalog.counts]
            return plan_global(counts, shard, num_shards, self._seed, epoch, self._equal)
        order: list[int] = list(range(len(catalog)))
        if spec is not None and spec.files:
            order = permutation(len(catalog), self._seed, epoch, "files").tolist()
        ra = [bool(x) for x in catalog.random_access]
        return plan_shard(order, catalog.counts, ra, shard, num_shards, self._equal)

    def _epoch_items(self, epoch: int, shard: int, num_shards: int, skip: int) -> Iterator[Any]:
        """One epoch of one shard, without its first ``skip`` items."""
        pool = ReaderPool(self._catalog)
        try:
            stream = ShardStream(self._plan(pool, epoch, shard, num_shards), pool)
            per_item = self.batch_size or 1
            items: Iterator[Any] = self._records(stream, epoch, shard, skip * per_item)
            for op in self._ops:
                if isinstance(op, _Map):
                    items = _mapped(items, op.fn)
                else:
                    items = _batched(items, op.size, op.drop_last)
            try:
                yield from items
            finally:
                items.close()  # type: ignore[attr-defined]
        finally:
            pool.close()

    def _records(self, stream: ShardStream, epoch: int, shard: int, skip: int) -> Iterator[bytes]:
        spec = self._shuffle
        if spec is None or spec.buffer_size is None or spec.buffer_size <= 1:
            return stream.records(skip)
        seed = derive_seed(self._seed, epoch, shard, "buffer")
        return _buffer_shuffled(stream, spec.buffer_size, seed, skip)
