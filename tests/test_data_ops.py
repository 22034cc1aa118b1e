"""Dataset.filter, unbatch, take, skip and interleave: order, exactly once over ranks and workers, resume."""

from __future__ import annotations

import collections
import itertools
import threading
from pathlib import Path

import numpy as np
import pytest
from _data_files import make_files, write
from _data_workers import as_worker, every_share, resumes

import recordkit as rk
from recordkit.data import Dataset, mix
from recordkit.data._readers import Catalog

RANDOM_ACCESS = [".ffr", ".tfrecord"]
WITH_SEQUENTIAL = [".ffr", ".tfrecord.gz", ".tfrecord"]
SIZES = [9, 14, 0, 6, 11, 3]


def index(record: bytes) -> int:
    """A number unique to each record of :func:`make_files` (file * 100 + record)."""
    f, i = record.split(b":")
    return int(f) * 100 + int(i)


def odd(record: bytes) -> bool:
    return index(record) % 2 == 1


def pairs(record: bytes) -> list[bytes]:
    return [record, record + b"'"]


def shuffled(ds: Dataset, mode: str) -> Dataset:
    if mode == "buffer":
        return ds.shuffle(5)
    if mode == "files":
        return ds.shuffle(0)
    return ds.shuffle() if mode == "global" else ds


MODES = [
    ("none", WITH_SEQUENTIAL),
    ("files", WITH_SEQUENTIAL),
    ("buffer", WITH_SEQUENTIAL),
    ("global", RANDOM_ACCESS),
]


@pytest.fixture
def files(tmp_path: Path):
    return lambda suffixes, sizes=SIZES: make_files(tmp_path, sizes, suffixes)


# -- filter and unbatch --------------------------------------------------------------------------


def test_per_item_stages_run_in_call_order(files):
    paths, records = files(WITH_SEQUENTIAL)
    ds = Dataset(paths).map(index).filter(lambda n: n % 3).batch(4).map(sum).filter(lambda s: s % 2)
    kept = [n for n in map(index, records) if n % 3]
    sums = [sum(kept[i : i + 4]) for i in range(0, len(kept), 4)]
    assert list(ds) == [s for s in sums if s % 2]
    assert list(Dataset(paths).batch(5).unbatch()) == records
    assert list(Dataset(paths).map(pairs).unbatch()) == [x for r in records for x in pairs(r)]
    again = list(Dataset(paths).batch(4).unbatch().batch(3))
    assert again == [records[i : i + 3] for i in range(0, len(records), 3)]
    assert Dataset(paths).batch(4).unbatch().batch_size is None


def test_unbatch_splits_arrays_and_dicts_of_columns(files):
    paths, records = files(RANDOM_ACCESS)

    def columns(batch):
        return {"n": np.array([index(r) for r in batch]), "raw": list(batch)}

    rows = list(Dataset(paths).batch(4).map(columns).unbatch())
    assert [(int(row["n"]), row["raw"]) for row in rows] == [(index(r), r) for r in records]
    arrays = list(Dataset(paths).batch(7).map(lambda b: np.array([index(r) for r in b])).unbatch())
    assert [int(a) for a in arrays] == [index(r) for r in records]
    with pytest.raises(TypeError, match="unbatch"):
        list(Dataset(paths).unbatch())  # records are bytes, not batches
    with pytest.raises(ValueError, match="one length"):
        list(Dataset(paths).batch(2).map(lambda b: {"a": b, "b": b[:1]}).unbatch())
    with pytest.raises(TypeError, match=r"\['size'\] hold single values"):
        list(Dataset(paths).batch(3).map(lambda b: {"raw": b, "size": len(b)}).unbatch())
    with pytest.raises(TypeError, match="callable"):
        Dataset(paths).filter(None)  # type: ignore[arg-type]


@pytest.mark.parametrize(("mode", "suffixes"), MODES)
@pytest.mark.parametrize(("world_size", "num_workers"), [(1, 1), (2, 3), (3, 2), (7, 2)])
def test_filter_and_unbatch_exactly_once_over_ranks_and_workers(
    files, mode, suffixes, world_size, num_workers
):
    paths, records = files(suffixes)

    def make(rank, ws):
        ds = shuffled(Dataset(paths, seed=4, rank=rank, world_size=ws), mode)
        return ds.filter(odd).batch(2).unbatch().map(pairs).unbatch()

    got = [x for share in every_share(make, world_size, num_workers) for x in share]
    expected = [x for r in records if odd(r) for x in pairs(r)]
    assert collections.Counter(got) == collections.Counter(expected)


