"""PyTorch glue: iterable and map-style datasets and a resumable DataLoader over record files.

* :func:`torch_dataset` wraps a :class:`~recordkit.data.Dataset` as an ``IterableDataset`` that splits the
  records between DataLoader workers (and ranks): each record once per epoch, a new epoch at every
  iteration of a plain ``DataLoader``, and a per-worker state for torchdata's ``StatefulDataLoader``.
* :class:`MapDataset` is a map-style dataset over random-access files that is indexed by a *list* of
  indexes, reads them with one ``RecordReader.read`` per file and hands them to ``process(indices, data)``,
  like ffrecord's ``Dataset``.
* :func:`dataloader` reads either with recordkit's one :class:`~recordkit.data.Loader` (its worker
  processes hand batches over through shared memory), which advances the epoch by itself and can save and
  restore its position, also with another number of workers; it hands out tensors.

Errors raised in a worker reach the main process with their attributes (``path``, ``index``, ``offset``...).

Readers are opened lazily in the process that reads, and a reader inherited through ``fork`` is never
used: both the ``fork`` and the ``spawn`` start methods work.
"""

from __future__ import annotations

import functools
import operator
import os
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from recordkit.support.extras import needs

with needs("recordkit.integrations.torch", "PyTorch", "torch", "torch"):
    import torch
    import torch.utils.data as torch_data

from recordkit.data import Dataset, Loader
from recordkit.data.loading import (
    STATE_VERSION,
    EpochClock,
    IndexBatches,
    IndexedFiles,
    IndexShare,
    Passed,
    Resume,
    Run,
    Share,
    check_state,
)
from recordkit.datasets.damage import OnError
from recordkit.datasets.plan import EqualShards
from recordkit.datasets.ranks import resolve_rank, worker_info
from recordkit.decode.batch import ParsedBatch
from recordkit.errors import (
    RecordKitError,
    StateError,
    UnsupportedOperationError,
    attach_attributes,
)
from recordkit.io import Sources
from recordkit.support.moved import moved_attribute

if TYPE_CHECKING:
    from typing_extensions import Self

__all__ = ["MapDataset", "RecordIterable", "dataloader", "torch_dataset"]

_SEED_MASK = 2**63 - 1
"""Iteration keys hold torch's base seed masked to a non-negative int64 (see EpochClock)."""


def _check_workers(state: Mapping[str, Any]) -> tuple[int, int]:
    """Return ``(worker, num_workers)`` of this process if ``state`` was saved with as many workers.

    Raises
    ------
    UnsupportedOperationError
        It was saved with another number: a StatefulDataLoader restores each worker from the state that
        worker saved, so the others' positions would be lost (or, for new workers, missing).
    """
    worker, num_workers = worker_info()
    saved = int(state["workers"])
    if saved != num_workers:
        raise UnsupportedOperationError(
            f"the state was saved by a DataLoader with {saved} worker(s) but this one has "
            f"{num_workers}: each worker is restored from the position it saved itself, so the "
            f"positions of the other workers cannot be carried over; resume with "
            f"num_workers={saved if saved > 1 else '0 or 1'} (recordkit.integrations.torch.dataloader can resume "
            "with another number of workers)"
        )
    return worker, num_workers


def _mark_in_worker(err: RecordKitError) -> None:
    """In a DataLoader worker, make ``err`` carry its attributes to the main process (see errors.py)."""
    if torch_data.get_worker_info() is not None:
        attach_attributes(err)


