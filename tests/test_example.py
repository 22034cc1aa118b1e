"""Feature helpers, type inference, encoding and decoding of Example, SequenceExample and OFRecord.

The reference for the bytes is the protobuf runtime with recordkit's generated classes: what recordkit writes
must parse to the same values there, and must equal protobuf's own deterministic serialization.
"""

from __future__ import annotations

import struct
from typing import Any

import google.protobuf.message
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import recordkit as rk
from recordkit._proto.oneflow import record_pb2
from recordkit._proto.tensorflow import example_pb2, feature_pb2
from recordkit.decode.messages import (
    EMPTY_FEATURE_DTYPE,
    Feature,
    bytes_feature,
    double_feature,
    float_feature,
    int32_feature,
    int64_feature,
)

# --------------------------------------------------------------------------------------------------------------
# Helpers


def assert_same(actual: object, expected: object) -> None:
    """Equal values, dtypes and bit patterns (NaN payloads and the sign of zero included)."""
    if isinstance(expected, np.ndarray):
        assert isinstance(actual, np.ndarray)
        assert actual.dtype == expected.dtype
        assert actual.shape == expected.shape
        assert actual.tobytes() == expected.tobytes()
    else:
        assert type(actual) is type(expected)
        assert actual == expected


def assert_same_features(actual: dict[str, Any], expected: dict[str, Any]) -> None:
    assert sorted(actual) == sorted(expected)
    for name, value in expected.items():
        assert_same(actual[name], value)


def single_kind(data: bytes) -> str | None:
    """The list type protobuf sees for feature ``x`` of an encoded Example."""
    feature = example_pb2.Example.FromString(data).features.feature["x"]
    return feature.WhichOneof("kind")


def single_of_kind(data: bytes) -> str | None:
    return record_pb2.OFRecord.FromString(data).feature["x"].WhichOneof("kind")


# --------------------------------------------------------------------------------------------------------------
# Feature helpers


@pytest.mark.parametrize(
    ("helper", "value", "expected"),
    [
        (int64_feature, 7, np.array([7], np.int64)),
        (
            int64_feature,
            [True, False, -(2**63), 2**63 - 1],
            np.array([1, 0, -(2**63), 2**63 - 1]),
        ),
        (
            int64_feature,
            np.arange(6, dtype=np.uint8).reshape(2, 3),
            np.arange(6, dtype=np.int64),
        ),
        (int64_feature, [], np.array([], np.int64)),
        (int32_feature, (-(2**31), 2**31 - 1), np.array([-(2**31), 2**31 - 1], np.int32)),
        (float_feature, 0.1, np.array([0.1], np.float32)),
        (float_feature, [1, 2.5], np.array([1.0, 2.5], np.float32)),
        (float_feature, np.eye(2), np.array([1, 0, 0, 1], np.float32)),
        (double_feature, 0.1, np.array([0.1], np.float64)),
        (double_feature, np.float32(0.5), np.array([0.5], np.float64)),
    ],
)
def test_numeric_helpers(helper: Any, value: object, expected: np.ndarray) -> None:
    feature = helper(value)
    assert isinstance(feature, Feature)
    assert feature.kind == helper.__name__.replace("_feature", "_list")
    assert_same(feature.value, expected)
    assert len(feature) == expected.size
    assert not feature.value.flags.writeable


def test_float_feature_overflow_becomes_infinity() -> None:
    assert_same(float_feature([1e300, -1e300]).value, np.array([np.inf, -np.inf], np.float32))
    for value in (1e300, -1e300):
        decoded = rk.decode_example(
            rk.encode_example({"x": value, "y": [value], "z": np.array([value])})
        )
        for name in "xyz":
            assert_same(decoded[name], np.array([np.copysign(np.inf, value)], np.float32))


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (b"\x00abc", (b"\x00abc",)),
        ("héllo ✓", ("héllo ✓".encode(),)),
        (bytearray(b"xy"), (b"xy",)),
        ([b"", "", memoryview(b"m")], (b"", b"", b"m")),
        (np.array([b"a", b"bc"]), (b"a", b"bc")),
        (np.array(["ü"]), ("ü".encode(),)),
        (np.array([b"a", "b"], dtype=object), (b"a", b"b")),
        ([], ()),
    ],
)
def test_bytes_feature(value: object, expected: tuple[bytes, ...]) -> None:
    feature = bytes_feature(value)
    assert feature.kind == "bytes_list"
    assert feature.value == expected


