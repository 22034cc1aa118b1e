"""TFDS directories: recordkit reads what tensorflow-datasets prepared, and TFDS loads what recordkit wrote.

The interop tests use tfds itself as the oracle: its dummy builders prepare datasets, its
``builder.info.splits`` says which shards hold how many records, ``builder.as_dataset`` decodes them, and
``tfds.builder_from_directory`` must load the directories ``write_tfds_info`` completes.
"""

from __future__ import annotations

import copy
import dataclasses
import importlib.resources
import importlib.util
import json
import os
import re
import shutil
import sys

import numpy as np
import pytest

import recordkit as rk
from recordkit.datasets import Manifest, Shard, load_manifest
from recordkit.datasets.tfds import FEATURES_NAME, write_tfds_info
from recordkit.io.tfds import (
    DEFAULT_TEMPLATE,
    INFO_NAME,
    _expand,
    _Message,
    is_tfds_directory,
    manifest_from_tfds,
)

# -- hand-written dataset_info.json ------------------------------------------------------------------

BASE_INFO = {
    "name": "toy",
    "version": "1.0.0",
    "fileFormat": "tfrecord",
    "splits": [
        {
            "name": "train",
            "shardLengths": ["2", "3"],
            "numBytes": "40",
            "filepathTemplate": DEFAULT_TEMPLATE,
        },
        {"name": "test", "shardLengths": ["1"], "numBytes": "8"},
    ],
}
BASE_FILES = {
    "toy-train.tfrecord-00000-of-00002": 2,
    "toy-train.tfrecord-00001-of-00002": 3,
    "toy-test.tfrecord-00000-of-00001": 1,
}


def _text(path):
    with open(path, encoding="utf-8") as file:
        return file.read()


def _write_records(path, count, start=0):
    with rk.open(os.fspath(path), "w", format="tfrecord") as writer:
        for i in range(start, start + count):
            writer.write(rk.encode_example({"id": i}))


def _tfds_dir(directory, info, files=BASE_FILES):
    os.makedirs(directory, exist_ok=True)
    for name, count in files.items():
        os.makedirs(os.path.dirname(os.path.join(directory, name)), exist_ok=True)
        _write_records(os.path.join(directory, name), count)
    with open(os.path.join(directory, INFO_NAME), "w", encoding="utf-8") as file:
        file.write(info if isinstance(info, str) else json.dumps(info))
    return os.fspath(directory)


def test_reads_the_shards_of_each_split_in_order(tmp_path):
    directory = _tfds_dir(tmp_path, BASE_INFO)
    assert is_tfds_directory(directory)
    manifest = manifest_from_tfds(directory)
    assert (manifest.format, manifest.compression) == ("tfrecord", "")
    assert [(s.path, s.records, s.split) for s in manifest.shards] == [
        (name, count, name.split("-")[1].split(".")[0]) for name, count in BASE_FILES.items()
    ]
    assert [s.size for s in manifest.shards] == [
        os.path.getsize(tmp_path / name) for name in BASE_FILES
    ]
    assert all(s.sha256 is None and s.index is None for s in manifest.shards)
    assert manifest.splits == ["train", "test"]
    assert manifest.metadata == {
        "tfds": {
            "name": "toy",
            "version": "1.0.0",
            "interleave": {"cycle_length": 16, "block_length": 16},
        }
    }
    with rk.open(
        [os.path.join(directory, s.path) for s in manifest.select("train").shards]
    ) as reader:
        assert [rk.decode_example(r)["id"][0] for r in reader] == [0, 1, 0, 1, 2]


def test_not_a_tfds_directory(tmp_path):
    assert not is_tfds_directory(tmp_path)
    (tmp_path / INFO_NAME).mkdir()
    assert not is_tfds_directory(tmp_path)
    with pytest.raises(FileNotFoundError):
        manifest_from_tfds(tmp_path / "nowhere")


def test_snake_case_numbers_and_absent_format_are_accepted(tmp_path):
    """protobuf's JSON parser takes the original field names and numbers; an old info has no fileFormat."""
    info = {
        "name": "toy",
        "splits": [
            {"name": "train", "shard_lengths": [2, "3"], "num_bytes": 40, "filepath_template": ""},
            {"name": "test", "shardLengths": [1], "numShards": "1"},
        ],
    }
    directory = _tfds_dir(tmp_path, info)
    assert (
        manifest_from_tfds(directory).shards
        == manifest_from_tfds(_tfds_dir(tmp_path / "camel", BASE_INFO)).shards
    )


