"""What the command line does with record payloads: show them, summarise, convert.

The payload kinds, and the detector that tells them from a sample of records, are
:mod:`recordkit.decode.payloads`'s.

JSON rendering (``recordkit cat --json``) follows these rules, documented in ``docs/cli.md``:

* a record is an object mapping each feature name to its list of values (keys sorted); a SequenceExample is
  ``{"context": {...}, "feature_lists": {name: [[step values], ...]}}``;
* integers are JSON integers;
* floats are the shortest decimal that reads back to the identical value *at the list's width*
  (``float32`` for ``float_list``, ``float64`` for ``double_list``); NaN and infinities are the strings
  ``"NaN"``, ``"Infinity"`` and ``"-Infinity"``, as in protobuf's JSON mapping;
* a bytes value is a JSON string when it is valid UTF-8 made of printable characters (tabs and newlines
  allowed), else ``{"b64": "<standard base64>"}``.
"""

from __future__ import annotations

import base64
import itertools
import json
import math
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

import numpy as np

import recordkit as rk
from recordkit._proto.oneflow import record_pb2
from recordkit._proto.tensorflow import example_pb2
from recordkit.cli.common import CliError
from recordkit.decode import schema
from recordkit.decode.messages import bytes_feature
from recordkit.decode.payloads import decode_payload, detect_payload
from recordkit.decode.schema import list_kind
from recordkit.formats.payloads import EXAMPLE_PAYLOAD, OFRECORD_PAYLOAD

_SHOWN_VALUES = 8
_SHOWN_BYTES = 48


def sampled_payload_kind(
    payload: str, sample: int, reader: rk.RecordReader, records: Iterator[bytes]
) -> tuple[str | None, Iterator[bytes]]:
    """The kind ``--payload`` names, or with ``auto`` the kind detected in the first ``sample`` records
    (the reader's format's own payload kind tried first); and ``records`` again, from the first."""
    head = list(itertools.islice(records, sample))
    prefer = rk.get_format(reader.format).payload
    kind = payload if payload != "auto" else detect_payload(head, prefer=prefer)
    return kind, itertools.chain(head, records)


# -- JSON and text ---------------------------------------------------------------------------------


def float_json(value: float | np.floating[Any]) -> str:
    """Return the JSON token of one float: the shortest exact decimal at its width, or a string.

    Examples
    --------
    >>> float_json(np.float32(0.1)), float_json(0.1), float_json(float("-inf"))
    ('0.1', '0.1', '"-Infinity"')
    """
    if math.isnan(value):
        return '"NaN"'
    if math.isinf(value):
        return '"Infinity"' if value > 0 else '"-Infinity"'
    # str() of a numpy float32 is the shortest decimal that reads back as the same float32.
    return str(value) if isinstance(value, np.float32) else repr(float(value))


def _text(value: bytes) -> str | None:
    """``value`` as text when it is UTF-8 made of printable characters (tabs and newlines allowed)."""
    try:
        text = value.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return text if all(char.isprintable() or char in "\t\n\r" for char in text) else None


def bytes_json(value: bytes, *, ensure_ascii: bool = False) -> str:
    """Return the JSON of one bytes value: a string when it is printable UTF-8, else ``{"b64": ...}``.

    Examples
    --------
    >>> bytes_json(b"cat"), bytes_json(b"\\x00\\xff")
    ('"cat"', '{"b64": "AP8="}')
    """
    text = _text(value)
    if text is not None:
        return json.dumps(text, ensure_ascii=ensure_ascii)
    return '{"b64": "' + base64.b64encode(value).decode("ascii") + '"}'


