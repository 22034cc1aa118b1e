"""How a pipeline reads its files: in order without an index where it can, records in lists, and what
reaches the consumer before a read fails."""

from __future__ import annotations

import itertools
import random
from pathlib import Path

import pytest
from _data_files import make_files, write

import recordkit as rk
from recordkit.data import Dataset
from recordkit.data._shuffle import BufferShuffler
from recordkit.errors import ChecksumError
from recordkit.formats.sequential import SequentialFrameReader


@pytest.fixture
def no_scan(monkeypatch):
    """Make any header scan of a TFRecord/OFRecord file fail the test."""

    def scan(self):
        raise AssertionError(f"{self.path} was scanned")

    monkeypatch.setattr(SequentialFrameReader, "scan", scan)


def items(ds: Dataset, got: list | None = None) -> list:
    """Iterate ``ds`` into ``got`` (``list(ds)`` would ask ``len(ds)``, which counts the records)."""
    got = [] if got is None else got
    got.extend(iter(ds))
    return got


@pytest.mark.parametrize("suffix", [".tfrecord", ".ofrecord"])
def test_one_process_reads_whole_files_in_order_without_scanning_them(tmp_path, no_scan, suffix):
    paths, records = make_files(tmp_path, [40, 0, 25, 3], [suffix])
    assert items(Dataset(paths)) == records
    batches = items(Dataset(paths).batch(7))
    assert [r for b in batches for r in b] == records
    assert [len(b) for b in batches] == [7] * 9 + [5]
    shuffled = items(Dataset(paths, seed=4).shuffle(16).map(bytes.upper).batch(5))
    assert sorted(r for b in shuffled for r in b) == sorted(r.upper() for r in records)


def test_plans_that_need_counts_still_count(tmp_path, no_scan):
    paths, _ = make_files(tmp_path, [10, 10], [".tfrecord"])
    with pytest.raises(AssertionError, match="was scanned"):
        next(iter(Dataset(paths, rank=0, world_size=3)))  # split by record ranges: counted
    with pytest.raises(AssertionError, match="was scanned"):
        len(Dataset(paths))


def test_resume_mid_file_reads_on_from_the_position(tmp_path):
    paths, records = make_files(tmp_path, [30, 30], [".tfrecord"])
    ds = Dataset(paths).batch(4)
    it = iter(ds)
    seen = [r for b in itertools.islice(it, 9) for r in b]
    state = ds.state_dict()
    it.close()
    again = Dataset(paths).batch(4)
    again.load_state_dict(state)
    assert seen + [r for b in again for r in b] == records


def _corrupt_payload(path: Path, index: int, records: list[bytes]) -> None:
    offset = sum(16 + len(r) for r in records[:index]) + 12  # TFRecord: 12-byte header, 4-byte CRC
    data = bytearray(path.read_bytes())
    data[offset] ^= 0xFF
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("stages", ["none", "map", "batch"])
def test_records_before_a_damaged_one_are_delivered_before_the_error(tmp_path, stages):
    records = [f"r{i}".encode() * 10 for i in range(300)]
    path = write(tmp_path / "a.tfrecord", records)
    _corrupt_payload(path, 150, records)
    ds = Dataset(str(path))
    if stages == "map":
        ds = ds.map(bytes.upper)
    elif stages == "batch":
        ds = ds.batch(7)
    got: list = []
    with pytest.raises(ChecksumError) as info:
        items(ds, got)
    assert info.value.index == 150
    if stages == "batch":
        assert got == [records[i : i + 7] for i in range(0, 147, 7)]
    elif stages == "map":
        assert got == [r.upper() for r in records[:150]]
    else:
        assert got == records[:150]


def test_map_and_filter_run_only_on_the_items_asked_for(tmp_path):
    paths, records = make_files(tmp_path, [500], [".tfrecord"])
    calls: list[bytes] = []

    def keep(record: bytes) -> bool:
        calls.append(record)
        return int(record.split(b":")[1]) % 3 == 0

    it = iter(Dataset(paths).filter(keep).batch(4))
    first = next(it)
    assert first == [b"0:0", b"0:3", b"0:6", b"0:9"]
    assert calls == records[:10]  # nothing ahead of the first batch
    it.close()


def test_an_old_state_is_refused_with_a_clear_error(tmp_path):
    paths, _ = make_files(tmp_path, [20], [".tfrecord"])
    ds = Dataset(paths, seed=1).shuffle(8).batch(2)
    next(iter(ds))
    state = ds.state_dict()
    state["version"] = 1
    with pytest.raises(ValueError, match=r"earlier recordkit \(state version 1\)"):
        Dataset(paths, seed=1).shuffle(8).batch(2).load_state_dict(state)


@pytest.mark.parametrize("size", [1, 7, 1024, 3000])
def test_buffer_choices_do_not_depend_on_how_items_are_grouped(size):
    items = list(range(5000))
    one = BufferShuffler(size, 11)
    single = []
    for item in items:
        out = one.push(item)
        if out is not None:
            single.append(out)
    single += one.drain()
    grouped_buffer = BufferShuffler(size, 11)
    grouped: list[int] = []
    rng = random.Random(size)
    at = 0
    while at < len(items):
        k = rng.randint(1, 2000)
        grouped += grouped_buffer.push_many(items[at : at + k])
        at += k
    grouped += grouped_buffer.drain()
    assert single == grouped
    assert sorted(single) == items
    for emitted in (1, 100, 4999, 5000):
        replayed = BufferShuffler(size, 11)
        position = replayed.replay(len(items), emitted)
        rest = replayed.push_many(items[position:]) + replayed.drain()
        assert rest == single[emitted:]


def test_reading_from_a_record_matches_reading_through(tmp_path):
    records = [bytes([i % 256]) * (i % 50 + 1) for i in range(2000)]
    path = write(tmp_path / "a.tfrecord", records)
    for start in (0, 1, 999, 1999, 2000, 2500):
        assert list(rk.open(str(path)).iter_from(start)) == records[start:]
