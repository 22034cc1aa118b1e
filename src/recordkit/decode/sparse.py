"""Values placed at indices read from other features (``tf.io.SparseFeature``), and the sparse result.

A :class:`Sparse` spec reads the values of one feature and, for each dimension of ``size``, the int64
indices of another feature of the same record (one index per value). The batch becomes a
:class:`SparseArray` of dense shape ``(n, *size)``: coordinates ``indices`` (``[record, i0, i1, ...]``),
``values`` and ``dense_shape``, the layout of ``tf.SparseTensor``.

Examples
--------
>>> from recordkit.decode.messages import encode_example
>>> from recordkit.decode.parsing import parse_examples
>>> record = encode_example({"val": [0.5, 2.0], "idx": [3, 1]})
>>> sp = parse_examples([record], {"sp": Sparse("idx", "val", np.float32, 5)})["sp"]
>>> sp.indices.tolist(), sp.values.tolist(), sp.dense_shape.tolist()
([[0, 1], [0, 3]], [2.0, 0.5], [1, 5])
>>> sp.to_dense()
array([[0. , 2. , 0. , 0.5, 0. ]], dtype=float32)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from recordkit.decode.specs import ColumnReader, ValueType, _fill_value, as_shape, as_value_type

if TYPE_CHECKING:
    import numpy.typing as npt

    from recordkit.decode.columns import Column

__all__ = ["Sparse", "SparseArray"]


@dataclass(frozen=True)
class Sparse:
    """Values placed at indices read from other features of the record (like ``tf.io.SparseFeature``).

    Parameters
    ----------
    index_key
        The int64 feature holding the index of each value, or a sequence of them, one per dimension of
        ``size``.
    value_key
        The feature holding the values.
    dtype
        The values' type, as for :class:`~recordkit.decode.specs.VarLen`.
    size
        The dense shape of one record (an int for one index feature). As in TensorFlow, indices are
        not checked against it when parsing (TensorFlow's own tests keep an index past ``size``);
        :meth:`SparseArray.to_dense` refuses an index outside it.
    already_sorted
        Whether each record's values are already in index order: the entries are then kept in the
        order of the record. Otherwise they are sorted by index (row-major), as TensorFlow does.
    """

    index_key: tuple[str, ...]
    value_key: str
    dtype: ValueType
    size: tuple[int, ...]
    already_sorted: bool = False

    def __init__(
        self,
        index_key: str | tuple[str, ...] | list[str],
        value_key: str,
        dtype: Any,
        size: Any,
        *,
        already_sorted: bool = False,
    ) -> None:
        keys = (index_key,) if isinstance(index_key, str) else tuple(index_key)
        if not keys or not all(isinstance(k, str) for k in keys):
            raise TypeError("index_key is a feature name or a non-empty sequence of them")
        if not isinstance(value_key, str):
            raise TypeError(f"value_key is a feature name, not {type(value_key).__name__}")
        shape = as_shape(size)
        if len(shape) != len(keys):
            raise ValueError(
                f"size {shape} has {len(shape)} dimensions for {len(keys)} index features"
            )
        object.__setattr__(self, "index_key", keys)
        object.__setattr__(self, "value_key", value_key)
        object.__setattr__(self, "dtype", as_value_type(dtype))
        object.__setattr__(self, "size", shape)
        object.__setattr__(self, "already_sorted", bool(already_sorted))

    def keys(self, name: str) -> list[str]:
        """The features this spec reads: the values, then the indices (``name`` is not one of them)."""
        return [self.value_key, *self.index_key]


@dataclass(frozen=True, eq=False)
class SparseArray:
    """A sparse array in coordinate form, as ``tf.SparseTensor``.

    Attributes
    ----------
    indices
        ``(nnz, ndim)`` int64: the coordinates of each value, the record first.
    values
        ``(nnz,)``: the values (an object array of ``bytes`` or ``str`` for bytes features).
    dense_shape
        ``(ndim,)`` int64: ``(n, *size)``.
    """

    indices: npt.NDArray[np.int64]
    values: np.ndarray[Any, Any]
    dense_shape: npt.NDArray[np.int64]

    @property
    def shape(self) -> tuple[int, ...]:
        """The dense shape as a tuple."""
        return tuple(int(d) for d in self.dense_shape)

    def __len__(self) -> int:
        """The size of the first dimension (the number of records of a batch)."""
        return int(self.dense_shape[0])

    def __getitem__(self, index: int) -> SparseArray:
        """Entry ``index`` of the first dimension (record ``index`` of a batch), one dimension less."""
        rows = len(self)
        i = index + rows if index < 0 else index
        if not 0 <= i < rows:
            raise IndexError(f"index {index} out of range for {rows} rows")
        mine = self.indices[:, 0] == i
        return SparseArray(self.indices[mine, 1:], self.values[mine], self.dense_shape[1:].copy())

    def to_dense(self, default: Any = None) -> np.ndarray[Any, Any]:
        """The dense array, ``default`` (0, ``b""`` or ``""`` when not given) where no value is set.

        Raises ``ValueError`` if an index lies outside ``dense_shape`` or two values share an index
        (as ``tf.sparse.to_dense``).
        """
        shape = self.shape
        outside = (self.indices < 0) | (self.indices >= self.dense_shape)
        if outside.any():
            at = int(np.argmax(outside.any(axis=1)))
            raise ValueError(
                f"index {self.indices[at].tolist()} is outside the dense shape {shape}"
            )
        if default is None:
            kind = self.values.dtype
            if kind == object:
                default = "" if len(self.values) and isinstance(self.values[0], str) else b""
            else:
                default = _fill_value(kind)
        out = np.empty(shape, self.values.dtype)
        out[...] = default
        if len(self.values):
            flat = np.ravel_multi_index(tuple(self.indices.T), shape)
            if len(np.unique(flat)) != len(flat):
                raise ValueError("two values share an index: no dense array holds both")
            out.reshape(-1)[flat] = self.values
        return out


def read_sparse(
    reader: ColumnReader, name: str, spec: Sparse, columns: Mapping[str, Column]
) -> SparseArray:
    """The :class:`SparseArray` of a :class:`Sparse` feature of a batch of records."""
    _, counts, values = reader.flat(spec.value_key, columns[spec.value_key], spec.dtype)
    n = len(counts)
    rows = np.repeat(np.arange(n, dtype=np.int64), counts)
    coords = [rows]
    for key in spec.index_key:
        _, index_counts, index = reader.flat(key, columns[key], np.dtype(np.int64))
        wrong = index_counts != counts
        if wrong.any():
            i = int(np.argmax(wrong))
            raise reader.error(
                name,
                i,
                f"{int(counts[i])} values in {spec.value_key!r} but {int(index_counts[i])} "
                f"indices in {key!r}",
            )
        coords.append(index)
    indices = np.stack(coords, axis=1) if n else np.zeros((0, len(coords)), np.int64)
    if not spec.already_sorted and len(values):
        order = np.lexsort(coords[::-1])
        indices, values = indices[order], values[order]
    return SparseArray(indices, values, np.array([n, *spec.size], np.int64))
