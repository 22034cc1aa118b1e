"""TensorFlow reads recordkit's TFRecord files byte for byte, and recordkit reads TensorFlow's."""

from __future__ import annotations

import os
import random

import pytest

import recordkit as rk

pytestmark = pytest.mark.interop

COMPRESSIONS = ["", "GZIP", "ZLIB"]


def _records():
    rng = random.Random(7)
    return [b"", b"a"] + [rng.randbytes(rng.choice([1, 100, 5000, 70000])) for _ in range(40)]


@pytest.fixture(scope="module")
def tf():
    return pytest.importorskip("tensorflow")


@pytest.mark.parametrize("compression", COMPRESSIONS)
def test_tensorflow_reads_recordkit_files(tf, tmp_path, compression):
    records = _records()
    path = os.fspath(tmp_path / "rk.tfrecord")
    with rk.open(path, "w", compression=compression) as writer:
        writer.write_many(records)
    dataset = tf.data.TFRecordDataset(path, compression_type=compression)
    assert [t.numpy() for t in dataset] == records


@pytest.mark.parametrize("compression", COMPRESSIONS)
def test_recordkit_reads_tensorflow_files(tf, tmp_path, compression):
    records = _records()
    path = os.fspath(tmp_path / "tf.tfrecord")
    with tf.io.TFRecordWriter(path, tf.io.TFRecordOptions(compression_type=compression)) as writer:
        for record in records:
            writer.write(record)
    with rk.open(path, compression=compression) as reader:
        assert list(iter(reader)) == records
    with rk.open(path) as reader:  # compression recognised from the content
        assert reader.compression == compression.lower()
        assert list(iter(reader)) == records


def test_uncompressed_files_are_identical(tf, tmp_path):
    records = _records()
    with tf.io.TFRecordWriter(os.fspath(tmp_path / "tf.tfrecord")) as writer:
        for record in records:
            writer.write(record)
    with rk.open(tmp_path / "rk.tfrecord", "w") as writer:
        writer.write_many(records)
    assert (tmp_path / "tf.tfrecord").read_bytes() == (tmp_path / "rk.tfrecord").read_bytes()
