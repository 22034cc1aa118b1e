"""Feature specs, the :class:`Ragged` result type, and the reader that turns columns into spec-shaped arrays.

The specs (:class:`FixedLen`, :class:`VarLen`, :class:`FixedLenSequence`, and :class:`~recordkit.decode.images.Image`
from :mod:`recordkit.decode.images`) describe what to extract from a batch of records; a
:class:`ColumnReader` turns a :class:`~recordkit.decode.columns.Column` (one feature over the batch, from
:func:`recordkit.decode.columns.collect`) into the array a spec asks for, under TensorFlow's or OneFlow's rules.
The batch parsers (:mod:`recordkit.decode.parsing`), the Arrow output (:mod:`recordkit.decode.tables`) and
OneFlow's decoders (:mod:`recordkit.compat.oneflow`) are built on them.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Union, overload

import numpy as np

from recordkit.decode.columns import Column, Piece, merge_pieces
from recordkit.decode.images import Image, decode_images
from recordkit.errors import DecodeError

if TYPE_CHECKING:
    import numpy.typing as npt

__all__ = [
    "ColumnReader",
    "FixedLen",
    "FixedLenSequence",
    "Parsed",
    "Ragged",
    "Spec",
    "ValueType",
    "VarLen",
    "as_shape",
    "as_value_type",
    "pad_rows",
]

#: The value type of a spec: a numpy dtype, or ``"bytes"`` / ``"str"`` for bytes lists.
ValueType = Union[np.dtype[Any], str]  # noqa: UP007 - a runtime alias on Python 3.10

# The names of the non-numeric value types, in spec dtypes.
_ALIASES: Final = dict.fromkeys(
    (bytes, np.bytes_, object, np.object_, "bytes", "object", "string", "S", "O"), "bytes"
) | dict.fromkeys((str, np.str_, "str", "U"), "str")
# Feature oneof field number -> what it holds, with its article, for error messages.
_TF_KIND_NAMES: Final = {1: "a bytes_list", 2: "a float_list", 3: "an int64_list"}
_OF_KIND_NAMES: Final = {
    **_TF_KIND_NAMES,
    3: "a double_list",
    4: "an int32_list",
    5: "an int64_list",
}
_TF_KIND_OF_DTYPE: Final = {np.dtype(np.int64): 3, np.dtype(np.float32): 2}
_OF_NUMERIC: Final = frozenset(
    np.dtype(t) for t in (np.float32, np.float64, np.int8, np.uint8, np.int32, np.int64)
)


def as_value_type(dtype: Any) -> ValueType:
    """Normalise a spec dtype: ``"bytes"``, ``"str"``, or one of the numeric numpy dtypes specs allow.

    Raises ``TypeError`` for anything else.
    """
    with contextlib.suppress(KeyError, TypeError):  # TypeError: unhashable, e.g. a structured dtype
        return _ALIASES[dtype]
    try:
        value_type: np.dtype[Any] = np.dtype(dtype)
    except TypeError as exc:
        raise TypeError(f"not a dtype: {dtype!r}") from exc
    if value_type.kind in "SO":
        return "bytes"
    if value_type.kind == "U":
        return "str"
    if value_type not in _OF_NUMERIC:
        raise TypeError(
            f"unsupported dtype {value_type}: use np.int64, np.float32, bytes or str "
            "(and for OFRecord also np.float64, np.int32, np.int8, np.uint8)"
        )
    return value_type


def as_shape(shape: Any) -> tuple[int, ...]:
    """Normalise a spec shape (an int or a sequence of ints) to a tuple; ``ValueError`` if a dim is negative."""
    dims = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    if not all(isinstance(d, (int, np.integer)) and d >= 0 for d in dims):
        raise ValueError(f"a shape is a tuple of non-negative ints, not {shape!r}")
    return tuple(int(d) for d in dims)


def _numpy_type(value_type: ValueType) -> np.dtype[Any]:
    return np.dtype(object) if isinstance(value_type, str) else value_type


def _fill_value(value_type: ValueType) -> Any:
    return {"bytes": b"", "str": ""}.get(value_type, 0) if isinstance(value_type, str) else 0


def _default_array(
    default: Any, shape: tuple[int, ...], value_type: ValueType
) -> np.ndarray[Any, Any]:
    """The default as an array of ``shape``: reshaped when it has as many values, else broadcast."""
    if isinstance(value_type, str):
        values = np.empty(np.shape(default), object)
        values[...] = default
        kind = bytes if value_type == "bytes" else str
        if not all(isinstance(v, kind) for v in values.flat):
            raise TypeError(
                f"the default of a {value_type} feature must hold {kind.__name__} values"
            )
    else:
        values = np.asarray(default)
        if values.dtype.kind in "biu" and value_type.kind in "iu":  # integers must fit value_type
            info = np.iinfo(value_type)
            if values.size and (int(values.min()) < info.min or int(values.max()) > info.max):
                raise ValueError(f"a default does not fit {value_type} ({info.min}..{info.max})")
            values = values.astype(value_type)
        else:  # floats go to floats only
            values = values.astype(value_type, casting="same_kind", copy=False)
    if values.size == math.prod(shape):
        return values.reshape(shape)
    try:
        return np.broadcast_to(values, shape)
    except ValueError:
        raise ValueError(f"a default of shape {values.shape} does not fit shape {shape}") from None


def _set_shape_dtype_default(spec: Any, shape: Any, dtype: Any, default: Any) -> None:
    """Set the normalised ``shape``, ``dtype`` and ``default`` of a frozen spec."""
    object.__setattr__(spec, "shape", as_shape(shape))
    object.__setattr__(spec, "dtype", as_value_type(dtype))
    if default is not None:
        default = _default_array(default, spec.shape, spec.dtype)
    object.__setattr__(spec, "default", default)


@dataclass(frozen=True)
class FixedLen:
    """A feature with a fixed shape in every record (like ``tf.io.FixedLenFeature``).

    Parameters
    ----------
    shape
        The shape of the feature in one record (``()`` for a scalar); the record must hold exactly
        ``prod(shape)`` values.
    dtype
        ``np.int64``, ``np.float32``, ``bytes`` (also ``object``/``np.bytes_``: an object array of
        ``bytes``) or ``str`` (UTF-8 decoded). OFRecord also allows ``np.float64``, ``np.int32``,
        ``np.int8`` and ``np.uint8``.
    default
        Used for records that lack the feature (or whose feature has no list set). It is reshaped to
        ``shape`` when it has as many values, else broadcast. Without a default a missing feature raises
        :class:`~recordkit.errors.DecodeError`.
    """

    shape: tuple[int, ...]
    dtype: ValueType
    default: np.ndarray[Any, Any] | None = None

    def __init__(self, shape: Any, dtype: Any, *, default: Any = None) -> None:
        _set_shape_dtype_default(self, shape, dtype, default)


@dataclass(frozen=True)
class VarLen:
    """A feature with any number of values per record, parsed into a :class:`Ragged`.

    Parameters
    ----------
    dtype
        As for :class:`FixedLen`.
    """

    dtype: ValueType

    def __init__(self, dtype: Any) -> None:
        object.__setattr__(self, "dtype", as_value_type(dtype))


@dataclass(frozen=True)
class FixedLenSequence:
    """A variable number of items of a fixed shape (like ``tf.io.FixedLenSequenceFeature``).

    In a SequenceExample feature list every time step holds one item of ``shape``; in an Example the
    feature's values are cut into items of ``shape``. A batch is padded to its longest record with
    ``default`` (zeros, ``b""`` or ``""`` when not given), as TensorFlow does.

    Parameters
    ----------
    shape, dtype
        As for :class:`FixedLen`.
    default
        The padding value (a scalar, or an array of ``shape``).
    allow_missing
        In :func:`parse_sequence_examples`, whether a record may lack the feature list (it then has no
        steps); without it a missing list raises :class:`~recordkit.errors.DecodeError`, as in
        TensorFlow. Missing features are always allowed in :func:`parse_examples`.
    """

    shape: tuple[int, ...]
    dtype: ValueType
    default: np.ndarray[Any, Any] | None = None
    allow_missing: bool = False

    def __init__(
        self, shape: Any, dtype: Any, *, default: Any = None, allow_missing: bool = False
    ) -> None:
        _set_shape_dtype_default(self, shape, dtype, default)
        object.__setattr__(self, "allow_missing", bool(allow_missing))


Spec = Union[FixedLen, VarLen, FixedLenSequence, Image]  # noqa: UP007 - a runtime alias on Python 3.10


@dataclass(frozen=True, eq=False)
class Ragged:
    """Rows of different lengths: flat ``values`` cut by ``row_splits``, as TensorFlow's RaggedTensor.

    Row ``i`` is ``values[row_splits[i]:row_splits[i + 1]]``. ``values`` is a numpy array, or another
    :class:`Ragged` for two ragged dimensions (the VarLen feature lists of SequenceExamples: records, then
    time steps, then values).

    Examples
    --------
    >>> r = Ragged(np.array([1, 2, 3]), np.array([0, 2, 2, 3]))
    >>> len(r), r[0], r.to_list()
    (3, array([1, 2]), [[1, 2], [], [3]])
    >>> r.to_dense()
    array([[1, 2],
           [0, 0],
           [3, 0]])
    >>> r
    Ragged(values=array([1, 2, 3]), row_splits=array([0, 2, 2, 3]))
    """

    values: np.ndarray[Any, Any] | Ragged
    row_splits: npt.NDArray[np.int64]

    def __len__(self) -> int:
        """The number of rows."""
        return len(self.row_splits) - 1

    @property
    def dtype(self) -> np.dtype[Any]:
        """The dtype of the innermost values."""
        return self.values.dtype

    def row_lengths(self) -> npt.NDArray[np.int64]:
        """The number of items in each row."""
        return np.diff(self.row_splits)

    @overload
    def __getitem__(self, index: int) -> Any: ...
    @overload
    def __getitem__(self, index: slice) -> Ragged: ...
    def __getitem__(self, index: int | slice) -> Any:
        """Row ``index`` (an array, or a :class:`Ragged` for nested rows); a slice gives a Ragged."""
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self))
            if step != 1:
                raise ValueError("Ragged slices must be contiguous")
            return self._rows(start, max(start, stop))
        rows = len(self)
        i = index + rows if index < 0 else index
        if not 0 <= i < rows:
            raise IndexError(f"row {index} out of range for {rows} rows")
        return self._values(int(self.row_splits[i]), int(self.row_splits[i + 1]))

    def _values(self, first: int, last: int) -> Any:
        """The values of flat positions ``first:last`` (a Ragged of those rows for nested values)."""
        if isinstance(self.values, Ragged):
            return self.values._rows(first, last)
        return self.values[first:last]

    def _rows(self, start: int, stop: int) -> Ragged:
        splits = self.row_splits[start : stop + 1]
        first = int(splits[0])
        return Ragged(self._values(first, int(splits[-1])), splits - first)

    def __iter__(self) -> Iterator[Any]:
        """Iterate over the rows."""
        return (self[i] for i in range(len(self)))

    def to_list(self) -> list[Any]:
        """The rows as nested Python lists."""
        return [row.to_list() if isinstance(row, Ragged) else row.tolist() for row in self]

    def to_dense(self, default: Any = None) -> np.ndarray[Any, Any]:
        """Pad the rows to the longest one with ``default`` (0, ``b""`` or ``""`` when not given)."""
        if isinstance(self.values, Ragged):
            raise TypeError(
                "to_dense() needs flat values; use ragged[i] or to_list() for nested rows"
            )
        lengths = self.row_lengths()
        width = int(lengths.max()) if len(lengths) else 0
        if default is None:
            default = _fill_value("bytes" if self.values.dtype == object else self.values.dtype)
        return pad_rows(self.values, lengths, width, default)


#: What a spec parses into: an array, a Ragged, or (an Image spec without a size) a list of arrays.
Parsed = Union[np.ndarray[Any, Any], Ragged, list[np.ndarray[Any, Any]]]  # noqa: UP007 - a runtime alias


def pad_rows(
    values: np.ndarray[Any, Any], counts: npt.NDArray[np.int64], width: int, fill: Any
) -> np.ndarray[Any, Any]:
    """Put the rows of ``values`` (``counts[i]`` <= ``width`` each) into an ``(n, width, ...)`` array."""
    n = len(counts)
    if n and width and (counts == width).all():
        return values.reshape(n, width, *values.shape[1:])
    out = np.empty((n, width, *values.shape[1:]), values.dtype)
    out[...] = fill
    total = int(counts.sum())
    if total:
        row_of = np.repeat(np.arange(n), counts)
        starts = np.cumsum(counts) - counts
        out[row_of, np.arange(total) - starts[row_of]] = values[:total]
    return out


def _record_of(counts: npt.NDArray[np.int64], position: int) -> int:
    """The record owning flat value ``position`` when record ``i`` has ``counts[i]`` values."""
    return int(np.searchsorted(np.cumsum(counts), position, side="right"))


def _is_utf8(value: bytes) -> bool:
    try:
        value.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _first(mask: npt.NDArray[np.bool_]) -> int:
    return int(np.argmax(mask))


class ColumnReader:
    """Turns :class:`~recordkit.decode.columns.Column` objects into spec-shaped arrays.

    Parameters
    ----------
    ofrecord
        OneFlow's rules (any numeric list is cast to the spec's dtype, a single bytes value can be read as
        int8 numbers) instead of TensorFlow's (the list kind must match the dtype).
    """

    def __init__(self, *, ofrecord: bool) -> None:
        self.ofrecord = ofrecord
        self.kind_names = _OF_KIND_NAMES if ofrecord else _TF_KIND_NAMES

    def error(self, name: str, index: int, message: str) -> DecodeError:
        """The :class:`~recordkit.errors.DecodeError` for feature ``name`` of record ``index``."""
        return DecodeError(
            f"record {index}: feature {name!r}: {message}", index=index, feature=name
        )

    def values(
        self, name: str, column: Column, value_type: ValueType
    ) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.int64], list[Piece]]:
        """Return ``present, counts`` and the pieces of ``column`` converted to ``value_type``.

        TensorFlow rules: the list kind must match the dtype. OneFlow rules: any numeric list is cast,
        and a single bytes value is read as int8 numbers, as OneFlow's raw decoder does.
        """
        kinds, counts = column.kinds, column.counts
        present = kinds != 0
        target = _numpy_type(value_type)
        if isinstance(value_type, str):
            accepted = {1}
        elif not self.ofrecord:
            expected = _TF_KIND_OF_DTYPE.get(value_type)
            if expected is None:
                raise TypeError(
                    f"feature {name!r}: TFRecord features are int64, float32 or bytes, not {value_type}"
                )
            accepted = {expected}
        else:
            accepted = set(column.pieces)
        if len(accepted) == 1:  # the usual case: one kind, compared without np.isin's set-up
            wrong = present & (kinds != next(iter(accepted)))
        else:
            wrong = present & ~np.isin(kinds, list(accepted))
        if wrong.any():
            i = _first(wrong)
            raise self.error(
                name,
                i,
                f"data type doesn't match: the record holds {self.kind_names[int(kinds[i])]}, "
                f"the spec asks for {value_type}",
            )
        pieces: list[Piece] = []
        for kind, kind_pieces in sorted(column.pieces.items()):
            for rows, piece_counts, values in kind_pieces:
                if kind == 1 and not isinstance(value_type, str):  # the bytes as int8 numbers
                    not_one = piece_counts != 1
                    if not_one.any():
                        i = _first(not_one)
                        raise self.error(
                            name,
                            int(rows[i]),
                            "a bytes_list read as numbers must hold exactly 1 value, "
                            f"found {piece_counts[i]}",
                        )
                    piece_counts = np.fromiter(map(len, values), np.int64, len(values))
                    values = np.frombuffer(b"".join(values), np.int8)
                    counts = counts.copy()
                    counts[rows] = piece_counts
                elif value_type == "str":
                    values = self._decode_utf8(name, (rows, piece_counts, values))
                # NaN or out-of-range floats cast to integers give unspecified values, as C++
                # static_cast does in OneFlow; numpy's RuntimeWarning about it is not for the caller.
                with np.errstate(invalid="ignore", over="ignore"):
                    values = values.astype(target, copy=False)
                pieces.append((rows, piece_counts, values))
        return present, counts, pieces

    def flat(
        self, name: str, column: Column, value_type: ValueType
    ) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.int64], np.ndarray[Any, Any]]:
        """Like :meth:`values`, with the values flat and in record order (a writable array)."""
        present, counts, pieces = self.values(name, column, value_type)
        if not pieces:
            return present, counts, np.zeros(0, _numpy_type(value_type))
        flat = merge_pieces(pieces)[2]
        if not flat.flags.writeable or not flat.flags.c_contiguous:
            flat = flat.copy()
        return present, counts, flat

    def _decode_utf8(self, name: str, piece: Piece) -> np.ndarray[Any, Any]:
        """The bytes values of ``piece`` decoded from UTF-8, as an object array of ``str``."""
        rows, counts, values = piece
        out = np.empty(len(values), object)
        try:
            out[:] = [value.decode("utf-8") for value in values]
        except UnicodeDecodeError:
            position = next(p for p, value in enumerate(values) if not _is_utf8(value))
            i = int(rows[_record_of(counts, position)])
            raise self.error(name, i, "not valid UTF-8") from None
        return out

    def fixed(self, name: str, column: Column, spec: FixedLen) -> np.ndarray[Any, Any]:
        """The ``(n, *shape)`` array of a :class:`FixedLen` feature."""
        present, counts, pieces = self.values(name, column, spec.dtype)
        n = len(counts)
        size = math.prod(spec.shape)
        wrong = present & (counts != size)
        missing = ~present
        bad = wrong | missing if spec.default is None else wrong
        if bad.any():
            i = _first(bad)  # the first bad record, whatever is wrong with it
            if missing[i]:
                raise self.error(name, i, "missing, and the spec has no default")
            raise self.error(
                name, i, f"expected {size} values (shape {spec.shape}), found {int(counts[i])}"
            )
        if len(pieces) == 1 and not missing.any():
            values = pieces[0][2]
            if not (values.flags.writeable and values.flags.c_contiguous and values.dtype.isnative):
                values = np.array(values, values.dtype.newbyteorder("="), order="C")
            return values.reshape((n, *spec.shape))
        out = np.empty((n, *spec.shape), _numpy_type(spec.dtype))
        rows_out = out.reshape(n, size)
        for rows, _, values in pieces:
            rows_out[rows] = values.reshape(len(rows), size)
        if missing.any():
            out[missing] = spec.default
        return out

    def ragged(self, name: str, column: Column, spec: VarLen) -> Ragged:
        """The :class:`Ragged` of a :class:`VarLen` feature."""
        _, counts, flat = self.flat(name, column, spec.dtype)
        return Ragged(flat, _splits(counts))

    def items(
        self, name: str, column: Column, spec: FixedLenSequence
    ) -> tuple[npt.NDArray[np.int64], np.ndarray[Any, Any]]:
        """The value counts and flat values of a feature cut into items of ``spec.shape``."""
        _, counts, flat = self.flat(name, column, spec.dtype)
        size = math.prod(spec.shape)
        if size == 0:
            raise ValueError(
                f"feature {name!r}: a FixedLenSequence needs a shape with at least one value"
            )
        ragged = counts % size != 0
        if ragged.any():
            i = _first(ragged)
            raise self.error(
                name,
                i,
                f"{int(counts[i])} values are not a whole number of items of shape {spec.shape}",
            )
        return counts, flat

    def padded(self, name: str, column: Column, spec: FixedLenSequence) -> np.ndarray[Any, Any]:
        """An Example feature cut into items of ``spec.shape`` and padded (parse_examples)."""
        counts, flat = self.items(name, column, spec)
        return _pad_items(flat, counts // math.prod(spec.shape), spec)

    def image(self, name: str, column: Column, spec: Image) -> Parsed:
        """The single bytes value of every record, decoded as an image (see :class:`Image`)."""
        present, counts, flat = self.flat(name, column, "bytes")
        wrong = counts != 1
        if wrong.any():
            i = _first(wrong)
            if not present[i]:
                raise self.error(name, i, "missing (an Image feature has no default)")
            raise self.error(name, i, f"expected exactly 1 bytes value, found {int(counts[i])}")
        return decode_images(flat, spec, name)

    def read(self, name: str, column: Column, spec: Spec) -> Parsed:
        """What ``spec`` parses ``column`` into (see :func:`recordkit.decode.parsing.parse_examples`)."""
        if isinstance(spec, FixedLen):
            return self.fixed(name, column, spec)
        if isinstance(spec, VarLen):
            return self.ragged(name, column, spec)
        if isinstance(spec, Image):
            return self.image(name, column, spec)
        return self.padded(name, column, spec)


def _splits(counts: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    splits = np.zeros(len(counts) + 1, np.int64)
    np.cumsum(counts, out=splits[1:])
    return splits


def _pad_items(
    flat: np.ndarray[Any, Any], items: npt.NDArray[np.int64], spec: FixedLenSequence
) -> np.ndarray[Any, Any]:
    """Items of ``spec.shape`` per record, padded with the spec's default to ``(n, longest, *shape)``."""
    n = len(items)
    size = math.prod(spec.shape)
    longest = int(items.max()) if n else 0
    if spec.default is None:
        rows = pad_rows(flat, items * size, longest * size, _fill_value(spec.dtype))
        return rows.reshape((n, longest, *spec.shape))
    out = np.empty((n, longest, *spec.shape), _numpy_type(spec.dtype))
    out[...] = spec.default
    is_item = np.arange(longest) < items[:, None]
    out[is_item] = flat.reshape((int(items.sum()), *spec.shape))
    return out


def _check_specs(
    features: Mapping[str, Any], allowed: tuple[type, ...], what: str
) -> dict[str, Spec]:
    if not isinstance(features, Mapping):
        raise TypeError(f"{what} must be a mapping of feature name to spec")
    for name, spec in features.items():
        if not isinstance(name, str):
            raise TypeError(f"feature names are str, not {type(name).__name__}")
        if not isinstance(spec, allowed):
            names = " or ".join(t.__name__ for t in allowed)
            raise TypeError(f"{what}[{name!r}] must be a {names}, not {type(spec).__name__}")
    return dict(features)
