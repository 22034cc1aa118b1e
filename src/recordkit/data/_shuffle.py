"""Seeded randomness for the pipeline: derived seeds, permutations and the shuffle buffer.

Every random choice is a pure function of ``(seed, epoch, shard, purpose)``. Seeds are derived with BLAKE2b,
never from the process id or the clock, so two machines (or a restarted job) make the same choices.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["BufferShuffler", "fed_position"]


_BLOCK = 1024
"""Random slots a :class:`BufferShuffler` draws at a time."""


class BufferShuffler:
    """A shuffle buffer: once full, each new item takes the place of one chosen at random, which comes out.

    Its random choices depend only on its seed and on how many items it has been given, never on how they
    were grouped, so feeding it stream positions (integers) replays, without reading anything, the choices
    it makes over the records themselves. That is what lets a restored pipeline rebuild the buffer
    exactly (:meth:`replay`). The slots are drawn ``1024`` at a time with numpy's ``Generator(PCG64)``.

    Parameters
    ----------
    size
        How many items the buffer holds (at least 1).
    seed
        The seed of its random choices.

    Attributes
    ----------
    pending
        The items currently in the buffer.
    """

    def __init__(self, size: int, seed: int) -> None:
        self.size = size
        self.pending: list[Any] = []
        self._rng = np.random.Generator(np.random.PCG64(seed))
        self._slots: list[int] = []
        self._next = 0
        self._drain: list[int] | None = None

    def _draw(self, n: int) -> list[int]:
        """The next slots (at most ``n``, at least one) of the full buffer's stream of choices."""
        if self._next == len(self._slots):
            self._slots = self._rng.integers(0, self.size, _BLOCK).tolist()
            self._next = 0
        start = self._next
        self._next = stop = min(len(self._slots), start + n)
        return self._slots[start:stop]

    def push(self, item: Any) -> Any | None:
        """Add ``item``; once the buffer is full, return an item chosen at random to emit."""
        out = self.push_many([item])
        return out[0] if out else None

    def push_many(self, items: list[Any]) -> list[Any]:
        """Add ``items`` in order; return what comes out (one item per push once the buffer is full).

        Raises
        ------
        RuntimeError
            The buffer is being drained (:meth:`pop` was called): the stream has ended.
        """
        if self._drain is not None and items:
            raise RuntimeError("a shuffle buffer takes no item once it is being drained")
        pending = self.pending
        room = self.size - len(pending)
        if room > 0:
            pending.extend(items[:room])
            if room >= len(items):
                return []
            items = items[room:]
        out: list[Any] = []
        add = out.append
        done = 0
        while done < len(items):
            slots = self._draw(len(items) - done)
            for item, slot in zip(items[done : done + len(slots)], slots, strict=True):
                add(pending[slot])
                pending[slot] = item
            done += len(slots)
        return out

    def pop(self) -> Any:
        """Remove and return a random item (used to drain the buffer at the end of the stream)."""
        pending = self.pending
        if self._drain is None:
            # The draining order is drawn at once: slot k among the len(pending) - k items left.
            self._drain = self._rng.integers(0, np.arange(len(pending), 0, -1)).tolist()[::-1]
        slot = self._drain.pop()
        pending[slot], pending[-1] = pending[-1], pending[slot]
        return pending.pop()

    def drain(self) -> list[Any]:
        """Remove and return the remaining items, in random order."""
        pop = self.pop
        return [pop() for _ in range(len(self.pending))]

    def replay(self, length: int, emitted: int) -> int:
        """Advance as if positions ``0 .. length-1`` were fed until ``emitted`` positions came out.

        Parameters
        ----------
        length
            The number of positions in the stream.
        emitted
            How many positions had been emitted.

        Returns
        -------
        int
            The next position to feed (``length`` once the stream is exhausted). The positions still
            buffered are in :attr:`pending`.
        """
        if emitted <= 0:
            return 0
        fed = min(length, self.size + emitted)
        self.push_many(list(range(fed)))
        done = max(0, fed - self.size)
        while done < emitted and self.pending:
            self.pop()
            done += 1
        return fed


def fed_position(size: int, seed: int, fed: int, emitted: int) -> int | None:
    """Which item, counted in the order fed, a shuffle buffer emitted ``emitted``-th (from 0).

    ``fed`` is how many items the buffer had been given by then (all, when it emitted it while draining).
    The choices are replayed on positions (see :meth:`BufferShuffler.replay`); ``None`` if it never did.
    """
    shuffler = BufferShuffler(size, seed)
    out = shuffler.push_many(list(range(min(fed, size + emitted + 1))))
    if emitted >= len(out):
        out += shuffler.drain()
    return out[emitted] if emitted < len(out) else None