@pytest.mark.parametrize(
    ("helper", "value", "error"),
    [
        (int64_feature, 1.5, TypeError),
        (int64_feature, np.array([1.0]), TypeError),
        (int64_feature, "3", TypeError),
        (int64_feature, None, TypeError),
        (int64_feature, [[1], [2, 3]], TypeError),
        (int64_feature, [[1, 2], [3, 4]], TypeError),
        (int64_feature, 2**63, ValueError),
        (int64_feature, -(2**63) - 1, ValueError),
        (int64_feature, np.array([2**64 - 1], np.uint64), ValueError),
        (int32_feature, 2**31, ValueError),
        (int32_feature, [-(2**31) - 1], ValueError),
        (float_feature, "1.0", TypeError),
        (float_feature, 1j, TypeError),
        (double_feature, [None], TypeError),
        (bytes_feature, 3, TypeError),
        (bytes_feature, [b"a", 3], TypeError),
        (bytes_feature, np.arange(3), TypeError),
        (bytes_feature, "\ud800", ValueError),
    ],
)
def test_helpers_refuse_bad_values(helper: Any, value: object, error: type[Exception]) -> None:
    with pytest.raises(error, match=helper.__name__):
        helper(value)


def test_feature_equality_is_bitwise() -> None:
    nan = np.array([np.nan], np.float32)
    assert float_feature(nan) == float_feature(nan.copy())
    assert float_feature(0.0) != float_feature(-0.0)
    assert float_feature(1) != int64_feature(1)
    assert bytes_feature("a") == bytes_feature(b"a")
    assert len({int64_feature([1, 2]), int64_feature(np.array([1, 2]))}) == 1
    assert int64_feature(1) != 1


# --------------------------------------------------------------------------------------------------------------
# Type inference


@pytest.mark.parametrize(
    ("value", "tf_kind", "of_kind"),
    [
        (1, "int64_list", "int64_list"),
        (True, "int64_list", "int64_list"),
        (np.bool_(True), "int64_list", "int64_list"),
        ([1, 2], "int64_list", "int64_list"),
        (range(3), "int64_list", "int64_list"),
        (np.int32(1), "int64_list", "int32_list"),
        (np.arange(3, dtype=np.int32), "int64_list", "int32_list"),
        (np.arange(3, dtype=np.int16), "int64_list", "int64_list"),
        (np.arange(3, dtype=np.uint64), "int64_list", "int64_list"),
        (1.5, "float_list", "float_list"),
        ([1.5, 2.5], "float_list", "float_list"),
        ([1, 2.5], "float_list", "float_list"),
        (np.float64(1.5), "float_list", "double_list"),
        (np.ones(3), "float_list", "double_list"),
        (np.ones(3, np.float32), "float_list", "float_list"),
        (np.ones(3, np.float16), "float_list", "float_list"),
        (b"x", "bytes_list", "bytes_list"),
        ("x", "bytes_list", "bytes_list"),
        ([b"x", "y"], "bytes_list", "bytes_list"),
        (np.array(["a", "b"]), "bytes_list", "bytes_list"),
        (np.array([1, 2], dtype=object), "int64_list", "int64_list"),
        (np.array([], np.float32), "float_list", "float_list"),
        (np.array([], np.int64), "int64_list", "int64_list"),
        ([], None, None),
        ((), None, None),
        (int64_feature([]), "int64_list", "int64_list"),
        (bytes_feature([]), "bytes_list", "bytes_list"),
    ],
)
def test_inferred_kind(value: object, tf_kind: str | None, of_kind: str | None) -> None:
    assert single_kind(rk.encode_example({"x": value})) == tf_kind
    assert single_of_kind(rk.encode_ofrecord({"x": value})) == of_kind


def test_ofrecord_only_kinds_are_refused_in_examples() -> None:
    for feature in (double_feature(1.0), int32_feature(1)):
        with pytest.raises(ValueError, match=r"'weights'.*OFRecord"):
            rk.encode_example({"weights": feature})
        with pytest.raises(ValueError, match=r"'weights\[0\]'"):
            rk.encode_sequence_example({}, {"weights": [feature]})
        assert single_of_kind(rk.encode_ofrecord({"x": feature})) == feature.kind


