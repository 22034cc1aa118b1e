"""A shared epoch counter for the workers of a PyTorch ``DataLoader`` over a pipeline.

A plain ``DataLoader`` starts its workers (or reuses persistent ones) without telling its dataset which
iteration they serve; :class:`EpochClock` lets them agree on the epoch of each iteration through shared
memory made in the main process. It needs no PyTorch: the caller passes the iteration's key.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.context
from typing import Any

__all__ = ["SEED_MASK", "EpochClock"]


# Cells of an EpochClock: the epoch the next iteration starts in, the slot of the newest iteration, then
# for each of the last _SLOTS iterations: its key (two cells), its first epoch, and how many workers joined.
_NEXT, _NEWEST, _HEADER, _SLOTS, _SLOT_CELLS = 0, 1, 2, 4, 4
_NO_KEY = -1
SEED_MASK = 2**63 - 1
"""Keys hold torch's base seed masked to a non-negative int64."""


def _shared_clock(cells: Any) -> EpochClock:
    clock = EpochClock.__new__(EpochClock)
    clock._cells = cells
    return clock


class EpochClock:
    """Which epoch each DataLoader iteration reads, agreed on by every worker of that iteration.

    The cells live in shared memory made in the main process, so every worker process (forked or spawned,
    persistent or not) reads and advances the same clock. A worker recognises the iteration it belongs to
    by a key that all the workers of one iteration share and the next iteration does not: torch's base
    seed of the iteration (``get_worker_info().seed - id``) and how many iterations this worker process
    has started (1 for non-persistent workers, counting up for persistent ones, whose seed never changes).
    The first worker of an iteration takes the next epoch; its siblings find the iteration by its key.
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
