"""ArrayRecord files with transposed chunks (``transpose:true``), read against array_record's own reader.

array_record writes the files (protocol buffers of several shapes, and records that are not protocol buffers,
which the transposed encoding keeps aside) and reads them back as the oracle. Damaged chunks, their hashes
recomputed so that only the decoder can notice, must give recordkit's errors or array_record's records.
"""

from __future__ import annotations

import os
import random
import struct
from pathlib import Path

import pytest
from _array_record import array_record_module, write_array_record

import recordkit as rk
from recordkit._proto.tensorboard import event_pb2, summary_pb2
from recordkit._proto.tensorflow import example_pb2
from recordkit.errors import CorruptRecordError, RecordKitError
from recordkit.formats import _riegeli_transpose
from recordkit.formats._highwayhash import highwayhash64
from recordkit.formats._riegeli import BLOCK, CHUNK_HEADER, TRANSPOSED, Malformed
from recordkit.formats._riegeli_transpose import transposed_parts
from recordkit.formats.arrayrecord import ArrayRecordFrameReader
from recordkit.formats.base import Source

array_record = array_record_module()

pytestmark = pytest.mark.interop


def _examples(count: int = 40, seed: int = 0) -> list[bytes]:
    """tf.train.Examples: int64 (negative and large too), float and bytes features, some empty."""
    rng = random.Random(seed)
    out = []
    for i in range(count):
        example = example_pb2.Example()
        features = example.features.feature
        features["id"].int64_list.value.append(i)
        features["big"].int64_list.value.extend([rng.randrange(-(2**63), 2**63), 127, 128, -1])
        features["score"].float_list.value.extend(rng.random() for _ in range(rng.randrange(4)))
        features["label"].bytes_list.value.append(rng.choice([b"cat", b"dog", b""]))
        if i % 3:
            features["text"].bytes_list.value.append(rng.randbytes(rng.randrange(50)))
        if i % 7 == 0:
            example = example_pb2.Example()  # an empty message: a record of no bytes
        out.append(example.SerializeToString())
    return out


def _events(count: int = 30, seed: int = 1) -> list[bytes]:
    """TensorBoard events: doubles, negative int64s, nested summaries with repeated values."""
    rng = random.Random(seed)
    out = []
    for i in range(count):
        event = event_pb2.Event(wall_time=rng.random() * 1e9, step=i - 10)
        if i % 2:
            value = event.summary.value.add(tag=f"loss/{i % 3}", simple_value=rng.random())
            value.metadata.plugin_data.plugin_name = "scalars"
            event.summary.value.add(tag="empty")
        else:
            event.file_version = "brain.Event:2"
        out.append(event.SerializeToString())
    return out


def _key(field: int, wire: int) -> bytes:
    return _varint((field << 3) | wire)


def _varint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    return bytes(out + bytes([value]))


def _wire(count: int = 50, seed: int = 2) -> list[bytes]:
    """Hand-made wire format: unpacked and packed repeated fields, fixed32/64, groups, nested messages,
    field numbers up to 2**29 - 1 (five-byte keys), ten-byte varints, and records that are not protobuf."""
    rng = random.Random(seed)
    out = []
    for i in range(count):
        parts = [
            _key(1, 0) + _varint(rng.randrange(300)) for _ in range(rng.randrange(5))
        ]  # unpacked
        packed = b"".join(_varint(rng.randrange(2**40)) for _ in range(rng.randrange(6)))
        parts.append(_key(2, 2) + _varint(len(packed)) + packed)
        parts.append(_key(3, 5) + struct.pack("<f", rng.random()))
        parts.append(_key(4, 1) + struct.pack("<d", rng.random()))
        parts.append(_key(2**29 - 1, 0) + _varint(2**64 - 1 - i))
        inner = _key(1, 2) + _varint(3) + b"abc" + _key(2, 0) + _varint(i)
        deeper = _key(7, 2) + _varint(len(inner)) + inner
        parts.append(_key(5, 2) + _varint(len(deeper)) + deeper)
        parts.append(_key(6, 3) + _key(1, 0) + _varint(i) + _key(6, 4))  # a group
        rng.shuffle(parts)
        out.append(b"".join(parts))
        if i % 9 == 4:
            out.append(rng.randbytes(rng.randrange(1, 40)) + b"\xff\xff\xff")  # not protobuf
        if i % 11 == 0:
            out.append(b"")
    return out