def _short_bytes(value: bytes) -> str:
    text = _text(value)
    if text is not None:
        shown = text if len(text) <= _SHOWN_BYTES else text[:_SHOWN_BYTES] + "…"
        return json.dumps(shown, ensure_ascii=False)
    head = value[: _SHOWN_BYTES // 2].hex()
    return f"<{len(value)} bytes: {head}{'…' if len(value) > _SHOWN_BYTES // 2 else ''}>"


def _items(value: Any, show_bytes: Callable[[bytes], str], float_quote: str = "") -> list[str]:
    """The tokens of a decoded feature value's items (for text, the floats' quotes stripped)."""
    if isinstance(value, list):
        return [show_bytes(item) for item in value]
    if value.dtype.kind == "f":
        return [float_json(item).strip(float_quote) for item in value]
    return [str(item) for item in value.tolist()]


def _listed(items: list[str], more: int = 0) -> str:
    return "[" + ", ".join(items) + (f", … {more} more" if more > 0 else "") + "]"


def _json_of(features: Mapping[str, Any], value: Callable[[Any], str], ensure_ascii: bool) -> str:
    entries = (
        f"{json.dumps(name, ensure_ascii=ensure_ascii)}: {value(v)}" for name, v in features.items()
    )
    return "{" + ", ".join(entries) + "}"


def record_json(kind: str, record: bytes, *, ensure_ascii: bool = False) -> str:
    """Return one record as a line of JSON (see the module docstring for the shape)."""
    if kind == "raw":
        return bytes_json(record, ensure_ascii=ensure_ascii)
    decoded = decode_payload(kind, record)

    def value(v: Any) -> str:
        return _listed(_items(v, lambda item: bytes_json(item, ensure_ascii=ensure_ascii)))

    if kind != "sequence_example":
        return _json_of(decoded, value, ensure_ascii)
    context = _json_of(decoded.context, value, ensure_ascii)
    lists = _json_of(
        decoded.feature_lists, lambda steps: _listed(list(map(value, steps))), ensure_ascii
    )
    return '{"context": ' + context + ', "feature_lists": ' + lists + "}"


def _short_value(value: Any) -> str:
    return _listed(_items(value[:_SHOWN_VALUES], _short_bytes, '"'), len(value) - _SHOWN_VALUES)


def _feature_lines(
    features: Mapping[str, Any], indent: str, show: Callable[[Any], str]
) -> list[str]:
    width = max((len(name) for name in features), default=0)
    return [f"{indent}{name:<{width}}  {show(value)}" for name, value in features.items()]


def record_text(kind: str, index: int, record: bytes) -> str:
    """Return a short human-readable view of one record (long lists and bytes are abbreviated)."""
    title = f"record {index} ({len(record)} bytes)"
    if kind == "raw":
        return f"{title}: {_short_bytes(record)}"
    decoded = decode_payload(kind, record)

    def feature(value: Any) -> str:
        return f"{list_kind(value)}[{len(value)}]  {_short_value(value)}"

    def steps(value: Any) -> str:
        shown = [_short_value(step) for step in value[:_SHOWN_VALUES]]
        return f"{len(value)} steps  {_listed(shown, len(value) - _SHOWN_VALUES)}"

    if kind != "sequence_example":
        return "\n".join([title, *_feature_lines(decoded, "  ", feature)])
    lines = [title, "  context:", *_feature_lines(decoded.context, "    ", feature)]
    lines += ["  feature_lists:", *_feature_lines(decoded.feature_lists, "    ", steps)]
    return "\n".join(lines)


# -- schema ----------------------------------------------------------------------------------------


class Schema(schema.Schema):
    """:class:`recordkit.decode.schema.Schema`, rendered for ``recordkit info`` and made into table columns."""

    def as_dict(self, lists: bool) -> dict[str, Any]:
        """The features' statistics, and the feature lists' when ``lists``, as JSON-ready lists; a kind
        is ``a|b`` when records disagree, ``float_list`` when every value was empty."""
        found = {"features": _rows(self.features)}
        return {**found, "feature_lists": _rows(self.feature_lists)} if lists else found

    def specs(self) -> dict[str, rk.FixedLen | rk.VarLen]:
        """Parse specs for the plain features, one table column each (missing values are nulls).

        Raises
        ------
        CliError
            A feature holds lists of different types in different records.
        """
        try:
            return schema.infer_spec(self, nullable=True)
        except ValueError as exc:
            raise CliError(
                str(exc).replace("one spec cannot parse", "one column cannot hold")
            ) from None


def _rows(stats: dict[str, schema.FeatureStats]) -> list[dict[str, Any]]:
    return [
        {"name": name, "kind": "|".join(sorted(entry.kinds)) or "float_list"}
        | {key: getattr(entry, key) for key in ("present", "min_len", "max_len")}
        for name, entry in stats.items()
    ]


# -- conversion ------------------------------------------------------------------------------------


def convert_payload(record: bytes, source: str, target: str, *, lossy: bool, index: int) -> bytes:
    """Re-encode one record from payload kind ``source`` to ``target`` (``example`` or ``ofrecord``).

    Feature lists map one to one (``int64_list``, ``float_list``, ``bytes_list``); an OFRecord
    ``int32_list`` becomes an ``int64_list``; a ``double_list`` becomes a ``float_list`` only if every value
    is exactly a float32, or when ``lossy``. The same kind returns ``record`` unchanged. Each value keeps
    its list type, even an empty one (the encoders map numpy dtypes to list types), and a Feature with no
    list set (both messages' ``Feature`` is a oneof) stays one with none set.

    Raises
    ------
    CliError
        The kinds cannot be converted, or a value would change without ``lossy``.
    recordkit.DecodeError
        The record does not decode as ``source``.
    """
    if source == target:
        return record
    if {source, target} != {EXAMPLE_PAYLOAD, OFRECORD_PAYLOAD}:
        raise CliError(
            f"cannot convert {source} payloads to {target}: payload conversion maps Example and "
            "OFRecord features only"
        )
    features = decode_payload(source, record)
    if not features and target == OFRECORD_PAYLOAD:
        raise CliError(
            f"record {index}: an Example with no features has no OFRecord equivalent "
            "(OneFlow rejects empty records)"
        )
    converted: dict[str, Any] = {}
    unset = _unset_kinds(source, record) if any(_maybe_unset(v) for v in features.values()) else []
    for name, value in features.items():
        if name in unset:
            continue
        if isinstance(value, list):
            value = bytes_feature(value)
        elif value.dtype == np.float64 and target == "example":
            narrowed = value.astype(np.float32)
            if not lossy and not np.array_equal(narrowed.astype(np.float64), value, equal_nan=True):
                raise CliError(
                    f"record {index}: feature {name!r} is a double_list whose values do not fit a "
                    "float32 float_list exactly; pass --lossy to round them"
                )
            value = narrowed
        converted[name] = value
    encoded: bytes = (rk.encode_ofrecord if target == OFRECORD_PAYLOAD else rk.encode_example)(
        converted
    )
    return _with_unset_kinds(target, encoded, unset) if unset else encoded


def _maybe_unset(value: Any) -> bool:
    """Whether a decoded value may be a Feature with no kind set (decoded as an empty float32 array)."""
    return isinstance(value, np.ndarray) and value.size == 0 and value.dtype == np.float32


def _feature_map(kind: str, record: bytes) -> tuple[Any, Any]:
    """The parsed message of an Example or OFRecord, and its name -> Feature map."""
    if kind == EXAMPLE_PAYLOAD:
        example = example_pb2.Example.FromString(record)
        return example, example.features.feature
    ofrecord = record_pb2.OFRecord.FromString(record)
    return ofrecord, ofrecord.feature


def _unset_kinds(kind: str, record: bytes) -> list[str]:
    """The features of an Example or OFRecord whose Feature has none of its lists set (its oneof
    ``kind``): TensorFlow parses one as a missing feature, unlike an empty list."""
    return [
        name
        for name, feature in _feature_map(kind, record)[1].items()
        if not feature.WhichOneof("kind")
    ]


def _with_unset_kinds(kind: str, record: bytes, names: Iterable[str]) -> bytes:
    """``record`` with a Feature that has no kind set under each of ``names``."""
    message, features = _feature_map(kind, record)
    for name in names:
        features[name].SetInParent()
    return bytes(message.SerializeToString())
