"""The schema of records, inferred from a sample of them, and parse specs made from it.

:meth:`Schema.of` decodes sample records (Examples, OFRecords or SequenceExamples) and counts, for each
feature, the list types it holds, in how many records it is present and the fewest and most values one record
holds; :func:`infer_spec` turns that into ``FixedLen`` and ``VarLen`` specs for
:func:`recordkit.parse_examples` and :func:`recordkit.parse_ofrecords`. ``recordkit info`` reports this
schema, and :func:`recordkit.hf.to_dataset` takes its features from it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from recordkit.decode.payloads import SEQUENCE_EXAMPLE_PAYLOAD, decode_payload
from recordkit.decode.specs import FixedLen, VarLen
from recordkit.errors import DecodeError

if TYPE_CHECKING:
    from typing_extensions import Self

__all__ = ["LIST_DTYPES", "FeatureStats", "Schema", "infer_spec", "list_kind"]

LIST_DTYPES: dict[str, Any] = {
    "bytes_list": bytes,
    "float_list": np.float32,
    "double_list": np.float64,
    "int32_list": np.int32,
    "int64_list": np.int64,
}
"""Each list type a feature may hold (``kinds`` of :class:`FeatureStats`) and the value type it parses as."""

_KINDS = {np.dtype(dtype): kind for kind, dtype in LIST_DTYPES.items() if dtype is not bytes}


def list_kind(value: Any) -> str:
    """The list type of a decoded feature value: ``bytes_list``, ``float_list``, ``int64_list``, ..."""
    if isinstance(value, list):
        return "bytes_list"
    return _KINDS.get(value.dtype, str(value.dtype))


@dataclass
class FeatureStats:
    """What a sample of records holds under one feature name.

    Attributes
    ----------
    kinds
        The list types seen (an empty list adds none): one, unless records disagree.
    present
        In how many records the feature is present.
    min_len, max_len
        The fewest and most values one record that has the feature holds (time steps for a feature list).
    """

    kinds: set[str]
    present: int
    min_len: int
    max_len: int


@dataclass
class Schema:
    """The features seen in a sample of records: plain features (or context) and feature lists.

    Attributes
    ----------
    features
        Name to the statistics of a plain feature (the context of a SequenceExample), in the order first seen.
    feature_lists
        The same for the feature lists of a SequenceExample.
    records
        How many records decoded: a feature with ``present == records`` is in every one.
    undecodable
        How many records did not decode (they are left out of the statistics).
    """

    features: dict[str, FeatureStats] = field(default_factory=dict)
    feature_lists: dict[str, FeatureStats] = field(default_factory=dict)
    records: int = 0
    undecodable: int = 0

    @classmethod
    def of(cls, records: Iterable[bytes], payload: str = "example") -> Self:
        """Collect the schema of ``records``, decoded as ``payload`` (a kind of
        :data:`recordkit.decode.payloads.PAYLOAD_KINDS` other than ``raw``).

        Examples
        --------
        >>> import recordkit as rk
        >>> schema = Schema.of([rk.encode_example({"id": [1]}), rk.encode_example({"id": [2], "x": [0.5]})])
        >>> schema.features["x"]
        FeatureStats(kinds={'float_list'}, present=1, min_len=1, max_len=1)
        >>> infer_spec(schema)
        {'id': FixedLen(shape=(), dtype=dtype('int64'), default=None), 'x': VarLen(dtype=dtype('float32'))}
        """
        schema = cls()
        sequence = payload == SEQUENCE_EXAMPLE_PAYLOAD
        for record in records:
            try:
                decoded = decode_payload(payload, record)
            except DecodeError:
                schema.undecodable += 1
                continue
            schema.records += 1
            for name, value in (decoded.context if sequence else decoded).items():
                kinds = {list_kind(value)} if len(value) else set()
                _count(schema.features, name, FeatureStats(kinds, 1, len(value), len(value)))
            for name, steps in decoded.feature_lists.items() if sequence else ():
                kinds = {list_kind(step) for step in steps if len(step)}
                _count(schema.feature_lists, name, FeatureStats(kinds, 1, len(steps), len(steps)))
        return schema

    @classmethod
    def merged(cls, schemas: Iterable[Schema]) -> Self:
        """One schema for the samples of several files (or shards)."""
        whole = cls()
        for schema in schemas:
            whole.records += schema.records
            whole.undecodable += schema.undecodable
            for part in ("features", "feature_lists"):
                for name, seen in getattr(schema, part).items():
                    _count(getattr(whole, part), name, seen)
        return whole


def _count(stats: dict[str, FeatureStats], name: str, seen: FeatureStats) -> None:
    """Count ``seen`` in ``stats[name]``: kinds joined, presence added up, the lengths' range widened."""
    entry = stats.setdefault(name, FeatureStats(set(), 0, seen.min_len, seen.max_len))
    entry.kinds |= seen.kinds
    entry.present += seen.present
    entry.min_len = min(entry.min_len, seen.min_len)
    entry.max_len = max(entry.max_len, seen.max_len)


def infer_spec(schema: Schema, *, nullable: bool = False) -> dict[str, FixedLen | VarLen]:
    """Parse specs for the plain features of ``schema``, that parse every record it was taken from.

    A feature with the same number ``n`` of values in every record is ``FixedLen((), dtype)`` when ``n`` is 1,
    ``FixedLen((n,), dtype)`` when it is more, and any other ``VarLen(dtype)``; ``dtype`` is its list type's
    (:data:`LIST_DTYPES`; ``float32`` for a feature only ever empty, as TensorFlow reads one).

    With ``nullable``, the specs are a table's columns whose missing values are nulls
    (:func:`recordkit.decode.tables.parse_arrow` with ``null_missing=True``): a feature with one value in
    every record that has it is a scalar, and any other a ``VarLen`` list.

    Raises
    ------
    ValueError
        A feature holds lists of different types in different records.
    """
    specs: dict[str, FixedLen | VarLen] = {}
    for name, stats in schema.features.items():
        if len(stats.kinds) > 1:
            raise ValueError(
                f"feature {name!r} holds {' and '.join(sorted(stats.kinds))} values in different "
                "records: one spec cannot parse both"
            )
        dtype = LIST_DTYPES[next(iter(stats.kinds), "float_list")]
        length = stats.max_len if stats.min_len == stats.max_len else 0
        if not nullable and stats.present < schema.records:
            length = 0
        if length == 1:
            specs[name] = FixedLen((), dtype)
        elif length and not nullable:
            specs[name] = FixedLen((length,), dtype)
        else:
            specs[name] = VarLen(dtype)
    return specs
