"""The ``recordkit`` command line: info, count, cat, index, usage errors, and the JSON rendering rules."""

from __future__ import annotations

import base64
import errno
import hashlib
import io
import json
import math
import os
import signal
import struct
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

try:
    import fcntl
    import termios
except ImportError:  # not POSIX
    fcntl = termios = None
from _cli import run_cli
from hypothesis import given, settings
from hypothesis import strategies as st

import recordkit as rk
from recordkit.cli.common import progress
from recordkit.cli.payload import bytes_json, float_json
from recordkit.decode.payloads import detect_payload

TF_FILES = [
    "examples.tfrecord",
    "examples.tfrecord.gz",
    "raw.tfrecord",
    "sequence_examples.tfrecord",
]
FF_FILES = ["empty.ffr", "one.ffr", "varied.ffr", "pickled.ffr", "packed.ffr"]


# -- helpers: JSON values back to the manifest's notation ------------------------------------------


def _json_float32_hex(value: float | str) -> str:
    number = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}.get(value, value)
    return np.float32(number).tobytes().hex()


def _json_bytes_hex(value: str | dict[str, str]) -> str:
    if isinstance(value, dict):
        assert set(value) == {"b64"}
        return base64.b64decode(value["b64"], validate=True).hex()
    return value.encode("utf-8").hex()


def _manifest_values(feature: dict) -> list:
    if feature["kind"] == "float_list":
        return [item["f32_hex"] for item in feature["value"]]
    return feature["value"]


def _json_values(kind: str | None, values: list) -> list:
    if kind == "float_list":
        return [_json_float32_hex(v) for v in values]
    if kind == "bytes_list":
        return [_json_bytes_hex(v) for v in values]
    assert all(isinstance(v, int) for v in values)
    return values


# -- usage -----------------------------------------------------------------------------------------


def test_version_and_help_exit_0(capsys):
    result = run_cli(capsys, "--version")
    assert (result.code, result.out) == (0, f"recordkit {rk.__version__}\n")
    result = run_cli(capsys, "--help")
    assert result.code == 0
    for command in ("info", "count", "verify", "cat", "convert", "index"):
        assert command in result.out


@pytest.mark.parametrize(
    "args",
    [
        [],
        ["frobnicate"],
        ["count"],
        ["cat"],
        ["cat", "a.tfrecord", "--json", "--raw"],
        ["convert", "only-one-argument"],
        ["convert", "a", "b", "--shards", "0"],
        ["info", "--sample", "x", "a.tfrecord"],
    ],
)
def test_usage_errors_exit_2(capsys, args):
    result = run_cli(capsys, *args)
    assert result.code == 2
    assert "usage: recordkit" in result.err


