"""Every reading entry point resolves its sources the same way (recordkit.io.resolve_sources).

A directory can hold shards its manifest does not list (written without a manifest, by an older
recordkit, or copied in by hand: a rewrite deletes only what the old manifest named); every reader must
read the shards the manifest lists and nothing else, as ``recordkit.open`` does.
"""

from __future__ import annotations

import os
import pickle
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from _data_files import write_tfds_directory

import recordkit as rk
from recordkit.compat.ffrecord import FileReader
from recordkit.data import Dataset
from recordkit.datasets import MANIFEST_NAME
from recordkit.datasets.ranges import plan_reads, read_range
from recordkit.errors import UnsupportedOperationError
from recordkit.io import resolve_sources


def _map_dataset(*args: Any, **kwargs: Any) -> Any:
    """recordkit.integrations.torch.MapDataset, or a skip where PyTorch is not installed."""
    pytest.importorskip("torch")
    from recordkit.integrations.torch import MapDataset

    return MapDataset(*args, **kwargs)


NEW = [b"new-0", b"new-1"]
OLD = [b"old-0", b"old-1", b"old-2", b"old-3"]


def _rewritten(directory: Path) -> Path:
    """Four shards no manifest lists, then the same pattern written with two: part-02 and part-03 are
    stale leftovers."""
    pattern = f"{directory}/part-{{shard:02d}}.ffr"
    with rk.ShardWriter(pattern, max_records=1, manifest=False) as writer:
        writer.write_many(OLD)
    with rk.ShardWriter(pattern, max_records=1) as writer:
        writer.write_many(NEW)
    assert sorted(p.name for p in directory.glob("part-*.ffr")) == [
        f"part-0{i}.ffr" for i in range(4)
    ]
    return directory


def _plain(directory: Path) -> Path:
    """The same files without a manifest: every file is read."""
    directory.mkdir()
    for i, record in enumerate(OLD):
        with rk.open(directory / f"part-{i:02d}.ffr", "w") as writer:
            writer.write(record)
    return directory


def _via_open(source: Any) -> list[bytes]:
    with rk.open(source) as reader:
        return list(reader)


def _via_dataset(source: Any) -> list[bytes]:
    return [bytes(r) for r in Dataset(source)]


def _via_file_reader(source: Any) -> list[bytes]:
    reader = FileReader(source)
    try:
        return [bytes(sample) for sample in reader.read(range(reader.n))]
    finally:
        reader.close()


def _via_pickled_file_reader(source: Any) -> list[bytes]:
    reader = pickle.loads(pickle.dumps(FileReader(source)))
    try:
        return [bytes(reader.read_one(i)) for i in range(reader.n)]
    finally:
        reader.close()


def _via_map_dataset(source: Any) -> list[bytes]:
    dataset = _map_dataset(source)
    return [bytes(r) for r in dataset[list(range(len(dataset)))]]


def _via_resolved_files(source: Any) -> list[bytes]:
    return [record for path in resolve_sources(source).files for record in rk.open(path)]


def _via_plan_reads(source: Any) -> list[bytes]:
    return [r for item in plan_reads(source) for batch in read_range(item) for r in batch]


ENTRY_POINTS: dict[str, Callable[[Any], list[bytes]]] = {
    "open": _via_open,
    "Dataset": _via_dataset,
    "ffrecord.FileReader": _via_file_reader,
    "pickled FileReader": _via_pickled_file_reader,
    "MapDataset": _via_map_dataset,
    "resolve_sources().files": _via_resolved_files,
    "ray/dask plan_reads": _via_plan_reads,
}


@pytest.mark.parametrize("read", ENTRY_POINTS.values(), ids=ENTRY_POINTS.keys())
def test_every_entry_point_reads_only_the_shards_the_manifest_lists(tmp_path, read):
    directory = _rewritten(tmp_path)
    assert read(directory) == NEW
    assert read(os.fspath(directory)) == NEW
    assert read(directory / MANIFEST_NAME) == NEW  # the manifest file itself names the dataset
    assert read([directory]) == NEW  # a list of one source is that source


@pytest.mark.parametrize("read", ENTRY_POINTS.values(), ids=ENTRY_POINTS.keys())
def test_a_directory_without_manifest_still_reads_every_file(tmp_path, read):
    directory = _plain(tmp_path / "plain")
    assert read(directory) == OLD
    assert read([directory / "part-01.ffr", directory / "part-00.ffr"]) == [OLD[1], OLD[0]]


