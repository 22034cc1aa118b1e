"""The per-item stages of a pipeline (map, filter, batch, unbatch), run in the order they were called.

Besides running them, this module knows what they do to counts: how many items come out of ``n``
(:func:`length`), and how to skip the first items of their output on resume (:func:`plan_skip`) without
running the stages on what is skipped where the counts allow it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import closing
from dataclasses import dataclass
from typing import Any

__all__ = [
    "Batch",
    "Filter",
    "Map",
    "Stage",
    "Unbatch",
    "apply",
    "describe",
    "drop",
    "is_batched",
    "length",
    "plan_skip",
    "unknown_length",
]


@dataclass(frozen=True)
class Map:
    """``fn(item)`` for every item."""

    fn: Callable[[Any], Any]


@dataclass(frozen=True)
class Filter:
    """The items for which ``fn(item)`` is true."""

    fn: Callable[[Any], Any]


@dataclass(frozen=True)
class Batch:
    """Lists of ``size`` items (the last one shorter unless ``drop_last``)."""

    size: int
    drop_last: bool


@dataclass(frozen=True)
class Unbatch:
    """The elements of every item (a list, tuple, array, or a dict of equally long columns)."""


Stage = Map | Filter | Batch | Unbatch

_UNKNOWN = {
    Filter: "filter(): the number of items it keeps is known only by running it on them",
    Unbatch: "unbatch(): the number of elements in each item is known only by reading them",
}


def describe(stage: Stage) -> str:
    """The stage as it was called, for ``repr``."""
    if isinstance(stage, Batch):
        return f"batch({stage.size}, drop_last={stage.drop_last})"
    if isinstance(stage, Unbatch):
        return "unbatch()"
    name = "map" if isinstance(stage, Map) else "filter"
    return f"{name}({getattr(stage.fn, '__name__', stage.fn)!s})"


def is_batched(stages: Sequence[Stage]) -> bool:
    """Whether the last of the stages that batch or unbatch batches."""
    for stage in reversed(stages):
        if isinstance(stage, (Batch, Unbatch)):
            return isinstance(stage, Batch)
    return False


def _mapped(items: Iterator[Any], fn: Callable[[Any], Any]) -> Iterator[Any]:
    with closing(items):  # type: ignore[type-var]
        for item in items:
            yield fn(item)


def _filtered(items: Iterator[Any], fn: Callable[[Any], Any]) -> Iterator[Any]:
    with closing(items):  # type: ignore[type-var]
        for item in items:
            if fn(item):
                yield item


def _batched(items: Iterator[Any], size: int, drop_last: bool) -> Iterator[list[Any]]:
    batch: list[Any] = []
    with closing(items):  # type: ignore[type-var]
        for item in items:
            batch.append(item)
            if len(batch) == size:
                yield batch
                batch = []
    if batch and not drop_last:
        yield batch


def _rows(item: Any) -> Iterator[Any]:
    if isinstance(item, Mapping):
        scalars = sorted(str(key) for key, column in item.items() if not hasattr(column, "__len__"))
        if scalars:
            raise TypeError(
                f"unbatch() needs a dict of columns (lists or arrays), but {scalars} hold single values"
            )
        sizes = {len(column) for column in item.values()}
        if len(sizes) > 1:
            raise ValueError(
                f"unbatch() needs columns of one length, got lengths {sorted(sizes)} for "
                f"{sorted(item)}"
            )
        for i in range(sizes.pop() if sizes else 0):
            yield {key: column[i] for key, column in item.items()}
    elif isinstance(item, (str, bytes, bytearray)) or not hasattr(item, "__iter__"):
        raise TypeError(
            f"unbatch() needs lists, tuples, arrays or dicts of columns, not {type(item).__name__}"
        )
    else:
        yield from item


def _unbatched(items: Iterator[Any]) -> Iterator[Any]:
    with closing(items):  # type: ignore[type-var]
        for item in items:
            yield from _rows(item)


def apply(items: Iterator[Any], stages: Sequence[Stage]) -> Iterator[Any]:
    """Run ``stages`` over ``items``, in order; closing the result closes ``items``."""
    for stage in stages:
        if isinstance(stage, Map):
            items = _mapped(items, stage.fn)
        elif isinstance(stage, Filter):
            items = _filtered(items, stage.fn)
        elif isinstance(stage, Batch):
            items = _batched(items, stage.size, stage.drop_last)
        else:
            items = _unbatched(items)
    return items


def drop(items: Iterator[Any], n: int) -> Iterator[Any]:
    """``items`` without the first ``n``."""
    with closing(items):  # type: ignore[type-var]
        for _ in range(n):
            if next(items, _NOTHING) is _NOTHING:
                return
        yield from items


_NOTHING = object()


def plan_skip(stages: Sequence[Stage], items: int) -> tuple[int, int, int]:
    """How to leave out the first ``items`` outputs of ``stages``.

    Returns
    -------
    records, cut, dropped
        Skip ``records`` records at the source; run ``stages[:cut]``; drop the first ``dropped`` items they
        give; then run ``stages[cut:]``. Records are skipped at the source (no stage runs on them) when
        every stage has a known count; otherwise the stages up to the last ``filter`` or ``unbatch`` run on
        the skipped part, and the stages after it do not.
    """
    cut = 0
    for k, stage in enumerate(stages):
        if isinstance(stage, (Filter, Unbatch)):
            cut = k + 1
    per_item = math.prod(s.size for s in stages[cut:] if isinstance(s, Batch))
    if cut == 0:
        return items * per_item, 0, 0
    return 0, cut, items * per_item


def unknown_length(stages: Sequence[Stage]) -> str | None:
    """Why the stages' output count cannot be known in advance, or ``None`` if it can."""
    for stage in stages:
        reason = _UNKNOWN.get(type(stage))
        if reason is not None:
            return f"len() is unknown after {reason}"
    return None


def length(stages: Sequence[Stage], n: int) -> int:
    """The number of items ``stages`` make of ``n`` records (see :func:`unknown_length` first)."""
    for stage in stages:
        if isinstance(stage, Batch):
            n = n // stage.size if stage.drop_last else -(-n // stage.size)
        elif not isinstance(stage, Map):
            raise TypeError(unknown_length([stage]))
    return n
