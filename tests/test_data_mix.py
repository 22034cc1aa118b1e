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


def endless(paths: list[str], shuffle: int | None, seed: int = 1) -> Dataset:
    """A dataset that repeats forever, in a new shuffled order every epoch."""
    return Dataset(paths, seed=seed).shuffle(shuffle).repeat()


def test_mix_of_endless_datasets_follows_the_weights(tmp_path):
    """tf.data's sample_from_datasets idiom: an endless mix of endless datasets, in proportion."""
    a, _ = source(tmp_path, "a", [7, 5], ".ffr")
    b, _ = source(tmp_path, "b", [4], ".ffr")
    c, _ = source(tmp_path, "c", [9], ".tfrecord.gz")  # sequential: its length is unknown
    weights = [0.5, 0.3, 0.2]
    mixed = mix([endless(a, None), endless(b, 3), endless(c, 2)], weights, seed=11)
    n = 30_000
    items = list(itertools.islice(mixed, n))
    counts = collections.Counter(map(origin, items))
    # Pearson's chi-square against the weights, 2 degrees of freedom: 13.82 is its 0.1% critical value.
    chi2 = sum((counts[k] - n * w) ** 2 / (n * w) for k, w in zip("abc", weights, strict=True))
    assert chi2 < 13.82, counts
    # Each source goes on through its own epochs, in the order it has alone.
    for name, paths, shuffle in (("a", a, None), ("b", b, 3), ("c", c, 2)):
        mine = [x for x in items if origin(x) == name]
        assert mine == list(itertools.islice(endless(paths, shuffle), len(mine)))
    assert mixed.epoch == 0
    with pytest.raises(TypeError, match="never ends"):
        len(mixed)


@pytest.mark.parametrize("stop", ["first_exhausted", "all_exhausted"])
def test_endless_mix_resumes_exactly(tmp_path, stop):
    a, _ = source(tmp_path, "a", [6, 5], ".ffr")
    b, _ = source(tmp_path, "b", [4, 3], ".tfrecord.gz")

    def build():
        parts = [endless(a, None), Dataset(b, seed=2).shuffle(3).filter(bool).repeat()]
        return mix(parts, [0.6, 0.4], seed=5, stop=stop).batch(3)

    resumes(build, [0, 1, 7, 40, 333, 599], total=600)


def test_resuming_far_into_an_endless_mix(tmp_path):
    """The draws of a long run are replayed at once, not item by item, and give the same sequence."""
    a, _ = source(tmp_path, "a", [50], ".ffr")
    b, _ = source(tmp_path, "b", [30], ".ffr")

    def build():
        return mix([endless(a, None), endless(b, 8)], [0.9, 0.1], seed=2)

    full = list(itertools.islice(build(), 20_010))
    restored = build()
    state = build().state_dict()
    state["consumed"] = 20_000
    restored.load_state_dict(state)
    assert list(itertools.islice(restored, 10)) == full[20_000:]


def test_endless_dataset_beside_a_finite_one(tmp_path):
    """With first_exhausted, the finite dataset ends each epoch; the endless one never runs out."""
    a, ra = source(tmp_path, "a", [11, 6], ".ffr")
    b, rb = source(tmp_path, "b", [20, 9], ".ffr")

    def build():
        return mix([endless(a, None), Dataset(b, seed=1).shuffle(5)], [0.9, 0.1], seed=4)

    mixed = build()
    epoch0 = list(mixed)
    counts = collections.Counter(map(origin, epoch0))
    assert counts["b"] == len(rb)
    assert counts["a"] > len(ra)  # the endless dataset went round more than once
    assert len(build()) == len(epoch0)
    epoch1 = list(mixed)
    assert len(build().repeat(2)) == len(epoch0) + len(epoch1)
    # Epochs of the mix never share an epoch of the endless dataset.
    alone = endless(a, None)
    alone.set_epoch(2**32)
    mine = [x for x in epoch1 if origin(x) == "a"]
    assert mine == list(itertools.islice(alone, len(mine)))
    resumes(lambda: build().repeat(2), [0, 3, len(epoch0) - 1, len(epoch0), len(epoch0) + 9])


@pytest.mark.parametrize("suffix", [".tfrecord", ".tfrecord.gz"])
def test_datasets_repeated_a_number_of_times(tmp_path, suffix):
    """repeat(k) inside a mix: every item k times per epoch of the mix, and its epochs follow on."""
    a, ra = source(tmp_path, "a", [30, 0, 25], ".ffr")
    b, rb = source(tmp_path, "b", [14, 9], suffix)  # compressed: epochs of unknown length are read

    def build():
        parts = [Dataset(a, seed=3).shuffle(), Dataset(b, seed=3).shuffle(4).repeat(3)]
        return mix(parts, [0.3, 0.7], seed=9, stop="all_exhausted")

    mixed = build()
    epoch0 = list(mixed)
    assert collections.Counter(epoch0) == collections.Counter(ra + rb * 3)
    if suffix == ".tfrecord":
        assert len(build()) == len(epoch0)
    else:
        with pytest.raises(TypeError, match="dataset 1 is unknown"):
            len(build())
    mixed.set_epoch(2)
    epoch2 = list(mixed)
    alone = Dataset(b, seed=3).shuffle(4).repeat(3)
    alone.set_epoch(6)  # epoch 2 of the mix reads its epochs 6, 7 and 8
    assert [x for x in epoch2 if origin(x) == "b"] == list(alone)
    resumes(lambda: build().repeat(2), [0, 1, 50, 130, len(epoch0), len(epoch0) + 77])

    def share(rank, world_size):
        parts = [
            Dataset(a, seed=3, rank=rank, world_size=world_size).shuffle(),
            Dataset(b, seed=3, rank=rank, world_size=world_size).shuffle(4).repeat(2),
        ]
        return mix(parts, [0.5, 0.5], seed=9, stop="all_exhausted")

    everything = [x for s in every_share(share, 2, 2) for x in s]
    assert collections.Counter(everything) == collections.Counter(ra + rb * 2)


def test_plain_dataloader_length_of_an_endless_mix(tmp_path):
    pytest.importorskip("torch")
    torch_data = pytest.importorskip("recordkit.integrations.torch")
    a, _ = source(tmp_path, "a", [5], ".ffr")
    b, _ = source(tmp_path, "b", [4], ".ffr")
    with pytest.raises(TypeError, match="never ends"):
        len(torch_data.torch_dataset(mix([endless(a, 2), endless(b, 2)])))
