"""The :class:`Loader`: a pipeline's batches from worker processes, with epochs and a resumable position.

It needs neither PyTorch nor anything but numpy: JAX and numpy training loops use it as it is, and
:func:`recordkit.integrations.torch.dataloader` builds one that hands out tensors.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator, Mapping, Sized
from typing import Any, cast

from recordkit.data._dataset import Dataset
from recordkit.data._runs import Resume, plan_runs, run_items
from recordkit.data._state import STATE_VERSION, check_state
from recordkit.data._workers import Job, WorkerPool
from recordkit.datasets.plan import resolve_rank, shard_of

__all__ = ["Loader", "loader"]


def _keep(item: Any) -> Any:
    return item


def _count(value: object, what: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{what} must be an int of at least {minimum}, not {value!r}")
    return value


class Passes:
    """What every recordkit loader does with epochs: one epoch (or ``repeat``'s) per pass, and a position.

    A subclass reads a pass with :meth:`_pass`, which yields ``(stream, item)``: the stream an item counts
    against (a worker's, or a saved worker's) and the item. The position is how many items each stream
    delivered in the current epoch, so that a restored loader delivers exactly the rest.
    """

    _epochs: int | None
    _convert: Callable[[Any], Any] = staticmethod(_keep)

    def _start(self, epoch: int, epochs: int | None) -> None:
        self._epochs = epochs
        self._epoch = self._first_epoch = epoch
        # Items delivered in the current epoch by each stream: a worker's, or, in an epoch resumed from a
        # state saved with another number of workers, each saved worker's.
        self._counts = [0] * self._slots()
        self._restored = False

    def _slots(self) -> int:
        """The streams of a pass that was not resumed."""
        raise NotImplementedError

    def _pass(self) -> Iterator[tuple[int, Any]]:
        """``(stream, item)`` for the rest of the current epoch."""
        raise NotImplementedError

    def _fingerprint(self) -> dict[str, Any]:
        """What must match for a saved position to apply."""
        raise NotImplementedError

    def _workers(self) -> int:
        """The number of worker processes, as the state records it."""
        raise NotImplementedError

    @property
    def epoch(self) -> int:
        """The epoch the next iteration starts in."""
        return self._epoch

    def set_epoch(self, epoch: int) -> None:
        """Start the next iteration at the beginning of ``epoch``."""
        if epoch < 0:
            raise ValueError(f"the epoch must be non-negative, not {epoch}")
        self._epoch = self._first_epoch = int(epoch)
        self._counts = [0] * self._slots()
        self._restored = False

    def __iter__(self) -> Iterator[Any]:
        if not self._restored:
            self._first_epoch = self._epoch
            self._counts = [0] * self._slots()
        self._restored = False
        convert = self._convert
        while self._epochs is None or self._epoch < self._first_epoch + self._epochs:
            produced = 0
            items = self._pass()
            try:
                for stream, item in items:
                    produced += 1
                    self._counts[stream] += 1
                    yield convert(item)
            finally:
                items.close()  # type: ignore[attr-defined]
            self._epoch += 1
            self._counts = [0] * self._slots()
            if self._epochs is None and produced == 0:
                return

    def state_dict(self) -> dict[str, Any]:
        """The position: the epoch and how many items each worker has delivered in it (JSON-compatible)."""
        return {
            "kind": "loader",
            "version": STATE_VERSION,
            "epoch": self._epoch,
            "first_epoch": self._first_epoch,
            "delivered": list(self._counts),
            "num_workers": self._workers(),
            **self._fingerprint(),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Continue, at the next iteration, from a position saved by :meth:`state_dict`.

        The number of workers may differ from the saved one: the rest of the saved epoch is read as the
        saved workers would have read it (each saved worker's stream finished by one of the current
        workers), and the following epochs are split between the current workers.

        Raises
        ------
        ValueError
            The state comes from a loader with other data, seed, batch size or ranks, or is malformed.
        """
        check_state(state, "loader", self._fingerprint())
        delivered = state.get("delivered")
        if (
            not isinstance(delivered, list)
            or not delivered
            or not all(isinstance(c, int) and not isinstance(c, bool) and c >= 0 for c in delivered)
        ):
            raise ValueError(f"malformed loader state: delivered={delivered!r}")
        self._check_streams(len(delivered))
        self._epoch = int(state["epoch"])
        self._first_epoch = int(state["first_epoch"])
        self._counts = list(delivered)
        self._restored = True

    def _check_streams(self, streams: int) -> None:
        """Refuse a state with a number of streams this loader cannot continue."""


class Loader(Passes):
    """A :class:`~recordkit.data.Dataset`'s items, read by worker processes, one epoch per iteration.

    Made by :func:`loader` (numpy arrays out) or :func:`recordkit.integrations.torch.dataloader` (tensors out).
    Each worker reads its own shard of the pipeline (``shard = rank * num_workers + worker``) and hands
    its items to this process through shared memory set up once per iteration; the items come from the
    workers in turn, so their order is the same from run to run. Iterating reads one epoch (or as many as
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
        The pipeline.
    num_workers
        The worker processes per iteration (``0``: read in this process).
    """

    def __init__(
        self,
        dataset: Dataset,
        *,
        num_workers: int = 0,
        prefetch_factor: int = 2,
        multiprocessing_context: Any = None,
        timeout: float = 0,
        worker_init_fn: Callable[[int], None] | None = None,
        convert: Callable[[Any], Any] = _keep,
        base_seed: Callable[[], int] | None = None,
    ) -> None:
        if not isinstance(dataset, Dataset):
            raise TypeError(
                f"a Loader needs a recordkit.data.Dataset, not {type(dataset).__name__}"
            )
        self.num_workers = _count(num_workers, "num_workers", 0)
        self._prefetch = _count(prefetch_factor, "prefetch_factor", 1)
        if timeout < 0:
            raise ValueError(f"timeout must be non-negative, not {timeout!r}")
        self.dataset = dataset
        self._pipeline = dataset._with(_repeat=1)
        self._rank, self._world_size = resolve_rank(dataset._rank, dataset._world_size)
        self._context = multiprocessing_context
        self._timeout = timeout
        self._init = worker_init_fn
        self._convert = convert
        self._base_seed = base_seed or (lambda: random.getrandbits(62))
        # Learn counts once here, so that workers inherit them instead of each opening every file.
        if dataset._equal is not None:
            dataset._catalog.count_all()
        else:
            dataset._catalog.describe()
        self._start(dataset.epoch, dataset._repeat)

    def _slots(self) -> int:
        return max(1, self.num_workers)

    def _workers(self) -> int:
        return self.num_workers

    def _fingerprint(self) -> dict[str, Any]:
        return {
            **self._pipeline._fingerprint(),
            "rank": self._rank,
            "world_size": self._world_size,
        }

    def __len__(self) -> int:
        """The number of items one iteration delivers: for each worker, ``len()`` of the pipeline as that
        worker's shard reads it (each worker batches its own share), summed, times the epochs.

        Raises
        ------
        TypeError
            The pipeline cannot tell its length in advance, or repeats forever.
        """
        if self._epochs is None:
            raise TypeError("the pipeline repeats forever, so a pass over the loader has no length")
        workers = self._slots()
        per_epoch = 0
        for worker in range(workers):
            shard, num_shards = shard_of(self._rank, self._world_size, worker, workers)
            view = self._pipeline._with(_rank=shard, _world_size=num_shards, _epoch=self._epoch)
            per_epoch += len(cast(Sized, view))
        return per_epoch * self._epochs

    def _resume(self) -> Resume | None:
        counts = self._counts
        if not any(counts) and len(counts) == self._slots():
            return None
        return Resume(self._epoch, len(counts), {w: (self._epoch, n) for w, n in enumerate(counts)})

    def _first_turn(self, resume: Resume | None) -> int:
        """The worker whose turn it is when a pass resumes with as many workers as saved the state.

        The workers' items are taken in turns, so the counts of the workers still going are ``k + 1`` up
        to the next in turn and ``k`` from it on; a finished worker (fewer) says it is done when asked.
        """
        if resume is None or resume.workers != self.num_workers:
            return 0
        counts = self._counts
        return next((w for w, n in enumerate(counts) if n < counts[0]), 0)

    def _pass(self) -> Iterator[tuple[int, Any]]:
        epoch = self._epoch
        resume = self._resume()
        if self.num_workers == 0:
            for run in plan_runs(self._rank, self._world_size, 0, 1, epoch, epoch + 1, resume):
                for item in run_items(self._pipeline, run):
                    yield run.slot, item
            return
        job = Job(
            self._pipeline,
            self._rank,
            self._world_size,
            epoch,
            epoch + 1,
            resume,
            self._init,
            self._base_seed(),
        )
        pool = WorkerPool(
            job,
            self.num_workers,
            context=self._context,
            prefetch_factor=self._prefetch,
            timeout=self._timeout,
            first_turn=self._first_turn(resume),
        )
        yield from pool


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
