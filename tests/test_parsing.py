"""Feature specs and the shapes, defaults, errors and containers of recordkit.decode.parsing (no TensorFlow)."""

from __future__ import annotations

import numpy as np
import pytest

import recordkit as rk
from recordkit._proto.oneflow import record_pb2
from recordkit._proto.tensorflow import example_pb2
from recordkit.compat.oneflow import bytes_decoder, raw_decoder
from recordkit.errors import DecodeError


def example(**features: object) -> bytes:
    """Serialize an Example; ints -> int64_list, floats -> float_list, bytes -> bytes_list, None -> no kind."""
    ex = example_pb2.Example()
    for name, values in features.items():
        feature = ex.features.feature[name]
        if values is None:
            feature.SetInParent()
            continue
        assert isinstance(values, list)
        if values and isinstance(values[0], bytes):
            feature.bytes_list.value.extend(values)
        elif values and isinstance(values[0], float):
            feature.float_list.value.extend(values)
        elif values in (["empty-float"], ["empty-int"], ["empty-bytes"]):
            kind = {"empty-float": "float_list", "empty-int": "int64_list"}.get(
                values[0], "bytes_list"
            )
            getattr(feature, kind).SetInParent()
        else:
            feature.int64_list.value.extend(values)
    return ex.SerializeToString()


def sequence_example(context: dict[str, list[int]], lists: dict[str, list[list[object]]]) -> bytes:
    seq = example_pb2.SequenceExample()
    for name, values in context.items():
        seq.context.feature[name].int64_list.value.extend(values)
    for name, steps in lists.items():
        feature_list = seq.feature_lists.feature_list[name]
        feature_list.SetInParent()
        for step in steps:
            feature = feature_list.feature.add()
            if step and isinstance(step[0], bytes):
                feature.bytes_list.value.extend(step)
            elif step and isinstance(step[0], float):
                feature.float_list.value.extend(step)
            else:
                feature.int64_list.value.extend(step)
    return seq.SerializeToString()


# -- specs -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [bytes, object, np.bytes_, "bytes", np.object_])
def test_bytes_dtype_aliases(dtype):
    assert rk.FixedLen((), dtype).dtype == "bytes"


def test_spec_normalisation_and_validation():
    assert rk.FixedLen(3, np.float32).shape == (3,)
    assert rk.VarLen(str).dtype == "str"
    with pytest.raises(TypeError, match="unsupported dtype"):
        rk.VarLen(np.complex64)
    with pytest.raises(ValueError, match="non-negative"):
        rk.FixedLen((-1,), np.int64)
    with pytest.raises(ValueError, match="does not fit"):
        rk.FixedLen((3,), np.int64, default=[1, 2])
    with pytest.raises(TypeError, match="bytes"):
        rk.FixedLen((), bytes, default="text")
    with pytest.raises(TypeError, match="must be a FixedLen"):
        rk.parse_examples([], {"x": np.int64})  # type: ignore[dict-item]
    with pytest.raises(TypeError, match="bytes-like"):
        rk.parse_examples(["text"], {"x": rk.VarLen(np.int64)})


def test_default_is_reshaped_when_it_has_as_many_values_else_broadcast():
    assert rk.FixedLen((2, 3), np.int64, default=list(range(6))).default.tolist() == [
        [0, 1, 2],
        [3, 4, 5],
    ]  # type: ignore[union-attr]
    assert rk.FixedLen((2, 3), np.int64, default=7).default.tolist() == [[7] * 3] * 2  # type: ignore[union-attr]


# -- FixedLen ----------------------------------------------------------------------------------------


def test_fixed_len_shapes_and_dtypes():
    records = [
        example(a=[1, 2, 3, 4, 5, 6], f=[0.5], b=[b"x"]),
        example(a=[6, 5, 4, 3, 2, 1], f=[1.5], b=[b"y"]),
    ]
    out = rk.parse_examples(
        records,
        {
            "a": rk.FixedLen((2, 3), np.int64),
            "f": rk.FixedLen((), np.float32),
            "b": rk.FixedLen((1,), bytes),
        },
    )
    assert out["a"].shape == (2, 2, 3)
    assert out["a"].dtype == np.int64
    assert out["a"][1].tolist() == [[6, 5, 4], [3, 2, 1]]
    assert out["f"].tolist() == [0.5, 1.5]
    assert out["f"].dtype == np.float32
    assert out["b"].dtype == object
    assert out["b"].tolist() == [[b"x"], [b"y"]]
    assert all(array.flags.writeable for array in out.values())  # type: ignore[union-attr]


