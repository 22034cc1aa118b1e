"""The per-item stages of a pipeline (map, filter, batch, unbatch), run in the order they were called.

Besides running them, this module knows what they do to counts: how many items come out of ``n``
(:func:`length`), and how to skip the first items of their output on resume (:func:`plan_skip`) without
running the stages on what is skipped where the counts allow it.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "Batch",
    "Filter",
    "Map",
    "Stage",
    "Unbatch",
    "describe",
    "is_batched",
    "length",
    "plan_skip",
    "run",
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


class _Pull:
    """A stage of a running pipeline: :meth:`take` gives its next items, a list at a time.

    ``take(n)`` returns at most ``n`` items, and an empty list only at the end; it pulls from the stage
    below no more items than the ``n`` asked for need (a filter: until enough pass), so user functions run
    on the same items, in the same order, as with one item at a time. When something fails partway, the
    items made before the failure are returned first and the error is raised by the next call.
    """

    def __init__(self, src: _Pull | None) -> None:
        self.src = src
        self._error: Exception | None = None

    def take(self, n: int) -> list[Any]:
        """The next items, at most ``n``; an empty list at the end."""
        if self._error is not None:
            error, self._error = self._error, None
            raise error
        out: list[Any] = []
        try:
            self._fill(out, n)
        except Exception as exc:
            if not out:
                raise
            self._error = exc
        return out

    def _fill(self, out: list[Any], n: int) -> None:
        raise NotImplementedError

    def close(self) -> None:
        """Close the stages below (and the readers at the bottom)."""
        if self.src is not None:
            self.src.close()


class _Chunks(_Pull):
    """The items of an iterator of lists (a file source's records, read ahead a list at a time)."""

    def __init__(self, chunks: Iterator[list[Any]]) -> None:
        super().__init__(None)
        self._chunks = chunks
        self._buf: list[Any] = []
        self._at = 0

    def take(self, n: int) -> list[Any]:
        buf, at = self._buf, self._at
        while at >= len(buf):
            nxt = next(self._chunks, None)
            if nxt is None:
                return []
            buf, at = nxt, 0
        if at == 0 and len(buf) <= n:
            self._buf, self._at = [], 0
            return buf  # handed over whole: never touched here again
        out = buf[at : at + n]
        self._buf, self._at = buf, at + len(out)
        return out

    def close(self) -> None:
        close = getattr(self._chunks, "close", None)
        if close is not None:
            close()


class _Items(_Pull):
    """The items of an iterator, pulled only as asked (another pipeline's items: a mix's)."""

    def __init__(self, items: Iterator[Any]) -> None:
        super().__init__(None)
        self._items = items

    def _fill(self, out: list[Any], n: int) -> None:
        out.extend(itertools.islice(self._items, n))

    def close(self) -> None:
        close = getattr(self._items, "close", None)
        if close is not None:
            close()


class _Mapped(_Pull):
    def __init__(self, src: _Pull, fn: Callable[[Any], Any]) -> None:
        super().__init__(src)
        self.fn = fn

    def _fill(self, out: list[Any], n: int) -> None:
        assert self.src is not None
        out.extend(map(self.fn, self.src.take(n)))


class _Filtered(_Pull):
    def __init__(self, src: _Pull, fn: Callable[[Any], Any]) -> None:
        super().__init__(src)
        self.fn = fn

    def _fill(self, out: list[Any], n: int) -> None:
        assert self.src is not None
        take, fn = self.src.take, self.fn
        while len(out) < n:
            items = take(n - len(out))
            if not items:
                return
            out.extend(item for item in items if fn(item))


class _Batched(_Pull):
    def __init__(self, src: _Pull, size: int, drop_last: bool) -> None:
        super().__init__(src)
        self.size = size
        self.drop_last = drop_last

    def _fill(self, out: list[Any], n: int) -> None:
        assert self.src is not None
        take, size = self.src.take, self.size
        while len(out) < n:
            batch = take(size)
            if not batch:
                return
            while len(batch) < size:
                more = take(size - len(batch))
                if not more:
                    if not self.drop_last:
                        out.append(batch)
                    return
                batch.extend(more)
            out.append(batch)


class _Unbatched(_Pull):
    def __init__(self, src: _Pull) -> None:
        super().__init__(src)
        self._rows: list[Any] = []
        self._at = 0
        self._after: Exception | None = None

    def _fill(self, out: list[Any], n: int) -> None:
        assert self.src is not None
        while len(out) < n:
            rows, at = self._rows, self._at
            if at >= len(rows):
                if self._after is not None:
                    error, self._after = self._after, None
                    raise error
                items = self.src.take(1)
                if not items:
                    return
                rows, at = [], 0
                try:
                    rows.extend(_rows(items[0]))
                except Exception as exc:
                    if not rows:
                        raise
                    self._after = exc  # the item's first rows come out before its error
                self._rows = rows
            k = min(n - len(out), len(rows) - at)
            out.extend(rows[at : at + k])
            self._at = at + k


class _Dropped(_Pull):
    def __init__(self, src: _Pull, n: int) -> None:
        super().__init__(src)
        self._left = n

    def _fill(self, out: list[Any], n: int) -> None:
        assert self.src is not None
        while self._left:
            items = self.src.take(min(self._left, _DROP_AT_ONCE))
            if not items:
                return
            self._left -= len(items)
        out.extend(self.src.take(n))


_DROP_AT_ONCE = 1024


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


def _stage(src: _Pull, stage: Stage) -> _Pull:
    if isinstance(stage, Map):
        return _Mapped(src, stage.fn)
    if isinstance(stage, Filter):
        return _Filtered(src, stage.fn)
    if isinstance(stage, Batch):
        return _Batched(src, stage.size, stage.drop_last)
    return _Unbatched(src)


def run(
    source: Iterator[Any], stages: Sequence[Stage], *, chunks: bool, cut: int = 0, dropped: int = 0
) -> Iterator[Any]:
    """The items of ``stages`` run over ``source``; closing the result closes ``source``.

    ``source`` gives lists of records when ``chunks`` (a file source, which reads ahead at no cost), else
    single items (pulled only as the stages need them). ``stages[:cut]`` run first and the first
    ``dropped`` of their items are left out (see :func:`plan_skip`). Records travel between the stages in
    lists, so a batch costs a few calls rather than a few per record; map and filter still call their
    function once per item, on exactly the items that iteration one at a time would give them.
    """
    top: _Pull = _Chunks(source) if chunks else _Items(source)
    for k, stage in enumerate(stages):
        if k == cut and dropped:
            top = _Dropped(top, dropped)
        top = _stage(top, stage)
    if cut == len(stages) and dropped:
        top = _Dropped(top, dropped)
    # Without stages, the records come out a list at a time as read; otherwise an item is made only
    # when asked for (a user function runs on no item ahead of the consumer, nothing more is read).
    return _delivered(top, _WHOLE if chunks and not stages else 1)


_WHOLE = 1 << 62


def _delivered(top: _Pull, step: int) -> Iterator[Any]:
    try:
        while True:
            items = top.take(step)
            if not items:
                return
            yield from items
    finally:
        top.close()


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