class RecordIterable(torch_data.IterableDataset[Any]):
    """A :class:`~recordkit.data.Dataset` as a PyTorch ``IterableDataset``; made by :func:`torch_dataset`.

    Each DataLoader worker reads its own share: shard ``rank * num_workers + worker`` of
    ``world_size * num_workers``. The rank is resolved when this object is made (in the main process, where
    ``torch.distributed`` is initialised).

    Every iteration (every ``for`` loop over a ``DataLoader``, with or without workers) reads the next
    epoch, so a plain ``DataLoader`` sees a new order each epoch without any call; :meth:`set_epoch` sets
    the epoch of the next iteration. A ``repeat(n)`` pipeline reads ``n`` epochs per iteration.

    It implements ``state_dict`` / ``load_state_dict`` as torchdata's ``StatefulDataLoader`` calls them in
    each worker, so that loader saves and restores the exact position.

    Attributes
    ----------
    dataset
        The wrapped pipeline.
    rank, world_size
        This process among the distributed ranks.
    """

    def __init__(self, dataset: Dataset) -> None:
        self._share = Share(dataset, "torch_dataset")
        self.dataset = dataset
        self.rank, self.world_size = self._share.rank, self._share.world_size
        self._epochs = self._share.epochs
        self._clock = EpochClock(dataset.epoch)
        self._resume: Resume | None = None
        self._local = (0, 0)  # (process id, iterations started in it)
        self._first = self._epoch = dataset.epoch  # the position in this process, for state_dict
        self._delivered = 0

    @property
    def epoch(self) -> int:
        """The epoch the next iteration starts in."""
        return self._clock.next_epoch

    def set_epoch(self, epoch: int) -> None:
        """Start the next iteration at ``epoch`` (each epoch has its own shuffled order)."""
        if epoch < 0:
            raise ValueError(f"the epoch must be non-negative, not {epoch}")
        self._clock.reset(int(epoch))

    def __len__(self) -> int:
        """The number of items this rank reads in the next iteration, as ``len()`` of the pipeline gives it.

        That is exact when the DataLoader reads in the main process (``num_workers=0``). With workers, each
        worker batches its own share, so a pipeline that batches can deliver a few more (partial) batches;
        :func:`dataloader` knows the number of workers and gives an exact figure.

        Raises
        ------
        TypeError
            The pipeline cannot tell its length in advance, or it mixes datasets until the first runs out:
            how many items that gives depends on how the mix is split between workers, which a plain
            DataLoader does not tell its dataset.
        """
        return self._share.length(self.epoch)

    def _key(self) -> tuple[int, int] | None:
        """This iteration's key in a DataLoader worker (see :class:`EpochClock`), ``None`` outside."""
        info = torch_data.get_worker_info()
        if info is None:
            return None
        pid = os.getpid()
        started = self._local[1] + 1 if self._local[0] == pid else 1
        self._local = (pid, started)
        return (int(info.seed) - int(info.id)) & _SEED_MASK, started

    def __iter__(self) -> Iterator[Any]:
        # Not a generator: the epoch is settled when the DataLoader asks for the iterator (at worker start),
        # so every worker joins its iteration even if it never delivers an item.
        worker, num_workers = worker_info()
        resume, self._resume = self._resume, None
        first = self._clock.join(
            self._key(), num_workers, self._epochs, None if resume is None else resume.first_epoch
        )
        end = None if self._epochs is None else first + self._epochs
        runs = self._share.runs(worker, num_workers, first, end, resume)
        self._first = first
        self._epoch, self._delivered = (runs[0].epoch, runs[0].skip) if runs else (end or first, 0)
        return self._stream(runs)

    def _stream(self, runs: list[Run]) -> Iterator[Any]:
        try:
            for run in runs:
                for item in self._share.items(run, functools.partial(self._started, run)):
                    self._delivered += 1
                    yield item
        except RecordKitError as err:
            _mark_in_worker(err)
            raise

    def _started(self, run: Run, epoch: int) -> None:
        """Note that ``run`` started ``epoch`` (for state_dict, and the clock of endless runs)."""
        self._epoch, self._delivered = epoch, run.skip if epoch == run.epoch else 0
        if run.epochs is None:
            self._clock.reached(epoch)

    def _fingerprint(self) -> dict[str, Any]:
        return {**self._share.fingerprint(), "repeat": self._epochs}

    def state_dict(self) -> dict[str, Any]:
        """The position of the iteration in this process (a DataLoader worker, or the main process).

        ``StatefulDataLoader`` calls it in each worker. The dict is JSON-compatible: the iteration's first
        epoch, the epoch this worker is in and how many items it delivered in it, and what the pipeline
        looks like (seed, files, batch size, ranks, workers) to check on restore.
        """
        worker, num_workers = worker_info()
        return {
            "kind": "torch_dataset",
            "version": STATE_VERSION,
            "first_epoch": self._first,
            "epoch": self._epoch,
            "delivered": self._delivered,
            "worker": worker,
            "workers": num_workers,
            **self._fingerprint(),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Continue, at the next iteration in this process, from a position saved by :meth:`state_dict`.

        Raises
        ------
        ValueError
            The state comes from another pipeline (seed, files, batch size, ranks...) or another worker.
        UnsupportedOperationError
            The state was saved by a DataLoader with another number of workers (also a ``ValueError``):
            each worker is restored from its own saved position only, so the others' would be lost.
        """
        check_state(state, "torch_dataset", self._fingerprint())
        worker, num_workers = _check_workers(state)
        if int(state["worker"]) != worker:
            raise StateError(
                f"the state was saved by worker {state['worker']}, this is worker {worker}"
            )
        position = (int(state["epoch"]), int(state["delivered"]))
        self._resume = Resume(int(state["first_epoch"]), num_workers, {worker: position})


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
        ``batch_size`` otherwise. Each iteration of the loader reads the next epoch.
    """
    return RecordIterable(dataset)


def _normalize(index: Any, total: int) -> int:
    """``index`` as a position in ``range(total)`` (negative: from the end), as :func:`recordkit.open` does."""
    i = operator.index(index)
    position = i + total if i < 0 else i
    if not 0 <= position < total:
        raise IndexError(f"record index {i} out of range for {total} records")
    return position


class MapDataset(torch_data.Dataset[Any]):
    """A map-style dataset over random-access record files, read a batch of indexes at a time.

    ``dataset[[3, 6, 0]]`` reads the three records (one coalesced ``read`` per file) and returns
    ``self.process([3, 6, 0], [b"...", b"...", b"..."])``. Override :meth:`process` in a subclass or pass
    ``process=``; by default the raw ``bytes`` are returned. ``process`` returns the batch either as a
    list of samples, one per index, or as a dict of columns, each holding one entry per index (what
    :func:`recordkit.parse_examples` returns). An ``int`` index returns a single processed record (for
    columns: a dict of that record's entries). A slice is the batch of its indexes: ``dataset[2:5]`` is
    ``dataset[[2, 3, 4]]`` (with the default ``process``, a list of records, as ``reader[2:5]`` of
    :func:`recordkit.open`). Negative indexes count from the end, as for :func:`recordkit.open`, and
    ``process`` is given the indexes they stand for (``dataset[-1]`` hands it ``[len(dataset) - 1]``); an
    index out of range raises ``IndexError``. Use it with :func:`dataloader`, which samples batches of
    indexes.

    Parameters
    ----------
    sources
        Paths, globs or URLs of random-access files (FFRecord, uncompressed TFRecord or OFRecord); the
        files are laid end to end. A dataset directory (with a manifest) is read as its manifest lists
        it, as :func:`recordkit.open` and :class:`~recordkit.data.Dataset` read it; a TFDS split's
        indexes count in TFDS's order, as ``recordkit.open(directory, split=...)[i]`` does.
    format, split, check_crc, index, lenient
        As for :func:`recordkit.open`: the format of every file, if the suffixes do not tell; a dataset
        directory's split (``"train"``), required when it has several; verify checksums; the sidecar
        index to use (a path, for a single file), ``False`` to use none, ``None`` for the file's own; let a
        file that ends inside a record header end cleanly, as TensorFlow does.
    on_error, max_skipped
        As for :class:`~recordkit.data.Dataset`: ``"skip"`` leaves damaged records out of a batch (a single
        damaged index raises its error).
    process
        ``process(indices, data)`` used when the subclass does not override :meth:`process`: it returns
        a list of samples (one per index) or a dict of equal-length columns.

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
        process: Callable[[list[int], list[bytes]], Any] | None = None,
        split: str | None = None,
        check_crc: bool = True,
        index: str | os.PathLike[str] | bool | None = None,
        lenient: bool = False,
        on_error: OnError = "raise",
        max_skipped: int | None = None,
    ) -> None:
        options: dict[str, Any] = {"check_crc": check_crc, "index": index, "lenient": lenient}
        options.update(on_error=on_error, max_skipped=max_skipped)
        self._records = IndexedFiles(sources, format=format, split=split, **options)
        self._process = process

    @property
    def files(self) -> list[str]:
        """The files, in index order."""
        return self._records.files

    def __len__(self) -> int:
        return len(self._records)

    def read(self, indices: Sequence[int]) -> list[bytes]:
        """The raw records at ``indices`` (negative indexes count from the end), in request order."""
        return self._records.read(indices)

    def __getitem__(self, index: int | slice | Sequence[int]) -> Any:
        """The processed record at ``index``, or the processed batch of a list of indexes or a slice."""
        try:
            total = len(self)
            if isinstance(index, slice):
                return self._batch(list(range(*index.indices(total))))
            if isinstance(index, (int, np.integer)):
                batch = self._batch([_normalize(index, total)], single=True)
                if isinstance(batch, Mapping):
                    return {key: column[0] for key, column in batch.items()}
                return batch[0]
            return self._batch([_normalize(i, total) for i in index])
        except RecordKitError as err:
            _mark_in_worker(err)
            raise

    def _batch(self, indices: list[int], single: bool = False) -> Any:
        return self._processed(*self._records.intact(indices, single))

    def _processed(self, indices: list[int], data: list[bytes]) -> Any:
        batch = self.process(indices, data)
        if isinstance(batch, Mapping):
            _check_columns(batch, len(indices))
        return batch

    def process(self, indices: list[int], data: list[bytes]) -> Any:
        """Turn the raw records of a batch into samples (by default: the records themselves).

        Return a list of samples, one per index, or a dict of columns with one entry per index (as
        :func:`recordkit.parse_examples` returns).
        """
        if self._process is not None:
            return self._process(indices, data)
        return data

    def state_dict(self) -> dict[str, Any]:
        """What torchdata's ``StatefulDataLoader`` saves for this dataset in each worker.

        A map-style dataset has no position (its sampler has); the state names the files and the number
        of workers, so that a restore with other files or another number of workers is refused.
        """
        return {
            "kind": "map_dataset",
            "version": STATE_VERSION,
            "files": len(self.files),
            "records": len(self),
            "workers": worker_info()[1],
            "skipped": self._skipped(),  # in this process (not read on load)
        }

    def _skipped(self) -> dict[str, Any] | None:
        damage = self._records.damage
        return None if damage is None else damage.summary()

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Check a state saved by :meth:`state_dict` against this dataset and this worker.

        Raises
        ------
        ValueError
            The state comes from other files.
        UnsupportedOperationError
            It was saved by a DataLoader with another number of workers.
        """
        check_state(state, "map_dataset", {"files": len(self.files), "records": len(self)})
        _check_workers(state)

    def close(self) -> None:
        """Close the readers this process opened (they reopen on the next read).

        Also called when the dataset is garbage-collected or used as a context manager.
        """
        self._records.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _check_columns(batch: Mapping[Any, Any], size: int) -> None:
    """Check that a dict returned by ``process`` holds one entry per index in each column."""
    for key, column in batch.items():
        try:
            length = len(column)
        except TypeError:
            length = None
        if length != size:
            has = "no length" if length is None else f"{length} entries"
            raise ValueError(
                f"MapDataset.process returned a dict whose column {key!r} has {has} for {size} "
                "indexes: a dict must hold one entry per index in each column (as "
                "recordkit.parse_examples returns), or return a list of samples"
            )


def _collate_batch(collate: Callable[[Any], Any], convert: bool, batch: Any) -> Any:
    """Collate what a ``MapDataset`` returned for a batch of indexes, for :func:`dataloader`.

    A list of samples goes to ``collate``; a dict of columns is a batch already and is handed on, its
    numpy arrays turned into tensors when ``convert`` (``to="torch"``).
    """
    if isinstance(batch, Mapping):
        return _convert(batch) if convert else batch
    return collate(batch)


Output = Literal["torch", "numpy"]
"""What :func:`dataloader` hands out: tensors (as ``DataLoader`` does) or numpy arrays."""


def _convert(data: Any) -> Any:
    """Turn numpy arrays in an item into tensors, as ``DataLoader`` does with unbatched items.

    The arrays' memory is shared, not copied. A plain dict or a parsed batch of numeric arrays takes a
    shortcut past ``default_convert``'s type dispatch, with the same result (a mapping of its own type).
    """
    kind = type(data)
    if (kind is dict or kind is ParsedBatch) and all(
        type(v) is np.ndarray and v.dtype.kind in "biufc" for v in data.values()
    ):
        try:
            return kind({key: torch.from_numpy(value) for key, value in data.items()})
        except TypeError:  # a dtype torch does not have
            pass
    return torch_data.default_convert(data)  # type: ignore[no-untyped-call]


def _base_seed() -> int:
    """The base seed of an iteration's workers, drawn from torch's generator as ``DataLoader`` draws it."""
    return int(torch.empty((), dtype=torch.int64).random_().item())


def _pinned(convert: Callable[[Any], Any], data: Any) -> Any:
    """``convert(data)`` with its tensors in pinned memory, where an accelerator is present."""
    data = convert(data)
    if not torch.cuda.is_available():
        return data
    return torch_data._utils.pin_memory.pin_memory(data)  # type: ignore[no-untyped-call]


def _keep(data: Any) -> Any:
    """Hand an item on as it is (numpy output, or what a ``collate_fn`` of the user's returned)."""
    return data


_TEXT = (str, bytes, bytearray, memoryview)


def _numpy_collate(batch: Sequence[Any]) -> Any:
    """Collate a batch into numpy arrays, as ``torch.utils.data.default_collate`` collates it into tensors.

    Arrays (and tensors) of one shape are stacked; numbers become a 1-D array (``int64``, ``float64`` or
    ``bool`` for Python numbers, their own dtype for numpy scalars); ``bytes`` and ``str`` stay a list;
    dicts, named tuples, tuples and lists are collated entry by entry (a tuple or list becomes a list of
    its entries' batches, as ``default_collate`` does). It is what ``dataloader(..., to="numpy")`` uses.

    Raises
    ------
    ValueError
        The batch is empty, or sequences or arrays in it differ in length or shape.
    TypeError
        An entry is of a type it cannot collate (pass a ``collate_fn`` of your own).
    """
    if not len(batch):
        raise ValueError("cannot collate an empty batch")
    elem = batch[0]
    if isinstance(elem, (np.generic, bool, int, float, complex)):
        return np.asarray(batch)
    if hasattr(elem, "__array__") and hasattr(elem, "shape"):  # numpy arrays, tensors
        arrays = [np.asarray(x) for x in batch]
        shapes = {a.shape for a in arrays}
        if len(shapes) > 1:
            raise ValueError(
                f"cannot stack arrays of different shapes into a batch: {sorted(shapes)}"
            )
        return np.stack(arrays)
    if isinstance(elem, _TEXT):
        return list(batch)
    if isinstance(elem, Mapping):
        return {key: _numpy_collate([item[key] for item in batch]) for key in elem}
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):
        return type(elem)(*(_numpy_collate(list(column)) for column in zip(*batch, strict=True)))
    if isinstance(elem, (tuple, list)):
        if len({len(item) for item in batch}) > 1:
            raise ValueError("cannot collate sequences of different lengths into a batch")
        return [_numpy_collate(list(column)) for column in zip(*batch, strict=True)]
    raise TypeError(
        f"cannot collate {type(elem).__name__} into numpy arrays; pass a collate_fn of your own"
    )


