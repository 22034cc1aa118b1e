"""recordkit.data.mix: weighted sampling from several datasets, deterministic, resumable, sharded."""

from __future__ import annotations

import collections
import itertools
from pathlib import Path

import pytest
from _data_files import write
from _data_workers import every_share, resumes

import recordkit.data
from recordkit.data import Dataset, mix


def source(folder: Path, name: str, sizes: list[int], suffix: str) -> tuple[list[str], list[bytes]]:
    """Files of records ``b"<name><file>:<index>"``, unique across sources."""
    paths, records = [], []
    for i, n in enumerate(sizes):
        data = [f"{name}{i}:{j}".encode() for j in range(n)]
        paths.append(str(write(folder / f"{name}-{i}{suffix}", data)))
        records.extend(data)
    return paths, records


@pytest.fixture
def two(tmp_path):
    a = source(tmp_path, "a", [30, 0, 25, 12], ".ffr")
    b = source(tmp_path, "b", [14, 9, 7], ".tfrecord.gz")
    return a, b


def origin(item: bytes) -> str:
    return chr(item[0])


def test_mix_is_exported():
    assert recordkit.data.mix is mix
    assert "mix" in recordkit.data.__all__


def test_proportions_follow_the_weights(tmp_path):
    a, _ = source(tmp_path, "a", [60_000, 30_000], ".ffr")
    b, _ = source(tmp_path, "b", [50_000], ".ffr")
    mixed = mix([Dataset(a), Dataset(b)], [0.7, 0.3], seed=7)
    first = list(itertools.islice(mixed, 100_000))
    share = collections.Counter(map(origin, first))
    assert abs(share["a"] / 100_000 - 0.7) < 0.01
    assert abs(share["b"] / 100_000 - 0.3) < 0.01
    # Each source's items come in the source's own order.
    assert [x for x in first if origin(x) == "a"] == list(itertools.islice(Dataset(a), share["a"]))


@pytest.mark.parametrize("stop", ["first_exhausted", "all_exhausted"])
def test_same_sequence_after_resuming_mid_stream(two, stop):
    (a, _), (b, _) = two

    def build():
        parts = [Dataset(a, seed=1).shuffle(), Dataset(b, seed=1).shuffle(6).map(bytes.upper)]
        return mix(parts, [0.7, 0.3], seed=3, stop=stop).batch(2).repeat(2)

    full = list(build())
    resumes(build, [0, 1, 5, 17, 30, 31, 40, 55, len(full) - 1, len(full)])


def test_resume_after_a_source_ran_out(tmp_path):
    """With all_exhausted, resuming after a source is exhausted continues with the re-normalised weights."""
    a, _ = source(tmp_path, "a", [200], ".ffr")
    b, _ = source(tmp_path, "b", [5], ".tfrecord.gz")  # runs out early; its length is unknown

    def build():
        return mix([Dataset(a), Dataset(b).filter(bool)], [0.5, 0.5], stop="all_exhausted")

    full = list(build())
    assert collections.Counter(map(origin, full)) == {"a": 200, "b": 5}
    last_b = max(i for i, x in enumerate(full) if origin(x) == "b")
    for k in (last_b, last_b + 1, last_b + 50):
        ds = build()
        head = list(itertools.islice(iter(ds), k))
        restored = build()
        restored.load_state_dict(ds.state_dict())
        assert head + list(restored) == full


def test_stop_rules(two):
    (a, ra), (b, rb) = two
    first = list(mix([Dataset(a), Dataset(b)], [0.5, 0.5], seed=4))
    counts = collections.Counter(map(origin, first))
    assert counts["a"] == len(ra) or counts["b"] == len(rb)  # one source is used up...
    assert counts["a"] <= len(ra)
    assert counts["b"] <= len(rb)
    assert counts != {"a": len(ra), "b": len(rb)}  # ...and the other is not
    everything = list(mix([Dataset(a), Dataset(b)], [0.5, 0.5], seed=4, stop="all_exhausted"))
    assert collections.Counter(everything) == collections.Counter(ra + rb)
    assert everything[: len(first)] == first
    never = list(mix([Dataset(a), Dataset(b)], [1, 0], stop="all_exhausted"))
    assert never == ra


