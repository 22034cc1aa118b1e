"""Resuming on another number of ranks (and workers): ``load_state_dict`` with the states of every rank.

Every record is unique (``b"<file>:<index>"``), so an epoch read exactly once is the multiset of every
record. A run of ``W`` ranks reads part of an epoch and saves; ``W'`` new ranks load every saved state and
read to the end of the epoch: together they must read each record once. The next epoch must be the
ordinary epoch of ``W'`` ranks.
"""

from __future__ import annotations

import collections
import itertools
import json

import pytest
from _data_files import make_files

from recordkit.data import Dataset, loader, mix
from recordkit.errors import StateError, UnsupportedOperationError

SIZES = [9, 14, 0, 6, 11]  # 40 records in five files, one of them empty
SUFFIXES = [".ffr", ".tfrecord"]
BATCH = 3


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> tuple[list[str], list[bytes]]:
    return make_files(tmp_path_factory.mktemp("elastic"), SIZES, SUFFIXES)


def build(paths: list[str], mode: str, rank: int, world_size: int) -> Dataset:
    ds = Dataset(paths, seed=5, rank=rank, world_size=world_size)
    if mode == "buffer":  # a shuffle buffer, and the file order shuffled each epoch
        ds = ds.shuffle(7, files=True)
    elif mode == "global":
        ds = ds.shuffle()
    elif mode == "interleave":
        ds = ds.shuffle(5).interleave(2, block_length=2)
    return ds.batch(BATCH)


def records_of(batches) -> list[bytes]:
    return [record for batch in batches for record in batch]


def save_all(paths, mode, world_size, steps) -> tuple[list[bytes], list[dict]]:
    """Each rank reads ``steps(rank)`` batches and saves: what was read, and the states (via JSON)."""
    read, states = [], []
    for rank in range(world_size):
        ds = build(paths, mode, rank, world_size)
        it = iter(ds)
        read += records_of(itertools.islice(it, steps(rank)))
        states.append(json.loads(json.dumps(ds.state_dict())))
        it.close()
    return read, states


def check_change(paths, records, mode, old, new) -> None:
    # Ranks stop at different points: some after a batch or two, some at the end of their share (the
    # state then says the next epoch, with nothing read of it).
    before, states = save_all(paths, mode, old, lambda rank: rank % 3 + 1)
    after, next_epoch = [], []
    for rank in range(new):
        ds = build(paths, mode, rank, new)
        ds.load_state_dict(states[::-1])  # in any order
        expected = len(ds)
        batches = list(ds)
        assert len(batches) == expected, (old, new, rank)
        assert all(len(b) == BATCH for b in batches[:-1])
        after += records_of(batches)
        assert ds.epoch == 1
        next_epoch += records_of(ds)
    assert collections.Counter(before + after) == collections.Counter(records), (old, new)
    # The next epoch is the ordinary epoch 1 of `new` ranks, in its order.
    ordinary = []
    for rank in range(new):
        fresh = build(paths, mode, rank, new)
        fresh.set_epoch(1)
        ordinary += records_of(fresh)
    assert next_epoch == ordinary, (old, new)


@pytest.mark.parametrize("old", range(1, 9))
def test_every_world_size_to_every_other(files, old):
    """W -> W' for W, W' in 1..8, shuffled (files and buffer), batched, mid-epoch: each record once."""
    paths, records = files
    for new in range(1, 9):
        check_change(paths, records, "buffer", old, new)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["none", "global", "interleave"])
@pytest.mark.parametrize("old", range(1, 9))
def test_every_world_size_to_every_other_in_every_order(files, mode, old):
    paths, records = files
    for new in range(1, 9):
        check_change(paths, records, mode, old, new)


@pytest.mark.parametrize("mode", ["buffer", "global"])
@pytest.mark.parametrize("layouts", [(3, 5, 2), (2, 2, 7), (8, 1, 3), (1, 4, 4)])
def test_changing_again_within_the_resumed_epoch(files, mode, layouts):
    """A run resumed on another layout saves again mid-epoch and resumes on a third: still once each;
    a rank's own state continues its rank exactly."""
    paths, records = files
    seen: list[bytes] = []
    states: list[dict] | None = None
    for k, world_size in enumerate(layouts):
        last = k == len(layouts) - 1
        saved = []
        for rank in range(world_size):
            ds = build(paths, mode, rank, world_size)
            if states is not None:
                ds.load_state_dict(states)
            it = iter(ds)
            seen += records_of(itertools.islice(it, None if last else rank % 2 + 1))
            state = json.loads(json.dumps(ds.state_dict()))
            if not last:
                same = build(paths, mode, rank, world_size)
                same.load_state_dict(state)
                assert list(same) == list(it)  # the same rank continues exactly
                if states is not None:
                    assert state["elastic"] is not None
            saved.append(state)
        states = saved
    assert collections.Counter(seen) == collections.Counter(records)


