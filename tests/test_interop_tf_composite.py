"""Sparse and Partitioned specs give what tf.io.SparseFeature and tf.io.RaggedFeature (with partitions) give.

The inputs of the first tests are those of TensorFlow's own parsing tests (``parsing_ops_test.py``, named
after them); every test runs ``tf.io.parse_example`` / ``tf.io.parse_sequence_example`` on the same
serialized records and compares. Generated batches (seeded) follow, valid and damaged.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest

import recordkit as rk
from recordkit._proto.tensorflow import example_pb2, feature_pb2
from recordkit.decode.partitions import (
    Partitioned,
    RowLengths,
    RowLimits,
    RowSplits,
    RowStarts,
    UniformRowLength,
    ValueRowIds,
)
from recordkit.decode.sparse import Sparse, SparseArray
from tests._tf_arrays import assert_same as assert_array

tf = pytest.importorskip("tensorflow")

pytestmark = pytest.mark.interop

# --------------------------------------------------------------------------------------------------------------
# Building records and comparing results


def feature(values: Any = None, kind: str | None = None) -> feature_pb2.Feature:
    """A Feature: no list for None, else the list of ``kind`` (inferred from the values when not given)."""
    f = feature_pb2.Feature()
    if values is None:
        return f
    if kind is None:
        kind = "bytes" if values and isinstance(values[0], bytes) else "int"
        kind = "float" if values and isinstance(values[0], float) else kind
    {"bytes": f.bytes_list, "int": f.int64_list, "float": f.float_list}[kind].value.extend(values)
    if not values:  # an empty list is still set
        {"bytes": f.bytes_list, "int": f.int64_list, "float": f.float_list}[kind].SetInParent()
    return f


def example(features: dict[str, feature_pb2.Feature]) -> bytes:
    ex = example_pb2.Example()
    for name, f in features.items():
        ex.features.feature[name].CopyFrom(f)
    return ex.SerializeToString()


def sequence_example(
    context: dict[str, feature_pb2.Feature] | None = None,
    lists: dict[str, list[feature_pb2.Feature]] | None = None,
) -> bytes:
    ex = example_pb2.SequenceExample()
    for name, f in (context or {}).items():
        ex.context.feature[name].CopyFrom(f)
    for name, steps in (lists or {}).items():
        fl = ex.feature_lists.feature_list[name]
        fl.SetInParent()
        for step in steps:
            fl.feature.add().CopyFrom(step)
    return ex.SerializeToString()


def tf_dtype(value_type: Any) -> Any:
    if isinstance(value_type, str):
        return tf.string
    return {np.dtype(np.int64): tf.int64, np.dtype(np.float32): tf.float32}[np.dtype(value_type)]


def tf_partition(part: Any) -> Any:
    P = tf.io.RaggedFeature
    if isinstance(part, UniformRowLength):
        return P.UniformRowLength(part.length)
    kind = {
        RowSplits: P.RowSplits,
        RowLengths: P.RowLengths,
        RowStarts: P.RowStarts,
        RowLimits: P.RowLimits,
        ValueRowIds: P.ValueRowIds,
    }[type(part)]
    return kind(part.key)


def to_tf(spec: Any) -> Any:
    """The tf.io spec that asks for what the recordkit spec asks for."""
    if isinstance(spec, rk.FixedLen):
        default = None if spec.default is None else spec.default
        return tf.io.FixedLenFeature(spec.shape, tf_dtype(spec.dtype), default_value=default)
    if isinstance(spec, rk.VarLen):
        return tf.io.RaggedFeature(tf_dtype(spec.dtype), row_splits_dtype=tf.int64)
    if isinstance(spec, rk.FixedLenSequence):
        return tf.io.FixedLenSequenceFeature(
            spec.shape, tf_dtype(spec.dtype), allow_missing=True, default_value=spec.default
        )
    if isinstance(spec, Sparse):
        return tf.io.SparseFeature(
            list(spec.index_key),
            spec.value_key,
            tf_dtype(spec.dtype),
            list(spec.size),
            already_sorted=spec.already_sorted,
        )
    assert isinstance(spec, Partitioned)
    return tf.io.RaggedFeature(
        tf_dtype(spec.dtype),
        value_key=spec.value_key,
        partitions=[tf_partition(p) for p in spec.partitions],
        row_splits_dtype=tf.int32 if spec.row_splits_dtype == np.int32 else tf.int64,
        validate=True,
    )


def tf_specs(specs: dict[str, Any]) -> dict[str, Any]:
    return {name: to_tf(spec) for name, spec in specs.items()}


def assert_same(ours: Any, theirs: Any) -> None:
    """A recordkit result equals TensorFlow's: every level of row splits (and its dtype), every array."""
    if isinstance(theirs, tf.SparseTensor) and isinstance(ours, rk.Ragged):  # a tf.io.VarLenFeature
        indices = theirs.indices.numpy()
        lengths = ours.row_lengths()
        assert indices[:, 0].tolist() == np.repeat(np.arange(len(ours)), lengths).tolist()
        assert indices[:, 1].tolist() == [j for n in lengths for j in range(n)]
        assert theirs.dense_shape.numpy().tolist() == [len(ours), int(lengths.max(initial=0))]
        assert_array(ours.values, theirs.values)
    elif isinstance(theirs, tf.SparseTensor):
        assert isinstance(ours, SparseArray)
        assert_array(ours.indices, theirs.indices)
        assert_array(ours.values, theirs.values)
        assert_array(ours.dense_shape, theirs.dense_shape)
    elif isinstance(theirs, tf.RaggedTensor):
        assert isinstance(ours, rk.Ragged), type(ours)
        assert_array(ours.row_splits, theirs.row_splits)
        assert_same(ours.values, theirs.values)
    else:
        assert_array(ours, theirs)