@pytest.mark.parametrize(
    ("template", "files"),
    [
        (
            "{SPLIT}/data.{FILEFORMAT}-{SHARD_INDEX}",
            ["train/data.tfrecord-00000", "train/data.tfrecord-00001"],
        ),
        (
            "{DATASET}_{NUM_SHARDS}_{SHARD_INDEX}.{FILEFORMAT}",
            ["toy_00002_00000.tfrecord", "toy_00002_00001.tfrecord"],
        ),
        ("{{x}}{SHARD_INDEX:>7}", ["{x}  00000", "{x}  00001"]),
    ],
)
def test_custom_templates(tmp_path, template, files):
    info = {
        "name": "toy",
        "splits": [{"name": "train", "shardLengths": ["1", "2"], "filepathTemplate": template}],
    }
    directory = _tfds_dir(tmp_path, info, dict(zip(files, [1, 2], strict=True)))
    assert [(s.path, s.records) for s in manifest_from_tfds(directory).shards] == list(
        zip(files, [1, 2], strict=True)
    )


def test_a_missing_shard_is_named(tmp_path):
    directory = _tfds_dir(tmp_path, BASE_INFO)
    os.remove(tmp_path / "toy-test.tfrecord-00000-of-00001")
    with pytest.raises(rk.ManifestError, match=r"toy-test\.tfrecord-00000-of-00001.*missing"):
        manifest_from_tfds(directory)
    with pytest.raises(rk.ManifestError, match="missing"):
        rk.open(directory, split="test")


def _mutated(path, value):
    """BASE_INFO with the field at ``path`` (keys and list indexes) set to ``value`` (or deleted)."""
    info = copy.deepcopy(BASE_INFO)
    target = info
    for key in path[:-1]:
        target = target[key]
    if value is _DELETE:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return info


_DELETE = object()

MALFORMED = {
    "not json": "{not json",
    "a list": "[]",
    "no splits": _mutated(["splits"], _DELETE),
    "empty splits": _mutated(["splits"], []),
    "splits not a list": _mutated(["splits"], {"name": "train"}),
    "split not an object": _mutated(["splits", 1], "test"),
    "split without name": _mutated(["splits", 1, "name"], _DELETE),
    "split name a number": _mutated(["splits", 1, "name"], 7),
    "repeated split": _mutated(["splits", 1, "name"], "train"),
    "repeated empty split": _mutated(["splits", 0], {"name": "test"}),
    "negative length": _mutated(["splits", 0, "shardLengths"], ["2", "-3"]),
    "negative number": _mutated(["splits", 0, "shardLengths"], [2, -3]),
    "length not a number": _mutated(["splits", 0, "shardLengths"], ["2", "three"]),
    "length a float": _mutated(["splits", 0, "shardLengths"], [2, 3.5]),
    "length a bool": _mutated(["splits", 0, "shardLengths"], [True, 3]),
    "length past int64": _mutated(["splits", 0, "shardLengths"], ["2", str(1 << 63)]),
    "lengths not a list": _mutated(["splits", 0, "shardLengths"], "2,3"),
    "lengths twice": _mutated(["splits", 0, "shard_lengths"], ["2", "3"]),
    "numShards disagrees": _mutated(["splits", 0, "numShards"], "3"),
    "numShards without lengths": _mutated(["splits", 1], {"name": "test", "numShards": "1"}),
    "numBytes a word": _mutated(["splits", 0, "numBytes"], "many"),
    "riegeli": _mutated(["fileFormat"], "riegeli"),
    "format a number": _mutated(["fileFormat"], 1),
    "name a list": _mutated(["name"], ["toy"]),
    "no name for {DATASET}": _mutated(["name"], _DELETE),
    "unknown variable": _mutated(["splits", 0, "filepathTemplate"], "{DATASET}-{SHARD}"),
    "attribute access": _mutated(
        ["splits", 0, "filepathTemplate"], "{DATASET.upper}-{SHARD_INDEX}"
    ),
    "conversion": _mutated(["splits", 0, "filepathTemplate"], "{DATASET!r}-{SHARD_INDEX}"),
    "unbalanced brace": _mutated(["splits", 0, "filepathTemplate"], "{DATASET-{SHARD_INDEX}"),
    "bad format spec": _mutated(["splits", 0, "filepathTemplate"], "{SHARD_INDEX:d}"),
    "parent directory": _mutated(["splits", 0, "filepathTemplate"], "../{SPLIT}-{SHARD_INDEX}"),
    "absolute path": _mutated(["splits", 0, "filepathTemplate"], "/tmp/{SPLIT}-{SHARD_INDEX}"),
    "same file twice": _mutated(["splits", 0, "filepathTemplate"], "{DATASET}-{SPLIT}"),
    "template a number": _mutated(["splits", 0, "filepathTemplate"], 5),
}


