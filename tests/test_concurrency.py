"""Readers shared by threads, inherited by forked workers, and opened by the thousand."""

from __future__ import annotations

import contextlib
import io
import os
import random
import signal
import threading
import time

import pytest
from conftest import SEED

import recordkit as rk

SUFFIXES = [".tfrecord", ".ofrecord", ".ffr"]
FORMATS = {".tfrecord": "tfrecord", ".ofrecord": "ofrecord", ".ffr": "ffrecord"}
RECORDS = [b"%05d:" % i + bytes([i % 256]) * (i % 97) for i in range(3000)]


def _write(path):
    with rk.open(path, "w") as writer:
        writer.write_many(RECORDS)
    return path


def _hammer(reader, threads=8, rounds=300):
    """Random access from several threads at once; return the first wrong answer or error."""
    problems = []
    start = threading.Barrier(threads)

    def work(seed):
        rng = random.Random(seed)
        start.wait()
        try:
            for _ in range(rounds):
                if rng.random() < 0.5:
                    i = rng.randrange(len(RECORDS))
                    if reader[i] != RECORDS[i]:
                        problems.append(f"reader[{i}] wrong")
                else:
                    wanted = [rng.randrange(len(RECORDS)) for _ in range(rng.randrange(1, 20))]
                    if reader.read(wanted) != [RECORDS[i] for i in wanted]:
                        problems.append(f"read({wanted}) wrong")
        except Exception as exc:  # noqa: BLE001 - any error in a thread fails the test
            problems.append(repr(exc))

    workers = [threading.Thread(target=work, args=(SEED + t,)) for t in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=120)
    assert not any(worker.is_alive() for worker in workers), "a reader thread hung"
    return problems[:5]


@pytest.mark.parametrize("suffix", SUFFIXES)
@pytest.mark.parametrize("source", ["path", "file object", "bytesio"])
def test_one_reader_many_threads(tmp_path, suffix, source):
    path = _write(tmp_path / f"data{suffix}")
    with contextlib.ExitStack() as stack:
        if source == "path":
            reader = rk.open(path)
        elif source == "file object":
            reader = rk.open(stack.enter_context(open(path, "rb")), format=FORMATS[suffix])
        else:
            reader = rk.open(io.BytesIO(path.read_bytes()), format=FORMATS[suffix])
        with reader:
            assert _hammer(reader) == []


@pytest.mark.parametrize("suffix", SUFFIXES)
def test_iteration_and_random_access_in_parallel(tmp_path, suffix):
    path = _write(tmp_path / f"data{suffix}")
    with open(path, "rb") as file, rk.open(file, format=FORMATS[suffix]) as reader:
        iterated = []
        thread = threading.Thread(target=lambda: iterated.extend(reader))
        thread.start()
        problems = _hammer(reader, threads=3, rounds=100)
        thread.join(timeout=120)
        assert problems == []
        assert iterated == RECORDS


def _fd_count():
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc/self/fd")
@pytest.mark.parametrize("suffix", SUFFIXES)
def test_thousands_of_open_readers_hold_one_descriptor_each(tmp_path, suffix):
    paths = [_write(tmp_path / f"a{suffix}"), _write(tmp_path / f"b{suffix}")]
    before = _fd_count()
    readers = [rk.open(paths[i % 2]) for i in range(2000)]
    try:
        assert _fd_count() - before <= len(readers)
        rng = random.Random(SEED)
        for reader in rng.sample(readers, 50):
            i = rng.randrange(len(RECORDS))
            assert reader[i] == RECORDS[i]
    finally:
        for reader in readers:
            reader.close()
    assert _fd_count() <= before


class _RecordDataset:
    """A map-style dataset over a reader opened once, in the parent process."""

    def __init__(self, reader):
        self.reader = reader

    def __len__(self):
        return len(self.reader)

    def __getitem__(self, i):
        return self.reader[i]


