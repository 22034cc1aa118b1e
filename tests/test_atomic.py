"""Atomic writes: the target appears only on a clean close, whatever else happens."""

from __future__ import annotations

import gc
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

import recordkit as rk
from recordkit.io.atomic import AtomicFile


def _leftovers(directory):
    return sorted(name for name in os.listdir(directory) if name.endswith(".tmp"))


@pytest.mark.parametrize("name", ["a.tfrecord", "a.tfrecord.gz", "a.ofrecord", "a.ffr"])
def test_exception_in_with_block_leaves_target_untouched(tmp_path, name):
    target = tmp_path / name
    target.write_bytes(b"previous content")

    def fail_while_writing() -> None:
        with rk.open(target, "w") as writer:
            writer.write(b"\x0a\x01x")
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        fail_while_writing()
    assert target.read_bytes() == b"previous content"
    assert _leftovers(tmp_path) == []


def test_abort(tmp_path):
    writer = rk.open(tmp_path / "a.tfrecord", "w")
    writer.write(b"x")
    writer.abort()
    writer.abort()
    writer.close()  # closing an aborted writer does nothing
    assert os.listdir(tmp_path) == []
    with pytest.raises(ValueError, match="closed"):
        writer.write(b"y")


def test_garbage_collected_writer_leaves_nothing(tmp_path):
    writer = rk.open(tmp_path / "a.tfrecord", "w")
    writer.write(b"x" * 10_000_000)
    assert len(_leftovers(tmp_path)) == 1
    with pytest.warns(ResourceWarning, match=r"a\.tfrecord was dropped without close\(\): nothing"):
        del writer  # no reference cycle: the finalizer runs here
    gc.collect()
    assert os.listdir(tmp_path) == []


def test_temporary_file_is_hidden_beside_the_target(tmp_path):
    with rk.open(tmp_path / "a.tfrecord", "w") as writer:
        writer.write(b"x")
        writer.flush()
        (temporary,) = _leftovers(tmp_path)
        assert temporary.startswith(".a.tfrecord.")
        assert not (tmp_path / "a.tfrecord").exists()
    assert os.listdir(tmp_path) == ["a.tfrecord"]


def test_fsync(tmp_path, monkeypatch):
    synced = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: synced.append(fd) or real_fsync(fd))
    with rk.open(tmp_path / "a.tfrecord", "w", fsync=True) as writer:
        writer.write(b"x")
    assert len(synced) == 2  # the file, then the directory
    with rk.open(tmp_path / "b.tfrecord", "w") as writer:
        writer.write(b"x")
    assert len(synced) == 2


def test_failed_close_propagates_and_leaves_no_target(tmp_path, monkeypatch):
    def failing_replace(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", failing_replace)
    writer = rk.open(tmp_path / "a.tfrecord", "w")
    writer.write(b"x")
    with pytest.raises(OSError, match="No space"):
        writer.close()
    assert os.listdir(tmp_path) == []


def test_failed_flush_on_close_leaves_no_target(tmp_path):
    target = AtomicFile(tmp_path / "a.bin")
    target.file.write(b"data")
    target.file.close()  # the next flush fails
    with pytest.raises(ValueError, match="closed file"):
        target.commit()
    assert os.listdir(tmp_path) == []
    with pytest.raises(ValueError, match="already"):
        target.commit()


def test_sigkill_mid_write_never_creates_the_target(tmp_path):
    target = tmp_path / "killed.tfrecord"
    script = textwrap.dedent(
        f"""
        import sys
        import recordkit as rk
        writer = rk.open({os.fspath(target)!r}, "w")
        for i in range(10**9):
            writer.write(b"x" * 1000)
            if i == 5000:
                writer.flush()
                print("writing", flush=True)
        """
    )
    with subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE) as process:
        try:
            assert process.stdout is not None
            assert process.stdout.readline() == b"writing\n"
            time.sleep(0.2)
            assert _leftovers(tmp_path)  # mid-write: only the temporary file exists
            process.send_signal(signal.SIGKILL)
            assert process.wait(timeout=30) == -signal.SIGKILL
        finally:
            if process.poll() is None:
                process.kill()
    assert not target.exists()


@pytest.mark.parametrize("name", ["a.tfrecord", "a.ffr"])
def test_a_missing_directory_is_reported_with_the_target_name(tmp_path, name):
    target = tmp_path / "missing" / name
    with pytest.raises(FileNotFoundError) as caught:
        rk.open(target, "w")
    assert caught.value.filename == os.fspath(target)
    assert ".tmp" not in str(caught.value)
    assert os.fspath(target) in str(caught.value)


@pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() == 0,
    reason="root may write into a read-only directory",
)
def test_a_read_only_directory_is_reported_with_the_target_name(tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o500)
    try:
        with pytest.raises(PermissionError) as caught:
            rk.open(folder / "a.tfrecord", "w")
    finally:
        folder.chmod(0o700)
    assert caught.value.filename == os.fspath(folder / "a.tfrecord")
    assert ".tmp" not in str(caught.value)


def test_a_target_that_is_a_directory_is_reported_with_its_name(tmp_path):
    target = tmp_path / "a.tfrecord"
    target.mkdir()
    (target / "keep").write_bytes(b"")
    writer = rk.open(target, "w")
    writer.write(b"x")
    with pytest.raises(OSError) as caught:
        writer.close()
    assert caught.value.filename == os.fspath(target)
    assert caught.value.filename2 is None
    assert ".tmp" not in str(caught.value)
    assert _leftovers(tmp_path) == []