@pytest.mark.parametrize(
    ("value", "error"),
    [
        (None, TypeError),
        ([1, None], TypeError),
        ([[1, 2], [3, 4]], TypeError),
        ([[1], [2, 3]], TypeError),
        ([np.arange(2)], TypeError),
        ({"a": 1}, TypeError),
        ({1, 2}, TypeError),
        (object(), TypeError),
        (1j, TypeError),
        (np.array([1j]), TypeError),
        (np.array(["2020-01-01"], dtype="datetime64[D]"), TypeError),
        (np.array([], dtype=object), TypeError),
        ([b"a", 1], TypeError),
        ([1, "a"], TypeError),
        (np.array([2**63], np.uint64), ValueError),
        (2**63, ValueError),
        ([2**64], ValueError),
        ("\udcff", ValueError),
        (record_pb2.Feature(), TypeError),
    ],
)
def test_encode_errors_name_the_feature(value: object, error: type[Exception]) -> None:
    with pytest.raises(error, match="'bad_feature'"):
        rk.encode_example({"ok": 1, "bad_feature": value})


def test_feature_names_must_be_text() -> None:
    with pytest.raises(TypeError, match="str"):
        rk.encode_example({1: 1})  # type: ignore[dict-item]
    with pytest.raises(ValueError, match="Unicode"):
        rk.encode_ofrecord({"\ud800": 1})


def test_empty_ofrecord_is_refused() -> None:
    with pytest.raises(ValueError, match="OneFlow"):
        rk.encode_ofrecord({})


def test_sequence_steps_must_be_iterable() -> None:
    for steps in (1, b"abc", "abc", int64_feature(1), {"a": 1}):
        with pytest.raises(TypeError, match="'frames'"):
            rk.encode_sequence_example({}, {"frames": steps})  # type: ignore[dict-item]
    with pytest.raises(TypeError, match=r"'frames\[1\]'"):
        rk.encode_sequence_example({}, {"frames": [1, None]})


def test_protobuf_feature_messages_are_accepted() -> None:
    tf_feature = feature_pb2.Feature(float_list=feature_pb2.FloatList(value=[1.5]))
    assert_same(
        rk.decode_example(rk.encode_example({"x": tf_feature}))["x"], np.array([1.5], np.float32)
    )
    of_feature = record_pb2.Feature(double_list=record_pb2.DoubleList(value=[2.5]))
    assert_same(rk.decode_ofrecord(rk.encode_ofrecord({"x": of_feature}))["x"], np.array([2.5]))
    with pytest.raises(TypeError, match="'x'"):
        rk.encode_ofrecord({"x": tf_feature})
    with pytest.raises(TypeError, match="'x'"):
        rk.encode_example({"x": example_pb2.Example()})


def test_arrays_are_flattened_in_c_order() -> None:
    image = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    assert_same(rk.decode_example(rk.encode_example({"x": image}))["x"], image.reshape(-1))
    strided = image.transpose(2, 0, 1)
    assert_same(rk.decode_example(rk.encode_example({"x": strided}))["x"], strided.reshape(-1))
    big_endian = np.arange(5, dtype=">f4")
    assert_same(
        rk.decode_example(rk.encode_example({"x": big_endian}))["x"], np.arange(5, dtype=np.float32)
    )


def test_two_dimensional_array_gives_one_step_per_row() -> None:
    frames = np.arange(6, dtype=np.int64).reshape(3, 2)
    _, lists = rk.decode_sequence_example(rk.encode_sequence_example({}, {"f": frames}))
    assert len(lists["f"]) == 3
    for step, row in zip(lists["f"], frames, strict=True):
        assert_same(step, row)


