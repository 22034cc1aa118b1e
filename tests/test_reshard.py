"""Resharding (``recordkit.datasets.reshard``, ``recordkit reshard``): every record exactly once, balanced
shards, a deterministic shuffle whatever the sources' format, and no half dataset after an interruption."""

from __future__ import annotations

import dataclasses
import itertools
import os
import signal
import subprocess
import sys
import textwrap
from collections import Counter
from pathlib import Path

import pytest
from _cli import run_cli
from test_tfds import BASE_INFO, _tfds_dir

import recordkit as rk
from recordkit.datasets import ShardWriter, _framecopy, load_manifest, reshard, resharding
from recordkit.errors import RecordKitWarning
from recordkit.io.writer import scan_offsets

RECORDS = [b"record-%d-" % i + b"x" * (i % 13) for i in range(1000)]


def _sources(tmp_path, *, files=4, suffix=".tfrecord", records=RECORDS):
    """``files`` shards of uneven sizes; returns their glob."""
    folder = tmp_path / "in"
    folder.mkdir()
    cuts = [*[0, 100, 150, 700][:files], len(records)]
    for i, (start, stop) in enumerate(itertools.pairwise(cuts)):
        with rk.open(folder / f"in-{i}{suffix}", "w") as writer:
            writer.write_many(records[start:stop])
    return str(folder / f"in-*{suffix}")


def _read(dest):
    with rk.open(dest) as reader:
        return list(reader)


@pytest.mark.parametrize("shards", [1, 3, 4, 7])
def test_every_record_once_in_balanced_shards_in_order(tmp_path, shards):
    sources = _sources(tmp_path)
    manifest = reshard(sources, tmp_path / "out", shards=shards)
    counts = [shard.records for shard in manifest.shards]
    assert len(counts) == shards
    assert max(counts) - min(counts) <= 1
    assert _read(tmp_path / "out") == RECORDS  # no shuffle: the sources' order
    assert load_manifest(tmp_path / "out" / rk.datasets.MANIFEST_NAME) == manifest
    assert not [name for name in os.listdir(tmp_path) if name.startswith(".rk-")]


def test_fewer_records_than_shards_gives_no_empty_shard(tmp_path):
    sources = _sources(tmp_path, files=2, records=RECORDS[:5])
    with pytest.warns(RecordKitWarning, match="5 records, fewer than the 8 shards"):
        manifest = reshard(sources, tmp_path / "out", shards=8)
    assert [shard.records for shard in manifest.shards] == [1] * 5
    assert _read(tmp_path / "out") == RECORDS[:5]


def test_shuffle_is_one_permutation_for_a_seed_whatever_the_format(tmp_path):
    plain = _sources(tmp_path)
    out = {}
    for name, sources, memory in [
        ("indexed", plain, 1 << 30),
        ("small chunks", plain, 2000),
    ]:
        reshard(sources, tmp_path / name, shards=3, shuffle=True, seed=7, memory_bytes=memory)
        out[name] = _read(tmp_path / name)
    gz = tmp_path / "gz"
    gz.mkdir()
    for i, path in enumerate(sorted(rk.io.expand_sources(plain))):
        with rk.open(path) as reader, rk.open(gz / f"in-{i}.tfrecord.gz", "w") as writer:
            writer.write_many(reader)
    for name, memory in [("buckets", 1 << 30), ("buckets split again", 3000)]:
        manifest = reshard(gz, tmp_path / name, shards=3, shuffle=True, seed=7, memory_bytes=memory)
        assert manifest.compression == "gzip"
        out[name] = _read(tmp_path / name)
    first = out["indexed"]
    assert Counter(first) == Counter(RECORDS)
    assert first != RECORDS
    assert all(records == first for records in out.values())
    reshard(plain, tmp_path / "other", shards=3, shuffle=True, seed=8)
    assert _read(tmp_path / "other") != first


def test_cli_to_another_format_and_its_output(tmp_path, capsys):
    sources = _sources(tmp_path)
    result = run_cli(
        capsys, "reshard", sources, tmp_path / "ffr", "--shards", "3", "--to", "ffrecord"
    )
    assert result.code == 0, result.err
    assert result.out == f"wrote 1000 records to 3 ffrecord shards in {tmp_path / 'ffr'}\n"
    assert result.err == ""  # no progress bar when stderr is not a terminal
    assert sorted(os.listdir(tmp_path / "ffr")) == [
        "PART_00000.ffr",
        "PART_00001.ffr",
        "PART_00002.ffr",
        "_recordkit_manifest.json",
    ]
    assert _read(tmp_path / "ffr") == RECORDS
    # Back to TFRecord, shuffled, from the FFRecord dataset.
    args = ["reshard", tmp_path / "ffr", tmp_path / "tf", "--shards", "2", "--shuffle", "-q"]
    assert run_cli(capsys, *args, "--seed", "3").code == 0
    assert Counter(_read(tmp_path / "tf")) == Counter(RECORDS)


