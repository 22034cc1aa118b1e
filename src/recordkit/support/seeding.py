"""The seed of random choices made while a pipeline's functions run (the random crops of ``rk.Image``).

A :class:`~recordkit.data.Dataset` sets it, from its seed and the epoch, around each ``map`` call, so that
code below the pipeline (decoding) draws reproducible numbers without being passed a seed.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from typing import Final

__all__ = ["current_seed", "seeded"]

_SEED: Final[contextvars.ContextVar[int | None]] = contextvars.ContextVar(
    "recordkit_seed", default=None
)


@contextlib.contextmanager
def seeded(seed: int | None) -> Iterator[None]:
    """Within the block, random crops and flips are a function of ``seed`` and each record's bytes.

    ``None`` (as outside any block) draws fresh entropy for each batch.
    """
    token = _SEED.set(None if seed is None else int(seed))
    try:
        yield
    finally:
        _SEED.reset(token)


def current_seed() -> int | None:
    """The seed :func:`seeded` set for this thread or task, or ``None``."""
    return _SEED.get()
