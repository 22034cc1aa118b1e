"""A shard replaced by another file of the same size is reported by every reader, never read as records.

The manifest records each shard's fingerprint (modification time and inode). While a shard has it, the
manifest's count and index are used without walking the record headers; otherwise the headers are walked
before the first random access and any disagreement with the manifest is a ManifestError.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import recordkit as rk
from recordkit import datasets as shards
from recordkit.compat import ffrecord
from recordkit.data import Dataset
from recordkit.datasets import MANIFEST_NAME, Manifest
from recordkit.formats.sequential import SequentialFrameReader
from tests._cli import run_cli

PATTERN = "train-{shard:05d}-of-{num_shards:05d}"


def MapDataset(*args: Any, **kwargs: Any) -> Any:
    """recordkit.integrations.torch.MapDataset, or a skip where PyTorch is not installed."""
    pytest.importorskip("torch")
    from recordkit.integrations.torch import MapDataset as map_dataset

    return map_dataset(*args, **kwargs)


RECORDS = [bytes([65 + i]) * 32 for i in range(10)]  # b"AAA...", b"BBB...", ...: 5 per shard


def write_dataset(directory: Path, suffix: str = ".tfrecord") -> Path:
    """Two shards of five 32-byte records; return the path of the second shard."""
    with rk.ShardWriter(str(directory / (PATTERN + suffix)), max_records=5) as writer:
        writer.write_many(RECORDS)
    return directory / f"train-00001-of-00002{suffix}"


def tf_write(path: Path, records: list[bytes]) -> None:
    """Write a valid TFRecord file by an outside writer, TensorFlow, where it is installed (recordkit's
    own writer elsewhere, so that the checks still run in an install without TensorFlow)."""
    try:
        import tensorflow as tf
    except (
        ModuleNotFoundError
    ):  # written aside and moved in, so the index beside it stays, as TF leaves it
        aside = path.with_name("aside.tfrecord")
        with rk.open(aside, "w") as ours:
            ours.write_many(records)
        os.replace(aside, path)
        return
    with tf.io.TFRecordWriter(str(path)) as writer:
        for record in records:
            writer.write(record)


def replace_with_hidden_frame(shard: Path) -> None:
    """F1: three records (32, 128, 32 bytes); the 128-byte one holds a whole frame of b"E"*32 at byte 96.

    The manifest's index says record 2 of the shard (dataset record 7) is the frame at byte 96.
    """
    tf_write(shard, [b"E" * 32])  # the inner frame, as TensorFlow frames it
    inner = shard.read_bytes()
    # Record 1's frame starts at byte 48 and its payload at 60: the inner frame is 36 bytes into it.
    middle = b"x" * 36 + inner + b"y" * (128 - 36 - len(inner))
    tf_write(shard, [b"A" * 32, middle, b"C" * 32])
    assert shard.stat().st_size == 240
    data = shard.read_bytes()
    assert data[96 : 96 + len(inner)] == inner


def replace_with_four_records(shard: Path) -> None:
    """F2: four records of 44 bytes, the same 240 bytes."""
    tf_write(shard, [bytes([80 + i]) * 44 for i in range(4)])
    assert shard.stat().st_size == 240


def replace_with_moved_boundaries(shard: Path) -> None:
    """Five records again, of other lengths: the count matches, the index does not."""
    tf_write(shard, [b"a" * 16, b"b" * 48, b"c" * 32, b"d" * 32, b"e" * 32])
    assert shard.stat().st_size == 240


REPLACEMENTS = {
    "hidden frame": replace_with_hidden_frame,
    "four records": replace_with_four_records,
    "moved boundaries": replace_with_moved_boundaries,
}

ENTRY_POINTS: dict[str, Callable[[Path], Any]] = {
    "len": lambda d: len(rk.open(d)),
    "list": lambda d: list(rk.open(d)),
    "reader[7]": lambda d: rk.open(d)[7],
    "reader[6]": lambda d: rk.open(d)[6],
    "reader[8]": lambda d: rk.open(d)[8],
    "reader[-3]": lambda d: rk.open(d)[-3],
    "slice": lambda d: rk.open(d)[7:8],
    "read": lambda d: rk.open(d).read([7]),
    "read across shards": lambda d: rk.open(d).read([0, 9]),
    "MapDataset": lambda d: MapDataset(d)[7],
    "MapDataset batch": lambda d: MapDataset(d)[[1, 7]],
    "Dataset": lambda d: list(Dataset(d)),
    "Dataset.skip.take": lambda d: list(Dataset(d).skip(7).take(1)),
    "Dataset.shuffle global": lambda d: list(Dataset(d, seed=1).shuffle()),
    "Dataset.shuffle buffer": lambda d: list(Dataset(d, seed=1).shuffle(4)),
}


def iterate(directory: Path) -> list[bytes]:
    """Iterate a reader (``list(reader)`` would ask ``len(reader)`` first)."""
    return [record for record in rk.open(directory)]  # noqa: C416


ENTRY_POINTS["iterate"] = iterate


@pytest.mark.parametrize("replacement", REPLACEMENTS)
@pytest.mark.parametrize("entry", ENTRY_POINTS)
def test_a_same_size_replaced_shard_raises_manifest_error_everywhere(
    tmp_path: Path, replacement: str, entry: str
) -> None:
    shard = write_dataset(tmp_path)
    REPLACEMENTS[replacement](shard)
    read = ENTRY_POINTS[entry]
    with pytest.raises(rk.ManifestError) as info:
        read(tmp_path)
    error = info.value
    assert error.path is not None
    assert os.path.basename(error.path) == shard.name
    assert "the manifest" in str(error)
    if replacement == "moved boundaries":
        assert "record headers put record 0 at bytes 0-32" in str(error)
        assert "says bytes 0-48" in str(error)
    else:
        holds = 3 if replacement == "hidden frame" else 4
        assert f"holds {holds} records, but the manifest says 5" in str(error)


def test_the_replacement_is_a_valid_file_on_its_own(tmp_path: Path) -> None:
    """What the manifest reports is the manifest's disagreement, not damage: the file alone reads fine."""
    tf = pytest.importorskip("tensorflow")
    shard = write_dataset(tmp_path)
    replace_with_four_records(shard)
    assert list(rk.open(shard, index=False)) == [bytes([80 + i]) * 44 for i in range(4)]
    assert [r.numpy() for r in tf.data.TFRecordDataset(str(shard))] == list(
        rk.open(shard, index=False)
    )


