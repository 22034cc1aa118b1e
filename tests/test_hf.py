"""recordkit.hf: HuggingFace ``datasets`` over record files, and HuggingFace datasets written as records.

The real ``datasets`` library reads what ``rk.open`` reads; its cache goes to a temporary directory.
"""

from __future__ import annotations

import io
import os

import numpy as np
import pytest

import recordkit as rk


@pytest.fixture(autouse=True)
def hf(tmp_path, monkeypatch):
    """The ``datasets`` module, its cache in ``tmp_path`` (never the user's home)."""
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "hf-cache"))
    datasets = pytest.importorskip("datasets")
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "hf-cache")
    datasets.disable_progress_bars()
    return datasets


def png(color: tuple[int, int, int], size=(4, 3)) -> bytes:
    image_module = pytest.importorskip("PIL.Image")
    buffer = io.BytesIO()
    image_module.new("RGB", size, color).save(buffer, "PNG")
    return buffer.getvalue()


def example(i: int, image: bytes | None = None) -> bytes:
    features = {
        "label": i,
        "emb": np.arange(3, dtype=np.float32) + i,
        "tags": [f"t{j}".encode() for j in range(i % 3)],
        "name": f"row {i}".encode(),
    }
    if image is not None:
        features["img"] = image
    return rk.encode_example(features)


SPEC = {
    "label": rk.FixedLen((), "int64"),
    "emb": rk.FixedLen((3,), "float32"),
    "tags": rk.VarLen("bytes"),
    "name": rk.FixedLen((), "str"),
}


@pytest.fixture
def shards(tmp_path):
    """Three TFRecord shards of Examples with a PNG each, as a ShardWriter dataset."""
    images = [png((i * 20, 0, 255 - i * 20)) for i in range(10)]
    with rk.ShardWriter(tmp_path / "ds" / "part-{shard:02d}.tfrecord", max_records=4) as writer:
        writer.write_many(example(i, images[i]) for i in range(10))
    return tmp_path / "ds"


def test_dataset_with_a_spec_holds_rk_open_records(hf, shards, tmp_path):
    ds = rk.hf.to_dataset(shards, {**SPEC, "img": rk.Image()}, cache_dir=tmp_path / "c")
    assert isinstance(ds, hf.Dataset)
    assert ds.features == hf.Features(
        {
            "label": hf.Value("int64"),
            "emb": hf.List(hf.Value("float32"), length=3),
            "tags": hf.List(hf.Value("binary")),
            "name": hf.Value("string"),
            "img": hf.Image(),
        }
    )
    with rk.open(shards) as reader:
        expected = [rk.decode_example(record) for record in reader]
    assert len(ds) == len(expected) == 10
    raw = ds.cast_column("img", hf.Image(decode=False))
    for row, want in zip(raw, expected, strict=True):
        assert row["label"] == want["label"][0]
        assert row["emb"] == want["emb"].tolist()
        assert row["tags"] == list(want["tags"])
        assert row["name"] == want["name"][0].decode()
        assert row["img"]["bytes"] == want["img"][0]
    picture = ds[3]["img"]  # decoded by datasets (Pillow)
    assert picture.size == (4, 3)
    assert picture.convert("RGB").getpixel((0, 0)) == (60, 0, 195)
    assert list(os.scandir(tmp_path / "c"))  # the Arrow file went to cache_dir


def test_streaming_gives_an_iterable_dataset_in_rk_open_order(hf, tmp_path):
    paths = []
    for part in range(2):
        path = tmp_path / f"x-{part}.tfrecord"
        with rk.open(path, "w") as writer:
            writer.write_many(example(10 * part + i) for i in range(3))
        paths.append(path)
    ds = rk.hf.to_dataset(str(tmp_path / "x-*.tfrecord"), SPEC, streaming=True)
    assert isinstance(ds, hf.IterableDataset)
    assert ds.features == rk.hf.features_of(SPEC)
    labels = [row["label"] for row in ds]
    with rk.open(str(tmp_path / "x-*.tfrecord")) as reader:
        assert labels == [rk.decode_example(record)["label"][0] for record in reader]
    assert labels == [0, 1, 2, 10, 11, 12]