def dataloader(
    dataset: Dataset | MapDataset,
    *,
    batch_size: int | None = None,
    drop_last: bool = False,
    collate_fn: Callable[[Any], Any] | None = None,
    to: Output = "torch",
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
    persistent_workers: bool = False,
) -> Loader:
    """Build a resumable loader that hands out tensors (or numpy arrays) from a recordkit dataset.

    The loader is recordkit's own :class:`~recordkit.data.Loader` for both kinds of dataset: it takes the
    options of ``torch.utils.data.DataLoader`` and reads in worker processes of its own, which hand their
    batches over through shared memory.

    Parameters
    ----------
    dataset
        A :class:`~recordkit.data.Dataset` (iterable; it shuffles and shards itself, and each worker reads
        its own share) or a :class:`MapDataset` (batches of indexes are drawn from the seed and the epoch,
        and each worker reads every ``num_workers``-th batch, a whole batch with one ``read`` per file).
    batch_size
        Group items into batches of this size and pass each batch to ``collate_fn``. With a ``Dataset`` that
        already batches, leave it ``None``. A ``MapDataset`` needs it (default 1).
    drop_last
        Leave out a short last batch.
    collate_fn
        Turns a batch (list) into what the loop receives; by default ``torch.utils.data.default_collate``
        (numbers and arrays stacked into tensors, ``bytes`` left in a list), or its numpy counterpart with
        ``to="numpy"``. Without ``batch_size`` it is applied to every item. What it returns reaches the
        loop untouched, as with ``torch.utils.data.DataLoader``: it may return numpy arrays.
    to
        ``"torch"`` (default): items and batches are tensors, as a ``DataLoader`` hands them out (numpy
        arrays in items are converted, batches collated by ``default_collate``). ``"numpy"``: numpy
        arrays, for JAX or numpy training loops: batches are stacked into numpy arrays (a dict of arrays
        for dicts of features, a list of ``bytes`` for raw records) and items are left as the pipeline
        gives them. Either way the workers, epochs and ``state_dict`` are the same.
    shuffle, seed, rank, world_size, equal_shards
        For a ``MapDataset`` only: shuffle with a seeded permutation each epoch, and split the indexes
        between ranks (``rank``/``world_size`` as for ``Dataset``; ``equal_shards`` ``"pad"`` or ``"drop"``
        for equal step counts). A ``Dataset`` has these settings itself.
    num_workers, multiprocessing_context, pin_memory, prefetch_factor, timeout, worker_init_fn
        As for ``torch.utils.data.DataLoader``. ``"fork"``, ``"spawn"`` and ``"forkserver"`` contexts work.
    persistent_workers
        Deprecated, ignored (removed in 0.5): the workers are started for each epoch, because they learn
        the epoch and the resume position when they start. Starting them costs milliseconds with ``fork``.

    Returns
    -------
    Loader
        Iterate it once per epoch; it advances the epoch itself.

    Raises
    ------
    ValueError
        ``to`` is neither ``"torch"`` nor ``"numpy"``, or an option does not apply to this kind of dataset.
    """
    if to not in ("torch", "numpy"):
        raise ValueError(f'to must be "torch" or "numpy", not {to!r}')
    if persistent_workers:
        warnings.warn(
            "dataloader(persistent_workers=True) is ignored and will be removed in 0.5: recordkit's loader "
            "starts its workers for each epoch, as they learn the epoch and resume position when they start",
            DeprecationWarning,
            stacklevel=2,
        )
    default_collate = torch_data.default_collate if to == "torch" else _numpy_collate
    share = None
    ds: Dataset | MapDataset = dataset
    if isinstance(dataset, Dataset):
        if (
            shuffle
            or seed
            or rank is not None
            or world_size is not None
            or equal_shards is not None
        ):
            raise ValueError(
                "shuffle, seed, rank, world_size and equal_shards are settings of the Dataset itself "
                "(Dataset(..., seed=, rank=, world_size=, equal_shards=).shuffle(...))"
            )
        if drop_last and batch_size is None:
            raise ValueError(
                "drop_last needs a batch_size (or the Dataset's own batch(drop_last=True))"
            )
        if batch_size is not None:
            ds = dataset.batch(batch_size, drop_last=drop_last).map(collate_fn or default_collate)
        elif collate_fn is not None:
            ds = dataset.map(collate_fn)
        # As a DataLoader does: numpy in unbatched items becomes tensors, a collate_fn's output does not.
        convert = _convert if to == "torch" and collate_fn is None else None
    elif isinstance(dataset, MapDataset):
        r, w = resolve_rank(rank, world_size)
        batches = IndexBatches(
            len(dataset),
            batch_size or 1,
            shuffle=shuffle,
            seed=seed,
            drop_last=drop_last,
            rank=r,
            world_size=w,
            equal_shards=equal_shards,
        )
        # A dict of columns from process() is a batch already; a list of samples is collated.
        collate = collate_fn or functools.partial(_collate_batch, default_collate, to == "torch")
        share = IndexShare(
            dataset, dataset._records, batches, functools.partial(_fetch, dataset, collate)
        )
        convert = None
    else:
        raise TypeError(f"dataloader needs a Dataset or a MapDataset, not {type(dataset).__name__}")
    if pin_memory:
        convert = functools.partial(_pinned, convert or _keep)
    return Loader(
        ds,
        num_workers=num_workers,
        prefetch_factor=2 if prefetch_factor is None else prefetch_factor,
        multiprocessing_context=multiprocessing_context,
        timeout=timeout,
        worker_init_fn=worker_init_fn,
        convert=convert,
        base_seed=_base_seed,
        share=share,
    )


def _fetch(dataset: MapDataset, collate: Callable[[Any], Any], indices: list[int]) -> Any:
    """A batch of ``dataset`` read and collated, in the loader's worker that reads it (:class:`Passed`
    when ``on_error="skip"`` left no record of it)."""
    kept, data = dataset._records.intact(indices)
    return collate(dataset._processed(kept, data)) if kept or not indices else Passed()


def __getattr__(name: str) -> Any:
    # ``node`` (recordkit.integrations.torchnodes.node) is loaded on use: it needs torchdata, torch does not.
    if name == "node":
        from recordkit.integrations.torchnodes import node

        return node
    return moved_attribute(__name__, name)
