"""Untrusted datasets: no escape from the dataset directory, no path taken from file content, no unpickling."""

from __future__ import annotations

import ast
import hashlib
import os
import pickle
import sys
from pathlib import Path

import pytest
from _cli import run_cli
from conftest import GOLDEN_DIR, load_manifest

import recordkit as rk
from recordkit.compat.ffrecord import FileReader
from recordkit.errors import StaleIndexWarning, UnsafePathError

SOURCE_DIR = Path(rk.__file__).parent


class _Audit:
    """Collects audit events while enabled (an audit hook cannot be removed, so it is installed once)."""

    def __init__(self) -> None:
        self.events: list[tuple[str, tuple[object, ...]]] = []
        self.enabled = False
        sys.addaudithook(self)

    def __call__(self, event: str, args: tuple[object, ...]) -> None:
        if self.enabled and event in ("open", "pickle.find_class", "exec", "marshal.loads"):
            self.events.append((event, args))

    def record(self, call):
        self.events.clear()
        self.enabled = True
        try:
            return call()
        finally:
            self.enabled = False


AUDIT = _Audit()


def _write(path, records):
    with rk.open(path, "w") as writer:
        writer.write_many(records)
    return path


@pytest.fixture
def dataset(tmp_path):
    folder = tmp_path / "dataset"
    folder.mkdir()
    _write(folder / "part-0.ffr", [b"a", b"b"])
    outside = _write(tmp_path / "secret.ffr", [b"not part of the dataset"])
    return folder, outside


@pytest.mark.parametrize("opener", [rk.open, FileReader], ids=["open", "FileReader"])
def test_a_link_out_of_the_dataset_directory_is_refused(dataset, opener):
    folder, outside = dataset
    (folder / "part-1.ffr").symlink_to(outside)
    with pytest.raises(UnsafePathError, match="outside the dataset directory"):
        opener(folder)


def test_the_command_line_refuses_a_link_out_of_a_directory(dataset, capsys):
    folder, outside = dataset
    (folder / "part-1.ffr").symlink_to(outside)
    result = run_cli(capsys, "verify", folder)
    assert result.code == 2
    assert "outside the dataset directory" in result.err
    assert "Traceback" not in result.err


@pytest.mark.parametrize("target", ["../secret.ffr", "/"])
def test_relative_and_absolute_links_out_are_both_refused(dataset, target):
    folder, _ = dataset
    (folder / "part-1.ffr").symlink_to(target)
    with pytest.raises(UnsafePathError):
        rk.open(folder)


def test_links_inside_the_directory_and_explicit_lists_are_followed(dataset):
    folder, outside = dataset
    (folder / "shards").mkdir()
    _write(folder / "shards" / "real.ffr", [b"c"])
    (folder / "part-1.ffr").symlink_to(Path("shards") / "real.ffr")
    with rk.open(folder) as reader:
        assert list(reader) == [b"a", b"b", b"c"]
    (folder / "part-2.ffr").symlink_to(outside)
    with rk.open([folder / "part-0.ffr", folder / "part-2.ffr"]) as reader:  # the caller's choice
        assert list(reader) == [b"a", b"b", b"not part of the dataset"]


def test_hidden_files_in_a_dataset_directory_are_ignored(dataset):
    folder, _ = dataset
    _write(folder / "part-1.ffr", [b"c"])
    (folder / ".part-1.ffr").write_bytes((folder / "part-1.ffr").read_bytes())
    with rk.open(folder) as reader:
        assert len(reader) == 3


@pytest.mark.parametrize("line", ["../../etc/passwd 10\n", "/etc/passwd\n", "0 21 /etc/passwd\n"])
def test_index_content_is_never_a_path(tmp_path, line):
    path = _write(tmp_path / "a.tfrecord", [b"x" * 5])
    (tmp_path / "a.tfrecord.idx").write_text(line)
    reader = rk.open(path)
    with reader, pytest.warns(StaleIndexWarning):
        assert AUDIT.record(lambda: len(reader)) == 1  # the index is ignored, the file scanned
    opened = {os.path.basename(str(args[0])) for event, args in AUDIT.events if event == "open"}
    assert opened == {"a.tfrecord.idx"}


def test_a_dataset_directory_opens_only_its_own_files(dataset):
    folder, _ = dataset
    _write(folder / "part-1.ffr", [b"c"])

    def read():
        with rk.open(folder) as reader:
            return list(reader)

    assert AUDIT.record(read) == [b"a", b"b", b"c"]
    opened = {str(args[0]) for event, args in AUDIT.events if event == "open"}
    files = {
        p for p in opened if not p.endswith((".py", ".pyc", ".so")) and "site-packages" not in p
    }
    assert {Path(p).parent.resolve() for p in files if Path(p).is_file()} == {folder.resolve()}


class _Exploit:
    """Unpickling this runs code; reading it as a record must not."""

    def __reduce__(self):
        return (os.system, ("echo pwned > /dev/null",))


def test_pickled_records_are_returned_as_bytes_never_unpickled(tmp_path):
    payload = pickle.dumps(_Exploit())
    for suffix in (".tfrecord", ".ofrecord", ".ffr"):
        path = _write(tmp_path / f"p{suffix}", [payload])

        def read(path=path):
            with rk.open(path) as reader:
                return list(reader), reader[0]

        assert AUDIT.record(read) == ([payload], payload)
        assert not [
            e for e in AUDIT.events if e[0] in ("pickle.find_class", "exec", "marshal.loads")
        ]
    reader = FileReader(tmp_path / "p.ffr")
    with reader:
        assert AUDIT.record(lambda: bytes(reader.read_one(0))) == payload
    assert not [e for e in AUDIT.events if e[0] == "pickle.find_class"]


@pytest.mark.parametrize("name", ["pickled.ffr", "packed.ffr"])
def test_golden_pickle_and_pack_files_read_as_plain_bytes(name):
    entry = load_manifest("ffrecord")["files"][name]
    path = GOLDEN_DIR / "ffrecord" / name

    def read():
        with rk.open(path) as reader:
            return list(reader)

    records = AUDIT.record(read)
    assert [hashlib.sha256(r).hexdigest() for r in records] == entry["sha256"]
    assert all(type(r) is bytes for r in records)
    assert not [e for e in AUDIT.events if e[0] == "pickle.find_class"]


UNSAFE_MODULES = {"pickle", "cPickle", "dill", "cloudpickle", "marshal", "shelve", "joblib"}


# The worker loader passes items between its own processes with pickle, as multiprocessing and torch's
# DataLoader do: through its pipes and a private (0700) directory it makes, never from a file it reads.
WORKER_TRANSPORT = {("data", "_shm.py"), ("data", "_workers.py")}


def test_the_source_never_imports_an_unpickler_or_evaluates_code():
    offenders = []
    for path in SOURCE_DIR.rglob("*.py"):
        if "_proto" in path.parts:
            continue  # generated by protoc
        transport = path.parts[-2:] in WORKER_TRANSPORT
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name.split(".")[0] for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module.split(".")[0]]
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in ("eval", "exec", "__import__")
            ):
                offenders.append(f"{path.name}:{node.lineno} {node.func.id}()")
            offenders += [
                f"{path.name}:{node.lineno} import {n}"
                for n in names
                if n in UNSAFE_MODULES and not (transport and n == "pickle")
            ]
    assert offenders == []
