"""Every reading entry point reads a source as the same records in the same order, or fails alike.

One corpus of sources (each format, a dataset directory with a manifest and stale shards beside it, a
TFDS directory, a glob, a list, a gzip file, a ``memory://`` URL, damaged shards, a split) goes through
``recordkit.open``, ``Dataset``, ``MapDataset``, the ffrecord and OneFlow compatibility readers, the
command line, ``recover`` and the Dask and Ray readers. All of them resolve their sources with
``recordkit.io.resolve_sources``. The expectation is what the test wrote (checked against TensorFlow's
``tf.data.TFRecordDataset`` for TFRecord files), never what recordkit reads.
"""

from __future__ import annotations

import base64
import dataclasses
import importlib
import importlib.resources
import importlib.util
import os
import sys
from collections.abc import Callable
from typing import Any

import pytest

import recordkit as rk
from recordkit import errors
from recordkit.data import Dataset
from recordkit.datasets import ShardWriter
from recordkit.decode.messages import encode_ofrecord

pytestmark = pytest.mark.filterwarnings(
    r"ignore::DeprecationWarning:(ray|tensorflow|tensorflow_datasets)\..*"
)


def payloads(tag: str, n: int) -> list[bytes]:
    """Records of varied lengths (empty included) that name their source."""
    return [f"{tag}-{i}".encode() * (i % 5) + bytes([i % 256]) for i in range(n)]


@dataclasses.dataclass
class Case:
    """One source: what is passed, its split, and the records (or the error class) every reader gives."""

    name: str
    source: Any
    expected: list[bytes] | type[errors.RecordKitError]
    split: str | None = None
    kind: str = "tfrecord"  # the format of its files
    format: str | None = None  # format=, where neither names nor content tell
    tfrecord_files: list[str] = dataclasses.field(default_factory=list)  # for the TensorFlow oracle
    compression: str = ""
    local: bool = True  # readable from another process (Ray)
    oneflow: tuple[str, int] | None = None  # (directory, parts) for OFRecordReader


def write(path: str, records: list[bytes], **options: Any) -> list[bytes]:
    with rk.open(path, "w", **options) as writer:
        writer.write_many(records)
    return records


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Case]:
    root = tmp_path_factory.mktemp("corpus")
    cases: list[Case] = []

    tf_file = os.fspath(root / "one.tfrecord")
    one = write(tf_file, payloads("tf", 7))
    cases.append(Case("tfrecord file", tf_file, one, tfrecord_files=[tf_file]))

    of_dir = root / "oneflow"
    of_dir.mkdir()
    of_records: list[bytes] = []
    for i in range(2):
        messages = [encode_ofrecord({"x": [r]}) for r in payloads(f"of{i}", 4)]  # OneFlow's own
        of_records += write(os.fspath(of_dir / f"part-{i}"), messages, format="ofrecord")
    cases.append(
        Case(
            "ofrecord parts",
            os.fspath(of_dir),
            of_records,
            kind="ofrecord",
            format="ofrecord",
            oneflow=(os.fspath(of_dir), 2),
        )
    )

    ff_file = os.fspath(root / "one.ffr")
    cases.append(Case("ffrecord file", ff_file, write(ff_file, payloads("ff", 6)), kind="ffrecord"))

    dataset = root / "dataset"
    with ShardWriter(os.fspath(dataset / "shard-{shard:05d}.tfrecord"), max_records=3) as writer:
        writer.write_many(payloads("ds", 8))
    shards = sorted(
        os.fspath(dataset / name) for name in os.listdir(dataset) if name.endswith(".tfrecord")
    )
    # A stale shard beside the listed ones, left over from an earlier write: the manifest says what is read.
    write(os.fspath(dataset / "shard-00099.tfrecord"), [b"stale"])
    cases.append(
        Case(
            "dataset with stale shards",
            os.fspath(dataset),
            payloads("ds", 8),
            tfrecord_files=shards,
        )
    )

    splits = root / "splits"
    for split, n in (("train", 5), ("test", 3)):
        with ShardWriter(
            os.fspath(splits / f"{split}-{{shard:05d}}.tfrecord"), max_records=2, split=split
        ) as writer:
            writer.write_many(payloads(split, n))
    test_shards = sorted(os.fspath(splits / n) for n in os.listdir(splits) if n.startswith("test-"))
    cases.append(
        Case(
            "split",
            os.fspath(splits),
            payloads("test", 3),
            split="test",
            tfrecord_files=test_shards,
        )
    )

    parts = root / "parts"
    parts.mkdir()
    files = [os.fspath(parts / f"p-{i}.tfrecord") for i in (2, 10, 1)]
    by_file = {f: write(f, payloads(os.path.basename(f), 3)) for f in files}
    natural = [files[2], files[0], files[1]]  # p-1, p-2, p-10
    glob_records = [r for f in natural for r in by_file[f]]
    cases.append(
        Case("glob", os.fspath(parts / "p-*.tfrecord"), glob_records, tfrecord_files=natural)
    )
    listed = [r for f in files for r in by_file[f]]
    cases.append(Case("list", files, listed, tfrecord_files=files))

    gz = os.fspath(root / "one.tfrecord.gz")
    cases.append(
        Case(
            "gzip tfrecord",
            gz,
            write(gz, payloads("gz", 5)),
            tfrecord_files=[gz],
            compression="GZIP",
        )
    )

    fsspec = pytest.importorskip("fsspec")
    url = "memory://cross-entry-points/one.tfrecord"
    with fsspec.open(url, "wb") as file, open(tf_file, "rb") as local:
        file.write(local.read())
    cases.append(Case("memory url", url, one, local=False))

    flipped = root / "flipped.tfrecord"
    data = bytearray((root / "one.tfrecord").read_bytes())
    data[12 + 8 + 4 + 2] ^= 0x40  # inside record 1's payload (record 0 holds one byte)
    flipped.write_bytes(bytes(data))
    cases.append(Case("flipped payload byte", os.fspath(flipped), errors.ChecksumError))

    truncated = root / "truncated.tfrecord"
    truncated.write_bytes((root / "one.tfrecord").read_bytes()[:-3])
    cases.append(Case("truncated file", os.fspath(truncated), errors.TruncatedRecordError))

    tfds_dir = _tfds_directory(tmp_path_factory)
    if tfds_dir is not None:
        with rk.open(tfds_dir, split="train") as reader:
            tfds_records = list(reader)
        tfds_files = sorted(
            os.path.join(tfds_dir, n) for n in os.listdir(tfds_dir) if "-train.tfrecord-" in n
        )
        # The order is TFDS's own (tests/test_tfds.py checks it against tfds); TensorFlow checks the records.
        cases.append(
            Case("tfds split", tfds_dir, tfds_records, split="train", tfrecord_files=tfds_files)
        )
    return {case.name: case for case in cases}


