"""Pipelines over fsspec URLs: globbing, reading and writing, and ranged reads for random access."""

from __future__ import annotations

import collections
import io
import itertools
import uuid

import pytest

import recordkit as rk
from recordkit.compat.oneflow import part_files
from recordkit.data import Dataset

fsspec = pytest.importorskip("fsspec")
from fsspec.implementations.memory import MemoryFileSystem

BYTES_READ = collections.Counter()


class _CountingFile(io.BytesIO):
    """A private copy of a stored file that counts the bytes read through it."""

    def __init__(self, data: bytes, path: str) -> None:
        super().__init__(data)
        self.path = path

    def read(self, n: int | None = -1) -> bytes:
        data = super().read(n)
        BYTES_READ[self.path] += len(data)
        return data

    def readinto(self, buffer) -> int:
        got = super().readinto(buffer)
        BYTES_READ[self.path] += got
        return got


class CountingMemoryFileSystem(MemoryFileSystem):
    """fsspec's in-memory filesystem under the ``countmem://`` protocol, counting bytes read."""

    protocol = "countmem"

    @classmethod
    def _strip_protocol(cls, path):
        return super()._strip_protocol(str(path).replace("countmem://", "memory://", 1))

    def _open(self, path, mode="rb", **kwargs):
        if mode == "rb":
            stripped = self._strip_protocol(path)
            if stripped not in self.store:
                raise FileNotFoundError(path)
            return _CountingFile(self.store[stripped].getvalue(), stripped)
        return super()._open(path, mode, **kwargs)


fsspec.register_implementation("countmem", CountingMemoryFileSystem, clobber=True)


@pytest.fixture
def bucket() -> str:
    return f"memory://test-{uuid.uuid4().hex}"


def write_url(url: str, records: list[bytes], **options: object) -> None:
    with rk.open(url, "w", **options) as writer:  # type: ignore[arg-type]
        writer.write_many(records)


def test_glob_read_write_and_shard_memory_urls(bucket):
    expected = []
    for i, suffix in enumerate([".ffr", ".tfrecord", ".tfrecord.gz"]):
        records = [f"{i}:{j}".encode() for j in range(5 + i)]
        write_url(f"{bucket}/data-{i}{suffix}", records)
        expected += records
    ds = Dataset(f"{bucket}/data-*")
    assert len(ds.files) == 3
    assert all(f.startswith("memory://") for f in ds.files)
    assert list(ds) == expected
    got = [
        r
        for rank in range(4)
        for r in Dataset(f"{bucket}/data-*", rank=rank, world_size=4).shuffle(3)
    ]
    assert collections.Counter(got) == collections.Counter(expected)
    with pytest.raises(FileNotFoundError):
        Dataset(f"{bucket}/nothing-*")


def test_part_files_on_urls(bucket):
    for i in range(3):
        write_url(f"{bucket}/part-{i:02d}", [rk.encode_ofrecord({"i": [i]})], format="ofrecord")
    assert part_files(bucket, 3, part_name_suffix_length=2) == [
        f"{bucket}/part-{i:02d}" for i in range(3)
    ]
    with pytest.raises(FileNotFoundError, match="part 3"):
        part_files(bucket, 4, part_name_suffix_length=2)


def test_random_access_uses_ranged_reads():
    root = f"countmem://ranged-{uuid.uuid4().hex}"
    size = 4096
    records = [bytes([i % 251]) * size for i in range(200)]
    write_url(f"{root}/big.ffr", records[:100])
    write_url(f"{root}/big2.tfrecord", records[100:])
    total_bytes = 2 * 100 * size
    BYTES_READ.clear()
    ds = Dataset(f"{root}/big*", rank=7, world_size=50).shuffle()
    got = list(ds)
    assert len(got) == 4
    assert all(r in records for r in got)
    # A shard of 4 records out of 200: far less than the files, whatever the index scan costs.
    read = sum(BYTES_READ.values())
    assert read < total_bytes / 10, (read, total_bytes)


def test_a_few_batches_from_a_large_remote_file_read_little():
    root = f"countmem://few-{uuid.uuid4().hex}"
    records = [bytes([i % 251]) * 2048 for i in range(300)]
    write_url(f"{root}/big.ffr", records)
    BYTES_READ.clear()
    it = iter(Dataset(f"{root}/big.ffr", seed=1).shuffle().batch(4))
    batches = list(itertools.islice(it, 2))
    it.close()
    assert all(r in records for b in batches for r in b)
    assert sum(BYTES_READ.values()) < len(records) * 2048 / 10