def test_repeat_counts_epochs_across_the_change(files):
    paths, records = files
    before, states = [], []
    for rank in range(3):
        ds = build(paths, "buffer", rank, 3).repeat(2)
        it = iter(ds)
        before += records_of(itertools.islice(it, 2))
        states.append(ds.state_dict())
    after = []
    for rank in range(2):
        ds = build(paths, "buffer", rank, 2).repeat(2)
        ds.load_state_dict(states)
        after += records_of(ds)  # the rest of epoch 0, then epoch 1: the repeat's two epochs
    assert collections.Counter(before + after) == collections.Counter(records * 2)


def test_loader_with_another_number_of_ranks_and_workers(files):
    """Through a Loader: ranks and workers change at once, for the rest of the epoch and the next."""
    paths, records = files
    for old, old_workers, new, new_workers in [
        (2, 2, 3, 1),
        (3, 1, 2, 2),
        (1, 3, 4, 0),
        (4, 2, 1, 2),
    ]:
        before, states = [], []
        for rank in range(old):
            ld = loader(build(paths, "buffer", rank, old), num_workers=old_workers)
            it = iter(ld)
            before += records_of(itertools.islice(it, rank % 3 + 2))
            states.append(json.loads(json.dumps(ld.state_dict())))
            del it
        after, next_epoch = [], []
        for rank in range(new):
            ld = loader(build(paths, "buffer", rank, new), num_workers=new_workers)
            ld.load_state_dict(states)
            expected = len(ld)
            batches = list(ld)
            assert len(batches) == expected
            after += records_of(batches)
            next_epoch += records_of(ld)
        assert collections.Counter(before + after) == collections.Counter(records)
        assert collections.Counter(next_epoch) == collections.Counter(records)


@pytest.mark.slow
def test_torch_dataloader_with_another_number_of_ranks_and_workers(files):
    pytest.importorskip("torch")
    from recordkit.integrations.torch import dataloader

    paths, records = files
    for old, old_workers, new, new_workers in itertools.product([1, 3], [0, 2], [2, 5], [1, 3]):
        before, states = [], []
        for rank in range(old):
            ds = Dataset(paths, seed=2, rank=rank, world_size=old).shuffle(6)
            dl = dataloader(ds, batch_size=2, num_workers=old_workers, to="numpy")
            it = iter(dl)
            before += [bytes(r) for b in itertools.islice(it, rank + 1) for r in b]
            states.append(json.loads(json.dumps(dl.state_dict())))
            del it
        after = []
        for rank in range(new):
            ds = Dataset(paths, seed=2, rank=rank, world_size=new).shuffle(6)
            dl = dataloader(ds, batch_size=2, num_workers=new_workers, to="numpy")
            dl.load_state_dict(states)
            after += [bytes(r) for b in dl for r in b]
        assert collections.Counter(before + after) == collections.Counter(records)


def test_equal_shards_stay_equal_after_the_change(files):
    """equal_shards: the new ranks' shares of the rest are equal too ("pad": no record is missed)."""
    paths, records = files
    for mode in ("pad", "drop"):
        before, states = [], []
        for rank in range(3):
            ds = Dataset(paths, seed=5, rank=rank, world_size=3, equal_shards=mode).batch(BATCH)
            before += next(iter(ds))
            states.append(ds.state_dict())
        sizes, after = set(), []
        for rank in range(5):
            ds = Dataset(paths, seed=5, rank=rank, world_size=5, equal_shards=mode).batch(BATCH)
            ds.load_state_dict(states)
            mine = records_of(ds)
            sizes.add(len(mine))
            after += mine
        assert len(sizes) == 1, mode
        if mode == "pad":
            assert set(before + after) == set(records)
        else:
            assert len(after) == len(set(after))


# -- what is refused --------------------------------------------------------------------------------------


