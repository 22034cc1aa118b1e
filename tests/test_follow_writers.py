"""``recordkit.io.Follower`` on files that real writers append to in another process.

A child process runs the writer (tensorboardX's and PyTorch's ``SummaryWriter``, TensorFlow's
``tf.summary`` and ``tf.io.TFRecordWriter``) and flushes after each step, then waits for the test to
read. The follower must see each flushed step while the writer is still running, and in the end every
record once, in order, equal to what tensorboard's own event loader (event files) or TensorFlow's
``tf.data.TFRecordDataset`` reads from the finished file. Each test skips when its writer is not installed.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import time
from pathlib import Path

import pytest

from recordkit.io import Follower

# Each test starts TensorFlow or PyTorch in a child process (about 10 s each): run with -m slow, as CI does.
pytestmark = pytest.mark.slow

STEPS = 4

CHILD = r"""
import glob, os, sys

kind, logdir, steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
if kind in ("tensorboardX", "torch"):
    if kind == "torch":
        from torch.utils.tensorboard import SummaryWriter
    else:
        from tensorboardX import SummaryWriter
    # tensorboardX's flush() does not wait for the events its thread has queued, which that thread
    # writes at its next periodic flush.
    writer = SummaryWriter(logdir, flush_secs=1 if kind == "tensorboardX" else 3600)

    def step(i):
        writer.add_scalar("loss", 1.0 / (i + 1), i)
        writer.add_text("note", "x" * (i * 40), i)

elif kind == "tf.summary":
    import tensorflow as tf

    writer = tf.summary.create_file_writer(logdir, flush_millis=3600 * 1000)

    def step(i):
        with writer.as_default():
            tf.summary.scalar("loss", 1.0 / (i + 1), step=i)
            tf.summary.text("note", "x" * (i * 40), step=i)

else:
    import tensorflow as tf

    writer = tf.io.TFRecordWriter(os.path.join(logdir, "data.tfrecord"))

    def step(i):
        for j in range(i + 1):
            writer.write(bytes([i]) * (j * 300))

writer.flush()
(path,) = glob.glob(os.path.join(logdir, "events.out.tfevents.*" if kind != "tf.io" else "*.tfrecord"))
print("ready", path, flush=True)
sys.stdin.readline()
for i in range(steps):
    step(i)
    writer.flush()
    print("flushed", i, flush=True)
    sys.stdin.readline()
writer.close()
print("done", flush=True)
"""

WRITERS = {
    "tensorboardX": "tensorboardX",
    "torch": "torch.utils.tensorboard",
    "tf.summary": "tensorflow",
    "tf.io": "tensorflow",
}


def poll_until_more(follower: Follower, timeout: float = 30) -> list[bytes]:
    """Poll until the follower returns records (a writer's flush may reach the file a little later)."""
    deadline = time.monotonic() + timeout
    while True:
        records = follower.poll()
        if records or time.monotonic() > deadline:
            return records
        time.sleep(0.01)


def oracle(kind: str, path: str) -> list[bytes]:
    """The records of the finished file, read by the writer's own ecosystem."""
    if kind == "tf.io":
        import tensorflow as tf

        return [record.numpy() for record in tf.data.TFRecordDataset(path)]
    loader = pytest.importorskip("tensorboard.backend.event_processing.event_file_loader")
    return list(loader.RawEventFileLoader(path).Load())


@pytest.mark.parametrize("kind", list(WRITERS))
def test_a_file_appended_by_another_process_is_followed(kind: str, tmp_path: Path) -> None:
    pytest.importorskip(WRITERS[kind].split(".")[0])
    if importlib.util.find_spec(WRITERS[kind]) is None:
        pytest.skip(f"{WRITERS[kind]} is not installed")
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, kind, str(tmp_path), str(STEPS)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdin is not None
    assert child.stdout is not None
    try:
        word, path = child.stdout.readline().split()
        assert word == "ready"
        got: list[bytes] = []
        with Follower(path) as follower:
            got += follower.poll()
            child.stdin.write("\n")  # each step waits until the records before it were read
            child.stdin.flush()
            for step in range(STEPS):
                assert child.stdout.readline().split() == ["flushed", str(step)]
                new = poll_until_more(follower)
                assert new, f"step {step} was flushed, and the follower saw nothing of it"
                got += new
                child.stdin.write("\n")
                child.stdin.flush()
            assert child.stdout.readline().split() == ["done"]
            assert child.wait(60) == 0
            got += follower.poll()
    finally:
        child.kill()
        child.wait()
        child.stdin.close()
        child.stdout.close()
    assert got == oracle(kind, path)
    assert len(got) >= STEPS