@pytest.mark.parametrize(
    "values",
    [
        np.array([0, 1, 127, 128, 16383, 16384, 2**35, 2**62, 2**63 - 1, -1, -(2**63)], np.int64),
        np.arange(-1000, 1000, 7, dtype=np.int64) ** 3,
        np.arange(100, dtype=np.int64),
    ],
)
def test_long_int_lists_equal_protobuf_encoding(values: np.ndarray) -> None:
    tiled = np.tile(values, 5)
    encoded = rk.encode_example({"x": tiled})
    assert_same(rk.decode_example(encoded)["x"], tiled)
    reference = example_pb2.Example(
        features=feature_pb2.Features(
            feature={
                "x": feature_pb2.Feature(int64_list=feature_pb2.Int64List(value=tiled.tolist()))
            }
        )
    )
    assert encoded == reference.SerializeToString()


def test_int32_negative_values_use_ten_byte_varints() -> None:
    values = np.array([-1, -(2**31)] * 20, np.int32)
    encoded = rk.encode_ofrecord({"x": values})
    feature = record_pb2.OFRecord.FromString(encoded).feature["x"]
    assert list(feature.int32_list.value) == values.tolist()
    assert encoded == record_pb2.OFRecord(feature={"x": feature}).SerializeToString()


# --------------------------------------------------------------------------------------------------------------
# Decoding


def test_decoded_values() -> None:
    data = example_pb2.Example(
        features=feature_pb2.Features(
            feature={
                "b": feature_pb2.Feature(bytes_list=feature_pb2.BytesList(value=[b"", b"\xff"])),
                "a": feature_pb2.Feature(float_list=feature_pb2.FloatList(value=[0.5, -2.0])),
                "c": feature_pb2.Feature(int64_list=feature_pb2.Int64List(value=[-(2**63)])),
                "e": feature_pb2.Feature(),
            }
        )
    ).SerializeToString()
    decoded = rk.decode_example(data)
    assert list(decoded) == ["a", "b", "c", "e"]
    assert_same(decoded["a"], np.array([0.5, -2.0], np.float32))
    assert_same(decoded["b"], [b"", b"\xff"])
    assert_same(decoded["c"], np.array([-(2**63)], np.int64))
    assert_same(decoded["e"], np.array([], EMPTY_FEATURE_DTYPE))
    for value in (decoded["a"], decoded["c"], decoded["e"]):
        assert value.flags.writeable


@pytest.mark.parametrize("wrap", [bytes, bytearray, memoryview])
def test_decode_accepts_bytes_like(wrap: Any) -> None:
    data = rk.encode_example({"x": 1})
    assert_same(rk.decode_example(wrap(data))["x"], np.array([1]))
    of_data = rk.encode_ofrecord({"x": 1})
    assert_same(rk.decode_ofrecord(wrap(of_data))["x"], np.array([1]))


@pytest.mark.parametrize(
    "decode", [rk.decode_example, rk.decode_sequence_example, rk.decode_ofrecord]
)
def test_decode_refuses_non_bytes(decode: Any) -> None:
    with pytest.raises(TypeError, match="bytes"):
        decode("not bytes")


def test_empty_payloads_decode_to_empty_messages() -> None:
    assert rk.decode_example(b"") == {}
    assert rk.decode_ofrecord(b"") == {}
    assert rk.decode_sequence_example(b"") == ({}, {})


MALFORMED = [
    b"\xff",  # a varint that never ends
    b"\x0a\x05ab",  # a length beyond the end
    b"\x0a\x02\x0a\x05",  # a nested length beyond its parent
    b"\x0f",  # wire type 7 does not exist
    b"\x0a\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\x01",  # an overlong varint
    rk.encode_example({"x": 1})[:-1],  # cut short
    b"\x0a\x06\x0a\x04\x0a\x02\xc3\x28",  # a key that is not UTF-8 (proto3 strings must be)
]


@pytest.mark.parametrize("data", MALFORMED)
@pytest.mark.parametrize(
    "decode", [rk.decode_example, rk.decode_sequence_example, rk.decode_ofrecord]
)
def test_malformed_payloads_raise_decode_error(decode: Any, data: bytes) -> None:
    if decode is rk.decode_ofrecord and data == MALFORMED[-1]:
        data = b"\x0a\x04\x0a\x02\xc3\x28"  # the same key, at the OFRecord's top level
    with pytest.raises(rk.DecodeError) as info:
        decode(data)
    assert not isinstance(info.value, google.protobuf.message.DecodeError)
    assert isinstance(info.value, ValueError)


