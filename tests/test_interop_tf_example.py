"""TensorFlow reads what recordkit encodes, and recordkit decodes what TensorFlow serializes."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import recordkit as rk
from recordkit.decode.messages import Feature, bytes_feature

tf = pytest.importorskip("tensorflow")

pytestmark = pytest.mark.interop

names = st.text(st.characters(exclude_categories=("Cs",)), min_size=1, max_size=8)
int64_lists = st.lists(st.integers(-(2**63), 2**63 - 1), max_size=40)
float32_lists = st.lists(st.floats(width=32), max_size=40)
bytes_lists = st.lists(st.binary(max_size=16), max_size=4)
tf_features = st.one_of(
    int64_lists.map(lambda v: ("int64_list", v)),
    float32_lists.map(lambda v: ("float_list", v)),
    bytes_lists.map(lambda v: ("bytes_list", v)),
)
interop_settings = settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def assert_same_floats(actual: np.ndarray, expected: np.ndarray) -> None:
    """Equal float32 bits, where every NaN counts as equal to every NaN (Python floats carry NaNs as doubles)."""
    actual, expected = actual.astype(np.float32), expected.astype(np.float32)
    assert actual.shape == expected.shape
    assert np.array_equal(np.isnan(actual), np.isnan(expected))
    keep = ~np.isnan(expected)
    assert actual[keep].tobytes() == expected[keep].tobytes()


def tf_feature(kind: str, values: list[Any]) -> Any:
    if kind == "int64_list":
        return tf.train.Feature(int64_list=tf.train.Int64List(value=values))
    if kind == "float_list":
        return tf.train.Feature(float_list=tf.train.FloatList(value=values))
    return tf.train.Feature(bytes_list=tf.train.BytesList(value=values))


def assert_matches_tf_feature(ours: object, theirs: Any) -> None:
    """Compare a recordkit-decoded value with a tf.train.Feature."""
    kind = theirs.WhichOneof("kind")
    if kind is None:
        assert isinstance(ours, np.ndarray)
        assert ours.size == 0
    elif kind == "bytes_list":
        assert ours == list(theirs.bytes_list.value)
    elif kind == "int64_list":
        assert isinstance(ours, np.ndarray)
        assert ours.dtype == np.int64
        assert ours.tolist() == list(theirs.int64_list.value)
    else:
        assert isinstance(ours, np.ndarray)
        assert ours.dtype == np.float32
        assert_same_floats(ours, np.array(theirs.float_list.value, np.float32))


def as_recordkit_value(kind: str, values: list[Any]) -> object:
    if kind == "int64_list":
        return np.array(values, np.int64)
    if kind == "float_list":
        return np.array(values, np.float32)
    return bytes_feature(values)


@interop_settings
@given(st.dictionaries(names, tf_features, max_size=5))
def test_tensorflow_parses_encoded_examples(features: dict[str, tuple[str, list[Any]]]) -> None:
    data = rk.encode_example({name: as_recordkit_value(*pair) for name, pair in features.items()})
    parsed = tf.train.Example.FromString(data)
    assert sorted(parsed.features.feature) == sorted(features)
    for name, (kind, values) in features.items():
        theirs = parsed.features.feature[name]
        assert theirs.WhichOneof("kind") == kind
        assert_matches_tf_feature(as_decoded(kind, values), theirs)


def as_decoded(kind: str, values: list[Any]) -> object:
    value = as_recordkit_value(kind, values)
    return list(value.value) if isinstance(value, Feature) else value


@interop_settings
@given(st.dictionaries(names, tf_features, max_size=5))
def test_decode_examples_serialized_by_tensorflow(
    features: dict[str, tuple[str, list[Any]]],
) -> None:
    message = tf.train.Example(
        features=tf.train.Features(feature={n: tf_feature(*pair) for n, pair in features.items()})
    )
    decoded = rk.decode_example(message.SerializeToString())
    assert sorted(decoded) == sorted(features)
    for name in features:
        assert_matches_tf_feature(decoded[name], message.features.feature[name])


def test_decode_example_with_empty_feature_from_tensorflow() -> None:
    message = tf.train.Example(features=tf.train.Features(feature={"e": tf.train.Feature()}))
    decoded = rk.decode_example(message.SerializeToString())
    assert decoded["e"].dtype == np.float32
    assert decoded["e"].size == 0


@interop_settings
@given(
    st.dictionaries(names, tf_features, max_size=3),
    st.dictionaries(names, st.lists(tf_features, max_size=4), max_size=3),
)
def test_sequence_examples_both_ways(
    context: dict[str, tuple[str, list[Any]]], lists: dict[str, list[tuple[str, list[Any]]]]
) -> None:
    message = tf.train.SequenceExample(
        context=tf.train.Features(feature={n: tf_feature(*pair) for n, pair in context.items()}),
        feature_lists=tf.train.FeatureLists(
            feature_list={
                n: tf.train.FeatureList(feature=[tf_feature(*pair) for pair in steps])
                for n, steps in lists.items()
            }
        ),
    )
    ours = rk.encode_sequence_example(
        {n: as_recordkit_value(*pair) for n, pair in context.items()},
        {n: [as_recordkit_value(*pair) for pair in steps] for n, steps in lists.items()},
    )
    parsed = tf.train.SequenceExample.FromString(ours)
    assert parsed.SerializeToString(deterministic=True) == message.SerializeToString(
        deterministic=True
    )

    decoded_context, decoded_lists = rk.decode_sequence_example(message.SerializeToString())
    for name in context:
        assert_matches_tf_feature(decoded_context[name], message.context.feature[name])
    assert sorted(decoded_lists) == sorted(lists)
    for name in lists:
        steps = message.feature_lists.feature_list[name].feature
        assert len(decoded_lists[name]) == len(steps)
        for ours_step, theirs in zip(decoded_lists[name], steps, strict=True):
            assert_matches_tf_feature(ours_step, theirs)


def test_tensorflow_parse_example_reads_encoded_examples() -> None:
    """TensorFlow's C++ parser (tf.io.parse_example) accepts recordkit's bytes, empty Features included."""
    rng = np.random.default_rng(0)
    image = rng.random((28, 28), dtype=np.float32)
    tokens = rng.integers(-(2**62), 2**62, 100)
    data = rk.encode_example(
        {
            "image": image,
            "label": 7,
            "name": "héllo",
            "tokens": tokens,
            "nothing": [],
            "ratio": 0.25,
        }
    )
    spec = {
        "image": tf.io.FixedLenFeature([28, 28], tf.float32),
        "label": tf.io.FixedLenFeature([], tf.int64),
        "name": tf.io.FixedLenFeature([], tf.string),
        "tokens": tf.io.VarLenFeature(tf.int64),
        "nothing": tf.io.VarLenFeature(tf.int64),
        "ratio": tf.io.FixedLenFeature([], tf.float32),
    }
    parsed = tf.io.parse_example(tf.constant([data, data]), spec)
    assert parsed["image"].numpy().tobytes() == np.stack([image, image]).tobytes()
    assert parsed["label"].numpy().tolist() == [7, 7]
    assert parsed["name"].numpy().tolist() == ["héllo".encode()] * 2
    assert tf.sparse.to_dense(parsed["tokens"]).numpy().tolist() == [tokens.tolist()] * 2
    assert parsed["nothing"].values.numpy().size == 0
    assert parsed["ratio"].numpy().tolist() == [0.25, 0.25]
    parsed_floats = tf.io.parse_single_example(data, {"nothing": tf.io.VarLenFeature(tf.float32)})
    assert parsed_floats["nothing"].values.numpy().size == 0


def test_tensorflow_parse_sequence_example_reads_encoded_examples() -> None:
    frames = np.arange(12, dtype=np.float32).reshape(4, 3)
    data = rk.encode_sequence_example({"id": b"seq-1"}, {"frames": frames, "tokens": [[1], [2, 3]]})
    context, lists = tf.io.parse_single_sequence_example(
        data,
        context_features={"id": tf.io.FixedLenFeature([], tf.string)},
        sequence_features={
            "frames": tf.io.FixedLenSequenceFeature([3], tf.float32),
            "tokens": tf.io.VarLenFeature(tf.int64),
        },
    )
    assert context["id"].numpy() == b"seq-1"
    assert lists["frames"].numpy().tobytes() == frames.tobytes()
    assert tf.sparse.to_dense(lists["tokens"]).numpy().tolist() == [[1, 0], [2, 3]]


def test_decode_matches_tensorflow_on_golden_style_example() -> None:
    """An Example built by TensorFlow's own classes, with special floats, decodes bit for bit."""
    specials = np.array([np.nan, -0.0, np.inf, -np.inf, 1e-45, 3.4028235e38], np.float32)
    message = tf.train.Example(
        features=tf.train.Features(
            feature={
                "f": tf.train.Feature(float_list=tf.train.FloatList(value=specials)),
                "i": tf.train.Feature(
                    int64_list=tf.train.Int64List(value=[-(2**63), 2**63 - 1, 0])
                ),
                "b": tf.train.Feature(bytes_list=tf.train.BytesList(value=[b"", b"\x00\xff"])),
            }
        )
    )
    decoded = rk.decode_example(message.SerializeToString())
    assert_same_floats(decoded["f"], specials)
    assert decoded["f"][1:2].tobytes() == np.float32(-0.0).tobytes()
    assert decoded["i"].tolist() == [-(2**63), 2**63 - 1, 0]
    assert decoded["b"] == [b"", b"\x00\xff"]