def test_missing_feature_takes_the_default_or_raises():
    records = [example(a=[1, 2]), example(), example(a=None)]
    out = rk.parse_examples(records, {"a": rk.FixedLen((2,), np.int64, default=[-1, -2])})
    assert out["a"].tolist() == [[1, 2], [-1, -2], [-1, -2]]
    with pytest.raises(DecodeError) as info:
        rk.parse_examples(records, {"a": rk.FixedLen((2,), np.int64)})
    assert info.value.index == 1
    assert info.value.feature == "a"
    assert "'a'" in str(info.value)
    assert "missing" in str(info.value)


def test_wrong_value_count_names_feature_record_and_counts():
    records = [example(a=[1, 2])] * 3 + [example(a=[1, 2, 3])]
    with pytest.raises(DecodeError) as info:
        rk.parse_examples(records, {"a": rk.FixedLen((2,), np.int64)})
    message = str(info.value)
    assert info.value.index == 3
    assert "record 3" in message
    assert "'a'" in message
    assert "expected 2" in message
    assert "found 3" in message


def test_empty_list_is_not_missing():
    # TensorFlow: a present but empty list is a count mismatch even when there is a default.
    with pytest.raises(DecodeError, match="found 0"):
        rk.parse_examples(
            [example(a=["empty-float"])], {"a": rk.FixedLen((), np.float32, default=1.0)}
        )


@pytest.mark.parametrize(
    ("values", "dtype"),
    [([1], np.float32), ([0.5], np.int64), ([b"x"], np.int64), ([1], bytes), ([1], str)],
)
def test_tfrecord_kind_must_match_the_dtype(values, dtype):
    with pytest.raises(DecodeError, match="data type doesn't match") as info:
        rk.parse_examples(
            [example(a=[1]), example(a=values)] if values != [1] else [example(a=values)],
            {"a": rk.VarLen(dtype)},
        )
    assert info.value.feature == "a"


def test_tfrecord_rejects_dtypes_it_cannot_hold():
    with pytest.raises(TypeError, match="int64, float32 or bytes"):
        rk.parse_examples([example(a=[1])], {"a": rk.VarLen(np.int32)})


def test_str_dtype_decodes_utf8():
    out = rk.parse_examples([example(s=["héllo".encode()])], {"s": rk.FixedLen((), str)})
    assert out["s"].tolist() == ["héllo"]
    with pytest.raises(DecodeError, match="UTF-8") as info:
        rk.parse_examples([example(s=[b"ok"]), example(s=[b"\xff"])], {"s": rk.VarLen(str)})
    assert info.value.index == 1


def test_records_may_be_any_bytes_like_and_any_iterable():
    payload = example(a=[3])
    out = rk.parse_examples(
        iter([payload, bytearray(payload), memoryview(payload)]), {"a": rk.FixedLen((), np.int64)}
    )
    assert out["a"].tolist() == [3, 3, 3]


def test_empty_batch():
    out = rk.parse_examples(
        [],
        {
            "a": rk.FixedLen((2,), np.float32),
            "v": rk.VarLen(bytes),
            "s": rk.FixedLenSequence((3,), np.int64),
        },
    )
    assert out["a"].shape == (0, 2)
    assert len(out["v"]) == 0
    assert out["s"].shape == (0, 0, 3)


def test_parse_example_drops_the_batch_axis():
    out = rk.parse_example(
        example(a=[1, 2], v=[5, 6, 7]), {"a": rk.FixedLen((2,), np.int64), "v": rk.VarLen(np.int64)}
    )
    assert out["a"].tolist() == [1, 2]
    assert out["v"].tolist() == [5, 6, 7]


# -- VarLen and Ragged -------------------------------------------------------------------------------


