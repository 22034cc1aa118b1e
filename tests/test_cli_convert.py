"""``recordkit convert``: byte-for-byte copies between formats, sharding, payload conversion, safety."""

from __future__ import annotations

import hashlib
import itertools

import numpy as np
import pytest
from _cli import run_cli

import recordkit as rk
import recordkit.datasets
from recordkit._proto.oneflow import record_pb2
from recordkit._proto.tensorflow import example_pb2
from recordkit.cli.convert import shard_sizes


def _read(path, **options):
    with rk.open(path, **options) as reader:
        return list(reader)


def _sha256(records):
    return [hashlib.sha256(record).hexdigest() for record in records]


def _write(path, records, **options):
    with rk.open(path, "w", **options) as writer:
        writer.write_many(records)
    return path


def test_tfrecord_ffrecord_ofrecord_tfrecord_is_byte_for_byte(
    capsys, tmp_path, golden_dir, tfrecord_manifest
):
    source = golden_dir / "tfrecord" / "examples.tfrecord"
    chain = [source, tmp_path / "a.ffr", tmp_path / "b.ofrecord", tmp_path / "c.tfrecord"]
    for src, dst in itertools.pairwise(chain):
        result = run_cli(capsys, "convert", src, dst, "--keep-payload")
        assert result.code == 0, result.err
        assert result.out == f"wrote 60 records to {dst}\n"
        assert _sha256(_read(dst)) == tfrecord_manifest["files"]["examples.tfrecord"]["sha256"]
    # TFRecord framing is deterministic, so the round trip rebuilds TensorFlow's file exactly.
    assert chain[-1].read_bytes() == source.read_bytes()


def test_from_gzip_to_zlib_and_back(capsys, tmp_path, golden_dir, tfrecord_manifest):
    expected = tfrecord_manifest["files"]["examples.tfrecord"]["sha256"]
    out = tmp_path / "out.tfrecord"
    result = run_cli(
        capsys, "convert", golden_dir / "tfrecord" / "examples.tfrecord.gz", out,
        "--compression", "zlib",
    )  # fmt: skip
    assert result.code == 0
    with rk.open(out) as reader:
        assert reader.compression == "zlib"
        assert _sha256(reader) == expected
    assert run_cli(capsys, "convert", out, tmp_path / "plain.tfrecord").code == 0
    assert (tmp_path / "plain.tfrecord").read_bytes() == (
        golden_dir / "tfrecord" / "examples.tfrecord"
    ).read_bytes()


def test_shard_sizes_are_balanced_and_contiguous():
    assert shard_sizes(10, 4) == [3, 3, 2, 2]
    assert shard_sizes(10, 3) == [4, 3, 3]
    assert shard_sizes(2, 3) == [1, 1, 0]
    for total in range(30):
        for shards in range(1, 7):
            sizes = shard_sizes(total, shards)
            assert sum(sizes) == total
            assert max(sizes) - min(sizes) <= 1
            assert sizes == sorted(sizes, reverse=True)


@pytest.mark.parametrize(
    ("fmt", "names"),
    [
        ("ofrecord", ["part-0", "part-1", "part-2", "part-3"]),
        ("ffrecord", [f"PART_{i:05d}.ffr" for i in range(4)]),
        ("tfrecord", [f"part-{i:05d}-of-00004.tfrecord" for i in range(4)]),
    ],
)
def test_sharding_default_names_and_order(
    capsys, tmp_path, golden_dir, tfrecord_manifest, fmt, names
):
    out = tmp_path / "shards"
    result = run_cli(
        capsys, "convert", golden_dir / "tfrecord" / "examples.tfrecord", out,
        "--to", fmt, "--shards", "4", "--keep-payload",
    )  # fmt: skip
    assert result.code == 0, result.err
    assert result.out == f"wrote 60 records to 4 {fmt} files in {out}\n"
    indexes = [] if fmt == "ffrecord" else [f".{name}.idx" for name in names]
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [*names, *indexes, "_recordkit_manifest.json"]
    )
    assert [len(_read(out / name, format=fmt)) for name in names] == [15, 15, 15, 15]
    records = [record for name in names for record in _read(out / name, format=fmt)]
    assert _sha256(records) == tfrecord_manifest["files"]["examples.tfrecord"]["sha256"]
    # The manifest lists the shards in order, and the directory reads as the input did.
    manifest = rk.datasets.load_manifest(out)
    assert [shard.path for shard in manifest.shards] == names
    assert _sha256(list(rk.open(out))) == _sha256(records)
    assert all(check.ok for check in rk.datasets.verify_dataset(out))


