"""Read planning, the one planner of recordkit: who reads which records of a dataset in an epoch.

The pipeline (:class:`~recordkit.data.Dataset`, its loaders and the PyTorch glue) plans each epoch with the
units and functions below; the read ranges of distributed engines (:mod:`recordkit.datasets.ranges`) are cut
with the same :class:`RangeUnit`. Every random choice is drawn with :mod:`recordkit.datasets.seeds`, and
the shards are those of :mod:`recordkit.datasets.ranks`.

A *shard* is one reader of the data: ``rank * num_workers + worker`` among ``world_size * num_workers``.
Over one epoch the shards' plans partition the records: each record is in exactly one plan.

* Files whose record count is known (random-access files) are laid end to end, and the shards take
  balanced contiguous ranges of that index space, so most shards read whole files and no shard reads more
  than one record more than another.
* Sequential files (compressed TFRecord) cannot be split by index without reading them. They are dealt out
  whole, round-robin; the files left over (fewer than the shards) are each shared by a group of shards that
  take every k-th record of it.

The seeds, ranks and read ranges lived here until 0.3; their old names here still work, with a
:class:`DeprecationWarning` (:mod:`recordkit.support.moved`).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import numpy as np

from recordkit.datasets import seeds
from recordkit.support.moved import moved_attribute

if TYPE_CHECKING:
    from recordkit.io.tfds import ReadOrder

__all__ = [
    "EqualShards",
    "IndexUnit",
    "RangeUnit",
    "Unit",
    "Window",
    "bounds",
    "check_equal_shards",
    "cut",
    "global_length",
    "plan_global",
    "plan_length",
    "plan_pieces",
    "plan_sequence",
    "positions_in_files",
    "whole_files",
]

EqualShards = Literal["pad", "drop"] | None


def check_equal_shards(equal_shards: object) -> EqualShards:
    """``equal_shards`` if it is one of :data:`EqualShards`' values; else ``ValueError``."""
    if equal_shards not in (None, "pad", "drop"):
        raise ValueError(f"equal_shards must be None, 'pad' or 'drop', not {equal_shards!r}")
    return equal_shards


