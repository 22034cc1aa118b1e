"""Converting a TFDS directory to another file format: ``convert_tfds`` and ``recordkit convert --to``.

tfds is the oracle: it prepares the datasets (two splits of three shards), and ``builder_from_directory``
must load the converted directory and read the same examples, split by split. ``dataset_info.json`` must
change only where tfds's own ``convert_format`` changes it (``convert_format_utils.convert_metadata``):
``fileFormat``, and one more ``dataSourceAccesses`` entry naming the dataset read.
"""

from __future__ import annotations

import importlib.resources
import importlib.util
import json
import os
import sys
import time
from pathlib import Path

import pytest
from _cli import run_cli
from _data_files import write_tfds_directory

import recordkit as rk
import recordkit.datasets.tfds as tfds_writing
from recordkit.datasets.tfds import convert_tfds
from recordkit.errors import OutputExistsError, UnsupportedOperationError
from recordkit.io.tfds import INFO_NAME, manifest_from_tfds

# ArrayRecord writing lands separately: until then, converting to arrayrecord is refused.
needs_arrayrecord_writer = pytest.mark.xfail(
    not rk.get_format("arrayrecord").capabilities.writable,
    raises=UnsupportedOperationError,
    strict=False,
    reason="recordkit does not write ArrayRecord yet",
)


def _info(directory):
    with open(os.path.join(directory, INFO_NAME), encoding="utf-8") as file:
        return json.load(file)


def _files(directory):
    return sorted(name for name in os.listdir(directory) if not name.startswith("."))


def _check_info(original, converted, file_format, data_dir):
    """``converted`` is ``original`` as tfds's convert_format leaves it."""
    converted = dict(converted)
    (access,) = converted.pop("dataSourceAccesses")
    assert converted == {**original, "fileFormat": file_format}
    reference = {"name": original["name"], "version": original["version"], "dataDir": data_dir}
    assert access["tfdsDataset"] == reference
    assert access["url"] == {}
    assert abs(int(access["accessTimestampMs"]) - time.time() * 1000) < 600_000


# -- tfds as the oracle --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tfds():
    return pytest.importorskip("tensorflow_datasets")


def _prepare(tfds, data_dir, file_format):
    """DummyDatasetSharedGenerator (train: 20 examples, test: 10), three shards per split."""
    with pytest.MonkeyPatch.context() as patch:
        # tfds names the importlib_resources backport; the standard library provides the same class.
        if importlib.util.find_spec("importlib_resources") is None:
            patch.setitem(sys.modules, "importlib_resources", importlib.resources)
        builder = tfds.testing.DummyDatasetSharedGenerator(
            data_dir=os.fspath(data_dir), file_format=file_format
        )
        builder.download_and_prepare(download_config=tfds.download.DownloadConfig(num_shards=3))
    return builder


@pytest.fixture(scope="module")
def as_tfrecord(tfds, tmp_path_factory):
    return _prepare(tfds, tmp_path_factory.mktemp("tfrecord"), "tfrecord")


@pytest.fixture(scope="module")
def as_array_record(tfds, tmp_path_factory):
    return _prepare(tfds, tmp_path_factory.mktemp("array_record"), "array_record")


def _examples(builder, split):
    """The examples of ``split``, as tfds reads them (in order: shards of at most 16 records)."""
    if builder.info.file_format.value == "array_record":
        source = builder.as_data_source(split=split)
        return [int(source[i]["x"]) for i in range(len(source))]
    dataset = builder.as_dataset(split=split, shuffle_files=False)
    return [int(example["x"]) for example in dataset.as_numpy_iterator()]


def _check_converted(tfds, original, out, file_format):
    """tfds loads ``out`` with ``original``'s splits, shards and examples, in ``file_format``."""
    loaded = tfds.builder_from_directory(os.fspath(out))
    assert loaded.info.file_format.value == file_format
    for name, split in original.info.splits.items():
        converted = loaded.info.splits[name]
        assert converted.shard_lengths == split.shard_lengths
        assert converted.num_bytes == split.num_bytes
        assert converted.filenames == [
            f.replace(split.filename_template.filetype_suffix, file_format) for f in split.filenames
        ]
        assert _examples(loaded, name) == _examples(original, name)
        assert len(_examples(original, name)) == split.num_examples
        for before, after in zip(split.filenames, converted.filenames, strict=True):
            with rk.open(os.path.join(original.data_dir, before)) as a, rk.open(out / after) as b:
                assert list(a) == list(b)
    _check_info(
        _info(original.data_dir),
        _info(out),
        file_format,
        os.path.dirname(os.path.dirname(original.data_dir)),
    )
    metadata = set(_files(original.data_dir)) - {
        f for s in original.info.splits.values() for f in s.filenames
    }
    for name in metadata - {INFO_NAME}:
        assert (out / name).read_bytes() == Path(original.data_dir, name).read_bytes()
    return loaded


