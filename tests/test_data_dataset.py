"""recordkit.data.Dataset: reading many files, sharding, shuffling, stages, epochs, resume."""

from __future__ import annotations

import collections
import itertools
import json
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest
from _data_files import make_files, write

import recordkit as rk
from recordkit.data import Dataset
from recordkit.data._readers import Catalog
from recordkit.errors import UnsupportedOperationError

MIXED = [".ffr", ".tfrecord", ".tfrecord.gz"]


@pytest.fixture
def mixed(tmp_path: Path) -> tuple[list[str], list[bytes]]:
    """Seven files of three formats (one of them sequential-only), 41 unique records."""
    return make_files(tmp_path, [5, 9, 4, 0, 7, 10, 6], MIXED)


def shards(make, world_size: int) -> list[list[bytes]]:
    return [list(make(rank, world_size)) for rank in range(world_size)]


def test_reads_every_file_in_order(mixed):
    paths, records = mixed
    ds = Dataset(paths)
    assert list(ds) == records
    assert ds.files == paths


def test_glob_and_list_sources(tmp_path, mixed):
    paths, records = mixed
    ds = Dataset(str(tmp_path / "file-*"))
    assert ds.files == sorted(paths)
    assert sorted(ds) == sorted(records)
    with pytest.raises(FileNotFoundError):
        Dataset(str(tmp_path / "nothing-*.tfrecord"))
    with pytest.raises(FileNotFoundError):
        Dataset([paths[0], str(tmp_path / "missing.ffr")])
    with pytest.raises(ValueError, match="no sources"):
        Dataset([])


@pytest.mark.parametrize("world_size", [1, 2, 5, 9, 23])
@pytest.mark.parametrize("buffer", [None, 0, 6])
def test_each_record_once_across_ranks(mixed, world_size, buffer):
    paths, records = mixed

    def make(rank, ws):
        ds = Dataset(paths, seed=3, rank=rank, world_size=ws)
        return ds if buffer is None else ds.shuffle(buffer)

    got = [r for shard in shards(make, world_size) for r in shard]
    assert collections.Counter(got) == collections.Counter(records)


@pytest.mark.parametrize("world_size", [1, 3, 50])
def test_global_shuffle_once_across_ranks(tmp_path, world_size):
    paths, records = make_files(tmp_path, [7, 0, 12, 5], [".ffr", ".tfrecord"])
    got = [
        r
        for shard in shards(
            lambda rank, ws: Dataset(paths, seed=1, rank=rank, world_size=ws).shuffle(), world_size
        )
        for r in shard
    ]
    assert collections.Counter(got) == collections.Counter(records)


@pytest.mark.parametrize("mode", ["pad", "drop"])
@pytest.mark.parametrize("buffer", ["none", "buffer", "global"])
def test_equal_shards(tmp_path, mode, buffer):
    suffixes = [".ffr", ".tfrecord.gz"] if buffer != "global" else [".ffr", ".tfrecord"]
    paths, records = make_files(tmp_path, [11, 3, 8], suffixes)

    def make(rank, ws):
        ds = Dataset(paths, rank=rank, world_size=ws, equal_shards=mode)
        if buffer == "buffer":
            return ds.shuffle(4)
        return ds.shuffle() if buffer == "global" else ds

    result = shards(make, 4)
    assert len({len(s) for s in result}) == 1
    union = collections.Counter(r for s in result for r in s)
    if mode == "pad":
        assert set(union) == set(records)
    else:
        assert max(union.values()) == 1
        assert len(result[0]) == min(
            len(s) for s in shards(lambda r, w: Dataset(paths, rank=r, world_size=w), 4)
        )


def test_equal_shards_validated(mixed):
    with pytest.raises(ValueError, match="equal_shards"):
        Dataset(mixed[0], equal_shards="even")  # type: ignore[arg-type]


@pytest.mark.parametrize("buffer", [None, 5, 1000])
def test_shuffle_is_deterministic_and_changes_each_epoch(tmp_path, buffer):
    paths, records = make_files(tmp_path, [20, 15, 25], [".ffr", ".tfrecord"])
    first = Dataset(paths, seed=11).shuffle(buffer)
    again = Dataset(paths, seed=11).shuffle(buffer)
    epoch0 = list(first)
    assert epoch0 == list(again)
    assert sorted(epoch0) == sorted(records)
    assert epoch0 != records
    epoch1 = list(first)  # the epoch advances after a complete pass
    assert first.epoch == 2
    assert sorted(epoch1) == sorted(records)
    assert epoch1 != epoch0
    assert list(Dataset(paths, seed=12).shuffle(buffer)) != epoch0
    again.set_epoch(0)
    assert list(again) == epoch0


