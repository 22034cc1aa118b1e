"""parse_examples / parse_sequence_examples give exactly what TensorFlow's parsing ops give."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import recordkit as rk
from recordkit._proto.tensorflow import example_pb2
from tests._tf_arrays import assert_same

tf = pytest.importorskip("tensorflow")

pytestmark = pytest.mark.interop

interop_settings = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def read_golden(golden_dir, name: str) -> list[bytes]:
    with rk.open(golden_dir / "tfrecord" / name) as reader:
        return list(reader)


def assert_same_ragged(ours: rk.Ragged, theirs: Any) -> None:
    """A recordkit Ragged equals a tf.RaggedTensor (values and every level of row splits)."""
    assert isinstance(ours, rk.Ragged)
    assert ours.row_splits.tolist() == theirs.row_splits.numpy().tolist()
    if isinstance(ours.values, rk.Ragged):
        assert_same_ragged(ours.values, theirs.values)
    else:
        assert_same(ours.values, theirs.values)


def assert_same_sparse(ours: rk.Ragged, theirs: Any) -> None:
    """A recordkit Ragged equals a VarLenFeature's SparseTensor of shape (batch, longest)."""
    indices = theirs.indices.numpy()
    rows = len(ours)
    assert theirs.dense_shape.numpy().tolist() == [rows, int(ours.row_lengths().max(initial=0))]
    lengths = np.bincount(indices[:, 0], minlength=rows)
    assert ours.row_lengths().tolist() == lengths.tolist()
    assert indices[:, 1].tolist() == [j for n in lengths for j in range(n)]
    assert_same(ours.values, theirs.values)


EXAMPLE_SPECS = {
    "ints": (rk.VarLen(np.int64), tf.io.RaggedFeature(tf.int64)),
    "floats": (rk.VarLen(np.float32), tf.io.RaggedFeature(tf.float32)),
    "bytes": (rk.VarLen(bytes), tf.io.RaggedFeature(tf.string)),
    "label": (rk.FixedLen((), np.int64), tf.io.FixedLenFeature([], tf.int64)),
    "empty_feature": (
        rk.FixedLen((2,), np.float32, default=[0.5, -0.0]),
        tf.io.FixedLenFeature([2], tf.float32, default_value=[0.5, -0.0]),
    ),
    "absent": (
        rk.FixedLen((), bytes, default=b"none"),
        tf.io.FixedLenFeature([], tf.string, default_value=b"none"),
    ),
}


def rename(specs: dict[str, tuple[Any, Any]], which: int) -> dict[str, Any]:
    return {name: spec[which] for name, spec in specs.items()}


def test_golden_examples_match_tensorflow(golden_dir):
    records = read_golden(golden_dir, "examples.tfrecord")
    ours = rk.parse_examples(records, rename(EXAMPLE_SPECS, 0))
    theirs = tf.io.parse_example(tf.constant(records), rename(EXAMPLE_SPECS, 1))
    for name in ("ints", "floats", "bytes"):
        assert_same_ragged(ours[name], theirs[name])  # type: ignore[arg-type]
    for name in ("label", "empty_feature", "absent"):
        assert_same(ours[name], theirs[name])  # type: ignore[arg-type]
    column = rk.parse_examples(records, {"label": rk.FixedLen((1, 1), np.int64)})["label"]
    tf_column = tf.io.parse_example(
        tf.constant(records), {"label": tf.io.FixedLenFeature([1, 1], tf.int64)}
    )
    assert_same(column, tf_column["label"])  # type: ignore[arg-type]
    sparse = tf.io.parse_example(tf.constant(records), {"ints": tf.io.VarLenFeature(tf.int64)})
    assert_same_sparse(ours["ints"], sparse["ints"])  # type: ignore[arg-type]


def test_golden_examples_one_by_one_match_parse_single_example(golden_dir):
    records = read_golden(golden_dir, "examples.tfrecord")[:10]
    specs = EXAMPLE_SPECS
    for record in records:
        ours = rk.parse_example(record, rename(specs, 0))
        theirs = tf.io.parse_single_example(record, rename(specs, 1))
        for name in specs:
            expected = theirs[name].numpy()
            if isinstance(expected, bytes):  # a scalar string: both sides give a plain bytes object
                assert ours[name] == expected
                continue
            assert_same(np.asarray(ours[name]), expected)


