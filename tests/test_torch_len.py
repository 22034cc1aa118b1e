"""len() of DataLoaders over recordkit pipelines, where the pipeline knows its length."""

from __future__ import annotations

import pytest
from _data_files import make_files

from recordkit.data import Dataset, mix
from recordkit.data._dataset import EPOCH_END
from recordkit.datasets.ranks import resolve_rank, shard_of, worker_info

torch = pytest.importorskip("torch")
pytestmark = [
    pytest.mark.torch,
    pytest.mark.filterwarnings("ignore:This DataLoader will create:UserWarning"),
]

from recordkit.integrations.torch import MapDataset, dataloader, torch_dataset


class Counted(Dataset):
    """A pipeline whose len() is what iterating its own shard in this process gives (the oracle)."""

    def __len__(self) -> int:
        rank, world_size = resolve_rank(self._rank, self._world_size)
        shard, num_shards = shard_of(rank, world_size, *worker_info())
        items = self._items(shard, num_shards, self.epoch, self.epoch, 0, self._repeat)
        return sum(1 for item in items if item is not EPOCH_END)


@pytest.fixture(scope="module")
def paths(tmp_path_factory) -> list[str]:
    folder = tmp_path_factory.mktemp("len")
    return make_files(folder, [10, 13, 7], [".ffr", ".tfrecord", ".tfrecord.gz"])[0]


@pytest.mark.parametrize("workers", [0, 2, 3])
@pytest.mark.parametrize("rank", [0, 1])
def test_recordkit_loader_len_counts_each_workers_batches(paths, workers, rank):
    ds = Counted(paths, seed=1, rank=rank, world_size=2).shuffle(4).batch(3).repeat(2)
    loader = dataloader(ds, num_workers=workers, multiprocessing_context="fork")
    assert len(loader) == sum(1 for _ in loader)
    if workers == 3:  # each worker batches its own share: more (short) batches than in one process
        assert len(loader) > len(dataloader(ds))


def test_plain_loader_len_follows_the_pipeline(paths):
    ds = Counted(paths, seed=1).shuffle(4)
    assert len(torch.utils.data.DataLoader(torch_dataset(ds), batch_size=None)) == 30
    assert len(torch.utils.data.DataLoader(torch_dataset(ds), batch_size=4)) == 8
    assert len(torch.utils.data.DataLoader(torch_dataset(ds.batch(4)), batch_size=None)) == 8


def test_no_length_is_a_type_error(paths):
    kept = Dataset(paths).filter(bool)
    with pytest.raises(TypeError, match="filter"):
        len(torch.utils.data.DataLoader(torch_dataset(kept), batch_size=None))
    with pytest.raises(TypeError, match="filter"):
        len(dataloader(kept))


def mixed(paths, stop):
    sources = [Dataset(paths[:1], seed=1).shuffle(), Dataset(paths[1:2], seed=1).shuffle()]
    return mix(sources, [0.6, 0.4], seed=2, stop=stop)


@pytest.mark.parametrize("workers", [0, 2])
def test_mix_until_the_first_runs_out_has_no_length_in_a_plain_loader(paths, workers):
    loader = torch.utils.data.DataLoader(
        torch_dataset(mixed(paths, "first_exhausted")), batch_size=None
    )
    with pytest.raises(TypeError, match="number of workers"):
        len(loader)
    exact = dataloader(
        mixed(paths, "first_exhausted"), num_workers=workers, multiprocessing_context="fork"
    )
    for _ in range(3):  # the length changes from epoch to epoch; each is exact
        assert len(exact) == sum(1 for _ in exact)


def test_plain_loader_len_is_that_of_the_epoch_it_reads_next(paths):
    iterable = torch_dataset(mixed(paths, "all_exhausted"))
    loader = torch.utils.data.DataLoader(iterable, batch_size=None)
    for _ in range(3):
        assert len(loader) == sum(1 for _ in loader) == 23


def test_forever_has_no_length(paths):
    with pytest.raises(TypeError, match="forever"):
        len(dataloader(Counted(paths).repeat()))


@pytest.mark.skipif(not hasattr(Dataset, "__len__"), reason="Dataset does not tell its length")
@pytest.mark.parametrize("workers", [0, 2])
def test_ffrecord_file_length(tmp_path, workers):
    paths, records = make_files(tmp_path, [23], [".ffr"])
    ds = Dataset(paths, seed=2).shuffle().batch(4)
    loader = dataloader(ds, num_workers=workers)
    assert len(loader) == sum(1 for _ in loader)
    plain = torch.utils.data.DataLoader(torch_dataset(Dataset(paths)), batch_size=None)
    assert len(plain) == len(records)


def test_map_dataset_lengths(paths):
    ra = [p for p in paths if not p.endswith(".gz")]
    ds = MapDataset(ra)
    assert len(torch.utils.data.DataLoader(ds, batch_size=4)) == 6
    assert len(dataloader(ds, batch_size=4, drop_last=True)) == 5
