"""GZIP and ZLIB TFRecord files: TensorFlow's exact bytes, damage after the last record, detection."""

from __future__ import annotations

import gzip
import io
import os
import random
import zlib

import pytest

import recordkit as rk
from recordkit.errors import ChecksumError, CorruptRecordError, TruncatedRecordError
from recordkit.formats.tfrecord import frame

RECORDS = [b"a" * 10, b"bb" * 20, b"c" * 5]


def _compress(plain: bytes, compression: str) -> bytes:
    return gzip.compress(plain, mtime=0) if compression == "gzip" else zlib.compress(plain)


def _read_until_error(
    data: bytes, compression: str, **options: object
) -> tuple[list[bytes], Exception]:
    """Iterate ``data`` and return the records yielded before the error it must end with."""
    got: list[bytes] = []
    with pytest.raises(CorruptRecordError) as caught:  # noqa: PT012 - the records before the error count
        for record in rk.open(
            io.BytesIO(data), format="tfrecord", compression=compression, **options
        ):
            got.append(record)  # noqa: PERF402 - keeps what came before the error
    return got, caught.value


@pytest.mark.parametrize("compression", ["gzip", "zlib"])
@pytest.mark.parametrize("tail", [b"\x00", b"Z", b"\x1f\x8b\x08", bytes(20), b"\x78\x9c"])
def test_stray_bytes_after_the_stream_come_after_every_record(compression, tail):
    data = _compress(b"".join(map(frame, RECORDS)), compression) + tail
    got, error = _read_until_error(data, compression)
    assert got == RECORDS
    assert error.index == len(RECORDS)
    assert error.offset == sum(len(r) + 16 for r in RECORDS)


def test_stray_bytes_after_a_zlib_stream_are_reported_as_such():
    data = zlib.compress(b"".join(map(frame, RECORDS))) + b"\x01"
    _, error = _read_until_error(data, "zlib")
    assert "after the end of the ZLIB stream" in str(error)


def test_a_gzip_stream_cut_inside_a_member_header_is_truncated():
    data = gzip.compress(b"".join(map(frame, RECORDS)), mtime=0) + b"\x1f\x8b"
    got, error = _read_until_error(data, "gzip")
    assert got == RECORDS
    assert isinstance(error, TruncatedRecordError)