def test_the_base_of_the_malformed_cases_is_valid(tmp_path):
    assert manifest_from_tfds(_tfds_dir(tmp_path, BASE_INFO)).records == 6


@pytest.mark.parametrize("info", MALFORMED.values(), ids=MALFORMED.keys())
def test_malformed_dataset_info_raises_manifest_error(tmp_path, info):
    directory = _tfds_dir(tmp_path, info)
    with pytest.raises(rk.ManifestError) as caught:
        manifest_from_tfds(directory)
    assert caught.value.path == os.path.join(directory, INFO_NAME)
    assert INFO_NAME in str(caught.value)


def test_riegeli_is_refused_by_name(tmp_path):
    directory = _tfds_dir(tmp_path, MALFORMED["riegeli"])
    with pytest.raises(
        rk.ManifestError,
        match="'riegeli' files; recordkit reads TFDS datasets stored as tfrecord or array_record",
    ):
        manifest_from_tfds(directory)


def test_non_utf8_dataset_info(tmp_path):
    (tmp_path / INFO_NAME).write_bytes(b'{"name": "\xff"}')
    with pytest.raises(rk.ManifestError, match="UTF-8"):
        manifest_from_tfds(tmp_path)


# -- writing ------------------------------------------------------------------------------------------

FEATURES = {
    "id": ("int64", ()),
    "pair": ("float32", (2,)),
    "tag": ("string", ()),
    "bits": ("uint8", (None,)),
}


def _example(i):
    return {"id": i, "pair": [i / 2, -1.0], "tag": f"t{i}".encode(), "bits": list(range(i % 4))}


def _write_split(directory, split, count, max_records, name="mydata"):
    pattern = os.path.join(
        directory, f"{name}-{split}.tfrecord-{{shard:05d}}-of-{{num_shards:05d}}"
    )
    with rk.ShardWriter(pattern, format="tfrecord", max_records=max_records, split=split) as writer:
        writer.write_many(rk.encode_example(_example(i)) for i in range(count))
    return writer.manifest


@pytest.fixture
def written(tmp_path):
    """A directory with train (7 records, 3 shards) and test (2 records, 1 shard), and its manifest."""
    _write_split(tmp_path, "train", 7, 3)
    _write_split(tmp_path, "test", 2, 5)
    return os.fspath(tmp_path), load_manifest(tmp_path)


def test_written_info_reads_back(written):
    directory, manifest = written
    path = write_tfds_info(
        directory, manifest, name="mydata", version="2.1.0", description="d", features=FEATURES
    )
    assert path == os.path.join(directory, INFO_NAME)
    back = manifest_from_tfds(directory)
    assert [(s.path, s.records, s.size, s.split) for s in back.shards] == [
        (s.path, s.records, s.size, s.split) for s in manifest.shards
    ]
    info = json.loads(_text(path))
    assert (info["version"], info["description"]) == ("2.1.0", "d")
    assert [s["shardLengths"] for s in info["splits"]] == [["3", "3", "1"], ["2"]]
    # numBytes counts payloads, as TFDS does: the file size less 16 framing bytes per record.
    payloads = []
    for shard in manifest.shards:
        with rk.open(os.path.join(directory, shard.path)) as reader:
            payloads.append(sum(len(r) for r in reader))
    assert [s["numBytes"] for s in info["splits"]] == [str(sum(payloads[:3])), str(payloads[3])]
    assert not [n for n in os.listdir(directory) if n.endswith(".tmp")]