def test_incomplete_or_inconsistent_states_are_refused(files):
    paths, _ = files
    _, states = save_all(paths, "buffer", 3, lambda rank: 1)
    ds = build(paths, "buffer", 0, 2)
    with pytest.raises(StateError, match=r"shards \[1\] of 3 are missing"):
        ds.load_state_dict([states[0], states[2]])
    with pytest.raises(StateError, match="twice"):
        ds.load_state_dict([*states, states[1]])
    with pytest.raises(StateError, match="every rank"):
        ds.load_state_dict([])
    later = build(paths, "buffer", 1, 3)
    later.set_epoch(4)
    next(iter(later))
    with pytest.raises(StateError, match="different epochs"):
        ds.load_state_dict([states[0], later.state_dict(), states[2]])
    with pytest.raises(StateError, match="seed"):
        Dataset(paths, seed=6).shuffle(7).batch(BATCH).load_state_dict(states)
    # One rank's state alone, on another number of ranks: the message says what to do.
    ds.load_state_dict(states[1])
    with pytest.raises(StateError, match="list of the states saved by every rank"):
        list(ds)
    with pytest.raises(ValueError):  # a StateError is also a ValueError
        ds.load_state_dict({"kind": "loader", "version": 2})


@pytest.mark.parametrize("mode", ["buffer", "global"])
def test_a_rank_that_saved_before_its_first_item_is_resumed(files, mode):
    # Rank 1 of 3 saved before it iterated: its state still says its shard (from rank and world_size),
    # and nothing read of it.
    paths, records = files
    before, states = save_all(paths, mode, 3, lambda rank: 0 if rank == 1 else rank + 1)
    assert states[1]["consumed"] == 0
    assert states[1]["shard"] == [1, 3]
    after = []
    for rank in range(2):
        ds = build(paths, mode, rank, 2)
        ds.load_state_dict(states)
        after += records_of(ds)
    assert collections.Counter(before + after) == collections.Counter(records)
    # Its own state alone resumes it too, in this process or (the shard then differs) elsewhere.
    alone = build(paths, mode, 1, 3)
    alone.load_state_dict(states[1])
    assert records_of(alone) == records_of(build(paths, mode, 1, 3))


def test_unsupported_pipelines_say_why(files, tmp_path):
    paths, _ = files

    def states_of(make):
        out = []
        for rank in range(2):
            ds = make(rank)
            next(iter(ds))
            out.append(ds.state_dict())
        return out

    def keep(record: bytes) -> bool:
        return not record.endswith(b"1")

    filtered = states_of(lambda r: Dataset(paths, rank=r, world_size=2).filter(keep))
    with pytest.raises(UnsupportedOperationError, match="filter"):
        Dataset(paths, world_size=3, rank=0).filter(keep).load_state_dict(filtered)

    skipping = states_of(lambda r: Dataset(paths, rank=r, world_size=2, on_error="skip"))
    with pytest.raises(UnsupportedOperationError, match="on_error"):
        Dataset(paths, world_size=3, rank=0, on_error="skip").load_state_dict(skipping)

    gz, _ = make_files(tmp_path, [5, 7], [".tfrecord.gz"])
    compressed = states_of(lambda r: Dataset(gz, rank=r, world_size=2).shuffle(3))
    ds = Dataset(gz, rank=0, world_size=1).shuffle(3)
    ds.load_state_dict(compressed)
    with pytest.raises(UnsupportedOperationError, match="sequentially"):
        list(ds)

    mixed = mix([Dataset(paths), Dataset(paths)], seed=1)
    with pytest.raises(UnsupportedOperationError, match="mix"):
        mixed.load_state_dict([mixed.state_dict()])


@pytest.mark.parametrize("seed", range(4))
def test_interleaved_resume_with_an_empty_file_continues_exactly(files, seed):
    """One shard's plan keeps an empty file whether or not the files were counted (resuming counts
    them): interleave gives it a turn either way, so the resumed order is the uninterrupted one."""
    paths, _ = files

    def build_one() -> Dataset:
        return Dataset(paths, seed=seed).shuffle(0).interleave(2)

    full = list(build_one())
    for k in range(1, len(full), 3):
        ds = build_one()
        it = iter(ds)
        head = list(itertools.islice(it, k))
        state = ds.state_dict()
        it.close()
        restored = build_one()
        restored.load_state_dict(state)
        assert head + list(restored) == full, k
