"""``recordkit info`` on a source of many shards: one dataset summary (totals, the schema once, schema
differences between shards), per-shard lines with ``--shards``, and the same in ``--json``."""

from __future__ import annotations

import json
import os

import pytest
from _cli import run_cli
from _data_files import write_tfds_directory

import recordkit as rk


def _examples(first: int, n: int, **extra: object) -> list[bytes]:
    return [
        rk.encode_example({"label": i, "name": b"x" * (i % 4), **extra})
        for i in range(first, first + n)
    ]


def _shards(folder, counts=(3, 4, 5, 6, 7), payloads=None):
    """Write ``part-I.tfrecord`` for each count (Examples with ``label`` and ``name``); return the paths."""
    folder.mkdir()
    paths = []
    for i, n in enumerate(counts):
        path = folder / f"part-{i}.tfrecord"
        with rk.open(path, "w") as writer:
            writer.write_many(payloads[i] if payloads else _examples(100 * i, n))
        paths.append(path)
    return paths


def _totals(paths):
    records = sum(sum(1 for _ in rk.open(path)) for path in paths)
    payload_bytes = sum(sum(len(r) for r in rk.open(path)) for path in paths)
    return records, sum(os.path.getsize(path) for path in paths), payload_bytes


def _field(out: str, name: str) -> str:
    """The value of the summary line ``  NAME   value`` (two spaces at least after the name)."""
    (line,) = [line for line in out.splitlines() if line.startswith(f"  {name}  ")]
    return line[len(name) + 2 :].strip()


def test_a_directory_of_shards_is_one_summary(capsys, tmp_path):
    paths = _shards(tmp_path / "data")
    records, file_size, payload_bytes = _totals(paths)
    result = run_cli(capsys, "info", tmp_path / "data")
    assert result.code == 0, result.err
    lines = result.out.splitlines()
    assert lines[0] == str(tmp_path / "data")
    assert _field(result.out, "shards") == "5 files"
    assert _field(result.out, "format") == "tfrecord"
    assert _field(result.out, "compression") == "none"
    assert _field(result.out, "records").startswith(f"{records} ")
    assert _field(result.out, "file size") == f"{file_size} bytes"
    assert _field(result.out, "payloads").startswith(f"{payload_bytes} bytes")
    assert _field(result.out, "payload").startswith("example (")
    # The schema once, with the records of every shard's sample; no shard has a block or a line.
    assert lines.count("  features:") == 1
    (label,) = [line for line in lines if line.split()[:1] == ["label"]]
    assert label.split() == ["label", "int64_list", str(records), "1", "1"]
    assert "differ" not in result.out
    assert not any("part-" in line for line in lines)
    assert lines[-1] == "  5 shards: --shards lists them"


def test_shards_lists_one_line_per_shard(capsys, tmp_path):
    paths = _shards(tmp_path / "data")
    result = run_cli(capsys, "info", "--shards", tmp_path / "data")
    assert result.code == 0, result.err
    lines = result.out.splitlines()
    assert lines.count("  features:") == 1
    listed = [line.split() for line in lines if "part-" in line]
    assert listed == [
        [str(path), f"{n}", "records", f"{os.path.getsize(path)}", "bytes"]
        for path, n in zip(paths, (3, 4, 5, 6, 7), strict=True)
    ]
    assert "--shards lists them" not in result.out


def test_differing_schemas_are_reported_not_merged_silently(capsys, tmp_path):
    payloads = [
        _examples(0, 3),
        _examples(10, 3),
        _examples(20, 3, extra=[1.5]),  # a feature the others lack
        [rk.encode_example({"label": [0.5], "name": b"y"}) for _ in range(3)],  # label as floats
    ]
    _shards(tmp_path / "data", counts=(3, 3, 3, 3), payloads=payloads)
    result = run_cli(capsys, "info", tmp_path / "data")
    assert result.code == 0, result.err
    lines = result.out.splitlines()
    start = lines.index("  schemas differ between shards:")
    differences = lines[start + 1 :]
    assert "    extra: float_list in 1 shard (part-2.tfrecord); not seen in 3" in differences
    assert "    label: int64_list in 3 shards; float_list in 1 (part-3.tfrecord)" in differences
    assert not any(line.startswith("    name:") for line in differences)
    (label,) = [line for line in lines if line.split()[:1] == ["label"]]
    assert label.split()[1] == "float_list|int64_list"


def test_json_of_a_directory_is_one_summary_with_the_shard_list(capsys, tmp_path):
    paths = _shards(tmp_path / "data")
    records, file_size, payload_bytes = _totals(paths)
    result = run_cli(capsys, "info", "--json", tmp_path / "data")
    assert result.code == 0, result.err
    (summary,) = [json.loads(line) for line in result.out.splitlines()]
    assert summary["source"] == str(tmp_path / "data")
    assert (summary["num_shards"], summary["records"]) == (5, records)
    assert (summary["file_size"], summary["payload_bytes"]) == (file_size, payload_bytes)
    assert (summary["formats"], summary["compressions"]) == ({"tfrecord": 5}, {"none": 5})
    assert (summary["payload"], summary["differences"]) == ("example", [])
    assert {row["name"] for row in summary["features"]} == {"label", "name"}
    assert [(s["path"], s["records"]) for s in summary["shards"]] == [
        (str(path), n) for path, n in zip(paths, (3, 4, 5, 6, 7), strict=True)
    ]
    assert all("features" not in shard for shard in summary["shards"])


