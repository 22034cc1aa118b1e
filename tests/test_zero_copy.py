"""recordkit.open(path, zero_copy=True): records as read-only views of a memory map, released at close."""

from __future__ import annotations

import io
import pickle
import random

import numpy as np
import pytest
from _array_record import write_array_record
from hypothesis import given, settings
from hypothesis import strategies as st

import recordkit as rk
from recordkit.errors import CorruptRecordError, UnsupportedOperationError

FORMATS = ["tfrecord", "ffrecord", "ofrecord"]
SUFFIX = {"tfrecord": ".tfrecord", "ffrecord": ".ffr", "ofrecord": ".ofrecord"}


def _records(fmt, count=300, seed=0):
    rng = random.Random(seed)
    # OFRecord cannot hold an empty record; the others get some.
    low = 1 if fmt == "ofrecord" else 0
    return [rng.randbytes(rng.choice([low, 1, 7, 100, 1000, 70000])) for _ in range(count)]


def _write(path, records):
    with rk.open(path, "w") as writer:
        writer.write_many(records)
    return path


@pytest.fixture(params=FORMATS)
def written(request, tmp_path):
    fmt = request.param
    records = _records(fmt)
    return _write(tmp_path / f"data{SUFFIX[fmt]}", records), records


def test_iteration_gives_read_only_views_equal_to_the_copies(written):
    path, records = written
    views = list(rk.open(path, zero_copy=True))
    assert all(type(view) is memoryview and view.readonly for view in views)
    assert [bytes(view) for view in views] == records
    assert [bytes(r) for r in rk.open(path, zero_copy=True)] == list(rk.open(path))


def test_every_random_access_form_gives_views(written):
    path, records = written
    reader = rk.open(path, zero_copy=True)
    order = random.Random(1).sample(range(len(records)), 50)
    assert [bytes(v) for v in reader.read(order)] == [records[i] for i in order]
    assert bytes(reader[7]) == records[7]
    assert bytes(reader[-1]) == records[-1]
    assert [bytes(v) for v in reader[10:20]] == records[10:20]
    assert type(next(iter(reader.read([3])))) is memoryview
    assert len(reader) == len(records)


def test_views_are_released_at_close(written):
    path, _ = written
    reader = rk.open(path, zero_copy=True)
    from_iteration = next(iter(reader))
    from_index, from_read = reader[5], reader.read([6, 7])
    reader.close()
    for view in (from_iteration, from_index, *from_read):
        with pytest.raises(ValueError, match="released"):
            bytes(view)


def test_with_block_releases_views_on_exit(written):
    path, _ = written
    with rk.open(path, zero_copy=True) as reader:
        kept = reader[1]
        assert bytes(kept) == bytes(rk.open(path)[1])
    with pytest.raises(ValueError, match="released"):
        kept.tobytes()


def test_what_the_caller_built_on_a_view_stays_valid_after_close(written):
    path, records = written
    index = next(i for i, record in enumerate(records) if len(record) > 10)
    reader = rk.open(path, zero_copy=True)
    view = reader[index]
    array = np.frombuffer(view, np.uint8)
    piece = reader[index][2:9]
    reader.close()
    # The map cannot be unmapped while these export it: they read the right bytes, never freed memory.
    assert array.tobytes() == records[index]
    assert bytes(piece) == records[index][2:9]
    with pytest.raises(ValueError, match="released"):
        bytes(view)  # the view handed out is released all the same


def test_an_unnamed_reader_leaves_the_collected_views_valid(written):
    path, records = written
    views = list(rk.open(path, zero_copy=True))
    import gc

    gc.collect()
    assert [bytes(view) for view in views] == records


def test_a_directory_and_a_glob_of_files(tmp_path):
    parts = [_records("tfrecord", 40, seed) for seed in range(3)]
    for i, records in enumerate(parts):
        _write(tmp_path / f"part-{i}.tfrecord", records)
    flat = [record for records in parts for record in records]
    assert [bytes(v) for v in rk.open(tmp_path, zero_copy=True)] == flat
    reader = rk.open(str(tmp_path / "part-*.tfrecord"), zero_copy=True)
    assert [bytes(v) for v in reader.read([0, 45, 119])] == [flat[0], flat[45], flat[119]]


@pytest.mark.parametrize("fmt", FORMATS)
def test_empty_files(tmp_path, fmt):
    path = _write(tmp_path / f"empty{SUFFIX[fmt]}", [])
    reader = rk.open(path, zero_copy=True)
    assert list(reader) == []
    assert len(reader) == 0
    reader.close()


def test_a_pickled_reader_reopens_mapped(written):
    path, records = written
    reader = pickle.loads(pickle.dumps(rk.open(path, zero_copy=True)))
    assert type(reader[0]) is memoryview
    assert bytes(reader[0]) == records[0]


def test_memory_held_for_dropped_views_stays_bounded(tmp_path):
    path = _write(tmp_path / "many.ffr", [b"x" * 10] * 100_000)
    reader = rk.open(path, zero_copy=True)
    for _ in reader:
        pass
    assert len(reader._views._refs) <= 2 * 4096 + 1


