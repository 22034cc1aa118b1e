"""BZIP2 TFRecord files, as Apache Beam writes them (``compression_type=BZIP2``): read, never written.

The oracle: TensorFlow writes the records uncompressed and reads them back; the standard library's ``bz2``
compresses that file as Beam's ``CompressedFile`` does (one ``BZ2Compressor`` stream).
"""

from __future__ import annotations

import bz2
import io
import os
import random

import pytest
from _cli import run_cli

import recordkit as rk
from recordkit.data import Dataset
from recordkit.errors import CorruptRecordError, TruncatedRecordError, UnsupportedOperationError
from recordkit.formats.tfrecord import frame
from recordkit.recover import salvage, scan

RECORDS = [bytes([i % 251]) * (i % 97) for i in range(200)]


@pytest.fixture(scope="module")
def tf():
    return pytest.importorskip("tensorflow")


def _tensorflow_file(tf, path, count, seed=0):
    """A TFRecord file TensorFlow wrote (random payloads: the BZIP2 stream is larger than one sniff)."""
    rng = random.Random(seed)
    with tf.io.TFRecordWriter(os.fspath(path)) as writer:
        for i in range(count):
            writer.write(rk.encode_example({"id": i, "noise": rng.randbytes(rng.randint(0, 200))}))
    return [t.numpy() for t in tf.data.TFRecordDataset(os.fspath(path))]


@pytest.mark.interop
@pytest.mark.parametrize(
    ("name", "options"),
    [
        ("train.tfrecord.bz2", {}),  # the suffix
        ("train-00000-of-00001", {}),  # Beam's shard name, no suffix: the content
        ("train.tfrecord", {}),  # a TFRecord suffix over BZIP2 bytes: the magic
        ("train.data", {"format": "tfrecord", "compression": "BZIP2"}),  # Beam's spelling
    ],
)
def test_tensorflows_records_compressed_with_bzip2_read_back(tf, tmp_path, name, options):
    expected = _tensorflow_file(tf, tmp_path / "plain.tfrecord", 3000)
    path = tmp_path / name
    path.write_bytes(bz2.compress((tmp_path / "plain.tfrecord").read_bytes()))
    assert path.stat().st_size > 1 << 16  # more than the first look at a file takes in
    with rk.open(path, **options) as reader:
        assert (reader.format, reader.compression) == ("tfrecord", "bzip2")
        assert list(reader) == expected
        assert not reader.supports_random_access


@pytest.mark.interop
def test_tensorflow_cannot_read_bzip2(tf, tmp_path):
    """What docs/formats/tfrecord.md says: TensorFlow's compression types are "", GZIP and ZLIB."""
    path = tmp_path / "x.tfrecord.bz2"
    path.write_bytes(bz2.compress(frame(b"a")))
    # It logs "Unsupported compression_type:BZIP2. No compression will be used." and reads the bytes as
    # a plain file.
    with pytest.raises(tf.errors.DataLossError):
        list(tf.data.TFRecordDataset(os.fspath(path), compression_type="BZIP2"))


def test_several_bzip2_streams_are_read_one_after_the_other():
    data = bz2.compress(b"".join(map(frame, RECORDS[:50]))) + bz2.compress(
        b"".join(map(frame, RECORDS[50:]))
    )
    assert list(rk.open(io.BytesIO(data), format="tfrecord")) == RECORDS


def test_damaged_or_cut_bzip2_data_raises_after_the_records_before_it():
    data = bz2.compress(b"".join(map(frame, RECORDS)))
    with pytest.raises(TruncatedRecordError):
        list(rk.open(io.BytesIO(data[:-10]), format="tfrecord", compression="bzip2"))
    with pytest.raises(CorruptRecordError, match="corrupt BZIP2 data"):
        list(rk.open(io.BytesIO(data + b"junk"), format="tfrecord", compression="bzip2"))
    # BZIP2 checks a block's CRC at its end, after handing out its bytes: the damage shows as BZIP2's
    # error or as a TFRecord checksum mismatch, after the records before it.
    damaged = bytearray(data)
    damaged[len(data) // 2] ^= 0xFF
    got = []
    with pytest.raises(CorruptRecordError):  # noqa: PT012 - the records before the error count
        for record in rk.open(io.BytesIO(bytes(damaged)), format="tfrecord", compression="bzip2"):
            got.append(record)  # noqa: PERF402
    assert got == RECORDS[: len(got)]


@pytest.mark.parametrize(
    ("name", "options"),
    [("out.tfrecord.bz2", {}), ("out.tfrecord", {"compression": "bzip2"})],
)
def test_writing_bzip2_is_refused_and_leaves_nothing(tmp_path, name, options):
    with pytest.raises(UnsupportedOperationError, match="TensorFlow cannot read them"):
        rk.open(tmp_path / name, "w", **options)
    assert os.listdir(tmp_path) == []
    pattern = os.fspath(tmp_path / "part-{shard:05d}.tfrecord.bz2")
    with (
        pytest.raises(UnsupportedOperationError, match="does not write"),
        rk.ShardWriter(pattern, max_records=2) as writer,
    ):
        writer.write(b"x")
    assert [n for n in os.listdir(tmp_path) if "part" in n] == []


def test_dataset_and_the_command_line_read_bzip2_shards(tmp_path, capsys):
    for i in range(3):
        shard = b"".join(map(frame, RECORDS[i * 60 : (i + 1) * 60]))
        (tmp_path / f"part-{i}.tfrecord.bz2").write_bytes(bz2.compress(shard))
    assert list(Dataset(os.fspath(tmp_path))) == RECORDS[:180]
    shuffled = list(Dataset(os.fspath(tmp_path), seed=1).shuffle(16))
    assert sorted(shuffled) == sorted(RECORDS[:180])
    result = run_cli(capsys, "count", tmp_path / "part-1.tfrecord.bz2")
    assert (result.code, result.out.split()[0]) == (0, "60")
    result = run_cli(capsys, "verify", tmp_path)
    assert result.code == 0
    result = run_cli(capsys, "info", tmp_path / "part-0.tfrecord.bz2")
    assert "bzip2" in result.out


def test_recover_keeps_the_records_before_damaged_bzip2_data(tmp_path):
    first = bz2.compress(b"".join(map(frame, RECORDS[:100])))
    second = bytearray(bz2.compress(b"".join(map(frame, RECORDS[100:]))))
    second[len(second) // 2] ^= 0xFF
    src = tmp_path / "damaged.tfrecord.bz2"
    src.write_bytes(first + bytes(second))
    with scan(src, warn=False) as records:
        got = list(records)
        assert records.report.compression == "bzip2"
        assert records.report.lost_compressed_bytes > 0
    assert got == RECORDS[: len(got)]
    assert len(got) >= 100
    report = salvage(src, tmp_path / "fixed.tfrecord", warn=False)
    assert list(rk.open(tmp_path / "fixed.tfrecord")) == got
    assert report.records == len(got)
