"""Convert record payloads to and from Python values.

Three message types are covered: TensorFlow's ``tf.train.Example`` and ``tf.train.SequenceExample`` (the usual
TFRecord payloads) and OneFlow's ``OFRecord``. Each is a map from feature names to typed lists of values.

Encoding takes a mapping of feature names to values and returns the serialized message. The list type of each
feature is inferred from the Python or numpy type of its value, or given explicitly with a feature helper
(:func:`int64_feature`, :func:`float_feature`, :func:`double_feature`, :func:`int32_feature`,
:func:`bytes_feature`). The wire bytes are written directly, so a large numpy array is copied once and never
turned into Python numbers.

Decoding returns a ``dict``: numeric lists become one-dimensional numpy arrays (``int64`` and ``float32``, and
for OFRecord also ``float64`` and ``int32``), bytes lists become a ``list`` of ``bytes``. The keys come in
sorted order. Malformed payloads raise :class:`recordkit.errors.DecodeError`.

Examples
--------
>>> import numpy as np
>>> import recordkit as rk
>>> data = rk.encode_example({"label": 3, "name": "cat", "emb": np.array([0.5, -1.0], np.float32)})
>>> decoded = rk.decode_example(data)
>>> decoded["label"], decoded["name"], decoded["emb"]
(array([3]), [b'cat'], array([ 0.5, -1. ], dtype=float32))
"""

from __future__ import annotations

import mmap
import struct
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal, NamedTuple

import numpy as np
import numpy.typing as npt
from google.protobuf.message import Message

from recordkit._proto.tensorflow import feature_pb2
from recordkit.decode import _wire
from recordkit.errors import DecodeError

__all__ = [
    "EMPTY_FEATURE_DTYPE",
    "DecodedSequenceExample",
    "DecodedValue",
    "Feature",
    "FeatureKind",
    "bytes_feature",
    "decode_example",
    "decode_ofrecord",
    "decode_sequence_example",
    "double_feature",
    "encode_example",
    "encode_ofrecord",
    "encode_sequence_example",
    "float_feature",
    "int32_feature",
    "int64_feature",
]

FeatureKind = Literal["bytes_list", "float_list", "double_list", "int32_list", "int64_list"]
"""The name of a feature's list type, as in the protobuf ``oneof kind`` of ``Feature``."""

DecodedValue = npt.NDArray[Any] | list[bytes]
"""What a decoded feature is: a 1-D numpy array for numeric lists, a list of ``bytes`` for bytes lists."""

EMPTY_FEATURE_DTYPE: Final = np.dtype(np.float32)
"""The dtype of the empty array a ``Feature`` with no list set decodes to (TensorFlow's default dtype)."""

# What the decoders accept: any object exporting a 1-D C-contiguous buffer of bytes.
_Buffer = bytes | bytearray | memoryview | mmap.mmap | npt.NDArray[np.uint8]

_INT64_MIN: Final = -(2**63)
_INT64_MAX: Final = 2**63 - 1
_INT32_MIN: Final = -(2**31)
_INT32_MAX: Final = 2**31 - 1
_NUMERIC_DTYPES: Final[dict[str, np.dtype[Any]]] = {
    "float_list": np.dtype(np.float32),
    "double_list": np.dtype(np.float64),
    "int32_list": np.dtype(np.int32),
    "int64_list": np.dtype(np.int64),
}
# Fixed-width lists are packed as little-endian arrays on the wire.
_WIRE_DTYPES: Final[dict[str, np.dtype[Any]]] = {
    "float_list": np.dtype("<f4"),
    "double_list": np.dtype("<f8"),
}
_BYTES_LIKE: Final = (bytes, bytearray, memoryview)
_UINT64_MASK: Final = 2**64 - 1


# --------------------------------------------------------------------------------------------------------------
# Feature values