def test_shard_order_and_missing_split_come_from_the_names(written):
    directory, manifest = written
    shuffled = [dataclasses.replace(s, split=None) for s in reversed(manifest.shards)]
    write_tfds_info(directory, dataclasses.replace(manifest, shards=tuple(shuffled)), name="mydata")
    back = manifest_from_tfds(directory)
    assert back.splits == ["test", "train"]
    assert [s.path for s in back.select("train").shards] == [
        s.path for s in manifest.select("train").shards
    ]


def _refusals(manifest):
    shards = manifest.shards
    yield "gzip", dataclasses.replace(manifest, compression="gzip"), "uncompressed tfrecord"
    yield "ofrecord", dataclasses.replace(manifest, format="ofrecord"), "uncompressed tfrecord"
    yield (
        "gap",
        dataclasses.replace(manifest, shards=shards[:1] + shards[2:]),
        "has 2 shards, so its shard 0 must be 'mydata-train.tfrecord-00000-of-00002'",
    )
    yield (
        "split",
        dataclasses.replace(
            manifest, shards=(dataclasses.replace(shards[0], split="test"), *shards[1:])
        ),
        "not named as TFDS",
    )
    yield (
        "size",
        dataclasses.replace(manifest, shards=(dataclasses.replace(shards[0], size=1), *shards[1:])),
        "the manifest says 1",
    )
    yield (
        "records",
        dataclasses.replace(
            manifest, shards=(dataclasses.replace(shards[0], records=99), *shards[1:])
        ),
        "cannot hold 99 records",
    )
    yield (
        "subdir",
        dataclasses.replace(
            manifest,
            shards=(dataclasses.replace(shards[0], path="a/" + shards[0].path), *shards[1:]),
        ),
        "not named",
    )
    odd = dataclasses.replace(shards[0], path="mydata-__.tfrecord-00000-of-00001", split=None)
    yield "split name", dataclasses.replace(manifest, shards=(odd,)), "not a TFDS split name"


REFUSALS = ["gzip", "ofrecord", "gap", "split", "size", "records", "subdir", "split name"]


@pytest.mark.parametrize("case", REFUSALS)
def test_write_refuses_what_tfds_cannot_load(written, case):
    directory, manifest = written
    _, bad, message = next(r for r in _refusals(manifest) if r[0] == case)
    with pytest.raises(rk.ManifestError, match=message):
        write_tfds_info(directory, bad, name="mydata", features=FEATURES)
    assert not os.path.exists(os.path.join(directory, INFO_NAME))
    assert not os.path.exists(os.path.join(directory, FEATURES_NAME))


def test_write_refuses_another_dataset_name_and_missing_shards(written):
    directory, manifest = written
    with pytest.raises(rk.ManifestError, match=r"like 'other-train\.tfrecord-00000-of-00001'"):
        write_tfds_info(directory, manifest, name="other")
    os.remove(os.path.join(directory, manifest.shards[-1].path))
    with pytest.raises(rk.ManifestError, match="missing"):
        write_tfds_info(directory, manifest, name="mydata")
    assert os.listdir(directory).count(INFO_NAME) == 0


@pytest.mark.parametrize(
    "arguments",
    [
        {"name": "1data"},
        {"name": "my-data"},
        {"version": "1.0"},
        {"features": {}},
        {"features": {"x": ("complex64", ())}},
        {"features": {"x": ("uint64", ())}},
        {"features": {"x": ("int64", (None, None))}},
        {"features": {"x": ("int64", (-1,))}},
        {"features": {"x": ("int64", 3)}},
        {"features": {"x": "int64"}},
        {"features": {"": ("int64", ())}},
    ],
    ids=repr,
)
def test_write_refuses_bad_arguments(written, arguments):
    directory, manifest = written
    with pytest.raises((ValueError, TypeError)):
        write_tfds_info(directory, manifest, **{"name": "mydata", **arguments})
    assert not os.path.exists(os.path.join(directory, INFO_NAME))


def test_features_none_keeps_an_existing_features_json(written):
    directory, manifest = written
    write_tfds_info(directory, manifest, name="mydata", features=FEATURES)
    before = _text(os.path.join(directory, FEATURES_NAME))
    write_tfds_info(directory, manifest, name="mydata")
    assert _text(os.path.join(directory, FEATURES_NAME)) == before
    assert json.loads(before)["featuresDict"]["features"]["bits"]["tensor"]["shape"] == {
        "dimensions": ["-1"]
    }


