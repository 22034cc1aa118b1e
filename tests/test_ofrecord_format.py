"""OFRecord framing: OneFlow's golden part files, sniffing, and damaged lengths."""

from __future__ import annotations

import hashlib
import io
import struct

import pytest

import recordkit as rk
from recordkit.errors import CorruptRecordError, TruncatedRecordError


def test_golden_part_files_read_to_their_hashes_and_offsets(ofrecord_golden, ofrecord_manifest):
    for entry in ofrecord_manifest["files"]:
        path = ofrecord_golden / entry["path"]
        with rk.open(path, format="ofrecord") as reader:
            records = list(reader)
            assert len(reader) == entry["num_records"]
            frames = reader._frames[0]
            offsets = list(frames.offsets)  # type: ignore[attr-defined]
        expected = entry["records"]
        assert [hashlib.sha256(r).hexdigest() for r in records] == [
            e["payload_sha256"] for e in expected
        ]
        assert offsets[:-1] == [e["frame_offset"] for e in expected]
        assert offsets[-1] == entry["size"]


def test_golden_part_files_are_sniffed(ofrecord_golden, ofrecord_manifest):
    for entry in ofrecord_manifest["files"]:
        with rk.open(ofrecord_golden / entry["path"]) as reader:
            assert reader.format == "ofrecord"


def test_zero_and_negative_lengths_are_corrupt():
    for length in (0, -5):
        data = struct.pack("<q", length) + b"payload"
        with pytest.raises(CorruptRecordError, match="invalid record length") as caught:
            list(rk.open(io.BytesIO(data), format="ofrecord"))
        assert (caught.value.index, caught.value.offset) == (0, 0)


def test_length_beyond_the_file_is_truncated_not_allocated():
    data = struct.pack("<q", 2**62) + b"\x0a\x01"
    from recordkit.testing import NoSeekBytesIO

    for source in (io.BytesIO(data), NoSeekBytesIO(data)):
        with rk.open(source, format="ofrecord") as reader, pytest.raises(TruncatedRecordError):
            list(reader)


def test_writer_refuses_empty_records(tmp_path):
    with rk.open(tmp_path / "a.ofrecord", "w") as writer:
        writer.write(b"\x0a\x01x")
        with pytest.raises(ValueError, match="empty"):
            writer.write(b"")
        writer.abort()
    assert not (tmp_path / "a.ofrecord").exists()


def test_writer_framing(tmp_path):
    with rk.open(tmp_path / "a.ofrecord", "w") as writer:
        writer.write_many([b"ab", b"cde"])
    assert (tmp_path / "a.ofrecord").read_bytes() == struct.pack("<q", 2) + b"ab" + struct.pack(
        "<q", 3
    ) + b"cde"


def test_encoded_ofrecords_round_trip(tmp_path):
    encode = pytest.importorskip("recordkit.decode.messages").encode_ofrecord
    decode = pytest.importorskip("recordkit.decode.messages").decode_ofrecord
    with rk.open(tmp_path / "part-0", "w", format="ofrecord") as writer:
        writer.write(encode({"labels": [1, 2]}))
    with rk.open(tmp_path / "part-0") as reader:
        assert reader.format == "ofrecord"
        assert list(decode(reader[0])["labels"]) == [1, 2]