@dataclass(frozen=True, eq=False)
class Feature:
    """A typed list of values: what the feature helpers return and the encoders accept.

    A ``Feature`` names its list type explicitly, so it encodes the same way in a ``tf.train.Example`` and an
    ``OFRecord`` (``double_list`` and ``int32_list`` exist only in OFRecord: an Example refuses them).

    Parameters
    ----------
    kind
        The list type: ``"bytes_list"``, ``"float_list"``, ``"double_list"``, ``"int32_list"`` or
        ``"int64_list"``.
    value
        A read-only 1-D numpy array of the kind's dtype (``float32``, ``float64``, ``int32``, ``int64``), or a
        tuple of ``bytes`` for ``bytes_list``. Build it with the helpers, which convert and check the values.

    Notes
    -----
    Two features are equal when their kinds are equal and their values are equal bit for bit (so a NaN equals
    the same NaN, and ``-0.0`` differs from ``0.0``).
    """

    kind: FeatureKind
    value: npt.NDArray[Any] | tuple[bytes, ...]

    def __len__(self) -> int:
        """Return the number of values."""
        return len(self.value)

    def _key(self) -> tuple[str, object]:
        value = self.value
        return (self.kind, value if isinstance(value, tuple) else value.tobytes())

    def __eq__(self, other: object) -> bool:
        """Compare kinds and the bit patterns of the values."""
        if not isinstance(other, Feature):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        """Hash the kind and the bit patterns of the values."""
        return hash(self._key())


def int64_feature(value: object) -> Feature:
    """Make an ``int64_list`` feature.

    Parameters
    ----------
    value
        An integer, a sequence of integers, or a numpy array of integers or booleans (any shape: it is
        flattened in C order). Booleans become 0 and 1.

    Returns
    -------
    Feature

    Raises
    ------
    TypeError
        The values are not integers (floats are refused rather than truncated).
    ValueError
        A value does not fit in a signed 64-bit integer.

    Examples
    --------
    >>> int64_feature([1, 2, 3])
    Feature(kind='int64_list', value=array([1, 2, 3]))
    """
    return _numeric_feature(_integers, "int64_list", value, "int64_feature()")


def int32_feature(value: object) -> Feature:
    """Make an ``int32_list`` feature (OFRecord only: a ``tf.train.Example`` has no int32 list).

    Parameters
    ----------
    value
        An integer, a sequence of integers, or a numpy array of integers or booleans (flattened).

    Returns
    -------
    Feature

    Raises
    ------
    TypeError
        The values are not integers.
    ValueError
        A value does not fit in a signed 32-bit integer.
    """
    return _numeric_feature(_integers, "int32_list", value, "int32_feature()")


def float_feature(value: object) -> Feature:
    """Make a ``float_list`` feature (32-bit floats).

    Parameters
    ----------
    value
        A number, a sequence of numbers, or a numpy array of numbers (flattened). Values are rounded to
        float32; values beyond float32's range become infinities, as protobuf does.

    Returns
    -------
    Feature

    Raises
    ------
    TypeError
        The values are not real numbers.

    Examples
    --------
    >>> float_feature(0.5)
    Feature(kind='float_list', value=array([0.5], dtype=float32))
    """
    return _numeric_feature(_floats, "float_list", value, "float_feature()")


def double_feature(value: object) -> Feature:
    """Make a ``double_list`` feature (64-bit floats; OFRecord only: a ``tf.train.Example`` has none).

    Parameters
    ----------
    value
        A number, a sequence of numbers, or a numpy array of numbers (flattened).

    Returns
    -------
    Feature

    Raises
    ------
    TypeError
        The values are not real numbers.
    """
    return _numeric_feature(_floats, "double_list", value, "double_feature()")


def bytes_feature(value: object) -> Feature:
    """Make a ``bytes_list`` feature.

    Parameters
    ----------
    value
        A ``bytes``-like object or a ``str`` (encoded as UTF-8), a sequence of them, or a numpy array of
        dtype ``S``, ``U`` or ``object`` holding them (flattened).

    Returns
    -------
    Feature

    Raises
    ------
    TypeError
        A value is neither bytes-like nor a ``str``.

    Examples
    --------
    >>> bytes_feature(["héllo", b"\\x00"])
    Feature(kind='bytes_list', value=(b'h\\xc3\\xa9llo', b'\\x00'))
    """
    return Feature("bytes_list", _byte_strings(value, "bytes_feature()"))


