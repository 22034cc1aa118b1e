"""The :class:`Loader`: a pipeline's batches from worker processes, with epochs and a resumable position.

It needs neither PyTorch nor anything but numpy: JAX and numpy training loops use it as it is, and
:func:`recordkit.integrations.torch.dataloader` builds one that hands out tensors, over a
:class:`~recordkit.data.Dataset` or a map-style :class:`~recordkit.integrations.torch.MapDataset` alike.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from recordkit.data._dataset import Dataset
from recordkit.data._stages import check_int
from recordkit.data._state import (
    STATE_VERSION,
    Elastic,
    Resume,
    check_state,
    delivered_counts,
    iteration_start,
)
from recordkit.data._workers import Job, WorkerPool
from recordkit.data.loading import IndexShare, Passed, Share

__all__ = ["Loader", "loader"]


class Loader:
    """A :class:`~recordkit.data.Dataset`'s items, read by worker processes, one epoch per iteration.

    Made by :func:`loader` (numpy arrays out) or :func:`recordkit.integrations.torch.dataloader` (tensors out,
    and a map-style :class:`~recordkit.integrations.torch.MapDataset` too). Each worker reads its own shard
    of the pipeline (``shard = rank * num_workers + worker``; of a map-style dataset, every
    ``num_workers``-th batch of indexes) and hands its items to this process through shared memory set up
    once per iteration; the items come from the workers in turn, so their order is the same from run to run. Iterating reads one epoch (or as many as
    the dataset's ``repeat`` asks for) and then advances the epoch. :meth:`state_dict` records how far the
    consumer got; :meth:`load_state_dict`, in a fresh process, makes the next iteration deliver exactly the
    items not yet delivered, also with another number of workers.

    **Lifetime of the arrays.** The numpy arrays of an item (and tensors made from them) view the memory
    the worker wrote them into: nothing is copied on the way. That memory is handed back to the worker
    once every array of the item is garbage collected, and never written while one is alive, so items may
    be kept as long as needed. A consumer that keeps many items alive at once makes the workers set up
    more memory, and beyond a few items per worker they send further items through a pipe instead (slower,
    the same values).

    Attributes
    ----------
    dataset
        The pipeline (or, with ``share``, the map-style dataset that ``share`` reads).
    num_workers
        The worker processes per iteration (``0``: read in this process).

    Parameters
    ----------
    dataset, num_workers, prefetch_factor, multiprocessing_context, timeout, worker_init_fn
        As for :func:`loader`.
    convert
        Applied to each item in this process before it is handed out (``None``: items as they are);
        :func:`~recordkit.integrations.torch.dataloader` turns numpy arrays into tensors with it.
    base_seed
        Draws the base seed of an iteration's workers (``None``: Python's ``random``).
    share
        What the workers read of a map-style dataset (``None``: the share of ``dataset``, a pipeline).
    """

    def __init__(
        self,
        dataset: Dataset | Any,
        *,
        num_workers: int = 0,
        prefetch_factor: int = 2,
        multiprocessing_context: Any = None,
        timeout: float = 0,
        worker_init_fn: Callable[[int], None] | None = None,
        convert: Callable[[Any], Any] | None = None,
        base_seed: Callable[[], int] | None = None,
        share: IndexShare | None = None,
    ) -> None:
        self.dataset = dataset
        self._share: Share | IndexShare = share or Share(dataset, "a Loader")
        self.num_workers = check_int(num_workers, "num_workers", 0)
        self._prefetch = check_int(prefetch_factor, "prefetch_factor", 1)
        if timeout < 0:
            raise ValueError(f"timeout must be non-negative, not {timeout!r}")
        self._context = multiprocessing_context
        self._timeout = timeout
        self._init = worker_init_fn
        self._convert = convert
        self._base_seed = base_seed or (lambda: random.getrandbits(62))
        self._epochs = self._share.epochs
        self.set_epoch(self._share.first_epoch)

    def _slots(self) -> int:
        """The streams of a pass that was not resumed."""
        return self._share.slots(self.num_workers)

    @property
    def epoch(self) -> int:
        """The epoch the next iteration starts in."""
        return self._epoch

    def set_epoch(self, epoch: int) -> None:
        """Start the next iteration at the beginning of ``epoch``."""
        if epoch < 0:
            raise ValueError(f"the epoch must be non-negative, not {epoch}")
        self._epoch = self._first_epoch = int(epoch)
        # Items delivered in the current epoch by each stream: a worker's, or, in an epoch resumed from a
        # state saved with another number of workers, each saved worker's.
        self._counts = [0] * self._slots()
        self._restored = False
        self._share.restore_elastic(None)

    def __len__(self) -> int:
        """The number of items one iteration delivers: for each worker, ``len()`` of the pipeline as that
        worker's shard reads it (each worker batches its own share), summed, over the epochs.

        Raises
        ------
        TypeError
            The pipeline cannot tell its length in advance, or repeats forever.
        """
        return self._share.length(self._epoch, self._slots())

    def __iter__(self) -> Iterator[Any]:
        if not self._restored:
            self._first_epoch = self._epoch
            self._counts = [0] * self._slots()
        self._restored = False
        convert = self._convert
        while self._epochs is None or self._epoch < self._first_epoch + self._epochs:
            resumed = any(self._counts)
            produced = 0
            items = self._pass()
            try:
                for stream, item in items:
                    produced += 1
                    self._counts[stream] += 1
                    if type(item) is not Passed:
                        yield item if convert is None else convert(item)
                    # The consumer's reference is then the only one: a worker's shared-memory slot is free
                    # again as soon as the consumer drops the item, not once the next one has arrived.
                    del item
            finally:
                items.close()  # type: ignore[attr-defined]
            self._epoch += 1
            self._counts = [0] * self._slots()
            if self._epochs is None and produced == 0 and not resumed:
                return  # an endless pipeline with nothing to read

    def state_dict(self) -> dict[str, Any]:
        """The position, JSON-compatible: the epoch and how many items each worker delivered in it, and,
        for a pipeline that skips damage, what it skipped so far in the epoch, in every worker
        (``"skipped"``, as :meth:`Dataset.state_dict <recordkit.data.Dataset.state_dict>` counts it)."""
        damage = self._share.damage
        return {
            "kind": "loader",
            "version": STATE_VERSION,
            "epoch": self._epoch,
            "first_epoch": self._first_epoch,
            "delivered": list(self._counts),
            "num_workers": self.num_workers,
            "elastic": self._share.elastic_state(self._epoch),
            **self._share.fingerprint(),
            "skipped": None if damage is None else damage.summary(),
        }

    def load_state_dict(self, state: Mapping[str, Any] | Sequence[Mapping[str, Any]]) -> None:
        """Continue, at the next iteration, from a position saved by :meth:`state_dict`.

        The number of workers may differ from the saved one: the rest of the saved epoch is read as the
        saved workers would have read it (each saved worker's stream finished by one of the current
        workers), and the following epochs are split between the current workers.

        Given the list of the states saved by every rank of a run (any number of ranks and workers), a
        loader over a :class:`~recordkit.data.Dataset` continues on this run's ranks and workers: the
        records of the saved epoch that no rank had delivered are split between them, and the next epochs
        are split as usual (see :meth:`recordkit.data.Dataset.load_state_dict`).

        Raises
        ------
        StateError
            The state comes from a loader with other data, seed, batch size or ranks, or is malformed;
            a list misses a rank, names one twice, or its ranks are in different epochs.
        UnsupportedOperationError
            A list is given to a loader over a map-style dataset, which continues only on the ranks it
            was saved with.
        """
        if not isinstance(state, Mapping):
            self._epoch, first, elastic = self._share.merge(state)
            self._first_epoch = iteration_start(self._epoch, first, self._epochs)
            self._share.restore_elastic(elastic)
            self._counts = [0] * self._slots()
            self._restored = True
            return
        check_state(state, "loader", self._share.fingerprint())
        delivered = delivered_counts(state)
        self._share.check_streams(len(delivered))
        self._share.restore_elastic(Elastic.from_state(state.get("elastic")))
        self._epoch = int(state["epoch"])
        self._first_epoch = iteration_start(self._epoch, int(state["first_epoch"]), self._epochs)
        self._counts = list(delivered)
        self._restored = True

    def _resume(self) -> Resume | None:
        counts = self._counts
        if not any(counts) and len(counts) == self._slots():
            return None
        return Resume(self._epoch, len(counts), {w: (self._epoch, n) for w, n in enumerate(counts)})

    def _first_turn(self, resume: Resume | None) -> int:
        """The worker whose turn it is when a pass resumes with as many workers as saved the state.

        The workers' items are taken in turns, so the next turn is the one after the last worker that
        delivered the most (one that finished early delivered fewer, and says it is done when asked).
        """
        if resume is None or resume.workers != self.num_workers:
            return 0
        counts = self._counts
        most = max(counts)
        return (max(w for w, n in enumerate(counts) if n == most) + 1) % len(counts)

    def _damaged(self, events: list[dict[str, Any]]) -> None:
        """Count and warn about what a worker skipped (raising past ``max_skipped``, in all workers)."""
        damage = self._share.damage
        assert damage is not None
        damage.receive(events)

    def _pass(self) -> Iterator[tuple[int, Any]]:
        """``(stream, item)`` for the rest of the current epoch: the stream an item counts against (a
        worker's, or a saved worker's) and the item."""
        epoch = self._epoch
        resume = self._resume()
        damage = self._share.damage
        if damage is not None:
            damage.begin(epoch)
        try:
            if self.num_workers == 0:
                for run in self._share.runs(0, 1, epoch, epoch + 1, resume):
                    for item in self._share.items(run):
                        yield run.slot, item
                return
            job = Job(self._share, epoch, epoch + 1, resume, self._init, self._base_seed())
            yield from WorkerPool(
                job,
                self.num_workers,
                context=self._context,
                prefetch_factor=self._prefetch,
                timeout=self._timeout,
                first_turn=self._first_turn(resume),
                on_damage=self._damaged,
            )
        finally:
            if damage is not None:  # holes whose readers are still open (a map-style dataset's, or
                damage.warn_all()  # those of workers that did not report their reader's close)


def loader(
    dataset: Dataset,
    *,
    num_workers: int = 0,
    prefetch_factor: int = 2,
    multiprocessing_context: Any = None,
    timeout: float = 0,
    worker_init_fn: Callable[[int], None] | None = None,
) -> Loader:
    """Read ``dataset`` in ``num_workers`` worker processes and hand its items out as they are (numpy).

    The counterpart of :func:`recordkit.integrations.torch.dataloader` without PyTorch, for JAX and numpy
    training loops: batch and parse in the pipeline (``Dataset(...).batch(256).map(parse)``) and each item
    is a batch whose numpy arrays arrive without being copied (see :class:`Loader` for how long they
    stay valid).

    Parameters
    ----------
    dataset
        The pipeline; its ``map`` and ``filter`` functions run in the workers and must be picklable for
        the ``spawn`` and ``forkserver`` start methods (module-level functions, not lambdas).
    num_workers
        Worker processes (``0``: read in this process).
    prefetch_factor
        Items each worker may have ready ahead of the consumer (the name ``DataLoader`` gives it).
    multiprocessing_context
        ``"fork"``, ``"spawn"``, ``"forkserver"``, a ``multiprocessing`` context, or ``None`` for the
        default start method.
    timeout
        Seconds to wait for a worker's next item before raising ``TimeoutError`` (``0``: no limit).
    worker_init_fn
        Called in each worker with its number before it reads.

    Returns
    -------
    Loader
        Iterate it once per epoch; it advances the epoch itself.
    """
    return Loader(
        dataset,
        num_workers=num_workers,
        prefetch_factor=prefetch_factor,
        multiprocessing_context=multiprocessing_context,
        timeout=timeout,
        worker_init_fn=worker_init_fn,
    )