READERS = {name: read for name, read in ENTRY_POINTS.items() if name != "resolve_sources().files"}


@pytest.mark.parametrize("read", READERS.values(), ids=READERS.keys())
def test_a_replaced_shard_is_refused_by_every_reader(tmp_path, read):
    directory = _rewritten(tmp_path)
    with rk.open(directory / "part-01.ffr", "w") as writer:
        writer.write_many([b"replaced", b"longer than before"])
    with pytest.raises(rk.ManifestError, match="manifest says"):
        read(directory)


@pytest.mark.parametrize("read", ENTRY_POINTS.values(), ids=ENTRY_POINTS.keys())
def test_a_dataset_in_a_list_of_sources_is_refused(tmp_path, read):
    directory = _rewritten(tmp_path / "dataset")
    other = _plain(tmp_path / "plain")
    with pytest.raises(UnsupportedOperationError, match="read on its own"):
        read([other / "part-00.ffr", directory])


def _tfds(directory: Path) -> Path:
    """A tensorflow-datasets directory with a stale third train shard from an earlier preparation."""
    files = {
        "toy-train.tfrecord-00000-of-00002": [b"t0", b"t1"],
        "toy-train.tfrecord-00001-of-00002": [b"t2"],
        "toy-train.tfrecord-00000-of-00003": [b"stale-a"],
        "toy-train.tfrecord-00002-of-00003": [b"stale-b"],
        "toy-test.tfrecord-00000-of-00001": [b"e0"],
    }
    return write_tfds_directory(directory, files, {"train": [2, 1], "test": [1]})


def _via_map_dataset_split(directory: Path, split: str | None) -> list[bytes]:
    dataset = _map_dataset(directory, split=split)
    return [bytes(r) for r in dataset[list(range(len(dataset)))]]


TFDS_ENTRY_POINTS: dict[str, Callable[[Any, str | None], list[bytes]]] = {
    "open": lambda d, split: list(rk.open(d, split=split)),
    "Dataset": lambda d, split: [bytes(r) for r in Dataset(d, split=split)],
    "MapDataset": lambda d, split: _via_map_dataset_split(d, split),
    "resolve_sources().files": lambda d, split: [
        r
        for path in resolve_sources(d, split=split).files
        for r in rk.open(path, format="tfrecord")
    ],
}


@pytest.mark.parametrize("read", TFDS_ENTRY_POINTS.values(), ids=TFDS_ENTRY_POINTS.keys())
def test_every_entry_point_reads_a_tfds_split_as_its_info_lists_it(tmp_path, read):
    directory = _tfds(tmp_path / "tfds")
    assert sorted(read(directory, "train")) == [b"t0", b"t1", b"t2"]
    assert read(directory, "test") == [b"e0"]
    with pytest.raises(rk.ManifestError, match="choose one with split="):
        read(directory, None)


def test_the_ffrecord_reader_refuses_a_dataset_of_another_format(tmp_path):
    with pytest.raises(rk.ManifestError, match="choose one with split="):
        FileReader(_tfds(tmp_path / "tfds"))
    with rk.ShardWriter(f"{tmp_path}/tf/part-{{shard}}.tfrecord", max_records=1) as writer:
        writer.write_many([b"a", b"b"])
    with pytest.raises(rk.ManifestError, match="manifest says its shards are tfrecord"):
        FileReader(tmp_path / "tf")


def test_map_dataset_refuses_a_compressed_dataset(tmp_path):
    with rk.ShardWriter(f"{tmp_path}/part-{{shard}}.tfrecord.gz", max_records=1) as writer:
        writer.write_many([b"a", b"b"])
    with pytest.raises(UnsupportedOperationError, match="sequentially"):
        _map_dataset(tmp_path)


def _ofrecords(directory: Path, count: int, tag: str, manifest: bool = True) -> list[bytes]:
    """``count`` OFRecord payloads (one bytes feature each) written as OneFlow parts by a ShardWriter."""
    records = [rk.encode_ofrecord({"tag": f"{tag}-{i}".encode()}) for i in range(count)]
    pattern = f"{directory}/part-{{shard}}"
    with rk.ShardWriter(pattern, format="ofrecord", max_records=1, manifest=manifest) as w:
        w.write_many(records)
    return records


