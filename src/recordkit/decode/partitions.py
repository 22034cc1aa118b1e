"""Ragged features cut by partitions read from other features (``tf.io.RaggedFeature`` with ``partitions``).

A :class:`Partitioned` spec takes the values of one feature and cuts them, record by record, with row
partitions read from other features of the same record (:class:`RowSplits`, :class:`RowLengths`,
:class:`RowStarts`, :class:`RowLimits`, :class:`ValueRowIds`) or given in the spec
(:class:`UniformRowLength`). The result is a :class:`~recordkit.decode.specs.Ragged` with one row per
record, nested once per ragged partition; a uniform row length that is the innermost partition (or below
only other uniform ones) becomes a fixed dimension of the values, as in TensorFlow.

Every record's partitions are checked against that record's own values: a partition that does not
exactly cover them raises :class:`~recordkit.errors.DecodeError` naming the record, whatever ``validate``
says (``docs/parsing.md`` lists where this is stricter than TensorFlow).

Examples
--------
>>> from recordkit.decode.messages import encode_example
>>> record = encode_example({"values": [1, 2, 3], "splits": [0, 2, 3]})
>>> from recordkit.decode.parsing import parse_examples
>>> spec = Partitioned(np.int64, [RowSplits("splits")], value_key="values")
>>> parse_examples([record], {"rt": spec})["rt"].to_list()
[[[1, 2], [3]]]
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Union

import numpy as np

from recordkit.decode.specs import ColumnReader, Ragged, ValueType, _splits, as_value_type
from recordkit.errors import DecodeError

if TYPE_CHECKING:
    import numpy.typing as npt

    from recordkit.decode.columns import Column

__all__ = [
    "Partition",
    "Partitioned",
    "RowLengths",
    "RowLimits",
    "RowSplits",
    "RowStarts",
    "UniformRowLength",
    "ValueRowIds",
]


def _key(key: Any) -> str:
    if not isinstance(key, str):
        raise TypeError(f"a partition key is a feature name (str), not {type(key).__name__}")
    return key


@dataclass(frozen=True)
class _Keyed:
    """A partition read from the feature ``key``."""

    key: str

    def __post_init__(self) -> None:
        _key(self.key)


@dataclass(frozen=True)
class RowSplits(_Keyed):
    """Row ``j`` of a record is ``values[splits[j]:splits[j + 1]]``; ``splits`` starts at 0 and ends at the
    number of values (``tf.io.RaggedFeature.RowSplits``)."""


@dataclass(frozen=True)
class RowLengths(_Keyed):
    """The number of values of each row (``tf.io.RaggedFeature.RowLengths``)."""


@dataclass(frozen=True)
class RowStarts(_Keyed):
    """Where each row starts; the first is 0, a row ends where the next starts
    (``tf.io.RaggedFeature.RowStarts``)."""


@dataclass(frozen=True)
class RowLimits(_Keyed):
    """Where each row ends; the last is the number of values (``tf.io.RaggedFeature.RowLimits``)."""


@dataclass(frozen=True)
class ValueRowIds(_Keyed):
    """The row of each value, non-decreasing from 0; a record has ``max + 1`` rows
    (``tf.io.RaggedFeature.ValueRowIds``)."""


@dataclass(frozen=True)
class UniformRowLength:
    """Rows of ``length`` values each, a fixed dimension (``tf.io.RaggedFeature.UniformRowLength``)."""

    length: int

    def __post_init__(self) -> None:
        length: Any = self.length
        if not isinstance(length, (int, np.integer)) or isinstance(length, bool):
            raise TypeError(f"a uniform row length is an int, not {type(length).__name__}")
        if length < 1:
            raise ValueError(f"a uniform row length must be at least 1, not {length}")
        object.__setattr__(self, "length", int(length))


#: One row partition of a :class:`Partitioned` spec.
Partition = Union[RowSplits, RowLengths, RowStarts, RowLimits, ValueRowIds, UniformRowLength]  # noqa: UP007
_PARTITIONS = (RowSplits, RowLengths, RowStarts, RowLimits, ValueRowIds, UniformRowLength)


@dataclass(frozen=True)
class Partitioned:
    """Values cut into nested rows by partitions read from other features (like ``tf.io.RaggedFeature``).

    Parameters
    ----------
    dtype
        The values' type, as for :class:`~recordkit.decode.specs.VarLen`.
    partitions
        Outermost first, as in TensorFlow: each a :class:`RowSplits`, :class:`RowLengths`,
        :class:`RowStarts`, :class:`RowLimits` or :class:`ValueRowIds` (naming an int64 feature of the
        same record; a feature list for a feature list) or a :class:`UniformRowLength`. No partitions: the
        values of each record as one row (what :class:`~recordkit.decode.specs.VarLen` gives).
    value_key
        The feature holding the values; the spec's own name when not given.
    row_splits_dtype
        ``np.int64`` (the default) or ``np.int32``, for the row splits of every level. TensorFlow's
        default is int32.
    validate
        Accepted for ``tf.io.RaggedFeature`` compatibility: recordkit always checks each record's
        partitions against its values.

    The partition classes are also attributes, as in TensorFlow: ``Partitioned.RowSplits("splits")``.
    """

    dtype: ValueType
    partitions: tuple[Partition, ...]
    value_key: str | None
    row_splits_dtype: np.dtype[Any]
    validate: bool

    RowSplits = RowSplits
    RowLengths = RowLengths
    RowStarts = RowStarts
    RowLimits = RowLimits
    ValueRowIds = ValueRowIds
    UniformRowLength = UniformRowLength

    def __init__(
        self,
        dtype: Any,
        partitions: Iterable[Partition] = (),
        *,
        value_key: str | None = None,
        row_splits_dtype: Any = np.int64,
        validate: bool = False,
    ) -> None:
        parts = tuple(partitions)
        for part in parts:
            if not isinstance(part, _PARTITIONS):
                raise TypeError(
                    "partitions are RowSplits, RowLengths, RowStarts, RowLimits, ValueRowIds or "
                    f"UniformRowLength, not {type(part).__name__}"
                )
        splits_dtype = np.dtype(row_splits_dtype)
        if splits_dtype not in (np.dtype(np.int32), np.dtype(np.int64)):
            raise TypeError(f"row_splits_dtype must be np.int32 or np.int64, not {splits_dtype}")
        object.__setattr__(self, "dtype", as_value_type(dtype))
        object.__setattr__(self, "partitions", parts)
        object.__setattr__(self, "value_key", None if value_key is None else _key(value_key))
        object.__setattr__(self, "row_splits_dtype", splits_dtype)
        object.__setattr__(self, "validate", bool(validate))

    def keys(self, name: str) -> list[str]:
        """The features this spec reads when it is called ``name``: the values, then the partitions."""
        values = self.value_key if self.value_key is not None else name
        return [values] + [p.key for p in self.partitions if not isinstance(p, UniformRowLength)]


# The most rows that ValueRowIds may ask for in one batch (2**28: 2 GiB of row lengths).
_MAX_ROWS: Final = 1 << 28


class _RowError(Exception):
    """A partition does not fit the values of row ``row`` (a record, or a time step)."""

    def __init__(self, row: int, message: str) -> None:
        super().__init__(message)
        self.row = row
        self.message = message


def _within(counts: npt.NDArray[np.int64]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.bool_]]:
    """For values cut by ``counts``: the row of each value, and whether it is the first of its row."""
    rows = np.repeat(np.arange(len(counts)), counts)
    first = np.zeros(len(rows), bool)
    starts = np.cumsum(counts) - counts
    first[starts[counts > 0]] = True
    return rows, first


def _check(bad: npt.NDArray[np.bool_], rows: npt.NDArray[np.int64] | None, message: str) -> None:
    """Raise for the first ``bad`` entry (of values whose rows are ``rows``, or of rows)."""
    if bad.any():
        at = int(np.argmax(bad))
        raise _RowError(int(rows[at]) if rows is not None else at, message)


def _lengths(
    part: Partition,
    sizes: npt.NDArray[np.int64],
    counts: npt.NDArray[np.int64],
    p: npt.NDArray[np.int64],
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """The new row lengths (all rows, in order) and the new number of rows of each record.

    ``sizes[i]`` is the number of items record ``i`` holds; the partition gives it ``counts[i]`` values
    ``p``.
    """
    key = getattr(part, "key", "")
    rows, first = _within(counts)
    ends = np.cumsum(counts)
    last = np.zeros(len(p), bool)
    last[ends[counts > 0] - 1] = True
    empty = counts == 0
    if isinstance(part, RowLengths):
        _check(p < 0, rows, f"a negative row length in {key!r}")
        total = np.bincount(rows, p, minlength=len(sizes)).astype(np.int64)
        _check(
            total != sizes,
            None,
            f"the row lengths in {key!r} do not add up to the number of values",
        )
        return p, counts
    if isinstance(part, ValueRowIds):
        _check(counts != sizes, None, f"{key!r} does not hold one row id per value")
        _check(p < 0, rows, f"a negative row id in {key!r}")
        _check(~first & (p < np.roll(p, 1)), rows, f"the row ids in {key!r} decrease")
        nrows = np.zeros(len(sizes), np.int64)
        nrows[rows[last]] = p[last] + 1
        # Row ids name rows without holding them: a few bytes can ask for 10^12 empty rows. TensorFlow
        # allocates them; recordkit refuses past a bound rather than run out of memory.
        _check(
            np.cumsum(nrows) > _MAX_ROWS,
            None,
            f"the row ids in {key!r} ask for over {_MAX_ROWS} rows",
        )
        offsets = np.cumsum(nrows) - nrows
        lengths = np.bincount(p + offsets[rows], minlength=int(nrows.sum())).astype(np.int64)
        return lengths, nrows
    _check(empty & (sizes != 0), None, f"{key!r} is empty but the record holds values")
    # for each value, the one before it in its row (0 for the first)
    previous = np.where(first, 0, np.roll(p, 1))
    if isinstance(part, RowSplits):
        _check(first & (p != 0), rows, f"the row splits in {key!r} do not start at 0")
        _check(p < previous, rows, f"the row splits in {key!r} decrease")
        _check(
            last & (p != sizes[rows]),
            rows,
            f"the row splits in {key!r} do not end at the number of values",
        )
        return (p - previous)[~first], np.maximum(counts - 1, 0)
    if isinstance(part, RowLimits):
        _check(p < previous, rows, f"the row limits in {key!r} decrease or are negative")
        _check(
            last & (p != sizes[rows]),
            rows,
            f"the row limits in {key!r} do not end at the number of values",
        )
        return p - previous, counts
    assert isinstance(part, RowStarts)
    _check(first & (p != 0), rows, f"the row starts in {key!r} do not start at 0")
    _check(p < previous, rows, f"the row starts in {key!r} decrease")
    _check(last & (p > sizes[rows]), rows, f"a row start in {key!r} is past the number of values")
    following = np.where(last, sizes[rows], np.roll(p, -1))
    return following - p, counts


def partition(
    spec: Partitioned,
    counts: npt.NDArray[np.int64],
    values: np.ndarray[Any, Any],
    partitions: Sequence[tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]],
) -> Ragged:
    """Cut the values of each row by ``spec``'s partitions.

    ``counts[i]`` values of ``values`` belong to row ``i`` (a record, or a time step); ``partitions`` holds
    ``(counts, values)`` of each non-uniform partition of ``spec``, in the spec's order. Returns the
    Ragged with one row per row of the input. Raises ``_RowError`` for a row whose partitions do not fit.
    """
    splits_dtype = spec.row_splits_dtype
    inner: np.ndarray[Any, Any] | Ragged = values
    sizes = counts.astype(np.int64)
    read = list(partitions)
    for part in reversed(spec.partitions):
        if isinstance(part, UniformRowLength):
            k = part.length
            _check(sizes % k != 0, None, f"the values are not a whole number of rows of {k}")
            if isinstance(inner, Ragged):
                inner = Ragged(inner, np.arange(0, len(inner) + 1, k, dtype=splits_dtype))
            else:
                inner = inner.reshape(-1, k, *inner.shape[1:])
            sizes = sizes // k
            continue
        part_counts, part_values = read.pop()
        lengths, sizes = _lengths(part, sizes, part_counts, part_values)
        inner = Ragged(inner, _splits(lengths).astype(splits_dtype, copy=False))
    return Ragged(inner, _splits(sizes).astype(splits_dtype, copy=False))


def _int_flat(
    reader: ColumnReader, column: Column, key: str
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    _, part_counts, part_values = reader.flat(key, column, np.dtype(np.int64))
    return part_counts, part_values


def read_partitioned(
    reader: ColumnReader, name: str, spec: Partitioned, columns: Mapping[str, Column]
) -> Ragged:
    """The :class:`~recordkit.decode.specs.Ragged` of a :class:`Partitioned` feature of a batch of records."""
    keys = spec.keys(name)
    _, counts, values = reader.flat(keys[0], columns[keys[0]], spec.dtype)
    parts = [_int_flat(reader, columns[key], key) for key in keys[1:]]
    try:
        return partition(spec, counts, values, parts)
    except _RowError as exc:
        raise reader.error(name, exc.row, exc.message) from None


def read_partitioned_lists(
    reader: ColumnReader,
    name: str,
    spec: Partitioned,
    steps: Mapping[str, npt.NDArray[np.int64]],
    columns: Mapping[str, Column],
) -> Ragged:
    """A :class:`Partitioned` feature list: records, then time steps, then the partitioned values.

    ``steps[key]`` is the number of time steps of each record in feature list ``key``, ``columns[key]``
    their values. Every partition list must have as many steps as the values' list in each record.
    """
    keys = spec.keys(name)
    value_steps = steps[keys[0]]
    for key in keys[1:]:
        wrong = steps[key] != value_steps
        if wrong.any():
            i = int(np.argmax(wrong))
            raise reader.error(
                name,
                i,
                f"values and partitions are not aligned: {keys[0]!r} has {int(value_steps[i])} time "
                f"steps, {key!r} {int(steps[key][i])}",
            )
    try:
        _, counts, values = reader.flat(keys[0], columns[keys[0]], spec.dtype)
        parts = [_int_flat(reader, columns[key], key) for key in keys[1:]]
        inner = partition(spec, counts, values, parts)
    except DecodeError as exc:  # named by its step: name the record
        step = exc.index or 0
        i = int(np.searchsorted(np.cumsum(value_steps), step, side="right"))
        message = str(exc).split(": ", 2)[-1]
        raise reader.error(exc.feature or name, i, message) from None
    except _RowError as exc:
        i = int(np.searchsorted(np.cumsum(value_steps), exc.row, side="right"))
        step = exc.row - int(value_steps[:i].sum())
        raise reader.error(name, i, f"time step {step}: {exc.message}") from None
    return Ragged(inner, _splits(value_steps).astype(spec.row_splits_dtype, copy=False))