SEQUENCE_CONTEXT = {
    "id": (rk.FixedLen((), bytes), tf.io.FixedLenFeature([], tf.string)),
    "length": (rk.VarLen(np.int64), tf.io.RaggedFeature(tf.int64)),
}
SEQUENCE_LISTS = {
    "frames": (
        rk.FixedLenSequence((2,), np.float32),
        tf.io.FixedLenSequenceFeature([2], tf.float32),
    ),
    "tokens": (rk.VarLen(np.int64), tf.io.RaggedFeature(tf.int64)),
}


def test_golden_sequence_examples_match_tensorflow(golden_dir):
    records = read_golden(golden_dir, "sequence_examples.tfrecord")
    context, sequence, lengths = rk.parse_sequence_examples(
        records, rename(SEQUENCE_CONTEXT, 0), rename(SEQUENCE_LISTS, 0)
    )
    tf_context, tf_sequence, tf_lengths = tf.io.parse_sequence_example(
        tf.constant(records), rename(SEQUENCE_CONTEXT, 1), rename(SEQUENCE_LISTS, 1)
    )
    assert_same(context["id"], tf_context["id"])
    assert_same_ragged(context["length"], tf_context["length"])
    assert_same(sequence["frames"], tf_sequence["frames"])
    assert_same_ragged(sequence["tokens"], tf_sequence["tokens"])
    assert set(lengths) == set(tf_lengths) == {"frames"}
    assert_same(lengths["frames"], tf_lengths["frames"])
    for record in records[:4]:
        single_context, single_sequence = rk.parse_sequence_example(
            record, rename(SEQUENCE_CONTEXT, 0), {"frames": SEQUENCE_LISTS["frames"][0]}
        )
        tf_single = tf.io.parse_single_sequence_example(
            record, rename(SEQUENCE_CONTEXT, 1), {"frames": SEQUENCE_LISTS["frames"][1]}
        )
        assert_same(single_sequence["frames"], tf_single[1]["frames"])
        assert single_context["id"] == tf_single[0]["id"].numpy()


maybe = st.one_of(st.none(), st.just("no kind"))
features = st.fixed_dictionaries(
    {},
    optional={
        "fixed": st.lists(st.integers(-(2**63), 2**63 - 1), min_size=3, max_size=3) | maybe,
        "image": st.lists(st.floats(width=32, allow_nan=False), min_size=4, max_size=4) | maybe,
        "ints": st.lists(st.integers(-(2**63), 2**63 - 1), max_size=6) | maybe,
        "floats": st.lists(st.floats(width=32, allow_nan=False), max_size=6) | maybe,
        "words": st.lists(st.binary(max_size=6), max_size=4) | maybe,
    },
)
KIND = {
    "fixed": "int64_list",
    "ints": "int64_list",
    "image": "float_list",
    "floats": "float_list",
    "words": "bytes_list",
}


def serialize(values: dict[str, Any]) -> bytes:
    ex = example_pb2.Example()
    for name, value in values.items():
        if value is None:
            continue
        feature = ex.features.feature[name]
        if value == "no kind":
            feature.SetInParent()
        else:
            getattr(feature, KIND[name]).value.extend(value)
    return ex.SerializeToString()


RANDOM_SPECS = {
    "fixed": (
        rk.FixedLen((3,), np.int64, default=[1, 2, 3]),
        tf.io.FixedLenFeature([3], tf.int64, default_value=[1, 2, 3]),
    ),
    "image": (
        rk.FixedLen((2, 2), np.float32, default=-1.5),
        tf.io.FixedLenFeature([2, 2], tf.float32, default_value=[-1.5] * 4),
    ),
    "ints": (rk.VarLen(np.int64), tf.io.RaggedFeature(tf.int64)),
    "floats": (rk.VarLen(np.float32), tf.io.RaggedFeature(tf.float32)),
    "words": (rk.VarLen(bytes), tf.io.RaggedFeature(tf.string)),
    "seq": (
        rk.FixedLenSequence((), np.int64, default=-9),
        tf.io.FixedLenSequenceFeature([], tf.int64, allow_missing=True, default_value=-9),
    ),
}


