"""Weighted, deterministic, resumable sampling from several datasets: :func:`mix`.

Each item of a mix comes from a source drawn at random with the given weights. The draws are a pure function
of ``(seed, epoch, shard)``: one uniform number per item delivered, so a resumed mix replays the draws of the
items already delivered, without reading them, and each source skips exactly what it had given.

A source that repeats reads its epochs one after the other inside each epoch of the mix: with ``repeat(k)``,
epoch ``E`` of the mix reads its epochs ``E*k`` to ``E*k + k - 1``, as the source alone would over ``E``
passes; with ``repeat()`` it counts as ``2**32`` epochs, so it never runs out (unless an epoch of its shard
is empty, where a dataset repeated forever stops too) and epochs of the mix never share an epoch of it.
"""

from __future__ import annotations

import bisect
import json
import math
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, closing
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from recordkit.data._dataset import Dataset
from recordkit.data._readers import ReaderPool
from recordkit.datasets.seeds import derive_seed
from recordkit.errors import NoLengthError

if TYPE_CHECKING:
    from recordkit.data._readers import Catalog

__all__ = ["Stop", "mix"]

Stop = Literal["first_exhausted", "all_exhausted"]

_DRAWS = 4096
"""Uniform numbers drawn from the generator at a time (the sequence does not depend on it)."""

FOREVER = 2**32
"""The epochs a dataset that repeats forever reads in one epoch of a mix."""


class _Draws:
    """The uniform numbers of ``(seed, epoch, shard)``, one per item of the mix, in order."""

    def __init__(self, seed: int, epoch: int, shard: int) -> None:
        self._rng = np.random.Generator(np.random.PCG64(derive_seed(seed, epoch, shard, "mix")))
        self._block = np.empty(0)
        self._at = 0

    def __iter__(self) -> Iterator[float]:
        return self

    def __next__(self) -> float:
        if self._at == len(self._block):
            self._block, self._at = self._rng.random(_DRAWS), 0
        self._at += 1
        return float(self._block[self._at - 1])

    def picks(self, n: int, picker: _Picker) -> np.ndarray:
        """How many of the next ``n`` draws fall on each source, with no source dropped meanwhile."""
        counts = np.zeros(len(picker.weights), dtype=np.int64)
        while n:
            if self._at == len(self._block):
                self._block, self._at = self._rng.random(_DRAWS), 0
            chunk = self._block[self._at : self._at + n]
            self._at += len(chunk)
            n -= len(chunk)
            counts += np.bincount(picker.pick_many(chunk), minlength=len(counts))
        return counts


class _Picker:
    """Chooses a source for a uniform number, among the sources still active, by weight."""

    def __init__(self, weights: Sequence[float]) -> None:
        self.weights = list(weights)
        self._active = [w > 0 for w in weights]
        self._update()

    def _update(self) -> None:
        self._index = [j for j, on in enumerate(self._active) if on]
        cumulative = np.cumsum([self.weights[j] for j in self._index]).tolist()
        self._cumulative = cumulative
        self._total = cumulative[-1] if cumulative else 0.0

    def pick(self, u: float) -> int | None:
        """The source ``u`` (in ``[0, 1)``) falls on, or ``None`` when no source is left."""
        if not self._index:
            return None
        k = bisect.bisect_right(self._cumulative, u * self._total)
        return self._index[min(k, len(self._index) - 1)]

    def pick_many(self, us: np.ndarray) -> np.ndarray:
        """:meth:`pick` of every number of ``us`` at once (some source must be active)."""
        k = np.searchsorted(np.asarray(self._cumulative), us * self._total, side="right")
        return np.asarray(self._index)[np.minimum(k, len(self._index) - 1)]

    def drop(self, j: int) -> None:
        """Source ``j`` is exhausted: share its weight among the others."""
        self._active[j] = False
        self._update()


class _MixCatalog:
    """The files of every source, as the PyTorch glue sees them (it learns their counts up front)."""

    def __init__(self, datasets: Sequence[Dataset]) -> None:
        self._catalogs: list[Catalog] = [d._catalog for d in datasets]

    @property
    def files(self) -> list[str]:
        """Every source's files, source after source."""
        return [f for c in self._catalogs for f in c.files]

    def __len__(self) -> int:
        return sum(len(c) for c in self._catalogs)

    def describe(self, pool: ReaderPool | None = None) -> None:
        """Learn every source's counts (see :meth:`Catalog.describe`)."""
        for catalog in self._catalogs:
            catalog.describe()

    def count_all(self, pool: ReaderPool | None = None) -> None:
        """Count every source's records (see :meth:`Catalog.count_all`)."""
        for catalog in self._catalogs:
            catalog.count_all()


