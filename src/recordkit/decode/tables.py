"""Tables to records and records to tables: Arrow, pandas and dicts of columns.

* :func:`encode_examples` / :func:`encode_ofrecords` turn each row of a table (a ``pyarrow.Table`` or
  ``RecordBatch``, a ``pandas.DataFrame``, or a dict of numpy arrays or lists) into one serialized
  ``tf.train.Example`` / ``OFRecord``. The records are assembled column by column with numpy: no Python call
  per value, one per row only to cut the finished buffer into ``bytes`` objects.
* :func:`parse_arrow` (what ``parse_examples(..., to="arrow")`` calls) and :func:`to_arrow` give a
  ``pyarrow.Table`` from records or from a parsed batch.

Everything here needs pyarrow (``pip install "recordkit[arrow]"``); pandas only for DataFrames. Both are
imported on first use, never by ``import recordkit``. The type mapping is documented in ``docs/tables.md``.

Examples
--------
>>> import numpy as np
>>> import recordkit as rk
>>> records = rk.encode_examples({"label": np.array([3, 4]), "name": ["cat", "dog"]})
>>> records[0] == rk.encode_example({"label": 3, "name": "cat"})
True
>>> rk.parse_examples(records, {"label": rk.FixedLen((), np.int64), "name": rk.FixedLen((), str)},
...                   to="arrow").to_pydict()
{'label': [3, 4], 'name': ['cat', 'dog']}
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import numpy as np

from recordkit.decode import _composite
from recordkit.decode import columns as _columns
from recordkit.decode import messages as _messages
from recordkit.decode.images import Image
from recordkit.decode.partitions import Partitioned
from recordkit.decode.sparse import Sparse, SparseArray
from recordkit.decode.specs import (
    ColumnReader,
    FixedLen,
    FixedLenSequence,
    Ragged,
    Spec,
    ValueType,
    VarLen,
    _check_specs,
    _fill_value,
    _splits,
)
from recordkit.support.extras import require

if TYPE_CHECKING:
    import numpy.typing as npt
    import pyarrow as pa

__all__ = ["encode_examples", "encode_ofrecords", "parse_arrow", "to_arrow"]

#: Rows encoded per numpy pass: bounds the temporary index arrays on tables with large values.
_CHUNK_ROWS: Final = 8192
_UINT8: Final = np.dtype(np.uint8)
_INT64_MAX: Final = 2**63 - 1
_INT32_MAX: Final = 2**31 - 1


@functools.cache
def _pyarrow() -> Any:
    """Import pyarrow, or say how to install it."""
    return require(
        "pyarrow", "converting tables (recordkit.decode.tables)", "pyarrow", "arrow", "pyarrow"
    )


# --------------------------------------------------------------------------------------------------------------
# Byte strings by the batch: item i of a _Bytes is data[start_i : start_i + lengths[i]], items back to back.


@dataclass(frozen=True)
class _Bytes:
    """``len(lengths)`` byte strings stored back to back in ``data`` (a 1-D uint8 array)."""

    data: npt.NDArray[np.uint8]
    lengths: npt.NDArray[np.int64]

    @classmethod
    def constant(cls, value: bytes, n: int) -> _Bytes:
        return cls(np.tile(np.frombuffer(value, _UINT8), n), np.full(n, len(value), np.int64))

    def width(self) -> int | None:
        """The common length of every item, or ``None`` when they differ."""
        if not len(self.lengths):
            return 0
        first = int(self.lengths[0])
        return first if bool((self.lengths == first).all()) else None

    def grouped(self, counts: npt.NDArray[np.int64]) -> _Bytes:
        """Join consecutive items, ``counts[j]`` of them into item ``j`` (the data does not move)."""
        ends, bounds = _splits(self.lengths), _splits(counts)
        return _Bytes(self.data, ends[bounds[1:]] - ends[bounds[:-1]])

    def only(self, keep: npt.NDArray[np.bool_]) -> _Bytes:
        """The same items, those not in ``keep`` made empty."""
        if keep.all():
            return self
        owner = np.repeat(keep, self.lengths)
        return _Bytes(self.data[owner], np.where(keep, self.lengths, 0))

    def spread(self, rows: npt.NDArray[np.bool_]) -> _Bytes:
        """Place the items at the positions where ``rows`` is true; the other positions are empty."""
        lengths = np.zeros(len(rows), np.int64)
        lengths[rows] = self.lengths
        return _Bytes(self.data, lengths)

    def split(self) -> list[bytes]:
        """The items as ``bytes`` objects."""
        buffer = self.data.tobytes()
        return [buffer[a:b] for a, b in itertools.pairwise(_splits(self.lengths).tolist())]


def _concat(parts: list[_Bytes]) -> _Bytes:
    """Item ``i`` of the result is item ``i`` of every part, joined in order."""
    lengths: npt.NDArray[np.int64] = np.sum(
        [part.lengths for part in parts], axis=0, dtype=np.int64
    )
    n = len(lengths)
    widths = [part.width() for part in parts]
    if all(w is not None for w in widths):
        blocks = [part.data.reshape(n, w) for part, w in zip(parts, widths, strict=True)]  # type: ignore[arg-type]
        return _Bytes(np.concatenate(blocks, axis=1).reshape(-1), lengths)
    # Which part each output byte comes from; each part's bytes then fill its positions in order.
    kind = np.uint8 if len(parts) <= 256 else np.int32
    sizes = np.stack([part.lengths for part in parts], axis=1).reshape(-1)
    owner = np.repeat(np.tile(np.arange(len(parts), dtype=kind), n), sizes)
    out = np.empty(len(owner), _UINT8)
    for j, part in enumerate(parts):
        out[owner == j] = part.data
    return _Bytes(out, lengths)


def _varints(values: npt.NDArray[Any]) -> _Bytes:
    """Each integer as a protobuf varint (negative ones as their 64-bit two's complement, 10 bytes)."""
    unsigned = values.astype(np.int64, copy=False).view(np.uint64)
    sizes = np.ones(len(unsigned), np.int64)
    for k in range(1, 10):
        sizes += unsigned >= np.uint64(1 << (7 * k))
    width = int(sizes.max()) if len(sizes) else 1
    shifts = np.arange(width, dtype=np.uint64) * np.uint64(7)
    groups = ((unsigned[:, None] >> shifts) & np.uint64(0x7F)).astype(_UINT8)
    column = np.arange(width)
    groups |= np.where(column < (sizes - 1)[:, None], 0x80, 0).astype(_UINT8)
    if (sizes == width).all():
        return _Bytes(groups.reshape(-1), sizes)
    return _Bytes(groups[column < sizes[:, None]], sizes)


def _field(tag: int, payload: _Bytes, *, omit_empty: bool = False) -> _Bytes:
    """A length-delimited field ``tag`` around each item; with ``omit_empty``, nothing for empty items."""
    parts = [_Bytes.constant(bytes([tag]), len(payload.lengths)), _varints(payload.lengths)]
    if omit_empty:
        present = payload.lengths > 0
        parts = [part.only(present) for part in parts]
    return _concat([*parts, payload])


# --------------------------------------------------------------------------------------------------------------
# Columns to features


_LIST_TYPES: Final = ("list", "large_list", "fixed_size_list")
_BINARY_TYPES: Final = (
    *("binary", "large_binary", "string", "large_string", "fixed_size_binary"),
    *("binary_view", "string_view"),  # pyarrow 16 and later
)
_WHY_NOT: Final = (
    (("temporal",), "convert dates and times to integers or strings first"),
    (("decimal",), "convert decimals to floats or strings first"),
    (("struct", "map"), "give each field a column of its own"),
)


def _is(kind: Any, *names: str) -> bool:
    """Whether ``pyarrow.types.is_<name>(kind)`` holds for one of ``names`` (absent checks: false)."""
    types = _pyarrow().types
    return any(getattr(types, f"is_{name}", lambda _: False)(kind) for name in names)


class _Column:
    """Encodes one Arrow column as ``Feature`` messages, naming the column in every error."""

    def __init__(self, name: str, family: _messages._Family, first_row: int) -> None:
        self.name = name
        self.family = family
        self.first_row = first_row  # the table row of the column's first value, for messages

    def unsupported(self, what: Any, why: str = "") -> TypeError:
        return TypeError(
            f"column {self.name!r}: {what} cannot be encoded as {self.family.message} features"
            + (f" ({why})" if why else "")
        )

    def features(self, array: Any) -> tuple[npt.NDArray[np.bool_], _Bytes]:
        """Which rows are not null, and the serialized ``Feature`` message of each of those rows."""
        pa = _pyarrow()
        array = self._plain(array)
        rows = _validity(array)
        if not rows.all():
            array = array.filter(pa.array(rows))
        counts = np.ones(len(array), np.int64)
        if _is(array.type, *_LIST_TYPES):
            counts = np.asarray(array.value_lengths().fill_null(0), np.int64)
            array = self._plain(array.flatten())
            if _is(array.type, *_LIST_TYPES):
                raise self.unsupported("a list of lists", "features are flat lists")
            if array.null_count:
                row = self.first_row + int(
                    np.flatnonzero(rows)[
                        np.searchsorted(np.cumsum(counts), np.argmin(_validity(array)), "right")
                    ]
                )
                raise ValueError(
                    f"column {self.name!r}: row {row}: a list holds a null; features cannot hold nulls"
                )
        family = self.family
        if _is(array.type, *_BINARY_TYPES):
            strings = _binary_items(array.cast(pa.large_binary()))
            return rows, _field(family.tags["bytes_list"][0], _field(0x0A, strings).grouped(counts))
        numbers = array.to_numpy(zero_copy_only=False)
        if numbers.dtype == np.uint64 and len(numbers) and int(numbers.max()) > _INT64_MAX:
            raise ValueError(
                f"column {self.name!r}: a uint64 value does not fit in a signed 64-bit integer"
            )
        kind: _messages.FeatureKind
        if numbers.dtype.kind == "f":
            kind = family.float64_kind if numbers.dtype.itemsize == 8 else "float_list"
            wire = _messages._WIRE_DTYPES[kind]
            with np.errstate(over="ignore"):  # beyond float32's range: infinities, as protobuf
                raw = numbers.astype(wire).view(_UINT8)
            payload = _Bytes(raw, counts * wire.itemsize)
        else:
            kind = family.int32_kind if numbers.dtype == np.int32 else "int64_list"
            payload = _varints(numbers).grouped(counts)
        return rows, _field(family.tags[kind][0], _field(0x0A, payload, omit_empty=True))

    def _plain(self, array: Any) -> Any:
        """Dictionary-encoded (pandas categorical) values decoded; unsupported types refused."""
        if _pyarrow().types.is_dictionary(array.type):
            array = array.dictionary_decode()
        kind = array.type
        if not _is(kind, "null", "boolean", "integer", "floating", *_LIST_TYPES, *_BINARY_TYPES):
            why = next((why for names, why in _WHY_NOT if _is(kind, *names)), "")
            raise self.unsupported(f"values of type {kind}", why)
        return array


def _validity(array: Any) -> npt.NDArray[np.bool_]:
    if not array.null_count:
        return np.ones(len(array), bool)
    return np.asarray(array.is_valid(), bool)


def _binary_items(values: Any) -> _Bytes:
    """The values of a ``large_binary`` array as :class:`_Bytes`, viewing Arrow's buffers."""
    _, offsets_buffer, data_buffer = values.buffers()
    offsets = np.frombuffer(offsets_buffer, np.int64)[
        values.offset : values.offset + len(values) + 1
    ]
    if not len(values):
        return _Bytes(np.zeros(0, _UINT8), np.zeros(0, np.int64))
    data = np.frombuffer(data_buffer, _UINT8) if data_buffer is not None else np.zeros(0, _UINT8)
    return _Bytes(data[offsets[0] : offsets[-1]], np.diff(offsets))


def _entries(name: str, array: Any, family: _messages._Family, first_row: int) -> _Bytes:
    """The serialized ``map<string, Feature>`` entry of every row (empty for null rows)."""
    rows, feature = _Column(name, family, first_row).features(array)
    key = name.encode("utf-8")
    head = b"\x0a" + _messages._varint(len(key)) + key + b"\x12"
    n = len(feature.lengths)
    body = _concat([_Bytes.constant(head, n), _varints(feature.lengths), feature])
    return _field(0x0A, body).spread(rows)


# --------------------------------------------------------------------------------------------------------------
# Tables in


def _as_table(table: Any) -> Any:
    """A ``pyarrow.Table`` of the argument, refusing what is not a table."""
    pa = _pyarrow()
    if isinstance(table, pa.Table):
        return table
    if isinstance(table, pa.RecordBatch):
        return pa.Table.from_batches([table])
    if isinstance(table, Mapping):
        return _table_of_mapping(table)
    if type(table).__name__ == "DataFrame" and hasattr(table, "columns"):
        return _table_of_mapping({name: table[name] for name in table.columns}, len(table))
    raise TypeError(
        "expected a pyarrow Table or RecordBatch, a pandas DataFrame or a dict of columns, "
        f"not {type(table).__name__}"
    )


def _table_of_mapping(columns: Mapping[Any, Any], rows: int | None = None) -> Any:
    pa = _pyarrow()
    arrays = {}
    for name, values in columns.items():
        if not isinstance(name, str):
            raise TypeError(f"column names are str, not {type(name).__name__} ({name!r})")
        arrays[name] = _column_array(name, values)
        if rows is None:
            rows = len(arrays[name])
        elif len(arrays[name]) != rows:
            raise ValueError(f"column {name!r} has {len(arrays[name])} rows, the others {rows}")
    return pa.table(arrays) if arrays else pa.table({}).slice(0, 0)


def _column_array(name: str, values: Any) -> Any:
    """One column as an Arrow array: NaN stays a float value (pandas' "missing" reading is not taken)."""
    pa = _pyarrow()
    if isinstance(values, (pa.Array, pa.ChunkedArray)):
        return values
    if isinstance(values, np.ndarray) and values.ndim > 1:
        flat = _column_array(name, values.reshape(-1))
        return pa.FixedSizeListArray.from_arrays(flat, math.prod(values.shape[1:]))
    try:
        return pa.array(values, from_pandas=False)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as exc:
        raise TypeError(f"column {name!r}: the values have no single Arrow type ({exc})") from None


def _encode(table: Any, family: _messages._Family) -> list[bytes]:
    table = _as_table(table)
    out: list[bytes] = []
    for start in range(0, table.num_rows, _CHUNK_ROWS):
        chunk = table.slice(start, _CHUNK_ROWS)
        n = chunk.num_rows
        parts = [
            _entries(name, column.combine_chunks(), family, start)
            for name, column in zip(chunk.column_names, chunk.columns, strict=True)
        ]
        body = _concat(parts) if parts else _Bytes(np.zeros(0, _UINT8), np.zeros(n, np.int64))
        if family is _messages._OF:
            empty = body.lengths == 0
            if empty.any():
                row = start + int(np.argmax(empty))
                raise ValueError(
                    f"row {row}: every value is null, and an OFRecord needs at least one feature "
                    "(OneFlow rejects empty records)"
                )
        else:
            body = _field(0x0A, body)  # Example.features
        out += body.split()
    return out


def encode_examples(table: Any) -> list[bytes]:
    """Serialize every row of a table as a ``tf.train.Example``, one feature per column.

    Parameters
    ----------
    table
        A ``pyarrow.Table`` or ``RecordBatch``, a ``pandas.DataFrame`` (its index is left out), or a dict
        of column name to a numpy array, a list or an Arrow array. A numpy array of more than one dimension
        gives each row its flattened values.

    Returns
    -------
    list of bytes
        One serialized Example per row, byte for byte what :func:`recordkit.encode_example` gives for the
        row's values (each list typed by its column, so an empty list keeps its list type).

    Raises
    ------
    TypeError
        ``table`` is not a table, a column name is not a ``str``, or a column's type has no feature
        equivalent (lists of lists, structs, maps, dates and times, decimals, mixed Python objects); the
        message names the column.
    ValueError
        A list holds a null, a uint64 value does not fit in int64, or columns differ in length.

    Notes
    -----
    Integers and booleans become ``int64_list``; floats ``float_list`` (float64 is rounded to float32,
    as :func:`recordkit.encode_example` does); strings (UTF-8) and binary ``bytes_list``; list columns
    lists. A null leaves the feature out of that row's record. See ``docs/tables.md``.

    Examples
    --------
    >>> import numpy as np
    >>> records = encode_examples({"x": np.array([1, 2]), "emb": np.zeros((2, 3), np.float32)})
    >>> len(records)
    2
    """
    return _encode(table, _messages._TF)


def encode_ofrecords(table: Any) -> list[bytes]:
    """Serialize every row of a table as a OneFlow ``OFRecord``, one feature per column.

    As :func:`encode_examples`, except that float64 columns give ``double_list`` and int32 columns
    ``int32_list``, as :func:`recordkit.encode_ofrecord` does for numpy arrays.

    Raises
    ------
    ValueError
        Also when a row has no non-null value: OneFlow rejects empty records.
    """
    return _encode(table, _messages._OF)


# --------------------------------------------------------------------------------------------------------------
# Tables out


def _leaf(values: np.ndarray[Any, Any], value_type: ValueType) -> Any:
    """Flat numpy values (numbers, or an object array of bytes or str) as an Arrow array.

    ``"str"`` values may be UTF-8 bytes: Arrow checks them (in C), raising ``ArrowInvalid``.
    """
    pa = _pyarrow()
    if isinstance(value_type, str):  # "bytes" or "str" (never compare a dtype with a string: slow)
        return pa.array(values, pa.binary() if value_type == "bytes" else pa.string())
    if values.dtype.kind in "iuf" and values.flags.c_contiguous and values.dtype.isnative:
        # The buffer as it is: no copy, no type inference.
        kind = pa.from_numpy_dtype(values.dtype)
        return pa.Array.from_buffers(kind, len(values), [None, pa.py_buffer(values)])
    return pa.array(values)


def _fixed_lists(array: Any, shape: tuple[int, ...], n: int, valid: Any = None) -> Any:
    """Nest flat values of ``n`` items of ``shape`` as fixed-size lists (a scalar shape: as they are)."""
    pa = _pyarrow()
    for outer in reversed(range(len(shape))):  # the validity bitmap goes on the outermost lists
        count = n * math.prod(shape[:outer])
        validity = valid if outer == 0 else None
        kind = pa.list_(array.type, shape[outer])
        array = pa.Array.from_buffers(kind, count, [validity], children=[array])
    if not shape and valid is not None:
        array = pa.Array.from_buffers(array.type, n, [valid, *array.buffers()[1:]], offset=0)
    return array


def _column_to_arrow(
    value: np.ndarray[Any, Any] | Ragged, value_type: ValueType | None = None, valid: Any = None
) -> Any:
    """A column as Arrow: ``value_type`` is the spec's (else read off the values), ``valid`` a bitmap."""
    pa = _pyarrow()
    if isinstance(value, Ragged):  # lists (large_list past 2**31 values)
        splits = np.asarray(value.row_splits, np.int64)
        values = _column_to_arrow(value.values, value_type)
        if int(splits[-1]) <= _INT32_MAX:
            return pa.ListArray.from_arrays(pa.array(splits.astype(np.int32)), values)
        return pa.LargeListArray.from_arrays(pa.array(splits), values)
    if value_type is None:
        value_type = value.dtype
        if value.dtype == object:
            value_type = "str" if isinstance(next(iter(value.flat), b""), str) else "bytes"
    flat = _leaf(np.ascontiguousarray(value).reshape(-1), value_type)
    return _fixed_lists(flat, value.shape[1:], value.shape[0] if value.ndim else 1, valid)


def to_arrow(batch: Mapping[str, np.ndarray[Any, Any] | Ragged]) -> pa.Table:
    """Turn a parsed batch (what :func:`recordkit.parse_examples` returns) into a ``pyarrow.Table``.

    Parameters
    ----------
    batch
        Feature name -> array with one row per record, or :class:`~recordkit.Ragged`.

    Returns
    -------
    pyarrow.Table
        One column per feature: a 1-D array as a plain column, an ``(n, *shape)`` array as (nested)
        fixed-size lists, a :class:`~recordkit.Ragged` as lists (lists of lists for two ragged levels).
        Object arrays give ``binary`` columns (``string`` when they hold ``str``). Numeric values are not
        copied. A :class:`~recordkit.decode.sparse.SparseArray` (a Sparse spec's result) raises
        ``TypeError``.

    Examples
    --------
    >>> import numpy as np
    >>> to_arrow({"x": np.array([1, 2]), "v": Ragged(np.array([5, 6, 7]), np.array([0, 1, 3]))}).to_pydict()
    {'x': [1, 2], 'v': [[5], [6, 7]]}
    """
    pa = _pyarrow()
    if not isinstance(batch, Mapping):
        raise TypeError(
            f"to_arrow() takes a mapping of feature name to column, not {type(batch).__name__}"
        )
    for name, value in batch.items():
        if isinstance(value, SparseArray):
            raise TypeError(f"batch[{name!r}] is a SparseArray: Arrow has no sparse column")
    return pa.table({name: _column_to_arrow(value) for name, value in batch.items()})


class _ArrowReader(ColumnReader):
    """The numpy reader, except that ``str`` values stay UTF-8 bytes (Arrow checks them, in C)."""

    def _decode_utf8(self, name: str, piece: Any) -> Any:
        return piece[2]


def _arrow_column(
    reader: ColumnReader, name: str, column: _columns.Column, spec: Spec, null_missing: bool
) -> Any:
    """The Arrow column of one spec: FixedLen as (fixed-size lists of) values, VarLen as lists,
    FixedLenSequence as lists of fixed-size items (not padded)."""
    valid = None
    if isinstance(spec, FixedLen):
        present = column.kinds != 0
        if null_missing and spec.default is None and not present.all():
            # a placeholder in the missing rows, hidden by the validity bitmap
            spec = FixedLen(spec.shape, spec.dtype, default=_fill_value(spec.dtype))
            valid = _pyarrow().py_buffer(np.packbits(present, bitorder="little").tobytes())
        value: Any = reader.fixed(name, column, spec)
    elif isinstance(spec, VarLen):
        value = reader.ragged(name, column, spec)
    elif isinstance(spec, FixedLenSequence):
        counts, flat = reader.items(name, column, spec)
        value = Ragged(flat.reshape(-1, *spec.shape), _splits(counts // math.prod(spec.shape)))
    else:
        raise TypeError(
            f"features[{name!r}]: {type(spec).__name__} specs cannot be parsed to Arrow"
        )
    try:
        return _column_to_arrow(value, spec.dtype, valid)
    except _pyarrow().ArrowInvalid:  # a str value is not UTF-8: the numpy reader names its record
        ColumnReader(ofrecord=reader.ofrecord).read(name, column, spec)
        raise


def _partitioned_arrow(
    reader: ColumnReader, name: str, spec: Partitioned, columns: Mapping[str, _columns.Column]
) -> Any:
    """A Partitioned feature as nested lists (a uniform innermost row length as fixed-size lists)."""
    value = _composite.read(reader, name, spec, columns)
    try:
        return _column_to_arrow(value, spec.dtype)  # type: ignore[arg-type]
    except _pyarrow().ArrowInvalid:  # a str value is not UTF-8: the numpy reader names its record
        _composite.read(ColumnReader(ofrecord=reader.ofrecord), name, spec, columns)
        raise


def parse_arrow(
    records: Iterable[Any],
    features: Mapping[str, _composite.ExampleSpec],
    *,
    ofrecord: bool,
    null_missing: bool = False,
) -> pa.Table:
    """Parse a batch of Examples (or OFRecords) straight into a ``pyarrow.Table``.

    What ``parse_examples(records, features, to="arrow")`` and ``parse_ofrecords(..., to="arrow")`` call.
    With ``null_missing``, a FixedLen feature without a default is null in the records that lack it
    (instead of an error).
    """
    pa = _pyarrow()
    for name, spec in features.items():
        if isinstance(spec, Image):
            raise TypeError(
                f"features[{name!r}]: rk.Image decodes to numpy arrays only; parse images without "
                'to="arrow", or read the encoded bytes with FixedLen((), bytes)'
            )
        if isinstance(spec, Sparse):
            raise TypeError(
                f"features[{name!r}]: a Sparse feature parses to numpy only (a SparseArray); parse it "
                'without to="arrow"'
            )
    specs = _check_specs(features, (FixedLen, VarLen, FixedLenSequence, Partitioned), "features")
    batch = _columns.as_records(records)
    columns = _columns.collect(batch, _composite.column_names(specs), ofrecord=ofrecord)
    reader = _ArrowReader(ofrecord=ofrecord)
    arrays = {
        name: _partitioned_arrow(reader, name, spec, columns)
        if isinstance(spec, Partitioned)
        else _arrow_column(reader, name, columns[name], spec, null_missing)
        for name, spec in specs.items()
    }
    if not arrays:  # no columns, but as many rows as records
        return pa.table({"_": pa.nulls(len(batch))}).drop_columns(["_"])
    return pa.table(arrays)
