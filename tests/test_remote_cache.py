"""fsspec's caching URLs (``filecache::``, ``simplecache::``) through every reading entry point.

recordkit keeps no cache of its own: a remote store is read through fsspec's caches. These tests read a
``memory://`` "remote" through a cache directory, check that the cache got the files, and, for
``filecache::``, that a second read needs no remote at all (the remote files are deleted in between).
"""

from __future__ import annotations

import errno
import os
import uuid

import pytest

import recordkit as rk
from recordkit.data import Dataset
from recordkit.recover import salvage
from tests._cli import run_cli

fsspec = pytest.importorskip("fsspec")
pytest.importorskip("fsspec.implementations.cached")

RECORDS = [[f"{shard}:{i}".encode() for i in range(4 + shard)] for shard in range(3)]
ALL = [record for shard in RECORDS for record in shard]


@pytest.fixture
def remote():
    """A fresh ``memory://`` bucket, emptied afterwards."""
    bucket = f"memory://cache-{uuid.uuid4().hex}"
    yield bucket
    fs = fsspec.filesystem("memory")
    if fs.exists(bucket):
        fs.rm(bucket, recursive=True)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A cache directory for ``filecache::`` and ``simplecache::``, set in fsspec's configuration."""
    directory = tmp_path / "cache"
    directory.mkdir()
    for protocol in ("filecache", "simplecache"):
        monkeypatch.setitem(
            fsspec.config.conf, protocol, {"cache_storage": str(directory / protocol)}
        )
    return directory


def write_shards(bucket: str) -> list[str]:
    urls = []
    for shard, records in enumerate(RECORDS):
        url = f"{bucket}/part-{shard}.tfrecord"
        with rk.open(url, "w") as writer:
            writer.write_many(records)
        urls.append(url)
    return urls


def cached_files(directory) -> list[str]:
    """The data files a cache directory holds (fsspec's metadata file left out)."""
    return [
        name
        for _, _, names in os.walk(directory)
        for name in names
        if name != "cache" and not name.endswith(".json")
    ]


def delete_remote(bucket: str) -> None:
    fsspec.filesystem("memory").rm(bucket, recursive=True)


@pytest.mark.parametrize("protocol", ["filecache", "simplecache"])
def test_open_one_file_fills_the_cache(remote, cache, protocol):
    url = write_shards(remote)[1]
    with rk.open(f"{protocol}::{url}") as reader:
        assert list(reader) == RECORDS[1]
        assert reader[2] == RECORDS[1][2]
        assert len(reader) == len(RECORDS[1])
    assert len(cached_files(cache / protocol)) == 1


def test_filecache_second_read_needs_no_remote(remote, cache):
    urls = write_shards(remote)
    cached = [f"filecache::{url}" for url in urls]
    with rk.open(cached) as reader:
        assert list(reader) == ALL
    assert len(cached_files(cache / "filecache")) == 3
    delete_remote(remote)
    assert not fsspec.filesystem("memory").exists(urls[0])
    with rk.open(cached) as reader:
        assert list(reader) == ALL
        assert reader[len(ALL) - 1] == ALL[-1]
    assert list(Dataset(cached)) == ALL


def test_glob_keeps_the_cache(remote, cache):
    write_shards(remote)
    pattern = f"filecache::{remote}/part-*.tfrecord"
    ds = Dataset(pattern)
    assert all(file.startswith("filecache::memory://") for file in ds.files)
    assert list(ds) == ALL
    assert len(cached_files(cache / "filecache")) == 3
    with rk.open(pattern) as reader:
        assert list(reader) == ALL