def test_cli_refuses_an_existing_destination_unless_forced(tmp_path, capsys):
    sources = _sources(tmp_path)
    (tmp_path / "out").mkdir()  # an empty directory is fine
    assert run_cli(capsys, "reshard", sources, tmp_path / "out", "--shards", "2", "-q").code == 0
    result = run_cli(capsys, "reshard", sources, tmp_path / "out", "--shards", "5")
    assert result.code == 2
    assert result.err == f"recordkit: error: {tmp_path / 'out'} exists; pass --force to overwrite\n"
    # In place: the dataset is its own source.
    args = ["reshard", tmp_path / "out", tmp_path / "out", "--shards", "5", "--force", "-q"]
    assert run_cli(capsys, *args).code == 0
    assert len(load_manifest(tmp_path / "out" / rk.datasets.MANIFEST_NAME).shards) == 5
    assert _read(tmp_path / "out") == RECORDS
    assert sorted(os.listdir(tmp_path)) == ["in", "out"]


def test_force_replaces_only_a_directory_holding_a_dataset_and_nothing_else(tmp_path, capsys):
    sources = _sources(tmp_path)  # tmp_path/in
    (tmp_path / "notes.txt").write_text("mine")
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    # The directory that holds the sources (and a user's file) is not a dataset: never deleted.
    result = run_cli(capsys, "reshard", sources, tmp_path, "--shards", "2", "--force")
    assert result.code == 2
    assert "holds files that are not a recordkit dataset's" in result.err
    # Nor is a file, and refusing leaves nothing behind.
    result = run_cli(capsys, "reshard", sources, tmp_path / "notes.txt", "--shards", "2", "--force")
    assert result.code == 2
    assert "is not a directory" in result.err
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before
    # A dataset directory with a file of the user's beside the dataset is not replaced either.
    assert run_cli(capsys, "reshard", sources, tmp_path / "out", "--shards", "2", "-q").code == 0
    (tmp_path / "out" / "README").write_text("mine")
    with pytest.raises(rk.errors.OutputExistsError, match="README"):
        rk.datasets.reshard(sources, tmp_path / "out", shards=3, overwrite=True)
    assert (tmp_path / "out" / "README").read_text() == "mine"
    assert _read(tmp_path / "out") == RECORDS


def test_cli_split_of_a_tfds_directory(tmp_path, capsys):
    directory = _tfds_dir(tmp_path / "tfds", BASE_INFO)
    with rk.open(directory, split="train") as reader:
        train = list(reader)
    args = ["reshard", directory, tmp_path / "out", "--shards", "2", "--split", "train", "-q"]
    assert run_cli(capsys, *args).code == 0
    manifest = load_manifest(tmp_path / "out" / rk.datasets.MANIFEST_NAME)
    assert [(s.records, s.split) for s in manifest.shards] == [(3, "train"), (2, "train")]
    assert len(train) == 5
    assert Counter(_read(tmp_path / "out")) == Counter(train)
    result = run_cli(capsys, "reshard", directory, tmp_path / "both", "--shards", "2")
    assert result.code == 2
    assert "--split" in result.err


@pytest.mark.parametrize("path", ["frames copied", "records written again"])
def test_an_error_mid_way_leaves_nothing_and_a_rerun_succeeds(tmp_path, monkeypatch, path):
    sources = _sources(tmp_path)
    if path == "frames copied":  # TFRecord to TFRecord, in order: the frames are copied as they are
        finished, owner, name = [], _framecopy._OpenShard, "finish"
    else:
        finished, owner, name = [], ShardWriter, "end_shard"
    original = getattr(owner, name)

    def fail_second(self, *args):
        result = original(self, *args)
        finished.append(result)
        if len(finished) == 2:
            raise OSError("disk full")
        return result

    monkeypatch.setattr(owner, name, fail_second)
    with pytest.raises(OSError, match="disk full"):
        reshard(
            sources,
            tmp_path / "out",
            shards=3,
            format=None if path == "frames copied" else "ofrecord",
        )
    assert finished, "the failure was injected where the reshard does not pass"
    assert sorted(os.listdir(tmp_path)) == ["in"]
    monkeypatch.undo()
    reshard(sources, tmp_path / "out", shards=3)
    assert _read(tmp_path / "out") == RECORDS


@pytest.mark.parametrize("block", [7, 100, 16 << 20])
def test_copied_frames_make_the_dataset_writing_the_records_makes(tmp_path, monkeypatch, block):
    """The frame copy (TFRecord to TFRecord in order) against the general path: the same shard files,
    indexes and manifest entries (but the fingerprints, which name inodes). Blocks of 7 and 100 bytes
    cut records (of 24 to 36 bytes), and hold none or several."""
    monkeypatch.setattr(_framecopy, "BLOCK", block)
    sources = str(tmp_path / "in")
    with ShardWriter(
        os.path.join(sources, "part-{shard}.tfrecord"),
        max_records=300,
        split="train",
        schema={"label": "int64"},
    ) as writer:
        writer.write_many(RECORDS)
    copied = reshard(sources, tmp_path / "copied", shards=3, split="train")
    monkeypatch.setattr(resharding, "_copies_frames", lambda *args: False)
    written = reshard(sources, tmp_path / "written", shards=3, split="train")

    def described(manifest):
        return [dataclasses.replace(shard, fingerprint=None) for shard in manifest.shards]

    assert described(copied) == described(written)
    assert copied.schema == written.schema == {"label": "int64"}
    assert {shard.split for shard in copied.shards} == {"train"}
    for root, _, names in os.walk(tmp_path / "written"):
        for name in names:
            mine = os.path.join(root, name)
            theirs = os.path.join(tmp_path / "copied", os.path.relpath(mine, tmp_path / "written"))
            if name != rk.datasets.MANIFEST_NAME:
                assert Path(mine).read_bytes() == Path(theirs).read_bytes(), name