def test_var_len_gives_a_ragged():
    records = [example(v=[1, 2, 3]), example(), example(v=None), example(v=[4])]
    ragged = rk.parse_examples(records, {"v": rk.VarLen(np.int64)})["v"]
    assert isinstance(ragged, rk.Ragged)
    assert ragged.row_splits.dtype == np.int64
    assert ragged.row_splits.tolist() == [0, 3, 3, 3, 4]
    assert ragged.values.tolist() == [1, 2, 3, 4]
    assert len(ragged) == 4
    assert ragged[0].tolist() == [1, 2, 3]
    assert ragged[-1].tolist() == [4]
    assert [row.tolist() for row in ragged] == [[1, 2, 3], [], [], [4]]
    assert ragged.to_list() == [[1, 2, 3], [], [], [4]]
    assert ragged.to_dense(-1).tolist() == [[1, 2, 3], [-1, -1, -1], [-1, -1, -1], [4, -1, -1]]
    assert ragged.row_lengths().tolist() == [3, 0, 0, 1]
    assert ragged[1:4].to_list() == [[], [], [4]]
    with pytest.raises(IndexError):
        ragged[4]


def test_ragged_of_bytes_pads_with_empty_bytes():
    ragged = rk.parse_examples(
        [example(v=[b"a", b"b"]), example(v=[b"c"])], {"v": rk.VarLen(bytes)}
    )["v"]
    assert ragged.to_dense().tolist() == [[b"a", b"b"], [b"c", b""]]


# -- FixedLenSequence in Examples ----------------------------------------------------------------


def test_fixed_len_sequence_in_examples_pads_to_the_longest():
    records = [example(a=[1, 2, 3, 4]), example(a=[5, 6]), example()]
    out = rk.parse_examples(records, {"a": rk.FixedLenSequence((2,), np.int64)})["a"]
    assert out.tolist() == [[[1, 2], [3, 4]], [[5, 6], [0, 0]], [[0, 0], [0, 0]]]
    padded = rk.parse_examples(records, {"a": rk.FixedLenSequence((2,), np.int64, default=-1)})["a"]
    assert padded.tolist() == [[[1, 2], [3, 4]], [[5, 6], [-1, -1]], [[-1, -1], [-1, -1]]]
    with pytest.raises(DecodeError, match="whole number") as info:
        rk.parse_examples(
            [example(a=[1, 2]), example(a=[1, 2, 3])], {"a": rk.FixedLenSequence((2,), np.int64)}
        )
    assert info.value.index == 1


# -- SequenceExamples --------------------------------------------------------------------------------


def test_sequence_examples_pad_steps_and_report_lengths():
    records = [
        sequence_example({"id": [1]}, {"t": [[1, 2], [3, 4]], "w": [[b"a"], [b"b"]]}),
        sequence_example({"id": [2]}, {"t": [[5, 6]], "w": []}),
        sequence_example({"id": [3]}, {"t": [], "w": [[b"c", b"d"]]}),
    ]
    context, sequence, lengths = rk.parse_sequence_examples(
        records,
        {"id": rk.FixedLen((), np.int64)},
        {"t": rk.FixedLenSequence((2,), np.int64), "w": rk.VarLen(bytes)},
    )
    assert context["id"].tolist() == [1, 2, 3]
    assert sequence["t"].tolist() == [[[1, 2], [3, 4]], [[5, 6], [0, 0]], [[0, 0], [0, 0]]]
    assert lengths == {"t": pytest.approx(np.array([2, 1, 0]))}
    assert lengths["t"].tolist() == [2, 1, 0]
    words = sequence["w"]
    assert isinstance(words, rk.Ragged)
    assert isinstance(words.values, rk.Ragged)
    assert words.to_list() == [[[b"a"], [b"b"]], [], [[b"c", b"d"]]]
    assert words[2].to_list() == [[b"c", b"d"]]
    with pytest.raises(TypeError, match="flat"):
        words.to_dense()


def test_missing_feature_list_needs_allow_missing():
    records = [sequence_example({}, {"t": [[1]]}), sequence_example({}, {})]
    with pytest.raises(DecodeError, match="missing") as info:
        rk.parse_sequence_examples(
            records, sequence_features={"t": rk.FixedLenSequence((), np.int64)}
        )
    assert info.value.index == 1
    _, sequence, lengths = rk.parse_sequence_examples(
        records, sequence_features={"t": rk.FixedLenSequence((), np.int64, allow_missing=True)}
    )
    assert sequence["t"].tolist() == [[1], [0]]
    assert lengths["t"].tolist() == [1, 0]