def test_refused_where_nothing_can_be_mapped(tmp_path):
    plain = _write(tmp_path / "a.tfrecord", [b"x"])
    packed = _write(tmp_path / "a.tfrecord.gz", [b"x"])
    with pytest.raises(UnsupportedOperationError, match="uncompressed"):
        rk.open(packed, zero_copy=True)
    with pytest.raises(UnsupportedOperationError, match="path"):
        rk.open(io.BytesIO(plain.read_bytes()), format="tfrecord", zero_copy=True)
    with pytest.raises(UnsupportedOperationError, match="remote"):
        rk.open("memory://somewhere/a.tfrecord", zero_copy=True)
    with pytest.raises(ValueError, match="zero_copy"):
        rk.open(tmp_path / "b.tfrecord", "w", zero_copy=True)


# -- damaged files: the same error, at the same record, as a reader that copies --------------------------


def _outcome(path, zero_copy, how):
    try:
        reader = rk.open(path, zero_copy=zero_copy)
        if how == "iterate":
            return [bytes(record) for record in reader]
        return [bytes(record) for record in reader.read(range(len(reader)))]
    except CorruptRecordError as exc:
        return (type(exc).__name__, exc.path, exc.index, exc.offset)


@settings(max_examples=60, deadline=None)
@given(
    fmt=st.sampled_from(FORMATS),
    records=st.lists(st.binary(min_size=1, max_size=300), min_size=1, max_size=12),
    flips=st.lists(st.tuples(st.floats(0, 1, exclude_max=True), st.integers(1, 255)), max_size=3),
    cut=st.one_of(st.none(), st.floats(0, 1, exclude_max=True)),
    how=st.sampled_from(["iterate", "read"]),
)
def test_damage_is_reported_exactly_as_without_zero_copy(
    tmp_path_factory, fmt, records, flips, cut, how
):
    path = tmp_path_factory.mktemp("damage") / f"d{SUFFIX[fmt]}"
    _write(path, records)
    data = bytearray(path.read_bytes())
    for where, mask in flips:
        data[int(where * len(data))] ^= mask
    if cut is not None:
        del data[int(cut * len(data)) :]
    path.write_bytes(bytes(data))
    try:
        expected = _outcome(path, False, how)
    except (rk.errors.RecordKitError, OSError) as exc:
        with pytest.raises(type(exc)):
            _outcome(path, True, how)
        return
    assert _outcome(path, True, how) == expected


# -- decoders take the views as they take bytes --------------------------------------------------------


def test_parsers_take_views(tmp_path):
    examples = [
        rk.encode_example({"label": i, "x": np.arange(3, dtype=np.float32) * i, "name": b"n%d" % i})
        for i in range(20)
    ]
    path = _write(tmp_path / "examples.tfrecord", examples)
    spec = {
        "label": rk.FixedLen((), np.int64),
        "x": rk.VarLen(np.float32),
        "name": rk.FixedLen((), bytes),
    }
    views = rk.open(path, zero_copy=True).read(range(20))
    by_view, by_bytes = rk.parse_examples(views, spec), rk.parse_examples(examples, spec)
    assert by_view["label"].tolist() == by_bytes["label"].tolist()
    assert by_view["name"].tolist() == by_bytes["name"].tolist()
    assert by_view["x"].values.tolist() == by_bytes["x"].values.tolist()
    assert rk.decode_example(views[4]).keys() == rk.decode_example(examples[4]).keys()
    assert rk.parse_example(views[4], spec)["name"] == b"n4"


def test_ofrecord_parsers_take_views(tmp_path):
    records = [
        rk.encode_ofrecord({"label": np.int32(i), "pixels": b"\x01\x02" * i}) for i in range(1, 9)
    ]
    path = _write(tmp_path / "d.ofrecord", records)
    views = list(rk.open(path, zero_copy=True))
    for view, record in zip(views, records, strict=True):
        assert str(rk.decode_ofrecord(view)) == str(rk.decode_ofrecord(record))


# -- ArrayRecord: views where the chunks are stored uncompressed, refused at open where they are not ----------


@pytest.mark.interop
@pytest.mark.parametrize(
    "options", ["uncompressed", "uncompressed,group_size:1", "uncompressed,group_size:7"]
)
def test_uncompressed_array_record_gives_views_released_at_close(tmp_path, options):
    # Records of 70,000 bytes and chunks of several records cross the 64 KiB block boundaries of Riegeli,
    # whose block headers split them: those come assembled, and still as views released at close.
    records = _records("tfrecord", 120)
    path = write_array_record(tmp_path / "data.array_record", records, options)
    reader = rk.open(path, zero_copy=True)
    views = list(reader)
    assert all(type(view) is memoryview and view.readonly for view in views)
    assert [bytes(view) for view in views] == records
    order = random.Random(2).sample(range(len(records)), 60)
    batch = reader.read(order)
    assert all(type(view) is memoryview for view in batch)
    assert [bytes(view) for view in batch] == [records[i] for i in order]
    single = [reader[i] for i in range(len(records))]
    assert [bytes(view) for view in single] == records
    reader.close()
    for view in (views[0], views[-1], batch[0], *single):
        with pytest.raises(ValueError, match="released"):
            bytes(view)


@pytest.mark.interop
@pytest.mark.parametrize("options", ["", "group_size:1", "zstd", "brotli,group_size:4", "snappy"])
def test_compressed_array_record_is_refused_at_open(tmp_path, options):
    path = write_array_record(tmp_path / "data.array_record", [b"a" * 100, b"b"], options)
    with pytest.raises(UnsupportedOperationError, match=r"uncompressed.*chunks.*compressed"):
        rk.open(path, zero_copy=True)
    assert list(rk.open(path)) == [b"a" * 100, b"b"]
