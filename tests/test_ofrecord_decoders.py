"""OneFlow's raw and bytes decoders: real OneFlow files against their manifest, and OneFlow's semantics."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import _protowire as pw
import numpy as np
import pytest

import recordkit as rk
from recordkit._proto.oneflow import record_pb2
from recordkit.compat.oneflow import bytes_decoder, raw_decoder
from recordkit.errors import DecodeError

# The dtypes the datasets' own loaders ask for: ofrecord_raw_decoder(name, shape, dtype).
LOADER_DTYPE = {
    "int32_list": np.int32,
    "float_list": np.float32,
    "int64_list": np.int64,
    "double_list": np.float64,
}
LIST_LAYOUT = {"int32_list": "<i4", "float_list": "<f4", "int64_list": "<i8", "double_list": "<f8"}


def golden_files(manifest: dict[str, Any]) -> list[dict[str, Any]]:
    return manifest["files"]  # type: ignore[no-any-return]


def read_payloads(folder: Path, entry: dict[str, Any]) -> list[bytes]:
    with rk.open(folder / entry["path"], format="ofrecord") as reader:
        return list(reader)


def check_values(decoded: np.ndarray, expected: dict[str, Any]) -> None:
    """Compare one record's decoded values with the manifest's description of them."""
    if "values" in expected:
        assert decoded.tolist() == expected["values"]
        return
    layout = np.dtype(LIST_LAYOUT[expected["kind"]])
    assert (
        hashlib.sha256(decoded.astype(layout).tobytes()).hexdigest() == expected["values_sha256_le"]
    )
    assert decoded[:8].tolist() == expected["first8"]
    if "sum" in expected:
        assert int(decoded.sum()) == expected["sum"]


def test_raw_decoder_on_real_oneflow_files(ofrecord_golden, ofrecord_manifest):
    checked = 0
    for entry in golden_files(ofrecord_manifest):
        payloads = read_payloads(ofrecord_golden, entry)
        assert len(payloads) == entry["num_records"]
        first = entry["records"][0]["features"]
        for name, description in first.items():
            dtype = LOADER_DTYPE[description["kind"]]
            shape = (description["count"],)
            decoded = raw_decoder(payloads, name, shape, dtype)
            assert decoded.shape == (len(payloads), *shape)
            assert decoded.dtype == dtype
            for record, row in zip(entry["records"], decoded, strict=True):
                check_values(row, record["features"][name])
                checked += 1
    assert checked > 1000


def test_parse_ofrecords_agrees_with_raw_decoder_on_real_files(ofrecord_golden, ofrecord_manifest):
    entry = next(e for e in golden_files(ofrecord_manifest) if "sst2" in e["path"])
    payloads = read_payloads(ofrecord_golden, entry)
    specs = {
        "input_ids": rk.FixedLen((128,), np.int32),
        "attention_masks": rk.FixedLen((128,), np.int32),
        "labels": rk.FixedLen((1,), np.int32),
        "weights": rk.FixedLen((1,), np.float32),
    }
    parsed = rk.parse_ofrecords(payloads, specs)
    for name, spec in specs.items():
        assert np.array_equal(parsed[name], raw_decoder(payloads, name, spec.shape, spec.dtype))  # type: ignore[arg-type]


def ofrecord(name: str, kind: str, values: list[Any]) -> bytes:
    rec = record_pb2.OFRecord()
    getattr(rec.feature[name], kind).value.extend(values)
    return rec.SerializeToString()


def test_raw_decoder_exact_count():
    records = [ofrecord("x", "int64_list", [1, 2, 3, 4]), ofrecord("x", "int64_list", [5, 6, 7, 8])]
    assert raw_decoder(records, "x", (2, 2), np.int64).tolist() == [
        [[1, 2], [3, 4]],
        [[5, 6], [7, 8]],
    ]
    with pytest.raises(DecodeError, match="expected 3 values") as info:
        raw_decoder(records, "x", (3,), np.int64)
    assert info.value.index == 0
    assert info.value.feature == "x"


def test_raw_decoder_truncate_cuts_and_zero_fills():
    records = [ofrecord("x", "int32_list", [1, 2, 3, 4, 5]), ofrecord("x", "int32_list", [6])]
    assert raw_decoder(records, "x", (3,), np.int32, truncate=True).tolist() == [
        [1, 2, 3],
        [6, 0, 0],
    ]


def test_raw_decoder_dim1_varying_length_never_writes_past_a_sample():
    short = [ofrecord("x", "float_list", [1.0]), ofrecord("x", "float_list", [2.0, 3.0])]
    out = raw_decoder(short, "x", (3,), np.float32, dim1_varying_length=True)
    assert out.tolist() == [[1.0, 0.0, 0.0], [2.0, 3.0, 0.0]]
    # OneFlow would copy all 4 values into a 3-value slot, overwriting the next sample.
    long = [ofrecord("x", "float_list", [1.0, 2.0, 3.0, 4.0]), ofrecord("x", "float_list", [5.0])]
    with pytest.raises(DecodeError, match="found 4") as info:
        raw_decoder(long, "x", (3,), np.float32, dim1_varying_length=True)
    assert info.value.index == 0


@pytest.mark.parametrize(
    ("kind", "values", "dtype", "expected"),
    [
        ("int64_list", [1, -2], np.float32, [1.0, -2.0]),
        ("float_list", [1.75, 255.0], np.uint8, [1, 255]),
        ("double_list", [0.5, -1.5], np.float32, [0.5, -1.5]),
        ("int32_list", [-1, 7], np.int8, [-1, 7]),
        ("int64_list", [2**40 + 5, -1], np.int32, [5, -1]),
    ],
)
def test_raw_decoder_casts_like_static_cast(kind, values, dtype, expected):
    out = raw_decoder([ofrecord("x", kind, values)], "x", (2,), dtype)
    assert out.dtype == dtype
    assert out[0].tolist() == expected


def test_raw_decoder_reads_a_bytes_value_as_signed_bytes():
    records = [
        ofrecord("img", "bytes_list", [b"\x01\x02\xff\x80"]),
        ofrecord("img", "bytes_list", [b"\x05"]),
    ]
    # OneFlow copies min(size, len) bytes without checking the count; the rest is zero here.
    assert raw_decoder(records, "img", (3,), np.float32).tolist() == [
        [1.0, 2.0, -1.0],
        [5.0, 0.0, 0.0],
    ]
    assert raw_decoder(records, "img", (4,), np.uint8).tolist() == [[1, 2, 255, 128], [5, 0, 0, 0]]
    with pytest.raises(DecodeError, match="exactly 1"):
        raw_decoder([ofrecord("img", "bytes_list", [b"a", b"b"])], "img", (1,), np.uint8)


def test_raw_decoder_missing_feature_and_bad_dtype():
    with pytest.raises(DecodeError, match="not found") as info:
        raw_decoder(
            [ofrecord("x", "int32_list", [1]), ofrecord("y", "int32_list", [1])],
            "x",
            (1,),
            np.int32,
        )
    assert info.value.index == 1
    with pytest.raises(TypeError, match="bytes_decoder"):
        raw_decoder([ofrecord("x", "int32_list", [1])], "x", (1,), bytes)


def test_bytes_decoder():
    records = [
        ofrecord("jpg", "bytes_list", [b"\xff\xd8abc"]),
        ofrecord("jpg", "bytes_list", [b""]),
    ]
    assert bytes_decoder(records, "jpg") == [b"\xff\xd8abc", b""]
    with pytest.raises(DecodeError, match="exactly 1 bytes value"):
        bytes_decoder([ofrecord("jpg", "bytes_list", [b"a", b"b"])], "jpg")
    with pytest.raises(DecodeError, match="data type"):
        bytes_decoder([ofrecord("jpg", "int32_list", [1])], "jpg")
    with pytest.raises(DecodeError, match="not found"):
        bytes_decoder([ofrecord("png", "bytes_list", [b"a"])], "jpg")


# int32_list [-7] with its varint cut to 5 bytes (0xfffffff9): protobuf reads an int32 field's varint
# as its low 32 bits, sign-extended.
INT32_FIVE_BYTE_VARINT = bytes.fromhex("0a0e0a0178120922070a05f9ffffff0f")


def _int32_records() -> list[bytes]:
    """int32 varints of several lengths, packed and unpacked; each record holds one value."""
    ten = record_pb2.OFRecord()
    ten.feature["x"].int32_list.value.append(
        -7
    )  # protobuf writes 10 bytes, sign-extended to 64 bits
    unpacked = pw.tag(1, 0) + bytes.fromhex("f9ffffff0f")
    high_bits = pw.delimited(1, bytes.fromhex("ffffffff8710"))  # bits above the low 32 are dropped
    return [
        INT32_FIVE_BYTE_VARINT,
        ten.SerializeToString(),
        pw.entry("x", pw.delimited(pw.OF_INT32, unpacked)),
        pw.entry("x", pw.delimited(pw.OF_INT32, high_bits)),
    ]


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.float64])
def test_int32_varints_are_cut_to_32_bits_on_every_path(dtype):
    records = _int32_records()
    expected = [
        list(record_pb2.OFRecord.FromString(r).feature["x"].int32_list.value) for r in records
    ]
    assert expected == [[-7], [-7], [-7], [2**31 - 1]]
    for r, want in zip(records, expected, strict=True):
        assert rk.decode_ofrecord(r)["x"].tolist() == want
    for batch in (records, records * 8, [records[0]] * 9):  # scanner path, template path
        want = [record_pb2.OFRecord.FromString(r).feature["x"].int32_list.value[0] for r in batch]
        got = rk.parse_ofrecords(batch, {"x": rk.VarLen(dtype)})["x"].to_list()
        assert got == [[w] for w in want]
        assert raw_decoder(batch, "x", (1,), dtype)[:, 0].tolist() == want
