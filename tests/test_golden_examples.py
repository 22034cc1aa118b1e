"""Decoding the payloads written by TensorFlow and OneFlow gives exactly the values their manifests record.

The payloads are cut out of the files by a tiny frame splitter written here, independent of
``recordkit.formats``, and each payload's SHA-256 is checked against the manifest before it is decoded.
"""

from __future__ import annotations

import hashlib
import struct
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from recordkit import decode_example, decode_ofrecord, decode_sequence_example

NUMERIC_DTYPES = {
    "float_list": "<f4",
    "double_list": "<f8",
    "int32_list": "<i4",
    "int64_list": "<i8",
}


def split_frames(path: Path, *, header: int, trailer: int) -> list[bytes]:
    """Cut payloads out of a file of frames: 8-byte little-endian length, ``header - 8`` more bytes, the
    payload, ``trailer`` bytes. Checksums are not checked: the payload hashes in the manifest are."""
    data = path.read_bytes()
    payloads, pos = [], 0
    while pos < len(data):
        (length,) = struct.unpack_from("<q", data, pos)
        payloads.append(data[pos + header : pos + header + length])
        pos += header + length + trailer
    assert pos == len(data)
    return payloads


def tfrecord_payloads(path: Path) -> list[bytes]:
    """TFRecord: length, 4-byte length CRC, payload, 4-byte data CRC."""
    return split_frames(path, header=12, trailer=4)


def ofrecord_payloads(path: Path) -> list[bytes]:
    """OFRecord: length, payload."""
    return split_frames(path, header=8, trailer=0)


def checked_payloads(path: Path, entry: dict[str, Any]) -> list[bytes]:
    payloads = tfrecord_payloads(path)
    assert [len(p) for p in payloads] == entry["lengths"]
    assert [hashlib.sha256(p).hexdigest() for p in payloads] == entry["sha256"]
    return payloads


def assert_tf_feature(actual: object, expected: dict[str, Any]) -> None:
    """Compare one decoded feature with its manifest entry (``kind`` and ``value``)."""
    kind, values = expected["kind"], expected["value"]
    if kind == "bytes_list":
        assert actual == [bytes.fromhex(v) for v in values]
        return
    assert isinstance(actual, np.ndarray)
    assert actual.ndim == 1
    if kind is None:  # a Feature with no list set
        assert actual.dtype == np.float32
        assert actual.size == 0
    elif kind == "int64_list":
        assert actual.dtype == np.int64
        assert actual.tolist() == values
    else:
        assert kind == "float_list"
        assert actual.dtype == np.float32
        # Bit patterns, so NaN payloads and -0.0 are checked too.
        assert [actual[i : i + 1].astype("<f4").tobytes().hex() for i in range(actual.size)] == [
            v["f32_hex"] for v in values
        ]


def assert_tf_features(actual: dict[str, Any], expected: dict[str, Any]) -> None:
    assert sorted(actual) == sorted(expected)
    assert list(actual) == sorted(actual)
    for name, entry in expected.items():
        assert_tf_feature(actual[name], entry)


def test_examples_match_manifest(golden_dir: Path, tfrecord_manifest: dict[str, Any]) -> None:
    entry = tfrecord_manifest["files"]["examples.tfrecord"]
    payloads = checked_payloads(golden_dir / "tfrecord" / "examples.tfrecord", entry)
    assert len(payloads) == len(entry["examples"]) == 60
    for payload, expected in zip(payloads, entry["examples"], strict=True):
        assert_tf_features(decode_example(payload), expected)


def test_examples_cover_special_values(tfrecord_manifest: dict[str, Any]) -> None:
    """The golden file holds the cases worth checking: NaN, -0.0, empty lists and empty Features."""
    examples = tfrecord_manifest["files"]["examples.tfrecord"]["examples"]
    floats = {v["f32_hex"] for e in examples for v in e["floats"]["value"]}
    nan_bits = [
        h for h in floats if (int.from_bytes(bytes.fromhex(h), "little") & 0x7FFFFFFF) > 0x7F800000
    ]
    assert nan_bits
    assert "00000080" in floats  # -0.0
    assert any(e.get("empty_feature", {}).get("kind", "") is None for e in examples)
    assert any(not e["ints"]["value"] for e in examples)


def test_sequence_examples_match_manifest(
    golden_dir: Path, tfrecord_manifest: dict[str, Any]
) -> None:
    entry = tfrecord_manifest["files"]["sequence_examples.tfrecord"]
    payloads = checked_payloads(golden_dir / "tfrecord" / "sequence_examples.tfrecord", entry)
    assert len(payloads) == len(entry["examples"]) == 10
    for payload, expected in zip(payloads, entry["examples"], strict=True):
        context, feature_lists = decode_sequence_example(payload)
        assert_tf_features(context, expected["context"])
        assert sorted(feature_lists) == sorted(expected["feature_lists"])
        for name, steps in expected["feature_lists"].items():
            assert len(feature_lists[name]) == len(steps)
            for actual, step in zip(feature_lists[name], steps, strict=True):
                assert_tf_feature(actual, step)


def assert_of_feature(actual: object, expected: dict[str, Any]) -> None:
    """Compare one decoded OFRecord feature with the manifest, following its ``value_conventions``."""
    kind = expected["kind"]
    assert kind in NUMERIC_DTYPES, f"no check written for {kind}"
    wire_dtype = np.dtype(NUMERIC_DTYPES[kind])
    assert isinstance(actual, np.ndarray)
    assert actual.dtype == wire_dtype.newbyteorder("=")
    assert actual.shape == (expected["count"],)
    little_endian = actual.astype(wire_dtype).tobytes()
    if "values" in expected:
        assert little_endian == np.array(expected["values"], wire_dtype).tobytes()
    if "values_sha256_le" in expected:
        assert hashlib.sha256(little_endian).hexdigest() == expected["values_sha256_le"]
    if "first8" in expected:
        assert (
            actual[:8].astype(wire_dtype).tobytes()
            == np.array(expected["first8"], wire_dtype).tobytes()
        )
    if "sum" in expected:
        assert sum(actual.tolist()) == expected["sum"]


def test_oneflow_files_match_manifest(
    ofrecord_golden: Path, ofrecord_manifest: dict[str, Any]
) -> None:
    checked = 0
    for entry in ofrecord_manifest["files"]:
        path = ofrecord_golden / entry["path"]
        assert hashlib.sha256(path.read_bytes()).hexdigest() == entry["sha256"]
        payloads = ofrecord_payloads(path)
        assert len(payloads) == entry["num_records"] == len(entry["records"])
        for payload, record in zip(payloads, entry["records"], strict=True):
            assert len(payload) == record["payload_length"]
            assert hashlib.sha256(payload).hexdigest() == record["payload_sha256"]
            decoded = decode_ofrecord(payload)
            assert list(decoded) == sorted(record["features"]) == sorted(record["wire_key_order"])
            for name, expected in record["features"].items():
                assert_of_feature(decoded[name], expected)
            checked += 1
    assert checked == sum(len(e["records"]) for e in ofrecord_manifest["files"])


@pytest.mark.parametrize("kind", ["float_list", "int32_list", "int64_list"])
def test_oneflow_files_cover_kind(ofrecord_manifest: dict[str, Any], kind: str) -> None:
    kinds = {
        f["kind"]
        for e in ofrecord_manifest["files"]
        for r in e["records"]
        for f in r["features"].values()
    }
    assert kind in kinds