def test_dtype_objects_with_a_name(written):
    directory, manifest = written
    write_tfds_info(directory, manifest, name="mydata", features={"id": (np.dtype("int64"), [])})
    features = json.loads(_text(os.path.join(directory, FEATURES_NAME)))
    assert features["featuresDict"]["features"]["id"]["tensor"] == {
        "dtype": "int64",
        "encoding": "none",
        "shape": {},
    }


# -- interop: tfds as the oracle ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def tfds():
    return pytest.importorskip("tensorflow_datasets")


@pytest.fixture(scope="module")
def tf():
    return pytest.importorskip("tensorflow")


@pytest.fixture(scope="module", params=["DummyDatasetSharedGenerator", "DummyMnist"])
def prepared(request, tfds, tmp_path_factory):
    """A dataset prepared by tfds itself (three shards per split for the first builder)."""
    with pytest.MonkeyPatch.context() as patch:
        # tfds 4.9.10 names the importlib_resources backport when it locates a builder's code; the
        # standard library's importlib.resources provides the same class where the backport is absent.
        if importlib.util.find_spec("importlib_resources") is None:
            patch.setitem(sys.modules, "importlib_resources", importlib.resources)
        builder = getattr(tfds.testing, request.param)(
            data_dir=os.fspath(tmp_path_factory.mktemp("tfds"))
        )
        config = tfds.download.DownloadConfig(
            num_shards=3 if request.param.startswith("DummyData") else None
        )
        builder.download_and_prepare(download_config=config)
    return builder


def _key(builder):
    return "x" if "x" in builder.info.features else "label"


@pytest.mark.interop
def test_manifest_matches_what_tfds_reports(prepared):
    manifest = manifest_from_tfds(prepared.data_dir)
    assert manifest.splits == list(prepared.info.splits.keys())
    for name, split in prepared.info.splits.items():
        shards = manifest.select(name).shards
        assert [s.path for s in shards] == split.filenames
        assert [s.records for s in shards] == split.shard_lengths
        assert sum(s.records for s in shards) == split.num_examples
        # TFDS's numBytes is the payload total: the shard sizes less 16 bytes of framing per record.
        assert sum(s.size - 16 * s.records for s in shards) == split.num_bytes


@pytest.mark.interop
def test_records_match_tensorflow_and_tfds(prepared, tf):
    manifest = manifest_from_tfds(prepared.data_dir)
    key = _key(prepared)
    for name in manifest.splits:
        files = [os.path.join(prepared.data_dir, s.path) for s in manifest.select(name).shards]
        with rk.open(files) as reader:
            records = list(reader)
        assert records == [t.numpy() for t in tf.data.TFRecordDataset(files)]
        parsed = rk.parse_examples(records, {key: rk.FixedLen((), np.int64)})[key]
        dataset = prepared.as_dataset(split=name, shuffle_files=False)
        expected = [int(example[key]) for example in dataset.as_numpy_iterator()]
        assert parsed.tolist() == expected == [int(rk.decode_example(r)[key][0]) for r in records]


@pytest.mark.interop
def test_open_and_dataset_read_a_split_as_tfds_load_does(prepared, tfds):
    """``open(dir, split=)`` and ``Dataset(dir, split=)``: the records ``tfds.load`` gives, no scan."""
    from recordkit.data import Dataset

    key = _key(prepared)
    for name, split in prepared.info.splits.items():
        loaded = tfds.load(
            prepared.name,
            split=name,
            data_dir=os.path.dirname(os.path.dirname(prepared.data_dir)),
            download=False,
            shuffle_files=False,
        )
        expected = [int(example[key]) for example in loaded.as_numpy_iterator()]
        reader = rk.open(prepared.data_dir, split=name)
        assert len(reader) == split.num_examples
        assert [int(rk.decode_example(r)[key][0]) for r in reader] == expected
        dataset = Dataset(prepared.data_dir, split=name, seed=3).shuffle()
        got = [int(rk.decode_example(r)[key][0]) for r in dataset]
        assert sorted(got) == sorted(expected)
    with pytest.raises(rk.ManifestError, match="choose one with split="):
        rk.open(prepared.data_dir)