def test_shards_of_a_directory_are_read_in_natural_order(capsys, tmp_path):
    src = tmp_path / "oneflow"
    src.mkdir()
    for i in range(12):
        _write(src / f"part-{i}", [rk.encode_ofrecord({"i": [i]})], format="ofrecord")
    out = tmp_path / "all.tfrecord"
    assert run_cli(capsys, "convert", src, out).code == 0
    assert [rk.decode_example(r)["i"][0] for r in _read(out)] == list(range(12))


def test_custom_pattern_and_gzip_suffix(capsys, tmp_path, golden_dir):
    src = golden_dir / "tfrecord" / "raw.tfrecord"
    out = tmp_path / "custom"
    result = run_cli(capsys, "convert", src, out, "--pattern", "shard-{shard:02d}-of-{num_shards}.ffr",
                     "--shards", "2")  # fmt: skip
    assert result.code == 0, result.err
    # Without --to, a directory gets the first source's format (TFRecord), whatever the names say.
    assert sorted(p.name for p in out.iterdir()) == [
        ".shard-00-of-2.ffr.idx",
        ".shard-01-of-2.ffr.idx",
        "_recordkit_manifest.json",
        "shard-00-of-2.ffr",
        "shard-01-of-2.ffr",
    ]
    gz = tmp_path / "gz"
    result = run_cli(capsys, "convert", src, gz, "--shards", "2", "--compression", "gzip")
    assert result.code == 0, result.err
    names = sorted(p.name for p in gz.iterdir() if p.name != "_recordkit_manifest.json")
    assert names == ["part-00000-of-00002.tfrecord.gz", "part-00001-of-00002.tfrecord.gz"]
    assert rk.datasets.load_manifest(gz).compression == "gzip"
    assert _read(gz / names[0]) + _read(gz / names[1]) == _read(src)


@pytest.mark.parametrize("pattern", ["part-{index}", "part-{shard:d", "same-name", "p-{num}"])
def test_bad_patterns_are_usage_errors(capsys, tmp_path, golden_dir, pattern):
    out = tmp_path / "out"
    result = run_cli(capsys, "convert", golden_dir / "tfrecord" / "raw.tfrecord", out,
                     "--pattern", pattern, "--shards", "2")  # fmt: skip
    assert result.code == 2
    assert "--pattern" in result.err
    assert not out.exists()


@pytest.mark.parametrize(
    ("pattern", "hint"),
    [
        ("part-{index:05d}", "{index} is now {shard}"),
        ("p{shard}-of-{count}", "{count} is now {num_shards}"),
    ],
)
def test_a_pattern_with_the_old_fields_names_the_new_ones(
    capsys, tmp_path, golden_dir, pattern, hint
):
    out = tmp_path / "out"
    result = run_cli(capsys, "convert", golden_dir / "tfrecord" / "raw.tfrecord", out,
                     "--pattern", pattern, "--shards", "2")  # fmt: skip
    assert result.code == 2
    assert hint in result.err
    assert "use the fields {shard} (from 0) and {num_shards}" in result.err
    assert not out.exists()