def test_ofrecord_key_that_is_not_utf8_names_it() -> None:
    with pytest.raises(rk.DecodeError, match="UTF-8") as info:
        rk.decode_ofrecord(b"\x0a\x04\x0a\x02\xc3\x28")
    assert info.value.feature == repr(b"\xc3\x28")


def _entry(name: bytes, feature: bytes) -> bytes:
    """Hand-written ``Features`` map entry, independent of recordkit's encoder."""
    entry = b"\x0a" + bytes([len(name)]) + name + b"\x12" + bytes([len(feature)]) + feature
    return b"\x0a" + bytes([len(entry)]) + entry


def _example(*entries: bytes) -> bytes:
    body = b"".join(entries)
    return b"\x0a" + bytes([len(body)]) + body


def test_unpacked_and_mixed_encodings_decode() -> None:
    signaling_nan = struct.pack("<I", 0x7F800001)
    # float_list with each value as its own fixed32 field (wire type 5), then a packed run
    floats = b"\x0d" + signaling_nan + b"\x0d" + struct.pack("<f", -0.0)
    floats += b"\x0a\x04" + struct.pack("<f", 1.5)
    ints = (
        b"\x08\x05" + b"\x08" + b"\xff" * 9 + b"\x01" + b"\x0a\x02\x01\x02"
    )  # 5, -1, then packed [1, 2]
    data = _example(
        _entry(b"f", b"\x12" + bytes([len(floats)]) + floats),
        _entry(b"i", b"\x1a" + bytes([len(ints)]) + ints),
    )
    decoded = rk.decode_example(data)
    expected_floats = np.frombuffer(signaling_nan + struct.pack("<ff", -0.0, 1.5), "<f4").astype(
        np.float32
    )
    assert_same(decoded["f"], expected_floats)
    assert_same(decoded["i"], np.array([5, -1, 1, 2], np.int64))


def test_unknown_fields_beside_float_values_are_ignored() -> None:
    floats = b"\x0a\x08" + struct.pack("<ff", 1.0, 2.0) + b"\x10\x07"  # plus field 2 = 7, unknown
    data = _example(_entry(b"f", b"\x12" + bytes([len(floats)]) + floats), b"\x10\x01")
    assert_same(rk.decode_example(data)["f"], np.array([1.0, 2.0], np.float32))


def test_repeated_fields_merge_as_protobuf_does() -> None:
    first = b"\x1a\x03\x0a\x01\x01"  # int64_list [1]
    second = b"\x1a\x03\x0a\x01\x02"  # int64_list [2], merged into the same list
    data = _example(_entry(b"x", first + second), _entry(b"y", first), _entry(b"y", second))
    decoded = rk.decode_example(data)
    assert_same(decoded["x"], np.array([1, 2], np.int64))
    assert_same(decoded["y"], np.array([2], np.int64))  # a repeated map key: the last entry wins


def test_ofrecord_all_kinds_decode() -> None:
    record = record_pb2.OFRecord(
        feature={
            "d": record_pb2.Feature(double_list=record_pb2.DoubleList(value=[0.1, -0.0])),
            "i": record_pb2.Feature(int32_list=record_pb2.Int32List(value=[-(2**31), 7])),
            "l": record_pb2.Feature(int64_list=record_pb2.Int64List(value=[2**40])),
            "f": record_pb2.Feature(float_list=record_pb2.FloatList(value=[0.25])),
            "b": record_pb2.Feature(bytes_list=record_pb2.BytesList(value=[b"z"])),
            "n": record_pb2.Feature(),
        }
    ).SerializeToString()
    assert_same_features(
        rk.decode_ofrecord(record),
        {
            "d": np.array([0.1, -0.0], np.float64),
            "i": np.array([-(2**31), 7], np.int32),
            "l": np.array([2**40], np.int64),
            "f": np.array([0.25], np.float32),
            "b": [b"z"],
            "n": np.array([], np.float32),
        },
    )


# --------------------------------------------------------------------------------------------------------------
# Property-based round trips