def _large(seed: int = 3) -> list[bytes]:
    """Records over 64 KiB among small ones, so that chunks cross block boundaries."""
    rng = random.Random(seed)
    out = []
    for i in range(12):
        example = example_pb2.Example()
        size = 100_000 if i % 4 == 1 else rng.randrange(100)
        example.features.feature["blob"].bytes_list.value.append(rng.randbytes(size))
        example.features.feature["n"].int64_list.value.append(i)
        out.append(example.SerializeToString())
    out.append(b"\xff" * 70_000)  # a large record that is not protobuf
    return out


def _many(count: int = 3000, seed: int = 4) -> list[bytes]:
    """Many small records: chunks of hundreds of KiB, across several 64 KiB blocks."""
    rng = random.Random(seed)
    out = []
    for i in range(count):
        summary = summary_pb2.Summary()
        summary.value.add(tag=f"t{i % 5}", simple_value=float(i))
        if i % 2:
            summary.value.add(tag="x" * rng.randrange(200))
        out.append(summary.SerializeToString())
    return out


RECORDS = {"examples": _examples, "events": _events, "wire": _wire, "large": _large, "many": _many}

OPTIONS = [
    "transpose:true",
    "transpose:true,group_size:1",
    "transpose:true,group_size:7,uncompressed",
    "transpose:true,group_size:1000,uncompressed",
    "transpose:true,group_size:100,zstd",
    "transpose:true,group_size:50,brotli",
    "transpose:true,group_size:13,snappy",
    "transpose:true,transpose_bucket_size:256,group_size:64,zstd",
    "transpose:true,transpose_bucket_size:100,group_size:1000,uncompressed",
]


def _expected(path: str) -> list[bytes]:
    reader = array_record.ArrayRecordReader(path)
    try:
        return list(reader.read_all())
    finally:
        reader.close()