def test_a_pattern_has_the_fields_of_shardwriter(capsys, tmp_path, golden_dir):
    """``--pattern`` and ``ShardWriter``'s pattern name the same shards."""
    src = golden_dir / "tfrecord" / "raw.tfrecord"
    pattern = "s-{shard:03d}-of-{num_shards:03d}.tfrecord"
    result = run_cli(
        capsys, "convert", src, tmp_path / "cli", "--pattern", pattern, "--shards", "3"
    )
    assert result.code == 0, result.err
    records = _read(src)
    size = -(-len(records) // 3)
    with rk.ShardWriter(tmp_path / "writer" / pattern, max_records=size) as writer:
        writer.write_many(records)
    names = sorted(
        p.name for p in (tmp_path / "cli").iterdir() if not p.name.startswith((".", "_"))
    )
    assert names == [f"s-{i:03d}-of-003.tfrecord" for i in range(3)]
    assert names == sorted(
        p.name for p in (tmp_path / "writer").iterdir() if not p.name.startswith((".", "_"))
    )


def test_existing_output_needs_force(capsys, tmp_path, golden_dir):
    src = golden_dir / "ffrecord" / "one.ffr"
    out = tmp_path / "out.tfrecord"
    out.write_bytes(b"precious")
    result = run_cli(capsys, "convert", src, out)
    assert result.code == 2
    assert "--force" in result.err
    assert out.read_bytes() == b"precious"
    assert run_cli(capsys, "convert", "--force", src, out).code == 0
    assert _read(out) == _read(src)


def test_output_format_needed(capsys, tmp_path, golden_dir):
    result = run_cli(capsys, "convert", golden_dir / "ffrecord" / "one.ffr", tmp_path / "out.bin")
    assert result.code == 2
    assert "--to" in result.err


def test_corrupt_input_leaves_no_output(capsys, tmp_path, golden_dir):
    out = tmp_path / "out.ffr"
    result = run_cli(capsys, "convert", golden_dir / "tfrecord" / "corrupt_data_crc.tfrecord", out)
    assert result.code == 1
    assert "record 0 at byte 12" in result.err
    assert list(tmp_path.iterdir()) == []


def test_failure_in_a_later_shard_removes_the_earlier_ones(capsys, tmp_path):
    src = _write(
        tmp_path / "src.tfrecord",
        [rk.encode_example({"x": [i]}) for i in range(5)] + [b""],  # b"": an Example, no features
    )
    out = tmp_path / "out"
    result = run_cli(capsys, "convert", src, out, "--to", "ofrecord", "--shards", "3",
                     "--payload", "ofrecord")  # fmt: skip
    assert result.code == 2
    assert "record 5" in result.err
    assert list(out.iterdir()) == []


# -- payload conversion ----------------------------------------------------------------------------


def _assert_same_features(left, right):
    assert list(left) == list(right)
    for name, value in left.items():
        if isinstance(value, list):
            assert right[name] == value
        else:
            np.testing.assert_array_equal(right[name], value)


def test_example_to_ofrecord_and_back_keeps_every_value(capsys, tmp_path, golden_dir):
    src = golden_dir / "tfrecord" / "examples.tfrecord"
    of = tmp_path / "x.ofrecord"
    back = tmp_path / "y.tfrecord"
    assert run_cli(capsys, "convert", src, of, "--payload", "ofrecord").code == 0
    assert run_cli(capsys, "convert", of, back, "--payload", "example").code == 0
    for original, converted, returned in zip(_read(src), _read(of), _read(back), strict=True):
        expected = rk.decode_example(original)
        _assert_same_features(expected, rk.decode_ofrecord(converted))
        _assert_same_features(expected, rk.decode_example(returned))


def test_ofrecord_numeric_rules(capsys, tmp_path):
    exact = np.array([0.5, -2.0, np.inf], np.float64)
    inexact = np.array([0.1], np.float64)
    src = _write(
        tmp_path / "src.ofrecord",
        [
            rk.encode_ofrecord({"d": exact, "i": np.array([7, -(2**31)], np.int32), "b": [b"z"]}),
            rk.encode_ofrecord({"d": inexact, "i": np.array([1], np.int32), "b": [b""]}),
        ],
    )
    out = tmp_path / "out.tfrecord"
    result = run_cli(capsys, "convert", src, out, "--payload", "example")
    assert result.code == 2
    assert "record 1: feature 'd' is a double_list" in result.err
    assert "--lossy" in result.err
    assert not out.exists()
    assert run_cli(capsys, "convert", src, out, "--payload", "example", "--lossy").code == 0
    first, second = (rk.decode_example(r) for r in _read(out))
    np.testing.assert_array_equal(first["d"], exact.astype(np.float32))
    assert first["i"].dtype == np.int64
    assert first["i"].tolist() == [7, -(2**31)]
    assert first["b"] == [b"z"]
    assert second["d"].tolist() == [np.float32(0.1)]


def test_sequence_examples_have_no_payload_conversion(capsys, tmp_path, golden_dir):
    result = run_cli(capsys, "convert", golden_dir / "tfrecord" / "sequence_examples.tfrecord",
                     tmp_path / "x.ofrecord", "--payload", "ofrecord")  # fmt: skip
    assert result.code == 2
    assert "cannot convert sequence_example payloads to ofrecord" in result.err
    assert list(tmp_path.iterdir()) == []


def test_oneflow_golden_to_example(capsys, tmp_path, ofrecord_golden, ofrecord_manifest):
    entry = next(e for e in ofrecord_manifest["files"] if "metaft-sst2" in e["path"])
    src = ofrecord_golden / entry["path"]
    out = tmp_path / "sst2.tfrecord"
    assert run_cli(capsys, "convert", src, out, "--payload", "example").code == 0
    for original, converted in zip(_read(src), _read(out), strict=True):
        expected = {
            name: value.astype(np.int64) if value.dtype == np.int32 else value
            for name, value in rk.decode_ofrecord(original).items()
        }
        _assert_same_features(expected, rk.decode_example(converted))


# -- the output format's own payloads --------------------------------------------------------------
# TensorFlow reads TFRecord payloads as tf.train.Example and OneFlow reads OFRecord payloads as
# oneflow.OFRecord, so converting between the two converts the payloads by default. protobuf's generated
# classes are the oracle: the output must parse as the target message with the same typed lists.


def _examples():
    examples = []
    for i in range(3):
        example = example_pb2.Example()
        feature = example.features.feature
        feature["label"].int64_list.value.extend([i, -(2**40)])
        feature["emb"].float_list.value.extend([0.5 * i, -1.25, float("inf"), 3.0e-39])
        feature["name"].bytes_list.value.extend([b"cat-%d" % i, b"\x00\xff"])
        feature["empty_floats"].float_list.SetInParent()
        examples.append(example)
    return examples


def _assert_ofrecord_holds(ofrecord, example):
    assert set(ofrecord.feature) == set(example.features.feature)
    for name, feature in example.features.feature.items():
        kind = feature.WhichOneof("kind")
        assert ofrecord.feature[name].WhichOneof("kind") == kind, name
        assert list(getattr(ofrecord.feature[name], kind).value) == list(
            getattr(feature, kind).value
        ), name


def test_into_ofrecord_example_payloads_become_ofrecords(capsys, tmp_path):
    examples = _examples()
    src = _write(tmp_path / "data.tfrecord", [e.SerializeToString() for e in examples])
    out = tmp_path / "out.ofrecord"
    result = run_cli(capsys, "convert", src, out)
    assert result.code == 0, result.err
    records = _read(out)
    for record, example in zip(records, examples, strict=True):
        _assert_ofrecord_holds(record_pb2.OFRecord.FromString(record), example)
    info = run_cli(capsys, "info", out)
    assert "payload      ofrecord" in info.out
    parsed = rk.parse_ofrecords(
        records, {"label": rk.VarLen(np.int64), "emb": rk.FixedLen((4,), np.float32)}
    )
    assert parsed["label"][2].tolist() == [2, -(2**40)]
    np.testing.assert_array_equal(
        parsed["emb"], np.array([e.features.feature["emb"].float_list.value for e in examples])
    )
    # And back: a TFRecord output gets Examples, equal to the originals as protobuf messages.
    back = tmp_path / "back.tfrecord"
    assert run_cli(capsys, "convert", out, back).code == 0
    assert [example_pb2.Example.FromString(r) for r in _read(back)] == examples


def test_ofrecord_shards_and_ffrecord_in_between(capsys, tmp_path):
    examples = _examples()
    src = _write(tmp_path / "data.tfrecord", [e.SerializeToString() for e in examples])
    # FFRecord has no payload kind of its own: its records are copied as they are.
    ffr = tmp_path / "data.ffr"
    assert run_cli(capsys, "convert", src, ffr).code == 0
    assert _read(ffr) == _read(src)
    shards = tmp_path / "shards"
    assert run_cli(capsys, "convert", ffr, shards, "--to", "ofrecord", "--shards", "2").code == 0
    records = _read(shards / "part-0", format="ofrecord") + _read(
        shards / "part-1", format="ofrecord"
    )
    for record, example in zip(records, examples, strict=True):
        _assert_ofrecord_holds(record_pb2.OFRecord.FromString(record), example)


def test_keep_payload_copies_examples_into_ofrecord(capsys, tmp_path):
    src = _write(tmp_path / "data.tfrecord", [e.SerializeToString() for e in _examples()])
    out = tmp_path / "out.ofrecord"
    assert run_cli(capsys, "convert", src, out, "--keep-payload").code == 0
    assert _read(out) == _read(src)
    assert "payload      example" in run_cli(capsys, "info", out).out
    result = run_cli(capsys, "convert", src, tmp_path / "x.ofrecord", "--keep-payload",
                     "--payload", "ofrecord")  # fmt: skip
    assert result.code == 2
    assert "not allowed with argument" in result.err


def test_ofrecord_to_tfrecord_is_lossless_or_refused(capsys, tmp_path):
    exact, inexact = record_pb2.OFRecord(), record_pb2.OFRecord()
    exact.feature["ids"].int32_list.value.extend([7, -(2**31), 2**31 - 1])
    exact.feature["weight"].double_list.value.extend([0.5, -2.0, float("inf")])
    exact.feature["name"].bytes_list.value.append(b"x")
    inexact.MergeFrom(exact)
    inexact.feature["weight"].double_list.value[:] = [0.1]
    src = _write(tmp_path / "src.ofrecord", [exact.SerializeToString()])
    out = tmp_path / "out.tfrecord"
    assert run_cli(capsys, "convert", src, out).code == 0
    (converted,) = (example_pb2.Example.FromString(r) for r in _read(out))
    feature = converted.features.feature
    assert list(feature["ids"].int64_list.value) == [7, -(2**31), 2**31 - 1]  # widened, exact
    assert list(feature["weight"].float_list.value) == [0.5, -2.0, float("inf")]  # exact in float32
    assert list(feature["name"].bytes_list.value) == [b"x"]
    # A double that float32 cannot hold is refused, and nothing is written; --lossy rounds it.
    src = _write(
        tmp_path / "src2.ofrecord", [exact.SerializeToString(), inexact.SerializeToString()]
    )
    result = run_cli(capsys, "convert", src, tmp_path / "refused.tfrecord")
    assert result.code == 2
    assert "record 1: feature 'weight' is a double_list" in result.err
    assert not (tmp_path / "refused.tfrecord").exists()
    rounded = tmp_path / "rounded.tfrecord"
    assert run_cli(capsys, "convert", src, rounded, "--lossy").code == 0
    last = example_pb2.Example.FromString(_read(rounded)[1])
    assert list(last.features.feature["weight"].float_list.value) == [np.float32(0.1)]
    kept = tmp_path / "kept.tfrecord"
    assert run_cli(capsys, "convert", src, kept, "--keep-payload").code == 0
    assert _read(kept) == _read(src)


@pytest.mark.parametrize("kind", ["sequence_example", "raw"])
def test_payloads_oneflow_cannot_read_need_keep_payload(capsys, tmp_path, golden_dir, kind):
    if kind == "sequence_example":
        src = golden_dir / "tfrecord" / "sequence_examples.tfrecord"
    else:  # a zero byte is no protobuf field tag
        src = _write(
            tmp_path.parent / f"{tmp_path.name}.tfrecord", [bytes([0, i]) for i in range(5)]
        )
    result = run_cli(capsys, "convert", src, tmp_path / "x.ofrecord")
    assert result.code == 2
    assert "OneFlow cannot read them" in result.err
    assert "--keep-payload" in result.err
    assert list(tmp_path.iterdir()) == []
    kept = tmp_path / "kept.ofrecord"
    assert run_cli(capsys, "convert", src, kept, "--keep-payload").code == 0
    assert _read(kept) == _read(src)


def _with_unset_kind() -> bytes:
    example = example_pb2.Example()
    example.features.feature[
        "unset"
    ].SetInParent()  # a Feature with no list: TF parses it as missing
    example.features.feature["empty"].float_list.SetInParent()
    example.features.feature["label"].int64_list.value.append(7)
    return example.SerializeToString()


def test_a_feature_with_no_kind_stays_unset_through_ofrecord(capsys, tmp_path):
    _write(tmp_path / "a.tfrecord", [_with_unset_kind()])
    assert run_cli(capsys, "convert", tmp_path / "a.tfrecord", tmp_path / "b.ofrecord").code == 0
    ofrecord = record_pb2.OFRecord.FromString(_read(tmp_path / "b.ofrecord")[0])
    assert ofrecord.feature["unset"].WhichOneof("kind") is None
    assert ofrecord.feature["empty"].WhichOneof("kind") == "float_list"
    assert ofrecord.feature["label"].int64_list.value == [7]
    assert run_cli(capsys, "convert", tmp_path / "b.ofrecord", tmp_path / "c.tfrecord").code == 0
    (record,) = _read(tmp_path / "c.tfrecord")
    example = example_pb2.Example.FromString(record)
    assert not example.features.feature["unset"].HasField("float_list")
    assert example.features.feature["unset"].WhichOneof("kind") is None
    assert example.features.feature["empty"].WhichOneof("kind") == "float_list"
    assert example.features.feature["label"].int64_list.value == [7]


def test_tensorflow_parses_an_unset_kind_converted_through_ofrecord_as_before(capsys, tmp_path):
    tf = pytest.importorskip("tensorflow")
    spec = {
        "unset": tf.io.FixedLenFeature([], tf.int64, default_value=-1),
        "label": tf.io.FixedLenFeature([], tf.int64),
    }
    original = _with_unset_kind()
    _write(tmp_path / "a.tfrecord", [original])
    run_cli(capsys, "convert", tmp_path / "a.tfrecord", tmp_path / "b.ofrecord")
    run_cli(capsys, "convert", tmp_path / "b.ofrecord", tmp_path / "c.tfrecord")
    (converted,) = _read(tmp_path / "c.tfrecord")
    expected = {k: v.numpy() for k, v in tf.io.parse_single_example(original, spec).items()}
    found = {k: v.numpy() for k, v in tf.io.parse_single_example(converted, spec).items()}
    assert found == expected == {"unset": -1, "label": 7}