names = st.text(st.characters(exclude_categories=("Cs",)), max_size=8)
counts = st.integers(0, 80)
int64_arrays = st.lists(st.integers(-(2**63), 2**63 - 1), max_size=80).map(
    lambda v: np.array(v, np.int64)
)
int32_arrays = st.lists(st.integers(-(2**31), 2**31 - 1), max_size=40).map(
    lambda v: np.array(v, np.int32)
)
# Every float32/float64 bit pattern, NaN payloads and -0.0 included.
float32_arrays = st.lists(st.integers(0, 2**32 - 1), max_size=80).map(
    lambda v: np.array(v, np.uint32).view(np.float32)
)
float64_arrays = st.lists(st.integers(0, 2**64 - 1), max_size=40).map(
    lambda v: np.array(v, np.uint64).view(np.float64)
)
text_or_bytes = st.binary(max_size=20) | st.text(
    st.characters(exclude_categories=("Cs",)), max_size=10
)
byte_lists = st.lists(text_or_bytes, max_size=5)


def _utf8(value: bytes | str) -> bytes:
    return value.encode("utf-8") if isinstance(value, str) else value


def _to_float32(array: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore", invalid="ignore"):
        return array.astype(np.float32)


def _pairs(family: str) -> st.SearchStrategy[tuple[object, object]]:
    """(value to encode, what decoding must give) pairs."""
    python_scalars = st.one_of(
        st.integers(-(2**63), 2**63 - 1).map(lambda v: (v, np.array([v], np.int64))),
        st.booleans().map(lambda v: (v, np.array([int(v)], np.int64))),
        st.floats(width=32).map(lambda v: (v, np.array([v], np.float32))),
        text_or_bytes.map(lambda v: (v, [_utf8(v)])),
        st.just(([], np.array([], np.float32))),
    )
    arrays = st.one_of(
        int64_arrays.map(lambda a: (a, a)),
        float32_arrays.map(lambda a: (a, a)),
        byte_lists.map(lambda v: (bytes_feature(v), [_utf8(x) for x in v])),
        st.lists(st.integers(-(2**63), 2**63 - 1), min_size=1, max_size=40).map(
            lambda v: (v, np.array(v, np.int64))
        ),
        st.lists(text_or_bytes, min_size=1, max_size=5).map(lambda v: (v, [_utf8(x) for x in v])),
    )
    if family == "ofrecord":
        arrays |= st.one_of(
            int32_arrays.map(lambda a: (a, a)),
            float64_arrays.map(lambda a: (a, a)),
            float64_arrays.map(lambda a: (double_feature(a), a)),
            int32_arrays.map(lambda a: (int32_feature(a), a)),
        )
    else:
        arrays |= float64_arrays.map(lambda a: (a, _to_float32(a)))
    return python_scalars | arrays


def _features(
    family: str, min_size: int = 0
) -> st.SearchStrategy[dict[str, tuple[object, object]]]:
    return st.dictionaries(names, _pairs(family), min_size=min_size, max_size=6)


@settings(max_examples=80, deadline=None)
@given(_features("example"))
def test_example_round_trip(pairs: dict[str, tuple[object, object]]) -> None:
    with np.errstate(over="ignore", invalid="ignore"):
        data = rk.encode_example({name: value for name, (value, _) in pairs.items()})
    assert_same_features(rk.decode_example(data), {name: exp for name, (_, exp) in pairs.items()})


@settings(max_examples=80, deadline=None)
@given(_features("ofrecord", min_size=1))
def test_ofrecord_round_trip(pairs: dict[str, tuple[object, object]]) -> None:
    data = rk.encode_ofrecord({name: value for name, (value, _) in pairs.items()})
    assert data
    assert_same_features(rk.decode_ofrecord(data), {name: exp for name, (_, exp) in pairs.items()})


@settings(max_examples=60, deadline=None)
@given(
    _features("example"),
    st.dictionaries(names, st.lists(_pairs("example"), max_size=4), max_size=4),
)
def test_sequence_example_round_trip(
    context: dict[str, tuple[object, object]], lists: dict[str, list[tuple[object, object]]]
) -> None:
    with np.errstate(over="ignore", invalid="ignore"):
        data = rk.encode_sequence_example(
            {name: value for name, (value, _) in context.items()},
            {name: [value for value, _ in steps] for name, steps in lists.items()},
        )
    decoded_context, decoded_lists = rk.decode_sequence_example(data)
    assert_same_features(decoded_context, {name: exp for name, (_, exp) in context.items()})
    assert_sequence_is_canonical(data)
    assert sorted(decoded_lists) == sorted(lists)
    for name, steps in lists.items():
        assert len(decoded_lists[name]) == len(steps)
        for actual, (_, expected) in zip(decoded_lists[name], steps, strict=True):
            assert_same(actual, expected)


def _varint_at(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[pos]
        value |= (byte & 0x7F) << shift
        pos, shift = pos + 1, shift + 7
        if byte < 0x80:
            return value, pos


def _fields(data: bytes) -> list[tuple[int, bytes]]:
    """Split a message made only of length-delimited fields into (field number, payload) pairs."""
    fields, pos = [], 0
    while pos < len(data):
        key, pos = _varint_at(data, pos)
        assert key & 7 == 2
        length, pos = _varint_at(data, pos)
        fields.append((key >> 3, data[pos : pos + length]))
        pos += length
    assert pos == len(data)
    return fields


def _canonical_entries(message: bytes) -> list[bytes]:
    """The map entries of a Features or OFRecord payload, in a fixed order.

    Protobuf's deterministic serialization writes each entry canonically but orders keys in its own way, so
    the entries are compared as a sorted list.
    """
    return sorted(payload for _, payload in _fields(message))


@settings(max_examples=60, deadline=None)
@given(_features("example"), _features("ofrecord", min_size=1))
def test_encoding_equals_protobuf_canonical_serialization(
    example: dict[str, tuple[object, object]], record: dict[str, tuple[object, object]]
) -> None:
    """Each map entry recordkit writes is exactly protobuf's canonical (deterministic) encoding of it."""
    with np.errstate(over="ignore", invalid="ignore"):
        data = rk.encode_example({name: value for name, (value, _) in example.items()})
    reference = example_pb2.Example.FromString(data).SerializeToString(deterministic=True)
    assert len(data) == len(reference)
    [(number, features)] = _fields(data)
    [(_, reference_features)] = _fields(reference)
    assert number == 1
    assert _canonical_entries(features) == _canonical_entries(reference_features)

    data = rk.encode_ofrecord({name: value for name, (value, _) in record.items()})
    reference = record_pb2.OFRecord.FromString(data).SerializeToString(deterministic=True)
    assert _canonical_entries(data) == _canonical_entries(reference)


@settings(max_examples=60, deadline=None)
@given(names, _pairs("example"), _pairs("ofrecord"))
def test_single_feature_encoding_is_byte_exact(
    name: str, example: tuple[object, object], record: tuple[object, object]
) -> None:
    with np.errstate(over="ignore", invalid="ignore"):
        data = rk.encode_example({name: example[0]})
    assert data == example_pb2.Example.FromString(data).SerializeToString()
    data = rk.encode_ofrecord({name: record[0]})
    assert data == record_pb2.OFRecord.FromString(data).SerializeToString()


def assert_sequence_is_canonical(data: bytes) -> None:
    """Each map entry of the context and feature lists is protobuf's canonical encoding of it."""
    reference = example_pb2.SequenceExample.FromString(data).SerializeToString(deterministic=True)
    assert len(data) == len(reference)
    assert [number for number, _ in _fields(data)] == [1, 2]
    for (_, ours), (_, theirs) in zip(_fields(data), _fields(reference), strict=True):
        assert _canonical_entries(ours) == _canonical_entries(theirs)


def test_float_bit_patterns_survive_unknown_fields_beside_the_values():
    # A signaling NaN, -0.0 and a denormal, in a FloatList that also carries an unknown field (field 9).
    bits = np.array([0x7FA00001, 0x80000000, 0x00000001], np.uint32)
    float_list = b"\x0a\x0c" + bits.astype("<u4").tobytes() + b"\x48\x01"
    feature = b"\x12" + bytes([len(float_list)]) + float_list
    entry = b"\x0a\x01x\x12" + bytes([len(feature)]) + feature
    features = b"\x0a" + bytes([len(entry)]) + entry
    record = b"\x0a" + bytes([len(features)]) + features
    assert rk.decode_example(record)["x"].view(np.uint32).tolist() == bits.tolist()
    parsed = rk.parse_examples([record], {"x": rk.VarLen(np.float32)})["x"]
    assert parsed.values.view(np.uint32).tolist() == bits.tolist()