def assert_batch(ours: dict[str, Any], theirs: dict[str, Any]) -> None:
    assert set(ours) == set(theirs)
    for name, value in ours.items():
        assert_same(value, theirs[name])


def check_examples(
    records: list[bytes], specs: dict[str, Any], tf_override: dict[str, Any] | None = None
) -> dict[str, Any]:
    """parse_examples equals tf.io.parse_example on ``records`` (with the tf.io specs of ``specs``, or
    ``tf_override``'s); returns recordkit's batch."""
    ours = rk.parse_examples(records, specs)
    theirs_specs = tf_specs(specs) | (tf_override or {})
    assert_batch(dict(ours), tf.io.parse_example(tf.constant(records, tf.string), theirs_specs))
    return dict(ours)


def check_sequences(
    records: list[bytes], context: dict[str, Any], lists: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, Any]]:
    ours_context, ours_lists, _ = rk.parse_sequence_examples(records, context, lists)
    theirs_context, theirs_lists, _ = tf.io.parse_sequence_example(
        tf.constant(records, tf.string), tf_specs(context), tf_specs(lists)
    )
    assert_batch(ours_context, theirs_context)
    assert_batch(ours_lists, theirs_lists)
    return ours_context, ours_lists


def F(values: Any = None, kind: str | None = None) -> feature_pb2.Feature:
    return feature(values, kind)


# --------------------------------------------------------------------------------------------------------------
# TensorFlow's parsing_ops_test.py inputs (ParseExampleTest, ParseSingleExampleTest, ParseSequenceExampleTest)


def test_serialized_containing_sparse_feature():  # testSerializedContainingSparseFeature
    records = [
        example({"val": F([3.0, 4.0]), "idx": F([5, 10])}),
        example({"val": F([], "float"), "idx": F([], "int")}),
        example({"val": F()}),
        example({"val": F([1.0, 2.0, -1.0]), "idx": F([0, 9, 3])}),  # unsorted
    ]
    ours = check_examples(records, {"sp": Sparse(["idx"], "val", np.float32, [13])})
    assert ours["sp"].indices.tolist() == [[0, 5], [0, 10], [3, 0], [3, 3], [3, 9]]
    assert ours["sp"].values.tolist() == [3.0, 4.0, 1.0, -1.0, 2.0]
    assert ours["sp"].dense_shape.tolist() == [4, 13]


def test_serialized_containing_sparse_feature_reuse():  # testSerializedContainingSparseFeatureReuse
    records = [
        example({"val1": F([3.0, 4.0]), "val2": F([5.0, 6.0]), "idx": F([5, 10])}),
        example({"val1": F([], "float"), "idx": F([], "int")}),
    ]
    specs = {
        "sp1": Sparse("idx", "val1", np.float32, 13),
        "sp2": Sparse("idx", "val2", np.float32, 7, already_sorted=True),
    }
    ours = check_examples(records, specs)
    assert ours["sp2"].dense_shape.tolist() == [2, 7]


def test_serialized_containing_3d_sparse_feature():  # testSerializedContaining3DSparseFeature
    records = [
        example({"val": F([3.0, 4.0]), "idx0": F([5, 10]), "idx1": F([0, 2])}),
        example({"val": F([], "float"), "idx0": F([], "int"), "idx1": F([], "int")}),
        example({"val": F()}),
        example({"val": F([1.0, 2.0, -1.0]), "idx0": F([0, 9, 3]), "idx1": F([1, 0, 2])}),
    ]
    ours = check_examples(records, {"sp": Sparse(["idx0", "idx1"], "val", np.float32, [13, 3])})
    assert ours["sp"].indices.tolist() == [[0, 5, 0], [0, 10, 2], [3, 0, 1], [3, 3, 2], [3, 9, 0]]
    dense = ours["sp"].to_dense()
    assert dense.shape == (4, 13, 3)
    assert dense[3, 9, 0] == 2.0
    assert dense.sum() == 9.0


B_DEFAULT = np.array([[b"b00", b"b01", b"b02"], [b"b10", b"b11", b"b12"], [b"b20", b"b21", b"b22"]])


