"""TensorFlow reads recordkit's TFRecord files byte for byte, and recordkit reads TensorFlow's."""

from __future__ import annotations

import os
import random
import re

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


def _tensorflow_reads_until_the_error(tf, path):
    """The records TensorFlow's iterator yields before it stops, and the offset its error names."""
    records = []
    with pytest.raises(tf.errors.DataLossError) as caught:
        records.extend(tf.compat.v1.io.tf_record_iterator(os.fspath(path)))
    return records, int(re.search(r"record at (\d+)", str(caught.value)).group(1))


# Payloads are compared in batches of about 1 MiB (and in windows of 1 MiB), and batches of fewer than 16
# records one by one: damage in the first record, inside and at the edges of a batch, in a later batch, in
# the last record, and in a file of 10 records.
@pytest.mark.parametrize(
    ("count", "damaged"),
    [(2400, 0), (2400, 1), (2400, 16), (2400, 700), (2400, 1499), (2400, 2399), (10, 3)],
)
@pytest.mark.parametrize("part", ["payload", "length checksum"])
@pytest.mark.parametrize("zero_copy", [False, True])
def test_damage_stops_recordkit_where_it_stops_tensorflow(
    tf, tmp_path, count, damaged, part, zero_copy
):
    rng = random.Random(damaged)
    records = [rng.randbytes(rng.choice([0, 1, 300, 1024, 2000])) for _ in range(count)]
    path = tmp_path / "damaged.tfrecord"
    with rk.open(path, "w") as writer:
        writer.write_many(records)
    frame = sum(len(record) + 16 for record in records[:damaged])
    data = bytearray(path.read_bytes())
    if part == "payload" and records[damaged]:
        data[frame + 12 + len(records[damaged]) // 2] ^= 0x10
    else:
        data[frame + 9] ^= 0x10
    path.write_bytes(bytes(data))
    expected, offset = _tensorflow_reads_until_the_error(tf, path)
    assert expected == records[:damaged]

    read = []
    with pytest.raises(rk.ChecksumError) as caught:
        read.extend(bytes(record) for record in rk.open(path, zero_copy=zero_copy))
    assert read == expected
    assert caught.value.index == damaged
    # TensorFlow names the frame for a bad length and the payload for a bad payload checksum.
    assert caught.value.offset == offset