@pytest.mark.interop
def test_cli_converts_array_record_to_tfrecord(tfds, as_array_record, tmp_path, capsys):
    out = tmp_path / "converted"
    result = run_cli(capsys, "convert", as_array_record.data_dir, out, "--to", "tfrecord")
    assert result.code == 0, result.err
    assert "wrote 30 records in 6 tfrecord shards (train, test)" in result.out
    _check_converted(tfds, as_array_record, out, "tfrecord")
    assert _files(out) == sorted(
        [INFO_NAME, "features.json"]
        + [
            f"dummy_dataset_shared_generator-{s}.tfrecord-0000{i}-of-00003"
            for s in ("test", "train")
            for i in range(3)
        ]
    )


@pytest.mark.interop
def test_tfrecord_to_tfrecord_keeps_every_example(tfds, as_tfrecord, tmp_path):
    manifest = convert_tfds(as_tfrecord.data_dir, tmp_path / "copy", format="tfrecord")
    assert manifest.splits == ["train", "test"]
    assert manifest.shards == manifest_from_tfds(tmp_path / "copy").shards
    _check_converted(tfds, as_tfrecord, tmp_path / "copy", "tfrecord")


@pytest.mark.interop
@needs_arrayrecord_writer
@pytest.mark.parametrize("fmt", ["arrayrecord", "array_record"])
def test_tfrecord_to_arrayrecord_is_a_data_source(tfds, as_tfrecord, tmp_path, fmt):
    out = tmp_path / "converted"
    manifest = convert_tfds(as_tfrecord.data_dir, out, format=fmt)
    assert manifest.format == "arrayrecord"
    loaded = _check_converted(tfds, as_tfrecord, out, "array_record")
    for name in ("train", "test"):
        source = loaded.as_data_source(split=name)
        expected = _examples(as_tfrecord, name)
        assert [int(source[i]["x"]) for i in reversed(range(len(source)))] == expected[::-1]
    with rk.open(out, split="train") as reader:
        assert len(reader) == 20


# -- without tfds ----------------------------------------------------------------------------------------


def _toy(tmp_path, **extra):
    files = {
        "toy-train.tfrecord-00000-of-00002": [b"a", b"b"],
        "toy-train.tfrecord-00001-of-00002": [b"c"],
        "toy-test.tfrecord-00000-of-00001": [b"t"],
    }
    (tmp_path / "toy").mkdir()
    directory = write_tfds_directory(
        tmp_path / "toy" / "1.0.0", files, {"train": [2, 1], "test": [1]}
    )
    if extra:
        (directory / INFO_NAME).write_text(
            json.dumps({**_info(directory), **extra}), encoding="utf-8"
        )
    (directory / "features.json").write_text("{}", encoding="utf-8")
    (directory / "label.labels.txt").write_text("cat\ndog\n", encoding="utf-8")
    return directory


def test_converts_and_updates_the_info_as_tfds_does(tmp_path):
    directory = _toy(tmp_path)
    convert_tfds(directory, tmp_path / "out", format="tfrecord")
    _check_info(_info(directory), _info(tmp_path / "out"), "tfrecord", os.fspath(tmp_path))
    assert _files(tmp_path / "out") == _files(directory)
    with rk.open(tmp_path / "out", split="train") as reader:
        assert list(reader) == [b"a", b"b", b"c"]
    assert (tmp_path / "out" / "label.labels.txt").read_text(encoding="utf-8") == "cat\ndog\n"


def test_snake_case_fields_and_earlier_accesses(tmp_path):
    earlier = {"accessTimestampMs": "1", "tfdsDataset": {"name": "older"}, "url": {}}
    directory = _toy(tmp_path, data_source_accesses=[earlier])
    info = _info(directory)
    info["file_format"] = info.pop("fileFormat")
    (directory / INFO_NAME).write_text(json.dumps(info), encoding="utf-8")
    convert_tfds(directory, tmp_path / "out", format="tfrecord")
    converted = _info(tmp_path / "out")
    assert "file_format" not in converted
    assert "data_source_accesses" not in converted
    assert converted["fileFormat"] == "tfrecord"
    assert converted["dataSourceAccesses"][0] == earlier
    assert len(converted["dataSourceAccesses"]) == 2


