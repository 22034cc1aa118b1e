"""``recordkit count`` counts: a dataset's shards are counted from their record headers, as a lone file is,
and a shard whose count differs from its manifest entry (or ``dataset_info.json``) fails the command."""

from __future__ import annotations

import os

from _cli import run_cli
from _data_files import write_tfds_directory

import recordkit as rk


def _dataset(directory, suffix=".tfrecord"):
    pattern = os.fspath(directory / f"train-{{shard:05d}}-of-{{num_shards:05d}}{suffix}")
    with rk.ShardWriter(pattern, max_records=5) as writer:
        writer.write_many(b"rec%03d" % i for i in range(10))
    return sorted(directory.glob(f"train-*{suffix}"))


def _replace_with_same_size(path, records):
    """Write ``records`` records of the same total size over ``path`` (by another tool: no new index)."""
    size = path.stat().st_size
    framing = 16
    payloads = [b"r%d" % i for i in range(records - 1)]
    payloads.append(b"x" * (size - records * framing - sum(map(len, payloads))))
    replacement = path.with_name("replacement.tmp")
    with rk.open(replacement, "w", format="tfrecord") as writer:
        writer.write_many(payloads)
    assert replacement.stat().st_size == size
    os.replace(replacement, path)


def test_count_of_an_intact_dataset(capsys, tmp_path):
    shards = _dataset(tmp_path / "ds")
    result = run_cli(capsys, "count", tmp_path / "ds")
    assert result.code == 0, result.err
    assert result.out.splitlines() == [
        *(f"{5:>12}  {shard}" for shard in shards),
        f"{10:>12}  total",
    ]


def test_count_scans_a_shard_replaced_by_a_same_size_file(capsys, tmp_path):
    shards = _dataset(tmp_path / "ds")
    _replace_with_same_size(shards[1], 4)
    with rk.open(shards[1], format="tfrecord", index=False) as reader:
        assert len(reader) == 4  # what the file holds now, counted as a lone file
    result = run_cli(capsys, "count", tmp_path / "ds")
    assert result.code == 1
    assert f"{5:>12}  {shards[1]}" not in result.out
    assert result.out.splitlines()[0] == f"{5:>12}  {shards[0]}"
    assert (
        f"{shards[1]}: the shard holds 4 records, but the manifest says 5: it changed after the "
        "manifest was written (recordkit manifest build describes it again"
    ) in result.err
    assert result.err.rstrip().endswith("[ManifestError]")


def test_count_of_a_tfds_split_whose_shard_lost_a_record(capsys, tmp_path):
    files = {
        "toy-train.tfrecord-00000-of-00002": [b"a%d" % i for i in range(3)],
        "toy-train.tfrecord-00001-of-00002": [b"b%d" % i for i in range(3)],  # dataset_info says 4
        "toy-test.tfrecord-00000-of-00001": [b"c0", b"c1"],
    }
    directory = write_tfds_directory(tmp_path / "toy", files, {"train": [3, 4], "test": [2]})
    result = run_cli(capsys, "count", directory, "--split", "test")
    assert result.code == 0, result.err
    result = run_cli(capsys, "count", directory, "--split", "train")
    assert result.code == 1
    lost = directory / "toy-train.tfrecord-00001-of-00002"
    assert f"{lost}: the shard holds 3 records, but dataset_info.json says 4" in result.err
    assert "prepare the dataset again with tfds" in result.err
    assert "manifest build" not in result.err
    assert f"{4:>12}" not in result.out


def test_count_of_an_ffrecord_dataset_comes_from_each_header(capsys, tmp_path):
    shards = _dataset(tmp_path / "ds", suffix=".ffr")
    result = run_cli(capsys, "count", tmp_path / "ds")
    assert result.code == 0, result.err
    assert result.out.splitlines()[-1] == f"{10:>12}  total"
    # Another writer's file of the same name and another count: its header says 3.
    shards[0].unlink()
    with rk.open(shards[0], "w", format="ffrecord") as writer:
        writer.write_many([b"a", b"b", b"c"])
    result = run_cli(capsys, "count", tmp_path / "ds")
    assert result.code == 1
    assert f"{shards[0]}: " in result.err
    assert "[ManifestError]" in result.err