def test_a_damaged_frame_stops_the_copy_naming_file_record_and_offset(tmp_path):
    sources = _sources(tmp_path)
    victim = tmp_path / "in" / "in-2.tfrecord"
    data = bytearray(victim.read_bytes())
    offset = scan_offsets(victim, format="tfrecord")[300]  # the 301st record of this file
    data[offset + 14] ^= 0xFF  # inside the payload
    victim.write_bytes(bytes(data))
    with pytest.raises(rk.errors.ChecksumError) as read, rk.open(victim) as reader:
        list(reader)
    with pytest.raises(rk.errors.ChecksumError) as caught:
        reshard(sources, tmp_path / "out", shards=3)
    assert caught.value.path == str(victim)
    assert caught.value.index == read.value.index == 300
    assert offset < caught.value.offset == read.value.offset < offset + 20
    assert sorted(os.listdir(tmp_path)) == ["in"]


KILLED = """
import os, signal, sys
from recordkit.datasets import reshard

def progress(records, total):
    for i, record in enumerate(records):
        if i == int(sys.argv[3]):
            os.kill(os.getpid(), signal.SIGKILL)
        yield record

reshard(sys.argv[1], sys.argv[2], shards=3, progress=progress, overwrite=True)
"""


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
def test_a_killed_reshard_leaves_no_half_dataset(tmp_path):
    sources = _sources(tmp_path)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}

    def killed(dest, after):
        args = [sys.executable, "-c", textwrap.dedent(KILLED), sources, str(dest), str(after)]
        done = subprocess.run(args, env=env, check=False, capture_output=True)
        assert done.returncode == -signal.SIGKILL, done.stderr

    killed(tmp_path / "new", 700)  # after the first shard was finished
    assert (tmp_path / ".rk-reshard-new").is_dir()  # what it left, beside the destination
    with pytest.raises(FileNotFoundError):
        rk.open(tmp_path / "new")
    reshard(sources, tmp_path / "new", shards=3)
    assert _read(tmp_path / "new") == RECORDS
    assert sorted(os.listdir(tmp_path)) == ["in", "new"]
    # Replacing a dataset: killed, the old one is still whole.
    reshard(sources, tmp_path / "old", shards=2, shuffle=True)
    before = _read(tmp_path / "old")
    killed(tmp_path / "old", 400)
    assert _read(tmp_path / "old") == before


def test_bad_arguments(tmp_path):
    sources = _sources(tmp_path)
    with pytest.raises(ValueError, match="at least 1"):
        reshard(sources, tmp_path / "out", shards=0)
    with pytest.raises(ValueError, match="local directory"):
        reshard(sources, "s3://bucket/out", shards=2)
    with pytest.raises(FileNotFoundError):
        reshard(tmp_path / "missing", tmp_path / "out", shards=2)
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "x").write_bytes(b"")
    with pytest.raises(FileExistsError) as caught:
        reshard(sources, tmp_path / "out", shards=2)
    assert caught.value.path == str(tmp_path / "out")


def test_dask_recipe_repartitions_through_the_writers(tmp_path):
    """docs/datasets.md's recipe for a dataset larger than one machine: read_records, repartition,
    write_records, on a LocalCluster."""
    pytest.importorskip("dask.bag")
    distributed = pytest.importorskip("distributed")
    import recordkit.integrations.dask as rkd

    sources = _sources(tmp_path)
    with (
        distributed.LocalCluster(n_workers=1, processes=False, dashboard_address=":0") as cluster,
        distributed.Client(cluster),
    ):
        bag = rkd.read_records(sources)
        manifest = rkd.write_records(
            bag.repartition(npartitions=2), tmp_path / "out", format="tfrecord"
        )
    assert len(manifest.shards) == 2
    assert Counter(_read(tmp_path / "out")) == Counter(RECORDS)


def test_copying_frames_holds_a_few_blocks_whatever_the_dataset_size(tmp_path, monkeypatch):
    import tracemalloc

    monkeypatch.setattr(_framecopy, "BLOCK", 1 << 16)
    record = bytes(range(256)) * 4
    _sources(tmp_path, files=2, records=[record] * 16000)  # 16 MB
    tracemalloc.start()
    try:
        reshard(str(tmp_path / "in"), tmp_path / "out", shards=1)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 << 20, peak  # the blocks, and the index of 16,000 offsets being formatted
    assert _read(tmp_path / "out") == [record] * 16000
