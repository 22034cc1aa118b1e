"""Sidecar offset indexes: the tfrecord2idx text format, staleness checks, interop with vahidk tfrecord."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import pytest

import recordkit as rk
from recordkit.errors import StaleIndexError
from recordkit.formats.tfrecord import frame
from recordkit.io import write_index

RECORDS = [b"alpha", b"", b"gamma" * 100, b"delta"]


def _write(path, records=RECORDS):
    with rk.open(path, "w") as writer:
        writer.write_many(records)


def _expected_lines(records, overhead):
    lines, offset = [], 0
    for record in records:
        lines.append(f"{offset} {len(record) + overhead}")
        offset += len(record) + overhead
    return lines


@pytest.mark.parametrize(("name", "overhead"), [("a.tfrecord", 16), ("a.ofrecord", 8)])
def test_index_file_format(tmp_path, name, overhead):
    records = [r for r in RECORDS if r] if name.endswith("ofrecord") else RECORDS
    _write(tmp_path / name, records)
    index_path = write_index(tmp_path / name)
    assert index_path == os.fspath(tmp_path / name) + ".idx"
    assert (tmp_path / (name + ".idx")).read_text().splitlines() == _expected_lines(
        records, overhead
    )


def test_default_sidecar_is_used_and_avoids_the_scan(tmp_path, monkeypatch):
    _write(tmp_path / "a.tfrecord")
    write_index(tmp_path / "a.tfrecord")
    from recordkit.formats._sequential import SequentialFrameReader

    def no_scan(self):
        raise AssertionError("the header scan ran although an index exists")

    monkeypatch.setattr(SequentialFrameReader, "scan", no_scan)
    with rk.open(tmp_path / "a.tfrecord") as reader:
        assert len(reader) == 4
        assert reader[2] == RECORDS[2]
    with rk.open(tmp_path / "a.tfrecord", index=False) as reader, pytest.raises(AssertionError):
        len(reader)


def test_explicit_index_path(tmp_path):
    _write(tmp_path / "a.tfrecord")
    write_index(tmp_path / "a.tfrecord", tmp_path / "elsewhere.index")
    assert not (tmp_path / "a.tfrecord.idx").exists()
    with rk.open(tmp_path / "a.tfrecord", index=tmp_path / "elsewhere.index") as reader:
        assert reader.read([3, 0]) == [RECORDS[3], RECORDS[0]]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("0 21\n21 16\n", "covers"),  # one record missing at the end
        ("0 21\n37 516\n21 16\n553 21\n", "previous records end"),  # out of order
        ("0 21\n21 16\n37 516\n553 99\n", "past the end"),
        ("0 21\nnonsense\n", "malformed"),
        ("", "covers 0 bytes"),
    ],
)
def test_stale_index(tmp_path, content, message):
    _write(tmp_path / "a.tfrecord")
    (tmp_path / "a.tfrecord.idx").write_text(content)
    with rk.open(tmp_path / "a.tfrecord") as reader:
        assert list(iter(reader)) == RECORDS  # iteration never needs the index
        with pytest.raises(StaleIndexError, match=message):
            len(reader)


def test_index_of_a_rewritten_file_is_stale(tmp_path):
    _write(tmp_path / "a.tfrecord")
    write_index(tmp_path / "a.tfrecord")
    _write(tmp_path / "a.tfrecord", [b"x" * 5, b"y"])
    with rk.open(tmp_path / "a.tfrecord") as reader, pytest.raises(StaleIndexError):
        reader[0]


def test_index_boundaries_that_disagree_with_headers(tmp_path):
    (tmp_path / "a.tfrecord").write_bytes(frame(b"ab") + frame(b"cd"))
    (tmp_path / "a.tfrecord.idx").write_text("0 17\n17 19\n")  # covers the file, wrong split
    with rk.open(tmp_path / "a.tfrecord") as reader, pytest.raises(StaleIndexError) as caught:
        reader[0]
    assert caught.value.index == 0


def test_index_of_compressed_or_ffrecord_files_is_refused(tmp_path):
    _write(tmp_path / "a.tfrecord.gz")
    with pytest.raises(rk.UnsupportedOperationError):
        write_index(tmp_path / "a.tfrecord.gz")
    _write(tmp_path / "a.ffr")
    with pytest.raises(TypeError, match="own index"):
        write_index(tmp_path / "a.ffr")


@pytest.mark.interop
def test_vahidk_tfrecord_reads_our_index(tmp_path):
    if importlib.util.find_spec("tfrecord") is None:  # not imported here: see below
        pytest.skip("the tfrecord package is not installed")
    encode_example = pytest.importorskip("recordkit.example").encode_example
    records = [encode_example({"label": [i], "name": [b"n%d" % i]}) for i in range(10)]
    _write(tmp_path / "a.tfrecord", records)
    index_path = write_index(tmp_path / "a.tfrecord")
    # In a subprocess: vahidk tfrecord registers its own "tensorflow" protos, which would clash with
    # TensorFlow's in this process.
    script = (
        "import sys; from tfrecord.reader import tfrecord_loader; "
        "items = tfrecord_loader(sys.argv[1], sys.argv[2], {'label': 'int'}, shard=(1, 2)); "
        "print(' '.join(str(int(item['label'][0])) for item in items))"
    )
    result = subprocess.run(
        [sys.executable, "-c", script, os.fspath(tmp_path / "a.tfrecord"), index_path],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    assert result.stdout.split() == ["5", "6", "7", "8", "9"]
