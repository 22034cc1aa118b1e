"""Every public reading and writing entry point in the shortest form a user writes.

No ``with``, no variable: ``for r in rk.open(p)``, ``rk.open(p)[0]``, ``Dataset("dir")``, the command line
on a file, a directory and a quoted glob. Each result is compared with the records written (and, for
TFRecord, with TensorFlow's reader when it is installed). The suite turns warnings into errors, so a file
left open (a ``ResourceWarning``) fails these tests too; where the system shows open descriptors, the tests
also check that none is left behind.
"""

from __future__ import annotations

import base64
import gc
import json
import os
import pickle
import re
import subprocess
import sys
from pathlib import Path

import pytest

import recordkit as rk
from recordkit.cli import main
from recordkit.compat.ffrecord import FileReader
from recordkit.data import Dataset
from recordkit.errors import NoLengthError, UnsupportedOperationError

SUFFIXES = [".tfrecord", ".tfrecord.gz", ".tfrecord.zlib", ".ofrecord", ".ffr"]
RANDOM_ACCESS = {".tfrecord", ".ofrecord", ".ffr"}
COUNTS = [3, 1, 2]  # records per file of a directory: part-0, part-1, part-2


def records_of(part: int, n: int) -> list[bytes]:
    """Distinct, non-empty records (OFRecord refuses empty ones) of different lengths."""
    return [b"part %d record %d " % (part, i) + bytes(range(i * 7)) for i in range(n)]


def write(path: Path, records: list[bytes]) -> None:
    with rk.open(path, "w") as writer:
        writer.write_many(records)


def open_descriptors() -> int | None:
    """How many descriptors this process has open, where the system tells (else ``None``)."""
    folder = "/proc/self/fd"
    return len(os.listdir(folder)) if os.path.isdir(folder) else None


@pytest.fixture(params=SUFFIXES, ids=lambda s: s.lstrip("."))
def dataset(request, tmp_path) -> tuple[str, Path, list[bytes]]:
    """A directory of three files of one format; returns the suffix, the directory and every record."""
    suffix = request.param
    folder = tmp_path / "data"
    folder.mkdir()
    everything = []
    for part, n in enumerate(COUNTS):
        records = records_of(part, n)
        write(folder / f"part-{part}{suffix}", records)
        everything += records
    return suffix, folder, everything


def first_file(dataset) -> tuple[str, list[bytes]]:
    suffix, folder, _ = dataset
    return str(folder / f"part-0{suffix}"), records_of(0, COUNTS[0])


# -- recordkit.open, one file ----------------------------------------------------------------------


def test_iteration_forms(dataset):
    path, records = first_file(dataset)
    gc.collect()  # what earlier tests left for the collector is not this test's to count
    before = open_descriptors()
    assert [r for r in rk.open(path)] == records  # noqa: C416 - the comprehension is the form tested
    got = []
    for record in rk.open(path):
        gc.collect()  # nothing else refers to the reader while the loop runs
        got.append(record)
    assert got == records
    assert next(iter(rk.open(path))) == records[0]
    assert list(rk.open(path)) == records
    assert list(rk.open(Path(path))) == records
    assert sum(1 for _ in rk.open(path)) == len(records)
    gc.collect()
    assert open_descriptors() == before


def test_random_access_forms(dataset):
    suffix, _, _ = dataset
    path, records = first_file(dataset)
    gc.collect()  # what earlier tests left for the collector is not this test's to count
    before = open_descriptors()
    if suffix in RANDOM_ACCESS:
        assert rk.open(path)[0] == records[0]
        assert rk.open(path)[-1] == records[-1]
        assert len(rk.open(path)) == len(records)
        assert rk.open(path).read([1, 0]) == [records[1], records[0]]
        assert rk.open(path)[1:] == records[1:]
        assert rk.open(Path(path))[2] == records[2]
    else:
        with pytest.raises(NoLengthError, match=r"len\(\)"):
            len(rk.open(path))
        for form in (lambda: rk.open(path)[0], lambda: rk.open(path).read([1, 0])):
            with pytest.raises(UnsupportedOperationError, match="random access"):
                form()
    gc.collect()
    assert open_descriptors() == before


# -- recordkit.open and Dataset over several files --------------------------------------------------