def test_sequence_step_errors_name_the_record():
    records = [sequence_example({}, {"t": [[1]]}), sequence_example({}, {"t": [[1], [2, 3]]})]
    with pytest.raises(DecodeError, match="expected 1 values") as info:
        rk.parse_sequence_examples(
            records, sequence_features={"t": rk.FixedLenSequence((), np.int64)}
        )
    assert info.value.index == 1
    assert "time step 1" in str(info.value)
    floats = [sequence_example({}, {"t": [[1]]}), sequence_example({}, {"t": [[0.5]]})]
    with pytest.raises(DecodeError, match="data type") as info:
        rk.parse_sequence_examples(floats, sequence_features={"t": rk.VarLen(np.int64)})
    assert info.value.index == 1


def test_parse_sequence_example_single():
    context, sequence = rk.parse_sequence_example(
        sequence_example({"id": [9]}, {"t": [[1.0], [2.0], [3.0]]}),
        {"id": rk.FixedLen((), np.int64)},
        {"t": rk.FixedLenSequence((), np.float32)},
    )
    assert context["id"] == 9
    assert sequence["t"].tolist() == [1.0, 2.0, 3.0]


def test_sequence_specs_are_checked():
    with pytest.raises(TypeError, match="FixedLenSequence or VarLen"):
        rk.parse_sequence_examples([], sequence_features={"t": rk.FixedLen((), np.int64)})  # type: ignore[dict-item]


# -- OFRecord ----------------------------------------------------------------------------------------


def ofrecord(**features: tuple[str, list[object]]) -> bytes:
    rec = record_pb2.OFRecord()
    for name, (kind, values) in features.items():
        getattr(rec.feature[name], kind).value.extend(values)
    return rec.SerializeToString()


def test_ofrecords_cast_numeric_kinds_to_the_spec_dtype():
    records = [
        ofrecord(x=("int64_list", [1, 2]), y=("double_list", [0.25])),
        ofrecord(x=("int32_list", [-3, 4]), y=("float_list", [0.5])),
    ]
    out = rk.parse_ofrecords(
        records, {"x": rk.FixedLen((2,), np.float32), "y": rk.FixedLen((), np.float64)}
    )
    assert out["x"].dtype == np.float32
    assert out["x"].tolist() == [[1.0, 2.0], [-3.0, 4.0]]
    assert out["y"].tolist() == [0.25, 0.5]
    as_uint8 = rk.parse_ofrecords(
        [ofrecord(x=("float_list", [3.9, 200.0]))], {"x": rk.FixedLen((2,), np.uint8)}
    )["x"]
    assert as_uint8.tolist() == [[3, 200]]


def test_ofrecord_bytes_read_as_signed_bytes():
    out = rk.parse_ofrecords(
        [ofrecord(img=("bytes_list", [b"\x01\xff\x80"]))], {"img": rk.VarLen(np.float32)}
    )
    assert out["img"][0].tolist() == [1.0, -1.0, -128.0]
    out = rk.parse_ofrecords(
        [ofrecord(img=("bytes_list", [b"\x01\xff"]))], {"img": rk.FixedLen((2,), np.uint8)}
    )
    assert out["img"].tolist() == [[1, 255]]
    with pytest.raises(DecodeError, match="exactly 1"):
        rk.parse_ofrecords(
            [ofrecord(img=("bytes_list", [b"a", b"b"]))], {"img": rk.VarLen(np.uint8)}
        )
    with pytest.raises(DecodeError, match="data type"):
        rk.parse_ofrecords([ofrecord(x=("int32_list", [1]))], {"x": rk.VarLen(bytes)})


EMPTY_LIST_SPECS = {
    "varlen": lambda dtype: rk.VarLen(dtype),
    "fixed-0": lambda dtype: rk.FixedLen((0,), dtype),
    "sequence": lambda dtype: rk.FixedLenSequence((), dtype),
    "sequence-2": lambda dtype: rk.FixedLenSequence((2,), dtype),
}


