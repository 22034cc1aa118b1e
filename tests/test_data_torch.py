"""PyTorch glue: DataLoader workers and ranks, fork and spawn, MapDataset, resumable loaders."""

from __future__ import annotations

import collections
import functools
import itertools
import json
import pickle
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import pytest
from _data_files import make_files

import recordkit as rk
from recordkit.data import Dataset, Loader
from recordkit.errors import DataLossWarning

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch

from recordkit.integrations.torch import MapDataset, dataloader, torch_dataset


@pytest.fixture(scope="module")
def eleven(tmp_path_factory) -> tuple[list[str], list[bytes]]:
    """8 TFRecord files (3 of them GZIP, read sequentially) and 3 FFRecord files, 124 unique records."""
    folder = tmp_path_factory.mktemp("eleven")
    tf_paths, tf_records = make_files(
        folder, [9, 14, 3, 11, 0, 17, 6, 12], [".tfrecord", ".tfrecord.gz", ".tfrecord"]
    )
    ff_dir = folder / "ffr"
    ff_dir.mkdir()
    ff_paths, ff_records = make_files(ff_dir, [20, 8, 24], [".ffr"])
    return tf_paths + ff_paths, tf_records + [b"ff" + r for r in ff_records]


def flatten(batches) -> list[bytes]:
    return [bytes(r) for batch in batches for r in batch]


def records_of(files: tuple[list[str], list[bytes]]) -> collections.Counter[bytes]:
    paths, _ = files
    return collections.Counter(flatten(Dataset(paths).batch(100)))


def ranks_epoch(paths, *, context, epochs=1, world_size=3, **dataset_options):
    """Run ranks 0..world_size-1 in turn; return, per epoch, what each rank read."""
    per_epoch = [[] for _ in range(epochs)]
    for rank in range(world_size):
        ds = Dataset(paths, seed=4, rank=rank, world_size=world_size, **dataset_options).shuffle(16)
        loader = dataloader(ds, batch_size=4, num_workers=2, multiprocessing_context=context)
        for epoch in range(epochs):
            per_epoch[epoch].append(flatten(loader))
    return per_epoch


def test_fork_workers_and_ranks_read_each_record_once_per_epoch(eleven):
    expected = records_of(eleven)
    epochs = ranks_epoch(eleven[0], context="fork", epochs=2)
    for per_rank in epochs:
        assert collections.Counter(r for rank in per_rank for r in rank) == expected
    assert epochs[0] != epochs[1]  # a new order in the next epoch


# spawn starts a fresh interpreter per worker (about 8 s here): with the slow tests; the fork
# variants stay in the default run.
@pytest.mark.slow
def test_spawn_workers_and_ranks_read_each_record_once(eleven):
    expected = records_of(eleven)
    (per_rank,) = ranks_epoch(eleven[0], context="spawn")
    assert collections.Counter(r for rank in per_rank for r in rank) == expected
    assert all(per_rank)


def test_fewer_files_than_ranks_times_workers(tmp_path):
    paths, records = make_files(tmp_path, [7, 10], [".tfrecord.gz", ".ffr"])
    (per_rank,) = ranks_epoch(paths, context="fork")  # 2 files, 3 ranks x 2 workers
    assert collections.Counter(r for rank in per_rank for r in rank) == collections.Counter(records)


def test_equal_shards_give_equal_steps(tmp_path):
    paths, records = make_files(tmp_path, [7, 10, 2], [".tfrecord.gz", ".ffr"])
    for mode in ("pad", "drop"):
        (per_rank,) = ranks_epoch(paths, context="fork", equal_shards=mode)
        assert len({len(rank) for rank in per_rank}) == 1
        union = collections.Counter(r for rank in per_rank for r in rank)
        if mode == "pad":
            assert set(union) == set(records)
        else:
            assert max(union.values()) == 1


def test_same_seed_same_order(eleven):
    paths, _ = eleven

    def run():
        ds = Dataset(paths, seed=9).shuffle(10)
        return flatten(dataloader(ds, batch_size=5, num_workers=2, multiprocessing_context="fork"))

    first = run()
    assert first == run()


