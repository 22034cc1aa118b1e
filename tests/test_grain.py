"""Readers as Grain data sources: Grain's own ``MapDataset`` and ``DataLoader`` read what ``rk.open`` reads.

A random-access :class:`~recordkit.RecordReader` is a Grain ``RandomAccessDataSource`` with batched reads
(``_getitems``), pickles to Grain's worker processes, and has a ``repr()`` that names its data, which Grain's
``DataLoader`` compares when it restores a checkpoint.
"""

from __future__ import annotations

import os
import pickle

import pytest
from _array_record import write_array_record

import recordkit as rk

grain = pytest.importorskip("grain")
grain_base = pytest.importorskip("grain._src.python.dataset.base")

RECORDS = [b"%04d:" % i + bytes([i % 251]) * (i % 37) for i in range(300)]


def _write(tmp_path, kind: str, records: list[bytes] = RECORDS) -> str:
    if kind == "arrayrecord":
        return write_array_record(tmp_path / "data.array_record", records, "group_size:8")
    path = os.fspath(tmp_path / f"data.{kind}")
    with rk.open(path, "w") as writer:
        writer.write_many(records)
    return path


KINDS = ["tfrecord", "ffr", "arrayrecord"]


@pytest.mark.parametrize("kind", KINDS)
def test_map_dataset_source_reads_what_rk_open_reads(tmp_path, kind: str) -> None:
    path = _write(tmp_path, kind)
    with rk.open(path) as reader:
        expected = list(reader)
        assert expected == RECORDS
        assert isinstance(reader, grain.sources.RandomAccessDataSource)
        assert isinstance(reader, grain_base.SupportsBatchedReadRandomAccessDataSource)
        dataset = grain.MapDataset.source(reader)
        assert len(dataset) == len(RECORDS)
        assert [dataset[i] for i in range(len(dataset))] == expected
        # Grain's batched read of a source (what its batch pushdown calls) is the reader's batched read.
        calls: list[list[int]] = []
        batched_read = reader.read

        def spy(indices):
            calls.append(list(indices))
            return batched_read(indices)

        reader._getitems = spy  # type: ignore[method-assign]
        wanted = [7, 3, 299, 3, 0]
        assert dataset._getitems(wanted) == [expected[i] for i in wanted]
        assert calls == [wanted]
        batches = list(dataset.batch(64, batch_fn=list))
        assert [record for batch in batches for record in batch] == expected
        shuffled = list(grain.MapDataset.source(reader).shuffle(seed=3))
        assert shuffled != expected
        assert sorted(shuffled) == sorted(expected)


def test_getitems_is_read(tmp_path) -> None:
    with rk.open(_write(tmp_path, "tfrecord")) as reader:
        assert reader._getitems([5, 2, -1, 5]) == [RECORDS[5], RECORDS[2], RECORDS[-1], RECORDS[5]]
        with pytest.raises(IndexError):
            reader._getitems([300])


def test_repr_identifies_the_data(tmp_path) -> None:
    path = _write(tmp_path, "tfrecord")
    with rk.open(path) as reader, rk.open(path) as again:
        text = repr(reader)
        assert text.startswith(f"<RecordReader tfrecord {path!r}: 1 file, 300 records, content ")
        assert repr(again) == text
        assert repr(pickle.loads(pickle.dumps(reader))) == text
    assert repr(reader) == f"<RecordReader tfrecord {path!r} (closed)>"
    # Rewritten with other content of the same size and count: the token changes with the file.
    stat = os.stat(path)
    with rk.open(path, "w") as writer:
        writer.write_many([bytes(reversed(r)) for r in RECORDS])
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    assert os.path.getsize(path) == stat.st_size
    with rk.open(path) as changed:
        assert repr(changed) != text
        assert repr(changed).split(", content")[0] == text.split(", content")[0]


def test_repr_of_a_dataset_directory(tmp_path) -> None:
    with rk.ShardWriter(
        os.fspath(tmp_path / "ds" / "part-{shard:02d}.tfrecord"), max_records=100
    ) as writer:
        writer.write_many(RECORDS)
    with rk.open(tmp_path / "ds") as reader:
        assert ": 3 files, 300 records, content " in repr(reader)


def test_repr_of_a_compressed_file(tmp_path) -> None:
    path = os.fspath(tmp_path / "data.tfrecord.gz")
    with rk.open(path, "w") as writer:
        writer.write_many(RECORDS)
    with rk.open(path) as reader:
        assert ": 1 file, records unknown, content " in repr(reader)
        assert list(reader) == RECORDS


def _loader(path: str, *, workers: int, seed: int = 7):
    source = rk.open(path)
    sampler = grain.samplers.IndexSampler(
        num_records=len(source),
        shard_options=grain.sharding.NoSharding(),
        shuffle=True,
        num_epochs=1,
        seed=seed,
    )
    return grain.DataLoader(data_source=source, sampler=sampler, worker_count=workers)


@pytest.mark.parametrize("kind", KINDS)
def test_data_loader_checkpoint_restore(tmp_path, kind: str) -> None:
    path = _write(tmp_path, kind)
    whole = list(_loader(path, workers=0))
    assert sorted(whole) == sorted(RECORDS)
    assert whole != RECORDS
    iterator = iter(_loader(path, workers=0))
    first = [next(iterator) for _ in range(123)]
    state = iterator.get_state()
    restored = iter(_loader(path, workers=0))
    restored.set_state(state)
    assert first + list(restored) == whole


def test_data_loader_refuses_a_checkpoint_of_other_data(tmp_path) -> None:
    path = _write(tmp_path, "tfrecord")
    iterator = iter(_loader(path, workers=0))
    next(iterator)
    state = iterator.get_state()
    other = _write(tmp_path, "ffr")
    restored = iter(_loader(other, workers=0))
    with pytest.raises(ValueError, match="data source"):
        restored.set_state(state)


@pytest.mark.slow
@pytest.mark.parametrize("kind", KINDS)
def test_data_loader_with_workers(tmp_path, kind: str) -> None:
    path = _write(tmp_path, kind)
    with rk.open(path) as reader:
        expected = list(reader)
    whole = list(_loader(path, workers=2))
    assert sorted(whole) == sorted(expected)
    assert whole == list(_loader(path, workers=0))  # the same order with workers as without
    iterator = iter(_loader(path, workers=2))
    first = [next(iterator) for _ in range(100)]
    state = iterator.get_state()
    restored = iter(_loader(path, workers=2))
    restored.set_state(state)
    assert first + list(restored) == whole