@pytest.mark.parametrize(("mode", "suffixes"), MODES)
@pytest.mark.parametrize("prefetch", [0, 2])
def test_resume_after_filter_and_unbatch_is_exact(files, mode, suffixes, prefetch):
    paths, _ = files(suffixes)

    def build():
        ds = shuffled(Dataset(paths, seed=2), mode).map(pairs).unbatch().filter(odd_pair)
        return ds.batch(3).prefetch(prefetch)

    resumes(build, range(0, 40, 3))


def odd_pair(record: bytes) -> bool:
    """Keeps about half of the records of :func:`pairs`, unevenly (none of some pairs, both of others)."""
    return index(record.rstrip(b"'")) % 4 in (1, 2)


def test_resume_after_filter_skips_stages_after_it(files):
    """Resuming runs the stages up to the last filter on what was delivered, and no stage after it."""
    paths, _ = files(RANDOM_ACCESS)
    seen = []

    def late(batch):
        seen.append(batch)
        return batch

    full = list(Dataset(paths).filter(odd).batch(2).map(late))
    ds = Dataset(paths).filter(odd).batch(2).map(late)
    it = iter(ds)
    head = list(itertools.islice(it, 5))
    state = ds.state_dict()
    seen.clear()
    restored = Dataset(paths).filter(odd).batch(2).map(late)
    restored.load_state_dict(state)
    assert head + list(restored) == full
    assert seen == full[5:]


def test_state_of_a_pipeline_with_a_filter_does_not_load_without_it(files):
    paths, _ = files(RANDOM_ACCESS)
    ds = Dataset(paths).filter(odd).batch(2)
    next(iter(ds))
    with pytest.raises(ValueError, match="stages"):
        Dataset(paths).batch(2).load_state_dict(ds.state_dict())


# -- take and skip -------------------------------------------------------------------------------


def test_take_and_skip_follow_the_epoch_order(files):
    paths, records = files(WITH_SEQUENTIAL)
    ds = Dataset(paths)
    assert list(ds.take(10)) == records[:10]
    assert list(ds.skip(10)) == records[10:]
    assert list(ds.skip(5).take(10)) == records[5:15]
    assert list(ds.take(10).skip(5)) == records[5:10]
    assert list(ds.skip(3).skip(4).take(100).take(6)) == records[7:13]
    assert list(ds.take(0)) == []
    assert list(ds.skip(len(records) + 5)) == []
    assert list(ds.map(index).take(3)) == [index(r) for r in records[:3]]


@pytest.mark.parametrize(("mode", "suffixes"), MODES)
@pytest.mark.parametrize(("world_size", "num_workers"), [(1, 1), (2, 2), (3, 4), (5, 1)])
@pytest.mark.parametrize("n", [0, 1, 17, 30, 1000])
def test_take_is_global_over_ranks_and_workers(files, mode, suffixes, world_size, num_workers, n):
    paths, records = files(suffixes)

    def taken(rank, ws):
        return shuffled(Dataset(paths, seed=9, rank=rank, world_size=ws), mode).take(n)

    def skipped(rank, ws):
        return shuffled(Dataset(paths, seed=9, rank=rank, world_size=ws), mode).skip(n)

    head = [r for share in every_share(taken, world_size, num_workers) for r in share]
    tail = [r for share in every_share(skipped, world_size, num_workers) for r in share]
    assert len(head) == min(n, len(records))
    assert len(set(head)) == len(head)
    # take(n) and skip(n) at the same point partition the epoch
    assert collections.Counter(head + tail) == collections.Counter(records)
    # and they are the epoch's first n records in a single process (with a buffer shuffle: of the
    # file-ordered stream that feeds the buffers)
    one = list(shuffled(Dataset(paths, seed=9), "files" if mode == "buffer" else mode))
    assert set(head) == set(one[:n])


def test_take_before_and_after_a_shuffle(files):
    paths, records = files(RANDOM_ACCESS, [40, 30, 50])
    fixed = Dataset(paths, seed=1).take(20).shuffle()
    epochs = [list(fixed) for _ in range(3)]
    for epoch in epochs:
        assert sorted(epoch) == sorted(records[:20])  # the same records each epoch...
    assert len({tuple(e) for e in epochs}) == 3  # ...in a new order
    fresh = Dataset(paths, seed=1).shuffle().take(20)
    samples = [set(fresh) for _ in range(3)]
    assert all(len(s) == 20 for s in samples)
    assert len({frozenset(s) for s in samples}) == 3  # different records each epoch
    validation = set(Dataset(paths, seed=1).take(25).shuffle(8))
    training = Dataset(paths, seed=1).skip(25).shuffle(8)
    for _ in range(3):
        assert not validation & set(training)