def test_the_oneflow_reader_refuses_a_part_the_manifest_does_not_list(tmp_path):
    from recordkit.compat.oneflow import OFRecordReader

    _ofrecords(tmp_path, 4, "old", manifest=False)
    new = _ofrecords(tmp_path, 2, "new")
    assert (tmp_path / "part-3").exists()  # left over from the first write, which no manifest lists
    reader = OFRecordReader(tmp_path, batch_size=1, data_part_num=2, seed=0)
    assert [r for batch in reader for r in batch] == new
    # A subset of the shards is read as OneFlow reads it.
    first = OFRecordReader(tmp_path, batch_size=1, data_part_num=1, seed=0)
    assert [r for batch in first for r in batch] == new[:1]
    with pytest.raises(rk.ManifestError, match="not one of the 2 shards") as caught:
        OFRecordReader(tmp_path, batch_size=1, data_part_num=4, seed=0)
    assert caught.value.path == f"{tmp_path}/part-2"


def test_the_oneflow_reader_checks_its_parts_against_the_manifest(tmp_path):
    from recordkit.compat.oneflow import OFRecordReader

    _ofrecords(tmp_path, 2, "new")
    (tmp_path / "part-1").write_bytes((tmp_path / "part-0").read_bytes() * 2)  # replaced
    reader = OFRecordReader(tmp_path, batch_size=1, data_part_num=2, seed=0)
    with pytest.raises(rk.ManifestError, match="manifest says"):
        list(reader)


def test_the_oneflow_reader_reads_parts_without_a_manifest_as_before(tmp_path):
    from recordkit.compat.oneflow import OFRecordReader

    records = [rk.encode_ofrecord({"i": [i]}) for i in range(3)]
    for i, record in enumerate(records):
        with rk.open(tmp_path / f"part-{i}", "w", format="ofrecord") as writer:
            writer.write(record)
    reader = OFRecordReader(tmp_path, batch_size=3, data_part_num=3, seed=0)
    assert list(reader) == [records]


def test_open_part_recount_counts_a_shard_from_its_own_headers(tmp_path):
    """The manifest's count makes len() free; recount=True counts the shard's headers instead and
    refuses a count that differs from the manifest's (what `recordkit count` reports)."""
    import json

    with rk.ShardWriter(f"{tmp_path}/part-{{shard:02d}}.tfrecord", max_records=3) as writer:
        writer.write_many([b"a", b"b", b"c", b"d"])
    manifest = tmp_path / MANIFEST_NAME
    document = json.loads(manifest.read_text())
    document["shards"][0]["records"] = 2  # the file is unchanged; only its entry is wrong
    document["records"] = 3
    manifest.write_text(json.dumps(document))
    resolved = resolve_sources(tmp_path)
    with resolved.open_part(1, recount=True) as reader:
        assert len(reader) == 1
    with resolved.open_part(0) as reader:
        assert len(reader) == 2  # the manifest's word, no header read
    with (
        resolved.open_part(0, recount=True) as reader,
        pytest.raises(rk.ManifestError, match="the shard holds 3 records, but the manifest says 2"),
    ):
        len(reader)


def test_a_directory_falls_back_to_files_without_a_record_suffix_only_when_it_has_no_record_file(
    tmp_path,
):
    """format= never makes a README or _SUCCESS beside record files of another format a record file."""
    tfrecords = tmp_path / "tfrecords"
    tfrecords.mkdir()
    with rk.open(tfrecords / "a.tfrecord", "w") as writer:
        writer.write_many(NEW)
    (tfrecords / "README").write_text("tfrecord files\n")
    (tfrecords / "_SUCCESS").write_bytes(b"")
    assert rk.io.expand_sources(tfrecords) == [os.fspath(tfrecords / "a.tfrecord")]
    with pytest.raises(FileNotFoundError, match="no ffrecord files") as info:
        rk.open(tfrecords, format="ffrecord")
    assert info.value.filename == os.fspath(tfrecords)
    # OneFlow's part-N files have no suffix: they are the fallback, Hadoop's _SUCCESS is left out.
    parts = tmp_path / "parts"
    parts.mkdir()
    for i, record in enumerate(OLD[:2]):
        with rk.open(parts / f"part-{i}", "w", format="tfrecord") as writer:
            writer.write(record)
    (parts / "_SUCCESS").write_bytes(b"")
    (parts / "features.json").write_text("{}")
    assert rk.io.expand_sources(parts) == [os.fspath(parts / "part-0"), os.fspath(parts / "part-1")]
    assert list(rk.open(parts)) == OLD[:2]
    assert list(rk.open(parts, format="tfrecord")) == OLD[:2]
