"""Typed errors raised in DataLoader workers reach the main process with their attributes."""

from __future__ import annotations

from pathlib import Path

import pytest
from _data_files import write

import recordkit as rk
from recordkit.data import Dataset
from recordkit.errors import (
    ChecksumError,
    DecodeError,
    ManifestError,
    UnknownFormatError,
    attach_attributes,
)

torch = pytest.importorskip("torch")
# A DataLoader iterator left behind by an error is collected later, and joins each worker that is still
# waiting for work for MP_STATUS_CHECK_INTERVAL (5 s) before terminating it; 1 s keeps those joins short.
torch.utils.data._utils.MP_STATUS_CHECK_INTERVAL = 1.0
pytestmark = [
    pytest.mark.torch,
    pytest.mark.filterwarnings("ignore:'set_vital' is deprecated:UserWarning"),
]

from recordkit.integrations.torch import MapDataset, dataloader, torch_dataset

RECORDS = [f"record {i:02d} ".encode() * (i + 1) for i in range(12)]
BAD = 7


@pytest.fixture(scope="module")
def damaged(tmp_path_factory) -> str:
    """A TFRecord file whose record 7 has a flipped payload byte."""
    path = write(tmp_path_factory.mktemp("damaged") / "bad.tfrecord", RECORDS)
    data = bytearray(path.read_bytes())
    start = sum(16 + len(r) for r in RECORDS[:BAD])
    data[start + 12 + 3] ^= 0x20  # inside the payload: the data checksum no longer matches
    path.write_bytes(bytes(data))
    return str(path)


@pytest.fixture(scope="module")
def expected(damaged) -> ChecksumError:
    """What a plain read in this process raises."""
    with pytest.raises(ChecksumError) as info, rk.open(damaged) as reader:
        list(reader)
    assert info.value.index == BAD
    return info.value


def assert_same(err: BaseException, expected: ChecksumError) -> None:
    assert type(err) is type(expected)
    for name in ("path", "index", "offset", "expected", "actual", "reason"):
        assert getattr(err, name) == getattr(expected, name), name
    assert str(expected) in str(err)  # the worker's traceback is kept in the message


def raised(loader) -> BaseException:
    with pytest.raises(ChecksumError) as info:
        for _ in loader:
            pass
    return info.value


@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_plain_dataloader(damaged, expected, context):
    loader = torch.utils.data.DataLoader(
        torch_dataset(Dataset(damaged)),
        batch_size=2,
        num_workers=2,
        multiprocessing_context=context,
    )
    assert_same(raised(loader), expected)


def test_recordkit_dataloader(damaged, expected):
    loader = dataloader(Dataset(damaged).shuffle(3), batch_size=2, num_workers=2)
    assert_same(raised(loader), expected)


def test_map_dataset(damaged, expected):
    loader = dataloader(MapDataset(damaged), batch_size=3, num_workers=2)
    assert_same(raised(loader), expected)
    plain = torch.utils.data.DataLoader(MapDataset(damaged), batch_size=3, num_workers=2)
    assert_same(raised(plain), expected)


def test_stateful_dataloader(damaged, expected):
    stateful = pytest.importorskip("torchdata.stateful_dataloader")
    loader = stateful.StatefulDataLoader(
        torch_dataset(Dataset(damaged).shuffle()), batch_size=None, num_workers=2
    )
    assert_same(raised(loader), expected)


def refuse_record(record: bytes) -> bytes:
    if record.startswith(b"record 03"):
        raise DecodeError("feature 'label' has the wrong type", index=3, feature="label")
    return record


def test_errors_from_map_functions(tmp_path):
    path = write(tmp_path / "ok.ffr", RECORDS)
    loader = torch.utils.data.DataLoader(
        torch_dataset(Dataset(str(path)).map(refuse_record)), batch_size=None, num_workers=2
    )
    with pytest.raises(DecodeError) as info:
        list(loader)
    assert (info.value.index, info.value.feature) == (3, "label")


def test_the_main_process_needs_no_transport(damaged, expected):
    with pytest.raises(ChecksumError) as info:
        list(torch.utils.data.DataLoader(torch_dataset(Dataset(damaged)), batch_size=None))
    assert str(info.value) == str(expected)  # nothing appended outside workers


# -- the transport itself ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "err",
    [
        ChecksumError(
            "data checksum mismatch", path="a.tfrecord", index=3, offset=1036, expected=1, actual=2
        ),
        ManifestError("count differs", path="MANIFEST.json", shard=4),
        UnknownFormatError("no format 'xyz'", name="xyz"),
        DecodeError("truncated varint", index=9, feature="image"),
    ],
    ids=lambda e: type(e).__name__,
)
def test_attributes_survive_a_rebuild_from_text(err):
    before = dict(vars(err))
    attach_attributes(err)
    attach_attributes(err)  # once only
    assert str(err).count("recordkit error attributes") == 1
    text = (
        f"Caught {type(err).__name__} in DataLoader worker process 0.\nOriginal Traceback:\n{err}\n"
    )
    rebuilt = type(err)(text)
    assert {k: getattr(rebuilt, k) for k in before} == before


def test_rebuild_ignores_garbage_and_keeps_given_values():
    err = ChecksumError("x\nrecordkit error attributes: {not json", path="p")
    assert (err.path, err.index) == ("p", None)
    err = ChecksumError('x\nrecordkit error attributes: {"index": 5, "path": "q"}', path="p")
    assert (err.path, err.index) == ("p", 5)
    err = ChecksumError("x\nrecordkit error attributes: [1, 2]")
    assert err.index is None


def test_pickling_still_keeps_attributes(tmp_path: Path):
    import pickle

    err = ChecksumError("m", path="a", index=1, offset=2, expected=3, actual=4)
    attach_attributes(err)
    clone = pickle.loads(pickle.dumps(err))
    assert (clone.path, clone.index, clone.offset, clone.expected, clone.actual) == (
        "a",
        1,
        2,
        3,
        4,
    )
