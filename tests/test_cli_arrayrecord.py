"""The ``recordkit`` command on ArrayRecord files, a format it reads but does not write."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _array_record import write_array_record
from _cli import run_cli

import recordkit as rk
from recordkit.formats import get_format

RECORDS = [b"record %d " % i * (i % 50) for i in range(120)]


@pytest.mark.interop
@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ("", "zstd"),
        ("group_size:1", "zstd"),
        ("brotli,group_size:4", "brotli"),
        ("snappy", "snappy"),
        ("zstd:9,group_size:100", "zstd"),
        ("uncompressed", "none"),
    ],
)
def test_info_reports_the_chunk_compression(capsys, tmp_path, options, expected):
    path = write_array_record(tmp_path / "data.array_record", RECORDS, options)
    result = run_cli(capsys, "info", path)
    assert result.code == 0
    assert f"  compression  {expected}\n" in result.out
    result = run_cli(capsys, "info", "--json", path)
    assert json.loads(result.out)["compression"] == expected
    with rk.open(path) as reader:
        assert reader.compression == ""  # not whole-file compression: random access stays
        assert reader.chunk_compression == ("" if expected == "none" else expected)
        assert reader[len(RECORDS) - 1] == RECORDS[-1]


@pytest.mark.interop
def test_chunk_compression_of_files_that_differ_is_mixed(tmp_path):
    first = write_array_record(tmp_path / "a.array_record", RECORDS, "zstd")
    second = write_array_record(tmp_path / "b.array_record", RECORDS, "snappy")
    with rk.open([first, second]) as reader:
        assert reader.chunk_compression == "mixed"
    with rk.open([first, first]) as reader:
        assert reader.chunk_compression == "zstd"
    assert rk.open(write_array_record(tmp_path / "empty.array_record", [])).chunk_compression == ""


@pytest.mark.interop
def test_convert_to_arrayrecord_writes_it(capsys, tmp_path):
    source = write_array_record(tmp_path / "data.array_record", RECORDS, "group_size:1")
    for args in (
        [tmp_path / "x.array_record"],
        [f"{tmp_path}/shards/"],
        [tmp_path / "x.bin", "--to", "arrayrecord"],
    ):
        result = run_cli(capsys, "convert", source, *args)
        assert result.code == 0, result.err
        assert list(rk.open(args[0], format="arrayrecord")) == RECORDS


@pytest.mark.interop
def test_verify_salvages_into_arrayrecord(capsys, tmp_path):
    source = Path(write_array_record(tmp_path / "bad.array_record", RECORDS, "group_size:10"))
    with rk.open(source) as reader:
        frames = reader._frames[0]
        offsets, starts = list(frames.offsets), list(frames.starts)
    data = bytearray(source.read_bytes())
    data[offsets[2] + 50] ^= 1  # chunk 2's data: records 20 to 29
    source.write_bytes(bytes(data))
    (tmp_path / "out").mkdir()
    result = run_cli(
        capsys, "verify", source, "--salvage", tmp_path / "out" / "rescued.array_record"
    )
    assert result.code == 1
    assert "recovered 110 records" in result.out
    expected = RECORDS[: starts[2]] + RECORDS[starts[3] :]
    assert list(rk.open(tmp_path / "out" / "rescued.array_record")) == expected
    result = run_cli(capsys, "verify", source, "--salvage", tmp_path / "out" / "rescued.tfrecord")
    assert result.code == 2  # salvage writes the source's format, now that recordkit writes it
    assert not (tmp_path / "out" / "rescued.tfrecord").exists()


def test_help_names_every_registered_format(capsys):
    result = run_cli(capsys, "--help")
    assert result.code == 0
    text = " ".join(result.out.split())
    assert "arrayrecord, ffrecord, ofrecord, tfrecord" in text


@pytest.mark.interop
def test_the_package_name_array_record_names_the_format(capsys, tmp_path):
    path = write_array_record(tmp_path / "data.bin", RECORDS, "group_size:4")
    assert get_format("array_record") is get_format("arrayrecord")
    assert get_format("Array_Record").name == "arrayrecord"
    with rk.open(path, format="array_record") as reader:
        assert reader.format == "arrayrecord"
        assert list(reader) == RECORDS
    result = run_cli(capsys, "count", "--format", "array_record", path)
    assert result.code == 0
    assert result.out.split()[0] == str(len(RECORDS))
    result = run_cli(capsys, "convert", path, tmp_path / "x.tfrecord", "--to", "array_record")
    assert result.code == 0
    assert list(rk.open(tmp_path / "x.tfrecord", format="array_record")) == RECORDS


def test_a_name_close_to_a_format_suggests_it(capsys, tmp_path):
    with pytest.raises(rk.UnknownFormatError, match="did you mean 'tfrecord'"):
        get_format("TF-Record")
    with pytest.raises(rk.UnknownFormatError) as caught:
        get_format("parquet")
    assert "did you mean" not in str(caught.value)