def test_serialized_containing_sparse_and_sparse_feature_and_dense_with_no_default():
    # testSerializedContainingSparseAndSparseFeatureAndDenseWithNoDefault
    records = [
        example({"c": F([3.0, 4.0]), "val": F([b"a", b"b"]), "idx": F([0, 3])}),
        example({"c": F([1.0, 2.0]), "val": F([b"c"]), "idx": F([7])}),
    ]
    specs = {
        "st_a": rk.VarLen(np.int64),
        "sp": Sparse("idx", "val", bytes, 13),
        "a": rk.FixedLen((1, 3), np.int64, default=[1, 2, 3]),
        "b": rk.FixedLen((3, 3), bytes, default=B_DEFAULT),
        "c": rk.FixedLen((2,), np.float32),
    }
    ours = check_examples(records, specs, {"st_a": tf.io.VarLenFeature(tf.int64)})
    assert ours["sp"].indices.tolist() == [[0, 0], [0, 3], [1, 7]]
    assert ours["sp"].values.tolist() == [b"a", b"b", b"c"]


def test_serialized_containing_sparse_and_sparse_feature_with_reuse():
    # testSerializedContainingSparseAndSparseFeatureWithReuse
    records = [
        example({"val": F([b"a", b"b"]), "idx": F([0, 3])}),
        example({"val": F([b"c", b"d"]), "idx": F([7, 1])}),
    ]
    specs = {"idx": rk.VarLen(np.int64), "sp": Sparse(["idx"], "val", bytes, [13])}
    ours = check_examples(records, specs, {"idx": tf.io.VarLenFeature(tf.int64)})
    assert ours["sp"].values.tolist() == [b"a", b"b", b"d", b"c"]
    assert ours["idx"].to_list() == [[0, 3], [7, 1]]


RAGGED_RECORDS = [
    # rt = [[3], [4, 5, 6]]
    {
        "rt_values": F([3.0, 4.0, 5.0, 6.0]),
        "rt_splits": F([0, 1, 4]),
        "rt_lengths": F([1, 3]),
        "rt_starts": F([0, 1]),
        "rt_limits": F([1, 4]),
        "rt_rowids": F([0, 1, 1, 1]),
    },
    # rt = []
    {
        "rt_values": F([], "float"),
        "rt_splits": F([0]),
        "rt_lengths": F([], "int"),
        "rt_starts": F([], "int"),
        "rt_limits": F([], "int"),
        "rt_rowids": F([], "int"),
    },
    # rt = [], features without a list
    {
        "rt_values": F(),
        "rt_splits": F([0]),
        "rt_lengths": F(),
        "rt_starts": F(),
        "rt_limits": F(),
        "rt_rowids": F(),
    },
    # rt = [[1.0, 2.0, -1.0], [], [8.0, 9.0], [5.0]]
    {
        "rt_values": F([1.0, 2.0, -1.0, 8.0, 9.0, 5.0]),
        "rt_splits": F([0, 3, 3, 5, 6]),
        "rt_lengths": F([3, 0, 2, 1]),
        "rt_starts": F([0, 3, 3, 5]),
        "rt_limits": F([3, 3, 5, 6]),
        "rt_rowids": F([0, 0, 0, 2, 2, 3]),
    },
]


def ragged_specs(splits_dtype: Any) -> dict[str, Partitioned]:
    def spec(*parts: Any) -> Partitioned:
        return Partitioned(
            np.float32, parts, value_key="rt_values", row_splits_dtype=splits_dtype, validate=True
        )

    return {
        "rt1": spec(RowSplits("rt_splits")),
        "rt2": spec(RowLengths("rt_lengths")),
        "rt3": spec(RowStarts("rt_starts")),
        "rt4": spec(RowLimits("rt_limits")),
        "rt5": spec(ValueRowIds("rt_rowids")),
        "uniform1": spec(UniformRowLength(2)),
        "uniform2": spec(UniformRowLength(2), RowSplits("rt_splits")),
    }


def test_serialized_containing_ragged_feature_with_no_partitions():
    # testSerializedContainingRaggedFeatureWithNoPartitions (ParseExampleTest), also 64 times over
    records = [
        example({"rt_c": F([3.0, 4.0])}),
        example({"rt_c": F([], "float")}),
        example({"rt_d": F()}),
        example({"rt_c": F([1.0, 2.0, -1.0]), "rt_d": F([b"hi"])}),
    ]
    specs = {
        "rt_c": Partitioned(np.float32, row_splits_dtype=np.int32),
        "rt_d": Partitioned(bytes, row_splits_dtype=np.int64),
    }
    ours = check_examples(records, specs)
    assert ours["rt_c"].to_list() == [[3.0, 4.0], [], [], [1.0, 2.0, -1.0]]
    assert ours["rt_c"].row_splits.dtype == np.int32
    check_examples(records * 64, specs)