def test_take_equal_shards(files):
    paths, _ = files(RANDOM_ACCESS)

    def make(rank, ws):
        return Dataset(paths, rank=rank, world_size=ws, equal_shards="drop").shuffle().take(23)

    shares = every_share(make, 2, 2)
    assert [len(s) for s in shares] == [5, 5, 5, 5]
    assert len({r for s in shares for r in s}) == 20


def test_take_after_filter_or_batch_is_refused(files):
    paths, _ = files(RANDOM_ACCESS)
    ds = Dataset(paths)
    for late in (ds.filter(odd), ds.batch(2), ds.batch(2).unbatch()):
        with pytest.raises(ValueError, match="before"):
            late.take(3)
        with pytest.raises(ValueError, match="before"):
            late.skip(3)
    with pytest.raises(ValueError, match="count"):
        ds.take(-1)
    with pytest.raises(TypeError, match="mix"):
        mix([ds, ds]).take(3)
    assert "records[2:5]" in repr(ds.skip(2).take(3))


def test_skip_counts_only_the_compressed_files_it_passes(files, monkeypatch):
    paths, records = files([".tfrecord.gz"], [5, 6, 7])
    counted = []
    real = Catalog.count

    def tracking(self, i):
        counted.append(i)
        return real(self, i)

    monkeypatch.setattr(Catalog, "count", tracking)
    assert list(Dataset(paths).skip(7)) == records[7:]
    assert counted == [0, 1]


@pytest.mark.parametrize(("mode", "suffixes"), MODES)
def test_resume_with_take_and_skip(files, mode, suffixes):
    paths, _ = files(suffixes)

    def build():
        return shuffled(Dataset(paths, seed=3).skip(4), mode).skip(2).take(25).batch(2).repeat(2)

    resumes(build, [0, 1, 5, 12, 13, 20, 26])


# -- interleave ----------------------------------------------------------------------------------


def reference_interleave(files: list[list[bytes]], cycle: int, block: int) -> list[bytes]:
    """tf.data's deterministic interleave, written out: slots take turns, an empty slot takes the next file."""
    pending = collections.deque(iter(f) for f in files)
    slots: list = [None] * cycle
    out: list[bytes] = []
    i = 0
    while pending or any(s is not None for s in slots):
        if slots[i] is None and pending:
            slots[i] = pending.popleft()
        if slots[i] is not None:
            for _ in range(block):
                record = next(slots[i], None)
                if record is None:
                    slots[i] = None
                    break
                out.append(record)
            else:
                i = (i + 1) % cycle
                continue
        i = (i + 1) % cycle
    return out


@pytest.mark.parametrize(("cycle", "block"), [(1, 1), (2, 1), (2, 3), (3, 2), (10, 4)])
def test_interleave_order(files, cycle, block):
    sizes = [5, 0, 9, 2, 7, 4]
    paths, records = files(WITH_SEQUENTIAL, sizes)
    per_file = [[r for r in records if r.startswith(f"{i}:".encode())] for i in range(len(sizes))]
    got = list(Dataset(paths).interleave(cycle, block_length=block))
    assert got == reference_interleave(per_file, cycle, block)


@pytest.mark.interop
@pytest.mark.parametrize(("cycle", "block"), [(2, 1), (3, 2), (4, 5)])
def test_interleave_order_matches_tf_data(files, cycle, block):
    tf = pytest.importorskip("tensorflow")
    paths, _ = files([".tfrecord"], [5, 1, 9, 2, 7, 4, 8])
    expected = tf.data.Dataset.from_tensor_slices(paths).interleave(
        tf.data.TFRecordDataset, cycle_length=cycle, block_length=block
    )
    got = list(Dataset(paths).interleave(cycle, block_length=block))
    assert got == [r.numpy() for r in expected]


@pytest.mark.parametrize(("mode", "suffixes"), [m for m in MODES if m[0] != "global"])
@pytest.mark.parametrize(("world_size", "num_workers"), [(1, 1), (2, 2), (1, 3), (4, 1)])
def test_interleave_exactly_once_over_ranks_and_workers(
    files, mode, suffixes, world_size, num_workers
):
    paths, records = files(suffixes, [9, 14, 0, 6, 11, 3, 8, 5])

    def make(rank, ws):
        return shuffled(Dataset(paths, seed=1, rank=rank, world_size=ws), mode).interleave(3)

    got = [r for share in every_share(make, world_size, num_workers) for r in share]
    assert collections.Counter(got) == collections.Counter(records)


