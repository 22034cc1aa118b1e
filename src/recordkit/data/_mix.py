"""Weighted, deterministic, resumable sampling from several datasets: :func:`mix`.

Each item of a mix comes from a source drawn at random with the given weights. The draws are a pure function
of ``(seed, epoch, shard)``: one uniform number per item delivered, so a resumed mix replays the draws of the
items already delivered, without reading them, and each source skips exactly what it had given.
"""

from __future__ import annotations

import bisect
import json
import math
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from recordkit.data._dataset import Dataset
from recordkit.data._readers import ReaderPool
from recordkit.data._shuffle import derive_seed

if TYPE_CHECKING:
    from recordkit.data._readers import Catalog

__all__ = ["Stop", "mix"]

Stop = Literal["first_exhausted", "all_exhausted"]

_DRAWS = 4096
"""Uniform numbers drawn from the generator at a time (the sequence does not depend on it)."""


def _uniforms(seed: int, epoch: int, shard: int) -> Iterator[float]:
    rng = np.random.Generator(np.random.PCG64(derive_seed(seed, epoch, shard, "mix")))
    while True:
        yield from rng.random(_DRAWS).tolist()


class _Picker:
    """Chooses a source for a uniform number, among the sources still active, by weight."""

    def __init__(self, weights: Sequence[float]) -> None:
        self._weights = list(weights)
        self._active = [w > 0 for w in weights]
        self._update()

    def _update(self) -> None:
        self._index = [j for j, on in enumerate(self._active) if on]
        cumulative = np.cumsum([self._weights[j] for j in self._index]).tolist()
        self._cumulative = cumulative
        self._total = cumulative[-1] if cumulative else 0.0

    def pick(self, u: float) -> int | None:
        """The source ``u`` (in ``[0, 1)``) falls on, or ``None`` when no source is left."""
        if not self._index:
            return None
        k = bisect.bisect_right(self._cumulative, u * self._total)
        return self._index[min(k, len(self._index) - 1)]

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

    def _lengths(self, epoch: int, shard: int, num_shards: int) -> list[int | None]:
        return [
            _length_or_none(d, epoch, shard, num_shards) if w else 0
            for w, d in zip(self.weights, self.datasets, strict=True)
        ]

    def length(self, epoch: int, shard: int, num_shards: int) -> int:
        """The number of items the mix gives ``shard`` in ``epoch``, from its sources' lengths.

        Raises
        ------
        TypeError
            A source with a positive weight has no known length.
        """
        lengths = self._lengths(epoch, shard, num_shards)
        unknown = [j for j, n in enumerate(lengths) if n is None]
        if unknown:
            raise TypeError(
                f"len() of the mix is unknown: the length of its dataset {unknown[0]} is unknown "
                f"({self._why(unknown[0], epoch, shard, num_shards)})"
            )
        known = [int(n or 0) for n in lengths]
        if self.stop == "all_exhausted":
            return sum(known)
        # Where the first source runs out depends on the draws: replay them against the lengths.
        taken = [0] * len(known)
        picker = _Picker(self.weights)
        for n, u in enumerate(_uniforms(self.seed, epoch, shard)):
            j = self._choose(u, picker, lambda j: taken[j] < known[j])
            if j is None:
                return n
            taken[j] += 1
        raise AssertionError("unreachable")  # pragma: no cover - the draws never end

    def _why(self, j: int, epoch: int, shard: int, num_shards: int) -> str:
        try:
            self.datasets[j]._epoch_length(epoch, shard, num_shards)
        except TypeError as exc:
            return str(exc)
        return "unknown"  # pragma: no cover

    def records(self, epoch: int, shard: int, num_shards: int, skip: int) -> Iterator[Any]:
        """The items of the mix for ``shard`` in ``epoch``, without the first ``skip``."""
        with ExitStack() as stack:
            opened: dict[int, Iterator[Any]] = {}

            def source(j: int, start: int) -> Iterator[Any]:
                it = self.datasets[j]._one_epoch(epoch, shard, num_shards, start)
                stack.callback(it.close)  # type: ignore[attr-defined]
                opened[j] = it
                return it

            draws = _uniforms(self.seed, epoch, shard)
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
        draws: Iterator[float],
        picker: _Picker,
        epoch: int,
        where: tuple[int, int],
        source: Callable[[int, int], Iterator[Any]],
    ) -> list[int]:
        """Replay the draws of the first ``skip`` items; return how many items each source gave.

        Until a source runs out, every draw gave an item, so nothing is read. With ``"all_exhausted"``, when
        a source runs out matters: it is computed from its length, or, where that is unknown, the source
        is read (and its items dropped) to find out; such a source is then left open where it stopped.
        """
        taken = [0] * len(self.datasets)
        if not skip:
            return taken
        lengths: list[int | None] = [math.inf] * len(self.datasets)  # type: ignore[list-item]
        if self.stop == "all_exhausted":
            lengths = self._lengths(epoch, *where)

        def has_item(j: int) -> bool:
            n = lengths[j]
            if n is not None:
                return taken[j] < n
            if j not in read:
                read[j] = source(j, 0)
            return next(read[j], _END) is not _END

        read: dict[int, Iterator[Any]] = {}
        for _ in range(skip):
            j = self._choose(next(draws), picker, has_item)
            if j is None:
                break
            taken[j] += 1
        return taken


_END = object()


def _length_or_none(dataset: Dataset, epoch: int, shard: int, num_shards: int) -> int | None:
    try:
        return dataset._epoch_length(epoch, shard, num_shards)
    except TypeError:
        return None


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
        The sources (at least one), with their own shuffle, ``take``, ``map``... Each reads one epoch per
        epoch of the mix (the mix's epoch), so they must not ``repeat``; repeat the mix instead.
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
        every source's length (``TypeError`` otherwise).

    Raises
    ------
    ValueError
        No dataset, weights of the wrong number or value, an unknown ``stop``, a dataset that repeats, or
        datasets on different ranks.
    TypeError
        A source is not a :class:`Dataset`.
    """
    datasets = tuple(datasets)
    if not datasets:
        raise ValueError("mix needs at least one dataset")
    for d in datasets:
        if not isinstance(d, Dataset):
            raise TypeError(f"mix needs recordkit.data.Dataset objects, not {type(d).__name__}")
        if d._repeat != 1:
            raise ValueError(
                "a dataset in a mix reads one epoch per epoch of the mix: repeat the mix"
            )
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