@pytest.mark.parametrize("splits_dtype", [np.int32, np.int64])
def test_serialized_containing_ragged_feature(splits_dtype):
    # testSerializedContainingRaggedFeature
    records = [example(features) for features in RAGGED_RECORDS]
    ours = check_examples(records, ragged_specs(splits_dtype))
    expected = [[[3], [4, 5, 6]], [], [], [[1, 2, -1], [], [8, 9], [5]]]
    for name in ("rt1", "rt2", "rt3", "rt4", "rt5"):
        assert ours[name].to_list() == expected
    assert ours["uniform1"].to_list() == [[[3, 4], [5, 6]], [], [], [[1, 2], [-1, 8], [9, 5]]]
    assert ours["uniform1"].values.shape == (5, 2)  # the uniform length is a fixed dimension
    assert ours["uniform2"].to_list() == [
        [[[3], [4, 5, 6]]],
        [],
        [],
        [[[1, 2, -1], []], [[8, 9], [5]]],
    ]


NESTED_RECORDS = [
    # rt = [[[[1]], [[2, 3], [4]]], [[], [[5, 6, 7]]]]
    {
        "rt_values": F([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]),
        "lengths_axis2": F([1, 2, 0, 1]),
        "lengths_axis3": F([1, 2, 1, 3]),
        "splits_axis3": F([0, 1, 3, 4, 7]),
    },
    # rt = [[[[1, 2, 3], [4]], [[5], [6], [7, 8]]]]
    {
        "rt_values": F([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]),
        "lengths_axis2": F([2, 3]),
        "lengths_axis3": F([3, 1, 1, 1, 2]),
        "splits_axis3": F([0, 3, 4, 5, 6, 8]),
    },
]


def test_serialized_containing_nested_ragged_feature():  # testSerializedContainingNestedRaggedFeature
    records = [example(features) for features in NESTED_RECORDS]
    parts = [UniformRowLength(2), RowLengths("lengths_axis2"), RowSplits("splits_axis3")]
    specs = {"rt1": Partitioned(np.float32, parts, value_key="rt_values")}
    ours = check_examples(records, specs)
    assert ours["rt1"].to_list() == [
        [[[[1]], [[2, 3], [4]]], [[], [[5, 6, 7]]]],
        [[[[1, 2, 3], [4]], [[5], [6], [7, 8]]]],
    ]
    # the same with lengths instead of splits innermost
    parts[2] = RowLengths("lengths_axis3")
    check_examples(records, {"rt1": Partitioned(np.float32, parts, value_key="rt_values")})


def test_serialized_containing_misaligned_ragged_feature_row_lengths():
    # testSerializedContainingMisalignedRaggedFeatureRowLengths: TensorFlow's test expects "values and
    # partitions are not aligned"; TensorFlow 2.21 checks the batch as a whole only, and gives record 1 the
    # row lengths of record 0. recordkit checks each record.
    records = [
        example({"rt_values": F([], "float"), "rt_lengths": F([5])}),
        example({"rt_values": F([1.0, 2.0, 3.0, 4.0, 5.0]), "rt_lengths": F([], "int")}),
    ]
    spec = Partitioned(np.float32, [RowLengths("rt_lengths")], value_key="rt_values", validate=True)
    with pytest.raises(rk.DecodeError, match=r"record 0: feature 'rt'.*rt_lengths") as info:
        rk.parse_examples(records, {"rt": spec})
    assert info.value.index == 0
    assert info.value.feature == "rt"


def test_single_example_with_sparse_and_sparse_feature_and_dense():
    # testSingleExampleWithSparseAndSparseFeatureAndDense (ParseSingleExampleTest)
    record = example(
        {
            "c": F([3.0, 4.0]),
            "d": F([0.0, 1.0]),
            "val": F([b"a", b"b"]),
            "idx": F([0, 3]),
            "st_a": F([3.0, 4.0]),
        }
    )
    specs = {
        "st_a": rk.VarLen(np.float32),
        "sp": Sparse(["idx"], "val", bytes, [13]),
        "a": rk.FixedLen((1, 3), np.int64, default=[1, 2, 3]),
        "b": rk.FixedLen((3, 3), bytes, default=B_DEFAULT),
        "c": rk.FixedLen(2, np.float32),
        "d": rk.FixedLenSequence((), np.float32),
    }
    ours = rk.parse_example(record, specs)
    theirs = tf.io.parse_single_example(record, tf_specs(specs))
    assert_batch(ours, theirs)
    assert ours["sp"].indices.tolist() == [[0], [3]]
    assert ours["sp"].to_dense().tolist()[:4] == [b"a", b"", b"", b"b"]


