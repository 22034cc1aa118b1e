"""What the command line reports: the index line of ``info``, one damage line for files and dataset shards,
``verify --split``, and payload detection that agrees with the decoders."""

from __future__ import annotations

import json
import os

import pytest
from _cli import run_cli
from _data_files import write_tfds_directory

import recordkit as rk
from recordkit._proto.tensorflow import example_pb2
from recordkit.decode.payloads import detect_payload
from recordkit.errors import StaleIndexWarning

# -- info: the index line says where random access gets its offsets --------------------------------


def _indexed_then_rewritten(path):
    """A file indexed by ``recordkit index``, then rewritten by another tool that left the index beside it."""
    with rk.open(path, "w") as writer:
        writer.write_many([b"a" * 10, b"b" * 20, b"c"])
    rewritten = path.with_name("other.tmp")
    with rk.open(rewritten, "w", format="tfrecord") as writer:
        writer.write_many([b"x" * 20, b"y" * 10, b"z"])  # the same size, other boundaries
    return rewritten


def test_info_says_a_stale_index_is_ignored(capsys, tmp_path):
    path = tmp_path / "f.tfrecord"
    rewritten = _indexed_then_rewritten(path)
    assert run_cli(capsys, "index", path).code == 0
    index = f"{path}.idx"
    result = run_cli(capsys, "info", path)
    assert result.code == 0, result.err
    assert f"  index        sidecar {index}" in result.out.splitlines()
    assert json.loads(run_cli(capsys, "info", "--json", path).out)["index_stale"] is None

    os.replace(rewritten, path)
    with pytest.warns(StaleIndexWarning), rk.open(path) as reader:
        assert len(reader) == 3  # random access ignores the index and scans the headers
    result = run_cli(capsys, "info", path)
    assert result.code == 0, result.err
    (line,) = [line for line in result.out.splitlines() if line.startswith("  index ")]
    assert line.startswith(f"  index        stale sidecar {index}, ignored (the sidecar index does")
    assert line.endswith("); offsets from a header scan")
    assert "StaleIndexWarning" not in result.err
    info = json.loads(run_cli(capsys, "info", "--json", path).out)
    assert info["index"] == index
    assert "does not match the file" in info["index_stale"]


# -- one damage line, for a file and for a dataset's shard ------------------------------------------


def test_verify_reports_damage_in_one_format_for_files_and_shards(capsys, tmp_path):
    directory = tmp_path / "ds"
    with rk.ShardWriter(os.fspath(directory / "part-{shard:02d}.tfrecord"), max_records=4) as w:
        w.write_many(b"rec%03d" % i for i in range(8))
    shard = directory / "part-01.tfrecord"
    data = bytearray(shard.read_bytes())
    data[(6 + 16) * 2 + 12] ^= 0xFF  # record 2's first payload byte
    shard.write_bytes(bytes(data))
    alone = run_cli(capsys, "verify", shard)
    assert alone.code == 1
    (line,) = alone.out.splitlines()
    assert line.startswith(
        f"{shard}: CORRUPT: record 2 at byte {(6 + 16) * 2 + 12}: payload checksum"
    )
    assert line.endswith(" [ChecksumError]")
    in_dataset = run_cli(capsys, "verify", directory)
    assert in_dataset.code == 1
    assert line in in_dataset.out.splitlines()
    info = run_cli(capsys, "info", shard)
    assert info.code == 1
    assert info.out.splitlines() == [line]


# -- verify --split ---------------------------------------------------------------------------------


def _tfds(tmp_path):
    files = {
        "toy-train.tfrecord-00000-of-00001": [b"a0", b"a1"],  # dataset_info.json says 3
        "toy-test.tfrecord-00000-of-00001": [b"c0", b"c1"],
    }
    return write_tfds_directory(tmp_path / "toy", files, {"train": [3], "test": [2]})


def test_verify_split_checks_only_that_split(capsys, tmp_path):
    directory = _tfds(tmp_path)
    test = run_cli(capsys, "verify", directory, "--split", "test")
    assert test.code == 0, test.out + test.err
    assert test.out.splitlines() == [
        f"{directory / 'toy-test.tfrecord-00000-of-00001'}: OK (2 records)",
        f"{directory}: 1 shards: 1 OK, 0 bad",
    ]
    train = run_cli(capsys, "verify", directory, "--split", "train")
    assert train.code == 1
    assert "toy-test" not in train.out
    every = run_cli(capsys, "verify", directory)
    assert every.code == 1
    assert every.out.splitlines()[-1] == f"{directory}: 2 shards: 1 OK, 1 bad"
    unknown = run_cli(capsys, "verify", directory, "--split", "validation")
    assert unknown.code == 2
    assert "no split 'validation'" in unknown.err


def test_verify_split_of_a_manifest_dataset(capsys, tmp_path):
    directory = tmp_path / "ds"
    for split in ("train", "test"):
        pattern = os.fspath(directory / f"{split}-{{shard:02d}}.tfrecord")
        manifest = os.fspath(directory / f"{split}.json")
        with rk.ShardWriter(pattern, max_records=2, split=split, manifest=manifest) as w:
            w.write_many(b"r%d" % i for i in range(4))
    assert run_cli(capsys, "manifest", "merge", directory, *directory.glob("*.json")).code == 0
    result = run_cli(capsys, "verify", directory, "--split", "test")
    assert result.code == 0, result.out + result.err
    assert [line.split(":")[0] for line in result.out.splitlines()[:-1]] == [
        str(directory / "test-00.tfrecord"),
        str(directory / "test-01.tfrecord"),
    ]
    assert run_cli(capsys, "verify", directory, "--split", "test", "--salvage").code == 2


# -- payload detection agrees with the decoders -----------------------------------------------------


def _with_an_empty_key(record):
    """``record`` (an Example) with a map entry of no key and no value (``0a 00``) inside its Features."""
    assert record[0] == 0x0A
    assert record[1] < 0x80
    return bytes([0x0A, record[1] + 2]) + record[2:] + b"\x0a\x00"


def test_an_empty_feature_name_is_still_an_example(capsys, tmp_path):
    record = _with_an_empty_key(rk.encode_example({"label": [3], "name": [b"cat"]}))
    parsed = example_pb2.Example.FromString(record)  # protobuf reads it, with the name ""
    assert sorted(parsed.features.feature) == ["", "label", "name"]
    assert sorted(rk.decode_example(record)) == ["", "label", "name"]
    assert detect_payload([record, record]) == "example"
    path = tmp_path / "empty-key.tfrecord"
    with rk.open(path, "w") as writer:
        writer.write_many([record, record])
    info = json.loads(run_cli(capsys, "info", "--json", path).out)
    assert info["payload"] == "example"
    assert sorted(feature["name"] for feature in info["features"]) == ["", "label", "name"]
    lines = run_cli(capsys, "cat", "--json", path).out.splitlines()
    assert [json.loads(line) for line in lines] == [{"": [], "label": [3], "name": ["cat"]}] * 2