def _numeric_feature(
    convert: Callable[..., npt.NDArray[Any]], kind: FeatureKind, value: object, what: str
) -> Feature:
    """Make a ``kind`` feature of a read-only copy of ``value`` converted by ``_integers``/``_floats``."""
    return Feature(kind, _readonly(convert(value, kind, what, copy=True)))


def _readonly(array: npt.NDArray[Any]) -> npt.NDArray[Any]:
    array.flags.writeable = False
    return array


def _as_flat_array(value: object, what: str) -> npt.NDArray[Any]:
    """Turn a scalar, sequence or array into a 1-D array, refusing ragged or nested input."""
    if isinstance(value, np.ndarray):
        return value.reshape(-1)
    try:
        array = np.asarray(value)
    except (ValueError, OverflowError) as exc:
        raise TypeError(
            f"{what}: ragged or nested lists are not supported ({_describe(value)})"
        ) from exc
    if array.ndim > 1 or (
        array.ndim == 1 and isinstance(value, (list, tuple)) and _has_nested(value)
    ):
        raise TypeError(
            f"{what}: nested lists are not supported; pass a flat list or a numpy array"
        )
    return array.reshape(-1)


def _has_nested(values: Sequence[object]) -> bool:
    return any(isinstance(v, (list, tuple, np.ndarray)) for v in values)


def _integers(value: object, kind: str, what: str, *, copy: bool = False) -> npt.NDArray[Any]:
    array = _as_flat_array(value, what)
    if array.dtype.kind == "O" and array.size and all(isinstance(v, int) for v in array):
        raise ValueError(f"{what}: a value does not fit in a signed 64-bit integer")
    if array.size == 0 and array.dtype.kind == "f" and not isinstance(value, np.ndarray):
        array = array.astype(np.int64)  # np.asarray([]) is float64; an empty list has no type
    if array.dtype.kind not in "biu":
        raise TypeError(f"{what}: expected integers, got {_describe(value)}")
    dtype = _NUMERIC_DTYPES[kind]
    if not np.can_cast(array.dtype, dtype, "safe") and array.size:
        low, high = (_INT32_MIN, _INT32_MAX) if kind == "int32_list" else (_INT64_MIN, _INT64_MAX)
        if int(array.min()) < low or int(array.max()) > high:
            raise ValueError(f"{what}: a value does not fit in {dtype.name} ({low}..{high})")
    return array.astype(dtype, copy=copy)


def _floats(value: object, kind: str, what: str, *, copy: bool = False) -> npt.NDArray[Any]:
    array = _as_flat_array(value, what)
    if array.dtype.kind not in "biuf":
        raise TypeError(f"{what}: expected real numbers, got {_describe(value)}")
    dtype = _NUMERIC_DTYPES[kind]
    if array.dtype.kind == "f" and array.dtype.itemsize > dtype.itemsize:
        with np.errstate(over="ignore"):  # out-of-range doubles become +-inf, as protobuf does
            return array.astype(dtype)
    return array.astype(dtype, copy=copy)


def _byte_strings(value: object, what: str) -> tuple[bytes, ...]:
    if isinstance(value, (*_BYTES_LIKE, str)):
        return (_one_byte_string(value, what),)
    if isinstance(value, np.ndarray):
        if value.dtype.kind not in "SUO":
            raise TypeError(f"{what}: expected bytes or str, got an array of {value.dtype}")
        return tuple(_one_byte_string(v, what) for v in value.reshape(-1).tolist())
    if isinstance(value, Sequence):
        return tuple(_one_byte_string(v, what) for v in value)
    raise TypeError(f"{what}: expected bytes, str or a sequence of them, got {_describe(value)}")


def _one_byte_string(value: object, what: str) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        try:
            return value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise ValueError(f"{what}: a str is not valid Unicode ({exc.reason})") from exc
    if isinstance(value, _BYTES_LIKE):
        return bytes(value)
    raise TypeError(f"{what}: expected bytes or str, got {_describe(value)}")


def _describe(value: object) -> str:
    if isinstance(value, np.ndarray):
        if value.dtype.kind == "O":
            return "values of type " + ", ".join(sorted({type(v).__name__ for v in value.flat}))
        return f"an array of {value.dtype}"
    return f"a value of type {type(value).__name__}"


