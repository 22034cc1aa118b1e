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

from recordkit.errors import DecodeError, NoLengthError
from recordkit.support.seeding import seeded

__all__ = [
    "Batch",
    "Filter",
    "Locate",
    "Map",
    "Stage",
    "EPOCH_END",
    "EpochEnd",
    "Unbatch",
    "check_callable",
    "check_int",
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

Locate = Callable[[int], tuple[str, int] | None]
"""Where the record at a position of the source came from: its file and its index there, or ``None``."""

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

    After ``take``, :attr:`where` says where each item returned came from, for naming a record in an
    error: per item, the source position of a record (an int), or a sequence of them (a batch's records);
    ``None`` when a stage below cannot tell (unbatch, another pipeline's items) or the take was cut short
    by an error. It is worked out when asked, so that pulling one item at a time costs nothing more.
    """

    def __init__(self, src: _Pull | None) -> None:
        self.src = src
        self._error: Exception | None = None
        self._where: Sequence[Any] | None = None

    @property
    def where(self) -> Sequence[Any] | None:
        """Where the items of the last :meth:`take` came from (see above)."""
        return None if self._error is not None else self._places()

    def _places(self) -> Sequence[Any] | None:
        return self._where

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
        """Append the next items to ``out`` (and note where they came from, unless :meth:`_places` can tell)."""
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
        # Records in the lists before ``_buf``; the last take was ``_buf[_from:_at]`` (so where it came
        # from is known without a cost per take).
        self._base = 0
        self._from = 0

    def take(self, n: int) -> list[Any]:
        buf, at = self._buf, self._at
        while at >= len(buf):
            nxt = next(self._chunks, None)
            if nxt is None:
                return []
            self._base += len(buf)
            buf, at = nxt, 0
        if at == 0 and len(buf) <= n:
            self._base += len(buf)
            self._buf, self._at, self._from = [], 0, -len(buf)
            return buf  # handed over whole: never touched here again
        out = buf[at : at + n]
        self._buf, self._at, self._from = buf, at + len(out), at
        return out

    def _places(self) -> Sequence[Any] | None:
        return range(self._base + self._from, self._base + self._at)

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
    def __init__(
        self, src: _Pull, fn: Callable[[Any], Any], locate: Locate | None, seed: int | None
    ) -> None:
        super().__init__(src)
        self.fn = fn
        self.locate = locate
        self.seed = seed

    def _fill(self, out: list[Any], n: int) -> None:
        assert self.src is not None
        items = self.src.take(n)
        try:
            with seeded(self.seed):  # the random crops and flips of rk.Image
                out.extend(map(self.fn, items))
        except DecodeError as exc:
            at = self.src.where
            if at is not None and self.locate is not None:
                _locate(exc, at[len(out)], self.locate)
            raise

    def _places(self) -> Sequence[Any] | None:
        assert self.src is not None
        return self.src.where


class _Filtered(_Pull):
    def __init__(self, src: _Pull, fn: Callable[[Any], Any]) -> None:
        super().__init__(src)
        self.fn = fn

    def _fill(self, out: list[Any], n: int) -> None:
        assert self.src is not None
        src, fn = self.src, self.fn
        parts: list[Sequence[Any]] | None = []
        self._where = None
        while len(out) < n:
            items = src.take(n - len(out))
            if not items:
                break
            at = src.where
            if at is None or parts is None:
                parts = None
                out.extend(item for item in items if fn(item))
                continue
            keep: list[Any] = []
            try:
                keep.extend(map(fn, items))
            finally:  # what was kept before a failure is still handed on
                out.extend(itertools.compress(items, keep))
            parts.append(_kept(at, keep))
        self._where = None if parts is None else _joined(*parts)


class _Batched(_Pull):
    def __init__(self, src: _Pull, size: int, drop_last: bool) -> None:
        super().__init__(src)
        self.size = size
        self.drop_last = drop_last

    def _fill(self, out: list[Any], n: int) -> None:
        assert self.src is not None
        src, size = self.src, self.size
        where: list[Any] = []
        self._where = None
        while len(out) < n:
            batch = src.take(size)
            if not batch:
                break
            places = src.where
            while len(batch) < size:
                more = src.take(size - len(batch))
                if not more:
                    break
                batch.extend(more)
                places = _joined(places, src.where)
            if len(batch) < size and self.drop_last:
                break
            out.append(batch)
            where.append(places)
            if len(batch) < size:
                break
        self._where = None if None in where else where


def _joined(*parts: Sequence[Any] | None) -> Sequence[Any] | None:
    """The places of items made of several takes, one after the other (``None`` if one is unknown).

    A range while the records are consecutive; otherwise a list, made only when an error asks for it.
    """
    if None in parts:
        return None
    if not parts:
        return ()
    if len(parts) == 1:
        return parts[0]
    if all(isinstance(p, range) for p in parts) and all(
        a.stop == b.start  # type: ignore[union-attr]
        for a, b in itertools.pairwise(parts)
    ):
        return range(parts[0].start, parts[-1].stop)  # type: ignore[union-attr]
    return _Lazy(lambda: [place for part in parts for place in part])  # type: ignore[union-attr]


class _Lazy(Sequence[Any]):
    """A list of places made on first use (only an error uses it)."""

    def __init__(self, make: Callable[[], list[Any]]) -> None:
        self._make: Callable[[], list[Any]] | None = make
        self._list: list[Any] = []

    def _get(self) -> list[Any]:
        if self._make is not None:
            self._list, self._make = self._make(), None
        return self._list

    def __len__(self) -> int:
        return len(self._get())

    def __getitem__(self, i: Any) -> Any:
        return self._get()[i]


def _kept(at: Sequence[Any], keep: list[Any]) -> _Lazy:
    """The places of the items a filter kept: those of ``at`` whose ``keep`` is true."""
    return _Lazy(lambda: list(itertools.compress(at, keep)))


def _locate(exc: DecodeError, place: Any, locate: Locate) -> None:
    """Name the file and record of ``exc``, raised for an item from ``place`` (see :attr:`_Pull.where`)."""
    if exc.path is not None:
        return
    if not isinstance(place, int):
        index = exc.index
        if index is None or not 0 <= index < len(place) or not isinstance(place[index], int):
            return
        place = place[index]
    found = locate(place)
    if found is not None:
        exc.locate(*found)


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

    def _places(self) -> Sequence[Any] | None:
        assert self.src is not None
        return self.src.where


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


def _stage(src: _Pull, stage: Stage, locate: Locate | None, seed: int | None) -> _Pull:
    if isinstance(stage, Map):
        return _Mapped(src, stage.fn, locate, seed)
    if isinstance(stage, Filter):
        return _Filtered(src, stage.fn)
    if isinstance(stage, Batch):
        return _Batched(src, stage.size, stage.drop_last)
    return _Unbatched(src)


def run(
    source: Iterator[Any],
    stages: Sequence[Stage],
    *,
    chunks: bool,
    cut: int = 0,
    dropped: int = 0,
    locate: Locate | None = None,
    seed: int | None = None,
) -> Iterator[Any]:
    """The items of ``stages`` run over ``source``; closing the result closes ``source``.

    ``source`` gives lists of records when ``chunks`` (a file source, which reads ahead at no cost), else
    single items (pulled only as the stages need them). ``stages[:cut]`` run first and the first
    ``dropped`` of their items are left out (see :func:`plan_skip`). Records travel between the stages in
    lists, so a batch costs a few calls rather than a few per record; map and filter still call their
    function once per item, on exactly the items that iteration one at a time would give them.

    ``locate`` (a file source's :meth:`~recordkit.data._files.Trail.locate`) tells where the record at a
    position of ``source`` (counting its records from 0) came from: a map function's
    :class:`~recordkit.errors.DecodeError` for a record, or for a record of a batch (its ``index``), is
    then made to name the file and the record's index there (:meth:`~recordkit.errors.DecodeError.locate`).
    ``seed`` is the seed of the random image transforms while map functions run
    (:func:`~recordkit.support.seeding.seeded`).
    """
    top: _Pull = _Chunks(source) if chunks else _Items(source)
    for k, stage in enumerate(stages):
        if k == cut and dropped:
            top = _Dropped(top, dropped)
        top = _stage(top, stage, locate if chunks else None, seed)
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
            raise NoLengthError(unknown_length([stage]))
    return n


def check_int(value: object, what: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{what} must be an int of at least {minimum}, not {value!r}")
    return value


def check_callable(fn: object, stage: str) -> None:
    if not callable(fn):
        raise TypeError(f"{stage} needs a callable, not {type(fn).__name__}")


class EpochEnd:
    """Marks the end of an epoch in the internal item stream (never reaches users)."""


EPOCH_END = EpochEnd()