@pytest.mark.parametrize(("world_size", "num_workers"), [(1, 1), (2, 2), (3, 1), (1, 4)])
def test_exactly_once_over_ranks_and_workers(two, world_size, num_workers):
    (a, ra), (b, rb) = two

    def make(stop):
        def build(rank, ws):
            parts = [
                Dataset(a, seed=2, rank=rank, world_size=ws).shuffle(),
                Dataset(b, seed=2, rank=rank, world_size=ws).shuffle(4),
            ]
            return mix(parts, [0.6, 0.4], seed=5, stop=stop)

        return build

    everything = [x for s in every_share(make("all_exhausted"), world_size, num_workers) for x in s]
    assert collections.Counter(everything) == collections.Counter(ra + rb)
    some = [x for s in every_share(make("first_exhausted"), world_size, num_workers) for x in s]
    assert len(set(some)) == len(some)
    assert set(some) <= set(ra + rb)


def test_deterministic_and_epochs_reach_every_source(two):
    (a, _), (b, _) = two

    def build(seed=0):
        return mix([Dataset(a, seed=1).shuffle(), Dataset(b, seed=1).shuffle(3)], seed=seed)

    assert list(build()) == list(build())
    assert list(build()) != list(build(seed=1))
    mixed = build()
    epoch0 = list(mixed)
    assert mixed.epoch == 1
    epoch1 = list(mixed)
    assert epoch1 != epoch0
    mixed.set_epoch(4)
    assert all(d.epoch == 4 for d in mixed._source.datasets)
    epoch4 = list(mixed)
    # Each source's items are that source's own epoch-4 order.
    for name, paths, shuffle in (("a", a, None), ("b", b, 3)):
        alone = Dataset(paths, seed=1).shuffle(shuffle)
        alone.set_epoch(4)
        mine = [x for x in epoch4 if origin(x) == name]
        assert mine == list(alone)[: len(mine)]


def test_mix_validation(two):
    (a, _), (b, _) = two
    da, db = Dataset(a), Dataset(b)
    with pytest.raises(ValueError, match="at least one"):
        mix([])
    with pytest.raises(ValueError, match="2 datasets but 3 weights"):
        mix([da, db], [1, 2, 3])
    with pytest.raises(ValueError, match="non-negative"):
        mix([da, db], [1, -1])
    with pytest.raises(ValueError, match="not all zero"):
        mix([da, db], [0, 0])
    with pytest.raises(ValueError, match="finite"):
        mix([da, db], [1, float("nan")])
    with pytest.raises(ValueError, match="stop"):
        mix([da, db], stop="longest")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="repeat the mix"):
        mix([da.repeat(2), db])
    with pytest.raises(ValueError, match="rank"):
        mix([Dataset(a, rank=0, world_size=2), db])
    with pytest.raises(TypeError, match="Dataset"):
        mix([da, [b"x"]])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="mix"):
        mix([da, db]).shuffle(3)
    state = mix([da, db], [1, 2]).state_dict()
    with pytest.raises(ValueError, match="mix"):
        mix([da, db], [2, 1]).load_state_dict(state)


def test_stages_after_a_mix(two):
    (a, _), (b, _) = two
    mixed = mix([Dataset(a), Dataset(b)], [0.5, 0.5], seed=1, stop="all_exhausted")
    plain = list(mixed)
    mixed.set_epoch(0)
    kept = list(mixed.filter(lambda x: origin(x) == "b").batch(3))
    expected = [x for x in plain if origin(x) == "b"]
    assert kept == [expected[i : i + 3] for i in range(0, len(expected), 3)]
    assert list(mixed.prefetch(2)) == plain
    assert "mix(2 datasets" in repr(mixed.batch(2))