# --------------------------------------------------------------------------------------------------------------
# Type inference


@dataclass(frozen=True)
class _Family:
    """What one message family (tf.train.Example or OFRecord) allows, and its field numbers."""

    message: str
    tags: Mapping[str, bytes]  # kind -> tag byte of the Feature oneof field (wire type 2)
    float64_kind: FeatureKind
    int32_kind: FeatureKind
    feature_names: frozenset[str]  # full names of protobuf Feature messages accepted as values


_TF: Final = _Family(
    "tf.train.Example",
    {"bytes_list": b"\x0a", "float_list": b"\x12", "int64_list": b"\x1a"},
    float64_kind="float_list",
    int32_kind="int64_list",
    feature_names=frozenset({"tensorflow.Feature", "recordkit.tensorflow.Feature"}),
)
_OF: Final = _Family(
    "OFRecord",
    {
        "bytes_list": b"\x0a",
        "float_list": b"\x12",
        "double_list": b"\x1a",
        "int32_list": b"\x22",
        "int64_list": b"\x2a",
    },
    float64_kind="double_list",
    int32_kind="int32_list",
    feature_names=frozenset({"oneflow.Feature", "recordkit.oneflow.Feature"}),
)


def _infer(value: object, family: _Family, name: str) -> Feature | bytes:
    """Return the Feature for a mapping value, or the already serialized Feature message (may be empty)."""
    what = f"feature {name!r}"
    if isinstance(value, Feature):
        if value.kind not in family.tags:
            raise ValueError(f"{what}: a {family.message} has no {value.kind}; use an OFRecord")
        return value
    if isinstance(value, (*_BYTES_LIKE, str)):
        return Feature("bytes_list", (_one_byte_string(value, what),))
    if isinstance(value, (np.ndarray, np.generic)):
        return _infer_numpy(value, family, what)
    if isinstance(value, (bool, int)):
        return Feature("int64_list", _integers(value, "int64_list", what))
    if isinstance(value, float):
        return Feature("float_list", _floats(value, "float_list", what))
    if isinstance(value, Sequence):
        return _infer_sequence(value, what)
    if isinstance(value, Message):
        return _serialized_feature(value, family, what)
    raise TypeError(f"{what}: cannot encode {_describe(value)}")


def _infer_numpy(value: np.ndarray[Any, Any] | np.generic, family: _Family, what: str) -> Feature:
    dtype = value.dtype
    if dtype.kind in "SU":
        return Feature("bytes_list", _byte_strings(np.asarray(value), what))
    if dtype.kind == "O":
        feature = _infer_sequence(np.asarray(value).reshape(-1).tolist(), what)
        if isinstance(feature, bytes):
            raise TypeError(f"{what}: an empty object array has no list type; give it a dtype")
        return feature
    if dtype.kind in "biu":
        kind = family.int32_kind if dtype.kind == "i" and dtype.itemsize == 4 else "int64_list"
        return Feature(kind, _integers(np.asarray(value), kind, what))
    if dtype.kind == "f":
        kind = family.float64_kind if dtype.itemsize >= 8 else "float_list"
        return Feature(kind, _floats(np.asarray(value), kind, what))
    raise TypeError(f"{what}: cannot encode numpy values of dtype {dtype}")


def _infer_sequence(values: Sequence[object], what: str) -> Feature | bytes:
    if len(values) == 0:
        return b""  # a Feature with no list set: every reader takes it as an empty list of any type
    if isinstance(values[0], (*_BYTES_LIKE, str)):
        return Feature("bytes_list", _byte_strings(values, what))
    array = _as_flat_array(values, what)
    if array.dtype.kind == "f":
        return Feature("float_list", _floats(array, "float_list", what))
    return Feature("int64_list", _integers(array, "int64_list", what))


def _serialized_feature(message: Message, family: _Family, what: str) -> bytes:
    if message.DESCRIPTOR.full_name not in family.feature_names:
        raise TypeError(
            f"{what}: a {message.DESCRIPTOR.full_name} message is not a {family.message} Feature"
        )
    serialized: bytes = message.SerializeToString()
    return serialized