@pytest.mark.parametrize("replacement", REPLACEMENTS)
def test_iteration_yields_no_record_of_a_replaced_shard(tmp_path: Path, replacement: str) -> None:
    """The replaced shard is compared with its manifest before any of its records is handed out."""
    shard = write_dataset(tmp_path)
    REPLACEMENTS[replacement](shard)
    records = iter(rk.open(tmp_path))
    seen = list(itertools.islice(records, 5))
    with pytest.raises(rk.ManifestError):
        next(records)
    assert seen == RECORDS[:5]  # the first shard, untouched, and nothing of the second


@pytest.mark.parametrize("replacement", REPLACEMENTS)
def test_cat_with_a_limit_prints_no_record_of_a_replaced_shard(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], replacement: str
) -> None:
    shard = write_dataset(tmp_path)
    REPLACEMENTS[replacement](shard)
    result = run_cli(capsys, "cat", "--raw", "--offset", "5", "--limit", "1", tmp_path)
    assert result.code == 1
    assert result.out == ""
    assert shard.name in result.err


@pytest.mark.parametrize("command", [["cat"], ["count"], ["verify"]])
def test_the_command_line_reports_the_replaced_shard(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: list[str]
) -> None:
    shard = write_dataset(tmp_path)
    replace_with_hidden_frame(shard)
    result = run_cli(capsys, *command, tmp_path)
    assert result.code != 0
    assert shard.name in result.out + result.err
    assert "holds 3 records, but the manifest says 5" in result.out + result.err
    assert "EEEE" not in result.out


def test_a_same_size_ffrecord_shard_with_another_count_raises_manifest_error(
    tmp_path: Path,
) -> None:
    shard = write_dataset(tmp_path, ".ffr")
    size = shard.stat().st_size  # 12 + 12 * 5 + 5 * 32 = 232
    with rk.open(shard, "w") as writer:  # 12 + 12 * 4 + 4 * 43 = 232: another N, the same size
        writer.write_many([bytes([80 + i]) * 43 for i in range(4)])
    assert shard.stat().st_size == size
    for read in (
        lambda: len(rk.open(tmp_path)),
        lambda: rk.open(tmp_path)[7],
        lambda: rk.open(tmp_path).read([5, 6]),
        lambda: list(rk.open(tmp_path)),
        lambda: ffrecord.FileReader(str(tmp_path)),
        lambda: MapDataset(tmp_path)[7],
        lambda: list(Dataset(tmp_path)),
    ):
        with pytest.raises(rk.ManifestError, match="holds 4 records, but the manifest says 5"):
            read()


# -- an unchanged dataset, a copied one, an old manifest ----------------------------------------------


@pytest.fixture
def walks(monkeypatch: pytest.MonkeyPatch) -> list[str | None]:
    """The record-header walks made (one entry, the file's path, per walk)."""
    made: list[str | None] = []
    scan = SequentialFrameReader.scan

    def counted(self: SequentialFrameReader) -> Any:
        made.append(self.path)
        return scan(self)

    monkeypatch.setattr(SequentialFrameReader, "scan", counted)
    return made


