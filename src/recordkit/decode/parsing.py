"""Decode batches of serialized Examples, SequenceExamples and OFRecords into numpy arrays.

Describe the features you want with specs, as with ``tf.io.parse_example``:

* :class:`FixedLen` -- a dense array of a fixed shape per record (``tf.io.FixedLenFeature``);
* :class:`VarLen` -- a variable number of values per record, returned as a :class:`Ragged`
  (``tf.io.VarLenFeature`` / ``tf.io.RaggedFeature``);
* :class:`FixedLenSequence` -- a variable number of fixed-shape items per record, padded to the longest
  record of the batch (``tf.io.FixedLenSequenceFeature``), mostly for SequenceExample feature lists.

Examples
--------
>>> import numpy as np
>>> from recordkit._proto.tensorflow import example_pb2
>>> ex = example_pb2.Example()
>>> ex.features.feature["label"].int64_list.value.append(7)
>>> ex.features.feature["tokens"].int64_list.value.extend([4, 5, 6])
>>> batch = parse_examples(
...     [ex.SerializeToString()] * 2,
...     {"label": FixedLen((), np.int64), "tokens": VarLen(np.int64)},
... )
>>> batch["label"]
array([7, 7])
>>> batch["tokens"].to_list()
[[4, 5, 6], [4, 5, 6]]
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Literal, overload

from recordkit.decode import _composite
from recordkit.decode import columns as _columns
from recordkit.decode._composite import ExampleSpec
from recordkit.decode.batch import ParsedBatch
from recordkit.decode.images import Image
from recordkit.decode.partitions import Partitioned, read_partitioned_lists
from recordkit.decode.sparse import Sparse
from recordkit.decode.specs import (
    ColumnReader,
    FixedLen,
    FixedLenSequence,
    Ragged,
    VarLen,
    _check_specs,
    _first,
    _pad_items,
    _record_of,
    _splits,
)
from recordkit.decode.specs import (
    Spec as Spec,  # noqa: PLC0414 - also imported from here
)
from recordkit.errors import DecodeError

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
    import pyarrow as pa

__all__ = [
    "parse_example",
    "parse_examples",
    "parse_ofrecords",
    "parse_sequence_example",
    "parse_sequence_examples",
]


def _parse_batch(
    records: Iterable[Any],
    features: Mapping[str, ExampleSpec],
    *,
    ofrecord: bool,
    to: str = "numpy",
) -> Any:
    if to == "arrow":
        from recordkit.decode.tables import parse_arrow  # needs pyarrow: imported on demand

        return parse_arrow(records, features, ofrecord=ofrecord)
    if to != "numpy":
        raise ValueError(f'to must be "numpy" or "arrow", not {to!r}')
    allowed = (FixedLen, VarLen, FixedLenSequence, Image, Sparse, Partitioned)
    specs = _check_specs(features, allowed, "features")
    names = _composite.column_names(specs)
    columns = _columns.collect(_columns.as_records(records), names, ofrecord=ofrecord)
    reader = ColumnReader(ofrecord=ofrecord)
    batch: dict[str, Any] = {  # Parsed, or a SparseArray for a Sparse spec
        name: _composite.read(reader, name, spec, columns) for name, spec in specs.items()
    }
    return ParsedBatch(batch)


@overload
def parse_examples(
    records: Iterable[Any], features: Mapping[str, ExampleSpec], *, to: Literal["numpy"] = ...
) -> ParsedBatch: ...
@overload
def parse_examples(
    records: Iterable[Any], features: Mapping[str, ExampleSpec], *, to: Literal["arrow"]
) -> pa.Table: ...
def parse_examples(
    records: Iterable[Any], features: Mapping[str, ExampleSpec], *, to: str = "numpy"
) -> Any:
    """Parse a batch of serialized ``tf.train.Example`` messages, like ``tf.io.parse_example``.

    Parameters
    ----------
    records
        An iterable of bytes-like serialized Examples.
    features
        Feature name -> :class:`FixedLen`, :class:`VarLen`, :class:`FixedLenSequence`,
        :class:`~recordkit.decode.images.Image` (an encoded image in a bytes feature),
        :class:`~recordkit.decode.sparse.Sparse` (values placed at indices read from other features) or
        :class:`~recordkit.decode.partitions.Partitioned` (values cut by row partitions read from other
        features).
    to
        ``"numpy"``, or ``"arrow"`` for a ``pyarrow.Table`` (needs pyarrow; see ``docs/tables.md``).

    Returns
    -------
    dict or pyarrow.Table
        Feature name -> ``(batch, *shape)`` array for FixedLen, :class:`Ragged` for VarLen,
        ``(batch, longest, *shape)`` for FixedLenSequence, ``(batch, height, width, channels)`` uint8
        for an Image with a ``size`` (else a list of ``(H, W, channels)`` arrays), a
        :class:`~recordkit.decode.sparse.SparseArray` for Sparse, a (nested) :class:`Ragged` for
        Partitioned. With ``to="arrow"``, a table with one column per feature: FixedLen as scalars or
        fixed-size lists, VarLen as lists, FixedLenSequence as lists of fixed-size items (not padded),
        Partitioned as nested lists (Sparse and Image cannot be parsed to Arrow).

    Raises
    ------
    DecodeError
        A record is malformed, lacks a required feature, holds the wrong kind of list or the wrong number
        of values. ``.index`` is the record's position in the batch, ``.feature`` the feature name.
    """
    return _parse_batch(records, features, ofrecord=False, to=to)


def parse_example(record: Any, features: Mapping[str, ExampleSpec]) -> dict[str, Any]:
    """Parse one serialized Example, like ``tf.io.parse_single_example``: arrays without a batch axis.

    VarLen features come out as 1-D arrays. See :func:`parse_examples`.
    """
    return {name: value[0] for name, value in parse_examples([record], features).items()}


@overload
def parse_ofrecords(
    records: Iterable[Any], features: Mapping[str, ExampleSpec], *, to: Literal["numpy"] = ...
) -> ParsedBatch: ...
@overload
def parse_ofrecords(
    records: Iterable[Any], features: Mapping[str, ExampleSpec], *, to: Literal["arrow"]
) -> pa.Table: ...
def parse_ofrecords(
    records: Iterable[Any], features: Mapping[str, ExampleSpec], *, to: str = "numpy"
) -> Any:
    """Parse a batch of serialized ``oneflow.OFRecord`` messages with the same specs as Examples.

    OneFlow's casting rules apply: any numeric list (float, double, int32, int64) is converted to the
    spec's numeric dtype, and a feature holding a single bytes value can be read as int8 numbers
    (cast to the spec's dtype), as ``OFRecordRawDecoder`` does. See :func:`parse_examples` (also for
    ``to``).
    """
    return _parse_batch(records, features, ofrecord=True, to=to)


def parse_sequence_examples(
    records: Iterable[Any],
    context_features: Mapping[str, FixedLen | VarLen | Partitioned] | None = None,
    sequence_features: Mapping[str, FixedLenSequence | VarLen | Partitioned] | None = None,
) -> tuple[dict[str, Any], dict[str, Any], dict[str, npt.NDArray[np.int64]]]:
    """Parse a batch of serialized ``tf.train.SequenceExample`` messages, like
    ``tf.io.parse_sequence_example``.

    Parameters
    ----------
    records
        An iterable of bytes-like serialized SequenceExamples.
    context_features
        Name -> :class:`FixedLen`, :class:`VarLen` or :class:`~recordkit.decode.partitions.Partitioned`,
        for the context.
    sequence_features
        Name -> :class:`FixedLenSequence` (one item per time step, padded to the longest record),
        :class:`VarLen` (a two-level :class:`Ragged`: records, then steps, then values) or
        :class:`~recordkit.decode.partitions.Partitioned` (records, then steps, then each step's values
        cut by the partitions of the same step, read from feature lists with as many steps).

    Returns
    -------
    context, sequence, lengths
        As TensorFlow: ``lengths`` holds the number of steps of each record for every FixedLenSequence
        feature.
    """
    context_specs = _check_specs(
        context_features or {}, (FixedLen, VarLen, Partitioned), "context_features"
    )
    sequence_specs = _check_specs(
        sequence_features or {}, (FixedLenSequence, VarLen, Partitioned), "sequence_features"
    )
    context_columns, sequence_columns = _columns.collect_sequences(
        _columns.as_records(records),
        _composite.column_names(context_specs),
        _composite.column_names(sequence_specs),
    )
    reader = ColumnReader(ofrecord=False)
    context = {
        name: _composite.read(reader, name, spec, context_columns)
        for name, spec in context_specs.items()
    }
    sequence: dict[str, Any] = {}
    lengths: dict[str, npt.NDArray[np.int64]] = {}
    for name, spec in sequence_specs.items():
        if isinstance(spec, Partitioned):
            sequence[name] = read_partitioned_lists(
                reader,
                name,
                spec,
                {key: sequence_columns[key].steps for key in spec.keys(name)},
                {key: sequence_columns[key].column for key in spec.keys(name)},
            )
            continue
        seq = sequence_columns[name]
        assert isinstance(spec, (FixedLenSequence, VarLen))
        if isinstance(spec, FixedLenSequence) and not spec.allow_missing and not seq.present.all():
            i = _first(~seq.present)
            raise DecodeError(
                f"record {i}: feature list {name!r} is missing (allow_missing is not set)",
                index=i,
                feature=name,
            )
        try:
            _, counts, flat = reader.flat(name, seq.column, spec.dtype)
        except DecodeError as exc:  # named by its step: name the record
            i = _record_of(seq.steps, exc.index or 0)
            message = str(exc).split(": ", 2)[-1]
            raise DecodeError(
                f"record {i}: feature list {name!r}: {message}", index=i, feature=name
            ) from None
        if isinstance(spec, VarLen):
            sequence[name] = Ragged(Ragged(flat, _splits(counts)), _splits(seq.steps))
            continue
        size = math.prod(spec.shape)
        wrong = counts != size
        if wrong.any():
            step = _first(wrong)
            i = _record_of(seq.steps, step)
            raise reader.error(
                name,
                i,
                f"time step {step - int(seq.steps[:i].sum())}: expected {size} values "
                f"(shape {spec.shape}), found {int(counts[step])}",
            )
        sequence[name] = _pad_items(flat, seq.steps, spec)
        lengths[name] = seq.steps.copy()
    return context, sequence, lengths


def parse_sequence_example(
    record: Any,
    context_features: Mapping[str, FixedLen | VarLen | Partitioned] | None = None,
    sequence_features: Mapping[str, FixedLenSequence | VarLen | Partitioned] | None = None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Parse one serialized SequenceExample, like ``tf.io.parse_single_sequence_example``.

    Returns ``(context, sequence)`` without the batch axis: a FixedLenSequence feature is
    ``(steps, *shape)``, a VarLen feature list a :class:`Ragged` of steps. See
    :func:`parse_sequence_examples`.
    """
    context, sequence, _ = parse_sequence_examples([record], context_features, sequence_features)
    return (
        {name: value[0] for name, value in context.items()},
        {name: value[0] for name, value in sequence.items()},
    )