@dataclass(frozen=True, eq=False)
class MixSource:
    """The records of a mix: items of its datasets, each drawn from a source chosen by weight."""

    datasets: tuple[Dataset, ...]
    weights: tuple[float, ...]
    seed: int
    stop: Stop
    equal: None = None

    @property
    def catalog(self) -> _MixCatalog:
        """The sources' files."""
        return _MixCatalog(self.datasets)

    def replace(self, **changes: Any) -> MixSource:
        """A copy with ``changes``."""
        return replace(self, **changes)

    def __repr__(self) -> str:
        weights = ", ".join(f"{w:g}" for w in self.weights)
        return f"mix({len(self.datasets)} datasets, weights=[{weights}], seed={self.seed}, stop={self.stop!r})"

    def fingerprint(self) -> dict[str, Any]:
        """What must match for a saved position to apply, the sources' own included."""
        sources = [{**d._fingerprint(), "repeat": d._repeat} for d in self.datasets]
        return {
            "seed": self.seed,
            "files": len(self.catalog),
            "shuffle": None,
            "equal_shards": None,
            "mix": json.dumps(
                {"weights": list(self.weights), "stop": self.stop, "sources": sources},
                sort_keys=True,
            ),
        }

    def _choose(self, u: float, picker: _Picker, has_item: Callable[[int], bool]) -> int | None:
        """The source that gives the next item for draw ``u``, or ``None`` when the mix ends."""
        while True:
            j = picker.pick(u)
            if j is None or has_item(j):
                return j
            if self.stop == "first_exhausted":
                return None
            picker.drop(j)

    def _endless(self) -> int | None:
        """A source that makes every epoch of the mix endless, if there is one."""
        forever = [
            j
            for j, (w, d) in enumerate(zip(self.weights, self.datasets, strict=True))
            if w and d._repeat is None
        ]
        weighted = [j for j, w in enumerate(self.weights) if w]
        if self.stop == "all_exhausted" or len(forever) == len(weighted):
            return forever[0] if forever else None
        return None

    def _supplies(self, epoch: int, shard: int, num_shards: int) -> list[_Supply]:
        return [
            _Supply(d, epoch, shard, num_shards) if w else _Supply.empty()
            for w, d in zip(self.weights, self.datasets, strict=True)
        ]

    def length(self, epoch: int, shard: int, num_shards: int) -> int:
        """The number of items the mix gives ``shard`` in ``epoch``, from its sources' lengths.

        Raises
        ------
        TypeError
            A source with a positive weight has no known length, or the mix never ends.
        """
        endless = self._endless()
        if endless is not None:
            raise NoLengthError(
                f"len() of the mix is unknown: its dataset {endless} repeats forever, so the mix never ends"
            )
        supplies = self._supplies(epoch, shard, num_shards)

        def has(j: int, n: int) -> bool:
            known = supplies[j].has(n)
            if known is None:
                raise NoLengthError(
                    f"len() of the mix is unknown: the length of its dataset {j} is unknown "
                    f"({supplies[j].why()})"
                )
            return known

        for i, d in enumerate(self.datasets):
            if d._repeat is not None:
                has(i, 2**62)  # learn every epoch's length (and whether one is unknown) now
        if self.stop == "all_exhausted":
            return sum(s.known for s in supplies)
        # Where the first source runs out depends on the draws: replay them against the lengths.
        taken = [0] * len(supplies)
        picker = _Picker(self.weights)
        for n, u in enumerate(_Draws(self.seed, epoch, shard)):
            j = self._choose(u, picker, lambda j: has(j, taken[j]))
            if j is None:
                return n
            taken[j] += 1
        raise AssertionError("unreachable")  # pragma: no cover - the draws never end

    def records(self, epoch: int, shard: int, num_shards: int, skip: int) -> Iterator[Any]:
        """The items of the mix for ``shard`` in ``epoch``, without the first ``skip``."""
        with ExitStack() as stack:
            opened: dict[int, Iterator[Any]] = {}

            def source(j: int, start: int) -> Iterator[Any]:
                it = _items(self.datasets[j], epoch, shard, num_shards, start)
                stack.callback(it.close)  # type: ignore[attr-defined]
                opened[j] = it
                return it

            draws = _Draws(self.seed, epoch, shard)
            picker = _Picker(self.weights)
            starts = self._skip(skip, draws, picker, epoch, (shard, num_shards), source)
            iterators = [opened.get(j) or source(j, start) for j, start in enumerate(starts)]
            pending: list[Any] = [None]

            def has_item(j: int) -> bool:
                pending[0] = next(iterators[j], _END)
                return pending[0] is not _END

            for u in draws:
                if self._choose(u, picker, has_item) is None:
                    return
                yield pending[0]

    def _skip(
        self,
        skip: int,
        draws: _Draws,
        picker: _Picker,
        epoch: int,
        where: tuple[int, int],
        source: Callable[[int, int], Iterator[Any]],
    ) -> list[int]:
        """Replay the draws of the first ``skip`` items; return how many items each source gave.

        Until a source runs out, every draw gave an item, so nothing is read: with ``"first_exhausted"``
        none ran out before the end of the epoch, and the draws are counted all at once. With
        ``"all_exhausted"``, when a source runs out matters: it is computed from its epochs' lengths, or,
        where one is unknown, the source is read (and its items dropped) to find out; such a source is then
        left open where it stopped.
        """
        if self.stop == "first_exhausted" or not skip:
            return [int(n) for n in draws.picks(skip, picker)]
        taken = [0] * len(self.datasets)
        supplies = self._supplies(epoch, *where)
        read: dict[int, Iterator[Any]] = {}

        def has_item(j: int) -> bool:
            if j not in read:
                known = supplies[j].has(taken[j])
                if known is not None:
                    return known
                read[j] = source(j, 0)
                for _ in range(taken[j]):  # these items exist: the supply said so
                    next(read[j])
            return next(read[j], _END) is not _END

        for _ in range(skip):
            j = self._choose(next(draws), picker, has_item)
            if j is None:
                break
            taken[j] += 1
        return taken


