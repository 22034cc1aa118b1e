"""torchdata's StatefulDataLoader over recordkit datasets, and resuming with another number of workers."""

from __future__ import annotations

import collections
import itertools

import pytest
from _data_files import make_files

from recordkit.data import Dataset
from recordkit.errors import UnsupportedOperationError

torch = pytest.importorskip("torch")
# A DataLoader iterator left behind by an error is collected later, and joins each worker that is still
# waiting for work for MP_STATUS_CHECK_INTERVAL (5 s) before terminating it; 1 s keeps those joins short.
torch.utils.data._utils.MP_STATUS_CHECK_INTERVAL = 1.0
stateful = pytest.importorskip("torchdata.stateful_dataloader")
pytestmark = [
    pytest.mark.torch,
    # torchdata 0.11 calls torch.set_vital, which torch 2.13 deprecates.
    pytest.mark.filterwarnings("ignore:'set_vital' is deprecated:UserWarning"),
    # Three workers on a machine with fewer cores only warn.
    pytest.mark.filterwarnings("ignore:This DataLoader will create:UserWarning"),
]

from recordkit.integrations.torch import MapDataset, dataloader, torch_dataset

StatefulDataLoader = stateful.StatefulDataLoader


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> tuple[list[str], list[bytes]]:
    """Random-access files (FFRecord, TFRecord), 49 unique records."""
    return make_files(
        tmp_path_factory.mktemp("stateful"), [9, 14, 3, 11, 12], [".ffr", ".tfrecord"]
    )


@pytest.fixture(scope="module")
def mixed(tmp_path_factory) -> tuple[list[str], list[bytes]]:
    """Random-access and GZIP files, 47 unique records."""
    folder = tmp_path_factory.mktemp("mixed")
    return make_files(folder, [9, 14, 3, 11, 10], [".ffr", ".tfrecord.gz", ".tfrecord"])


def as_bytes(items) -> list:
    """Items as comparable values: records as bytes, batches as tuples of bytes."""
    return [tuple(bytes(r) for r in i) if isinstance(i, list) else bytes(i) for i in items]


PIPELINES = {
    "global": lambda paths: Dataset(paths, seed=3).shuffle(),
    "buffer-batch": lambda paths: Dataset(paths, seed=3).shuffle(5).batch(4),
    "repeat": lambda paths: Dataset(paths, seed=3).shuffle(5).repeat(2),
}


def stateful_loader(paths, pipeline, num_workers):
    return StatefulDataLoader(
        torch_dataset(PIPELINES[pipeline](paths)),
        batch_size=None,
        num_workers=num_workers,
        multiprocessing_context="fork" if num_workers else None,
    )


def two_epochs(loader) -> list:
    return as_bytes(loader) + as_bytes(loader)


@pytest.mark.parametrize("num_workers", [0, 2])
@pytest.mark.parametrize(
    ("pipeline", "stop"),
    [("global", 0), ("global", 7), ("buffer-batch", 5), ("buffer-batch", 23), ("repeat", 60)],
)
def test_stateful_dataloader_resumes_exactly(files, pipeline, num_workers, stop):
    paths, records = files
    expected = two_epochs(stateful_loader(paths, pipeline, num_workers))
    per_pass = 2 * len(records) if pipeline == "repeat" else len(expected) // 2
    assert expected[:per_pass] != expected[per_pass:]  # the second pass is a new epoch

    loader = stateful_loader(paths, pipeline, num_workers)
    head = as_bytes(itertools.islice(iter(loader), stop))
    state = loader.state_dict()
    fresh = stateful_loader(paths, pipeline, num_workers)
    fresh.load_state_dict(state)
    rest = two_epochs(fresh)[: len(expected) - len(head)]  # the rest of this pass, then the next
    assert head + rest == expected


@pytest.mark.parametrize("num_workers", [0, 2])
def test_stateful_dataloader_state_at_the_end_of_an_epoch(files, num_workers):
    paths, _ = files
    expected = two_epochs(stateful_loader(paths, "global", num_workers))
    loader = stateful_loader(paths, "global", num_workers)
    first = as_bytes(loader)
    state = loader.state_dict()
    fresh = stateful_loader(paths, "global", num_workers)
    fresh.load_state_dict(state)
    assert first + as_bytes(fresh) == expected


