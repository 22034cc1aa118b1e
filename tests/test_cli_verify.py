"""``recordkit verify`` on the golden files: intact files pass, each damaged one names its first fault."""

from __future__ import annotations

import hashlib
import re

import pytest
from _cli import run_cli

import recordkit as rk

GOOD_TF = ["empty.tfrecord", "examples.tfrecord", "examples.tfrecord.gz", "raw.tfrecord"]
GOOD_FF = ["empty.ffr", "one.ffr", "varied.ffr", "pickled.ffr", "packed.ffr"]
CORRUPT_TF = ["corrupt_data_crc.tfrecord", "corrupt_length_crc.tfrecord", "truncated.tfrecord"]


@pytest.mark.parametrize("name", GOOD_TF)
def test_intact_tfrecord_files_pass(capsys, golden_dir, tfrecord_manifest, name):
    path = golden_dir / "tfrecord" / name
    n = tfrecord_manifest["files"][name]["records"]
    result = run_cli(capsys, "verify", path)
    assert (result.code, result.err) == (0, "")
    assert result.out == f"{path}: OK ({n} record{'' if n == 1 else 's'})\n"


@pytest.mark.parametrize("name", GOOD_FF)
def test_intact_ffrecord_files_pass(capsys, golden_dir, ffrecord_manifest, name):
    path = golden_dir / "ffrecord" / name
    n = ffrecord_manifest["files"][name]["records"]
    result = run_cli(capsys, "verify", path)
    assert result.code == 0
    assert result.out == f"{path}: OK ({n} record{'' if n == 1 else 's'})\n"


def test_legacy_ffrecord_passes_with_a_warning(capsys, golden_dir):
    result = run_cli(capsys, "verify", golden_dir / "ffrecord" / "legacy_zero_meta_crc.ffr")
    assert result.code == 0
    assert result.err.startswith("recordkit: warning: ")
    assert "no header checksum" in result.err


@pytest.mark.parametrize("name", CORRUPT_TF)
def test_corrupt_tfrecord_names_index_and_offset_as_tensorflow(
    capsys, golden_dir, tfrecord_manifest, name
):
    entry = tfrecord_manifest["files"][name]
    # TensorFlow's own message gives the byte offset: "corrupted record at 12", "truncated record at 944".
    offset = int(re.search(r"record at (\d+)", entry["tensorflow_says"]).group(1))
    index = entry["valid_records_before_fault"]
    path = golden_dir / "tfrecord" / name
    result = run_cli(capsys, "verify", path)
    assert result.code == 1
    (line,) = result.out.splitlines()  # one line, as a shard of a dataset directory is reported
    error = "TruncatedRecordError" if name.startswith("truncated") else "ChecksumError"
    assert line.startswith(f"{path}: CORRUPT: record {index} at byte {offset}: ")
    assert line.endswith(f" [{error}]")


@pytest.mark.parametrize(
    ("name", "bad_sample", "source"),
    [
        ("corrupt_payload.ffr", 50, "varied.ffr"),
        ("trailing_garbage.ffr", 0, "one.ffr"),
        ("truncated_last_sample.ffr", 0, "one.ffr"),
    ],
)
def test_corrupt_ffrecord_sample_names_index_and_offset(
    capsys, golden_dir, ffrecord_manifest, name, bad_sample, source
):
    files = ffrecord_manifest["files"]
    assert files[name].get("bad_samples", [bad_sample]) == [bad_sample]
    offset = files[source]["offsets"][bad_sample]
    path = golden_dir / "ffrecord" / name
    result = run_cli(capsys, "verify", path)
    assert result.code == 1
    assert result.out.splitlines()[0].startswith(
        f"{path}: CORRUPT: record {bad_sample} at byte {offset}: sample checksum mismatch"
    )
    assert result.out.splitlines()[0].endswith(" [ChecksumError]")


