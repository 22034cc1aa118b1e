"""The seed of random choices made while a pipeline's functions run (the random crops of ``rk.Image``).

A :class:`~recordkit.data.Dataset` sets it, from its seed and the epoch, around each ``map`` call, so that
code below the pipeline (decoding) draws reproducible numbers without being passed a seed.
"""

from __future__ import annotations

import contextvars
from typing import Final

__all__ = ["current_seed", "seeded"]

_SEED: Final[contextvars.ContextVar[int | None]] = contextvars.ContextVar(
    "recordkit_seed", default=None
)


class seeded:  # lower case: used as a function, ``with seeded(seed):``
    """Within the block, random crops and flips are a function of ``seed`` and each record's bytes.

    ``None`` (as outside any block) draws fresh entropy for each batch. A class rather than a generator,
    because a pipeline enters it around every ``map`` call: this costs a fraction of a microsecond.
    """

    __slots__ = ("_seed", "_token")

    def __init__(self, seed: int | None) -> None:
        self._seed = None if seed is None else int(seed)

    def __enter__(self) -> None:
        self._token = _SEED.set(self._seed)

    def __exit__(self, *exc: object) -> None:
        _SEED.reset(self._token)


def current_seed() -> int | None:
    """The seed :func:`seeded` set for this thread or task, or ``None``."""
    return _SEED.get()