def test_single_example_with_all_feature_types():  # testSingleExampleWithAllFeatureTypes
    record = example(
        {
            "c": F([3.0, 4.0]),
            "d": F([0.0, 1.0]),
            "val": F([b"a", b"b"]),
            "idx": F([0, 3]),
            "st_a": F([3.0, 4.0]),
            "rt_1d": F([3.0, 4.0]),
            "rt_values": F([5.0, 6.0, 7.0]),
            "rt_splits": F([0, 1, 1, 3]),
            "rt_lengths": F([1, 0, 2]),
            "rt_starts": F([0, 1, 1]),
            "rt_limits": F([1, 1, 3]),
            "rt_rowids": F([0, 2, 2]),
            "rt_splits2": F([0, 2, 3]),
        }
    )

    def rt(*parts: Any) -> Partitioned:
        return Partitioned(np.float32, parts, value_key="rt_values")

    specs = {
        "st_a": rk.VarLen(np.float32),
        "sp": Sparse(["idx"], "val", bytes, [13]),
        "a": rk.FixedLen((1, 3), np.int64, default=[1, 2, 3]),
        "b": rk.FixedLen((3, 3), bytes, default=B_DEFAULT),
        "c": rk.FixedLen(2, np.float32),
        "d": rk.FixedLenSequence((), np.float32),
        "rt_1d": Partitioned(np.float32),
        "rt_2d_with_splits": rt(RowSplits("rt_splits")),
        "rt_2d_with_lengths": rt(RowLengths("rt_lengths")),
        "rt_2d_with_starts": rt(RowStarts("rt_starts")),
        "rt_2d_with_limits": rt(RowLimits("rt_limits")),
        "rt_2d_with_rowids": rt(ValueRowIds("rt_rowids")),
        "rt_2d_with_uniform_row_length": rt(UniformRowLength(1)),
        "rt_3d": rt(RowSplits("rt_splits2"), RowSplits("rt_splits")),
        "rt_3d_with_uniform_row_length": rt(UniformRowLength(1), RowSplits("rt_splits")),
    }
    ours = rk.parse_example(record, specs)
    theirs = tf.io.parse_single_example(record, tf_specs(specs))
    assert_batch(ours, theirs)
    assert ours["rt_3d"].to_list() == [[[5], []], [[6, 7]]]
    assert ours["rt_2d_with_uniform_row_length"].tolist() == [[5], [6], [7]]


def test_sequence_serialized_containing_ragged_feature_with_no_partitions():
    # testSerializedContainingRaggedFeatureWithNoPartitions (ParseSequenceExampleTest), also 64 times over
    records = [
        sequence_example({"a": F([3.0, 4.0])}, {"b": [F([5.0]), F([3.0])], "c": [F([6, 7, 8, 9])]}),
        sequence_example({"a": F([9.0])}, {"b": [], "c": [F([], "int"), F([1, 2, 3])]}),
        sequence_example(None, {"b": [F([1.0]), F([1.0, 2.0]), F([1.0, 2.0, 3.0])]}),
        sequence_example({"a": F()}, {"b": [F()], "c": [F([3, 3, 3])]}),
    ]
    context = {"a": Partitioned(np.float32, row_splits_dtype=np.int32)}
    lists = {
        "b": Partitioned(np.float32, row_splits_dtype=np.int32),
        "c": Partitioned(np.int64, row_splits_dtype=np.int64),
    }
    _, ours_lists = check_sequences(records, context, lists)
    assert ours_lists["b"].to_list() == [[[5], [3]], [], [[1], [1, 2], [1, 2, 3]], [[]]]
    check_sequences(records * 64, context, lists)


def test_sequence_serialized_containing_nested_ragged_feature():
    # testSerializedContainingNestedRaggedFeature (ParseSequenceExampleTest)
    records = [
        sequence_example(
            {
                "a_values": F([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]),
                "a_lengths_axis2": F([1, 2, 0, 1]),
                "a_lengths_axis3": F([1, 2, 1, 3]),
                "a_splits_axis3": F([0, 1, 3, 4, 7]),
            },
            {
                "b_values": [F([1.0, 2.0, 3.0, 4.0]), F([2.0, 4.0, 6.0])],
                "b_splits": [F([0, 1, 4]), F([0, 2, 3])],
            },
        ),
        sequence_example(),
        sequence_example(
            {
                "a_values": F([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]),
                "a_lengths_axis2": F([2, 3]),
                "a_lengths_axis3": F([3, 1, 1, 1, 2]),
                "a_splits_axis3": F([0, 3, 4, 5, 6, 8]),
            },
            {
                "b_values": [F([9.0, 8.0, 7.0, 6.0, 5.0]), F([4.0, 3.0, 2.0, 1.0]), F([0.0])],
                "b_splits": [F([0, 1, 4, 5]), F([0, 4]), F([0, 1])],
            },
        ),
    ]
    context = {
        "a": Partitioned(
            np.float32,
            [UniformRowLength(2), RowLengths("a_lengths_axis2"), RowSplits("a_splits_axis3")],
            value_key="a_values",
        )
    }
    lists = {
        "b": Partitioned(
            np.float32, [RowSplits("b_splits")], value_key="b_values", row_splits_dtype=np.int32
        ),
        "c": Partitioned(
            np.float32, [UniformRowLength(1)], value_key="b_values", row_splits_dtype=np.int32
        ),
    }
    ours_context, ours_lists = check_sequences(records, context, lists)
    assert ours_context["a"].to_list()[1] == []
    assert ours_lists["b"].to_list() == [
        [[[1], [2, 3, 4]], [[2, 4], [6]]],
        [],
        [[[9], [8, 7, 6], [5]], [[4, 3, 2, 1]], [[0]]],
    ]
    assert ours_lists["c"].values.values.shape == (17, 1)
    # one record: parse_sequence_example drops the batch level, as parse_single_sequence_example
    single_context, single_lists = rk.parse_sequence_example(records[0], context, lists)
    theirs_context, theirs_lists = tf.io.parse_single_sequence_example(
        records[0], tf_specs(context), tf_specs(lists)
    )
    assert_batch(single_context, theirs_context)
    assert_batch(single_lists, theirs_lists)