@pytest.mark.parametrize(
    ("name", "error", "words"),
    [
        ("corrupt_header.ffr", "ChecksumError", "header checksum"),
        ("truncated.ffr", "HeaderError", "past the end"),
        ("unfinished.ffr", "HeaderError", "unfinished"),
    ],
)
def test_damaged_ffrecord_header(capsys, golden_dir, name, error, words):
    path = golden_dir / "ffrecord" / name
    result = run_cli(capsys, "verify", path)
    assert result.code == 1
    (line,) = result.out.splitlines()
    assert line.startswith(f"{path}: CORRUPT: ")
    assert line.endswith(f" [{error}]")
    assert words in line


def test_many_files_summary_and_status(capsys, golden_dir, tmp_path):
    good = golden_dir / "tfrecord" / "examples.tfrecord"
    bad = golden_dir / "ffrecord" / "corrupt_payload.ffr"
    result = run_cli(capsys, "verify", good, bad)
    assert result.code == 1
    assert result.out.splitlines()[-1] == "2 files: 1 OK, 1 bad"
    result = run_cli(capsys, "verify", good, bad, tmp_path / "missing.tfrecord")
    assert result.code == 2
    assert result.out.splitlines()[-1] == "3 files: 1 OK, 2 bad"
    assert "missing.tfrecord: No such file or directory" in result.err


def test_directory_of_shards(capsys, golden_dir, ffrecord_manifest):
    result = run_cli(capsys, "verify", golden_dir / "ffrecord" / "multi")
    parts = ffrecord_manifest["files"]["multi/"]["parts"]
    assert result.code == 0
    assert result.out.splitlines() == [
        *(
            f"{golden_dir / 'ffrecord' / 'multi' / name}: OK ({part['records']} records)"
            for name, part in parts.items()
        ),
        f"{len(parts)} files: {len(parts)} OK, 0 bad",
    ]


def test_decode_finds_a_payload_that_does_not_decode(capsys, tmp_path):
    path = tmp_path / "mixed.tfrecord"
    with rk.open(path, "w") as writer:
        for i in range(5):
            writer.write(rk.encode_example({"label": i}))
        writer.write(b"\xff\xfe not an Example")
        writer.write(rk.encode_example({"label": 6}))
    assert run_cli(capsys, "verify", path).code == 0  # the framing is intact
    result = run_cli(capsys, "verify", "--decode", path)
    assert result.code == 1
    assert result.out.startswith(f"{path}: CORRUPT: record 5: malformed tf.train.Example")
    assert result.out.rstrip().endswith("[DecodeError]")


def test_decode_passes_on_golden_examples(capsys, golden_dir):
    for name in ("examples.tfrecord", "sequence_examples.tfrecord", "raw.tfrecord"):
        assert run_cli(capsys, "verify", "--decode", golden_dir / "tfrecord" / name).code == 0
    path = golden_dir / "tfrecord" / "examples.tfrecord"
    result = run_cli(capsys, "verify", "--decode", "--payload", "ofrecord", path)
    assert result.code == 1
    assert "record 0" in result.out