def test_data_dir_of_a_directory_not_laid_out_as_tfds_lays_it_out(tmp_path):
    directory = _toy(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    os.rename(directory, elsewhere)
    convert_tfds(elsewhere, tmp_path / "out", format="tfrecord")
    (access,) = _info(tmp_path / "out")["dataSourceAccesses"]
    assert access["tfdsDataset"]["dataDir"] == os.fspath(elsewhere)


def test_an_existing_output_is_refused_unless_forced(tmp_path, capsys):
    directory = _toy(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("mine", encoding="utf-8")
    with pytest.raises(OutputExistsError, match="is not empty; pass overwrite=True") as caught:
        convert_tfds(directory, out, format="tfrecord")
    assert caught.value.path == os.fspath(out)
    refused = run_cli(capsys, "convert", directory, out, "--to", "tfrecord")
    assert refused.code == 2
    assert f"{out} exists; pass --force to overwrite" in refused.err
    assert _files(out) == ["keep.txt"]
    forced = run_cli(capsys, "convert", "-q", directory, out, "--to", "tfrecord", "--force")
    assert forced.code == 0, forced.err
    assert _files(out) == sorted([*_files(directory), "keep.txt"])
    assert len(_info(out)["dataSourceAccesses"]) == 1
    with rk.open(out, split="test") as reader:
        assert list(reader) == [b"t"]
    with pytest.raises(OutputExistsError, match="is the dataset converted"):
        convert_tfds(directory, directory, format="tfrecord", overwrite=True)
    with pytest.raises(OutputExistsError, match="is a file"):
        convert_tfds(directory, out / "keep.txt", format="tfrecord", overwrite=True)


def test_an_empty_output_directory_is_used(tmp_path):
    directory = _toy(tmp_path)
    (tmp_path / "out").mkdir()
    convert_tfds(directory, tmp_path / "out", format="tfrecord")
    assert _files(tmp_path / "out") == _files(directory)


def test_an_interrupted_conversion_leaves_nothing(tmp_path, monkeypatch):
    directory = _toy(tmp_path)
    calls = []

    def failing(records, path, **options):
        if calls:
            raise KeyboardInterrupt
        calls.append(path)
        return write_shard(records, path, **options)

    write_shard = tfds_writing.write_shard
    monkeypatch.setattr(tfds_writing, "write_shard", failing)
    with pytest.raises(KeyboardInterrupt):
        convert_tfds(directory, tmp_path / "out", format="tfrecord")
    assert calls
    assert sorted(os.listdir(tmp_path)) == ["toy"]


def test_a_shard_that_disagrees_with_its_length_is_refused(tmp_path):
    directory = _toy(tmp_path)
    info = _info(directory)
    info["splits"][0]["shardLengths"] = ["2", "2"]
    (directory / INFO_NAME).write_text(json.dumps(info), encoding="utf-8")
    with pytest.raises(
        rk.ManifestError, match=r"1 records, but dataset_info\.json says 2"
    ) as caught:
        convert_tfds(directory, tmp_path / "out", format="tfrecord")
    assert caught.value.path.endswith("toy-train.tfrecord-00001-of-00002")
    assert not (tmp_path / "out").exists()


def test_formats_tfds_does_not_read_are_refused(tmp_path, capsys):
    directory = _toy(tmp_path)
    with pytest.raises(UnsupportedOperationError, match="cannot be ffrecord files"):
        convert_tfds(directory, tmp_path / "out", format="ffrecord")
    with pytest.raises(rk.UnknownFormatError):
        convert_tfds(directory, tmp_path / "out", format="riegeli")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            ["--to", "tfrecord", "--shards", "2"],
            "--shards: a TFDS directory is converted shard for shard",
        ),
        (["--to", "tfrecord", "--compression", "gzip"], "--compression: a TFDS directory"),
        (["--to", "tfrecord", "--payload", "example"], "--payload: a TFDS directory"),
        ([], "is a TFDS directory: pass --to FORMAT"),
    ],
)
def test_cli_options_that_do_not_apply_are_refused(tmp_path, capsys, options, message):
    result = run_cli(capsys, "convert", _toy(tmp_path), tmp_path / "out", *options)
    assert result.code == 2
    assert message in result.err
    assert not (tmp_path / "out").exists()


def test_a_split_or_a_file_name_still_copies_records(tmp_path, capsys):
    directory = _toy(tmp_path)
    result = run_cli(
        capsys, "convert", "-q", directory, tmp_path / "train.tfrecord", "--split", "train"
    )
    assert result.code == 0, result.err
    assert list(rk.open(tmp_path / "train.tfrecord")) == [b"a", b"b", b"c"]