@pytest.mark.parametrize("spec", EMPTY_LIST_SPECS)
@pytest.mark.parametrize("dtype", [np.int64, np.float32, bytes])
@pytest.mark.parametrize("count", [1, 7, 8, 9, 30])
def test_empty_lists_in_batches_of_any_size(spec, dtype, count):
    empty = {np.int64: ["empty-int"], np.float32: ["empty-float"], bytes: ["empty-bytes"]}[dtype]
    record = example(ids=empty)
    kind = example_pb2.Example.FromString(record).features.feature["ids"].WhichOneof("kind")
    assert kind == {np.int64: "int64_list", np.float32: "float_list", bytes: "bytes_list"}[dtype]
    parsed = rk.parse_examples([record] * count, {"ids": EMPTY_LIST_SPECS[spec](dtype)})["ids"]
    if spec == "varlen":
        assert parsed.to_list() == [[]] * count
    elif spec == "fixed-0":
        assert parsed.shape == (count, 0)
    else:
        assert parsed.shape == (count, 0, *((2,) if spec == "sequence-2" else ()))


@pytest.mark.parametrize(
    "kind", ["float_list", "double_list", "int32_list", "int64_list", "bytes_list"]
)
@pytest.mark.parametrize("count", [7, 8, 20])
def test_empty_ofrecord_lists_in_batches_of_any_size(kind, count):
    record = record_pb2.OFRecord()
    getattr(record.feature["ids"], kind).SetInParent()
    dtype = bytes if kind == "bytes_list" else np.float64
    batch = [record.SerializeToString()] * count
    parsed = rk.parse_ofrecords(batch, {"ids": rk.VarLen(dtype)})
    assert parsed["ids"].to_list() == [[]] * count
    fixed = rk.parse_ofrecords(batch, {"ids": rk.FixedLen((0,), dtype)})["ids"]
    assert fixed.shape == (count, 0)


BUFFER_KINDS = {
    "bytes": bytes,
    "bytearray": bytearray,
    "memoryview": memoryview,
    "uint8-array": lambda data: np.frombuffer(data, np.uint8),
    "int8-array": lambda data: np.frombuffer(data, np.int8).copy(),
    "mmap": lambda data: _mmap_of(data),
}


def _mmap_of(data: bytes) -> object:
    import mmap

    view = mmap.mmap(-1, len(data))
    view.write(data)
    return view


@pytest.mark.parametrize("kind", BUFFER_KINDS)
def test_every_decoder_takes_any_byte_buffer(kind):
    make = BUFFER_KINDS[kind]
    example_bytes = rk.encode_example({"a": [1, 2], "s": b"xy"})
    sequence_bytes = rk.encode_sequence_example({"a": [1]}, {"s": [[1.0], [2.0]]})
    of_bytes = rk.encode_ofrecord({"a": np.arange(2, dtype=np.int32), "s": b"xy"})
    spec = {"a": rk.VarLen(np.int64)}
    assert rk.decode_example(make(example_bytes))["a"].tolist() == [1, 2]
    assert rk.parse_example(make(example_bytes), spec)["a"].tolist() == [1, 2]
    batch = [make(example_bytes) for _ in range(9)]
    assert rk.parse_examples(batch, spec)["a"].to_list() == [[1, 2]] * 9
    assert rk.decode_sequence_example(make(sequence_bytes)).feature_lists["s"][1].tolist() == [2.0]
    _, seq = rk.parse_sequence_example(make(sequence_bytes), {}, {"s": rk.VarLen(np.float32)})
    assert seq["s"].to_list() == [[1.0], [2.0]]
    ctx, _, _ = rk.parse_sequence_examples([make(sequence_bytes)], spec)
    assert ctx["a"].to_list() == [[1]]
    assert rk.decode_ofrecord(make(of_bytes))["a"].tolist() == [0, 1]
    assert rk.parse_ofrecords([make(of_bytes)], spec)["a"].to_list() == [[0, 1]]
    assert raw_decoder([make(of_bytes)], "a", (2,), np.int64).tolist() == [[0, 1]]
    assert bytes_decoder([make(of_bytes)], "s") == [b"xy"]


NOT_BUFFERS = {
    "str": "\n\x00",
    "int": 5,
    "list": [10, 0],
    "int32-array": np.zeros(3, np.int32),
    "2-d-array": np.zeros((2, 2), np.uint8),
    "strided-array": np.zeros(8, np.uint8)[::2],
}