def test_directory_glob_and_list_forms(dataset):
    suffix, folder, everything = dataset
    files = [str(folder / f"part-{i}{suffix}") for i in range(len(COUNTS))]
    pattern = str(folder / f"*{suffix}")
    assert list(rk.open(folder)) == everything
    assert list(rk.open(str(folder))) == everything
    assert list(rk.open(pattern)) == everything
    assert list(rk.open(files)) == everything
    assert list(rk.open([Path(f) for f in reversed(files)])) == records_of(2, 2) + records_of(
        1, 1
    ) + records_of(0, 3)
    assert [r for r in rk.open(folder, format=rk.open(files[0]).format)] == everything  # noqa: C416
    if suffix in RANDOM_ACCESS:
        assert len(rk.open(folder)) == len(everything)
        assert rk.open(pattern)[3] == everything[3]
        assert rk.open(folder).read([5, 0]) == [everything[5], everything[0]]


def test_dataset_forms(dataset):
    suffix, folder, everything = dataset
    assert list(Dataset(folder)) == everything
    assert list(Dataset(str(folder))) == everything
    assert list(Dataset(str(folder / f"*{suffix}"))) == everything
    assert list(Dataset([str(folder / f"part-{i}{suffix}") for i in range(3)])) == everything
    fmt = rk.open(folder).format
    assert list(Dataset(folder, format=fmt)) == everything


# -- the ffrecord drop-in --------------------------------------------------------------------------


def test_ffrecord_file_reader_forms(tmp_path):
    records = records_of(0, 4)
    write(tmp_path / "a.ffr", records)
    assert bytes(FileReader(tmp_path / "a.ffr").read_one(0)) == records[0]
    assert bytes(FileReader(str(tmp_path / "a.ffr")).read_one(3)) == records[3]
    assert [bytes(a) for a in FileReader(tmp_path).read([1, 0])] == records[1::-1]
    assert bytes(FileReader(str(tmp_path / "*.ffr")).read_one(2)) == records[2]


# -- writing without with --------------------------------------------------------------------------


@pytest.mark.parametrize("suffix", SUFFIXES, ids=lambda s: s.lstrip("."))
def test_a_writer_dropped_without_close_leaves_nothing(tmp_path, suffix):
    """``rk.open(p, "w").write(...)`` alone writes nothing: an unclosed writer is discarded."""
    path = tmp_path / f"a{suffix}"
    gc.collect()  # what earlier tests left for the collector is not this test's to count
    before = open_descriptors()
    # As an unclosed file, a dropped writer says so: a ResourceWarning naming the path.
    message = rf"{re.escape(os.fspath(path))} was dropped without close\(\): nothing was written"
    with pytest.warns(ResourceWarning, match=message):
        rk.open(path, "w").write(b"record")  # the writer goes at the end of the statement
    gc.collect()
    writer = rk.open(path, "w")
    writer.write_many(records_of(0, 3))
    with pytest.warns(ResourceWarning, match=message):
        del writer
    gc.collect()
    assert os.listdir(tmp_path) == []  # no target, no temporary file
    assert open_descriptors() == before
    writer = rk.open(path, "w")
    writer.write_many(records_of(0, 3))
    writer.close()
    assert list(rk.open(path)) == records_of(0, 3)
    assert os.listdir(tmp_path) == [path.name]