def test_json_lists_the_schema_differences(capsys, tmp_path):
    payloads = [_examples(0, 2), _examples(0, 2, extra=b"e")]
    paths = _shards(tmp_path / "data", counts=(2, 2), payloads=payloads)
    summary = json.loads(run_cli(capsys, "info", "--json", tmp_path / "data").out)
    assert summary["differences"] == [
        {
            "table": "features",
            "name": "extra",
            "kinds": {"bytes_list": [str(paths[1])]},
            "missing": [str(paths[0])],
        }
    ]


def test_two_hundred_shards_are_one_summary(capsys, tmp_path):
    folder = tmp_path / "many"
    folder.mkdir()
    for i in range(200):
        with rk.open(folder / f"part-{i:03d}.tfrecord", "w") as writer:
            writer.write_many(_examples(i, 2))
    result = run_cli(capsys, "info", "-q", folder)
    assert result.code == 0, result.err
    assert len(result.out.splitlines()) < 20
    assert _field(result.out, "shards") == "200 files"
    assert _field(result.out, "records").startswith("400 ")
    listed = run_cli(capsys, "info", "-q", "--shards", folder)
    assert sum("part-" in line for line in listed.out.splitlines()) == 200


@pytest.mark.parametrize("kind", ["glob", "manifest", "tfds"])
def test_every_source_of_several_files_is_summarised(capsys, tmp_path, kind):
    if kind == "glob":
        _shards(tmp_path / "data", counts=(2, 3))
        source = str(tmp_path / "data" / "part-*.tfrecord")
    elif kind == "manifest":
        pattern = os.fspath(tmp_path / "data" / "part-{shard:02d}.tfrecord")
        with rk.ShardWriter(pattern, max_records=2) as writer:
            writer.write_many(_examples(0, 5))
        source = str(tmp_path / "data")
    else:
        files = {f"toy-train.tfrecord-0000{i}-of-00002": _examples(i, 2 + i) for i in range(2)}
        source = str(write_tfds_directory(tmp_path / "toy", files, {"train": [2, 3]}))
    result = run_cli(capsys, "info", source)
    assert result.code == 0, result.err
    assert result.out.splitlines()[0] == source
    assert _field(result.out, "records").startswith("5 ")
    assert result.out.splitlines().count("  features:") == 1
    if kind != "glob":
        assert "checked against the manifest" in _field(result.out, "records")


def test_a_damaged_shard_is_listed_without_shards_and_left_out_of_the_totals(capsys, tmp_path):
    paths = _shards(tmp_path / "data", counts=(4, 4, 4))
    data = bytearray(paths[1].read_bytes())
    data[12] ^= 0x01  # record 0's first payload byte: its data checksum no longer matches
    paths[1].write_bytes(bytes(data))
    result = run_cli(capsys, "info", tmp_path / "data")
    assert result.code == 1
    lines = result.out.splitlines()
    assert _field(result.out, "records").startswith("8 ")
    assert _field(result.out, "shards") == "3 files, 1 damaged (left out of the totals)"
    (damaged,) = [line for line in lines if "part-" in line]
    assert damaged.startswith(f"    {paths[1]}: CORRUPT: record 0 at byte 12: payload checksum")
    assert damaged.endswith("[ChecksumError]")
    as_json = json.loads(run_cli(capsys, "info", "--json", tmp_path / "data").out)
    assert [shard.get("error") for shard in as_json["shards"]] == [None, "ChecksumError", None]
    assert as_json["records"] == 8


def test_a_shard_warning_is_listed_without_shards(capsys, tmp_path):
    payloads = [_examples(0, 3), [*_examples(0, 2), b"\x0a\x05ab"]]
    paths = _shards(tmp_path / "data", counts=(3, 3), payloads=payloads)
    result = run_cli(capsys, "info", tmp_path / "data")
    assert result.code == 0, result.err
    (line,) = [line for line in result.out.splitlines() if "part-" in line]
    assert line.split()[:5] == [
        str(paths[1]),
        "3",
        "records",
        str(os.path.getsize(paths[1])),
        "bytes",
    ]
    assert line.endswith("1 of the sampled records did not decode")


def test_a_single_file_and_a_directory_of_one_keep_the_file_block(capsys, tmp_path):
    (path,) = _shards(tmp_path / "data", counts=(3,))
    for source in (path, tmp_path / "data"):
        result = run_cli(capsys, "info", source)
        assert result.code == 0, result.err
        assert result.out.splitlines()[0] == str(path)
        assert "  records      3" in result.out.splitlines()
        assert json.loads(run_cli(capsys, "info", "--json", source).out)["path"] == str(path)
