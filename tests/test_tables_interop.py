"""A pandas DataFrame through a TFRecord file and back, with TensorFlow reading what encode_examples wrote."""

from __future__ import annotations

import numpy as np
import pytest

import recordkit as rk

pd = pytest.importorskip("pandas")
pytest.importorskip("pyarrow")
tf = pytest.importorskip("tensorflow")

pytestmark = pytest.mark.interop


def frame() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "id": np.array([5, -1, 2**40, 0], np.int64),
            "score": np.array([0.5, -2.25, 1e-3, np.nan], np.float32),
            "name": ["cat", "dög", "", "a" * 300],
            "raw": [b"\x00\x01", b"", b"\xff" * 200, b"z"],
            "tokens": [np.array([1, 2, 3]), np.array([], np.int64), np.array([-7]), np.arange(50)],
        }
    )


SPECS = {
    "id": rk.FixedLen((), np.int64),
    "score": rk.FixedLen((), np.float32),
    "name": rk.FixedLen((), str),
    "raw": rk.FixedLen((), bytes),
    "tokens": rk.VarLen(np.int64),
}


def test_dataframe_round_trips_through_a_tfrecord_file(tmp_path) -> None:
    data = frame()
    path = tmp_path / "table.tfrecord"
    with rk.open(path, "w") as writer:
        for record in rk.encode_examples(data):
            writer.write(record)
    with rk.open(path) as reader:
        records = list(reader)
    back = rk.parse_examples(records, SPECS, to="arrow").to_pandas()
    assert back["id"].tolist() == data["id"].tolist()
    np.testing.assert_array_equal(back["score"].to_numpy(), data["score"].to_numpy())
    assert back["score"].dtype == np.float32
    assert back["name"].tolist() == data["name"].tolist()
    assert back["raw"].tolist() == data["raw"].tolist()
    assert [list(v) for v in back["tokens"]] == [v.tolist() for v in data["tokens"]]
    # TensorFlow's own reader sees the same records.
    assert [r.numpy() for r in tf.data.TFRecordDataset(str(path))] == records


def test_tensorflow_parses_the_records_to_the_same_values() -> None:
    data = frame()
    parsed = tf.io.parse_example(
        tf.constant(rk.encode_examples(data)),
        {
            "id": tf.io.FixedLenFeature([], tf.int64),
            "score": tf.io.FixedLenFeature([], tf.float32),
            "name": tf.io.FixedLenFeature([], tf.string),
            "raw": tf.io.FixedLenFeature([], tf.string),
            "tokens": tf.io.RaggedFeature(tf.int64),
        },
    )
    assert parsed["id"].numpy().tolist() == data["id"].tolist()
    np.testing.assert_array_equal(parsed["score"].numpy(), data["score"].to_numpy())
    assert [v.decode() for v in parsed["name"].numpy()] == data["name"].tolist()
    assert parsed["raw"].numpy().tolist() == data["raw"].tolist()
    assert parsed["tokens"].to_list() == [v.tolist() for v in data["tokens"]]


def test_float64_columns_are_rounded_as_a_tf_train_float_list_rounds_them() -> None:
    values = np.array([0.1, 1 / 3, 1e-40, 3.4e38, 1e300, -1e300])
    records = rk.encode_examples({"x": values})
    parsed = tf.io.parse_example(tf.constant(records), {"x": tf.io.FixedLenFeature([], tf.float32)})
    # What a user building tf.train.Example messages from Python floats gets.
    expected = [tf.train.FloatList(value=[v]).value[0] for v in values.tolist()]
    assert parsed["x"].numpy().tolist() == expected
