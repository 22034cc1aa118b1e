"""What each worker of a loader reads in one iteration: its runs of epochs, resumed where they stopped.

A worker's share of an iteration is one or more :class:`Run` s: the streams that saved workers left
unfinished (when resuming, possibly saved with another number of workers), then its own shard from the
next epoch on. Both the PyTorch glue and recordkit's own worker processes plan and read runs with this
module, so they split and resume an epoch in exactly the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from recordkit.datasets.plan import shard_of

if TYPE_CHECKING:
    from recordkit.data._dataset import Dataset

__all__ = ["Resume", "Run", "plan_runs", "run_items"]


@dataclass(frozen=True)
class Resume:
    """Where a restored iteration continues: the streams of the workers that saved it.

    ``positions`` maps a saved worker to ``(epoch, items delivered in it)``. Each saved worker's stream is
    finished by the current worker ``saved % num_workers``, with the shard layout it was saved with; later
    epochs use the current layout.
    """

    first_epoch: int
    workers: int
    positions: dict[int, tuple[int, int]]


@dataclass(frozen=True)
class Run:
    """Epochs of one shard read in a row: ``epochs`` of them (``None``: forever) from ``epoch``.

    ``slot`` is the stream the items are counted against: the worker that reads them, or the saved worker
    whose unfinished stream they complete.
    """

    slot: int
    shard: int
    num_shards: int
    epoch: int
    skip: int
    epochs: int | None


def plan_runs(
    rank: int,
    world_size: int,
    worker: int,
    num_workers: int,
    first: int,
    end: int | None,
    resume: Resume | None,
) -> list[Run]:
    """The runs ``worker`` of ``num_workers`` reads in an iteration from epoch ``first`` to ``end``."""
    runs = []
    start = first
    if resume is not None:
        for saved in sorted(resume.positions):
            epoch, skip = resume.positions[saved]
            start = max(start, epoch + 1)
            if saved % num_workers != worker or (end is not None and epoch >= end):
                continue
            shard, num_shards = shard_of(rank, world_size, saved, resume.workers)
            runs.append(Run(saved, shard, num_shards, epoch, skip, 1))
    if end is None or start < end:
        shard, num_shards = shard_of(rank, world_size, worker, num_workers)
        epochs = None if end is None else end - start
        runs.append(Run(worker, shard, num_shards, start, 0, epochs))
    return runs


def run_items(
    dataset: Dataset, run: Run, on_epoch: Callable[[int], None] | None = None
) -> Iterator[Any]:
    """The items of ``run``; ``on_epoch(epoch)`` is called as each of its epochs starts."""
    from recordkit.data._dataset import EPOCH_END

    epoch = run.epoch
    if on_epoch is not None:
        on_epoch(epoch)
    items = dataset._items(run.shard, run.num_shards, run.epoch, run.epoch, run.skip, run.epochs)
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