def test_sequence_serialized_containing_misaligned_nested_ragged_feature():
    # testSerializedContainingMisalignedNestedRaggedFeature: 2 value steps, 1 splits step
    record = sequence_example(
        None,
        {"b_values": [F([1.0, 2.0, 3.0, 4.0]), F([2.0, 4.0, 6.0])], "b_splits": [F([0, 1, 4])]},
    )
    lists = {
        "b": Partitioned(np.float32, [RowSplits("b_splits")], value_key="b_values", validate=True)
    }
    with pytest.raises(tf.errors.InvalidArgumentError, match="not aligned"):
        tf.io.parse_sequence_example(tf.constant([record]), sequence_features=tf_specs(lists))
    with pytest.raises(
        rk.DecodeError, match="record 1: feature 'b': values and partitions"
    ) as info:
        rk.parse_sequence_examples([b"", record], sequence_features=lists)
    assert info.value.index == 1


# --------------------------------------------------------------------------------------------------------------
# Generated batches


PARTITION_KINDS = (RowSplits, RowLengths, RowStarts, RowLimits, ValueRowIds, UniformRowLength)


def random_partitions(rng: random.Random) -> list[Any]:
    parts: list[Any] = []
    for level in range(rng.randint(0, 3)):
        kind = rng.choice(PARTITION_KINDS)
        parts.append(
            UniformRowLength(rng.randint(1, 3)) if kind is UniformRowLength else kind(f"p{level}")
        )
    return parts


def encode_partition(kind: type, lengths: list[int]) -> list[int]:
    ends = np.cumsum(lengths, dtype=np.int64).tolist()
    if kind is RowSplits:
        return [0, *ends]
    if kind is RowLengths:
        return list(lengths)
    if kind is RowStarts:
        return [e - n for e, n in zip(ends, lengths, strict=True)]
    if kind is RowLimits:
        return ends
    return [row for row, n in enumerate(lengths) for _ in range(n)]  # ValueRowIds


def random_values(rng: random.Random, kind: str, count: int) -> list[Any]:
    if kind == "float":
        return [float(np.float32(rng.uniform(-9, 9))) for _ in range(count)]
    if kind == "int":
        return [rng.randint(-(2**40), 2**40) for _ in range(count)]
    return [bytes(rng.randbytes(rng.randint(0, 3))) for _ in range(count)]


def random_ragged_features(
    rng: random.Random, parts: list[Any], kind: str, prefix: str = ""
) -> dict[str, feature_pb2.Feature]:
    """The features of one record (or one time step) holding a random value cut by ``parts``."""
    items = rng.choice([0, 0, 1, 2, 3, 5])
    feats: dict[str, feature_pb2.Feature] = {}
    for part in parts:
        if isinstance(part, UniformRowLength):
            items *= part.length
            continue
        lengths = [rng.choice([0, 1, 1, 2, 3]) for _ in range(items)]
        if isinstance(part, ValueRowIds) and items:
            lengths[-1] = max(lengths[-1], 1)  # row ids cannot say that the last rows are empty
        if items or rng.random() < 0.7:  # an empty partition is sometimes missing
            feats[prefix + part.key] = F(encode_partition(type(part), lengths), "int")
        items = sum(lengths)
    if items or rng.random() < 0.7:
        feats[prefix + "values"] = F(random_values(rng, kind, items), kind)
    return feats


KINDS = {"float": np.float32, "int": np.int64, "bytes": bytes}


def random_ragged_case(seed: int) -> tuple[list[bytes], dict[str, Any]]:
    rng = random.Random(seed)
    specs: dict[str, Any] = {}
    features: list[dict[str, feature_pb2.Feature]] = [{} for _ in range(rng.randint(0, 6))]
    for f in range(rng.randint(1, 3)):
        parts = [
            p if isinstance(p, UniformRowLength) else type(p)(f"f{f}_{p.key}")
            for p in random_partitions(rng)
        ]
        kind = rng.choice(list(KINDS))
        splits = rng.choice([np.int32, np.int64])
        specs[f"f{f}"] = Partitioned(
            KINDS[kind], parts, value_key=f"f{f}_values", row_splits_dtype=splits
        )
        for record in features:
            record.update(random_ragged_features(rng, parts, kind, prefix=""))
            if "values" in record:
                record[f"f{f}_values"] = record.pop("values")
    return [example(record) for record in features], specs