# --------------------------------------------------------------------------------------------------------------
# Wire encoding (https://protobuf.dev/programming-guides/encoding/)

_ONE_BYTE_VARINTS: Final = [bytes([i]) for i in range(128)]
_FLOAT32: Final = struct.Struct("<f")


def _varint(n: int) -> bytes:
    if n < 128:
        return _ONE_BYTE_VARINTS[n]
    out = bytearray()
    while n >= 128:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _field(tag: bytes, payload: bytes) -> bytes:
    return tag + _varint(len(payload)) + payload


def _encode_list(feature: Feature) -> bytes:
    """Serialize the ``*List`` message of a feature (its one field ``value = 1`` packed, or repeated bytes)."""
    value = feature.value
    if isinstance(value, tuple):
        return b"".join([_field(b"\x0a", v) for v in value])
    if feature.kind in _WIRE_DTYPES:
        raw = value.astype(_WIRE_DTYPES[feature.kind], copy=False).tobytes()
    else:  # varints: protobuf's encoder is the fastest at hand; int32 values are sign-extended alike
        return bytes(feature_pb2.Int64List(value=value.tolist()).SerializeToString())
    return _field(b"\x0a", raw) if raw else b""


def _encode_feature(value: object, family: _Family, name: str) -> bytes:
    scalar = _encode_scalar(value, name)
    if scalar is not None:
        kind, body = scalar
        return _field(family.tags[kind], body)
    feature = _infer(value, family, name)
    if isinstance(feature, bytes):
        return feature
    return _field(family.tags[feature.kind], _encode_list(feature))


def _encode_scalar(value: object, name: str) -> tuple[FeatureKind, bytes] | None:
    """Serialize the one-value ``*List`` of a plain Python scalar without numpy (common in small records)."""
    cls = type(value)
    if cls is int:
        number: int = value  # type: ignore[assignment]
        if not _INT64_MIN <= number <= _INT64_MAX:
            raise ValueError(f"feature {name!r}: {number} does not fit in a signed 64-bit integer")
        return "int64_list", _field(b"\x0a", _varint(number & _UINT64_MASK))
    if cls is float:
        try:
            packed = _FLOAT32.pack(value)
        except OverflowError:  # beyond float32's range: infinity, as protobuf does
            packed = _FLOAT32.pack(float("inf") if value > 0 else float("-inf"))  # type: ignore[operator]
        return "float_list", b"\x0a\x04" + packed
    if cls is bytes:
        return "bytes_list", _field(b"\x0a", value)  # type: ignore[arg-type]
    return None


def _map_entry(name: object, value: bytes) -> bytes:
    """Serialize one ``map<string, V>`` entry: key = 1, value = 2, wrapped as field 1 of the map owner."""
    return _field(b"\x0a", _field(b"\x0a", _encode_name(name)) + _field(b"\x12", value))


def _encode_name(name: object) -> bytes:
    if not isinstance(name, str):
        raise TypeError(f"feature names must be str, got {_describe(name)}")
    try:
        return name.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(f"feature name {name!r} is not valid Unicode ({exc.reason})") from exc


def _encode_features(features: Mapping[str, object], family: _Family) -> bytes:
    return b"".join(
        [_map_entry(name, _encode_feature(value, family, name)) for name, value in features.items()]
    )