_END = object()


def _epochs(dataset: Dataset, epoch: int) -> range:
    """The epochs of ``dataset`` read in epoch ``epoch`` of a mix, in order."""
    k = FOREVER if dataset._repeat is None else dataset._repeat
    return range(epoch * k, epoch * k + k)


def _length_or_none(dataset: Dataset, epoch: int, shard: int, num_shards: int) -> int | None:
    try:
        return dataset._epoch_length(epoch, shard, num_shards)
    except TypeError:
        return None


class _Supply:
    """How many items a source gives in an epoch of the mix, learnt epoch by epoch from their lengths."""

    def __init__(self, dataset: Dataset | None, epoch: int, shard: int, num_shards: int) -> None:
        self._dataset = dataset
        self._where = (shard, num_shards)
        self._epochs = iter(()) if dataset is None else iter(_epochs(dataset, epoch))
        self._known = 0
        self._ended = dataset is None
        self._unknown: int | None = None

    @classmethod
    def empty(cls) -> _Supply:
        """A source of weight 0: it gives nothing."""
        return cls(None, 0, 0, 1)

    def has(self, n: int) -> bool | None:
        """Whether the source gives more than ``n`` items; ``None`` where an epoch's length is unknown."""
        while n >= self._known:
            if self._ended:
                return False
            if self._unknown is not None:
                return None
            e = next(self._epochs, None)
            if e is None:
                self._ended = True
                return False
            assert self._dataset is not None
            length = _length_or_none(self._dataset, e, *self._where)
            if length is None:
                self._unknown = e
                return None
            if length == 0 and self._dataset._repeat is None:
                self._ended = (
                    True  # an empty epoch ends a dataset repeated forever, as it does alone
                )
            self._known += length
        return True

    @property
    def known(self) -> int:
        """How many items the source is known to give (all of them once :meth:`has` said ``False``)."""
        return self._known

    def why(self) -> str:
        """Why the length is unknown."""
        assert self._dataset is not None
        assert self._unknown is not None
        try:
            self._dataset._epoch_length(self._unknown, *self._where)
        except TypeError as exc:
            return str(exc)
        return "unknown"  # pragma: no cover


def _items(dataset: Dataset, epoch: int, shard: int, num_shards: int, skip: int) -> Iterator[Any]:
    """The items ``dataset`` gives in epoch ``epoch`` of a mix (all its epochs), without the first ``skip``.

    A whole epoch of known length is skipped without reading it; an epoch of unknown length is read, its
    items dropped, to count them, except in the last (or only) epoch, which skips as it does alone.
    """
    epochs = _epochs(dataset, epoch)
    for e in epochs:
        last = e == epochs[-1]
        length = None if not skip or last else _length_or_none(dataset, e, shard, num_shards)
        if length is not None and skip >= length:
            skip -= length
            if length == 0 and dataset._repeat is None:
                return
            continue
        items = dataset._one_epoch(e, shard, num_shards, skip if length is not None or last else 0)
        produced = 0
        with closing(items):  # type: ignore[type-var]
            for item in items:
                produced += 1
                if length is None and not last and skip:
                    skip -= 1
                    continue
                yield item
        if produced == 0 and dataset._repeat is None:
            return  # an empty epoch ends a dataset repeated forever, as it does alone
        if length is None and not last and skip:
            continue  # the epoch ended inside the part skipped
        skip = 0


