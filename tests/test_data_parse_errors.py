"""A parse error inside a pipeline names the file and the record's index in it, not its place in a batch.

Each file holds 20 Examples whose ``id`` is the record's index; in the bad file record 13 holds ``id`` as
bytes where the spec asks for int64.
"""

from __future__ import annotations

import functools
import pickle

import numpy as np
import pytest
from _data_files import write

import recordkit as rk
from recordkit.data import Dataset, loader
from recordkit.errors import DataLossWarning, DecodeError

SPEC = {"id": rk.FixedLen((), np.int64)}
parse = functools.partial(rk.parse_examples, features=SPEC)
BAD = 13
REASON = "the record holds a bytes_list, the spec asks for int64"


def parse_one(record: bytes) -> dict[str, np.ndarray]:
    """Parse a single record, as a map before batching does."""
    return rk.parse_examples([record], SPEC)


def decode_then_parse(batch: list[bytes]) -> dict[str, np.ndarray]:
    """A user function around ``parse_examples``."""
    return rk.parse_examples(batch, SPEC)


def keep(record: bytes) -> bool:
    return True


def examples(bad: int | None) -> list[bytes]:
    records = [rk.encode_example({"id": i}) for i in range(20)]
    if bad is not None:
        records[bad] = rk.encode_example({"id": b"thirteen"})
    return records


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, str]:
    folder = tmp_path_factory.mktemp("parse")
    return {
        "bad": str(write(folder / "bad.tfrecord", examples(BAD))),
        "good": str(write(folder / "good.tfrecord", examples(None))),
        "bad.gz": str(write(folder / "bad.tfrecord.gz", examples(BAD))),
    }


def check(caught: pytest.ExceptionInfo[DecodeError], path: str) -> None:
    err = caught.value
    assert err.path == path
    assert err.index == BAD
    assert err.feature == "id"
    assert str(err).startswith(f"{path}: record {BAD}: feature 'id': ")
    assert REASON in str(err)
    assert "record 5" not in str(err)


def test_a_batch_parse_error_names_the_file_and_record(files):
    with pytest.raises(DecodeError) as caught:
        list(Dataset(files["bad"]).batch(8).map(parse))
    check(caught, files["bad"])


def test_a_user_function_calling_parse(files):
    with pytest.raises(DecodeError) as caught:
        list(Dataset(files["bad"]).batch(8).map(decode_then_parse))
    check(caught, files["bad"])


def test_a_record_parse_error_names_the_file_and_record(files):
    with pytest.raises(DecodeError) as caught:
        list(Dataset(files["bad"]).map(parse_one))
    check(caught, files["bad"])


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_through_a_shuffle_buffer(files, seed):
    ds = Dataset([files["good"], files["bad"]], seed=seed).shuffle(7).batch(8).map(parse)
    with pytest.raises(DecodeError) as caught:
        list(ds)
    check(caught, files["bad"])


def test_through_a_shuffle_buffer_of_a_compressed_file(files):
    ds = Dataset([files["bad.gz"], files["good"]], seed=3).shuffle(30).batch(8).map(parse)
    with pytest.raises(DecodeError) as caught:
        list(ds)
    check(caught, files["bad.gz"])


def test_through_a_global_shuffle(files):
    ds = Dataset([files["good"], files["bad"]], seed=4).shuffle().batch(8).map(parse)
    with pytest.raises(DecodeError) as caught:
        list(ds)
    check(caught, files["bad"])


@pytest.mark.parametrize("block", [1, 3])
@pytest.mark.parametrize("bad", ["bad", "bad.gz"])
def test_two_files_interleaved(files, block, bad):
    ds = Dataset([files["good"], files[bad]]).interleave(2, block_length=block).batch(8).map(parse)
    with pytest.raises(DecodeError) as caught:
        list(ds)
    check(caught, files[bad])


def test_interleaved_and_shuffled(files):
    ds = Dataset([files["bad"], files["good"]], seed=2).interleave(2).shuffle(5).batch(8).map(parse)
    with pytest.raises(DecodeError) as caught:
        list(ds)
    check(caught, files["bad"])


def test_after_a_filter_and_a_skip(files):
    ds = Dataset([files["good"], files["bad"]]).skip(5).filter(keep).batch(8).map(parse)
    with pytest.raises(DecodeError) as caught:
        list(ds)
    check(caught, files["bad"])


def test_on_a_second_rank(files):
    ds = Dataset([files["good"], files["bad"]], rank=1, world_size=2).batch(8).map(parse)
    with pytest.raises(DecodeError) as caught:
        list(ds)
    check(caught, files["bad"])


def test_after_resuming(files):
    ds = Dataset([files["good"], files["bad"]], seed=1).shuffle(6).batch(4).map(parse)
    items = iter(ds)
    next(items)
    state = ds.state_dict()
    items.close()
    again = Dataset([files["good"], files["bad"]], seed=1).shuffle(6).batch(4).map(parse)
    again.load_state_dict(state)
    with pytest.raises(DecodeError) as caught:
        list(again)
    check(caught, files["bad"])


def test_reading_through_damage(tmp_path):
    records = examples(BAD)
    path = write(tmp_path / "holed.tfrecord", records)
    data = bytearray(path.read_bytes())
    data[sum(len(r) + 16 for r in records[:3]) + 12] ^= 0xFF  # record 3's payload: a hole
    path.write_bytes(bytes(data))
    ds = Dataset(str(path), on_error="skip").batch(8).map(parse)
    with pytest.warns(DataLossWarning), pytest.raises(DecodeError) as caught:
        list(ds)
    check(caught, str(path))


def test_with_prefetch(files):
    with pytest.raises(DecodeError) as caught:
        list(Dataset(files["bad"]).batch(8).map(parse).prefetch(2))
    check(caught, files["bad"])


def test_in_loader_workers(files):
    ds = Dataset([files["good"], files["bad"]], seed=0).shuffle(5).batch(4).map(parse)
    with pytest.raises(DecodeError) as caught:
        list(loader(ds, num_workers=2))
    check(caught, files["bad"])


def test_where_the_pipeline_cannot_tell_the_message_is_unchanged(files):
    # unbatch() then batch() again: the stages no longer know which record each row came from.
    ds = Dataset(files["bad"]).batch(8).unbatch().batch(8).map(parse)
    with pytest.raises(DecodeError) as caught:
        list(ds)
    assert caught.value.path is None
    assert caught.value.index == 5
    assert str(caught.value).startswith("record 5: feature 'id': ")


def test_a_located_error_pickles(files):
    with pytest.raises(DecodeError) as caught:
        list(Dataset(files["bad"]).batch(8).map(parse))
    again = pickle.loads(pickle.dumps(caught.value))
    assert type(again) is DecodeError
    assert (again.path, again.index, again.feature) == (files["bad"], BAD, "id")
    assert str(again) == str(caught.value)


def test_locate_rewrites_the_record_number():
    err = DecodeError("record 5: feature 'id': wrong type", index=5, feature="id")
    err.locate("a.tfrecord", 13)
    assert str(err) == "a.tfrecord: record 13: feature 'id': wrong type"
    assert (err.path, err.index, err.offset) == ("a.tfrecord", 13, None)
    plain = DecodeError("malformed protobuf")
    plain.locate("a.tfrecord", 2)
    assert str(plain) == "a.tfrecord: record 2: malformed protobuf"
