"""The command line reads its inputs as recordkit.open does (one resolution: recordkit.io.resolve_sources).

A dataset directory gives the shards its manifest lists for ``--split`` and nothing else, each checked
against its entry: a shard replaced since the manifest was written fails every reading command, as it
fails ``recordkit.open``, and shards left over from an earlier write are never read.
"""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path

import pytest
from _cli import run_cli
from _data_files import write_tfds_directory

import recordkit as rk

NEW = [b"new-0", b"new-1"]
OLD = [b"old-0", b"old-1", b"old-2", b"old-3"]


def _rewritten(directory: Path, suffix: str = ".tfrecord") -> Path:
    """Four shards no manifest lists, then the same pattern written with two: part-02 and part-03 are
    stale leftovers."""
    pattern = f"{directory}/part-{{shard:02d}}{suffix}"
    for records, manifest in ((OLD, False), (NEW, True)):
        with rk.ShardWriter(pattern, max_records=1, manifest=manifest) as writer:
            writer.write_many(records)
    assert (directory / f"part-03{suffix}").exists()
    return directory


def _replace_shard(directory: Path) -> None:
    with rk.open(directory / "part-01.tfrecord", "w") as writer:
        writer.write_many([b"replaced", b"and longer than before"])


def _raw_lines(out: str) -> list[bytes]:
    return [base64.b64decode(line) for line in out.splitlines()]


def _counts(out: str) -> dict[str, int]:
    return {line.split()[1]: int(line.split()[0]) for line in out.splitlines()}


def test_count_and_cat_read_only_the_shards_the_manifest_lists(tmp_path, capsys):
    directory = _rewritten(tmp_path / "ds")
    with rk.open(directory) as reader:
        expected = list(reader)
    assert expected == NEW
    count = run_cli(capsys, "count", directory)
    assert count.code == 0, count.err
    assert _counts(count.out) == {
        str(directory / "part-00.tfrecord"): 1,
        str(directory / "part-01.tfrecord"): 1,
        "total": 2,
    }
    cat = run_cli(capsys, "cat", "--raw", directory)
    assert cat.code == 0, cat.err
    assert _raw_lines(cat.out) == expected


def test_info_index_and_convert_read_only_the_listed_shards(tmp_path, capsys):
    directory = _rewritten(tmp_path / "ds")
    info = run_cli(capsys, "info", "--json", directory)
    assert info.code == 0, info.err
    (summary,) = [json.loads(line) for line in info.out.splitlines()]
    assert (summary["num_shards"], summary["records"], summary["manifest"]) == (2, 2, True)
    assert [(d["path"], d["records"]) for d in summary["shards"]] == [
        (str(directory / "part-00.tfrecord"), 1),
        (str(directory / "part-01.tfrecord"), 1),
    ]
    index = run_cli(capsys, "index", directory)
    assert index.code == 0, index.err
    assert "part-02" not in index.out
    assert "part-03" not in index.out
    converted = tmp_path / "all.tfrecord"
    convert = run_cli(capsys, "convert", "-q", directory, converted)
    assert convert.code == 0, convert.err
    assert list(rk.open(converted)) == NEW


@pytest.mark.parametrize(
    "command",
    [
        ("count",),
        ("cat", "--raw"),
        ("info",),
        ("index",),
        ("convert", "-q"),
    ],
)
def test_a_shard_replaced_after_the_manifest_fails_as_open_fails(tmp_path, capsys, command):
    directory = _rewritten(tmp_path / "ds")
    _replace_shard(directory)
    with pytest.raises(rk.ManifestError):
        rk.open(directory)
    args = [*command, directory]
    if command[0] == "convert":
        args.append(tmp_path / "out.tfrecord")
    result = run_cli(capsys, *args)
    assert result.code == 1
    report = result.out + result.err  # info reports a damaged file on stdout, in its place
    assert "ManifestError" in report
    assert re.search(r"the shard is \d+ bytes, but the manifest says", report)
    assert "part-01.tfrecord" in report
    if command[0] == "cat":
        assert result.out == ""  # nothing of the replaced shard, nor of the ones before it
    assert not (tmp_path / "out.tfrecord").exists()