def mix(
    datasets: Sequence[Dataset],
    weights: Sequence[float] | None = None,
    *,
    seed: int = 0,
    stop: Stop = "first_exhausted",
) -> Dataset:
    """Sample from several datasets: each item comes from a dataset drawn at random with ``weights``.

    Like tf.data's ``sample_from_datasets`` and Hugging Face's ``interleave_datasets(probabilities=...)``.
    The draws depend only on ``(seed, epoch, shard)``, so the sequence is the same on every run and resumes
    exactly from :meth:`Dataset.state_dict`. The result is a :class:`Dataset`: ``map``, ``filter``,
    ``batch``, ``unbatch``, ``repeat`` and ``prefetch`` apply to the mixed items, and ``set_epoch`` reaches
    every source.

    Each dataset is split between ranks and DataLoader workers as usual, and each process mixes its own
    shares: every item is still read at most once per epoch (exactly once with ``"all_exhausted"``).

    Parameters
    ----------
    datasets
        The sources (at least one), with their own shuffle, ``take``, ``map``... Each reads its epoch of
        the mix's number, one epoch per epoch of the mix. A source that repeats reads its epochs one after
        the other instead: with ``repeat(k)``, epoch ``E`` of the mix reads its epochs ``E*k`` to
        ``E*k + k - 1``; with ``repeat()`` it never runs out, so ``mix([a.repeat(), b.repeat()], weights)``
        (tf.data's ``sample_from_datasets`` idiom) is an endless stream that follows the weights.
    weights
        The relative weight of each source (non-negative, finite, not all zero; they need not sum to 1);
        by default equal. A source of weight 0 is never read.
    seed
        Seeds the draws, together with the epoch and the shard.
    stop
        ``"first_exhausted"`` (default): the epoch ends the first time a drawn source has nothing left,
        so every item follows the weights (tf.data's ``stop_on_empty_dataset=True``, Hugging Face's
        ``"first_exhausted"``). ``"all_exhausted"``: an exhausted source is left out and the weights of the
        others are re-normalised, until every source is exhausted: each item of every source is read once
        per epoch, and the proportions drift once a source is done.

    Returns
    -------
    Dataset
        The mix. ``len()`` is the sum of the sources' lengths with ``"all_exhausted"``; with
        ``"first_exhausted"`` it is found by replaying the draws against the sources' lengths. Both need
        every source's length, and a mix that never ends (a source repeated forever with
        ``"all_exhausted"``, or every source with ``"first_exhausted"``) has none (``TypeError``).

    Raises
    ------
    ValueError
        No dataset, weights of the wrong number or value, an unknown ``stop``, or datasets on different
        ranks.
    TypeError
        A source is not a :class:`Dataset`.
    """
    datasets = tuple(datasets)
    if not datasets:
        raise ValueError("mix needs at least one dataset")
    for d in datasets:
        if not isinstance(d, Dataset):
            raise TypeError(f"mix needs recordkit.data.Dataset objects, not {type(d).__name__}")
    if stop not in ("first_exhausted", "all_exhausted"):
        raise ValueError(f"stop must be 'first_exhausted' or 'all_exhausted', not {stop!r}")
    checked = _weights(weights, len(datasets))
    ranks = {(d._rank, d._world_size) for d in datasets}
    if len(ranks) > 1:
        raise ValueError(
            f"the datasets of a mix must have the same rank and world_size, not {ranks}"
        )
    rank, world_size = ranks.pop()
    source = MixSource(datasets, checked, int(seed), stop)
    return Dataset._from_source(source, rank, world_size)


def _weights(weights: Sequence[float] | None, n: int) -> tuple[float, ...]:
    if weights is None:
        return (1.0,) * n
    values = tuple(float(w) for w in weights)
    if len(values) != n:
        raise ValueError(f"mix has {n} datasets but {len(values)} weights")
    if any(not math.isfinite(w) or w < 0 for w in values) or not any(values):
        raise ValueError(f"the weights must be finite, non-negative and not all zero, not {values}")
    return values
