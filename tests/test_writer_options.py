"""``options=``, a format's writer option string, reaches the writer at every entry point that makes one.

Each entry point writes ArrayRecord with options that are not the defaults (``group_size:7,snappy``), and
array_record's own ``ArrayRecordReader`` checks the records and the options its footer records (the string
``ArrayRecordWriter`` itself records for the same options). A format that takes no options refuses them with
:class:`~recordkit.errors.OptionsError` at every entry point, before anything is written. The Ray and Dask
writers are tested in test_ray.py and test_dask.py.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from _array_record import array_record_module, write_array_record
from _cli import run_cli
from _data_files import write_tfds_directory

import recordkit as rk
from recordkit.datasets import reshard, write_shard
from recordkit.datasets.tfds import convert_tfds
from recordkit.errors import OptionsError
from recordkit.io import check_writer

OPTIONS = "group_size:7,snappy"
RECORDS = [b"record %d " % i * (i % 9) for i in range(40)]


def check_array_record(paths: list[Path], records: list[bytes], options: str = OPTIONS) -> None:
    """The files hold ``records`` in order, and each footer records ``options`` as ArrayRecordWriter does."""
    module = array_record_module()
    expected = module.ArrayRecordReader(
        write_array_record(paths[0].parent / ".expected", [b""], options)
    )
    found = []
    for path in paths:
        reader = module.ArrayRecordReader(os.fspath(path))
        assert reader.writer_options_string() == expected.writer_options_string()
        found += list(reader.read_all())
        reader.close()
    expected.close()
    os.remove(paths[0].parent / ".expected")
    assert found == records


def shards(directory: Path) -> list[Path]:
    """The shard files of a dataset directory (a manifest's, or a TFDS directory's), in order."""
    found = rk.io.find_dataset(directory)
    assert found is not None
    return [directory / shard.path for shard in found[1].shards]


def test_shard_writer_and_write_shard(tmp_path):
    array_record_module()  # skips where array_record or cramjam is missing
    with rk.ShardWriter(tmp_path / "a" / "p-{shard}.array_record", max_records=15, options=OPTIONS):
        pass  # no record: no shard
    with rk.ShardWriter(
        tmp_path / "a" / "p-{shard}.array_record", max_records=15, options=OPTIONS
    ) as writer:
        writer.write_many(RECORDS)
    check_array_record(shards(tmp_path / "a"), RECORDS)
    assert len(writer.shards) == 3
    write_shard(RECORDS, tmp_path / "one.array_record", options=OPTIONS)
    check_array_record([tmp_path / "one.array_record"], RECORDS)


def test_reshard(tmp_path):
    array_record_module()  # skips where array_record or cramjam is missing
    with rk.open(tmp_path / "in.tfrecord", "w") as writer:
        writer.write_many(RECORDS)
    reshard(
        tmp_path / "in.tfrecord", tmp_path / "out", shards=2, format="arrayrecord", options=OPTIONS
    )
    check_array_record(shards(tmp_path / "out"), RECORDS)


def test_cli_convert_and_reshard(tmp_path, capsys):
    array_record_module()  # skips where array_record or cramjam is missing
    with rk.open(tmp_path / "in.tfrecord", "w") as writer:
        writer.write_many(RECORDS)
    args = ["--keep-payload", "--to", "arrayrecord", "--options", OPTIONS]
    result = run_cli(
        capsys, "convert", "-q", tmp_path / "in.tfrecord", tmp_path / "c", "--shards", "2", *args
    )
    assert result.code == 0, result.err
    check_array_record(shards(tmp_path / "c"), RECORDS)
    result = run_cli(
        capsys, "convert", "-q", tmp_path / "in.tfrecord", tmp_path / "x.array_record", *args
    )
    assert result.code == 0, result.err
    check_array_record([tmp_path / "x.array_record"], RECORDS)
    result = run_cli(
        capsys,
        "reshard",
        "-q",
        tmp_path / "c",
        tmp_path / "r",
        "--shards",
        "3",
        "--options",
        OPTIONS,
    )
    assert result.code == 0, result.err
    check_array_record(shards(tmp_path / "r"), RECORDS)


def test_convert_tfds(tmp_path, capsys):
    array_record_module()  # skips where array_record or cramjam is missing
    files = {
        "toy-train.tfrecord-00000-of-00002": RECORDS[:30],
        "toy-train.tfrecord-00001-of-00002": RECORDS[30:],
    }
    (tmp_path / "toy").mkdir()
    directory = write_tfds_directory(tmp_path / "toy" / "1.0.0", files, {"train": [30, 10]})
    convert_tfds(directory, tmp_path / "out", format="array_record", options=OPTIONS)
    check_array_record(shards(tmp_path / "out"), RECORDS)
    result = run_cli(
        capsys,
        "convert",
        "-q",
        directory,
        tmp_path / "cli",
        "--to",
        "arrayrecord",
        "--options",
        OPTIONS,
    )
    assert result.code == 0, result.err
    check_array_record(shards(tmp_path / "cli"), RECORDS)
    with pytest.raises(OptionsError, match="takes no writer options"):
        convert_tfds(directory, tmp_path / "no", format="tfrecord", options="zstd")
    assert not (tmp_path / "no").exists()


def test_hf_write(tmp_path):
    array_record_module()  # skips where array_record or cramjam is missing
    datasets = pytest.importorskip("datasets")
    data = datasets.Dataset.from_dict(
        {"raw": RECORDS}, features=datasets.Features({"raw": datasets.Value("binary")})
    )
    rk.hf.write(
        data, tmp_path, format="arrayrecord", max_records=15, payload="raw", options=OPTIONS
    )
    check_array_record(shards(tmp_path), RECORDS)


def test_a_format_without_options_refuses_them_everywhere(tmp_path, capsys):
    refused = pytest.raises(OptionsError, match="the tfrecord format takes no writer options")
    with refused:
        check_writer("tfrecord", options="zstd")
    with refused:
        rk.ShardWriter(tmp_path / "s" / "p-{shard}.tfrecord", options="zstd")
    with refused:
        write_shard(RECORDS, tmp_path / "one.tfrecord", options="zstd")
    with rk.open(tmp_path / "in.tfrecord", "w") as writer:
        writer.write_many(RECORDS)
    with refused:
        reshard(tmp_path / "in.tfrecord", tmp_path / "r", shards=2, options="zstd")
    result = run_cli(
        capsys, "convert", tmp_path / "in.tfrecord", tmp_path / "c.tfrecord", "--options", "zstd"
    )
    assert result.code == 2
    assert "the tfrecord format takes no writer options" in result.err
    assert sorted(os.listdir(tmp_path)) == ["in.tfrecord"]


def test_an_option_string_is_checked_before_anything_is_written(tmp_path):
    pytest.importorskip("cramjam")  # snappy, in OPTIONS
    with pytest.raises(OptionsError, match="group_size"):
        rk.ShardWriter(tmp_path / "p-{shard}.array_record", options="group_size:0")
    assert not os.listdir(tmp_path)
    check_writer("arrayrecord", options=OPTIONS)
