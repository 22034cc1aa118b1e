"""PyTorch glue: iterable and map-style datasets and a resumable DataLoader over record files.

* :func:`torch_dataset` wraps a :class:`~recordkit.data.Dataset` as an ``IterableDataset`` that splits the
  records between DataLoader workers (and ranks): each record once per epoch.
* :class:`MapDataset` is a map-style dataset over random-access files that is indexed by a *list* of
  indexes, reads them with one ``RecordReader.read`` per file and hands them to ``process(indices, data)``,
  like ffrecord's ``Dataset``.
* :func:`dataloader` builds the right ``torch.utils.data.DataLoader`` for either and returns a
  :class:`RecordLoader`, which advances the epoch by itself and can save and restore its position.

Readers are opened lazily in the process that reads, and a reader inherited through ``fork`` is never
used: both the ``fork`` and the ``spawn`` start methods work.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

try:
    import torch.utils.data as torch_data
except ImportError as exc:  # pragma: no cover - exercised only without torch
    raise ImportError(
        "recordkit.data.torch needs PyTorch: pip install 'recordkit[torch]' (or install torch yourself)"
    ) from exc

from recordkit.data._dataset import EPOCH_END, Dataset
from recordkit.data._readers import Catalog, ReaderPool
from recordkit.data._sharding import EqualShards, resolve_rank, shard_of, worker_info
from recordkit.data._shuffle import permutation
from recordkit.data._sources import Sources, expand_sources
from recordkit.data._state import STATE_VERSION, check_state
from recordkit.errors import UnsupportedOperationError

if TYPE_CHECKING:
    from typing_extensions import Self

__all__ = ["MapDataset", "RecordIterable", "RecordLoader", "dataloader", "torch_dataset"]


class _Tagged(NamedTuple):
    """An item with the worker that produced it, so the loader can count what each worker delivered."""

    worker: int
    item: Any


class RecordIterable(torch_data.IterableDataset[Any]):
    """A :class:`~recordkit.data.Dataset` as a PyTorch ``IterableDataset``; made by :func:`torch_dataset`.

    Each DataLoader worker reads its own share: shard ``rank * num_workers + worker`` of
    ``world_size * num_workers``. The rank is resolved when this object is made (in the main process, where
    ``torch.distributed`` is initialised). Call :meth:`set_epoch` before each epoch when you drive a plain
    ``DataLoader`` yourself; :func:`dataloader` does it for you.

    Attributes
    ----------
    dataset
        The wrapped pipeline.
    rank, world_size
        This process among the distributed ranks.
    epoch
        The epoch the next iteration reads.
    """

    def __init__(self, dataset: Dataset) -> None:
        if not isinstance(dataset, Dataset):
            raise TypeError(
                f"torch_dataset needs a recordkit.data.Dataset, not {type(dataset).__name__}"
            )
        self.dataset = dataset
        self.rank, self.world_size = resolve_rank(dataset._rank, dataset._world_size)
        self.epoch = dataset.epoch
        # Learn counts here, once, so that workers inherit them instead of each opening every file.
        if dataset._equal is not None:
            dataset._catalog.count_all()
        else:
            dataset._catalog.describe()
        self._skips: list[int] = []
        self._tagged = False
        self._epochs: int | None = dataset._repeat

    def set_epoch(self, epoch: int) -> None:
        """Read ``epoch`` at the next iteration (each epoch has its own shuffled order)."""
        self.epoch = int(epoch)

    def __iter__(self) -> Iterator[Any]:
        worker, num_workers = worker_info()
        shard, num_shards = shard_of(self.rank, self.world_size, worker, num_workers)
        skip = self._skips[worker] if worker < len(self._skips) else 0
        items = self.dataset._items(shard, num_shards, self.epoch, self.epoch, skip, self._epochs)
        try:
            for item in items:
                if item is EPOCH_END:
                    continue
                yield _Tagged(worker, item) if self._tagged else item
        finally:
            items.close()  # type: ignore[attr-defined]


def torch_dataset(dataset: Dataset) -> RecordIterable:
    """Wrap ``dataset`` as a PyTorch ``IterableDataset`` that splits the records between workers.

    Parameters
    ----------
    dataset
        The pipeline. Its ``map`` functions must be picklable when workers use ``spawn``.

    Returns
    -------
    RecordIterable
        Give it to ``torch.utils.data.DataLoader(..., batch_size=None)`` if the pipeline batches, or with a
        ``batch_size`` otherwise.
    """
    return RecordIterable(dataset)


class MapDataset(torch_data.Dataset[Any]):
    """A map-style dataset over random-access record files, read a batch of indexes at a time.

    ``dataset[[3, 6, 0]]`` reads the three records (one coalesced ``read`` per file) and returns
    ``self.process([3, 6, 0], [b"...", b"...", b"..."])``. Override :meth:`process` in a subclass or pass
    ``process=``; by default the raw ``bytes`` are returned. An ``int`` index returns a single processed
    record. Use it with :func:`dataloader`, which samples batches of indexes.

    Parameters
    ----------
    sources
        Paths, globs or URLs of random-access files (FFRecord, uncompressed TFRecord or OFRecord); the
        files are laid end to end.
    format
        The format of every file, if the suffixes do not tell.
    process
        ``process(indices, data) -> list`` used when the subclass does not override :meth:`process`.

    Raises
    ------
    UnsupportedOperationError
        A file can only be read sequentially (a compressed TFRecord).
    """

    def __init__(
        self,
        sources: Sources,
        *,
        format: str | None = None,
        process: Callable[[list[int], list[bytes]], Any] | None = None,
    ) -> None:
        self._catalog = Catalog(expand_sources(sources), format)
        self._catalog.describe()
        for name, ra in zip(self._catalog.files, self._catalog.random_access, strict=True):
            if not ra:
                raise UnsupportedOperationError(
                    f"{name!r} can only be read sequentially (compressed?): decompress it or use Dataset"
                )
        self._offsets = self._catalog.offsets()
        self._process = process
        self._pool: ReaderPool | None = None

    @property
    def files(self) -> list[str]:
        """The files, in index order."""
        return list(self._catalog.files)

    def __len__(self) -> int:
        return int(self._offsets[-1])

    def _index(self, indices: Sequence[int]) -> np.ndarray:
        n = len(self)
        idx = np.asarray(indices, dtype=np.int64).reshape(-1)
        idx = np.where(idx < 0, idx + n, idx)
        bad = (idx < 0) | (idx >= n)
        if bad.any():
            raise IndexError(
                f"index {int(np.asarray(indices).reshape(-1)[bad][0])} out of range for {n}"
            )
        return idx

    def read(self, indices: Sequence[int]) -> list[bytes]:
        """The raw records at ``indices`` (negative indexes count from the end), in request order."""
        idx = self._index(indices)
        if self._pool is None:
            self._pool = ReaderPool(self._catalog)
        files = np.searchsorted(self._offsets, idx, side="right") - 1
        return self._pool.read(files, idx - self._offsets[files])

    def __getitem__(self, index: int | Sequence[int]) -> Any:
        if isinstance(index, (int, np.integer)):
            return self.process([int(index)], self.read([int(index)]))[0]
        indices = [int(i) for i in index]
        return self.process(indices, self.read(indices))

    def process(self, indices: list[int], data: list[bytes]) -> Any:
        """Turn the raw records of a batch into samples (by default: the records themselves)."""
        if self._process is not None:
            return self._process(indices, data)
        return data

    def close(self) -> None:
        """Close the readers this process opened (they reopen on the next read).

        Also called when the dataset is garbage-collected or used as a context manager.
        """
        if self._pool is not None:
            self._pool.close()
            self._pool = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __del__(self) -> None:
        # The readers are this object's own; a dataset dropped without close() must not leak them.
        pool = getattr(self, "_pool", None)
        if pool is not None:
            pool.close()

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_pool"] = None  # readers never travel to another process
        return state


class _IndexBatches(torch_data.Sampler[list[int]]):
    """Batches of indexes of a map-style dataset for one rank, seeded per epoch, resumable."""

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
        self.drop_last, self.rank, self.world_size, self.equal = (
            drop_last,
            rank,
            world_size,
            equal_shards,
        )
        self.epoch = 0
        self.skip = 0

    def _mine(self) -> np.ndarray:
        order = (
            permutation(self.n, self.seed, self.epoch, "sampler")
            if self.shuffle
            else np.arange(self.n)
        )
        if self.equal == "pad" and self.n:
            order = np.resize(order, -(-self.n // self.world_size) * self.world_size)
        elif self.equal == "drop":
            order = order[: self.n // self.world_size * self.world_size]
        total = len(order)
        return order[
            self.rank * total // self.world_size : (self.rank + 1) * total // self.world_size
        ]

    def __len__(self) -> int:
        mine = len(self._mine())
        return mine // self.batch_size if self.drop_last else -(-mine // self.batch_size)

    def __iter__(self) -> Iterator[list[int]]:
        mine = self._mine()
        for b in range(self.skip, len(self)):
            yield mine[b * self.batch_size : (b + 1) * self.batch_size].tolist()


class RecordLoader:
    """A PyTorch ``DataLoader`` that knows its epoch and can save and restore its position.

    Made by :func:`dataloader`. Iterating reads one epoch (or as many as the dataset's ``repeat`` asks for)
    and then advances the epoch, so each ``for`` loop sees a new order. :meth:`state_dict` records how far
    the consumer got; :meth:`load_state_dict` in a fresh process makes the next iteration deliver exactly
    the items not yet delivered in that epoch (with worker processes, in a possibly different interleaving
    of the workers' streams).

    Attributes
    ----------
    loader
        The underlying ``torch.utils.data.DataLoader``.
    dataset
        The recordkit dataset (a :class:`~recordkit.data.Dataset` or a :class:`MapDataset`).
    """

    def __init__(
        self,
        loader: torch_data.DataLoader[Any],
        dataset: Dataset | MapDataset,
        *,
        epochs: int | None,
        epoch: int,
        fingerprint: dict[str, Any],
    ) -> None:
        self.loader = loader
        self.dataset = dataset
        self._epochs = epochs
        self._epoch = self._first_epoch = epoch
        self._fingerprint = fingerprint
        self._counts = [0] * self._slots()
        self._restored = False

    def _slots(self) -> int:
        return max(1, self.loader.num_workers) if isinstance(self.dataset, Dataset) else 1

    @property
    def epoch(self) -> int:
        """The epoch the next iteration starts in."""
        return self._epoch

    def set_epoch(self, epoch: int) -> None:
        """Start the next iteration at the beginning of ``epoch``."""
        self._epoch = self._first_epoch = int(epoch)
        self._counts = [0] * self._slots()
        self._restored = False

    def __len__(self) -> int:
        """The number of batches per epoch (map-style datasets only)."""
        if isinstance(self.loader.batch_sampler, _IndexBatches) or isinstance(
            self.loader.sampler, _IndexBatches
        ):
            return len(self.loader.sampler)  # type: ignore[arg-type]
        raise TypeError("the length of an iterable record pipeline is not known in advance")

    def _prepare(self) -> None:
        sampler = self.loader.sampler
        if isinstance(sampler, _IndexBatches):
            sampler.epoch = self._epoch
            sampler.skip = self._counts[0]
        else:
            iterable = self.loader.dataset
            assert isinstance(iterable, RecordIterable)
            iterable.epoch = self._epoch
            iterable._skips = list(self._counts)

    def __iter__(self) -> Iterator[Any]:
        if not self._restored:
            self._first_epoch = self._epoch
            self._counts = [0] * self._slots()
        self._restored = False
        tagged = isinstance(self.dataset, Dataset)
        while self._epochs is None or self._epoch < self._first_epoch + self._epochs:
            self._prepare()
            produced = 0
            for item in self.loader:
                produced += 1
                if tagged:
                    self._counts[item.worker] += 1
                    yield item.item
                else:
                    self._counts[0] += 1
                    yield item
            self._epoch += 1
            self._counts = [0] * self._slots()
            if self._epochs is None and produced == 0:
                return

    def state_dict(self) -> dict[str, Any]:
        """The position: the epoch and how many items each worker (or the sampler) has delivered."""
        return {
            "kind": "loader",
            "version": STATE_VERSION,
            "epoch": self._epoch,
            "first_epoch": self._first_epoch,
            "delivered": list(self._counts),
            **self._fingerprint,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Continue, at the next iteration, from a position saved by :meth:`state_dict`.

        Raises
        ------
        ValueError
            The state comes from a loader with other data, seed, batch size, ranks or number of workers.
        """
        check_state(state, "loader", self._fingerprint)
        delivered = [int(c) for c in state["delivered"]]
        if len(delivered) != self._slots():
            raise ValueError(
                f"the state has {len(delivered)} worker counts, this loader {self._slots()}"
            )
        self._epoch = int(state["epoch"])
        self._first_epoch = int(state["first_epoch"])
        self._counts = delivered
        self._restored = True


def _convert(data: Any) -> Any:
    """Turn numpy arrays in an item into tensors, in the worker (as ``DataLoader`` does unbatched)."""
    return torch_data.default_convert(data)  # type: ignore[no-untyped-call]


def dataloader(
    dataset: Dataset | MapDataset,
    *,
    batch_size: int | None = None,
    drop_last: bool = False,
    collate_fn: Callable[[Any], Any] | None = None,
    shuffle: bool = False,
    seed: int = 0,
    rank: int | None = None,
    world_size: int | None = None,
    equal_shards: EqualShards = None,
    num_workers: int = 0,
    multiprocessing_context: Any = None,
    pin_memory: bool = False,
    prefetch_factor: int | None = None,
    timeout: float = 0,
    worker_init_fn: Callable[[int], None] | None = None,
) -> RecordLoader:
    """Build a resumable PyTorch ``DataLoader`` over a recordkit dataset.

    Parameters
    ----------
    dataset
        A :class:`~recordkit.data.Dataset` (iterable; it shuffles and shards itself, and each worker reads
        its own share) or a :class:`MapDataset` (batches of indexes are sampled in the main process and
        each worker reads a whole batch with one ``read`` per file).
    batch_size
        Group items into batches of this size and pass each batch to ``collate_fn``. With a ``Dataset`` that
        already batches, leave it ``None``. A ``MapDataset`` needs it (default 1).
    drop_last
        Leave out a short last batch.
    collate_fn
        Turns a batch (list) into what the loop receives; by default ``torch.utils.data.default_collate``
        (numbers and arrays stacked into tensors, ``bytes`` left in a list).
    shuffle, seed, rank, world_size, equal_shards
        For a ``MapDataset`` only: shuffle with a seeded permutation each epoch, and split the indexes
        between ranks (``rank``/``world_size`` as for ``Dataset``; ``equal_shards`` ``"pad"`` or ``"drop"``
        for equal step counts). A ``Dataset`` has these settings itself.
    num_workers, multiprocessing_context, pin_memory, prefetch_factor, timeout, worker_init_fn
        Passed to ``torch.utils.data.DataLoader``. Both ``"fork"`` and ``"spawn"`` contexts work.

    Returns
    -------
    RecordLoader
        Iterate it once per epoch; it advances the epoch itself.
    """
    options: dict[str, Any] = {
        "num_workers": num_workers,
        "multiprocessing_context": multiprocessing_context if num_workers else None,
        "pin_memory": pin_memory,
        "timeout": timeout,
        "worker_init_fn": worker_init_fn,
        "batch_size": None,
    }
    if prefetch_factor is not None:
        options["prefetch_factor"] = prefetch_factor
    if isinstance(dataset, Dataset):
        if shuffle or rank is not None or world_size is not None or equal_shards is not None:
            raise ValueError(
                "shuffle, rank, world_size and equal_shards are settings of the Dataset itself "
                "(Dataset(..., rank=, world_size=, equal_shards=).shuffle(...))"
            )
        ds = dataset
        if batch_size is not None:
            ds = ds.batch(batch_size, drop_last=drop_last).map(
                collate_fn or torch_data.default_collate
            )
        elif collate_fn is not None:
            ds = ds.map(collate_fn)
        iterable = RecordIterable(ds._with(_repeat=1))
        iterable._tagged = True
        loader: torch_data.DataLoader[Any] = torch_data.DataLoader(
            iterable, collate_fn=_convert, **options
        )
        fingerprint = {
            **ds._fingerprint(),
            "rank": iterable.rank,
            "world_size": iterable.world_size,
            "num_workers": num_workers,
        }
        return RecordLoader(
            loader, dataset, epochs=ds._repeat, epoch=ds.epoch, fingerprint=fingerprint
        )
    if not isinstance(dataset, MapDataset):
        raise TypeError(f"dataloader needs a Dataset or a MapDataset, not {type(dataset).__name__}")
    if equal_shards not in (None, "pad", "drop"):
        raise ValueError(f"equal_shards must be None, 'pad' or 'drop', not {equal_shards!r}")
    r, w = resolve_rank(rank, world_size)
    batches = _IndexBatches(
        len(dataset),
        batch_size or 1,
        shuffle=shuffle,
        seed=seed,
        drop_last=drop_last,
        rank=r,
        world_size=w,
        equal_shards=equal_shards,
    )
    loader = torch_data.DataLoader(
        dataset, sampler=batches, collate_fn=collate_fn or torch_data.default_collate, **options
    )
    fingerprint = {
        "seed": seed,
        "files": len(dataset.files),
        "records": len(dataset),
        "batch_size": batch_size or 1,
        "shuffle": shuffle,
        "rank": r,
        "world_size": w,
    }
    return RecordLoader(loader, dataset, epochs=1, epoch=0, fingerprint=fingerprint)
