"""Seeded randomness for the pipeline: derived seeds, permutations and the shuffle buffer.

Every random choice is a pure function of ``(seed, epoch, shard, purpose)``. Seeds are derived with BLAKE2b,
never from the process id or the clock, so two machines (or a restarted job) make the same choices.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Iterator

import numpy as np

__all__ = ["BufferShuffler", "derive_seed", "permutation"]


def derive_seed(seed: int, *parts: int | str) -> int:
    """Return a 64-bit seed derived from ``seed`` and the labels in ``parts``.

    Parameters
    ----------
    seed
        The user's seed.
    *parts
        What the seed is for, e.g. ``(epoch, "files")``; different parts give independent streams.

    Returns
    -------
    int
        A non-negative integer below ``2**64``.
    """
    text = "/".join(str(p) for p in (seed, *parts)).encode()
    return int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "little")


def permutation(n: int, seed: int, *parts: int | str) -> np.ndarray:
    """Return a random permutation of ``range(n)`` as an int64 array, seeded by ``(seed, *parts)``.

    Uses numpy's ``Generator(PCG64)``, so the result is the same on every machine with the same numpy.
    """
    rng = np.random.Generator(np.random.PCG64(derive_seed(seed, *parts)))
    return rng.permutation(n).astype(np.int64, copy=False)


class BufferShuffler:
    """A shuffle buffer over stream positions.

    The buffer holds positions (integers), not records, so its choices can be replayed without reading
    anything: feeding it the same positions with the same seed makes the same choices. That is what lets a
    restored pipeline rebuild the buffer exactly.

    Parameters
    ----------
    size
        How many positions the buffer holds (at least 1).
    seed
        The seed of its random choices.

    Attributes
    ----------
    pending
        The positions currently in the buffer.
    """

    def __init__(self, size: int, seed: int) -> None:
        self.size = size
        self.pending: list[int] = []
        self._rng = random.Random(seed)

    def push(self, position: int) -> int | None:
        """Add ``position``; once the buffer is full, return a position chosen at random to emit."""
        pending = self.pending
        if len(pending) < self.size:
            pending.append(position)
            return None
        slot = self._rng.randrange(self.size)
        out = pending[slot]
        pending[slot] = position
        return out

    def pop(self) -> int:
        """Remove and return a random position (used to drain the buffer at the end of the stream)."""
        pending = self.pending
        slot = self._rng.randrange(len(pending))
        pending[slot], pending[-1] = pending[-1], pending[slot]
        return pending.pop()

    def drain(self) -> Iterator[int]:
        """Yield the remaining positions in random order."""
        while self.pending:
            yield self.pop()

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
        done = 0
        position = 0
        while done < emitted and position < length:
            if self.push(position) is not None:
                done += 1
            position += 1
        while done < emitted and self.pending:
            self.pop()
            done += 1
        return position