@pytest.mark.parametrize(("mode", "suffixes"), [m for m in MODES if m[0] != "global"])
@pytest.mark.parametrize("prefetch", [0, 3])
def test_resume_with_interleave(files, mode, suffixes, prefetch):
    paths, _ = files(suffixes, [9, 14, 0, 6, 11, 3, 8, 5])

    def build():
        ds = shuffled(Dataset(paths, seed=6).take(50), mode)
        return ds.interleave(3, block_length=2).batch(4).prefetch(prefetch)

    resumes(build, [0, 1, 3, 7, 12, 13])


def test_interleave_with_a_global_shuffle_is_refused(files):
    paths, _ = files(RANDOM_ACCESS)
    with pytest.raises(ValueError, match="interleave"):
        Dataset(paths).shuffle().interleave(2)
    with pytest.raises(ValueError, match="interleave"):
        Dataset(paths).interleave(2).shuffle()
    with pytest.raises(ValueError, match="cycle_length"):
        Dataset(paths).interleave(0)


class _GatedReader:
    """A reader whose first read waits until ``barrier`` has every party: the reads must overlap."""

    def __init__(self, reader, barrier: threading.Barrier, active: list[int]) -> None:
        self._reader, self._barrier, self._active = reader, barrier, active
        self._waited = False

    def _gate(self) -> None:
        if not self._waited:
            self._waited = True
            self._active.append(1)
            self._barrier.wait()

    def read(self, indices):
        self._gate()
        return self._reader.read(indices)

    def __iter__(self):
        self._gate()
        return iter(self._reader)

    def iter_from(self, start: int):
        self._gate()
        return self._reader.iter_from(start)

    def __len__(self) -> int:
        return len(self._reader)

    def __getattr__(self, name):
        return getattr(self._reader, name)


@pytest.mark.parametrize("suffix", [".ffr", ".tfrecord.gz"])
def test_interleave_reads_files_concurrently(suffix, monkeypatch):
    fsspec = pytest.importorskip("fsspec")
    fs = fsspec.filesystem("memory")
    folder = f"memory://interleave-{suffix.strip('.').replace('.', '-')}"
    records = []
    for i in range(6):
        data = [f"{i}:{j}".encode() for j in range(20)]
        records.extend(data)
        with fs.open(f"{folder}/part-{i}{suffix}", "wb") as handle:
            write_to(handle, data, suffix)
    cycle = 3
    barrier = threading.Barrier(cycle, timeout=60)
    active: list[int] = []
    real_open = Catalog.open
    monkeypatch.setattr(
        Catalog, "open", lambda self, i: _GatedReader(real_open(self, i), barrier, active)
    )
    # Each of the first three reads waits for the two others: read one after the other, they would
    # break the barrier (BrokenBarrierError) instead of passing it.
    before = {t.ident for t in threading.enumerate()}
    got = list(Dataset(f"{folder}/part-*{suffix}").interleave(cycle))
    assert collections.Counter(got) == collections.Counter(records)
    assert len(active) >= cycle
    assert not [
        t
        for t in threading.enumerate()
        if t.name == "recordkit-interleave" and t.ident not in before
    ]


def write_to(handle, records: list[bytes], suffix: str) -> None:
    """Write ``records`` into an open binary file in the format the suffix names."""
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        path = write(Path(folder) / f"f{suffix}", records)
        handle.write(path.read_bytes())


def test_interleave_error_is_raised_and_threads_stop(tmp_path):
    good = [
        str(write(tmp_path / f"a{i}.tfrecord", [b"x%d" % j for j in range(50)])) for i in range(3)
    ]
    bad = tmp_path / "b.tfrecord"
    data = bytearray(write(bad, [b"payload"] * 40).read_bytes())
    data[-3] ^= 0xFF
    bad.write_bytes(bytes(data))
    with pytest.raises(rk.CorruptRecordError) as info:
        list(Dataset([*good, str(bad)]).interleave(4))
    assert info.value.path is not None
    assert info.value.path.endswith("b.tfrecord")
    it = iter(Dataset(good).interleave(3))
    next(it)
    it.close()
    assert not [t for t in threading.enumerate() if t.name == "recordkit-interleave"]


def test_interleave_inside_a_worker(files):
    paths, records = files(RANDOM_ACCESS, [10, 10, 10, 10])
    with as_worker(1, 2):
        share = list(Dataset(paths).interleave(2))
    assert sorted(share) == sorted(records[20:])