@pytest.mark.torch
@pytest.mark.parametrize("suffix", SUFFIXES)
def test_reader_opened_in_the_parent_survives_fork(tmp_path, suffix):
    torch = pytest.importorskip("torch")
    import torch.multiprocessing as mp
    from torch.utils.data import DataLoader

    if "fork" not in mp.get_all_start_methods():
        pytest.skip("fork is not available")
    path = _write(tmp_path / f"data{suffix}")
    with rk.open(path) as reader:
        reader[0]  # touch it in the parent first, so workers inherit a used reader
        loader = DataLoader(
            _RecordDataset(reader),
            batch_size=64,
            shuffle=True,
            num_workers=2,
            multiprocessing_context="fork",
            collate_fn=list,
            generator=torch.Generator().manual_seed(SEED),
        )
        seen = [record for batch in loader for record in batch]
        assert sorted(seen) == sorted(RECORDS)
        assert reader[len(RECORDS) - 1] == RECORDS[-1]  # the parent's reader still works


def _wait(pid, timeout):
    """Wait up to ``timeout`` seconds for child ``pid``; kill it if it is still running. Return its status."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.01)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    return "hung"


def _in_child(work):
    """Fork; the child runs ``work()`` and exits 0 if it returned true (1 if false, 2 on an error)."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child, which never returns to pytest
        code = 2
        try:
            code = 0 if work() else 1
        finally:
            os._exit(code)
    return pid


def _read_every_way(reader, order):
    """Every record by iteration, by index and by batches, each compared with what was written."""
    return (
        list(reader) == RECORDS
        and [reader[i] for i in order] == [RECORDS[i] for i in order]
        and reader.read(order) == [RECORDS[i] for i in order]
    )


needs_fork = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")


@needs_fork
@pytest.mark.parametrize("suffix", SUFFIXES)
def test_a_reader_over_a_file_object_is_correct_in_parent_and_child_after_fork(tmp_path, suffix):
    # Parent and child share the file's open description: its position is common to both, and a reader
    # that positions the file with seek before read gets the other process's bytes.
    path = _write(tmp_path / f"data{suffix}")
    order = random.Random(SEED).sample(range(len(RECORDS)), len(RECORDS))
    with open(path, "rb") as file, rk.open(file, format=FORMATS[suffix]) as reader:
        assert reader[0] == RECORDS[0]
        children = [_in_child(lambda: all(_read_every_way(reader, order) for _ in range(3)))]
        children.append(_in_child(lambda: all(_read_every_way(reader, order) for _ in range(3))))
        in_parent = [_read_every_way(reader, order) for _ in range(3)]
        assert [_wait(pid, 120) for pid in children] == [0, 0]
        assert in_parent == [True, True, True]


class _NoDescriptor(io.RawIOBase):
    """A seekable binary file object without a descriptor (``fileno()`` fails), over bytes in memory."""

    def __init__(self, data):
        self._data = io.BytesIO(data)

    def readable(self):
        return True

    def seekable(self):
        return True

    def readinto(self, buffer):
        return self._data.readinto(buffer)

    def seek(self, offset, whence=0):
        return self._data.seek(offset, whence)

    def tell(self):
        return self._data.tell()


@needs_fork
@pytest.mark.parametrize("suffix", SUFFIXES)
def test_fork_while_a_thread_reads_a_file_object_does_not_deadlock_the_child(tmp_path, suffix):
    # Such an object is read with seek + read under a lock; a thread holding it at the fork does not exist
    # in the child, so the child needs a lock of its own.
    data = _write(tmp_path / f"data{suffix}").read_bytes()
    with rk.open(_NoDescriptor(data), format=FORMATS[suffix]) as reader:
        stop = threading.Event()

        def keep_reading():
            rng = random.Random(SEED)
            while not stop.is_set():
                reader.read([rng.randrange(len(RECORDS)) for _ in range(8)])

        thread = threading.Thread(target=keep_reading)
        thread.start()
        try:
            statuses = []
            for _ in range(20):
                time.sleep(0.005)
                pid = _in_child(
                    lambda: reader[7] == RECORDS[7] and reader.read([3]) == [RECORDS[3]]
                )
                statuses.append(_wait(pid, 20))
        finally:
            stop.set()
            thread.join(timeout=60)
        assert statuses == [0] * 20