def damage(
    rng: random.Random, records: list[bytes], specs: dict[str, Any]
) -> tuple[list[bytes], int]:
    """One int64 partition (or value) list of one record changed: a value moved, added or removed."""
    i = rng.randrange(len(records))
    ex = example_pb2.Example.FromString(records[i])
    names = sorted(ex.features.feature)
    if not names:
        return records, -1
    name = rng.choice(names)
    f = ex.features.feature[name]
    values = list(f.int64_list.value) if f.HasField("int64_list") else None
    if values is None:  # a values list: one more value
        lst = f.float_list if f.HasField("float_list") else f.bytes_list
        if f.HasField("float_list"):
            lst.value.append(1.0)
        elif f.HasField("bytes_list"):
            lst.value.append(b"x")
        else:
            return records, -1
    else:
        how = rng.randrange(4)
        if how == 0 or not values:
            values.append(rng.randint(-2, 4))
        elif how == 1:
            del values[rng.randrange(len(values))]
        else:
            at = rng.randrange(len(values))
            values[at] += rng.choice([-2, -1, 1, 2])
        f.ClearField("int64_list")
        f.int64_list.SetInParent()
        f.int64_list.value.extend(values)
    out = list(records)
    out[i] = ex.SerializeToString()
    return out, i


def run_ragged_sweep(seeds: range) -> None:
    for seed in seeds:
        records, specs = random_ragged_case(seed)
        check_examples(records, specs)
        if not records:
            continue
        bad, i = damage(random.Random(seed), records, specs)
        if i < 0:
            continue
        try:
            theirs = tf.io.parse_example(tf.constant(bad, tf.string), tf_specs(specs))
        except (tf.errors.InvalidArgumentError, ValueError):
            theirs = None
        if theirs is not None:
            try:
                ours = rk.parse_examples(bad, specs)
            except rk.DecodeError as exc:  # stricter than TensorFlow (docs/parsing.md)
                assert exc.index == i, (seed, exc)  # noqa: PT017 - either outcome may be right
                continue
            assert_batch(dict(ours), theirs)
            continue
        with pytest.raises(rk.DecodeError) as info:  # TensorFlow refuses: so must recordkit
            rk.parse_examples(bad, specs)
        assert info.value.index == i, seed


def test_generated_ragged_partitions_match_tensorflow():
    run_ragged_sweep(range(40))


@pytest.mark.slow
def test_generated_ragged_partitions_match_tensorflow_sweep():
    run_ragged_sweep(range(40, 440))


def random_sequence_case(seed: int) -> tuple[list[bytes], dict[str, Any], dict[str, Any]]:
    rng = random.Random(seed)
    context: dict[str, Any] = {}
    lists: dict[str, Any] = {}
    n = rng.randint(0, 5)
    ctx_feats: list[dict[str, Any]] = [{} for _ in range(n)]
    list_feats: list[dict[str, list[Any]]] = [{} for _ in range(n)]
    for f in range(rng.randint(1, 2)):
        kind = rng.choice(list(KINDS))
        parts = [
            p if isinstance(p, UniformRowLength) else type(p)(f"c{f}_{p.key}")
            for p in random_partitions(rng)
        ]
        context[f"c{f}"] = Partitioned(KINDS[kind], parts, value_key=f"c{f}_values")
        for record in ctx_feats:
            feats = random_ragged_features(rng, parts, kind)
            if "values" in feats:
                feats[f"c{f}_values"] = feats.pop("values")
            record.update(feats)
        parts = [
            p if isinstance(p, UniformRowLength) else type(p)(f"s{f}_{p.key}")
            for p in random_partitions(rng)
        ]
        lists[f"s{f}"] = Partitioned(KINDS[kind], parts, value_key=f"s{f}_values")
        keys = [f"s{f}_values"] + [p.key for p in parts if not isinstance(p, UniformRowLength)]
        for record in list_feats:
            if rng.random() < 0.2:
                continue  # no feature lists: no steps
            steps = [random_ragged_features(rng, parts, kind) for _ in range(rng.randint(0, 3))]
            for key in keys:
                short = "values" if key.endswith("_values") else key
                record[key] = [step.get(short, F()) for step in steps]
    records = [sequence_example(c, s) for c, s in zip(ctx_feats, list_feats, strict=True)]
    return records, context, lists


def test_generated_sequence_partitions_match_tensorflow():
    for seed in range(25):
        records, context, lists = random_sequence_case(seed)
        check_sequences(records, context, lists)


def random_sparse_case(seed: int) -> tuple[list[bytes], dict[str, Any]]:
    rng = random.Random(seed)
    ndim = rng.randint(1, 3)
    size = [rng.randint(1, 6) for _ in range(ndim)]
    kind = rng.choice(list(KINDS))
    sorted_ = rng.random() < 0.5
    records = []
    for _ in range(rng.randint(0, 6)):
        count = rng.choice([0, 0, 1, 2, 4])
        coords = [[rng.randrange(s) for _ in range(count)] for s in size]
        if sorted_:
            entries = sorted(zip(*coords, strict=True)) if count else []
            coords = (
                [list(c) for c in zip(*entries, strict=True)] if entries else [[] for _ in size]
            )
        feats = {f"i{d}": F(coords[d], "int") for d in range(ndim) if count or rng.random() < 0.7}
        if count or rng.random() < 0.7:
            feats["v"] = F(random_values(rng, kind, count), kind)
        records.append(example(feats))
    keys = [f"i{d}" for d in range(ndim)]
    spec = Sparse(keys, "v", KINDS[kind], size, already_sorted=sorted_)
    return records, {"sp": spec, "also": rk.VarLen(np.int64)}


