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
    rk.hf.write(source, tmp_path / "out", shard_size=3, split="train")
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
