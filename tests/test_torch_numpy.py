"""dataloader(..., to="numpy"): numpy batches through the same DataLoader workers, for JAX and numpy loops."""

from __future__ import annotations

import collections
import itertools
import json

import numpy as np
import pytest
from _data_files import make_files, write_label_examples

import recordkit as rk
from recordkit.data import Dataset

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch

from recordkit.integrations.torch import MapDataset, dataloader

SPEC = {"x": rk.FixedLen((3,), np.float32), "label": rk.FixedLen((), np.int64)}


def parse_batch(records: list[bytes]) -> dict[str, np.ndarray]:
    """A batch of Examples into a dict of arrays (module level: picklable for workers)."""
    return rk.parse_examples(records, SPEC)


def parse_one(record: bytes) -> dict[str, np.ndarray]:
    """One Example into a dict of arrays without a batch dimension."""
    parsed = rk.parse_examples([record], SPEC)
    return {key: value[0] for key, value in parsed.items()}


def stack_labels(batch: list[dict[str, np.ndarray]]) -> np.ndarray:
    """A collate_fn of the user's that returns a numpy array."""
    return np.stack([item["label"] for item in batch])


@pytest.fixture(scope="module")
def examples(tmp_path_factory) -> list[str]:
    """Three files of 23 Examples in all; label i has x = [i, 2i, 3i]."""
    return write_label_examples(tmp_path_factory.mktemp("examples"), [9, 6, 8])


def pipeline(paths: list[str]) -> Dataset:
    return Dataset(paths, seed=3).shuffle(5).batch(4).map(parse_batch)


def labels_of(batches) -> list[int]:
    return [int(v) for batch in batches for v in batch["label"]]


@pytest.mark.parametrize("num_workers", [0, 2])
def test_parsed_batches_come_as_dicts_of_numpy_arrays(examples, num_workers):
    context = "fork" if num_workers else None
    loader = dataloader(
        pipeline(examples), to="numpy", num_workers=num_workers, multiprocessing_context=context
    )
    batches = list(loader)
    assert batches
    for batch in batches:
        assert set(batch) == {"x", "label"}
        assert isinstance(batch["x"], np.ndarray)
        assert isinstance(batch["label"], np.ndarray)
        assert batch["x"].dtype == np.float32
        assert batch["label"].dtype == np.int64
        np.testing.assert_array_equal(batch["x"], batch["label"][:, None] * [1, 2, 3])
    assert sorted(labels_of(batches)) == list(range(23))
    # The same batches as tensors by default.
    tensors = list(
        dataloader(pipeline(examples), num_workers=num_workers, multiprocessing_context=context)
    )
    assert all(isinstance(b["x"], torch.Tensor) for b in tensors)
    assert sorted(labels_of(tensors)) == list(range(23))
    if num_workers == 0:
        assert labels_of(tensors) == labels_of(batches)


@pytest.mark.parametrize("num_workers", [0, 2])
def test_items_batched_by_the_loader_are_stacked_into_numpy(examples, num_workers):
    ds = Dataset(examples, seed=1).shuffle(7).map(parse_one)
    loader = dataloader(
        ds,
        batch_size=5,
        to="numpy",
        num_workers=num_workers,
        multiprocessing_context="fork" if num_workers else None,
    )
    batches = list(loader)
    assert len(loader) == len(batches)
    for batch in batches:
        assert type(batch["x"]) is np.ndarray
        assert batch["x"].shape == (len(batch["label"]), 3)
    assert sorted(labels_of(batches)) == list(range(23))
    # Items handed out one by one stay numpy too.
    items = list(dataloader(ds, to="numpy", num_workers=num_workers))
    assert all(type(item["x"]) is np.ndarray and item["x"].shape == (3,) for item in items)


@pytest.mark.parametrize("num_workers", [0, 2])
def test_raw_batches_are_lists_of_bytes(tmp_path, num_workers):
    paths, records = make_files(tmp_path, [7, 12, 4], [".tfrecord", ".ffr"])
    loader = dataloader(
        Dataset(paths, seed=2).shuffle(),
        batch_size=5,
        to="numpy",
        num_workers=num_workers,
        multiprocessing_context="fork" if num_workers else None,
    )
    batches = list(loader)
    assert all(isinstance(b, list) and all(isinstance(r, bytes) for r in b) for b in batches)
    assert collections.Counter(r for b in batches for r in b) == collections.Counter(records)
    mapped = list(dataloader(MapDataset(paths), batch_size=4, to="numpy"))
    assert [r for b in mapped for r in b] == records


@pytest.mark.parametrize("to", ["torch", "numpy"])
@pytest.mark.parametrize("num_workers", [0, 2])
def test_a_collate_fn_may_return_numpy(examples, to, num_workers):
    ds = Dataset(examples).map(parse_one)
    output = {} if to == "torch" else {"to": to}  # the default keeps numpy from a collate_fn too
    loader = dataloader(
        ds,
        batch_size=6,
        collate_fn=stack_labels,
        **output,
        num_workers=num_workers,
        multiprocessing_context="fork" if num_workers else None,
    )
    batches = list(loader)
    assert all(type(b) is np.ndarray for b in batches)
    assert sorted(int(v) for b in batches for v in b) == list(range(23))
    if num_workers == 0:
        assert np.concatenate(batches).tolist() == list(range(23))
    mapped = dataloader(
        MapDataset(examples, process=lambda idx, data: [parse_one(r) for r in data]),
        batch_size=6,
        collate_fn=stack_labels,
        **output,
    )
    assert all(type(b) is np.ndarray for b in mapped)