def test_file_order_shuffle_only(tmp_path):
    paths, records = make_files(tmp_path, [3] * 6, [".tfrecord.gz", ".ffr"])
    ds = Dataset(paths, seed=2).shuffle(0, files=True)
    orders = [list(ds) for _ in range(3)]
    for order in orders:
        assert sorted(order) == sorted(records)
        # records of one file stay together and in file order
        files = [r.split(b":")[0] for r in order]
        assert [k for k, _ in itertools.groupby(files)] == list(dict.fromkeys(files))
    assert len({tuple(o) for o in orders}) > 1
    assert list(Dataset(paths, seed=2).shuffle(0, files=False)) == records


def test_global_shuffle_needs_random_access(mixed):
    with pytest.raises(UnsupportedOperationError, match="shuffle"):
        list(Dataset(mixed[0]).shuffle())


def test_map_batch_repeat(mixed):
    paths, records = mixed
    ds = Dataset(paths).map(len).batch(4).map(sum)
    assert list(ds) == [sum(map(len, records[i : i + 4])) for i in range(0, len(records), 4)]
    batches = list(Dataset(paths).batch(4, drop_last=True))
    assert [len(b) for b in batches] == [4] * (len(records) // 4)
    two = list(Dataset(paths, seed=1).shuffle(8).repeat(2))
    assert len(two) == 2 * len(records)
    assert sorted(two[: len(records)]) == sorted(records)
    assert two[: len(records)] != two[len(records) :]
    forever = Dataset(paths).repeat()
    assert len(list(itertools.islice(forever, 100))) == 100


def test_batches_do_not_span_epochs(mixed):
    paths, _ = mixed
    out = list(Dataset(paths).batch(10).repeat(2))
    assert [len(b) for b in out] == [10, 10, 10, 10, 1] * 2


def test_empty_shard_repeated_forever_ends(tmp_path):
    paths, _ = make_files(tmp_path, [1], [".ffr"])
    assert list(Dataset(paths, rank=0, world_size=2).repeat()) == []  # the record is rank 1's


def test_stage_errors(mixed):
    ds = Dataset(mixed[0])
    with pytest.raises(ValueError, match="shuffle before batch"):
        ds.batch(2).shuffle(3)
    with pytest.raises(ValueError, match="already shuffled"):
        ds.shuffle(3).shuffle(3)
    with pytest.raises(ValueError, match="already batched"):
        ds.batch(2).batch(2)
    with pytest.raises(ValueError, match="batch size"):
        ds.batch(0)
    with pytest.raises(ValueError, match="buffer_size"):
        ds.shuffle(-1)
    with pytest.raises(ValueError, match="epochs"):
        ds.repeat(0)
    with pytest.raises(ValueError, match="prefetch"):
        ds.prefetch(-2)
    with pytest.raises(TypeError, match="callable"):
        ds.map(3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="rank"):
        Dataset(mixed[0], rank=0)
    assert "shuffle(3" in repr(ds.shuffle(3).batch(2))


def test_readers_closed_after_iteration_and_break(mixed, monkeypatch):
    opened = []
    real_open = Catalog.open

    def tracking_open(self, i):
        reader = real_open(self, i)
        opened.append(reader)
        return reader

    monkeypatch.setattr(Catalog, "open", tracking_open)
    paths, _ = mixed
    list(Dataset(paths).shuffle(3))
    assert opened
    assert all(r.closed for r in opened)
    opened.clear()
    it = iter(Dataset(paths).shuffle(3).prefetch(2))
    next(it)
    it.close()
    assert all(r.closed for r in opened)


def prefetch_threads() -> int:
    return sum(t.name == "recordkit-prefetch" for t in threading.enumerate())


def test_prefetch_same_items_and_no_thread_left(mixed):
    paths, records = mixed
    before = prefetch_threads()
    assert list(Dataset(paths).prefetch(3)) == records
    it = iter(Dataset(paths).map(bytes.upper).prefetch(1))
    assert next(it) == records[0].upper()
    del it
    assert prefetch_threads() == before
    for item in Dataset(paths).prefetch(2):
        assert item == records[0]
        break
    assert prefetch_threads() == before


def explode(record: bytes) -> bytes:
    if record == b"1:3":
        raise KeyError("boom")
    return record


def test_prefetch_propagates_exceptions(mixed):
    paths, records = mixed
    it = iter(Dataset(paths).map(explode).prefetch(4))
    got = list(itertools.islice(it, records.index(b"1:3")))
    assert got == records[: records.index(b"1:3")]
    with pytest.raises(KeyError, match="boom"):
        next(it)


def test_corrupt_file_raises_typed_error(tmp_path):
    good = write(tmp_path / "a.tfrecord", [b"x"] * 3)
    bad = tmp_path / "b.tfrecord"
    data = bytearray(write(bad, [b"payload"] * 3).read_bytes())
    data[-3] ^= 0xFF
    bad.write_bytes(bytes(data))
    with pytest.raises(rk.CorruptRecordError) as info:
        list(Dataset([str(good), str(bad)]).prefetch(2))
    assert info.value.path is not None
    assert info.value.path.endswith("b.tfrecord")


# -- resume ---------------------------------------------------------------------------------------


def build(paths: list[str], mode: str, *, batch: int = 3, rank: int = 0, world_size: int = 1):
    ds = Dataset(paths, seed=5, rank=rank, world_size=world_size)
    if mode == "buffer":
        ds = ds.shuffle(7)
    elif mode == "global":
        ds = ds.shuffle()
    return ds.batch(batch)


RESUME_MODES = ["none", "buffer", "global"]


RANDOM_ACCESS = [".ffr", ".tfrecord"]
WITH_SEQUENTIAL = [".tfrecord.gz", ".ffr"]  # a global shuffle needs random-access files


@pytest.mark.parametrize(
    ("mode", "suffixes"),
    [(mode, RANDOM_ACCESS) for mode in RESUME_MODES]
    + [(mode, WITH_SEQUENTIAL) for mode in ("none", "buffer")],
)
@pytest.mark.parametrize("prefetch", [0, 2])
def test_resume_in_process_gives_the_rest(tmp_path, mode, suffixes, prefetch):
    paths, _ = make_files(tmp_path, [9, 14, 0, 6], suffixes)
    full = list(build(paths, mode).prefetch(prefetch))
    for k in range(len(full) + 1):
        ds = build(paths, mode).prefetch(prefetch)
        it = iter(ds)
        head = list(itertools.islice(it, k))
        state = json.loads(json.dumps(ds.state_dict()))
        it.close()
        restored = build(paths, mode).prefetch(prefetch)
        restored.load_state_dict(state)
        assert head + list(restored) == full, k


def test_resume_across_epochs_with_repeat(tmp_path):
    paths, _ = make_files(tmp_path, [6, 5], [".ffr", ".tfrecord"])
    full = list(build(paths, "buffer").repeat(3))
    for k in (0, 2, 4, 5, 9, len(full)):
        ds = build(paths, "buffer").repeat(3)
        it = iter(ds)
        head = list(itertools.islice(it, k))
        state = ds.state_dict()
        restored = build(paths, "buffer").repeat(3)
        restored.load_state_dict(state)
        assert head + list(restored) == full, k


def test_state_mismatch_is_refused(tmp_path):
    paths, _ = make_files(tmp_path, [6, 5], [".ffr"])
    ds = build(paths, "buffer", rank=1, world_size=2)
    next(iter(ds))
    state = ds.state_dict()
    with pytest.raises(ValueError, match="seed"):
        Dataset(paths, seed=6).shuffle(7).batch(3).load_state_dict(state)
    with pytest.raises(ValueError, match="batch_size"):
        Dataset(paths, seed=5).shuffle(7).batch(4).load_state_dict(state)
    with pytest.raises(ValueError, match="not a recordkit dataset state"):
        ds.load_state_dict({"kind": "loader", "version": 1})
    other_rank = build(paths, "buffer", rank=0, world_size=2)
    other_rank.load_state_dict(state)
    with pytest.raises(ValueError, match="shard 1 of 2"):
        list(other_rank)


RESUME_SCRIPT = textwrap.dedent(
    """
    import json, sys
    from recordkit.data import Dataset
    paths, mode, state = json.loads(sys.stdin.read())
    ds = Dataset(paths, seed=5)
    ds = ds.shuffle(7) if mode == "buffer" else ds.shuffle()
    ds = ds.batch(3)
    ds.load_state_dict(state)
    print(json.dumps([[r.decode() for r in batch] for batch in ds]))
    """
)


@pytest.mark.parametrize("mode", ["buffer", "global"])
def test_resume_in_a_fresh_process(tmp_path, mode):
    paths, records = make_files(tmp_path, [10, 13, 8], [".ffr", ".tfrecord"])
    ds = build(paths, mode)
    it = iter(ds)
    head = [r for batch in itertools.islice(it, 4) for r in batch]
    state = ds.state_dict()
    rest_here = [r for batch in it for r in batch]
    out = subprocess.run(
        [sys.executable, "-c", RESUME_SCRIPT],
        input=json.dumps([paths, mode, state]),
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    rest = [r.encode() for batch in json.loads(out.stdout) for r in batch]
    assert rest == rest_here
    assert collections.Counter(head + rest) == collections.Counter(records)