def test_features_from_the_first_records_without_a_spec(hf, tmp_path):
    path = tmp_path / "plain.tfrecord"
    image = png((1, 2, 3))
    with rk.open(path, "w") as writer:
        writer.write_many(example(i, image) for i in range(4))
    ds = rk.hf.to_dataset(path, cache_dir=tmp_path / "c")
    assert ds.features == hf.Features(
        {
            "emb": hf.List(hf.Value("float32"), length=3),
            "img": hf.Image(),
            "label": hf.Value("int64"),
            "name": hf.Value("binary"),
            "tags": hf.List(hf.Value("binary")),
        }
    )
    assert ds[2]["tags"] == [b"t0", b"t1"]
    assert ds[1]["emb"] == [1.0, 2.0, 3.0]


def test_features_from_the_manifest_schema(hf, tmp_path):
    schema = {
        "payload": "example",
        "features": [
            {"name": "label", "kind": "int64_list", "present": 3, "min_len": 1, "max_len": 1},
            {"name": "emb", "kind": "float_list", "present": 3, "min_len": 3, "max_len": 3},
        ],
    }
    with rk.ShardWriter(tmp_path / "ds" / "p-{shard}.tfrecord", schema=schema) as writer:
        writer.write_many(example(i) for i in range(3))
    ds = rk.hf.to_dataset(tmp_path / "ds", cache_dir=tmp_path / "c")
    assert ds.features == hf.Features(
        {"emb": hf.List(hf.Value("float32"), length=3), "label": hf.Value("int64")}
    )
    assert ds["label"] == [0, 1, 2]


def test_round_trip_hf_to_records_to_hf(hf, tmp_path):
    images = [png((i, 2 * i, 3 * i)) for i in range(7)]
    features = hf.Features(
        {
            "text": hf.Value("string"),
            "label": hf.ClassLabel(names=["cat", "dog"]),
            "score": hf.Value("float32"),
            "ids": hf.List(hf.Value("int64")),
            "img": hf.Image(),
            "maybe": hf.Value("int64"),
        }
    )
    source = hf.Dataset.from_dict(
        {
            "text": [f"é{i}" for i in range(7)],
            "label": [i % 2 for i in range(7)],
            "score": [i / 4 for i in range(7)],
            "ids": [list(range(i)) for i in range(7)],
            "img": [{"bytes": data, "path": None} for data in images],
            "maybe": [None if i == 3 else i for i in range(7)],
        },
        features=features,
    )
    rk.hf.write(source, tmp_path / "out", max_records=3, split="train")
    manifest = rk.datasets.load_manifest(tmp_path / "out" / "_recordkit_manifest.json")
    assert [shard.records for shard in manifest.shards] == [3, 3, 1]
    with rk.open(tmp_path / "out", split="train") as reader:
        first = rk.decode_example(reader[0])
        assert first["text"][0] == "é0".encode()
        assert first["img"][0] == images[0]
        assert len(reader) == 7
    back = rk.hf.to_dataset(tmp_path / "out", split="train", cache_dir=tmp_path / "c")
    assert back.features == features
    raw = dict(zip(("source", "back"), (source, back), strict=True))
    rows = {k: v.cast_column("img", hf.Image(decode=False)).to_list() for k, v in raw.items()}
    for row in rows["source"] + rows["back"]:
        row["img"] = row["img"]["bytes"]
    assert rows["back"] == rows["source"]


def test_write_streaming_dataset_as_ffrecord(hf, tmp_path):
    source = hf.Dataset.from_dict({"x": [1, 2, 3], "y": [b"a", b"b", b"c"]}).to_iterable_dataset()
    rk.hf.write(source, tmp_path / "ffr", format="ffrecord")
    assert "part-00000.ffr" in os.listdir(tmp_path / "ffr")
    with rk.open(tmp_path / "ffr") as reader:
        assert [rk.decode_example(r)["y"][0] for r in reader] == [b"a", b"b", b"c"]
    assert rk.hf.to_dataset(tmp_path / "ffr", cache_dir=tmp_path / "c")["x"] == [1, 2, 3]