@pytest.mark.parametrize("compression", ["gzip", "zlib"])
def test_damage_inside_the_stream_still_yields_the_records_inflated_before_it(compression):
    # Large records: the damage lies several inflate steps after the first records' bytes.
    rng = random.Random(3)
    records = [rng.randbytes(50_000) for _ in range(8)]
    data = bytearray(_compress(b"".join(map(frame, records)), compression))
    data[len(data) * 3 // 4] ^= 0x55
    got, _ = _read_until_error(bytes(data), compression)
    assert got == records[: len(got)]
    assert len(got) >= 4


def test_a_plain_file_starting_like_a_zlib_header_is_read_as_plain():
    data = bytes.fromhex("789c") + bytes(14)
    for source in (io.BytesIO(data), data):
        reader = rk.open(
            io.BytesIO(source) if isinstance(source, bytes) else source, format="tfrecord"
        )
        assert reader.compression == ""
        with pytest.raises(ChecksumError, match="length checksum") as caught:
            list(reader)
        assert caught.value.offset == 0


@pytest.mark.parametrize("compression", ["gzip", "zlib"])
def test_compressed_files_are_still_detected(compression):
    for records in ([], RECORDS, [os.urandom(100_000)]):
        data = _compress(b"".join(map(frame, records)), compression)
        with rk.open(io.BytesIO(data), format="tfrecord") as reader:
            assert reader.compression == compression
            assert list(reader) == records


def test_gzip_of_something_else_is_not_claimed_as_a_compressed_tfrecord():
    data = gzip.compress(b"just some text, not records" * 10)
    assert rk.get_format("tfrecord").detect_compression(data[:64]) == ""


@pytest.mark.parametrize(
    ("name", "compression"), [("examples.tfrecord.gz", "gzip"), ("examples.tfrecord.zlib", "zlib")]
)
def test_rewriting_tensorflows_compressed_golden_files_gives_the_same_bytes(
    golden_dir, name, compression
):
    path = golden_dir / "tfrecord" / name
    with rk.open(path) as reader:
        records = list(reader)
    buffer = io.BytesIO()
    with rk.open(buffer, "w", format="tfrecord", compression=compression) as writer:
        writer.write_many(records)
    expected = path.read_bytes()
    assert buffer.getvalue() == expected
    if compression == "gzip":
        # Header: magic, deflate, no flags, mtime 0, no extra flags, OS 3 (Unix); no file name.
        assert expected[:10] == bytes.fromhex("1f8b0800000000000003")


def _tf_write(tf, path, records, compression, level=None, flush_after=None):
    options = tf.io.TFRecordOptions(compression_type=compression.upper(), compression_level=level)
    with tf.io.TFRecordWriter(str(path), options=options) as writer:
        for i, record in enumerate(records):
            writer.write(record)
            if i == flush_after:
                writer.flush()


def _rk_write(records, compression, level=None, flush_after=None):
    buffer = io.BytesIO()
    with rk.open(buffer, "w", format="tfrecord", compression=compression, level=level) as writer:
        for i, record in enumerate(records):
            writer.write(record)
            if i == flush_after:
                writer.flush()
    return buffer.getvalue()


@pytest.mark.interop
@pytest.mark.parametrize("compression", ["gzip", "zlib"])
def test_compressed_output_matches_tensorflow_byte_for_byte(tmp_path, rng, compression):
    tf = pytest.importorskip("tensorflow")
    for trial in range(6):
        records = [
            rng.randbytes(rng.choice([0, 1, 30, 3000, 70_000, 300_000]))
            if rng.random() < 0.5
            else bytes(rng.randrange(20_000))
            for _ in range(rng.randrange(12))
        ]
        level = rng.choice([None, -1, 1, 5, 9])
        flush_after = rng.randrange(len(records)) if records and rng.random() < 0.5 else None
        path = tmp_path / f"tf{trial}"
        _tf_write(tf, path, records, compression, level, flush_after)
        assert _rk_write(records, compression, level, flush_after) == path.read_bytes(), (
            level,
            flush_after,
        )


@pytest.mark.interop
@pytest.mark.parametrize("compression", ["gzip", "zlib"])
def test_tensorflow_reads_the_same_records_before_stray_bytes(tmp_path, compression):
    tf = pytest.importorskip("tensorflow")
    path = tmp_path / "stray"
    path.write_bytes(_compress(b"".join(map(frame, RECORDS)), compression) + b"\x00")
    seen = []
    try:
        for record in tf.data.TFRecordDataset(str(path), compression_type=compression.upper()):
            seen.append(record.numpy())  # noqa: PERF401 - keeps what came before the error
    except tf.errors.DataLossError:
        pass
    got, _ = _read_until_error(path.read_bytes(), compression)
    assert got == seen == RECORDS


def _intact_records(inflated: bytes) -> list[bytes]:
    """The whole frames at the start of ``inflated`` (what any reader can give back from it)."""
    records, pos = [], 0
    while pos + 12 <= len(inflated):
        length = int.from_bytes(inflated[pos : pos + 8], "little")
        if pos + 16 + length > len(inflated):
            break
        records.append(inflated[pos + 12 : pos + 12 + length])
        pos += 16 + length
    return records


def _inflatable_prefix(data: bytes, compression: str) -> bytes:
    """Everything zlib inflates from ``data``, fed one byte at a time (nothing held back)."""
    inflater = zlib.decompressobj(31 if compression == "gzip" else 15)
    return b"".join(inflater.decompress(data[i : i + 1]) for i in range(len(data)))


@pytest.mark.parametrize("compression", ["gzip", "zlib"])
def test_a_cut_stream_gives_back_every_record_inflated_before_the_cut(compression):
    # Short records, read 12 header bytes at a time: zlib stops at each read's limit and holds back the
    # output of compressed bytes it has already taken in. Those records must still come out.
    records = [bytes([i]) * (i % 9) for i in range(40)]
    data = _compress(b"".join(frame(r) for r in records), compression)
    for cut in range(1, len(data) - 8):
        expected = _intact_records(_inflatable_prefix(data[:cut], compression))
        got, error = _read_until_error(data[:cut], compression)
        assert got == expected, (cut, len(got), len(expected))
        assert isinstance(error, TruncatedRecordError)