def read_everything(directory: Path) -> None:
    """Every entry point, each checked against the records written."""
    reader = rk.open(directory)
    assert len(reader) == 10
    assert reader[7] == RECORDS[7]
    assert reader[-1] == RECORDS[9]
    assert reader[3:8] == RECORDS[3:8]
    assert reader.read([9, 0, 5]) == [RECORDS[9], RECORDS[0], RECORDS[5]]
    assert list(reader) == RECORDS
    assert MapDataset(directory)[[7, 2]] == [RECORDS[7], RECORDS[2]]
    assert list(Dataset(directory)) == RECORDS
    assert list(Dataset(directory).skip(7).take(1)) == [RECORDS[7]]
    assert sorted(Dataset(directory, seed=3).shuffle()) == RECORDS


def test_an_unchanged_dataset_is_read_with_no_header_walk(
    tmp_path: Path, walks: list[str | None]
) -> None:
    write_dataset(tmp_path)
    walks.clear()  # the writer scans each shard it wrote to write its index
    read_everything(tmp_path)
    assert walks == []


@pytest.mark.parametrize("how", ["new times", "copied"])
def test_a_copied_or_touched_dataset_reads_correctly_after_one_walk_per_shard(
    tmp_path: Path, walks: list[str | None], how: str
) -> None:
    source = tmp_path / "source"
    source.mkdir()
    write_dataset(source)
    if how == "copied":  # another place: new inodes (copytree keeps the modification times)
        directory = tmp_path / "copy"
        shutil.copytree(source, directory)
    else:  # as after a copy to another machine: new modification times
        directory = source
        for name in os.listdir(directory):
            os.utime(directory / name, ns=(1_000_000_000, 2_000_000_000))
    walks.clear()
    reader = rk.open(directory)
    assert len(reader) == 10
    assert sorted(os.path.basename(p or "") for p in walks) == [
        "train-00000-of-00002.tfrecord",
        "train-00001-of-00002.tfrecord",
    ]
    assert reader[7] == RECORDS[7]
    assert reader.read([1, 8]) == [RECORDS[1], RECORDS[8]]
    assert len(walks) == 2  # each shard once per reader
    read_everything(directory)


def test_a_manifest_of_an_earlier_version_is_read_and_checked(
    tmp_path: Path, walks: list[str | None]
) -> None:
    shard = write_dataset(tmp_path)
    manifest_file = tmp_path / MANIFEST_NAME
    document = json.loads(manifest_file.read_text())
    for entry in document["shards"]:
        del entry["fingerprint"]
    manifest_file.write_text(json.dumps(document))
    walks.clear()
    assert all(s.fingerprint is None for s in shards.load_manifest(tmp_path).shards)
    read_everything(tmp_path)
    assert walks  # without a fingerprint the index is checked against the headers
    replace_with_hidden_frame(shard)
    with pytest.raises(rk.ManifestError, match="holds 3 records"):
        rk.open(tmp_path)[7]
    with pytest.raises(rk.ManifestError, match="holds 3 records"):
        MapDataset(tmp_path)[7]


def test_every_writer_records_the_fingerprint_of_the_file(tmp_path: Path) -> None:
    from recordkit.datasets import Fingerprint

    write_dataset(tmp_path)
    built = shards.build_manifest(tmp_path, save=False)
    for manifest in (shards.load_manifest(tmp_path), built):
        for shard in manifest.shards:
            assert shard.fingerprint == Fingerprint.of(os.stat(tmp_path / shard.path))
    ffr = tmp_path / "ffr"
    ffr.mkdir()
    write_dataset(ffr, ".ffr")
    for shard in shards.load_manifest(ffr).shards:
        assert shard.fingerprint == Fingerprint.of(os.stat(ffr / shard.path))


def test_the_fingerprint_round_trips_and_is_validated() -> None:
    from recordkit.datasets import Fingerprint

    document = {
        "kind": "recordkit.manifest",
        "version": 1,
        "format": "tfrecord",
        "compression": "none",
        "shards": [
            {
                "path": "a.tfrecord",
                "records": 1,
                "bytes": 17,
                "fingerprint": {"mtime_ns": -5, "inode": 7},
            }
        ],
    }
    manifest = Manifest.from_json(json.dumps(document))
    assert manifest.shards[0].fingerprint == Fingerprint(mtime_ns=-5, inode=7)
    assert Manifest.from_json(manifest.to_json()) == manifest
    for broken in (
        {"mtime_ns": 1},
        {"mtime_ns": "1", "inode": 1},
        {"mtime_ns": 1, "inode": -1},
        [],
    ):
        document["shards"][0]["fingerprint"] = broken  # type: ignore[index]
        with pytest.raises(rk.ManifestError, match="fingerprint"):
            Manifest.from_json(json.dumps(document))
