"""The :class:`Dataset` pipeline: sources, sharding, shuffling, per-item stages, repeating, prefetching."""

from __future__ import annotations

import copy
import functools
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import closing
from typing import Any

from recordkit.data._damage import DamageLog, OnError, log_of, skipped_summary, with_damage_filter
from recordkit.data._files import EVERYTHING, FileSource, Shuffle, Trail, catalog_of, narrow
from recordkit.data._prefetch import prefetch
from recordkit.data._readers import Catalog
from recordkit.data._stages import (
    EPOCH_END,
    Batch,
    Filter,
    Map,
    Stage,
    Unbatch,
    check_callable,
    check_int,
    describe,
    is_batched,
    length,
    plan_skip,
    run,
    unknown_length,
)
from recordkit.data._state import (
    STATE_VERSION,
    Elastic,
    Resume,
    Run,
    Stream,
    check_state,
    iteration_start,
    loader_streams,
    merge_states,
    plan_runs,
)
from recordkit.datasets.plan import EqualShards, check_equal_shards
from recordkit.datasets.ranks import resolve_rank, shard_of, worker_info
from recordkit.datasets.seeds import derive_seed
from recordkit.errors import NoLengthError, StateError, UnsupportedOperationError
from recordkit.io.resolve import Sources

__all__ = ["Dataset", "Share"]


_GLOBAL_INTERLEAVE = (
    "interleave() reads files side by side, but a global shuffle() reads records by index from every "
    "file; use shuffle(buffer_size) with interleave()"
)


def _window_text(window: tuple[int, int | None]) -> str:
    start, stop = window
    return f"[{start}:{'' if stop is None else stop}]"