def test_write_and_read_back_ofrecord(hf, tmp_path):
    """OFRecord shards hold OFRecords (the format's payload), read back from a directory or one file."""
    source = hf.Dataset.from_dict({"x": [1, 2, 3], "y": [b"a", b"b", b"c"]})
    rk.hf.write(source, tmp_path / "of", format="ofrecord")
    assert "part-00000.ofrecord" in os.listdir(tmp_path / "of")
    with rk.open(tmp_path / "of" / "part-00000.ofrecord") as reader:
        assert [rk.decode_ofrecord(r)["y"] for r in reader] == [[b"a"], [b"b"], [b"c"]]
    assert rk.hf.to_dataset(tmp_path / "of", cache_dir=tmp_path / "c")["x"] == [1, 2, 3]
    single = rk.hf.to_dataset(tmp_path / "of" / "part-00000.ofrecord", cache_dir=tmp_path / "d")
    assert single["y"] == [b"a", b"b", b"c"]


def test_unsupported_features_are_refused_before_writing(hf, tmp_path):
    source = hf.Dataset.from_dict({"nested": [[[1, 2]], [[3]]]})
    with pytest.raises(rk.errors.UnsupportedOperationError, match="nested"):
        rk.hf.write(source, tmp_path / "out")
    assert not (tmp_path / "out").exists()
    with pytest.raises(rk.errors.UnsupportedOperationError, match="FixedLenSequence"):
        rk.hf.features_of({"s": rk.FixedLenSequence((), "int64")})


def test_import_lines_are_one_module():
    import recordkit.hf
    import recordkit.integrations.hf

    assert recordkit.hf is recordkit.integrations.hf is rk.hf


def test_errors_while_reading_are_recordkit_errors(hf, tmp_path):
    path = tmp_path / "x.tfrecord"
    with rk.open(path, "w") as writer:
        writer.write_many(example(i) for i in range(4))
    with pytest.raises(rk.DecodeError, match="record 0: feature 'label'"):
        rk.hf.to_dataset(path, {"label": rk.FixedLen((), "float32")}, cache_dir=tmp_path / "c1")
    data = bytearray(path.read_bytes())
    data[-6] ^= 0xFF  # the last record's payload
    path.write_bytes(bytes(data))
    with pytest.raises(rk.ChecksumError) as caught:
        rk.hf.to_dataset(path, SPEC, cache_dir=tmp_path / "c2")
    assert caught.value.index == 3
    assert caught.value.path == str(path)


# -- raw payloads: records that are not Examples or OFRecords ---------------------------------------

RAW_RECORDS = [b"\xff\x00" + bytes([i]) * i for i in range(6)] + [
    b"",
    b"plain text",
    b"\x08\x96\x01",
]


def write_records(path, records, format=None) -> None:
    with rk.open(path, "w", format=format) as writer:
        writer.write_many(records)


@pytest.mark.parametrize("streaming", [False, True], ids=["dataset", "streaming"])
@pytest.mark.parametrize("name", ["raw.tfrecord", "raw.ffr"])
def test_raw_payloads_are_one_bytes_column_in_record_order(hf, tmp_path, name, streaming):
    path = tmp_path / name
    write_records(path, RAW_RECORDS)
    ds = rk.hf.to_dataset(path, streaming=streaming, cache_dir=tmp_path / "c")
    assert isinstance(ds, hf.IterableDataset if streaming else hf.Dataset)
    assert ds.features == hf.Features({"record": hf.Value("binary")})
    with rk.open(path) as reader:
        assert [row["record"] for row in ds] == list(reader) == RAW_RECORDS
    if not streaming:
        assert ds.data.schema.field("record").type == pyarrow().binary()
    from recordkit.decode.payloads import detect_payload

    assert detect_payload(RAW_RECORDS) == "raw"  # the kind `recordkit info` reports


def pyarrow():
    return pytest.importorskip("pyarrow")


def test_payload_kind_is_detected_not_taken_from_the_format(hf, tmp_path):
    """OFRecord payloads in a TFRecord file are read as OFRecords, as `recordkit info` reports them."""
    path = tmp_path / "of-in-tf.tfrecord"
    write_records(path, [rk.encode_ofrecord({"x": np.array([i], np.int64)}) for i in range(3)])
    assert rk.hf.to_dataset(path, cache_dir=tmp_path / "c")["x"] == [0, 1, 2]


def test_empty_files(hf, tmp_path):
    path = tmp_path / "empty.tfrecord"
    write_records(path, [])
    with pytest.raises(rk.DecodeError, match="no records"):
        rk.hf.to_dataset(path, cache_dir=tmp_path / "c")
    spec = {"label": rk.FixedLen((), "int64")}
    ds = rk.hf.to_dataset(path, spec, cache_dir=tmp_path / "c")
    assert (len(ds), ds.features) == (0, rk.hf.features_of(spec))
    raw = rk.hf.to_dataset(path, payload="raw", cache_dir=tmp_path / "c")
    assert (len(raw), raw.features) == (0, hf.Features({"record": hf.Value("binary")}))
    assert list(rk.hf.to_dataset(path, spec, streaming=True)) == []


