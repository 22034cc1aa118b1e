"""Seeds of the pipeline's random choices: each a pure function of ``(seed, epoch, shard, purpose)``.

:func:`derive_seed` labels independent streams of one user seed; :func:`permutation` draws a permutation
from one. Neither depends on the process id or the clock, so every rank and worker that asks the same
question gets the same answer.
"""

from __future__ import annotations

import hashlib

import numpy as np

__all__ = ["derive_seed", "permutation"]


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
