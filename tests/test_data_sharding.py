"""Shard planning: every record in exactly one shard, balanced splits, equal shard sizes, rank resolution."""

from __future__ import annotations

import collections

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recordkit.datasets.plan import (
    IndexUnit,
    RangeUnit,
    Unit,
    plan_global,
    plan_pieces,
    whole_files,
)
from recordkit.datasets.ranks import resolve_rank, shard_of


def plan_shard(order, counts, random_access, shard, num_shards, equal=None) -> list[Unit]:
    """The plan of an epoch reading whole files in ``order``."""
    return plan_pieces(whole_files(order, counts), counts, random_access, shard, num_shards, equal)


def expand(units: list[Unit], counts: list[int], offsets: list[int]) -> list[tuple[int, int]]:
    """The (file, record) pairs a plan reads, computed independently of the reader."""
    out = []
    for u in units:
        if isinstance(u, IndexUnit):
            for g in u.indices.tolist():
                f = max(i for i, o in enumerate(offsets[:-1]) if o <= g and counts[i] > 0)
                out.append((f, g - offsets[f]))
        else:
            stop = counts[u.file] if u.stop is None else u.stop
            out.extend((u.file, i) for i in range(u.start, stop, u.step))
    return out


files_strategy = st.lists(st.tuples(st.integers(0, 12), st.booleans()), min_size=1, max_size=9)


@settings(max_examples=150, deadline=None)
@given(files=files_strategy, num_shards=st.integers(1, 13), seed=st.integers(0, 5))
def test_every_record_in_exactly_one_shard(files, num_shards, seed):
    counts = [n for n, _ in files]
    ra = [r for _, r in files]
    known = [n if r else None for n, r in files]  # sequential files: count unknown
    order = list(range(len(files)))
    order = order[seed:] + order[:seed]
    seen = collections.Counter()
    sizes = []
    for s in range(num_shards):
        units = plan_shard(order, known, ra, s, num_shards)
        pairs = expand(units, counts, [0] * (len(counts) + 1))
        seen.update(pairs)
        sizes.append(len(pairs))
    expected = collections.Counter((f, i) for f, n in enumerate(counts) for i in range(n))
    assert seen == expected
    if all(ra):
        assert max(sizes) - min(sizes) <= 1


@settings(max_examples=100, deadline=None)
@given(files=files_strategy, num_shards=st.integers(1, 9), mode=st.sampled_from(["pad", "drop"]))
def test_equal_shards(files, num_shards, mode):
    counts = [n for n, _ in files]
    ra = [r for _, r in files]
    order = list(range(len(files)))
    total = sum(counts)
    plans = [
        expand(plan_shard(order, counts, ra, s, num_shards, mode), counts, [0] * (len(counts) + 1))
        for s in range(num_shards)
    ]
    sizes = {len(p) for p in plans}
    assert len(sizes) == 1
    size = sizes.pop()
    union = collections.Counter(pair for p in plans for pair in p)
    everything = {(f, i) for f, n in enumerate(counts) for i in range(n)}
    if mode == "pad":
        assert set(union) == everything
        assert size * num_shards >= total
    else:
        assert all(c == 1 for c in union.values())
        assert set(union) <= everything
        assert size * num_shards <= total


def test_equal_shards_need_counts():
    with pytest.raises(ValueError, match="count"):
        plan_shard([0], [None], [False], 0, 2, "pad")


@settings(max_examples=60, deadline=None)
@given(
    counts=st.lists(st.integers(0, 20), min_size=1, max_size=6),
    num_shards=st.integers(1, 8),
    epoch=st.integers(0, 3),
    mode=st.sampled_from([None, "pad", "drop"]),
)
def test_global_plan(counts, num_shards, epoch, mode):
    total = sum(counts)
    slices = [
        plan_global(counts, s, num_shards, 7, epoch, mode)[0].indices for s in range(num_shards)
    ]
    flat = [int(g) for sl in slices for g in sl]
    if mode is None:
        assert sorted(flat) == list(range(total))
        assert max(map(len, slices)) - min(map(len, slices)) <= 1
    else:
        assert len({len(sl) for sl in slices}) == 1
        assert set(flat) == set(range(total)) if mode == "pad" else len(set(flat)) == len(flat)


def test_global_plan_depends_on_seed_and_epoch():
    a = plan_global([50, 50], 0, 1, 1, 0)[0].indices.tolist()
    assert a == plan_global([50, 50], 0, 1, 1, 0)[0].indices.tolist()
    assert a != plan_global([50, 50], 0, 1, 1, 1)[0].indices.tolist()
    assert a != plan_global([50, 50], 0, 1, 2, 0)[0].indices.tolist()


def test_indexed_files_split_by_contiguous_ranges():
    # 2 files of 6 records, 4 shards: each shard gets 3 consecutive records of one file.
    plans = [plan_shard([0, 1], [6, 6], [True, True], s, 4) for s in range(4)]
    assert plans == [
        [RangeUnit(0, 0, 3)],
        [RangeUnit(0, 3, 6)],
        [RangeUnit(1, 0, 3)],
        [RangeUnit(1, 3, 6)],
    ]


def test_sequential_files_whole_then_strided():
    # 5 sequential files, 3 shards: 3 files whole, the 2 left over shared by groups of shards.
    plans = [plan_shard(list(range(5)), [None] * 5, [False] * 5, s, 3) for s in range(3)]
    assert plans[0] == [RangeUnit(0, 0, None), RangeUnit(3, 0, None, 2)]
    assert plans[1] == [RangeUnit(1, 0, None), RangeUnit(4, 0, None, 1)]
    assert plans[2] == [RangeUnit(2, 0, None), RangeUnit(3, 1, None, 2)]


def test_resolve_rank_explicit_env_and_errors(monkeypatch):
    monkeypatch.delenv("RANK", raising=False)
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    assert resolve_rank(None, None) == (0, 1)
    monkeypatch.setenv("RANK", "2")
    monkeypatch.setenv("WORLD_SIZE", "4")
    monkeypatch.setenv("LOCAL_RANK", "0")
    assert resolve_rank(None, None) == (2, 4)
    assert resolve_rank(1, 3) == (1, 3)
    with pytest.raises(ValueError, match="both"):
        resolve_rank(1, None)
    with pytest.raises(ValueError, match="rank"):
        resolve_rank(3, 3)
    monkeypatch.setenv("RANK", "x")
    with pytest.raises(ValueError, match="RANK"):
        resolve_rank(None, None)


def test_shard_of():
    assert shard_of(0, 3, 1, 2) == (1, 6)
    assert shard_of(2, 3, 1, 2) == (5, 6)