def _tfds_directory(tmp_path_factory: pytest.TempPathFactory) -> str | None:
    if importlib.util.find_spec("tensorflow_datasets") is None:
        return None
    tfds = importlib.import_module("tensorflow_datasets")
    with pytest.MonkeyPatch.context() as patch:
        if importlib.util.find_spec("importlib_resources") is None:
            patch.setitem(sys.modules, "importlib_resources", importlib.resources)
        builder = tfds.testing.DummyDatasetSharedGenerator(
            data_dir=os.fspath(tmp_path_factory.mktemp("tfds"))
        )
        builder.download_and_prepare(download_config=tfds.download.DownloadConfig(num_shards=3))
    return os.fspath(builder.data_dir)


# -- the entry points --------------------------------------------------------------------------------


def via_open(case: Case) -> list[bytes]:
    with rk.open(case.source, split=case.split, format=case.format) as reader:
        return list(reader)


def via_dataset(case: Case) -> list[bytes]:
    return list(Dataset(case.source, split=case.split, format=case.format))


def via_map_dataset(case: Case) -> list[bytes]:
    pytest.importorskip("torch")
    torch_module = importlib.import_module("recordkit.integrations.torch")
    if case.compression:
        pytest.skip(
            "MapDataset reads random-access files only (refused alike by Dataset's global shuffle)"
        )
    dataset = torch_module.MapDataset(case.source, split=case.split, format=case.format)
    return [bytes(dataset[i]) for i in range(len(dataset))]


def via_cli(case: Case) -> list[bytes]:
    from recordkit.cli import main

    sources = case.source if isinstance(case.source, list) else [case.source]
    args = ["cat", "--raw", *sources]
    args += ["--split", case.split] if case.split else []
    args += ["--format", case.format] if case.format else []
    import contextlib
    import io

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(args)
    if code:
        name = err.getvalue().rsplit("[", 1)[-1].split("]", 1)[0]
        raise getattr(errors, name)(err.getvalue())
    return [base64.b64decode(line) for line in out.getvalue().splitlines()]


def via_ffrecord(case: Case) -> list[bytes]:
    if case.kind != "ffrecord":
        pytest.skip("the ffrecord drop-in reads FFRecord files")
    from recordkit.compat.ffrecord import FileReader

    with FileReader(case.source) as reader:
        return [bytes(r) for r in reader.read(range(reader.n))]


def via_oneflow(case: Case) -> list[bytes]:
    if case.oneflow is None:
        pytest.skip("the OneFlow reader reads OneFlow part files")
    from recordkit.compat.oneflow import OFRecordReader

    directory, parts = case.oneflow
    return [r for batch in OFRecordReader(directory, data_part_num=parts, seed=0) for r in batch]


def via_recover_scan(case: Case) -> list[bytes]:
    if not isinstance(case.expected, list):
        pytest.skip("recover reads past damage by design")
    from recordkit.recover import scan

    files = rk.io.resolve_sources(case.source, split=case.split).files
    records: list[bytes] = []
    for file in files:
        with scan(file, format=case.format, warn=False) as found:
            records += [bytes(r) for r in found]
    return records


def via_dask(case: Case) -> list[bytes]:
    dask = pytest.importorskip("dask")
    rkdask = pytest.importorskip("recordkit.integrations.dask")
    with dask.config.set(scheduler="synchronous"):
        return list(
            rkdask.read_records(case.source, split=case.split, format=case.format).compute()
        )


