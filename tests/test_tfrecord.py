"""TFRecord framing: CRC backends and vectors, golden files written by TensorFlow, damaged files."""

from __future__ import annotations

import array
import hashlib
import io
import random
import re
import struct
import warnings

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import recordkit as rk
from recordkit.errors import ChecksumError, SlowCRCWarning, TruncatedRecordError
from recordkit.formats import _crc
from recordkit.formats.tfrecord import frame
from recordkit.testing import NoSeekBytesIO

GOLDEN_VALID = ["examples.tfrecord", "examples.tfrecord.gz", "examples.tfrecord.zlib", "empty.tfrecord",
                "raw.tfrecord", "sequence_examples.tfrecord"]  # fmt: skip
GOLDEN_CORRUPT = ["corrupt_data_crc.tfrecord", "corrupt_length_crc.tfrecord", "truncated.tfrecord"]


@pytest.mark.parametrize("backend", sorted(_crc.crc32c_backends()))
def test_crc32c_backends_known_vector(backend):
    assert _crc.crc32c_backends()[backend](b"123456789") == 0xE3069283


def test_backends_agree_on_random_data(rng):
    backends = _crc.crc32c_backends()
    for size in (0, 1, 7, 8, 63, 64, 1000, 65537):
        data = rng.randbytes(size)
        assert len({function(data) for function in backends.values()}) == 1


def test_the_fast_backend_is_chosen_when_available():
    expected = "google-crc32c" if "google-crc32c" in _crc.crc32c_backends() else "crcmod"
    assert _crc.CRC32C_BACKEND.startswith(expected)


def test_mask_and_unmask_are_inverse(rng):
    for _ in range(100):
        crc = rng.getrandbits(32)
        assert _crc.unmask(_crc.mask(crc)) == crc


def test_framing_vectors_from_tensorflow():
    assert frame(b"") == bytes(8) + bytes.fromhex("29039807") + bytes.fromhex("d8ea82a2")
    assert frame(b"hello") == (
        bytes.fromhex("0500000000000000")
        + bytes.fromhex("eab2043e")
        + b"hello"
        + bytes.fromhex("bb1f1c19")
    )


def test_writer_output_is_the_framing_of_each_record(tmp_path):
    records = [b"", b"hello", b"x" * 70000]
    with rk.open(tmp_path / "a.tfrecord", "w") as writer:
        writer.write(records[0])
        writer.write_many(records[1:])
    assert (tmp_path / "a.tfrecord").read_bytes() == b"".join(frame(r) for r in records)


def test_slow_crc_warns_once(monkeypatch):
    monkeypatch.setattr(_crc, "CRC32C_BACKEND", "crcmod-python")
    monkeypatch.setattr(_crc, "_warned", False)
    with pytest.warns(SlowCRCWarning, match=r"recordkit\[fast\]"):
        rk.open(io.BytesIO(frame(b"a")), format="tfrecord").close()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rk.open(io.BytesIO(frame(b"a")), format="tfrecord").close()


def _sha(records):
    return [hashlib.sha256(r).hexdigest() for r in records]


@pytest.mark.parametrize("name", GOLDEN_VALID)
def test_golden_files_read_to_their_hashes(golden_dir, tfrecord_manifest, name):
    entry = tfrecord_manifest["files"][name]
    with rk.open(golden_dir / "tfrecord" / name) as reader:
        assert (
            reader.compression == {"NONE": "", "GZIP": "gzip", "ZLIB": "zlib"}[entry["compression"]]
        )
        records = list(reader)
        if reader.supports_random_access:
            assert reader.read(range(len(reader))) == records
    assert len(records) == entry["records"]
    assert [len(r) for r in records] == entry["lengths"]
    assert _sha(records) == entry["sha256"]


@pytest.mark.parametrize("name", GOLDEN_CORRUPT)
def test_corrupt_golden_files_raise_what_tensorflow_reports(golden_dir, tfrecord_manifest, name):
    entry = tfrecord_manifest["files"][name]
    offset = int(
        re.search(r"(?:corrupted|truncated) record at (\d+)", entry["tensorflow_says"]).group(1)
    )
    expected = (
        TruncatedRecordError if "truncated record" in entry["tensorflow_says"] else ChecksumError
    )
    read: list[bytes] = []

    def read_until_the_error() -> None:
        with rk.open(golden_dir / "tfrecord" / name) as reader:
            read.extend(iter(reader))

    with pytest.raises(expected) as caught:
        read_until_the_error()
    assert len(read) == entry["valid_records_before_fault"]
    assert caught.value.index == entry["valid_records_before_fault"]
    assert caught.value.offset == offset
    assert caught.value.path.endswith(name)
    valid = entry["valid_records_before_fault"]
    with rk.open(golden_dir / "tfrecord" / name) as reader, pytest.raises(expected) as caught:
        reader[valid]  # the header scan or the record read finds it too
    assert caught.value.offset in (offset, offset - 12)


