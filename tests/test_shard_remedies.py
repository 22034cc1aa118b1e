"""Every entry point that finds a changed shard says so in the same words, with the remedy that fits what
lists the shard: TFDS's for a tensorflow-datasets directory, recordkit's manifest tools for a manifest."""

from __future__ import annotations

import os

import pytest
from _cli import run_cli
from _data_files import write_tfds_directory

import recordkit as rk
from recordkit.data import Dataset

TFDS_REMEDY = "restore the shard, or prepare the dataset again with tfds"
MANIFEST_REMEDY = "recordkit manifest build describes it again"


def _tfds_with_a_lost_record(tmp_path):
    files = {
        "toy-train.tfrecord-00000-of-00002": [b"a%d" % i for i in range(3)],
        "toy-train.tfrecord-00001-of-00002": [b"b%d" % i for i in range(3)],  # dataset_info says 4
    }
    return write_tfds_directory(tmp_path / "toy", files, {"train": [3, 4]})


def _manifest_with_a_lost_record(tmp_path):
    directory = tmp_path / "ds"
    pattern = os.fspath(directory / "part-{shard:02d}.tfrecord")
    with rk.ShardWriter(pattern, max_records=4) as writer:
        writer.write_many(b"r%d" % i for i in range(8))
    shard = directory / "part-01.tfrecord"
    with rk.open(shard) as reader:
        kept = list(reader)[:-1]
    shard.unlink()
    with rk.open(shard, "w") as writer:
        writer.write_many(kept)
    return directory


def _read_all(reader):
    with reader:
        return list(reader)


def _read_last(reader):
    with reader:
        return reader[len(reader) - 1]


def _read_map_dataset(dataset):
    return [dataset[i] for i in range(len(dataset))]


def _messages(directory, split):
    """What each reading entry point says about the dataset."""
    readers = {
        "open": lambda: _read_all(rk.open(directory, split=split)),
        "open[i]": lambda: _read_last(rk.open(directory, split=split)),
        "Dataset": lambda: list(Dataset(directory, split=split)),
    }
    messages = {}
    for name, read in readers.items():
        with pytest.raises(rk.ManifestError) as caught:
            read()
        messages[name] = str(caught.value)
    return messages


def test_every_reader_gives_tfds_remedy_for_a_tfds_directory(tmp_path):
    directory = _tfds_with_a_lost_record(tmp_path)
    for name, message in _messages(directory, "train").items():
        assert "dataset_info.json says 4" in message, name
        assert TFDS_REMEDY in message, name
        assert "manifest build" not in message, name
        assert "--salvage" not in message, name


def test_dataset_and_open_say_the_same_for_a_tfds_directory(tmp_path):
    directory = _tfds_with_a_lost_record(tmp_path)
    messages = _messages(directory, "train")
    assert messages["Dataset"] == messages["open"]


def test_every_reader_gives_manifest_remedy_for_a_manifest(tmp_path):
    directory = _manifest_with_a_lost_record(tmp_path)
    for name, message in _messages(directory, None).items():
        assert "the manifest says" in message, name
        assert MANIFEST_REMEDY in message, name
        assert "tfds" not in message, name


def test_map_dataset_gives_tfds_remedy(tmp_path):
    pytest.importorskip("torch")
    from recordkit.integrations.torch import MapDataset

    directory = _tfds_with_a_lost_record(tmp_path)
    dataset = MapDataset(directory, split="train")
    with pytest.raises(rk.ManifestError) as caught:
        _read_map_dataset(dataset)
    assert TFDS_REMEDY in str(caught.value)
    assert "manifest build" not in str(caught.value)


def test_cli_commands_give_tfds_remedy(capsys, tmp_path):
    directory = _tfds_with_a_lost_record(tmp_path)
    for command in (["verify", directory], ["count", directory], ["cat", directory]):
        result = run_cli(capsys, *command)
        assert result.code == 1, command
        text = result.out + result.err
        assert "dataset_info.json says 4" in text, command
        assert TFDS_REMEDY in text, command
        assert "manifest build" not in text, command