def test_missing_file_is_one_line_without_traceback(tmp_path):
    missing = tmp_path / "nope.tfrecord"
    proc = subprocess.run(
        [sys.executable, "-m", "recordkit", "count", str(missing)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 2
    assert proc.stderr == f"recordkit: error: {missing}: No such file or directory\n"


@pytest.mark.parametrize("command", ["info", "count", "verify", "cat", "index"])
def test_unknown_format_is_an_error_not_a_traceback(capsys, tmp_path, command):
    path = tmp_path / "notes.txt"
    path.write_bytes(b"just some text, no records here\n")
    result = run_cli(capsys, command, path)
    assert result.code == 2
    assert result.err.startswith("recordkit: error: cannot tell the record format")
    assert "--format" in result.err
    assert "Traceback" not in result.err


def test_unknown_format_name(capsys, golden_dir):
    result = run_cli(capsys, "count", "--format", "parquet", golden_dir / "ffrecord" / "one.ffr")
    assert result.code == 2
    assert "unknown record format 'parquet'" in result.err


# -- count -----------------------------------------------------------------------------------------


def test_count_matches_manifests(capsys, golden_dir, tfrecord_manifest, ffrecord_manifest):
    paths = [golden_dir / "tfrecord" / name for name in TF_FILES]
    paths += [golden_dir / "ffrecord" / name for name in FF_FILES]
    expected = [tfrecord_manifest["files"][name]["records"] for name in TF_FILES]
    expected += [ffrecord_manifest["files"][name]["records"] for name in FF_FILES]
    result = run_cli(capsys, "count", *paths)
    assert result.code == 0
    lines = [line.split(maxsplit=1) for line in result.out.splitlines()]
    assert lines == [
        *([str(n), str(p)] for n, p in zip(expected, paths, strict=True)),
        [str(sum(expected)), "total"],
    ]


def test_count_directory_in_natural_order(capsys, golden_dir, ffrecord_manifest):
    result = run_cli(capsys, "count", golden_dir / "ffrecord" / "multi")
    parts = ffrecord_manifest["files"]["multi/"]["parts"]
    assert result.code == 0
    assert [line.split()[0] for line in result.out.splitlines()] == [
        *(str(part["records"]) for part in parts.values()),
        str(ffrecord_manifest["files"]["multi/"]["records"]),
    ]


def test_count_reports_a_corrupt_length_and_goes_on(capsys, golden_dir, tfrecord_manifest):
    bad = golden_dir / "tfrecord" / "corrupt_length_crc.tfrecord"
    good = golden_dir / "tfrecord" / "examples.tfrecord"
    result = run_cli(capsys, "count", bad, good)
    assert result.code == 1
    assert "record 0 at byte 0" in result.err
    assert "[ChecksumError]" in result.err
    assert f"{tfrecord_manifest['files']['examples.tfrecord']['records']}  {good}" in result.out


# -- info ------------------------------------------------------------------------------------------


def _info(capsys, path, *options):
    result = run_cli(capsys, "info", "--json", *options, path)
    assert result.code == 0, result.err
    return json.loads(result.out)


@pytest.mark.parametrize("name", ["examples.tfrecord", "examples.tfrecord.gz", "raw.tfrecord"])
def test_info_sizes_match_manifest(capsys, golden_dir, tfrecord_manifest, name):
    entry = tfrecord_manifest["files"][name]
    info = _info(capsys, golden_dir / "tfrecord" / name)
    lengths = entry["lengths"]
    assert info["format"] == "tfrecord"
    assert info["compression"] == entry["compression"].lower()
    assert info["records"] == entry["records"]
    assert info["payload_bytes"] == sum(lengths)
    assert info["min_size"] == min(lengths)
    assert info["max_size"] == max(lengths)
    assert info["mean_size"] == pytest.approx(sum(lengths) / len(lengths))
    assert info["file_size"] == (golden_dir / "tfrecord" / name).stat().st_size
    assert info["index"] is None


def test_info_example_schema_matches_manifest(capsys, golden_dir, tfrecord_manifest):
    examples = tfrecord_manifest["files"]["examples.tfrecord"]["examples"]
    info = _info(capsys, golden_dir / "tfrecord" / "examples.tfrecord")
    assert info["payload"] == "example"
    assert info["sampled"] == len(examples)
    expected = {}
    for example in examples:
        for name, feature in example.items():
            row = expected.setdefault(name, {"kinds": set(), "lengths": []})
            if feature["kind"] is not None:
                row["kinds"].add(feature["kind"])
            row["lengths"].append(len(feature["value"]))
    got = {row["name"]: row for row in info["features"]}
    assert set(got) == set(expected)
    for name, row in expected.items():
        assert got[name]["kind"] == ("|".join(sorted(row["kinds"])) or "float_list")
        assert got[name]["present"] == len(row["lengths"])
        assert got[name]["min_len"] == min(row["lengths"])
        assert got[name]["max_len"] == max(row["lengths"])


def test_info_sample_limits_the_schema(capsys, golden_dir, tfrecord_manifest):
    examples = tfrecord_manifest["files"]["examples.tfrecord"]["examples"][:3]
    info = _info(capsys, golden_dir / "tfrecord" / "examples.tfrecord", "--sample", "3")
    assert info["sampled"] == 3
    assert info["records"] == 60
    ints = next(row for row in info["features"] if row["name"] == "ints")
    assert ints["max_len"] == max(len(e["ints"]["value"]) for e in examples)


def test_info_sequence_example_schema(capsys, golden_dir, tfrecord_manifest):
    records = tfrecord_manifest["files"]["sequence_examples.tfrecord"]["examples"]
    info = _info(capsys, golden_dir / "tfrecord" / "sequence_examples.tfrecord")
    assert info["payload"] == "sequence_example"
    assert {row["name"]: row["kind"] for row in info["features"]} == {
        name: feature["kind"] for name, feature in records[0]["context"].items()
    }
    lists = {row["name"]: row for row in info["feature_lists"]}
    for name in records[0]["feature_lists"]:
        steps = [len(record["feature_lists"][name]) for record in records]
        assert (lists[name]["min_len"], lists[name]["max_len"]) == (min(steps), max(steps))
        kinds = {step["kind"] for r in records for step in r["feature_lists"][name]}
        assert lists[name]["kind"] == "|".join(sorted(kinds))


@pytest.mark.parametrize("name", ["varied.ffr", "pickled.ffr"])
def test_info_ffrecord_is_raw_with_header_index(capsys, golden_dir, ffrecord_manifest, name):
    entry = ffrecord_manifest["files"][name]
    info = _info(capsys, golden_dir / "ffrecord" / name)
    assert info["format"] == "ffrecord"
    assert info["records"] == entry["records"]
    assert info["payload_bytes"] == sum(entry["lengths"])
    assert info["payload"] == "raw"
    assert info["index"] == "header"
    assert "features" not in info


def test_info_empty_file(capsys, golden_dir):
    info = _info(capsys, golden_dir / "ffrecord" / "empty.ffr")
    assert (info["records"], info["payload"], info["min_size"], info["max_size"]) == (0, None, 0, 0)


def test_info_ofrecord_schema(capsys, ofrecord_golden, ofrecord_manifest):
    for entry in ofrecord_manifest["files"]:
        info = _info(capsys, ofrecord_golden / entry["path"], "--sample", "1000")
        assert info["format"] == "ofrecord"
        assert info["payload"] == "ofrecord"
        assert info["records"] == entry["num_records"]
        kinds = {
            name: feature["kind"]
            for record in entry["records"]
            for name, feature in record["features"].items()
        }
        assert {row["name"]: row["kind"] for row in info["features"]} == kinds


def test_info_text_output(capsys, golden_dir):
    path = golden_dir / "tfrecord" / "sequence_examples.tfrecord"
    result = run_cli(capsys, "info", path)
    assert result.code == 0
    lines = result.out.splitlines()
    assert lines[0] == str(path)
    assert "  format       tfrecord" in lines
    assert "  records      10" in lines
    assert "  payload      sequence_example (from the first 10 records)" in lines
    assert "  context features:" in lines
    assert "  feature lists:" in lines


def test_info_names_the_sidecar_index(capsys, tmp_path, golden_dir):
    path = tmp_path / "copy.tfrecord"
    path.write_bytes((golden_dir / "tfrecord" / "examples.tfrecord").read_bytes())
    assert _info(capsys, path)["index"] is None
    assert run_cli(capsys, "index", path).code == 0
    assert _info(capsys, path)["index"] == f"{tmp_path}/copy.tfrecord.idx"


def _good_damaged_good(folder):
    """Write a.tfrecord and c.tfrecord intact and b.tfrecord with record 5's payload changed.

    Returns b's path and where the damage is: record 5's data checksum, at its first byte + 12.
    """
    payloads = [rk.encode_example({"label": i, "name": b"x" * i}) for i in range(10)]
    folder.mkdir()
    for name in ("a", "b", "c"):
        with rk.open(folder / f"{name}.tfrecord", "w") as writer:
            writer.write_many(payloads)
    damaged = folder / "b.tfrecord"
    data = bytearray(damaged.read_bytes())
    start = sum(8 + 4 + len(p) + 4 for p in payloads[:5])
    data[start + 12] ^= 0x01  # first payload byte: the protobuf tag of record 5's Example
    damaged.write_bytes(bytes(data))
    return damaged, 5, start + 12


def test_info_reports_a_damaged_file_in_its_place_and_goes_on(capsys, tmp_path):
    _, index, offset = _good_damaged_good(tmp_path / "shards")
    # Files named one by one are described one by one (a directory is summarised: test_cli_info.py).
    files = [tmp_path / "shards" / f"{name}.tfrecord" for name in "abc"]
    result = run_cli(capsys, "info", *files)
    assert result.code == 1
    assert result.err == ""
    blocks = result.out.split(f"{tmp_path / 'shards'}/")[1:]
    assert [block.splitlines()[0] for block in blocks] == [
        "a.tfrecord",
        (
            f"b.tfrecord: CORRUPT: record {index} at byte {offset}: payload checksum mismatch "
            f"{blocks[1].split('mismatch ', 1)[1].splitlines()[0]}"
        ),
        "c.tfrecord",
    ]
    assert blocks[1].splitlines()[0].endswith(") [ChecksumError]")
    assert "  records      10" in blocks[0]
    assert "  records      10" in blocks[2]


def test_info_json_marks_the_damaged_file(capsys, tmp_path):
    damaged, index, offset = _good_damaged_good(tmp_path / "shards")
    files = [tmp_path / "shards" / f"{name}.tfrecord" for name in "abc"]
    result = run_cli(capsys, "info", "--json", *files, tmp_path / "missing.tfrecord")
    assert result.code == 2  # the missing file outranks the damaged one, as in count and verify
    assert result.err.splitlines() == [
        f"recordkit: error: {tmp_path / 'missing.tfrecord'}: No such file or directory"
    ]
    good_a, bad, good_c = (json.loads(line) for line in result.out.splitlines())
    assert (good_a["records"], good_c["records"]) == (10, 10)
    assert bad["path"] == str(damaged)
    assert (bad["error"], bad["index"], bad["offset"]) == ("ChecksumError", index, offset)
    assert "payload checksum mismatch" in bad["reason"]
    assert run_cli(capsys, "info", "--json", *files).code == 1


# -- index -----------------------------------------------------------------------------------------


def test_index_writes_a_sidecar_matching_the_frames(
    capsys, tmp_path, golden_dir, tfrecord_manifest
):
    path = tmp_path / "copy.tfrecord"
    path.write_bytes((golden_dir / "tfrecord" / "examples.tfrecord").read_bytes())
    result = run_cli(capsys, "index", path)
    assert result.code == 0
    assert result.out == f"{path}: wrote {tmp_path}/copy.tfrecord.idx (60 records)\n"
    lengths = tfrecord_manifest["files"]["examples.tfrecord"]["lengths"]
    lines = (tmp_path / "copy.tfrecord.idx").read_text().splitlines()
    offset = 0
    for line, length in zip(lines, lengths, strict=True):
        # One "<offset> <frame size>" line per record; a TFRecord frame adds 16 bytes of header/CRCs.
        assert line == f"{offset} {length + 16}"
        offset += length + 16


def test_index_hidden_writes_a_name_directory_readers_pass_by(capsys, tmp_path):
    path = tmp_path / "data.tfrecord"
    with rk.open(path, "w") as writer:
        writer.write_many([b"a", b"bc"])
    assert run_cli(capsys, "index", path).code == 0
    assert run_cli(capsys, "index", "--hidden", path).code == 0
    assert sorted(os.listdir(tmp_path)) == [".data.tfrecord.idx", "data.tfrecord"]
    assert _info(capsys, path)["index"] == f"{tmp_path}/.data.tfrecord.idx"


def test_index_custom_output_and_ofrecord(capsys, tmp_path):
    path = tmp_path / "data.ofrecord"
    with rk.open(path, "w") as writer:
        writer.write_many(rk.encode_ofrecord({"x": [i]}) for i in range(5))
    out = tmp_path / "elsewhere.idx"
    result = run_cli(capsys, "index", path, "-o", out)
    assert result.code == 0
    assert len(out.read_text().splitlines()) == 5
    with rk.open(path, index=out) as reader:
        assert rk.decode_ofrecord(reader[3])["x"].tolist() == [3]


def test_index_ffrecord_needs_none_and_gzip_cannot_have_one(capsys, golden_dir):
    result = run_cli(capsys, "index", golden_dir / "ffrecord" / "one.ffr")
    assert result.code == 0
    assert "carry their index in the header" in result.out
    result = run_cli(capsys, "index", golden_dir / "tfrecord" / "examples.tfrecord.gz")
    assert result.code == 2
    assert "compressed" in result.err


# -- cat -------------------------------------------------------------------------------------------


def _cat_json(capsys, path, *options):
    result = run_cli(capsys, "cat", "--json", *options, path)
    assert result.code == 0, result.err
    return [json.loads(line) for line in result.out.splitlines()]


def test_cat_json_matches_manifest_exactly(capsys, golden_dir, tfrecord_manifest):
    examples = tfrecord_manifest["files"]["examples.tfrecord"]["examples"]
    rows = _cat_json(capsys, golden_dir / "tfrecord" / "examples.tfrecord")
    assert len(rows) == len(examples)
    for row, example in zip(rows, examples, strict=True):
        assert set(row) == set(example)
        for name, feature in example.items():
            assert _json_values(feature["kind"], row[name]) == _manifest_values(feature)


def test_cat_json_matches_decode_example(capsys, golden_dir):
    path = golden_dir / "tfrecord" / "examples.tfrecord"
    rows = _cat_json(capsys, path)
    with rk.open(path) as reader:
        for row, record in zip(rows, reader, strict=True):
            decoded = rk.decode_example(record)
            assert list(row) == list(decoded)
            for name, value in decoded.items():
                if isinstance(value, list):
                    assert [bytes.fromhex(_json_bytes_hex(v)) for v in row[name]] == value
                elif value.dtype == np.int64:
                    assert row[name] == value.tolist()
                else:
                    hexes = [_json_float32_hex(v) for v in row[name]]
                    assert hexes == [v.tobytes().hex() for v in value]


def test_cat_json_sequence_examples(capsys, golden_dir, tfrecord_manifest):
    records = tfrecord_manifest["files"]["sequence_examples.tfrecord"]["examples"]
    rows = _cat_json(capsys, golden_dir / "tfrecord" / "sequence_examples.tfrecord")
    for row, record in zip(rows, records, strict=True):
        assert set(row) == {"context", "feature_lists"}
        for name, feature in record["context"].items():
            assert _json_values(feature["kind"], row["context"][name]) == _manifest_values(feature)
        for name, steps in record["feature_lists"].items():
            assert [
                _json_values(step["kind"], got)
                for step, got in zip(steps, row["feature_lists"][name], strict=True)
            ] == [_manifest_values(step) for step in steps]


def test_cat_json_ofrecord(capsys, ofrecord_golden, ofrecord_manifest):
    entry = ofrecord_manifest["files"][0]
    rows = _cat_json(capsys, ofrecord_golden / entry["path"])
    for row, record in zip(rows, entry["records"], strict=True):
        for name, feature in record["features"].items():
            values = row[name]
            assert len(values) == feature["count"]
            if "first8" in feature:
                assert values[:8] == pytest.approx(feature["first8"], rel=1e-7)
            dtype = {
                "float_list": "<f4",
                "double_list": "<f8",
                "int32_list": "<i4",
                "int64_list": "<i8",
            }
            if feature["kind"] in dtype and "values_sha256_le" in feature:
                packed = np.array(values, dtype=dtype[feature["kind"]]).tobytes()
                assert hashlib.sha256(packed).hexdigest() == feature["values_sha256_le"]


def test_cat_offset_and_limit(capsys, golden_dir, tfrecord_manifest):
    path = golden_dir / "tfrecord" / "examples.tfrecord"
    labels = [
        e["label"]["value"] for e in tfrecord_manifest["files"]["examples.tfrecord"]["examples"]
    ]
    rows = _cat_json(capsys, path, "--offset", "10", "--limit", "5")
    assert [row["label"] for row in rows] == labels[10:15]
    assert _cat_json(capsys, path, "--offset", "59", "--limit", "5") == _cat_json(capsys, path)[59:]
    assert run_cli(capsys, "cat", path, "--offset", "-1").code == 2


def test_cat_raw_is_base64_of_each_record(capsys, golden_dir, tfrecord_manifest):
    result = run_cli(capsys, "cat", "--raw", golden_dir / "tfrecord" / "raw.tfrecord")
    assert result.code == 0
    digests = [
        hashlib.sha256(base64.b64decode(line)).hexdigest() for line in result.out.splitlines()
    ]
    assert digests == tfrecord_manifest["files"]["raw.tfrecord"]["sha256"]


def test_cat_json_on_raw_payloads(capsys, golden_dir, ffrecord_manifest):
    rows = _cat_json(capsys, golden_dir / "ffrecord" / "varied.ffr")
    entry = ffrecord_manifest["files"]["varied.ffr"]
    assert [hashlib.sha256(bytes.fromhex(_json_bytes_hex(r))).hexdigest() for r in rows] == entry[
        "sha256"
    ]


def test_cat_hex_and_text(capsys, golden_dir):
    result = run_cli(capsys, "cat", "--hex", golden_dir / "ffrecord" / "one.ffr")
    assert result.out.splitlines() == [
        "record 0 (14 bytes)",
        "  00000000  68 65 6c 6c 6f 20 66 66 72 65 63 6f 72 64        |hello ffrecord|",
    ]
    result = run_cli(capsys, "cat", "--limit", "2", golden_dir / "tfrecord" / "examples.tfrecord")
    assert result.code == 0
    lines = result.out.splitlines()
    assert lines[0] == "record 0 (736 bytes)"
    assert any(line.split()[:3] == ["label", "int64_list[1]", "[0]"] for line in lines)
    assert '"héllo wörld ✓", "", <2 bytes: 00ff>' in result.out


def test_cat_forced_payload_that_does_not_decode_exits_1(capsys, golden_dir):
    result = run_cli(
        capsys, "cat", "--payload", "example", golden_dir / "tfrecord" / "raw.tfrecord"
    )
    assert result.code == 1
    assert "is not a valid example payload" in result.err
    assert "raw.tfrecord: record 1 is not" in result.err  # record 0 is empty: a valid Example


def test_cat_on_corrupt_file_exits_1(capsys, golden_dir):
    result = run_cli(capsys, "cat", golden_dir / "tfrecord" / "corrupt_data_crc.tfrecord")
    assert result.code == 1
    assert result.err.startswith("recordkit: error: ")
    assert "record 0 at byte 12" in result.err


# -- payload detection and JSON rules --------------------------------------------------------------


def test_detect_payload_kinds():
    example = rk.encode_example({"label": 1, "name": b"x"})
    sequence = rk.encode_sequence_example({"id": b"a"}, {"tokens": [[1, 2], [3]]})
    ofrecord = rk.encode_ofrecord({"image": np.zeros(3, np.float32), "label": np.int32(4)})
    assert detect_payload([]) is None
    assert detect_payload([example] * 3) == "example"
    assert detect_payload([b"", example]) == "example"
    assert detect_payload([sequence, example]) == "sequence_example"
    assert detect_payload([ofrecord] * 2) == "ofrecord"
    assert detect_payload([b"\x00\xff\x10", b"hello"]) == "raw"
    # One damaged record among many does not hide the kind.
    assert detect_payload([example] * 3 + [b"\xff\xff"]) == "example"


def _parse_float(token: str) -> float:
    value = json.loads(token)
    return {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}.get(value, value)


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_float32_json_reads_back_identically(bits):
    value = np.frombuffer(bits.to_bytes(4, "little"), np.float32)[0]
    token = float_json(value)
    back = np.float32(_parse_float(token))
    if np.isnan(value):
        assert token == '"NaN"'
    else:
        assert back.tobytes() == value.tobytes()


@settings(max_examples=200, deadline=None)
@given(st.floats(allow_nan=True, allow_infinity=True))
def test_float64_json_reads_back_identically(value):
    back = _parse_float(float_json(value))
    assert (
        math.isnan(back)
        if math.isnan(value)
        else back == value and math.copysign(1, back) == math.copysign(1, value)
    )


@settings(max_examples=200, deadline=None)
@given(st.one_of(st.binary(max_size=40), st.text(max_size=20).map(str.encode)))
def test_bytes_json_reads_back_identically(value):
    token = json.loads(bytes_json(value))
    assert bytes.fromhex(_json_bytes_hex(token)) == value
    if isinstance(token, dict):
        try:
            text = value.decode("utf-8")
        except UnicodeDecodeError:
            return
        assert not all(c.isprintable() or c in "\t\n\r" for c in text)


# -- progress bars ---------------------------------------------------------------------------------


class _Terminal(io.StringIO):
    def isatty(self):
        return True


def test_progress_bar_only_on_a_terminal_and_not_quiet(monkeypatch):
    pytest.importorskip("tqdm")
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    assert list(progress(range(5), total=5, desc="reading", enabled=True)) == list(range(5))
    assert "reading" in terminal.getvalue()
    quiet = _Terminal()
    monkeypatch.setattr(sys, "stderr", quiet)
    assert list(progress(range(5), total=5, desc="reading", enabled=False)) == list(range(5))
    assert quiet.getvalue() == ""
    pipe = io.StringIO()
    monkeypatch.setattr(sys, "stderr", pipe)
    assert list(progress(range(5), total=5, desc="reading", enabled=True)) == list(range(5))
    assert pipe.getvalue() == ""


# -- interruptions and closed pipes: one line or nothing on stderr, never a traceback ---------------


def _recordkit(*args) -> subprocess.Popen:
    """Start ``python -m recordkit *args``; SIGINT raises KeyboardInterrupt in it, as in a terminal."""
    command = [sys.executable, "-m", "recordkit", *map(str, args)]
    # A shell running this suite in the background may ignore SIGINT, and an ignored signal stays
    # ignored across exec; a handler does not, so the child starts with the default, as in a terminal.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    finally:
        signal.signal(signal.SIGINT, previous)


def _wait_for(condition, child: subprocess.Popen) -> None:
    deadline = time.monotonic() + 60
    while not condition():
        assert child.poll() is None, child.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.01)


def _open_fifo_for_writing(path, child: subprocess.Popen) -> int:
    """Open the FIFO once the child has opened it for reading."""
    fd = None

    def opened() -> bool:
        nonlocal fd
        try:
            fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
        except OSError as exc:
            if exc.errno != errno.ENXIO:  # ENXIO: no reader yet
                raise
        return fd is not None

    _wait_for(opened, child)
    return fd


def _unread_bytes(fd: int) -> int:
    return struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"))[0]


@pytest.fixture(scope="module")
def many_records(tmp_path_factory):
    path = tmp_path_factory.mktemp("many") / "many.tfrecord"
    with rk.open(path, "w") as writer:
        writer.write_many(rk.encode_example({"label": i}) for i in range(20_000))
    return path


@pytest.mark.skipif(fcntl is None, reason="needs POSIX FIFOs")
@pytest.mark.parametrize("command", [["cat", "--json"], ["count"], ["verify"], ["info"]])
def test_ctrl_c_exits_130_with_one_line(tmp_path, many_records, command):
    # The input is a FIFO fed the file's start and held open: the command is surely mid-read at SIGINT.
    # 16 KiB fit in the FIFO's buffer, so the write returns even if the child stops reading.
    fifo = tmp_path / "input.tfrecord"
    os.mkfifo(fifo)
    child = _recordkit(*command, fifo)
    fd = _open_fifo_for_writing(fifo, child)
    try:
        with open(many_records, "rb") as source:
            assert os.write(fd, source.read(16384)) == 16384
        # Once it has read some, it is past opening the file: inside the command's reading loop.
        _wait_for(lambda: _unread_bytes(fd) < 16384, child)
        child.send_signal(signal.SIGINT)
        _, stderr = child.communicate(timeout=60)
    finally:
        os.close(fd)
    assert child.returncode == 130
    assert stderr.decode().splitlines() == ["recordkit: interrupted"]


def test_output_cut_short_by_a_closed_pipe_exits_141_quietly(many_records):
    child = _recordkit("cat", "--json", many_records)
    first = child.stdout.readline()
    child.stdout.close()  # like `| head -1`
    stderr = child.stderr.read()
    child.stderr.close()
    assert child.wait(timeout=60) == 141
    assert json.loads(first) == {"label": [0]}
    assert stderr == b""


def test_short_output_to_a_closed_pipe_exits_141_quietly(many_records):
    # The few lines of `info` wait in the output buffer until exit; the pipe is closed before then.
    child = _recordkit("info", many_records)
    child.stdout.close()
    _, stderr = child.communicate(timeout=60)
    assert child.returncode == 141
    assert stderr == b""


def test_ctrl_c_while_the_command_line_loads_exits_130_with_one_line():
    # SIGINT is sent from inside the import of recordkit.cli: the interrupt lands while it is loading. The
    # child installs Python's own SIGINT handler first: a shell running this suite in the background hands
    # its children SIGINT ignored, and Python then installs none.
    script = textwrap.dedent(
        """
        import builtins, os, signal, sys
        signal.signal(signal.SIGINT, signal.default_int_handler)
        real_import = builtins.__import__

        def interrupting_import(name, *args, **kwargs):
            if name == "recordkit.cli":
                os.kill(os.getpid(), signal.SIGINT)
            return real_import(name, *args, **kwargs)

        builtins.__import__ = interrupting_import
        from recordkit.__main__ import run
        sys.exit(run())
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], check=False, capture_output=True, timeout=120
    )
    assert done.returncode == 130
    assert done.stderr.decode().splitlines() == ["recordkit: interrupted"]


def test_the_recordkit_script_starts_through_the_guarded_entry_point():
    pyproject = (Path(__file__).resolve().parent.parent / "pyproject.toml").read_text("utf-8")
    scripts = pyproject.split("[project.scripts]", 1)[1].split("\n[", 1)[0]
    assert scripts.strip() == 'recordkit = "recordkit.__main__:run"'


def test_a_typed_error_ends_with_its_class_in_every_command(capsys, tmp_path):
    flip = tmp_path / "flip.ofrecord"
    with rk.open(flip, "w") as writer:
        writer.write(b"\xff\xfe not an OFRecord")
    cat = run_cli(capsys, "cat", "--json", "--payload", "ofrecord", flip)
    assert cat.code == 1
    assert cat.err.startswith(
        f"recordkit: error: {flip}: record 0 is not a valid ofrecord payload: "
    )
    assert cat.err.endswith(" [DecodeError]\n")
    verify = run_cli(capsys, "verify", "--decode", "--payload", "ofrecord", flip)
    assert verify.code == 1
    assert verify.out.startswith(f"{flip}: CORRUPT: record 0: ")
    assert verify.out.endswith(" [DecodeError]\n")
    unknown = run_cli(capsys, "count", "--format", "nope", flip)
    assert unknown.code == 2
    assert unknown.err.endswith(" [UnknownFormatError]\n")
    missing = run_cli(capsys, "count", tmp_path / "missing.tfrecord")  # not recordkit's: no class
    assert (
        missing.err
        == f"recordkit: error: {tmp_path / 'missing.tfrecord'}: No such file or directory\n"
    )


@pytest.mark.skipif(fcntl is None, reason="needs POSIX FIFOs")
def test_verify_reads_a_fifo_once(tmp_path, many_records):
    # A stream cannot be opened twice: verify must learn the format from the one reading it checks.
    fifo = tmp_path / "stream.tfrecord"
    os.mkfifo(fifo)
    child = _recordkit("verify", fifo)
    fd = _open_fifo_for_writing(fifo, child)
    os.set_blocking(fd, True)
    try:
        with open(many_records, "rb") as source:
            data = source.read()
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)
    stdout, stderr = child.communicate(timeout=60)
    assert child.returncode == 0, stderr.decode()
    assert "20000 records" in stdout.decode()