@pytest.mark.interop
def test_rewriting_the_info_of_a_tfds_dataset_reproduces_its_splits(prepared, tmp_path):
    shutil.copytree(prepared.data_dir, tmp_path, dirs_exist_ok=True)
    original = json.loads((tmp_path / INFO_NAME).read_text(encoding="utf-8"))
    write_tfds_info(
        tmp_path, manifest_from_tfds(tmp_path), name=original["name"], version=original["version"]
    )
    assert (
        json.loads((tmp_path / INFO_NAME).read_text(encoding="utf-8"))["splits"]
        == original["splits"]
    )


@pytest.mark.interop
def test_tfds_loads_a_written_directory(written, tfds, tf):
    directory, manifest = written
    write_tfds_info(directory, manifest, name="mydata", features=FEATURES)
    builder = tfds.builder_from_directory(directory)
    assert (builder.name, str(builder.version)) == ("mydata", "1.0.0")
    for split in ("train", "test"):
        info = builder.info.splits[split]
        shards = manifest.select(split).shards
        assert info.shard_lengths == [s.records for s in shards]
        assert info.filenames == [s.path for s in shards]
        files = [os.path.join(directory, s.path) for s in shards]
        with rk.open(files) as reader:
            assert [t.numpy() for t in tf.data.TFRecordDataset(files)] == list(reader)
        loaded = list(builder.as_dataset(split=split, shuffle_files=False).as_numpy_iterator())
        assert len(loaded) == info.num_examples
        for i, example in enumerate(loaded):
            want = _example(i)
            assert (example["id"], example["tag"]) == (want["id"], want["tag"])
            assert (example["pair"].dtype, example["pair"].tolist()) == (np.float32, want["pair"])
            assert (example["bits"].dtype, example["bits"].tolist()) == (np.uint8, want["bits"])


@pytest.mark.interop
def test_features_json_is_what_tfds_writes(written, tfds, tf):
    """The file equals tfds's own ``features.json`` of the same ``FeaturesDict`` of ``Tensor``s."""
    from google.protobuf import json_format

    specs = {
        "a": ("int64", ()),
        "b": ("float32", (None, 3)),
        "c": ("string", ()),
        "d": ("bool", (2,)),
        "e": ("uint8", (2, 0)),
    }
    dtypes = {
        "int64": np.int64,
        "float32": np.float32,
        "string": tf.string,
        "bool": np.bool_,
        "uint8": np.uint8,
    }
    reference = tfds.features.FeaturesDict(
        {k: tfds.features.Tensor(shape=shape, dtype=dtypes[d]) for k, (d, shape) in specs.items()}
    )
    directory, manifest = written
    write_tfds_info(directory, manifest, name="mydata", features=specs)
    ours = json.loads(_text(os.path.join(directory, FEATURES_NAME)))
    assert ours == json_format.MessageToDict(reference.to_proto())


@pytest.mark.interop
@pytest.mark.parametrize("total", [1, 3, 99999, 100000, 1234567])
@pytest.mark.parametrize(
    "template", [DEFAULT_TEMPLATE, "{SPLIT}/{DATASET}.{FILEFORMAT}@{NUM_SHARDS}-{SHARD_INDEX}"]
)
def test_template_expansion_matches_tfds(tfds, total, template):
    from tensorflow_datasets.core import naming

    reference = naming.ShardedFileTemplate(
        data_dir="/",
        template=template,
        dataset_name="toy",
        split="train",
        filetype_suffix="tfrecord",
    )
    split = _Message({}, "splits[0]", INFO_NAME)
    values = {"DATASET": "toy", "SPLIT": "train", "FILEFORMAT": "tfrecord"}
    for index in {0, 1, total - 1}:
        ours = _expand(template, values, index, total, split)
        assert ours == reference.relative_filepath(shard_index=index, num_shards=total)


@pytest.mark.interop
def test_the_docs_page_runs(tfds, tmp_path, monkeypatch):
    """docs/formats/tfds.md: its blocks run, and its reading function reads what its writing block wrote."""
    page = os.path.join(os.path.dirname(__file__), os.pardir, "docs", "formats", "tfds.md")
    with open(page, encoding="utf-8") as file:
        blocks = re.findall(r"^```python\n(.*?)^```", file.read(), re.DOTALL | re.MULTILINE)
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {}
    for block in blocks:
        exec(compile(block, page, "exec"), namespace)  # noqa: S102 - running the documented code
    ids = [int(example["id"][0]) for example in namespace["read_split"]("mydata", "train")]
    assert ids == list(range(10))