def test_plain_dataloader_over_torch_dataset(eleven):
    paths, _ = eleven
    expected = records_of(eleven)
    got = collections.Counter()
    for rank in range(2):
        iterable = torch_dataset(Dataset(paths, seed=2, rank=rank, world_size=2).shuffle(8))
        loader = torch.utils.data.DataLoader(
            iterable, batch_size=None, num_workers=2, multiprocessing_context="fork"
        )
        got.update(bytes(r) for r in loader)
    assert got == expected


def test_numpy_items_become_tensors(tmp_path):
    paths, _ = make_files(tmp_path, [6], [".ffr"])
    ds = Dataset(paths).map(len)
    batches = list(dataloader(ds, batch_size=4))
    assert [b.tolist() for b in batches] == [[3, 3, 3, 3], [3, 3]]
    assert all(isinstance(b, torch.Tensor) for b in batches)


def test_dataloader_argument_errors(tmp_path):
    paths, _ = make_files(tmp_path, [3], [".ffr"])
    with pytest.raises(ValueError, match="settings of the Dataset"):
        dataloader(Dataset(paths), shuffle=True)
    with pytest.raises(TypeError, match="Dataset or a MapDataset"):
        dataloader([1, 2, 3])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"recordkit\.data\.Dataset"):
        torch_dataset([1])  # type: ignore[arg-type]


LOADER_SCRIPT = textwrap.dedent(
    """
    import json, sys
    from recordkit.data import Dataset, Loader
    from recordkit.integrations.torch import dataloader
    paths, mode, state = json.loads(sys.stdin.read())
    ds = Dataset(paths, seed=8)
    ds = ds.shuffle(5) if mode == "buffer" else ds.shuffle()
    loader = dataloader(ds, batch_size=3, num_workers=2, multiprocessing_context="fork")
    loader.load_state_dict(state)
    print(json.dumps([r.decode() for batch in loader for r in batch]))
    """
)