def test_generated_sparse_match_tensorflow():
    for seed in range(30):
        records, specs = random_sparse_case(seed)
        ours = check_examples(records, specs)["sp"]
        theirs = tf.io.parse_example(tf.constant(records, tf.string), tf_specs(specs))["sp"]
        try:
            expected = tf.sparse.to_dense(theirs).numpy()
        except tf.errors.InvalidArgumentError:  # a repeated index
            with pytest.raises(ValueError, match="share an index"):
                ours.to_dense()
            continue
        assert ours.to_dense().tolist() == expected.tolist()


# --------------------------------------------------------------------------------------------------------------
# Errors


def test_sparse_errors_name_the_record():
    spec = {"sp": Sparse("idx", "val", np.float32, 5)}
    good = example({"val": F([1.0]), "idx": F([2])})
    # fewer indices than values: TensorFlow refuses the batch, recordkit names the record
    short = example({"val": F([1.0, 2.0]), "idx": F([1])})
    with pytest.raises((ValueError, tf.errors.InvalidArgumentError)):
        tf.io.parse_example(tf.constant([good, short]), tf_specs(spec))
    with pytest.raises(
        rk.DecodeError, match="record 1: feature 'sp': 2 values in 'val' but 1"
    ) as info:
        rk.parse_examples([good, short], spec)
    assert info.value.index == 1
    assert info.value.feature == "sp"
    # indices of the wrong kind
    floats = example({"val": F([1.0]), "idx": F([1.0])})
    with pytest.raises(tf.errors.InvalidArgumentError):
        tf.io.parse_example(tf.constant([floats]), tf_specs(spec))
    with pytest.raises(rk.DecodeError, match="record 0: feature 'idx': data type"):
        rk.parse_examples([floats], spec)
    # an index outside the size is kept, as TensorFlow keeps it; to_dense refuses it
    for index in (5, -1):
        outside = example({"val": F([1.0]), "idx": F([index])})
        sp = check_examples([good, good, outside], spec)["sp"]
        assert sp.indices.tolist()[-1] == [2, index]
        with pytest.raises(ValueError, match=f"index \\[2, {index}\\] is outside"):
            sp.to_dense()


def test_sparse_to_dense_refuses_duplicates():
    record = example({"val": F([1.0, 2.0]), "idx": F([1, 1])})
    sp = rk.parse_examples([record], {"sp": Sparse("idx", "val", np.float32, 3)})["sp"]
    assert sp.indices.tolist() == [[0, 1], [0, 1]]
    with pytest.raises(ValueError, match="share an index"):
        sp.to_dense()


@pytest.mark.parametrize(
    ("part", "values", "partition"),
    [
        (RowSplits("p"), [1.0, 2.0], [0, 2, 1, 2]),  # decreasing
        (RowSplits("p"), [1.0, 2.0], [0, 1]),  # ends short
        (RowSplits("p"), [1.0, 2.0], []),  # empty with values
        (RowLengths("p"), [1.0, 2.0, 3.0], [1]),  # sum short
        (RowLengths("p"), [1.0, 2.0, 3.0], [4, -1]),  # negative
        (RowStarts("p"), [1.0, 2.0, 3.0], [1, 2]),  # not from 0
        (RowStarts("p"), [1.0, 2.0, 3.0], [0, 4]),  # past the end
        (RowLimits("p"), [1.0, 2.0, 3.0], [1, 2]),  # ends short
        (ValueRowIds("p"), [1.0, 2.0], [1, 0]),  # decreasing
        (ValueRowIds("p"), [1.0, 2.0], [-1, 0]),  # negative
        (ValueRowIds("p"), [1.0, 2.0], [0]),  # one id short
        (UniformRowLength(2), [1.0, 2.0, 3.0], None),  # not whole rows
    ],
)
def test_inconsistent_partitions_raise_where_tensorflow_does(part, values, partition):
    features = {"v": F(values)}
    if partition is not None:
        features["p"] = F(partition, "int")
    records = [example({"v": F([], "float")}), example(features)]
    spec = {"rt": Partitioned(np.float32, [part], value_key="v", validate=True)}
    with pytest.raises((tf.errors.InvalidArgumentError, ValueError)):
        tf.io.parse_example(tf.constant(records[1:]), tf_specs(spec))
    with pytest.raises(rk.DecodeError, match="record 1: feature 'rt'") as info:
        rk.parse_examples(records, spec)
    assert info.value.index == 1


def test_partitioned_to_arrow_matches_numpy():
    records = [example(features) for features in RAGGED_RECORDS]
    specs = ragged_specs(np.int64)
    table = rk.parse_examples(records, specs, to="arrow")
    batch = rk.parse_examples(records, specs)
    for name in specs:
        assert table.column(name).to_pylist() == batch[name].to_list()
    with pytest.raises(TypeError, match="Sparse feature parses to numpy only"):
        rk.parse_examples(
            records, {"sp": Sparse("rt_rowids", "rt_values", np.float32, 4)}, to="arrow"
        )