# spawn starts a fresh interpreter per worker (about 8 s here): with the slow tests; the fork
# variants stay in the default run.
@pytest.mark.slow
def test_stateful_dataloader_spawn_and_sequential_files(mixed):
    paths, records = mixed

    def make():
        ds = Dataset(paths, seed=4).shuffle(6)
        return StatefulDataLoader(
            torch_dataset(ds), batch_size=3, num_workers=2, multiprocessing_context="spawn"
        )

    expected = [b for batch in make() for b in batch]
    assert collections.Counter(expected) == collections.Counter(records)
    loader = make()
    head = [b for batch in itertools.islice(iter(loader), 5) for b in batch]
    fresh = make()
    fresh.load_state_dict(loader.state_dict())
    assert head + [b for batch in fresh for b in batch] == expected


class Pairs(MapDataset):
    def process(self, indices, data):
        return [(i, bytes(d)) for i, d in zip(indices, data, strict=True)]


@pytest.mark.parametrize("num_workers", [0, 2])
def test_stateful_dataloader_map_dataset(files, num_workers):
    paths, records = files

    def make():
        torch.manual_seed(11)
        return StatefulDataLoader(
            MapDataset(paths),
            batch_size=4,
            shuffle=True,
            num_workers=num_workers,
            multiprocessing_context="fork" if num_workers else None,
            collate_fn=lambda batch: [bytes(r) for r in batch],
        )

    expected = [r for batch in make() for r in batch]
    assert sorted(expected) == sorted(records)
    loader = make()
    head = [r for batch in itertools.islice(iter(loader), 5) for r in batch]
    state = loader.state_dict()
    fresh = make()
    fresh.load_state_dict(state)
    assert head + [r for batch in fresh for r in batch] == expected


@pytest.mark.parametrize(("saved", "now"), [(2, 3), (3, 2), (2, 1)])
def test_stateful_dataloader_other_worker_count_is_refused(files, saved, now):
    paths, _ = files
    loader = stateful_loader(paths, "global", saved)
    next(iter(loader))
    state = loader.state_dict()
    fresh = stateful_loader(paths, "global", now)
    fresh.load_state_dict(state)
    with pytest.raises(UnsupportedOperationError) as info:
        next(iter(fresh))
    message = str(info.value)
    assert f"saved by a DataLoader with {saved} worker(s) but this one has {now}" in message
    assert f"num_workers={saved}" in message
    assert isinstance(info.value, ValueError)


def test_stateful_dataloader_map_dataset_other_worker_count_is_refused(files):
    paths, _ = files

    def make(workers):
        return StatefulDataLoader(
            MapDataset(paths), batch_size=4, num_workers=workers, multiprocessing_context="fork"
        )

    loader = make(2)
    next(iter(loader))
    fresh = make(3)
    fresh.load_state_dict(loader.state_dict())
    with pytest.raises(UnsupportedOperationError, match="with 2 worker"):
        next(iter(fresh))
    other = MapDataset(paths[:2])
    with pytest.raises(ValueError, match="files"):
        other.load_state_dict(MapDataset(paths).state_dict())


def test_torch_dataset_state_checks(files):
    paths, _ = files
    iterable = torch_dataset(Dataset(paths, seed=3).shuffle())
    state = iterable.state_dict()
    assert state["epoch"] == state["first_epoch"] == 0
    assert state["delivered"] == 0
    other = torch_dataset(Dataset(paths, seed=4).shuffle())
    with pytest.raises(ValueError, match="seed"):
        other.load_state_dict(state)
    with pytest.raises(ValueError, match="worker 1"):
        iterable.load_state_dict({**state, "worker": 1})


# -- dataloader(): resuming with another number of workers -----------------------------------------


def resume(paths, pipeline, saved, now, stop, *, context="fork"):
    """Stop a ``saved``-worker loader after ``stop`` items; finish the epoch and one more with ``now``."""
    loader = dataloader(
        PIPELINES[pipeline](paths), num_workers=saved, multiprocessing_context=context
    )
    head = as_bytes(itertools.islice(iter(loader), stop))
    state = loader.state_dict()
    fresh = dataloader(PIPELINES[pipeline](paths), num_workers=now, multiprocessing_context=context)
    fresh.load_state_dict(state)
    return head, as_bytes(fresh), as_bytes(fresh), fresh