def encode_example(features: Mapping[str, object]) -> bytes:
    """Serialize a ``tf.train.Example``.

    Parameters
    ----------
    features
        Feature name to value. A value is a :class:`Feature` (from a helper), a ``tf.train.Feature`` message,
        or a plain value whose list type is inferred:

        * ``bytes``, ``bytearray``, ``memoryview``, ``str`` (UTF-8), or a sequence or ``S``/``U`` array of
          them: ``bytes_list``;
        * ``int``, ``bool``, numpy integers and booleans, sequences of them: ``int64_list`` (an Example has no
          int32 list);
        * ``float``, numpy floats of any width, or a sequence with at least one float: ``float_list`` (an
          Example has no double list: float64 is rounded to float32);
        * an empty list or tuple: a ``Feature`` with no list set, which every reader takes as an empty list of
          any type; an empty numpy array keeps its dtype's list type.

        Numpy arrays of any shape are flattened in C order. Entries are written in the mapping's order.

    Returns
    -------
    bytes
        The serialized message, readable by ``tf.train.Example.FromString`` and ``tf.io.parse_example``.

    Raises
    ------
    TypeError
        A value has no list type (``None``, nested or ragged lists, objects, complex numbers), a name is not a
        ``str``, or a :class:`Feature` is an OFRecord-only ``double_list``/``int32_list`` (ValueError).
    ValueError
        An integer does not fit in int64 (such as a uint64 above ``2**63 - 1``).

    Examples
    --------
    >>> encode_example({"label": 1})
    b'\\n\\x10\\n\\x0e\\n\\x05label\\x12\\x05\\x1a\\x03\\n\\x01\\x01'
    """
    return _field(b"\x0a", _encode_features(features, _TF))


def encode_sequence_example(
    context: Mapping[str, object] | None = None,
    feature_lists: Mapping[str, Iterable[object]] | None = None,
) -> bytes:
    """Serialize a ``tf.train.SequenceExample``.

    Parameters
    ----------
    context
        Feature name to value, encoded as by :func:`encode_example`.
    feature_lists
        Feature name to its steps: an iterable with one value per step, each encoded as by
        :func:`encode_example` (a 2-D numpy array gives one step per row).

    Returns
    -------
    bytes

    Raises
    ------
    TypeError, ValueError
        As :func:`encode_example`; also when a feature list is not an iterable of steps.
    """
    lists = [
        _map_entry(name, b"".join([_field(b"\x0a", v) for v in _encode_steps(steps, name)]))
        for name, steps in (feature_lists or {}).items()
    ]
    return _field(b"\x0a", _encode_features(context or {}, _TF)) + _field(b"\x12", b"".join(lists))


def _encode_steps(steps: Iterable[object], name: str) -> list[bytes]:
    if isinstance(steps, (*_BYTES_LIKE, str, Mapping, Feature)) or not isinstance(steps, Iterable):
        raise TypeError(
            f"feature list {name!r}: expected an iterable of steps, got {_describe(steps)}"
        )
    return [_encode_feature(step, _TF, f"{name}[{i}]") for i, step in enumerate(steps)]


def encode_ofrecord(features: Mapping[str, object]) -> bytes:
    """Serialize a OneFlow ``OFRecord``.

    Parameters
    ----------
    features
        Feature name to value: a :class:`Feature`, a ``oneflow.Feature`` message, or a plain value whose list
        type is inferred as by :func:`encode_example`, except that numpy ``float64`` values go to
        ``double_list`` and numpy ``int32`` values to ``int32_list``. Python floats go to ``float_list``, as
        in OneFlow's examples; other integer dtypes go to ``int64_list``.

    Returns
    -------
    bytes

    Raises
    ------
    ValueError
        ``features`` is empty: the message would serialize to zero bytes, which OneFlow's reader refuses.
    TypeError
        As :func:`encode_example`.
    """
    if not features:
        raise ValueError(
            "an OFRecord needs at least one feature: an empty one serializes to 0 bytes, which OneFlow rejects"
        )
    return _encode_features(features, _OF)


# --------------------------------------------------------------------------------------------------------------
# Decoding


class DecodedSequenceExample(NamedTuple):
    """A decoded ``tf.train.SequenceExample``; unpacks as ``context, feature_lists``.

    Attributes
    ----------
    context
        Feature name to decoded value, as from :func:`decode_example`.
    feature_lists
        Feature name to the list of its decoded steps.
    """

    context: dict[str, DecodedValue]
    feature_lists: dict[str, list[DecodedValue]]