@pytest.mark.parametrize("kind", NOT_BUFFERS)
def test_decoders_refuse_other_objects_with_a_type_error_naming_them(kind):
    bad = NOT_BUFFERS[kind]
    name = type(bad).__name__
    calls = [
        lambda: rk.decode_example(bad),
        lambda: rk.decode_sequence_example(bad),
        lambda: rk.decode_ofrecord(bad),
        lambda: rk.parse_example(bad, {}),
        lambda: rk.parse_examples([bad], {}),
        lambda: rk.parse_sequence_example(bad),
        lambda: rk.parse_sequence_examples([bad]),
        lambda: rk.parse_ofrecords([bad], {}),
        lambda: raw_decoder([bad], "a", (1,), np.int64),
        lambda: bytes_decoder([bad], "a"),
    ]
    for call in calls:
        with pytest.raises(TypeError, match=name):
            call()


def test_a_single_record_instead_of_a_batch_is_a_type_error():
    with pytest.raises(TypeError, match="iterable of serialized records"):
        rk.parse_examples(rk.encode_example({"a": 1}), {"a": rk.VarLen(np.int64)})


@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.int32, np.int64])
def test_an_integer_default_fits_any_integer_dtype(dtype):
    spec = rk.FixedLen((2,), dtype, default=7)
    assert spec.default.dtype == np.dtype(dtype)
    assert spec.default.tolist() == [7, 7]
    with pytest.raises(ValueError, match="does not fit"):
        rk.FixedLen((), dtype, default=int(np.iinfo(dtype).max) + 1)


def test_feature_list_items_of_no_values_with_a_default():
    steps = sequence_example({}, {"s": [[], []]})
    spec = rk.FixedLenSequence((0,), np.int64, default=5, allow_missing=True)
    _, sequence, lengths = rk.parse_sequence_examples(
        [steps, sequence_example({}, {})], {}, {"s": spec}
    )
    assert sequence["s"].shape == (2, 2, 0)
    assert lengths["s"].tolist() == [2, 0]


def test_a_fixed_len_error_names_the_first_bad_record():
    records = [
        rk.encode_example({"other": [1]}),  # record 0: no "tokens" at all
        rk.encode_example({"tokens": [1]}),
        rk.encode_example({"tokens": [1, 2]}),  # record 2: too many values
    ]
    with pytest.raises(DecodeError) as caught:
        rk.parse_examples(records, {"tokens": rk.FixedLen((), np.int64)})
    assert caught.value.index == 0
    assert "missing" in str(caught.value)
    with pytest.raises(DecodeError) as caught:
        rk.parse_examples(records[1:], {"tokens": rk.FixedLen((), np.int64)})
    assert caught.value.index == 1
    assert "expected 1 values" in str(caught.value)


def test_a_layout_remembered_from_one_batch_is_not_used_for_another_laid_out_otherwise():
    # Records of the same length, with the list kinds of x and y swapped: the layout template made for the
    # first batch must not be taken for the second's.
    def batch(x_float: bool) -> list[bytes]:
        out = []
        for i in range(32):
            ints = [2**21 + i]  # a 4-byte varint, as long as one float
            floats = np.array([i / 2], np.float32)
            x, y = (floats, ints) if x_float else (ints, floats)
            example = example_pb2.Example()
            features = example.features.feature
            (features["x"].float_list if x_float else features["x"].int64_list).value.extend(
                x.tolist() if x_float else x
            )
            (features["y"].int64_list if x_float else features["y"].float_list).value.extend(
                y if x_float else y.tolist()
            )
            out.append(example.SerializeToString(deterministic=True))
        return out

    first, second = batch(True), batch(False)
    assert {len(r) for r in first} == {len(r) for r in second}  # one length: one template key
    as_floats = rk.parse_examples(first, {"x": rk.VarLen(np.float32), "y": rk.VarLen(np.int64)})
    as_ints = rk.parse_examples(second, {"x": rk.VarLen(np.int64), "y": rk.VarLen(np.float32)})
    for parsed, float_name, int_name in ((as_floats, "x", "y"), (as_ints, "y", "x")):
        np.testing.assert_array_equal(
            parsed[float_name].values, np.arange(32, dtype=np.float32) / 2
        )
        np.testing.assert_array_equal(parsed[int_name].values, 2**21 + np.arange(32))
