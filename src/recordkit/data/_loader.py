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
from recordkit.data._state import Elastic
from recordkit.data._workers import Job, WorkerPool
from recordkit.data.loading import IndexShare, Passes, Resume, Share, _keep

__all__ = ["Loader", "loader"]


class Loader(Passes):
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
        convert: Callable[[Any], Any] = _keep,
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
        self._start(self._share.first_epoch, self._share.epochs)

    def _slots(self) -> int:
        return self._share.slots(self.num_workers)

    def _check_streams(self, streams: int) -> None:
        self._share.check_streams(streams)

    def _workers(self) -> int:
        return self.num_workers

    def _fingerprint(self) -> dict[str, Any]:
        return self._share.fingerprint()

    def _elastic_state(self) -> dict[str, Any] | None:
        return self._share.elastic_state(self._epoch)

    def _restore_elastic(self, elastic: Elastic | None) -> None:
        self._share.restore_elastic(elastic)

    def _merge(self, states: Sequence[Mapping[str, Any]]) -> tuple[int, int, Elastic | None]:
        return self._share.merge(states)

    def __len__(self) -> int:
        """The number of items one iteration delivers: for each worker, ``len()`` of the pipeline as that
        worker's shard reads it (each worker batches its own share), summed, over the epochs.

        Raises
        ------
        TypeError
            The pipeline cannot tell its length in advance, or repeats forever.
        """
        return self._share.length(self._epoch, self._slots())

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

    def state_dict(self) -> dict[str, Any]:
        """The position (see :class:`~recordkit.data.loading.Passes`), and, for a pipeline that skips
        damage, what it skipped so far in the epoch, in every worker (``"skipped"``, as
        :meth:`Dataset.state_dict <recordkit.data.Dataset.state_dict>` counts it)."""
        damage = self._share.damage
        return {**super().state_dict(), "skipped": None if damage is None else damage.summary()}

    def _damaged(self, events: list[dict[str, Any]]) -> None:
        """Count and warn about what a worker skipped (raising past ``max_skipped``, in all workers)."""
        damage = self._share.damage
        assert damage is not None
        damage.receive(events)

    def _pass(self) -> Iterator[tuple[int, Any]]:
        epoch = self._epoch
        resume = self._resume()
        damage = self._share.damage
        if damage is not None:
            damage.begin(epoch)
        if self.num_workers == 0:
            for run in self._share.runs(0, 1, epoch, epoch + 1, resume):
                for item in self._share.items(run):
                    yield run.slot, item
            return
        job = Job(self._share, epoch, epoch + 1, resume, self._init, self._base_seed())
        pool = WorkerPool(
            job,
            self.num_workers,
            context=self._context,
            prefetch_factor=self._prefetch,
            timeout=self._timeout,
            first_turn=self._first_turn(resume),
            on_damage=self._damaged,
        )
        try:
            yield from pool
        finally:
            if damage is not None:  # holes whose workers did not report their reader's close
                damage.warn_all()


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
