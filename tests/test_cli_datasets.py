"""``recordkit verify`` and ``manifest show`` on dataset directories: tensorflow-datasets directories are
checked against their ``dataset_info.json``, and ``verify DIR --salvage`` repairs a manifest dataset in place.
"""

from __future__ import annotations

import importlib.resources
import importlib.util
import json
import os
import shutil
import sys

import pytest
from _cli import run_cli

import recordkit as rk
from recordkit.datasets import MANIFEST_NAME, load_manifest
from recordkit.formats.tfrecord import frame

# -- tensorflow-datasets directories ----------------------------------------------------------------

TFDS_INFO = {
    "name": "toy",
    "version": "1.0.0",
    "fileFormat": "tfrecord",
    "splits": [
        {"name": "train", "shardLengths": ["3", "4"], "numBytes": "0"},
        {"name": "test", "shardLengths": ["2"], "numBytes": "0"},
    ],
}
TFDS_FILES = {
    "toy-train.tfrecord-00000-of-00002": 3,
    "toy-train.tfrecord-00001-of-00002": 4,
    "toy-test.tfrecord-00000-of-00001": 2,
}


def _write_examples(path, count):
    with rk.open(os.fspath(path), "w", format="tfrecord") as writer:
        writer.write_many(rk.encode_example({"id": i}) for i in range(count))


def _tfds_dir(directory):
    directory.mkdir()
    for name, count in TFDS_FILES.items():
        _write_examples(directory / name, count)
    (directory / "dataset_info.json").write_text(json.dumps(TFDS_INFO))
    return directory


def test_verify_checks_tfds_shard_lengths(capsys, tmp_path):
    directory = _tfds_dir(tmp_path / "toy")
    result = run_cli(capsys, "verify", directory)
    assert result.code == 0, result.out + result.err
    assert result.out.splitlines()[-1] == f"{directory}: 3 shards: 3 OK, 0 bad"
    # A train shard that lost its last record is still a valid file: only dataset_info.json tells.
    lost = directory / "toy-train.tfrecord-00001-of-00002"
    _write_examples(lost, 3)
    result = run_cli(capsys, "verify", directory)
    assert result.code == 1
    assert f"{lost}: CORRUPT: the shard holds 3 records, but dataset_info.json says 4" in result.out
    assert result.out.splitlines()[-1] == f"{directory}: 3 shards: 2 OK, 1 bad"
    # The remedy is TFDS's, not recordkit's manifest tools.
    assert "manifest build describes" not in result.out
    assert "prepare the dataset again with tfds" in result.out


def test_reading_a_changed_tfds_shard_names_dataset_info_and_tfds(tmp_path):
    directory = _tfds_dir(tmp_path / "toy")
    _write_examples(directory / "toy-train.tfrecord-00001-of-00002", 3)
    with pytest.raises(rk.ManifestError) as caught:
        list(rk.open(directory, split="train"))
    message = str(caught.value)
    assert "holds 3 records, but dataset_info.json says 4" in message
    assert "tfds" in message
    assert "recordkit manifest build" not in message


def test_a_missing_tfds_shard_is_reported(capsys, tmp_path):
    directory = _tfds_dir(tmp_path / "toy")
    (directory / "toy-test.tfrecord-00000-of-00001").unlink()
    result = run_cli(capsys, "verify", directory)
    assert result.code == 1
    assert "toy-test.tfrecord-00000-of-00001 listed in dataset_info.json is missing" in result.err


def test_manifest_show_describes_a_tfds_directory(capsys, tmp_path):
    directory = _tfds_dir(tmp_path / "toy")
    result = run_cli(capsys, "manifest", "show", directory)
    assert result.code == 0, result.err
    lines = result.out.splitlines()
    assert lines[0] == (
        f"{directory}: tensorflow-datasets toy 1.0.0 (dataset_info.json): 3 shards, 9 records, "
        "tfrecord (uncompressed), splits train, test"
    )
    assert [line.split()[0] for line in lines[1:]] == ["3", "4", "2"]
    assert lines[2].endswith("toy-train.tfrecord-00001-of-00002  [train]")
    shown = json.loads(run_cli(capsys, "manifest", "show", directory, "--json").out)
    assert [shard["records"] for shard in shown["shards"]] == [3, 4, 2]
    assert shown["metadata"]["tfds"]["name"] == "toy"


def test_salvage_is_refused_for_a_tfds_directory(capsys, tmp_path):
    directory = _tfds_dir(tmp_path / "toy")
    result = run_cli(capsys, "verify", directory, "--salvage")
    assert result.code == 2
    assert "dataset_info.json" in result.err
    assert "tfds" in result.err


@pytest.fixture(scope="module")
def tfds_prepared(tmp_path_factory):
    """A dataset prepared by tfds itself: the oracle for what dataset_info.json says."""
    tfds = pytest.importorskip("tensorflow_datasets")
    with pytest.MonkeyPatch.context() as patch:
        if importlib.util.find_spec("importlib_resources") is None:
            patch.setitem(sys.modules, "importlib_resources", importlib.resources)
        builder = tfds.testing.DummyDatasetSharedGenerator(
            data_dir=os.fspath(tmp_path_factory.mktemp("tfds"))
        )
        builder.download_and_prepare(download_config=tfds.download.DownloadConfig(num_shards=3))
    return builder


