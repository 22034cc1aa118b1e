"""recordkit.integrations.torch.node: a Dataset as a torchdata.nodes BaseNode, resumed exactly in torchdata's Loader."""

from __future__ import annotations

import json
import os

import pytest

import recordkit as rk
from recordkit.data import Dataset

pytest.importorskip("torch")
nodes = pytest.importorskip("torchdata.nodes")

from recordkit.integrations.torch import node
from recordkit.integrations.torchnodes import RecordNode

pytestmark = pytest.mark.torch

RECORDS = [b"r%03d" % i for i in range(60)]


@pytest.fixture
def files(tmp_path) -> list[str]:
    paths = []
    for shard in range(3):
        path = os.fspath(tmp_path / f"part-{shard}.tfrecord")
        with rk.open(path, "w") as writer:
            writer.write_many(RECORDS[shard * 20 : (shard + 1) * 20])
        paths.append(path)
    return paths


def _run(loader, epochs: int) -> list[list[object]]:
    return [list(loader) for _ in range(epochs)]


def _flat(items: list[object]) -> list[bytes]:
    """The records of a list of items (records, or batches of them), upper-cased."""
    return [r.upper() for item in items for r in (item if isinstance(item, list) else [item])]


def test_loader_reads_the_records_rk_open_reads(files) -> None:
    with rk.open(files) as reader:
        expected = list(reader)
    loader = nodes.Loader(node(Dataset(files)))
    assert isinstance(loader.root, nodes.BaseNode)
    assert isinstance(loader.root, RecordNode)
    assert list(loader) == expected
    assert list(loader) == expected  # the next epoch: unshuffled, the same order


def test_node_is_the_torchnodes_function() -> None:
    import recordkit.integrations.torch as rk_torch
    from recordkit.integrations import torchnodes

    assert rk_torch.node is torchnodes.node
    with pytest.raises(AttributeError, match="no_such_name"):
        rk_torch.no_such_name  # noqa: B018
    with pytest.raises(TypeError, match="recordkit Dataset"):
        node([b"a"])  # type: ignore[arg-type]


def _pipelines(files):
    return {
        "plain": lambda: Dataset(files),
        "shuffled": lambda: Dataset(files, seed=5).shuffle(16),
        "batched": lambda: Dataset(files, seed=5).shuffle().map(bytes.upper).batch(7),
    }


@pytest.mark.parametrize("kind", ["plain", "shuffled", "batched"])
@pytest.mark.parametrize("stop", [0, 1, 13, 59])
@pytest.mark.parametrize("epoch", [0, 1])
def test_restore_mid_epoch_continues_exactly(files, kind: str, stop: int, epoch: int) -> None:
    make = _pipelines(files)[kind]
    whole = _run(nodes.Loader(node(make())), 3)
    if kind != "plain":
        assert whole[0] != whole[1]  # a new order each epoch
    assert sorted(_flat(whole[0])) == sorted(_flat(whole[1])) == sorted(_flat([RECORDS]))
    stop = min(stop, len(whole[epoch]) - 1)
    loader = nodes.Loader(node(make()))
    seen = _run(loader, epoch)
    iterator = iter(loader)
    seen.append([next(iterator) for _ in range(stop)])
    state = json.loads(json.dumps(loader.state_dict()))  # JSON-compatible
    restored = nodes.Loader(node(make()))
    restored.load_state_dict(state)
    seen[-1] += list(restored)
    seen += _run(restored, 3 - len(seen))
    assert seen == whole


def test_restore_at_the_end_of_an_epoch_starts_the_next(files) -> None:
    make = _pipelines(files)["shuffled"]
    whole = _run(nodes.Loader(node(make())), 2)
    loader = nodes.Loader(node(make()))
    iterator = iter(loader)
    first = [next(iterator) for _ in range(60)]
    assert first == whole[0]
    restored = nodes.Loader(node(make()))
    restored.load_state_dict(loader.state_dict())
    assert list(restored) == whole[1]


def test_an_abandoned_epoch_is_followed_by_the_next(files) -> None:
    make = _pipelines(files)["shuffled"]
    whole = _run(nodes.Loader(node(make())), 2)
    loader = nodes.Loader(node(make()))
    iterator = iter(loader)
    next(iterator)
    assert list(loader) == whole[1]
    assert loader.state_dict()["root"]["dataset"]["epoch"] == 2


def test_state_of_another_pipeline_is_refused(files) -> None:
    loader = nodes.Loader(node(Dataset(files, seed=1).shuffle()))
    next(iter(loader))
    other = nodes.Loader(node(Dataset(files, seed=2).shuffle()))
    other.load_state_dict(loader.state_dict())
    with pytest.raises(ValueError, match="seed"):
        iter(other)


def test_in_a_graph_with_batcher_and_mapper(files) -> None:
    make = _pipelines(files)["shuffled"]
    expected = list(make())

    def graph():
        batches = nodes.Batcher(node(make()), batch_size=8, drop_last=False)
        return nodes.Loader(nodes.Mapper(batches, lambda batch: [r.upper() for r in batch]))

    loader = graph()
    whole = list(loader)
    assert [r for batch in whole for r in batch] == [r.upper() for r in expected]
    loader = graph()
    iterator = iter(loader)
    first = [next(iterator) for _ in range(3)]
    restored = graph()
    restored.load_state_dict(loader.state_dict())
    assert first + list(restored) == whole