ENTRY_POINTS: dict[str, Callable[[Case], list[bytes]]] = {
    "rk.open": via_open,
    "Dataset": via_dataset,
    "MapDataset": via_map_dataset,
    "cli cat": via_cli,
    "ffrecord.FileReader": via_ffrecord,
    "oneflow.OFRecordReader": via_oneflow,
    "recover.scan": via_recover_scan,
    "dask": via_dask,
}

CASES = [
    "tfrecord file",
    "ofrecord parts",
    "ffrecord file",
    "dataset with stale shards",
    "split",
    "glob",
    "list",
    "gzip tfrecord",
    "memory url",
    "flipped payload byte",
    "truncated file",
    "tfds split",
]


def check(case: Case, read: Callable[[Case], list[bytes]]) -> None:
    if isinstance(case.expected, list):
        assert read(case) == case.expected
    else:
        with pytest.raises(case.expected):
            read(case)


@pytest.mark.parametrize("entry", list(ENTRY_POINTS))
@pytest.mark.parametrize("name", CASES)
def test_every_entry_point_reads_the_same_records(
    corpus: dict[str, Case], name: str, entry: str
) -> None:
    if name not in corpus:
        pytest.skip(f"{name}: not available here")
    check(corpus[name], ENTRY_POINTS[entry])


@pytest.mark.parametrize("name", [n for n in CASES if n not in ("ofrecord parts", "ffrecord file")])
def test_tensorflow_reads_what_the_corpus_expects(corpus: dict[str, Case], name: str) -> None:
    """The oracle: TensorFlow reads the TFRecord files as the records the corpus expects."""
    tf = pytest.importorskip("tensorflow")
    case = corpus.get(name)
    if case is None or not case.tfrecord_files:
        pytest.skip("no local TFRecord files to give TensorFlow")
    found = [
        bytes(r.numpy())
        for r in tf.data.TFRecordDataset(case.tfrecord_files, compression_type=case.compression)
    ]
    assert isinstance(case.expected, list)
    if name == "tfds split":  # TFDS reads its shards interleaved; TensorFlow here file after file
        assert sorted(found) == sorted(case.expected)
    else:
        assert found == case.expected


@pytest.mark.ray
def test_ray_reads_the_same_records(corpus: dict[str, Case]) -> None:
    ray = pytest.importorskip("ray")
    pytest.importorskip("pyarrow")
    rkray = pytest.importorskip("recordkit.integrations.ray")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    context = ray.data.DataContext.get_current()
    try:
        context.enable_progress_bars = False
        # Ray yields blocks as its tasks finish unless asked to keep their order; the records are
        # compared in order here.
        context.execution_options.preserve_order = True
        for name in (
            "dataset with stale shards",
            "split",
            "glob",
            "ofrecord parts",
            "truncated file",
        ):
            case = corpus[name]
            fmt = "ofrecord" if case.kind == "ofrecord" else None
            if isinstance(case.expected, list):
                rows = rkray.read_records(case.source, split=case.split, format=fmt).take_all()
                assert [bytes(row[rkray.COLUMN]) for row in rows] == case.expected, name
            else:
                with pytest.raises(Exception) as info:
                    rkray.read_records(case.source, split=case.split).take_all()
                assert isinstance(rkray.recordkit_error(info.value), case.expected), name
    finally:
        context.execution_options.preserve_order = False
        ray.shutdown()


@pytest.mark.parametrize(
    ("name", "options"),
    [
        ("flipped payload byte", {"check_crc": False}),
        ("cut inside a header", {"lenient": True}),
        ("tfrecord file", {"index": False}),
    ],
)
def test_dataset_takes_the_reading_options_of_open(
    corpus: dict[str, Case], name: str, options: dict[str, Any], tmp_path: Any
) -> None:
    """check_crc, index and lenient mean the same to Dataset and MapDataset as to recordkit.open."""
    if name == "cut inside a header":
        source = os.fspath(tmp_path / "cut.tfrecord")
        with open(corpus["tfrecord file"].source, "rb") as intact, open(source, "wb") as cut:
            cut.write(intact.read() + b"\x05\x00\x00")  # TensorFlow stops cleanly here
        with pytest.raises(errors.TruncatedRecordError):
            list(Dataset(source))
    else:
        source = corpus[name].source
    with rk.open(source, **options) as reader:
        expected = list(reader)
    assert expected  # the option lets the damaged file be read
    assert list(Dataset(source, **options)) == expected
    with pytest.raises(ValueError, match="index= takes a path only"):
        list(Dataset(corpus["list"].source, index=os.fspath(source) + ".idx"))
    pytest.importorskip("torch")
    torch_module = importlib.import_module("recordkit.integrations.torch")
    with torch_module.MapDataset(source, **options) as dataset:
        assert dataset[list(range(len(dataset)))] == expected
    with pytest.raises(ValueError, match="index= takes a path only"):
        torch_module.MapDataset(corpus["list"].source, index=os.fspath(source) + ".idx")