@pytest.mark.parametrize("mode", ["buffer", "global"])
def test_loader_resumes_in_a_fresh_process(tmp_path, mode):
    paths, records = make_files(tmp_path, [10, 13, 8, 5], [".ffr", ".tfrecord"])
    ds = Dataset(paths, seed=8)
    ds = ds.shuffle(5) if mode == "buffer" else ds.shuffle()
    loader = dataloader(ds, batch_size=3, num_workers=2, multiprocessing_context="fork")
    it = iter(loader)
    head = flatten(itertools.islice(it, 5))
    state = loader.state_dict()
    del it
    out = subprocess.run(
        [sys.executable, "-c", LOADER_SCRIPT],
        input=json.dumps([paths, mode, state]),
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    rest = [r.encode() for r in json.loads(out.stdout)]
    assert collections.Counter(head + rest) == collections.Counter(records)
    assert loader.epoch == 0


def test_loader_advances_epochs_and_repeats(tmp_path):
    paths, records = make_files(tmp_path, [10, 7], [".ffr", ".tfrecord"])
    loader = dataloader(Dataset(paths, seed=1).shuffle(4).repeat(2), batch_size=4)
    both = flatten(loader)
    assert len(both) == 2 * len(records)
    assert loader.epoch == 2
    assert collections.Counter(both[: len(records)]) == collections.Counter(records)
    third = flatten(loader)  # the next iteration reads epochs 2 and 3
    assert loader.epoch == 4
    assert third != both
    loader.set_epoch(0)
    assert flatten(loader) == both


def test_loader_state_mismatch(tmp_path):
    paths, _ = make_files(tmp_path, [10], [".ffr"])
    loader = dataloader(Dataset(paths, seed=1), batch_size=2, num_workers=2)
    state = loader.state_dict()
    other = dataloader(Dataset(paths, seed=2), batch_size=2, num_workers=2)
    with pytest.raises(ValueError, match="seed"):
        other.load_state_dict(state)
    with pytest.raises(ValueError, match="not a recordkit loader state"):
        loader.load_state_dict(Dataset(paths).state_dict())


# -- MapDataset -------------------------------------------------------------------------------------


class Lengths(MapDataset):
    def process(self, indices, data):
        return [(i, len(d), bytes(d)) for i, d in zip(indices, data, strict=True)]


@pytest.fixture
def ffr_files(tmp_path) -> tuple[list[str], list[bytes]]:
    return make_files(tmp_path, [5, 0, 8, 3], [".ffr", ".tfrecord"])


def test_map_dataset_reads_a_batch_of_indices(ffr_files):
    paths, records = ffr_files
    ds = MapDataset(paths)
    assert len(ds) == len(records)
    assert ds[[3, 0, 15, -1, 7]] == [records[i] for i in (3, 0, 15, -1, 7)]
    assert ds[4] == records[4]
    with pytest.raises(IndexError):
        ds[[0, len(records)]]
    custom = Lengths(paths)
    assert custom[[2, 9]] == [(2, len(records[2]), records[2]), (9, len(records[9]), records[9])]
    joined = MapDataset(paths, process=lambda idx, data: b"|".join(data))
    assert joined[[0, 1]] == records[0] + b"|" + records[1]


def test_map_dataset_takes_slices_and_negative_indexes_as_open_does(tmp_path):
    paths, records = make_files(tmp_path, [5, 0, 8, 3], [".ffr"])
    ds = MapDataset(paths)
    with rk.open(paths) as reader:  # the oracle: what recordkit.open's reader returns
        for key in (slice(2, 9), slice(None, None, -3), slice(-4, None), slice(5, 2), slice(None)):
            assert ds[key] == reader[key]
        assert ds[-1] == reader[-1]
    seen = []

    def record_indices(indices, data):
        seen.append(list(indices))
        return data

    spy = MapDataset(paths, process=record_indices)
    n = len(records)
    assert spy[-1] == records[-1]
    assert spy[[-2, 0]] == [records[-2], records[0]]
    assert spy[n - 3 :] == records[n - 3 :]
    assert seen == [[n - 1], [n - 2, 0], [n - 3, n - 2, n - 1]]
    with pytest.raises(IndexError):
        spy[-n - 1]
    with pytest.raises(IndexError):
        spy[[n]]


def test_map_dataset_refuses_sequential_files(tmp_path):
    paths, _ = make_files(tmp_path, [3], [".tfrecord.gz"])
    with pytest.raises(Exception, match="sequentially"):
        MapDataset(paths)


def test_map_dataset_pickles_without_readers(ffr_files):
    paths, records = ffr_files
    ds = MapDataset(paths)
    assert ds[[1]] == [records[1]]  # opens readers in this process
    clone = pickle.loads(pickle.dumps(ds))
    assert clone._records._pool is None
    assert clone[[2, 1]] == [records[2], records[1]]
    ds.close()
    clone.close()


@pytest.mark.parametrize("shuffle", [False, True])
def test_map_dataset_loader_after_parent_read_with_fork(ffr_files, shuffle):
    paths, records = ffr_files
    ds = MapDataset(paths)
    assert ds[[0]] == [records[0]]  # the parent opened its readers before the fork
    got = collections.Counter()
    for rank in range(3):
        loader = dataloader(
            ds,
            batch_size=4,
            shuffle=shuffle,
            seed=3,
            rank=rank,
            world_size=3,
            num_workers=2,
            multiprocessing_context="fork",
        )
        batches = list(loader)
        assert len(loader) == len(batches)
        got.update(flatten(batches))
    assert got == collections.Counter(records)


def test_map_dataset_loader_resume(ffr_files):
    paths, records = ffr_files
    loader = dataloader(MapDataset(paths), batch_size=3, shuffle=True, seed=5)
    full = list(loader)
    loader.set_epoch(0)
    it = iter(loader)
    head = list(itertools.islice(it, 2))
    state = loader.state_dict()
    fresh = dataloader(MapDataset(paths), batch_size=3, shuffle=True, seed=5)
    fresh.load_state_dict(state)
    assert head + list(fresh) == full
    assert sorted(flatten(full)) == sorted(records)


def test_import_recordkit_data_does_not_import_torch():
    code = (
        "import recordkit, recordkit.data, sys; assert 'torch' not in sys.modules, 'torch imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_missing_torch_gives_install_hint():
    code = textwrap.dedent(
        """
        import sys
        sys.modules["torch"] = None
        try:
            from recordkit.integrations.torch import dataloader
        except ImportError as exc:
            assert "recordkit[torch]" in str(exc), exc
        else:
            raise SystemExit("no ImportError")
        """
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_worker_pid_change_reopens(tmp_path):
    """A pool inherited through fork opens its own readers instead of using the parent's."""
    import os

    from recordkit.data._readers import Catalog, ReaderPool

    paths, records = make_files(tmp_path, [4], [".ffr"])
    pool = ReaderPool(Catalog(paths))
    parent_reader = pool.get(0)
    pool._pid = os.getpid() + 1  # as seen from a forked child
    child_reader = pool.get(0)
    assert child_reader is not parent_reader
    assert not parent_reader.closed
    assert child_reader.read([3, 0]) == [records[3], records[0]]
    parent_reader.close()
    pool.close()
    Path(paths[0]).unlink()


def test_map_dataset_workers_keep_epochs_and_resume(ffr_files):
    paths, records = ffr_files

    def make():
        return dataloader(
            MapDataset(paths),
            batch_size=3,
            shuffle=True,
            seed=5,
            num_workers=2,
            multiprocessing_context="fork",
        )

    loader = make()
    first, second = list(loader), list(loader)
    assert sorted(flatten(first)) == sorted(flatten(second)) == sorted(records)
    assert flatten(first) != flatten(second)  # a new order each epoch, workers kept
    plain = dataloader(MapDataset(paths), batch_size=3, shuffle=True, seed=5)
    assert flatten(first) == flatten(list(plain))  # the same order as without workers
    loader.set_epoch(0)
    it = iter(loader)
    head = list(itertools.islice(it, 2))
    state = loader.state_dict()
    fresh = make()
    fresh.load_state_dict(state)
    assert flatten(head + list(fresh)) == flatten(first)


def test_persistent_workers_is_deprecated_and_changes_nothing(eleven, ffr_files):
    for dataset in (Dataset(eleven[0]), MapDataset(ffr_files[0])):
        plain = list(dataloader(dataset, batch_size=4, num_workers=1, to="numpy"))
        with pytest.warns(DeprecationWarning, match="persistent_workers=True. is ignored"):
            loader = dataloader(
                dataset, batch_size=4, num_workers=1, persistent_workers=True, to="numpy"
            )
        assert type(loader) is Loader
        assert flatten(loader) == flatten(plain)


@pytest.mark.parametrize("to", ["numpy", "torch"])
def test_a_batch_whose_records_were_all_skipped_is_left_out(tmp_path, to):
    path = tmp_path / "four.ffr"
    with rk.open(path, "w") as writer:
        writer.write_many([b"rec%d" % i for i in range(4)])
    data = bytearray(path.read_bytes())
    data[data.find(b"rec2")] ^= 0xFF
    path.write_bytes(bytes(data))
    for workers in (0, 2):

        def make(workers=workers):
            return dataloader(
                MapDataset(path, on_error="skip"), batch_size=1, to=to, num_workers=workers
            )

        with pytest.warns(DataLossWarning):
            assert list(make()) == [[b"rec0"], [b"rec1"], [b"rec3"]]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DataLossWarning)
            interrupted = make()
            items = iter(interrupted)
            assert [next(items), next(items)] == [[b"rec0"], [b"rec1"]]
            state = interrupted.state_dict()
            items.close()
            restored = make()
            restored.load_state_dict(state)
            assert list(restored) == [[b"rec3"]]


def test_dataset_settings_given_to_dataloader_are_refused(eleven):
    with pytest.raises(ValueError, match="seed"):
        dataloader(Dataset(eleven[0]), seed=123)
    with pytest.raises(ValueError, match="drop_last needs a batch_size"):
        dataloader(Dataset(eleven[0]), drop_last=True)


def test_columns_from_process_keep_their_type_with_numpy_output(tmp_path):
    path = tmp_path / "labels.ffr"
    with rk.open(path, "w") as writer:
        writer.write_many([rk.encode_example({"label": i}) for i in range(6)])

    features = {"label": rk.FixedLen((), "int64")}
    ds = MapDataset(path, process=functools.partial(_parse_columns, features))
    batches = list(dataloader(ds, batch_size=3, to="numpy"))
    assert [type(b) for b in batches] == [type(rk.parse_examples([], features))] * 2
    assert [b["label"].tolist() for b in batches] == [[0, 1, 2], [3, 4, 5]]


def _parse_columns(features, indices, data):
    return rk.parse_examples(data, features)
