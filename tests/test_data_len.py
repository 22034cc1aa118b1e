"""len(Dataset): the number of items an iteration gives, known without reading payloads, or TypeError."""

from __future__ import annotations

from pathlib import Path

import pytest
from _data_files import make_files
from _data_workers import as_worker, every_share, share_lengths

import recordkit as rk
from recordkit.data import Dataset, mix
from recordkit.io import RecordReader

RANDOM_ACCESS = [".ffr", ".tfrecord", ".ffr"]
SIZES = [9, 14, 0, 6, 11, 3, 21]


def build(paths, rank, world_size, variant: str) -> Dataset:
    ds = Dataset(paths, seed=3, rank=rank, world_size=world_size)
    return {
        "plain": lambda: ds,
        "global": lambda: ds.shuffle(),
        "buffer": lambda: ds.shuffle(5),
        "files": lambda: ds.shuffle(0).map(len),
        "batch": lambda: ds.shuffle(4).batch(4),
        "batch_drop": lambda: ds.batch(4, drop_last=True).map(len),
        "take": lambda: ds.take(30).batch(3),
        "skip": lambda: ds.shuffle().skip(17).take(100),
        "take_after_buffer": lambda: ds.shuffle(3).skip(2).take(40),
        "repeat": lambda: ds.shuffle(2).batch(5).repeat(3),
        "pad": lambda: Dataset(paths, rank=rank, world_size=world_size, equal_shards="pad").batch(
            2
        ),
        "drop": lambda: Dataset(paths, rank=rank, world_size=world_size, equal_shards="drop"),
        "interleave": lambda: ds.interleave(3).batch(2),
        "prefetch": lambda: ds.batch(3).prefetch(2),
        "map_after_batch": lambda: ds.batch(3).map(len),
    }[variant]()


VARIANTS = [
    "plain",
    "global",
    "buffer",
    "files",
    "batch",
    "batch_drop",
    "take",
    "skip",
    "take_after_buffer",
    "repeat",
    "pad",
    "drop",
    "interleave",
    "prefetch",
    "map_after_batch",
]


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize(("world_size", "num_workers"), [(1, 1), (2, 3), (4, 1), (5, 2)])
def test_len_is_the_number_of_items_of_each_share(tmp_path, variant, world_size, num_workers):
    paths, _ = make_files(tmp_path, SIZES, RANDOM_ACCESS)

    def make(rank, ws):
        return build(paths, rank, ws, variant)

    lengths = share_lengths(make, world_size, num_workers)
    assert lengths == [len(share) for share in every_share(make, world_size, num_workers)]
    # A rank's length, outside a worker, is the sum of its workers' shares.
    per_rank = [len(make(rank, world_size)) for rank in range(world_size)]
    if variant in ("plain", "global", "buffer", "files", "skip", "take_after_buffer"):
        assert sum(per_rank) == sum(lengths)


def test_len_needs_no_payload(tmp_path, monkeypatch):
    paths, records = make_files(tmp_path, SIZES, [".ffr"])

    def refuse(*args, **kwargs):
        raise AssertionError("a payload was read")

    monkeypatch.setattr(RecordReader, "read", refuse)
    monkeypatch.setattr(RecordReader, "__iter__", refuse)
    assert len(Dataset(paths).shuffle().batch(4)) == -(-len(records) // 4)
    assert len(Dataset(paths, rank=1, world_size=3).take(20)) == 7


def test_len_from_a_manifest_of_compressed_shards(tmp_path):
    records = [b"r%d" % i for i in range(47)]
    with rk.ShardWriter(str(tmp_path / "part-{shard:03d}.tfrecord.gz"), max_records=10) as writer:
        writer.write_many(records)
    ds = Dataset(str(tmp_path), rank=0, world_size=2).shuffle(4).batch(3)
    assert len(ds) == len(list(ds))
    with as_worker(1, 2):
        share = Dataset(str(tmp_path), seed=1, rank=1, world_size=2).shuffle(4, files=True)
        assert len(share) == len(list(share))


@pytest.mark.parametrize(
    ("make", "reason"),
    [
        (lambda ds: ds.filter(bool), "after filter\\(\\)"),
        (lambda ds: ds.batch(2).unbatch(), "after unbatch\\(\\)"),
        (lambda ds: ds.repeat(), "never ends"),
        (lambda ds: ds.filter(bool).batch(3).map(len), "after filter\\(\\)"),
    ],
)
def test_len_unknown_says_why(tmp_path, make, reason):
    paths, _ = make_files(tmp_path, [3, 4], [".ffr"])
    with pytest.raises(TypeError, match=reason):
        len(make(Dataset(paths)))


def test_len_of_compressed_files_is_unknown(tmp_path):
    paths, records = make_files(tmp_path, [3, 4], [".ffr", ".tfrecord.gz"])
    with pytest.raises(
        TypeError, match=r"file-001\.tfrecord\.gz.*read it through|reading it through"
    ):
        len(Dataset(paths))
    # The data is still read in full: len() raising does not stop list().
    assert list(Dataset(paths)) == records


def test_len_of_a_mix(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a, _ = make_files(tmp_path / "a", [40, 25], [".ffr"])
    b, _ = make_files(tmp_path / "b", [30], [".tfrecord"])
    for stop in ("first_exhausted", "all_exhausted"):
        mixed = mix([Dataset(a), Dataset(b)], [0.6, 0.4], seed=2, stop=stop).batch(4)
        expected = len(mixed)
        assert expected == len(list(mixed))
    assert len(mix([Dataset(a), Dataset(b)], stop="all_exhausted")) == 95
    assert len(mix([Dataset(a), Dataset(b)], [1, 0], stop="all_exhausted")) == 65
    gz, _ = make_files(tmp_path / "b", [5], [".tfrecord.gz"])
    with pytest.raises(TypeError, match=r"mix.*dataset 1.*compressed"):
        len(mix([Dataset(a), Dataset(gz)]))
    with pytest.raises(TypeError, match="filter"):
        len(mix([Dataset(a), Dataset(b).filter(bool)]))


def test_len_follows_the_epoch_with_compressed_files_in_a_manifest(tmp_path: Path):
    """Compressed files are dealt whole, so with a file shuffle a rank's length changes with the epoch."""
    with rk.ShardWriter(str(tmp_path / "part-{shard:03d}.tfrecord.gz"), max_records=7) as writer:
        writer.write_many([b"r%d" % i for i in range(7 * 5 + 2)])
    ds = Dataset(str(tmp_path), seed=5, rank=0, world_size=2).shuffle(0)
    for epoch in range(6):
        ds.set_epoch(epoch)
        n = len(ds)
        assert n == len(list(ds))