def test_the_one_line_write_warns_under_dev_mode(tmp_path):
    """``python -X dev`` shows the ResourceWarning of ``rk.open(p, "w").write(...)`` on one line."""
    path = tmp_path / "a.tfrecord"
    script = "import sys, recordkit as rk; rk.open(sys.argv[1], 'w').write(b'abc')"
    result = subprocess.run(
        [sys.executable, "-X", "dev", "-c", script, os.fspath(path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert "ResourceWarning" in result.stderr
    assert f"{path} was dropped without close(): nothing was written" in result.stderr
    assert os.listdir(tmp_path) == []


def test_dropped_ffrecord_and_shard_writers_warn_with_the_path(tmp_path):
    from recordkit.compat.ffrecord import FileWriter

    writer = FileWriter(tmp_path / "a.ffr", 2)
    writer.write_one(b"x")
    with pytest.warns(ResourceWarning, match=r"a\.ffr was dropped without close\(\): nothing"):
        del writer
    shards = rk.ShardWriter(os.fspath(tmp_path / "part-{shard}.tfrecord"), max_records=10)
    shards.write(b"y")
    with pytest.warns(ResourceWarning) as caught:
        del shards
    messages = [str(w.message) for w in caught]
    shard_lost = "part-0.tfrecord was dropped without close(): nothing was written"
    assert any(shard_lost in m for m in messages)
    assert any("ShardWriter" in m and "no manifest was written" in m for m in messages)
    assert os.listdir(tmp_path) == []


# -- TensorFlow reads what the short forms wrote, and recordkit reads it back alike ------------------


@pytest.mark.interop
@pytest.mark.parametrize(
    ("suffix", "compression_type"),
    [(".tfrecord", ""), (".tfrecord.gz", "GZIP"), (".tfrecord.zlib", "ZLIB")],
)
def test_tensorflow_agrees(tmp_path, suffix, compression_type):
    tf = pytest.importorskip("tensorflow")
    records = records_of(0, 5)
    path = tmp_path / f"a{suffix}"
    writer = rk.open(path, "w", format="tfrecord")
    writer.write_many(records)
    writer.close()
    by_tf = [
        t.numpy() for t in tf.data.TFRecordDataset(str(path), compression_type=compression_type)
    ]
    assert by_tf == records
    assert list(rk.open(path)) == by_tf
    assert [r for r in rk.open(path, format="tfrecord")] == by_tf  # noqa: C416


# -- a reader inside a user's dataset, sent to spawned DataLoader workers ---------------------------


class ReaderDataset:
    """A map-style dataset as users write them: it holds an open reader."""

    def __init__(self, path: str) -> None:
        self.reader = rk.open(path)

    def __len__(self) -> int:
        return len(self.reader)

    def __getitem__(self, i: int) -> bytes:
        return self.reader[i]


def test_reader_round_trips_through_pickle(dataset):
    _, folder, everything = dataset
    path, records = first_file(dataset)
    assert list(pickle.loads(pickle.dumps(rk.open(path)))) == records
    assert list(pickle.loads(pickle.dumps(rk.open(folder)))) == everything


@pytest.mark.torch
def test_spawn_dataloader_over_a_dataset_holding_a_reader(tmp_path):
    torch = pytest.importorskip("torch")
    records = records_of(0, 6)
    write(tmp_path / "a.ffr", records)
    loader = torch.utils.data.DataLoader(
        ReaderDataset(str(tmp_path / "a.ffr")),
        batch_size=None,
        num_workers=2,
        multiprocessing_context="spawn",
    )
    assert list(loader) == records


# -- the command line ------------------------------------------------------------------------------


def run(capsys, *args: str | Path) -> tuple[int, str]:
    capsys.readouterr()
    code = main([os.fspath(a) for a in args])
    out, err = capsys.readouterr()
    assert code == 0, err
    return code, out


def cli_sources(dataset) -> list[tuple[str, list[str], list[bytes]]]:
    """(source, the files it names, their records) for a file, a directory and a quoted glob."""
    suffix, folder, everything = dataset
    files = [str(folder / f"part-{i}{suffix}") for i in range(len(COUNTS))]
    return [
        (files[0], files[:1], records_of(0, COUNTS[0])),
        (str(folder), files, everything),
        (str(folder / f"part-*{suffix}"), files, everything),
    ]


def test_cli_count_cat_verify_info(capsys, dataset):
    for source, files, records in cli_sources(dataset):
        _, out = run(capsys, "count", "-q", source)
        lines = out.splitlines()
        assert lines[: len(files)] == [
            f"{n:>12}  {f}" for f, n in zip(files, COUNTS[: len(files)], strict=True)
        ]
        _, out = run(capsys, "cat", "--raw", source)
        assert [base64.b64decode(line) for line in out.splitlines()] == records
        _, out = run(capsys, "verify", "-q", source)
        assert out.splitlines()[: len(files)] == [
            f"{f}: OK ({n} record{'s' if n != 1 else ''})"
            for f, n in zip(files, COUNTS[: len(files)], strict=True)
        ]
        _, out = run(capsys, "info", "-q", "--json", source)
        infos = [json.loads(line) for line in out.splitlines()]
        if len(files) > 1:  # a directory or glob of several files: one summary, its shards listed
            (summary,) = infos
            assert summary["records"] == sum(COUNTS[: len(files)])
            assert summary["payload_bytes"] == sum(map(len, records))
            infos = summary["shards"]
        assert [(i["path"], i["records"]) for i in infos] == list(
            zip(files, COUNTS[: len(files)], strict=True)
        )
        assert sum(i["payload_bytes"] for i in infos) == sum(map(len, records))


def test_python_dash_m_recordkit_on_a_quoted_glob(tmp_path):
    records = records_of(0, 3) + records_of(1, 2)
    write(tmp_path / "a-2.tfrecord.gz", records[:3])
    write(tmp_path / "a-10.tfrecord.gz", records[3:])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.run(
        [sys.executable, "-m", "recordkit", "cat", "--raw", str(tmp_path / "a-*.tfrecord.gz")],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert [base64.b64decode(line) for line in proc.stdout.splitlines()] == records  # a-2, a-10