def test_manifest_dataset_through_filecache(remote, cache):
    with rk.ShardWriter(f"{remote}/ds/part-{{shard:03d}}.tfrecord", max_records=5) as writer:
        writer.write_many(ALL)
    directory = f"filecache::{remote}/ds/"
    with rk.open(directory) as reader:
        assert list(reader) == ALL
    shards = -(-len(ALL) // 5)
    assert len(cached_files(cache / "filecache")) == 1 + shards  # the manifest and the shards
    delete_remote(remote)
    with rk.open(directory) as reader:
        assert list(reader) == ALL
    assert sorted(Dataset(directory, seed=3).shuffle(8)) == sorted(ALL)


def test_cli_through_filecache(remote, cache, capsys, tmp_path):
    urls = write_shards(remote)
    cached = f"filecache::{remote}/part-*.tfrecord"
    result = run_cli(capsys, "count", cached)
    assert result.code == 0, result.err
    assert str(len(ALL)) in result.out
    result = run_cli(capsys, "verify", cached)
    assert result.code == 0, result.err
    result = run_cli(capsys, "info", f"filecache::{urls[0]}")
    assert result.code == 0, result.err
    delete_remote(remote)  # everything below is read from the cache
    one = f"filecache::{urls[2]}"
    result = run_cli(capsys, "cat", one)
    assert result.code == 0, result.err
    assert RECORDS[2][0].decode() in result.out
    out = tmp_path / "copy.ffr"
    result = run_cli(capsys, "convert", one, out)
    assert result.code == 0, result.err
    with rk.open(out) as reader:
        assert list(reader) == RECORDS[2]


def test_salvage_through_filecache(remote, cache, tmp_path):
    url = write_shards(remote)[0]
    store = fsspec.filesystem("memory")
    data = store.cat(url)
    store.pipe(url, data[:-3])  # the last record cut short
    out = tmp_path / "salvaged.tfrecord"
    with pytest.warns(rk.errors.DataLossWarning):
        report = salvage(f"filecache::{url}", out)
    assert report.records == len(RECORDS[0]) - 1
    with rk.open(out) as reader:
        assert list(reader) == RECORDS[0][:-1]
    assert len(cached_files(cache / "filecache")) == 1


def test_map_dataset_and_dataloader_through_filecache(remote, cache):
    pytest.importorskip("torch")
    import recordkit.integrations.torch as torch_integration

    write_shards(remote)
    pattern = f"filecache::{remote}/part-*.tfrecord"
    mapped = torch_integration.MapDataset(pattern)
    assert len(mapped) == len(ALL)
    assert mapped[[0, len(ALL) - 1]] == [ALL[0], ALL[-1]]
    delete_remote(remote)
    cached = [f"filecache::{remote}/part-{shard}.tfrecord" for shard in range(3)]
    loader = torch_integration.dataloader(Dataset(cached), to="numpy")
    assert list(loader) == ALL


@pytest.mark.parametrize("prefix", ["", "filecache::", "simplecache::"])
def test_a_remote_directory_without_a_manifest_reads_its_record_files(
    remote, cache, prefix, capsys
):
    write_shards(remote)
    fsspec.filesystem("memory").pipe(f"{remote}/_SUCCESS", b"")
    fsspec.filesystem("memory").pipe(f"{remote}/sub/other.tfrecord", b"")
    directory = f"{prefix}{remote}"
    assert list(rk.open(directory)) == ALL
    assert list(Dataset(directory)) == ALL
    assert run_cli(capsys, "count", directory).out.split()[-2:] == [str(len(ALL)), "total"]
    files = rk.io.expand_sources(directory)
    assert [f.rsplit("/", 1)[-1] for f in files] == [f"part-{i}.tfrecord" for i in range(3)]
    assert all(f.startswith(prefix) for f in files)


def test_a_remote_directory_without_record_files_says_so(remote):
    fsspec.filesystem("memory").pipe(f"{remote}/notes.txt.json", b"{}")
    fsspec.filesystem("memory").pipe(f"{remote}/run/a.tfrecord", b"")
    with pytest.raises(FileNotFoundError, match="subdirectories are not read"):
        rk.open(remote)


@pytest.mark.parametrize("prefix", ["", "filecache::"])
def test_a_remote_dataset_with_indexes_verifies_and_splits_without_a_trailing_slash(
    remote, cache, capsys, prefix
):
    pattern = f"{remote}/ds/train-{{shard:03d}}.tfrecord"
    with rk.ShardWriter(pattern, max_records=5, split="train") as writer:
        writer.write_many(ALL)
    assert fsspec.filesystem("memory").glob(f"{remote}/ds/.train-*.idx")
    for directory in (f"{prefix}{remote}/ds", f"{prefix}{remote}/ds/"):
        assert list(rk.open(directory, split="train")) == ALL
        assert list(Dataset(directory, split="train")) == ALL
        result = run_cli(capsys, "verify", directory)
        assert result.code == 0, result.out + result.err
        assert "3 shards: 3 OK, 0 bad" in result.out


@pytest.mark.parametrize("prefix", ["", "filecache::", "simplecache::"])
def test_a_missing_remote_file_is_named_with_its_url(remote, cache, prefix):
    url = f"{prefix}{remote}/nothing.tfrecord"
    with pytest.raises(FileNotFoundError) as caught:
        rk.open(url)
    assert caught.value.filename == url
    assert caught.value.errno == errno.ENOENT
