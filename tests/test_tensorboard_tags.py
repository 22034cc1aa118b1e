"""The numbering of tags in recordkit.tensorboard's columnar walk: the same numbers whichever way it is found.

A length group with few distinct tags is numbered by comparing rows with each distinct one; it must give
exactly what numbering by sorted hash keys gives (``np.unique``), so that the order of the tags (the
categories of the DataFrames) does not depend on how many tags share a length.
"""

from __future__ import annotations

import numpy as np
import pytest

import recordkit as rk
from recordkit.tensorboard import _events


@pytest.mark.parametrize("distinct", [1, 2, 5, 8, 9, 40])
@pytest.mark.parametrize("width", [1, 3])
def test_few_distinct_numbers_rows_like_unique(distinct, width):
    rng = np.random.default_rng(distinct * 10 + width)
    table = rng.integers(0, 2**64, size=(distinct, width), dtype=np.uint64)
    words = table[rng.integers(0, distinct, size=5000)]
    _, first, inverse = np.unique(_events._keys(words), return_index=True, return_inverse=True)
    few = _events._few_distinct(words)
    if len(np.unique(words, axis=0)) > 8:
        assert few is None
        return
    assert few is not None
    assert few[0].tolist() == first.tolist()
    assert few[1].tolist() == inverse.ravel().tolist()


def test_tags_of_one_length_keep_their_order(tmp_path):
    """Few tags of one length and more than are numbered by comparison: every tag, in the order of
    np.unique of the hashed tags."""
    pytest.importorskip("pandas")  # scalars() returns a DataFrame
    from recordkit._proto.tensorboard import event_pb2

    path = tmp_path / "events.out.tfevents.1.host"
    for count in (3, 12):
        tags = [f"tag{i:02d}" for i in range(count)]
        records = []
        for step in range(300):
            for tag in tags:
                event = event_pb2.Event(wall_time=1.0 + step, step=step)
                event.summary.value.add(tag=tag, simple_value=float(step + len(tag)))
                records.append(event.SerializeToString())
        with rk.open(str(path), "w", format="tfrecord") as writer:
            writer.write_many(records)
        frame = rk.tensorboard.scalars(str(path))
        assert sorted(frame["tag"].cat.categories) == tags
        assert len(frame) == 300 * count
        words = np.frombuffer(b"".join(t.encode() for t in tags), np.uint8)
        padded = np.zeros((count, 8), np.uint8)
        padded[:, :5] = words.reshape(count, 5)
        _, first = np.unique(_events._keys(padded.view("<u8")), return_index=True)
        assert list(frame["tag"].cat.categories) == [tags[i] for i in first]


@pytest.mark.parametrize("chunk", [None, 7])
def test_records_across_chunks_read_like_protobuf(tmp_path, monkeypatch, chunk):
    """More records than one chunk of the columnar walk (or chunks of 7), mixing regular scalars, values
    with metadata and events protobuf parses (two values, no summary): the rows protobuf reads, in order."""
    pytest.importorskip("pandas")  # scalars() returns a DataFrame
    from recordkit._proto.tensorboard import event_pb2

    if chunk is not None:
        monkeypatch.setattr(_events, "_CHUNK", chunk)
    rng = np.random.default_rng(3)
    records = [event_pb2.Event(wall_time=1.0, file_version="brain.Event:2").SerializeToString()]
    count = 40000 if chunk is None else 400
    for i in range(count):
        event = event_pb2.Event(wall_time=1.5 + i, step=int(rng.integers(0, 2**40)) if i % 5 else i)
        value = event.summary.value.add(tag=("loss", "acc", "lr/x")[i % 3], simple_value=i * 0.5)
        if i % 97 == 0:
            value.metadata.plugin_data.plugin_name = "scalars"
        if i % 211 == 0:
            event.summary.value.add(tag="extra", simple_value=-1.0)
        records.append(event.SerializeToString())
    path = tmp_path / "events.out.tfevents.2.host"
    with rk.open(str(path), "w", format="tfrecord") as writer:
        writer.write_many(records)
    expected = [
        (v.tag, e.step, e.wall_time, v.simple_value)
        for e in map(event_pb2.Event.FromString, records)
        for v in e.summary.value
    ]
    frame = rk.tensorboard.scalars(str(path))
    found = list(
        zip(
            frame["tag"].astype(str),
            frame["step"].tolist(),
            frame["wall_time"].tolist(),
            frame["value"].tolist(),
            strict=True,
        )
    )
    assert found == expected
