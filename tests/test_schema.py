"""The schema inferred from sample records, and the specs made from it."""

from __future__ import annotations

import numpy as np
import pytest

import recordkit as rk
from recordkit.decode.schema import FeatureStats, Schema, infer_spec

RECORDS = [
    rk.encode_example(
        {"id": [i], "vec": np.arange(3, dtype=np.float32) + i, "tags": [b"t"] * i}
        | ({"opt": [10 * i]} if i % 2 else {})
    )
    for i in range(4)
]
HAND_WRITTEN = {
    "id": rk.FixedLen((), "int64"),
    "vec": rk.FixedLen((3,), "float32"),
    "tags": rk.VarLen("bytes"),
    "opt": rk.VarLen("int64"),
}


def test_statistics_of_the_sample():
    schema = Schema.of([*RECORDS, b"\xff"])
    assert (schema.records, schema.undecodable) == (4, 1)
    assert schema.features["tags"] == FeatureStats({"bytes_list"}, 4, 0, 3)
    assert schema.features["opt"] == FeatureStats({"int64_list"}, 2, 1, 1)
    merged = Schema.merged([schema, Schema.of(RECORDS[:1])])
    assert (merged.records, merged.features["id"].present) == (5, 5)


def test_inferred_spec_parses_as_the_hand_written_one():
    inferred = infer_spec(Schema.of(RECORDS))
    assert inferred == HAND_WRITTEN
    ours, theirs = rk.parse_examples(RECORDS, inferred), rk.parse_examples(RECORDS, HAND_WRITTEN)
    for name in HAND_WRITTEN:
        assert str(ours[name]) == str(theirs[name])
    np.testing.assert_array_equal(ours["vec"], theirs["vec"])


def test_nullable_specs_and_disagreeing_kinds():
    assert infer_spec(Schema.of(RECORDS), nullable=True) == {
        **HAND_WRITTEN,
        "vec": rk.VarLen("float32"),
        "opt": rk.FixedLen((), "int64"),
    }
    mixed = [rk.encode_example({"x": [1]}), rk.encode_example({"x": [1.5]})]
    with pytest.raises(ValueError, match="float_list and int64_list"):
        infer_spec(Schema.of(mixed))


def test_ofrecords():
    records = [rk.encode_ofrecord({"x": np.array([i, i], np.int32)}) for i in range(2)]
    assert infer_spec(Schema.of(records, "ofrecord")) == {"x": rk.FixedLen((2,), "int32")}


def test_inferred_spec_parses_as_tensorflow_does():
    tf = pytest.importorskip("tensorflow")
    ours = rk.parse_examples(RECORDS, infer_spec(Schema.of(RECORDS)))
    tf_spec = {
        "id": tf.io.FixedLenFeature([], tf.int64),
        "vec": tf.io.FixedLenFeature([3], tf.float32),
        "tags": tf.io.VarLenFeature(tf.string),
        "opt": tf.io.VarLenFeature(tf.int64),
    }
    theirs = tf.io.parse_example(tf.constant(RECORDS), tf_spec)
    for name in ("id", "vec"):
        np.testing.assert_array_equal(ours[name], theirs[name].numpy())
    for name in ("tags", "opt"):
        dense = tf.sparse.to_dense(theirs[name]).numpy()
        lengths = tf.math.bincount(
            tf.cast(theirs[name].indices[:, 0], tf.int32), minlength=len(RECORDS)
        ).numpy()
        expected = [list(row[:n]) for row, n in zip(dense, lengths, strict=True)]
        assert [list(row) for row in ours[name].to_list()] == expected