def decode_example(data: _Buffer) -> dict[str, DecodedValue]:
    """Decode a serialized ``tf.train.Example``.

    Parameters
    ----------
    data
        The serialized message (a TFRecord payload): ``bytes``, or any object exporting a 1-D
        C-contiguous buffer of bytes (``bytearray``, ``memoryview``, ``mmap``, a numpy ``uint8`` array).

    Returns
    -------
    dict
        Feature name (sorted) to value: an ``int64`` or ``float32`` 1-D numpy array, or a ``list`` of
        ``bytes``. A ``Feature`` with no list set gives an empty array of dtype :data:`EMPTY_FEATURE_DTYPE`
        (``float32``). Arrays are fresh and writable.

    Raises
    ------
    recordkit.errors.DecodeError
        ``data`` is not a valid serialized Example.
    TypeError
        ``data`` is not bytes-like (see the ``data`` parameter).

    Examples
    --------
    >>> decode_example(encode_example({"x": [1.5, 2.0], "y": b"ab"}))
    {'x': array([1.5, 2. ], dtype=float32), 'y': [b'ab']}
    """
    return _decode_features(_scan(data, "tf.train.Example", _wire.TF_KINDS), _wire.TF_KINDS)


def decode_sequence_example(data: _Buffer) -> DecodedSequenceExample:
    """Decode a serialized ``tf.train.SequenceExample``.

    Parameters
    ----------
    data
        The serialized message, as for :func:`decode_example`.

    Returns
    -------
    DecodedSequenceExample
        ``(context, feature_lists)``: the context decoded as by :func:`decode_example`, and each feature list
        as a list with one decoded value per step. Keys are sorted.

    Raises
    ------
    recordkit.errors.DecodeError
        ``data`` is not a valid serialized SequenceExample.
    TypeError
        ``data`` is not bytes-like (see the ``data`` parameter).
    """
    context, lists = _scan(data, "tf.train.SequenceExample", None)
    steps = _decode_features(lists, None)
    return DecodedSequenceExample(_decode_features(context, _wire.TF_KINDS), steps)


def decode_ofrecord(data: _Buffer) -> dict[str, DecodedValue]:
    """Decode a serialized OneFlow ``OFRecord``.

    Parameters
    ----------
    data
        The serialized message (an OFRecord frame's payload), as for :func:`decode_example`.

    Returns
    -------
    dict
        Feature name (sorted) to value: a 1-D numpy array of ``float32``, ``float64``, ``int32`` or ``int64``,
        or a ``list`` of ``bytes``; a ``Feature`` with no list set gives an empty ``float32`` array.

    Raises
    ------
    recordkit.errors.DecodeError
        ``data`` is not a valid serialized OFRecord, or a feature name is not UTF-8.
    TypeError
        ``data`` is not bytes-like (see the ``data`` parameter).
    """
    return _decode_features(_scan(data, "OFRecord", _wire.OFRECORD_KINDS), _wire.OFRECORD_KINDS)


def _scan(data: _Buffer, what: str, kinds: dict[int, int] | None) -> Any:
    """Read every feature of one message (a SequenceExample's when ``kinds`` is None) with the wire scanner."""
    buf = _wire.as_buffer(data, f"a serialized {what}")
    try:
        if kinds is None:
            return _wire.scan_sequence_example(buf, None, None)
        return _wire.scan_example(buf, None, kinds)
    except (DecodeError, IndexError) as exc:
        reason = _wire.reason(exc)
        raise DecodeError(f"malformed {what} ({len(buf)} bytes): {reason}") from None


def _decode_features(slots: dict[bytes, Any], kinds: dict[int, int] | None) -> dict[str, Any]:
    """Decode each feature (with ``kinds`` None, each step of each feature list), sorted by name.

    UTF-8 keeps the order of code points, so the keys sort as the names do.
    """
    out: dict[str, Any] = {}
    for key in sorted(slots):
        try:
            name = key.decode("utf-8")
        except UnicodeDecodeError:
            raise DecodeError(
                f"feature name {key!r} is not valid UTF-8", feature=repr(key)
            ) from None
        if kinds is None:
            out[name] = [_decode_feature(step, _wire.TF_KINDS) for step in slots[key]]
        else:
            out[name] = _decode_feature(slots[key], kinds)
    return out


def _decode_feature(slot: _wire.Slot, kinds: dict[int, int]) -> DecodedValue:
    kind, chunks = slot
    if not kind:
        return np.empty(0, EMPTY_FEATURE_DTYPE)
    return _wire.decode_chunks(chunks, kinds[kind])  # type: ignore[arg-type]