@pytest.mark.parametrize("num_workers", [0, 2])
def test_resuming_a_numpy_loader(examples, num_workers):
    def build(to="numpy"):
        return dataloader(
            pipeline(examples),
            to=to,
            num_workers=num_workers,
            multiprocessing_context="fork" if num_workers else None,
        )

    full = list(build())
    for k in (0, 2, len(full) - 1):
        loader = build()
        it = iter(loader)
        head = list(itertools.islice(it, k))
        state = json.loads(json.dumps(loader.state_dict()))
        del it
        restored = build()
        restored.load_state_dict(state)
        rest = list(restored)
        assert all(type(b["label"]) is np.ndarray for b in rest)
        assert sorted(labels_of(head + rest)) == list(range(23)), k
        if num_workers == 0:
            assert labels_of(head + rest) == labels_of(full)
    # The position does not depend on the output type.
    torch_loader = build("torch")
    it = iter(torch_loader)
    next(it)
    numpy_loader = build()
    numpy_loader.load_state_dict(torch_loader.state_dict())
    del it
    assert len(list(numpy_loader)) == len(full) - 1


def test_unknown_output_type(examples):
    with pytest.raises(ValueError, match='to must be "torch" or "numpy"'):
        dataloader(pipeline(examples), to="jax")  # type: ignore[arg-type]


def test_arrays_of_different_shapes_are_not_stacked(tmp_path):
    paths, _ = make_files(tmp_path, [12], [".ffr"])  # b"0:9" and b"0:10" differ in length
    as_array = lambda r: np.frombuffer(r, np.uint8)
    loader = dataloader(Dataset(paths).map(as_array), batch_size=12, to="numpy")
    with pytest.raises(ValueError, match="different shapes"):
        list(loader)
    nested = dataloader(Dataset(paths).map(lambda r: (len(r), [r])), batch_size=3, to="numpy")
    lengths, (records,) = next(iter(nested))
    assert type(lengths) is np.ndarray
    assert lengths.dtype == np.int64
    assert records == [b"0:0", b"0:1", b"0:2"]


def parse_columns(indices: list[int], data: list[bytes]) -> dict[str, np.ndarray]:
    """A MapDataset process returning the batch as columns, as parse_examples gives them."""
    return rk.parse_examples(data, SPEC)


@pytest.mark.parametrize("to", ["numpy", "torch"])
@pytest.mark.parametrize("num_workers", [0, 2])
def test_map_dataset_process_may_return_a_dict_of_columns(examples, to, num_workers):
    ds = MapDataset(examples, process=parse_columns)
    context = "fork" if num_workers else None
    loader = dataloader(
        ds,
        batch_size=4,
        to=to,
        shuffle=True,
        seed=1,
        num_workers=num_workers,
        multiprocessing_context=context,
    )
    batches = list(loader)
    kind = np.ndarray if to == "numpy" else torch.Tensor
    assert [len(batch["label"]) for batch in batches] == [4] * 5 + [3]
    for batch in batches:
        assert set(batch) == {"x", "label"}
        assert isinstance(batch["x"], kind)
        assert isinstance(batch["label"], kind)
        x, label = np.asarray(batch["x"]), np.asarray(batch["label"])
        assert x.dtype == np.float32
        assert label.dtype == np.int64
        np.testing.assert_array_equal(x, label[:, None] * [1, 2, 3])
    assert sorted(labels_of(batches)) == list(range(23))
    # One index gives that record's entries.
    item = ds[10]
    assert int(item["label"]) == 10
    np.testing.assert_array_equal(item["x"], [10, 20, 30])


def test_map_dataset_columns_of_the_wrong_length_are_refused(examples):
    ds = MapDataset(examples, process=lambda indices, data: {"label": [0]})
    with pytest.raises(ValueError, match="column 'label' has 1 entries for 3 indexes"):
        ds[[0, 1, 2]]
    ds = MapDataset(examples, process=lambda indices, data: {"label": 7})
    with pytest.raises(ValueError, match="column 'label' has no length for 2 indexes"):
        ds[[0, 1]]


def test_parsed_batches_become_tensors_as_torchs_default_convert_makes_them(tmp_path):
    from torch.utils.data import default_convert

    paths = write_label_examples(tmp_path, [10])
    spec = {"label": rk.FixedLen((), np.int64)}
    ours = next(iter(dataloader(Dataset(paths).batch(5).map(lambda b: rk.parse_examples(b, spec)))))
    batch = rk.parse_examples([rk.encode_example({"label": i}) for i in range(5)], spec)
    theirs = default_convert(batch)
    assert type(ours) is type(theirs) is type(batch)  # a ParsedBatch of tensors, the mapping kept
    assert isinstance(ours["label"], torch.Tensor)
    assert ours["label"].dtype == theirs["label"].dtype
