"""recover.scan and recover.salvage tell a file's format and compression as recordkit.open does."""

from __future__ import annotations

import gzip
import zlib

import pytest

import recordkit as rk
from recordkit import recover
from recordkit.formats.tfrecord import frame

RECORDS = [b"first", b"second", b"third"]
# A TFRecord stream whose first record has a damaged header: its content no longer shows what the file
# holds once inflated, so only the name tells the compression.
_FIRST = bytearray(frame(RECORDS[0]))
_FIRST[9] ^= 0xFF  # the length's checksum
DAMAGED = bytes(_FIRST) + frame(RECORDS[1]) + frame(RECORDS[2])
RECOVERED = RECORDS[1:]
COMPRESSORS = {
    "x.tfrecord.gz": (gzip.compress, "gzip"),
    "x.tfrecord.gzip": (gzip.compress, "gzip"),
    "x.tfrecord.zlib": (zlib.compress, "zlib"),
    "x.tfrecord": (lambda data: data, ""),
}


@pytest.mark.parametrize("format", [None, "tfrecord", "TFRecord"])
@pytest.mark.parametrize("name", COMPRESSORS)
def test_scan_takes_the_compression_from_the_suffix_with_or_without_format(tmp_path, name, format):
    compress, compression = COMPRESSORS[name]
    path = tmp_path / name
    path.write_bytes(compress(DAMAGED))
    with recover.scan(path, format=format, warn=False) as records:
        assert list(records) == RECOVERED
        report = records.report
    assert (report.format, report.compression) == ("tfrecord", compression)
    assert len(report.skipped) == 1
    # The same resolution as recordkit.open, which reads the file up to the damage.
    with rk.open(path, format=format) as reader:
        assert reader.compression == compression
        with pytest.raises(rk.CorruptRecordError):
            list(reader)


@pytest.mark.parametrize("format", [None, "tfrecord"])
@pytest.mark.parametrize("name", COMPRESSORS)
def test_salvage_takes_the_compression_from_the_suffix_with_or_without_format(
    tmp_path, name, format
):
    compress, compression = COMPRESSORS[name]
    path = tmp_path / name
    path.write_bytes(compress(DAMAGED))
    report = recover.salvage(path, tmp_path / "fixed.tfrecord", format=format, warn=False)
    assert (report.records, report.compression) == (2, compression)
    assert list(rk.open(tmp_path / "fixed.tfrecord")) == RECOVERED


def test_an_explicit_compression_wins_over_the_suffix(tmp_path):
    path = tmp_path / "mislabelled.tfrecord.gz"
    path.write_bytes(DAMAGED)  # not compressed at all
    with recover.scan(path, format="tfrecord", compression="none", warn=False) as records:
        assert list(records) == RECOVERED
    with rk.open(path, compression="none") as reader, pytest.raises(rk.ChecksumError):
        next(iter(reader))


def test_a_compressed_suffix_on_a_format_without_compression_is_refused_as_by_open(tmp_path):
    path = tmp_path / "x.ffr.gz"
    path.write_bytes(gzip.compress(b"\x00" * 64))
    with pytest.raises(ValueError, match="does not support") as by_open:
        rk.open(path, format="ffrecord")
    with pytest.raises(ValueError, match="does not support") as by_scan:
        recover.scan(path, format="ffrecord", warn=False)
    assert str(by_scan.value) == str(by_open.value)


@pytest.mark.parametrize("name", ["x.tfrecord.gz", "x.tfrecord"])
def test_scan_and_salvage_open_an_fsspec_url_as_open_does(tmp_path, name):
    fsspec = pytest.importorskip("fsspec")
    compress, compression = COMPRESSORS[name]
    url = f"memory://recover-resolution/{name}"
    with fsspec.open(url, "wb") as file:
        file.write(compress(DAMAGED))
    with recover.scan(url, warn=False) as records:
        assert list(records) == RECOVERED
        report = records.report
    assert (report.path, report.format, report.compression) == (url, "tfrecord", compression)
    with rk.open(url) as reader:
        assert (reader.format, reader.compression) == ("tfrecord", compression)
    report = recover.salvage(url, tmp_path / "fixed.tfrecord", warn=False)
    assert report.records == 2
    assert list(rk.open(tmp_path / "fixed.tfrecord")) == RECOVERED


def test_scan_of_a_file_object_reads_from_its_position_and_leaves_it_open(tmp_path):
    path = tmp_path / "embedded.bin"
    path.write_bytes(b"junk" + DAMAGED)
    with open(path, "rb") as file:
        file.seek(4)
        with recover.scan(file, format="tfrecord", warn=False) as records:
            assert list(records) == RECOVERED
        assert not file.closed