def test_a_missing_shard_of_another_split_does_not_matter(tmp_path):
    directory = _tfds_dir(tmp_path, BASE_INFO)
    os.remove(tmp_path / "toy-test.tfrecord-00000-of-00001")
    assert len(rk.open(directory, split="train")) == len(list(rk.open(directory, split="train")))
    with pytest.raises(rk.ManifestError, match="missing"):
        rk.open(directory, split="test")
    with pytest.raises(rk.ManifestError, match="no split 'dev'"):
        rk.open(directory, split="dev")


# -- the order of a split's records: TFDS interleaves its shards ------------------------------------


def _ordered_dir(directory, lengths, *, disable_shuffling=False):
    """A TFDS directory with one split, ``train``, of shards holding ``lengths`` records (ids in order)."""
    os.makedirs(directory, exist_ok=True)
    files, start = {}, 0
    for i, count in enumerate(lengths):
        name = f"toy-train.tfrecord-{i:05d}-of-{len(lengths):05d}"
        _write_records(os.path.join(directory, name), count, start)
        files[name] = count
        start += count
    shards = tuple(
        Shard(path=name, records=n, size=os.path.getsize(os.path.join(directory, name)))
        for name, n in files.items()
    )
    manifest = Manifest(format="tfrecord", compression="", shards=shards)
    write_tfds_info(directory, manifest, name="toy", features={"id": ("int64", ())})
    if disable_shuffling:
        path = os.path.join(directory, INFO_NAME)
        info = json.loads(_text(path))
        info["disableShuffling"] = True
        with open(path, "w", encoding="utf-8") as file:
            json.dump(info, file)
    return os.fspath(directory)


def _ids(records):
    return [int(rk.decode_example(r)["id"][0]) for r in records]


def _tf_interleave(tf, lengths, cycle, block):
    """The ids tf.data's interleave yields from shards of ``lengths`` records (ids in shard order)."""
    bases = [sum(lengths[:i]) for i in range(len(lengths))]
    table = tf.constant([[b, n] for b, n in zip(bases, lengths, strict=True)], dtype=tf.int64)
    ranges = tf.data.Dataset.from_tensor_slices(table).interleave(
        lambda pair: tf.data.Dataset.range(pair[0], pair[0] + pair[1]),
        cycle_length=cycle,
        block_length=block,
        num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=True,
    )
    return [int(i) for i in ranges.as_numpy_iterator()]


ORDER_CASES = {
    "4 shards over 16": [40, 37, 50, 21],
    "uneven and empty": [3, 0, 17, 16, 32, 1, 0, 45],
    "more than 16 shards": [18 + (i * 7) % 23 for i in range(21)],
}


@pytest.mark.interop
@pytest.mark.parametrize("lengths", ORDER_CASES.values(), ids=ORDER_CASES.keys())
def test_a_split_reads_in_the_order_tfds_gives(tfds, tmp_path, lengths):
    """open(), its indexes and Dataset give the records in ``as_dataset(shuffle_files=False)``'s order."""
    from recordkit.data import Dataset

    directory = _ordered_dir(tmp_path, lengths)
    loaded = tfds.builder_from_directory(directory).as_dataset(split="train", shuffle_files=False)
    expected = [int(example["id"]) for example in loaded.as_numpy_iterator()]
    assert sorted(expected) == list(range(sum(lengths)))
    assert expected != sorted(expected)  # the shards are interleaved, not read one after the other
    reader = rk.open(directory, split="train")
    assert len(reader) == len(expected)
    assert _ids(reader) == expected
    assert _ids(reader[i] for i in range(len(reader))) == expected
    assert _ids(reader[-i] for i in range(1, 6)) == expected[-1:-6:-1]
    assert _ids(reader[5:-3]) == expected[5:-3]
    picks = [len(expected) - 1, 0, 17, 16, 3, 17]
    assert _ids(reader.read(picks)) == [expected[i] for i in picks]
    reader.close()
    assert _ids(Dataset(directory, split="train")) == expected
    assert len(Dataset(directory, split="train")) == len(expected)
    assert _ids(Dataset(directory, split="train").skip(5).take(30)) == expected[5:35]
    # Two workers share the order, each a contiguous part of it.
    halves = [_ids(Dataset(directory, split="train", rank=r, world_size=2)) for r in (0, 1)]
    assert halves[0] + halves[1] == expected
    # A global shuffle permutes the records take() chose in that order.
    chosen = _ids(Dataset(directory, split="train", seed=4).take(20).shuffle())
    assert sorted(chosen) == sorted(expected[:20])
    torch = pytest.importorskip("recordkit.integrations.torch")
    mapped = torch.MapDataset(directory, split="train")
    assert len(mapped) == len(expected)
    assert _ids(mapped[list(range(len(mapped)))]) == expected