def test_records_that_parse_as_examples_by_accident(hf, tmp_path):
    """Most of the first records parse as Examples: they are read as Examples, so the first one that
    does not parse is an error that names it; payload="raw" reads every record as bytes."""
    records = [rk.encode_example({"k": b"v"})] * 3 + [b"\xff\xff"]
    path = tmp_path / "mixed.tfrecord"
    write_records(path, records)
    with pytest.raises(rk.DecodeError, match="payload='raw'") as caught:
        rk.hf.to_dataset(path, cache_dir=tmp_path / "c")
    assert caught.value.index == 3
    for streaming in (False, True):
        ds = rk.hf.to_dataset(path, payload="raw", streaming=streaming, cache_dir=tmp_path / "c")
        assert [row["record"] for row in ds] == records
    with pytest.raises(ValueError, match="payload"):
        rk.hf.to_dataset(path, {"k": rk.VarLen("bytes")}, payload="raw")
    with pytest.raises(ValueError, match="payload"):
        rk.hf.to_dataset(path, payload="json")


@pytest.mark.parametrize("format", ["tfrecord", "ffrecord"])
def test_write_a_bytes_column_as_raw_records(hf, tmp_path, format):
    records = [b"\x00\xff", b"", b"abc"]
    source = hf.Dataset.from_dict(
        {"blob": records}, features=hf.Features({"blob": hf.Value("binary")})
    )
    rk.hf.write(source, tmp_path / "raw", format=format, payload="raw")
    with rk.open(tmp_path / "raw") as reader:
        assert list(reader) == records
    back = rk.hf.to_dataset(tmp_path / "raw", cache_dir=tmp_path / "c")
    assert back.features == source.features
    assert back["blob"] == records
    streamed = rk.hf.to_dataset(tmp_path / "raw", streaming=True)
    assert [row["blob"] for row in streamed] == records
    with pytest.raises(rk.DecodeError, match="record 0"):  # a spec parses Examples, as it says
        rk.hf.to_dataset(tmp_path / "raw", {"blob": rk.VarLen("bytes")}, cache_dir=tmp_path / "d")


def test_raw_writes_need_one_bytes_column(hf, tmp_path):
    for columns in ({"a": [b"x"], "b": [b"y"]}, {"n": [1]}, {"a": [None]}):
        with pytest.raises(rk.errors.UnsupportedOperationError):
            rk.hf.write(hf.Dataset.from_dict(columns), tmp_path / "out", payload="raw")
    assert not (tmp_path / "out").exists()
    with pytest.raises(rk.errors.UnsupportedOperationError, match="row 3 is None"):
        rk.hf.write(hf.Dataset.from_dict({"a": [b"x"] * 3 + [None]}), tmp_path / "n", payload="raw")
    with pytest.raises(ValueError, match="payload"):
        rk.hf.write(hf.Dataset.from_dict({"a": [b"x"]}), tmp_path / "n", payload="example")


def test_a_decode_error_names_the_record_in_the_sources_not_in_its_batch(hf, tmp_path):
    path = tmp_path / "long.tfrecord"
    write_records(path, [example(i) for i in range(300)] + [b"\xff\xff"])
    for streaming in (False, True):
        with pytest.raises(rk.DecodeError, match=r"^record 300: ") as caught:
            list(rk.hf.to_dataset(path, SPEC, streaming=streaming, cache_dir=tmp_path / "c"))
        assert caught.value.index == 300
        assert "payload='raw'" not in str(caught.value)  # the spec said Examples


def test_examples_without_features_need_a_spec(hf, tmp_path):
    """Empty records are Examples with no features (`recordkit info` says example): no columns to give."""
    path = tmp_path / "blank.tfrecord"
    write_records(path, [b""] * 3)
    with pytest.raises(rk.DecodeError, match="without features"):
        rk.hf.to_dataset(path, cache_dir=tmp_path / "c")
    assert rk.hf.to_dataset(path, payload="raw", cache_dir=tmp_path / "c")["record"] == [b""] * 3
