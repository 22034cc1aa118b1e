"""Writers under crashes and failing disks: a target file is complete or absent, never partial."""

from __future__ import annotations

import errno
import io
import os
import random
import signal
import subprocess
import sys
import textwrap

import pytest
from conftest import SEED

import recordkit as rk
from recordkit.io import atomic as _atomic

FORMATS = [".tfrecord", ".tfrecord.gz", ".ofrecord", ".ffr"]

CHILD = textwrap.dedent(
    """
    import os, sys
    import recordkit as rk

    path, mode, stop = sys.argv[1], sys.argv[2], int(sys.argv[3])
    real_replace = os.replace

    def replace(src, dst):
        if mode == "before-rename":
            print("closing", flush=True)
            sys.stdin.readline()  # killed while waiting here
        real_replace(src, dst)
        if mode == "after-rename":
            print("renamed", flush=True)
            sys.stdin.readline()

    os.replace = replace
    writer = rk.open(path, "w")
    for i in range(10**9):
        writer.write(b"record %d;" % i * 20)
        if i % 50 == 0:
            writer.flush()
            print(i, flush=True)
        if i == stop and mode != "records":
            writer.close()
            break
    """
)


def _kill_writer(path, mode, stop):
    """Run a writer, SIGKILL it at the chosen point; return what the directory holds afterwards."""
    with subprocess.Popen(
        [sys.executable, "-c", CHILD, os.fspath(path), mode, str(stop)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    ) as process:
        try:
            assert process.stdout is not None
            while True:
                line = process.stdout.readline()
                assert line, "the writer ended before its kill point"
                if line.strip() in (b"closing", b"renamed"):
                    break
                if mode == "records" and int(line) >= stop:
                    break
            process.send_signal(signal.SIGKILL)
            assert process.wait(timeout=60) == -signal.SIGKILL
        finally:
            if process.poll() is None:
                process.kill()
    return sorted(os.listdir(path.parent))


def _expected(count):
    return [b"record %d;" % i * 20 for i in range(count)]


@pytest.mark.parametrize("suffix", FORMATS)
@pytest.mark.parametrize("mode", ["records", "before-rename"])
def test_sigkill_never_leaves_a_partial_target(tmp_path, suffix, mode):
    stop = random.Random(f"{SEED}{suffix}{mode}").randrange(0, 1500)
    target = tmp_path / f"data{suffix}"
    left = _kill_writer(target, mode, stop)
    assert target.name not in left
    # Only the hidden temporary file may remain (nothing can delete it after SIGKILL).
    assert all(name.startswith(f".{target.name}.") and name.endswith(".tmp") for name in left)


@pytest.mark.parametrize("suffix", FORMATS)
def test_sigkill_after_the_rename_leaves_a_complete_file(tmp_path, suffix):
    stop = random.Random(f"{SEED}{suffix}").randrange(0, 1500)
    target = tmp_path / f"data{suffix}"
    assert _kill_writer(target, "after-rename", stop) == [target.name]
    with rk.open(target) as reader:
        assert list(reader) == _expected(stop + 1)


class _FullDisk(io.FileIO):
    """A file that fails with ENOSPC once ``budget`` bytes were written."""

    budget = 0

    def write(self, data):
        if self.tell() + len(data) > self.budget:
            raise OSError(errno.ENOSPC, "No space left on device")
        return super().write(data)


@pytest.mark.parametrize(("suffix", "n"), [(s, None) for s in FORMATS] + [(".ffr", 2000)])
@pytest.mark.parametrize("budget", [0, 3000, 200_000])
def test_disk_full_reports_the_error_and_leaves_nothing(tmp_path, monkeypatch, suffix, n, budget):
    monkeypatch.setattr(_FullDisk, "budget", budget)
    monkeypatch.setattr(
        _atomic, "open", lambda path, mode: io.BufferedWriter(_FullDisk(path, "x")), raising=False
    )
    # A kernel-side copy into the file (an FFRecord written without n) fills the disk too.
    copy = getattr(os, "copy_file_range", None)

    def copy_within_budget(source, target, count, source_offset, target_offset):
        if target_offset + count > budget:
            raise OSError(errno.ENOSPC, "No space left on device")
        return copy(source, target, count, source_offset, target_offset)

    if copy is not None:
        monkeypatch.setattr(os, "copy_file_range", copy_within_budget)
    # 400 KB that does not compress: part is drained by write(), the rest by close().
    rng = random.Random(SEED)
    records = [rng.randbytes(200) for _ in range(2000)]
    options = {"n": n} if n else {}

    def write_all():
        with rk.open(tmp_path / f"a{suffix}", "w", **options) as writer:
            for record in records:
                writer.write(record)

    with pytest.raises(OSError) as caught:
        write_all()
    assert caught.value.errno == errno.ENOSPC
    assert os.listdir(tmp_path) == []


class _SharedDisk(io.FileIO):
    """A file on a disk of ``free`` bytes shared by every such file: ENOSPC once it is used up."""

    free = 0

    def write(self, data):
        if len(data) > _SharedDisk.free:
            raise OSError(errno.ENOSPC, "No space left on device")
        _SharedDisk.free -= len(data)
        return super().write(data)


def _anonymous_spill(folder):
    """An FFRecord spill file on the shared disk, without a name (as the real one)."""
    path = os.path.join(folder, "spill")
    spill = io.BufferedRandom(_SharedDisk(path, "w+"))
    os.remove(path)
    return spill


@pytest.mark.parametrize("free", [0, 3000, 150_000, 1_048_700, 1_060_000, 1_200_000])
@pytest.mark.parametrize("how", ["with", "close"])
def test_disk_full_under_the_ffrecord_spill_file_leaves_nothing(tmp_path, monkeypatch, free, how):
    # An FFRecord written without n keeps its samples in a spill file on the output's disk until close:
    # the disk fills while writing the spill, while copying it into the output, or while closing it.
    monkeypatch.setattr(_SharedDisk, "free", free)
    monkeypatch.setattr(
        _atomic, "open", lambda path, mode: io.BufferedWriter(_SharedDisk(path, "x")), raising=False
    )
    # No kernel-side copy: the copy goes through write() and so fills the disk too.
    monkeypatch.delattr(os, "copy_file_range", raising=False)
    spills = tmp_path / "spills"
    spills.mkdir()
    out = tmp_path / "out"
    out.mkdir()
    monkeypatch.setattr(
        "recordkit.formats.ffrecord._spill_beside", lambda fileobj: _anonymous_spill(spills)
    )
    # Samples that fill one 1 MiB block, then a few KiB that the spill file buffers until close.
    rng = random.Random(SEED)
    records = [rng.randbytes(200) for _ in range(5280)]
    writer = rk.open(
        out / "a.ffr", "w"
    )  # kept: the test looks while the failed writer still exists

    def write_all():
        if how == "with":
            with writer:
                writer.write_many(records)
        else:
            try:
                writer.write_many(records)
            finally:
                writer.close()

    with pytest.raises(OSError) as caught:
        write_all()
    assert caught.value.errno == errno.ENOSPC
    assert os.listdir(out) == []
    assert os.listdir(spills) == []


def test_failed_close_outside_a_with_block(tmp_path, monkeypatch):
    monkeypatch.setattr(
        _atomic, "open", lambda path, mode: io.BufferedWriter(_FullDisk(path, "x")), raising=False
    )
    writer = rk.open(tmp_path / "a.ffr", "w")
    writer.write(b"buffered until close")
    with pytest.raises(OSError, match="No space"):
        writer.close()
    assert writer.closed
    writer.close()  # idempotent, even after a failure
    assert os.listdir(tmp_path) == []


FSIZE_CHILD = textwrap.dedent(
    """
    import os, resource, signal, sys
    import recordkit as rk

    folder, suffix = sys.argv[1], sys.argv[2]
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (65536, resource.RLIM_INFINITY))
    try:
        with rk.open(os.path.join(folder, "big" + suffix), "w") as writer:
            for i in range(1000):
                writer.write(os.urandom(1000))
    except OSError as exc:
        print(exc.errno, sorted(os.listdir(folder)))
    """
)


@pytest.mark.parametrize("suffix", [".tfrecord", ".ffr"])
def test_a_real_file_size_limit_fails_cleanly(tmp_path, suffix):
    result = subprocess.run(
        [sys.executable, "-c", FSIZE_CHILD, os.fspath(tmp_path), suffix],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert result.stdout.split(maxsplit=1) == [str(errno.EFBIG), "[]\n"]


@pytest.mark.parametrize("suffix", FORMATS)
def test_fsync_writes_a_readable_file(tmp_path, monkeypatch, suffix):
    synced = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: synced.append(fd) or real_fsync(fd))
    with rk.open(tmp_path / f"a{suffix}", "w", fsync=True) as writer:
        writer.write_many(_expected(10))
    assert len(synced) == 2
    with rk.open(tmp_path / f"a{suffix}") as reader:
        assert list(reader) == _expected(10)


@pytest.mark.parametrize("suffix", FORMATS)
@pytest.mark.parametrize("ending", ["close", "abort"])
def test_closed_writers_refuse_writes_and_close_again_quietly(tmp_path, suffix, ending):
    writer = rk.open(tmp_path / f"a{suffix}", "w")
    writer.write(b"one")
    getattr(writer, ending)()
    writer.close()
    writer.abort() if ending == "abort" else writer.close()
    for call in (lambda: writer.write(b"x"), lambda: writer.write_many([b"x"]), writer.flush):
        with pytest.raises(ValueError, match="closed"):
            call()
    assert os.listdir(tmp_path) == ([f"a{suffix}"] if ending == "close" else [])