def _two_splits(directory: Path) -> Path:
    for split, records in (("train", [b"t0", b"t1", b"t2"]), ("test", [b"e0"])):
        pattern = f"{directory}/{split}-{{shard}}.tfrecord"
        with rk.ShardWriter(pattern, max_records=2, split=split) as writer:
            writer.write_many(records)
    return directory


@pytest.mark.parametrize(
    "command", [("count",), ("cat", "--raw"), ("info",), ("index",), ("convert", "-q")]
)
def test_a_dataset_with_splits_needs_split_as_open_does(tmp_path, capsys, command):
    directory = _two_splits(tmp_path / "ds")
    with pytest.raises(rk.ManifestError, match="choose one with split="):
        rk.open(directory)
    args = [*command, directory]
    if command[0] == "convert":
        args.append(tmp_path / "out.tfrecord")
    result = run_cli(capsys, *args)
    assert result.code == 2
    assert "the dataset has the splits train, test: choose one with --split" in result.err
    assert result.out == ""
    missing = run_cli(capsys, *command, "--split", "nope", *args[len(command) :])
    assert missing.code == 2
    assert "no split 'nope'" in missing.err


def test_split_chooses_the_records_of_one_split(tmp_path, capsys):
    directory = _two_splits(tmp_path / "ds")
    count = run_cli(capsys, "count", "--split", "train", directory)
    assert count.code == 0, count.err
    assert _counts(count.out)["total"] == 3
    for split in ("train", "test"):
        cat = run_cli(capsys, "cat", "--raw", "--split", split, directory)
        assert cat.code == 0, cat.err
        assert _raw_lines(cat.out) == list(rk.open(directory, split=split))
    out = tmp_path / "test.tfrecord"
    convert = run_cli(capsys, "convert", "-q", "--split", "test", directory, out)
    assert convert.code == 0, convert.err
    assert list(rk.open(out)) == [b"e0"]


def test_split_on_files_that_are_not_a_dataset_is_a_usage_error(tmp_path, capsys):
    path = tmp_path / "plain.tfrecord"
    with rk.open(path, "w") as writer:
        writer.write(b"a")
    for command in (("count",), ("cat", "--raw")):
        result = run_cli(capsys, *command, "--split", "train", path)
        assert result.code == 2
        assert "--split='train' needs a dataset directory" in result.err


def test_a_directory_without_manifest_reads_every_file_as_before(tmp_path, capsys):
    directory = tmp_path / "plain"
    directory.mkdir()
    for i, record in enumerate(OLD):
        with rk.open(directory / f"part-{i}.tfrecord", "w") as writer:
            writer.write(record)
    count = run_cli(capsys, "count", directory)
    assert count.code == 0, count.err
    assert _counts(count.out)["total"] == 4
    cat = run_cli(capsys, "cat", "--raw", directory)
    assert _raw_lines(cat.out) == OLD


def _tfds(directory: Path) -> Path:
    """A tensorflow-datasets directory with a leftover shard of an earlier preparation."""
    files = {
        "toy-train.tfrecord-00000-of-00002": [b"t0", b"t1"],
        "toy-train.tfrecord-00001-of-00002": [b"t2", b"t3"],
        "toy-train.tfrecord-00002-of-00003": [b"stale"],
        "toy-test.tfrecord-00000-of-00001": [b"e0"],
    }
    return write_tfds_directory(directory, files, {"train": [2, 2], "test": [1]})