@pytest.mark.parametrize("options", OPTIONS)
@pytest.mark.parametrize("shape", sorted(RECORDS))
def test_transposed_records_are_array_records(tmp_path, shape, options):
    records = RECORDS[shape]()
    path = write_array_record(tmp_path / "t.array_record", records, options)
    expected = _expected(path)
    assert expected == records
    rng = random.Random(len(records))
    picks = [rng.randrange(len(records)) for _ in range(25)] + [0, len(records) - 1]
    with rk.open(path) as reader:
        assert list(reader) == expected
        assert [reader[i] for i in picks] == [expected[i] for i in picks]
        assert reader.read(picks[::-1]) == [expected[i] for i in picks[::-1]]
        assert list(reader.iter_from(len(records) // 2)) == expected[len(records) // 2 :]


def test_transposed_chunks_are_written_and_decoded(tmp_path, monkeypatch):
    """The files above hold transposed chunks, and several buckets where asked: the decoder is what reads."""
    path = write_array_record(
        tmp_path / "t.array_record", _wire(), "transpose:true,transpose_bucket_size:100,zstd"
    )
    inflated = []
    real = _riegeli_transpose.inflate
    monkeypatch.setattr(
        _riegeli_transpose,
        "inflate",
        lambda kind, block, what: inflated.append(what) or real(kind, block, what),
    )
    reader = ArrayRecordFrameReader(Source(path=path, buffer=Path(path).read_bytes()))
    assert {reader.chunks.chunk(offset).chunk_type for offset in reader.offsets[:-1]} == {
        TRANSPOSED
    }
    assert list(reader) == _expected(path)
    assert sum(what.startswith("bucket") for what in inflated) > 2
    assert "transitions" in inflated


def test_salvage_and_verify_read_transposed_chunks(tmp_path):
    path = write_array_record(
        tmp_path / "t.array_record", _examples(), "transpose:true,group_size:8"
    )
    with rk.get_format("arrayrecord").verifying(), rk.open(path) as reader:
        assert list(reader) == _expected(path)
    assert list(
        rk.get_format("arrayrecord").salvage(
            Path(path).read_bytes(), os.path.getsize(path), _no_skip
        )
    ) == (_expected(path))


def _no_skip(*args):
    raise AssertionError(f"nothing is damaged: {args}")


# Damage. Each damaged chunk keeps valid hashes (recomputed), so the decoder alone must notice.


def _chunk_layout(path: str) -> list[tuple[int, int]]:
    """(offset, data size) of each data chunk, all of which must lie inside the first block."""
    data = Path(path).read_bytes()
    reader = ArrayRecordFrameReader(Source(path=path, buffer=data))
    out = []
    for offset in reader.offsets[:-1]:
        size = struct.unpack_from("<Q", data, offset + 8)[0]
        assert offset + CHUNK_HEADER + size <= BLOCK
        out.append((offset, size))
    return out


def _rewrite(data: bytes, offset: int, old_size: int, new_data: bytes) -> bytes:
    """``data`` with the chunk at ``offset`` given ``new_data`` (no longer than its data) and its hashes."""
    assert len(new_data) <= old_size
    out = bytearray(data)
    begin = offset + CHUNK_HEADER
    out[begin : begin + len(new_data)] = new_data
    struct.pack_into("<QQ", out, offset + 8, len(new_data), highwayhash64(new_data))
    struct.pack_into(
        "<Q", out, offset, highwayhash64(bytes(out[offset + 8 : offset + CHUNK_HEADER]))
    )
    return bytes(out)


def _oracle(path: str) -> list[bytes] | None:
    """array_record's records of ``path``, or ``None`` where it refuses the file."""
    try:
        return _expected(path)
    except RuntimeError:  # what array_record raises for a damaged chunk
        return None


def _check_damaged(path: str, damaged: bytes) -> str:
    """Read a damaged file both ways: recordkit raises one of its errors, or gives array_record's records."""
    with open(path, "wb") as f:
        f.write(damaged)
    expected = _oracle(path)
    try:
        with rk.open(path) as reader:
            got = list(reader)
    except RecordKitError:
        return "error"
    assert got == expected, "recordkit read records that array_record does not"
    return "same"


@pytest.mark.parametrize("options", ["uncompressed", "zstd", "snappy"])
def test_damaged_transposed_chunks_raise_or_read_the_same(tmp_path, options):
    path = write_array_record(
        tmp_path / "t.array_record", _wire(12), f"transpose:true,group_size:6,{options}"
    )
    original = Path(path).read_bytes()
    rng = random.Random(options)
    outcomes = []
    damaged_path = str(tmp_path / "damaged.array_record")
    for offset, size in _chunk_layout(path)[:2]:
        data = original[offset + CHUNK_HEADER : offset + CHUNK_HEADER + size]
        positions = sorted(rng.sample(range(size), min(size, 60)))
        for pos in positions:  # one bit flipped
            flipped = bytearray(data)
            flipped[pos] ^= 1 << rng.randrange(8)
            outcomes.append(
                _check_damaged(damaged_path, _rewrite(original, offset, size, bytes(flipped)))
            )
        outcomes += [  # the data cut short
            _check_damaged(damaged_path, _rewrite(original, offset, size, data[:cut]))
            for cut in range(0, size, max(1, size // 25))
        ]
    assert "error" in outcomes


def test_damaged_chunk_errors_name_path_record_and_offset(tmp_path):
    path = write_array_record(
        tmp_path / "t.array_record", _examples(12), "transpose:true,group_size:6,uncompressed"
    )
    original = Path(path).read_bytes()
    _, (offset, size) = _chunk_layout(path)
    data = original[offset + CHUNK_HEADER : offset + CHUNK_HEADER + size]
    with open(path, "wb") as f:
        f.write(_rewrite(original, offset, size, data[: size // 2]))
    with rk.open(path) as reader:
        assert reader[0] == _examples(12)[0]  # the first chunk is intact
        with pytest.raises(CorruptRecordError, match="transposed chunk does not decode") as info:
            reader[7]
        assert (info.value.path, info.value.index, info.value.offset) == (path, 6, offset)
        got = []
        with pytest.raises(CorruptRecordError, match="transposed chunk does not decode") as info:
            got.extend(reader)  # in order: the first chunk's records, then the error
        assert got == _examples(12)[:6]
        assert (info.value.index, info.value.offset) == (6, offset)


def _chunk_data(tmp_path, records: list[bytes], options: str) -> tuple[bytes, int, int]:
    """The data, record count and decoded size of the first chunk of a file written with ``options``."""
    path = write_array_record(tmp_path / "c.array_record", records, options)
    reader = ArrayRecordFrameReader(Source(path=path, buffer=Path(path).read_bytes()))
    chunk = reader.chunks.chunk(reader.offsets[0])
    assert chunk.chunk_type == TRANSPOSED
    return chunk.data, chunk.num_records, chunk.decoded_size


@pytest.mark.parametrize("options", ["uncompressed", "zstd", "brotli", "snappy"])
def test_every_truncation_of_a_chunk_is_malformed(tmp_path, options):
    data, count, size = _chunk_data(tmp_path, _wire(20), f"transpose:true,{options}")
    whole = transposed_parts(data, count, size)
    for cut in range(len(data)):
        try:
            found = transposed_parts(data[:cut], count, size)
        except Malformed:
            continue
        assert found == whole, f"cut at {cut} of {len(data)} decodes to other records"


def test_wrong_header_counts_are_malformed(tmp_path):
    data, count, size = _chunk_data(tmp_path, _examples(10), "transpose:true,uncompressed")
    bounds, values = transposed_parts(data, count, size)
    assert len(bounds) == count + 1
    assert len(values) == size
    for wrong_count, wrong_size in [
        (count - 1, size),
        (count + 1, size),
        (count, size - 1),
        (count, size + 1),
    ]:
        with pytest.raises(Malformed):
            transposed_parts(data, wrong_count, wrong_size)
    with pytest.raises(Malformed, match="more than the transitions can"):
        transposed_parts(
            data, count, 1 << 60
        )  # refused before decoding: nothing is allocated for it
    with pytest.raises(Malformed, match="more than the transitions can"):
        transposed_parts(data, 1 << 50, size)


def _chunk(header: bytes, buckets: bytes = b"", transitions: bytes = b"") -> bytes:
    """An uncompressed transposed chunk's data from its parts."""
    return b"\x00" + _varint(len(header)) + header + buckets + transitions


def _header(*values: int, tail: bytes = b"") -> bytes:
    return b"".join(map(_varint, values)) + tail


# Hand-made chunks. GOOD holds one record b"\x08\x05" (field 1 = 5): state 0 starts a record (tag 3),
# state 1 is field 1 with the value 5 inline (subtype 10 + 5) and goes on implicitly to state 0 (successor
# 2 + 0); decoding begins at state 1 (records are decoded back to front) and ends when a transition is due.
STATES = _header(2, 3, 8, 0, 2 + 0)
GOOD = _chunk(_header(0, 0) + STATES + bytes([15]) + _header(1))
# One submessage end (field 1's key 0x0a as wire type 6: 0x0e) that loops back to itself explicitly.
ENDS = _header(0, 0, 1, 0x0E, 0, 0)


@pytest.mark.parametrize(
    ("data", "count", "size", "why"),
    [
        (b"", 1, 2, "no data"),
        (b"\x07", 1, 2, "unknown compression"),
        (b"\x00\x80", 1, 2, "header size runs past"),
        (b"\x00\x05ab", 1, 2, "runs past the chunk data"),
        (_chunk(_header(0, 0, 1 << 30)), 1, 2, "states in 0 bytes"),
        (_chunk(_header(5, 5)), 1, 2, "buckets and 5 buffers"),
        (_chunk(_header(1, 1, 10, 3)), 1, 2, "bucket of 10 bytes runs past"),
        (_chunk(_header(1, 1, 3, 4), b"abc"), 1, 2, "does not fit"),
        (_chunk(_header(2, 1, 3, 3, 3), b"abcdef"), 1, 2, "do not add up"),
        (_chunk(_header(0, 1, 0)), 1, 2, "buffers but no bucket"),
        (_chunk(_header(0, 0, 1, 7, 0, 0)), 1, 2, "no valid protobuf key"),
        (_chunk(_header(0, 0, 1, 3, 5, 0)), 1, 2, "successor 4 is not a state"),
        (_chunk(_header(0, 0, 1, 3, 0, 1)), 1, 2, "first state 1 is not"),
        (_chunk(_header(0, 0, 2, 3, 8, 2 + 1, 2 + 0, 15, 1)), 1, 2, "form a loop"),
        (_chunk(_header(0, 0, 1, 8, 0, 200, 0)), 1, 2, "unknown varint subtype 200"),
        (_chunk(_header(0, 0, 1, 1, 0, 0, 0)), 1, 2, "reads buffer 0 of 0"),
        (_chunk(_header(0, 0, 1, 3, 0, 0, 7)), 1, 2, "1 bytes after the end of the header"),
        (GOOD, 3, 2, "3 records, more than the transitions can reach"),
        (GOOD, 1, 5, "5 bytes, more than the transitions can write"),
        (
            _chunk(_header(0, 0, 1, 3, 0, 0), transitions=b"\xfc"),
            1,
            0,
            "transition to state 63 of 1",
        ),
        (_chunk(_header(0, 0, 1, 2, 0, 0)), 0, 10, "starts that was not ended"),
        (_chunk(_header(0, 0, 2, 3, 0x0E, 0, 2 + 0, 1)), 1, 2, "record starts inside a submessage"),
        (_chunk(ENDS), 0, 2, "1 submessages still open"),
        (_chunk(ENDS, transitions=b"\x00"), 0, 2, "more submessages open than"),
        (
            _chunk(_header(0, 0) + STATES + bytes([15]) + _header(1), transitions=b"\x00"),
            1,
            2,
            "more than the 1 records",
        ),
        (_chunk(_header(0, 0, 1, 3, 0, 0), transitions=b"\x03"), 1, 0, "more than the 1 records"),
        (_chunk(_header(0, 0, 2, 3, 8, 2 + 1, 0, 15, 0)), 1, 2, "2 bytes before the first record"),
        (GOOD, 1, 1, "run past the 1 bytes"),
        (GOOD, 1, 3, "2 bytes of records, not the 3"),
        (GOOD, 0, 2, "more than the 0 records"),
    ],
)
def test_hand_made_malformed_chunks(data, count, size, why):
    with pytest.raises(Malformed, match=why):
        transposed_parts(data, count, size)


def test_a_hand_made_chunk_decodes():
    assert transposed_parts(GOOD, 1, 2) == ([0, 2], b"\x08\x05")


def test_hand_made_buffers_and_nesting():
    """Field 2 holds a submessage whose field 1 is the string b"hi": the record b"\\x12\\x04\\x0a\\x02hi"."""
    # States: 0 a record start; 1 the end of field 2's submessage (key 0x12 as wire type 6: 0x16); 2 the string
    # field 1, from buffer 0; 3 the submessage's start. Backwards from state 1, each implicitly to the next,
    # then to state 0.
    states = _header(4, 3, 0x16, 0x0A, 2, 0, 4 + 2, 4 + 3, 4 + 0, 0, 1)
    record = b"\x12\x04\x0a\x02hi"
    assert transposed_parts(_chunk(_header(1, 1, 3, 3) + states, b"\x02hi"), 1, 6) == (
        [0, 6],
        record,
    )
    with pytest.raises(Malformed, match="a string runs past its buffer"):
        transposed_parts(_chunk(_header(1, 1, 2, 2) + states, b"\x02h"), 1, 6)