def test_damaged_and_cut_gzip_streams(capsys, tmp_path, golden_dir):
    data = (golden_dir / "tfrecord" / "examples.tfrecord.gz").read_bytes()
    cut = tmp_path / "cut.tfrecord.gz"
    cut.write_bytes(data[: len(data) // 2])
    result = run_cli(capsys, "verify", cut)
    assert result.code == 1
    assert result.out.startswith(f"{cut}: CORRUPT: record ")
    assert result.out.splitlines()[0].endswith(" [TruncatedRecordError]")
    flipped = bytearray(data)
    flipped[len(data) // 2] ^= 0xFF
    bad = tmp_path / "bad.tfrecord.gz"
    bad.write_bytes(bytes(flipped))
    result = run_cli(capsys, "verify", bad)
    assert result.code == 1
    assert result.out.startswith(f"{bad}: CORRUPT: ")
    assert "Traceback" not in result.err


def test_salvage_keeps_every_intact_record(capsys, tmp_path, golden_dir, ffrecord_manifest):
    out = tmp_path / "rescued.ffr"
    result = run_cli(
        capsys, "verify", golden_dir / "ffrecord" / "corrupt_payload.ffr", "--salvage", out
    )
    assert result.code == 1
    assert f"salvaged into {out}: " in result.out
    expected = ffrecord_manifest["files"]["varied.ffr"]["sha256"]
    with rk.open(out) as reader:
        digests = [hashlib.sha256(record).hexdigest() for record in reader]
    assert digests == expected[:50] + expected[51:]


def test_salvage_only_for_one_damaged_file(capsys, tmp_path, golden_dir):
    out = tmp_path / "out.tfrecord"
    intact = golden_dir / "tfrecord" / "examples.tfrecord"
    assert run_cli(capsys, "verify", intact, "--salvage", out).code == 0
    assert not out.exists()
    result = run_cli(capsys, "verify", intact, intact, "--salvage", out)
    assert result.code == 2
    assert "--salvage applies to a single file" in result.err
    out.write_bytes(b"keep")
    bad = golden_dir / "tfrecord" / "corrupt_data_crc.tfrecord"
    result = run_cli(capsys, "verify", bad, "--salvage", out)
    assert result.code == 2
    assert out.read_bytes() == b"keep"
    assert run_cli(capsys, "verify", bad, "--salvage", out, "--force").code == 1
    with rk.open(out) as reader:
        assert sum(1 for _ in reader) == 59


# -- datasets and files together; --decode on a dataset -----------------------------------------------


def _dataset_with_a_bad_payload(directory):
    """Two shards of split ``train``; the last record of the second is not an Example."""
    with rk.ShardWriter(
        f"{directory}/train-{{shard:03d}}.tfrecord", max_records=3, split="train"
    ) as w:
        for i in range(5):
            w.write(rk.encode_example({"label": i}))
        w.write(b"\xff\xfe not an Example")
    return directory


def test_verify_takes_datasets_and_files_together(capsys, tmp_path, golden_dir):
    directory = _dataset_with_a_bad_payload(tmp_path / "ds")
    one = golden_dir / "ffrecord" / "one.ffr"
    bad = golden_dir / "tfrecord" / "corrupt_data_crc.tfrecord"
    result = run_cli(capsys, "verify", directory, one)
    assert (result.code, result.err) == (0, "")
    assert result.out.splitlines() == [
        f"{directory}/train-000.tfrecord: OK (3 records)",
        f"{directory}/train-001.tfrecord: OK (3 records)",
        f"{directory}: 2 shards: 2 OK, 0 bad",
        f"{one}: OK (1 record)",
    ]
    result = run_cli(capsys, "verify", bad, directory, one)
    assert result.code == 1
    lines = result.out.splitlines()
    assert lines[0].startswith(f"{bad}: CORRUPT: record 0 at byte 12: ")
    assert lines[1:4] == [
        f"{directory}/train-000.tfrecord: OK (3 records)",
        f"{directory}/train-001.tfrecord: OK (3 records)",
        f"{directory}: 2 shards: 2 OK, 0 bad",
    ]
    assert lines[4:] == [f"{one}: OK (1 record)", "2 files: 1 OK, 1 bad"]


def test_verify_decode_reads_a_datasets_records(capsys, tmp_path):
    directory = _dataset_with_a_bad_payload(tmp_path / "ds")
    assert run_cli(capsys, "verify", directory).code == 0  # the framing and the manifest hold
    for split in ([], ["--split", "train"]):
        result = run_cli(capsys, "verify", "--decode", directory, *split)
        assert (result.code, result.err) == (1, "")
        assert result.out.splitlines() == [
            f"{directory}/train-000.tfrecord: OK (3 records)",
            (
                f"{directory}/train-001.tfrecord: CORRUPT: record 2: malformed tf.train.Example "
                "(17 bytes): malformed protobuf: invalid wire type 7 [DecodeError]"
            ),
            f"{directory}: 2 shards: 1 OK, 1 bad",
        ]


def test_verify_salvage_in_place_refuses_a_file_among_datasets(capsys, tmp_path, golden_dir):
    directory = _dataset_with_a_bad_payload(tmp_path / "ds")
    result = run_cli(capsys, "verify", directory, golden_dir / "ffrecord" / "one.ffr", "--salvage")
    assert result.code == 2
    assert "every argument must be one" in result.err
    assert "--decode" not in result.err