def test_a_tfds_split_reads_as_open_reads_it(tmp_path, capsys):
    directory = _tfds(tmp_path / "tfds")
    expected = list(rk.open(directory, split="train"))
    assert sorted(expected) == [b"t0", b"t1", b"t2", b"t3"]
    cat = run_cli(capsys, "cat", "--raw", "--split", "train", directory)
    assert cat.code == 0, cat.err
    assert _raw_lines(cat.out) == expected  # in recordkit.open's order
    out = tmp_path / "train.tfrecord"
    convert = run_cli(capsys, "convert", "-q", "--split", "train", directory, out)
    assert convert.code == 0, convert.err
    assert list(rk.open(out)) == expected
    count = run_cli(capsys, "count", "--split", "train", directory)
    assert _counts(count.out)["total"] == 4
    needs_split = run_cli(capsys, "count", directory)
    assert needs_split.code == 2


def test_verify_checks_every_split_of_a_tfds_directory(tmp_path, capsys):
    directory = _tfds(tmp_path / "tfds")
    result = run_cli(capsys, "verify", directory)
    assert result.code == 0, result.err
    assert "stale" not in result.out
    assert "00002-of-00003" not in result.out
    assert "toy-test.tfrecord-00000-of-00001" in result.out
    assert "toy-train.tfrecord-00001-of-00002" in result.out


def test_cat_reads_several_sources_as_one_list_as_open_does(tmp_path, capsys):
    """cat FILE... resolves its arguments together, as recordkit.open([...]) resolves a list: one
    sequence (--offset and --limit count in it), and a dataset among other sources is refused."""
    files = []
    for name, records in (("a", [b"a0", b"a1"]), ("b", [b"b0"])):
        files.append(tmp_path / f"{name}.tfrecord")
        with rk.open(files[-1], "w") as writer:
            writer.write_many(records)
    cat = run_cli(capsys, "cat", "--raw", *files)
    assert cat.code == 0, cat.err
    with rk.open(files) as reader:
        assert _raw_lines(cat.out) == list(reader) == [b"a0", b"a1", b"b0"]
    cat = run_cli(capsys, "cat", "--raw", "--offset", "1", "--limit", "1", files[1], files[0])
    assert _raw_lines(cat.out) == [b"a0"]
    dataset = _rewritten(tmp_path / "ds")
    cat = run_cli(capsys, "cat", "--raw", files[0], dataset)
    assert cat.code == 2
    assert "read on its own" in cat.err
    assert not cat.out


def test_options_may_come_between_sources(tmp_path, capsys, golden_dir):
    examples = golden_dir / "tfrecord" / "examples.tfrecord"
    one = golden_dir / "tfrecord" / "raw.tfrecord"
    with rk.open(examples) as a, rk.open(one) as b:
        total = len(a) + len(b)
    together = run_cli(capsys, "cat", "--raw", examples, one)
    assert together.code == 0, together.err
    between = run_cli(capsys, "cat", examples, "--raw", one)
    assert (between.code, between.out) == (0, together.out)
    with rk.ShardWriter(f"{tmp_path}/ds/train-{{shard}}.tfrecord", split="train") as writer:
        writer.write_many(NEW)
    cat = run_cli(capsys, "cat", tmp_path / "ds", "--raw", "--split", "train")
    assert (cat.code, _raw_lines(cat.out)) == (0, NEW), cat.err
    count = run_cli(capsys, "count", examples, "-q", one)
    assert count.code == 0
    assert count.out.splitlines()[-1].split() == [str(total), "total"]
    out = tmp_path / "out.ffr"
    convert = run_cli(capsys, "convert", examples, "--to", "ffrecord", one, out)
    assert convert.code == 0, convert.err
    with rk.open(out) as reader:
        assert len(reader) == total
    verify = run_cli(capsys, "verify", examples, "--decode", one)
    assert verify.code == 0, verify.err
    assert verify.out.splitlines()[-1] == "2 files: 2 OK, 0 bad"


def test_a_split_the_dataset_lacks_is_a_usage_error(tmp_path, capsys):
    directory = _rewritten(tmp_path / "ds")  # a dataset without splits
    for command in ("cat", "count", "verify"):
        result = run_cli(capsys, command, directory, "--split", "train")
        assert result.code == 2, (command, result.err)
        assert "no split 'train'" in result.err