@pytest.mark.parametrize(("saved", "now"), [(2, 1), (2, 3), (0, 2), (3, 2)])
@pytest.mark.parametrize("pipeline", ["global", "buffer-batch"])
def test_loader_resumes_with_another_number_of_workers(files, pipeline, saved, now):
    paths, _ = files
    reference = dataloader(
        PIPELINES[pipeline](paths), num_workers=saved, multiprocessing_context="fork"
    )
    epoch0 = as_bytes(reference)
    head, rest, following, fresh = resume(paths, pipeline, saved, now, 10)
    assert head == epoch0[:10]
    # The rest is exactly what the saved workers had left (each saved worker's stream, in its order).
    assert collections.Counter(head + rest) == collections.Counter(epoch0)
    # The next epoch is split between the current workers.
    layout = dataloader(PIPELINES[pipeline](paths), num_workers=now, multiprocessing_context="fork")
    layout.set_epoch(1)
    assert following == as_bytes(layout)
    assert fresh.epoch == 2


def test_loader_state_saved_in_a_carried_over_epoch(files):
    """A state saved while finishing another layout's epoch resumes again, with yet another worker count."""
    paths, records = files
    first = dataloader(PIPELINES["global"](paths), num_workers=3, multiprocessing_context="fork")
    head = as_bytes(itertools.islice(iter(first), 8))
    second = dataloader(PIPELINES["global"](paths), num_workers=2, multiprocessing_context="fork")
    second.load_state_dict(first.state_dict())
    middle = as_bytes(itertools.islice(iter(second), 9))
    state = second.state_dict()
    assert len(state["delivered"]) == 3  # still the saved layout's streams
    third = dataloader(PIPELINES["global"](paths))
    third.load_state_dict(state)
    tail = as_bytes(third)
    assert collections.Counter(head + middle + tail) == collections.Counter(records)


# spawn starts a fresh interpreter per worker (about 8 s here): with the slow tests; the fork
# variants stay in the default run.
@pytest.mark.slow
def test_loader_resume_with_repeat_and_spawn(mixed):
    paths, records = mixed

    def make(workers):
        ds = Dataset(paths, seed=2).shuffle(4).repeat(2)
        return dataloader(ds, batch_size=3, num_workers=workers, multiprocessing_context="spawn")

    loader = make(2)
    head = [
        r for batch in itertools.islice(iter(loader), 20) for r in batch
    ]  # into the second epoch
    assert loader.state_dict()["epoch"] == 1
    fresh = make(1)
    fresh.load_state_dict(loader.state_dict())
    rest = [r for batch in fresh for r in batch]
    assert collections.Counter(head + rest) == collections.Counter(records * 2)


def test_map_dataset_loader_resumes_with_another_number_of_workers(files):
    paths, _ = files
    full = list(dataloader(MapDataset(paths), batch_size=3, shuffle=True, seed=5, num_workers=2))
    loader = dataloader(MapDataset(paths), batch_size=3, shuffle=True, seed=5, num_workers=2)
    head = list(itertools.islice(iter(loader), 4))
    fresh = dataloader(MapDataset(paths), batch_size=3, shuffle=True, seed=5, num_workers=0)
    fresh.load_state_dict(loader.state_dict())
    assert head + list(fresh) == full


def test_loader_rejects_malformed_counts(files):
    paths, _ = files
    loader = dataloader(Dataset(paths))
    state = loader.state_dict()
    for bad in ([], [-1], ["3"], None):
        with pytest.raises(ValueError, match="malformed"):
            loader.load_state_dict({**state, "delivered": bad})


def test_recordkit_never_imports_torchdata(files):
    import subprocess
    import sys

    code = (
        "import sys, recordkit.data as d, recordkit.integrations.torch as t; "
        f"it = t.torch_dataset(d.Dataset({files[0]!r})); list(t.dataloader(d.Dataset({files[0]!r}))); "
        "it.state_dict(); assert 'torchdata' not in sys.modules, 'torchdata imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
