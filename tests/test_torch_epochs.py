"""A plain torch DataLoader over torch_dataset() reads a new epoch at every iteration, agreed on by all workers."""

from __future__ import annotations

import collections
import itertools

import pytest
from _data_files import make_files

from recordkit.data import Dataset

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch

from recordkit.integrations.torch import torch_dataset

# (num_workers, start method, persistent workers)
# spawn starts a fresh interpreter per worker (about 10 s here): those cases run with the slow tests.
SETUPS = [
    (0, None, False),
    (2, "fork", False),
    (2, "fork", True),
    pytest.param((2, "spawn", False), marks=pytest.mark.slow),
    pytest.param((2, "spawn", True), marks=pytest.mark.slow),
]


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> tuple[list[str], list[bytes]]:
    """Random-access and GZIP files, 47 unique records."""
    folder = tmp_path_factory.mktemp("epochs")
    return make_files(folder, [9, 14, 3, 11, 10], [".ffr", ".tfrecord", ".tfrecord.gz"])


def loader_of(iterable, num_workers, context, persistent, **options):
    return torch.utils.data.DataLoader(
        iterable,
        batch_size=None,
        num_workers=num_workers,
        multiprocessing_context=context,
        persistent_workers=persistent,
        **options,
    )


def epochs_of(paths, setup, count=3, *, seed=5, rank=None, world_size=None, buffer=8):
    num_workers, context, persistent = setup
    ds = Dataset(paths, seed=seed, rank=rank, world_size=world_size).shuffle(buffer)
    loader = loader_of(torch_dataset(ds), num_workers, context, persistent)
    return [[bytes(r) for r in loader] for _ in range(count)]


@pytest.mark.parametrize("setup", SETUPS, ids=lambda s: f"{s[0]}-{s[1]}-persistent{s[2]}")
def test_each_iteration_is_a_new_epoch(files, setup):
    paths, records = files
    epochs = epochs_of(paths, setup)
    for epoch in epochs:
        assert collections.Counter(epoch) == collections.Counter(records)  # each record once
    assert len({tuple(e) for e in epochs}) == 3  # three different orders
    assert epochs == epochs_of(
        paths, setup
    )  # a fresh loader with the same seed repeats the sequence


def random_access(paths: list[str]) -> list[str]:
    return [p for p in paths if not p.endswith(".gz")]


@pytest.mark.parametrize("buffer", [None, 4])
def test_epochs_follow_the_dataset_epochs(files, buffer):
    """Iteration k reads epoch k: the same records per worker as set_epoch(k) on the pipeline itself."""
    paths = random_access(files[0]) if buffer is None else files[0]
    got = epochs_of(paths, (2, "fork", False), buffer=buffer)
    for epoch, items in enumerate(got):
        ds = Dataset(paths, seed=5).shuffle(buffer)
        explicit = torch_dataset(ds)
        explicit.set_epoch(epoch)
        assert items == [bytes(r) for r in loader_of(explicit, 2, "fork", False)]
    ds = Dataset(paths, seed=5).shuffle(buffer)
    ds.set_epoch(2)
    assert sorted(got[2]) == sorted(bytes(r) for r in ds)


def test_ranks_seeded_differently_agree(files):
    """Ranks whose torch generators differ still read complementary shards of the same epoch."""
    paths, records = files
    per_rank = []
    for rank in range(2):
        torch.manual_seed(1000 + 17 * rank)
        per_rank.append(epochs_of(paths, (2, "fork", False), rank=rank, world_size=2))
    for epoch in range(3):
        union = collections.Counter(per_rank[0][epoch] + per_rank[1][epoch])
        assert union == collections.Counter(records)


def test_same_torch_seed_every_epoch_still_advances(files):
    """Re-seeding torch before each epoch gives every iteration the same base seed; epochs still advance."""
    paths, records = files
    ds = Dataset(paths, seed=5).shuffle(8)
    loader = loader_of(torch_dataset(ds), 2, "fork", False)
    epochs = []
    for _ in range(3):
        torch.manual_seed(0)
        epochs.append([bytes(r) for r in loader])
    assert all(collections.Counter(e) == collections.Counter(records) for e in epochs)
    assert len({tuple(e) for e in epochs}) == 3


@pytest.mark.parametrize("setup", [(0, None, False), (2, "fork", True)], ids=["main", "persistent"])
def test_set_epoch_wins(files, setup):
    paths, _ = files
    auto = epochs_of(paths, setup, count=3)
    iterable = torch_dataset(Dataset(paths, seed=5).shuffle(8))
    loader = loader_of(iterable, *setup)
    assert iterable.epoch == 0
    iterable.set_epoch(2)
    assert [bytes(r) for r in loader] == auto[2]
    assert iterable.epoch == 3
    iterable.set_epoch(1)  # persistent workers see it too: the clock is shared
    assert [bytes(r) for r in loader] == auto[1]
    assert [bytes(r) for r in loader] == auto[2]  # and counting goes on from there
    with pytest.raises(ValueError, match="non-negative"):
        iterable.set_epoch(-1)


def test_abandoned_iteration_counts_as_an_epoch(files):
    paths, records = files
    iterable = torch_dataset(Dataset(paths, seed=5).shuffle(8))
    loader = loader_of(iterable, 2, "fork", False)
    head = [bytes(r) for r in itertools.islice(loader, 5)]
    assert len(head) == 5
    whole = [bytes(r) for r in loader]
    assert collections.Counter(whole) == collections.Counter(records)
    assert iterable.epoch == 2
    assert whole == epochs_of(paths, (2, "fork", False), count=2)[1]


def test_repeat_reads_its_epochs_per_iteration(files):
    paths, records = files
    iterable = torch_dataset(Dataset(paths, seed=5).shuffle(8).repeat(2))
    loader = loader_of(iterable, 2, "fork", False)
    first, second = [bytes(r) for r in loader], [bytes(r) for r in loader]
    assert len(first) == len(second) == 2 * len(records)
    assert iterable.epoch == 4
    single = epochs_of(paths, (2, "fork", False), count=4)
    assert sorted(second) == sorted(single[2] + single[3])
    assert second != first


def test_forever_then_next_iteration_starts_after_the_epochs_read(files):
    paths, records = files
    iterable = torch_dataset(Dataset(paths, seed=5).shuffle(8).repeat())
    head = list(itertools.islice(iter(iterable), 2 * len(records) + 3))  # into the third epoch
    assert len(head) == 2 * len(records) + 3
    assert iterable.epoch == 3


def test_copies_outside_workers_do_not_share_the_clock(files):
    import copy
    import pickle

    paths, _ = files
    iterable = torch_dataset(Dataset(paths, seed=5))
    iterable.set_epoch(4)
    clone = pickle.loads(pickle.dumps(iterable))
    twin = copy.deepcopy(iterable)
    assert clone.epoch == twin.epoch == 4
    clone.set_epoch(9)
    assert iterable.epoch == 4
    assert twin.epoch == 4