@pytest.mark.interop
def test_shuffled_files_are_interleaved_as_tfds_interleaves_them(tf, tmp_path):
    """shuffle(files=True) opens the shards in a random order, then interleaves them 16 by 16."""
    from recordkit.data import Dataset
    from recordkit.datasets.seeds import permutation

    lengths = ORDER_CASES["more than 16 shards"]
    directory = _ordered_dir(tmp_path, lengths)
    order = permutation(len(lengths), 7, 0, "files").tolist()
    bases = [sum(lengths[:i]) for i in range(len(lengths))]
    shuffled = _tf_interleave(tf, [lengths[f] for f in order], 16, 16)
    starts = [sum(lengths[f] for f in order[:k]) for k in range(len(order))]
    # Map the ids of the reordered shards back to the ids of the shards they are.
    expected = []
    for value in shuffled:
        k = max(k for k in range(len(order)) if starts[k] <= value)
        expected.append(bases[order[k]] + value - starts[k])
    got = _ids(Dataset(directory, split="train", seed=7).shuffle(0, files=True))
    assert got == expected
    assert sorted(got) == list(range(sum(lengths)))


@pytest.mark.interop
def test_a_split_that_disables_shuffling_reads_shard_after_shard(tfds, tmp_path):
    lengths = [20, 30, 25]
    directory = _ordered_dir(tmp_path, lengths, disable_shuffling=True)
    loaded = tfds.builder_from_directory(directory).as_dataset(split="train", shuffle_files=False)
    expected = [int(example["id"]) for example in loaded.as_numpy_iterator()]
    assert expected == list(range(sum(lengths)))
    assert _ids(rk.open(directory, split="train")) == expected


@pytest.mark.interop
def test_read_order_matches_tf_data_interleave(tf):
    """ReadOrder against tf.data's deterministic interleave, for other cycle and block lengths too."""
    from recordkit.io.tfds import ReadOrder

    cases = [([0], 16, 16), ([5, 0, 0, 9], 2, 3), ([33, 1, 16, 17, 0, 40], 3, 16)]
    cases += [
        ([(i * 13) % 29 for i in range(25)], cycle, block) for cycle, block in [(4, 5), (16, 1)]
    ]
    for lengths, cycle, block in cases:
        order = ReadOrder(lengths, cycle, block)
        bases = [sum(lengths[:i]) for i in range(len(lengths))]
        runs = [bases[s] + r for s, a, b in order.runs() for r in range(a, b)]
        located = [bases[s] + r for s, r in map(order.locate, range(len(order)))]
        assert runs == located == _tf_interleave(tf, lengths, cycle, block)


def test_a_shard_that_changed_is_caught_in_the_interleaved_order(tmp_path):
    directory = _ordered_dir(tmp_path, [20, 20, 20])
    _write_records(tmp_path / "toy-train.tfrecord-00001-of-00003", 21, 100)
    with pytest.raises(rk.ManifestError, match=r"holds 21 records, but dataset_info\.json says 20"):
        list(rk.open(directory, split="train"))
    _write_records(tmp_path / "toy-train.tfrecord-00001-of-00003", 19, 100)
    with pytest.raises(rk.ManifestError, match=r"holds 19 records, but dataset_info\.json says 20"):
        list(rk.open(directory, split="train"))


def test_interleave_is_refused_on_a_tfds_split(tmp_path):
    from recordkit.data import Dataset

    directory = _ordered_dir(tmp_path, [20, 20])
    with pytest.raises(ValueError, match="TFDS's order"):
        Dataset(directory, split="train").interleave(2)