@dataclass(frozen=True)
class RangeUnit:
    """Records ``range(start, stop, step)`` of one file; ``stop=None`` means up to the end of the file."""

    file: int
    start: int
    stop: int | None
    step: int = 1

    def __len__(self) -> int:
        if self.stop is None:
            raise TypeError("the length of an open-ended unit is unknown")
        return max(0, -(-(self.stop - self.start) // self.step))

    @property
    def sized(self) -> bool:
        """Whether the number of records is known."""
        return self.stop is not None

    def head(self, n: int) -> RangeUnit:
        """The first ``n`` records of this unit."""
        return RangeUnit(self.file, self.start, self.start + n * self.step, self.step)

    def split(self, size: int) -> list[RangeUnit]:
        """This (sized, contiguous) unit cut into consecutive units of at most ``size`` records."""
        assert self.stop is not None
        return [
            RangeUnit(self.file, start, min(start + size, self.stop))
            for start in range(self.start, self.stop, size)
        ] or [self]


@dataclass(frozen=True)
class IndexUnit:
    """Records given by their global index (files laid end to end), in this order."""

    indices: np.ndarray

    def __len__(self) -> int:
        return len(self.indices)

    @property
    def sized(self) -> bool:
        """Always true."""
        return True

    def head(self, n: int) -> IndexUnit:
        """The first ``n`` records of this unit."""
        return IndexUnit(self.indices[:n])


Unit = RangeUnit | IndexUnit


def _balanced(total: int, shard: int, num_shards: int) -> tuple[int, int]:
    return shard * total // num_shards, (shard + 1) * total // num_shards


def _sequential_units(pieces: Sequence[RangeUnit], shard: int, num_shards: int) -> list[RangeUnit]:
    whole, left = divmod(len(pieces), num_shards)
    units = list(pieces[shard : whole * num_shards : num_shards])
    if left:
        group = shard % left
        members = len(range(group, num_shards, left))
        p = pieces[whole * num_shards + group]
        units.append(RangeUnit(p.file, p.start + shard // left, p.stop, members))
    return units


def _truncate(units: Sequence[Unit], n: int) -> list[Unit]:
    out: list[Unit] = []
    for u in units:
        if n <= 0:
            break
        k = len(u)
        out.append(u if k <= n else u.head(n))
        n -= k
    return out


def _cycle(units: Sequence[Unit], n: int) -> list[Unit]:
    """``n`` records taken from ``units`` repeated as often as needed."""
    total = plan_length(units)
    if n <= 0 or not total:
        return []
    out: list[Unit] = []
    while n > 0:
        out.extend(_truncate(units, n))
        n -= total
    return out


def whole_files(order: Sequence[int], counts: Sequence[int | None]) -> list[RangeUnit]:
    """One piece per file, in ``order`` (``stop=None`` where the count is unknown)."""
    return [RangeUnit(f, 0, counts[f]) for f in order]


def cut(
    pieces: Sequence[RangeUnit], count: Callable[[int], int], lo: int, hi: int | None
) -> list[RangeUnit]:
    """The records at positions ``[lo, hi)`` of ``pieces`` laid end to end (``hi=None``: to the end).

    ``count(file)`` gives a file's record count; it is asked only for the pieces of unknown size that the
    boundaries could fall in, so ``skip(n)`` over compressed files counts only the files it skips.
    """
    out = []
    base = 0
    for p in pieces:
        if hi is not None and base >= hi:
            break
        if hi is None and base >= lo:
            out.append(p)
            continue
        n = len(p) if p.sized else count(p.file) - p.start
        a, b = max(lo, base), base + n if hi is None else min(hi, base + n)
        if a < b:
            out.append(RangeUnit(p.file, p.start + a - base, p.start + b - base))
        base += n
    return out


def plan_pieces(
    pieces: Sequence[RangeUnit],
    counts: Sequence[int | None],
    random_access: Sequence[bool],
    shard: int,
    num_shards: int,
    equal: EqualShards = None,
) -> list[Unit]:
    """Return the units one shard reads of ``pieces``: parts of files, each file at most once, in order.

    Parameters
    ----------
    pieces
        What the epoch reads, in its order (``stop=None``: to the end of a file of unknown size).
    counts
        The record count of each file, ``None`` where unknown.
    random_access
        Whether each file can be read by index.
    shard, num_shards
        Which shard, of how many.
    equal
        ``None``: shard sizes may differ. ``"pad"``: every shard is brought up to the largest size by
        repeating its own records from its start. ``"drop"``: every shard is cut to the smallest size. Both
        need every count.
    """
    if equal is not None and any(not p.sized for p in pieces):
        raise ValueError("equal shard sizes need the record count of every file")
    rank_of = {p.file: k for k, p in enumerate(pieces)}
    indexed = [p for p in pieces if random_access[p.file] and p.sized]
    sequential = [p for p in pieces if not (random_access[p.file] and p.sized)]
    total = sum(len(p) for p in indexed)

    def one(s: int) -> list[Unit]:
        # Within a shard, files are read in the epoch's file order.
        # The pieces of ``indexed`` are sized: cut never asks for a count. One shard keeps them whole,
        # empty files too, so that its units are the same whether or not the files were counted
        # (interleave gives an empty file a turn, as tf.data does).
        if num_shards == 1:
            units = list(indexed)
        else:
            units = cut(indexed, lambda file: 0, *_balanced(total, s, num_shards))
        units.extend(
            u if u.sized or counts[u.file] is None else dataclasses.replace(u, stop=counts[u.file])
            for u in _sequential_units(sequential, s, num_shards)
        )
        units.sort(key=lambda u: rank_of[u.file])
        return list[Unit](units)

    mine = one(shard)
    if equal is None:
        return mine
    sizes = [plan_length(one(s)) or 0 for s in range(num_shards)]
    if equal == "drop":
        return _truncate(mine, min(sizes))
    target = max(sizes)
    donor = mine if sizes[shard] else list[Unit](pieces)
    return [*mine, *_cycle(donor, target - sizes[shard])]


Window = tuple[int, int | None]
"""Positions ``[start, stop)`` of a sequence (``stop=None``: to its end)."""


def bounds(window: Window, total: int) -> tuple[int, int]:
    """The window's ``(start, stop)`` clipped to a sequence of ``total`` items."""
    start, stop = window
    stop = total if stop is None else min(stop, total)
    return min(start, stop), stop


def _equal_size(total: int, num_shards: int, equal: EqualShards) -> int:
    if equal == "pad" and total:
        return -(-total // num_shards) * num_shards
    if equal == "drop":
        return total // num_shards * num_shards
    return total


def plan_global(
    counts: Sequence[int],
    shard: int,
    num_shards: int,
    seed: int,
    epoch: int,
    equal: EqualShards = None,
    before: Window = (0, None),
    after: Window = (0, None),
) -> list[Unit]:
    """Return one shard's slice of a global random permutation of the records.

    All shards compute the same permutation from ``(seed, epoch)`` and take balanced contiguous slices of
    it. It permutes the records at positions ``before`` of the files laid end to end in their given order,
    and is then cut to its positions ``after``. ``equal="pad"`` extends it with its own beginning and
    ``"drop"`` cuts it, so that it divides evenly (as PyTorch's ``DistributedSampler`` does).
    """
    lo, hi = bounds(before, sum(counts))
    perm = seeds.permutation(hi - lo, seed, epoch, "global") + lo
    return plan_sequence(perm, shard, num_shards, equal, after)


def plan_sequence(
    sequence: np.ndarray,
    shard: int,
    num_shards: int,
    equal: EqualShards = None,
    after: Window = (0, None),
) -> list[Unit]:
    """Return one shard's balanced contiguous slice of ``sequence`` (global indexes) cut to ``after``.

    ``equal="pad"`` extends the sequence with its own beginning and ``"drop"`` cuts it, so that it divides
    evenly.
    """
    sequence = sequence[slice(*bounds(after, len(sequence)))]
    size = _equal_size(len(sequence), num_shards, equal)
    sequence = np.resize(sequence, size) if size > len(sequence) else sequence[:size]
    lo, hi = _balanced(len(sequence), shard, num_shards)
    return [IndexUnit(sequence[lo:hi])]


def positions_in_files(order: ReadOrder, offsets: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """The global indexes of the records at ``positions`` of ``order``.

    Global indexes count the files laid end to end: file ``f``'s records from ``offsets[f]`` on.
    """
    segments = order.segments
    starts = np.fromiter((s.start for s in segments), np.int64, len(segments))
    blocks = np.fromiter((s.block for s in segments), np.int64, len(segments))
    widths = np.fromiter((len(s.shards) for s in segments), np.int64, len(segments))
    first = np.concatenate([[0], np.cumsum(widths)[:-1]]).astype(np.int64)
    shards = np.fromiter((f for s in segments for f in s.shards), np.int64, int(widths.sum()))
    records = np.fromiter((r for s in segments for r in s.starts), np.int64, int(widths.sum()))
    positions = np.asarray(positions, dtype=np.int64)
    k = np.searchsorted(starts, positions, side="right") - 1
    turn, rest = np.divmod(positions - starts[k], widths[k] * blocks[k])
    j, offset = np.divmod(rest, blocks[k])
    at = first[k] + j
    return offsets[shards[at]] + records[at] + turn * blocks[k] + offset


def global_length(total: int, shard: int, num_shards: int, equal: EqualShards = None) -> int:
    """The number of records a shard reads of a global permutation of ``total`` records."""
    lo, hi = _balanced(_equal_size(total, num_shards, equal), shard, num_shards)
    return hi - lo


def plan_length(units: Sequence[Unit]) -> int | None:
    """The number of records in a plan, or ``None`` if a unit's length is unknown."""
    if not all(u.sized for u in units):
        return None
    return sum(len(u) for u in units)


__getattr__ = functools.partial(moved_attribute, __name__)  # 0.2's seeds, ranks and read ranges