@interop_settings
@given(st.lists(features, min_size=1, max_size=20), st.integers(1, 3))
def test_random_examples_match_tensorflow(batch, copies):
    records = [serialize(values) for values in batch] * copies  # copies exercise the template path
    specs = dict(RANDOM_SPECS)
    ours = rk.parse_examples(
        records, {**rename(specs, 0), "seq": rk.FixedLenSequence((), np.int64, default=-9)}
    )
    records_for_seq = records
    theirs = tf.io.parse_example(
        tf.constant(records), {k: v[1] for k, v in specs.items() if k != "seq"}
    )
    for name in ("fixed", "image"):
        assert_same(ours[name], theirs[name])  # type: ignore[arg-type]
    for name in ("ints", "floats", "words"):
        assert_same_ragged(ours[name], theirs[name])  # type: ignore[arg-type]
    # FixedLenSequence over an int64 feature: reuse "ints" under another spec.
    seq_ours = rk.parse_examples(records_for_seq, {"ints": specs["seq"][0]})["ints"]
    seq_theirs = tf.io.parse_example(tf.constant(records_for_seq), {"ints": specs["seq"][1]})[
        "ints"
    ]
    assert_same(seq_ours, seq_theirs)  # type: ignore[arg-type]


@interop_settings
@given(
    st.lists(
        st.tuples(
            st.lists(
                st.lists(st.floats(width=32, allow_nan=False), min_size=2, max_size=2), max_size=4
            ),
            st.lists(st.lists(st.integers(-(2**63), 2**63 - 1), max_size=3), max_size=4),
            st.binary(max_size=5),
        ),
        min_size=1,
        max_size=8,
    )
)
def test_random_sequence_examples_match_tensorflow(batch):
    records = []
    for frames, tokens, key in batch:
        seq = example_pb2.SequenceExample()
        seq.context.feature["id"].bytes_list.value.append(key)
        seq.context.feature["length"].int64_list.value.append(len(frames))
        frame_list = seq.feature_lists.feature_list["frames"]
        frame_list.SetInParent()
        for frame in frames:
            frame_list.feature.add().float_list.value.extend(frame)
        token_list = seq.feature_lists.feature_list["tokens"]
        for step in tokens:
            token_list.feature.add().int64_list.value.extend(step)
        records.append(seq.SerializeToString())
    context, sequence, lengths = rk.parse_sequence_examples(
        records, rename(SEQUENCE_CONTEXT, 0), rename(SEQUENCE_LISTS, 0)
    )
    tf_context, tf_sequence, tf_lengths = tf.io.parse_sequence_example(
        tf.constant(records), rename(SEQUENCE_CONTEXT, 1), rename(SEQUENCE_LISTS, 1)
    )
    assert_same(context["id"], tf_context["id"])
    assert_same_ragged(context["length"], tf_context["length"])
    assert_same(sequence["frames"], tf_sequence["frames"])
    assert_same_ragged(sequence["tokens"], tf_sequence["tokens"])
    assert_same(lengths["frames"], tf_lengths["frames"])


def test_errors_where_tensorflow_errors():
    records = [serialize({"fixed": [1, 2, 3]}), serialize({"fixed": [1, 2]})]
    with pytest.raises(tf.errors.InvalidArgumentError):
        tf.io.parse_example(tf.constant(records), {"fixed": tf.io.FixedLenFeature([3], tf.int64)})
    with pytest.raises(rk.DecodeError, match="expected 3 values"):
        rk.parse_examples(records, {"fixed": rk.FixedLen((3,), np.int64)})
    floats = [serialize({"floats": [0.5]})]
    with pytest.raises(tf.errors.InvalidArgumentError):
        tf.io.parse_example(tf.constant(floats), {"floats": tf.io.VarLenFeature(tf.int64)})
    with pytest.raises(rk.DecodeError, match="data type"):
        rk.parse_examples(floats, {"floats": rk.VarLen(np.int64)})