class Dataset:
    """Records from many files, split between ranks and workers, shuffled, transformed and batched.

    Stages run in this order, whatever order the methods are called in: **take/skip** (called before
    :meth:`shuffle`) → **shuffle** → **take/skip** (called after it) → **shard** (by rank and DataLoader
    worker) → **interleave** (reading several files of the shard at once) → **map**, **filter**,
    **batch** and **unbatch** (in the order called) → **repeat** → **prefetch**. :meth:`take` and
    :meth:`skip` select from the epoch's global order of records, before it is split, so ``take(1000)``
    gives 1000 records per epoch in all, whatever the number of ranks and workers. Each stage method
    returns a new dataset and leaves this one unchanged. Iterating gives one epoch (or as many as
    :meth:`repeat` asks for); readers are opened lazily, in the process that iterates, and closed when the
    iteration ends or is abandoned. ``len(ds)`` is the number of items this process (rank, or worker inside
    a DataLoader worker) gets, where it is known without reading payloads. :func:`mix` samples from
    several datasets.

    Parameters
    ----------
    sources
        A path, a glob pattern, an fsspec URL (``s3://...``, ``memory://...``; needs ``fsspec``), or a list
        of them. The files may be of different formats. A dataset directory with a manifest (written by
        :class:`recordkit.ShardWriter`) or a tensorflow-datasets directory is read as its manifest lists
        it: record counts come from the manifest, so planning a globally shuffled epoch opens no file. A
        TFDS split's records come in the order ``builder.as_dataset(split, shuffle_files=False)`` gives
        them (its shards interleaved), and ``shuffle(files=True)`` opens its shards in a random order, as
        ``shuffle_files=True`` does.
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
    check_crc, index, lenient
        As for :func:`recordkit.open`: verify checksums; the sidecar index to use (a path, for a single
        file), ``False`` to use none, ``None`` for the file's own; let a file that ends inside a record
        header end cleanly, as TensorFlow does.
    on_error, max_skipped
        ``"raise"`` (default): a damaged record raises its :class:`~recordkit.errors.CorruptRecordError`.
        ``"skip"``: damaged records are skipped and reading goes on at the next intact record; each
        damaged file gives one :class:`~recordkit.errors.DataLossWarning`, :meth:`state_dict` counts what
        was skipped (``"skipped"``), and once an epoch has skipped more than ``max_skipped`` records and
        damaged ranges (``None``: no limit) the error is raised. Errors of ``map`` functions (decoding a
        payload) are not skipped. See "Training through damage" in the docs.

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
        check_crc: bool = True,
        index: str | os.PathLike[str] | bool | None = None,
        lenient: bool = False,
        on_error: OnError = "raise",
        max_skipped: int | None = None,
    ) -> None:
        check_equal_shards(equal_shards)
        if rank is not None or world_size is not None:
            resolve_rank(rank, world_size)  # validate now
        catalog = catalog_of(
            sources, format, split, check_crc=check_crc, index=index, lenient=lenient
        )
        catalog.skipping(on_error, max_skipped)
        self._setup(FileSource(catalog, int(seed), equal_shards), rank, world_size)

    def _setup(self, source: Any, rank: int | None, world_size: int | None) -> None:
        self._source = source
        self._rank = rank
        self._world_size = world_size
        self._ops: tuple[Stage, ...] = ()
        self._repeat: int | None = 1
        self._prefetch = 0
        self._epoch = 0
        self._first_epoch = 0
        self._consumed = 0
        self._restored_skip: int | None = None
        self._expected_shard: tuple[int, int] | None = None
        self._last_shard: tuple[int, int] | None = None

    @classmethod
    def _from_source(cls, source: Any, rank: int | None, world_size: int | None) -> Dataset:
        """A dataset over another record source (see :func:`recordkit.data.mix`)."""
        dataset = cls.__new__(cls)
        dataset._setup(source, rank, world_size)
        return dataset

    @property
    def _seed(self) -> int:
        return self._source.seed  # type: ignore[no-any-return]

    @_seed.setter
    def _seed(self, seed: int) -> None:
        self._source = self._source.replace(seed=int(seed))

    @property
    def _catalog(self) -> Catalog:
        return self._source.catalog  # type: ignore[no-any-return]

    @property
    def _equal(self) -> EqualShards:
        return self._source.equal  # type: ignore[no-any-return]

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
        """The batch size, or ``None`` when the dataset yields single items (not batched, or unbatched)."""
        if not is_batched(self._ops):
            return None
        return next(op.size for op in reversed(self._ops) if isinstance(op, Batch))

    def __repr__(self) -> str:
        source = self._source
        if not isinstance(source, FileSource):
            stages = [repr(source)]
        else:
            stages = [f"Dataset({len(source.catalog)} files, seed={self._seed})"]
            if source.before != EVERYTHING:
                stages.append(f"records{_window_text(source.before)}")
            if source.shuffle is not None:
                spec = source.shuffle
                stages.append(f"shuffle({spec.buffer_size}, files={spec.files})")
            if source.after != EVERYTHING:
                stages.append(f"records{_window_text(source.after)}")
            if source.cycle:
                stages.append(f"interleave({source.cycle}, block_length={source.block})")
        stages.extend(describe(op) for op in self._ops)
        if self._repeat != 1:
            stages.append(f"repeat({self._repeat})")
        if self._prefetch:
            stages.append(f"prefetch({self._prefetch})")
        return ".".join(stages)

    def _repr_html_(self) -> str:
        """The notebook view: the pipeline, its files, the first records of the first file as stored."""
        from recordkit.data._preview import dataset_html

        catalogs = [self._catalog] if hasattr(self._source, "catalog") else []
        mixed = getattr(self._source, "datasets", ())
        catalogs += [d._catalog for d in mixed if hasattr(d._source, "catalog")]
        return dataset_html(repr(self), catalogs)

    # -- stages --------------------------------------------------------------------------------------

    def _with(self, **changes: Any) -> Dataset:
        new = copy.copy(self)
        for name, value in changes.items():
            setattr(new, name, value)
        new._consumed = 0
        new._restored_skip = None
        return new

    def _files(self, stage: str) -> FileSource:
        source = self._source
        if not isinstance(source, FileSource):
            raise TypeError(
                f"{stage}() works on the records of files: apply it to the datasets inside the mix"
            )
        return source

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
            The dataset is already shuffled or batched (shuffle before batching), or a global shuffle
            is asked of an interleaved dataset.
        TypeError
            The dataset is a :func:`mix` (shuffle its datasets instead).
        """
        source = self._files("shuffle")
        if source.shuffle is not None:
            raise ValueError("the dataset is already shuffled")
        if any(isinstance(op, Batch) for op in self._ops):
            raise ValueError("shuffle before batch: shuffling batches is not supported")
        if buffer_size is not None:
            check_int(buffer_size, "buffer_size", 0)
        elif source.cycle:
            raise ValueError(_GLOBAL_INTERLEAVE)
        return self._with(_source=source.replace(shuffle=Shuffle(buffer_size, bool(files))))

    def _window(self, op: str, n: int) -> Dataset:
        check_int(n, f"{op}'s count", 0)
        source = self._files(op)
        late = [describe(s) for s in self._ops if not isinstance(s, Map)]
        if late:
            raise ValueError(
                f"{op}() selects records from the epoch's global order, before they are split between "
                f"ranks and workers, so it must come before {late[0]} (it may come after map()); to "
                "stop after a number of batches, use itertools.islice"
            )
        if source.shuffle is None:
            return self._with(_source=source.replace(before=narrow(source.before, op, n)))
        return self._with(_source=source.replace(after=narrow(source.after, op, n)))

    def take(self, n: int) -> Dataset:
        """Keep only the first ``n`` records of each epoch, counted over all ranks and workers together.

        The records are taken from the epoch's global order before it is split: ``take(1000)`` gives 1000
        records per epoch in all, shared between the ranks and workers as usual. Called before
        :meth:`shuffle`, it takes the first ``n`` records of the files in their given order (of a TFDS
        split: in TFDS's order), the same records every epoch, then shuffled among themselves; called
        after it, the first ``n`` of the shuffled order (a global shuffle: ``n`` random records, different each epoch; a buffer shuffle: the
        first ``n`` records of the epoch's file order, which the buffers then shuffle). ``skip(n)`` and
        ``take(n)`` at the same point partition the epoch. Sequential (compressed) files are read through
        once to count them where the cut falls in or after them.

        Raises
        ------
        ValueError
            ``n`` is negative, or a stage other than :meth:`map` (filter, batch, unbatch) came before: the
            count is of records, before those stages.
        TypeError
            The dataset is a :func:`mix`.
        """
        return self._window("take", n)

    def skip(self, n: int) -> Dataset:
        """Leave out the first ``n`` records of each epoch, counted over all ranks and workers together.

        The counterpart of :meth:`take`, with the same rules: ``ds.skip(n)`` and ``ds.take(n)`` partition
        every epoch, and ``ds.skip(a).take(b)`` is the records ``a`` to ``a + b`` of the epoch's order.

        Raises
        ------
        ValueError
            As for :meth:`take`.
        """
        return self._window("skip", n)

    def interleave(self, cycle_length: int, *, block_length: int = 1) -> Dataset:
        """Read ``cycle_length`` files (or parts of files) of this process's share at once, in threads.

        The records come in a deterministic order: the open files take turns, ``block_length`` records
        each, and when one ends the next file takes its place (tf.data's deterministic ``interleave``).
        Each open file is read ahead by a thread of its own, so slow or remote reads overlap. Resuming from
        :meth:`state_dict` stays exact, and every record is still read once per epoch.

        Raises
        ------
        ValueError
            The counts are not positive, the dataset has a global shuffle (which reads records by index
            from every file, not file by file), or it is a TFDS split (already read as TFDS interleaves
            its shards).
        TypeError
            The dataset is a :func:`mix`.
        """
        check_int(cycle_length, "cycle_length", 1)
        check_int(block_length, "block_length", 1)
        source = self._files("interleave")
        if source.shuffle is not None and source.shuffle.is_global:
            raise ValueError(_GLOBAL_INTERLEAVE)
        order = source.catalog.order
        if order is not None:
            raise ValueError(
                "a TFDS split is read in TFDS's order, its shards interleaved "
                f"{order.cycle_length} at a time, {order.block_length} records per turn: it takes no "
                "other interleave()"
            )
        return self._with(_source=source.replace(cycle=cycle_length, block=block_length))

    def map(self, fn: Callable[[Any], Any]) -> Dataset:
        """Apply ``fn`` to every item: to every record, or to every batch if called after :meth:`batch`.

        ``fn`` runs in the process that iterates (each DataLoader worker) and must be picklable for the
        ``spawn`` start method (a module-level function, not a lambda). A
        :class:`~recordkit.errors.DecodeError` it raises for a record, or for a record of a batch (its
        ``index``), is made to name the file and the record's index in it
        (:meth:`~recordkit.errors.DecodeError.locate`).
        """
        check_callable(fn, "map")
        return self._with(_ops=(*self._ops, Map(fn)))

    def filter(self, fn: Callable[[Any], Any]) -> Dataset:
        """Keep the items for which ``fn(item)`` is true (records, or batches after :meth:`batch`).

        Like :meth:`map`, ``fn`` runs in the process that iterates and must be picklable for ``spawn``.
        After a filter, ``len()`` raises ``TypeError``, and resuming from :meth:`state_dict` runs the stages
        up to the filter again over the part of the epoch already delivered (to count what it kept).
        """
        check_callable(fn, "filter")
        return self._with(_ops=(*self._ops, Filter(fn)))

    def batch(self, size: int, *, drop_last: bool = False) -> Dataset:
        """Group items into lists of ``size``; the last one is shorter unless ``drop_last``.

        Batches never span two epochs.
        """
        check_int(size, "the batch size", 1)
        if self.batch_size is not None:
            raise ValueError("the dataset is already batched")
        return self._with(_ops=(*self._ops, Batch(size, bool(drop_last))))

    def unbatch(self) -> Dataset:
        """Split every item into its elements: a list, tuple or array into its entries, a dict of equally
        long columns into one dict per row (as ``tf.data``'s ``unbatch``).

        After it, ``len()`` raises ``TypeError``; resuming re-runs the stages up to it over the part of the
        epoch already delivered, as after :meth:`filter`.
        """
        return self._with(_ops=(*self._ops, Unbatch()))

    def repeat(self, epochs: int | None = None) -> Dataset:
        """Iterate ``epochs`` epochs in one go (``None``: forever), each in its own shuffled order."""
        if epochs is not None:
            check_int(epochs, "epochs", 1)
        return self._with(_repeat=epochs)

    def prefetch(self, n: int = 2) -> Dataset:
        """Produce up to ``n`` items ahead in a background thread (``0`` turns it off).

        The thread stops and is joined when the iteration ends or is abandoned; an exception raised while
        reading is re-raised to the consumer.
        """
        check_int(n, "the prefetch depth", 0)
        return self._with(_prefetch=n)

    # -- epochs and state ----------------------------------------------------------------------------

    def set_epoch(self, epoch: int) -> None:
        """Start the next iteration at the beginning of ``epoch`` (a mix passes it to its datasets)."""
        if epoch < 0:
            raise ValueError(f"the epoch must be non-negative, not {epoch}")
        self._epoch = self._first_epoch = int(epoch)
        self._consumed = 0
        self._restored_skip = None
        self._set_elastic(None)
        for dataset in getattr(self._source, "datasets", ()):
            dataset.set_epoch(epoch)

    def _fingerprint(self) -> dict[str, Any]:
        legacy = all(isinstance(op, (Map, Batch)) for op in self._ops)
        # Entries added after the first version are None where the pipeline could have been built then,
        # so that positions saved before still load.
        return {
            **self._source.fingerprint(),
            "batch_size": self.batch_size,
            "stages": None if legacy else [describe(op).split("(")[0] for op in self._ops],
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
            "shard": list(self._last_shard or self._shard()),
            "skipped": skipped_summary(self._source),
            "elastic": self._elastic_state(self._epoch),
            **self._fingerprint(),
        }
        return state

    def _elastic_state(self, epoch: int) -> dict[str, Any] | None:
        """The elastic position of ``epoch`` as a state stores it (``None``: the epoch as planned)."""
        source = self._source
        elastic = source.resumed(epoch) if isinstance(source, FileSource) else None
        return None if elastic is None else elastic.to_state()

    def _set_elastic(self, elastic: Elastic | None) -> None:
        source = self._source
        if isinstance(source, FileSource):
            if source.elastic is not elastic:
                self._source = source.replace(elastic=elastic)
        elif elastic is not None:
            raise UnsupportedOperationError(
                "resuming on another number of ranks reads the rest of an epoch of files; a mix of "
                "datasets resumes only with the layout it was saved with"
            )

    def _records(self, items: int) -> int:
        """How many records the stages had taken to deliver ``items`` items."""
        if log_of(self._source) is not None:
            raise UnsupportedOperationError(
                "resuming on another number of ranks needs the number of records each rank had read, "
                'which on_error="skip" hides (skipped records are not delivered): resume with the same '
                "ranks"
            )
        records, cut, _ = plan_skip(self._ops, items)
        if cut:
            raise UnsupportedOperationError(
                "resuming on another number of ranks needs the number of records each rank had read, "
                "which filter() and unbatch() hide: resume with the same ranks, or filter in the "
                "training loop"
            )
        return records

    def _load_states(self, states: Sequence[Mapping[str, Any]]) -> None:
        def streams(state: Mapping[str, Any]) -> list[Stream]:
            shard = state.get("shard")
            if shard is None:
                return [Stream(None, None, int(state["consumed"]))]
            return [Stream(int(shard[0]), int(shard[1]), int(state["consumed"]))]

        if not isinstance(self._source, FileSource):
            self._set_elastic(Elastic(0, ()))  # raises: a mix
        epoch, first, elastic = merge_states(
            states, "dataset", self._fingerprint(), streams, self._records
        )
        self._set_elastic(elastic)
        self._epoch, self._first_epoch = epoch, iteration_start(epoch, first, self._repeat)
        self._consumed = 0
        self._restored_skip = 0
        self._expected_shard = self._last_shard = None

    def load_state_dict(self, state: Mapping[str, Any] | Sequence[Mapping[str, Any]]) -> None:
        """Continue, at the next iteration, from a position saved by :meth:`state_dict`.

        Parameters
        ----------
        state
            This rank's saved state, to continue with the same ranks; or the list of the states saved by
            every rank of a run (in any order), to continue on any number of ranks: the rest of the saved
            epoch (the records no rank had read) is split between the ranks of this run, so every record
            of the epoch is still read once, and the next epochs are split as usual. See "Resuming on
            another number of machines" in the docs for what it supports.

        Raises
        ------
        StateError
            The state comes from a different pipeline (other seed, files, batch size, shuffle...); a list
            misses a rank, names one twice, or its ranks are in different epochs. A single state's shard
            (rank and worker) is checked when the iteration starts. (Also a ``ValueError``.)
        UnsupportedOperationError
            A list is given to a pipeline that cannot continue on another layout: a :func:`mix`, a
            ``filter()`` or ``unbatch()`` stage, or sequential (compressed) files.
        """
        if not isinstance(state, Mapping):
            self._load_states(state)
            return
        check_state(state, "dataset", self._fingerprint())
        self._epoch = int(state["epoch"])
        self._first_epoch = iteration_start(self._epoch, int(state["first_epoch"]), self._repeat)
        self._consumed = int(state["consumed"])
        self._restored_skip = self._consumed
        shard = state.get("shard")
        self._last_shard = None if shard is None else (int(shard[0]), int(shard[1]))
        # Nothing read yet is the start of any shard: such a state (saved before the first item, its
        # shard then the one this process would have read) resumes in a DataLoader worker too.
        self._expected_shard = self._last_shard if self._consumed else None
        self._set_elastic(Elastic.from_state(state.get("elastic")))

    # -- iteration -----------------------------------------------------------------------------------

    def __iter__(self) -> Iterator[Any]:
        shard, num_shards = self._shard()
        if self._restored_skip is not None and self._expected_shard not in (
            None,
            (shard, num_shards),
        ):
            raise StateError(
                f"the state was saved by shard {self._expected_shard[0]} of {self._expected_shard[1]} "
                f"(rank x worker) but this is shard {shard} of {num_shards}; to resume on another "
                "number of ranks, give load_state_dict the list of the states saved by every rank"
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
            items = self._epoch_items(epoch, shard, num_shards, skip)
            with closing(items):  # type: ignore[type-var]
                for item in items:
                    produced += 1
                    yield item
            yield EPOCH_END
            if end is None and produced == 0 and skip == 0:
                return  # an empty shard repeated forever would spin without end
            epoch += 1
            skip = 0

    def _epoch_items(self, epoch: int, shard: int, num_shards: int, skip: int) -> Iterator[Any]:
        """One epoch of one shard, without its first ``skip`` items (``seed``: of ``rk.Image``'s crops)."""
        ops, source = with_damage_filter(self._source, self._ops), self._source
        records, cut, dropped = plan_skip(ops, skip)
        seed = derive_seed(self._seed, epoch, "map")
        stages = functools.partial(run, stages=ops, cut=cut, dropped=dropped, seed=seed)
        if isinstance(source, FileSource):
            # Records come a list at a time, straight from the readers; the trail names the file and
            # record of a decoding error.
            trail = Trail(source.catalog)
            chunks = source.chunks(epoch, shard, num_shards, records, trail)
            return stages(chunks, chunks=True, locate=trail.locate)
        return stages(source.records(epoch, shard, num_shards, records), chunks=False)

    def _one_epoch(self, epoch: int, shard: int, num_shards: int, skip: int) -> Iterator[Any]:
        """One epoch of one shard, without its first ``skip`` items, prefetched if asked."""
        items = self._epoch_items(epoch, shard, num_shards, skip)
        return prefetch(items, self._prefetch) if self._prefetch else items

    # -- length --------------------------------------------------------------------------------------

    def _shard(self) -> tuple[int, int]:
        rank, world_size = resolve_rank(self._rank, self._world_size)
        return shard_of(rank, world_size, *worker_info())

    def __len__(self) -> int:
        """The number of items this process gets from one iteration (all its epochs, with repeat).

        This process is its rank's share, or, inside a DataLoader worker, the worker's share. The count
        comes from what is known without reading payloads: FFRecord headers, indexes (TFRecord and OFRecord
        files without a sidecar index have their headers scanned once), a manifest.

        Raises
        ------
        TypeError
            The count is not known in advance: after filter() or unbatch(), an endless repeat(), a
            compressed file's record count, or a mix whose datasets' lengths are unknown.
        """
        return self._length(*self._shard())

    def _length(self, shard: int, num_shards: int) -> int:
        if self._repeat is None:
            raise NoLengthError(
                "len() is unknown after repeat() without a count: the dataset never ends"
            )
        first = self._epoch
        return sum(
            self._epoch_length(e, shard, num_shards) for e in range(first, first + self._repeat)
        )

    def _epoch_length(self, epoch: int, shard: int, num_shards: int) -> int:
        reason = unknown_length(self._ops)
        if reason is not None:
            raise NoLengthError(reason)
        return length(self._ops, self._source.length(epoch, shard, num_shards))


class Share:
    """One rank's share of a pipeline, split between the worker processes of a loader: what a loader
    needs of a :class:`Dataset`, which this class alone reads the inside of.

    Made in the main process, where ``torch.distributed`` is initialised: it resolves the rank, and learns
    the files' record counts once, so that workers inherit them instead of each opening every file. It
    pickles (for ``spawn``) with what it learnt. ``user`` is what needs it, as the ``TypeError`` for
    anything but a :class:`Dataset` names it.

    Attributes
    ----------
    dataset
        The pipeline, one epoch per pass (an iteration's epochs are its :class:`Run` s').
    epochs
        How many epochs an iteration reads (the pipeline's ``repeat``; ``None``: forever).
    rank, world_size
        This process among the distributed ranks.
    """

    def __init__(self, dataset: Dataset, user: str = "a loader") -> None:
        if not isinstance(dataset, Dataset):
            raise TypeError(f"{user} needs a recordkit.data.Dataset, not {type(dataset).__name__}")
        self.dataset = dataset._with(_repeat=1)
        self.epochs = dataset._repeat
        self.rank, self.world_size = resolve_rank(dataset._rank, dataset._world_size)
        if dataset._equal is not None:
            dataset._catalog.count_all()
        else:
            dataset._catalog.describe()

    @property
    def first_epoch(self) -> int:
        """The epoch a loader's first iteration reads (the pipeline's ``set_epoch``)."""
        return self.dataset.epoch

    @property
    def damage(self) -> DamageLog | None:
        """The log of what ``on_error="skip"`` skips (``None`` unless the pipeline skips damage)."""
        return log_of(self.dataset._source)

    def slots(self, num_workers: int) -> int:
        """The streams an iteration counts its items against: one per worker."""
        return max(1, num_workers)

    def check_streams(self, streams: int) -> None:
        """Accept a saved position of any number of streams (any number of workers can continue it)."""

    def fingerprint(self) -> dict[str, Any]:
        """What a saved position must match: the pipeline's seed, files, batch size and stages, and the rank."""
        return {**self.dataset._fingerprint(), "rank": self.rank, "world_size": self.world_size}

    def elastic_state(self, epoch: int) -> dict[str, Any] | None:
        """What earlier layouts of ranks read of ``epoch``, as a state stores it (``None``: nothing)."""
        return self.dataset._elastic_state(epoch)

    def restore_elastic(self, elastic: Elastic | None) -> None:
        """Continue an epoch that earlier layouts of ranks partly read (``None``: epochs as planned)."""
        self.dataset._set_elastic(elastic)

    def merge(self, states: Sequence[Mapping[str, Any]]) -> tuple[int, int, Elastic | None]:
        """The position that continues the loader states saved by every rank of a run, on this layout.

        Each state's streams are its workers' (see :func:`loader_streams`).
        """
        if not isinstance(self.dataset._source, FileSource):
            self.restore_elastic(Elastic(0, ()))  # raises: a mix
        expected = {k: v for k, v in self.fingerprint().items() if k not in ("rank", "world_size")}

        return merge_states(states, "loader", expected, loader_streams, self.dataset._records)

    def runs(
        self, worker: int, num_workers: int, first: int, end: int | None, resume: Resume | None
    ) -> list[Run]:
        """The runs ``worker`` of ``num_workers`` reads in an iteration from epoch ``first`` to ``end``."""
        return plan_runs(self.rank, self.world_size, worker, num_workers, first, end, resume)

    def items(self, run: Run, on_epoch: Callable[[int], None] | None = None) -> Iterator[Any]:
        """The items of ``run``; ``on_epoch(epoch)`` is called as each of its epochs starts."""
        epoch = run.epoch
        if on_epoch is not None:
            on_epoch(epoch)
        items = self.dataset._items(
            run.shard, run.num_shards, run.epoch, run.epoch, run.skip, run.epochs
        )
        try:
            for item in items:
                if item is EPOCH_END:
                    epoch += 1
                    if on_epoch is not None:
                        on_epoch(epoch)
                    continue
                yield item
        finally:
            items.close()  # type: ignore[attr-defined]

    def length(self, epoch: int, num_workers: int | None = None) -> int:
        """The number of items an iteration from ``epoch`` delivers (all its epochs): with ``num_workers``,
        in all, each worker batching its own shard; ``None``, this process's share (a DataLoader worker's).

        Raises
        ------
        TypeError
            The pipeline cannot tell its length, or repeats forever; or, without ``num_workers``, it mixes
            datasets until the first runs out (what that gives depends on the split between workers).
        """
        if self.epochs is None:
            raise NoLengthError(
                "the pipeline repeats forever: it never ends, so an iteration has no length"
            )
        pipeline = self.dataset._with(_epoch=epoch, _repeat=self.epochs)
        if num_workers is None:
            source = pipeline._source
            if getattr(source, "stop", None) == "first_exhausted" and source._endless() is None:
                raise NoLengthError(
                    "len() of a mix that stops when its first source runs out is unknown without the "
                    "number of workers; recordkit.integrations.torch.dataloader() knows it and gives an "
                    "exact len()"
                )
            return len(pipeline)
        shards = (shard_of(self.rank, self.world_size, w, num_workers) for w in range(num_workers))
        return sum(len(pipeline._with(_rank=shard, _world_size=n)) for shard, n in shards)