@pytest.mark.interop
def test_verify_catches_a_record_lost_from_a_shard_tfds_prepared(capsys, tfds_prepared, tmp_path):
    directory = tmp_path / "copy"
    shutil.copytree(tfds_prepared.data_dir, directory)
    result = run_cli(capsys, "verify", directory)
    assert result.code == 0, result.out + result.err
    split = tfds_prepared.info.splits["train"]
    victim = directory / split.filenames[1]
    with rk.open(victim) as reader:
        kept = list(reader)[:-1]
    with rk.open(victim, "w") as writer:
        writer.write_many(kept)
    result = run_cli(capsys, "verify", directory)
    assert result.code == 1
    expected = split.shard_lengths[1]
    assert (
        f"{victim}: CORRUPT: the shard holds {expected - 1} records, but dataset_info.json says "
        f"{expected}"
    ) in result.out


# -- verify DIR --salvage: repairing a manifest dataset in place --------------------------------------


def _dataset(tmp_path):
    directory = tmp_path / "ds"
    with rk.ShardWriter(os.fspath(directory / "part-{shard:02d}.tfrecord"), max_records=10) as w:
        w.write_many(b"rec%03d" % i for i in range(30))
    return directory


def _damage_record(path, number, length=6):
    """Flip a payload byte of record ``number`` (every record is ``length`` bytes)."""
    data = bytearray(path.read_bytes())
    data[(length + 16) * number + 12 + 2] ^= 0xFF
    path.write_bytes(bytes(data))


def test_verify_salvage_repairs_a_dataset_in_place(capsys, tmp_path):
    directory = _dataset(tmp_path)
    shard = directory / "part-01.tfrecord"
    _damage_record(shard, 3)
    with pytest.raises(rk.ChecksumError):
        list(rk.open(directory))
    result = run_cli(capsys, "verify", directory, "--salvage")
    assert result.code == 1  # corrupt data was found (and repaired)
    assert f"{shard}: CORRUPT: record 3 at byte 78: payload checksum mismatch" in result.out
    assert f"salvaged {shard}: recovered 9 records; skipped 1 damaged range" in result.out
    assert (
        f"the damaged original is kept as {directory / '.part-01.tfrecord.damaged'}" in result.out
    )
    # No further step: the directory reads the intact records, at random too, and verifies clean.
    expected = [b"rec%03d" % i for i in range(30) if i != 13]
    with rk.open(directory) as reader:
        assert len(reader) == 29
        assert list(reader) == expected
        assert reader[13] == b"rec014"
    result = run_cli(capsys, "verify", directory)
    assert result.code == 0, result.out
    # The original is kept aside, hidden; the shard's index and entry were rebuilt.
    assert (directory / ".part-01.tfrecord.damaged").exists()
    entry = load_manifest(directory).shards[1]
    assert (entry.path, entry.records, entry.index.path) == (  # type: ignore[union-attr]
        "part-01.tfrecord",
        9,
        ".part-01.tfrecord.idx",
    )
    assert sorted(os.listdir(directory)) == sorted(
        [MANIFEST_NAME, ".part-01.tfrecord.damaged"]
        + [f"part-0{i}.tfrecord" for i in range(3)]
        + [f".part-0{i}.tfrecord.idx" for i in range(3)]
    )


def test_salvage_repairs_several_kinds_of_damage_at_once(capsys, tmp_path):
    directory = _dataset(tmp_path)
    (directory / ".part-00.tfrecord.damaged").write_bytes(b"kept from an earlier repair")
    _damage_record(directory / "part-00.tfrecord", 0)
    # A shard rewritten by another tool, intact but not what the manifest says, beside its old index.
    (directory / "part-02.tfrecord").write_bytes(frame(b"new-a") + frame(b"new-b"))
    result = run_cli(capsys, "verify", directory, "--salvage")
    assert result.code == 1
    assert "its records are intact; entry and index described again" in result.out
    assert (directory / ".part-00.tfrecord.damaged-1").exists()  # the earlier one is not replaced
    with rk.open(directory) as reader:
        assert list(reader) == [b"rec%03d" % i for i in range(1, 20)] + [b"new-a", b"new-b"]
    assert run_cli(capsys, "verify", directory).code == 0


def test_salvage_leaves_a_missing_shard_listed(capsys, tmp_path):
    directory = _dataset(tmp_path)
    (directory / "part-01.tfrecord").unlink()
    result = run_cli(capsys, "verify", directory, "--salvage")
    assert result.code == 1
    assert "missing, not repaired" in result.out
    with pytest.raises(rk.ManifestError, match="missing"):
        rk.open(directory)


def test_salvage_option_forms(capsys, tmp_path, golden_dir):
    directory = _dataset(tmp_path)
    result = run_cli(capsys, "verify", directory, "--salvage", tmp_path / "out.tfrecord")
    assert result.code == 2
    assert "repaired in place" in result.err
    result = run_cli(capsys, "verify", golden_dir / "tfrecord" / "truncated.tfrecord", "--salvage")
    assert result.code == 2
    assert "--salvage OUT" in result.err
    assert run_cli(capsys, "verify", directory, "--salvage").code == 0  # nothing to repair


def test_verify_tags_a_shard_whose_content_changed_as_the_readers_would(capsys, tmp_path):
    """Same size, count and record boundaries, other bytes: only the SHA-256 tells; the line says how."""
    directory = _dataset(tmp_path)
    shard = directory / "part-01.tfrecord"
    records = list(rk.open(shard))
    aside = tmp_path / "aside.tfrecord"
    with rk.open(aside, "w") as writer:
        writer.write_many(bytes(len(record)) for record in records)
    os.replace(aside, shard)
    result = run_cli(capsys, "verify", directory)
    assert result.code == 1
    assert (
        f"{shard}: CORRUPT: its SHA-256 differs from the manifest's: the content changed "
        "[ManifestError]\n"
    ) in result.out
    assert f"{directory}: 3 shards: 2 OK, 1 bad" in result.out