def test_the_length_checksum_of_a_huge_bogus_length_is_checked_first():
    data = struct.pack("<QI", 1 << 62, 0)
    with pytest.raises(ChecksumError) as caught:
        list(rk.open(io.BytesIO(data), format="tfrecord"))
    assert caught.value.offset == 0


def test_a_huge_length_with_a_valid_checksum_never_allocates():
    length = struct.pack("<Q", 1 << 62)
    data = length + struct.pack("<I", _crc.masked_crc32c(length)) + b"short"
    for source in (io.BytesIO(data), NoSeekBytesIO(data)):
        with rk.open(source, format="tfrecord") as reader, pytest.raises(TruncatedRecordError):
            list(reader)
    with pytest.raises(TruncatedRecordError):
        list(rk.open(io.BytesIO(data), format="tfrecord", check_crc=False))


def test_header_cut_is_an_error_unless_lenient():
    data = frame(b"one") + frame(b"two")[:7]
    with pytest.raises(TruncatedRecordError) as caught:
        list(rk.open(io.BytesIO(data), format="tfrecord"))
    assert (caught.value.index, caught.value.offset) == (1, 19)
    with rk.open(io.BytesIO(data), format="tfrecord", lenient=True) as reader:
        assert list(reader) == [b"one"]
        assert len(reader) == 1
    with rk.open(NoSeekBytesIO(data), format="tfrecord", lenient=True) as reader:
        assert list(reader) == [b"one"]


def test_payload_cut_is_an_error_even_when_lenient():
    data = frame(b"one") + frame(b"two")[:14]
    with pytest.raises(TruncatedRecordError):
        list(rk.open(io.BytesIO(data), format="tfrecord", lenient=True))


def test_damaged_gzip_data_is_a_corrupt_record_error(golden_dir):
    data = bytearray((golden_dir / "tfrecord" / "examples.tfrecord.gz").read_bytes())
    data[len(data) // 2] ^= 0xFF
    with pytest.raises(rk.CorruptRecordError) as caught:
        list(rk.open(io.BytesIO(bytes(data)), format="tfrecord", compression="gzip"))
    assert caught.value.index is not None


def test_compression_level_changes_size_not_content(tmp_path):
    records = [b"%d" % (i % 7) * 100 for i in range(300)]
    sizes = {}
    for level in (0, 9):
        with rk.open(tmp_path / f"l{level}.tfrecord.gz", "w", level=level) as writer:
            writer.write_many(records)
        sizes[level] = (tmp_path / f"l{level}.tfrecord.gz").stat().st_size
        with rk.open(tmp_path / f"l{level}.tfrecord.gz") as reader:
            assert list(reader) == records
    assert sizes[9] < sizes[0]
    with pytest.raises(ValueError, match="level"):
        rk.open(tmp_path / "bad.tfrecord.gz", "w", level=10)


def test_multi_member_gzip_is_read_whole():
    import gzip

    data = gzip.compress(frame(b"a")) + gzip.compress(frame(b"b"))
    assert list(rk.open(io.BytesIO(data), format="tfrecord", compression="gzip")) == [b"a", b"b"]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.binary(max_size=300), max_size=20), st.sampled_from(["", "gzip", "zlib"]))
def test_round_trip_property(records, compression):
    buffer = io.BytesIO()
    with rk.open(buffer, "w", format="tfrecord", compression=compression) as writer:
        writer.write_many(records)
    buffer.seek(0)
    assert list(rk.open(buffer, format="tfrecord", compression=compression)) == records


@pytest.mark.parametrize("count", [0, 1, 15, 16, 17, 1000])
def test_first_masked_mismatch_finds_the_first_checksum_that_mask_disagrees_with(count):
    rng = random.Random(count)
    crcs = [rng.getrandbits(32) for _ in range(count)]
    stored = [_crc.mask(crc) for crc in crcs]
    assert _crc.first_masked_mismatch(crcs, stored) is None
    assert _crc.first_masked_mismatch(array.array("I", crcs), array.array("I", stored)) is None
    for wrong in sorted({0, count // 2, count - 1} if count else set()):
        damaged = list(stored)
        damaged[wrong] ^= 1 << rng.randrange(32)
        if wrong + 1 < count:
            damaged[-1] ^= 1  # a later mismatch does not hide the first
        assert _crc.first_masked_mismatch(crcs, damaged) == wrong
